"""The three verdicts spinscope names: write-spin, spurious select, handoff overhead.

Each detector reads an Analysis and returns a Label or None. Every threshold is a named constant here and
is documented, with its reasoning, in docs/labels.md: keep the two in sync. Detectors also refuse to judge
small samples (too few requests or calls) and say so through `Assessment.notes`, so a quiet capture is
reported as "not enough data", never as "healthy".

CPU estimates (`cpu_share`, a fraction of the target's measured on-CPU time) are explained per label in
docs/labels.md; they are estimates from measured syscall time and counts, meant to rank problems, not to
account for every cycle.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import pandas as pd

from spinscope.metrics import Analysis, ratio
from spinscope.roles import EVENT_LOOP, ROLE_NOUNS, activity, thread_name

WRITE_SPIN = "write-spin"
SPURIOUS_SELECT = "spurious-select"
HANDOFF_OVERHEAD = "handoff-overhead"
TITLES = {WRITE_SPIN: "write-spin", SPURIOUS_SELECT: "spurious select", HANDOFF_OVERHEAD: "handoff overhead"}

# Small-sample guards.
MIN_REQUESTS = 50            # requests before any per-request verdict
MIN_CLASS_REQUESTS = 20      # responses in a size class before judging that class
MIN_CALLS = 200              # poll (or read) calls before judging their returns

# write-spin
WRITE_SPIN_MIN_WRITES = 4.0          # write calls per response
WRITE_SPIN_MIN_STALLED_SHARE = 0.5   # of those calls, share returning EAGAIN or partial

# spurious select
SPURIOUS_MIN_ZERO_SHARE = 0.2        # poll calls returning no event
SPURIOUS_MIN_READ_EAGAIN_SHARE = 0.6  # socket reads returning EAGAIN
SPURIOUS_MIN_WASTED_PER_S = 200.0    # empty returns per second (above a housekeeping timer's tick)
IMBALANCE_MIN_RATIO = 5.0            # busiest / quietest event loop, in events per poll call
IMBALANCE_MAX_LOW_EVENTS = 2.0       # the quietest loop handles fewer events per call than this

# handoff overhead
HANDOFF_MIN_PER_REQUEST = 1.5        # wakeups between the target's threads per request
HANDOFF_CPU_NS = 5_000               # modelled CPU per handoff: the wake, two switches, cold caches

# severity, from the estimated CPU share
CRITICAL_CPU_SHARE = 0.10
WARNING_CPU_SHARE = 0.02
INFO, WARNING, CRITICAL = "info", "warning", "critical"


@dataclass
class Label:
    name: str
    severity: str
    summary: str
    evidence: dict
    cpu_share: float | None
    fixes: list
    details: list = field(default_factory=list)  # human lines: per size class, per thread, per edge

    @property
    def title(self) -> str:
        return TITLES[self.name]

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Assessment:
    labels: list
    notes: list  # why a verdict could not be reached (too few requests, ...)

    def names(self) -> set:
        return {label.name for label in self.labels}


def assess(analysis: Analysis) -> Assessment:
    notes = []
    if analysis.requests == 0:
        notes.append("no requests were observed (no socket read followed by a write): "
                     "per-request metrics are not available")
    elif analysis.requests < MIN_REQUESTS:
        notes.append(f"only {analysis.requests} requests (< {MIN_REQUESTS}): too few to judge "
                     f"{TITLES[WRITE_SPIN]} or {TITLES[HANDOFF_OVERHEAD]}")
    drops = {k: v for k, v in analysis.capture.drops.items() if v}
    if drops:
        lost = ", ".join(f"{v} {k}" for k, v in drops.items())
        notes.append(f"the collector dropped events ({lost}): counts are lower bounds")
    detectors = (write_spin, spurious_select, handoff_overhead)
    labels = [label for label in (detect(analysis) for detect in detectors) if label]
    return Assessment(labels=labels, notes=notes)


def severity(cpu_share: float | None) -> str:
    if cpu_share is None:
        return WARNING
    if cpu_share >= CRITICAL_CPU_SHARE:
        return CRITICAL
    return WARNING if cpu_share >= WARNING_CPU_SHARE else INFO


# --- write-spin -------------------------------------------------------------------------------------

def write_spin(analysis: Analysis) -> Label | None:
    """Many write calls per response, most of them EAGAIN or partial, judged per response-size class."""
    if analysis.requests < MIN_REQUESTS:
        return None
    classes = analysis.capture.by_size.copy()
    classes["writes"] = classes["write_calls"] / classes["count"]
    classes["eagain"] = classes["write_eagain"] / classes["count"]
    classes["partial"] = classes["write_partial"] / classes["count"]
    stalled = (classes["write_eagain"] + classes["write_partial"]) / classes["write_calls"].clip(lower=1)
    spinning = classes[(classes["count"] >= MIN_CLASS_REQUESTS)
                       & (classes["writes"] >= WRITE_SPIN_MIN_WRITES)
                       & (stalled >= WRITE_SPIN_MIN_STALLED_SHARE)]
    if spinning.empty:
        return None

    extra_writes = int((spinning["write_calls"] - spinning["count"]).sum())
    totals = analysis.capture.totals
    mean_write_ns = ratio(totals["write_ns"], totals["write_calls"]) or 0.0
    share = _cpu_share(extra_writes * mean_write_ns, totals["oncpu_ns"])
    worst = spinning.loc[(spinning["write_calls"] - spinning["count"]).idxmax()]
    size = size_class(worst["bytes_min"], worst["bytes_max"])
    more = len(spinning) - 1
    where = f"{size} responses" + (f" (and {more} more size class{'es' if more > 1 else ''})" if more else "")
    summary = (f"write-spin on {where}: {worst['writes']:.0f} writes per response, "
               f"{worst['eagain']:.0f} of them EAGAIN and {worst['partial']:.0f} partial"
               f"{_cpu_phrase(share)}; raise SO_SNDBUF or stop writing at EAGAIN")
    details = [f"{size_class(row.bytes_min, row.bytes_max)} responses: {row.count} responses, "
               f"{row.writes:.1f} writes per response, {row.eagain:.1f} EAGAIN, {row.partial:.1f} partial"
               for row in spinning.itertuples()]
    evidence = {
        "requests": analysis.requests,
        "spinning_responses": int(spinning["count"].sum()),
        "size_class_bytes_min": int(worst["bytes_min"]),
        "size_class_bytes_max": int(worst["bytes_max"]),
        "writes_per_response": round(float(worst["writes"]), 2),
        "eagain_per_response": round(float(worst["eagain"]), 2),
        "partial_per_response": round(float(worst["partial"]), 2),
        "writes_per_request": _round(analysis.process["writes_per_request"]),
        "extra_writes": extra_writes,
        "extra_write_ms": round(extra_writes * mean_write_ns / 1e6, 3),
    }
    fixes = [
        "raise SO_SNDBUF (or net.ipv4.tcp_wmem) above the large response sizes so a response fits in one write",
        "on EAGAIN stop writing and wait for EPOLLOUT instead of retrying at once",
        "write headers and body in one call (writev, sendfile) instead of many small writes",
    ]
    return Label(WRITE_SPIN, severity(share), summary, evidence, share, fixes, details)


# --- spurious select --------------------------------------------------------------------------------

def spurious_select(analysis: Analysis) -> Label | None:
    """Wakeups that find no work: empty poll returns, reads that return EAGAIN, and an event loop that
    wakes for far fewer events per call than its sibling."""
    process, seconds = analysis.process, analysis.capture.duration_s
    totals = analysis.capture.totals
    threads = analysis.threads
    signals, remedies, fixes, details = [], [], [], []
    evidence = {
        "poll_calls": int(totals["poll_calls"]),
        "poll_zero": int(totals["poll_zero"]),
        "poll_zero_fraction": _round(process["poll_zero_fraction"]),
        "events_per_poll": _round(process["events_per_poll"]),
        "read_calls": int(totals["read_calls"]),
        "read_eagain": int(totals["read_eagain"]),
        "read_eagain_fraction": _round(process["read_eagain_fraction"]),
    }
    wasted = pd.Series(0.0, index=threads.index)  # calls that found nothing, per thread

    if (totals["poll_calls"] >= MIN_CALLS and process["poll_zero_fraction"] >= SPURIOUS_MIN_ZERO_SHARE
            and (ratio(totals["poll_zero"], seconds) or 0) >= SPURIOUS_MIN_WASTED_PER_S):
        signals.append(f"{process['poll_zero_fraction']:.0%} of poll calls return no events")
        remedies.append("block until the next timer is due")
        fixes.append("block in epoll_wait until the next timer is due instead of polling with a zero or "
                     "short timeout")
        fixes.append("wake one loop per event (EPOLLEXCLUSIVE, SO_REUSEPORT) instead of all of them")
        wasted += threads["poll_zero"]
        details += _thread_lines(threads, "poll_zero", "poll_calls", "of its poll calls return no events")

    if (totals["read_calls"] >= MIN_CALLS and process["read_eagain_fraction"] >= SPURIOUS_MIN_READ_EAGAIN_SHARE
            and (ratio(totals["read_eagain"], seconds) or 0) >= SPURIOUS_MIN_WASTED_PER_S):
        signals.append(f"{process['read_eagain_fraction']:.0%} of socket reads return EAGAIN")
        remedies.append("read only sockets reported readable")
        fixes.append("read only sockets epoll reported readable, and stop at a short read")
        wasted += threads["read_eagain"]
        details += _thread_lines(threads, "read_eagain", "read_calls", "of its socket reads return EAGAIN")

    imbalance = _loop_imbalance(threads)
    if imbalance:
        quiet, busy, excess_calls = imbalance
        quiet_row, busy_row = threads.loc[quiet], threads.loc[busy]
        signals.append(f"{_name(threads, quiet)} handles {quiet_row['events_per_poll']:.1f} events per poll "
                       f"call while {_name(threads, busy)} handles {busy_row['events_per_poll']:.0f}")
        remedies.append("balance the event loops")
        fixes.append("balance the event loops (spread connections with SO_REUSEPORT, or merge the quiet "
                     "loop into the busy one): a loop woken for under one event per call pays a wakeup "
                     "per event")
        evidence.update({"quiet_loop_tid": int(quiet), "quiet_loop_events_per_poll": _round(quiet_row["events_per_poll"]),
                         "busy_loop_tid": int(busy), "busy_loop_events_per_poll": _round(busy_row["events_per_poll"]),
                         "quiet_loop_excess_calls": int(excess_calls)})
        wasted[quiet] = max(wasted[quiet], excess_calls)

    if not signals:
        return None
    wasted_ns = (wasted * _cpu_per_call(threads)).sum()
    share = _cpu_share(wasted_ns, totals["oncpu_ns"])
    evidence["wasted_calls"] = int(wasted.sum())
    evidence["wasted_cpu_ms"] = round(wasted_ns / 1e6, 3)
    summary = f"spurious select: {'; '.join(signals)}{_cpu_phrase(share)}; {' and '.join(remedies)}"
    return Label(SPURIOUS_SELECT, severity(share), summary, evidence, share, fixes, details)


def _loop_imbalance(threads: pd.DataFrame) -> tuple | None:
    """(quiet tid, busy tid, quiet loop's calls beyond what it would need if it batched like the busy
    loop) when two event loops differ by IMBALANCE_MIN_RATIO in events per poll call, else None."""
    loops = threads[(threads["role"] == EVENT_LOOP) & (threads["poll_calls"] >= MIN_CALLS)]
    if len(loops) < 2:
        return None
    quiet, busy = loops["events_per_poll"].idxmin(), loops["events_per_poll"].idxmax()
    low, high = loops.at[quiet, "events_per_poll"], loops.at[busy, "events_per_poll"]
    if low >= IMBALANCE_MAX_LOW_EVENTS or high < IMBALANCE_MIN_RATIO * low:
        return None
    excess = loops.at[quiet, "poll_calls"] - loops.at[quiet, "poll_events"] / high
    return quiet, busy, excess


def _cpu_per_call(threads: pd.DataFrame) -> pd.Series:
    """A thread's on-CPU time per traced call: what one more empty wakeup of it costs, on average."""
    return threads["oncpu_ns"] / activity(threads).clip(lower=1)


