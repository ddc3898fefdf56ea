"""Reading a capture file (docs/capture-format.md) into plain rows (dicts), without pandas.

The capture format is the contract with the C collector, so this module is strict about it: anything
that is not a complete, well-formed capture of a schema we understand is refused with one
SpinscopeError line naming the file and the first problem found. Everything downstream (metrics,
roles, labels, reports) can then rely on every documented key being present and numeric.

The tables are small (a thread per row, some thousands at most) and read row by row, so they are plain
Python: the exporter judges every scrape with this code and must not pay pandas' memory and import time.
Verbs that want a DataFrame (diff, figures, the lab) make one locally from the rows.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple

from spinscope.errors import SpinscopeError

FORMAT = "spinscope-capture"
SCHEMA = 6

# The counters every thread, `totals` and every interval carry (docs/capture-format.md, "Counters"), in
# the collector's order: SPINSCOPE_COUNTERS in bpf/spinscope.h (a test holds the two equal).
COUNTERS = (
    "write_calls", "write_bytes", "write_eagain", "write_partial", "write_errors", "write_ns",
    "write_eagain_ns", "write_partial_ns", "write_spin_retries", "write_spin_ns",
    "write_spin_eagain", "write_spin_bytes", "write_first_ns", "write_first_bytes", "write_waited",
    "read_calls", "read_bytes", "read_eagain", "read_eof", "read_errors", "read_ns", "read_eagain_ns",
    "requests_read", "socket_switches", "responses_written",
    "poll_calls", "poll_zero", "poll_events", "poll_errors", "poll_ns", "poll_oncpu_ns", "poll_nowait",
    "poll_zero_nowait", "poll_zero_nowait_ns", "poll_zero_wait_ns",
    "futex_waits", "futex_wait_ns", "futex_waits_req", "futex_wait_req_ns", "futex_wakes", "futex_oncpu_ns",
    "handoff_oncpu_ns", "cs_voluntary", "cs_involuntary", "oncpu_ns", "offcpu_ns", "runq_ns",
    "wakeups_sent", "wakeups_sent_futex", "wakeups_sent_io", "wakeups_sent_mm", "wakeups_sent_exit",
    "wakeups_received", "wakeup_wait_ns", "wakeups_external", "wakeups_irq",
    "threads_created", "calls_timed", "channel_reads", "channel_writes", "channel_sockets", "h2_connections",
    "accept_calls", "accept_eagain", "poll_futile", "poll_futile_cycle_ns", "poll_zero_cycle_ns",
    "write_copy_ns", "write_copy_bytes", "poll_check_cycle_ns", "poll_rewaits", "poll_rewait_ns",
    "stalls_sampled", "stall_sndbuf_bytes", "stall_queued_bytes", "stall_peer_window_bytes", "stall_srtt_us",
    "write_spin_empty", "write_spin_empty_ns", "poll_dispatch", "poll_dispatch_cycle_ns",
)
# Schema 5 added the socket reads and writes on channels between the target's processes, which serve no
# requests (before, their messages were counted as requests), the HTTP/2 connections, the accept counts,
# the poll wakeup cycles and the copy rate: 0 in older captures.
SCHEMA5_COUNTERS = frozenset(("channel_reads", "channel_writes", "channel_sockets", "h2_connections",
                              "accept_calls", "accept_eagain", "poll_futile", "poll_futile_cycle_ns",
                              "poll_zero_cycle_ns", "write_copy_ns", "write_copy_bytes", "poll_check_cycle_ns",
                              "poll_rewaits", "poll_rewait_ns", "stalls_sampled", "stall_sndbuf_bytes",
                              "stall_queued_bytes", "stall_peer_window_bytes", "stall_srtt_us",
                              "write_spin_empty", "write_spin_empty_ns"))
# Schema 6 told the wakeups whose ready descriptors were handed over (epoll_ctl DEL or MOD: a poller
# dispatching connections to workers) from the futile ones: before, they were in poll_futile.
SCHEMA6_COUNTERS = frozenset(("poll_dispatch", "poll_dispatch_cycle_ns"))
# Schema 4 added calls_timed (its captures before timed every counted call).
SCHEMA4_COUNTERS = frozenset(("calls_timed",))
# Schema 1 captures (collectors before the measured costs) lack these: loaded as 0, and
# Capture.costs_measured is False so that no verdict is drawn from the zeros.
SCHEMA2_COUNTERS = frozenset((
    "write_eagain_ns", "write_partial_ns", "write_spin_retries", "write_spin_ns", "write_spin_eagain",
    "write_spin_bytes", "write_first_ns", "write_first_bytes", "write_waited", "read_eagain_ns", "requests_read",
    "socket_switches", "responses_written", "poll_oncpu_ns", "poll_nowait",
    "poll_zero_nowait", "poll_zero_nowait_ns", "poll_zero_wait_ns", "futex_waits_req", "futex_wait_req_ns",
    "futex_oncpu_ns", "handoff_oncpu_ns", "wakeups_sent_futex", "wakeups_sent_io", "wakeups_sent_mm", "wakeups_sent_exit",
    "wakeup_wait_ns",
))
# The sums of `requests` and of each `requests.by_size` class: SPINSCOPE_REQUEST_SUMS.
REQUEST_SUMS = ("count", "write_calls", "write_eagain", "write_partial", "spin_retries", "spin_eagain",
                "write_waited", "write_bytes", "duration_ns", "cross_thread")
SCHEMA2_REQUEST_SUMS = frozenset(("spin_retries", "spin_eagain", "write_waited", "duration_ns", "cross_thread"))
# requests.hist: SPINSCOPE_REQUEST_HISTS.
REQUEST_HISTS = ("write_calls", "write_eagain", "write_bytes", "duration_ns")
# drops: SPINSCOPE_DROPS.
DROP_KEYS = ("threads", "sockets", "wakeup_edges", "pids", "exited", "execs", "listeners")
# The schema that added each key of those lists that schema 1 lacked (the others: 1), by name: a name in
# two lists (write_waited, a counter and a request sum) came with the same schema in both. Schema 3 added
# the execs map's drops, schema 4 the exited threads', schema 5 the listeners'.
SINCE = {**dict.fromkeys(SCHEMA2_COUNTERS | SCHEMA2_REQUEST_SUMS, 2), **dict.fromkeys(SCHEMA4_COUNTERS, 4),
         **dict.fromkeys(SCHEMA5_COUNTERS, 5), **dict.fromkeys(SCHEMA6_COUNTERS, 6), "execs": 3, "exited": 4, "listeners": 5}
# What a waker was doing (wakeups[].mechanism); "unknown" in schema 1 captures.
MECHANISMS = ("futex", "io", "mm", "exit", "other")

# What a key's value must be. The names are said in the error lines ("totals.write_calls is not a count").
(COUNT, SECONDS, SECONDS_OR_NULL, TEXT, TEXT_OR_NULL, TEXTS_OR_NULL, BOOL, OBJECT, OBJECT_OR_NULL, LIST, HISTOGRAM,
 COUNTS) = ("count", "seconds", "seconds or null", "text", "text or null", "list of text or null", "boolean",
            "object", "object or null", "list", "histogram", "list of counts")
MAX_COUNT = 2**63 - 1  # int64, what other readers (pandas, the lab's tables) hold; the collector's u64 counters stay far below
MAX_HISTOGRAM_BUCKETS = 64  # REQ_HIST_BUCKETS in bpf/spinscope.h, the largest the collector writes
# Bigger files are refused before they are read: a 71 MiB capture (16,384 threads, 36,000 intervals)
# takes 8.7 s and 420 MiB to report (bench/capture_scale.py), so the bound costs about 15 s and 0.8 GiB.
MAX_CAPTURE_BYTES = int(os.environ.get("SPINSCOPE_MAX_CAPTURE_MB", "128")) * 2**20


class Key(NamedTuple):
    """One key of the capture document: a row of KEYS."""

    path: str  # the object that holds it: "" the top level, "target.cgroup", "threads[]" (each element of threads)
    key: str
    kind: str = COUNT  # what its value must be
    since: int = 1  # the schema that added it: captures of an older schema lack it (a count is then read as 0)
    # Whether a capture (of schema `since` or later) that lacks it is refused: the keys the loader reads
    # without a default. The collector writes every key; hand-made documents may leave the others out.
    required: bool = False


def _rows(path: str, keys: Iterable[str], since: int = 1, required: bool = False) -> tuple:
    """Count rows for the keys of one of the collector's lists (its X-macros), each since `since` or the
    schema that added it, whichever is later."""
    return tuple(Key(path, key, COUNT, max(since, SINCE.get(key, 1)), required) for key in keys)


# Every key the collector writes, in the document's order, by the object that holds it. This is the one
# description of the layout: the loader checks a document against it (_check()), layout_differences()
# compares a document's keys with it, and the tests hold it to bpf/spinscope.h's X-macros, to
# docs/capture-format.md and to fresh captures. A new key is one row here (and one in the docs).
# Schema 3 stored the executable and argument count instead of the arguments (now only with --cmdline,
# else null), the processes that exec'd and the checkpoint period (end_reason "checkpoint": the file a
# collector killed outright left). Schema 4 timed 1 call in settings.time_sample, added the collector's own
# usage (tool), a cgroup as the target (target.cgroup, else null; target.pid 0 then), the exited threads
# folded by process (threads_folded) and the drops per interval. Schema 5 added the listening sockets,
# schema 6 the dispatch wakeups (SCHEMA6_COUNTERS).
KEYS: tuple[Key, ...] = (
    Key("", "schema", required=True), Key("", "format", TEXT, required=True), Key("", "tool", OBJECT),
    Key("", "target", OBJECT), Key("", "host", OBJECT), Key("", "start_time", TEXT),
    Key("", "duration_s", SECONDS, required=True), Key("", "end_reason", TEXT), Key("", "settings", OBJECT),
    Key("", "histogram_buckets", TEXT), Key("", "threads", LIST, required=True),
    Key("", "threads_folded", LIST, 4), Key("", "totals", OBJECT, required=True),
    Key("", "wakeups", LIST, required=True), Key("", "requests", OBJECT, required=True),
    Key("", "listeners", LIST, 5), Key("", "intervals", LIST), Key("", "drops", OBJECT),

    Key("tool", "name", TEXT), Key("tool", "version", TEXT), Key("tool", "cpu_s", SECONDS, 4),
    Key("tool", "max_rss_bytes", since=4), Key("tool", "map_bytes", since=4),

    Key("target", "pid"), Key("target", "cgroup", OBJECT_OR_NULL, 4), Key("target", "comm", TEXT),
    Key("target", "exe", TEXT_OR_NULL, 3), Key("target", "argc", since=3), Key("target", "cmdline", TEXTS_OR_NULL),
    Key("target", "follow_children", BOOL), Key("target", "pids", COUNTS), Key("target", "execs", LIST, 3),
    Key("target.cgroup", "path", TEXT, 4), Key("target.cgroup", "id", since=4),
    Key("target.execs[]", "pid", since=3), Key("target.execs[]", "t_s", SECONDS, 3),
    Key("target.execs[]", "count", since=3), Key("target.execs[]", "comm", TEXT, 3),
    Key("target.execs[]", "filename", TEXT, 3),

    Key("host", "kernel", TEXT), Key("host", "hostname", TEXT_OR_NULL), Key("host", "ncpus"),

    Key("settings", "interval_s", SECONDS), Key("settings", "checkpoint_s", SECONDS, 3),
    Key("settings", "max_threads"), Key("settings", "max_sockets"), Key("settings", "time_sample", since=4),
    Key("settings", "exited_rows", since=4),

    Key("threads[]", "tid", required=True), Key("threads[]", "pid", required=True), Key("threads[]", "comm", TEXT),
    Key("threads[]", "alive", BOOL), Key("threads[]", "first_seen_s", SECONDS),
    Key("threads[]", "exit_s", SECONDS_OR_NULL),  # null while alive
    *_rows("threads[]", COUNTERS, required=True), Key("threads[]", "poll_events_hist", HISTOGRAM),

    # Threads gone beyond settings.exited_rows, summed by process and name.
    Key("threads_folded[]", "pid", since=4), Key("threads_folded[]", "comm", TEXT, 4),
    Key("threads_folded[]", "threads", since=4), Key("threads_folded[]", "first_seen_s", SECONDS, 4),
    Key("threads_folded[]", "last_exit_s", SECONDS, 4), *_rows("threads_folded[]", COUNTERS, since=4),
    Key("threads_folded[]", "poll_events_hist", HISTOGRAM, 4),

    *_rows("totals", COUNTERS, required=True),
    *_rows("totals", ("threads_seen", "threads_exited", "processes_created")),

    Key("wakeups[]", "waker_tid", required=True), Key("wakeups[]", "wakee_tid", required=True),
    Key("wakeups[]", "mechanism", TEXT), Key("wakeups[]", "count", required=True),

    *_rows("requests", REQUEST_SUMS, required=True), Key("requests", "unattributed_writes"),
    Key("requests", "open_at_end"), Key("requests", "hist", OBJECT), Key("requests", "by_size", LIST),
    *(Key("requests.hist", key, HISTOGRAM) for key in REQUEST_HISTS),
    *_rows("requests.by_size[]", ("bytes_min", "bytes_max", *REQUEST_SUMS), required=True),

    # The listening sockets the target called accept on.
    Key("listeners[]", "inode", since=5, required=True), Key("listeners[]", "family", TEXT, 5),
    *_rows("listeners[]", ("port", "accept_calls", "accept_ok", "accept_eagain", "processes"), 5, required=True),

    # SPINSCOPE_INTERVAL_FIELDS: each interval's deltas.
    Key("intervals[]", "t_s", SECONDS, required=True), Key("intervals[]", "duration_s", SECONDS, required=True),
    *_rows("intervals[]", ("requests", "wakeups_in_process"), required=True),
    Key("intervals[]", "counters", OBJECT, required=True), Key("intervals[]", "drops", OBJECT, 4),
    *_rows("intervals[].counters", COUNTERS, required=True),
    *_rows("intervals[].drops", DROP_KEYS, 4),

    *_rows("drops", DROP_KEYS),
)
# KEYS by the object that holds them ({path: (Key, ...)}, in the document's order), and their names.
ROWS = {path: tuple(row for row in KEYS if row.path == path) for path in dict.fromkeys(row.path for row in KEYS)}
LAYOUT = {path: tuple(row.key for row in rows) for path, rows in ROWS.items()}
BY_SIZE_KEYS = LAYOUT["requests.by_size[]"]
LISTENER_KEYS = LAYOUT["listeners[]"]
INTERVAL_KEYS = LAYOUT["intervals[]"]  # SPINSCOPE_INTERVAL_FIELDS


def layout_differences(doc: Any) -> list:
    """How the keys of a capture document differ from KEYS (as of the document's schema): one line per
    object path whose keys are not exactly those (the elements of a list merged; a block inside a list
    that is empty in this document, a null one or one newer than its schema is not missing). [] for a
    document the collector wrote."""
    schema = doc.get("schema", SCHEMA) if isinstance(doc, dict) else SCHEMA
    found: dict = {}
    null: set = set()  # blocks that are null here (target.cgroup of a PID's capture)

    def walk(value: Any, path: str) -> None:
        if value is None:
            null.add(path)
        elif isinstance(value, dict):
            found.setdefault(path, set()).update(value)
            for key, child in value.items():
                walk(child, f"{path}.{key}" if path else key)
        elif isinstance(value, list):
            for child in value:
                walk(child, f"{path}[]")

    walk(doc, "")
    differences = []
    for path in sorted(set(ROWS) | set(found)):
        expected = {row.key for row in ROWS.get(path, ()) if row.since <= schema}
        keys = found.get(path)
        if keys is None and ("[]" in path or path in null or not expected):
            continue
        if keys != expected:
            keys = keys or set()
            differences.append(f"{path or 'top level'}: missing {sorted(expected - keys)}, "
                               f"unexpected {sorted(keys - expected)}")
    return differences


def _check(doc: dict) -> None:
    """Hold a document (whose format and schema are known good) to KEYS: every key it has that KEYS names
    holds what the row says, and every required key of its schema is there. Keys KEYS does not name are
    left alone (a newer collector may add some). Raises _Malformed at the first wrong value, else at the
    first missing key."""
    schema, missing = doc["schema"], None
    for path, rows in ROWS.items():
        for where, obj in _objects_at(doc, path):
            for row in rows:
                if row.key in obj:
                    if not IS_KIND[row.kind](obj[row.key]):
                        raise _Malformed(f"{where + '.' if where else ''}{row.key} is not a {row.kind} "
                                         f"({_short(obj[row.key])})")
                elif row.required and row.since <= schema and missing is None:
                    missing = f"{where or 'top level'} lacks {row.key!r}"
    if missing:
        raise _Malformed(missing)


def _objects_at(doc: Any, path: str):
    """(where, object) for each object at a KEYS path ("threads[]": each element of threads), skipping
    what is missing; an element that is not an object is an error."""
    found = [("", doc)]
    for step in path.split(".") if path else ():
        key, each = step.removesuffix("[]"), step.endswith("[]")
        deeper = []
        for where, obj in found:
            value = obj.get(key) if isinstance(obj, dict) else None
            name = f"{where}.{key}" if where else key
            if not each:
                deeper += [(name, value)] if isinstance(value, dict) else []
                continue
            for i, element in enumerate(value if isinstance(value, list) else ()):
                if not isinstance(element, dict):
                    raise _Malformed(f"{name}[{i}] is not an object ({_short(element)})")
                deeper.append((f"{name}[{i}]", element))
        found = deeper
    return found


def _is_count(value: Any) -> bool:
    """An integer, or a float with an integral value (as other writers may make), in int64."""
    return _is_number(value) and 0 <= value <= MAX_COUNT and (isinstance(value, int) or float(value).is_integer())


def _is_seconds(value: Any) -> bool:
    return _is_number(value) and value >= 0


def _is_text(value: Any) -> bool:
    """A string that is Unicode text: JSON's \\ud800 escapes can make lone surrogates, which are not."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# What each kind accepts.
IS_KIND = {
    COUNT: _is_count,
    SECONDS: _is_seconds,
    SECONDS_OR_NULL: lambda value: value is None or _is_seconds(value),
    TEXT: _is_text,
    TEXT_OR_NULL: lambda value: value is None or _is_text(value),
    TEXTS_OR_NULL: lambda value: value is None or isinstance(value, list) and all(map(_is_text, value)),
    BOOL: lambda value: isinstance(value, bool),
    OBJECT: lambda value: isinstance(value, dict),
    OBJECT_OR_NULL: lambda value: value is None or isinstance(value, dict),
    LIST: lambda value: isinstance(value, list),
    HISTOGRAM: lambda value: (isinstance(value, list) and len(value) <= MAX_HISTOGRAM_BUCKETS
                              and all(map(_is_count, value))),
    COUNTS: lambda value: isinstance(value, list) and all(map(_is_count, value)),
}


def _short(value: Any) -> str:
    """A value for an error line: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class _Malformed(Exception):
    """A structural problem inside a document that is otherwise a spinscope capture."""


@dataclass
class Capture:
    """One capture, as rows (dicts) keyed the way the analysis needs them.

    threads    {tid: row} in the capture's order, a row: tid, pid, comm, alive, first_seen_s, exit_s (None
               while alive), the counters, and `poll_events_hist` (a list)
    totals     {counter: value} for the whole target (the other keys of `totals`: threads_seen, ...)
    wakeups    [row]: waker_tid, wakee_tid, count, mechanism: the handoff graph between the target's threads
    requests   {sum: value}: the request sums (count, write_calls, write_eagain, write_partial,
               write_bytes, cross_thread, unattributed_writes, ...)
    request_hists  {name: list of log2 bucket counts} for the `requests.hist` histograms
    by_size    [row] per response-size class (BY_SIZE_KEYS), smallest first
    intervals  [row] per snapshot: t_s, duration_s, requests, wakeups_in_process, the counters and
               `drops_<kind>` (the drops during the interval; 0 before schema 4)

    `raw` is the document as read (checked against KEYS). Readers take what they need from the rows and
    the properties below, which give a key an older schema lacks its default in one place; only code that
    makes a document (live.window) works on `raw`.
    """

    path: Path
    raw: dict
    threads: dict
    totals: dict
    wakeups: list
    requests: dict
    request_hists: dict
    by_size: list
    intervals: list
    journaled: int = 0  # intervals read from the journal beside a checkpoint (docs/capture-format.md)
    # One row per listening socket the target called accept on (LISTENER_KEYS); empty before schema 5.
    listeners: list = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        return float(self.raw["duration_s"])

    @property
    def end_reason(self) -> str | None:
        """Why the collector wrote it ("duration", "signal", "target-exited", "live" for a line of a stream,
        "checkpoint" for what a collector killed outright left), None in a document without one."""
        return self.raw.get("end_reason")

    @property
    def interval_s(self) -> float | None:
        value = self.raw.get("settings", {}).get("interval_s")
        return float(value) if _is_number(value) and value > 0 else None

    @property
    def target(self) -> dict:
        """The `target` block as written (what `report --json` passes on); the properties below read it."""
        return self.raw.get("target", {})

    @property
    def target_pid(self) -> int:
        """The traced process (its first, with --children); 0 for a cgroup target."""
        return int(self.target.get("pid", 0))

    @property
    def target_comm(self) -> str:
        return str(self.target.get("comm", ""))

    @property
    def target_exe(self) -> str:
        """Its executable's path ("" before schema 3, or when the collector could not read it)."""
        return str(self.target.get("exe") or "")

    @property
    def target_pids(self) -> list:
        """Every process traced (the target and, with --children, its descendants)."""
        return list(self.target.get("pids", []))

    @property
    def execs(self) -> list:
        """The traced processes that replaced their program while traced (target.execs, schema 3): rows of
        pid, t_s (the latest), count, comm and filename (after the exec); empty before schema 3."""
        return list(self.target.get("execs") or [])

    @property
    def cgroup(self) -> dict | None:
        """The target cgroup of a capture made with --cgroup ({"path": ..., "id": ...}), else None."""
        value = self.target.get("cgroup")
        return value if isinstance(value, dict) else None

    @property
    def name(self) -> str:
        """A short human name for what was captured: `comm (pid N)`, or `cgroup PATH`."""
        target = self.target
        if self.cgroup is not None:
            return f"cgroup {self.cgroup.get('path') or '?'}"
        comm = target.get("comm") or "?"
        return f"{comm} (pid {target.get('pid', '?')})"

    @property
    def drops(self) -> dict:
        return {key: int(self.raw.get("drops", {}).get(key, 0)) for key in DROP_KEYS}

    @property
    def request_count(self) -> int:
        return int(self.requests["count"])

    @property
    def schema(self) -> int:
        return int(self.raw["schema"])

    @property
    def threads_created(self) -> int:
        """Threads (and processes) the target created while traced."""
        return int(self.totals["threads_created"])

    @property
    def threads_exited(self) -> int:
        """Threads of the target that exited while traced (totals.threads_exited; 0 if absent)."""
        return int(self.raw["totals"].get("threads_exited", 0))

    @property
    def threads_seen(self) -> int:
        """Threads that made a counted event: the rows of `threads`, those folded into `threads_folded`
        and those whose counts were dropped (totals.threads_seen; 0 if absent)."""
        return int(self.raw["totals"].get("threads_seen", 0))

    @property
    def threads_folded(self) -> list:
        """The exited threads beyond settings.exited_rows, summed by process and name (schema 4): rows
        as written (pid, comm, threads, first_seen_s, last_exit_s, the counters); empty before."""
        return list(self.raw.get("threads_folded") or [])

    @property
    def collector_usage(self) -> dict:
        """What the collector itself used so far: cpu_s, max_rss_bytes, map_bytes (tool, schema 4), each
        None in older captures."""
        tool = self.raw.get("tool", {})
        return {key: tool.get(key) for key in ("cpu_s", "max_rss_bytes", "map_bytes")}

    @property
    def time_sample(self) -> int:
        """1 call in N had its time measured (1: every call; captures before schema 4 timed every call).
        Above 1, the on-CPU time of calls (and so every verdict's cost) is an estimate; counts are exact."""
        return max(1, int(self.raw.get("settings", {}).get("time_sample", 1)))

    @property
    def channel_reads(self) -> int:
        """Reads that returned data on channels between the target's processes (socket pairs, not client
        connections): no requests were counted on them (0 before schema 5, which counted them as requests)."""
        return int(self.totals["channel_reads"])

    @property
    def channel_writes(self) -> int:
        """Socket writes on those channels: in no request (0 before schema 5)."""
        return int(self.totals["channel_writes"])

    @property
    def channel_sockets(self) -> int:
        """How many channel sockets (ends of socket pairs) the target read or wrote (0 before schema 5)."""
        return int(self.totals["channel_sockets"])

    @property
    def h2_connections(self) -> int:
        """Connections whose first read began with the HTTP/2 client preface: their streams are multiplexed,
        so a request of this capture is an exchange (a read burst and the writes after it), not one
        HTTP request (0 before schema 5, which did not look)."""
        return int(self.totals["h2_connections"])

    @property
    def channels_told_apart(self) -> bool:
        """Whether the collector told channels from client connections (schema 5 and later)."""
        return self.schema >= 5

    @property
    def costs_measured(self) -> bool:
        """Whether the collector measured the on-CPU cost of each call class (schema 2 and later)."""
        return self.schema >= 2


