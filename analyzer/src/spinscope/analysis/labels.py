"""The verdicts spinscope names, in words: labels (problems: write-spin, spurious select, handoff overhead)
and findings (what a server does that is worth knowing but is not a problem of its own: it waits for
writability, it busy-polls by design).

The numbers come from measures.py (one `measure_*` per pattern); this module phrases them and grades them.
A label appears when its measured cost reaches a tier, never because a count passed a threshold: the share
of the involved threads' on-CPU time (or, for handoffs, of the request time) is the verdict, the counts are
its evidence. Every threshold is a named constant (here or in measures.py) and is documented in
docs/labels.md; tests/analyzer/test_analyzer_docs.py holds the two equal. Too small a sample gets no label
and a note saying so (`Assessment.notes`), so a quiet capture is reported as "not enough data", never as
"healthy".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from spinscope.analysis import advice, counters, savings, stack_costs
from spinscope.analysis.coverage import coverage_notes
from spinscope.analysis.patterns import nagle_stall
from spinscope.analysis.measures import (DISPATCH, MIN_REQUESTS, PER_CONNECTION, SHARED_MEMORY, BusyPollMeasure, HandoffMeasure,
                                         Imbalance, SpuriousMeasure, WriteSpinMeasure, WriteWaitMeasure,
                                         measure_busy_poll, measure_handoff, measure_spurious, measure_write_spin,
                                         measure_write_wait)
from spinscope.analysis.metrics import Analysis, drop_line, dropped, role_edges
from spinscope.analysis.roles import ROLE_NOUNS
from spinscope.analysis.runtime import runtime_of
from spinscope.analysis.threadlife import THREAD_PER_REQUEST, lives_evidence, lives_phrase
from spinscope.analysis.verdicts import (BUSY_POLLING, FINDING_NAMES, HANDOFF_OVERHEAD, LABEL_NAMES, NAGLE_STALL,  # noqa: F401
                                         SPURIOUS_SELECT, TITLES, WRITE_SPIN, WRITE_WAIT, Finding, Label)
from spinscope.analysis.wording import (busy_threads_line, checkpoint_note, exec_notes, first_drop, name_of, rounded,
                                        sampling_note, saturation_notes, share_phrase, thread_lines, who, whose_cpu)
from spinscope.fmt import fixed, size_class

# Tiers of the measured share of the involved threads' on-CPU time (or of the request time spent waiting
# for a handed-to thread): below INFO_SHARE a pattern is not worth naming.
CRITICAL_SHARE = 0.20
WARNING_SHARE = 0.05
INFO_SHARE = 0.01
INFO, WARNING, CRITICAL = "info", "warning", "critical"
# Empty wakeups costing less than this much of one CPU are not named, whatever their share of an idle
# thread's CPU: a housekeeping timer's ticks (100 a second at 5 µs is 0.05% of a CPU) are not a problem.
SPURIOUS_MIN_WASTED_CPUS = 0.005
SEVERITIES = (INFO, WARNING, CRITICAL)
# What the words may claim (claims.py): "each request is handed" needs about a hand-over per request (or per
# new connection), "... and back" a round trip.
EVERY_REQUEST_MIN_RATE = 0.5
ROUND_TRIP_MIN_HANDOFFS = 1.5


@dataclass
class Assessment:
    labels: list
    notes: list  # why a verdict could not be reached (too few requests, ...)
    findings: list = field(default_factory=list)

    def names(self) -> set:
        return {label.name for label in self.labels}

    def serious(self) -> set:
        """Names of the labels at warning or critical."""
        return {label.name for label in self.labels if label.severity != INFO}

    def finding_names(self) -> set:
        return {finding.name for finding in self.findings}

    def ranked(self) -> list:
        """Labels and findings together, the largest saving first: the order every verb shows them in."""
        return savings.ranked(self)


def capture_notes(analysis: Analysis) -> list:
    """What limits the verdicts of this capture: too few requests, drops, execs, sampling, a checkpoint."""
    notes = []
    cap = analysis.capture
    if analysis.requests == 0:
        notes.append("no requests were observed (no socket read followed by a write): "
                     "per-request metrics are not available")
    elif analysis.requests < MIN_REQUESTS:
        notes.append(f"only {analysis.requests} requests (< {MIN_REQUESTS}): too few to judge "
                     f"{TITLES[WRITE_SPIN]} or {TITLES[HANDOFF_OVERHEAD]}")
    notes += [f"the collector dropped events, a map being full{first_drop(cap.intervals, drop.key)}: "
              f"{drop_line(drop, count)}" for drop, count in dropped(cap.drops)]
    notes += exec_notes(cap.execs)
    notes += coverage_notes(cap)
    if cap.time_sample > 1:
        notes.append(sampling_note(cap.time_sample, int(cap.totals["calls_timed"])))
    if cap.end_reason == "checkpoint":
        notes.append(checkpoint_note(cap))
    return notes + stack_costs.notes(analysis)


def assess(analysis: Analysis) -> Assessment:
    cap = analysis.capture
    if not cap.costs_measured:
        return Assessment(labels=[], notes=[
            f"capture schema {cap.schema} (an older collector) has counts but no measured costs: no verdict is "
            "drawn from it; record it again to judge"])
    notes = capture_notes(analysis)
    labels = [label for label in (write_spin(analysis), spurious_select(analysis), handoff_overhead(analysis))
              if label]
    findings = [finding for finding in (write_wait(analysis), busy_polling(analysis), nagle_stall.finding(analysis))
                if finding]
    return Assessment(labels=labels, notes=notes + saturation_notes(analysis), findings=findings)


def severity(share: float | None) -> str | None:
    """The tier of a measured share: None below INFO_SHARE (not worth naming)."""
    if share is None:
        return None
    if share >= CRITICAL_SHARE:
        return CRITICAL
    if share >= WARNING_SHARE:
        return WARNING
    return INFO if share >= INFO_SHARE else None


# --- write-spin -------------------------------------------------------------------------------------

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
    label = stack_costs.attach(label, stack_costs.where(analysis, WRITE_SPIN, m.spinners), m.share)
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


# --- waits for writability (a finding) ---------------------------------------------------------------

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
                         savings.write_wait_saving(analysis, m.classes))


# --- busy polling (a finding) ------------------------------------------------------------------------

def busy_polling(analysis: Analysis) -> Finding | None:
    """Threads that poll with a zero timeout back to back and never block: a CPU-for-latency trade chosen on
    purpose, not a loop that forgot to block; said with its cost."""
    m: BusyPollMeasure | None = measure_busy_poll(analysis)
    if m is None:
        return None
    threads = analysis.threads
    seconds = analysis.capture.duration_s or 1.0
    cpus = m.cpu_ns / 1e9 / seconds
    summary = (f"busy polling: {who(threads, m.tids)} never block{'s' if len(m.tids) == 1 else ''}: "
               f"{m.polls_per_s:,.0f} zero-timeout polls a second, {m.empty_share:.0%} of them empty, keeping "
               f"{cpus:.2f} CPUs busy{share_phrase(m.share, 'that CPU', 'in the empty checks')}: a trade of "
               "CPU for wake-up latency")
    evidence = {"threads": len(m.tids), "polls_per_s": round(m.polls_per_s, 1), "empty_share": rounded(m.empty_share),
                "cpus": round(cpus, 3), "empty_check_cpu_ms": round(m.cost_ns / 1e6, 3)}
    return savings.apply(Finding(BUSY_POLLING, summary, evidence, m.share,
                                 [advice.busy_poll_advice(runtime_of(analysis.capture).name)]),
                         savings.of_cpu(analysis, m.share, m.cpu_ns))


# --- spurious select --------------------------------------------------------------------------------

def spurious_select(analysis: Analysis) -> Label | None:
    """Wakeups that find no work, graded by their measured on-CPU time (whole cycles where measured)."""
    m = measure_spurious(analysis)
    if m is None or m.wasted_ns < SPURIOUS_MIN_WASTED_CPUS * analysis.capture.duration_s * 1e9:
        return None
    level = severity(m.share)
    if level is None:
        return None
    threads = analysis.threads

    def total(key: str) -> int:
        return sum(thread[key] for thread in threads.values())

    said = _Said(evidence={
        "poll_calls": total("poll_calls"),
        "poll_zero": total("poll_zero"),
        "poll_zero_nowait": total("poll_zero_nowait"),
        "poll_zero_fraction": rounded(analysis.process["poll_zero_fraction"]),
        "events_per_poll": rounded(analysis.process["events_per_poll"]),
        "read_eagain": total("read_eagain"),
        "read_eagain_fraction": rounded(analysis.process["read_eagain_fraction"]),
    })
    runtime = runtime_of(analysis.capture).name
    if m.empty:
        _say_empty_polls(said, analysis, m, runtime)
    if m.herd:
        _say_herd(said, m, runtime)
    if m.eagain_reads:
        _say_eagain_reads(said, analysis, m)
    if m.imbalance:
        _say_imbalance(said, threads, m.imbalance)
    # What each kind cost orders what is said of it: the first fix saves the most (a herd's before the
    # zero-timeout checks an asyncio loop makes anyway).
    kinds = [kind for kind, found in (("empty", m.empty), ("herd", m.herd), ("reads", m.eagain_reads),
                                      ("imbalance", m.imbalance)) if found]
    order = sorted(range(len(kinds)), key=lambda i: -m.costs.get(kinds[i], 0.0))
    said.signals, said.fixes = [said.signals[i] for i in order], [said.fixes[i] for i in order]
    if m.excluded_busy_pollers:
        said.details.append(f"left out: {who(threads, m.excluded_busy_pollers)}, busy polling by design "
                            "(see the busy-polling finding)")
    said.evidence["wasted_cpu_ms"] = round(m.wasted_ns / 1e6, 3)
    said.evidence["involved_threads_cpu_ms"] = round(m.cpu_ns / 1e6, 3)
    how = " (estimated from its measured poll time)" if m.estimated else ""
    summary = (f"spurious select: {'; '.join(said.signals)}"
               f"{share_phrase(m.share, whose_cpu(threads, m.involved), estimated=m.estimated)}{how}")
    label = Label(SPURIOUS_SELECT, level, summary, said.evidence, m.share, said.fixes, said.details, m.estimated,
                  cost_share=m.share)
    label = stack_costs.attach(label, stack_costs.where(analysis, SPURIOUS_SELECT, m.involved), m.share)
    return savings.apply(label, savings.of_cpu(analysis, m.share, m.cpu_ns), tier=severity, order=SEVERITIES)


@dataclass
class _Said:
    """A label's words as its kinds of evidence add to them: a signal each for the summary, the fixes, the
    detail lines and the evidence's keys, in the order the kinds are said."""

    evidence: dict
    signals: list = field(default_factory=list)
    fixes: list = field(default_factory=list)
    details: list = field(default_factory=list)


