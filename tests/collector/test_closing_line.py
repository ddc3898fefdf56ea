"""The collector's closing line counts what the report counts: the capture's thread rows (threads gone
included) and the processes among them. With --children the threads still live at the end undercount a
process-per-connection server: its children have exited."""

from __future__ import annotations

import re

from collector_harness import run_fixture

CLOSING = re.compile(r"spinscope-collector: wrote (?P<path>.+): (?P<processes>\d+) process(es)?, "
                     r"(?P<threads>\d+) threads?, (?P<requests>\d+) requests, [\d.]+ s \(target-exited\)")


def test_closing_line_counts_the_processes_and_threads_of_the_capture(tmp_path):
    run = run_fixture("forkclose", tmp_path=tmp_path, collector_args=("--children",))
    truth = run.truth["forkclose"]
    closing = [m for m in map(CLOSING.fullmatch, run.collector_stderr) if m]
    assert len(closing) == 1, run.collector_stderr
    said = closing[0]
    # Each process of the fixture is single-threaded: as many threads as processes.
    assert int(said["processes"]) == int(said["threads"]) == truth["processes"] == 6
    assert int(said["requests"]) == truth["requests"] == 20
    # The same counts as the report's headline (render.headline): rows, and the pids among them.
    rows = run.capture["threads"]
    assert (len(rows), len({t["pid"] for t in rows})) == (truth["processes"], truth["processes"])
    assert said["path"] == str(tmp_path / "forkclose.json")
