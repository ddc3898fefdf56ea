"""The sequential rule (lab/confidence.py's Pocock boundary, lab/sequential.py's rounds): on seeded synthetic
tables, a claim 2 standard errors from its threshold gets one outcome run after run where the fixed rule
tosses a coin; a clear effect stands at the planned repetitions; the error under optional stopping is the
stated 5%; the rounds run only the unsettled claim's cells, within the budget. No load, no root."""
import math
from collections import Counter
from dataclasses import replace

import numpy as np

from spinscope.lab import confidence, sequential
from spinscope.lab.confidence import UNSETTLED, UNSTABLE
from spinscope.lab.criteria.common import REPRODUCED, Check, Finding, has_tag, judged_by_checks
from spinscope.lab.matrix import parse_matrix_text
from spinscope.lab.results import write_json, write_tables

from test_confidence import CLAIM, cell, table

SIGMA = 0.12  # one 2-3 s cell's spread in log(req/s) on this machine
N0 = 3  # planned repetitions
SE3 = SIGMA * math.sqrt(2 / N0)  # standard error of a two-cell ratio's mean log over the planned 3
DF = 46  # a quick run's degrees of freedom for req/s
LOOKS = 6  # matrices/quick.toml's
RUNS = 20


def one_check(tbl):
    """A claim of one comparison: n-copy at least 10% ahead of the event loop (server_cpus "0-1" cells)."""
    d = tbl[has_tag(tbl, "server_cpus") & (tbl["status"] == "ok")]  # (tagged() would do, 20 times slower)
    tp = d.groupby("arch")["lg_throughput"].mean()
    if len(tp) < 2:
        return Finding()
    return judged_by_checks(Finding(ours="x"), [Check("n-copy 10% ahead", tp["n-copy"] / tp["event-loop"], 1.1)])


CLAIM1 = replace(CLAIM["server_cpus"], criterion=one_check)


def pair(rep, ratio):
    return [cell("server_cpus", rep=rep, arch=a, workers=2 if a == "n-copy" else None, server_cpus="0-1",
                 concurrency=32, lg_throughput=tp) for a, tp in (("n-copy", 100.0 * ratio), ("event-loop", 100.0))]


def simulate(distance_se, seed, looks):
    """One run: rounds of N0 repetitions of the pair (true ratio `distance_se` standard errors of the planned
    3 above 1.1, per-cell log-normal noise SIGMA), judged after each round against the sweep's pooled
    spread (an estimate of SIGMA over DF degrees of freedom) with `looks` planned looks (1: the fixed rule),
    until the verdict stands or the looks are used. (verdict, repetitions used)."""
    rng = np.random.default_rng(seed)
    noise = {"req/s": (SIGMA * math.sqrt(rng.chisquare(DF) / DF), DF)}
    truth = 1.1 * math.exp(distance_se * SE3)
    rows = []
    for look in range(1, looks + 1):
        for rep in range((look - 1) * N0, look * N0):
            rows += pair(rep, truth * math.exp(rng.normal(0, SIGMA) - rng.normal(0, SIGMA)))
        found = confidence.judge(CLAIM1, table(*rows), noise=noise, looks=looks)
        if found.verdict != UNSTABLE:
            break
    return found.verdict, look * N0


def agreement(distance_se, looks):
    outcomes = [simulate(distance_se, seed, looks) for seed in range(RUNS)]
    modal, count = Counter(v for v, _ in outcomes).most_common(1)[0]
    return modal, count, outcomes


def test_two_standard_errors_from_the_threshold_one_outcome_in_19_of_20_runs():
    """The issue's case: 2 standard errors (of the planned 3 repetitions) above the threshold. The fixed rule
    (3 repetitions, 2 standard errors) settles it in about half the runs; the sequential rule in 19 or more
    of 20 (it stops when the interval clears the threshold, 6.9 repetitions on average over 4,000 draws)."""
    fixed_modal, fixed_count, _ = agreement(2.0, looks=1)
    modal, count, outcomes = agreement(2.0, looks=LOOKS)
    print(f"2 SE: fixed rule {fixed_count}/{RUNS} ({fixed_modal}), sequential {count}/{RUNS} ({modal}), "
          f"repetitions {[n for _, n in outcomes]}")
    assert modal == REPRODUCED and count >= 19
    assert fixed_count <= 15  # the coin toss the issue reports


def test_a_clear_effect_stands_without_extra_repetitions():
    for seed in range(RUNS):
        assert simulate(6.0, seed, LOOKS) == (REPRODUCED, N0)


