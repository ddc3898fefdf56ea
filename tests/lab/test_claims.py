"""Every claim's criterion on small synthetic results tables: it holds, it does not hold, and the cells it
needs are absent; a criterion that raises is an error in the report and the exit status. No root, no
servers: the tables are built the way `spinscope sweep` builds them (results.row_of) and read back from
CSV the way `spinscope sweep-report` may read them."""
import argparse
import io
import itertools
import json
from dataclasses import replace

import pandas as pd
import pytest

from spinscope.lab import claims, sweep_report
from spinscope.lab.criteria.common import (DIRECTION, ERROR, NOT_MEASURED, NOT_REPRODUCED, REPRODUCED, heavy_share,
                                           tagged)
from spinscope.lab.criteria.comparing import _ncpus
from spinscope.lab.criteria.event_flow import (TABLE3_HANDOFFS, TABLE4_ORDER, TABLE6_DEFAULT_EXPECTED,
                                               TABLE6_DEFAULT_RANGE, crossover_point)
from spinscope.lab.params import PARAMS
from spinscope.lab.results import row_of

BIG, SMALL = "/bytes/102400", "/bytes/100"
CELL_NUMBERS = itertools.count()


def cell(tag, status="ok", **values):
    """A results row of a cell tagged `tag`: parameters from `values` over the matrix defaults, every other
    column of a real row, and the measured columns named in `values`."""
    params = {k: default for k, (_, default) in PARAMS.items()} | {k: v for k, v in values.items() if k in PARAMS}
    error = values.pop("error", None)
    row = row_of({"id": f"{params['arch']}-{next(CELL_NUMBERS)}", "group": tag, "claims": tag.split(";"),
                  "params": params, "status": status, "error": error})
    row.update({k: v for k, v in values.items() if k not in PARAMS})
    return row


def table(*rows):
    """The rows as a results table, written to and read from CSV like results.csv."""
    return pd.read_csv(io.StringIO(pd.DataFrame.from_records(rows).to_csv(index=False)))


def report_args(*argv):
    """`spinscope sweep-report ARGV` parsed by the verb's own parser."""
    parser = argparse.ArgumentParser()
    sweep_report.add_parser(parser.add_subparsers())
    return parser.parse_args(["sweep-report", *map(str, argv)])


def judge(claim_id, tbl):
    """The claim's criterion on `tbl`. Where it gives Checks (lab/confidence.py weighs them over the
    repetitions), its rule `decide` on how they hold here must give its verdict here."""
    finding = next(c for c in claims.CLAIMS if c.id == claim_id).judge(tbl)
    assert finding.verdict != ERROR, finding.why
    if finding.decide is not None:
        assert finding.decide({c.name: bool(c) for c in finding.checks}) == finding.verdict, claim_id
        assert len({c.name for c in finding.checks}) == len(finding.checks), "a Check's name is its identity"
    return finding


def unrelated():
    """A table whose only cell carries another claim's tag."""
    return table(cell("other", arch="event-loop", handoffs_per_request=0.0, lg_throughput=1.0))


@pytest.mark.parametrize("claim_id", [c.id for c in claims.CLAIMS])
def test_not_measured_without_cells(claim_id):
    assert judge(claim_id, unrelated()).verdict == NOT_MEASURED
    assert judge(claim_id, table(cell("other", arch="event-loop")).iloc[0:0]).verdict == NOT_MEASURED


def test_not_measured_when_only_failed_cells():
    tbl = table(*[cell("table3", status="failed", arch=a, handoffs_per_request=4.0) for a in TABLE3_HANDOFFS])
    assert judge("table3", tbl).verdict == NOT_MEASURED


def test_records_are_complete_and_unique():
    assert len({c.id for c in claims.CLAIMS}) == len(claims.CLAIMS)
    for claim in claims.CLAIMS:
        for name in ("title", "publication", "source", "paper", "tolerance", "rule", "measured"):
            assert getattr(claim, name), (claim.id, name)
        assert claim.value is not None and callable(claim.criterion)


# ------------------------------------------------------------------------------------------- Table 3

def table3(split, worker, tpc=0.0, loop=0.02):
    return table(*[cell("table3", arch=a, concurrency=1, handoffs_per_request=h, cap_requests=500)
                   for a, h in (("reactor-split", split), ("reactor-worker", worker), ("thread-per-conn", tpc),
                                ("event-loop", loop)) if h is not None])


def test_table3():
    found = judge("table3", table3(4.3, 2.06))
    assert found.verdict == REPRODUCED
    assert [r[0] for r in found.rows] == list(TABLE3_HANDOFFS)
    assert judge("table3", table3(5.5, 2.0)).verdict == DIRECTION  # ordering only
    assert judge("table3", table3(4.0, 2.0, loop=None)).verdict == DIRECTION  # event-loop missing
    assert judge("table3", table3(1.0, 2.0)).verdict == NOT_REPRODUCED
    assert judge("table3", table3(4.0, 2.0, tpc=3.0)).verdict == NOT_REPRODUCED


# ------------------------------------------------------------------------------------------- Table 6