def load(path: str | Path) -> Capture:
    """Read and validate a capture file; raise SpinscopeError with one line on any problem. A checkpoint
    (what a collector killed outright left) gets the intervals its journal holds after it."""
    path = Path(path)
    doc = _read_json(path)
    journaled = _journal_intervals(path, doc)
    cap = _validated(path, doc)
    cap.journaled = journaled
    return cap


JOURNAL_SUFFIX = ".intervals.jsonl"


def _journal_intervals(path: Path, doc: Any) -> int:
    """Append to a checkpoint's intervals those of its journal (PATH.intervals.jsonl: the collector appends
    each interval there and empties it at each checkpoint) that came after it; how many. The journal's
    last line may be cut (the collector killed while writing it): reading stops at the first line that is
    not a whole JSON object. What is read is validated with the rest of the document."""
    journal = path.with_name(path.name + JOURNAL_SUFFIX)
    if not isinstance(doc, dict) or doc.get("end_reason") != "checkpoint" or not isinstance(doc.get("intervals"), list):
        return 0
    try:
        if journal.stat().st_size > MAX_CAPTURE_BYTES:
            return 0
        lines = journal.read_bytes().splitlines()
    except OSError:
        return 0
    last = max((row.get("t_s", 0) for row in doc["intervals"] if isinstance(row, dict)
                and _is_number(row.get("t_s"))), default=0.0)
    added = 0
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            break
        if not isinstance(row, dict):
            break
        if _is_number(row.get("t_s")) and row["t_s"] > last:
            doc["intervals"].append(row)
            last = row["t_s"]
            added += 1
    return added