def test_a_comparison_at_its_threshold_reads_unstable_after_every_look():
    """Its truth at the threshold: unstable, all 18 repetitions used, in every run but those that settle by
    the stated 5% chance (the test below: 4.6% of 4,000 runs). These 20 seeds are an unlucky draw: 3 settle
    (all "not reproduced", at 9 and 12 repetitions); seeds 20-219 settle 6 of 200 (3%)."""
    modal, count, outcomes = agreement(0.0, looks=LOOKS)
    print(f"at the threshold: {count}/{RUNS} {modal}, {[o for o in outcomes if o[0] != UNSTABLE]}")
    assert modal == UNSTABLE and count >= 17
    assert all(n == N0 * LOOKS for v, n in outcomes if v == UNSTABLE)


def test_the_error_under_optional_stopping_is_the_stated_5_percent():
    """docs/sweep.md: a comparison whose truth is its threshold settles (either way) in at most 5% of runs
    however many of the looks are taken. 4,000 seeded draws under the null, stopping at the first look that
    settles: 4.3% with the spread estimated over 46 degrees of freedom, 4.8% over 10 (the studentized
    boundary); the fixed boundary repeated after every round (the test the issue rules out) is far above."""
    def rate(df, looks, boundary=None, draws=4000):
        rng = np.random.default_rng(11)
        settled = 0
        for _ in range(draws):
            noise = {"req/s": (SIGMA * math.sqrt(rng.chisquare(df) / df), df)}
            logs = []
            for _look in range(looks):
                logs += list(rng.normal(0, SIGMA, N0) - rng.normal(0, SIGMA, N0))
                values = [math.exp(x) for x in logs]
                if boundary is None:
                    outcome = confidence.weigh(Check("c", 1.0, 1.0), values, noise, looks).outcome
                else:  # the fixed rule's 2 standard errors at every look
                    se = noise["req/s"][0] * math.sqrt(2 / len(logs))
                    outcome = UNSETTLED if abs(sum(logs) / len(logs)) <= boundary * se else "settled"
                if outcome != UNSETTLED:
                    settled += 1
                    break
        return settled / draws
    for df in (46, 10):
        r = rate(df, LOOKS)
        print(f"null, {df} df, {LOOKS} looks: {r:.2%}")
        assert 0.03 < r <= 0.055
    naive = rate(46, LOOKS, boundary=confidence.MARGIN, draws=2000)
    print(f"null, the fixed 2 standard errors after every round: {naive:.2%}")
    assert naive > 0.12


# ------------------------------------------------------------------------------- the rounds (sequential.py)

MATRIX = """
name = "seq"
[sequential]
looks = 3
budget_s = {budget}
[defaults]
duration = 1.5
warmup = 0.5
repetitions = 3
[[group]]
name = "server_cpus"
claims = ["server_cpus"]
concurrency = 32
variants = [
  {{ arch = "event-loop", server_cpus = "0" }},
  {{ arch = "n-copy", workers = 2, server_cpus = "0" }},
  {{ arch = "event-loop", server_cpus = "0-1" }},
  {{ arch = "n-copy", workers = 2, server_cpus = "0-1" }},
]
[[group]]
name = "table3"
claims = ["table3"]
arch = "event-loop"
concurrency = 1
repetitions = 1
"""


def fake_sweep(tmp_path, truth, budget, seed=3):
    """The matrix's planned cells and then sequential.extend, each cell's req/s drawn around `truth`
    ({(arch, server_cpus): req/s}), 3 s each; returns (state, every cell run)."""
    matrix = parse_matrix_text(MATRIX.format(budget=budget))
    rng = np.random.default_rng(seed)
    (tmp_path / "cells").mkdir()
    ran = []

    def run_cells(cells):
        for c in cells:
            p = c.params
            tp = truth.get((p["arch"], p["server_cpus"]), 1000.0) * math.exp(rng.normal(0, SIGMA))
            write_json(tmp_path / "cells" / f"{c.id}.json",
                       {"id": c.id, "group": c.group, "claims": c.claims, "params": p, "status": "ok",
                        "error": None, "elapsed_s": 3.0, "loadgen": {"throughput": tp}})
            ran.append(c)
        write_tables(tmp_path)
    run_cells(matrix.cells)
    return sequential.extend(matrix, tmp_path, run_cells, say=lambda line: None), ran, matrix