def _say_empty_polls(said: _Said, analysis: Analysis, m: SpuriousMeasure, runtime: str) -> None:
    said.signals.append(_empty_signal(analysis, m))
    said.fixes.append(advice.spurious_fix("empty-check" if m.empty.nowait >= m.empty.waited else "empty-wake", runtime))
    said.details += thread_lines(analysis.threads, "poll_zero", "poll_calls", "of its poll calls return no events")


def _say_herd(said: _Said, m: SpuriousMeasure, runtime: str) -> None:
    said.signals.append(_herd_signal(m))
    said.fixes.append(advice.spurious_fix("herd-accept" if m.herd.on_accept else "herd-work", runtime))
    said.evidence.update({"herd_wakeups": m.herd.wakeups, "futile_wakeups": m.herd.futile,
                          "rewaits": m.herd.rewaits, "accept_eagain": m.herd.accept_eagain,
                          "accepts": m.herd.accepts, "woken_per_connection": rounded(m.herd.woken_per_connection),
                          "herd_processes": m.herd.processes, "herd_threads": len(m.herd.tids),
                          "herd_us_per_wakeup": rounded(m.herd.us_each)})


def _say_eagain_reads(said: _Said, analysis: Analysis, m: SpuriousMeasure) -> None:
    said.signals.append(f"{analysis.process['read_eagain_fraction']:.0%} of socket reads return EAGAIN "
                        f"({m.eagain_reads:,})")
    said.fixes.append("read only sockets epoll reported readable, and stop at a short read")
    said.details += thread_lines(analysis.threads, "read_eagain", "read_calls", "of its socket reads return EAGAIN")


