"""Loading captures: valid ones become frames; every bad input is one clear line, never a traceback."""

from __future__ import annotations

import json

import pytest

import captures
from spinscope.analysis.capture import load
from spinscope.analysis.schema import COUNTERS, SCHEMA
from spinscope.errors import SpinscopeError
from paths import CAPTURES


def test_frames_hold_what_the_document_says(capture_file):
    cap = load(capture_file(captures.reactor_split()))
    assert list(cap.threads) == [300, 301, 302, 303, 304]
    assert all(set(COUNTERS) <= set(thread) and thread["tid"] == tid for tid, thread in cap.threads.items())
    assert cap.threads[300]["poll_calls"] == 12_000
    assert cap.totals["wakeups_sent"] == sum(edge["count"] for edge in cap.wakeups) == 40_000
    assert cap.request_count == 10_000
    assert list(cap.by_size[0])[:2] == ["bytes_min", "bytes_max"]
    assert len(cap.intervals) == 10 and sum(row["requests"] for row in cap.intervals) == 10_000
    assert cap.name == "reactor (pid 300)"


def test_capture_without_intervals_or_requests_loads(capture_file):
    doc = captures.capture([captures.thread(1, poll_calls=5)], intervals=0)
    cap = load(capture_file(doc))
    assert cap.intervals == [] and cap.request_count == 0 and cap.by_size == []


def bad_documents():
    good = captures.clean_event_loop()
    text = json.dumps(good)
    newer = {**good, "schema": SCHEMA + 1}
    no_threads = {k: v for k, v in good.items() if k != "threads"}
    thread_lacks_counter = json.loads(text)
    del thread_lacks_counter["threads"][0]["poll_zero"]
    string_counter = json.loads(text)
    string_counter["totals"]["write_calls"] = "12"
    return {
        "empty": (b"", "not a spinscope capture (empty file)"),
        "truncated": (text[: len(text) // 2].encode(), "not a spinscope capture (truncated JSON at byte"),
        "not-json": (b"hello, world\n", "not a spinscope capture (invalid JSON at byte 0"),
        "binary": (b"\x89PNG\r\n\x1a\n\x00\xff", "not a spinscope capture (not UTF-8 text"),
        "other-json": (json.dumps({"traceEvents": []}).encode(), 'not a spinscope capture (no "format"'),
        "json-list": (b"[1, 2, 3]", 'not a spinscope capture (no "format"'),
        "newer-schema": (json.dumps(newer).encode(),
                         f"schema {SCHEMA + 1} is newer than this spinscope understands ({SCHEMA}); upgrade spinscope"),
        "missing-threads": (json.dumps(no_threads).encode(), "malformed spinscope capture: top level lacks 'threads'"),
        "missing-counter": (json.dumps(thread_lacks_counter).encode(),
                            "malformed spinscope capture: threads[0] lacks 'poll_zero'"),
        "string-counter": (json.dumps(string_counter).encode(), "totals.write_calls is not a count ('12')"),
    }


@pytest.mark.parametrize("case", sorted(bad_documents()))
def test_bad_capture_is_one_line_error(case, tmp_path, cli):
    content, expected = bad_documents()[case]
    path = tmp_path / "capture.json"
    path.write_bytes(content)
    assert_one_line_error(cli("report", path), "report", expected)


def test_diff_reports_the_bad_side(tmp_path, capture_file, cli):
    good = capture_file(captures.clean_event_loop(), "before.json")
    bad = tmp_path / "capture.json"
    bad.write_text('{"schema": 1, "format": "spinscope-capture", "duration_s": 1')
    assert_one_line_error(cli("diff", good, bad), "diff", "truncated JSON")


def assert_one_line_error(result, verb: str, expected: str) -> None:
    assert result.returncode != 0
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"spinscope {verb}: error: capture.json: ")
    assert expected in lines[0]


def test_missing_file_and_directory(tmp_path, cli):
    result = cli("report", tmp_path / "nope.json")
    assert result.returncode == 1
    assert result.stderr.strip() == f"spinscope report: error: {tmp_path / 'nope.json'}: no such file"
    result = cli("report", tmp_path)
    assert result.returncode == 1 and "is a directory" in result.stderr and "Traceback" not in result.stderr


def test_load_raises_spinscope_error_not_json_error(tmp_path):
    path = tmp_path / "c.json"
    text = '{"schema": 1, "format": "spinscope-capture", "threads": ['
    path.write_text(text)
    with pytest.raises(SpinscopeError, match=rf"c.json: not a spinscope capture \(truncated JSON at byte {len(text)}\)"):
        load(path)


GOLDEN = sorted(CAPTURES.glob("*.json"))


@pytest.mark.skipif(not GOLDEN, reason="no golden captures from the collector in tests/data/captures yet")
@pytest.mark.parametrize("path", GOLDEN, ids=[p.name for p in GOLDEN])
def test_golden_captures_load_and_report(path):
    from spinscope.analysis.labels import assess
    from spinscope.analysis.metrics import analyze

    analysis = analyze(load(path))
    assess(analysis)
    assert len(analysis.threads) == analysis.capture.raw["totals"]["threads_seen"]


SCHEMA1 = sorted((CAPTURES / "schema1").glob("*.json"))


@pytest.mark.parametrize("path", SCHEMA1, ids=[p.name for p in SCHEMA1])
def test_schema1_captures_load_with_counts_and_no_verdict(path):
    """Captures of the first collector (no measured costs) still load and report, and say why no
    verdict is drawn."""
    from spinscope.analysis.labels import assess
    from spinscope.analysis.metrics import analyze

    cap = load(path)
    assert cap.schema == 1 and not cap.costs_measured and cap.request_count > 0
    assessment = assess(analyze(cap))
    assert assessment.labels == [] and "no verdict is drawn" in assessment.notes[0]


def test_accessors_read_what_readers_need_with_older_schemas_defaults(capture_file):
    """The properties readers use instead of the raw document: the fixture is schema 2, so what schema 3
    and 4 added reads as empty or None."""
    doc = captures.reactor_split()
    doc["end_reason"] = "checkpoint"
    cap = load(capture_file(doc))
    assert (cap.target_pid, cap.target_comm, cap.target_exe, cap.target_pids) == (300, "reactor", "", [300])
    assert cap.end_reason == "checkpoint" and cap.execs == [] and cap.threads_folded == []
    assert cap.threads_seen == 5 and cap.threads_created == 4 and cap.threads_exited == 0
    assert cap.collector_usage == {"cpu_s": None, "max_rss_bytes": None, "map_bytes": None}
    doc.update(schema=4, tool=dict(doc["tool"], cpu_s=0.5, max_rss_bytes=2**20, map_bytes=4096))
    doc["target"].update(exe="/usr/bin/reactor", execs=[{"pid": 300, "t_s": 1.0, "count": 1, "comm": "reactor",
                                                          "filename": "/usr/bin/reactor"}])
    cap = load(capture_file(doc, "schema4.json"))
    assert cap.collector_usage == {"cpu_s": 0.5, "max_rss_bytes": 2**20, "map_bytes": 4096}
    assert cap.target_exe == "/usr/bin/reactor" and [e["pid"] for e in cap.execs] == [300]
