"""Live data: the collector's --stream lines as captures, and what happened between two of them.

`spinscope top` and `spinscope exporter` start the collector with `--interval 1 --stream FD` (docs/live.md):
after each interval snapshot it writes the capture so far as one line of JSON, every key the documented
schema (docs/capture-format.md), with only the latest interval. Each line is loaded with the capture
loader (capture.loads: the same checks and size bound as a file). Rates come from differencing two
lines: `window(older, newer)` is itself a capture, of what happened between them, so the metrics, roles
and labels of a file apply to the last second or the last minute unchanged.

Also here: finding processes by name or executable (`--comm`, `--exe`), for targets that come and go.
"""

from __future__ import annotations

import math
import os
import queue
import signal
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from spinscope.analysis.capture import Capture, from_document, loads
from spinscope.analysis.schema import COUNTERS, DROP_KEYS, MAX_CAPTURE_BYTES, REQUEST_HISTS, REQUEST_SUMS
from spinscope.errors import SpinscopeError
from spinscope.tracing import collector, stacks_helper

STREAM_INTERVAL_S = 1.0
STOP_TIMEOUT_S = 10.0


@dataclass
class Line:
    """One stream line, loaded: the capture so far and when it arrived (time.monotonic())."""

    capture: Capture
    received: float


@dataclass
class Ended:
    """The stream ended: the collector's exit status, the end_reason of its last line (None if it wrote
    none) and its last stderr lines (its one-line error when it failed)."""

    returncode: int
    end_reason: str | None
    stderr: list