def _say_imbalance(said: _Said, threads: Mapping, imbalance: Imbalance) -> None:
    quiet, busy = imbalance.quiet, imbalance.busy
    said.signals.append(f"{name_of(threads, quiet)} handles {threads[quiet]['events_per_poll']:.1f} events per poll "
                        f"call while {name_of(threads, busy)} handles {threads[busy]['events_per_poll']:.0f}")
    said.fixes.append("balance the event loops (spread connections with SO_REUSEPORT, or merge the quiet "
                      "loop into the busy one): a loop woken for under one event per call pays a wakeup "
                      "per event")
    said.evidence.update({"quiet_loop_tid": quiet,
                          "quiet_loop_events_per_poll": rounded(threads[quiet]["events_per_poll"]),
                          "busy_loop_tid": busy, "busy_loop_events_per_poll": rounded(threads[busy]["events_per_poll"]),
                          "quiet_loop_excess_calls": int(imbalance.excess_calls)})


def _empty_signal(analysis: Analysis, m: SpuriousMeasure) -> str:
    e = m.empty
    kinds = [f"{e.nowait:,} zero-timeout checks" + (f" at {e.check_us:.1f} µs each" if e.check_us else "")] \
        if e.nowait else []
    kinds += [f"{e.waited:,} blocking calls that woke with nothing" + (f" at {e.wake_us:.1f} µs each" if e.wake_us else "")] \
        if e.waited else []
    cycle = f", {e.cycle_us:.1f} µs a wakeup with the loop around it" if e.cycle_us else ""
    return f"{analysis.process['poll_zero_fraction']:.0%} of poll calls return no events ({', '.join(kinds)}{cycle})"


