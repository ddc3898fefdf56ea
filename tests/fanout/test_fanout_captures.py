"""What spinscope says about the fanout tier, on captures recorded from it (tests/data/captures/fanout-*,
re-recorded by tests/fanout/record_captures.py) and live.

* fanout-split, small records: spurious select, by loop imbalance: the HTTP frontend wakes for about one
  event per epoll_wait while the backend loop wakes for a burst of shard responses.
* fanout-shared under the same load: one loop, no label.
* fanout-pool, 20 KB records: thread churn (workers created and exiting during the capture) and many more
  handoffs per HTTP request than fanout-shared.
"""
import json
import subprocess
import sys

import pytest

from fanout_helpers import CAPTURES, COLLECTOR, handoffs, http_requests, record
from fanout_helpers import _fanout_built, shards  # noqa: F401 (fixtures)
from spinscope.analysis.capture import load
from spinscope.analysis.labels import assess
from spinscope.analysis.metrics import analyze
from spinscope.analysis.patterns.spurious_select import IMBALANCE_MAX_LOW_EVENTS, IMBALANCE_MIN_RATIO
from spinscope.output.report import lifecycle_line


def labels(path):
    analysis = analyze(load(path))
    return {label.name: label for label in assess(analysis).labels}, analysis


def report(*args):
    return subprocess.run([sys.executable, "-m", "spinscope", "report", *map(str, args)],
                          capture_output=True, text=True, timeout=60)


def check_split_is_imbalanced(path):
    found, analysis = labels(path)
    # The frontend hands each HTTP request's fanout to the backend loops (about 0.5 wakeups a request at a
    # few percent of their CPU): labelled by that cost, at info at most; the imbalance is the verdict.
    assert "spurious-select" in found and set(found) <= {"spurious-select", "handoff-overhead"}, found
    assert found.get("handoff-overhead") is None or found["handoff-overhead"].severity == "info", found
    ev = found["spurious-select"].evidence
    # The quiet loop is the frontend (the main thread); the busy one a backend loop.
    assert ev["quiet_loop_tid"] == analysis.capture.target["pid"]
    assert ev["quiet_loop_events_per_poll"] < IMBALANCE_MAX_LOW_EVENTS
    assert ev["busy_loop_events_per_poll"] >= IMBALANCE_MIN_RATIO * ev["quiet_loop_events_per_poll"]
    assert ev["busy_loop_events_per_poll"] >= 8  # a burst of shard responses per wakeup
    assert ev["poll_zero_fraction"] < 0.2  # not empty polls: the imbalance is the evidence
    return found["spurious-select"]


def check_shared_is_clean(path):
    found, analysis = labels(path)
    assert found == {}, {name: label.summary for name, label in found.items()}
    assert [thread["role"] for thread in analysis.threads.values()].count("event-loop") == 1


def test_split_small_responses_is_spurious_select_by_imbalance():
    label = check_split_is_imbalanced(CAPTURES / "fanout-split-small.json")
    assert "events per poll call while" in label.summary
    out = report(CAPTURES / "fanout-split-small.json")
    assert out.returncode == 0 and "spurious select" in out.stdout and "balance the event loops" in out.stdout


def test_shared_same_load_gets_no_label():
    check_shared_is_clean(CAPTURES / "fanout-shared-small.json")


def test_pool_20k_churns_threads_and_hands_off_more_than_shared():
    pool = json.loads((CAPTURES / "fanout-pool-20k.json").read_text())
    shared = json.loads((CAPTURES / "fanout-shared-20k.json").read_text())
    assert pool["totals"]["threads_created"] >= 50 and pool["totals"]["threads_exited"] >= 50
    assert sum(1 for t in pool["threads"] if not t["alive"]) >= 50
    assert shared["totals"]["threads_created"] == 0 and shared["totals"]["threads_exited"] == 0
    pool_per_request = handoffs(pool) / http_requests(pool)
    shared_per_request = handoffs(shared) / http_requests(shared)
    assert shared_per_request < 0.5
    assert pool_per_request > 5 and pool_per_request > shared_per_request + 4
    found, _ = labels(CAPTURES / "fanout-pool-20k.json")
    assert "handoff-overhead" in found


def test_report_shows_thread_churn():
    out = report(CAPTURES / "fanout-pool-20k.json")
    churn = next(line for line in out.stdout.splitlines() if line.startswith("thread churn:"))
    pool = json.loads((CAPTURES / "fanout-pool-20k.json").read_text())
    assert f"{pool['totals']['threads_created']:,} threads created" in churn
    assert f"{pool['totals']['threads_exited']:,} exited" in churn
    assert "thread churn" not in report(CAPTURES / "fanout-shared-20k.json").stdout
    data = json.loads(report("--json", CAPTURES / "fanout-pool-20k.json").stdout)
    assert data["capture"]["threads_created"] == pool["totals"]["threads_created"]
    assert data["capture"]["threads_exited"] == pool["totals"]["threads_exited"]


def test_lifecycle_line_wording(tmp_path):
    doc = json.loads((CAPTURES / "fanout-shared-20k.json").read_text())
    path = tmp_path / "c.json"
    for created, exited, expect in [(0, 0, None), (4, 0, "threads created during the capture: 4 (2/s), none exited"),
                                    (10, 6, "thread churn: 10 threads created and 6 exited during the capture "
                                            "(5/s created, 3/s exited)")]:
        doc["totals"].update(threads_created=created, threads_exited=exited)
        doc["duration_s"] = 2.0
        path.write_text(json.dumps(doc))
        assert lifecycle_line(analyze(load(path))) == expect


@pytest.mark.skipif(not COLLECTOR.exists(), reason="needs build/spinscope-collector (make collector)")
def test_live_split_is_imbalanced_and_shared_is_not(shards, tmp_path):
    load_args = ["--path", "/fanout/20/100", "--concurrency", 8]
    _, res = record("fanout-split", shards.spec, tmp_path / "split.json", load_args, duration=2.0)
    assert res["errors"] == 0
    check_split_is_imbalanced(tmp_path / "split.json")
    _, res = record("fanout-shared", shards.spec, tmp_path / "shared.json", load_args, duration=2.0)
    assert res["errors"] == 0
    check_shared_is_clean(tmp_path / "shared.json")
