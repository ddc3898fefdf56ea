"""`spinscope exporter`: spinscope's signals of running servers, served to Prometheus.

One collector per target streams a line a second (spinscope.live.stream, docs/live.md); the exporter keeps the
latest line of each and, at each scrape, writes what it holds in Prometheus's exposition format through
prometheus_client (a custom collector: nothing is counted twice, nothing kept per scrape). Names follow
Prometheus's conventions: the prefix `spinscope_`, base units (seconds, bytes), `_total` on counters. No
series is per thread id: threads are summed by target, thread name and role, so a pool of 500 workers is
one series per signal. The per-request histograms are the kernel's log2 buckets as Prometheus buckets
(`le` = 2^k - 1). The labels (write-spin, spurious select, handoff overhead) are judged every few seconds
over the last `--window` seconds and exported as a gauge with their name and severity; the findings
(busy-polling, write-wait: not problems by themselves) as a gauge of their own with their name.

Targets: `--pid` (repeatable) once; `--comm NAME` and `--exe PATH` every process that matches, now and
later (a server that restarts is picked up again), one collector each; `--cgroup PATH` every process in a
cgroup v2 (a systemd unit, a pod) by one collector, its series labelled with the cgroup's name and no pid,
waiting for the cgroup while it does not exist. A target that exits (a cgroup removed) is dropped: its
series go.
The endpoint (plain, or TLS and basic auth from `--web-config`: spinscope.web.config) is spinscope.web.server's.
What a scrape writes (`METRICS`, every family, which the dashboard and alert rules in deploy/ are tested
against; a target's line turned into samples) is spinscope.live.exposition's; this module runs the verb:
its options, the targets coming and going, the collectors' lines pumped in.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from spinscope.errors import SpinscopeError, UsageError
from spinscope.live.exposition import JUDGE_EVERY_S, View, ViewsCollector, auth_failures, judge, scaled, view_of
from spinscope.tracing import stacks_helper, targets

DEFAULT_PORT = targets.EXPORTER_PORT
DEFAULT_WINDOW_S = targets.EXPORTER_WINDOW_S
SCAN_EVERY_S = 2.0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("exporter")  # its help and description: cli.VERBS
    targets.add_options(p, targets.EXPORTER)
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to serve on (default {DEFAULT_PORT})")
    p.add_argument("--address", default="127.0.0.1",
                   help="address to serve on (default 127.0.0.1; 0.0.0.0 for every interface)")
    p.add_argument("--window", type=float, default=DEFAULT_WINDOW_S,
                   help=f"seconds the labels are judged over (default {DEFAULT_WINDOW_S:g})")
    p.add_argument("--duty", type=duty_cycle, metavar="ON/EVERY",
                   help="sample instead of tracing continuously: probes live ON seconds every EVERY seconds "
                   "(e.g. 10/60); counters are scaled by EVERY/ON and spinscope_sampled_ratio says ON/EVERY")
    p.add_argument("--web-config", metavar="FILE",
                   help="TLS and basic auth for the endpoint: a web configuration file as Prometheus's exporters "
                   "take it (exporter-toolkit's format, node_exporter's --web.config.file; docs/live.md)")
    p.add_argument("--quiet", "-q", action="store_true", help="only print errors")
    p.set_defaults(func=run)


def duty_cycle(text: str) -> tuple:
    """`ON/EVERY` seconds, 2 <= ON < EVERY <= 3600."""
    try:
        on, every = (float(part) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not ON/EVERY seconds (e.g. 10/60)") from None
    if not (math.isfinite(on) and math.isfinite(every) and 2 <= on < every <= 3600):
        raise argparse.ArgumentTypeError(f"{text!r}: need 2 <= ON < EVERY <= 3600 seconds")
    return on, every



# ---------------------------------------------------------------------------------------------------------
# Targets coming and going


@dataclass
class Tracked:
    selector: object  # live.Selector
    key: object  # the PID it traces, or the cgroup selector's text
    what: str  # "PID 123" or "cgroup /sys/fs/cgroup/x", for messages
    target_args: list  # the collector's target options
    live: object  # live.LiveCollector
    history: object  # live.History
    judged: float = 0.0
    labels: list = field(default_factory=list)
    base: View | None = None  # --duty: the finished cycles, scaled
    last: View | None = None  # --duty: the running cycle's latest view, unscaled
    next_start: float = 0.0  # --duty: when the next cycle starts (live is None until then)
    runtime: object = None  # --stacks on a CPython, JVM or Node target: its stacks helper (stacks_helper.LiveStacks)
    runtime_state: str = ""  # the helper's state last said


class Exporter:
    def __init__(self, args: argparse.Namespace, say):
        from spinscope.live import stream as live
        from spinscope.live.stream import Selector

        self.args = args
        self.say = say
        self.selectors = ([Selector("pid", str(pid), args.children) for pid in args.pid]
                          + [Selector("comm", name, args.children) for name in args.comm]
                          + [Selector("exe", path, args.children) for path in args.exe]
                          + [Selector("cgroup", str(path)) for path in args.cgroup])
        self.process_table = live.ProcessTable()  # --comm, --exe, --children: every process, kept between scans
        self.tracked: dict = {}  # key (a PID, or a cgroup selector's text) -> Tracked
        self.views: dict = {}  # key -> View
        self.matched: dict = {s.text: 0 for s in self.selectors}
        self.done: set = set()  # keys that ended or failed: not attached again while they exist
        self.waiting: set = set()  # selectors we have said match nothing
        self.attached: set = set()  # selectors that have had a target
        self.lock = threading.Lock()
        self.stopping = False

    def snapshot(self) -> tuple:
        with self.lock:
            return list(self.views.values()), dict(self.matched)

    def scan(self) -> None:
        from spinscope.live import stream as live

        # PIDs alone (no --children, whose descendants are looked up): only their processes can match.
        by_pid = not self.args.children and all(s.kind in ("pid", "cgroup") for s in self.selectors)
        procs = (live.processes(only=[int(s.value) for s in self.selectors if s.kind == "pid"]) if by_pid
                 else self.process_table.scan())
        cgroups = {s.text for s in self.selectors if s.kind == "cgroup" and Path(s.value).is_dir()}
        self.done &= set(procs) | cgroups  # a pid that is gone may be reused by a new match, a cgroup made again
        for selector in self.selectors:
            if selector.kind == "cgroup":
                self._scan_cgroup(selector, selector.text in cgroups)
            else:
                self._scan_processes(selector, procs)

    def _scan_processes(self, selector, procs: dict) -> None:
        """A --pid, --comm or --exe selector: the processes it matches counted, the new ones attached; one
        that matches none is said once (a PID that has gone, differently: it does not come back)."""
        from spinscope.live import stream as live

        pids = live.matches(selector, procs)
        owned = [pid for pid, t in self.tracked.items() if t.selector.text == selector.text]
        with self.lock:
            self.matched[selector.text] = len(set(pids) | set(owned))
        fresh = [pid for pid in pids if pid not in self.tracked and pid not in self.done
                 and not self._inside_target(pid, procs)]
        if not pids and not owned:
            if selector.text not in self.waiting:
                self.say(f"{selector.text}: its process has exited, and a PID does not come back (--comm or "
                         "--exe follow restarts)" if selector.text in self.attached and not selector.can_return
                         else f"{selector.text} matches no process; waiting for one")
                self.waiting.add(selector.text)
            return
        self.waiting.discard(selector.text)
        for pid in fresh:
            proc = procs.get(pid)
            self.attach(selector, pid, f"PID {pid}", f" ({proc.comm if proc else '?'})")

    def _scan_cgroup(self, selector, exists: bool) -> None:
        key = selector.text
        with self.lock:
            self.matched[key] = int(exists or key in self.tracked)
        if not exists and key not in self.tracked:
            if key not in self.waiting:
                self.say(f"{key}: no such cgroup{' any more' if key in self.attached else ''}; waiting for it")
                self.waiting.add(key)
            return
        self.waiting.discard(key)
        if exists and key not in self.tracked and key not in self.done:
            self.attach(selector, key, f"cgroup {selector.value}", "")

    def _inside_target(self, pid: int, procs: dict) -> bool:
        """Whether pid descends from a target traced with --children (its threads are counted there)."""
        if not self.args.children:
            return False
        seen = 0
        while pid in procs and seen < 64:
            pid = procs[pid].ppid
            if pid in self.tracked:
                return True
            seen += 1
        return False

    def _start(self, target_args: list, runtime=None):
        from spinscope.live import stream as live

        on = self.args.duty[0] if self.args.duty else None
        stream = live.LiveCollector(target_args, duration=on, extra=("--quiet", *targets.stacks_args(self.args),
                                                                     *(runtime.collector_args() if runtime else ())))
        stream.wait_ready()
        return stream

    def attach(self, selector, key, what: str, detail: str) -> None:
        from spinscope.live import stream as live

        target_args = selector.collector_args(key if selector.kind != "cgroup" else None)
        # The runtime stacks helper loads (about 2 s) while the collector attaches; it is stopped after the collector.
        runtime = (stacks_helper.LiveStacks.start(key, self.args.stacks, self.args.children, self.args.window,
                                                  duty=bool(self.args.duty))
                   if self.args.stacks and selector.kind != "cgroup" else None)
        try:
            stream = self._start(target_args, runtime)
        except SpinscopeError as exc:
            if runtime:
                runtime.close()
            self.say(f"{selector.text}: {what} not traced: {exc}")
            self.done.add(key)
            return
        if runtime:
            runtime.wait()
        duty = f", {self.args.duty[0]:g} s every {self.args.duty[1]:g} s" if self.args.duty else ""
        self.say(f"{selector.text}: tracing {what}{detail}{duty}")
        if runtime:
            self.say(f"{selector.text}: {what}: {runtime.note()}")
        self.attached.add(selector.text)
        self.tracked[key] = Tracked(selector, key, what, target_args, stream, live.History(self.args.window),
                                    next_start=time.monotonic() + (self.args.duty[1] if self.args.duty else 0),
                                    runtime=runtime, runtime_state=runtime.state if runtime else "")

    def cycle(self) -> None:
        """--duty: start the next cycle of the targets whose probes are off, once it is time."""
        from spinscope.live import stream as live

        now = time.monotonic()
        for t in list(self.tracked.values()):
            if t.live is not None or now < t.next_start:
                continue
            try:
                t.live = self._start(t.target_args)
            except SpinscopeError as exc:
                self.drop(t, live.Ended(1, None, [f"x: error: {exc}"]))
                continue
            t.history = live.History(self.args.window)
            t.next_start = now + self.args.duty[1]

    def pump(self) -> None:
        """Take the lines that arrived: new views, labels every JUDGE_EVERY_S, ended targets dropped."""
        import queue

        from spinscope.live.stream import Ended

        for key, t in list(self.tracked.items()):
            latest = None
            while t.live is not None:
                try:
                    item = t.live.lines.get_nowait()
                except queue.Empty:
                    break
                if isinstance(item, Ended) and self.args.duty and item.end_reason == "duration":
                    t.live.close()  # the cycle's probes are off until t.next_start
                    t.live = None
                    on, period = self.args.duty
                    if latest is not None:  # the cycle's final line
                        t.last = view_of(latest.capture, t.selector.text, t.labels, sampled=on / period,
                                         stacks_helper=self._runtime(t))
                        latest = None
                    if t.last is not None:
                        t.base = scaled(t.base, t.last, period / on)
                        t.last = None
                        with self.lock:
                            self.views[key] = t.base
                    break
                if isinstance(item, Ended):
                    self.drop(t, item)
                    latest = None
                    break
                t.history.add(item)
                latest = item
            if latest is None:
                continue
            helper = self._runtime(t)
            now = time.monotonic()
            if now - t.judged >= JUDGE_EVERY_S:
                span = t.history.span(t.runtime)
                t.labels = judge(span) if span is not None else []
                t.judged = now
            view = view_of(latest.capture, t.selector.text, t.labels, stacks_helper=helper)
            if self.args.duty:
                on, period = self.args.duty
                view.sampled = on / period
                t.last = view
                view = scaled(t.base, view, period / on)
            with self.lock:
                self.views[key] = view

    def _runtime(self, t: Tracked) -> tuple | None:
        """The target's stacks helper's batches taken; (runtime, why not or "") for its metric, a change said."""
        if t.runtime is None:
            return None
        t.runtime.take()
        if t.runtime.state != t.runtime_state:
            t.runtime_state = t.runtime.state
            self.say(f"{t.selector.text}: {t.what}: {t.runtime.note()}")
        return t.runtime.runtime, t.runtime.state

    def drop(self, t: Tracked, ended) -> None:
        reason = {"target-exited": "was removed" if t.selector.kind == "cgroup" else "exited"}.get(
            ended.end_reason or "", f"ended ({ended.end_reason or 'collector failed'})")
        error = next((line.split(": error: ", 1)[1] for line in reversed(ended.stderr) if ": error: " in line), "")
        self.say(f"{t.selector.text}: {t.what} {reason}{': ' + error if error else ''}; its series are dropped")
        if t.live is not None:
            t.live.close()
        if t.runtime is not None:
            t.runtime.close()
        with self.lock:
            self.tracked.pop(t.key, None)
            self.views.pop(t.key, None)
        self.done.add(t.key)

    def stop(self) -> None:
        for t in list(self.tracked.values()):
            if t.live is not None:
                t.live.close()
            if t.runtime is not None:
                t.runtime.close()
        self.tracked.clear()


def check_options(args: argparse.Namespace) -> None:
    targets.check(args, targets.EXPORTER)
    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be in 1..65535, not {args.port}")
    if not math.isfinite(args.window) or args.window < 2:
        raise UsageError(f"--window must be at least 2 seconds, not {args.window:g}")
    args.web = None
    if args.web_config is not None:  # read, certificates loaded, hashes parsed: a bad file is one line
        from spinscope.web import config as webconfig

        args.web = webconfig.load(args.web_config)


def run(args: argparse.Namespace) -> int:
    check_options(args)
    from prometheus_client import CollectorRegistry, ProcessCollector

    from spinscope.tracing import collector

    from spinscope.web import server as webserver

    def say(message: str) -> None:
        if not args.quiet:
            print(f"spinscope exporter: {message}", file=sys.stderr, flush=True)

    if collector.find() is None:
        raise SpinscopeError(collector.not_found_message())
    exporter = Exporter(args, say)
    registry = CollectorRegistry()
    registry.register(ViewsCollector(exporter))
    ProcessCollector(registry=registry)  # the exporter's own CPU and memory, as process_*
    def tell(message: str) -> None:  # the web config loaded again, or refused: said even with --quiet
        print(f"spinscope exporter: {message}", file=sys.stderr, flush=True)

    web = args.web
    try:  # before anything is attached: a port in use is the whole error
        server = webserver.serve(args.address, args.port, registry, web, tell, auth_failures=auth_failures())
    except OSError as exc:
        raise SpinscopeError(f"cannot serve on {args.address}:{args.port}: {exc.strerror or exc}") from None
    say(f"serving {webserver.url(args.address, args.port, web)}" + (f" ({web.describe()})" if web else ""))

    stop = threading.Event()

    def on_signal(signum, _frame):
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        next_scan = 0.0
        while not stop.is_set():
            if time.monotonic() >= next_scan:
                exporter.scan()
                next_scan = time.monotonic() + SCAN_EVERY_S
            exporter.pump()
            if args.duty:
                exporter.cycle()
            stop.wait(0.2)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        exporter.stop()
        server.shutdown()
        server.server_close()
        say("stopped")
    return 0
