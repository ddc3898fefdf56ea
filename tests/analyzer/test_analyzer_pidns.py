"""--pid-ns as any user: the namespace file is checked (exists, is a namespace, is a PID namespace) before
anything runs, with one line each; in this process's own namespace the translation is the identity. The
translation across a real container is tested as root in tests/collector/test_pidns.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from spinscope.errors import SpinscopeError
from spinscope.tracing import pidns


def own_namespace() -> str:
    return f"pid:[{os.stat('/proc/self/ns/pid').st_ino}]"


def test_own_namespace_is_the_identity():
    for value in ("/proc/self/ns/pid", str(os.getpid()), f"/proc/{os.getpid()}/ns/pid_for_children"):
        translated = pidns.translate(os.getpid(), value)
        assert translated == pidns.Translation(os.getpid(), own_namespace(), os.getpid())
    assert translated.describe() == f"PID {os.getpid()} in namespace {own_namespace()} is PID {os.getpid()} here"


def test_nspid_is_read_from_status():
    assert pidns.nspid("Name:\tx\nNSpid:\t4242\t17\t1\nNStgid:\t4242\t17\t1\n") == [4242, 17, 1]
    assert pidns.nspid("Name:\tx\n") == []


def test_no_such_pid_in_the_namespace():
    free = max(int(p) for p in os.listdir("/proc") if p.isdigit()) + 1_000_000  # above any pid_max in use
    with pytest.raises(SpinscopeError) as raised:
        pidns.translate(free, "/proc/self/ns/pid")
    assert raised.value.exit_code == 1
    assert re.fullmatch(rf"no process has PID {free} in the PID namespace of --pid-ns /proc/self/ns/pid "
                        rf"\({re.escape(own_namespace())}\), which holds \d+ process(es)?", str(raised.value))


def test_a_process_named_in_bytes_that_are_not_utf8_is_read_past():
    """Scanning /proc reads every process's status, whose Name line is whatever the process set: a name that
    is no UTF-8 (the hostile fixture's, run by another test at the same time) must not end the scan."""
    named = subprocess.Popen([sys.executable, "-c",
                              "import ctypes, sys; ctypes.CDLL(None).prctl(15, b'bad\\xff\\x1b[1m', 0, 0, 0); "
                              "print(flush=True); sys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        named.stdout.readline()  # renamed
        assert b"\xff" in Path(f"/proc/{named.pid}/status").read_bytes().split(b"\n")[0]
        test_no_such_pid_in_the_namespace()
        assert pidns.translate(named.pid, "/proc/self/ns/pid").host_pid == named.pid
    finally:
        named.kill()
        named.wait()


@pytest.mark.parametrize("value, message", [
    ("/proc/self/ns/net", "--pid-ns /proc/self/ns/net: a network namespace, not a PID namespace (give /proc/PID/ns/pid)"),
    ("/proc/self/ns/uts", "--pid-ns /proc/self/ns/uts: a UTS namespace, not a PID namespace (give /proc/PID/ns/pid)"),
    ("/proc/self/status", "--pid-ns /proc/self/status: not a namespace file (give /proc/PID/ns/pid of a process "
                          "in the container, or that PID)"),
    ("/nonexistent/ns/pid", "--pid-ns /nonexistent/ns/pid: no such file or directory"),
    ("2147483647", "--pid-ns 2147483647: no such file or directory (/proc/2147483647/ns/pid)"),
])
def test_bad_namespace_files(value, message):
    with pytest.raises(SpinscopeError) as raised:
        pidns.translate(1, value)
    assert (str(raised.value), raised.value.exit_code) == (message, 2)


def test_record_refuses_before_the_collector_runs(tmp_path, cli):
    ran = tmp_path / "ran"
    script = tmp_path / "spinscope-collector"
    script.write_text(f"#!/bin/sh\necho \"$@\" > {ran}\n")
    script.chmod(0o755)
    env = {**os.environ, "SPINSCOPE_COLLECTOR": str(script)}
    for value, message in (("", "--pid-ns is empty: name a PID namespace file (/proc/PID/ns/pid) or a PID in it"),
                           ("/proc/self/ns/net", "--pid-ns /proc/self/ns/net: a network namespace, not a PID "
                                                 "namespace (give /proc/PID/ns/pid)")):
        result = cli("record", "--pid", "1", "--pid-ns", value, "-o", tmp_path / "c.json", env=env)
        assert (result.returncode, result.stderr) == (2, f"spinscope record: error: {message}\n")
    assert not ran.exists()
    # In its own namespace the PID passes through, said on stderr; the collector gets the host PID.
    pid = os.getpid()
    result = cli("record", "--pid", str(pid), "--pid-ns", str(pid), "-o", tmp_path / "c.json", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[0] == f"spinscope record: PID {pid} in namespace {own_namespace()} is PID {pid} here"
    assert ran.read_text().split()[:2] == ["--pid", str(pid)]
