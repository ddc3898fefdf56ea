"""What each verdict measures: numbers only, no words.

A detector is split in two: a `measure_*` function here reads an Analysis and returns the numbers a verdict
rests on (who is involved, what it costs, the evidence), or None when the pattern is not there at all; the
phrasing (labels.py) turns a measure into a Label or a Finding and decides its severity from the measured
cost. A pattern's presence is decided by what it is (a retry of an EAGAIN without waiting, a wakeup that
found nothing, a wakeup between the target's threads), never by how many of them there are: counts are
evidence, the cost is the verdict. The small-sample guards (too few requests or calls to judge) are here too.

Costs are on-CPU nanoseconds of the threads involved, whole cycles where the capture has them (schema 5:
counters.empty_wakeup_ns, counters.spin_cost_ns), and the shares are of those threads' on-CPU time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from spinscope.analysis import counters
from spinscope.analysis.capture import summed
from spinscope.analysis.metrics import Analysis, ratio
from spinscope.analysis.roles import EVENT_LOOP, HANDLER, IDLE, MULTIPLEX_MIN_SHARE, multiplex_share
from spinscope.analysis.busywait import BUSY_WAIT_MIN_RUNNABLE_SHARE, busy_threads, outside_calls_ns  # noqa: F401
from spinscope.analysis.threadlife import THREAD_PER_REQUEST, THREAD_PER_REQUEST_MIN, ThreadLives, thread_lives

# Small-sample guards.
MIN_REQUESTS = 50            # requests before any per-request verdict
MIN_CLASS_REQUESTS = 20      # responses in a size class before judging that class
MIN_CALLS = 200              # poll (or read) calls before judging their returns
MIN_HERD_WAKEUPS = 50        # futile wakeups (ready, then nothing) before a herd is judged
HERD_MIN_ACCEPT_SHARE = 0.5  # accept EAGAINs per futile wakeup for the wakeups to be a herd on a listener

# Spurious select: an edge-triggered loop reads until EAGAIN, one EAGAIN per wakeup: that is its design.
SPURIOUS_MIN_READ_EAGAIN_SHARE = 0.6  # socket reads returning EAGAIN before they count as wakeups for nothing
IMBALANCE_MIN_RATIO = 5.0            # busiest / quietest event loop, in events per poll call
IMBALANCE_MAX_LOW_EVENTS = 2.0       # the quietest loop handles fewer events per call than this

# Busy polling by design: a thread whose polls are zero-timeout checks back to back and that never blocks.
BUSY_POLL_MIN_NOWAIT_SHARE = 0.9     # of its poll calls have a zero timeout
BUSY_POLL_MAX_SLEEPS_PER_POLL = 0.01  # voluntary context switches per poll call: it does not block
BUSY_POLL_MIN_EMPTY_SHARE = 0.5      # of its poll calls return nothing: polls that find events are work, not idling
SATURATED_MIN_ONCPU_SHARE = 0.5      # on CPU, of the capture: a polling loop that finds events is saturated

# Handoff mechanisms
SHARED_MEMORY_MAX_WAKEUPS = 0.5      # handoffs per request below which cross-thread requests moved without a wakeup
SHARED_MEMORY_MIN_CROSS = 0.05       # ...when at least this share of requests was answered by another thread
PER_CONNECTION_MAX_RATIO = 1.25      # handoffs per accepted connection at most this: a hand-over per connection
WAIT_MIN_PER_RESPONSE = 0.5          # waits for writability per response worth a write-wait finding: most wait
# What makes a stall a spin rather than a wait: more than one retry of an EAGAIN per stall (retries /
# (waits + 1 per response)). This tells the mechanism apart (a server that retries until the buffer drains
# vs one that writes until EAGAIN, perhaps retries once, and waits), not how much it costs: that is the cost.
SPIN_MIN_RETRIES_PER_STALL = 2.0

# How a handoff path works (HandoffMeasure.mechanism): the advice differs.
DISPATCH = "dispatch"              # a reactor or dispatcher hands each request to a worker pool (and back)
LEADER_FOLLOWER = "leader-follower"  # pool threads pass the selector role among themselves; each answers what it read
SHARED_MEMORY = "shared-memory"    # threads hand requests over through memory and busy-wait: no wakeup to time
PER_CONNECTION = "per-connection"  # an acceptor hands each new connection to a loop, not each request
# The connection goes back to the pool after each request and the next one is read by whichever pool thread
# takes it, each thread waiting on its own socket: no shared poll set whose waiter changes (leader/follower).
POOL_ROUND_TRIP = "pool-round-trip"
# THREAD_PER_REQUEST (threadlife.py): a thread created to serve requests another thread read, exiting after


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
    table the write-spin measure and the report's table share."""
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


