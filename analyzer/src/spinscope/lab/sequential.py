"""More repetitions for the claims the planned ones leave unsettled: a group-sequential test (docs/sweep.md,
"Verdicts and their confidence").

After the matrix's planned cells, `extend` judges every claim (lab/claims.py, lab/confidence.py with
Pocock's boundary for the matrix's `looks`). A claim whose verdict is unstable because of unsettled
comparisons gets a round: as many repetitions again as it was planned with (n0), of the cells carrying its
tag (the cells its comparisons read), repetition-major, so that its looks stay equally spaced (n0, 2 n0, ...,
looks x n0) as Pocock's boundary assumes. Then every claim is judged again. A claim stops when its verdict
stands (a verdict of the criterion's, or "at the threshold": its deciding comparisons within ± its margin),
when it has had `looks` looks, or when its round would take the spent seconds of extra cells past
`budget_s` (predicted from the last measured run of each of its cells), or when its unsettled comparisons
are under the sign rule for good and already disagree (`settleable`): only then is it reported unstable,
with `stopped` saying which. Rounds are planned nearest-to-settling first (`promise`), then in CLAIMS
order; a claim whose round does not fit is passed over for the next ones that do.

The seconds spent are those of the cells in DIR that the matrix does not plan (a resumed sweep counts the
extra cells it already ran). An extra cell is a planned cell's setting at the next unused repetition
index, tagged with the one claim it was run for (the claims that share the setting do not see it).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from spinscope.lab.claims import judge_all
from spinscope.lab.confidence import SIGN_RULE, UNSETTLED, UNSTABLE
from spinscope.lab.matrix import Cell, Matrix
from spinscope.lab.results import load_results, read_table


@dataclass
class Round:
    """The extra cells one round runs for one claim, and the seconds they are predicted to take."""

    claim: str
    look: int  # the look the round leads to (2 .. looks)
    cells: list  # [(index within the round, Cell)]
    seconds: float


def _key(params: dict) -> str:
    """A cell's setting: every parameter but the repetition, as comparable text."""
    return json.dumps({k: v for k, v in params.items() if k != "repetition"}, sort_keys=True)


def planned_reps(matrix: Matrix, claim: str) -> int:
    """The repetitions the matrix plans of the claim's settings (the fewest of any): n0."""
    counts: dict = {}
    for cell in matrix.cells:
        if claim in cell.claims:
            counts[_key(cell.params)] = counts.get(_key(cell.params), 0) + 1
    return min(counts.values()) if counts else 0


def plan_round(matrix: Matrix, docs: list, claim: str, target: int, taken: dict | None = None) -> Round:
    """The cells that bring every setting of `claim` to `target` ok repetitions tagged with it. `taken`
    ({setting: highest repetition index used}) is updated, so that two claims' rounds never share an id."""
    taken = {} if taken is None else taken
    by_setting: dict = {}
    for doc in docs:
        by_setting.setdefault(_key(doc.get("params") or {}), []).append(doc)
    cells, seconds, seen = [], 0.0, set()
    for cell in matrix.cells:
        key = _key(cell.params)
        if claim not in cell.claims or key in seen:
            continue
        seen.add(key)
        ran = by_setting.get(key, [])
        have = sum(d.get("status") == "ok" and claim in (d.get("claims") or []) for d in ran)
        top = max([int(d["params"].get("repetition", 0)) for d in ran] + [taken.get(key, -1)])
        last = max(ran, key=lambda d: int(d["params"].get("repetition", 0)), default=None)
        each = float((last or {}).get("elapsed_s") or cell.estimate_s())
        for i in range(max(0, target - have)):
            params = {**cell.params, "repetition": top + 1 + i}
            cells.append((i, Cell(params=params, group=cell.group, claims=[claim])))
            seconds += each
            taken[key] = top + 1 + i
    return Round(claim, 0, cells, seconds)