def table6(spin_big, spin_small=1.0, tpc_big=1.0):
    rows = [cell("table6", arch="event-loop", write_policy="spin", path=p, writes_per_request=w,
                 eagain_per_request=w - 1, labels="write-spin:critical" if w > 2 else "")
            for p, w in ((SMALL, spin_small), ("/bytes/10240", spin_small), (BIG, spin_big)) if w is not None]
    rows.append(cell("table6", arch="thread-per-conn", path=BIG, writes_per_request=tpc_big, eagain_per_request=0))
    return table(*rows)


def test_table6():
    assert judge("table6", table6(150.0)).verdict == REPRODUCED
    assert judge("table6", table6(2000.0)).verdict == DIRECTION  # above tens to hundreds
    assert judge("table6", table6(150.0, spin_small=3.0)).verdict == DIRECTION  # small responses spin too
    assert judge("table6", table6(2.0)).verdict == NOT_REPRODUCED
    assert judge("table6", table6(20.0, tpc_big=10.0)).verdict == NOT_REPRODUCED  # not 4x the blocking server
    assert judge("table6", table6(None)).verdict == NOT_MEASURED  # no spinning loop at 100 KB


# ------------------------------------------------------------------------------------------- Figures 6/7

def fig6_7(order_holds_at_32=True):
    rows = []
    for conc in (4, 32):
        holds = conc == 4 or order_holds_at_32
        for arch, cs, tp in (("reactor-split", 4.0, 100), ("reactor-worker", 2.0, 200),
                             ("thread-per-conn", 1.0, 300), ("event-loop", 0.5, 400)):
            rows.append(cell("fig6_7;table4", arch=arch, concurrency=conc, cs_per_request=cs if holds else 5 - cs,
                             lg_throughput=tp if holds else 500 - tp, cs_per_s_load=cs * tp))
    return table(*rows)


def test_fig6_7():
    assert judge("fig6_7", fig6_7()).verdict == REPRODUCED
    found = judge("fig6_7", fig6_7(order_holds_at_32=False))
    assert found.verdict == DIRECTION and "c=32" in found.why
    reversed_ = fig6_7(order_holds_at_32=False)
    reversed_ = reversed_[reversed_["concurrency"] == 32]
    assert judge("fig6_7", reversed_).verdict == NOT_REPRODUCED
    three = reversed_[reversed_["arch"] != "event-loop"]
    assert judge("fig6_7", three).verdict == NOT_MEASURED  # no slice has all four servers


# ------------------------------------------------------------------------------------------- Table 4

def table4(shares):
    return table(*[cell("fig6_7;table4", arch=a, futex_share=s, futex_wait_share=s / 2)
                   for a, s in zip(TABLE4_ORDER, shares) if s is not None])


def test_table4():
    assert judge("table4", table4([0.0, 0.01, 0.42, 0.54])).verdict == REPRODUCED
    # one futex call apart is a tie (it went either way between repetitions): not the paper's ordering
    assert judge("table4", table4([0.0, 0.00001, 0.42, 0.54])).verdict == DIRECTION
    tie = judge("table4", table4([0.001, 0.0005, 0.42, 0.54]))
    assert tie.verdict == DIRECTION and "tie" in tie.why
    assert judge("table4", table4([0.0, 0.5, 0.42, 0.54])).verdict == NOT_REPRODUCED
    assert judge("table4", table4([0.0, 0.001, None, None])).verdict == DIRECTION  # two of four
    assert judge("table4", table4([0.0, None, None, None])).verdict == NOT_MEASURED


# ------------------------------------------------------------------------------------------- Figures 11/12

def fig11_12(writes, delay_error=False):
    rows = [cell("fig11_12", arch="event-loop", write_policy="spin", net="veth", sndbuf=16384, path=BIG,
                 rcvbuf=rcvbuf, writes_per_request=w, eagain_per_request=w - 1, rtt_ms=0.04, lg_throughput=1000)
            for rcvbuf, w in zip((4096, 65536, 1048576), writes)]
    if delay_error:
        rows.append(cell("fig11_12", status="failed", arch="event-loop", net="veth", delay_ms=5, rcvbuf=4096,
                         error="delay unsupported here: `tc qdisc add ... netem` failed"))
    return table(*rows)


def test_fig11_12():
    found = judge("fig11_12", fig11_12([316.0, 38.0, 39.0], delay_error=True))
    assert found.verdict == DIRECTION  # the best this claim can get without its delay part
    assert "delay part not measured: its cells failed" in found.why and found.data is not None
    assert judge("fig11_12", fig11_12([30.0, 38.0, 300.0])).verdict == NOT_REPRODUCED
    only_failed = judge("fig11_12", fig11_12([], delay_error=True))
    assert only_failed.verdict == NOT_MEASURED and "delay unsupported" in only_failed.why
    assert judge("fig11_12", fig11_12([316.0])).verdict == NOT_MEASURED  # one window


# ------------------------------------------------------------------------------------------- Figures 14/16

