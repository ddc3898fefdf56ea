"""write-spin and the write-wait finding: responses larger than the socket's send buffer, written by a
server that retries an EAGAIN at once (the spin, a label) or waits for writability (a finding: a round trip a
wait, not CPU).

The measure: the response-size classes whose writes retry an EAGAIN more than once per stall
(SPIN_MIN_RETRIES_PER_STALL), priced by the spinning threads' retry cycles less the copying of their bytes
(counters.spin_cost_ns), graded by that share of their CPU; what bound the stalls (the send buffer or the
peers' window) decides whether a larger SO_SNDBUF helps. A server that writes until EAGAIN and then waits
makes no such retry: that is write-wait, with what its waits cost the requests' time.
"""

from __future__ import annotations

from dataclasses import dataclass

from spinscope.analysis import counters, savings, stack_costs
from spinscope.analysis.capture import summed
from spinscope.analysis.metrics import Analysis, size_classes
from spinscope.analysis.patterns import WRITE_SPIN, WRITE_WAIT
from spinscope.analysis.verdicts import MIN_REQUESTS, SEVERITIES, Finding, Label, severity, share
from spinscope.analysis.wording import rounded, share_phrase, whose_cpu
from spinscope.fmt import fixed, size_class

MIN_CLASS_REQUESTS = 20      # responses in a size class before judging that class
WAIT_MIN_PER_RESPONSE = 0.5          # waits for writability per response worth a write-wait finding: most wait
# What makes a stall a spin rather than a wait: more than one retry of an EAGAIN per stall (retries /
# (waits + 1 per response)). This tells the mechanism apart (a server that retries until the buffer drains
# vs one that writes until EAGAIN, perhaps retries once, and waits), not how much it costs: that is the cost.
SPIN_MIN_RETRIES_PER_STALL = 2.0
STACK_EVENTS = "retries of an EAGAIN"  # what its event stacks stand for, in its call sites' lines


# --- write stalls: what bound them ------------------------------------------------------------------

@dataclass
class StallBound:
    """The averages over the stalled TCP writes (schema 5): what made them stall."""

    stalls: int
    sndbuf: float       # the send buffer, bytes
    queued: float       # bytes queued in it
    peer_window: float  # the peer's advertised receive window, bytes
    rtt_ms: float

    @property
    def slow_readers(self) -> bool:
        """The peers advertise a window smaller than the send buffer: they read slowly (or keep small
        receive buffers), and a larger send buffer would only queue more of the response."""
        return bool(self.peer_window < self.sndbuf)


def stall_bound(c) -> StallBound | None:
    stalls = counters.get(c, "stalls_sampled")
    if not stalls:
        return None
    return StallBound(int(stalls), c["stall_sndbuf_bytes"] / stalls, c["stall_queued_bytes"] / stalls,
                      c["stall_peer_window_bytes"] / stalls, c["stall_srtt_us"] / stalls / 1e3)


# --- the measures -------------------------------------------------------------------------------

@dataclass
class WriteSpinMeasure:
    spinning: list          # SizeClass whose responses retried an EAGAIN without waiting, most retries first
    spinners: list          # tids that retried an EAGAIN without waiting
    cost_ns: float          # their retries' cycles less the copying (counters.spin_cost_ns)
    cpu_ns: float           # their on-CPU time
    retries: float          # retries of an EAGAIN without waiting (all threads)
    copy_rate_ns_per_byte: float
    copy_rate_source: str   # counters.copy_rate
    bound: StallBound | None = None
    bare_retry_ns: float | None = None  # a retry that moved nothing: its cycle (counters.bare_retry_ns)
    bare_retries_ns: float = 0.0        # those retries' cycles: the floor of cost_ns

    @property
    def share(self) -> float | None:
        return share(self.cost_ns, self.cpu_ns)


