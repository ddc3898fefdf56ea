"""A verdict weighed over the repetitions of its cells (lab/confidence.py), and the reports built on it:
`sweep-report --compare DIR1 DIR2` and `--readme-table DIR...`. Synthetic tables built the way `spinscope
sweep` builds them (results.row_of) and read back from CSV; no root, no servers."""
import argparse
import io
import itertools
import json
from dataclasses import replace

import pandas as pd
import pytest

from spinscope.errors import SpinscopeError
from spinscope.lab import claims, confidence, sweep_report
from spinscope.lab.confidence import NEEDS_FULL, TOO_FEW, UNSTABLE
from spinscope.lab.criteria import DIRECTION, NOT_MEASURED, NOT_REPRODUCED, REPRODUCED
from spinscope.lab.matrix import PARAMS, parse_matrix_text
from spinscope.lab.results import row_of
from paths import ROOT

NUMBERS = itertools.count()
CLAIM = {c.id: c for c in claims.CLAIMS}


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

def test_stable_verdict_holds_in_every_repetition():
    tbl = table(*server_cpus(0, *HOLDS), *server_cpus(1, 96.0, 99.0, 168.0, 101.0), *server_cpus(2, *HOLDS))
    found = judged("server_cpus", tbl)
    assert found.verdict == REPRODUCED
    assert found.why == "3/3 comparisons hold; the same in each of 3 repetitions"
    assert [f.verdict for f in found.reps] == [REPRODUCED] * 3
    assert found.ours == CLAIM["server_cpus"].judge(tbl).ours  # the numbers: repetitions averaged


def test_unstable_when_a_repetition_flips():
    tbl = table(*server_cpus(0, *HOLDS), *server_cpus(1, *FAILS), *server_cpus(2, *HOLDS))
    found = judged("server_cpus", tbl)
    assert found.verdict == UNSTABLE
    assert [f.verdict for f in found.reps] == [REPRODUCED, NOT_REPRODUCED, REPRODUCED]
    pooled = CLAIM["server_cpus"].judge(tbl).verdict
    assert found.why == f"2 of 3 repetitions reproduced, 1 not reproduced; pooled: {pooled}"
    assert "n-copy x1.00" in found.reps[1].ours and "n-copy x1.79" in found.reps[0].ours  # the spread


def test_unstable_when_a_repetition_lands_on_the_other_side_of_a_threshold():
    one, two = (95.0, 100.0, 115.0, 100.0), (95.0, 100.0, 106.0, 100.0)  # n-copy ahead by 15% / by 6%
    tbl = table(*server_cpus(0, *one), *server_cpus(1, *one), *server_cpus(2, *two))
    found = judged("server_cpus", tbl)
    assert [f.verdict for f in found.reps] == [REPRODUCED, REPRODUCED, DIRECTION]
    assert found.verdict == UNSTABLE and found.why == "2 of 3 repetitions reproduced, 1 direction reproduced; pooled: reproduced"


def test_the_repetitions_verdict_stands_when_the_pooled_one_differs():
    """Every repetition one verdict, their average another (an average smooths a comparison that fails in
    each repetition): the repetitions' verdict, the pooled one named."""
    def criterion(tbl):  # "direction" on each repetition's 4 cells, "reproduced" on the pooled table (12)
        from spinscope.lab.criteria import Finding
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


@pytest.fixture
def two_sweeps(tmp_path):
    a = sweep_dir(tmp_path / "a", [*server_cpus(0, *HOLDS), *server_cpus(1, *HOLDS), *server_cpus(2, *HOLDS),
                                   *table3(0)], "2026-11-26T02:40:07Z")
    b = sweep_dir(tmp_path / "b", [*server_cpus(0, *HOLDS), *server_cpus(1, *FAILS), *server_cpus(2, *HOLDS),
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
        "From 2 runs of the matrix quick (started 2026-11-26 02:40 UTC, 2026-11-27 09:05 UTC) on Linux 6.8.0-test, "
        "2 CPUs (AMD EPYC). A verdict holds only when every repetition of the claim's cells gives it; otherwise it "
        "reads unstable (docs/sweep.md, \"Verdicts and their confidence\"). The numbers are the last run's; the "
        "last column says whether every run gave the same verdict.")
    assert lines[3:5] == ["| claim | ours (last run) | verdict | across runs |", "|---|---|---|---|"]
    rows = {line.split(" | ")[0][2:]: line for line in lines[5:] if line.startswith("| ")}
    assert len(rows) == len(claims.CLAIMS)
    cpus, t4 = CLAIM["server_cpus"].title, CLAIM["table4"].title
    b_cpus = sweep_report.load_sweep(b).judged[[c.id for c in claims.CLAIMS].index("server_cpus")][1]
    assert rows[cpus] == (f"| {cpus} | {b_cpus.ours} | unstable ({b_cpus.why}) | differs: reproduced, unstable |")
    assert rows[t4] == f"| {t4} | - | not measured in this run | the same in 2 of 2 |"
    assert lines[-2] == f"{len(claims.CLAIMS) - 2} of {len(claims.CLAIMS)} claims gave the same verdict in all 2 runs."

    (a / "matrix.toml").write_text("name = 'quick'\n")
    (b / "matrix.toml").write_text("name = 'quick'\n# changed\n")
    assert sweep_report.run(report_args("--readme-table", a, b)) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith(
        "the last column says whether every run gave the same verdict. The runs' matrix files differ "
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
    assert lines[1].startswith("From one run of the matrix quick (started 2026-11-26 02:40 UTC) on ")
    assert f"| {CLAIM['table3'].title} | {ours(a, 'table3')} | reproduced | one run |" in lines
    assert lines[-2].startswith("| ")  # no stability line for one run
