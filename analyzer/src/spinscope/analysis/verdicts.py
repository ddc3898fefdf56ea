"""What every pattern's home (analysis/patterns/) gives back, and how it is graded: a Label (a problem, with
a severity) or a Finding (by design, with its cost), the tiers a measured share is graded by, and the
small-sample guards every pattern uses.

A label appears when its measured cost reaches a tier, never because a count passed a threshold: the share
of the involved threads' on-CPU time (or, for handoffs, of the request time) is the verdict, the counts are
its evidence. Every threshold is a named constant (here or in the pattern's home) and is documented in
docs/labels.md; tests/analyzer/test_analyzer_docs.py holds the two equal.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from spinscope.analysis.patterns import TITLES

# Small-sample guards.
MIN_REQUESTS = 50            # requests before any per-request verdict
MIN_CALLS = 200              # poll (or read) calls before judging their returns

# Tiers of the measured share of the involved threads' on-CPU time (or of the request time spent waiting
# for a handed-to thread): below INFO_SHARE a pattern is not worth naming.
CRITICAL_SHARE = 0.20
WARNING_SHARE = 0.05
INFO_SHARE = 0.01
INFO, WARNING, CRITICAL = "info", "warning", "critical"
SEVERITIES = (INFO, WARNING, CRITICAL)


class _Verdict:
    """What a Label and a Finding share: a title from the name, and the dict `--json` writes (fields, title)."""

    name: str

    @property
    def title(self) -> str:
        return TITLES[self.name]

    def to_dict(self) -> dict:
        return {**asdict(self), "title": self.title}


@dataclass
class Label(_Verdict):
    name: str
    severity: str
    summary: str
    evidence: dict
    cpu_share: float | None  # measured share of the involved threads' on-CPU time (None: not measurable)
    fixes: list
    details: list = field(default_factory=list)  # human lines: per size class, per thread, per edge
    estimated: bool = False  # the cost is estimated, not measured (the summary says how)
    cost_share: float | None = None  # the share the severity follows (CPU, or request time for handoffs)
    syscall_share: float | None = None  # cpu_share's part timed by the syscall and scheduler probes
    user_share: float | None = None  # ...and its user-space part from stack samples (None: not sampled)
    call_sites: list = field(default_factory=list)  # where, from stack samples (analysis/stack_costs.py)
    saving: float | None = None  # what the fix saves: a share of the process's CPU or the request time (savings.py)
    saving_of: str | None = None  # which: "CPU" or "request time"; and a CPU saving in CPUs
    saving_cpus: float | None = None
    saving_claim: str | None = None  # what it claims of the fix: "saves", "at least", "cost" (savings.py)


@dataclass
class Finding(_Verdict):
    """Something a server does that costs request time or CPU, with no severity: by design, not a problem by
    itself (write-wait, busy-polling: its measured cost and what to weigh it against), or by a setting whose
    fix is known (nagle-stall: its fixes)."""

    name: str
    summary: str
    evidence: dict
    cpu_share: float | None
    advice: list  # what to weigh it against (`weigh: ...`)
    saving: float | None = None  # what acting on it saves, on the labels' scale (savings.py), of and in CPUs:
    saving_of: str | None = None
    saving_cpus: float | None = None
    saving_claim: str | None = None
    # A finding that comes of a setting rather than a trade (nagle-stall): how to remove it, the lines that say
    # its numbers, and with --stacks where (as a label's).
    fixes: list = field(default_factory=list)
    details: list = field(default_factory=list)
    call_sites: list = field(default_factory=list)


def severity(share: float | None) -> str | None:
    """The tier of a measured share: None below INFO_SHARE (not worth naming)."""
    if share is None:
        return None
    if share >= CRITICAL_SHARE:
        return CRITICAL
    if share >= WARNING_SHARE:
        return WARNING
    return INFO if share >= INFO_SHARE else None


def share(ns: float, oncpu_ns: float | None) -> float | None:
    """ns as a share of oncpu_ns (capped at 1), None when there is no CPU time to divide by."""
    return min(1.0, ns / oncpu_ns) if oncpu_ns else None
