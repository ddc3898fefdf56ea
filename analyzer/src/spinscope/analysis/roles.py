"""Thread roles inferred from each thread's counters (rules and thresholds in docs/labels.md).

What a thread does with requests decides first, what else it polls second. In this order:

1. idle        fewer traced calls (poll + socket read/write + futex wait) than IDLE_MAX_CALLS, or than
               IDLE_MAX_SHARE of the busiest thread's: it did almost nothing while traced. Not a thread
               that polls and hands work to others: a listener waking a worker per new connection makes
               few calls and is a dispatcher (memcached's). Nor a thread of a pool that shares the work
               out so thinly that each of its threads does little (tokio's blocking pool grows to 100
               threads and more at 16 clients): a thread woken by the target's threads that hands work
               back to them is judged with all such threads together, and they are no pool's idle
               threads when they were woken POOL_MIN_WAKEUPS_PER_REQUEST times per request between
               them (a runtime's helper threads, woken for its own work now and then, are not: V8's
               platform workers 0.04 a request, a JVM's GC threads far fewer).
2. event-loop  it serves sockets (successful socket reads and socket writes) and polls (poll calls are at
               least POLLING_MIN_SHARE of its calls, or they return at least
               EVENT_DRIVEN_MIN_EVENTS_PER_READ ready fds per successful socket read: readiness drives
               its reads, however many writes a spinning loop piles on), and either multiplexes or
               dispatches. It multiplexes when at least MULTIPLEX_MIN_SHARE of its poll calls return two
               or more ready fds, or when its socket I/O moves from one socket to another at least
               MULTIPLEX_MIN_SWITCHES_PER_REQUEST times per request it reads (connections interleaved;
               a handler stays on one connection for all of its requests). It dispatches when it wakes
               other threads at least DISPATCH_MIN_WAKEUPS_PER_REQUEST times per request of the process.
               nginx's worker, a Netty loop, a reactor that reads and writes but passes the work on.
3. handler     it serves sockets but does not multiplex: a thread-per-connection thread, a pre-forked
               process, an executor thread that reads and writes its request. It may poll its one
               connection between requests (Apache prefork's keep-alive wait); a single event loop
               with one connection looks the same and is called a handler too.
4. dispatcher  it polls, serves no socket itself, and wakes other threads: a listener handing each
               connection or request to a worker (memcached's, Apache event's).
5. acceptor    it polls, serves no socket and wakes nobody: it waits on the listening socket and
               accepts (accept is not traced).
6. worker      everything else that is busy: part of a request (only reads, or only writes) or futex
               waits without polling, woken by another thread.
"""

from __future__ import annotations

from typing import Mapping

from spinscope.analysis.counters import handoffs

EVENT_LOOP = "event-loop"
HANDLER = "handler"
DISPATCHER = "dispatcher"
ACCEPTOR = "acceptor"
WORKER = "worker"
IDLE = "idle"
ROLES = (EVENT_LOOP, HANDLER, DISPATCHER, ACCEPTOR, WORKER, IDLE)
POLLING_ROLES = (EVENT_LOOP, DISPATCHER, ACCEPTOR)

# Human names used in verdicts and reports.
ROLE_NOUNS = {EVENT_LOOP: "event loop", HANDLER: "handler", DISPATCHER: "dispatcher", ACCEPTOR: "acceptor",
              WORKER: "worker", IDLE: "idle thread"}

IDLE_MAX_CALLS = 10
IDLE_MAX_SHARE = 0.01
POLLING_MIN_SHARE = 0.01         # poll calls among its traced calls, for a thread to count as polling
MULTIPLEX_MIN_SHARE = 0.02       # poll calls returning two or more ready fds
MULTIPLEX_MIN_SWITCHES_PER_REQUEST = 0.5
DISPATCH_MIN_WAKEUPS_PER_REQUEST = 0.5
POOL_MIN_WAKEUPS_PER_REQUEST = 0.5  # wakeups received by a pool's lightly used threads, between them
EVENT_DRIVEN_MIN_EVENTS_PER_READ = 0.5


def activity(thread: Mapping) -> int:
    """Traced calls of a thread (a row of Capture.threads): the work the role rules weigh."""
    return thread["poll_calls"] + thread["read_calls"] + thread["write_calls"] + thread["futex_waits"]


def multiplex_share(thread: Mapping) -> float:
    """Share of a thread's poll calls that returned two or more ready fds (log2 buckets 2 and up)."""
    return sum(thread["poll_events_hist"][2:]) / max(thread["poll_calls"], 1)


def infer_roles(threads: Mapping[int, Mapping], requests: int) -> dict:
    """{tid: role} of each thread (Capture.threads), following the rules in the module docstring;
    `requests` is the process's request count."""
    busiest = max((activity(thread) for thread in threads.values()), default=0)
    roles = {tid: role_of(thread, busiest, requests) for tid, thread in threads.items()}
    pool = [tid for tid, role in roles.items() if role == IDLE and _pool_like(threads[tid])]
    if requests > 0 and sum(threads[tid]["wakeups_received"] for tid in pool) >= POOL_MIN_WAKEUPS_PER_REQUEST * requests:
        roles.update({tid: role_of(threads[tid], busiest, requests, pooled=True) for tid in pool})
    return roles


def _pool_like(thread: Mapping) -> bool:
    """Woken by the target's threads and handing work back to them: a pool's thread, busy or not."""
    return thread["wakeups_received"] > 0 and handoffs(thread) > 0


def role_of(thread: Mapping, busiest: int, requests: int, pooled: bool = False) -> str:
    """The role of one thread, `busiest` being the largest activity() among the target's threads; a thread of
    a POOLED group (infer_roles) is never idle."""
    calls = activity(thread)
    idle = not pooled and (calls < IDLE_MAX_CALLS or calls < IDLE_MAX_SHARE * busiest)
    reads = thread["read_calls"] - thread["read_eagain"] - thread["read_errors"]
    serves = reads > 0 and thread["write_calls"] > 0
    event_driven = thread["poll_events"] >= EVENT_DRIVEN_MIN_EVENTS_PER_READ * reads
    polls = thread["poll_calls"] > 0 and (thread["poll_calls"] >= POLLING_MIN_SHARE * calls or event_driven)
    wakes = handoffs(thread)
    dispatches = requests > 0 and wakes >= DISPATCH_MIN_WAKEUPS_PER_REQUEST * requests
    interleaves = thread["socket_switches"] >= MULTIPLEX_MIN_SWITCHES_PER_REQUEST * max(thread["requests_read"], 1)
    multiplexes = multiplex_share(thread) >= MULTIPLEX_MIN_SHARE or interleaves

    if idle and not (polls and wakes > 0):
        return IDLE
    if serves:
        return EVENT_LOOP if polls and (multiplexes or dispatches) else HANDLER
    if polls and wakes > 0:
        return DISPATCHER
    if polls and wakes == 0:
        return ACCEPTOR
    return WORKER


def thread_name(role: str, comm: str, tid: int) -> str:
    """How reports name a thread: `event loop 'nginx' (tid 812)`."""
    return f"{ROLE_NOUNS[role]} '{comm}' (tid {tid})"
