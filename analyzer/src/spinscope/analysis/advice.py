"""What a verdict tells the user to change, for the runtime the target runs on (analysis/runtime.py): a Go
program has no selector to give each thread and no worker pool it wrote, a JVM's knobs are its executors, a
Python server's are its endpoints and its server; a native server keeps the advice it always had. One
table per pattern, keyed by runtime (NATIVE is the default: an unknown runtime gets it too), and the
mechanism's words in the summary likewise. docs/labels.md has the same tables.

Words only: labels.py chooses which entry applies from the measures, and claims.py holds every sentence
that states a rate ("for every request") to the evidence's rate.
"""

from __future__ import annotations

from spinscope.analysis.measures import DISPATCH, LEADER_FOLLOWER, PER_CONNECTION, POOL_ROUND_TRIP, SHARED_MEMORY
from spinscope.analysis.runtime import CPYTHON, DOTNET, GO, JVM, NATIVE, NODE
from spinscope.analysis import threadlife

# --- handoff overhead: what each mechanism is, in words, and its fixes --------------------------------

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
    NATIVE: ["few requests are handed over: the wait is for a CPU once a thread is woken, not for a hand-over per "
             "request; keep the server's busy threads to the CPUs free for them (a smaller pool, the load and "
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


# --- spurious select --------------------------------------------------------------------------------

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
             "after fork_processes; gunicorn: --reuse-port), or EPOLLEXCLUSIVE on the shared listener",
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


# --- busy polling -----------------------------------------------------------------------------------

BUSY_POLL_ADVICE = {
    NATIVE: "keep it if the latency matters more than the core it occupies; otherwise turn busy polling off "
            "(HAProxy: remove `busy-polling`) so the thread blocks when there is nothing to do",
    GO: "Go's scheduler spins looking for work before it parks a thread (at most half of GOMAXPROCS threads at "
        "once): a lower GOMAXPROCS spins less; keep it if the latency matters more than the CPU",
}


def busy_poll_advice(runtime: str) -> str:
    return BUSY_POLL_ADVICE.get(runtime) or BUSY_POLL_ADVICE[NATIVE]


# --- responses held by Nagle's algorithm --------------------------------------------------------------

# How each runtime turns Nagle off on the connections it accepts, then the fix every runtime has: one write.
NAGLE_NODELAY = {
    NATIVE: "set TCP_NODELAY on each accepted socket: setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one)",
    JVM: "turn Nagle off on the server's connections: the JDK's HTTP server with -Dsun.net.httpserver.nodelay=true, "
         "Netty with childOption(ChannelOption.TCP_NODELAY, true), a plain java.net.Socket with setTcpNoDelay(true)",
    GO: "Go sets TCP_NODELAY on every TCP connection by default: find the SetNoDelay(false) on these connections "
        "and remove it",
    NODE: "turn Nagle off on the server's connections: http.createServer({noDelay: true}), or socket.setNoDelay(true) "
          "on each connection (net.Server's sockets keep Nagle on)",
    CPYTHON: "set TCP_NODELAY on each accepted socket: sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1) "
             "(asyncio's transports set it themselves; a plain socket server does not)",
    DOTNET: "set Socket.NoDelay = true on each accepted socket (Kestrel sets it by default)",
}
NAGLE_ONE_WRITE = ("or write each response in one call: gather header and body with writev() (or a buffered "
                   "writer flushed once per response), or send the header with MSG_MORE, or under TCP_CORK "
                   "uncorked after the body")


def nagle_fixes(runtime: str) -> list:
    return [NAGLE_NODELAY.get(runtime) or NAGLE_NODELAY[NATIVE], NAGLE_ONE_WRITE]
