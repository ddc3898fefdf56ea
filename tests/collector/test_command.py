"""`spinscope record -- COMMAND` (and the collector's own `-- COMMAND`): the command is started with the probes
already live, so the writes it makes first thing are all counted; its exit ends the capture and its exit status
is spinscope's; Ctrl-C reaches it once, from the terminal, and SIGTERM to spinscope is passed on; either way the
capture is written. A command that cannot run is refused with a shell's status before anything is attached."""

from __future__ import annotations

import json
import shlex
import shutil
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collector_harness import COLLECTOR, FIXTURES, ROOT, drop_to_nobody, unprivileged  # noqa: F401 (a fixture)

FIRSTWRITES = FIXTURES / "firstwrites"
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "analyzer" / "src"), "SPINSCOPE_COLLECTOR": str(COLLECTOR)}
SPINSCOPE = [sys.executable, "-m", "spinscope"]


def record(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*SPINSCOPE, "record", *argv], capture_output=True, text=True, env=ENV, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def final_capture(path: Path) -> dict | None:
    """The capture at path once its final version is there (not a checkpoint), else None."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if doc["end_reason"] != "checkpoint" else None


def by_pid(capture: dict) -> dict:
    rows = {}
    for thread in capture["threads"]:
        rows.setdefault(thread["pid"], []).append(thread)
    return rows


@pytest.mark.parametrize("via", ["record", "collector"])
def test_the_first_writes_of_a_command_are_all_counted(via, tmp_path):
    """firstwrites makes 7 socket writes at the start of main, forks a child that makes 3, and exits 0: the
    capture has exactly those, in a process described as the command; its exec, its start, is no program
    change (target.execs)."""
    out = tmp_path / "cmd.json"
    argv = [str(FIRSTWRITES), "7", "3", "0"]
    if via == "record":
        result = record("-o", str(out), "--", *argv)
    else:
        result = subprocess.run([str(COLLECTOR), "-o", str(out), "--", *argv], capture_output=True, text=True,
                                timeout=60)
    assert result.returncode == 0, result.stderr
    capture = json.loads(out.read_text())
    target = capture["target"]
    pid = target["pid"]
    assert capture["end_reason"] == "target-exited"
    assert (target["comm"], target["exe"], target["argc"]) == ("firstwrites", str(FIRSTWRITES.resolve()), 4)
    assert target["follow_children"] and target["cmdline"] is None
    assert target["execs"] == []
    processes = by_pid(capture)
    assert sorted(processes) == sorted(target["pids"]) and len(processes) == 2
    (child,) = [p for p in processes if p != pid]
    assert [(t["tid"], t["comm"], t["write_calls"]) for t in processes[pid]] == [(pid, "firstwrites", 7)]
    assert [(t["comm"], t["write_calls"]) for t in processes[child]] == [("firstwrites", 3)]
    if via == "record":
        assert f"next: spinscope report {out}" in result.stderr


@pytest.mark.parametrize("ending, status", [("3", 3), ("0", 0), ("kill", 128 + signal.SIGKILL)])
def test_the_commands_exit_status_is_spinscopes(ending, status, tmp_path):
    out = tmp_path / "status.json"
    result = record("-o", str(out), "--", str(FIRSTWRITES), "1", "0", ending)
    assert result.returncode == status, result.stderr
    assert json.loads(out.read_text())["end_reason"] == "target-exited"
    said = "was killed by signal 9" if ending == "kill" else f"exited with status {ending}"
    assert f"the command (PID {json.loads(out.read_text())['target']['pid']}) {said}" in result.stderr


def trapping_command(tmp_path: Path, signame: str, then: str) -> list[str]:
    """sh, appending a line to `got` for each `signame` it receives (then running `then`), and exiting 7 once
    the file `done` exists. It makes the file `armed` once its trap is set: a signal sent before that (the
    probes are live, the command released, the shell not yet at its `trap`) would kill it instead."""
    got, done, armed = tmp_path / "got", tmp_path / "done", tmp_path / "armed"
    return ["sh", "-c", f"trap 'echo {signame} >> {got}; {then}' {signame}; : > {armed}; "
            f"while [ ! -e {done} ]; do sleep 0.05; done; exit 7"]


def start_recording(tmp_path: Path, out: Path, command: list[str], armed: Path | None = None) -> subprocess.Popen:
    """spinscope record -- command, in a process group of its own (as a terminal's foreground job is), once
    its probes are live (and, given `armed`, once the command has made that file)."""
    ready_read, ready_write = os.pipe()
    proc = subprocess.Popen([*SPINSCOPE, "record", "-o", str(out), "--ready-fd", str(ready_write), "--", *command],
                            env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, pass_fds=(ready_write,), start_new_session=True)  # SIGINT: conftest.py
    os.close(ready_write)
    with os.fdopen(ready_read) as ready:
        line = ready.readline()
    assert json.loads(line)["ready"], proc.communicate(timeout=30)
    if armed:
        wait_for(lambda: armed.exists() or proc.poll() is not None, 30, "the command's trap set")
    return proc


def test_ctrl_c_reaches_the_command_once_and_the_capture_is_written(tmp_path):
    """SIGINT to the foreground group (what a terminal's Ctrl-C is): spinscope and the collector survive it
    (the capture ends, `signal`, and is written), the command gets it once (not again from the collector) and
    is waited for; its exit status is spinscope's."""
    out = tmp_path / "int.json"
    proc = start_recording(tmp_path, out, trapping_command(tmp_path, "INT", ":"), tmp_path / "armed")
    try:
        os.killpg(proc.pid, signal.SIGINT)
        capture = wait_for(lambda: final_capture(out), 30, "the capture")
        assert capture["end_reason"] == "signal"
        wait_for(lambda: (tmp_path / "got").exists(), 30, "the command's trap")
        (tmp_path / "done").touch()
        _, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 7, stderr
        assert (tmp_path / "got").read_text() == "INT\n"
        assert f"next: spinscope report {out}" in stderr
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_sigterm_to_spinscope_is_passed_on_to_the_command(tmp_path):
    """SIGTERM to spinscope alone: the capture ends (`signal`) and is written, the command gets it once."""
    out = tmp_path / "term.json"
    proc = start_recording(tmp_path, out, trapping_command(tmp_path, "TERM", "exit 9"), tmp_path / "armed")
    try:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 9, stderr
        assert (tmp_path / "got").read_text() == "TERM\n"
        assert final_capture(out)["end_reason"] == "signal"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_the_duration_ends_the_capture_and_the_command(tmp_path):
    """--duration ends the capture first: the command is sent SIGTERM (as perf record does) and waited for."""
    out = tmp_path / "duration.json"
    result = record("-o", str(out), "--duration", "0.5", "--", "sleep", "60")
    assert result.returncode == 128 + signal.SIGTERM, result.stderr
    capture = json.loads(out.read_text())
    assert capture["end_reason"] == "duration" and capture["target"]["comm"] == "sleep"


@pytest.mark.parametrize("command, status, reason", [
    (["spinscope-no-such-command"], 127, "cannot run spinscope-no-such-command: command not found"),
    # a path names a file, as a shell says it (it said "command not found", a shell's word for a name not on $PATH)
    (["/nonexistent/server"], 127, "cannot run /nonexistent/server: No such file or directory"),
    (["./nosuchcmd"], 127, "cannot run ./nosuchcmd: No such file or directory"),
    ([str(ROOT / "README.md")], 126, f"cannot run {ROOT / 'README.md'}: Permission denied"),
    ([str(ROOT)], 126, f"cannot run {ROOT}: Is a directory"),
])
def test_a_command_that_cannot_run_is_refused_with_a_shells_status(command, status, reason, tmp_path):
    out = tmp_path / "never.json"
    result = record("-o", str(out), "--", *command)
    assert result.returncode == status
    assert result.stderr == f"spinscope record: error: {reason}\n"  # record's prefix, as every verb's (issue 32)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("argv, message", [
    (["--"], "-- must be followed by the command to run"),
    (["--pid", "1", "--", "true"], "-- COMMAND goes without --pid: the command is the target"),
])
def test_the_collector_refuses_a_command_without_one_or_with_a_target(argv, message):
    result = subprocess.run([str(COLLECTOR), *argv], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert result.stderr == f"spinscope-collector: error: {message}\n"


def test_the_command_has_spinscopes_streams_environment_and_directory(tmp_path):
    """What it reads is spinscope's stdin, what it writes spinscope's stdout and stderr (the collector's lines
    come on stderr too, on a pipe of their own in between), in spinscope's environment and directory."""
    out = tmp_path / "io.json"
    result = subprocess.run([*SPINSCOPE, "record", "-o", str(out), "--", "sh", "-c",
                             'read line; echo "read:$line env:$SPINSCOPE_TEST_VALUE cwd:$(pwd)"; echo to-stderr >&2'],
                            input="hello\n", capture_output=True, text=True, timeout=60, cwd=tmp_path,
                            env={**ENV, "SPINSCOPE_TEST_VALUE": "42"})
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"read:hello env:42 cwd:{tmp_path}\n"
    assert "to-stderr\n" in result.stderr and "wrote" in result.stderr


def test_a_collector_that_fails_before_the_probes_are_live_never_runs_the_command(unprivileged):
    """Not root: the host check fails after the command was started held, and it exits without its exec (the
    command could write its marker: the directory is nobody's)."""
    marker, out = unprivileged.home / "ran", unprivileged.home / "x.json"
    result = subprocess.run([str(unprivileged.collector), "-o", str(out), "--", "touch", str(marker)],
                            capture_output=True, text=True, timeout=30, preexec_fn=drop_to_nobody)
    assert result.returncode == 1
    (error,) = [line for line in result.stderr.splitlines() if ": error:" in line]
    assert error.startswith("spinscope-collector: error: needs root")
    assert not marker.exists() and not out.exists()


@pytest.mark.skipif(not shutil.which("tmux"), reason="tmux not installed (apt-get install tmux)")
def test_ctrl_c_in_a_real_terminal(tmp_path):
    """The same as a terminal does it (tmux): Ctrl-C to the foreground job, the command's trap runs once, the
    capture is written, and the shell sees the command's exit status."""
    session = f"spinscope-record-{time.monotonic_ns()}"
    out, got, done, armed = tmp_path / "tty.json", tmp_path / "got", tmp_path / "done", tmp_path / "armed"
    script = f"trap 'echo INT >> {got}' INT; : > {armed}; while [ ! -e {done} ]; do sleep 0.05; done; exit 7"

    def screen() -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-J", "-t", session], capture_output=True, text=True,
                              check=True).stdout

    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "50", "bash --norc --noprofile"],
                   check=True)
    try:
        command = (f"SPINSCOPE_COLLECTOR={COLLECTOR} PYTHONPATH={ENV['PYTHONPATH']} {sys.executable} -m spinscope "
                   f"record -o {out} -- sh -c {shlex.quote(script)}; echo RECORD-EXIT=$?")
        subprocess.run(["tmux", "send-keys", "-t", session, command, "Enter"], check=True)
        wait_for(lambda: "probes live" in screen(), 60, "the probes")
        wait_for(armed.exists, 30, "the command's trap set")  # Ctrl-C before it would kill the shell
        subprocess.run(["tmux", "send-keys", "-t", session, "C-c"], check=True)
        assert wait_for(lambda: final_capture(out), 30, "the capture")["end_reason"] == "signal"
        wait_for(lambda: got.exists(), 30, "the command's trap")
        done.touch()
        exits = wait_for(lambda: re.findall(r"^RECORD-EXIT=(\d+)", screen(), re.M), 30, "the exit")
        assert exits == ["7"], screen()
        assert got.read_text() == "INT\n"
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def test_spinscope_killed_outright_still_writes_the_capture_and_ends_the_command(tmp_path):
    """SIGKILL to spinscope: its collector (--exit-with-parent) writes the capture and sends the command SIGTERM,
    which no terminal would: the command does not outlive the spinscope that started it."""
    out = tmp_path / "killed.json"
    ready_read, ready_write = os.pipe()
    proc = subprocess.Popen([*SPINSCOPE, "record", "-o", str(out), "--ready-fd", str(ready_write), "--", "sleep", "600"],
                            env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            pass_fds=(ready_write,), start_new_session=True)
    os.close(ready_write)
    try:
        with os.fdopen(ready_read) as ready:
            command_pid = json.loads(ready.readline())["pid"]
        proc.kill()
        proc.wait()
        capture = wait_for(lambda: final_capture(out), 30, "the capture")
        assert capture["end_reason"] == "signal" and capture["target"]["pid"] == command_pid
        wait_for(lambda: not Path(f"/proc/{command_pid}").exists(), 30, "the command gone")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the collector and the command, if the test failed


