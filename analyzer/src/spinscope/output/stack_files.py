"""A capture's stacks as files the usual tools open (`report --folded`, `--folded-events`, `--pprof`): folded
stacks for FlameGraph, speedscope and Grafana's flame graphs, gzipped pprof for `go tool pprof`, Grafana
Pyroscope and speedscope (analysis/stacks.py writes both formats).

CPU samples (time) and event stacks (events) are never added up in one value: a folded file holds one kind
(`--folded` the samples, `--folded-events` the events), a pprof profile has a type for each. The samples are
one sampler's: the runtime helper's when it ran (they name the runtime's frames), else the collector's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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
    text = S.folded(picked.events if events else picked.samples, thread_names(analysis), all_frames)
    _write(path, text.encode())
    return f"{text.count(chr(10)):,} lines: {picked.said('events' if events else 'samples')}"


def write_pprof(analysis: Analysis, path: str, pattern: str | None = None, all_frames: bool = False) -> str:
    """The stacks as a gzipped pprof profile at path; returns what it holds."""
    picked = chosen(analysis, pattern)
    _write(path, S.pprof(picked.samples + picked.events, picked.stackset.hz, analysis.capture.duration_s,
                         thread_names(analysis), all_frames))
    return f"{picked.said('samples')}; {picked.said('events')}"


def _write(path: str, data: bytes) -> None:
    try:
        Path(path).write_bytes(data)
    except OSError as exc:
        raise SpinscopeError(f"{path}: cannot write: {exc.strerror or exc}") from None
