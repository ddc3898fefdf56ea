"""Thread roles inferred from each thread's counters (rules and thresholds in docs/labels.md).

What a thread does with requests decides first, what else it polls second. In this order:

1. idle        fewer traced calls (poll + socket read/write + futex wait) than IDLE_MAX_CALLS, or than
               IDLE_MAX_SHARE of the busiest thread's: it did almost nothing while traced. Not a thread
               that polls and hands work to others: a listener waking a worker per new connection makes
               few calls and is a dispatcher (memcached's).
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

import pandas as pd

from spinscope.counters import handoffs

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
EVENT_DRIVEN_MIN_EVENTS_PER_READ = 0.5


def activity(threads: pd.DataFrame) -> pd.Series:
    """Traced calls per thread: the work the role rules weigh."""
    return threads["poll_calls"] + threads["read_calls"] + threads["write_calls"] + threads["futex_waits"]


def multiplex_share(threads: pd.DataFrame) -> pd.Series:
    """Share of each thread's poll calls that returned two or more ready fds (log2 buckets 2 and up)."""
    several = threads["poll_events_hist"].map(lambda hist: sum(hist[2:]))
    return several / threads["poll_calls"].clip(lower=1)


def infer_roles(threads: pd.DataFrame, requests: int) -> pd.Series:
    """Role of each thread (index tid), following the rules in the module docstring; `requests` is the
    process's request count."""
    calls = activity(threads)
    busiest = calls.max() if len(calls) else 0
    idle = (calls < IDLE_MAX_CALLS) | (calls < IDLE_MAX_SHARE * busiest)
    reads = threads["read_calls"] - threads["read_eagain"] - threads["read_errors"]
    serves = (reads > 0) & (threads["write_calls"] > 0)
    event_driven = threads["poll_events"] >= EVENT_DRIVEN_MIN_EVENTS_PER_READ * reads
    polls = (threads["poll_calls"] > 0) & ((threads["poll_calls"] >= POLLING_MIN_SHARE * calls) | event_driven)
    wakes = handoffs(threads)
    dispatches = (requests > 0) & (wakes >= DISPATCH_MIN_WAKEUPS_PER_REQUEST * requests)
    interleaves = threads["socket_switches"] >= MULTIPLEX_MIN_SWITCHES_PER_REQUEST * threads["requests_read"].clip(lower=1)
    multiplexes = (multiplex_share(threads) >= MULTIPLEX_MIN_SHARE) | interleaves

    roles = pd.Series(WORKER, index=threads.index, dtype="object", name="role")
    roles[polls & ~serves & (wakes == 0)] = ACCEPTOR
    roles[polls & ~serves & (wakes > 0)] = DISPATCHER
    roles[serves] = HANDLER
    roles[serves & polls & (multiplexes | dispatches)] = EVENT_LOOP
    roles[idle & ~(polls & (wakes > 0))] = IDLE
    return roles


def thread_name(role: str, comm: str, tid: int) -> str:
    """How reports name a thread: `event loop 'nginx' (tid 812)`."""
    return f"{ROLE_NOUNS[role]} '{comm}' (tid {tid})"
