"""A capture's stacks as files the usual tools open (`report --folded`, `report --pprof`): folded stacks
for FlameGraph, speedscope and Grafana's flame graphs, gzipped pprof for `go tool pprof`, Grafana
Pyroscope and speedscope (analysis/stacks.py writes both formats)."""

from __future__ import annotations

from pathlib import Path

from spinscope.analysis import stacks as S
from spinscope.analysis.metrics import Analysis
from spinscope.analysis.stack_costs import stack_set
from spinscope.errors import SpinscopeError

PATTERNS = tuple(S.PATTERN_SOURCES)  # the patterns with stacks of their own (analysis/patterns/)


def chosen(analysis: Analysis, pattern: str | None) -> tuple:
    """(the stack set, the stacks to write): every CPU sample, or a pattern's event stacks and the CPU samples
    in its window. Raises SpinscopeError for a capture recorded without --stacks."""
    stackset = stack_set(analysis)
    if stackset is None and "stacks" in analysis.capture.left_out:
        raise SpinscopeError(f"{analysis.capture.path}: no stacks in this capture: --stacks was asked for, but the "
                             f"recording kernel {analysis.capture.kernel} could not run the sampler (Linux 6.1)")
    if stackset is None:
        raise SpinscopeError(f"{analysis.capture.path}: no stacks in this capture (record it with --stacks)")
    return stackset, S.selected(stackset, pattern, source=None) if pattern else S.selected(stackset)


def thread_names(analysis: Analysis) -> dict:
    return {tid: f"{thread.get('comm') or 'thread'} ({tid})" for tid, thread in analysis.threads.items()}


def write_folded(analysis: Analysis, path: str, pattern: str | None = None) -> int:
    """The stacks as folded lines at path; returns how many lines."""
    _, chosen_stacks = chosen(analysis, pattern)
    text = S.folded(chosen_stacks, thread_names(analysis))
    _write(path, text.encode())
    return text.count("\n")


def write_pprof(analysis: Analysis, path: str, pattern: str | None = None) -> int:
    """The stacks as a gzipped pprof profile at path; returns how many stacks."""
    stackset, chosen_stacks = chosen(analysis, pattern)
    _write(path, S.pprof(chosen_stacks, stackset.hz, analysis.capture.duration_s, thread_names(analysis)))
    return len(chosen_stacks)


def _write(path: str, data: bytes) -> None:
    try:
        Path(path).write_bytes(data)
    except OSError as exc:
        raise SpinscopeError(f"{path}: cannot write: {exc.strerror or exc}") from None
