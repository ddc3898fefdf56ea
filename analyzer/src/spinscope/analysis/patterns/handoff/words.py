"""The hand-off in words: the mechanism's phrase and fixes per runtime (a Go program has no pool it wrote,
a JVM's knobs are its executors, a Python server's its endpoints; NATIVE is the default, an unknown runtime
gets it too: docs/labels.md has the same tables), the summary, the evidence and the detail lines. A
sentence that states a rate ("each request is handed ... and back") is said only when the counts show
that rate (EVERY_REQUEST_MIN_RATE, ROUND_TRIP_MIN_HANDOFFS; claims.py checks every verdict against them).
"""

from __future__ import annotations

from typing import Mapping

from spinscope.analysis import counters
from spinscope.analysis.metrics import Analysis
from spinscope.analysis.patterns.handoff import threadlife
from spinscope.analysis.patterns.handoff.measure import (DISPATCH, LEADER_FOLLOWER, PER_CONNECTION, POOL_ROUND_TRIP,
                                                         SHARED_MEMORY, HandoffMeasure)
from spinscope.analysis.patterns.handoff.threadlife import THREAD_PER_REQUEST, lives_evidence, lives_phrase
from spinscope.analysis.roles import ROLE_NOUNS
from spinscope.analysis.runtime import CPYTHON, DOTNET, GO, JVM, NATIVE, NODE
from spinscope.analysis.wording import rounded, share_phrase, whose_cpu
from spinscope.fmt import fixed

# What the words may claim (claims.py): "each request is handed" needs about a hand-over per request (or per
# new connection), "... and back" a round trip.
EVERY_REQUEST_MIN_RATE = 0.5
ROUND_TRIP_MIN_HANDOFFS = 1.5


# --- what each mechanism is, in words, and its fixes, per runtime --------------------------------------

# Go multiplexes goroutines on GOMAXPROCS threads itself: whatever mechanism the counts resemble, it is
# Go's scheduler parking and waking its threads (a thread out of goroutines parks; the netpoller or a
# goroutine made runnable wakes one).
GO_SCHEDULER = ("Go's scheduler moves goroutines between its OS threads, parking a thread that runs out of "
                "goroutines and waking one when the netpoller or another goroutine has work")
GO_FIXES = [
    "set GOMAXPROCS to the CPUs the server really has to itself: with more Ps than free CPUs Go parks and wakes "
    "threads that then wait for a CPU (GOMAXPROCS=1 serves short requests without waking another thread)",
    "give each goroutine more work per wake-up: fewer channel sends, sync.Cond or WaitGroup hand-overs between "
    "goroutines on the request path, buffered writes (bufio.Writer) instead of many small ones",
]

HANDOFF_PHRASES = {
    NATIVE: {
        DISPATCH: "each request is handed to another thread and back",
        DISPATCH + "-one-way": "requests are handed to other threads",
        LEADER_FOLLOWER: "each request is answered by the thread that read it, but the pool threads pass the "
                         "selector role among themselves (leader/follower)",
        POOL_ROUND_TRIP: "each request is answered by the thread that read it, but the connection goes back to the "
                         "pool after each request and the next one is read by whichever pool thread takes it, each "
                         "thread waiting on its own socket (a connection's round trip through the pool)",
        SHARED_MEMORY: "requests are handed over through shared memory, the threads busy-waiting",
        PER_CONNECTION: "each new connection is handed to another thread, not each request",
        threadlife.THREAD_PER_REQUEST: threadlife.PHRASE,
    },
    JVM: {
        DISPATCH: "each request is handed from the I/O thread to an executor and back",
        DISPATCH + "-one-way": "requests are handed from the I/O threads to executor threads",
    },
    CPYTHON: {
        DISPATCH: "each request is handed from the event loop to a thread pool and back (a synchronous "
                  "endpoint run in a worker thread)",
        DISPATCH + "-one-way": "requests are handed from the event loop to worker threads",
    },
    NODE: {DISPATCH + "-one-way": "requests are handed to worker threads"},
    DOTNET: {DISPATCH: "each request is queued to another thread-pool thread and back"},
    GO: dict.fromkeys((DISPATCH, DISPATCH + "-one-way", LEADER_FOLLOWER, POOL_ROUND_TRIP, PER_CONNECTION),
                      GO_SCHEDULER),
}

