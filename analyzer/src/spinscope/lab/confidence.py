"""A verdict with its evidence's confidence: a claim weighed over the repetitions of its cells, not once.

A criterion (lab/criteria/) judges the table it is given, repetitions averaged. On two shared cores a
2-3 s cell's throughput moves by 10-15% between repetitions, and a comparison within that of its threshold
goes either way: judging each repetition and asking them to agree still left such a claim a coin toss
(unstable in one run, a verdict in the next). So a throughput or latency claim is weighed comparison by
comparison, with a stated noise model:

- A criterion gives the Checks its verdict rests on (criteria.common.Check: a ratio of cell means `value` that
  holds when >= `threshold`) and its verdict as a function of which hold (Finding.decide).
- Each Check is computed on each of the n repetitions (`split_repetitions`: the r-th repetition of every
  setting the claim reads). Noise model: log(value) of one repetition is the truth plus noise of spread
  sigma * sqrt(cells), sigma the spread of one cell's log mean of that metric (req/s, p99 ms, ...), the
  cells independent. sigma is pooled over every Check of that metric in the sweep (`noise_of`: the
  repetitions' deviations from their Check's mean, n - 1 degrees of freedom each; a Check two criteria
  share, or two Checks on one ratio, counted once), so that the margin is itself stable from run to run;
  one claim's 2-6 degrees of freedom would make the margin a coin toss too.
- A Check holds when the mean of its log(value / threshold) over the repetitions is above MARGIN standard
  errors (MARGIN * sigma * sqrt(cells / n)), fails when below minus that, and is unsettled in between
  (a two-sided test at about 5% of "the truth is the threshold"). A value that is not a positive finite
  number (a count of 0, a missing cell), a Check on a count (criteria.common.COUNT: context switches per
  request, whose spread between repetitions is no one process: x0.7-x2.9 for one setting, +-20% for the
  next), and a Check of a metric whose spread rests on fewer than MIN_DF degrees of freedom (a quick run's
  p99 and CPU ms/request: 2 series, 4; one stalled repetition, a p99 ratio of 0.01 where the others read
  0.3-0.5, set the margin for both p99 claims to x5.6) settle only when every repetition puts them on the
  same side: the sign rule, which assumes no distribution.
- The three-way rule (outcome_of, the one rule both kinds of interval go through): with the claim's margin
  delta (Delta, declared in its record), the threshold is a band, threshold / (1 + delta) .. threshold x
  (1 + delta). The interval (the estimate / and x the boundary's width; under the sign rule the repetitions'
  range) holds above the band, fails below it, is "at the threshold" inside it (two one-sided tests, each
  at the boundary's one-sided rate), and is unsettled while it spans an edge. Delta 0 is the two-way rule.
- The claim's verdict stands when `decide` gives the same verdict for every way its unsettled and
  at-the-threshold Checks could fall (2 hold, 1 fails, 1 unsettled under "at least half hold": direction
  reproduced either way); it is "at the threshold" when the unsettled ones cannot move it for any fall of
  those at the threshold, but these can; else it is "unstable", naming the unsettled Checks with each
  repetition's value. (More than MAX_UNSETTLED such Checks are not tried, 2^n falls: unstable.)

A claim whose criterion gives no Checks (the counting claims: counts per request, which do not move
between runs) keeps the simpler rule: its verdict stands when every repetition gives it, else "unstable"
with each repetition's verdict. The numbers shown (`ours`) are always the pooled ones (repetitions
averaged); where the repetitions' verdict differs from the pooled table's, `why` names the pooled one.
A claim whose settings have fewer repetitions than it needs (Claim.min_reps: 1 for the counting claims,
TIMING_REPS for the throughput and latency claims) is "too few repetitions", with the pooled numbers; a
claim the sweep's matrix declares it does not settle (`needs_full` in the matrix, docs/sweep.md) is
"needs the full matrix", with whatever numbers its cells gave.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, replace

import pandas as pd

from spinscope.fmt import fixed
from spinscope.lab.criteria import common
from spinscope.lab.criteria.common import ERROR, NOT_MEASURED
from spinscope.lab.params import PARAMS

UNSTABLE = "unstable"
# The third verdict (and a Check's outcome): the interval lies within +-delta of the threshold (Delta).
AT_THRESHOLD = "at the threshold"
TOO_FEW = "too few repetitions"
NEEDS_FULL = "needs the full matrix"
TIMING_REPS = 3  # repetitions a throughput or latency claim needs (matrices/full.toml's default, quick's)
MARGIN = 2.0  # standard errors between a Check's mean and its threshold for it to settle (~5%, two-sided)
HOLDS, FAILS, UNSETTLED = "holds", "fails", "unsettled"
# A metric's spread pooled over fewer degrees of freedom than this is itself too uncertain for MARGIN (Student's
# t at 97.5% is 2.78 with 4, 2.23 with 10, 2.01 with 50): its Checks fall back to the sign rule.
MIN_DF = 10
MAX_UNSETTLED = 16  # unsettled Checks whose 2^n falls are tried; more read unstable without trying
# Metrics weighed by the sign rule whatever their degrees of freedom: counts, and p99 latency, whose spread
# between 2-3 s repetitions is heavy-tailed (a stalled repetition reads 0.01 where the others read 0.3-0.5):
# pooled into one normal spread it put a p99 ratio of 0.33 / 0.22 / 0.34 within its interval of 1 once
# another claim's extra repetitions had brought p99 to MIN_DF (docs/sweep.md, "Three runs with the rule").
SIGN_RULE = (common.COUNT, "p99 ms")
# Pocock's boundary (Pocock 1977, Biometrika 64:191-199; Jennison & Turnbull 2000, "Group Sequential Methods",
# Table 2.1): the constant critical value, in standard errors, of a two-sided test at 5% over K equally spaced
# looks (K planned, any fewer taken), so that a comparison whose truth is its threshold settles in at most 5% of
# runs however many of the K looks are taken. K = 1 keeps the fixed rule's MARGIN.
POCOCK = {2: 2.178, 3: 2.289, 4: 2.361, 5: 2.413, 6: 2.453, 7: 2.485, 8: 2.512, 9: 2.535, 10: 2.555}


@dataclass(frozen=True)
class Delta:
    """A claim's margin delta, declared before any run (lab/claims.py): its comparisons' band is threshold /
    (1 + size) .. threshold x (1 + size). An interval above the band holds (reproduced: clears the threshold by
    more than delta), below it fails, inside it is at the threshold: two one-sided tests, each at the one-sided
    rate of the boundary that decides the other two. `source` says where the size comes from."""

    size: float  # a fraction: 0.1 is +-10%
    source: str

    def band(self, threshold: float) -> tuple:
        return threshold / (1 + self.size), threshold * (1 + self.size)


NO_DELTA = Delta(0.0, "none: the two-way rule (holds above the threshold, fails below)")


def boundary(looks: int, df: float = math.inf) -> float:
    """Standard errors between a Check's mean and its threshold for it to settle, with `looks` planned looks,
    the spread estimated over `df` degrees of freedom: Pocock's constant taken to Student's t by the
    Cornish-Fisher expansion (Abramowitz & Stegun 26.7.5; the studentized boundary of Jennison & Turnbull,
    ch. 11), so that the error under optional stopping stays at the stated 5% with an estimated spread."""
    if looks <= 1:
        return MARGIN
    z = POCOCK[min(looks, max(POCOCK))]
    if not math.isfinite(df):
        return z
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)

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


@dataclass
class Weighed:
    """One Check over the repetitions: its value on each, and whether it holds, fails or is unsettled."""

    check: common.Check  # on the pooled table (its name, threshold, metric)
    values: list  # on each repetition (NaN where a repetition lacks it)
    outcome: str
    margin: float  # the boundary's width on log(value): holds above threshold * exp(margin); NaN: sign rule
    delta: Delta = NO_DELTA

    @property
    def estimate(self) -> float:
        """The geometric mean of the repetitions' values (NaN unless every one is a positive number)."""
        logs = _logs(self.values)
        return math.exp(sum(logs) / len(logs)) if logs else math.nan

    @property
    def interval(self) -> tuple:
        """(low, high): the estimate / and x exp(margin); under the sign rule the repetitions' lowest and
        highest value (NaN, NaN where one is not a number). outcome_of() places it against the band."""
        if math.isnan(self.margin):
            numbers = [v for v in self.values if isinstance(v, (int, float)) and not math.isnan(v)]
            if not numbers or len(numbers) < len(self.values):
                return math.nan, math.nan
            return min(numbers), max(numbers)
        if math.isnan(self.estimate):
            return math.nan, math.nan
        return self.estimate * math.exp(-self.margin), self.estimate * math.exp(self.margin)

    def against(self) -> str:
        """'1.1' or '1.1 ± 10% (1-1.21)': the threshold and its band."""
        t = self.check.threshold
        if not self.delta.size:
            return f"{t:.3g}"
        low, high = self.delta.band(t)
        return f"{t:.3g} ± {self.delta.size:.0%} ({low:.3g}-{high:.3g})"

    def words(self) -> str:
        c, n = self.check, len(self.values)
        values = " / ".join(fixed(v, 2) for v in self.values)
        if math.isnan(self.margin):
            side = ("within the band" if self.outcome == AT_THRESHOLD else "not on one side"
                    if self.outcome == UNSETTLED else "on one side")
            return f"{c.name}: {values} against {self.against()} (sign rule: {side} in every repetition)"
        low, high = self.interval
        return (f"{c.name}: {fixed(self.estimate, 2)}, interval {fixed(low, 2)}-{fixed(high, 2)} over {n} "
                f"repetitions, against {self.against()}" + (f" ({values})" if n <= 6 else ""))