def test_a_clear_claim_gets_no_round(tmp_path):
    truth = {("n-copy", "0"): 200.0, ("event-loop", "0"): 100.0, ("n-copy", "0-1"): 800.0, ("event-loop", "0-1"): 100.0}
    state, ran, matrix = fake_sweep(tmp_path, truth, budget=300)
    assert state["rounds"] == [] and state["stopped"] == {} and len(ran) == len(matrix.cells)


def test_rounds_run_the_unsettled_claims_cells_until_the_looks_or_the_budget(tmp_path):
    truth = {("n-copy", "0"): 90.0, ("event-loop", "0"): 100.0, ("n-copy", "0-1"): 110.0, ("event-loop", "0-1"): 100.0}
    state, ran, matrix = fake_sweep(tmp_path, truth, budget=1000)  # every comparison at its threshold
    extra = ran[len(matrix.cells):]
    assert [r["claims"] for r in state["rounds"]] == [{"server_cpus": 2}, {"server_cpus": 3}]
    assert len(extra) == 2 * 3 * 4 and {c.group for c in extra} == {"server_cpus"}
    assert all(c.claims == ["server_cpus"] for c in extra)
    assert [c.params["repetition"] for c in extra[:8]] == [3] * 4 + [4] * 4  # repetition-major
    assert state["stopped"] == {"server_cpus": "looks"} and state["spent_s"] == 3.0 * len(extra)
    small = tmp_path / "small"
    small.mkdir()
    state, ran, matrix = fake_sweep(small, truth, budget=40)  # one round is 12 cells of 3 s: 36 s
    assert len(state["rounds"]) == 1 and state["stopped"] == {"server_cpus": "budget"}
    assert state["spent_s"] <= 40


def test_the_budget_goes_to_the_claim_nearest_to_settling_first(tmp_path, monkeypatch):
    """Two unstable claims, a budget for one round: the one whose unsettled comparison is 0.9 of the way to
    its boundary gets it, not the one at its threshold that comes first in the report's order."""
    from types import SimpleNamespace

    def weighed(estimate, threshold=1.0, margin=0.1):
        return confidence.Weighed(Check("c", estimate, threshold), [estimate] * 3, UNSETTLED, margin)
    at_threshold = Finding(verdict=UNSTABLE, weighed=[weighed(1.0)], reps=[Finding()] * 3)
    near = Finding(verdict=UNSTABLE, weighed=[weighed(math.exp(0.09))], reps=[Finding()] * 3)
    assert sequential.promise(at_threshold) == 0.0 and math.isclose(sequential.promise(near), 0.9)
    assert sequential.promise(Finding(weighed=[weighed(1.2, margin=math.nan)])) == 0.5  # the sign rule
    calls = []

    def judge_all(table, needs_full=(), looks=1):
        calls.append(1)
        first = len(calls) == 1
        return [(SimpleNamespace(id="table3"), at_threshold if first else Finding(verdict=REPRODUCED)),
                (SimpleNamespace(id="server_cpus"), near if first else Finding(verdict=REPRODUCED))]
    monkeypatch.setattr(sequential, "judge_all", judge_all)
    state, ran, matrix = fake_sweep(tmp_path, {}, budget=40)  # server_cpus' round: 12 cells of 3 s
    assert [r["claims"] for r in state["rounds"]] == [{"server_cpus": 2}]
    assert {c.claims[0] for c in ran[len(matrix.cells):]} == {"server_cpus"}


def test_no_round_for_comparisons_that_more_repetitions_cannot_settle():
    """A p99 or a count that already has repetitions on both sides stays unsettled under the sign rule
    whatever comes next: no round for a claim whose every unsettled comparison is one (the budget goes
    elsewhere). A req/s comparison, or a p99 one beside it, can."""
    def weighed(metric, values):
        return confidence.Weighed(Check("c", 1.0, 1.0, metric), values, UNSETTLED, math.nan)
    p99 = weighed("p99 ms", [0.8, 1.2, 0.9])
    assert not sequential.settleable(Finding(weighed=[p99, weighed("count", [0.8, 1.2, 0.9])]))
    assert sequential.settleable(Finding(weighed=[p99, weighed("req/s", [0.8, 1.2, 0.9])]))
    assert not sequential.settleable(Finding(weighed=[weighed("req/s", [0.0, 1.2, 0.9])]))


def test_p99_stays_under_the_sign_rule_with_any_degrees_of_freedom():
    noise = {"p99 ms": (0.9, 200)}
    clear = confidence.weigh(Check("p99", 0.3, 1.0, "p99 ms"), [0.33, 0.22, 0.34], noise, LOOKS)
    assert clear.outcome == confidence.FAILS and math.isnan(clear.margin)