HANDOFF_FIXES = {
    NATIVE: {
        threadlife.THREAD_PER_REQUEST: threadlife.FIXES,  # its words name each runtime's way out
        DISPATCH: [
            "serve short requests in the thread that read them, without a worker pool",
            "if a worker is needed, let the same worker read, process and write (about 2 handoffs instead of 4)",
            "one event loop per core (SO_REUSEPORT) or thread-per-connection both avoid per-request handoffs",
        ],
        LEADER_FOLLOWER: [
            "the pool threads pass the selector role to each other for every request: give each thread its own "
            "selector and connections (one event loop per thread, SO_REUSEPORT) so no role changes hands",
            "or keep one selector thread and let it serve the short requests itself",
        ],
        POOL_ROUND_TRIP: [
            "each keep-alive connection goes back to the pool after every request and the next request waits for "
            "a pool thread to take it: size the pool to the connections so a thread keeps its connection between "
            "requests, or give the pool's handover a grace period (wait briefly for the next request before "
            "queuing the connection back)",
            "or choose a connector that waits for the kept-alive connections in one selector (NIO-style) and hands "
            "a thread only a connection with a request ready",
        ],
        SHARED_MEMORY: [
            "threads that hand requests over through memory busy-wait for each other: when they share a CPU each "
            "spins for the other's time slice; give them a CPU each or turn the hand-over off (e.g. Redis: "
            "io-threads 1 on a machine with few cores)",
        ],
        PER_CONNECTION: [
            "a connection is handed over once, not each request: with short connections that is one hand-over "
            "per request; keep connections alive, or accept in the serving thread (SO_REUSEPORT)",
        ],
    },
    JVM: {
        DISPATCH: [
            "do not dispatch short handlers from the I/O thread: run them on it (Netty: add the handler without "
            "an EventExecutorGroup; gRPC: directExecutor(); Vert.x: a handler instead of executeBlocking)",
            "if the work blocks, hand it to one executor once and let that thread write the response, the "
            "executor sized to the CPUs",
        ],
        PER_CONNECTION: [
            "a connection is handed from the acceptor (boss) thread to an I/O thread once, not each request: "
            "keep connections alive",
        ],
    },
    CPYTHON: {
        DISPATCH: [
            "run the endpoint on the event loop: declare it `async def` (FastAPI, Starlette) and await its I/O, "
            "so no thread pool is involved",
            "or serve synchronous code from a WSGI server's workers (gunicorn sync or gthread), which read, run "
            "and write a request in one thread",
            "if it must run in the pool, size the pool (anyio's thread limiter, the executor's max_workers) to the "
            "CPUs: more threads wait for the GIL and a CPU",
        ],
    },
    NODE: {
        DISPATCH: [
            "keep request handling on the event loop; send only CPU-heavy work to worker_threads, batched, not "
            "every request",
            "scale with processes (the cluster module) rather than hand-overs per request",
        ],
    },
    DOTNET: {
        DISPATCH: [
            "await the request's I/O on its own path instead of Task.Run or queueing it to the ThreadPool",
            "if work must leave the request's thread, hand it over once and answer from there",
        ],
    },
    GO: dict.fromkeys((DISPATCH, LEADER_FOLLOWER, POOL_ROUND_TRIP, PER_CONNECTION), GO_FIXES),
}

# Fewer handoffs than the mechanism's words need (claims.py): the wait measured, not a hand-over per request.
FEW_HANDOFFS_FIXES = {
    NATIVE: ["few requests woke another thread: the wait is for a CPU once a thread is woken, not for a hand-over "
             "per request; keep the server's busy threads to the CPUs free for them (a smaller pool, the load and "
             "other work elsewhere)"],
    GO: GO_FIXES,
}


