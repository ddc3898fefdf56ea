"""The capture document's layout (docs/capture-format.md), the contract with the C collector: the format
and schema numbers, the counters and sums in the collector's order (bpf/spinscope.h's X-macros, which a
test holds equal), and KEYS, a row per key the collector writes (its place, kind and the schema that
added it). `check` walks a document against KEYS, `layout_differences` lists how a document's keys
differ from it; capture.py loads a document only once `check` passed. Standard library only.
"""

from __future__ import annotations

import math
import os
from typing import Any, Iterable, NamedTuple

FORMAT = "spinscope-capture"
SCHEMA = 10

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
    "clone_calls", "clone_ns", "thread_starts", "thread_start_wait_ns", "exit_oncpu_ns",
    "h2_streams", "h2_frames", "h2_lost", "h2_lost_calls", "h2_lost_bytes", "h2_streams_unfollowed",
    "tls_connections", "h2_bad_frames", "nagle_held", "switch_ins_unseen",
)
# Schema 7 added what creating and ending a thread costs (a thread per request): 0 in older captures.
SCHEMA7_COUNTERS = frozenset(("clone_calls", "clone_ns", "thread_starts", "thread_start_wait_ns", "exit_oncpu_ns"))
# Schema 8 counted an HTTP/2 connection's requests as its streams (from its frame headers; before, as
# exchanges) and said where the frame walk lost its place, and the connections that began with a TLS
# ClientHello: 0 in older captures.
SCHEMA8_COUNTERS = frozenset(("h2_streams", "h2_frames", "h2_lost", "h2_lost_calls", "h2_lost_bytes",
                              "h2_streams_unfollowed", "tls_connections"))
# Schema 9 checked every HTTP/2 frame header and counted those no conforming peer sends, and found the responses
# held by Nagle's algorithm (bpf/nagle.bpf.h): the writes that left bytes held, and per request the holds a
# segment from the client ended and their time: 0 in older captures.
SCHEMA9_COUNTERS = frozenset(("h2_bad_frames", "nagle_held"))
SCHEMA9_REQUEST_SUMS = frozenset(("nagle_holds", "nagle_hold_ns"))
# Schema 10 counts the switches in that the kernel ran no tracing program for (found, and taken to be at, the
# thread's next counted syscall's exit): 0 in older captures, which could lose a thread's slice.
SCHEMA10_COUNTERS = frozenset(("switch_ins_unseen",))
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
                "write_waited", "write_bytes", "duration_ns", "cross_thread", "nagle_holds", "nagle_hold_ns")
SCHEMA2_REQUEST_SUMS = frozenset(("spin_retries", "spin_eagain", "write_waited", "duration_ns", "cross_thread"))
# requests.hist: SPINSCOPE_REQUEST_HISTS.
REQUEST_HISTS = ("write_calls", "write_eagain", "write_bytes", "duration_ns", "nagle_hold_ns")
# drops: SPINSCOPE_DROPS.
DROP_KEYS = ("threads", "sockets", "wakeup_edges", "pids", "exited", "execs", "listeners")
# The schema that added each key of those lists that schema 1 lacked (the others: 1), by name: a name in
# two lists (write_waited, a counter and a request sum) came with the same schema in both. Schema 3 added
# the execs map's drops, schema 4 the exited threads', schema 5 the listeners'.
SINCE = {**dict.fromkeys(SCHEMA2_COUNTERS | SCHEMA2_REQUEST_SUMS, 2), **dict.fromkeys(SCHEMA4_COUNTERS, 4),
         **dict.fromkeys(SCHEMA5_COUNTERS, 5), **dict.fromkeys(SCHEMA6_COUNTERS, 6),
         **dict.fromkeys(SCHEMA7_COUNTERS, 7), **dict.fromkeys(SCHEMA8_COUNTERS, 8),
         **dict.fromkeys(SCHEMA9_COUNTERS | SCHEMA9_REQUEST_SUMS, 9), "nagle-write": 9,
         **dict.fromkeys(SCHEMA10_COUNTERS, 10), "execs": 3, "exited": 4,
         "listeners": 5}
