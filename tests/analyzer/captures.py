"""Synthetic captures for the analyzer tests: valid schema-2 documents built from a few numbers.

`capture()` takes threads (dicts of counters; anything left out is 0), wakeup edges and request facts,
and derives what a real collector would keep consistent: totals as the sum over threads, wakeups_sent /
wakeups_received (and wakeups_sent_<mechanism>) from the edges, poll_events_hist from the poll counts, the request histograms, and
interval snapshots that add up to the totals (with optional per-interval jitter, to model noise, and an
optional load profile, to model a capture that outlasted its load).
The scenario functions below are the servers the research describes.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np

from spinscope import __version__
from spinscope.analysis.schema import COUNTERS

DURATION_S = 10.0


def thread(tid: int, comm: str = "server", **counters) -> dict:
    return {"tid": tid, "comm": comm, **counters}


def capture(threads: list, wakeups: list = (), requests: int = 0, response_bytes: int = 1024,
            writes_per_request: float = 1.0, eagain_per_request: float = 0.0,
            partial_per_request: float = 0.0, spin_per_request: float = 0.0, futile_per_request: float = 0.0,
            waits_per_request: float = 0.0, request_ns: int = 200_000, cross_thread: int = 0,
            intervals: int = 10, jitter: float = 0.0, seed: int = 1, duration_s: float = DURATION_S,
            comm: str = "server", load: tuple | None = None, idle_oncpu_ns: int = 0) -> dict:
    """A capture document. `wakeups` are (waker_tid, wakee_tid, count[, mechanism]) with futex as the
    mechanism unless given; the request facts describe every response (one size class; spin retries,
    of which `futile` retried an EAGAIN, and waits for writability per request); `jitter` is the
    relative spread of each counter between intervals. `load` is the relative load of each interval (its
    length sets the number of intervals): requests and counters are split in proportion to it, but for
    `idle_oncpu_ns` of on-CPU time that every interval spends whatever its load (timers, connections
    closing), taken out of the threads' oncpu_ns."""
    if load is not None:
        intervals = len(load)
    pid = threads[0]["tid"]
    edges = [{"waker_tid": e[0], "wakee_tid": e[1], "count": e[2], "mechanism": e[3] if len(e) > 3 else "futex"}
             for e in wakeups]
    rows = []
    for spec in threads:
        row = {"tid": spec["tid"], "pid": pid, "comm": spec["comm"], "alive": True, "first_seen_s": 0.0,
               "exit_s": None}
        row.update({name: int(spec.get(name, 0)) for name in COUNTERS})
        row["wakeups_sent"] = sum(e["count"] for e in edges if e["waker_tid"] == spec["tid"])
        for mechanism in ("futex", "io", "mm", "exit"):
            row[f"wakeups_sent_{mechanism}"] = sum(e["count"] for e in edges if e["waker_tid"] == spec["tid"]
                                                   and e["mechanism"] == mechanism)
        row["wakeups_received"] = sum(e["count"] for e in edges if e["wakee_tid"] == spec["tid"])
        row["poll_events_hist"] = _poll_hist(row)
        rows.append(row)
    totals = {name: sum(row[name] for row in rows) for name in COUNTERS}
    totals.update({"threads_seen": len(rows), "threads_created": len(rows) - 1, "threads_exited": 0,
                   "processes_created": 0})
    sums = {"count": requests, "write_calls": round(writes_per_request * requests),
            "write_eagain": round(eagain_per_request * requests), "write_partial": round(partial_per_request * requests),
            "spin_retries": round(spin_per_request * requests), "spin_eagain": round(futile_per_request * requests),
            "write_waited": round(waits_per_request * requests), "write_bytes": response_bytes * requests,
            "duration_ns": request_ns * requests, "cross_thread": cross_thread, "nagle_holds": 0, "nagle_hold_ns": 0}
    request_block = {
        **sums, "unattributed_writes": 0,
        "hist": {"write_calls": _single(writes_per_request, requests),
                 "write_eagain": _single(eagain_per_request, requests),
                 "write_bytes": _single(response_bytes, requests),
                 "duration_ns": _single(request_ns, requests), "nagle_hold_ns": _single(0, requests)},
        "by_size": [],
    }
    if requests:
        low = 1 << (max(response_bytes, 1).bit_length() - 1)
        request_block["by_size"] = [{"bytes_min": low, "bytes_max": 2 * low - 1, **sums}]
    return {
        "schema": 2, "format": "spinscope-capture",
        "tool": {"name": "spinscope-collector", "version": __version__},
        "target": {"pid": pid, "comm": comm, "cmdline": [comm], "follow_children": False, "pids": [pid]},
        "host": {"kernel": "6.1.0", "hostname": "test", "ncpus": 2},
        "start_time": "2026-11-22T10:00:00.000Z", "duration_s": duration_s, "end_reason": "duration",
        "settings": {"interval_s": duration_s / intervals if intervals else 0, "max_threads": 16384,
                     "max_sockets": 65536},
        "histogram_buckets": "log2",
        "threads": rows, "totals": totals, "wakeups": edges, "requests": request_block,
        "intervals": _intervals(totals, requests, sum(e["count"] for e in edges), intervals, jitter, seed,
                                duration_s, load, idle_oncpu_ns),
        "drops": {"threads": 0, "sockets": 0, "wakeup_edges": 0, "pids": 0},
    }


