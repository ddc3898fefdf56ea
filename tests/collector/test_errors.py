"""Every way the collector can fail says so in one line and exits non-zero; every way a capture can
end after the probes are live still writes it."""

from __future__ import annotations

import html
import json
import re
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spinscope.analysis import capture

from spinscope.tracing import collector
from spinscope.untrusted import printable

from collector_harness import (COLLECTOR, ROOT, LineReader, drop_to_nobody, run_fixture, start_collector,
                               unprivileged)  # noqa: F401 (a fixture)


def run_collector(*args: str, env: dict | None = None, preexec=None, timeout: float = 20, program: Path = COLLECTOR):
    proc = subprocess.run([str(program), *args], capture_output=True, text=True, timeout=timeout,
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


def test_not_root(sleeper, unprivileged):
    out = unprivileged.home / "x.json"
    rc, lines = run_collector("--pid", str(sleeper.pid), "-o", str(out), preexec=drop_to_nobody,
                              program=unprivileged.collector)
    assert rc == 1
    assert "needs root" in one_error_line(lines)
    assert not out.exists()


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
    for category in ("raw_syscalls", "sched", "tcp"):
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
                                  [], ["--interval", "0.001", "--pid", "1"],
                                  ["--pid", "1", "--time-sample", "12"], ["--pid", "1", "--time-sample", "0"],
                                  ["--runtime"], ["--check", "--runtime"], ["--pid", "1", "--cgroup", "/", "--runtime"]])
def test_usage_errors(args):
    rc, lines = run_collector(*args)
    assert rc == 2
    assert any(": error:" in line for line in lines)


def test_check_mode():
    rc, lines = run_collector("--check")
    assert rc == 0
    assert any("check passed" in line for line in lines)


def check_report(*args: str, env: dict | None = None, preexec=None, program: Path = COLLECTOR) -> tuple[int, dict]:
    proc = subprocess.run([str(program), "--check", "--json", *args], capture_output=True, text=True,
                          timeout=20, env={**os.environ, **(env or {})}, preexec_fn=preexec)
    report = json.loads(proc.stdout)
    assert report["ok"] == (proc.returncode == 0)
    return proc.returncode, {c["name"]: c for c in report["checks"]}


CHECKS = ["privileges", "kernel BTF", "tracefs", "tracepoints", "kernel", "bpf_loop", "perf-event map access",
          "probes load", "probes attach"]
OPTIONAL = ["kernel", "bpf_loop", "perf-event map access"]  # not ok, a part of the capture is left out


def test_check_json_on_a_ready_host():
    rc, checks = check_report()
    assert rc == 0 and list(checks) == CHECKS
    assert all(c["ok"] and not c["skipped"] for c in checks.values())
    assert [name for name, c in checks.items() if c["optional"]] == OPTIONAL
    assert checks["tracepoints"]["detail"] == "8 of 8 present"
    assert checks["probes attach"]["detail"].startswith("8 probes live in ")


def test_check_json_names_missing_tracepoints_and_skips_loading(tmp_path):
    fake = fake_tracefs(tmp_path, "sched_waking")
    rc, checks = check_report(env={"SPINSCOPE_TRACEFS": str(fake)})
    assert rc == 1
    assert checks["tracepoints"] == {
        "name": "tracepoints", "ok": False, "skipped": False, "optional": False,
        "detail": "tracepoint sched/sched_waking is missing from this kernel (7 of 8 present)",
        "remedy": "a kernel built with CONFIG_FTRACE_SYSCALLS and CONFIG_TRACEPOINTS"}
    assert checks["probes load"]["skipped"] and checks["probes attach"]["skipped"]
    assert checks["privileges"]["ok"] and checks["kernel BTF"]["ok"]


def test_check_json_without_btf(tmp_path):
    rc, checks = check_report(env={"SPINSCOPE_SYSFS_BTF": str(tmp_path / "no-vmlinux")})
    assert rc == 1
    assert not checks["kernel BTF"]["ok"] and "CONFIG_DEBUG_INFO_BTF=y" in checks["kernel BTF"]["remedy"]


