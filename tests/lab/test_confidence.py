"""A verdict weighed over the repetitions of its cells (lab/confidence.py), and the reports built on it:
`sweep-report --compare DIR1 DIR2` and `--readme-table DIR...`. Synthetic tables built the way `spinscope
sweep` builds them (results.row_of) and read back from CSV; no root, no servers."""
import argparse
import io
import itertools
import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from spinscope.errors import SpinscopeError
from spinscope.lab import claims, confidence, sweep_report
from spinscope.lab.confidence import FAILS as FAILS_, HOLDS as HOLDS_, NEEDS_FULL, TOO_FEW, UNSETTLED as UNSETTLED_
from spinscope.lab.confidence import UNSTABLE
from spinscope.lab.criteria.common import COUNT, Check, DIRECTION, NOT_MEASURED, NOT_REPRODUCED, REPRODUCED
from spinscope.lab.matrix import parse_matrix_text
from spinscope.lab.params import PARAMS
from spinscope.lab.results import row_of
from paths import ROOT

NUMBERS = itertools.count()
# The claims with delta 0: the tests of the two-way rule (holds above the threshold, fails below, unsettled
# across it), which the three-way rule is with no band; the band's tests (test_three_way.py) use the claims' own.
CLAIM = {c.id: replace(c, delta=confidence.NO_DELTA if c.delta else None) for c in claims.CLAIMS}


def cell(tag, rep=0, status="ok", **values):
    """A results row of a cell tagged `tag`, repetition `rep`: parameters from `values` over the matrix
    defaults, the measured columns named in `values`."""
    params = {k: default for k, (_, default) in PARAMS.items()} | {k: v for k, v in values.items() if k in PARAMS}
    row = row_of({"id": f"{params['arch']}-{next(NUMBERS)}", "group": tag, "claims": tag.split(";"),
                  "params": params | {"repetition": rep}, "status": status, "error": None})
    row.update({k: v for k, v in values.items() if k not in PARAMS})
    return row


def table(*rows):
    return pd.read_csv(io.StringIO(pd.DataFrame.from_records(rows).to_csv(index=False)))


def server_cpus(rep, nc1, el1, nc2, el2, status="ok"):
    """The server_cpus claim's four cells, repetition `rep` (req/s of n-copy and event-loop on 1 and 2 CPUs)."""
    return [cell("server_cpus", rep=rep, status=status, arch=a, workers=2 if a == "n-copy" else None,
                 server_cpus=cpus, concurrency=32, lg_throughput=tp)
            for a, cpus, tp in (("n-copy", "0", nc1), ("event-loop", "0", el1),
                                ("n-copy", "0-1", nc2), ("event-loop", "0-1", el2))]


HOLDS = (95.0, 100.0, 170.0, 100.0)  # n-copy x1.79 from the second CPU, the loop x1.0: reproduced
FAILS = (60.0, 100.0, 60.0, 100.0)  # n-copy behind everywhere: not reproduced


def judged(claim_id, tbl, needs_full=False):
    return confidence.judge(CLAIM[claim_id], tbl, needs_full=needs_full)


# ------------------------------------------------------------------------------------------- the rule

def test_a_clear_effect_stands():
    tbl = table(*server_cpus(0, *HOLDS), *server_cpus(1, 96.0, 99.0, 168.0, 101.0), *server_cpus(2, *HOLDS))
    found = judged("server_cpus", tbl)
    assert found.verdict == REPRODUCED
    assert found.why.startswith("3/3 comparisons hold; over 3 repetitions 3 of 3 comparisons hold; settled: n-copy "
                                "at least 10% ahead of one event loop on 2 CPUs: 1.70 / 1.66 / 1.70 against 1.1 (sign rule")
    assert [w.outcome for w in found.weighed] == [HOLDS_, HOLDS_, HOLDS_]
    assert [f.verdict for f in found.reps] == [REPRODUCED] * 3
    assert found.ours == CLAIM["server_cpus"].judge(tbl).ours  # the numbers: repetitions averaged