def fig14_16(netty_wins_big=True, hybrid_best=True):
    rows = [cell("table6;fig14_16", arch="netty", path=SMALL, lg_throughput=50),
            cell("table6;fig14_16", arch="event-loop", write_policy="spin", path=SMALL, lg_throughput=100),
            cell("table6;fig14_16", arch="netty", path=BIG, lg_throughput=30 if netty_wins_big else 5),
            cell("table6;fig14_16", arch="event-loop", write_policy="spin", path=BIG, lg_throughput=10)]
    for mix in ("1:/bytes/100", "90:/bytes/100,10:/bytes/102400", "1:/bytes/102400"):
        for arch, tp in (("hybrid", 100 if hybrid_best else 10), ("netty", 60)):
            rows.append(cell("fig14_16", arch=arch, mix=mix, path=None, lg_throughput=tp))
    return table(*rows)


def test_fig14_16():
    found = judge("fig14_16", fig14_16())
    assert found.verdict == REPRODUCED and found.data is not None
    assert judge("fig14_16", fig14_16(netty_wins_big=False)).verdict == DIRECTION  # 4 of 5 comparisons
    assert judge("fig14_16", fig14_16(netty_wins_big=False, hybrid_best=False)).verdict == NOT_REPRODUCED
    assert heavy_share("90:/bytes/100,10:/bytes/102400") == pytest.approx(0.1)


# ------------------------------------------------------------------------------------------- "Are events fast?"

def events_fast(latencies, backlog=True):
    rows = [cell("events_fast", arch=a, concurrency=8, lat_mean_ms=lat) for a, lat in latencies.items()]
    if backlog:
        rows.append(cell("events_fast", arch="event-loop", concurrency=64, backlog=16, lg_throughput=900,
                         lg_errors=3, lat_p99_ms=20.0, lat_mean_ms=5.0))
    return table(*rows)


FAST = {"process-per-conn": 5.0, "thread-per-conn": 1.1, "event-loop": 1.0, "green-threads": 0.9,
        "thread-pool": 1.5}


def test_events_fast():
    found = judge("events_fast", events_fast(FAST))
    assert found.verdict == REPRODUCED and "backlog 16" in found.ours and "accept-queue" not in found.why
    no_backlog = judge("events_fast", events_fast(FAST, backlog=False))
    assert no_backlog.verdict == REPRODUCED and no_backlog.why.startswith("accept-queue (--backlog) part not")
    slow = dict(FAST, **{"thread-per-conn": 2.0})
    assert judge("events_fast", events_fast(slow)).verdict == DIRECTION
    wrong = {"process-per-conn": 0.5, "thread-per-conn": 3.0, "event-loop": 1.0, "green-threads": 4.0,
             "thread-pool": 1.5}
    assert judge("events_fast", events_fast(wrong)).verdict == NOT_REPRODUCED
    only_backlog = judge("events_fast", events_fast({}, backlog=True))
    assert only_backlog.verdict == NOT_MEASURED


# ------------------------------------------------------------------------------------------- comparing architectures

def compare_arch(holds=True, with_table6=True):
    rows = [cell("compare_arch", arch="n-copy", lg_throughput=200 if holds else 90, cap_requests=0),
            cell("compare_arch", arch="event-loop", lg_throughput=100, cap_requests=1000)]
    for poller, growth in (("epoll", 1.1), ("poll", 5.0), ("select", 6.0)):
        growth = growth if holds else 7.0 - growth
        rows += [cell("compare_arch", arch="event-loop", poller=poller, think_ms=50, concurrency=c,
                      cpu_ms_per_request=0.01 * (growth if c == 512 else 1)) for c in (16, 512)]
    if with_table6:
        rows += [cell("table6", arch="thread-per-conn", path=BIG, writes_per_request=1.0 if holds else 30.0),
                 cell("table6", arch="event-loop", write_policy="epollout", path=BIG, writes_per_request=20.0)]
    return table(*rows)


def test_compare_arch():
    found = judge("compare_arch", compare_arch())
    assert found.verdict == REPRODUCED and found.data is not None
    assert "n-copy's captures recorded no request" in found.why
    assert judge("compare_arch", compare_arch(with_table6=False)).verdict == REPRODUCED
    assert judge("compare_arch", compare_arch(holds=False)).verdict == NOT_REPRODUCED


# ------------------------------------------------------------------------------------------- process graph

def process_graph(pg_p99, tp_p99=5.0):
    def classes(p99):
        return json.dumps({"/null": {"latency_ms": {"p50": p99 / 2, "p99": p99}},
                           "/compute/2000": {"latency_ms": {"p50": 3.0, "p99": 9.0}}})
    return table(*[cell("process_graph", arch=a, mix="95:/null,5:/compute/2000", path=None, lg_throughput=1000,
                        lg_errors=0, classes_json=classes(p99))
                   for a, p99 in (("process-graph", pg_p99), ("thread-pool", tp_p99)) if p99 is not None])


def test_process_graph():
    assert judge("process_graph", process_graph(2.0)).verdict == REPRODUCED
    assert judge("process_graph", process_graph(4.5)).verdict == DIRECTION
    found = judge("process_graph", process_graph(7.8))
    assert found.verdict == NOT_REPRODUCED and "7.800" in found.ours
    assert judge("process_graph", process_graph(2.0, tp_p99=None)).verdict == NOT_MEASURED