class LiveCollector:
    """A collector streaming to us. `target_args` select what it traces (`--pid N [--children]`), or
    `command` (COMMAND [ARG...]) is what it runs and traces; `output`: also write the final capture there
    (the collector's --output). Lines arrive on `lines` (a queue of Line, then one Ended)."""

    def __init__(self, target_args: list, output: Path | None = None, interval: float = STREAM_INTERVAL_S,
                 duration: float | None = None, extra: tuple = (), command: list | None = None):
        path = collector.find()
        if path is None:
            raise SpinscopeError(collector.not_found_message())
        self.lines: queue.Queue = queue.Queue()
        self.stderr: deque = deque(maxlen=20)
        self.last_reason: str | None = None
        read_fd, write_fd = os.pipe()
        cmd = [path, *map(str, target_args), "--interval", f"{interval:g}", "--stream", str(write_fd),
               "--exit-with-parent", *extra]
        if output is not None:
            cmd += ["--output", str(output), "--checkpoint", "0"]
        if duration:
            cmd += ["--duration", f"{duration:g}"]
        pass_fds = [write_fd]
        if command:
            # The command writes to our stdout and stderr (its stdin is not ours: the keys are); the
            # collector's messages come on a pipe of their own.
            log_read, log_write = os.pipe()
            cmd += ["--log-fd", str(log_write)]
            pass_fds.append(log_write)
            streams = {"stdout": None, "stderr": None}
        else:
            streams = {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE}
        try:
            # Its own session: a Ctrl-C in our terminal is ours to handle (we end it with SIGTERM, which
            # it passes on to a command).
            self._started = collector.start(cmd, command=command, pass_fds=tuple(pass_fds),
                                            stdin=subprocess.DEVNULL, start_new_session=True, **streams)
        except BaseException:
            os.close(read_fd)
            if command:
                os.close(log_read)
            raise
        finally:
            os.close(write_fd)
            if command:
                os.close(log_write)
        self.proc = self._started.proc
        self._messages = os.fdopen(log_read, "rb") if command else self.proc.stderr
        self._reader: threading.Thread | None = None
        self._stream = os.fdopen(read_fd, "rb")
        self._err_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._err_thread.start()

    def wait_ready(self, timeout: float = collector.READY_TIMEOUT_S) -> dict:
        """The ready line once the probes are live; SpinscopeError with the collector's own error if it
        failed. Then lines start arriving on `lines`."""
        try:
            ready = self._started.wait_ready(timeout)
        except (collector.NotReady, TimeoutError) as exc:
            self.close()  # its error read, every pipe closed: an exporter retries targets for days
            raise SpinscopeError(self.error() or str(exc)) from None
        self._reader = threading.Thread(target=self._read_stream, daemon=True)
        self._reader.start()
        return ready

    def error(self) -> str:
        """The collector's one-line error (its `error:` line), or ''."""
        for line in reversed(self.stderr):
            if ": error: " in line:
                return line.split(": error: ", 1)[1]
        return ""

    def _drain_stderr(self) -> None:
        for raw in self._messages:
            self.stderr.append(raw.decode(errors="replace").rstrip("\n"))

    def _read_stream(self) -> None:
        while True:
            try:
                data = self._stream.readline(MAX_CAPTURE_BYTES + 1)
            except (OSError, ValueError):  # closed under us
                break
            if not data:
                break
            if not data.endswith(b"\n"):  # longer than any capture is read, or cut short by an exit
                continue
            try:
                cap = loads(data, "stream line")
            except SpinscopeError as exc:
                self.stderr.append(f"spinscope: {exc}")
                continue
            self.last_reason = cap.end_reason
            self.lines.put(Line(cap, time.monotonic()))
        returncode = self.proc.wait()
        self._err_thread.join(timeout=2)
        self.lines.put(Ended(returncode, self.last_reason, list(self.stderr)))

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """End the capture the way the collector expects (SIGTERM: it writes its final line and --output,
        then detaches) and wait for it; kill it if it does not end in time. Its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            returncode = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            returncode = self.proc.wait()
        self._started.close()
        return returncode

    def close(self) -> None:
        """Stop, and close our ends of its pipes, the stream and its messages, once their readers have seen
        them end (not left to the garbage collector: an exporter starts and stops collectors for as long
        as it runs, and a reference kept anywhere would keep their descriptors open)."""
        self.stop()
        if self._reader is not None:
            self._reader.join(timeout=STOP_TIMEOUT_S)
        self._err_thread.join(timeout=2)
        for pipe in (self._stream, self._messages):
            try:
                pipe.close()
            except OSError:
                pass


# ---------------------------------------------------------------------------------------------------------
# What happened between two lines


def _minus(new: int, old: int) -> int:
    return new - old if new >= old else new  # a counter that went back started again (a tid reused)


def _hist_minus(new: list, old: list) -> list:
    out = [_minus(n, old[i] if i < len(old) else 0) for i, n in enumerate(new)]
    while out and out[-1] == 0:
        out.pop()
    return out


def window(older: Capture, newer: Capture) -> Capture:
    """The capture of what happened between two lines of one stream (older first): every counter, sum,
    histogram and wakeup edge the difference, duration_s the time between them, no intervals. A thread
    that newer has and older has not (or under another pid) counts whole: it is new."""
    old, new = older.raw, newer.raw
    doc = {key: value for key, value in new.items()}
    doc["duration_s"] = max(0.0, float(new["duration_s"]) - float(old["duration_s"]))
    doc["intervals"] = []
    doc["threads"] = _threads_minus(new["threads"], old["threads"])
    doc["totals"] = {**new["totals"], **{key: _minus(new["totals"].get(key, 0), old["totals"].get(key, 0))
                                         for key in COUNTERS}}
    doc["wakeups"] = _wakeups_minus(new["wakeups"], old["wakeups"])
    doc["requests"] = _requests_minus(new["requests"], old["requests"])
    doc["drops"] = {key: _minus(new["drops"].get(key, 0), old["drops"].get(key, 0)) for key in DROP_KEYS}
    if isinstance(new.get("stacks"), dict):
        doc["stacks"] = _stacks_minus(new["stacks"], old.get("stacks") or {})
    return from_document(doc, "window")


def _stacks_minus(new: dict, old: dict) -> dict:
    """The stacks of new less old's: the collector only appends to its frames and stacks (an index names
    the same frame, the same stack, in every line of a stream), so each stack's count and weight less its
    count and weight in old; those left with none are dropped."""
    before = old.get("stacks") or []
    stacks = []
    for i, row in enumerate(new.get("stacks") or []):
        prev = before[i] if i < len(before) else {}
        count = _minus(row.get("count", 0), prev.get("count", 0))
        if count:
            stacks.append(dict(row, count=count, weight=_minus(row.get("weight", 0), prev.get("weight", 0))))
    return dict(new, stacks=stacks)


def _threads_minus(new: list, old: list) -> list:
    """The thread rows of new, each less its row in old when old has the same thread (tid and pid)."""
    before = {row["tid"]: row for row in old}
    threads = []
    for row in new:
        prev = before.get(row["tid"])
        row = dict(row)
        if prev is not None and prev["pid"] == row["pid"]:
            for key in COUNTERS:  # .get: a counter an older schema lacks is 0
                row[key] = _minus(row.get(key, 0), prev.get(key, 0))
            row["poll_events_hist"] = _hist_minus(row["poll_events_hist"], prev["poll_events_hist"])
        threads.append(row)
    return threads


def _wakeups_minus(new: list, old: list) -> list:
    """The wakeup edges of new, each less its count in old."""
    edges = {(e["waker_tid"], e["wakee_tid"], e["mechanism"]): e["count"] for e in old}
    return [dict(e, count=_minus(e["count"], edges.get((e["waker_tid"], e["wakee_tid"], e["mechanism"]), 0)))
            for e in new]


def _requests_minus(new: dict, old: dict) -> dict:
    """The requests block of new less old's: sums, histograms, and the size classes with a response left (the
    keys new has: an older schema's stream lacks the newer ones, and its window keeps its layout)."""
    requests = dict(new)
    for key in (*REQUEST_SUMS, "unattributed_writes"):
        if key in new:
            requests[key] = _minus(new[key], old.get(key, 0))
    requests["hist"] = {key: _hist_minus(new["hist"][key], old["hist"].get(key, [])) for key in REQUEST_HISTS
                        if key in new["hist"]}
    classes = {row["bytes_min"]: row for row in old["by_size"]}
    by_size = []
    for row in new["by_size"]:
        prev = classes.get(row["bytes_min"], {})
        row = dict(row, **{key: _minus(row[key], prev.get(key, 0)) for key in REQUEST_SUMS if key in row})
        if row["count"]:
            by_size.append(row)
    requests["by_size"] = by_size
    return requests