def test_check_json_unprivileged(unprivileged):
    """Unprivileged, tracefs looks unmounted: it is skipped, not reported missing."""
    rc, checks = check_report(preexec=drop_to_nobody, program=unprivileged.collector)
    assert rc == 1
    assert not checks["privileges"]["ok"] and "setcap cap_bpf,cap_perfmon+ep" in checks["privileges"]["remedy"]
    assert checks["kernel BTF"]["ok"]
    assert [name for name, c in checks.items() if c["skipped"]] == [
        name for name in CHECKS[2:] if name != "kernel"]  # the kernel's release needs no privileges


def test_json_needs_check():
    rc, lines = run_collector("--json")
    assert rc == 2 and "--json goes with --check" in one_error_line(lines)


def test_ready_fd_says_when_the_probes_are_live(sleeper, tmp_path):
    proc, _ = start_collector(sleeper.pid, tmp_path / "x.json")  # waits for the line (harness)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 0
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen([str(COLLECTOR), "--pid", str(sleeper.pid), "-o", str(tmp_path / "y.json"),
                             "--duration", "0.1", "-q", "--ready-fd", str(write_fd)], pass_fds=(write_fd,))
    os.close(write_fd)
    with os.fdopen(read_fd) as ready:
        line = json.loads(ready.readline())
        assert ready.read() == ""  # one line, then closed
    assert line["ready"] is True and line["pid"] == sleeper.pid and line["probes"] == 8
    assert 0 < line["attach_s"] < 30
    assert proc.wait(timeout=10) == 0


def test_ready_fd_closes_empty_on_failure(tmp_path):
    started = collector.start([COLLECTOR, "--pid", dead_pid(), "-o", tmp_path / "x.json"],
                              stderr=subprocess.PIPE, text=True)
    with pytest.raises(collector.NotReady):
        started.wait_ready(timeout=10)
    assert started.proc.wait(timeout=10) == 1
    assert one_error_line(started.proc.stderr.read().splitlines())


@pytest.mark.parametrize("fd", ["99", "x"])
def test_ready_fd_must_be_open(fd):
    rc, lines = run_collector("--pid", "1", "--ready-fd", fd)
    assert rc == 2 and "--ready-fd" in one_error_line(lines)


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
    # The target exits once the probes are live (its stdin closed), however long attaching took.
    target = subprocess.Popen(["head", "-c", "1"], stdin=subprocess.PIPE)
    out = tmp_path / "x.json"
    proc, err = start_collector(target.pid, out, "--duration", "30")
    target.stdin.close()
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
    started = collector.start([sys.executable, "-m", "spinscope", "record", "--pid", sleeper.pid, "-o", out,
                               "--interval", "0.1"], stderr=subprocess.PIPE, text=True,
                              start_new_session=True, cwd=ROOT)
    proc = started.proc
    err = LineReader(proc.stderr)
    assert started.wait_ready(timeout=30)["pid"] == sleeper.pid  # record passes the collector's line on
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


def test_hostile_names_and_arguments_make_valid_utf8_and_keep_no_secret(tmp_path):
    """The target names its threads with markup, escapes and bytes that are not UTF-8, and has a secret
    in its arguments: the capture is valid UTF-8 (each invalid byte U+FFFD), names are kept otherwise
    exactly (control characters as JSON escapes), and the arguments are counted, not kept."""
    run = run_fixture("hostile", "--password=hunter2", tmp_path=tmp_path)
    raw = (tmp_path / "hostile.json").read_bytes()
    raw.decode("utf-8")  # strict
    assert b"hunter2" not in raw and b"PAYLOAD-7f3a" not in raw  # no argument values, no payload bytes
    assert run.capture["target"]["argc"] == 2 and run.capture["target"]["cmdline"] is None
    assert run.capture["host"]["hostname"] is None
    for name, truth in run.truth.items():
        expected = bytes.fromhex(truth["name_hex"]).decode("utf-8", errors="replace")
        assert run.thread(name)["comm"] == expected, name
    assert run.thread("t5")["comm"] == "bad\ufffd\ufffdutf8"
    assert run.capture["target"]["comm"] == "hostile\x1b[1m\ufffd"
    # The collector's own log shows the name with every byte outside printable ASCII as '?'.
    attached = next(line for line in run.collector_stderr if "attached" in line)
    assert "(hostile?[1m?)" in attached and "\x1b" not in attached

    # ...and the capture is reported, as data, in every format (tests/analyzer holds the details).
    capture = tmp_path / "hostile.json"
    for args in ([], ["--json"], ["--html", tmp_path / "hostile.html"]):
        result = subprocess.run([sys.executable, "-m", "spinscope", "report", capture, *args], capture_output=True,
                                text=True, cwd=ROOT)
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
        assert "\x1b" not in result.stdout  # no escape sequence reaches the terminal
    report = json.loads(subprocess.run([sys.executable, "-m", "spinscope", "report", capture, "--json"],
                                       capture_output=True, text=True, cwd=ROOT).stdout)
    assert '"\\u001b[31mred"' in json.dumps(report)  # JSON keeps them as they were
    page = (tmp_path / "hostile.html").read_text()
    assert all(html.escape(printable(run.thread(name)["comm"])) in page for name in run.truth)