# ------------------------------------------------------------------------------------------- errors

def test_a_criterion_that_raises_is_an_error():
    no_column = table3(4.0, 2.0).drop(columns=["handoffs_per_request"])
    found = claims.CLAIMS[0].judge(no_column)
    assert found.verdict == ERROR and "KeyError" in found.why and "handoffs_per_request" in found.why


def test_sweep_report_shows_errors_and_exits_3(tmp_path, monkeypatch, capsys):
    def broken(tbl):
        raise ValueError("the criterion broke")
    monkeypatch.setattr(claims, "CLAIMS", (replace(claims.CLAIMS[0], criterion=broken), *claims.CLAIMS[1:]))
    table3(4.0, 2.0).to_csv(tmp_path / "results.csv", index=False)
    html = tmp_path / "r.html"
    rc = sweep_report.run(report_args(tmp_path, "--html", html))
    out, err = capsys.readouterr()
    assert rc == sweep_report.EXIT_CLAIM_ERRORS == 3
    assert "ValueError: the criterion broke" in out and "error" in out
    assert "error judging table3: ValueError: the criterion broke" in err
    page = html.read_text()
    assert "ValueError: the criterion broke" in page and ">error<" in page
    rc = sweep_report.run(report_args(tmp_path, "--json"))
    doc = json.loads(capsys.readouterr().out)
    assert rc == 3 and doc["claims"][0]["verdict"] == ERROR


def test_sweep_report_without_errors_exits_0(tmp_path, capsys):
    table3(4.0, 2.0).to_csv(tmp_path / "results.csv", index=False)
    rc = sweep_report.run(report_args(tmp_path, "--html", tmp_path / "r.html", "--json"))
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0
    verdicts = {c["id"]: c["verdict"] for c in doc["claims"]}
    assert verdicts["table3"] == REPRODUCED and set(verdicts.values()) <= {REPRODUCED, NOT_MEASURED}
    assert "data:image/png;base64," in (tmp_path / "r.html").read_text()


# ================================================================================ fanout tier (DoubleFaceAD)

SHARDS = 4
SMALL_F, BIG_F = "/fanout/20/100", "/fanout/8/20000"
DF = {"arch": "fanout-shared", "server_args": "--priority fanout"}


def fo(tag, arch, path=SMALL_F, server_args=None, mix=None, **measured):
    values = {"arch": arch, "shards": SHARDS, "server_args": server_args}
    values.update({"mix": mix} if mix else {"path": path})
    return cell(tag, **values, **measured)


def fanout_tables(holds=True):
    """Table 1-3 cells: the pool's threads and locks at 20 KB; split x1/x2/x4 against shared at 0.1 KB."""
    tag = "fanout_tables"
    rows = [fo(tag, "fanout-pool", BIG_F, fo_threads=40 if holds else 3, fo_threads_created=200 if holds else 0,
               futex_share=0.3, lg_throughput=900),
            fo(tag, "fanout-shared", BIG_F, fo_threads=1, fo_threads_created=0, futex_share=0.0, lg_throughput=1200)]
    tp = {1: 1800, 2: 2700, 4: 2300} if holds else {1: 2800, 2: 2000, 4: 1900}
    for k in (1, 2, 4):
        rows.append(fo(tag, "fanout-split", server_args=f"--backend-loops {k}", threads_seen=1 + k, futex_share=0.0,
                       fo_polls_per_http=1.8 if holds else 0.3, fo_poll_cpu_share=0.044 if holds else 0.01,
                       fo_front_events_per_poll=1.4 if holds else 20.0, fo_backend_events_per_poll=34.0,
                       lg_throughput=tp[k]))
    rows.append(fo(tag, "fanout-shared", threads_seen=1, futex_share=0.0, fo_polls_per_http=0.5,
                   fo_poll_cpu_share=0.027, fo_front_events_per_poll=42.0, lg_throughput=1900))
    return table(*rows)


def test_fanout_tables():
    found = judge("fanout_tables", fanout_tables())
    assert found.verdict == REPRODUCED, found.why
    assert "paper 0.7 vs 22.7" in found.ours and any(r[1] == "fanout-split x2" for r in found.rows)
    failing = judge("fanout_tables", fanout_tables(holds=False))
    assert failing.verdict == NOT_REPRODUCED and "Table 3" in failing.why and "Table 1" in failing.why
    # F = 1: nothing fans out, no comparison is made
    assert judge("fanout_tables", table(fo("fanout_tables", "fanout-split", "/fanout/1/100", lg_throughput=1.0),
                                        fo("fanout_tables", "fanout-shared", "/fanout/1/100"))).verdict == NOT_MEASURED


