"""A thread per request: threads created while traced that serve requests and exit, counted per request,
and what their lives cost the hand-off (schema 7 counters; 0 in older captures, where nothing is found).

A thread is created for requests (on the request path) when it reads no request itself but answers one, or
hands work to or is handed work by another of the target's threads (a deliberate wakeup sent, or any
wakeup received from the target's threads: an executor woken by the loop, a joiner woken by the
executor's exit): a request read by one thread and served by a thread created for it. A thread that reads
its own requests (a thread per connection, a pool's thread started while traced) is not one; nor are
threads created before the capture (thread_starts 0), nor helper threads that never touch a request.

What a thread's life costs, as the probes measure it:
- its creation: the creator's on-CPU time inside clone/clone3 (clone_ns, every call timed), the mean
  clone priced for each request-path thread (the clones of threads off the path are not charged);
- its start: the wait from its creation to its first run (thread_start_wait_ns), request latency as a
  woken thread's wait to run is;
- its end: its on-CPU from the start of its exit to its last switch-out (exit_oncpu_ns), the kernel's
  teardown.
Not counted: the thread's own on-CPU life (it runs the request's work, which a pooled thread would run
too), the user-space start and teardown of a thread (its stack's mmap, the runtime's thread state, TLS
destructors), which the probes cannot tell from the work: the cost is a lower bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from spinscope.analysis import counters
from spinscope.analysis.metrics import Analysis, ratio

THREAD_PER_REQUEST = "thread-per-request"  # HandoffMeasure.mechanism: a thread created for each request
THREAD_PER_REQUEST_MIN = 0.5  # request-path threads created per request for the mechanism to be this one
THREAD_LIVES_MIN_PER_REQUEST = 0.05  # below this many per request, threads created are not part of the hand-off


@dataclass
class ThreadLives:
    """The request-path threads created while traced, and what their lives cost (ns, summed)."""

    created: int        # request-path threads created while traced
    started: int        # ...of which the first run was timed (thread_starts)
    exited: int         # ...of which exited while traced
    tids: list          # their tids (rows of `threads`; folded rows have none)
    creators: list      # the tids of the threads that created threads (clone_calls > 0)
    clone_ns: float     # the mean clone's on-CPU, times `created`
    start_wait_ns: float
    exit_ns: float
    requests: int

    @property
    def per_request(self) -> float:
        return self.created / self.requests if self.requests else 0.0

    @property
    def exited_per_request(self) -> float:
        return self.exited / self.requests if self.requests else 0.0

    @property
    def cpu_ns(self) -> float:
        """What creating and ending them cost on CPU: the creators' clones and the threads' exits."""
        return self.clone_ns + self.exit_ns

    def us_each(self, ns: float, of: int | None = None) -> float | None:
        return ratio(ns / 1e3, self.created if of is None else of)


def _on_path(row: Mapping) -> bool:
    """Whether a row (a thread's, or exited threads' folded by process and name) served requests it did not
    read."""
    def get(key: str) -> float:
        return counters.get(row, key)
    sent = get("wakeups_sent") - sum(get(f"wakeups_sent_{m}") for m in counters.NOT_HANDOFFS)
    return not get("requests_read") and bool(get("responses_written") or sent > 0 or get("wakeups_received"))


def thread_lives(analysis: Analysis) -> ThreadLives | None:
    """The request-path threads created while traced (rows and the exited rows folded by process and
    name), or None when there are none (every capture before schema 7)."""
    cap = analysis.capture
    # Created while traced: its first run timed (thread_starts), or first met after the threads alive at
    # attach were seeded (first_seen_s > 0 in a schema 7 capture: a first run the probes missed).
    seen_late = cap.schema >= 7
    rows = [(tid, row) for tid, row in analysis.threads.items()
            if (counters.get(row, "thread_starts") or (seen_late and row["first_seen_s"] > 0)) and _on_path(row)]
    folded = [row for row in cap.threads_folded if counters.get(row, "thread_starts") and _on_path(row)]
    created = len(rows) + sum(int(row["thread_starts"]) for row in folded)
    if not created or created < THREAD_LIVES_MIN_PER_REQUEST * analysis.requests:
        return None
    started = sum(int(counters.get(row, "thread_starts")) for _, row in rows) + sum(
        int(row["thread_starts"]) for row in folded)
    exited = sum(1 for _, row in rows if not row["alive"]) + sum(
        min(int(row["threads"]), int(row["thread_starts"])) for row in folded)
    every = [row for _, row in rows] + folded
    clones = counters.get(cap.totals, "clone_calls")
    mean_clone = counters.get(cap.totals, "clone_ns") / clones if clones else 0.0
    creators = [tid for tid, row in analysis.threads.items() if counters.get(row, "clone_calls")]
    return ThreadLives(created, started, exited, [tid for tid, _ in rows], creators, mean_clone * created,
                       float(sum(counters.get(row, "thread_start_wait_ns") for row in every)),
                       float(sum(counters.get(row, "exit_oncpu_ns") for row in every)), analysis.requests)


# --- words ------------------------------------------------------------------------------------------

PHRASE = "a thread is created to serve requests and exits after it"
FIXES = [
    "create no thread per request: hand requests to a pool of threads that are reused (native: a fixed pool "
    "fed from a queue; the JVM: an ExecutorService instead of a new Thread per request)",
    "Python under an ASGI server: declare the view `async def` so it runs on the event loop, or give the "
    "thread pool enough threads that are kept and reused (a sync view runs in a thread of its own when the "
    "pool has no idle one)",
]


def lives_phrase(lives: ThreadLives) -> str:
    """`1.0 threads created and 1.0 exited per request on the request path (creating one cost its creator
    28 µs in clone, it waited 23 µs to first run, its exit took 15 µs of CPU)`."""
    costs = []
    if lives.clone_ns:
        costs.append(f"creating one cost its creator {lives.us_each(lives.clone_ns):.0f} µs in clone")
    if lives.started:
        costs.append(f"it waited {lives.us_each(lives.start_wait_ns, lives.started):.0f} µs to first run")
    costs.append(f"its exit took {lives.us_each(lives.exit_ns):.0f} µs of CPU")
    return (f"{lives.per_request:.1f} threads created and {lives.exited_per_request:.1f} exited per request on "
            f"the request path ({', '.join(costs)})")


def lives_evidence(lives: ThreadLives) -> dict:
    def rounded(x: float | None) -> float | None:
        return None if x is None else round(x, 3)
    return {"threads_created_per_request": rounded(lives.per_request),
            "threads_exited_per_request": rounded(lives.exited_per_request),
            "threads_created_on_request_path": lives.created, "threads_exited_on_request_path": lives.exited,
            "clone_us_per_thread": rounded(lives.us_each(lives.clone_ns)),
            "start_wait_us_per_thread": rounded(lives.us_each(lives.start_wait_ns, lives.started)),
            "exit_us_per_thread": rounded(lives.us_each(lives.exit_ns))}