def _herd_signal(m: SpuriousMeasure) -> str:
    h = m.herd
    each = f" at {h.us_each:.1f} µs each" if h.us_each else ""
    kinds = ", ".join(part for part in (
        f"{h.futile:,} returned ready descriptors that gave nothing" if h.futile else "",
        f"{h.rewaits:,} were put back to sleep inside the poll call" if h.rewaits else "") if part)
    if not h.on_accept:
        return (f"{h.wakeups:,} wakeups found nothing{each} ({kinds}): another thread took the work first, or the "
                "wakeup had nothing behind it")
    who = f"{h.processes} processes" if h.processes > 1 else f"{len(h.tids)} threads"
    ports = sorted({int(entry["port"]) for entry in h.listeners if entry.get("port")})
    where = f" on port {', '.join(str(p) for p in ports)}" if ports else ""
    woken = f"{h.woken_per_connection:.1f} woken per connection, " if h.woken_per_connection else ""
    return (f"thundering herd{where}: {who} wait on the same listener; {woken}{h.wakeups:,} wakeups found "
            f"nothing{each} ({kinds}; {h.accept_eagain:,} accept calls returned EAGAIN)")


# --- handoff overhead -------------------------------------------------------------------------------

def handoff_overhead(analysis: Analysis) -> Label | None:
    """Requests passed between the target's own threads, graded by what passing them costs: the larger of
    the on-CPU share of the calls that hand off and wait (busy-waiting too, for a shared-memory hand-over)
    and the share of the request time spent waiting for a woken thread to run."""
    edges = role_edges(analysis)
    m = measure_handoff(analysis, edges)
    if m is None:
        return None
    # its user-space part, with --stacks (a shared-memory hand-over's estimate has user space in it already)
    rate = None if m.mechanism == SHARED_MEMORY else max(m.per_request, m.lives.per_request if m.lives else 0.0)
    where = stack_costs.where(analysis, HANDOFF_OVERHEAD, m.involved, rate)
    cpu = stack_costs.whole_share(m.cpu_share, where)
    shares = [s for s in (cpu, m.latency_share) if s is not None]
    cost = max(shares) if shares else None
    level = severity(cost)
    if level is None:
        return None
    runtime = runtime_of(analysis.capture).name
    fixes = (advice.handoff_fixes(runtime, m.mechanism) if _names_mechanism(analysis, m)
             else advice.few_handoffs_fixes(runtime))
    label = Label(HANDOFF_OVERHEAD, level, _handoff_summary(analysis, m, edges, runtime),
                  _handoff_evidence(analysis, m), cpu, fixes, _handoff_details(m, edges, analysis.requests),
                  m.mechanism == SHARED_MEMORY, cost_share=cost)
    label = stack_costs.attach(label, where, m.cpu_share)
    return savings.apply(label, savings.of_cpu(analysis, cpu, m.cpu_ns), savings.of_time(m.latency_share),
                         tier=severity, order=SEVERITIES)


