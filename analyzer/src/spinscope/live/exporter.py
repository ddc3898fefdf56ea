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
The endpoint (plain, or TLS and basic auth from `--web-config`: webconfig.py) is spinscope.web.server's.
`METRICS` lists every family the exporter writes; the dashboard and alert rules in deploy/ are tested
against it.
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

from spinscope.tracing import targets
from spinscope.errors import SpinscopeError, UsageError

DEFAULT_PORT = targets.EXPORTER_PORT
DEFAULT_WINDOW_S = targets.EXPORTER_WINDOW_S
JUDGE_EVERY_S = 5.0
SCAN_EVERY_S = 2.0
WRITES_LE_MAX = 20  # writes per request buckets: le = 0, 1, 3, ..., 2^20 - 1, +Inf
DURATION_K = range(10, 37)  # request-time buckets: le = (2^k - 1) ns for k in 10..36 (1 us to 69 s), +Inf

PROCESS = ("pid", "process")
GROUP = ("pid", "process", "thread", "role")


@dataclass(frozen=True)
class Family:
    name: str  # without _total for counters (prometheus_client adds it)
    kind: str  # counter, gauge, histogram
    help: str
    labels: tuple
    when: str = ""  # written only then (a configuration that adds it); "": always, by families()


METRICS = (
    Family("spinscope_targets", "gauge", "Processes being traced.", ()),
    Family("spinscope_selector_matches", "gauge", "Processes a target option matches now.", ("selector",)),
    Family("spinscope_target_info", "gauge", "A traced process: its executable and the option that selected it.",
           (*PROCESS, "exe", "selector")),
    Family("spinscope_traced_seconds", "counter", "Seconds the probes have been live on the target.", PROCESS),
    Family("spinscope_sampled_ratio", "gauge", "Share of the time the probes are live (1: continuous).", PROCESS),
    Family("spinscope_requests", "counter", "Requests answered (a read burst, then at least one write).", PROCESS),
    Family("spinscope_request_writes", "histogram", "Socket write calls per request.", PROCESS),
    Family("spinscope_request_duration_seconds", "histogram",
           "Request time: first read returned to last write returned.", PROCESS),
    Family("spinscope_drops", "counter", "Entries the probes could not record, a map being full.", (*PROCESS, "kind")),
    Family("spinscope_label", "gauge", "A verdict over the last window: 1 while it holds.",
           (*PROCESS, "label", "severity")),
    Family("spinscope_label_cost_ratio", "gauge",
           "A verdict's measured cost: share of the involved threads' CPU (or of request time).", (*PROCESS, "label")),
    Family("spinscope_finding", "gauge",
           "A finding over the last window (not a problem by itself: busy-polling, write-wait): 1 while it holds.",
           (*PROCESS, "finding")),
    Family("spinscope_threads", "gauge", "Live threads in the group.", GROUP),
    Family("spinscope_responses", "counter", "Requests whose first response write the group made.", GROUP),
    Family("spinscope_socket_writes", "counter", "Socket write calls by result.", (*GROUP, "result")),
    Family("spinscope_socket_write_bytes", "counter", "Bytes socket writes moved.", GROUP),
    Family("spinscope_socket_reads", "counter", "Socket read calls by result.", (*GROUP, "result")),
    Family("spinscope_socket_read_bytes", "counter", "Bytes socket reads moved.", GROUP),
    Family("spinscope_write_retries", "counter",
           "Socket writes retried without waiting for writability, by what they retried: an EAGAIN (the spin) "
           "or a partial write.", (*GROUP, "after")),
    Family("spinscope_write_retry_cpu_seconds", "counter",
           "On-CPU time of the retries' whole cycles (previous write's return to the retry's return).", GROUP),
    Family("spinscope_polls", "counter", "Poll-family calls (epoll_wait, poll, select) by outcome.",
           (*GROUP, "outcome")),
    Family("spinscope_poll_nowait_calls", "counter", "Poll calls with a zero timeout (checks, not waits).", GROUP),
    Family("spinscope_empty_poll_cpu_seconds", "counter",
           "On-CPU time in polls that returned nothing and in reads that returned EAGAIN.", GROUP),
    Family("spinscope_accepts", "counter", "accept and accept4 calls by result (eagain: nothing to take).",
           (*GROUP, "result")),
    Family("spinscope_futile_wakeups", "counter",
           "Poll wakeups whose ready descriptors gave nothing (a herd: another waiter took it).", GROUP),
    Family("spinscope_futex_waits", "counter", "futex wait calls.", GROUP),
    Family("spinscope_futex_wait_seconds", "counter", "Time spent in futex waits (wall).", GROUP),
    Family("spinscope_context_switches", "counter", "Context switches away from the group's threads.",
           (*GROUP, "kind")),
    Family("spinscope_wakeups", "counter",
           "Wakeups of the target's own threads the group made, by mechanism (handoffs: all but mm and exit).",
           (*GROUP, "mechanism")),
    Family("spinscope_handoff_wait_seconds", "counter", "Wake-to-run latency of the handoffs the group received.",
           GROUP),
    Family("spinscope_handoff_cpu_seconds", "counter", "On-CPU time in the calls that hand off or are handed to.",
           GROUP),
    Family("spinscope_runqueue_wait_seconds", "counter", "Time runnable but waiting for a CPU.", GROUP),
    Family("spinscope_cpu_seconds", "counter", "Time on CPU while traced.", GROUP),
    Family("spinscope_exporter_auth_failures", "counter",
           "Requests refused for their basic-auth credentials (401): missing (none, or not Basic), wrong (an "
           "unknown user or a wrong password).", ("reason",), when="--web-config with basic_auth_users"),
)
FAMILIES = {family.name: family for family in METRICS}