def test_unstable_when_a_repetition_flips():
    """One repetition with n-copy behind everywhere. The claim alone gives 6 degrees of freedom, fewer than
    MIN_DF: its comparisons are weighed by the sign rule, and two of them are not on one side."""
    tbl = table(*server_cpus(0, *HOLDS), *server_cpus(1, *FAILS), *server_cpus(2, *HOLDS))
    assert confidence.noise_of([confidence._evidence(CLAIM["server_cpus"], tbl)])["req/s"][1] == 6
    found = judged("server_cpus", tbl)
    assert found.verdict == UNSTABLE
    assert [w.outcome for w in found.weighed] == [UNSETTLED_, UNSETTLED_, HOLDS_]
    assert found.why.startswith("reproduced or direction reproduced or not reproduced as the unsettled comparisons "
                                "fall: n-copy at least 10% ahead of one event loop on 2 CPUs: 1.70 / 0.60 / 1.70 "
                                "against 1.1 (sign rule: not on one side in every repetition); n-copy within 10% of "
                                "one event loop on 1 CPU: 0.95 / 0.60 / 0.95 against 0.9 (sign rule: not on one side")
    assert found.why.endswith("; over 3 repetitions 1 of 3 comparisons hold; pooled: direction reproduced")
    # Under a sweep's noise (many degrees of freedom) the spread of each covers its threshold.
    swept = confidence.judge(CLAIM["server_cpus"], tbl, noise={"req/s": (0.3, 40)})
    assert swept.verdict == UNSTABLE and [w.outcome for w in swept.weighed] == [UNSETTLED_] * 3
    assert "1.20, interval 0.74-1.96 over 3 repetitions, against 1.1 (1.70 / 0.60 / 1.70)" in swept.why
    assert "n-copy x1.00" in found.reps[1].ours and "n-copy x1.79" in found.reps[0].ours  # the spread


def test_more_unsettled_comparisons_than_are_tried(monkeypatch):
    monkeypatch.setattr(confidence, "MAX_UNSETTLED", 1)
    tbl = table(*server_cpus(0, *HOLDS), *server_cpus(1, *FAILS), *server_cpus(2, *HOLDS))
    found = judged("server_cpus", tbl)
    assert found.verdict == UNSTABLE
    assert found.why.startswith("2 comparisons unsettled, more than the 1 whose falls are tried: n-copy at least 10% "
                                "ahead of one event loop on 2 CPUs: 1.70 / 0.60 / 1.70 against 1.1 (sign rule")


def test_unstable_when_a_comparison_sits_at_its_threshold():
    """n-copy 15%, 15% and 6% ahead against a threshold of 10%: held in 2 repetitions of 3, and unsettled."""
    one, two = (95.0, 100.0, 115.0, 100.0), (95.0, 100.0, 106.0, 100.0)
    tbl = table(*server_cpus(0, *one), *server_cpus(1, *one), *server_cpus(2, *two))
    found = judged("server_cpus", tbl)
    assert [f.verdict for f in found.reps] == [REPRODUCED, REPRODUCED, DIRECTION]
    assert [w.outcome for w in found.weighed] == [UNSETTLED_, HOLDS_, HOLDS_]
    assert found.verdict == UNSTABLE
    assert found.why.startswith("reproduced or direction reproduced as the unsettled comparisons fall: n-copy at "
                                "least 10% ahead of one event loop on 2 CPUs: 1.15 / 1.15 / 1.06 against 1.1")


def test_unsettled_comparisons_that_cannot_change_the_verdict_leave_it_standing():
    """n-copy far behind on 1 and on 2 CPUs (2 fail), its gain from the second CPU the loop's, at the
    threshold (unsettled): 0 or 1 of 3 hold, not reproduced either way."""
    rows = [*server_cpus(0, 60.0, 100.0, 61.0, 100.0), *server_cpus(1, 62.0, 100.0, 60.0, 101.0),
            *server_cpus(2, 61.0, 100.0, 61.5, 99.0)]
    found = judged("server_cpus", table(*rows))
    assert [w.outcome for w in found.weighed] == [FAILS_, FAILS_, UNSETTLED_]
    assert found.verdict == NOT_REPRODUCED
    assert found.why.startswith("0/3 comparisons hold; fails: n-copy at least 10% ahead of one event loop on 2 CPUs; "
                                "n-copy within 10% of one event loop on 1 CPU; n-copy gains more from 1 -> 2 CPUs than "
                                "one event loop; over 3 repetitions 0 of 3 comparisons hold, 2 fail (n-copy at least "
                                "10% ahead of one event loop on 2 CPUs; n-copy within 10% of one event loop on 1 CPU); "
                                "settled: ")
    assert found.why.endswith("unsettled, which cannot change the verdict: n-copy gains more from 1 -> 2 CPUs than "
                              "one event loop: 1.02 / 0.96 / 1.02 against 1 (sign rule: not on one side in every repetition)")