def _names_mechanism(analysis: Analysis, m: HandoffMeasure) -> bool:
    """Whether the counts show the mechanism at the rate its words state (claims.py): a hand-over per request
    (or per new connection), EVERY_REQUEST_MIN_RATE at least; a shared-memory hand-over wakes no one, its
    rate is the share of requests answered by another thread."""
    if m.mechanism == SHARED_MEMORY:
        return True
    if m.mechanism == PER_CONNECTION:
        return (_per_connection_rate(analysis, m) or 0.0) >= EVERY_REQUEST_MIN_RATE
    if m.mechanism == THREAD_PER_REQUEST:  # its rate: the threads created for requests, per request
        return m.lives is not None and m.lives.per_request >= EVERY_REQUEST_MIN_RATE
    return m.per_request >= EVERY_REQUEST_MIN_RATE


def _per_connection_rate(analysis: Analysis, m: HandoffMeasure) -> float | None:
    accepted = counters.accepts_by_result(analysis.capture.totals)["ok"]
    return m.handoffs / accepted if accepted else None


def _handoff_summary(analysis: Analysis, m: HandoffMeasure, edges: dict, runtime: str) -> str:
    """The mechanism in words, the handoffs per request and where they go, the waits and the CPU share; for
    a shared-memory hand-over, the busy-waiting threads instead of the path."""
    if m.mechanism == SHARED_MEMORY:
        where = "busy-waiting, outside their calls (an upper bound: their user-space work is in it too)"
        cpu = share_phrase(m.cpu_share, whose_cpu(analysis.threads, m.involved), where, estimated=True)
        busy = busy_threads_line(analysis.threads, analysis.capture.duration_s, analysis.process["cpu_ms_per_request"],
                                 m.involved)
        return (f"handoff overhead: {advice.handoff_phrase(runtime, m.mechanism)}: {m.cross_share:.0%} of requests are "
                f"answered by another thread than the one that read them, with {m.per_request:.2f} wakeups "
                f"per request{cpu}; {busy}")
    requests = analysis.requests
    path = ", ".join(f"{ROLE_NOUNS[a]} → {ROLE_NOUNS[b]} {n / requests:.1f}"
                     for (a, b), n in list(edges.items())[:3] if n / requests >= 0.05)
    woken = "a woken or new thread" if m.lives else "a woken thread"
    waits = f"{fixed(m.wait_ms_per_request, 3)} ms per request waiting for {woken} to run"
    if m.latency_share is not None:
        waits += (f" (requests take {fixed(m.request_ms, 3)} ms)" if m.latency_share >= 1
                  else f" ({m.latency_share:.0%} of the request time)")
    moved = f", {m.cross_share:.0%} of requests answered by another thread" if m.cross_share >= 0.005 else ""
    lives = f"{lives_phrase(m.lives)}; " if m.lives else ""
    cpu = share_phrase(m.cpu_share, "their CPU", "in the calls that hand off and wait"
                       + (" and the wakeups that dispatched ready connections" if m.dispatch_wakeups else "")
                       + (", creating and ending threads" if m.lives else ""))
    rate = f"{m.per_request:.1f} handoffs between threads per request"
    if _names_mechanism(analysis, m):
        phrase = advice.handoff_phrase(runtime, DISPATCH + "-one-way" if m.mechanism == DISPATCH and
                                       m.per_request < ROUND_TRIP_MIN_HANDOFFS else m.mechanism) + ": "
    else:  # fewer hand-overs than the mechanism's words need: what was measured, no more
        phrase = f"{advice.handoff_phrase(runtime, m.mechanism)}: " if runtime == "go" else ""
        rate = f"{m.per_request:.2f} handoffs between threads per request" + (
            f" (about one request in {1 / m.per_request:,.0f})" if m.per_request else "")
    return (f"handoff overhead: {phrase}{lives}{rate}" + (f" ({path})" if path else "") + f"{moved}; {waits}{cpu}")