class History:
    """The recent lines of one stream, to difference the newest with the one about `seconds` before it."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.lines: deque = deque()

    def add(self, line: Line) -> None:
        self.lines.append(line)
        newest = line.capture.duration_s
        # Keep the newest line at least `seconds` old (the window's start), none older; and three lines at
        # least, for last() after a final line.
        while len(self.lines) > 3 and newest - self.lines[1].capture.duration_s >= self.seconds:
            self.lines.popleft()

    @property
    def newest(self) -> Line | None:
        return self.lines[-1] if self.lines else None

    def last(self) -> Capture | None:
        """What happened over the last full interval up to the newest line, or None before two lines. The
        final line of a capture (its end_reason not "live") comes when the capture ends, mid-interval: when
        it came sooner after the line before than that one after its own, the window starts a line earlier
        (one interval and the rest), so that no rate is a count divided by the few milliseconds before the
        end."""
        if len(self.lines) < 2:
            return None
        start, newest = self.lines[-2], self.lines[-1]
        if newest.capture.end_reason != "live" and len(self.lines) >= 3:
            before = self.lines[-3]
            if (newest.capture.duration_s - start.capture.duration_s
                    < start.capture.duration_s - before.capture.duration_s):
                start = before
        return window(start.capture, newest.capture)

    def span(self, runtime=None) -> Capture | None:
        """What happened over about `seconds` (less until the stream is that old). With `runtime` (a running
        tracing.stacks_helper.LiveStacks), the runtime helper's samples of that time (its batches, by the
        times our lines came: the stacks of the newest second or two are not in yet) added to the stacks as
        `record` adds its samples (source `runtime`, tagged; stacks.helper its account)."""
        if len(self.lines) < 2:
            return None
        span = window(self.lines[0].capture, self.lines[-1].capture)
        if runtime is None or runtime.helper is None or not isinstance(span.raw.get("stacks"), dict):
            return span
        rows, account = runtime.between(int(self.lines[0].received * 1e9), int(self.lines[-1].received * 1e9))
        block = dict(span.raw["stacks"], frames=list(span.raw["stacks"].get("frames") or []),
                     stacks=list(span.raw["stacks"].get("stacks") or []))
        stacks_helper.add_rows(block, rows)
        block["helper"] = account
        return from_document(dict(span.raw, stacks=block), "window")


# ---------------------------------------------------------------------------------------------------------
# Processes by name or executable


@dataclass(frozen=True)
class Selector:
    """What a target option matches: a PID (once), every process whose name (comm) or executable path is
    the one given (they may come and go), or a cgroup v2 directory (one target: every process in it, traced
    by one collector; the cgroup may be removed and made again, as a pod's is)."""

    kind: str  # "pid", "comm", "exe" or "cgroup"
    value: str
    children: bool = False

    @property
    def text(self) -> str:
        return f"--{self.kind} {self.value}"

    @property
    def can_return(self) -> bool:
        """Whether a target that ends can be matched again: not a PID."""
        return self.kind != "pid"

    def collector_args(self, pid: int | None = None) -> list:
        """What selects the target on the collector's command line (pid: the process matched)."""
        if self.kind == "cgroup":
            return ["--cgroup", self.value]
        return ["--pid", str(pid)] + (["--children"] if self.children else [])


@dataclass
class Proc:
    pid: int
    ppid: int
    comm: str
    exe: str


PF_KTHREAD = 0x00200000  # /proc/PID/stat's flags: a kernel thread (include/linux/sched.h)
RESCAN_ALL_EVERY_S = 10.0  # ProcessTable: every process read again (exec, a reused PID) at least this often


def processes(proc: Path = Path("/proc"), only=None) -> dict:
    """{pid: Proc} of the user processes now running (kernel threads and zombies left out); with `only`
    (PIDs), of those alone, without reading the rest of /proc. One read of /proc/PID/stat and one readlink
    of /proc/PID/exe each, by os calls, kernel threads told by their flags: 38 us of CPU a process here
    (through pathlib, with a third read for kernel threads: 90 us; bench/results/process_scan.md)."""
    root = str(proc)
    found = {}
    for name in os.listdir(root) if only is None else map(str, only):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"{root}/{name}/stat", os.O_RDONLY)
            try:
                stat = os.read(fd, 4096).decode(errors="replace")  # about 300 bytes, read whole at once
            finally:
                os.close(fd)
        except OSError:  # exited
            continue
        end = stat.rfind(")")  # the comm may hold spaces and parentheses: it ends at the last ")"
        fields = stat[end + 2:].split(None, 7)  # state, ppid, pgrp, session, tty_nr, tpgid, flags, ...
        if end < 0 or len(fields) < 7 or fields[0] == "Z" or int(fields[6]) & PF_KTHREAD:
            continue
        try:
            exe = os.readlink(f"{root}/{name}/exe")
        except OSError:  # exited, or not ours to read (no CAP_SYS_PTRACE)
            exe = ""
        found[int(name)] = Proc(int(name), int(fields[1]), stat[stat.find("(") + 1: end], exe.removesuffix(" (deleted)"))
    return found