def fanout_versus(tag, column, doubleface, split, pool, sync, mix=None):
    kw = {"mix": mix} if mix else {}
    return table(fo(tag, DF["arch"], server_args=DF["server_args"], **kw, **{column: doubleface}),
                 fo(tag, "fanout-shared", **kw, **{column: doubleface * 0.9}),
                 fo(tag, "fanout-split", server_args="--backend-loops 1", **kw, **{column: split[0]}),
                 fo(tag, "fanout-split", server_args="--backend-loops 2", **kw, **{column: split[1]}),
                 fo(tag, "fanout-pool", **kw, **{column: pool}), fo(tag, "fanout-sync", **kw, **{column: sync}))


def test_fanout_fig13():
    tag = "fanout_fig13"
    found = judge(tag, fanout_versus(tag, "lg_throughput", 3000, (2000, 2500), 2200, 2400))
    assert found.verdict == REPRODUCED and "+20% over fanout-split" in found.ours  # split: its best K (2500)
    assert judge(tag, fanout_versus(tag, "lg_throughput", 3000, (2000, 2900), 2200, 2400)).verdict == DIRECTION
    assert judge(tag, fanout_versus(tag, "lg_throughput", 2000, (2000, 2900), 2200, 2400)).verdict == NOT_REPRODUCED
    no_df = table(fo(tag, "fanout-pool", lg_throughput=1.0), fo(tag, "fanout-sync", lg_throughput=2.0))
    assert judge(tag, no_df).verdict == NOT_MEASURED


def test_fanout_fig15():
    tag, mix = "fanout_fig15", "90:/fanout/1/100,10:/fanout/20/20000"
    found = judge(tag, fanout_versus(tag, "lat_p99_ms", 3.0, (9.0, 6.0), 8.0, 7.0, mix=mix))
    assert found.verdict == REPRODUCED and "2.00x" in found.ours  # split's best K: the lowest p99
    assert judge(tag, fanout_versus(tag, "lat_p99_ms", 3.0, (9.0, 4.0), 8.0, 7.0, mix=mix)).verdict == DIRECTION
    assert judge(tag, fanout_versus(tag, "lat_p99_ms", 7.0, (9.0, 4.0), 5.0, 7.0, mix=mix)).verdict == NOT_REPRODUCED
    assert judge(tag, table(fo(tag, "fanout-pool", mix=mix, lat_p99_ms=4.0))).verdict == NOT_MEASURED


def test_fanout_cells_tell_backend_loops_apart():
    """Cells differing only in --backend-loops are separate settings, not repetitions averaged together."""
    d = tagged(fanout_tables(), "fanout_tables")
    assert len(d[d["arch"] == "fanout-split"]) == 3
# ============================================================================ end of the fanout tier


# ==================================================================== disk-bound comparison (compare_arch_disk)

def compare_disk(bound, cached=(20000, 20000, 20000, 20000), read_kb=100.0):
    """bound/cached: req/s of event-loop, n-copy, thread-per-conn, pipeline (None: not measured)."""
    rows = []
    for arch, b, c in zip(("event-loop", "n-copy", "thread-per-conn", "pipeline"), bound, cached):
        workers = 2 if arch in ("n-copy", "pipeline") else None
        if b is not None:
            rows.append(cell("compare_arch_disk", arch=arch, workers=workers, path="/file/*", file_set="2048x128K",
                             memory_max="48M", lg_throughput=b, lat_p99_ms=10.0, dk_read_kb_per_request=read_kb))
        if c is not None:
            rows.append(cell("compare_arch_disk", arch=arch, workers=workers, path="/file/*", file_set="256x128K",
                             lg_throughput=c, lat_p99_ms=2.0, dk_read_kb_per_request=0.0))
    return table(*rows)


def test_compare_arch_disk():
    found = judge("compare_arch_disk", compare_disk((2000, 5000, 4000, 5200)))
    assert found.verdict == REPRODUCED, found.why
    assert found.ours.startswith("disk-bound req/s SPED 2")
    # measured here: thread-per-conn ahead, n-copy no better than the single loop
    measured = judge("compare_arch_disk", compare_disk((3184, 3034, 5636, 4650), (24661, 23431, 20559, 20571)))
    assert measured.verdict == NOT_REPRODUCED and "n-copy ahead of thread-per-conn" in measured.why
    # no page-cache misses: the cells did not test the disk
    assert judge("compare_arch_disk", compare_disk((2000, 5000, 4000, 5200), read_kb=0.0)).verdict == NOT_MEASURED
    assert judge("compare_arch_disk", compare_disk((None,) * 4)).verdict == NOT_MEASURED  # cached cells only


def test_compare_arch_ignores_file_cells():
    """compare_arch's n-copy vs event-loop uses the in-memory cells only, not the disk-bound ones."""
    rows = [cell("compare_arch", arch="n-copy", lg_throughput=200), cell("compare_arch", arch="event-loop", lg_throughput=100),
            cell("compare_arch", arch="n-copy", path="/file/*", file_set="2048x128K", memory_max="48M", lg_throughput=1),
            cell("compare_arch", arch="event-loop", path="/file/*", file_set="2048x128K", memory_max="48M",
                 lg_throughput=1000)]
    assert judge("compare_arch", table(*rows)).verdict == REPRODUCED
# ================================================================================ end of the disk comparison

