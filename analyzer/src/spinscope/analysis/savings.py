"""What acting on a label or a finding would save the user, on one scale: a share of the process's CPU or of
its requests' time, whichever is larger (`Saving`). A label's severity follows it (`grade`), and `top`,
`report` and `diff` order labels and findings by it (`ranked`).

A label's `cost_share` is of the threads involved (a loop that spins half its time is half wasted however
many idle threads the process has); what its fix saves is that cost over the whole process's CPU, and a
CPU saving counts for a warning or a critical only when it is at least SAVING_MIN_CPUS of one CPU: 24% of
the CPU of a process that uses 1.5% of one CPU is 0.4% of a CPU, which no user would notice, while the
requests waiting 43 ms for writability are the whole of their time. A request-time saving has no such
floor: it is the users' wait.

What a saving claims (`claim`, `saving_claim` in --json): that the fix saves it (SAVES: the label's cost is
what its fix removes), at least it (AT_LEAST: the measure leaves part of the cost out, a hand-off recorded
without the stacks that time its user-space machinery), or only what the pattern costs (COST: a fix changes
more than the cost measured, and what it saves can differ either way: a herd's fix spreads connections over
workers whose caches are cold, docs/labels.md).
"""

from __future__ import annotations

from dataclasses import dataclass

CPU = "CPU"
REQUEST_TIME = "request time"
SAVES, AT_LEAST, COST = "saves", "at least", "cost"  # what a saving claims (module docstring)
# A CPU saving below this much of one CPU (INFO_SHARE of a core) grades no higher than info.
SAVING_MIN_CPUS = 0.01


@dataclass(frozen=True)
class Saving:
    share: float          # of the process's on-CPU time (CPU) or of the requests' time (REQUEST_TIME)
    of: str               # CPU or REQUEST_TIME
    cpus: float | None = None  # a CPU saving in CPUs (on-CPU seconds a second of the capture)
    claim: str = SAVES  # SAVES, AT_LEAST or COST (module docstring)

    def phrase(self) -> str:
        """`saves 25% of the process's CPU, 0.004 of one CPU`, `saves at least 25% of ...`, `saves 99% of the
        request time`, `costs 14% of the process's CPU, ... (a fix may save more or less)`."""
        if self.of == CPU:
            cpus = f", {self.cpus:.3f} of one CPU" if self.cpus is not None else ""
            amount = f"{_pct(self.share)} of the process's CPU{cpus}"
        else:
            amount = f"{_pct(self.share)} of the request time"
        if self.claim == COST:
            return f"costs {amount} (a fix may save more or less)"
        return f"saves {'at least ' if self.claim == AT_LEAST else ''}{amount}"


def _pct(share: float) -> str:
    return f"{share:.1%}" if share < 0.1 else f"{share:.0%}"


def process_cpu_ns(analysis) -> float:
    return float(sum(thread["oncpu_ns"] for thread in analysis.threads.values()))


def of_cpu(analysis, share: float | None, involved_cpu_ns: float, claim: str = SAVES) -> Saving | None:
    """A cost measured as `share` of the involved threads' `involved_cpu_ns`, over the process's CPU; what
    it claims of the fix (`claim`: SAVES, AT_LEAST, COST)."""
    total = process_cpu_ns(analysis)
    if share is None or total <= 0:
        return None
    cost_ns = share * involved_cpu_ns
    seconds = analysis.capture.duration_s or 0.0
    return Saving(min(1.0, cost_ns / total), CPU, cost_ns / 1e9 / seconds if seconds > 0 else None, claim)


def of_time(share: float | None) -> Saving | None:
    return None if share is None else Saving(min(1.0, max(0.0, share)), REQUEST_TIME)


def larger(*savings) -> Saving | None:
    found = [s for s in savings if s is not None]
    return max(found, key=lambda s: s.share) if found else None


def grade(saving: Saving | None, tier, lowest: str) -> str:
    """The severity of a label that is named (its involved share reached the lowest tier): the tier of what
    its fix saves (`tier`: verdicts.severity), `lowest` at least, and no higher than `lowest` for a CPU saving
    of less than SAVING_MIN_CPUS."""
    if saving is None:
        return lowest
    level = tier(saving.share) or lowest
    if saving.of == CPU and (saving.cpus is None or saving.cpus < SAVING_MIN_CPUS):
        return lowest
    return level


def apply(verdict, *candidates: Saving | None, tier=None, order: tuple = ()):
    """The label or finding with what it saves (`saving`, `saving_of`: the larger of the candidates); a
    label (given `tier` and the severities in rising `order`) graded by the candidate that grades highest
    (a hand-off's request-time share is not discounted because its CPU share, the larger, saves too few
    CPUs). Returned, changed."""
    saving = larger(*candidates)
    verdict.saving = round(saving.share, 4) if saving is not None else None
    verdict.saving_of = saving.of if saving is not None else None
    verdict.saving_cpus = round(saving.cpus, 4) if saving is not None and saving.cpus is not None else None
    verdict.saving_claim = saving.claim if saving is not None else None
    if tier is not None:
        levels = [grade(c, tier, order[0]) for c in candidates if c is not None] or [order[0]]
        verdict.severity = max(levels, key=order.index)
    return verdict


def of_verdict(verdict) -> Saving | None:
    """The Saving a label or finding holds (None without a measured saving)."""
    if verdict.saving is None:
        return None
    return Saving(verdict.saving, verdict.saving_of, verdict.saving_cpus, verdict.saving_claim or SAVES)


def saving_line(verdict) -> str | None:
    """`the fix saves 0.4% of the process's CPU`, `the fix saves at least ...`, `acting on it saves 99% of the
    request time`, `it costs 14% of the process's CPU, ... (a fix may save more or less)`: the line report,
    diff and their pages write under a label or a finding (None without a measured saving)."""
    saving = of_verdict(verdict)
    if saving is None:
        return None
    who = ("it" if saving.claim == COST else "acting on it" if not hasattr(verdict, "severity") else "the fix")
    return f"{who} {saving.phrase()}"


def ranked(assessment) -> list:
    """Labels and findings, the largest saving first (a label before a finding of the same saving)."""
    items = [*assessment.labels, *assessment.findings]
    return sorted(items, key=lambda item: -(item.saving or 0.0))
