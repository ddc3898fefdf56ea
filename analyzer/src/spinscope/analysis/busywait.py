"""Threads that hand requests over through shared memory busy-wait for each other: no wakeup to time, so
their cost is estimated from the threads themselves (measures.py, the shared-memory hand-over)."""

from __future__ import annotations

from typing import Mapping

from spinscope.analysis.metrics import Analysis
from spinscope.analysis.roles import IDLE

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