@pytest.mark.parametrize("wrapper", [["sh", "-c", 'exec "$0" 7 3 0'], ["timeout", "30"],
                                     ["sh", "-c", 'exec timeout 30 "$0" 7 3 0']],
                         ids=["sh-exec", "timeout", "sh-exec-timeout"])
def test_a_wrapper_is_followed_to_the_program_it_runs(wrapper, tmp_path):
    """`record -- sh -c 'exec ./server'` (docs/live.md's advice) or `-- timeout 6 ./server`: the wrapper execs
    or forks the program before doing any work spinscope counts. The report was titled after the wrapper
    (`spinscope report sh (pid ...)`) and said its counts "mix the programs before and after" for an exec
    at 0.0 s; now it is titled after the program, and says nothing mixes."""
    out = tmp_path / "wrapped.json"
    argv = [*wrapper, str(FIRSTWRITES)] + ([] if wrapper[0] == "sh" else ["7", "3", "0"])
    result = record("-o", str(out), "--", *argv)
    assert result.returncode == 0, result.stderr
    capture = json.loads(out.read_text())
    target, execs = capture["target"], capture["target"]["execs"]
    assert target["comm"] == wrapper[0]  # the capture's target is what was started: the wrapper
    assert [e["calls_before"] for e in execs] == [0] * len(execs) and execs
    # The program: the one process that ran firstwrites' main (7 writes); its child (3) forked, no exec.
    main = next(pid for pid, rows in by_pid(capture).items() if sum(r["write_calls"] for r in rows) == 7)
    assert [e["pid"] for e in execs if e["comm"] == "firstwrites"] == [main]
    report = subprocess.run([*SPINSCOPE, "report", str(out)], capture_output=True, text=True, env=ENV, timeout=60)
    assert report.returncode == 0, report.stderr
    assert report.stdout.startswith(f"spinscope report firstwrites (pid {main}): ")
    assert "replaced its program" not in report.stdout and "mix" not in report.stdout


