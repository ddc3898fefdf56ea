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
from typing import Any, Iterable, Mapping

from spinscope.errors import SpinscopeError

FORMAT = "spinscope-capture"
SCHEMA = 5

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
    "write_spin_empty", "write_spin_empty_ns",
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
# Schema 4 added calls_timed (its captures before timed every counted call).
SCHEMA4_COUNTERS = frozenset(("calls_timed",))
# Schema 1 captures (collectors before the measured costs) lack these: loaded as 0, and
# Capture.costs_measured is False so that no verdict is drawn from the zeros.
SCHEMA2_COUNTERS = frozenset((
    "write_eagain_ns", "write_partial_ns", "write_spin_retries", "write_spin_ns", "write_spin_eagain",
    "write_spin_bytes", "write_first_ns", "write_first_bytes", "write_waited", "read_eagain_ns", "requests_read", "socket_switches", "responses_written", "poll_oncpu_ns", "poll_nowait",
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
BY_SIZE_KEYS = ("bytes_min", "bytes_max", *REQUEST_SUMS)
# drops: SPINSCOPE_DROPS.
DROP_KEYS = ("threads", "sockets", "wakeup_edges", "pids", "exited", "execs", "listeners")
# Each entry of listeners (schema 5): the listening sockets the target called accept on.
LISTENER_KEYS = ("inode", "family", "port", "accept_calls", "accept_ok", "accept_eagain", "processes")
# Each entry of intervals: SPINSCOPE_INTERVAL_FIELDS.
INTERVAL_KEYS = ("t_s", "duration_s", "requests", "wakeups_in_process", "counters", "drops")

# Every key the collector writes, by where it is in the document ("[]": each element of a list). The
# tests hold this to bpf/spinscope.h's X-macros, to docs/capture-format.md and to fresh captures.
LAYOUT = {
    "": ("schema", "format", "tool", "target", "host", "start_time", "duration_s", "end_reason", "settings",
         "histogram_buckets", "threads", "threads_folded", "totals", "wakeups", "requests", "listeners", "intervals",
         "drops"),
    "tool": ("name", "version", "cpu_s", "max_rss_bytes", "map_bytes"),
    "target": ("pid", "cgroup", "comm", "exe", "argc", "cmdline", "follow_children", "pids", "execs"),
    "target.cgroup": ("path", "id"),
    "target.execs[]": ("pid", "t_s", "count", "comm", "filename"),
    "host": ("kernel", "hostname", "ncpus"),
    "settings": ("interval_s", "checkpoint_s", "max_threads", "max_sockets", "time_sample", "exited_rows"),
    "threads[]": ("tid", "pid", "comm", "alive", "first_seen_s", "exit_s", *COUNTERS, "poll_events_hist"),
    "threads_folded[]": ("pid", "comm", "threads", "first_seen_s", "last_exit_s", *COUNTERS, "poll_events_hist"),
    "totals": (*COUNTERS, "threads_seen", "threads_exited", "processes_created"),
    "wakeups[]": ("waker_tid", "wakee_tid", "mechanism", "count"),
    "requests": (*REQUEST_SUMS, "unattributed_writes", "open_at_end", "hist", "by_size"),
    "requests.hist": REQUEST_HISTS,
    "requests.by_size[]": BY_SIZE_KEYS,
    "listeners[]": LISTENER_KEYS,
    "intervals[]": INTERVAL_KEYS,
    "intervals[].counters": COUNTERS,
    "intervals[].drops": DROP_KEYS,
    "drops": DROP_KEYS,
}
# What each key's value must be, where it is not a count (a non-negative integer: every counter, sum,
# drop and id). The loader checks every key a document has against this before reading it.
(COUNT, SECONDS, SECONDS_OR_NULL, TEXT, TEXT_OR_NULL, TEXTS_OR_NULL, BOOL, OBJECT, OBJECT_OR_NULL, LIST, HISTOGRAM,
 COUNTS) = ("count", "seconds", "seconds or null", "text", "text or null", "list of text or null", "boolean",
            "object", "object or null", "list", "histogram", "list of counts")
KINDS = {
    "": {"schema": COUNT, "format": TEXT, "tool": OBJECT, "target": OBJECT, "host": OBJECT, "start_time": TEXT,
         "duration_s": SECONDS, "end_reason": TEXT, "settings": OBJECT, "histogram_buckets": TEXT,
         "threads": LIST, "threads_folded": LIST, "totals": OBJECT, "wakeups": LIST, "requests": OBJECT,
         "listeners": LIST, "intervals": LIST,
         "drops": OBJECT},
    "tool": {"name": TEXT, "version": TEXT, "cpu_s": SECONDS},
    "target": {"cgroup": OBJECT_OR_NULL, "comm": TEXT, "exe": TEXT_OR_NULL, "cmdline": TEXTS_OR_NULL,
               "follow_children": BOOL, "pids": COUNTS, "execs": LIST},
    "target.cgroup": {"path": TEXT},
    "target.execs[]": {"t_s": SECONDS, "comm": TEXT, "filename": TEXT},
    "host": {"kernel": TEXT, "hostname": TEXT_OR_NULL},
    "settings": {"interval_s": SECONDS, "checkpoint_s": SECONDS},
    "threads[]": {"comm": TEXT, "alive": BOOL, "first_seen_s": SECONDS, "exit_s": SECONDS_OR_NULL,
                  "poll_events_hist": HISTOGRAM},
    "threads_folded[]": {"comm": TEXT, "first_seen_s": SECONDS, "last_exit_s": SECONDS, "poll_events_hist": HISTOGRAM},
    "wakeups[]": {"mechanism": TEXT},
    "requests": {"hist": OBJECT, "by_size": LIST},
    "requests.hist": {key: HISTOGRAM for key in REQUEST_HISTS},
    "listeners[]": {"family": TEXT},
    "intervals[]": {"t_s": SECONDS, "duration_s": SECONDS, "counters": OBJECT, "drops": OBJECT},
}
MAX_COUNT = 2**63 - 1  # int64, what other readers (pandas, the lab's tables) hold; the collector's u64 counters stay far below
MAX_HISTOGRAM_BUCKETS = 64  # REQ_HIST_BUCKETS in bpf/spinscope.h, the largest the collector writes
# Bigger files are refused before they are read: a 71 MiB capture (16,384 threads, 36,000 intervals)
# takes 8.7 s and 420 MiB to report (bench/capture_scale.py), so the bound costs about 15 s and 0.8 GiB.
MAX_CAPTURE_BYTES = int(os.environ.get("SPINSCOPE_MAX_CAPTURE_MB", "128")) * 2**20

# Keys LAYOUT has that captures of an older schema lack, by the schema that added them ("block.key").
# Schema 3: the executable and argument count instead of the arguments (now only with --cmdline, else
# null), the processes that exec'd, the execs map's drops, the checkpoint period (end_reason "checkpoint":
# the file a collector killed outright left); the hostname only with --hostname.
# Schema 5: reads and writes on channels between the target's processes (socket pairs) apart, no longer
# requests; HTTP/2 connections recognised by their preface.
# Schema 4: calls timed 1 in settings.time_sample (the on-CPU time of calls an estimate when above 1; the
# off-CPU part of their wall time exact), and calls already in flight at attach counted when they return;
# a cgroup as the target (--cgroup: target.cgroup, else null; target.pid 0 then).
# Schema 5: accept calls (per thread and per listening socket: listeners, drops.listeners), the poll wakeup
# cycles (poll_futile, poll_futile_cycle_ns, poll_zero_cycle_ns) and the copy rate (write_copy_ns, _bytes).
ADDED_IN = {3: ("target.exe", "target.argc", "target.execs", "drops.execs", "settings.checkpoint_s"),
            4: ("settings.time_sample", "threads[].calls_timed", "totals.calls_timed",
                "intervals[].counters.calls_timed", "intervals[].drops", "tool.cpu_s", "tool.max_rss_bytes",
                "tool.map_bytes", "target.cgroup", "threads_folded", "drops.exited", "settings.exited_rows"),
            5: ("listeners", "drops.listeners", "intervals[].drops.listeners",
                *(f"{block}.{key}" for block in ("threads[]", "threads_folded[]", "totals", "intervals[].counters")
                  for key in sorted(SCHEMA5_COUNTERS)))}
# What a waker was doing (wakeups[].mechanism); "unknown" in schema 1 captures.
MECHANISMS = ("futex", "io", "mm", "exit", "other")


def layout_differences(doc: Any) -> list:
    """How the keys of a capture document differ from LAYOUT (as of the document's schema): one line per
    object path whose keys are not exactly LAYOUT's (the elements of a list merged; a block inside a list
    that is empty in this document is not missing). [] for a document the collector wrote."""
    schema = doc.get("schema", SCHEMA) if isinstance(doc, dict) else SCHEMA
    newer = {key for version, keys in ADDED_IN.items() if version > schema for key in keys}
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
    for path in sorted(set(LAYOUT) | set(found)):
        expected = {key for key in LAYOUT.get(path, ()) if (f"{path}.{key}" if path else key) not in newer}
        keys = found.get(path)
        if keys is None and ("[]" in path or path in newer or path in null):
            continue
        if keys != expected:
            keys = keys or set()
            differences.append(f"{path or 'top level'}: missing {sorted(expected - keys)}, "
                               f"unexpected {sorted(keys - expected)}")
    return differences


class _Malformed(Exception):
    """A structural problem inside a document that is otherwise a spinscope capture."""


@dataclass
class Capture:
    """One capture, as rows (dicts) keyed the way the analysis needs them.

    threads    {tid: row} in the capture's order, a row: tid, pid, comm, alive, first_seen_s, exit_s (None
               while alive), the counters, and `poll_events_hist` (a list)
    totals     {counter: value} for the whole target (plus threads_seen, ...)
    wakeups    [row]: waker_tid, wakee_tid, count, mechanism: the handoff graph between the target's threads
    requests   {sum: value}: the request sums (count, write_calls, write_eagain, write_partial,
               write_bytes, cross_thread, unattributed_writes, ...)
    request_hists  {name: list of log2 bucket counts} for the `requests.hist` histograms
    by_size    [row] per response-size class (BY_SIZE_KEYS), smallest first
    intervals  [row] per snapshot: t_s, duration_s, requests, wakeups_in_process, the counters and
               `drops_<kind>` (the drops during the interval; 0 before schema 4)
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
    def interval_s(self) -> float | None:
        value = self.raw.get("settings", {}).get("interval_s")
        return float(value) if _is_number(value) and value > 0 else None

    @property
    def target(self) -> dict:
        return self.raw.get("target", {})

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
    optional = frozenset() if doc["schema"] >= 5 else SCHEMA5_COUNTERS
    if doc["schema"] < 4:
        optional |= SCHEMA4_COUNTERS
    if doc["schema"] < 2:
        optional |= SCHEMA2_COUNTERS | SCHEMA2_REQUEST_SUMS
    try:
        _check_kinds(doc)
        return _build(path, doc, optional)
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


def _check_kinds(doc: dict) -> None:
    """Every key LAYOUT names that the document has holds what KINDS says (a count by default); keys it
    does not name are left alone (a newer collector may add some). Raises _Malformed at the first that
    does not."""
    for path, keys in LAYOUT.items():
        kinds = KINDS.get(path, {})
        for where, obj in _objects_at(doc, path):
            for key in keys:
                if key in obj and not _is_kind(obj[key], kinds.get(key, COUNT)):
                    raise _Malformed(f"{where + '.' if where else ''}{key} is not a {kinds.get(key, COUNT)} "
                                     f"({_short(obj[key])})")


def _objects_at(doc: Any, path: str):
    """(where, object) for each object at a LAYOUT path ("threads[]": each element of threads), skipping
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


def _is_kind(value: Any, kind: str) -> bool:
    if kind == COUNT:  # an integer, or a float with an integral value (as other writers may make)
        return (_is_number(value) and 0 <= value <= MAX_COUNT
                and (isinstance(value, int) or float(value).is_integer()))
    if kind in (SECONDS, SECONDS_OR_NULL):
        return (value is None and kind == SECONDS_OR_NULL) or (_is_number(value) and value >= 0)
    if kind in (TEXT, TEXT_OR_NULL):
        return _is_text(value) or (value is None and kind == TEXT_OR_NULL)
    if kind == TEXTS_OR_NULL:
        return value is None or isinstance(value, list) and all(_is_text(v) for v in value)
    if kind == BOOL:
        return isinstance(value, bool)
    if kind in (OBJECT, OBJECT_OR_NULL):
        return isinstance(value, dict) or (value is None and kind == OBJECT_OR_NULL)
    if kind == LIST:
        return isinstance(value, list)
    if kind in (HISTOGRAM, COUNTS):
        return (isinstance(value, list) and (kind == COUNTS or len(value) <= MAX_HISTOGRAM_BUCKETS)
                and all(_is_kind(v, COUNT) for v in value))
    raise AssertionError(kind)


def _is_text(value: Any) -> bool:
    """A string that is Unicode text: JSON's \\ud800 escapes can make lone surrogates, which are not."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _short(value: Any) -> str:
    """A value for an error line: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _build(path: Path, doc: dict, optional: frozenset) -> Capture:
    """`optional`: keys an older schema lacks, read as 0."""
    duration = _number(doc, "duration_s", "top level")
    if duration < 0:
        raise _Malformed(f"duration_s is negative ({duration})")

    threads = _threads_rows(_list(doc, "threads", "top level"), optional)
    totals = _counters(_dict(doc, "totals", "top level"), "totals", optional)
    wakeups = _wakeup_rows(_list(doc, "wakeups", "top level"))
    requests_doc = _dict(doc, "requests", "top level")
    requests, hists, by_size = _requests(requests_doc, optional)
    intervals = _interval_rows(doc.get("intervals", []), optional)
    drops = doc.get("drops", {})
    if not isinstance(drops, dict):
        raise _Malformed("drops is not an object")
    for key in DROP_KEYS:
        if key in drops and not _is_number(drops[key]):
            raise _Malformed(f"drops.{key} is not a number")
    listeners = _listener_rows(doc.get("listeners", []))  # schema 5
    return Capture(path=path, raw=doc, threads=threads, totals=totals, wakeups=wakeups,
                   requests=requests, request_hists=hists, by_size=by_size, intervals=intervals,
                   listeners=listeners)


def _threads_rows(rows: list, optional: frozenset) -> dict:
    threads: dict = {}
    for i, row in enumerate(rows):
        where = f"threads[{i}]"
        if not isinstance(row, dict):
            raise _Malformed(f"{where} is not an object")
        record = {"tid": int(_number(row, "tid", where)), "pid": int(_number(row, "pid", where))}
        record["comm"] = str(row.get("comm", ""))
        record["alive"] = bool(row.get("alive", True))
        record["first_seen_s"] = float(row.get("first_seen_s") or 0.0)
        exit_s = row.get("exit_s")
        record["exit_s"] = float(exit_s) if _is_number(exit_s) else None
        record.update(_counters(row, where, optional))
        record["poll_events_hist"] = _histogram(row.get("poll_events_hist", []), f"{where}.poll_events_hist")
        if record["tid"] in threads:
            raise _Malformed(f"thread {record['tid']} appears twice")
        threads[record["tid"]] = record
    return threads


def _wakeup_rows(rows: list) -> list:
    records = []
    for i, row in enumerate(rows):
        where = f"wakeups[{i}]"
        if not isinstance(row, dict):
            raise _Malformed(f"{where} is not an object")
        record = {key: int(_number(row, key, where)) for key in ("waker_tid", "wakee_tid", "count")}
        mechanism = row.get("mechanism", "unknown")
        record["mechanism"] = mechanism if mechanism in MECHANISMS else "unknown"
        records.append(record)
    return records


def _requests(doc: dict, optional: frozenset) -> tuple[dict, dict, list]:
    sums = _sums(doc, REQUEST_SUMS, "requests", optional)
    sums["unattributed_writes"] = int(_number(doc, "unattributed_writes", "requests")) \
        if "unattributed_writes" in doc else 0
    hist_doc = doc.get("hist", {})
    if not isinstance(hist_doc, dict):
        raise _Malformed("requests.hist is not an object")
    hists = {key: _histogram(hist_doc.get(key, []), f"requests.hist.{key}") for key in REQUEST_HISTS}
    rows = doc.get("by_size", [])
    if not isinstance(rows, list):
        raise _Malformed("requests.by_size is not a list")
    records = []
    for i, row in enumerate(rows):
        where = f"requests.by_size[{i}]"
        if not isinstance(row, dict):
            raise _Malformed(f"{where} is not an object")
        records.append(_sums(row, BY_SIZE_KEYS, where, optional))
    return sums, hists, sorted(records, key=lambda row: row["bytes_min"])


def _listener_rows(rows: Any) -> list:
    if not isinstance(rows, list):
        raise _Malformed("listeners is not a list")
    records = []
    for i, row in enumerate(rows):
        where = f"listeners[{i}]"
        if not isinstance(row, dict):
            raise _Malformed(f"{where} is not an object")
        record = _sums(row, tuple(key for key in LISTENER_KEYS if key != "family"), where, frozenset())
        record["family"] = str(row.get("family", ""))
        records.append({key: record[key] for key in LISTENER_KEYS})
    return records


def _interval_rows(rows: Any, optional: frozenset) -> list:
    if not isinstance(rows, list):
        raise _Malformed("intervals is not a list")
    records = []
    for i, row in enumerate(rows):
        where = f"intervals[{i}]"
        if not isinstance(row, dict):
            raise _Malformed(f"{where} is not an object")
        record = {key: float(_number(row, key, where)) for key in ("t_s", "duration_s")}
        record["requests"] = int(_number(row, "requests", where))
        record["wakeups_in_process"] = int(_number(row, "wakeups_in_process", where))
        record.update(_counters(_dict(row, "counters", where), f"{where}.counters", optional))
        drops = row.get("drops", {})  # schema 4
        if not isinstance(drops, dict):
            raise _Malformed(f"{where}.drops is not an object")
        record.update({f"drops_{key}": int(_number(drops, key, f"{where}.drops")) if key in drops else 0
                       for key in DROP_KEYS})
        records.append(record)
    return records


def summed(rows: Iterable[Mapping]) -> dict:
    """{counter: its sum over rows} (thread rows, interval rows): a group's counters, for counters.py."""
    rows = list(rows)
    return {key: sum(row[key] for row in rows) for key in COUNTERS}


def _counters(doc: Mapping, where: str, optional: frozenset) -> dict:
    return _sums(doc, COUNTERS, where, optional)


def _sums(doc: Mapping, keys: tuple, where: str, optional: frozenset) -> dict:
    return {key: 0 if key in optional and key not in doc else int(_number(doc, key, where)) for key in keys}


def _histogram(value: Any, where: str) -> list:
    if not isinstance(value, list) or not all(_is_number(v) for v in value):
        raise _Malformed(f"{where} is not a list of counts")
    return [int(v) for v in value]


def _number(doc: Mapping, key: str, where: str) -> float:
    if key not in doc:
        raise _Malformed(f"{where} lacks {key!r}")
    value = doc[key]
    if not _is_number(value):
        raise _Malformed(f"{where}.{key} is not a number ({value!r})")
    return value


def _dict(doc: Mapping, key: str, where: str) -> dict:
    if key not in doc:
        raise _Malformed(f"{where} lacks {key!r}")
    if not isinstance(doc[key], dict):
        raise _Malformed(f"{key} is not an object")
    return doc[key]


def _list(doc: Mapping, key: str, where: str) -> list:
    if key not in doc:
        raise _Malformed(f"{where} lacks {key!r}")
    if not isinstance(doc[key], list):
        raise _Malformed(f"{key} is not a list")
    return doc[key]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
