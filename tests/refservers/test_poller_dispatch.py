"""refserver --arch poller-dispatch under load (issue 35): a poller that never reads hands each ready
connection to a worker pool. Its wakeups are the hand-off's dispatch half, never wakeups for nothing: at 1, 4
and 16 clients the capture gets handoff-overhead, no spurious-select at any severity, and the poller's
dispatch wakeups in the label's evidence; its counts are the design's."""

from __future__ import annotations

import pytest

from machine_lock import load_lock
from refserver_harness import record_under_load
from spinscope.analysis.capture import load
from spinscope.analysis.labels import assess
from spinscope.analysis.metrics import analyze
from spinscope.analysis.patterns import HANDOFF_OVERHEAD, SPURIOUS_SELECT
from spinscope.analysis.roles import DISPATCHER


@pytest.mark.parametrize("clients", [1, 4, 16])
def test_poller_dispatch_is_a_handoff_never_a_spurious_select(tmp_path, clients):
    output = tmp_path / f"poller-dispatch-{clients}.json"
    with load_lock():
        capture, result = record_under_load("poller-dispatch", output,
                                            ["--path", "/bytes/100", "--concurrency", clients], duration=2.0)
    assert result["errors"] == 0
    analysis = analyze(load(output))
    assessment = assess(analysis)
    requests = capture["requests"]["count"]
    assert 1000 <= requests <= result["requests"]

    names = assessment.names()
    assert HANDOFF_OVERHEAD in names and SPURIOUS_SELECT not in names, names
    threads = list(analysis.threads.values())
    pollers = [thread for thread in threads if thread["role"] == DISPATCHER]
    assert len(pollers) == 1, [thread["role"] for thread in threads]
    poller = pollers[0]
    # Every wakeup of the poller's found work: an accept, the eventfd's count, or ready connections it
    # deregistered and queued; it never reads a socket.
    totals = capture["totals"]
    assert totals["poll_futile"] == totals["poll_futile_cycle_ns"] == 0
    assert poller["read_calls"] == 0 and poller["poll_dispatch"] == totals["poll_dispatch"]
    label = next(label for label in assessment.labels if label.name == HANDOFF_OVERHEAD)
    assert label.evidence.get("dispatch_wakeups", 0) == totals["poll_dispatch"]
    if clients > 1:  # the workers are busy: the poller's pushes wake no one, its wakeups only dispatch
        assert totals["poll_dispatch"] > 0
        assert label.evidence["dispatch"] == \
            f"{totals['poll_dispatch']:,} poller wakeups dispatched ready connections to other threads"
    # A worker reads each request once with its data and once more with EAGAIN before it re-registers the
    # connection (at 1 client the next request is often there already: then it is served in the same turn).
    # The reads with data are the requests, but for those in flight at the capture's two ends.
    data_reads = totals["read_calls"] - totals["read_eagain"] - totals["read_eof"] - totals["read_errors"]
    assert abs(data_reads - requests) <= 2 * clients
    assert 0 < totals["read_eagain"] <= data_reads + clients
