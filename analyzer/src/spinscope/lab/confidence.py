"""A verdict with its evidence's confidence: a claim judged on every repetition of its cells, not once.

A criterion (lab/criteria.py) judges the table it is given, repetitions averaged. On two shared cores one
2-3 s cell per point makes a throughput or latency comparison a coin toss, and the average of a few
tosses is another toss. So a claim is judged once per repetition (`split_repetitions`: the r-th
repetition of every setting the claim reads, the other claims' cells left as they are), and its verdict
stands only when every repetition gives it; else it is "unstable", with each repetition's verdict and
numbers. The numbers shown (`ours`) are the pooled ones (repetitions averaged); where the pooled table's
verdict differs from the repetitions' common one (an average smooths a comparison that fails in each
repetition, say), `why` says so. A claim whose settings have fewer repetitions than it needs
(Claim.min_reps: 1 for the counting claims, whose counts per request do not move between runs;
TIMING_REPS for the throughput and latency claims) is "too few repetitions", with the pooled numbers; a
claim the sweep's matrix declares it does not settle (`needs_full` in the matrix, docs/sweep.md) is
"needs the full matrix", with whatever numbers its cells gave. The rule is exact and conservative: with
3 repetitions a comparison that flips one time in two passes as stable one time in four, one that never
flips always does.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pandas as pd

from spinscope.lab import criteria
from spinscope.lab.criteria import ERROR, NOT_MEASURED
from spinscope.lab.matrix import PARAMS

UNSTABLE = "unstable"
TOO_FEW = "too few repetitions"
NEEDS_FULL = "needs the full matrix"
TIMING_REPS = 3  # repetitions a throughput or latency claim needs (matrices/full.toml's default, quick's)

# The parameters that make two cells repetitions of one setting: every matrix parameter.
_SETTING = tuple(PARAMS)


def repetitions_of(table: pd.DataFrame, tag: str) -> int:
    """How many repetitions every setting carrying `tag` has among the ok cells (the fewest of any)."""
    cells = _tagged_ok(table, tag)
    if cells.empty:
        return 0
    return int(cells.groupby(_keys(cells), dropna=False).size().min())


def split_repetitions(table: pd.DataFrame, tag: str) -> list:
    """One table per repetition: the r-th repetition (by `repetition`) of every ok setting carrying `tag`,
    and every other row as it is, for r below repetitions_of()."""
    cells = _tagged_ok(table, tag)
    n = repetitions_of(table, tag)
    if n == 0:
        return []
    rest = table.drop(index=cells.index)
    order = cells.sort_values("repetition", kind="stable")
    nth = order.groupby(_keys(order), dropna=False).cumcount()
    return [pd.concat([rest, order[nth == r]]).sort_index() for r in range(n)]


def judge(claim, table: pd.DataFrame, needs_full: bool = False) -> criteria.Finding:
    """`claim` on `table` with the confidence rule of the module docstring: the pooled finding (repetitions
    averaged) with the rule's verdict, `reps` the finding on each repetition (when there are 2 or more)."""
    pooled = claim.judge(table)
    if needs_full:
        return replace(pooled, verdict=NEEDS_FULL, why=_join(
            "this matrix does not run enough of its points to settle it (matrices/full.toml does)",
            f"its cells here: {pooled.verdict}" if pooled.verdict != NOT_MEASURED else ""))
    if pooled.verdict in (NOT_MEASURED, ERROR):
        return pooled
    n = repetitions_of(table, claim.id)
    reps = [claim.judge(t) for t in split_repetitions(table, claim.id)] if n >= 2 else []
    if n < claim.min_reps:
        return replace(pooled, verdict=TOO_FEW, reps=reps, why=_join(
            f"{n} repetition{'s' if n != 1 else ''} of its cells, {claim.min_reps} needed for a throughput or "
            f"latency verdict; on these: {pooled.verdict}", pooled.why))
    verdicts = [f.verdict for f in reps] or [pooled.verdict]
    if len(set(verdicts)) == 1:
        held = f"the same in each of {n} repetitions" if n >= 2 else "one repetition (a count)"
        if verdicts[0] != pooled.verdict:
            held += f" (the pooled numbers: {pooled.verdict})"
        reasons = pooled.why if verdicts[0] == pooled.verdict else reps[0].why
        return replace(pooled, verdict=verdicts[0], reps=reps, why=_join(reasons, held))
    return replace(pooled, verdict=UNSTABLE, reps=reps, why=_join(tally(verdicts), f"pooled: {pooled.verdict}"))


def tally(verdicts: list) -> str:
    """'2 of 3 repetitions reproduced, 1 direction reproduced' (most common first, ties in first-seen order)."""
    counts = Counter(verdicts).most_common()
    return f"{counts[0][1]} of {len(verdicts)} repetitions {counts[0][0]}" + "".join(
        f", {k} {v}" for v, k in counts[1:])


def _tagged_ok(table: pd.DataFrame, tag: str) -> pd.DataFrame:
    if table.empty or "claims" not in table or "repetition" not in table:
        return table.iloc[0:0]
    ok = table["status"] == "ok"
    has = table["claims"].fillna("").map(lambda s: tag in str(s).split(";"))
    return table[ok & has]


def _keys(cells: pd.DataFrame) -> list:
    return [k for k in _SETTING if k in cells and cells[k].notna().any()]


def _join(*parts) -> str:
    return "; ".join(p for p in parts if p)