# =========================================================================================== claims block:
# crossover, table6_default, events_fast_ab, process_graph_bounded, server_cpus, and the process_graph fix.

def crossover(ratios, net="veth"):
    """thread-per-conn at 1000 req/s and the two event loops at `ratios` of it, at c = 10, 100, 1000."""
    rows = []
    for conc, r in zip((10, 100, 1000), ratios):
        rows.append(cell("crossover", arch="thread-per-conn", net=net, sndbuf=16384, server_cpus="0", path=BIG,
                         concurrency=conc, lg_throughput=1000.0, writes_per_request=1.0))
        for policy in ("spin", "epollout"):
            rows.append(cell("crossover", arch="event-loop", write_policy=policy, net=net, sndbuf=16384,
                             server_cpus="0", path=BIG, concurrency=conc, lg_throughput=1000.0 * r,
                             writes_per_request=40.0 if policy == "spin" else 2.0))
    return table(*rows)


def test_crossover():
    found = judge("crossover", crossover([0.8, 1.2, 1.5]))
    assert found.verdict == REPRODUCED and found.data is not None
    assert "crossover at c~" in found.ours and "between c=10 and c=100" in found.ours
    assert len(found.rows) == 3 and found.rows[0][0] == "veth, sndbuf 16384, server CPUs 0"
    assert judge("crossover", crossover([0.98, 1.01, 1.02])).verdict == DIRECTION  # a crossover inside the margin
    assert judge("crossover", crossover([0.3, 0.5, 0.8])).verdict == DIRECTION  # gains, never overtakes
    lost = judge("crossover", crossover([0.58, 0.28, 0.56]))  # measured on veth: the loop never gains
    assert lost.verdict == NOT_REPRODUCED and "thread-per-conn still ahead at c=1000" in lost.ours
    reversed_ = judge("crossover", crossover([1.4, 0.9, 0.7]))
    assert reversed_.verdict == NOT_REPRODUCED
    tpc_only = crossover([0.8, 1.2, 1.5])
    assert judge("crossover", tpc_only[tpc_only["arch"] == "thread-per-conn"]).verdict == NOT_MEASURED
    small = crossover([0.8, 1.2, 1.5]).assign(path=SMALL)
    assert judge("crossover", small).verdict == NOT_MEASURED  # only the 100 KB cells count


def test_crossover_point():
    point, how = crossover_point([10, 100, 1000], [0.5, 1.5, 2.0])
    assert point == pytest.approx(10 ** 1.5) and "c=10 and c=100" in how  # halfway in log(concurrency)
    assert crossover_point([10, 100, 1000], [1.1, 1.5, 2.0])[0] is None  # ahead from the start
    assert crossover_point([10, 100, 1000], [0.5, 1.5, 0.9])[0] is None  # behind again at the top
    assert crossover_point([10, 100, 1000], [0.5, 1.5, 1.2])[0] == pytest.approx(10 ** 1.5)
    assert crossover_point([10], [0.5])[0] is None


def table6_default(spin_big, spin_small=1.0, tpc_big=1.0):
    rows = [cell("table6_default", arch="event-loop", write_policy="spin", net="veth", sndbuf=16384, path=p,
                 writes_per_request=w, eagain_per_request=w - 1, sndbuf_effective="32768")
            for p, w in ((SMALL, spin_small), ("/bytes/10240", spin_small), (BIG, spin_big)) if w is not None]
    rows.append(cell("table6_default", arch="thread-per-conn", net="veth", sndbuf=16384, path=BIG,
                     writes_per_request=tpc_big, eagain_per_request=0, sndbuf_effective="32768"))
    return table(*rows)


def test_table6_default():
    assert TABLE6_DEFAULT_EXPECTED == 51  # 102 writes x 16384 asked / 32768 given
    low, high = TABLE6_DEFAULT_RANGE
    found = judge("table6_default", table6_default(22.6))
    assert found.verdict == REPRODUCED and "0.22x the paper's 102" in found.ours
    assert found.rows[0][-2] == "32768"
    assert judge("table6_default", table6_default(high + 1)).verdict == DIRECTION
    assert low == 6.25 and high == 204
    assert judge("table6_default", table6_default(5.0)).verdict == DIRECTION  # spins, below one EAGAIN per fill
    assert judge("table6_default", table6_default(22.6, spin_small=3.0)).verdict == DIRECTION
    assert judge("table6_default", table6_default(2.0)).verdict == NOT_REPRODUCED
    assert judge("table6_default", table6_default(None)).verdict == NOT_MEASURED
    # the 4 KB cells' claim is not changed by default-window cells, nor the other way round
    both = pd.concat([table6_default(22.6), table6(300.0)], ignore_index=True)
    assert judge("table6", both).verdict == REPRODUCED and "300" in judge("table6", both).ours
    assert judge("table6_default", both).verdict == REPRODUCED


def events_fast_ab(throughputs, keepalive="off"):
    return table(*[cell("events_fast_ab", arch=a, keepalive=keepalive, concurrency=conc, lg_throughput=tp,
                        lat_p99_ms=1000.0 / tp)
                   for conc in (8, 64) for a, tp in throughputs.items()])