def ab(rep, el, gt, tpc, ppc):
    return [cell("events_fast_ab", rep=rep, arch=a, keepalive="off", concurrency=32, lg_throughput=tp)
            for a, tp in (("event-loop", el), ("green-threads", gt), ("thread-per-conn", tpc), ("process-per-conn", ppc))]


def test_two_hold_one_fails_one_unsettled_is_direction_either_way():
    """Process-per-conn the lowest and green threads the fastest threaded design (hold), thread-per-conn at
    half the loop's req/s (fails), green threads at 86-94% of the loop's against 90% (unsettled): 2 or 3
    of 4 hold, direction reproduced either way."""
    tbl = table(*ab(0, 100.0, 86.0, 50.0, 20.0), *ab(1, 100.0, 94.0, 52.0, 21.0), *ab(2, 100.0, 90.0, 49.0, 19.0))
    found = judged("events_fast_ab", tbl)
    assert [w.outcome for w in found.weighed] == [UNSETTLED_, HOLDS_, FAILS_, HOLDS_]
    assert found.verdict == DIRECTION


def test_noise_is_pooled_over_the_sweep():
    """judge_all weighs every claim with one spread per metric, from all the sweep's Checks; a ratio met
    twice (a claim's two thresholds on it) counts once. Here the server_cpus and events_fast_ab cells of
    the tests above: 3 + 4 req/s series, 2 degrees of freedom each."""
    rows = [*server_cpus(0, *HOLDS), *server_cpus(1, 96.0, 99.0, 168.0, 101.0), *server_cpus(2, *HOLDS),
            *ab(0, 100.0, 86.0, 50.0, 20.0), *ab(1, 100.0, 94.0, 52.0, 21.0), *ab(2, 100.0, 90.0, 49.0, 19.0)]
    tbl = table(*rows)
    evidence = [confidence._evidence(CLAIM[c], tbl) for c in ("server_cpus", "events_fast_ab")]
    noise = confidence.noise_of(evidence)
    assert list(noise) == ["req/s"] and noise["req/s"][1] == 14
    found = {c.id: f for c, f in claims.judge_all(tbl)}
    for claim_id in ("server_cpus", "events_fast_ab"):
        own = next(c for c in claims.CLAIMS if c.id == claim_id)  # with its margin
        assert found[claim_id].verdict == confidence.judge(own, tbl, noise=noise).verdict
        assert found[claim_id].weighed[0].margin == pytest.approx(
            confidence.MARGIN * noise["req/s"][0] * math.sqrt(2 / 3))


