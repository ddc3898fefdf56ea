"""Thread roles inferred from each thread's syscall mix (rules and thresholds in docs/labels.md).

The rules look only at a thread's own counters, in this order:

1. idle       fewer traced calls (poll + socket read/write + futex wait) than IDLE_MAX_CALLS, or than
              IDLE_MAX_SHARE of the busiest thread's: it did almost nothing while traced.
2. event-loop it polls: poll-family calls make at least POLLING_MIN_SHARE of its calls, or its poll calls
              return at least EVENT_DRIVEN_MIN_EVENTS_PER_READ ready events per socket read (readiness
              drives its reads, however many writes a spinning loop piles on); and either it does socket
              I/O (at least LOOP_MIN_IO_PER_POLL reads/writes per poll call) or it gets at least
              DISPATCH_MIN_EVENTS_PER_REQUEST ready events per request of the process: a reactor that
              only dispatches readiness to workers, which then read and write.
3. acceptor   it polls but does (almost) no socket I/O and sees few events: it waits on the listening
              socket and accepts (accept is not traced), about one event per connection. With one
              request per connection an acceptor cannot be told from a dispatching reactor by counts
              alone; it is then called an event loop.
4. worker     everything else that is busy: socket I/O or futex waits without polling. In a reactor
              design it is woken by the event loop; in thread-per-connection, by the network.
"""

from __future__ import annotations

import pandas as pd

EVENT_LOOP = "event-loop"
ACCEPTOR = "acceptor"
WORKER = "worker"
IDLE = "idle"
ROLES = (EVENT_LOOP, ACCEPTOR, WORKER, IDLE)

# Human names used in verdicts and reports.
ROLE_NOUNS = {EVENT_LOOP: "event loop", ACCEPTOR: "acceptor", WORKER: "worker", IDLE: "idle thread"}

IDLE_MAX_CALLS = 10
IDLE_MAX_SHARE = 0.01
POLLING_MIN_SHARE = 0.01
EVENT_DRIVEN_MIN_EVENTS_PER_READ = 0.5
LOOP_MIN_IO_PER_POLL = 0.1
DISPATCH_MIN_EVENTS_PER_REQUEST = 0.5


def activity(threads: pd.DataFrame) -> pd.Series:
    """Traced calls per thread: the work the role rules weigh."""
    return threads["poll_calls"] + threads["read_calls"] + threads["write_calls"] + threads["futex_waits"]


def infer_roles(threads: pd.DataFrame, requests: int) -> pd.Series:
    """Role of each thread (index tid), following the rules in the module docstring; `requests` is the
    process's request count."""
    calls = activity(threads)
    busiest = calls.max() if len(calls) else 0
    socket_io = threads["read_calls"] + threads["write_calls"]
    polls = threads["poll_calls"]

    idle = (calls < IDLE_MAX_CALLS) | (calls < IDLE_MAX_SHARE * busiest)
    event_driven = (polls > 0) & (threads["poll_events"] >= EVENT_DRIVEN_MIN_EVENTS_PER_READ * threads["read_calls"])
    polling = (polls >= POLLING_MIN_SHARE * calls) | event_driven
    dispatching = (requests > 0) & (threads["poll_events"] >= DISPATCH_MIN_EVENTS_PER_REQUEST * requests)
    loop = polling & ((socket_io >= LOOP_MIN_IO_PER_POLL * polls) | dispatching)

    roles = pd.Series(WORKER, index=threads.index, dtype="object", name="role")
    roles[polling & ~loop] = ACCEPTOR
    roles[loop] = EVENT_LOOP
    roles[idle] = IDLE
    return roles


def thread_name(role: str, comm: str, tid: int) -> str:
    """How reports name a thread: `event loop 'nginx' (tid 812)`."""
    return f"{ROLE_NOUNS[role]} '{comm}' (tid {tid})"
