"""A capture's stacks as files the usual tools open (`report --folded`, `--folded-events`, `--pprof`): folded
stacks for FlameGraph, speedscope and Grafana's flame graphs, gzipped pprof for `go tool pprof`, Grafana
Pyroscope and speedscope (both formats written here; analysis/stacks.py chooses the stacks).

CPU samples (time) and event stacks (events) are never added up in one value: a folded file holds one kind
(`--folded` the samples, `--folded-events` the events), a pprof profile has a type for each. The samples are
one sampler's: the runtime helper's when it ran (they name the runtime's frames), else the collector's."""

from __future__ import annotations

import gzip
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from spinscope.analysis import stacks as S
from spinscope.analysis.metrics import Analysis
from spinscope.analysis.stack_costs import stack_set
from spinscope.errors import SpinscopeError

PATTERNS = tuple(S.PATTERN_SOURCES)  # the patterns with stacks of their own (analysis/patterns/)
SAMPLERS = {S.CPU: "the collector's", S.RUNTIME: "the runtime helper's"}


@dataclass
class Chosen:
    stackset: S.StackSet
    samples: list  # CPU samples, one sampler's
    events: list   # event stacks

    def said(self, kind: str) -> str:
        """What of `kind` (samples, events) went into a file, and what was left out."""
        if kind == "events":
            return f"{sum(s.weight for s in self.events):,} events in {len(self.events):,} event stacks"
        sampler = self.samples[0].source if self.samples else None
        text = f"{sum(s.count for s in self.samples):,} CPU samples" + (f" ({SAMPLERS[sampler]})" if sampler else "")
        other = sum(s.count for s in self.stackset.stacks if S.is_sample(s) and s.source != sampler) if sampler else 0
        return text + (f", the other sampler's {other:,} (the same time) left out" if other else "")


def chosen(analysis: Analysis, pattern: str | None) -> Chosen:
    """The stacks to write: every event stack and CPU sample (one sampler's), or a pattern's event stacks and
    the CPU samples in its window. Raises SpinscopeError for a capture recorded without --stacks."""
    stackset = stack_set(analysis)
    if stackset is None and "stacks" in analysis.capture.left_out:
        raise SpinscopeError(f"{analysis.capture.path}: no stacks in this capture: --stacks was asked for, but the "
                             f"recording kernel {analysis.capture.kernel} could not run the sampler (Linux 6.1)")
    if stackset is None:
        raise SpinscopeError(f"{analysis.capture.path}: no stacks in this capture (record it with --stacks)")
    stacks = S.selected(stackset, pattern)
    return Chosen(stackset, [s for s in stacks if S.is_sample(s)], [s for s in stacks if not S.is_sample(s)])


def thread_names(analysis: Analysis) -> dict:
    return {tid: f"{thread.get('comm') or 'thread'} ({tid})" for tid, thread in analysis.threads.items()}


def write_folded(analysis: Analysis, path: str, pattern: str | None = None, events: bool = False,
                 all_frames: bool = False) -> str:
    """The CPU samples (or with events, the event stacks) as folded lines at path; returns what it holds."""
    picked = chosen(analysis, pattern)
    text = folded(picked.events if events else picked.samples, thread_names(analysis), all_frames)
    _write(path, text.encode())
    return f"{text.count(chr(10)):,} lines: {picked.said('events' if events else 'samples')}"


def write_pprof(analysis: Analysis, path: str, pattern: str | None = None, all_frames: bool = False) -> str:
    """The stacks as a gzipped pprof profile at path; returns what it holds."""
    picked = chosen(analysis, pattern)
    _write(path, pprof(picked.samples + picked.events, picked.stackset.hz, analysis.capture.duration_s,
                         thread_names(analysis), all_frames))
    return f"{picked.said('samples')}; {picked.said('events')}"


def _write(path: str, data: bytes) -> None:
    try:
        Path(path).write_bytes(data)
    except OSError as exc:
        raise SpinscopeError(f"{path}: cannot write: {exc.strerror or exc}") from None


# ------------------------------------------------------------------ the formats


def _folded_name(frame: S.Frame) -> str:
    return frame.where.replace(";", ":").replace("\n", " ")


def fold(stacks: Iterable[S.Stack], thread_names: Mapping | None = None, all_frames: bool = False) -> dict:
    """{(thread's name, outermost frame, ..., innermost frame): weight}: each stack rooted at its thread's name
    (thread_names: tid -> name, else `tid N`), counted by its samples or its events (ValueError for a mix:
    the two are never added up). The runtime's own frames between language frames are left out unless
    all_frames (language_view). What folded stacks and the page's flame graph (output/flamegraph.py) show."""
    counts: dict = defaultdict(int)
    kinds = set()
    for s in stacks:
        kinds.add(S.is_sample(s))
        thread = str((thread_names or {}).get(s.tid, f"tid {s.tid}"))
        frames = s.frames if all_frames else S.language_view(s.frames)
        counts[(thread, *reversed(frames))] += s.count if S.is_sample(s) else s.weight
    if len(kinds) > 1:
        raise ValueError("samples and events folded together")
    return counts


