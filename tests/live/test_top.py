"""`spinscope top` in a real terminal (tmux) against a reference server under load: thread rows, rates
that move, the keys, the target exiting shown as ended, and q restoring the terminal."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from live_harness import ANALYZER, COLLECTOR, LOADGEN, REFSERVER, load_lock, stop, wait_until

pytestmark = pytest.mark.skipif(not shutil.which("tmux"), reason="tmux not installed (apt-get install tmux)")


class Pane:
    """A detached tmux session running a shell, 160x40."""

    def __init__(self, name: str):
        self.name = name
        subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "160", "-y", "40", "bash --norc --noprofile"],
                       check=True)

    def send(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def text(self) -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True,
                              check=True).stdout

    def wait_for(self, pattern: str, timeout: float = 15.0) -> str:
        return wait_until(lambda: re.search(pattern, self.text(), re.M) and self.text(), timeout, repr(pattern))

    def kill(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def process_row(screen: str) -> str:
    return next(line for line in screen.splitlines() if line.strip().startswith("process "))


def test_top_shows_threads_moving_and_ends_cleanly(tmp_path):
    pane = Pane(f"spinscope-top-{time.monotonic_ns()}")
    server = loadgen = None
    output = tmp_path / "top.json"
    try:
        with load_lock():
            server = subprocess.Popen([REFSERVER, "--arch", "reactor-split", "--port", "0", "--workers", "2"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            port = int(re.search(r"listening on \S+:(\d+)", server.stderr.readline()).group(1))
            # Bounded: the load stops by itself, ramping up over the first seconds of the run.
            loadgen = subprocess.Popen([LOADGEN, "--port", str(port), "--concurrency", "4", "--duration", "25",
                                        "--path", "/bytes/2000", "--think-ms", "1"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            pane.send("stty -g > " + shlex.quote(str(tmp_path / "stty.before")), "Enter")
            command = (f"SPINSCOPE_COLLECTOR={COLLECTOR} PYTHONPATH={ANALYZER} {sys.executable} -m spinscope top "
                       f"--pid {server.pid} -o {output}; echo TOP-EXIT=$?")
            pane.send(command, "Enter")
            first = pane.wait_for(r"^\s*process\s+[\d,]+", timeout=30)
            # One row per thread: the dispatcher and its two workers, with their tids.
            assert re.search(rf"^\s*{server.pid}\s+\S+\s+refserver", first, re.M), first
            assert len(re.findall(r"^\s*\d+\s+(event-loop|handler|dispatcher|worker|acceptor|idle)\s+refserver",
                                  first, re.M)) == 3, first
            assert "req/s" in first and "handoffs/req" in first and "CPU %" in first
            time.sleep(2.2)
            second = pane.text()
            assert process_row(first) != process_row(second), (first, second)  # the rates move
            assert re.search(r"refserver \(pid \d+\)\s+\d+ s", second)

            pane.send("g")  # roles
            roles = pane.wait_for(r"view: roles")
            assert re.search(r"^\s*threads\s+", roles, re.M) and "dispatcher" in roles
            pane.send("s")  # sort by the next column
            pane.wait_for(r"sort: requests_per_s")

            stop(server)  # the target exits
            ended = pane.wait_for(r"ENDED: the target exited")
            assert "q quits" in ended
            stop(loadgen)
        pane.send("q")
        done = pane.wait_for(r"TOP-EXIT=\d+")
        assert "TOP-EXIT=0" in done, done
        assert "req/s" not in done  # the alternate screen is gone: the shell's own screen is back
        assert f"wrote {output}" in done.replace("\n", "")
        pane.send("stty -g > " + shlex.quote(str(tmp_path / "stty.after")), "Enter")
        wait_until(lambda: (tmp_path / "stty.after").exists() and (tmp_path / "stty.after").read_text(), 5, "stty")
        assert (tmp_path / "stty.after").read_text() == (tmp_path / "stty.before").read_text()  # echo, icanon back
        from spinscope.analysis import capture

        saved = capture.load(output)
        assert saved.raw["end_reason"] == "target-exited" and saved.request_count > 0
    finally:
        pane.kill()
        stop(loadgen)
        stop(server)


def test_top_quits_on_ctrl_c_and_needs_a_terminal(tmp_path):
    target = subprocess.Popen(["sleep", "60"])
    pane = Pane(f"spinscope-top-{time.monotonic_ns()}")
    try:
        pane.send(f"SPINSCOPE_COLLECTOR={COLLECTOR} PYTHONPATH={ANALYZER} {sys.executable} -m spinscope top --pid {target.pid}"
                  "; echo TOP-EXIT=$?", "Enter")
        pane.wait_for(r"^\s*process\s+", timeout=30)
        pane.send("C-c")
        done = pane.wait_for(r"TOP-EXIT=\d+")
        assert "TOP-EXIT=0" in done, done
        assert target.poll() is None
        # Not a terminal: refused in one line, nothing attached.
        result = subprocess.run([sys.executable, "-m", "spinscope", "top", "--pid", str(target.pid)],
                                capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ANALYZER)},
                                stdin=subprocess.DEVNULL)
        assert result.returncode == 2 and "needs a terminal" in result.stderr
    finally:
        pane.kill()
        stop(target)


def test_top_runs_a_command_from_its_first_syscall_and_passes_its_status_on(tmp_path):
    """`top -- COMMAND` (batch: no terminal needed): the command's first writes are in the capture top
    writes, its output is the terminal's (here a pipe), its exit ends the stream and its status is top's."""
    firstwrites = COLLECTOR.parent / "fixtures" / "firstwrites"
    output = tmp_path / "top.json"
    result = subprocess.run([sys.executable, "-m", "spinscope", "top", "--batch", "1", "-o", str(output), "--",
                             "sh", "-c", f'echo command-output; exec {firstwrites} 6 2 5'],
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(ANALYZER), "SPINSCOPE_COLLECTOR": str(COLLECTOR)})
    assert result.returncode == 5, result.stderr
    assert result.stdout.startswith("command-output\n") and "ENDED: the target exited" in result.stdout
    assert f"wrote {output}" in result.stderr.replace("\n", "")
    from spinscope.analysis import capture

    saved = capture.load(output)
    pid = saved.raw["target"]["pid"]
    assert saved.raw["end_reason"] == "target-exited" and saved.raw["target"]["comm"] == "sh"
    # sh exec'd the fixture (its echo wrote to a pipe, which no socket count holds): one program change
    # after the command's start, which is not one
    assert [(e["pid"], e["count"], e["comm"], e["filename"]) for e in saved.raw["target"]["execs"]] == [
        (pid, 1, "firstwrites", str(firstwrites))]
    writes = {(t["pid"] == pid, t["comm"]): t["write_calls"] for t in saved.raw["threads"]}
    assert writes == {(True, "firstwrites"): 6, (False, "firstwrites"): 2}


def test_top_quitting_ends_its_command(tmp_path):
    """`top -- COMMAND` in a terminal: q quits top, which ends the command with SIGTERM (through the collector)
    and exits with its status, 143; the command is gone."""
    pane = Pane(f"spinscope-top-{time.monotonic_ns()}")
    try:
        pane.send(f"SPINSCOPE_COLLECTOR={COLLECTOR} PYTHONPATH={ANALYZER} {sys.executable} -m spinscope top -- sleep 600"
                  "; echo TOP-EXIT=$?", "Enter")
        screen = pane.wait_for(r"^\s*process\s+", timeout=30)
        pid = int(re.search(r"sleep \(pid (\d+)\)", screen).group(1))
        pane.send("q")
        done = pane.wait_for(r"^TOP-EXIT=\d+")
        assert re.search(r"^TOP-EXIT=143$", done, re.M), done
        wait_until(lambda: not os.path.exists(f"/proc/{pid}"), 10, "the command gone")
    finally:
        pane.kill()


def test_no_screen_shows_a_thread_waiting_over_1000_ms_per_s_when_the_command_exits(tmp_path):
    """`top -- timeout 3 refserver --arch thread-pool`: its 32 idle workers wait in futex for the whole run,
    and those waits end, all at once, at exit. The final screen showed 1,025,004.7 futex ms/s per thread
    (4 s of waiting over the last 4 ms); no thread can wait more than 1,000 ms in a second, nor run more
    than 100% of it, and the process row is the sum of its threads'."""
    result = subprocess.run([sys.executable, "-m", "spinscope", "top", "--batch", "30", "--",
                             "timeout", "3", REFSERVER, "--arch", "thread-pool", "--port", "0"],
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(ANALYZER), "SPINSCOPE_COLLECTOR": str(COLLECTOR)})
    assert result.returncode == 124, result.stderr  # timeout's status, passed on
    screens = result.stdout.split("spinscope top  ")[1:]
    assert len(screens) >= 2 and "ENDED: the target exited" in screens[-1]
    assert re.search(r"ENDED: the target exited; the command \(PID \d+\) exited with status 124 after \d+\.\d s",
                     screens[-1])
    assert [screen.split("  ", 1)[0].split(" (pid")[0] for screen in screens] == ["refserver"] * len(screens)
    number = r"(-|[\d,]+\.\d)"
    for screen in screens:
        threads = int(re.search(r"  (\d+) threads  ", screen).group(1))
        rows = [re.search(rf"^\s*(\d+|process)\s.*\s{number}\s+{number}\s*$", line)
                for line in screen.splitlines()]
        rows = [(m.group(1), *(float(v.replace(",", "")) if v != "-" else 0.0 for v in m.groups()[1:]))
                for m in rows if m]
        assert rows and rows[-1][0] == "process"
        for name, futex_ms_per_s, cpu_percent in rows:
            bound = threads if name == "process" else 1
            assert futex_ms_per_s <= 1000.0 * bound and cpu_percent <= 100.0 * bound, (name, screen)