def outcome_of(low: float, high: float, threshold: float, delta: Delta = NO_DELTA) -> str:
    """The one rule, on an interval (low, high) of a Check (Weighed.interval): it holds when the interval lies
    above the band threshold ± delta, fails when below, is at the threshold when inside, and is unsettled
    while it spans an edge of the band (NaN: unsettled). With delta 0 the band is the threshold and the rule
    the two-way one."""
    band_low, band_high = delta.band(threshold)
    if low >= band_high:
        return HOLDS
    if high < band_low:
        return FAILS
    if low >= band_low and high < band_high:
        return AT_THRESHOLD
    return UNSETTLED


@dataclass
class _Evidence:
    claim: object
    pooled: common.Finding
    n: int  # repetitions of the claim's settings
    reps: list  # [Finding] per repetition, when n >= 2


def _evidence(claim, table: pd.DataFrame) -> _Evidence:
    pooled = claim.judge(table)
    n = repetitions_of(table, claim.id)
    reps = [claim.judge(t) for t in split_repetitions(table, claim.id)] if n >= 2 else []
    return _Evidence(claim, pooled, n, reps)


def _series(ev: _Evidence) -> list:
    """[(pooled Check, [value on each repetition])] of the claim's Checks."""
    per_rep = [{c.name: c.value for c in f.checks} for f in ev.reps]
    return [(c, [r.get(c.name, math.nan) for r in per_rep]) for c in ev.pooled.checks]