def folded(stacks: Iterable[S.Stack], thread_names: Mapping | None = None, all_frames: bool = False) -> str:
    """Folded stacks (Brendan Gregg's format: `root;...;leaf count` a line) of fold()'s paths."""
    lines: dict = defaultdict(int)
    for (thread, *frames), n in fold(stacks, thread_names, all_frames).items():
        lines[";".join([thread.replace(";", ":"), *(_folded_name(f) for f in frames)])] += n
    return "".join(f"{path} {n}\n" for path, n in sorted(lines.items()))


def pprof(stacks: Iterable[S.Stack], hz: int, duration_s: float, thread_names: Mapping | None = None,
          all_frames: bool = False) -> bytes:
    """A gzipped pprof profile (profile.proto) of the stacks: sample types `samples`/count and `cpu`/
    nanoseconds (the default type) for CPU samples, `events`/count for event stacks, a sample's value 0 in
    the types not its own; each sample labelled with its thread, source and tags. The runtime's own frames
    between language frames are left out unless all_frames (language_view). For `go tool pprof`, Grafana
    Pyroscope, speedscope."""
    profile = _Profile(hz, duration_s, thread_names or {}, all_frames)
    return gzip.compress(profile.encode(list(stacks)), mtime=0)


class _Profile:
    """profile.proto written with the protobuf wire format (github.com/google/pprof/proto/profile.proto):
    the handful of messages a profile needs, so no generated code is carried for them."""

    def __init__(self, hz: int, duration_s: float, thread_names: Mapping, all_frames: bool):
        self.hz, self.duration_s, self.names, self.all_frames = hz, duration_s, thread_names, all_frames
        self.strings: dict = {"": 0}
        self.functions: dict = {}
        self.locations: dict = {}

    def s(self, text: str) -> int:
        return self.strings.setdefault(text, len(self.strings))

    def location(self, frame: S.Frame) -> int:
        if frame not in self.locations:
            key = (frame.name, frame.file or frame.module or "")
            if key not in self.functions:
                self.functions[key] = len(self.functions) + 1
            self.locations[frame] = (len(self.locations) + 1, self.functions[key])
        return self.locations[frame][0]

    def encode(self, stacks: list) -> bytes:
        period = int(1e9 / self.hz) if self.hz else 0
        out = bytearray()
        types = [(self.s("samples"), self.s("count")), (self.s("cpu"), self.s("nanoseconds")),
                 (self.s("events"), self.s("count"))]
        for t, u in types:
            out += _field_msg(1, _field_int(1, t) + _field_int(2, u))
        for st in stacks:
            ids = [self.location(f) for f in (st.frames if self.all_frames else S.language_view(st.frames))]
            cpu = S.is_sample(st)
            values = [st.count if cpu else 0, st.count * period if cpu else 0, 0 if cpu else st.weight]
            labels = [_field_msg(3, _field_int(1, self.s("thread")) + _field_int(2, self.s(str(self.names.get(
                          st.tid, st.tid))))),
                      _field_msg(3, _field_int(1, self.s("source")) + _field_int(2, self.s(st.source)))]
            for tag in sorted(st.tags):
                labels.append(_field_msg(3, _field_int(1, self.s("tag")) + _field_int(2, self.s(tag))))
            out += _field_msg(2, _packed(1, ids) + _packed(2, values) + b"".join(labels))
        for frame, (loc_id, fn_id) in self.locations.items():
            line = _field_int(1, fn_id) + (_field_int(2, frame.line) if frame.line else b"")
            out += _field_msg(4, _field_int(1, loc_id) + _field_msg(4, line))
        for (name, filename), fn_id in self.functions.items():
            out += _field_msg(5, _field_int(1, fn_id) + _field_int(2, self.s(name)) + _field_int(3, self.s(name))
                              + _field_int(4, self.s(filename)))
        strings = sorted(self.strings.items(), key=lambda kv: kv[1])
        for text, _ in strings:
            out += _field_bytes(6, text.encode())
        out += _field_int(10, int(self.duration_s * 1e9))
        out += _field_msg(11, _field_int(1, self.s("cpu")) + _field_int(2, self.s("nanoseconds")))
        out += _field_int(12, period)
        out += _field_int(14, self.s("cpu"))  # default_sample_type: else pprof shows the last, events
        return bytes(out)


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field_int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value) if value else b""


def _field_bytes(number: int, value: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _field_msg(number: int, body: bytes) -> bytes:
    return _field_bytes(number, body)


def _packed(number: int, values: list) -> bytes:
    return _field_bytes(number, b"".join(_varint(v) for v in values)) if values else b""
