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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from spinscope.analysis.schema import (BY_SIZE_KEYS, COUNTERS, DROP_KEYS, FORMAT, LISTENER_KEYS, MAX_CAPTURE_BYTES,
                                       MECHANISMS, REQUEST_HISTS, REQUEST_SUMS, SCHEMA, Malformed, check, is_number)
from spinscope.errors import SpinscopeError


COUNTED_CALLS = ("write_calls", "read_calls", "poll_calls", "futex_waits", "accept_calls")


def counted_calls(thread: dict) -> int:
    """The calls of a thread spinscope counts as work (the BPF side's exec_record.calls_before sums the same)."""
    return sum(int(thread.get(key, 0)) for key in COUNTED_CALLS)


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
    intervals  [row] per snapshot: t_s, duration_s, requests, request_ns and cross_thread (schema 8, else
               None), wakeups_in_process, the counters and
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
        return float(value) if is_number(value) and value > 0 else None

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
        """A short human name for what was captured: `comm (pid N)` of its program, or `cgroup PATH`."""
        if self.cgroup is not None:
            return f"cgroup {self.cgroup.get('path') or '?'}"
        pid, comm = self.program
        return f"{comm or '?'} (pid {pid})"

    @property
    def program(self) -> tuple:
        """(pid, name) of the program the capture is of: the target's, or the one its wrapper runs when the
        target is a wrapper (target.execs' calls_before says it did nothing counted first):
        - the target made no counted call while traced, and its children exec'd one program, each before
          any counted call (`timeout 6 ./server`, `sh -c './server'`, `sh -c 'exec timeout 6 ./server'`):
          that program, in the first of them;
        - the target exec'd before any counted call (`sh -c 'exec ./server'`): its latest program."""
        pid, comm = self.target.get("pid", "?"), self.target.get("comm") or ""
        execs = [e for e in self.execs if e.get("calls_before") == 0]
        children = [e for e in execs if e.get("pid") != pid]
        if children and len({e.get("comm") for e in children}) == 1 and not any(
                counted_calls(thread) for thread in self.threads.values() if thread.get("pid") == pid):
            first = min(children, key=lambda e: (e.get("t_s") or 0, e.get("pid") or 0))
            return first.get("pid"), str(first.get("comm") or comm)
        own = next((e for e in execs if e.get("pid") == pid), None)
        return pid, str(own.get("comm") or comm) if own is not None else comm

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
        """Connections whose first read began with the HTTP/2 client preface: their streams are multiplexed.
        From schema 8 their requests are their streams (h2_streams); before, a request was an exchange (a
        read burst and the writes after it) holding any number of streams (0 before schema 5)."""
        return int(self.totals["h2_connections"])

    @property
    def h2_by_stream(self) -> bool:
        """Whether the HTTP/2 connections' requests are their streams (schema 8 and later, on a kernel with
        bpf_loop: see left_out)."""
        return self.schema >= 8 and "http2_streams" not in self.left_out

    @property
    def left_out(self) -> list:
        """What the recording kernel could not do and the capture lacks (settings.left_out, schema 9):
        "http2_streams" (no bpf_loop: HTTP/2 requests counted by exchange), "stacks" (--stacks asked, the
        sampler could not run). [] before schema 9."""
        return list(self.raw.get("settings", {}).get("left_out") or [])

    @property
    def kernel(self) -> str:
        """The recording host's kernel release ("" if the capture lacks it)."""
        return str(self.raw.get("host", {}).get("kernel") or "")

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
                and is_number(row.get("t_s"))), default=0.0)
    added = 0
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            break
        if not isinstance(row, dict):
            break
        if is_number(row.get("t_s")) and row["t_s"] > last:
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
        check(doc)
        return _build(path, doc)
    except Malformed as exc:
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
    """The rows of a document check() passed: every key they read is there and of its kind, but for
    those an older schema (or a hand-made document) lacks, read as 0, empty or their default here."""
    threads: dict = {}
    for row in doc["threads"]:
        record = _thread_row(row)
        if record["tid"] in threads:
            raise Malformed(f"thread {record['tid']} appears twice")
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
            **{f"drops_{key}": int(drops.get(key, 0)) for key in DROP_KEYS},
            # schema 8: the requests' times and cross-thread answers (None before: not per interval)
            **{key: (int(row[key]) if key in row else None) for key in ("request_ns", "cross_thread")}}


def summed(rows: Iterable[Mapping]) -> dict:
    """{counter: its sum over rows} (thread rows, interval rows): a group's counters, for counters.py."""
    rows = list(rows)
    return {key: sum(row[key] for row in rows) for key in COUNTERS}


def _counts(obj: Mapping, keys: Iterable[str]) -> dict:
    """{key: its count} for keys of a checked object; a key it lacks (newer than its schema) is 0."""
    return {key: int(obj.get(key, 0)) for key in keys}


def _counts_list(values: list) -> list:
    return [int(value) for value in values]