def test_weigh_a_check():
    """The rule on one Check: the mean of log(value / threshold) against MARGIN standard errors."""
    noise = {"req/s": (0.1, 40)}  # margin: 2 * 0.1 * sqrt(2 / 3) = 0.163 on log(value), x1.18
    def outcome(values, threshold=1.0, metric="req/s", cells=2):
        return confidence.weigh(Check("c", values[0], threshold, metric, cells), values, noise).outcome
    assert outcome([1.2, 1.2, 1.2]) == HOLDS_ and outcome([1.15, 1.2, 1.15]) == UNSETTLED_
    assert outcome([0.8, 0.8, 0.8]) == FAILS_ and outcome([1.0, 1.3, 0.9]) == UNSETTLED_
    assert outcome([1.2, 1.2, 1.2], cells=4) == UNSETTLED_  # a growth ratio: 4 cells' noise
    assert outcome([1.3, 1.3, 1.3], threshold=1.15) == UNSETTLED_ and outcome([1.3, 1.3, 1.3], threshold=1.1) == HOLDS_
    # No spread estimated for the metric, a count, or a value that is not a positive number: settled when
    # every repetition is on one side.
    assert outcome([1.01, 1.01, 1.01], metric="ms") == HOLDS_ and outcome([1.2, 0.9, 1.2], metric="ms") == UNSETTLED_
    assert outcome([1.01, 1.2, 3.0], metric=COUNT) == HOLDS_ and outcome([0.7, 1.9, 2.9], metric=COUNT) == UNSETTLED_
    assert outcome([math.inf, math.inf, math.inf]) == HOLDS_ and outcome([math.nan, 2.0, 2.0]) == UNSETTLED_
    assert outcome([0.0, 0.0, 0.0]) == FAILS_
    # A spread pooled over fewer than MIN_DF degrees of freedom: the sign rule, whatever the spread says.
    assert outcome([1.5, 0.9, 1.5]) == HOLDS_
    noise["req/s"] = (0.1, confidence.MIN_DF - 1)
    assert outcome([1.5, 0.9, 1.5]) == UNSETTLED_ and outcome([1.01, 1.01, 1.01]) == HOLDS_


# A claim's comparisons drawn with per-cell noise (log-normal, sd 12%: this machine's spread for a 2-3 s
# cell) around a true setting, 20 seeded draws: the verdict of each draw, under a sweep's noise pooled
# from many Checks (its estimate of the same 12%).
DRAWS = 20
SWEEP_NOISE = {"req/s": (0.12, 40)}


def drawn_verdicts(truth, seeds=range(DRAWS)):
    verdicts = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        rows = [r for rep in range(3)
                for r in server_cpus(rep, *(float(v * math.exp(rng.normal(0, 0.12))) for v in truth))]
        verdicts.append(confidence.judge(CLAIM["server_cpus"], table(*rows), noise=SWEEP_NOISE).verdict)
    return verdicts


def test_seeded_draws_clear_effects_stand_every_time():
    assert drawn_verdicts((150.0, 100.0, 300.0, 100.0)) == [REPRODUCED] * DRAWS  # n-copy x1.5 on 1 CPU, x3 on 2
    # n-copy at half everywhere: its gain from the second CPU the loop's (unsettled), 0 or 1 of 3 hold
    assert drawn_verdicts((50.0, 100.0, 50.0, 100.0)) == [NOT_REPRODUCED] * DRAWS


def test_seeded_draws_a_claim_at_its_thresholds_is_unstable_every_time():
    """n-copy exactly 10% ahead of the loop on 2 CPUs (the threshold), level on 1 CPU (1.07 standard errors
    above its 90%), its gain from the second CPU x1.1 the loop's (0.7 standard errors above 1): each
    repetition gives reproduced, direction or not reproduced by chance, and the old rule (every repetition
    agrees) printed a verdict in some draws; this one is unstable in every draw."""
    truth = (100.0, 100.0, 110.0, 100.0)
    old_rule = []
    for seed in range(DRAWS):
        rng = np.random.default_rng(seed)
        rows = [r for rep in range(3)
                for r in server_cpus(rep, *(float(v * math.exp(rng.normal(0, 0.12))) for v in truth))]
        reps = {f.verdict for f in confidence.judge(CLAIM["server_cpus"], table(*rows), noise=SWEEP_NOISE).reps}
        old_rule.append(reps.pop() if len(reps) == 1 else UNSTABLE)
    assert set(old_rule) - {UNSTABLE}  # the old rule: a verdict by chance in some draws
    assert drawn_verdicts(truth) == [UNSTABLE] * DRAWS


def test_a_comparison_at_its_threshold_settles_at_the_stated_rate():
    """The rule's stated error: a comparison whose truth is its threshold settles (either way) when the
    mean of 3 repetitions is MARGIN standard errors off, 2 * P(Z > 2) = 4.55% of runs. 4,000 seeded draws
    of 3 repetitions of a two-cell ratio: between 3.7% and 5.4% (4 standard deviations of the count)."""
    rng = np.random.default_rng(7)
    noise = {"req/s": (0.12, 10**6)}
    logs = rng.normal(0, 0.12, size=(4000, 3, 2))
    settled = sum(confidence.weigh(Check("c", 1.0, 1.0), [math.exp(a - b) for a, b in draw], noise).outcome != UNSETTLED_
                  for draw in logs)
    assert 0.037 * 4000 < settled < 0.054 * 4000