# --- handoff overhead -------------------------------------------------------------------------------

def handoff_overhead(analysis: Analysis) -> Label | None:
    """Requests passed between the target's own threads: each handoff is a futex wake, a context switch
    on both sides and a cold cache."""
    per_request = analysis.process["handoffs_per_request"]
    if analysis.requests < MIN_REQUESTS or per_request < HANDOFF_MIN_PER_REQUEST:
        return None
    cap, process = analysis.capture, analysis.process
    handoffs = int(cap.wakeups["count"].sum())
    share = _cpu_share(handoffs * HANDOFF_CPU_NS, cap.totals["oncpu_ns"])
    edges = role_edges(analysis)
    path = ", ".join(f"{ROLE_NOUNS[a]} → {ROLE_NOUNS[b]} {n / analysis.requests:.1f}"
                      for (a, b), n in edges.head(3).items())
    summary = (f"handoff overhead: {per_request:.1f} wakeups between threads per request ({path}), "
               f"{process['cs_per_request']:.1f} context switches and {process['futex_ms_per_request']:.2f} ms "
               f"of futex wait per request{_cpu_phrase(share)}; serve the request in the thread that read it")
    evidence = {
        "requests": analysis.requests,
        "handoffs": handoffs,
        "handoffs_per_request": _round(per_request),
        "cs_per_request": _round(process["cs_per_request"]),
        "futex_waits_per_request": _round(process["futex_waits_per_request"]),
        "futex_ms_per_request": _round(process["futex_ms_per_request"]),
        "runq_ms_per_request": _round(process["runq_ms_per_request"]),
        "cross_thread_share": _round(ratio(cap.requests["cross_thread"], analysis.requests)),
    }
    details = [f"{ROLE_NOUNS[a]} → {ROLE_NOUNS[b]}: {n} wakeups, {n / analysis.requests:.2f} per request"
               for (a, b), n in edges.items()]
    fixes = [
        "serve short requests in the event loop that read them, without a worker pool",
        "if a worker is needed, let the same worker read, process and write (about 2 handoffs instead of 4)",
        "one event loop per core (SO_REUSEPORT) or thread-per-connection both avoid per-request handoffs",
    ]
    return Label(HANDOFF_OVERHEAD, severity(share), summary, evidence, share, fixes, details)


