"""The patterns spinscope names, one row each, in the order a report says them: the labels (problems,
graded by what they cost) first, then the findings (what a server does by design, said with its cost).

Each pattern has one home, a module of this package named by its row: its measure, its grade, its words
and fixes per runtime, its call sites and user-space cost (write_spin.py: write-spin and the write-wait
finding; spurious_select.py: spurious select and the busy-polling finding; handoff/: handoff overhead).
The homes are written on the quantities analysis/ shares (capture, counters, metrics, savings, the
evidence rule in claims.py, runtime, stacks and stack_costs) and on verdicts.py (Label, Finding, the
tiers). labels.py runs each home's detector (`DETECT`, name -> function) in this order; the names and
titles here are the ones the report, `--json`, top, the exporter, stacks.py and docs/labels.md use.

Adding a pattern is a module here and a row below. This module imports nothing, so that every module of
analysis/ can read the list.
"""

from __future__ import annotations

from typing import NamedTuple


class Pattern(NamedTuple):
    name: str    # the one name: report, --json, top, the exporter, docs/labels.md
    title: str   # how a sentence says it
    label: bool  # a label (a problem, graded) or a finding (not a problem by itself: its cost, no grade)
    home: str    # its module in this package, whose DETECT has a function for the name


WRITE_SPIN, SPURIOUS_SELECT, HANDOFF_OVERHEAD = "write-spin", "spurious-select", "handoff-overhead"
WRITE_WAIT, BUSY_POLLING, NAGLE_STALL = "write-wait", "busy-polling", "nagle-stall"

PATTERNS = (
    Pattern(WRITE_SPIN, "write-spin", True, "write_spin"),
    Pattern(SPURIOUS_SELECT, "spurious select", True, "spurious_select"),
    Pattern(HANDOFF_OVERHEAD, "handoff overhead", True, "handoff"),
    Pattern(WRITE_WAIT, "waits for writability", False, "write_spin"),
    Pattern(BUSY_POLLING, "busy polling", False, "spurious_select"),
    Pattern(NAGLE_STALL, "responses held by Nagle's algorithm", False, "nagle_stall"),
)
LABEL_NAMES = tuple(p.name for p in PATTERNS if p.label)
FINDING_NAMES = tuple(p.name for p in PATTERNS if not p.label)
TITLES = {p.name: p.title for p in PATTERNS}