# --stacks' record sources (enum stack_source in bpf/spinscope.h): CPU samples, then the event sources.
STACK_SOURCES = ("cpu", "spin-write", "empty-poll", "futile-wakeup", "handoff", "nagle-write")
STACK_EVENT_SOURCES = STACK_SOURCES[1:]
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
# description of the layout: the loader checks a document against it (check()), layout_differences()
# compares a document's keys with it, and the tests hold it to bpf/spinscope.h's X-macros, to
# docs/capture-format.md and to fresh captures. A new key is one row here (and one in the docs).
# Schema 3 stored the executable and argument count instead of the arguments (now only with --cmdline,
# else null), the processes that exec'd and the checkpoint period (end_reason "checkpoint": the file a
# collector killed outright left). Schema 4 timed 1 call in settings.time_sample, added the collector's own
# usage (tool), a cgroup as the target (target.cgroup, else null; target.pid 0 then), the exited threads
# folded by process (threads_folded) and the drops per interval. Schema 5 added the listening sockets,
# schema 6 the dispatch wakeups (SCHEMA6_COUNTERS), schema 7 the threads' lives (SCHEMA7_COUNTERS), schema 8
# HTTP/2 streams as requests (SCHEMA8_COUNTERS) and the requests' times and cross-thread answers per interval
# (intervals[].request_ns, cross_thread), schema 9 the kernel's BPF features the collector probed
# (host.features), what they left out of the capture (settings.left_out) and the frame headers refused, the
# responses held by Nagle's algorithm (SCHEMA9_COUNTERS, SCHEMA9_REQUEST_SUMS) and the stack source of their
# writes (nagle-write); and
# it made stacks.event_budget_per_s the whole target's budget and added how it was spent (stacks.deferred),
# the ring's size and the modules' files (stacks.modules); it names Rust's frames with Rust's demangler
# (stacks.frames[] kind `rust`), the functions inlined at an address as frames of their own, and was meant to
# end the stacks' `handoff` tag at a poll that did not sleep (docs/stacks.md: only a sleep ends it).
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
    Key("target", "runtime", OBJECT_OR_NULL, 6),
    Key("target", "follow_children", BOOL), Key("target", "pids", COUNTS), Key("target", "execs", LIST, 3),
    Key("target.cgroup", "path", TEXT, 4), Key("target.cgroup", "id", since=4),
    Key("target.runtime", "name", TEXT, 6), Key("target.runtime", "version", TEXT_OR_NULL, 6),
    Key("target.runtime", "from", TEXT_OR_NULL, 6),
    Key("target.execs[]", "pid", since=3), Key("target.execs[]", "t_s", SECONDS, 3),
    Key("target.execs[]", "count", since=3), Key("target.execs[]", "comm", TEXT, 3),
    Key("target.execs[]", "filename", TEXT, 3),
    Key("target.execs[]", "calls_before", since=7),

    Key("host", "kernel", TEXT), Key("host", "hostname", TEXT_OR_NULL), Key("host", "ncpus"),
    Key("host", "features", OBJECT, 9),
    Key("host.features", "bpf_loop", BOOL, 9), Key("host.features", "perf_event_maps", BOOL, 9),

    Key("settings", "interval_s", SECONDS), Key("settings", "checkpoint_s", SECONDS, 3),
    Key("settings", "max_threads"), Key("settings", "max_sockets"), Key("settings", "time_sample", since=4),
    Key("settings", "exited_rows", since=4), Key("settings", "left_out", TEXTS_OR_NULL, 9),

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
    *(Key("requests.hist", key, HISTOGRAM, SINCE.get(key, 1)) for key in REQUEST_HISTS),
    *_rows("requests.by_size[]", ("bytes_min", "bytes_max", *REQUEST_SUMS), required=True),

    # The listening sockets the target called accept on.
    Key("listeners[]", "inode", since=5, required=True), Key("listeners[]", "family", TEXT, 5),
    *_rows("listeners[]", ("port", "accept_calls", "accept_ok", "accept_eagain", "processes"), 5, required=True),

    # SPINSCOPE_INTERVAL_FIELDS: each interval's deltas.
    Key("intervals[]", "t_s", SECONDS, required=True), Key("intervals[]", "duration_s", SECONDS, required=True),
    *_rows("intervals[]", ("requests",), required=True), *_rows("intervals[]", ("request_ns", "cross_thread"), 8),
    *_rows("intervals[]", ("wakeups_in_process",), required=True),
    Key("intervals[]", "counters", OBJECT, required=True), Key("intervals[]", "drops", OBJECT, 4),
    *_rows("intervals[].counters", COUNTERS, required=True),
    *_rows("intervals[].drops", DROP_KEYS, 4),

    *_rows("drops", DROP_KEYS),

    # --stacks (docs/stacks.md): absent without it.
    Key("", "stacks", OBJECT, 6),
    Key("stacks", "hz", since=6), Key("stacks", "event_budget_per_s", since=6), Key("stacks", "unwinder", TEXT, 6),
    Key("stacks", "records", OBJECT, 6), Key("stacks", "events", OBJECT, 6), Key("stacks", "lost", OBJECT, 6),
    Key("stacks", "settled", BOOL, 6), Key("stacks", "events_without_stack", OBJECT, 6),
    Key("stacks", "no_user_frames", since=6), Key("stacks", "truncated", since=6),
    Key("stacks", "collector_cpu_s", SECONDS, 6), Key("stacks", "helper", OBJECT_OR_NULL, 6),
    Key("stacks", "frames", LIST, 6), Key("stacks", "stacks", LIST, 6),
    *_rows("stacks.records", STACK_SOURCES, 6), *_rows("stacks.events", STACK_EVENT_SOURCES, 6),
    *_rows("stacks.events_without_stack", STACK_EVENT_SOURCES, 6),
    *_rows("stacks.lost", ("ring_full", "unique_stacks_cap", "out_of_memory"), 6),
    Key("stacks", "ring_bytes", since=9), Key("stacks", "deferred", since=9), Key("stacks", "modules", OBJECT, 9),
    *_rows("stacks.modules", ("opened", "shared", "evicted", "unopened"), 9),
    Key("stacks.modules", "unopened_names", TEXTS_OR_NULL, 9),
    Key("stacks.frames[]", "kind", TEXT, 6), Key("stacks.frames[]", "module", TEXT, 6),
    Key("stacks.frames[]", "address", since=6), Key("stacks.frames[]", "symbol", TEXT_OR_NULL, 6),
    Key("stacks.frames[]", "symbol_offset", since=6), Key("stacks.frames[]", "file", TEXT_OR_NULL, 6),
    Key("stacks.frames[]", "line", since=6),
    Key("stacks.stacks[]", "tid", since=6), Key("stacks.stacks[]", "source", TEXT, 6),
    Key("stacks.stacks[]", "tags", TEXTS_OR_NULL, 6), Key("stacks.stacks[]", "count", since=6),
    Key("stacks.stacks[]", "weight", since=6), Key("stacks.stacks[]", "frames", COUNTS, 6),
)
# Top-level blocks a capture has only when recorded with the option that makes them: not missing otherwise.
OPTIONAL_BLOCKS = frozenset(("stacks",))
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
    absent = {block for block in OPTIONAL_BLOCKS if block not in found.get("", ())}
    differences = []
    for path in sorted(set(ROWS) | set(found)):
        if path.split(".", 1)[0].removesuffix("[]") in absent:
            continue
        expected = {row.key for row in ROWS.get(path, ()) if row.since <= schema and not
                    (path == "" and row.key in absent)}
        keys = found.get(path)
        if keys is None and ("[]" in path or path in null or not expected):
            continue
        if keys != expected:
            keys = keys or set()
            differences.append(f"{path or 'top level'}: missing {sorted(expected - keys)}, "
                               f"unexpected {sorted(keys - expected)}")
    return differences