def test_the_repetitions_verdict_stands_when_the_pooled_one_differs():
    """Every repetition one verdict, their average another (an average smooths a comparison that fails in
    each repetition): the repetitions' verdict, the pooled one named."""
    def criterion(tbl):  # "direction" on each repetition's 4 cells, "reproduced" on the pooled table (12)
        from spinscope.lab.criteria.common import Finding
        pooled = (tbl["group"] == "server_cpus").sum() > 4
        return Finding(REPRODUCED if pooled else DIRECTION, ours="n", why="pooled" if pooled else "one")
    claim = replace(CLAIM["server_cpus"], criterion=criterion)
    tbl = table(*server_cpus(0, *HOLDS), *server_cpus(1, *HOLDS), *server_cpus(2, *HOLDS))
    found = confidence.judge(claim, tbl)
    assert found.verdict == DIRECTION
    assert found.why == "one; the same in each of 3 repetitions (the pooled numbers: reproduced)"


def pg(rep, pg_p99, tp_p99):
    def classes(p99):
        return json.dumps({"/null": {"latency_ms": {"p99": p99, "max": 2 * p99}}, "/compute/2000": {"n": "x"}})
    return [cell("process_graph", rep=rep, arch=a, workers=w, mix="90:/null,10:/compute/2000", path=None, rate=400,
                 concurrency=32, lg_throughput=400.0, classes_json=classes(p99))
            for a, w, p99 in (("process-graph", None, pg_p99), ("thread-pool", 32, tp_p99))]


def test_per_class_latencies_are_averaged_over_repetitions():
    """The pooled p99 of a class is the repetitions' mean, as for the columns (it was one repetition's,
    which paired one run's p99 with another's)."""
    tbl = table(*pg(0, 40.0, 10.0), *pg(1, 120.0, 190.0), *pg(2, 80.0, 40.0))
    found = judged("process_graph", tbl)
    assert "process-graph 80.000 vs thread-pool x32 80.000 ms (max 160 vs 160)" in found.ours
    assert [f.verdict for f in found.reps] == [NOT_REPRODUCED, REPRODUCED, NOT_REPRODUCED]
    assert found.verdict == UNSTABLE


def test_too_few_repetitions():
    tbl = table(*server_cpus(0, *HOLDS), *server_cpus(1, *HOLDS))
    found = judged("server_cpus", tbl)
    assert found.verdict == TOO_FEW
    assert found.why.startswith("2 repetitions of its cells, 3 needed for a throughput or latency verdict; "
                                "on these: reproduced; 3/3 comparisons hold")
    one = judged("server_cpus", table(*server_cpus(0, *HOLDS)))
    assert one.verdict == TOO_FEW and one.why.startswith("1 repetition of its cells, 3 needed") and one.reps == []


def test_a_failed_cell_is_not_a_repetition():
    """One cell of the third repetition failed: its setting has 2 ok repetitions, so the claim has 2."""
    rows = [*server_cpus(0, *HOLDS), *server_cpus(1, *HOLDS), *server_cpus(2, *HOLDS)]
    rows[-1]["status"] = "failed"
    tbl = table(*rows)
    assert confidence.repetitions_of(tbl, "server_cpus") == 2
    assert judged("server_cpus", tbl).verdict == TOO_FEW


def test_extra_repetitions_of_one_setting_are_pooled_not_split():
    rows = [*server_cpus(0, *HOLDS), *server_cpus(1, *HOLDS), *server_cpus(2, *HOLDS)]
    tbl = table(*rows, server_cpus(3, *FAILS)[0])  # a 4th repetition of one cell only
    assert confidence.repetitions_of(tbl, "server_cpus") == 3
    assert [len(t) for t in confidence.split_repetitions(tbl, "server_cpus")] == [4, 4, 4]