def measure_write_spin(analysis: Analysis) -> WriteSpinMeasure | None:
    """Responses whose writes retry an EAGAIN at once, without waiting for the socket to drain, and what
    the spinning threads' retries cost. None when no thread retried an EAGAIN without waiting, or too few
    requests: a server that writes until EAGAIN and then waits makes no such retry."""
    if analysis.requests < MIN_REQUESTS:
        return None
    threads = analysis.threads
    spinners = [tid for tid, thread in threads.items() if counters.eagain_retries(thread) > 0]
    # The requests' own writes must retry their EAGAINs rather than wait (a client socket of the server's,
    # or a greeting, is not a response spinning).
    if not spinners or not _spins(analysis.capture.requests):
        return None
    classes = [c for c in size_classes(analysis, MIN_CLASS_REQUESTS)
               if c.eagain_retries >= SPIN_MIN_RETRIES_PER_STALL * (c.waits + 1)]
    sums = summed(threads[tid] for tid in spinners)
    schema = analysis.capture.schema
    rate, source = counters.copy_rate(sums, schema)
    return WriteSpinMeasure(sorted(classes, key=lambda c: -c.eagain_retries * c.count), spinners,
                            counters.spin_cost_ns(sums, schema), float(sums["oncpu_ns"]),
                            float(sum(counters.eagain_retries(thread) for thread in threads.values())), rate,
                            source, stall_bound(sums), counters.bare_retry_ns(sums),
                            float(counters.get(sums, "write_spin_empty_ns")))


def _spins(sums) -> bool:
    """Whether responses (request sums: the requests block, or a size class's) retry an EAGAIN more than
    once per stall."""
    return sums["count"] > 0 and sums["spin_eagain"] >= SPIN_MIN_RETRIES_PER_STALL * (sums["write_waited"] + sums["count"])


@dataclass
class WriteWaitMeasure:
    """Responses larger than the send buffer that wait for writability: no spin, but a round trip a wait."""

    worst: SizeClass
    classes: list
    bound: StallBound | None = None


def measure_write_wait(analysis: Analysis) -> WriteWaitMeasure | None:
    if analysis.requests < MIN_REQUESTS:
        return None
    waiting = [c for c in size_classes(analysis, MIN_CLASS_REQUESTS) if c.waits >= WAIT_MIN_PER_RESPONSE]
    if not waiting:
        return None
    return WriteWaitMeasure(max(waiting, key=lambda c: c.waits * c.count), waiting,
                            stall_bound(summed(analysis.threads.values())))


# --- the label and the finding -------------------------------------------------------------------

WRITE_SPIN_FIXES = [
    "on EAGAIN stop writing and wait for EPOLLOUT instead of retrying at once",
    "raise SO_SNDBUF (or net.ipv4.tcp_wmem) above the large response sizes so a response fits in one write",
    "write headers and body in one call (writev, sendfile) instead of many small writes",
]


def stall_phrase(bound) -> str:
    """What bound the stalls, and so whether a larger send buffer helps (a sentence, or "" without data)."""
    if bound is None:
        return ""
    kib = 1024
    if bound.slow_readers:
        return (f"at a stall the peers advertised a {bound.peer_window / kib:.1f} KiB window, smaller than the "
                f"{bound.sndbuf / kib:.0f} KiB send buffer ({bound.queued / kib:.0f} KiB queued, RTT "
                f"{bound.rtt_ms:.2f} ms): the clients read slowly; a larger SO_SNDBUF lets a response be written "
                "at once but does not deliver it sooner")
    return (f"at a stall the {bound.sndbuf / kib:.0f} KiB send buffer was the bound ({bound.queued / kib:.0f} KiB "
            f"queued; the peers' window {bound.peer_window / kib:.0f} KiB, RTT {bound.rtt_ms:.2f} ms): raising "
            "SO_SNDBUF above the response sizes helps")


