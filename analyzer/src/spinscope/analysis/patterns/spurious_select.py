"""spurious select and the busy-polling finding: event-loop wakeups that find no work, and threads that
poll without ever blocking.

The label's measure: empty polls (zero-timeout checks and blocking calls that woke with nothing), wakeups
whose ready descriptors gave nothing (a herd: another thread took the work first, or a thundering herd on a
shared listener), socket reads that mostly return EAGAIN, and an event loop woken for far fewer events per
call than its sibling; priced by the on-CPU time of those wakeups (their whole cycles, user space included,
where the capture has them), graded by that share of the involved threads' CPU, and worded per runtime (an
asyncio loop's zero-timeout checks are its design; Go's are its scheduler looking for work).
A thread that polls with a zero timeout back to back and never blocks is busy polling by design (a
finding with its cost, left out of the label); one whose polls mostly return events is saturated (a note).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from spinscope.analysis import counters, savings, stack_costs
from spinscope.analysis.capture import summed
from spinscope.analysis.metrics import Analysis, ratio
from spinscope.analysis.patterns import BUSY_POLLING, SPURIOUS_SELECT
from spinscope.analysis.roles import EVENT_LOOP
from spinscope.analysis.runtime import CPYTHON, GO, JVM, NATIVE, runtime_of
from spinscope.analysis.verdicts import MIN_CALLS, SEVERITIES, Finding, Label, severity, share
from spinscope.analysis.wording import name_of, rounded, share_phrase, thread_lines, who, whose_cpu

MIN_HERD_WAKEUPS = 50        # futile wakeups (ready, then nothing) before a herd is judged
HERD_MIN_ACCEPT_SHARE = 0.5  # accept EAGAINs per futile wakeup for the wakeups to be a herd on a listener

# Spurious select: an edge-triggered loop reads until EAGAIN, one EAGAIN per wakeup: that is its design.
SPURIOUS_MIN_READ_EAGAIN_SHARE = 0.6  # socket reads returning EAGAIN before they count as wakeups for nothing
IMBALANCE_MIN_RATIO = 5.0            # busiest / quietest event loop, in events per poll call
IMBALANCE_MAX_LOW_EVENTS = 2.0       # the quietest loop handles fewer events per call than this
# Empty wakeups costing less than this much of one CPU are not named, whatever their share of an idle
# thread's CPU: a housekeeping timer's ticks (100 a second at 5 µs is 0.05% of a CPU) are not a problem.
SPURIOUS_MIN_WASTED_CPUS = 0.005

# Busy polling by design: a thread whose polls are zero-timeout checks back to back and that never blocks.
BUSY_POLL_MIN_NOWAIT_SHARE = 0.9     # of its poll calls have a zero timeout
BUSY_POLL_MAX_SLEEPS_PER_POLL = 0.01  # voluntary context switches per poll call: it does not block
BUSY_POLL_MIN_EMPTY_SHARE = 0.5      # of its poll calls return nothing: polls that find events are work, not idling
SATURATED_MIN_ONCPU_SHARE = 0.5      # on CPU, of the capture: a polling loop that finds events is saturated
STACK_EVENTS = "futile wakeups and empty polls"  # what its event stacks stand for, in its call sites' lines


# --- busy polling: the threads, and their measure ---------------------------------------------------

@dataclass
class BusyPollMeasure:
    tids: list
    cost_ns: float       # on-CPU of their empty checks (whole cycles where measured)
    cpu_ns: float        # their on-CPU time
    polls_per_s: float
    empty_share: float   # of their poll calls that found nothing

    @property
    def share(self) -> float | None:
        return share(self.cost_ns, self.cpu_ns)


def _polling(thread: Mapping, empty: bool) -> bool:
    """Zero-timeout polls back to back (BUSY_POLL_MIN_NOWAIT_SHARE of at least MIN_CALLS poll calls), most of
    them empty (BUSY_POLL_MIN_EMPTY_SHARE) or, with empty False, most of them returning events."""
    calls = thread["poll_calls"]
    return (calls >= MIN_CALLS and thread["poll_nowait"] >= BUSY_POLL_MIN_NOWAIT_SHARE * calls
            and (thread["poll_zero"] >= BUSY_POLL_MIN_EMPTY_SHARE * calls) == empty)


def busy_pollers(threads: Mapping[int, Mapping]) -> list:
    """The tids of the threads that poll with a zero timeout back to back, never block, and find nothing in
    most of their polls: busy polling by design (HAProxy's busy-polling, DPDK-style loops), a CPU-for-latency
    trade rather than a loop that forgot to block. Polls that return events are work (saturated_loops)."""
    return [tid for tid, thread in threads.items() if _polling(thread, empty=True)
            and thread["cs_voluntary"] <= BUSY_POLL_MAX_SLEEPS_PER_POLL * thread["poll_calls"]]


def saturated_loops(threads: Mapping[int, Mapping], seconds: float) -> list:
    """The tids of the threads whose zero-timeout polls back to back mostly return events, on CPU at least
    SATURATED_MIN_ONCPU_SHARE of the capture: always more to do, not busy polling."""
    return [tid for tid, thread in threads.items() if _polling(thread, empty=False)
            and thread["oncpu_ns"] >= SATURATED_MIN_ONCPU_SHARE * seconds * 1e9]


def measure_busy_poll(analysis: Analysis) -> BusyPollMeasure | None:
    threads = analysis.threads
    tids = busy_pollers(threads)
    if not tids:
        return None
    sums = summed(threads[tid] for tid in tids)
    cost = counters.busy_check_ns(sums, analysis.capture.schema)
    return BusyPollMeasure(tids, cost, float(sums["oncpu_ns"]),
                           ratio(sums["poll_calls"], analysis.capture.duration_s) or 0.0,
                           ratio(sums["poll_zero"], sums["poll_calls"]) or 0.0)


# --- spurious select: the measure ---------------------------------------------------------------

@dataclass
class EmptyPolls:
    nowait: int          # zero-timeout checks that found nothing
    waited: int          # calls that could block and woke with nothing
    check_us: float | None
    wake_us: float | None
    cycle_us: float | None  # the whole cycle of a blocking poll that woke with nothing (schema 5), user space included


@dataclass
class Herd:
    futile: int          # poll wakeups that returned ready descriptors which gave nothing
    rewaits: int         # wakeups inside poll calls that found nothing and slept again (never left the kernel)
    accept_eagain: int
    accepts: int         # accepts that returned a connection
    tids: list
    processes: int
    listeners: list      # capture listeners (port, family, counts) with EAGAIN accepts
    cost_ns: float       # the futile wakeups' whole cycles and the rewaits' slices

    @property
    def wakeups(self) -> int:
        return self.futile + self.rewaits

    @property
    def us_each(self) -> float | None:
        return ratio(self.cost_ns / 1e3, self.wakeups)

    @property
    def on_accept(self) -> bool:
        """Whether the wakeups that found nothing were for connections: the threads that woke accept
        connections, and accept returned EAGAIN for at least HERD_MIN_ACCEPT_SHARE of the wakeups that reached
        user space. A thundering herd on a listener, rather than wakeups for work another thread took."""
        return self.accepts > 0 and self.accept_eagain >= HERD_MIN_ACCEPT_SHARE * self.futile

    @property
    def woken_per_connection(self) -> float | None:
        """Threads or processes woken per connection: the one that took it, and the ones that found nothing."""
        return ratio(self.accepts + self.wakeups, self.accepts) if self.accepts else None


@dataclass
class Imbalance:
    quiet: int
    busy: int
    excess_calls: float
    excess_ns: float     # estimated: the quiet loop's poll time scaled to the calls it would not make


@dataclass
class SpuriousMeasure:
    empty: EmptyPolls | None
    herd: Herd | None
    eagain_reads: int    # socket reads that returned EAGAIN, when they are most reads (else 0)
    imbalance: Imbalance | None
    wasted_ns: float
    involved: list
    cpu_ns: float
    estimated: bool
    excluded_busy_pollers: list = field(default_factory=list)
    # What each kind found cost (on-CPU ns): "empty", "herd", "reads", "imbalance"; the fixes are ordered by it.
    costs: dict = field(default_factory=dict)

    @property
    def share(self) -> float | None:
        return share(self.wasted_ns, self.cpu_ns)


def measure_spurious(analysis: Analysis) -> SpuriousMeasure | None:
    """Wakeups that find no work: empty polls, wakeups whose ready descriptors gave nothing (a herd), reads
    that return EAGAIN most of the time, an event loop woken for far fewer events per call than its
    sibling; priced by the on-CPU time of those wakeups (their whole cycles where the capture has them).
    Busy pollers (busy_pollers) are left out: their empty checks are their design."""
    pollers = busy_pollers(analysis.threads)
    threads = {tid: thread for tid, thread in analysis.threads.items() if tid not in pollers}
    cycles = analysis.capture.schema >= counters.CYCLES_SCHEMA
    empty = _empty_polls(threads, cycles)
    herd = _herd(threads, analysis.capture.listeners) if cycles else None
    reads = _eagain_reads(threads, cycles)
    wasted, involved = _charged(threads, [found for found in (empty, herd, reads) if found is not None])
    costs = {kind: sum(map(found.cost, threads.values())) if found.cost else 0.0 for kind, found in
             (("empty", empty), ("herd", herd), ("reads", reads)) if found is not None}
    imbalance, estimated = _loop_imbalance(threads), False
    if imbalance:
        estimated = imbalance.excess_ns > wasted[imbalance.quiet]
        wasted[imbalance.quiet] = max(wasted[imbalance.quiet], imbalance.excess_ns)
        involved.add(imbalance.quiet)
        costs["imbalance"] = imbalance.excess_ns

    if not (empty or herd or reads or imbalance):
        return None
    tids = sorted(involved)
    return SpuriousMeasure(empty.measure if empty else None, herd.measure if herd else None,
                           reads.measure if reads else 0, imbalance, float(sum(wasted.values())), tids,
                           float(sum(threads[tid]["oncpu_ns"] for tid in tids)), estimated, pollers, costs)


@dataclass
class _Found:
    """One kind of wakeup for nothing, as measure_spurious finds it: its measure, what it cost each thread
    (on-CPU ns; None: the cost is inside another kind's), and the threads it involves."""

    measure: object
    cost: Callable[[Mapping], float] | None
    tids: set


def _charged(threads: Mapping[int, Mapping], found: list) -> tuple:
    """({tid: on-CPU ns of its wakeups for nothing}, the tids involved) over the kinds found."""
    wasted = dict.fromkeys(threads, 0.0)
    involved: set = set()
    for kind in found:
        if kind.cost is not None:
            for tid, thread in threads.items():
                wasted[tid] += kind.cost(thread)
        involved |= kind.tids
    return wasted, involved


def _total(threads: Mapping[int, Mapping], key: str) -> int:
    return sum(thread[key] for thread in threads.values())


def _empty_polls(threads: Mapping[int, Mapping], cycles: bool) -> _Found | None:
    """Poll calls that returned nothing, at least MIN_CALLS of them: zero-timeout checks and blocking calls
    that woke empty."""
    zero = _total(threads, "poll_zero")
    if zero < MIN_CALLS:
        return None
    nowait = _total(threads, "poll_zero_nowait")
    waited = zero - nowait
    # A blocking poll that woke with nothing costs its whole cycle (schema 5); a zero-timeout check, the time
    # inside it (counters.empty_wakeup_ns).
    woke = "poll_zero_cycle_ns" if cycles else "poll_zero_wait_ns"
    empty = EmptyPolls(nowait, waited, ratio(_total(threads, "poll_zero_nowait_ns") / 1e3, nowait),
                       ratio(_total(threads, "poll_zero_wait_ns") / 1e3, waited),
                       ratio(_total(threads, woke) / 1e3, waited) if cycles else None)
    return _Found(empty, lambda thread: thread[woke] + thread["poll_zero_nowait_ns"],
                  {tid for tid, thread in threads.items() if thread["poll_zero"] > 0})


def _herd(threads: Mapping[int, Mapping], listeners: list) -> _Found | None:
    """Wakeups whose ready descriptors gave nothing, or that slept again inside the call (schema 5), at
    least MIN_HERD_WAKEUPS of them; with the accepts of the threads that woke, and the listeners whose
    accepts returned EAGAIN."""
    if sum(counters.herd_wakeups(thread) for thread in threads.values()) < MIN_HERD_WAKEUPS:
        return None
    tids = [tid for tid, thread in threads.items() if counters.herd_wakeups(thread) > 0]
    accepts = [counters.accepts_by_result(threads[tid]) for tid in tids]
    listeners = [dict(entry) for entry in listeners if entry["accept_eagain"] > 0]
    processes = max([entry["processes"] for entry in listeners] + [len({threads[tid]["pid"] for tid in tids})])
    herd = Herd(_total(threads, "poll_futile"), _total(threads, "poll_rewaits"), sum(a["eagain"] for a in accepts),
                sum(a["ok"] for a in accepts), tids, processes,
                listeners, float(sum(counters.herd_ns(thread) for thread in threads.values())))
    return _Found(herd, counters.herd_ns, set(tids))


def _eagain_reads(threads: Mapping[int, Mapping], cycles: bool) -> _Found | None:
    """Socket reads that returned EAGAIN, when there are MIN_CALLS of them and they are
    SPURIOUS_MIN_READ_EAGAIN_SHARE of the reads; the measure is their count."""
    eagain = _total(threads, "read_eagain")
    if eagain < MIN_CALLS or (ratio(eagain, _total(threads, "read_calls")) or 0) < SPURIOUS_MIN_READ_EAGAIN_SHARE:
        return None
    # With whole cycles, a read that found nothing is inside its wakeup's cycle: no cost of its own.
    return _Found(eagain, None if cycles else (lambda thread: thread["read_eagain_ns"]),
                  {tid for tid, thread in threads.items() if thread["read_eagain"] > 0})


def _loop_imbalance(threads: Mapping[int, Mapping]) -> Imbalance | None:
    """Two event loops that differ by IMBALANCE_MIN_RATIO in events per poll call, the quiet one handling
    fewer than IMBALANCE_MAX_LOW_EVENTS."""
    loops = [tid for tid, thread in threads.items()
             if thread["role"] == EVENT_LOOP and thread["poll_calls"] >= MIN_CALLS]
    if len(loops) < 2:
        return None
    quiet = min(loops, key=lambda tid: threads[tid]["events_per_poll"])
    busy = max(loops, key=lambda tid: threads[tid]["events_per_poll"])
    low, high = threads[quiet]["events_per_poll"], threads[busy]["events_per_poll"]
    if low >= IMBALANCE_MAX_LOW_EVENTS or high < IMBALANCE_MIN_RATIO * low or not high:  # not high: no events at all
        return None
    loop = threads[quiet]
    excess = loop["poll_calls"] - loop["poll_events"] / high
    excess_ns = loop["poll_oncpu_ns"] * excess / max(loop["poll_calls"], 1)
    return Imbalance(int(quiet), int(busy), float(excess), float(excess_ns))


# --- spurious select: the label --------------------------------------------------------------------

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
    label = stack_costs.attach(label, stack_costs.where(analysis, SPURIOUS_SELECT, m.involved), m.share,
                               STACK_EVENTS)
    # A herd's fix (one waiter woken per connection) changes more than its futile wakeups: which worker serves
    # each connection (the one that slept last, its caches warm, under select() and accept()) and how many
    # wake on a busy CPU. Measured on gunicorn, 4 workers against a listener per worker: the futile wakeups
    # cost 0.14-0.16 of its CPU, the fix saved a median 0.03 on a quiet machine and 0.10 beside a CPU hog
    # where they cost 0.05-0.06 (docs/verdict-pairs.md): its cost is said, not what a fix saves.
    herd_first = m.herd is not None and max(m.costs, key=m.costs.get, default=None) == "herd"
    if herd_first:
        label.details.append(HERD_CLAIM)
    return savings.apply(label, savings.of_cpu(analysis, m.share, m.cpu_ns, savings.COST if herd_first else
                                               savings.SAVES), tier=severity, order=SEVERITIES)


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
    said.fixes.append(spurious_fix("empty-check" if m.empty.nowait >= m.empty.waited else "empty-wake", runtime))
    said.details += thread_lines(analysis.threads, "poll_zero", "poll_calls", "of its poll calls return no events")


def _say_herd(said: _Said, m: SpuriousMeasure, runtime: str) -> None:
    said.signals.append(_herd_signal(m))
    said.fixes.append(spurious_fix("herd-accept" if m.herd.on_accept else "herd-work", runtime))
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


HERD_CLAIM = ("what the herd's fix saves is not measured here: waking one waiter per connection removes the futile "
              "wakeups counted above, and also changes which worker serves each connection (the one that slept last "
              "has warm caches) and how many wake on a busy CPU, so it can save less or more than they cost: "
              "measure it before and after")


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


# --- what to change, per runtime (docs/labels.md has the same tables) --------------------------------

EMPTY_CHECK_FIXES = {
    NATIVE: "block in epoll_wait until the next timer is due instead of checking with a zero timeout while there "
            "is nothing to run",
    GO: "these are Go's scheduler looking for work (the netpoller checked with a zero timeout) before it parks a "
        "thread: fewer Ps (GOMAXPROCS) leave fewer idle threads looking",
    CPYTHON: "the event loop checks with a zero timeout whenever callbacks are ready (asyncio's and Tornado's "
             "design): fewer callbacks and await hops per request mean fewer checks",
}
EMPTY_WAKE_FIXES = {
    NATIVE: "wake one loop per event (EPOLLEXCLUSIVE, SO_REUSEPORT) instead of all of them, and use a timeout as "
            "long as the next timer",
}
HERD_ACCEPT_FIXES = {
    NATIVE: "wake one waiter per connection: EPOLLEXCLUSIVE on the listening socket, a listener per worker with "
            "SO_REUSEPORT, or one acceptor that hands connections out",
    CPYTHON: "wake one process per connection: a listener per process (Tornado: bind_sockets(..., reuse_port=True) "
             "after fork_processes; gunicorn binds before it forks, so its --reuse-port alone leaves one listener "
             "for all workers: run one master per worker, each `-w 1 --reuse-port` on the same port), or "
             "EPOLLEXCLUSIVE on the shared listener (it wakes fewer, not always one)",
    JVM: "wake one thread per connection: one acceptor (a Netty boss group of 1) that hands connections out, or a "
         "listener per event loop with SO_REUSEPORT (Netty's epoll transport: EpollChannelOption.SO_REUSEPORT)",
    GO: "wake one process per connection: Go's netpoller is per process, so give each process its own listener "
        "(SO_REUSEPORT through net.ListenConfig's Control) instead of sharing one",
}
HERD_WORK_FIXES = {
    NATIVE: "wake one thread per unit of work: EPOLLEXCLUSIVE, or an epoll set per thread, so the others do not "
            "wake for what one of them takes",
}


def spurious_fix(kind: str, runtime: str) -> str:
    table = {"empty-check": EMPTY_CHECK_FIXES, "empty-wake": EMPTY_WAKE_FIXES, "herd-accept": HERD_ACCEPT_FIXES,
             "herd-work": HERD_WORK_FIXES}[kind]
    return table.get(runtime) or table[NATIVE]


BUSY_POLL_ADVICE = {
    NATIVE: "keep it if the latency matters more than the core it occupies; otherwise turn busy polling off "
            "(HAProxy: remove `busy-polling`) so the thread blocks when there is nothing to do",
    GO: "Go's scheduler spins looking for work before it parks a thread (at most half of GOMAXPROCS threads at "
        "once): a lower GOMAXPROCS spins less; keep it if the latency matters more than the CPU",
}


def busy_poll_advice(runtime: str) -> str:
    return BUSY_POLL_ADVICE.get(runtime) or BUSY_POLL_ADVICE[NATIVE]


# --- busy polling: the finding; a saturated loop's note ---------------------------------------------

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
                                 [busy_poll_advice(runtime_of(analysis.capture).name)]),
                         savings.of_cpu(analysis, m.share, m.cpu_ns))


def saturation_notes(analysis) -> list:
    """A note per saturated loop (saturated_loops): it polls without sleeping because its polls
    find events, so it is busy with work, not busy polling; what it needs is CPU, or less work per event."""
    threads, seconds = analysis.threads, analysis.capture.duration_s or 1.0
    notes = []
    for tid in saturated_loops(threads, seconds):
        row = threads[tid]
        notes.append(f"{name_of(threads, tid)} is saturated: {row['poll_nowait'] / row['poll_calls']:.0%} of its "
                     f"{row['poll_calls']:,} polls have a zero timeout and {1 - row['poll_zero'] / row['poll_calls']:.0%} "
                     f"of them return events, on CPU {row['oncpu_ns'] / 1e9 / seconds:.0%} of the capture: it "
                     "checks for events between pieces of work because there is always more to do (not busy "
                     "polling); more throughput needs more CPU or less work per request")
    return notes


DETECT = {SPURIOUS_SELECT: spurious_select, BUSY_POLLING: busy_polling}
