"""Every way the collector can fail says so in one line and exits non-zero; every way a capture can
end after the probes are live still writes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collector_harness import COLLECTOR, ROOT, LineReader, start_collector


def run_collector(*args: str, env: dict | None = None, preexec=None, timeout: float = 20):
    proc = subprocess.run([str(COLLECTOR), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, preexec_fn=preexec)
    return proc.returncode, proc.stderr.strip().splitlines()


def one_error_line(lines: list[str]) -> str:
    errors = [line for line in lines if ": error:" in line]
    assert len(errors) == 1, lines
    assert not any("Traceback" in line for line in lines)
    return errors[0]


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def drop_to_nobody():
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)


def test_not_root(sleeper, tmp_path):
    os.chmod(tmp_path, 0o777)
    rc, lines = run_collector("--pid", str(sleeper.pid), "-o", str(tmp_path / "x.json"),
                              preexec=drop_to_nobody)
    assert rc == 1
    assert "needs root" in one_error_line(lines)


def test_no_such_pid(tmp_path):
    rc, lines = run_collector("--pid", str(dead_pid()), "-o", str(tmp_path / "x.json"))
    assert rc == 1
    line = one_error_line(lines)
    assert "no process with PID" in line or "needs root" in line  # unprivileged runs stop earlier


def test_kernel_without_btf(sleeper, tmp_path):
    rc, lines = run_collector("--pid", str(sleeper.pid), "-o", str(tmp_path / "x.json"),
                              env={"SPINSCOPE_SYSFS_BTF": str(tmp_path / "no-vmlinux")})
    assert rc == 1
    assert "no BTF" in one_error_line(lines)
    assert not list(tmp_path.iterdir())


def fake_tracefs(tmp_path: Path, without: str) -> Path:
    """A copy of tracefs' event directory names, without one tracepoint."""
    real = Path("/sys/kernel/tracing/events")
    fake = tmp_path / "tracefs"
    for category in ("raw_syscalls", "sched"):
        for event in (real / category).iterdir():
            if event.name != without:
                (fake / "events" / category / event.name).mkdir(parents=True)
    return fake


@pytest.mark.parametrize("category,tracepoint", [("raw_syscalls", "sys_enter"),
                                                 ("sched", "sched_waking")])
def test_missing_tracepoint(sleeper, tmp_path, category, tracepoint):
    fake = fake_tracefs(tmp_path, tracepoint)
    rc, lines = run_collector("--pid", str(sleeper.pid), "-o", str(tmp_path / "x.json"),
                              env={"SPINSCOPE_TRACEFS": str(fake)})
    assert rc == 1
    assert f"tracepoint {category}/{tracepoint} is missing" in one_error_line(lines)
    assert not (tmp_path / "x.json").exists()


def test_unwritable_output(sleeper):
    rc, lines = run_collector("--pid", str(sleeper.pid), "-o", "/nonexistent-dir/x.json")
    assert rc == 1
    assert "cannot write /nonexistent-dir/x.json" in one_error_line(lines)


@pytest.mark.parametrize("args", [["--duration", "abc"], ["--pid", "-3"], ["--pid", "1", "extra"],
                                  [], ["--interval", "0.001", "--pid", "1"]])
def test_usage_errors(args):
    rc, lines = run_collector(*args)
    assert rc == 2
    assert any(": error:" in line for line in lines)


def test_check_mode():
    rc, lines = run_collector("--check")
    assert rc == 0
    assert any("check passed" in line for line in lines)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_ends_capture_and_writes_it(sleeper, tmp_path, sig):
    out = tmp_path / "x.json"
    proc, err = start_collector(sleeper.pid, out, "--interval", "0.1")
    time.sleep(0.35)
    proc.send_signal(sig)
    assert proc.wait(timeout=10) == 0
    cap = json.loads(out.read_text())
    assert cap["end_reason"] == "signal"
    assert len(cap["intervals"]) >= 3
    assert [t["comm"] for t in cap["threads"]] == ["sleep"]  # seeded at attach although idle


def test_target_exit_mid_capture(tmp_path):
    target = subprocess.Popen(["sleep", "0.5"])
    out = tmp_path / "x.json"
    proc, err = start_collector(target.pid, out, "--duration", "30")
    assert proc.wait(timeout=10) == 0
    target.wait()
    err.wait_for(lambda line: "wrote" in line)
    assert any("exited" in line for line in err.seen)
    cap = json.loads(out.read_text())
    assert cap["end_reason"] == "target-exited"
    assert cap["duration_s"] < 5
    assert cap["threads"][0]["alive"] is False


def test_duration_ends_capture(sleeper, tmp_path):
    out = tmp_path / "x.json"
    rc, lines = run_collector("--pid", str(sleeper.pid), "-o", str(out), "--duration", "0.3")
    assert rc == 0
    cap = json.loads(out.read_text())
    assert cap["end_reason"] == "duration"
    assert 0.3 <= cap["duration_s"] < 2


def test_record_ctrl_c_keeps_capture(sleeper, tmp_path):
    """`spinscope record` in a terminal: Ctrl-C reaches its whole process group."""
    out = tmp_path / "rec.json"
    proc = subprocess.Popen([sys.executable, "-m", "spinscope", "record", "--pid", str(sleeper.pid),
                             "-o", str(out), "--interval", "0.1"], stderr=subprocess.PIPE, text=True,
                            start_new_session=True, cwd=ROOT)
    err = LineReader(proc.stderr)
    err.wait_for(lambda line: "attached" in line)
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=15) == 0, err.seen
    cap = json.loads(out.read_text())
    assert cap["end_reason"] == "signal"
    assert cap["target"]["pid"] == sleeper.pid


def test_record_without_collector(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "spinscope", "record", "--pid", "1"],
                          capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "SPINSCOPE_COLLECTOR": str(tmp_path / "none")})
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "collector not found" in lines[0]
