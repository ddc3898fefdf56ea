"""The evidence rule: a verdict's words claim no more than its own counts show. A sentence that names a
mechanism at a rate ("for every request", "each request is handed ... and back", "never blocks") holds
only when the evidence the verdict carries shows that rate; each pattern's home (analysis/patterns/) chooses
its words by the same constants, and `unsupported` is the check the tests run over every verdict of every
capture (tests/analyzer/test_analyzer_claims.py): a claim it finds unsupported is a wording bug.

Each CLAIMS row: the verdict it is about, a pattern of the words that claim something, the evidence key
that measures it, and the least value that supports the claim.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from spinscope.analysis.patterns import BUSY_POLLING, HANDOFF_OVERHEAD
from spinscope.analysis.patterns.handoff.words import EVERY_REQUEST_MIN_RATE, ROUND_TRIP_MIN_HANDOFFS
from spinscope.analysis.patterns.spurious_select import BUSY_POLL_MIN_EMPTY_SHARE


class Claim(NamedTuple):
    verdict: str       # the label or finding name
    words: str         # a regular expression over the summary, the fixes or the advice
    evidence: str      # the evidence key that measures what the words claim
    least: float       # the value the evidence must reach
    means: str         # what the words claim, for a failure message


CLAIMS = (
    Claim(HANDOFF_OVERHEAD, r"for every request|each request is (?:handed|answered|queued)|"
          r"every request is handed|after (?:each|every) request", "handoffs_per_request", EVERY_REQUEST_MIN_RATE,
          "a hand-over per request (about one: at least EVERY_REQUEST_MIN_RATE per request)"),
    Claim(HANDOFF_OVERHEAD, r"and back\b", "handoffs_per_request", ROUND_TRIP_MIN_HANDOFFS,
          "a round trip per request (there and back: ROUND_TRIP_MIN_HANDOFFS handoffs per request)"),
    Claim(HANDOFF_OVERHEAD, r"selector role", "handoffs_per_request", EVERY_REQUEST_MIN_RATE,
          "the selector role changing hands about once per request"),
    Claim(HANDOFF_OVERHEAD, r"each new connection is handed", "handoffs_per_connection", EVERY_REQUEST_MIN_RATE,
          "a hand-over per new connection"),
    Claim(BUSY_POLLING, r"never blocks?\b", "empty_share", BUSY_POLL_MIN_EMPTY_SHARE,
          "polls that return nothing (a loop whose polls return events is busy with work, not polling idly)"),
)


def sentences(verdict) -> list:
    """The verdict's words that claim something: its summary and its fixes (a label) or advice (a finding)."""
    return [verdict.summary, *getattr(verdict, "fixes", []), *getattr(verdict, "advice", [])]


def unsupported(verdict) -> list:
    """One line per claim the verdict's words make that its evidence does not support; [] when all hold."""
    wrong = []
    for claim in CLAIMS:
        if claim.verdict != verdict.name:
            continue
        for text in sentences(verdict):
            if not re.search(claim.words, text):
                continue
            value = verdict.evidence.get(claim.evidence)
            if value is None or value < claim.least:
                wrong.append(f"{verdict.name}: {text!r} claims {claim.means}, but {claim.evidence} is {value}")
    return wrong
