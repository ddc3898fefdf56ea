"""`spinscope diff`: the verdict names what changed, and changes are judged against interval noise."""

from __future__ import annotations

import json
from pathlib import Path

import captures
from spinscope.capture import load
from spinscope.diff import LABEL_METRICS, change_rows, compare_captures, to_json
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
    assert verdict == ("after: +4 handoffs per request and handoff wake-to-run wait 0 → 0.08 ms per request: "
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
        row["write_spin_ns"] = 0
    result = comparison(captures.write_spin_server(), after, capture_file)
    assert result.verdict() == ("after: -35 retries of an EAGAIN without waiting per request and CPU retrying writes "
                                "without waiting 50% → 0%: write-spin disappeared")


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
    # The same work for more requests: the cost per request leads, the rate follows in the table.
    assert result.verdict().startswith("after: -17% CPU per request (0.03 → 0.025 ms per request) and ")
    rows = {row[0]: row for row in change_rows(result)}
    assert rows["requests_per_s"][2:5] == ["2,000", "2,400", "+400 (+20%)"]
    out = cli("diff", capture_file(captures.clean_event_loop(jitter=0.01, seed=1), "b.json"),
              capture_file(faster(jitter=0.01, seed=2), "a.json")).stdout
    assert "significant" in out and "Welch's t-test on the 10 before and 10 after" in out


def test_too_few_intervals_is_said(capture_file, cli):
    before = capture_file(captures.clean_event_loop(intervals=2), "before.json")
    after = capture_file(faster(intervals=2), "after.json")
    out = cli("diff", before, after).stdout
    verdict = out.splitlines()[0]
    assert verdict.startswith("after: -17% CPU per request (0.03 → 0.025 ms per request) and ")
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


# --- what the verdict leads with, and how it writes numbers ---------------------------------------------

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"


def rows_of(result) -> dict:
    return {row[0]: row for row in change_rows(result)}


def test_near_zero_base_gets_no_percentage(capture_file):
    """One stray wakeup before, 10,000 after: a ×10,000 of a near-zero rate is no measure of anything."""
    before = captures.reactor_worker(wakeups=[(400, 401, 1)])
    after = captures.reactor_worker(wakeups=[(400, 401, 5_000), (401, 400, 5_000)])
    result = comparison(before, after, capture_file)
    assert not result.appeared and not result.disappeared  # 1 handoff per request: below the label
    verdict = result.verdict()
    assert verdict == ("after: +1 handoffs per request and handoffs/s 0.1 → 1,000; "
                       "no label appeared or disappeared")
    assert "%" not in verdict and "×" not in verdict
    rows = rows_of(result)
    assert rows["handoffs_per_s"][2:5] == ["0.1", "1,000", "+1,000"]
    assert rows["handoffs_per_request"][2:5] == ["0.0001", "1", "+1"]
    metrics = {m["name"]: m for m in to_json(result)["metrics"]}
    assert metrics["handoffs_per_s"]["relative"] is None and metrics["handoffs_per_request"]["relative"] is None
    # A real base keeps its percentage.
    assert result.change("requests_per_s").relative == 0 and rows["writes_per_request"][4] == "+0 (+0%)"


def test_handoffs_per_request_lead_over_a_larger_rate_percentage(capture_file):
    """The issue's case: +1.38 handoffs per request, highly significant, while a shorter, noisier run
    quadruples every per-second rate. A percentage ranking led with `+576% handoffs/s`."""
    before = captures.reactor_worker(jitter=0.1, seed=1)
    extra = 6_900  # on each of the reactor's two edges: 2 → 3.38 handoffs per request
    edges = [(400, 401, 5_000 + extra), (400, 402, 5_000 + extra), (401, 400, 5_000), (402, 400, 5_000)]
    after = captures.reactor_worker(wakeups=edges, duration_s=2.5, jitter=0.1, seed=2)
    result = comparison(before, after, capture_file)
    assert not result.appeared and not result.disappeared  # handoff overhead before and after
    handoffs, rate = result.change("handoffs_per_request"), result.change("handoffs_per_s")
    assert handoffs.noise.verdict == rate.noise.verdict == SIGNIFICANT
    assert rate.relative > 5 * handoffs.relative  # the rate's percentage is far larger ...
    assert result.verdict().startswith("after: +1.38 handoffs per request and ")  # ... and comes later
    assert result.ranked()[0] is handoffs
    assert all(c.metric.kind == "per second" for c in result.ranked()[1:])  # nothing else per request moved


def single_loop(cpu_us: float, runq_us: float, seed: int) -> dict:
    """One event loop serving 10,000 requests with the given CPU and run-queue wait per request."""
    n = 10_000
    loop = captures.thread(800, "loop", poll_calls=n, poll_events=2 * n, read_calls=n, write_calls=n,
                           write_bytes=4_000 * n, cs_voluntary=n, oncpu_ns=cpu_us * 1_000 * n,
                           runq_ns=runq_us * 1_000 * n)
    return captures.capture([loop], requests=n, response_bytes=4_000, jitter=0.05, seed=seed, comm="loop")


def test_cpu_per_request_leads_over_run_queue_wait_in_the_same_units_as_the_table(capture_file):
    """The issue's other case: `+1565% run-queue wait` led over `+155% CPU per request`. CPU per request
    leads; both are written as the table writes them, in ms per request, and the ×17 is the table's."""
    result = comparison(single_loop(100, 6, seed=1), single_loop(255, 100, seed=2), capture_file)
    cpu, runq = result.change("cpu_ms_per_request"), result.change("runq_ms_per_request")
    assert cpu.noise.verdict == runq.noise.verdict == SIGNIFICANT and runq.relative > 10 * cpu.relative
    verdict = result.verdict()
    assert verdict.startswith("after: +155% CPU per request (0.1 → 0.255 ms per request) and ")
    rows = rows_of(result)
    assert rows["cpu_ms_per_request"][1:5] == ["ms per request", "0.1", "0.255", "+0.155 (+155%)"]
    assert rows["runq_ms_per_request"][1:5] == ["ms per request", "0.006", "0.1", "+0.094 (×17)"]
    # Every change the verdict names reads in it with the table's unit, values and relative change.
    for change in result.ranked()[:2]:
        _, unit, before, after, cell, _ = rows[change.metric.name]
        assert change.phrase() in verdict
        if change.metric.unit:
            assert f"{before} → {after} {unit}" in change.phrase()
        relative = cell.partition(" (")[2].rstrip(")")
        assert (relative or cell) in change.phrase()


def test_within_a_tier_the_larger_t_leads():
    """Bundled captures, reactor-worker → reactor-split: about +100% handoffs per request at a far larger
    |t| leads over the handoff wake-to-run wait (whose percentage change was the larger in an earlier
    recording, where a percentage ranking put the wait first)."""
    result = compare_captures(analyze(load(CAPTURES / "reactor-worker.json")),
                              analyze(load(CAPTURES / "reactor-split.json")))
    handoffs, wait = result.change("handoffs_per_request"), result.change("handoff_wait_ms_per_request")
    assert abs(handoffs.noise.t) > abs(wait.noise.t)  # the premise
    assert result.verdict() == (f"after: {handoffs.phrase()} and {wait.phrase()}; "
                                "no label appeared or disappeared")
    assert handoffs.phrase().startswith("+2.") and wait.phrase().endswith("ms per request)")


def test_label_metrics_missing_from_metrics_are_skipped(capture_file, monkeypatch):
    """LABEL_METRICS may name metrics that metrics.METRICS does not compute (yet)."""
    from spinscope.labels import HANDOFF_OVERHEAD
    monkeypatch.setitem(LABEL_METRICS, HANDOFF_OVERHEAD, ("not_a_metric", *LABEL_METRICS[HANDOFF_OVERHEAD]))
    result = comparison(captures.thread_per_connection(), captures.reactor_split(), capture_file)
    assert result.verdict().startswith("after: +4 handoffs per request and ")
