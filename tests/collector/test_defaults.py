"""The collector's defaults as it uses them (the capture's settings) are the ones the analyzer holds for it
(spinscope.tracing.targets.COLLECTOR_DEFAULTS; tests/analyzer/test_analyzer_targets.py holds them to its --help)."""

from __future__ import annotations

import json
import subprocess

from collector_harness import run_fixture, start_collector

from spinscope.tracing import targets


def test_a_capture_made_without_options_uses_the_defaults_the_analyzer_holds(tmp_path):
    run = run_fixture("forkclose", tmp_path=tmp_path)  # the harness times every call: --time-sample 1
    settings = run.capture["settings"]
    used = {"max-threads": settings["max_threads"], "max-sockets": settings["max_sockets"],
            "exited-rows": settings["exited_rows"], "checkpoint": settings["checkpoint_s"]}
    assert settings["time_sample"] == 1
    assert used == {key: value for key, value in targets.COLLECTOR_DEFAULTS.items() if key != "time-sample"}


def test_time_sample_is_the_default_the_analyzer_holds(tmp_path):
    """Not through run_fixture, which times every call: the collector as `record` runs it."""
    output = tmp_path / "sleep.json"
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        proc, err = start_collector(sleeper.pid, output, "--duration", "0.2")
        assert proc.wait(timeout=30) == 0, err.drain()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert json.loads(output.read_text())["settings"]["time_sample"] == targets.COLLECTOR_DEFAULTS["time-sample"]