def test_cmdline_and_hostname_only_when_asked(tmp_path):
    run = run_fixture("hostile", "--password=hunter2", tmp_path=tmp_path,
                      collector_args=("--cmdline", "--hostname"))
    assert run.capture["target"]["cmdline"][1:] == ["--password=hunter2"]
    assert run.capture["host"]["hostname"] == os.uname().nodename


def test_exec_is_recorded(tmp_path):
    """A target that replaces its program: the capture says when, and what it runs from then on."""
    # The shell execs once told to, after the probes are live: how long attaching takes (0.3-0.5 s here,
    # more on a busy machine) does not decide whether the exec is seen.
    target = subprocess.Popen(["sh", "-c", "read go; sleep 0.3; exec sleep 0.4"], stdin=subprocess.PIPE, text=True)
    out = tmp_path / "x.json"
    proc, _ = start_collector(target.pid, out, "--duration", "5")
    attached = time.monotonic()
    target.stdin.write("go\n")
    target.stdin.close()
    target.wait()
    exec_after_attach = time.monotonic() - attached
    assert proc.wait(timeout=10) == 0
    execs = json.loads(out.read_text())["target"]["execs"]
    assert [(e["pid"], e["count"], e["comm"]) for e in execs] == [(target.pid, 1, "sleep")]
    # When: after the 0.3 s sleep that follows the go, and before the target ended.
    assert execs[0]["filename"].endswith("sleep") and 0.3 <= execs[0]["t_s"] <= 0.3 + exec_after_attach + 5
    # The shell made no call spinscope counts as work before it (a pipe read, a sleep): a wrapper, whose
    # counts are the program's; the capture is named after it, and nothing is said to mix (issue 32).
    assert execs[0]["calls_before"] == 0
    report = subprocess.run([sys.executable, "-m", "spinscope", "report", out], capture_output=True, text=True,
                            cwd=ROOT)
    assert report.stdout.startswith(f"spinscope report sleep (pid {target.pid}): ")
    assert "replaced its program" not in report.stdout


def test_an_exec_after_counted_work_is_said_to_mix_the_programs(tmp_path):
    """A program that made socket calls, then exec'd: its counts are of both, and the report says so."""
    work = ("import os, socket, sys; a, b = socket.socketpair(); sys.stdin.readline(); "
            "[(a.send(b'x'), b.recv(1)) for _ in range(5)]; os.execvp('sleep', ['sleep', '0.4'])")
    target = subprocess.Popen([sys.executable, "-c", work], stdin=subprocess.PIPE, text=True)
    out = tmp_path / "x.json"
    proc, _ = start_collector(target.pid, out, "--duration", "5")
    target.stdin.write("go\n")
    target.stdin.close()
    target.wait()
    assert proc.wait(timeout=10) == 0
    execs = json.loads(out.read_text())["target"]["execs"]
    assert [(e["pid"], e["count"], e["comm"]) for e in execs] == [(target.pid, 1, "sleep")]
    assert execs[0]["calls_before"] >= 10  # the five sends and five receives, at least
    report = subprocess.run([sys.executable, "-m", "spinscope", "report", out], capture_output=True, text=True,
                            cwd=ROOT)
    assert f"process {target.pid} replaced its program (execve) once while traced" in report.stdout
    assert re.search(r"its counts mix the programs before\s+and\s+after", report.stdout)
    assert not report.stdout.startswith("spinscope report sleep")  # named as it was when attached


def test_kernel_thread_refused(tmp_path):
    rc, lines = run_collector("--pid", "2", "-o", str(tmp_path / "x.json"))
    assert rc == 1 and "PID 2 is a kernel thread" in one_error_line(lines)
    assert not list(tmp_path.iterdir())


