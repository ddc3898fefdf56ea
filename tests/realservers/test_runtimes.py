"""Go's net/http (apps/gobytes, built from the standard library alone) under 16 keep-alive clients, at
GOMAXPROCS 2 and 1 and pinned to one CPU: whatever the verdict, it speaks of Go's scheduler (its threads,
GOMAXPROCS, the work per goroutine), never of a selector role, a worker pool or SO_REUSEPORT, which a Go
program does not have; and pinned and saturated its loop is busy with work, not busy polling (issue 30:
before, a `busy-polling` finding with HAProxy's advice, and "the pool threads pass the selector role ...
for every request" on 0.016 handoffs per request). Each configuration is recorded once per module (3 s
of load, under the load lock)."""

from __future__ import annotations

import subprocess

import pytest

from spinscope.analysis.claims import unsupported
from realserver_harness import VERDICT_CONFIGS, ensure_ready, go_toolchain, record_config
from realserver_harness import www  # noqa: F401  (fixture)

GO_CONFIGS = ("go-p2-c16", "go-p1-c16", "go-cpu0-c16")
# What no verdict on a Go program may say: its threads are Go's scheduler's, not a pool the user wrote.
NOT_GO = ("selector", "SO_REUSEPORT", "worker pool", "event loop per", "HAProxy")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, www):  # noqa: F811
    ensure_ready()
    runs: dict = {}

    def get(name: str):
        if name not in runs:
            try:
                if not go_toolchain():
                    pytest.skip("no Go toolchain (/usr/local/go/bin/go or go on PATH)")
                runs[name] = record_config(VERDICT_CONFIGS[name], tmp_path_factory.mktemp(name), www)
            except (Exception, pytest.skip.Exception) as e:  # kept, raised again for the module's other tests
                runs[name] = e
        if isinstance(runs[name], BaseException):
            raise runs[name]
        return runs[name]

    return get


def words(run) -> list:
    assessment = run.assessment()
    return [(verdict.name, text) for verdict in (*assessment.labels, *assessment.findings)
            for text in (verdict.summary, *getattr(verdict, "fixes", []), *getattr(verdict, "advice", []))]


@pytest.mark.parametrize("name", GO_CONFIGS)
def test_the_collector_knows_go_and_its_version(recorded, name):
    run = recorded(name)
    program = run.capture["target"]["exe"]
    built_with = subprocess.run([go_toolchain(), "version", program], capture_output=True, text=True,
                                check=True).stdout.split(": go")[1].strip()
    assert run.capture["target"]["runtime"] == {"name": "go", "version": built_with, "from": program}
    assert run.load["errors"] == 0 and run.capture["requests"]["count"] >= 0.99 * run.load["requests"]


@pytest.mark.parametrize("name", GO_CONFIGS)
def test_verdicts_on_go_speak_of_its_scheduler(recorded, name):
    run = recorded(name)
    said = words(run)
    assert [(verdict, text) for verdict, text in said if any(word in text for word in NOT_GO)] == [], said
    for label in run.assessment().labels:
        if label.name == "handoff-overhead":
            assert "Go's scheduler moves goroutines between its OS threads" in label.summary, label.summary
            assert label.fixes[0].startswith("set GOMAXPROCS"), label.fixes
    assert [line for verdict in (*run.assessment().labels, *run.assessment().findings)
            for line in unsupported(verdict)] == []


def test_pinned_and_saturated_go_is_not_busy_polling(recorded):
    run = recorded("go-cpu0-c16")
    assessment = run.assessment()
    assert "busy-polling" not in assessment.finding_names(), words(run)