def sample_names(conditional: bool = True) -> set:
    """Every sample name the exposition can hold (counters' _total, histograms' _bucket/_sum/_count);
    without `conditional`, only those of the families always written (Family.when empty)."""
    names = set()
    for family in METRICS:
        if family.when and not conditional:
            continue
        if family.kind == "counter":
            names.add(family.name + "_total")
        elif family.kind == "histogram":
            names |= {family.name + suffix for suffix in ("_bucket", "_sum", "_count")}
        else:
            names.add(family.name)
    return names


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
# What a target's latest line says, ready for a scrape


@dataclass
class View:
    """A target as the next scrape shows it: computed when a line arrives, read by the scrape thread."""

    pid: int  # 0 for a cgroup target (its processes are summed; `process` is the cgroup's name)
    process: str
    exe: str
    selector: str
    traced_s: float
    sampled: float
    requests: dict  # the request sums and `hist` (Capture.requests, Capture.request_hists)
    drops: dict
    groups: list  # [(thread name, role, live threads, {counter: value})]
    labels: list = field(default_factory=list)  # [(name, severity, cost share or None)]; findings: severity None


def view_of(cap, selector: str, labels: list, sampled: float = 1.0) -> View:
    """The View of a capture (the stream's latest line): threads summed by name and role."""
    from spinscope.analysis.capture import COUNTERS
    from spinscope.analysis.roles import infer_roles

    roles = infer_roles(cap.threads, cap.request_count)
    by_group: dict = {}
    for tid, thread in cap.threads.items():
        by_group.setdefault((thread["comm"], roles[tid]), []).append(thread)
    groups = []
    for (comm, role), group in sorted(by_group.items()):
        sums = {key: sum(thread[key] for thread in group) for key in COUNTERS}
        groups.append((comm, role, sum(thread["alive"] for thread in group), sums))
    return View(pid=cap.target_pid, process=cap.target_comm, exe=cap.target_exe,
                selector=selector, traced_s=cap.duration_s, sampled=sampled,
                requests={**cap.requests, "hist": cap.request_hists}, drops=cap.drops, groups=groups,
                labels=labels)


def scaled(base: View | None, cur: View, factor: float) -> View:
    """base + cur x factor: a duty-cycled target's counters, every finished cycle's counts scaled to the
    whole period they stand for (the probes were live `1 / factor` of it). traced_s is not scaled."""
    def add(a, b):
        if isinstance(b, dict):
            return {k: add(a.get(k, 0) if isinstance(a, dict) else 0, v) for k, v in b.items()}
        if isinstance(b, list):
            a = a if isinstance(a, list) else []
            return [add(a[i] if i < len(a) else 0, v) for i, v in enumerate(b)] + a[len(b):]
        return (a or 0) + b * factor if isinstance(b, (int, float)) and not isinstance(b, bool) else b

    groups = {(comm, role): (0, counters) for comm, role, _, counters in (base.groups if base else [])}
    for comm, role, alive, counters in cur.groups:
        groups[(comm, role)] = (alive, add(groups.get((comm, role), (0, {}))[1], counters))
    return View(pid=cur.pid, process=cur.process, exe=cur.exe, selector=cur.selector,
                traced_s=(base.traced_s if base else 0.0) + cur.traced_s, sampled=cur.sampled,
                requests=add(base.requests if base else {}, cur.requests),
                drops=add(base.drops if base else {}, cur.drops),
                groups=[(comm, role, alive, counters) for (comm, role), (alive, counters) in sorted(groups.items())],
                labels=cur.labels)