def table3(rep, split=4.3):
    return [cell("table3", rep=rep, arch=a, concurrency=1, handoffs_per_request=h, cap_requests=500)
            for a, h in (("reactor-split", split), ("reactor-worker", 2.06), ("thread-per-conn", 0.0),
                         ("event-loop", 0.02))]


def test_a_count_needs_one_repetition_and_its_repetitions_must_agree():
    assert CLAIM["table3"].min_reps == 1 and CLAIM["server_cpus"].min_reps == confidence.TIMING_REPS == 3
    once = judged("table3", table(*table3(0)))
    assert once.verdict == REPRODUCED and once.why.endswith("; one repetition (a count)")
    assert judged("table3", table(*table3(0), *table3(1, split=4.2))).verdict == REPRODUCED
    flips = judged("table3", table(*table3(0), *table3(1, split=6.0)))  # 6.0: off by 50%, direction only
    assert flips.verdict == UNSTABLE and flips.why.startswith("1 of 2 repetitions reproduced, 1 direction reproduced")


def test_split_keeps_the_other_claims_cells():
    tbl = table(*server_cpus(0, *HOLDS), *server_cpus(1, *HOLDS), *table3(0))
    for part in confidence.split_repetitions(tbl, "server_cpus"):
        assert (part["group"] == "table3").sum() == 4 and (part["group"] == "server_cpus").sum() == 4


def test_needs_the_full_matrix():
    tbl = table(*server_cpus(0, *HOLDS))
    found = judged("server_cpus", tbl, needs_full=True)
    assert found.verdict == NEEDS_FULL and "n-copy x1.79" in found.ours
    assert found.why == ("this matrix does not run enough of its points to settle it (matrices/full.toml does); "
                         "its cells here: reproduced")
    assert judged("server_cpus", table(*table3(0)), needs_full=True).why.endswith("(matrices/full.toml does)")
    verdicts = {c.id: f.verdict for c, f in claims.judge_all(tbl, needs_full=["server_cpus", "table3"])}
    assert verdicts["server_cpus"] == verdicts["table3"] == NEEDS_FULL and verdicts["table4"] == NOT_MEASURED


def test_tally():
    assert confidence.tally([DIRECTION, REPRODUCED, REPRODUCED]) == \
        "2 of 3 repetitions reproduced, 1 direction reproduced"


# ------------------------------------------------------------------------------------------- the matrix

MATRIX = """
name = "m"
needs_full = ["fig11_12"]
[[group]]
name = "a"
arch = ["event-loop", "thread-per-conn"]
repetitions = 3
[[group]]
name = "b"
arch = "n-copy"
repetitions = 1
"""


def test_cells_run_repetition_major():
    matrix = parse_matrix_text(MATRIX)
    assert [(c.params["arch"], c.params["repetition"]) for c in matrix.cells] == [
        ("event-loop", 0), ("thread-per-conn", 0), ("n-copy", 0), ("event-loop", 1), ("thread-per-conn", 1),
        ("event-loop", 2), ("thread-per-conn", 2)]
    assert matrix.needs_full == ["fig11_12"]


@pytest.mark.parametrize("value, message", [('"fig11_12"', "needs_full must be a list of claim ids"),
                                            ('["fig99"]', "needs_full: unknown claim id(s) fig99")])