# --- write-spin -------------------------------------------------------------------------------------

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


# --- busy polling -----------------------------------------------------------------------------------

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


# --- spurious select --------------------------------------------------------------------------------

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


# --- handoff overhead -------------------------------------------------------------------------------

@dataclass
class HandoffMeasure:
    mechanism: str
    handoffs: float           # deliberate wakeups between the target's threads of one process
    per_request: float
    cross_share: float        # requests answered by another thread than the one that read them
    accept_lock: float        # wakeups between processes (an accept lock shared by pre-forked processes)
    contention_per_request: float
    involved: list
    cpu_ns: float             # the involved threads' on-CPU time
    path_ns: float            # on-CPU in the calls that hand off or wait for a handoff (both sides)
    busy_wait_ns: float       # shared memory: the busy-waiting threads' on-CPU outside their syscalls (estimated)
    wait_ms_per_request: float
    request_ms: float | None
    edges: dict               # (waker role, wakee role) -> count, largest first (metrics.role_edges)
    # The involved threads' poll wakeups whose ready sockets they handed over (schema 6: poll_dispatch), and
    # those wakeups' whole cycles: the dispatch half of the hand-off, counted here and never as wakeups for
    # nothing (measure_spurious).
    dispatch_wakeups: int = 0
    dispatch_ns: float = 0.0
    lives: ThreadLives | None = None  # threads created for requests: their creation, start and exit

    @property
    def cpu_share(self) -> float | None:
        lives_ns = self.lives.cpu_ns if self.lives else 0.0
        return share(self.path_ns + self.dispatch_ns + self.busy_wait_ns + lives_ns, self.cpu_ns)

    @property
    def latency_share(self) -> float | None:
        """Share of the request time spent waiting for a woken thread to run (capped at the whole of it:
        wake-to-run waits also happen between requests)."""
        return share(self.wait_ms_per_request, self.request_ms) if self.request_ms else None


def measure_handoff(analysis: Analysis, edges: dict) -> HandoffMeasure | None:
    """Requests passed between the target's own threads, and what passing them costs: the on-CPU time of
    the calls that hand a request over or wait for one (waker and wakee), the wake-to-run wait, and for a
    shared-memory hand-over the busy-waiting threads' CPU. None without a handoff or a request answered by
    another thread, or with too few requests. Wakeups between processes (a pre-forked server's shared
    accept lock) and memory-map lock contention are not handoffs."""
    requests = analysis.requests
    if requests < MIN_REQUESTS:
        return None
    process, threads, cap = analysis.process, analysis.threads, analysis.capture
    accept_lock = _cross_process_wakeups(analysis)
    handoffs = max(0.0, float(counters.handoffs(cap.totals)) - accept_lock)
    cross = process["cross_thread_share"] or 0.0
    lives = thread_lives(analysis)
    if handoffs == 0 and cross == 0 and lives is None:
        return None
    per_request = handoffs / requests
    mechanism = (THREAD_PER_REQUEST if lives and lives.per_request >= THREAD_PER_REQUEST_MIN
                 else _handoff_mechanism(analysis, per_request, cross, handoffs))
    involved, busy_wait_ns = _handoff_threads(analysis, mechanism)
    if lives:  # the threads created for requests and their creators
        added = set(involved) | set(lives.tids) | set(lives.creators)
        involved = [tid for tid in threads if tid in added]
    if not involved:
        return None
    # The wake-to-run waits on the request path: of the threads that do request work, not of idle ones (a
    # runtime's helper threads, Node's V8 workers, woken now and then and waiting for a busy CPU); and the
    # threads created for requests, from their creation to their first run.
    wait_ns = sum(thread["wakeup_wait_ns"] for thread in threads.values() if thread["role"] != IDLE)
    wait_ms = float(wait_ns + (lives.start_wait_ns if lives else 0)) / 1e6 / requests
    return HandoffMeasure(mechanism, handoffs, per_request, cross, accept_lock,
                          process["contention_wakeups_per_request"] or 0.0, involved,
                          float(sum(threads[tid]["oncpu_ns"] for tid in involved)),
                          float(sum(threads[tid]["handoff_oncpu_ns"] for tid in involved)),
                          busy_wait_ns, wait_ms, process["request_ms"], edges,
                          int(sum(threads[tid]["poll_dispatch"] for tid in involved)),
                          float(sum(threads[tid]["poll_dispatch_cycle_ns"] for tid in involved)), lives)