def role_edges(analysis: Analysis) -> pd.Series:
    """Wakeup counts between roles, {(waker role, wakee role): count}, largest first. Threads that left
    no entry (a dropped map slot) count as workers."""
    roles = analysis.threads["role"]
    wakeups = analysis.capture.wakeups
    if wakeups.empty:
        return pd.Series(dtype="int64")
    frame = pd.DataFrame({"waker": wakeups["waker_tid"].map(roles).fillna("worker"),
                          "wakee": wakeups["wakee_tid"].map(roles).fillna("worker"),
                          "count": wakeups["count"]})
    return frame.groupby(["waker", "wakee"])["count"].sum().sort_values(ascending=False)


# --- helpers ----------------------------------------------------------------------------------------

def size_class(bytes_min: int, bytes_max: int) -> str:
    """`64–128 KiB` for the log2 class [65536, 131071]; `0 B` and `1 B` for the one-value classes."""
    if bytes_min == bytes_max:
        return " ".join(_bytes(bytes_min))
    low, high = _bytes(bytes_min), _bytes(bytes_max + 1)
    if low[1] == high[1]:
        return f"{low[0]}–{high[0]} {high[1]}"
    return f"{low[0]} {low[1]}–{high[0]} {high[1]}"


def _bytes(n: int) -> tuple:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g}", unit
    return str(int(n)), "B"


def _cpu_share(wasted_ns: float, oncpu_ns: float) -> float | None:
    return min(1.0, wasted_ns / oncpu_ns) if oncpu_ns else None


def _cpu_phrase(share: float | None) -> str:
    if share is None:
        return ""
    return f", about {share:.0%} of its CPU" if share >= 0.01 else ", under 1% of its CPU"


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else round(float(value), digits)


def _name(threads: pd.DataFrame, tid: int) -> str:
    return thread_name(threads.at[tid, "role"], threads.at[tid, "comm"], int(tid))


def _thread_lines(threads: pd.DataFrame, part: str, whole: str, phrase: str) -> list:
    busy = threads[threads[whole] >= MIN_CALLS]
    return [f"{_name(threads, tid)}: {row[part] / row[whole]:.0%} {phrase}"
            for tid, row in busy.sort_values(part, ascending=False).iterrows() if row[part]]
