"""Each server of the research gets exactly the labels it deserves, with the right numbers and roles."""

from __future__ import annotations

import pytest

import captures
from spinscope.capture import load
from spinscope.labels import (CRITICAL, HANDOFF_OVERHEAD, MIN_REQUESTS, SPURIOUS_SELECT, WRITE_SPIN, assess,
                              size_class)
from spinscope.metrics import analyze
from spinscope.roles import ACCEPTOR, EVENT_LOOP, IDLE, WORKER

EXPECTED = {
    "write_spin": {WRITE_SPIN},
    "thread_per_connection": set(),
    "reactor_split": {HANDOFF_OVERHEAD},
    "reactor_worker": {HANDOFF_OVERHEAD},
    "clean_event_loop": set(),
    "spurious_loop": {SPURIOUS_SELECT},
    "imbalanced_loops": {SPURIOUS_SELECT},
}


def analysis_of(doc, capture_file):
    return analyze(load(capture_file(doc)))


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_labels_present_exactly_where_deserved(scenario, capture_file):
    assessment = assess(analysis_of(captures.SCENARIOS[scenario](), capture_file))
    assert assessment.names() == EXPECTED[scenario]
    for label in assessment.labels:
        assert label.summary and label.fixes and label.evidence
        assert 0 < label.cpu_share <= 1


def test_write_spin_names_size_class_and_counts(capture_file):
    label, = assess(analysis_of(captures.write_spin_server(), capture_file)).labels
    assert label.summary.startswith("write-spin on 64–128 KiB responses: 40 writes per response, 35 of them EAGAIN")
    assert label.evidence["writes_per_response"] == 40 and label.evidence["eagain_per_response"] == 35
    # 195,000 extra writes at 3 us each, against 3 s of CPU
    assert label.cpu_share == pytest.approx(0.195)
    assert label.severity == CRITICAL
    assert "about 20% of its CPU" in label.summary


def test_many_complete_writes_are_not_write_spin(capture_file):
    """Chunked responses: 10 writes per response, but none EAGAIN or partial."""
    doc = captures.write_spin_server(eagain_per_request=0, partial_per_request=0, writes_per_request=10)
    assert WRITE_SPIN not in assess(analysis_of(doc, capture_file)).names()


def test_handoff_overhead_evidence_and_role_graph(capture_file):
    label, = assess(analysis_of(captures.reactor_split(), capture_file)).labels
    assert label.evidence["handoffs_per_request"] == 4.0
    assert label.evidence["cs_per_request"] == pytest.approx(4.02)
    assert label.evidence["futex_ms_per_request"] == pytest.approx(0.3)
    assert "4.0 wakeups between threads per request (event loop → worker 2.0, worker → event loop 2.0)" in label.summary
    assert label.details == ["event loop → worker: 20000 wakeups, 2.00 per request",
                             "worker → event loop: 20000 wakeups, 2.00 per request"]
    reactor_worker, = assess(analysis_of(captures.reactor_worker(), capture_file)).labels
    assert reactor_worker.evidence["handoffs_per_request"] == 2.0


def test_spurious_select_signals(capture_file):
    label, = assess(analysis_of(captures.spurious_loop(), capture_file)).labels
    assert label.summary.startswith("spurious select: 40% of poll calls return no events")
    assert label.evidence["poll_zero_fraction"] == 0.4
    label, = assess(analysis_of(captures.imbalanced_loops(), capture_file)).labels
    assert "event loop 'front' (tid 700) handles 0.7 events per poll call while event loop 'back' (tid 701) handles 22" \
        in label.summary
    assert label.evidence["quiet_loop_tid"] == 700 and label.evidence["busy_loop_events_per_poll"] == 22


def test_reads_returning_eagain_are_spurious(capture_file):
    doc = captures.clean_event_loop()
    doc["threads"][0]["read_eagain"] = doc["totals"]["read_eagain"] = 32_000
    label, = assess(analysis_of(doc, capture_file)).labels
    assert "80% of socket reads return EAGAIN" in label.summary


def test_idle_timer_ticks_are_not_spurious(capture_file):
    """A loop waking 100 times a second on a timer, with nothing to do, is not spinning."""
    loop = captures.thread(1, "idle", poll_calls=1_000, poll_zero=1_000, oncpu_ns=1e7)
    assessment = assess(analysis_of(captures.capture([loop]), capture_file))
    assert assessment.labels == []
    assert "no requests were observed" in assessment.notes[0]


def test_small_samples_are_not_judged(capture_file):
    doc = captures.reactor_split(requests=MIN_REQUESTS - 1)
    assessment = assess(analysis_of(doc, capture_file))
    assert HANDOFF_OVERHEAD not in assessment.names()
    assert f"only {MIN_REQUESTS - 1} requests" in assessment.notes[0]


def test_zero_requests_leave_per_request_metrics_undefined(capture_file):
    analysis = analysis_of(captures.capture([captures.thread(1, write_calls=10, poll_calls=30)]), capture_file)
    assert analysis.process["writes_per_request"] is None
    assert analysis.process["handoffs_per_request"] is None
    assert analysis.process["writes_per_s"] == 1.0


def test_roles(capture_file):
    def roles(doc):
        return analysis_of(doc, capture_file).threads["role"].to_dict()

    assert roles(captures.reactor_split()) == {300: EVENT_LOOP, **{t: WORKER for t in range(301, 305)}}
    assert roles(captures.reactor_worker()) == {400: EVENT_LOOP, 401: WORKER, 402: WORKER}
    assert roles(captures.thread_per_connection())[200] == IDLE
    assert roles(captures.imbalanced_loops()) == {700: EVENT_LOOP, 701: EVENT_LOOP}
    acceptor = captures.thread(1, "acceptor", poll_calls=500, poll_events=500)
    handler = captures.thread(2, "handler", read_calls=20_000, write_calls=10_000)
    assert roles(captures.capture([acceptor, handler], requests=10_000)) == {1: ACCEPTOR, 2: WORKER}


def test_size_class_names():
    assert size_class(65536, 131071) == "64–128 KiB"
    assert size_class(512, 1023) == "512 B–1 KiB"
    assert size_class(0, 0) == "0 B"