def _handoff_threads(analysis: Analysis, mechanism: str) -> tuple:
    """(the tids a handoff involves, their busy-waiting ns): the threads that hand requests over or are handed
    them; for a shared-memory hand-over, which wakes no one, the busy threads (busywait.busy_threads) and their
    on-CPU time outside their calls."""
    threads = analysis.threads
    if mechanism == SHARED_MEMORY:
        busy = busy_threads(analysis)
        return busy, float(sum(outside_calls_ns(threads[tid]) for tid in busy))
    return [tid for tid, thread in threads.items()
            if counters.handoffs(thread) > 0 or thread["wakeups_received"] > 0], 0.0


def _cross_process_wakeups(analysis: Analysis) -> float:
    """Deliberate wakeups whose waker and wakee are threads of different traced processes: pre-forked
    processes taking turns on a shared accept lock (Apache prefork's accept mutex), not a request handed
    over."""
    wakeups = analysis.capture.wakeups
    pids = {tid: thread["pid"] for tid, thread in analysis.threads.items()}
    if not wakeups or len(set(pids.values())) < 2:
        return 0.0
    return float(sum(edge["count"] for edge in _deliberate(wakeups)
                     if edge["waker_tid"] in pids and edge["wakee_tid"] in pids
                     and pids[edge["waker_tid"]] != pids[edge["wakee_tid"]]))


def _deliberate(wakeups: list) -> list:
    """The wakeup edges (Capture.wakeups) that can be handoffs: not memory-map contention, not exits."""
    return [edge for edge in wakeups if edge["mechanism"] not in counters.NOT_HANDOFFS]


def _handoff_mechanism(analysis: Analysis, per_request: float, cross: float, handoffs: float) -> str:
    if per_request < SHARED_MEMORY_MAX_WAKEUPS and cross >= SHARED_MEMORY_MIN_CROSS:
        return SHARED_MEMORY
    if _per_connection(analysis, cross, handoffs):
        return PER_CONNECTION
    if _leader_follower(analysis, cross):
        return LEADER_FOLLOWER if _shared_poll_set(analysis) else POOL_ROUND_TRIP
    return DISPATCH


def _per_connection(analysis: Analysis, cross: float, handoffs: float) -> bool:
    """An acceptor hands each new connection over: about one handoff per accepted connection, fewer than one
    per two requests, and the requests answered by the thread that read them."""
    accepted = counters.accepts_by_result(analysis.capture.totals)["ok"]
    return bool(accepted and handoffs <= PER_CONNECTION_MAX_RATIO * accepted and cross < SHARED_MEMORY_MIN_CROSS
                and handoffs < 0.5 * analysis.requests)


def _serving_pollers(analysis: Analysis) -> set:
    return {tid for tid, thread in analysis.threads.items()
            if thread["role"] in (EVENT_LOOP, HANDLER) and thread["requests_read"] > 0}


def _shared_poll_set(analysis: Analysis) -> bool:
    """Whether the pool threads that wake each other wait on a shared poll set: their polls return two or more
    ready descriptors (at least MULTIPLEX_MIN_SHARE of them: a set of many connections), or they accept
    connections (the listener is in the set they poll). A thread waiting on its own one socket (a timed read on
    the connection it was handed) does neither: the connection is what moves between threads, not the selector."""
    pollers = [analysis.threads[tid] for tid in _serving_pollers(analysis)]
    polls = sum(thread["poll_calls"] for thread in pollers)
    several = sum(multiplex_share(thread) * thread["poll_calls"] for thread in pollers)
    accepted = sum(counters.accepts_by_result(thread)["ok"] for thread in pollers)
    return bool(accepted or (polls and several >= MULTIPLEX_MIN_SHARE * polls))


def _leader_follower(analysis: Analysis, cross: float) -> bool:
    """The request is answered by the thread that read it, and the wakeups go between threads that each poll
    and read requests: leader/follower (the selector role passing from one pool thread to the next) when they
    share a poll set (_shared_poll_set), else a connection's round trip through the pool (a frontend loop
    waking backend loops that talk to other servers is neither: they read no request)."""
    serving_pollers = _serving_pollers(analysis)
    if cross >= SHARED_MEMORY_MIN_CROSS or len(serving_pollers) < 2:
        return False
    deliberate = _deliberate(analysis.capture.wakeups)
    every = sum(edge["count"] for edge in deliberate)
    among = sum(edge["count"] for edge in deliberate
                if edge["waker_tid"] in serving_pollers and edge["wakee_tid"] in serving_pollers)
    return bool(every and among >= 0.5 * every)


def share(ns: float, oncpu_ns: float | None) -> float | None:
    """ns as a share of oncpu_ns (capped at 1), None when there is no CPU time to divide by."""
    return min(1.0, ns / oncpu_ns) if oncpu_ns else None

