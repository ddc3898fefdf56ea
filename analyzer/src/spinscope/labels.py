"""The three verdicts spinscope names: write-spin, spurious select, handoff overhead.

Each detector reads an Analysis and returns a Label or None. Every threshold is a named constant here and
is documented, with its reasoning, in docs/labels.md: keep the two in sync. Detectors also refuse to judge
small samples (too few requests or calls) and say so through `Assessment.notes`, so a quiet capture is
reported as "not enough data", never as "healthy".

A count is not a verdict. A label's severity follows its measured cost: the on-CPU time the collector timed
inside the calls that make the problem (spin retries, empty polls, handoffs) over the on-CPU time of the
threads involved, or the request time spent waiting for a handed-to thread. Where a cost cannot be
measured in the kernel (a handoff through shared memory), the label says it is estimated and how.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pandas as pd

from spinscope.fmt import fixed, size_class, undefined
from spinscope.metrics import Analysis, drop_line, dropped, ratio, role_edges, spin_cost_ns
from spinscope.roles import EVENT_LOOP, IDLE, ROLE_NOUNS, thread_name

WRITE_SPIN = "write-spin"
SPURIOUS_SELECT = "spurious-select"
HANDOFF_OVERHEAD = "handoff-overhead"
TITLES = {WRITE_SPIN: "write-spin", SPURIOUS_SELECT: "spurious select", HANDOFF_OVERHEAD: "handoff overhead"}

# Small-sample guards.
MIN_REQUESTS = 50            # requests before any per-request verdict
MIN_CLASS_REQUESTS = 20      # responses in a size class before judging that class
MIN_CALLS = 200              # poll (or read) calls before judging their returns

# Severity, from the measured share of the involved threads' on-CPU time (or, for handoffs, of the
# request time spent waiting for a handed-to thread to run).
CRITICAL_SHARE = 0.20
WARNING_SHARE = 0.05
INFO, WARNING, CRITICAL = "info", "warning", "critical"

# write-spin: a size class spins when its responses retry writes that returned EAGAIN without waiting
# (futile retries: they move nothing), more than once per stall. A retry after a partial write moves
# bytes; a server that writes until EAGAIN and then waits makes no futile retry at all.
SPIN_MIN_RETRIES_PER_RESPONSE = 2.0  # futile retries per response
SPIN_MIN_RETRIES_PER_STALL = 2.0     # futile retries / (waits + 1 per response)
WAIT_MIN_PER_RESPONSE = 1.0          # waits for writability per response worth an informational note

# spurious select
SPURIOUS_MIN_WASTED_PER_S = 200.0    # empty returns per second (above a housekeeping timer's tick)
SPURIOUS_MIN_READ_EAGAIN_SHARE = 0.6  # socket reads returning EAGAIN (reading until EAGAIN is one per wakeup)
SPURIOUS_MIN_SHARE = 0.01            # measured share below which empty wakeups are not worth a label
IMBALANCE_MIN_RATIO = 5.0            # busiest / quietest event loop, in events per poll call
IMBALANCE_MAX_LOW_EVENTS = 2.0       # the quietest loop handles fewer events per call than this

# handoff overhead
HANDOFF_MIN_PER_REQUEST = 1.5        # deliberate wakeups between the target's threads per request
CROSS_THREAD_MIN_SHARE = 0.5         # or: requests answered by another thread than the one that read them
SHARED_MEMORY_MAX_WAKEUPS = 0.5      # handoffs per request below which cross-thread requests moved without a wakeup


@dataclass
class Label:
    name: str
    severity: str
    summary: str
    evidence: dict
    cpu_share: float | None  # measured share of the involved threads' on-CPU time (None: not measurable)
    fixes: list
    details: list = field(default_factory=list)  # human lines: per size class, per thread, per edge
    estimated: bool = False  # the cost is estimated, not measured (the summary says how)

    @property
    def title(self) -> str:
        return TITLES[self.name]

    def to_dict(self) -> dict:
        """Every field, and the title (what `report --json` and `diff --json` write of a label)."""
        return {**asdict(self), "title": self.title}


@dataclass
class Assessment:
    labels: list
    notes: list  # why a verdict could not be reached (too few requests, ...)

    def names(self) -> set:
        return {label.name for label in self.labels}

    def serious(self) -> set:
        """Names of the labels at warning or critical."""
        return {label.name for label in self.labels if label.severity != INFO}


def exec_notes(target: dict) -> list:
    """A note per traced process that replaced its program while traced (target.execs, schema 3): its
    counts are of two programs."""
    notes = []
    for record in target.get("execs") or ():
        if not isinstance(record, dict):
            continue
        times = "once" if record.get("count") == 1 else f"{record.get('count')} times"
        notes.append(f"process {record.get('pid')} replaced its program (execve) {times} while traced, the latest "
                     f"at {fixed(record.get('t_s'), 1)} s, to run {record.get('filename')} as "
                     f"{record.get('comm')}: its counts mix the programs before and after")
    return notes


def first_drop(intervals: pd.DataFrame, key: str) -> str:
    """` from 12.0 s on`: when the capture's intervals (schema 4) say the first drop of this kind came."""
    column = f"drops_{key}"
    if intervals.empty or column not in intervals or not (intervals[column] > 0).any():
        return ""
    first = intervals[intervals[column] > 0].iloc[0]
    return f" from {fixed(first['t_s'] - first['duration_s'], 1)} s on"