def _bound_evidence(bound) -> dict:
    if bound is None:
        return {}
    return {"stalls_sampled": bound.stalls, "stall_sndbuf_bytes": round(bound.sndbuf),
            "stall_queued_bytes": round(bound.queued), "stall_peer_window_bytes": round(bound.peer_window),
            "stall_rtt_ms": round(bound.rtt_ms, 3), "slow_readers": bound.slow_readers}


def write_spin(analysis: Analysis) -> Label | None:
    """Responses whose writes retry an EAGAIN at once, without waiting for the socket to drain; graded by
    the measured cost of the spinning threads' retry cycles."""
    m = measure_write_spin(analysis)
    if m is None:
        return None
    level = severity(m.share)
    if level is None:
        return None
    details = _write_spin_details(m) + ([stall_phrase(m.bound)] if m.bound else [])
    label = Label(WRITE_SPIN, level, _write_spin_summary(analysis, m),
                  {**_write_spin_evidence(analysis, m), **_bound_evidence(m.bound)}, m.share, WRITE_SPIN_FIXES,
                  details, cost_share=m.share)
    label = stack_costs.attach(label, stack_costs.where(analysis, WRITE_SPIN, m.spinners), m.share, STACK_EVENTS)
    return savings.apply(label, savings.of_cpu(analysis, m.share, m.cpu_ns), tier=severity, order=SEVERITIES)


def _write_spin_summary(analysis: Analysis, m: WriteSpinMeasure) -> str:
    whose = whose_cpu(analysis.threads, m.spinners)
    cost = share_phrase(m.share, whose, "in those retries")
    if not m.spinning:  # retries without a size class big enough to describe
        return (f"write-spin: {m.retries:,.0f} writes retried an EAGAIN at once, without waiting{cost}; stop "
                "writing at EAGAIN and wait for EPOLLOUT, or raise SO_SNDBUF")
    worst = m.spinning[0]
    more = len(m.spinning) - 1
    where = f"{size_class(worst.bytes_min, worst.bytes_max)} responses" + (
        f" (and {more} more size class{'es' if more > 1 else ''})" if more else "")
    return (f"write-spin on {where}: {worst.writes:.0f} writes per response, {worst.eagain_retries:.0f} of "
            f"them retrying an EAGAIN at once, without waiting ({worst.eagain:.0f} EAGAIN, "
            f"{worst.partial:.0f} partial, {worst.waits:.1f} waits for writability){cost}; "
            "stop writing at EAGAIN and wait for EPOLLOUT, or raise SO_SNDBUF")


def _write_spin_evidence(analysis: Analysis, m: WriteSpinMeasure) -> dict:
    process = analysis.process
    evidence = {
        "requests": analysis.requests,
        "eagain_retries_per_request": rounded(process["eagain_retries_per_request"]),
        "partial_retries_per_request": rounded(process["partial_retries_per_request"]),
        "write_waits_per_request": rounded(process["write_waits_per_request"]),
        "spin_cpu_ms": round(m.cost_ns / 1e6, 3),
        "spinning_threads_cpu_ms": round(m.cpu_ns / 1e6, 3),
        "spin_us_per_eagain_retry": rounded(m.cost_ns / 1e3 / m.retries if m.retries else None),
        "copy_ns_per_byte": rounded(m.copy_rate_ns_per_byte, 4),
        "copy_rate_from": m.copy_rate_source,
        "bare_retry_us": rounded(m.bare_retry_ns / 1e3 if m.bare_retry_ns is not None else None),
        "bare_retries_cpu_ms": round(m.bare_retries_ns / 1e6, 3),
    }
    if m.spinning:
        worst = m.spinning[0]
        evidence.update({
            "spinning_responses": sum(c.count for c in m.spinning),
            "size_class_bytes_min": worst.bytes_min,
            "size_class_bytes_max": worst.bytes_max,
            "writes_per_response": round(worst.writes, 2),
            "eagain_retries_per_response": round(worst.eagain_retries, 2),
            "partial_retries_per_response": round(worst.partial_retries, 2),
            "eagain_per_response": round(worst.eagain, 2),
            "partial_per_response": round(worst.partial, 2),
            "waits_per_response": round(worst.waits, 2),
        })
    return evidence