def test_zombie_refused(tmp_path):
    zombie = subprocess.Popen(["true"])
    time.sleep(0.2)  # exited; not reaped until wait()
    try:
        rc, lines = run_collector("--pid", str(zombie.pid), "-o", str(tmp_path / "x.json"))
        assert rc == 1 and f"PID {zombie.pid} has exited" in one_error_line(lines)
    finally:
        zombie.wait()


def test_output_checked_before_attaching(sleeper, tmp_path):
    rc, lines = run_collector("--pid", str(sleeper.pid), "-o", str(tmp_path))
    assert rc == 1 and "is a directory" in one_error_line(lines)
    rc, lines = run_collector("--pid", str(sleeper.pid), "-o", "")
    assert rc == 2 and "--output must name a file" in one_error_line(lines)


@pytest.mark.parametrize("option", ["--duration", "--interval"])
@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_seconds_must_be_finite(option, value):
    rc, lines = run_collector("--pid", "1", option, value)
    assert rc == 2 and f"{option} must be a number of seconds" in one_error_line(lines)


def test_killed_record_still_writes_the_capture(sleeper, tmp_path):
    """SIGKILL of `spinscope record`: its collector notices (--exit-with-parent), writes the capture and
    detaches, rather than tracing on until its duration ends."""
    out = tmp_path / "rec.json"
    started = collector.start([sys.executable, "-m", "spinscope", "record", "--pid", sleeper.pid, "-o", out,
                               "--interval", "0.1", "-q"], start_new_session=True, cwd=ROOT)
    started.wait_ready(timeout=30)
    time.sleep(0.3)
    started.proc.kill()
    started.proc.wait()
    deadline = time.monotonic() + 10
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    cap = json.loads(out.read_text())
    assert cap["end_reason"] == "signal" and len(cap["intervals"]) >= 2
    assert [p for p in tmp_path.iterdir() if p.name != "rec.json"] == []  # no temporary file left


def test_killed_collector_leaves_its_last_checkpoint(sleeper, tmp_path):
    """SIGKILL of the collector itself: what it had at its last checkpoint is a complete capture, marked
    as such, and the intervals taken since are in its journal: `report` reads both and says it is
    incomplete, so at most one interval is lost. Killed before the first checkpoint, it leaves no file."""
    out = tmp_path / "x.json"
    proc, _ = start_collector(sleeper.pid, out, "--interval", "0.1", "--checkpoint", "0.5")
    time.sleep(1.35)
    proc.kill()
    proc.wait()
    # No temporary file left; the journal holds the intervals after the checkpoint at 1.0 s.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json", "x.json.intervals.jsonl"]
    cap = json.loads(out.read_text())
    assert cap["end_reason"] == "checkpoint" and cap["settings"]["checkpoint_s"] == 0.5
    assert 0.9 <= cap["duration_s"] < 1.3 and len(cap["intervals"]) >= 8
    loaded = capture.load(out)
    assert loaded.journaled >= 2
    ends = [row["t_s"] for row in loaded.intervals]
    assert ends == sorted(ends) and len(loaded.intervals) == len(cap["intervals"]) + loaded.journaled
    assert ends[-1] >= 1.15  # killed at 1.35 s: at most the interval being taken is lost
    report = subprocess.run([sys.executable, "-m", "spinscope", "report", out], capture_output=True, text=True,
                            cwd=ROOT)
    assert report.returncode == 0 and "incomplete: the collector stopped without writing its final" in report.stdout
    assert "from its journal" in report.stdout

    early = tmp_path / "early"
    early.mkdir()
    proc, _ = start_collector(sleeper.pid, early / "y.json", "--interval", "0.1")  # default: every 10 s
    time.sleep(0.2)
    proc.kill()
    proc.wait()
    assert list(early.iterdir()) == []


def test_a_finished_capture_replaces_the_checkpoints(sleeper, tmp_path):
    out = tmp_path / "x.json"
    proc, _ = start_collector(sleeper.pid, out, "--duration", "1.2", "--checkpoint", "0.3", "--interval", "0.1")
    assert proc.wait(timeout=10) == 0
    cap = json.loads(out.read_text())
    assert cap["end_reason"] == "duration" and cap["duration_s"] >= 1.2
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]  # the journal is gone with the checkpoints