def sampling_note(time_sample: int, timed: int) -> str:
    return (f"call times sampled: 1 call in {time_sample} timed ({timed:,} calls, --time-sample), so the "
            "measured costs behind the verdicts are estimates; counts are exact")


def assess(analysis: Analysis) -> Assessment:
    notes = []
    cap = analysis.capture
    if not cap.costs_measured:
        notes.append(f"capture schema {cap.schema} (an older collector) has counts but no measured costs: "
                     "no verdict is drawn from it; record it again to judge")
        return Assessment(labels=[], notes=notes)
    if analysis.requests == 0:
        notes.append("no requests were observed (no socket read followed by a write): "
                     "per-request metrics are not available")
    elif analysis.requests < MIN_REQUESTS:
        notes.append(f"only {analysis.requests} requests (< {MIN_REQUESTS}): too few to judge "
                     f"{TITLES[WRITE_SPIN]} or {TITLES[HANDOFF_OVERHEAD]}")
    notes += [f"the collector dropped events, a map being full{first_drop(cap.intervals, drop.key)}: "
              f"{drop_line(drop, count)}" for drop, count in dropped(cap.drops)]
    notes += exec_notes(cap.target)
    if cap.time_sample > 1:
        notes.append(sampling_note(cap.time_sample, int(cap.totals["calls_timed"])))
    if cap.raw.get("end_reason") == "checkpoint":
        journaled = ""
        if cap.journaled:
            journaled = (f", and {cap.journaled} interval{'s' if cap.journaled > 1 else ''} after it up to "
                         f"{fixed(cap.intervals['t_s'].iloc[-1], 1)} s from its journal (the totals and verdicts "
                         "end at the checkpoint)")
        notes.append(f"incomplete: the collector stopped without writing its final capture (killed?); this is "
                     f"its last checkpoint, {fixed(cap.duration_s, 1)} s into the recording{journaled}")
    detectors = (write_spin, spurious_select, handoff_overhead)
    labels = [label for label in (detect(analysis) for detect in detectors) if label]
    return Assessment(labels=labels, notes=notes)


def severity(share: float | None) -> str:
    if share is None:
        return WARNING
    if share >= CRITICAL_SHARE:
        return CRITICAL
    return WARNING if share >= WARNING_SHARE else INFO


# --- write-spin -------------------------------------------------------------------------------------

