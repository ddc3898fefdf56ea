"""`spinscope record --pid N --pid-ns NS`: N as a container sees it. The container here is `unshare --pid
--fork --mount-proc` running the sockio fixture, which is PID 1 in its namespace; record finds its host PID
through NSpid, says so, and the capture holds the fixture's exact counts."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

from collector_harness import FIXTURES, LineReader

WRITE_KEYS = ["write_calls", "write_bytes", "write_eagain", "write_partial"]
READ_KEYS = ["read_calls", "read_bytes", "read_eagain", "read_eof"]


@pytest.fixture
def container():
    """(unshare's PID, the fixture's host PID, its stdin, its stdout lines) for sockio as PID 1 of a new
    PID namespace; killed at the end if still running."""
    unshare = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", str(FIXTURES / "sockio")],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        out = LineReader(unshare.stdout)
        assert out.wait_for(lambda line: line.startswith("ready")) == "ready 1"  # its own view: PID 1
        children = Path(f"/proc/{unshare.pid}/task/{unshare.pid}/children").read_text().split()
        assert len(children) == 1
        yield unshare, int(children[0]), out
    finally:
        if unshare.poll() is None:
            unshare.kill()
        unshare.wait()


def record(*args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "spinscope", "record", *args], stdin=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, **popen)


def test_record_by_pid_inside_the_container(container, tmp_path):
    unshare, host_pid, out = container
    assert host_pid != 1
    namespace = f"pid:[{os.stat(f'/proc/{host_pid}/ns/pid').st_ino}]"
    capture = tmp_path / "sockio.json"
    ready_r, ready_w = os.pipe()
    proc = record("--pid", "1", "--pid-ns", f"/proc/{host_pid}/ns/pid", "-o", str(capture), "--ready-fd",
                  str(ready_w), pass_fds=(ready_w,))
    try:
        os.close(ready_w)
        with os.fdopen(ready_r) as ready:
            assert select.select([ready], [], [], 30)[0], "record was not ready in 30 s"
            line = ready.readline()
        assert line and json.loads(line)["pid"] == host_pid, proc.stderr.read() if not line else line
        unshare.stdin.write("go\n")
        unshare.stdin.flush()
        out.wait_for(lambda line: line == "done", timeout=60)
        assert unshare.wait(timeout=30) == 0
        assert proc.wait(timeout=30) == 0
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert stderr.splitlines()[0] == f"spinscope record: PID 1 in namespace {namespace} is PID {host_pid} here"
    doc = json.loads(capture.read_text())
    assert doc["target"]["pid"] == host_pid and doc["end_reason"] == "target-exited"
    truth = {row["thread"]: row for row in map(json.loads, (l for l in out.seen if l.startswith("{")))}
    threads = {t["comm"]: t for t in doc["threads"]}
    # The fixture's tids are its namespace's; the capture's are this host's: matched by thread name.
    assert {k: threads["sockwriter"][k] for k in WRITE_KEYS} == {k: truth["sockwriter"][k] for k in WRITE_KEYS}
    assert {k: threads["sockreader"][k] for k in READ_KEYS} == {k: truth["sockreader"][k] for k in READ_KEYS}
    assert threads["sockwriter"]["tid"] != truth["sockwriter"]["tid"]


@pytest.mark.parametrize("ns", ["{host}", "/proc/{host}/ns/pid", "/proc/{unshare}/ns/pid_for_children"])
def test_a_pid_the_container_does_not_have(container, tmp_path, ns):
    """Named three ways (the shorthand PID, its ns/pid, unshare's pid_for_children): the same namespace,
    holding exactly one process, PID 1; PID 2 there is one line, exit 1, and nothing recorded."""
    unshare, host_pid, _ = container
    ns = ns.format(host=host_pid, unshare=unshare.pid)
    namespace = f"pid:[{os.stat(f'/proc/{host_pid}/ns/pid').st_ino}]"
    proc = record("--pid", "2", "--pid-ns", ns, "-o", str(tmp_path / "none.json"))
    assert proc.wait(timeout=30) == 1
    assert proc.stderr.read() == (f"spinscope record: error: no process has PID 2 in the PID namespace of "
                                  f"--pid-ns {ns} ({namespace}), which holds 1 process\n")
    assert not (tmp_path / "none.json").exists()