def _logs(values: list) -> list | None:
    """log of each value, None unless every one is a positive finite number."""
    if not values or not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in values):
        return None
    return [math.log(v) for v in values]


def noise_of(evidence: list) -> dict:
    """{metric: (sigma, degrees of freedom)}: the spread of one cell's log mean, pooled over every Check of
    the metric with 2 or more repetitions (the module docstring's model). A series met twice (the same
    ratio under two thresholds, or two claims reading one cell pair) counts once."""
    sums, dfs, seen = defaultdict(float), defaultdict(int), set()
    for ev in evidence:
        for check, values in _series(ev):
            logs = _logs(values)
            if check.metric in SIGN_RULE or logs is None or len(logs) < 2:
                continue
            key = (check.metric, tuple(round(x, 12) for x in logs))
            if key in seen:
                continue
            seen.add(key)
            mean = sum(logs) / len(logs)
            sums[check.metric] += sum((x - mean) ** 2 for x in logs) / check.cells
            dfs[check.metric] += len(logs) - 1
    return {m: (math.sqrt(sums[m] / dfs[m]), dfs[m]) for m in dfs}


def weigh(check: common.Check, values: list, noise: dict, looks: int = 1, delta: Delta = NO_DELTA) -> Weighed:
    """`check` over its repetitions' `values` under `noise` (noise_of): its interval (boundary(looks) standard
    errors either side of the estimate, or under the sign rule the repetitions' range) placed against the band
    threshold ± delta by outcome_of (no band around an `exact` threshold): holds, fails, at the threshold or
    unsettled."""
    margin, delta = math.nan, NO_DELTA if check.exact else delta  # NaN: the sign rule
    logs = _logs(values)
    if not (check.metric in SIGN_RULE or logs is None or noise.get(check.metric, (0, 0))[1] < MIN_DF):
        sigma, df = noise[check.metric]
        margin = boundary(looks, df) * sigma * math.sqrt(check.cells / len(logs))
    weighed = Weighed(check, values, UNSETTLED, margin, delta)
    return replace(weighed, outcome=outcome_of(*weighed.interval, check.threshold, delta))


