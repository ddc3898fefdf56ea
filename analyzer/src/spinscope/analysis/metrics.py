"""Per-request, per-call and per-second metrics, for the process, each thread and each interval.

One function, `derive`, turns a set of counters into every metric, so the whole capture, a thread and an
interval snapshot are measured the same way (diff compares whole-capture values and judges noise on the
interval values). The one deliberate difference: for the whole process the write metrics per request come
from the `requests` block (writes owned by a request), while threads and intervals only have the raw
socket write counters (which also hold unattributed writes such as greetings or client sockets).

Handoffs are the wakeups between the target's own threads made deliberately (inside a futex call, a
write to a pipe, eventfd or socket, or any other syscall), not the ones made by memory-map calls (lock
contention) or by a thread's exit. CPU shares (`*_cpu_share`) are measured on-CPU time inside those calls
over on-CPU time.

A metric that cannot be computed (no requests, no poll calls, zero duration) is None, never 0: reports
say "n/a" and explain why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from spinscope.analysis import counters
from spinscope.analysis.capture import Capture
from spinscope.analysis.counters import NOT_HANDOFFS, handoffs
from spinscope.analysis.roles import WORKER, infer_roles
from spinscope.analysis.schema import SCHEMA

PER_REQUEST = "per request"
PER_CALL = "ratio"
CPU_SHARE = "share of CPU"
PER_SECOND = "per second"

# Intervals shorter than this share of the nominal interval (the final, cut-short one) are left out of
# the per-interval series: their per-second rates are too noisy to describe the run-to-run spread.
MIN_INTERVAL_SHARE = 0.5


@dataclass(frozen=True)
class Metric:
    name: str
    phrase: str  # how a verdict names it: "+3.9 handoffs per request"
    kind: str
    higher_is_better: bool = False
    relative: bool = False  # changes read better as a percentage (times, rates) than as a difference
    percent: bool = False  # the value is a share of calls, shown as a percentage
    unit: str = ""  # for values whose phrase does not say it: "ms per request"


METRICS = (
    Metric("writes_per_request", "writes per request", PER_REQUEST),
    Metric("eagain_per_request", "EAGAIN writes per request", PER_REQUEST),
    Metric("partial_writes_per_request", "partial writes per request", PER_REQUEST),
    Metric("eagain_retries_per_request", "retries of an EAGAIN without waiting per request", PER_REQUEST),
    Metric("partial_retries_per_request", "writes after a partial write without waiting per request", PER_REQUEST),
    Metric("write_waits_per_request", "waits for writability per request", PER_REQUEST),
    Metric("reads_per_request", "reads per request", PER_REQUEST),
    Metric("polls_per_request", "poll calls per request", PER_REQUEST),
    Metric("handoffs_per_request", "handoffs per request", PER_REQUEST),
    Metric("contention_wakeups_per_request", "mm-lock wakeups per request", PER_REQUEST),
    Metric("handoff_wait_ms_per_request", "handoff wake-to-run wait", PER_REQUEST, relative=True,
           unit="ms per request"),
    Metric("cs_per_request", "context switches per request", PER_REQUEST),
    Metric("futex_waits_per_request", "futex waits per request", PER_REQUEST),
    Metric("futex_ms_per_request", "futex wait in requests", PER_REQUEST, relative=True, unit="ms per request"),
    Metric("runq_ms_per_request", "run-queue wait", PER_REQUEST, relative=True, unit="ms per request"),
    Metric("cpu_ms_per_request", "CPU per request", PER_REQUEST, relative=True, unit="ms per request"),
    Metric("request_ms", "request time", PER_REQUEST, relative=True, unit="ms"),
    Metric("cross_thread_share", "share of requests answered by another thread", PER_CALL, percent=True),
    Metric("poll_zero_fraction", "zero-event poll share", PER_CALL, percent=True),
    Metric("poll_nowait_fraction", "zero-timeout poll share", PER_CALL, percent=True),
    Metric("events_per_poll", "events per poll call", PER_CALL, higher_is_better=True),
    Metric("read_eagain_fraction", "EAGAIN read share", PER_CALL, percent=True),
    Metric("spin_cpu_share", "CPU retrying writes without waiting", CPU_SHARE, percent=True),
    Metric("empty_poll_cpu_share", "CPU in wakeups that found nothing", CPU_SHARE, percent=True),
    Metric("handoff_cpu_share", "CPU in calls that hand off or are handed to", CPU_SHARE, percent=True),
    Metric("requests_per_s", "requests/s", PER_SECOND, higher_is_better=True, relative=True),
    Metric("writes_per_s", "writes/s", PER_SECOND, relative=True),
    Metric("reads_per_s", "reads/s", PER_SECOND, relative=True),
    Metric("polls_per_s", "poll calls/s", PER_SECOND, relative=True),
    Metric("cs_per_s", "context switches/s", PER_SECOND, relative=True),
    Metric("handoffs_per_s", "handoffs/s", PER_SECOND, relative=True),
    Metric("futex_waits_per_s", "futex waits/s", PER_SECOND, relative=True),
    Metric("cpus_busy", "CPU use", PER_SECOND, relative=True, unit="CPUs"),
)
METRIC_BY_NAME = {metric.name: metric for metric in METRICS}


@dataclass(frozen=True)
class Drop:
    """A kind of entry the probes could not create because a BPF map was full (the capture's `drops`,
    docs/capture-format.md), and what its absence does to the numbers."""

    key: str  # drops.<key>
    lost: str  # what was not recorded, after the count: "812 events of threads the threads map had no room for"
    effect: str  # what that does to the numbers
    metrics: tuple  # the METRICS it makes unreliable
    remedy: str = ""


REQUEST_METRICS = (*(m.name for m in METRICS if m.kind == PER_REQUEST), "cross_thread_share", "requests_per_s")
DROPS = (
    Drop("threads", "events of threads the threads map had no room for", "every count is a lower bound, and every metric may be off",
         tuple(METRIC_BY_NAME), "record again with a larger --max-threads"),
    Drop("sockets", "socket reads the sockets map had no room for (their requests not followed)",
         "the request count is a lower bound, and the per-request metrics may be too high", REQUEST_METRICS,
         "record again with a larger --max-sockets"),
    Drop("wakeup_edges", "wakeups whose waker/wakee pair the wakeups map had no room for",
         "the handoff graph, who woke whom, is incomplete; the handoff counts are whole", ()),
    Drop("pids", "forked children not followed", "their threads are missing from every count, and every "
         "metric may be off", tuple(METRIC_BY_NAME)),
    Drop("exited", "exited threads whose counts were lost (16,384 gone in 0.1 s filled the exited map, and "
         "their tids were reused)", "every count is a lower bound, and every metric may be off",
         tuple(METRIC_BY_NAME)),
    Drop("execs", "execs not recorded", "a process may have changed program during the capture without "
         "target.execs saying so; the counts are whole", ()),
    Drop("listeners", "accept calls the listeners map had no room for (or whose process it could not note)",
         "the listeners' accept counts (and process counts) are lower bounds; the threads' counts are whole", ()),
)


def dropped(drops: Mapping[str, int]) -> list:
    """[(Drop, count)] for each kind of drop a capture had (Capture.drops), in DROPS order."""
    return [(drop, int(drops[drop.key])) for drop in DROPS if drops.get(drop.key)]


def drop_line(drop: Drop, count: int) -> str:
    """`812 events of threads the threads map had no room for (every count is a lower bound, ...); record
    again with ...`."""
    return f"{count:,} {drop.lost} ({drop.effect})" + (f"; {drop.remedy}" if drop.remedy else "")


def ratio(numerator: float, denominator: float) -> float | None:
    """numerator / denominator, or None when the denominator is zero (nothing to divide by)."""
    return float(numerator) / float(denominator) if denominator else None


def derive(c: Mapping[str, float], requests: float, seconds: float,
           request_sums: Mapping[str, float] | None = None, schema: int = SCHEMA) -> dict:
    """Every metric in METRICS from counters `c` (of a capture of `schema`), a request count and a
    duration. `request_sums` (the requests block) replaces the raw write counters for the write metrics
    per request when given, and gives the request times and cross-thread share (undefined without it)."""
    if request_sums is None:
        writes = {"write_calls": c["write_calls"], "write_eagain": c["write_eagain"],
                  "write_partial": c["write_partial"], "spin_retries": c["write_spin_retries"],
                  "spin_eagain": c["write_spin_eagain"],
                  "write_waited": c["write_waited"]}
    else:
        writes = request_sums

    def per_req(value: float) -> float | None:
        return ratio(value, requests)

    def per_s(value: float) -> float | None:
        return ratio(value, seconds)

    def share(ns: float) -> float | None:
        return ratio(ns, c["oncpu_ns"])

    switches = c["cs_voluntary"] + c["cs_involuntary"]
    count = request_sums["count"] if request_sums is not None else 0
    return {
        "writes_per_request": per_req(writes["write_calls"]),
        "eagain_per_request": per_req(writes["write_eagain"]),
        "partial_writes_per_request": per_req(writes["write_partial"]),
        "eagain_retries_per_request": per_req(writes["spin_eagain"]),
        "partial_retries_per_request": per_req(writes["spin_retries"] - writes["spin_eagain"]),
        "write_waits_per_request": per_req(writes["write_waited"]),
        "reads_per_request": per_req(c["read_calls"]),
        "polls_per_request": per_req(c["poll_calls"]),
        "handoffs_per_request": per_req(handoffs(c)),
        "contention_wakeups_per_request": per_req(counters.contention_wakeups(c)),
        "handoff_wait_ms_per_request": per_req(c["wakeup_wait_ns"] / 1e6),
        "cs_per_request": per_req(switches),
        "futex_waits_per_request": per_req(c["futex_waits"]),
        "futex_ms_per_request": per_req(c["futex_wait_req_ns"] / 1e6),
        "runq_ms_per_request": per_req(c["runq_ns"] / 1e6),
        "cpu_ms_per_request": per_req(c["oncpu_ns"] / 1e6),
        "request_ms": ratio(request_sums["duration_ns"] / 1e6, count) if count else None,
        "cross_thread_share": ratio(request_sums["cross_thread"], count) if count else None,
        "poll_zero_fraction": ratio(c["poll_zero"], c["poll_calls"]),
        "poll_nowait_fraction": ratio(c["poll_nowait"], c["poll_calls"]),
        "events_per_poll": ratio(c["poll_events"], c["poll_calls"]),
        "read_eagain_fraction": ratio(c["read_eagain"], c["read_calls"]),
        "spin_cpu_share": share(counters.spin_cost_ns(c, schema)),
        "empty_poll_cpu_share": share(counters.empty_wakeup_ns(c, schema)),
        "handoff_cpu_share": share(c["handoff_oncpu_ns"]),
        "requests_per_s": per_s(requests),
        "writes_per_s": per_s(c["write_calls"]),
        "reads_per_s": per_s(c["read_calls"]),
        "polls_per_s": per_s(c["poll_calls"]),
        "cs_per_s": per_s(switches),
        "handoffs_per_s": per_s(handoffs(c)),
        "futex_waits_per_s": per_s(c["futex_waits"]),
        "cpus_busy": per_s(c["oncpu_ns"] / 1e9),
    }


@dataclass
class Analysis:
    """A capture with its metrics: what labels and reports are computed from.

    process    {metric: value or None} for the whole target
    threads    {tid: row}: the capture's thread rows plus `role` and every metric (None when undefined);
               a thread's per-request values divide its own counters by the process request count, so
               they sum to the process value (its share of each request's cost)
    intervals  [row] per interval (short final one left out): t_s and every metric
    """

    capture: Capture
    process: dict
    threads: dict
    intervals: list

    @property
    def requests(self) -> int:
        return self.capture.request_count


def analyze(cap: Capture) -> Analysis:
    requests = cap.request_count
    process = derive(cap.totals, requests, cap.duration_s, request_sums=cap.requests, schema=cap.schema)
    roles = infer_roles(cap.threads, requests)
    threads = {}
    for tid, row in cap.threads.items():
        values = derive(row, requests, cap.duration_s, schema=cap.schema)
        values["requests_per_s"] = None  # requests belong to the process, not one thread
        threads[tid] = {**row, "role": roles[tid], **values}
    return Analysis(capture=cap, process=process, threads=threads, intervals=interval_metrics(cap))


def interval_metrics(cap: Capture) -> list:
    """Every metric per interval snapshot ({"t_s": ..., metric: value or None}), leaving out cut-short
    intervals (see MIN_INTERVAL_SHARE)."""
    rows = cap.intervals
    if not rows:
        return []
    nominal = cap.interval_s or max(row["duration_s"] for row in rows)
    return [{"t_s": row["t_s"], **derive(row, row["requests"], row["duration_s"], schema=cap.schema),
             **_request_times(row)} for row in rows if row["duration_s"] >= MIN_INTERVAL_SHARE * nominal]


def _request_times(row) -> dict:
    """An interval's request time and cross-thread share (schema 8: the requests block's sums per interval),
    so that `diff` judges them against the noise like every other metric; nothing before."""
    if row.get("request_ns") is None or not row["requests"]:
        return {}
    return {"request_ms": row["request_ns"] / 1e6 / row["requests"],
            "cross_thread_share": (row.get("cross_thread") or 0) / row["requests"]}


def role_edges(analysis: Analysis) -> dict:
    """Handoff counts between roles, {(waker role, wakee role): count}, largest first (ties in role order
    by name; mm-lock and exit wakeups are not handoffs). Threads that left no entry (a dropped map slot)
    count as workers."""
    threads = analysis.threads
    edges: dict = {}
    for edge in analysis.capture.wakeups:
        if edge["mechanism"] in NOT_HANDOFFS:
            continue
        waker, wakee = threads.get(edge["waker_tid"]), threads.get(edge["wakee_tid"])
        key = (waker["role"] if waker else WORKER, wakee["role"] if wakee else WORKER)
        edges[key] = edges.get(key, 0) + edge["count"]
    return dict(sorted(sorted(edges.items()), key=lambda item: -item[1]))


@dataclass
class SizeClass:
    """One response-size class, per response (the requests.by_size block divided by its count)."""

    bytes_min: int
    bytes_max: int
    count: int
    writes: float
    eagain: float
    partial: float
    eagain_retries: float   # retries of an EAGAIN without waiting
    partial_retries: float  # writes right after a partial write, without waiting
    waits: float            # writes after a stall that waited for writability
    request_ms: float | None


def size_classes(analysis: Analysis, min_count: int = 0) -> list:
    """The response-size classes with at least `min_count` responses, per response: the one per-response
    table the write patterns (analysis/patterns/write_spin.py) and the report's table share."""
    out = []
    for row in analysis.capture.by_size:
        if row["count"] < max(min_count, 1):
            continue
        n = row["count"]
        out.append(SizeClass(row["bytes_min"], row["bytes_max"], n, row["write_calls"] / n,
                             row["write_eagain"] / n, row["write_partial"] / n, row["spin_eagain"] / n,
                             (row["spin_retries"] - row["spin_eagain"]) / n, row["write_waited"] / n,
                             ratio(row["duration_ns"] / 1e6, n)))
    return out