def loads(data: bytes, name: str = "stream") -> Capture:
    """Validate a capture held in memory (a line of the collector's --stream, docs/live.md) as load()
    does a file: the same size bound, the same checks, one SpinscopeError line naming `name`."""
    if len(data) > MAX_CAPTURE_BYTES:
        raise SpinscopeError(f"{name}: {len(data) / 2**20:,.0f} MiB is larger than a capture is read "
                             f"({MAX_CAPTURE_BYTES // 2**20} MiB; SPINSCOPE_MAX_CAPTURE_MB raises it)")
    return _validated(Path(name), _parse_json(data, name))


def from_document(doc: Any, name: str = "stream") -> Capture:
    """Validate a capture document already parsed (or made, as live.window does) as load() does."""
    return _validated(Path(name), doc)


def _validated(path: Path, doc: Any) -> Capture:
    _check_identity(path, doc)
    try:
        _check(doc)
        return _build(path, doc)
    except _Malformed as exc:
        raise SpinscopeError(f"{path.name}: malformed spinscope capture: {exc}") from None


def _read_json(path: Path) -> Any:
    name = path.name or str(path)
    try:
        if path.stat().st_size > MAX_CAPTURE_BYTES:
            raise SpinscopeError(f"{name}: {path.stat().st_size / 2**20:,.0f} MiB is larger than a capture is read "
                                 f"({MAX_CAPTURE_BYTES // 2**20} MiB; SPINSCOPE_MAX_CAPTURE_MB raises it)")
        data = path.read_bytes()
    except FileNotFoundError:
        raise SpinscopeError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SpinscopeError(f"{path}: is a directory, not a capture file") from None
    except OSError as exc:
        raise SpinscopeError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return _parse_json(data, name)


