"""What the analyzer makes of the capture's counters, each quantity defined once.

Every reader of per-thread counters (roles, metrics, labels, top, the exporter) takes these quantities from
here: what a handoff is, what a spin retry or an empty wakeup costs, which writes, reads and polls went which
way. `c` is a mapping of counter names (docs/capture-format.md, "Counters") to values: a capture's totals, a
thread's row (Capture.threads), or a group's sum (capture.summed).
Counters a capture of an older schema lacks read as 0 (`get`); where an older schema measured a quantity
differently, the function takes the capture's `schema` and says what it does with it.

Units: counts are calls, times are nanoseconds of on-CPU time unless the counter says otherwise.
"""

from __future__ import annotations

from typing import Mapping

# The capture schema from which the probes time whole cycles (empty and futile wakeups) and bulk writes'
# copy rate. This module imports nothing of spinscope: the exporter's hot path, like all of the analysis, is
# pure Python.
CYCLES_SCHEMA = 5

# Wakeup mechanisms (capture `wakeups[].mechanism`, counters `wakeups_sent_<mechanism>`) that are not a
# handoff: memory-map lock contention (mmap, munmap, mprotect, ...) and a thread's exit waking its joiner.
NOT_HANDOFFS = ("mm", "exit")
# Mechanisms with a counter of their own; "other" (capture.MECHANISMS has it too) is what wakeups_sent holds
# beyond them.
COUNTED_MECHANISMS = ("futex", "io", "mm", "exit")

# A socket write that moved everything it was asked and at least this many bytes copies at full rate
# (into room in the send buffer): one of the rates the write-spin deduction prices the retries' bytes at (schema 5,
# `write_copy_ns` / `write_copy_bytes`). The probes' WRITE_COPY_MIN (bpf/spinscope.h; a test holds the two equal).
COPY_MIN_BYTES = 4096


def _nonnegative(value):
    """max(0, value), keeping the value's type (0 for an int, 0.0 for a float)."""
    return value * (value > 0)


def get(c: Mapping, key: str):
    """c[key], or 0 for a counter an older capture (or a synthetic one) does not have."""
    try:
        return c[key]
    except KeyError:
        return 0


def handoffs(c: Mapping) -> float:
    """Deliberate wakeups of the target's own threads: all but memory-map contention and exits."""
    return c["wakeups_sent"] - sum(c[f"wakeups_sent_{m}"] for m in NOT_HANDOFFS)


def contention_wakeups(c: Mapping) -> float:
    """Wakeups of the target's own threads made inside memory-map calls: lock contention, not handoffs."""
    return c["wakeups_sent_mm"]


def wakeups_by_mechanism(c: Mapping) -> dict:
    """{mechanism: wakeups sent}, for every capture mechanism ("other": the syscalls no counter names)."""
    named = {m: c[f"wakeups_sent_{m}"] for m in COUNTED_MECHANISMS}
    return {**named, "other": _nonnegative(c["wakeups_sent"] - sum(named.values()))}


def writes_by_result(c: Mapping) -> dict:
    """Socket write calls by what they returned: ok (everything asked), eagain, partial, error."""
    ok = c["write_calls"] - c["write_eagain"] - c["write_partial"] - c["write_errors"]
    return {"ok": _nonnegative(ok), "eagain": c["write_eagain"], "partial": c["write_partial"], "error": c["write_errors"]}


def reads_by_result(c: Mapping) -> dict:
    """Socket read calls by what they returned: ok (data), eagain, eof, error."""
    ok = c["read_calls"] - c["read_eagain"] - c["read_eof"] - c["read_errors"]
    return {"ok": _nonnegative(ok), "eagain": c["read_eagain"], "eof": c["read_eof"], "error": c["read_errors"]}


def polls_by_outcome(c: Mapping) -> dict:
    """Poll-family calls by outcome: events (at least one ready fd), empty (none), error."""
    events = c["poll_calls"] - c["poll_zero"] - c["poll_errors"]
    return {"events": _nonnegative(events), "empty": c["poll_zero"], "error": c["poll_errors"]}


def eagain_retries(c: Mapping) -> float:
    """Writes that retried an EAGAIN on the same socket without waiting for writability: the spin itself
    (a retry of an EAGAIN moves nothing until the peer reads)."""
    return c["write_spin_eagain"]


def partial_retries(c: Mapping) -> float:
    """Writes made right after a partial write on the same socket, without waiting: they move bytes, and a
    server that writes until EAGAIN and then waits makes one per stall."""
    return c["write_spin_retries"] - c["write_spin_eagain"]