AB = {"event-loop": 19000.0, "green-threads": 21000.0, "thread-per-conn": 16000.0, "process-per-conn": 4500.0}


def test_events_fast_ab():
    found = judge("events_fast_ab", events_fast_ab(AB))
    assert found.verdict == REPRODUCED and "c=64" in found.ours
    measured = dict(AB, **{"thread-per-conn": 13700.0})  # what the sweep measured: threads 28% below the loop
    slow = judge("events_fast_ab", events_fast_ab(measured))
    assert slow.verdict == DIRECTION and "thread-per-conn at least 80%" in slow.why
    wrong = {"event-loop": 19000.0, "green-threads": 9000.0, "thread-per-conn": 5000.0, "process-per-conn": 8000.0}
    assert judge("events_fast_ab", events_fast_ab(wrong)).verdict == NOT_REPRODUCED
    assert judge("events_fast_ab", events_fast_ab(AB, keepalive="on")).verdict == NOT_MEASURED


def pg_cell(tag, arch, p99, tp=400.0, conc=32, keepalive="on", mx=None, workers=8):
    classes = json.dumps({"/null": {"latency_ms": {"p50": p99 / 4, "p99": p99, "max": p99 * 2}},
                          "/compute/2000": {"latency_ms": {"p50": 3.0, "p99": 9.0, "max": 12.0}}})
    return cell(tag, arch=arch, workers=workers, mix="90:/null,10:/compute/2000", path=None, rate=400,
                burst="1:2000:0.5", concurrency=conc, keepalive=keepalive, lg_throughput=tp, lg_errors=0,
                classes_json=classes, lat_max_ms=mx or p99 * 2)


def test_process_graph_bounded():
    tag = "process_graph_bounded"
    assert judge(tag, table(pg_cell(tag, "process-graph", 2.0), pg_cell(tag, "thread-pool", 10.0))).verdict == REPRODUCED
    assert judge(tag, table(pg_cell(tag, "process-graph", 9.0), pg_cell(tag, "thread-pool", 10.0))).verdict == DIRECTION
    worse = judge(tag, table(pg_cell(tag, "process-graph", 10.0), pg_cell(tag, "thread-pool", 2.0)))
    assert worse.verdict == NOT_REPRODUCED and "max 20.0 vs 4.0" in worse.why
    # not at equal throughput: the server that served less is the worse one, whatever its percentiles
    behind = table(pg_cell(tag, "process-graph", 10.0), pg_cell(tag, "thread-pool", 2.0, tp=380.0))
    assert judge(tag, behind).verdict == REPRODUCED and "the pool served 5% less" in judge(tag, behind).why
    pg_behind = table(pg_cell(tag, "process-graph", 2.0, tp=380.0), pg_cell(tag, "thread-pool", 10.0))
    assert judge(tag, pg_behind).verdict == NOT_REPRODUCED
    assert judge(tag, table(pg_cell(tag, "process-graph", 2.0))).verdict == NOT_MEASURED


def test_process_graph_judges_every_cell():
    """The full matrix has several loads and worker counts: each process-graph cell is compared with the
    thread-pool under the same load (it used to keep only the last cell of each arch)."""
    tag = "process_graph"
    rows = [pg_cell(tag, "process-graph", 2.0, conc=64, workers=2), pg_cell(tag, "process-graph", 3.0, conc=64, workers=4),
            pg_cell(tag, "thread-pool", 10.0, conc=64, workers=64),
            pg_cell(tag, "process-graph", 12.0, conc=32, workers=2), pg_cell(tag, "thread-pool", 6.0, conc=32, workers=64)]
    found = judge(tag, table(*rows))
    assert len(found.rows) == 5
    assert found.verdict == DIRECTION and "2/3 comparisons" in found.why  # the c=32 pair fails
    assert judge(tag, table(*rows[:3])).verdict == REPRODUCED
    assert judge(tag, table(*rows[3:])).verdict == NOT_REPRODUCED


def server_cpus(nc1, el1, nc2, el2):
    return table(*[cell("server_cpus", arch=a, workers=2 if a == "n-copy" else None, server_cpus=cpus, concurrency=32,
                        lg_throughput=tp)
                   for a, cpus, tp in (("n-copy", "0", nc1), ("event-loop", "0", el1),
                                       ("n-copy", "0-1", nc2), ("event-loop", "0-1", el2))])


def test_server_cpus():
    assert _ncpus("0-1") == 2 and _ncpus("0,2-3") == 3 and _ncpus(0) == 1
    found = judge("server_cpus", server_cpus(95.0, 100.0, 170.0, 100.0))
    assert found.verdict == REPRODUCED and "n-copy x1.79" in found.ours
    measured = judge("server_cpus", server_cpus(85.6, 94.4, 96.6, 91.3))  # the sweep's numbers
    assert measured.verdict == DIRECTION and "10% ahead" in measured.why
    assert judge("server_cpus", server_cpus(60.0, 100.0, 60.0, 100.0)).verdict == NOT_REPRODUCED
    unpinned = server_cpus(1, 1, 1, 1).assign(server_cpus=float("nan"))
    assert judge("server_cpus", unpinned).verdict == NOT_MEASURED
