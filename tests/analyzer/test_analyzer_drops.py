"""Captures whose collector dropped events (a full map): their counts are lower bounds, and report and diff
say so, naming what the drops touch. Two captures of one server at different map sizes once gave
"+4872% writes/s" and no warning."""

from __future__ import annotations

import json

import captures
from spinscope.analysis.capture import load
from spinscope.analysis.comparison import compare_captures
from spinscope.analysis.metrics import DROPS, METRIC_BY_NAME, REQUEST_METRICS, analyze
from spinscope.analysis.schema import DROP_KEYS
from spinscope.output.diff import DROPS_HEADER, change_rows

DROPPED = {"threads": 812, "sockets": 40, "wakeup_edges": 0, "pids": 0, "exited": 0, "execs": 0, "listeners": 0}


def clean(**drops) -> dict:
    doc = captures.clean_event_loop(jitter=0.01, seed=1)
    doc["drops"].update(drops)
    return doc


def faster(**drops) -> dict:
    doc = captures.clean_event_loop(requests=24_000, jitter=0.01, seed=2)
    doc["drops"].update(drops)
    return doc


def test_every_kind_of_drop_is_described():
    assert tuple(drop.key for drop in DROPS) == DROP_KEYS
    assert all(set(drop.metrics) <= set(METRIC_BY_NAME) for drop in DROPS)
    assert set(REQUEST_METRICS) <= set(METRIC_BY_NAME)


def test_comparison_without_drops_is_unqualified(capture_file):
    comparison = compare_captures(analyze(load(capture_file(clean(), "b.json"))),
                                  analyze(load(capture_file(faster(), "a.json"))))
    assert comparison.drops == [] and comparison.drops_warning() is None
    assert comparison.verdict().startswith("after: ")
    assert all(len(row) == 6 for row in change_rows(comparison))


def test_diff_leads_with_the_drops_and_marks_the_metrics_they_touch(capture_file, cli, tmp_path):
    before, after = capture_file(clean(), "b.json"), capture_file(faster(**DROPPED), "a.json")
    result = cli("diff", before, after)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("WARNING: events dropped (after: 812 threads, 40 sockets): counts are lower "
                               "bounds, a change may be the drops' doing; after: ")
    assert any("after: 812 events of threads the threads map had no room for (every count is a lower bound" in line for line in lines)
    assert any("after: 40 socket reads the sockets map had no room for" in line for line in lines)
    assert DROPS_HEADER in result.stdout
    rows = {line.split()[1]: line for line in lines if line.startswith("│")}
    assert "after: threads, sockets" in rows["writes_per_request"]  # a per-request metric: both
    assert "after: threads" in rows["writes_per_s"] and "sockets" not in rows["writes_per_s"]

    doc = json.loads(cli("diff", "--json", before, after).stdout)
    assert doc["verdict"] == lines[0]
    assert doc["drops"]["after"] == DROPPED and doc["drops"]["before"]["threads"] == 0
    assert doc["drops"]["warning"] and len(doc["drops"]["effects"]) == 2
    metrics = {m["name"]: m for m in doc["metrics"]}
    assert metrics["requests_per_s"]["drops"] == [{"side": "after", "kind": "threads"},
                                                  {"side": "after", "kind": "sockets"}]

    out = tmp_path / "diff.html"
    assert cli("diff", before, after, "--html", out).returncode == 0
    page = out.read_text()
    assert "Dropped events" in page and "812 events of threads the threads map had no room for" in page and DROPS_HEADER in page


def test_drops_on_both_sides_and_of_the_graph_only(capture_file):
    comparison = compare_captures(analyze(load(capture_file(clean(pids=3), "b.json"))),
                                  analyze(load(capture_file(faster(wakeup_edges=7), "a.json"))))
    assert comparison.drops_warning().startswith("WARNING: events dropped (before: 3 pids; after: 7 wakeup_edges)")
    rows = {row[0]: row[-1] for row in change_rows(comparison)}
    assert rows["handoffs_per_request"] == "before: pids"  # the handoff counts are whole without their edges


def test_report_notes_the_drops_and_what_they_touch(capture_file, cli):
    out = " ".join(cli("report", capture_file(faster(**DROPPED))).stdout.split())  # unwrapped
    assert "note: the collector dropped events, a map being full: 812 events of threads the threads map had no room for" in out
    assert "record again with a larger --max-threads" in out
    assert "40 socket reads the sockets map had no room for" in out
    doc = json.loads(cli("report", "--json", capture_file(faster(**DROPPED))).stdout)
    assert doc["capture"]["drops"] == DROPPED
    assert any("812 events of threads the threads map had no room for" in note for note in doc["notes"])