def test_needs_full_is_checked(value, message):
    with pytest.raises(SpinscopeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_matrix_text(MATRIX.replace('["fig11_12"]', value))


def test_the_quick_matrix_names_what_it_cannot_settle():
    from spinscope.lab.matrix import parse_matrix

    quick = parse_matrix(ROOT / "matrices" / "quick.toml")
    reps = {}
    for c in quick.cells:
        for tag in c.claims:
            reps.setdefault(tag, set()).add(c.params["repetition"])
    for claim in claims.CLAIMS:  # every claim is settled (enough repetitions of its cells) or declared
        assert claim.id in quick.needs_full or len(reps.get(claim.id, ())) >= claim.min_reps, claim.id


# ------------------------------------------------------------------------------------------- reports

def report_args(*argv):
    parser = argparse.ArgumentParser()
    sweep_report.add_parser(parser.add_subparsers())
    return parser.parse_args(["sweep-report", *map(str, argv)])


def sweep_dir(path, rows, started, needs_full=()):
    path.mkdir()
    table(*rows).to_csv(path / "results.csv", index=False)
    (path / "sweep.json").write_text(json.dumps({
        "matrix": "quick", "started_at": started, "needs_full": list(needs_full),
        "host": {"kernel": "6.8.0-test", "ncpus": 2, "cpu_model": "AMD EPYC"}}))
    return path


CLEAR = (100.0, 100.0, 170.0, 100.0)  # HOLDS clear of the claim's ±10% (n-copy level with the loop on 1 CPU)


@pytest.fixture
def two_sweeps(tmp_path):
    a = sweep_dir(tmp_path / "a", [*server_cpus(0, *CLEAR), *server_cpus(1, *CLEAR), *server_cpus(2, *CLEAR),
                                   *table3(0)], "2026-11-26T02:40:07Z")
    b = sweep_dir(tmp_path / "b", [*server_cpus(0, *CLEAR), *server_cpus(1, *FAILS), *server_cpus(2, *CLEAR),
                                   *table3(0)], "2026-11-27T09:05:00Z", needs_full=["table3"])
    return a, b


def ours(dirname, claim_id):
    return sweep_report.load_sweep(dirname).judged[[c.id for c in claims.CLAIMS].index(claim_id)][1].ours


def test_compare(two_sweeps, capsys):
    a, b = two_sweeps
    assert sweep_report.run(report_args("--compare", a, b)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:5] == [
        f"A: {a}: matrix quick, 16 of 16 cells ok, started 2026-11-26 02:40 UTC, Linux 6.8.0-test, 2 CPUs (AMD EPYC)",
        f"B: {b}: matrix quick, 16 of 16 cells ok, started 2026-11-27 09:05 UTC, Linux 6.8.0-test, 2 CPUs (AMD EPYC)",
        "",
        "| claim | verdict A | verdict B | same | ours A | ours B |",
        "|---|---|---|---|---|---|"]
    rows = {line.split(" | ")[0][2:]: line for line in lines[5:] if line.startswith("| ")}
    assert len(rows) == len(claims.CLAIMS)
    t3 = CLAIM["table3"].title
    assert rows[t3] == f"| {t3} | reproduced | needs the full matrix | no | {ours(a, 'table3')} | {ours(b, 'table3')} |"
    cpus = CLAIM["server_cpus"].title
    assert rows[cpus] == (f"| {cpus} | reproduced | unstable | no | {ours(a, 'server_cpus')} | "
                          f"{ours(b, 'server_cpus')} |")
    t4 = CLAIM["table4"].title
    assert rows[t4] == f"| {t4} | not measured in this run | not measured in this run | yes | - | - |"
    assert lines[-1] == f"{len(claims.CLAIMS) - 2} of {len(claims.CLAIMS)} claims: the same verdict in A and B."
    assert sweep_report.run(report_args("--compare", a, b, "--json")) == 0
    doc = json.loads(capsys.readouterr().out)
    by_id = {c["id"]: c for c in doc["claims"]}
    assert by_id["server_cpus"]["b"]["verdict"] == UNSTABLE and not by_id["server_cpus"]["same"]
    assert [r["verdict"] for r in by_id["server_cpus"]["b"]["repetitions"]] == [REPRODUCED, NOT_REPRODUCED, REPRODUCED]


@pytest.mark.parametrize("argv, message", [
    (["--compare", "X"], "--compare takes two sweep directories, not 1"),
    (["X", "Y"], "one sweep directory, not 2"),
    (["X", "--readme", "R"], "--readme FILE goes with --readme-table"),
    (["X", "Y", "--compare", "--html", "h"], "--html is for one sweep's report")])
def test_wrong_directories_for_the_mode(argv, message):
    with pytest.raises(SpinscopeError, match=message) as err:
        sweep_report.run(report_args(*argv))
    assert err.value.exit_code == 2


def test_readme_table(two_sweeps, tmp_path, capsys):
    a, b = two_sweeps
    assert sweep_report.run(report_args("--readme-table", a, b)) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == sweep_report.README_BEGIN and lines[-1] == sweep_report.README_END
    assert lines[1] == (
        f"From 2 runs of the matrix quick ({a.name}: started 2026-11-26 02:40 UTC; {b.name}: started 2026-11-27 09:05 UTC) "
        "on Linux 6.8.0-test, 2 CPUs (AMD EPYC). A throughput or latency comparison holds when its interval (against "
        "the run's pooled noise) clears its threshold by more than the claim's margin δ, fails when it clears it the "
        "other way, and is at the threshold when it lies within ±δ of it; a claim's verdict stands when the comparisons "
        "still spanning an edge of that band could not change it, is \"at the threshold\" when only those within the "
        "band could; a claim left unsettled gets more repetitions, until it settles or the run's budget for them is "
        "spent, and reads unstable only then (docs/sweep.md, \"Verdicts and their confidence\"). The numbers, "
        "intervals and bands are the last run's; \"across runs\" says whether every run gave the same verdict, the "
        "last column how many repetitions each run's verdict rests on (- for a claim judged on its pooled cells).")
    assert lines[3:5] == ["| claim | ours (last run) | verdict | interval against threshold ± δ (last run) | across runs "
                          "| repetitions per run |", "|---|---|---|---|---|---|"]
    rows = {line.split(" | ")[0][2:]: line for line in lines[5:] if line.startswith("| ")}
    assert len(rows) == len(claims.CLAIMS)
    cpus, t4 = CLAIM["server_cpus"].title, CLAIM["table4"].title
    b_cpus = sweep_report.load_sweep(b).judged[[c.id for c in claims.CLAIMS].index("server_cpus")][1]
    assert rows[cpus] == (f"| {cpus} | {b_cpus.ours} | unstable ({b_cpus.why}) | {sweep_report.against_band(b_cpus)} | "
                          "differs: reproduced, unstable | 3 / 3 |")
    assert sweep_report.against_band(b_cpus).startswith(
        "n-copy at least 10% ahead of one event loop on 2 CPUs: 1.70 / 0.60 / 1.70 against 1.1 ± 10% (1-1.21) "
        "(sign rule: not on one side in every repetition): unsettled; ")
    assert rows[t4] == f"| {t4} | - | not measured in this run | - | the same in 2 of 2 | - / - |"
    assert lines[-2] == f"{len(claims.CLAIMS) - 2} of {len(claims.CLAIMS)} claims gave the same verdict in all 2 runs."

    (a / "matrix.toml").write_text("name = 'quick'\n")
    (b / "matrix.toml").write_text("name = 'quick'\n# changed\n")
    assert sweep_report.run(report_args("--readme-table", a, b)) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith(
        "(- for a claim judged on its pooled cells). The runs' matrix files differ "
        "(DIR/matrix.toml): a claim's cells may not be the same in every run.")
    (b / "matrix.toml").write_text("name = 'quick'\n")

    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nbefore\n{sweep_report.README_BEGIN}\nold table\n{sweep_report.README_END}\nafter\n")
    assert sweep_report.run(report_args("--readme-table", a, b, "--readme", readme)) == 0
    assert readme.read_text() == f"# x\n\nbefore\n{out}after\n"
    assert sweep_report.run(report_args("--readme-table", a, b, "--readme", readme)) == 0  # again: the same
    assert readme.read_text() == f"# x\n\nbefore\n{out}after\n"
    readme.write_text("no markers\n")
    with pytest.raises(SpinscopeError, match="no reproduce-table markers"):
        sweep_report.run(report_args("--readme-table", a, "--readme", readme))


def test_readme_table_of_one_run(two_sweeps, capsys):
    a, _ = two_sweeps
    assert sweep_report.run(report_args("--readme-table", a)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("From one run of the matrix quick (a: started 2026-11-26 02:40 UTC) on ")
    assert f"| {CLAIM['table3'].title} | {ours(a, 'table3')} | reproduced | - | one run | - |" in lines
    assert lines[-2].startswith("| ")  # no stability line for one run
