"""The three-way rule under optional stopping, simulated: the table of docs/sweep.md ("At the threshold:
the rule's error rates, simulated") and the draws tests/lab/test_three_way.py asserts on.

One comparison, a two-cell req/s ratio against a threshold of 1 with the margin delta: each repetition's
log(ratio) is the truth plus the difference of two cells' log-normal noise (spread SIGMA each); the sweep's
pooled spread is an estimate of SIGMA over DF degrees of freedom (a chi-square draw per run, as a sweep's
own estimate moves); a round of N0 repetitions before each look, up to `looks` looks, stopping at the first
look whose outcome is not unsettled (lab/confidence.weigh, the rule itself, with Pocock's boundary for
`looks`). A one-comparison claim's verdict is its comparison's outcome.

`python3 tests/lab/rule_simulation.py [SIGMA ...]` prints the table (PYTHONPATH=analyzer/src).
"""
from __future__ import annotations

import math
import sys

import numpy as np

from spinscope.lab import confidence
from spinscope.lab.criteria.common import Check

SIGMA = 0.12  # one 2-3 s cell's spread in log(req/s) here (test_sequential.py's; 0.09 pooled in a quick run)
N0 = 3  # planned repetitions, and a round's
DF = 46  # a quick run's degrees of freedom for req/s
LOOKS = 10  # matrices/quick.toml's
DELTA = 0.10  # lab/claims.py's PRACTICAL
VERDICT = {confidence.HOLDS: "reproduced", confidence.FAILS: "not reproduced",
           confidence.AT_THRESHOLD: "at the threshold", confidence.UNSETTLED: "unstable"}


def se(sigma: float = SIGMA, n: int = N0) -> float:
    """The standard error of a two-cell ratio's mean log over n repetitions."""
    return sigma * math.sqrt(2 / n)


def one_run(log_truth: float, rng, sigma=SIGMA, delta=DELTA, looks=LOOKS, n0=N0, df=DF) -> tuple:
    """(verdict, repetitions used) of one run whose comparison's true log(ratio / threshold) is `log_truth`."""
    noise = {"req/s": (sigma * math.sqrt(rng.chisquare(df) / df), df)}
    margin = confidence.Delta(delta, "simulated")
    logs: list = []
    for _look in range(looks):
        logs += list(log_truth + rng.normal(0, sigma, n0) - rng.normal(0, sigma, n0))
        outcome = confidence.weigh(Check("c", 1.0, 1.0), [math.exp(x) for x in logs], noise, looks, margin).outcome
        if outcome != confidence.UNSETTLED:
            break
    return VERDICT[outcome], len(logs)


def rates(log_truth: float, draws: int, seed: int, **rule) -> dict:
    """{verdict: share of `draws` runs} and "repetitions": the mean repetitions used."""
    rng = np.random.default_rng(seed)
    runs = [one_run(log_truth, rng, **rule) for _ in range(draws)]
    out = {v: sum(r == v for r, _ in runs) / draws for v in VERDICT.values()}
    out["repetitions"] = sum(n for _, n in runs) / draws
    return out


def truths(sigma=SIGMA, delta=DELTA) -> list:
    """(name, log(truth / threshold), the verdicts that are wrong there) of the table's rows."""
    band, two = math.log1p(delta), 2 * se(sigma)
    rep, notrep, at = "reproduced", "not reproduced", "at the threshold"
    return [("at the threshold", 0.0, (rep, notrep)),
            (f"+{delta:.0%}/2 (inside the band)", band / 2, (rep, notrep)),
            (f"+{delta:.0%} (the band's upper edge)", band, (notrep,)),
            (f"-{delta:.0%} (the band's lower edge)", -band, (rep,)),
            ("+2 standard errors of the planned 3", two, (notrep,) + ((at,) if two > band else (rep,))),
            ("-2 standard errors of the planned 3", -two, (rep,) + ((at,) if two > band else (notrep,))),
            (f"+{delta:.0%} + 2 standard errors", band + two, (notrep, at)),
            (f"-{delta:.0%} - 2 standard errors", -band - two, (rep, at))]


def markdown(draws=4000, seed=5, sigma=SIGMA, delta=DELTA, looks=LOOKS) -> str:
    rows = [f"σ {sigma} per cell (a two-cell ratio's standard error over 3 repetitions: {se(sigma):.3f} in log), "
            f"δ {delta:.0%}, {looks} looks of {N0} (Pocock, {DF} degrees of freedom: "
            f"{confidence.boundary(looks, DF):.2f} standard errors), {draws:,} runs per row, seed {seed}\n\n",
            "| truth | reproduced | not reproduced | at the threshold | unstable | wrong verdicts | repetitions |\n",
            "|---|---|---|---|---|---|---|\n"]
    for name, log_truth, wrong in truths(sigma, delta):
        r = rates(log_truth, draws, seed, sigma=sigma, delta=delta, looks=looks)
        rows.append(f"| {name} (x{math.exp(log_truth):.3f}) | " + " | ".join(f"{r[v]:.1%}" for v in VERDICT.values())
                    + f" | {sum(r[v] for v in wrong):.1%} ({', '.join(wrong)}) | {r['repetitions']:.1f} |\n")
    return "".join(rows)


if __name__ == "__main__":
    for s in [float(a) for a in sys.argv[1:]] or [SIGMA]:
        print(markdown(sigma=s))