def write_spin(analysis: Analysis) -> Label | None:
    """Responses whose stalled writes (EAGAIN, partial) are retried at once, without waiting for the
    socket to drain, judged per response-size class; severity from the measured on-CPU time of those
    retries. A server that waits for writability gets at most an informational note."""
    if analysis.requests < MIN_REQUESTS:
        return None
    classes = analysis.capture.by_size
    classes = classes[classes["count"] >= MIN_CLASS_REQUESTS].copy()
    if classes.empty:
        return None
    for name, column in (("writes", "write_calls"), ("eagain", "write_eagain"), ("partial", "write_partial"),
                         ("retries", "spin_retries"), ("futile", "spin_eagain"), ("waits", "write_waited")):
        classes[name] = classes[column] / classes["count"]
    classes["per_stall"] = classes["spin_eagain"] / (classes["write_waited"] + classes["count"])
    spinning = classes[(classes["futile"] >= SPIN_MIN_RETRIES_PER_RESPONSE)
                       & (classes["per_stall"] >= SPIN_MIN_RETRIES_PER_STALL)]
    threads = analysis.threads
    spinners = threads[threads["write_spin_retries"] > 0]
    spin_ns, spinner_cpu = spin_cost_ns(spinners.sum(numeric_only=True)), spinners["oncpu_ns"].sum()
    share = _share(spin_ns, spinner_cpu)
    evidence = {
        "requests": analysis.requests,
        "spin_retries_per_request": _round(analysis.process["spin_retries_per_request"]),
        "futile_retries_per_request": _round(analysis.process["futile_retries_per_request"]),
        "write_waits_per_request": _round(analysis.process["write_waits_per_request"]),
        "futile_retry_cpu_ms": round(spin_ns / 1e6, 3),
        "spinning_threads_cpu_ms": round(spinner_cpu / 1e6, 3),
        "futile_retry_us_each": _round(ratio(spin_ns / 1e3, spinners["write_spin_eagain"].sum())),
    }
    if spinning.empty:
        return _write_waits(analysis, classes, share, evidence)

    worst = spinning.loc[spinning["spin_eagain"].idxmax()]
    size = size_class(worst["bytes_min"], worst["bytes_max"])
    more = len(spinning) - 1
    where = f"{size} responses" + (f" (and {more} more size class{'es' if more > 1 else ''})" if more else "")
    whose = _whose(threads, spinners.index)
    summary = (f"write-spin on {where}: {worst['writes']:.0f} writes per response, {worst['futile']:.0f} of "
               f"them retrying an EAGAIN at once, without waiting ({worst['eagain']:.0f} EAGAIN, "
               f"{worst['partial']:.0f} partial, {worst['waits']:.1f} waits for writability)"
               f"{_share_phrase(share, whose, 'in those retries')}; "
               "stop writing at EAGAIN and wait for EPOLLOUT, or raise SO_SNDBUF")
    details = [f"{size_class(row.bytes_min, row.bytes_max)} responses: {row.count} responses, "
               f"{row.writes:.1f} writes, {row.futile:.1f} retries of an EAGAIN and {row.retries - row.futile:.1f} "
               f"of a partial write without waiting, {row.waits:.1f} waits for writability per response"
               for row in spinning.itertuples()]
    evidence.update({
        "spinning_responses": int(spinning["count"].sum()),
        "size_class_bytes_min": int(worst["bytes_min"]),
        "size_class_bytes_max": int(worst["bytes_max"]),
        "writes_per_response": round(float(worst["writes"]), 2),
        "spin_retries_per_response": round(float(worst["retries"]), 2),
        "futile_retries_per_response": round(float(worst["futile"]), 2),
        "eagain_per_response": round(float(worst["eagain"]), 2),
        "partial_per_response": round(float(worst["partial"]), 2),
        "waits_per_response": round(float(worst["waits"]), 2),
    })
    fixes = [
        "on EAGAIN stop writing and wait for EPOLLOUT instead of retrying at once",
        "raise SO_SNDBUF (or net.ipv4.tcp_wmem) above the large response sizes so a response fits in one write",
        "write headers and body in one call (writev, sendfile) instead of many small writes",
    ]
    return Label(WRITE_SPIN, severity(share), summary, evidence, share, fixes, details)


def _write_waits(analysis: Analysis, classes: pd.DataFrame, share: float | None, evidence: dict) -> Label | None:
    """The informational note for a server that waits for writability: no spin, but round trips."""
    waiting = classes[classes["waits"] >= WAIT_MIN_PER_RESPONSE]
    if waiting.empty:
        return None
    worst = waiting.loc[waiting["write_waited"].idxmax()]
    size = size_class(worst["bytes_min"], worst["bytes_max"])
    request_ms = ratio(worst["duration_ns"] / 1e6, worst["count"])
    # No share in the sentence: without a spin, the time between a write and its retry is the server's
    # ordinary work, not a cost of retrying (it stays in the evidence).
    summary = (f"no write-spin: {size} responses wait for writability {worst['waits']:.1f} times each "
               f"(send buffer smaller than the response; {worst['futile']:.1f} retries of an EAGAIN per "
               "response); each wait is a round trip: these requests took "
               f"{fixed(request_ms, 2)} ms on average")
    evidence.update({"size_class_bytes_min": int(worst["bytes_min"]), "size_class_bytes_max": int(worst["bytes_max"]),
                     "waits_per_response": round(float(worst["waits"]), 2),
                     "futile_retries_per_response": round(float(worst["futile"]), 2),
                     "request_ms": _round(request_ms)})
    evidence["retry_cpu_share"] = _round(share)
    fixes = ["raise SO_SNDBUF (or net.ipv4.tcp_wmem) above the large response sizes if their latency matters"]
    return Label(WRITE_SPIN, INFO, summary, evidence, None, fixes)