def _handoff_evidence(analysis: Analysis, m: HandoffMeasure) -> dict:
    requests = analysis.requests
    return {
        "mechanism": m.mechanism,
        "requests": requests,
        "handoffs_per_request": rounded(m.per_request),
        "handoffs_per_connection": rounded(_per_connection_rate(analysis, m)),
        "cross_thread_share": rounded(m.cross_share),
        "accept_lock_wakeups_per_request": rounded(m.accept_lock / requests),
        "contention_wakeups_per_request": rounded(m.contention_per_request),
        # The metric of that name (every thread's wake-to-run waits), and the part of it on the request path
        # (threads that are not idle), which the request-time share is made of.
        "handoff_wait_ms_per_request": rounded(analysis.process["handoff_wait_ms_per_request"]),
        "request_path_wait_ms_per_request": rounded(m.wait_ms_per_request),
        "request_ms": rounded(m.request_ms),
        "handoff_wait_share_of_request_time": rounded(m.latency_share),
        "handoff_cpu_share": rounded(m.cpu_share),
        "cs_per_request": rounded(analysis.process["cs_per_request"]),
        "futex_ms_per_request": rounded(analysis.process["futex_ms_per_request"]),
        "cpu_ms_per_request": rounded(analysis.process["cpu_ms_per_request"]),
        "cpu_share_measures": (
            "the busy-waiting threads' on-CPU time outside their traced calls (an upper bound)"
            if m.mechanism == SHARED_MEMORY else
            "on-CPU time inside the calls that hand off or wait, both sides"
            + (", and the whole cycles of the poll wakeups that dispatched ready connections" if m.dispatch_wakeups
               else "") + " (a lower bound: user-space work the detour adds, queues, locks, a colder cache, is not "
            "timed)" + ("; and the clones and kernel exits of the threads created for requests" if m.lives else "")),
        **(_dispatch_evidence(m) if m.dispatch_wakeups else {}),
        **(lives_evidence(m.lives) if m.lives else {}),
    }


def _dispatch_evidence(m: HandoffMeasure) -> dict:
    """The poll wakeups whose ready sockets the involved threads handed over (schema 6): the dispatch half of
    the hand-off, with its whole cycles' CPU."""
    return {"dispatch": f"{m.dispatch_wakeups:,} poller wakeups dispatched ready connections to other threads",
            "dispatch_wakeups": m.dispatch_wakeups, "dispatch_cpu_ms": rounded(m.dispatch_ns / 1e6),
            "dispatch_us_each": rounded(m.dispatch_ns / 1e3 / m.dispatch_wakeups)}


def _handoff_details(m: HandoffMeasure, edges: dict, requests: int) -> list:
    """A line per edge between roles, and the wakeups that are not handoffs (memory-map locks, an accept
    lock shared between processes)."""
    details = [f"{ROLE_NOUNS[a]} → {ROLE_NOUNS[b]}: {n} wakeups, {n / requests:.2f} per request"
               for (a, b), n in edges.items()]
    if m.contention_per_request:
        details.append(f"{m.contention_per_request:.2f} wakeups per request from memory-map calls (mmap/munmap lock "
                       "contention), not counted as handoffs")
    if m.accept_lock:
        details.append(f"{m.accept_lock / requests:.2f} wakeups per request between processes (a shared accept "
                       "lock), not counted as handoffs")
    if m.dispatch_wakeups:
        details.append(f"{m.dispatch_wakeups:,} poller wakeups dispatched ready connections to other threads "
                       f"(deregistered or re-armed them, read nothing): {m.dispatch_ns / 1e3 / m.dispatch_wakeups:.1f} "
                       "µs each with the loop around them, in the hand-off's cost, not wakeups for nothing")
    return details