# =========================================================================================== end claims block
# ============================================================================ Figures 10-12: added delay
# fig11_12's delay part (criteria.event_flow.fig11_12_latency_and_window): the spinning loop's writes per response and
# throughput against delay_ms, next to --write-policy epollout.

def fig11_delay(spin, contrast=None, windows=(316.0, 38.0, 39.0)):
    """fig11_12 cells: the receive-window series at no delay, plus the delay series at rcvbuf 4096: `spin` and
    `contrast` map delay_ms to (writes per response, req/s); the spin's entry at 0 is the window series' 4096."""
    rows = [cell("fig11_12", arch="event-loop", write_policy="spin", net="veth", sndbuf=16384, path=BIG,
                 rcvbuf=rcvbuf, writes_per_request=w, eagain_per_request=w - 1, rtt_ms=0.04,
                 lg_throughput=spin.get(0, (0, 1000))[1] if rcvbuf == 4096 else 15000)
            for rcvbuf, w in zip((4096, 65536, 1048576), windows)]
    for policy, series in (("spin", spin), ("epollout", contrast or {})):
        for delay, (writes, tp) in series.items():
            if policy == "spin" and delay == 0 and windows:
                continue  # the window series' rcvbuf 4096 cell is this one
            rows.append(cell("fig11_12", arch="event-loop", write_policy=policy, net="veth", sndbuf=16384,
                             path=BIG, rcvbuf=4096, delay_ms=delay, writes_per_request=writes,
                             eagain_per_request=writes - 1, rtt_ms=delay + 0.05, lg_throughput=tp))
    return table(*rows)


SPIN_DELAYS = {0: (316.0, 1200.0), 5: (132000.0, 5.3), 20: (420000.0, 1.3)}  # a sweep's numbers, rounded
EPOLLOUT_DELAYS = {0: (40.0, 2000.0), 5: (30.0, 25.0), 20: (30.0, 6.0)}


def test_fig11_12_delay_part_reproduced():
    found = judge("fig11_12", fig11_delay(SPIN_DELAYS, EPOLLOUT_DELAYS))
    assert found.verdict == REPRODUCED, found.why
    assert "5/5 comparisons hold" in found.why  # window; writes grow; drop at +5 ms; below epollout at 5 and 20
    assert "-99.6%" in found.ours and "paper -95%" in found.ours
    assert found.data["spin"]["delay_n"].tolist() == [0, 5, 20] and found.data["by_window"] is not None
    assert {r[0] for r in found.rows} == {"event-loop (spin)", "event-loop (epollout)"}


def test_fig11_12_delay_part_fails():
    # No write-spin growth with delay, a 50% drop (not 95%), and the spinning loop above epollout: 1 of 5 hold.
    flat = {0: (316.0, 1200.0), 5: (300.0, 600.0), 20: (310.0, 300.0)}
    found = judge("fig11_12", fig11_delay(flat, {0: (40.0, 2000.0), 5: (30.0, 500.0), 20: (30.0, 200.0)}))
    assert found.verdict == NOT_REPRODUCED
    assert "writes per response grow with delay" in found.why and "within 5% of the paper's 95%" in found.why
    # The drop alone off the paper's number (70% where it says 95%): direction, and the failing check named.
    mild = {0: (316.0, 1200.0), 5: (5000.0, 360.0), 20: (20000.0, 100.0)}
    found = judge("fig11_12", fig11_delay(mild, EPOLLOUT_DELAYS | {5: (30.0, 400.0), 20: (30.0, 150.0)}))
    assert found.verdict == DIRECTION and "(-70.0%; paper -95%)" in found.ours
    assert found.why == "4/5 comparisons hold; fails: throughput drop at +5 ms within 5% of the paper's 95%"


def test_fig11_12_delay_part_not_measured():
    # Only the window series: direction at most, saying the delay part was not measured.
    found = judge("fig11_12", fig11_delay({}))
    assert found.verdict == DIRECTION and found.why.endswith("delay part not measured")
    # Only the delay series (no window axis): judged on it, direction at most.
    only_delay = judge("fig11_12", fig11_delay(SPIN_DELAYS, EPOLLOUT_DELAYS, windows=()))
    assert only_delay.verdict == DIRECTION and "receive-window part not measured" in only_delay.why
    # Delayed cells that failed: not measured, with their error.
    failed = table(cell("fig11_12", status="failed", arch="event-loop", write_policy="spin", net="veth",
                        delay_ms=5, rcvbuf=4096, error="delay unsupported here: delayline not built"))
    found = judge("fig11_12", failed)
    assert found.verdict == NOT_MEASURED and "delayline not built" in found.why
    # A delay series without its no-delay point cannot say how much was lost: the delay part is not measured.
    no_base = judge("fig11_12", fig11_delay({5: (132000.0, 5.3)}, windows=()))
    assert no_base.verdict == NOT_MEASURED