# --- spurious select --------------------------------------------------------------------------------

def spurious_select(analysis: Analysis) -> Label | None:
    """Wakeups that find no work, by their measured on-CPU time: empty poll returns (zero-timeout checks
    and blocking calls that woke with nothing, told apart), socket reads that return EAGAIN, and an event
    loop woken for far fewer events per call than its sibling."""
    seconds = analysis.capture.duration_s
    threads = analysis.threads
    signals, fixes, details, involved = [], [], [], set()
    evidence = {
        "poll_calls": int(threads["poll_calls"].sum()),
        "poll_zero": int(threads["poll_zero"].sum()),
        "poll_zero_nowait": int(threads["poll_zero_nowait"].sum()),
        "poll_zero_fraction": _round(analysis.process["poll_zero_fraction"]),
        "events_per_poll": _round(analysis.process["events_per_poll"]),
        "read_eagain": int(threads["read_eagain"].sum()),
        "read_eagain_fraction": _round(analysis.process["read_eagain_fraction"]),
    }
    wasted_ns = pd.Series(0.0, index=threads.index)

    empty = threads["poll_zero"]
    if empty.sum() >= MIN_CALLS and (ratio(empty.sum(), seconds) or 0) >= SPURIOUS_MIN_WASTED_PER_S:
        nowait, waited = threads["poll_zero_nowait"].sum(), empty.sum() - threads["poll_zero_nowait"].sum()
        check_us = ratio(threads["poll_zero_nowait_ns"].sum() / 1e3, nowait)
        wake_us = ratio(threads["poll_zero_wait_ns"].sum() / 1e3, waited)
        kinds = [f"{nowait:,} zero-timeout checks" + (f" at {check_us:.1f} µs each" if check_us else "")] \
            if nowait else []
        kinds += [f"{waited:,} blocking calls that woke with nothing"
                  + (f" at {wake_us:.1f} µs each" if wake_us else "")] if waited else []
        signals.append(f"{analysis.process['poll_zero_fraction']:.0%} of poll calls return no events "
                       f"({', '.join(kinds)})")
        if nowait >= waited:
            fixes.append("block in epoll_wait until the next timer is due instead of checking with a zero "
                         "timeout while there is nothing to run")
        else:
            fixes.append("wake one loop per event (EPOLLEXCLUSIVE, SO_REUSEPORT) instead of all of them, "
                         "and use a timeout as long as the next timer")
        wasted_ns += threads["poll_zero_nowait_ns"] + threads["poll_zero_wait_ns"]
        involved |= set(threads.index[empty > 0])
        details += _thread_lines(threads, "poll_zero", "poll_calls", "of its poll calls return no events")

    eagain = threads["read_eagain"]
    if (eagain.sum() >= MIN_CALLS and (ratio(eagain.sum(), seconds) or 0) >= SPURIOUS_MIN_WASTED_PER_S
            and (analysis.process["read_eagain_fraction"] or 0) >= SPURIOUS_MIN_READ_EAGAIN_SHARE):
        signals.append(f"{analysis.process['read_eagain_fraction']:.0%} of socket reads return EAGAIN "
                       f"({eagain.sum():,})")
        fixes.append("read only sockets epoll reported readable, and stop at a short read")
        wasted_ns += threads["read_eagain_ns"]
        involved |= set(threads.index[eagain > 0])
        details += _thread_lines(threads, "read_eagain", "read_calls", "of its socket reads return EAGAIN")

    estimated = False
    imbalance = _loop_imbalance(threads)
    if imbalance:
        quiet, busy, excess_calls = imbalance
        quiet_row, busy_row = threads.loc[quiet], threads.loc[busy]
        signals.append(f"{_name(threads, quiet)} handles {quiet_row['events_per_poll']:.1f} events per poll "
                       f"call while {_name(threads, busy)} handles {busy_row['events_per_poll']:.0f}")
        fixes.append("balance the event loops (spread connections with SO_REUSEPORT, or merge the quiet "
                     "loop into the busy one): a loop woken for under one event per call pays a wakeup "
                     "per event")
        # The quiet loop's measured poll time, scaled to the calls it would not make if it batched
        # like the busy loop: an estimate.
        excess_ns = quiet_row["poll_oncpu_ns"] * excess_calls / max(quiet_row["poll_calls"], 1)
        estimated = excess_ns > wasted_ns[quiet]
        wasted_ns[quiet] = max(wasted_ns[quiet], excess_ns)
        involved.add(quiet)
        evidence.update({"quiet_loop_tid": int(quiet), "quiet_loop_events_per_poll": _round(quiet_row["events_per_poll"]),
                         "busy_loop_tid": int(busy), "busy_loop_events_per_poll": _round(busy_row["events_per_poll"]),
                         "quiet_loop_excess_calls": int(excess_calls)})

    if not signals:
        return None
    cpu = threads.loc[sorted(involved), "oncpu_ns"].sum()
    share = _share(wasted_ns.sum(), cpu)
    if share is not None and share < SPURIOUS_MIN_SHARE:
        return None
    evidence["wasted_cpu_ms"] = round(wasted_ns.sum() / 1e6, 3)
    evidence["involved_threads_cpu_ms"] = round(cpu / 1e6, 3)
    how = " (estimated from its measured poll time)" if estimated else ""
    summary = (f"spurious select: {'; '.join(signals)}"
               f"{_share_phrase(share, _whose(threads, sorted(involved)), estimated=estimated)}{how}")
    return Label(SPURIOUS_SELECT, severity(share), summary, evidence, share, fixes, details, estimated)


