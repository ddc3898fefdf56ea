"""Run the collector against the fixture programs in tests/fixtures and hand back both sides' counts."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path


from spinscope.tracing import collector
from paths import ROOT, BUILD, COLLECTOR, FIXTURES  # noqa: F401 (the suites import them from here too)



class LineReader:
    """Lines of a pipe, read on a thread so waiting for one can time out."""

    def __init__(self, stream):
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream) -> None:
        for line in stream:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, predicate, timeout: float = 10.0) -> str:
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"timed out; saw {self.seen!r}") from None
            if line is None:
                raise AssertionError(f"stream ended; saw {self.seen!r}")
            self.seen.append(line)
            if predicate(line):
                return line

    def drain(self, timeout: float = 5.0) -> list[str]:
        """Every line until the stream ends (the process exited)."""
        try:
            self.wait_for(lambda line: False, timeout)
        except AssertionError:
            pass
        return self.seen


def start_collector(pid: int, output: Path, *extra: str, program: Path = COLLECTOR,
                    env: dict | None = None) -> tuple[subprocess.Popen, LineReader]:
    """The collector (program) on pid, returned once its probes are live (its --ready-fd line)."""
    started = collector.start([program, "--pid", pid, "-o", output, *extra], stdin=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, env=env)
    err = LineReader(started.proc.stderr)
    try:
        started.wait_ready(timeout=30)
    except (collector.NotReady, TimeoutError) as exc:
        started.proc.kill()
        started.proc.wait()
        raise AssertionError(f"{exc}; stderr: {err.drain()!r}") from None
    return started.proc, err


@dataclass
class FixtureRun:
    truth: dict[str, dict]  # thread name -> what the fixture counted itself
    capture: dict
    collector_stderr: list[str] = field(default_factory=list)

    def thread(self, name: str) -> dict:
        """The capture's entry for the fixture thread called name (matched by tid)."""
        tid = self.truth[name]["tid"]
        matches = [t for t in self.capture["threads"] if t["tid"] == tid]
        assert len(matches) == 1, f"thread {name} (tid {tid}) not in capture"
        return matches[0]


# The fixtures' assertions on times hold every call timed; test_time_sample.py holds the sampled default.
EVERY_CALL_TIMED = ("--time-sample", "1")


def host_pid(launched: int, pid: int) -> int:
    """The host PID of the process that says it is pid (in its own PID namespace): launched, or one of its
    children (`unshare --pid --fork` runs the command as its child)."""
    children = Path(f"/proc/{launched}/task/{launched}/children").read_text().split()
    for candidate in (launched, *map(int, children)):
        status = Path(f"/proc/{candidate}/status").read_bytes()  # its Name: line is the target's bytes
        nspid = next(line.split()[1:] for line in status.splitlines() if line.startswith(b"NSpid:"))
        if int(nspid[-1]) == pid:
            return candidate
    raise AssertionError(f"no process of {launched}'s says it is PID {pid}")


def run_fixture(name: str, *args: str, tmp_path: Path, collector_args: tuple[str, ...] = (),
                program: Path = COLLECTOR, env: dict | None = None, wrapper: tuple[str, ...] = ()) -> FixtureRun:
    """Start fixture NAME, attach the collector (program, run with env), let the fixture run, and read
    both accounts. wrapper, when given, is a command that runs the fixture (its path the last argument),
    as a container would: the fixture is found by the PID it says it has in its own namespace.

    The collector stops by itself when the fixture exits, which also exercises that path. Every call is
    timed unless collector_args say --time-sample."""
    if "--time-sample" not in collector_args:
        collector_args = (*EVERY_CALL_TIMED, *collector_args)
    output = tmp_path / f"{name}.json"
    fixture = subprocess.Popen([*wrapper, str(FIXTURES / name), *args], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    collector = None
    try:
        out = LineReader(fixture.stdout)
        pid = host_pid(fixture.pid, int(out.wait_for(lambda line: line.startswith("ready")).split()[1]))
        collector, err = start_collector(pid, output, *collector_args, program=program, env=env)
        fixture.stdin.write("go\n")
        fixture.stdin.flush()
        out.wait_for(lambda line: line == "done", timeout=60)
        assert fixture.wait(timeout=30) == 0
        assert collector.wait(timeout=30) == 0, err.drain()
        err.drain()  # it exited: every line it wrote
        truth = {}
        for line in out.seen:
            if line.startswith("{"):
                row = json.loads(line)
                truth[row["thread"]] = row
        return FixtureRun(truth, json.loads(output.read_text()), err.seen)
    finally:
        for proc in (fixture, collector):
            if proc and proc.poll() is None:
                proc.kill()
                proc.wait()