def _for(table: dict, runtime: str, key: str):
    """The runtime's entry for key, else the native one."""
    return table.get(runtime, {}).get(key) or table[NATIVE][key]


def handoff_phrase(runtime: str, mechanism: str) -> str:
    return _for(HANDOFF_PHRASES, runtime, mechanism)


def handoff_fixes(runtime: str, mechanism: str) -> list:
    return list(_for(HANDOFF_FIXES, runtime, mechanism))


def few_handoffs_fixes(runtime: str) -> list:
    return list(FEW_HANDOFFS_FIXES.get(runtime) or FEW_HANDOFFS_FIXES[NATIVE])


# --- the label's words -----------------------------------------------------------------------------

def names_mechanism(analysis: Analysis, m: HandoffMeasure) -> bool:
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


def summary(analysis: Analysis, m: HandoffMeasure, edges: dict, runtime: str) -> str:
    """The mechanism in words, the handoffs per request and where they go, the waits and the CPU share; for
    a shared-memory hand-over, the busy-waiting threads instead of the path."""
    if m.mechanism == SHARED_MEMORY:
        where = "busy-waiting, outside their calls (an upper bound: their user-space work is in it too)"
        cpu = share_phrase(m.cpu_share, whose_cpu(analysis.threads, m.involved), where, estimated=True)
        busy = busy_threads_line(analysis.threads, analysis.capture.duration_s, analysis.process["cpu_ms_per_request"],
                                 m.involved)
        return (f"handoff overhead: {handoff_phrase(runtime, m.mechanism)}: {m.cross_share:.0%} of requests are "
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
    if names_mechanism(analysis, m):
        phrase = handoff_phrase(runtime, DISPATCH + "-one-way" if m.mechanism == DISPATCH and
                                       m.per_request < ROUND_TRIP_MIN_HANDOFFS else m.mechanism) + ": "
    else:  # fewer hand-overs than the mechanism's words need: what was measured, no more
        phrase = f"{handoff_phrase(runtime, m.mechanism)}: " if runtime == "go" else ""
        # A wakeup, not a hand-over: work handed to a thread already awake wakes no one (a pool busy at 16
        # clients), so the rate says what woke, never that few requests were handed over.
        rate = f"{m.per_request:.2f} wakeups between threads per request" + (
            f" (one in about {1 / m.per_request:,.0f} requests woke another thread; a hand-over to a thread "
            "already awake wakes none)" if m.per_request else "")
    return (f"handoff overhead: {phrase}{lives}{rate}" + (f" ({path})" if path else "") + f"{moved}; {waits}{cpu}")


def evidence(analysis: Analysis, m: HandoffMeasure) -> dict:
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


def detail_lines(m: HandoffMeasure, edges: dict, requests: int) -> list:
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


def busy_threads_line(threads: Mapping, seconds: float | None, cpu_ms_per_request: float | None, tids: list) -> str:
    """`share of the capture the threads were on CPU and runnable (on CPU or waiting for it): 'io_thd_1' 29%
    on CPU, 98% runnable, ...; 1.9 ms CPU per request`: busy-waiting shows as threads that never sleep (on
    CPU or waiting for it nearly all the time) while their syscalls are few."""
    seconds = seconds or 1.0
    busy = sorted((threads[tid] for tid in tids), key=lambda thread: -thread["oncpu_ns"])[:3]
    parts = [f"'{thread['comm']}' {thread['oncpu_ns'] / 1e9 / seconds:.0%} on CPU, "
             f"{(thread['oncpu_ns'] + thread['runq_ns']) / 1e9 / seconds:.0%} runnable" for thread in busy]
    return (f"share of the capture the threads were on CPU and runnable (on CPU or waiting for it): "
            f"{', '.join(parts)}; {fixed(cpu_ms_per_request, 3)} ms CPU per request")