def _loop_imbalance(threads: pd.DataFrame) -> tuple | None:
    """(quiet tid, busy tid, quiet loop's calls beyond what it would need if it batched like the busy
    loop) when two event loops differ by IMBALANCE_MIN_RATIO in events per poll call, else None."""
    loops = threads[(threads["role"] == EVENT_LOOP) & (threads["poll_calls"] >= MIN_CALLS)]
    if len(loops) < 2:
        return None
    quiet, busy = loops["events_per_poll"].idxmin(), loops["events_per_poll"].idxmax()
    low, high = loops.at[quiet, "events_per_poll"], loops.at[busy, "events_per_poll"]
    if low >= IMBALANCE_MAX_LOW_EVENTS or high < IMBALANCE_MIN_RATIO * low or not high:  # not high: no events at all
        return None
    excess = loops.at[quiet, "poll_calls"] - loops.at[quiet, "poll_events"] / high
    return quiet, busy, excess


# --- handoff overhead -------------------------------------------------------------------------------

def handoff_overhead(analysis: Analysis) -> Label | None:
    """Requests passed between the target's own threads, by a wakeup (futex, pipe, eventfd) or through
    shared memory (read on one thread, answered on another, no wakeup). Severity from the measured
    costs: the request time spent waiting for a handed-to thread to run, and the on-CPU time inside the
    calls that made or received the handoffs; a shared-memory handoff has no kernel event to time, and
    is said to be estimated."""
    process, requests = analysis.process, analysis.requests
    per_request = process["handoffs_per_request"] or 0.0
    cross = process["cross_thread_share"] or 0.0
    if requests < MIN_REQUESTS or (per_request < HANDOFF_MIN_PER_REQUEST and cross < CROSS_THREAD_MIN_SHARE):
        return None
    threads = analysis.threads
    involved = threads[(threads["wakeups_sent"] - threads["wakeups_sent_mm"] - threads["wakeups_sent_exit"] > 0)
                       | (threads["wakeups_received"] > 0)]
    cpu_share = _share(involved["handoff_oncpu_ns"].sum(), involved["oncpu_ns"].sum())
    wait_ms = process["handoff_wait_ms_per_request"] or 0.0
    # Wake-to-run waits also happen between requests (a dispatcher re-arming a connection), so they
    # can exceed the request time: the share is capped at the whole of it.
    latency_share = _share(wait_ms, process["request_ms"]) if process["request_ms"] else None
    edges = role_edges(analysis)
    evidence = {
        "requests": requests,
        "handoffs_per_request": _round(per_request),
        "cross_thread_share": _round(cross),
        "contention_wakeups_per_request": _round(process["contention_wakeups_per_request"]),
        "handoff_wait_ms_per_request": _round(wait_ms),
        "request_ms": _round(process["request_ms"]),
        "handoff_wait_share_of_request_time": _round(latency_share),
        "handoff_cpu_share": _round(cpu_share),
        "cs_per_request": _round(process["cs_per_request"]),
        "futex_ms_per_request": _round(process["futex_ms_per_request"]),
        "cpu_ms_per_request": _round(process["cpu_ms_per_request"]),
    }
    details = [f"{ROLE_NOUNS[a]} → {ROLE_NOUNS[b]}: {n} wakeups, {n / requests:.2f} per request"
               for (a, b), n in edges.items()]
    contention = process["contention_wakeups_per_request"] or 0.0
    if contention:
        details.append(f"{contention:.2f} wakeups per request from memory-map calls (mmap/munmap lock "
                       "contention), not counted as handoffs")
    fixes = [
        "serve short requests in the thread that read them, without a worker pool",
        "if a worker is needed, let the same worker read, process and write (about 2 handoffs instead of 4)",
        "one event loop per core (SO_REUSEPORT) or thread-per-connection both avoid per-request handoffs",
    ]
    if per_request < SHARED_MEMORY_MAX_WAKEUPS:
        busy = _busy_threads_line(analysis)
        summary = (f"handoff overhead: {cross:.0%} of requests are answered by another thread than the one "
                   f"that read them, with {per_request:.2f} wakeups per request: handed over through shared "
                   f"memory, a cost the kernel cannot time (estimated, not measured); {busy}")
        return Label(HANDOFF_OVERHEAD, WARNING, summary, evidence, None, fixes, details, estimated=True)

    path = ", ".join(f"{ROLE_NOUNS[a]} → {ROLE_NOUNS[b]} {n / requests:.1f}"
                     for (a, b), n in edges.head(3).items() if n / requests >= 0.05)
    tiers = [severity(cpu_share) if cpu_share is not None else INFO,
             severity(latency_share) if latency_share is not None else INFO]
    level = max(tiers, key=(INFO, WARNING, CRITICAL).index)
    waits = f"{fixed(wait_ms, 3)} ms per request waiting for a woken thread to run"
    if latency_share is not None:
        waits += (f" (requests take {fixed(process['request_ms'], 3)} ms)" if latency_share >= 1
                  else f" ({latency_share:.0%} of the request time)")
    moved = f", {cross:.0%} of requests answered by another thread" if cross >= 0.005 else ""
    summary = (f"handoff overhead: {per_request:.1f} handoffs between threads per request ({path}){moved}; {waits}"
               f"{_share_phrase(cpu_share, 'their CPU', 'in the calls that hand off and wait')}; "
               "serve the request in the thread that read it")
    return Label(HANDOFF_OVERHEAD, level, summary, evidence, cpu_share, fixes, details)