def test_how_the_command_ended_is_said_however_it_ended_and_wrote_comes_after_it(tmp_path):
    """Ctrl-C (the terminal's SIGINT to the foreground group) to a command that takes 3 s to clean up:
    `wrote ... next: spinscope report` was said at once while spinscope went on waiting, silently, and the
    command's exit status was said only when it exited by itself. Now: how the command ended, then
    `wrote`, each once, in that order (and the wait, if said, before them)."""
    out = tmp_path / "interrupted.json"
    script = 'trap "sleep 3; exit 3" INT; echo ready; while :; do sleep 0.1; done'
    proc = subprocess.Popen([*SPINSCOPE, "record", "-o", str(out), "--", "sh", "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=ENV,
                            start_new_session=True)
    try:
        assert proc.stdout.readline() == "ready\n"  # it runs: the probes are live
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 3, err
    lines = err.splitlines()

    def where(pattern: str) -> list:
        return [i for i, line in enumerate(lines) if re.fullmatch(pattern, line)]

    waiting = where(r"spinscope record: the capture has ended; waiting for the command \(PID \d+\) to exit")
    ended = where(r"spinscope record: the command \(PID \d+\) exited with status 3 after \d+\.\d s")
    wrote = where(rf"spinscope record: wrote {re.escape(str(out))}: .* \(signal\)")
    assert (len(ended), len(wrote)) == (1, 1) and ended[0] < wrote[0], err
    # The wait is said after a second or two (not asserted: a starved collector may first see the command end).
    assert len(waiting) <= 1 and all(i < ended[0] for i in waiting), err
    assert lines[-1] == f"next: spinscope report {out}"


def test_a_command_ended_by_the_duration_is_said_with_its_signal_and_status(tmp_path):
    out = tmp_path / "duration.json"
    result = record("-o", str(out), "--duration", "0.5", "--", "sleep", "60")
    assert result.returncode == 143, result.stderr
    lines = result.stderr.splitlines()
    assert re.fullmatch(r"spinscope record: the command \(PID \d+\) was killed by signal 15 \(SIGTERM\) after "
                        r"\d+\.\d s: status 143", lines[-3]), result.stderr
    assert lines[-2].startswith(f"spinscope record: wrote {out}: ") and lines[-1] == f"next: spinscope report {out}"
