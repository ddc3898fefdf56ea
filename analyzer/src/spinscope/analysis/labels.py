"""A capture's verdicts: every pattern's label or finding (analysis/patterns/: one home per pattern, run
in the list's order), and the notes on what limits them (too few requests, drops, execs, sampled call
times, a checkpoint, the stacks' losses). Too small a sample gets no label and a note saying so
(`Assessment.notes`), so a quiet capture is reported as "not enough data", never as "healthy".

What a label and a finding are, and how a label is graded: verdicts.py.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from spinscope.analysis import savings, stack_costs
from spinscope.analysis.coverage import coverage_notes
from spinscope.analysis.metrics import Analysis, drop_line, dropped
from spinscope.analysis.patterns import HANDOFF_OVERHEAD, PATTERNS, TITLES, WRITE_SPIN
from spinscope.analysis.patterns.spurious_select import saturation_notes
from spinscope.analysis.verdicts import INFO, MIN_REQUESTS
from spinscope.analysis.wording import checkpoint_note, exec_notes, first_drop, sampling_note, unseen_switches_note


@dataclass
class Assessment:
    labels: list
    notes: list  # why a verdict could not be reached (too few requests, ...)
    findings: list = field(default_factory=list)

    def names(self) -> set:
        return {label.name for label in self.labels}

    def serious(self) -> set:
        """Names of the labels at warning or critical."""
        return {label.name for label in self.labels if label.severity != INFO}

    def finding_names(self) -> set:
        return {finding.name for finding in self.findings}

    def ranked(self) -> list:
        """Labels and findings together, the largest saving first: the order every verb shows them in."""
        return savings.ranked(self)


def capture_notes(analysis: Analysis) -> list:
    """What limits the verdicts of this capture: too few requests, drops, execs, sampling, a checkpoint."""
    notes = []
    cap = analysis.capture
    if analysis.requests == 0:
        notes.append("no requests were observed (no socket read followed by a write): "
                     "per-request metrics are not available")
    elif analysis.requests < MIN_REQUESTS:
        notes.append(f"only {analysis.requests} requests (< {MIN_REQUESTS}): too few to judge "
                     f"{TITLES[WRITE_SPIN]} or {TITLES[HANDOFF_OVERHEAD]}")
    notes += [f"the collector dropped events, a map being full{first_drop(cap.intervals, drop.key)}: "
              f"{drop_line(drop, count)}" for drop, count in dropped(cap.drops)]
    notes += exec_notes(cap.execs)
    notes += coverage_notes(cap)
    if cap.time_sample > 1:
        notes.append(sampling_note(cap.time_sample, int(cap.totals["calls_timed"])))
    if cap.totals.get("switch_ins_unseen"):
        notes.append(unseen_switches_note(int(cap.totals["switch_ins_unseen"])))
    if cap.end_reason == "checkpoint":
        notes.append(checkpoint_note(cap))
    return notes + stack_costs.notes(analysis)


def assess(analysis: Analysis) -> Assessment:
    cap = analysis.capture
    if not cap.costs_measured:
        return Assessment(labels=[], notes=[
            f"capture schema {cap.schema} (an older collector) has counts but no measured costs: no verdict is "
            "drawn from it; record it again to judge"])
    notes = capture_notes(analysis)
    verdicts = [(pattern, detector(pattern)(analysis)) for pattern in PATTERNS]
    labels = [verdict for pattern, verdict in verdicts if verdict and pattern.label]
    findings = [verdict for pattern, verdict in verdicts if verdict and not pattern.label]
    return Assessment(labels=labels, notes=notes + saturation_notes(analysis), findings=findings)


def detector(pattern):
    """The function of the pattern's home that finds it (a Label, a Finding, or None): its module in
    analysis/patterns/, imported by the name its row gives."""
    return importlib.import_module(f"spinscope.analysis.patterns.{pattern.home}").DETECT[pattern.name]