def judge(claim, table: pd.DataFrame, needs_full: bool = False, noise: dict | None = None, looks: int = 1,
          stopped: str = "") -> common.Finding:
    """`claim` on `table` with the confidence rule of the module docstring: the pooled finding (repetitions
    averaged) with the rule's verdict, `reps` the finding on each repetition (when there are 2 or more).
    `noise` (noise_of) defaults to the claim's own Checks' spread; judge_all pools it over the sweep.
    `looks`: the sequential design's planned looks (boundary()); `stopped`: why no more repetitions were run
    (lab/sequential.py: "budget", "looks"), said with an unstable verdict."""
    ev = _evidence(claim, table)
    return _verdict(ev, needs_full, noise_of([ev]) if noise is None else noise, looks, stopped)


def judge_all(claims, table: pd.DataFrame, needs_full=(), looks: int = 1, stopped: dict | None = None) -> list:
    """[(claim, finding)] for every claim of `claims`, the noise pooled over all their Checks."""
    evidence = [_evidence(claim, table) for claim in claims]
    noise = noise_of(evidence)
    return [(ev.claim, _verdict(ev, ev.claim.id in needs_full, noise, looks, (stopped or {}).get(ev.claim.id, "")))
            for ev in evidence]


def _verdict(ev: _Evidence, needs_full: bool, noise: dict, looks: int = 1, stopped: str = "") -> common.Finding:
    claim, pooled, n, reps = ev.claim, ev.pooled, ev.n, ev.reps
    if needs_full:
        return replace(pooled, verdict=NEEDS_FULL, why=_join(
            "this matrix does not run enough of its points to settle it (matrices/full.toml does)",
            f"its cells here: {pooled.verdict}" if pooled.verdict != NOT_MEASURED else ""))
    if pooled.verdict in (NOT_MEASURED, ERROR):
        return pooled
    if n < claim.min_reps:
        return replace(pooled, verdict=TOO_FEW, reps=reps, why=_join(
            f"{n} repetition{'s' if n != 1 else ''} of its cells, {claim.min_reps} needed for a throughput or "
            f"latency verdict; on these: {pooled.verdict}", pooled.why))
    if pooled.decide is not None and pooled.checks and reps:
        return _by_checks(ev, noise, looks, stopped)
    verdicts = [f.verdict for f in reps] or [pooled.verdict]
    if len(set(verdicts)) == 1:
        held = f"the same in each of {n} repetitions" if n >= 2 else "one repetition (a count)"
        if verdicts[0] != pooled.verdict:
            held += f" (the pooled numbers: {pooled.verdict})"
        reasons = pooled.why if verdicts[0] == pooled.verdict else reps[0].why
        return replace(pooled, verdict=verdicts[0], reps=reps, why=_join(reasons, held))
    return replace(pooled, verdict=UNSTABLE, reps=reps, why=_join(tally(verdicts), f"pooled: {pooled.verdict}"))


