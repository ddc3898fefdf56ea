"""The runtime (analysis/runtime.py) and the advice worded for it (in each pattern's home,
analysis/patterns/): target.runtime as the collector wrote it, else "unknown" (no guess of the analyzer's
own); said in the report's header, HTML and --json; the same counts get Go's, a JVM's or CPython's fixes;
spurious select's fixes ordered by what each kind cost; a saturated loop noted, not busy polling."""

from __future__ import annotations

import json

import pytest

import captures
from spinscope.analysis.capture import load
from spinscope.analysis.labels import assess
from spinscope.analysis.metrics import analyze
from spinscope.analysis.patterns import BUSY_POLLING, HANDOFF_OVERHEAD, SPURIOUS_SELECT
from spinscope.analysis.patterns.spurious_select import HERD_CLAIM
from spinscope.analysis.runtime import runtime_of
from spinscope.analysis.savings import saving_line
from spinscope.output.report import render_html
from test_analyzer_claims import dispatch, herd, leader_follower
from test_analyzer_verdicts import N, busy_poller, schema5


def on(doc: dict, name: str | None, version: str | None = None, exe: str | None = None) -> dict:
    """DOC as a collector would write it for a target on runtime NAME (None: a capture without the key)."""
    if name:
        doc["target"]["runtime"] = {"name": name, "version": version, "from": exe or "/srv/server"}
    if exe:
        doc["target"]["exe"] = exe
    return doc


def judged(doc, capture_file):
    analysis = analyze(load(capture_file(doc)))
    return analysis, assess(analysis)


def label(doc, capture_file, name):
    return next(v for v in judged(doc, capture_file)[1].labels if v.name == name)


@pytest.mark.parametrize("doc,want", [
    (on(dispatch(1.0), "go", "1.22.3"), ("go", "1.22.3", "capture", "Go 1.22.3")),
    (on(dispatch(1.0), "native", None, "/usr/sbin/nginx"), ("native", None, "capture", "native")),
    (on(dispatch(1.0), "jvm", "17", "/usr/lib/jvm/java-17/bin/java"), ("jvm", "17", "capture", "JVM 17")),
    (dispatch(1.0), ("unknown", None, "", "unknown (the capture does not say: recorded by an older collector)")),
])
def test_the_runtime_is_the_captures(doc, want, capture_file):
    runtime = runtime_of(load(capture_file(doc)))
    assert (runtime.name, runtime.version, runtime.source, runtime.describe()) == want


def test_without_target_runtime_nothing_is_guessed(capture_file):
    """The collector's reading is the one rule (collector/runtime.c): a capture without it is unknown, whatever
    its executable is called or its threads are named."""
    doc = on(dispatch(1.0), None, exe="/usr/bin/python3.11")
    doc["threads"][1]["comm"] = "C2 CompilerThre"
    assert runtime_of(load(capture_file(doc))).name == "unknown"


def test_the_report_says_the_runtime(capture_file, cli):
    path = capture_file(on(dispatch(1.0), "go", "1.22.3", "/srv/gobytes"))
    assert "\nruntime: Go 1.22.3\n" in cli("report", path).stdout
    doc = json.loads(cli("report", "--json", path).stdout)
    assert doc["capture"]["runtime"] == {"name": "go", "version": "1.22.3", "source": "capture"}
    analysis = analyze(load(path))
    assert "runtime: Go 1.22.3" in render_html(analysis, assess(analysis))


@pytest.mark.parametrize("build", [lambda: leader_follower(2.6), lambda: dispatch(2.0), lambda: leader_follower(0.2)])
def test_go_is_told_about_its_scheduler_never_a_selector(build, capture_file):
    """Whatever the counts resemble, a Go program's threads are its scheduler's: no selector to give each
    thread, no pool the user wrote, no SO_REUSEPORT for one process."""
    got = label(on(build(), "go", "1.22.3"), capture_file, HANDOFF_OVERHEAD)
    text = " ".join([got.summary, *got.fixes])
    assert "Go's scheduler moves goroutines between its OS threads" in got.summary
    assert "selector" not in text and "SO_REUSEPORT" not in text and "worker pool" not in text, text
    assert got.fixes[0].startswith("set GOMAXPROCS to the CPUs the server really has to itself")