def judge(span) -> list:
    """[(name, severity, cost share)] of the labels over a window capture, then the findings (severity None)."""
    from spinscope.analysis.labels import assess
    from spinscope.analysis.metrics import analyze

    assessment = assess(analyze(span))
    return ([(label.name, label.severity, label.cost_share) for label in assessment.labels]
            + [(finding.name, None, finding.cpu_share) for finding in assessment.findings])


def _log2_buckets(hist: list, ks, scale: float = 1.0) -> list:
    """Cumulative Prometheus buckets from a log2 histogram (bucket 0: value 0; bucket k: [2^(k-1), 2^k - 1]):
    one per k in ks with le = (2^k - 1) * scale, then +Inf."""
    out, running, i = [], 0, 0
    for k in ks:
        while i <= k and i < len(hist):
            running += hist[i]
            i += 1
        out.append((_le((2**k - 1) * scale), running))
    out.append(("+Inf", sum(hist)))
    return out


def _le(value: float) -> str:
    return f"{int(value)}.0" if value == int(value) else format(value, ".10g")


def families(views: list, selectors: dict):
    """The metric families for the current views; `selectors`: {selector text: processes matched now}."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

    made = {}
    for family in (f for f in METRICS if not f.when):
        cls = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily, "histogram": HistogramMetricFamily}[family.kind]
        made[family.name] = cls(family.name, family.help, labels=list(family.labels))

    def add(name: str, labels: tuple, value: float) -> None:
        made[name].add_metric([str(v) for v in labels], value)

    add("spinscope_targets", (), len(views))
    for text, count in selectors.items():
        add("spinscope_selector_matches", (text,), count)
    for v in views:
        proc = (v.pid or "", v.process)
        _process_samples(made, add, v, proc)
        for comm, role, alive, c in v.groups:
            add("spinscope_threads", (*proc, comm, role), alive)
            _group_samples(add, (*proc, comm, role), c)
    return list(made.values())


def _process_samples(made: dict, add, v, proc: tuple) -> None:
    """A view's samples labelled by its process: what it is, its requests, drops, labels and findings."""
    add("spinscope_target_info", (*proc, v.exe, v.selector), 1)
    add("spinscope_traced_seconds", proc, v.traced_s)
    add("spinscope_sampled_ratio", proc, v.sampled)
    add("spinscope_requests", proc, v.requests["count"])
    hist = v.requests["hist"]
    made["spinscope_request_writes"].add_metric(
        [str(x) for x in proc], _log2_buckets(hist["write_calls"], range(0, WRITES_LE_MAX + 1)),
        sum_value=v.requests["write_calls"])
    made["spinscope_request_duration_seconds"].add_metric(
        [str(x) for x in proc], _log2_buckets(hist["duration_ns"], DURATION_K, 1e-9),
        sum_value=v.requests["duration_ns"] / 1e9)
    for kind, count in v.drops.items():
        add("spinscope_drops", (*proc, kind), count)
    for name, severity, share in v.labels:
        if severity is None:
            add("spinscope_finding", (*proc, name), 1)
            continue
        add("spinscope_label", (*proc, name, severity), 1)
        if share is not None:
            add("spinscope_label_cost_ratio", (*proc, name), share)