def _busy_threads_line(analysis: Analysis) -> str:
    """`threads 'io_thd_1' and 'redis-server' on CPU 96% and 97% of the capture`: busy-waiting shows
    as threads on CPU nearly all the time while their syscalls are few."""
    threads, seconds = analysis.threads, analysis.capture.duration_s or 1.0
    busy = threads[threads["role"] != IDLE].sort_values("oncpu_ns", ascending=False).head(3)
    parts = [f"'{row.comm}' {row.oncpu_ns / 1e9 / seconds:.0%}" for row in busy.itertuples()]
    return f"threads on CPU for this share of the capture: {', '.join(parts)}; {fixed(analysis.process['cpu_ms_per_request'], 3)} ms CPU per request"


# --- helpers ----------------------------------------------------------------------------------------

def _share(ns: float, oncpu_ns: float) -> float | None:
    return min(1.0, ns / oncpu_ns) if oncpu_ns else None


def _share_phrase(share: float | None, whose: str, where: str = "", estimated: bool = False) -> str:
    """`, measured 62% of the CPU of event loop 'x' (tid 1)`; `about` instead of `measured` for an estimate."""
    if share is None:
        return ""
    amount = f"{share:.0%}" if share >= 0.01 else "under 1%"
    return f", {'about' if estimated else 'measured'} {amount} of {whose}" + (f" {where}" if where else "")


def _whose(threads: pd.DataFrame, tids) -> str:
    """`the CPU of event loop 'nginx' (tid 812)`, `the CPU of the 3 threads involved`."""
    tids = list(tids)
    if len(tids) == 1:
        return f"the CPU of {_name(threads, tids[0])}"
    return f"the CPU of the {len(tids)} threads involved"


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if undefined(value) else round(float(value), digits)


def _name(threads: pd.DataFrame, tid: int) -> str:
    return thread_name(threads.at[tid, "role"], threads.at[tid, "comm"], int(tid))


def _thread_lines(threads: pd.DataFrame, part: str, whole: str, phrase: str) -> list:
    busy = threads[threads[whole] >= MIN_CALLS]
    return [f"{_name(threads, tid)}: {row[part] / row[whole]:.0%} {phrase}"
            for tid, row in busy.sort_values(part, ascending=False).iterrows() if row[part]]
