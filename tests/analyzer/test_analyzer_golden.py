"""Labels and diffs on real captures recorded from the reference servers (tests/data/captures)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from spinscope.analysis.capture import load
from spinscope.analysis.labels import assess
from spinscope.analysis.metrics import analyze
from spinscope.analysis.patterns import NAGLE_STALL
from paths import CAPTURES



def labels_of(name: str) -> dict[str, object]:
    analysis = analyze(load(CAPTURES / name))
    return {label.name: label for label in assess(analysis).labels}, analysis


def spinscope(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spinscope", *args], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("name", ["event-loop-clean.json", "thread-per-conn.json"])
def test_clean_servers_get_no_label(name):
    labels, _ = labels_of(name)
    assert labels == {}


def test_spinning_event_loop_is_write_spin_with_hundreds_of_writes_per_response():
    labels, analysis = labels_of("event-loop-spin-100k.json")
    assert set(labels) == {"write-spin"} and labels["write-spin"].severity == "critical"
    # Its polls are a sliver of its calls (the writes swamp them), yet readiness drives every read.
    assert [thread["role"] for thread in analysis.threads.values()] == ["event-loop"]
    raw = analysis.capture.raw["requests"]
    assert raw["write_calls"] / raw["count"] > 100  # the paper's ~102 per 100 KB at a 16 KB buffer
    out = spinscope("report", str(CAPTURES / "event-loop-spin-100k.json"))
    assert out.returncode == 0
    first = next(line for line in out.stdout.splitlines() if "write-spin" in line)
    assert "64–128 KiB responses" in first and "EAGAIN" in first


def test_the_same_loop_waiting_for_epollout_gets_only_a_finding():
    labels, analysis = labels_of("event-loop-epollout-100k.json")
    assert set(labels) == set()
    findings = {f.name: f for f in assess(analysis).findings}
    assert set(findings) == {"write-wait"}
    assert findings["write-wait"].summary.startswith("64–128 KiB responses wait for writability")
    assert analysis.process["eagain_retries_per_request"] == 0
    assert [thread["role"] for thread in analysis.threads.values()] == ["event-loop"]


def test_reactor_split_hands_off_four_times_per_request():
    labels, analysis = labels_of("reactor-split.json")
    assert set(labels) == {"handoff-overhead"}
    # The reactor polls and wakes a worker; the workers read and write the requests.
    assert sorted(thread["role"] for thread in analysis.threads.values()) == ["dispatcher"] + ["handler"] * 4
    edges = sum(e["count"] for e in analysis.capture.raw["wakeups"])
    per_request = edges / analysis.capture.raw["requests"]["count"]
    assert 3.4 <= per_request <= 4.6  # Table 3: 4 handoffs per request (within 15%)


def test_reactor_worker_hands_off_twice_per_request():
    labels, analysis = labels_of("reactor-worker.json")
    assert set(labels) == {"handoff-overhead"}
    edges = sum(e["count"] for e in analysis.capture.raw["wakeups"])
    assert 1.7 <= edges / analysis.capture.raw["requests"]["count"] <= 2.3


def test_a_poller_that_dispatches_to_workers_is_a_handoff_not_a_spurious_select(capture_file):
    """Issue 35: refserver --arch poller-dispatch at 16 clients. The poller's wakeups whose ready connections
    it deregistered and queued are the hand-off's; as a schema 5 collector counted them (futile) they were
    a spurious select."""
    labels, analysis = labels_of("poller-dispatch.json")
    assert set(labels) == {"handoff-overhead"}
    totals = analysis.capture.totals
    assert totals["poll_futile"] == 0 and totals["poll_dispatch"] > 0
    evidence = labels["handoff-overhead"].evidence
    assert evidence["dispatch"] == f"{totals['poll_dispatch']:,} poller wakeups dispatched ready connections to other threads"
    assert evidence["dispatch_wakeups"] == totals["poll_dispatch"]
    assert evidence["dispatch_cpu_ms"] == round(totals["poll_dispatch_cycle_ns"] / 1e6, 3)
    assert sorted(thread["role"] for thread in analysis.threads.values())[0] == "dispatcher"
    # The same counts with the dispatch wakeups folded into the futile ones, as schema 5 had them.
    doc = json.loads((CAPTURES / "poller-dispatch.json").read_text())
    doc["schema"] = 5
    for block in (*doc["threads"], doc["totals"], *(iv["counters"] for iv in doc["intervals"])):
        block["poll_futile"] += block.pop("poll_dispatch")
        block["poll_futile_cycle_ns"] += block.pop("poll_dispatch_cycle_ns")
    old = {label.name for label in assess(analyze(load(capture_file(doc)))).labels}
    assert old == {"handoff-overhead", "spurious-select"}


def test_diff_thread_per_conn_to_reactor_split_names_handoff_overhead():
    out = spinscope("diff", str(CAPTURES / "thread-per-conn.json"), str(CAPTURES / "reactor-split.json"))
    assert out.returncode == 0
    verdict = out.stdout.splitlines()[0]
    assert "handoffs per request" in verdict and "handoff overhead appeared" in verdict
    data = json.loads(spinscope("diff", "--json", str(CAPTURES / "thread-per-conn.json"),
                                str(CAPTURES / "reactor-split.json")).stdout)
    assert data["verdict"] == verdict


def test_diff_of_spin_to_epollout_shows_fewer_writes():
    out = spinscope("diff", "--json", str(CAPTURES / "event-loop-spin-100k.json"),
                    str(CAPTURES / "event-loop-epollout-100k.json"))
    data = json.loads(out.stdout)
    futile = next(row for row in data["metrics"] if row["name"] == "eagain_retries_per_request")
    assert futile["before"] > 100 and futile["after"] == 0
    assert futile["noise"] == "significant"
    assert "write-spin disappeared" in data["verdict"]


def test_nagle_stall_on_the_split_writes_with_nagle_and_nowhere_else():
    """refserver --split-writes --nagle, one client: every response held for the client's delayed ACK (125 of
    125, each hold timed), the finding says so; no other bundled capture has it (the older schemas have no hold
    to show)."""
    for path in sorted(CAPTURES.glob("**/*.json")):
        found = {f.name: f for f in assess(analyze(load(path))).findings}
        assert (NAGLE_STALL in found) == (path.name == "event-loop-nagle.json"), path
    finding = {f.name: f for f in assess(analyze(load(CAPTURES / "event-loop-nagle.json"))).findings}[NAGLE_STALL]
    assert (finding.evidence["requests"], finding.evidence["responses_held"], finding.evidence["held_writes"]) == \
        (125, 125, 125)
    assert finding.saving_of == "request time" and finding.saving > 0.99
    assert finding.fixes[0].startswith("set TCP_NODELAY on each accepted socket")
