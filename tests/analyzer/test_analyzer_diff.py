"""`spinscope diff`: the verdict names what changed, and changes are judged against interval noise."""

from __future__ import annotations

import json

import captures
from spinscope.capture import load
from spinscope.diff import compare_captures
from spinscope.metrics import analyze
from spinscope.noise import SIGNIFICANT, TOO_FEW, WITHIN_NOISE, compare, t_critical


def comparison(before, after, capture_file):
    return compare_captures(analyze(load(capture_file(before, "before.json"))),
                            analyze(load(capture_file(after, "after.json"))))


def test_handoff_overhead_appears(capture_file, cli):
    before = capture_file(captures.thread_per_connection(), "before.json")
    after = capture_file(captures.reactor_split(), "after.json")
    result = cli("diff", before, after)
    assert result.returncode == 0, result.stderr
    verdict = result.stdout.splitlines()[0]
    assert verdict == ("after: +4.0 handoffs per request and handoff wake-to-run wait 0.00 → 0.08 ms per request: "
                       "handoff overhead appeared")
    assert "appeared (critical): handoff overhead:" in result.stdout
    doc = json.loads(cli("diff", "--json", before, after).stdout)
    assert doc["verdict"] == verdict
    assert doc["labels"] == {"appeared": ["handoff-overhead"], "disappeared": [], "unchanged": []}
    handoffs = next(m for m in doc["metrics"] if m["name"] == "handoffs_per_request")
    assert handoffs["before"] == 0 and handoffs["after"] == 4 and handoffs["noise"] == SIGNIFICANT


def test_fix_makes_write_spin_disappear(capture_file):
    after = captures.write_spin_server(writes_per_request=1, eagain_per_request=0, partial_per_request=0,
                                       spin_per_request=0, futile_per_request=0)
    for row in (after["threads"][0], after["totals"]):
        row["write_spin_eagain_ns"] = row["write_spin_ns"] = 0
    result = comparison(captures.write_spin_server(), after, capture_file)
    assert result.verdict() == ("after: -35.0 EAGAIN retries without waiting per request and CPU in EAGAIN "
                                "retries without waiting 50% → 0%: write-spin disappeared")


def faster(**overrides):
    """The clean loop serving 20% more requests with the same counters per second."""
    return captures.clean_event_loop(requests=24_000, **overrides)


def test_change_within_wide_noise(capture_file):
    result = comparison(captures.clean_event_loop(jitter=0.5, seed=1), faster(jitter=0.5, seed=2), capture_file)
    assert result.change("requests_per_s").noise.verdict == WITHIN_NOISE
    assert result.verdict() == "after: no change beyond the run-to-run noise; no label appeared or disappeared"


def test_change_beyond_tight_noise(capture_file, cli):
    result = comparison(captures.clean_event_loop(jitter=0.01, seed=1), faster(jitter=0.01, seed=2), capture_file)
    assert result.change("requests_per_s").noise.verdict == SIGNIFICANT
    assert result.verdict().startswith("after: +20% requests/s")
    out = cli("diff", capture_file(captures.clean_event_loop(jitter=0.01, seed=1), "b.json"),
              capture_file(faster(jitter=0.01, seed=2), "a.json")).stdout
    assert "significant" in out and "Welch's t-test on the 10 before and 10 after" in out


def test_too_few_intervals_is_said(capture_file, cli):
    before = capture_file(captures.clean_event_loop(intervals=2), "before.json")
    after = capture_file(faster(intervals=2), "after.json")
    out = cli("diff", before, after).stdout
    verdict = out.splitlines()[0]
    assert verdict.startswith("after: +20% requests/s and ")
    assert verdict.endswith(f"({TOO_FEW}); no label appeared or disappeared")
    assert "too few intervals to judge noise: before has 2 and after 2 full intervals" in out


def test_diff_html(capture_file, cli, tmp_path):
    out = tmp_path / "diff.html"
    cli("diff", capture_file(captures.thread_per_connection(), "b.json"),
        capture_file(captures.reactor_split(), "a.json"), "--html", out)
    html = out.read_text()
    assert "handoff overhead appeared" in html and html.count("data:image/png;base64,") == 2


def test_welch_t_test():
    assert compare([1, 2], [5, 6, 7]).verdict == TOO_FEW
    assert compare([10, 11, 9, 10], [10, 9, 11, 10]).verdict == WITHIN_NOISE
    assert compare([10, 11, 9, 10], [20, 21, 19, 20]).verdict == SIGNIFICANT
    assert compare([5, 5, 5], [5, 5, 5]).verdict == WITHIN_NOISE
    assert compare([5, 5, 5], [6, 6, 6]).verdict == SIGNIFICANT
    assert t_critical(1) == 12.706 and t_critical(2.7) == 4.303
    assert abs(t_critical(60) - 2.000) < 0.002 and abs(t_critical(1e6) - 1.960) < 0.001