@pytest.mark.parametrize("runtime,phrase,first_fix", [
    ("jvm", "each request is handed from the I/O thread to an executor and back",
     "do not dispatch short handlers from the I/O thread"),
    ("cpython", "each request is handed from the event loop to a thread pool and back",
     "run the endpoint on the event loop: declare it `async def`"),
    ("native", "each request is handed to another thread and back",
     "serve short requests in the thread that read them"),
    (None, "each request is handed to another thread and back", "serve short requests in the thread that read them"),
])
def test_dispatch_advice_is_the_runtimes(runtime, phrase, first_fix, capture_file):
    got = label(on(dispatch(2.0), runtime), capture_file, HANDOFF_OVERHEAD)
    assert got.summary.startswith(f"handoff overhead: {phrase}") and ": 2.0 handoffs" in got.summary
    assert got.fixes[0].startswith(first_fix)
    assert "directExecutor()" in " ".join(got.fixes) if runtime == "jvm" else True


def with_empty_checks(doc: dict, per_check_ns: int) -> dict:
    """Each herd worker also makes 5,000 zero-timeout checks that find nothing (an asyncio loop's), at
    per_check_ns each."""
    for row in doc["threads"]:
        calls = 5_000
        row.update(poll_calls=row["poll_calls"] + calls, poll_nowait=calls, poll_zero=calls, poll_zero_nowait=calls,
                   poll_zero_nowait_ns=calls * per_check_ns)
    for key in ("poll_calls", "poll_nowait", "poll_zero", "poll_zero_nowait", "poll_zero_nowait_ns"):
        doc["totals"][key] = sum(row[key] for row in doc["threads"])
    return doc


def test_the_herds_fix_comes_first_when_the_herd_costs_more(capture_file):
    # the herd: 3,400 wakeups at 60 us (204 ms); the checks: 20,000 at 0.6 us (12 ms)
    got = label(on(with_empty_checks(herd(), 600), "cpython", "3.11"), capture_file, SPURIOUS_SELECT)
    assert got.summary.startswith("spurious select: thundering herd on port 8000")
    assert got.fixes[0].startswith("wake one process per connection: a listener per process (Tornado: "
                                   "bind_sockets(..., reuse_port=True)")
    assert got.fixes[1].startswith("the event loop checks with a zero timeout whenever callbacks are ready")
    # what it costs is said, not what a herd's fix saves (it moves connections between workers too)
    assert got.saving_claim == "cost" and HERD_CLAIM in got.details
    assert saving_line(got).startswith("it costs ") and saving_line(got).endswith("(a fix may save more or less)")
    # the same herd beside checks at 50 us each (1 s): the checks' fix first, and what it saves
    got = label(on(with_empty_checks(herd(), 50_000), "cpython", "3.11"), capture_file, SPURIOUS_SELECT)
    assert got.summary.startswith("spurious select: 60% of poll calls return no events")
    assert got.fixes[0].startswith("the event loop checks with a zero timeout")
    assert got.saving_claim == "saves" and HERD_CLAIM not in got.details
    assert saving_line(got).startswith("the fix saves ")


def test_a_saturated_loop_is_noted_not_busy_polling(capture_file):
    """Zero-timeout polls back to back that all return events: busy with work, not idling."""
    loop = busy_poller()
    loop.update(poll_zero=0, poll_zero_nowait=0, poll_zero_nowait_ns=0, poll_events=4_000_000)
    analysis, assessment = judged(schema5(captures.capture([loop], requests=N)), capture_file)
    assert BUSY_POLLING not in assessment.finding_names() and assessment.labels == []
    assert "event loop 'haproxy' (tid 7) is saturated: 100% of its 2,000,000 polls have a zero timeout and 100% " \
           "of them return events, on CPU 99% of the capture" in " ".join(assessment.notes)
    # Half of them empty: busy polling again, and no saturation note.
    loop.update(poll_zero=1_000_000, poll_zero_nowait=1_000_000, poll_zero_nowait_ns=1_000_000 * 200)
    analysis, assessment = judged(schema5(captures.capture([loop], requests=N)), capture_file)
    assert BUSY_POLLING in assessment.finding_names() and "saturated" not in " ".join(assessment.notes)


def test_go_busy_polling_is_told_about_gomaxprocs(capture_file):
    analysis, assessment = judged(on(schema5(captures.capture([busy_poller()], requests=N)), "go"), capture_file)
    finding = next(f for f in assessment.findings if f.name == BUSY_POLLING)
    assert finding.advice[0].startswith("Go's scheduler spins looking for work") and "HAProxy" not in finding.advice[0]