def _parse_json(data: bytes, name: str) -> Any:
    if not data.strip():
        raise SpinscopeError(f"{name}: not a spinscope capture (empty file)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpinscopeError(f"{name}: not a spinscope capture (not UTF-8 text at byte {exc.start})") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise SpinscopeError(f"{name}: not a spinscope capture (nested too deeply to read)") from None
    except json.JSONDecodeError as exc:
        byte = len(text[: exc.pos].encode("utf-8"))
        # A document cut short fails at its very end, or inside a string that never closes.
        if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
            reason = f"truncated JSON at byte {len(data)}"
        else:
            reason = f"invalid JSON at byte {byte}: {exc.msg}"
        raise SpinscopeError(f"{name}: not a spinscope capture ({reason})") from None
    except ValueError as exc:  # an integer of thousands of digits (Python's int conversion limit)
        raise SpinscopeError(f"{name}: not a spinscope capture ({exc})") from None


def _check_identity(path: Path, doc: Any) -> None:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SpinscopeError(f'{path.name}: not a spinscope capture (no "format": "{FORMAT}")')
    schema = doc.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise SpinscopeError(f"{path.name}: not a spinscope capture (schema {schema!r} is not a version number)")
    if schema > SCHEMA:
        raise SpinscopeError(
            f"{path.name}: schema {schema} is newer than this spinscope understands ({SCHEMA}); upgrade spinscope"
        )

def _build(path: Path, doc: dict) -> Capture:
    """The rows of a document _check() passed: every key they read is there and of its kind, but for
    those an older schema (or a hand-made document) lacks, read as 0, empty or their default here."""
    threads: dict = {}
    for row in doc["threads"]:
        record = _thread_row(row)
        if record["tid"] in threads:
            raise _Malformed(f"thread {record['tid']} appears twice")
        threads[record["tid"]] = record
    wakeups = [{"waker_tid": int(row["waker_tid"]), "wakee_tid": int(row["wakee_tid"]), "count": int(row["count"]),
                "mechanism": row.get("mechanism") if row.get("mechanism") in MECHANISMS else "unknown"}
               for row in doc["wakeups"]]
    block = doc["requests"]
    requests = {**_counts(block, REQUEST_SUMS), "unattributed_writes": int(block.get("unattributed_writes", 0))}
    hists = {key: _counts_list(block.get("hist", {}).get(key, [])) for key in REQUEST_HISTS}
    by_size = sorted((_counts(row, BY_SIZE_KEYS) for row in block.get("by_size", [])),
                     key=lambda row: row["bytes_min"])
    listeners = [{**_counts(row, LISTENER_KEYS[:1]), "family": str(row.get("family", "")),
                  **_counts(row, LISTENER_KEYS[2:])} for row in doc.get("listeners", [])]
    return Capture(path=path, raw=doc, threads=threads, totals=_counts(doc["totals"], COUNTERS), wakeups=wakeups,
                   requests=requests, request_hists=hists, by_size=by_size,
                   intervals=[_interval_row(row) for row in doc.get("intervals", [])], listeners=listeners)


def _thread_row(row: dict) -> dict:
    exit_s = row.get("exit_s")
    return {"tid": int(row["tid"]), "pid": int(row["pid"]), "comm": row.get("comm", ""),
            "alive": row.get("alive", True), "first_seen_s": float(row.get("first_seen_s") or 0.0),
            "exit_s": None if exit_s is None else float(exit_s), **_counts(row, COUNTERS),
            "poll_events_hist": _counts_list(row.get("poll_events_hist", []))}


def _interval_row(row: dict) -> dict:
    drops = row.get("drops", {})  # schema 4
    return {"t_s": float(row["t_s"]), "duration_s": float(row["duration_s"]), "requests": int(row["requests"]),
            "wakeups_in_process": int(row["wakeups_in_process"]), **_counts(row["counters"], COUNTERS),
            **{f"drops_{key}": int(drops.get(key, 0)) for key in DROP_KEYS}}


def summed(rows: Iterable[Mapping]) -> dict:
    """{counter: its sum over rows} (thread rows, interval rows): a group's counters, for counters.py."""
    rows = list(rows)
    return {key: sum(row[key] for row in rows) for key in COUNTERS}


def _counts(obj: Mapping, keys: Iterable[str]) -> dict:
    """{key: its count} for keys of a checked object; a key it lacks (newer than its schema) is 0."""
    return {key: int(obj.get(key, 0)) for key in keys}


def _counts_list(values: list) -> list:
    return [int(value) for value in values]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