def settleable(finding) -> bool:
    """Whether more repetitions could settle one of the claim's unsettled comparisons: not when each is under
    the sign rule for good (confidence.SIGN_RULE: a count, p99) or not a positive number, and already has
    repetitions on both sides (more cannot bring them to one side)."""
    return any(w.check.metric not in SIGN_RULE and all(isinstance(v, (int, float)) and v > 0 for v in w.values)
               for w in finding.weighed if w.outcome == UNSETTLED)


def promise(finding) -> float:
    """How near a claim is to settling: of its unsettled comparisons the farthest from settling, the distance
    of its estimate from the nearest edge of its band (threshold ± delta) in units of the boundary's
    (| |log(estimate / threshold)| - log(1 + delta) | / margin: 1 settles, above the band, below it or inside
    it); 0.5 for one under the sign rule (it settles when more repetitions bring its metric to MIN_DF). The
    rounds go to the nearest first, so that a claim whose comparison sits on an edge of its band (which no
    budget settles) does not take the seconds of one that the next round would settle."""
    near = []
    for w in finding.weighed:
        if w.outcome != UNSETTLED:
            continue
        if math.isnan(w.margin) or not w.margin > 0 or not math.isfinite(w.estimate):
            near.append(0.5)
        else:
            edge = abs(abs(math.log(w.estimate / w.check.threshold)) - math.log1p(w.delta.size))
            near.append(min(1.0, edge / w.margin))
    return min(near, default=0.0)


def extend(matrix: Matrix, outdir: Path, run_cells, say=print) -> dict:
    """Run rounds until every claim stands, has had its looks, or the budget is spent (module docstring).
    `run_cells([Cell])` runs cells in order; returns the state recorded in sweep.json's `sequential`."""
    looks, budget = matrix.sequential["looks"], matrix.sequential["budget_s"]
    planned = {c.id for c in matrix.cells}
    state = {"looks": looks, "budget_s": budget, "spent_s": 0.0, "rounds": [], "stopped": {}}
    while True:
        docs = load_results(outdir)
        spent = sum(float(d.get("elapsed_s") or 0) for d in docs if d.get("id") not in planned)
        state["spent_s"] = round(spent, 1)
        judged = judge_all(read_table(outdir), needs_full=matrix.needs_full, looks=looks)
        rounds, stopped, taken, ahead = [], {}, {}, 0.0
        pending = [(claim, finding) for claim, finding in judged if finding.verdict == UNSTABLE and finding.weighed]
        for claim, finding in sorted(pending, key=lambda cf: -promise(cf[1])):  # stable: CLAIMS order in a tie
            n0 = planned_reps(matrix, claim.id)
            look = len(finding.reps) // n0 if n0 else looks
            if not settleable(finding):
                stopped[claim.id] = "sign"
                continue
            ran = sum(claim.id in r["claims"] for r in state["rounds"])  # a claim whose cells keep failing
            if look >= looks or ran >= looks - 1:
                stopped[claim.id] = "looks"
                continue
            nxt = plan_round(matrix, docs, claim.id, n0 * (look + 1), dict(taken))
            if spent + ahead + nxt.seconds > budget:
                stopped[claim.id] = "budget"
                continue
            nxt = plan_round(matrix, docs, claim.id, n0 * (look + 1), taken)
            nxt.look = look + 1
            rounds.append(nxt)
            ahead += nxt.seconds
        state["stopped"] = stopped
        if not rounds:
            return state
        say(f"sweep: sequential round {len(state['rounds']) + 1}: "
            + ", ".join(f"{r.claim} (look {r.look} of {looks}, {len(r.cells)} cells)" for r in rounds)
            + f", about {ahead:.0f} s; {spent:.0f} of {budget:.0f} s spent")
        cells = [cell for _, cell in sorted((c for r in rounds for c in r.cells), key=lambda ic: ic[0])]
        state["rounds"].append({"claims": {r.claim: r.look for r in rounds}, "cells": len(cells),
                                "predicted_s": round(ahead, 1)})
        run_cells(cells)