def write(tmp_path: Path, doc: dict, name: str = "capture.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _bucket(value: float) -> int:
    value = int(round(value))
    return 0 if value <= 0 else value.bit_length()


def _single(value: float, count: int) -> list:
    """A log2 histogram with `count` entries all equal to `value`."""
    if not count:
        return []
    hist = [0] * (_bucket(value) + 1)
    hist[-1] = count
    return hist


def _poll_hist(row: dict) -> list:
    calls, zero, events = row["poll_calls"], row["poll_zero"], row["poll_events"]
    if not calls:
        return []
    hist = [0] * (_bucket(events / max(calls - zero, 1)) + 1)
    hist[0] += zero
    hist[-1] += calls - zero
    return hist


def _intervals(totals: dict, requests: int, handoffs: int, n: int, jitter: float, seed: int,
               duration_s: float, load: tuple | None = None, idle_oncpu_ns: int = 0) -> list:
    """n equal intervals whose values vary by `jitter` around the mean, in proportion to `load` (all 1 by
    default), renormalised to the totals; every interval's oncpu_ns holds `idle_oncpu_ns` besides."""
    if not n:
        return []
    profile = np.ones(n) if load is None else np.asarray(load, dtype=float)

    def split(total: int, column: str) -> list:
        # A stream of its own per column: a counter added to the schema does not change another's draws.
        rng = np.random.default_rng([seed, zlib.crc32(column.encode())])
        weights = np.clip(1 + jitter * rng.standard_normal(n), 0.05, None) * profile
        parts = np.floor(total * weights / weights.sum()).astype(int)
        parts[np.flatnonzero(weights)[-1]] += total - parts.sum()  # the rounding, to the last loaded interval
        return [int(p) for p in parts]

    columns = {name: split(totals[name], name) for name in COUNTERS}
    if idle_oncpu_ns:
        loaded_cpu = split(totals["oncpu_ns"] - n * idle_oncpu_ns, "oncpu_ns")
        columns["oncpu_ns"] = [idle_oncpu_ns + part for part in loaded_cpu]
    request_parts, handoff_parts = split(requests, "requests"), split(handoffs, "wakeups_in_process")
    step = duration_s / n
    return [{"t_s": round(step * (i + 1), 6), "duration_s": step,
             "counters": {name: columns[name][i] for name in COUNTERS},
             "requests": request_parts[i], "wakeups_in_process": handoff_parts[i]} for i in range(n)]


# --- the servers of the research ---------------------------------------------------------------------

def write_spin_server(**overrides) -> dict:
    """One event loop sending 100 KB responses into a small send buffer: 40 writes per response, 35 of
    them EAGAIN, 4 partial; each write costs 3 us of a 3 s CPU budget."""
    n = 5000
    loop = thread(100, "spinsrv", poll_calls=45_000, poll_events=50_000, poll_ns=4e9, read_calls=10_000,
                  read_eagain=5_000, read_bytes=n * 200, write_calls=40 * n, write_eagain=35 * n,
                  write_partial=4 * n, write_bytes=100_000 * n, write_ns=3_000 * 40 * n, oncpu_ns=3e9,
                  write_spin_retries=39 * n, write_spin_ns=1.8e9, write_spin_eagain=35 * n,
                  write_spin_bytes=60_000 * n, write_first_ns=0.2e9, write_first_bytes=40_000 * n,
                  socket_switches=n, cs_voluntary=40_000, cs_involuntary=500)
    args = dict(requests=n, response_bytes=100_000, writes_per_request=40, eagain_per_request=35,
                partial_per_request=4, spin_per_request=39, futile_per_request=35, comm="spinsrv")
    return capture([loop], **{**args, **overrides})


def thread_per_connection(**overrides) -> dict:
    """A blocking server: the main thread accepts, eight connection threads read and write 100 KB
    responses with one write each; no thread wakes another per request."""
    n = 8000
    main = thread(200, "tpc", futex_waits=2)
    handlers = [thread(201 + i, "tpc-conn", read_calls=n // 8 + 10, read_bytes=200 * n // 8, requests_read=n // 8,
                       write_calls=n // 8, write_bytes=100_000 * n // 8, write_ns=20_000 * n // 8,
                       cs_voluntary=n // 8, oncpu_ns=60_000 * n // 8, offcpu_ns=1e9,
                       runq_ns=2_000 * n // 8) for i in range(8)]
    args = dict(requests=n, response_bytes=100_000, writes_per_request=1.0, comm="tpc")
    return capture([main, *handlers], **{**args, **overrides})


def reactor_split(**overrides) -> dict:
    """Tomcat-NIO style: the reactor reads each request, a worker processes it, the reactor writes:
    four wakeups between threads per request, futex waits in the workers."""
    n = 10_000
    reactor = thread(300, "reactor", poll_calls=12_000, poll_events=20_000, read_calls=20_000,
                     read_eagain=10_000, write_calls=n, write_bytes=4_000 * n, write_ns=5_000 * n,
                     futex_wakes=2 * n, futex_oncpu_ns=2_000 * n, handoff_oncpu_ns=4_000 * n,
                     cs_voluntary=2 * n, oncpu_ns=40_000 * n,
                     runq_ns=5_000 * n, wakeup_wait_ns=40_000 * n)
    workers = [thread(301 + i, "worker", futex_waits=2 * n // 4, futex_wait_ns=300_000 * n // 4,
                      futex_wakes=2 * n // 4, futex_oncpu_ns=3_000 * n // 4,
                      handoff_oncpu_ns=6_000 * n // 4, cs_voluntary=2 * n // 4,
                      cs_involuntary=50, oncpu_ns=30_000 * n // 4, runq_ns=10_000 * n // 4,
                      wakeup_wait_ns=40_000 * n // 4) for i in range(4)]
    edges = [(300, 301 + i, 2 * n // 4) for i in range(4)] + [(301 + i, 300, 2 * n // 4) for i in range(4)]
    args = dict(requests=n, response_bytes=4_000, cross_thread=0, comm="reactor", wakeups=edges)
    return capture([reactor, *workers], **{**args, **overrides})


def reactor_worker(**overrides) -> dict:
    """A reactor that only polls and dispatches; one worker reads, processes and writes, then hands the
    connection back: two wakeups between threads per request."""
    n = 10_000
    reactor = thread(400, "dispatch", poll_calls=11_000, poll_events=n, futex_wakes=n, cs_voluntary=n,
                     oncpu_ns=8_000 * n, futex_oncpu_ns=1_000 * n, handoff_oncpu_ns=2_000 * n,
                     wakeup_wait_ns=10_000 * n)
    workers = [thread(401 + i, "worker", read_calls=n // 2, read_bytes=300 * n // 2, write_calls=n // 2,
                      write_bytes=4_000 * n // 2, write_ns=5_000 * n // 2, futex_waits=n // 2,
                      futex_wait_ns=200_000 * n // 2, futex_wakes=n // 2, futex_oncpu_ns=2_000 * n // 2,
                      cs_voluntary=n // 2, oncpu_ns=40_000 * n // 2, wakeup_wait_ns=10_000 * n // 2)
               for i in range(2)]
    edges = [(400, 401, n // 2), (400, 402, n // 2), (401, 400, n // 2), (402, 400, n // 2)]
    args = dict(requests=n, response_bytes=4_000, comm="dispatch", wakeups=edges)
    return capture([reactor, *workers], **{**args, **overrides})


def clean_event_loop(**overrides) -> dict:
    """A healthy single-threaded loop: every poll returns events, one write per response."""
    n = 20_000
    loop = thread(500, "loop", poll_calls=10_000, poll_events=30_000, read_calls=40_000, read_eagain=15_000,
                  read_eagain_ns=15_000 * 500, read_bytes=300 * n, write_calls=n, write_bytes=4_000 * n,
                  write_ns=4_000 * n, socket_switches=n, cs_voluntary=8_000, oncpu_ns=30_000 * n)
    args = dict(requests=n, response_bytes=4_000, comm="loop")
    return capture([loop], **{**args, **overrides})


def spurious_loop(**overrides) -> dict:
    """A single loop that polls with a short timeout: 40% of its epoll_wait calls wake with nothing, each
    costing 5 us of CPU inside the call: 12.5% of its CPU."""
    n = 20_000
    loop = thread(600, "spin", poll_calls=50_000, poll_zero=20_000, poll_zero_wait_ns=20_000 * 5_000,
                  poll_oncpu_ns=50_000 * 5_000, poll_events=40_000, read_calls=40_000, read_eagain=12_000,
                  read_bytes=300 * n, write_calls=n, write_bytes=4_000 * n, write_ns=4_000 * n,
                  socket_switches=n, cs_voluntary=45_000, oncpu_ns=40_000 * n)
    args = dict(requests=n, response_bytes=4_000, comm="spin")
    return capture([loop], **{**args, **overrides})


def imbalanced_loops(**overrides) -> dict:
    """A proxy whose frontend loop wakes for 0.7 events per call while its backend loop sees 22."""
    n = 20_000
    front = thread(700, "front", poll_calls=30_000, poll_zero=3_000, poll_events=21_000, read_calls=25_000,
                   poll_oncpu_ns=30_000 * 4_000, read_eagain=5_000, write_calls=n, write_bytes=4_000 * n,
                   write_ns=4_000 * n, socket_switches=n, requests_read=n, cs_voluntary=28_000,
                   oncpu_ns=30_000 * n)
    back = thread(701, "back", poll_calls=1_000, poll_events=22_000, read_calls=22_000, write_calls=n,
                  poll_oncpu_ns=1_000 * 10_000, write_ns=3_000 * n, socket_switches=n, cs_voluntary=900,
                  oncpu_ns=20_000 * n)
    args = dict(requests=n, response_bytes=4_000, comm="proxy")
    return capture([front, back], wakeups=[(700, 701, 500), (701, 700, 500)], **{**args, **overrides})


SCENARIOS = {
    "write_spin": write_spin_server,
    "thread_per_connection": thread_per_connection,
    "reactor_split": reactor_split,
    "reactor_worker": reactor_worker,
    "clean_event_loop": clean_event_loop,
    "spurious_loop": spurious_loop,
    "imbalanced_loops": imbalanced_loops,
}