def check(doc: dict) -> None:
    """Hold a document (whose format and schema are known good) to KEYS: every key it has that KEYS names
    holds what the row says, and every required key of its schema is there. Keys KEYS does not name are
    left alone (a newer collector may add some). Raises Malformed at the first wrong value, else at the
    first missing key."""
    schema, missing = doc["schema"], None
    for path, rows in ROWS.items():
        for where, obj in _objects_at(doc, path):
            for row in rows:
                if row.key in obj:
                    if not IS_KIND[row.kind](obj[row.key]):
                        raise Malformed(f"{where + '.' if where else ''}{row.key} is not a {row.kind} "
                                         f"({_short(obj[row.key])})")
                elif row.required and row.since <= schema and missing is None:
                    missing = f"{where or 'top level'} lacks {row.key!r}"
    if missing:
        raise Malformed(missing)


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
                    raise Malformed(f"{name}[{i}] is not an object ({_short(element)})")
                deeper.append((f"{name}[{i}]", element))
        found = deeper
    return found


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_count(value: Any) -> bool:
    """An integer, or a float with an integral value (as other writers may make), in int64."""
    return is_number(value) and 0 <= value <= MAX_COUNT and (isinstance(value, int) or float(value).is_integer())


def _is_seconds(value: Any) -> bool:
    return is_number(value) and value >= 0


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


class Malformed(Exception):
    """A structural problem inside a document that is otherwise a spinscope capture."""