STOPPED = {"budget": "the extra repetitions' time budget ran out",
           "looks": "every planned look of the sequential test was taken",
           "sign": "its unsettled comparisons are under the sign rule and already disagree, which more repetitions "
                   "cannot settle; no round was run"}


def _by_checks(ev: _Evidence, noise: dict, looks: int = 1, stopped: str = "") -> common.Finding:
    """The verdict of a claim whose criterion gave Checks: settled only when the unsettled ones cannot move it;
    at the threshold when only Checks within ±delta of their thresholds can."""
    pooled, reps = ev.pooled, ev.reps
    delta = ev.claim.delta or NO_DELTA
    weighed = [weigh(c, values, noise, looks, delta) for c, values in _series(ev)]
    settled = {w.check.name: w.outcome == HOLDS for w in weighed if w.outcome in (HOLDS, FAILS)}
    open_ = [w for w in weighed if w.outcome == UNSETTLED]
    at = [w for w in weighed if w.outcome == AT_THRESHOLD]
    verdicts, open_moves = [], False  # open_moves: for some fall of the Checks at the threshold, an unsettled one moves it
    if len(open_) + len(at) <= MAX_UNSETTLED:
        for at_fall in itertools.product((True, False), repeat=len(at)):
            given = settled | {w.check.name: h for w, h in zip(at, at_fall)}
            these = []
            for fall in itertools.product((True, False), repeat=len(open_)):
                v = pooled.decide(given | {w.check.name: h for w, h in zip(open_, fall)})
                these += [v] if v not in these else []
            open_moves |= len(these) > 1
            verdicts += [v for v in these if v not in verdicts]
    fails = [w.check.name for w in weighed if w.outcome == FAILS]
    summary = (f"over {len(reps)} repetitions {sum(w.outcome == HOLDS for w in weighed)} of {len(weighed)} "
               f"comparisons hold" + (f", {len(fails)} fail{'s' if len(fails) == 1 else ''} ({'; '.join(fails)})"
                                       if fails else "") + (f", {len(at)} at the threshold" if at else ""))
    if looks > 1:
        summary += f" (boundary: Pocock's {boundary(looks):.2f} standard errors over {looks} looks, as Student's t)"
    if delta.size:
        summary += f" (margin δ: ±{delta.size:.0%} of each threshold)"
    unsettled, at_words = "; ".join(w.words() for w in open_), "; ".join(w.words() for w in at)
    settled_words = "; ".join(w.words() for w in weighed if w.outcome in (HOLDS, FAILS))
    if len(verdicts) == 1:
        why = _join(pooled.why if verdicts[0] == pooled.verdict else "", summary,
                    f"settled: {settled_words}" if settled_words else "",
                    f"at the threshold, which cannot change the verdict: {at_words}" if at else "",
                    f"unsettled, which cannot change the verdict: {unsettled}" if open_ else "",
                    f"the pooled numbers: {pooled.verdict}" if verdicts[0] != pooled.verdict else "")
        return replace(pooled, verdict=verdicts[0], reps=reps, weighed=weighed, why=why)
    if verdicts and not open_moves:  # only Checks within ±delta of their thresholds could move it
        return replace(pooled, verdict=AT_THRESHOLD, reps=reps, weighed=weighed, why=_join(
            f"{' or '.join(verdicts)} as the comparisons within ±{delta.size:.0%} of their thresholds fall: {at_words}",
            summary, f"settled: {settled_words}" if settled_words else "",
            f"unsettled, which cannot change the verdict: {unsettled}" if open_ else "", f"pooled: {pooled.verdict}"))
    could = (f"{' or '.join(verdicts)} as the unsettled comparisons fall" if verdicts else
             f"{len(open_) + len(at)} comparisons unsettled{' or at the threshold' if at else ''}, more than the "
             f"{MAX_UNSETTLED} whose falls are tried")
    return replace(pooled, verdict=UNSTABLE, reps=reps, weighed=weighed, why=_join(
        f"{could}: {unsettled}", f"at the threshold: {at_words}" if at else "", summary,
        f"{STOPPED[stopped]} at {len(reps)} repetitions" if stopped in STOPPED else "", f"pooled: {pooled.verdict}"))


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