def copy_rate(c: Mapping, schema: int) -> tuple:
    """(ns per byte, source): what copying a byte into a socket costs these threads when no spin is
    involved: the lowest of the rates of writes that copy in bulk. From schema 5 those are the complete
    writes of at least COPY_MIN_BYTES ("bulk writes", write_copy_ns / write_copy_bytes) and the responses'
    first writes when they average COPY_MIN_BYTES or more ("first writes": into an empty buffer, often tens
    of KiB at once, the cheapest per byte); first writes that are headers written on their own (83 bytes in
    11 µs is 138 ns a byte, 40 times a bulk copy) are not a copy rate and are left out. Without either, no
    deduction ("none"). Older captures only have the first writes, whatever their size."""
    first = (c["write_first_ns"] / c["write_first_bytes"], "first writes") if c["write_first_bytes"] else None
    if schema < CYCLES_SCHEMA:
        return first or (0.0, "none")
    rates = []
    if get(c, "write_copy_bytes"):
        rates.append((c["write_copy_ns"] / c["write_copy_bytes"], "bulk writes"))
    if first and c["write_first_bytes"] >= COPY_MIN_BYTES * max(get(c, "responses_written"), 1):
        rates.append(first)
    return min(rates) if rates else (0.0, "none")


def spin_cost_ns(c: Mapping, schema: int) -> float:
    """The CPU a write-spin cost: the on-CPU time of the writes retried without waiting (each one's whole
    cycle, from the thread's previous socket write returning to the retry returning: its loop in user space,
    the syscall's entry and exit, the call), less what moving their bytes costs at the copy rate (copying a
    response is work any server does; copying it in small pieces is the spin's); never less than the cycles
    of the retries that moved nothing."""
    rate, _ = copy_rate(c, schema)
    return max(_nonnegative(c["write_spin_ns"] - c["write_spin_bytes"] * rate), get(c, "write_spin_empty_ns"))


def bare_retry_ns(c: Mapping) -> float | None:
    """The mean cycle of a spin retry that returned EAGAIN (schema 5): what a retry costs with no copying
    in it. Their cycles (`write_spin_empty_ns`) are waste whatever the copy rate, the floor of
    spin_cost_ns; the copy rate, estimated from other writes, moves by 2-3x between half-second intervals
    of the same run here, and the cost above that floor with it."""
    return c["write_spin_empty_ns"] / c["write_spin_empty"] if get(c, "write_spin_empty") else None


def empty_wakeup_ns(c: Mapping, schema: int) -> float:
    """The CPU wakeups that found nothing cost. Schema 5: the whole cycle (from the poll's return to the
    next poll's, user space included) of each blocking poll that returned nothing and of each wakeup whose
    ready descriptors gave nothing (`poll_futile`), when no productive call came in between; a zero-timeout
    check that found nothing costs the time inside the call only (a loop checks without waiting because it
    has other work: what follows the check is that work). Older captures: the time inside the empty polls
    and the EAGAIN reads (a lower bound)."""
    if schema >= CYCLES_SCHEMA:
        return get(c, "poll_zero_cycle_ns") + c["poll_zero_nowait_ns"] + herd_ns(c)
    return c["poll_zero_nowait_ns"] + c["poll_zero_wait_ns"] + c["read_eagain_ns"]


def busy_check_ns(c: Mapping, schema: int) -> float:
    """The CPU a busy-polling loop spends on checks that found nothing: from schema 5 the whole cycles of its
    zero-timeout empty checks (`poll_check_cycle_ns`: the check and the loop around it up to the next
    poll), else the time inside those checks."""
    cycles = get(c, "poll_check_cycle_ns") if schema >= CYCLES_SCHEMA else 0
    return max(cycles, c["poll_zero_nowait_ns"])


def empty_poll_ns(c: Mapping) -> float:
    """On-CPU time inside the poll calls that returned nothing and the socket reads that returned EAGAIN
    (the calls alone, not the loop around them: what every schema has)."""
    return c["poll_zero_nowait_ns"] + c["poll_zero_wait_ns"] + c["read_eagain_ns"]


def herd_wakeups(c: Mapping) -> float:
    """Wakeups that found nothing because another thread or process took the connection or the data first
    (schema 5): poll calls that returned ready descriptors which gave nothing (`poll_futile`), and wakeups
    inside poll calls that the kernel put back to sleep without returning (`poll_rewaits`: select, poll
    and epoll re-check a woken waiter's descriptors first)."""
    return get(c, "poll_futile") + get(c, "poll_rewaits")


def herd_ns(c: Mapping) -> float:
    """What those wakeups cost: the futile wakeups' whole cycles (user space included) and the slices the
    re-sleeping ones ran in the kernel."""
    return get(c, "poll_futile_cycle_ns") + get(c, "poll_rewait_ns")


def accepts_by_result(c: Mapping) -> dict:
    """accept/accept4 calls by result (schema 5): ok and eagain (someone else took the connection, or
    nothing was there)."""
    calls, eagain = get(c, "accept_calls"), get(c, "accept_eagain")
    return {"ok": _nonnegative(calls - eagain), "eagain": eagain}