def _write_spin_details(m: WriteSpinMeasure) -> list:
    lines = [f"{size_class(c.bytes_min, c.bytes_max)} responses: {c.count} responses, {c.writes:.1f} writes, "
             f"{c.eagain_retries:.1f} retries of an EAGAIN and {c.partial_retries:.1f} writes after a partial "
             f"write without waiting, {c.waits:.1f} waits for writability per response" for c in m.spinning]
    rate = {"bulk writes": "the rate of the threads' complete writes of 4 KiB or more",
            "first writes": "the rate of the responses' first writes, into an empty buffer (4 KiB or more on "
                            "average; from an older collector, whatever their size: then a header alone raises it)",
            "none": "nothing: no complete write of 4 KiB or more to price copying by"}[m.copy_rate_source]
    lines.append(f"cost: the retries' whole cycles (from the previous write's return to the retry's return, "
                 f"user space included), less copying their bytes at {rate}")
    if m.bare_retry_ns is not None:
        lines.append(f"of which retries that moved nothing (EAGAIN): {m.bare_retries_ns / 1e6:,.1f} ms, "
                     f"{m.bare_retry_ns / 1e3:.2f} µs a retry, waste at any copy rate (the cost's floor)")
    return lines


def write_wait(analysis: Analysis) -> Finding | None:
    """Responses larger than the send buffer that wait for writability: not a spin, but each wait is a
    round trip."""
    m: WriteWaitMeasure | None = measure_write_wait(analysis)
    if m is None:
        return None
    worst = m.worst
    size = size_class(worst.bytes_min, worst.bytes_max)
    summary = (f"{size} responses wait for writability {worst.waits:.1f} times each (the send buffer is smaller "
               f"than the response; {worst.eagain_retries:.1f} retries of an EAGAIN per response); each wait "
               f"is a round trip: these requests took {fixed(worst.request_ms, 2)} ms on average")
    evidence = {"size_class_bytes_min": worst.bytes_min, "size_class_bytes_max": worst.bytes_max,
                "responses": worst.count, "waits_per_response": round(worst.waits, 2),
                "eagain_retries_per_response": round(worst.eagain_retries, 2),
                "request_ms": rounded(worst.request_ms), **_bound_evidence(m.bound)}
    if m.bound is not None:
        summary += f"; {stall_phrase(m.bound)}"
    advice = (["the clients' windows, not the send buffer, pace these responses: a larger SO_SNDBUF saves the "
               "waits' wakeups, not their time"] if m.bound is not None and m.bound.slow_readers else
              ["raise SO_SNDBUF (or net.ipv4.tcp_wmem) above the large response sizes if their latency matters"])
    return savings.apply(Finding(WRITE_WAIT, summary, evidence, None, advice),
                         write_wait_saving(analysis, m.classes))


def write_wait_saving(analysis, waiting: list) -> savings.Saving | None:
    """The request time of the responses that waited for writability beyond what the responses that did
    not wait took on average (all of it when every response waited: an upper bound), over all requests'
    time."""
    classes = size_classes(analysis)
    total_ms = sum(c.count * (c.request_ms or 0.0) for c in classes)
    if total_ms <= 0:
        return None
    waited = {(c.bytes_min, c.bytes_max) for c in waiting}
    others = [c for c in classes if (c.bytes_min, c.bytes_max) not in waited and c.waits < WAIT_MIN_PER_RESPONSE]
    n_others = sum(c.count for c in others)
    base_ms = sum(c.count * (c.request_ms or 0.0) for c in others) / n_others if n_others else 0.0
    excess = sum(c.count * max(0.0, (c.request_ms or 0.0) - base_ms) for c in waiting)
    return savings.of_time(excess / total_ms)


DETECT = {WRITE_SPIN: write_spin, WRITE_WAIT: write_wait}