class ProcessTable:
    """The user processes, kept from scan to scan for `--comm` and `--exe`, which look at every process
    on the node every 2 s: each scan lists /proc (a directory read, under 1 ms) and reads only the
    processes that are new since the one before; every `rescan_s` all are read again. A process's name and
    executable change when it execs (an entrypoint script's `exec server`), its parent when it is
    reparented, and a PID can be reused between two scans: each is seen within `rescan_s`, while a new
    process is within one scan. On a node of 1,000 processes: a full read (40 ms of CPU) every 10 s and a
    listing (2.4 ms) every 2 s, 0.5% of a CPU (a full read every 2 s: 2%; bench/process_scan.py)."""

    def __init__(self, proc: Path = Path("/proc"), rescan_s: float = RESCAN_ALL_EVERY_S, clock=time.monotonic):
        self.proc, self.rescan_s, self.clock = proc, rescan_s, clock
        self.procs: dict = {}  # pid -> Proc: the user processes of the last scan
        self.listed: set = set()  # every PID the last scan listed (kernel threads and zombies too)
        self.next_full = -math.inf

    def scan(self) -> dict:
        """{pid: Proc}, as processes() would say now (up to rescan_s old for a process already known)."""
        listed = {int(name) for name in os.listdir(self.proc) if name.isdigit()}
        now = self.clock()
        if now >= self.next_full:
            self.procs, self.next_full = processes(self.proc, only=sorted(listed)), now + self.rescan_s
        else:
            self.procs = {pid: p for pid, p in self.procs.items() if pid in listed}
            self.procs.update(processes(self.proc, only=sorted(listed - self.listed)))
        self.listed = listed
        return dict(self.procs)


def matches(selector: Selector, procs: dict) -> list:
    """The PIDs selector matches now, in order. With --comm/--exe, a process whose parent matches too is
    left out (nginx's workers share their master's name: the master is the target, with --children)."""
    if selector.kind == "pid":
        pid = int(selector.value)
        return [pid] if pid in procs else []

    def hit(p: Proc) -> bool:
        return p.comm == selector.value if selector.kind == "comm" else p.exe == selector.value

    return sorted(pid for pid, p in procs.items() if hit(p) and not (p.ppid in procs and hit(procs[p.ppid])))
