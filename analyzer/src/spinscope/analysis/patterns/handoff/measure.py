"""The hand-off's measure: requests passed between the target's own threads, how (the mechanism, whose
words and fixes differ), and what passing them costs: the on-CPU time of the calls that hand a request over
or wait for one (both sides), the poll wakeups that dispatched ready connections, the wake-to-run wait, a
thread created per request's creation and exit (threadlife.py), and for a shared-memory hand-over, which
wakes no one, the busy-waiting threads' CPU (estimated). Numbers only: words in words.py, the grade in
the package.

Threads that hand requests over through shared memory busy-wait for each other: no wakeup to time, so
their cost is estimated from the threads themselves (busy_threads, outside_calls_ns).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from spinscope.analysis import counters
from spinscope.analysis.metrics import Analysis
from spinscope.analysis.patterns.handoff.threadlife import (THREAD_PER_REQUEST, THREAD_PER_REQUEST_MIN, ThreadLives,
                                                            thread_lives)
from spinscope.analysis.roles import EVENT_LOOP, HANDLER, IDLE, MULTIPLEX_MIN_SHARE, multiplex_share
from spinscope.analysis.verdicts import MIN_REQUESTS, share

# Handoff mechanisms
SHARED_MEMORY_MAX_WAKEUPS = 0.5      # handoffs per request below which cross-thread requests moved without a wakeup
SHARED_MEMORY_MIN_CROSS = 0.05       # ...when at least this share of requests was answered by another thread
PER_CONNECTION_MAX_RATIO = 1.25      # handoffs per accepted connection at most this: a hand-over per connection

# How a handoff path works (HandoffMeasure.mechanism): the advice differs.
DISPATCH = "dispatch"              # a reactor or dispatcher hands each request to a worker pool (and back)
LEADER_FOLLOWER = "leader-follower"  # pool threads pass the selector role among themselves; each answers what it read
SHARED_MEMORY = "shared-memory"    # threads hand requests over through memory and busy-wait: no wakeup to time
PER_CONNECTION = "per-connection"  # an acceptor hands each new connection to a loop, not each request
# The connection goes back to the pool after each request and the next one is read by whichever pool thread
# takes it, each thread waiting on its own socket: no shared poll set whose waiter changes (leader/follower).
POOL_ROUND_TRIP = "pool-round-trip"
# THREAD_PER_REQUEST (threadlife.py): a thread created to serve requests another thread read, exiting after


# --- busy-waiting threads (a shared-memory hand-over) -------------------------------------------------

# Busy-waiting threads never sleep: they are runnable (on a CPU, or waiting for one: runq_ns) most of the
# capture while their syscalls are few. Runnable, not on CPU: two busy-waiting threads sharing one CPU
# (Redis's main and I/O threads under taskset -c 0) are each on it for at most half the time, less when the
# load generator shares it too (29% each in a 32 s capture, 69% waiting for the CPU), and a busy machine
# cuts the on-CPU share of unpinned ones (45% each on 2 shared cores) the same way.
BUSY_WAIT_MIN_RUNNABLE_SHARE = 0.5


def busy_threads(analysis: Analysis) -> list:
    """The tids of the threads that serve requests (read or answer them) and are runnable (on CPU or in the
    run queue) at least BUSY_WAIT_MIN_RUNNABLE_SHARE of the capture."""
    threads, seconds = analysis.threads, analysis.capture.duration_s or 1.0
    return [tid for tid, thread in threads.items()
            if thread["role"] != IDLE and thread["read_calls"] + thread["write_calls"] > 0
            and thread["oncpu_ns"] + thread["runq_ns"] >= BUSY_WAIT_MIN_RUNNABLE_SHARE * seconds * 1e9]


def outside_calls_ns(thread: Mapping) -> int:
    """A thread's on-CPU time outside the traced calls (an upper bound of busy-waiting: user-space work is in
    it too): on-CPU less the time inside polls, futex calls and socket reads and writes (their wall time: a
    non-blocking socket call rarely sleeps)."""
    inside = thread["poll_oncpu_ns"] + thread["futex_oncpu_ns"] + thread["read_ns"] + thread["write_ns"]
    return max(0, thread["oncpu_ns"] - inside)


# --- the measure ------------------------------------------------------------------------------------

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