def _group_samples(add, g: tuple, c) -> None:
    """The samples of one (process, comm, role) group of threads, from its counters (the quantities as
    spinscope.analysis.counters defines them)."""
    from spinscope.analysis import counters as counts

    add("spinscope_responses", g, c["responses_written"])
    for result, value in counts.writes_by_result(c).items():
        add("spinscope_socket_writes", (*g, result), value)
    add("spinscope_socket_write_bytes", g, c["write_bytes"])
    for result, value in counts.reads_by_result(c).items():
        add("spinscope_socket_reads", (*g, result), value)
    add("spinscope_socket_read_bytes", g, c["read_bytes"])
    add("spinscope_write_retries", (*g, "eagain"), counts.eagain_retries(c))
    add("spinscope_write_retries", (*g, "partial"), counts.partial_retries(c))
    add("spinscope_write_retry_cpu_seconds", g, c["write_spin_ns"] / 1e9)
    for outcome, value in counts.polls_by_outcome(c).items():
        add("spinscope_polls", (*g, outcome), value)
    add("spinscope_poll_nowait_calls", g, c["poll_nowait"])
    add("spinscope_empty_poll_cpu_seconds", g, counts.empty_poll_ns(c) / 1e9)
    for result, value in counts.accepts_by_result(c).items():
        add("spinscope_accepts", (*g, result), value)
    add("spinscope_futile_wakeups", g, counts.herd_wakeups(c))
    add("spinscope_futex_waits", g, c["futex_waits"])
    add("spinscope_futex_wait_seconds", g, c["futex_wait_ns"] / 1e9)
    add("spinscope_context_switches", (*g, "voluntary"), c["cs_voluntary"])
    add("spinscope_context_switches", (*g, "involuntary"), c["cs_involuntary"])
    for mechanism, value in counts.wakeups_by_mechanism(c).items():
        add("spinscope_wakeups", (*g, mechanism), value)
    add("spinscope_handoff_wait_seconds", g, c["wakeup_wait_ns"] / 1e9)
    add("spinscope_handoff_cpu_seconds", g, c["handoff_oncpu_ns"] / 1e9)
    add("spinscope_runqueue_wait_seconds", g, c["runq_ns"] / 1e9)
    add("spinscope_cpu_seconds", g, c["oncpu_ns"] / 1e9)


class ViewsCollector:
    """prometheus_client's custom collector: the exporter's views at the moment of the scrape."""

    def __init__(self, exporter: "Exporter"):
        self.exporter = exporter

    def describe(self):
        return []  # nothing to check at registration: the families depend on the targets

    def collect(self):
        views, selectors = self.exporter.snapshot()
        return families(views, selectors)


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

    def _start(self, target_args: list):
        from spinscope.live import stream as live

        on = self.args.duty[0] if self.args.duty else None
        stream = live.LiveCollector(target_args, duration=on, extra=("--quiet",))
        stream.wait_ready()
        return stream

    def attach(self, selector, key, what: str, detail: str) -> None:
        from spinscope.live import stream as live

        target_args = selector.collector_args(key if selector.kind != "cgroup" else None)
        try:
            stream = self._start(target_args)
        except SpinscopeError as exc:
            self.say(f"{selector.text}: {what} not traced: {exc}")
            self.done.add(key)
            return
        duty = f", {self.args.duty[0]:g} s every {self.args.duty[1]:g} s" if self.args.duty else ""
        self.say(f"{selector.text}: tracing {what}{detail}{duty}")
        self.attached.add(selector.text)
        self.tracked[key] = Tracked(selector, key, what, target_args, stream, live.History(self.args.window),
                                    next_start=time.monotonic() + (self.args.duty[1] if self.args.duty else 0))

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
                        t.last = view_of(latest.capture, t.selector.text, t.labels, sampled=on / period)
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
            now = time.monotonic()
            if now - t.judged >= JUDGE_EVERY_S:
                span = t.history.span()
                t.labels = judge(span) if span is not None else []
                t.judged = now
            view = view_of(latest.capture, t.selector.text, t.labels)
            if self.args.duty:
                on, period = self.args.duty
                view.sampled = on / period
                t.last = view
                view = scaled(t.base, view, period / on)
            with self.lock:
                self.views[key] = view

    def drop(self, t: Tracked, ended) -> None:
        reason = {"target-exited": "was removed" if t.selector.kind == "cgroup" else "exited"}.get(
            ended.end_reason or "", f"ended ({ended.end_reason or 'collector failed'})")
        error = next((line.split(": error: ", 1)[1] for line in reversed(ended.stderr) if ": error: " in line), "")
        self.say(f"{t.selector.text}: {t.what} {reason}{': ' + error if error else ''}; its series are dropped")
        if t.live is not None:
            t.live.close()
        with self.lock:
            self.tracked.pop(t.key, None)
            self.views.pop(t.key, None)
        self.done.add(t.key)

    def stop(self) -> None:
        for t in list(self.tracked.values()):
            if t.live is not None:
                t.live.close()
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
        raise SpinscopeError("collector not found; build it with `make`")
    exporter = Exporter(args, say)
    registry = CollectorRegistry()
    registry.register(ViewsCollector(exporter))
    ProcessCollector(registry=registry)  # the exporter's own CPU and memory, as process_*
    def tell(message: str) -> None:  # the web config loaded again, or refused: said even with --quiet
        print(f"spinscope exporter: {message}", file=sys.stderr, flush=True)

    web = args.web
    try:  # before anything is attached: a port in use is the whole error
        server = webserver.serve(args.address, args.port, registry, web, tell)
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
