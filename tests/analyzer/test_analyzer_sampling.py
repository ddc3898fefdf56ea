"""What a schema 4 capture says about itself, the report and diff say too: sampled call times, when a map
filled up, and what the collector used."""

from __future__ import annotations

import json

from spinscope.analysis import capture as capture_module
from spinscope.analysis.labels import assess
from spinscope.analysis.metrics import analyze
from spinscope.output.report import collector_line

from captures import capture, thread, write


def schema4(doc: dict, time_sample: int = 16, timed: int = 1234) -> dict:
    doc["schema"] = 4
    doc["settings"]["time_sample"] = time_sample
    doc["totals"]["calls_timed"] = timed
    for interval in doc["intervals"]:
        interval["drops"] = {key: 0 for key in capture_module.DROP_KEYS}
    return doc


def loop(**extra) -> dict:
    return capture([thread(100, "loop", poll_calls=5000, poll_zero=100, oncpu_ns=4_000_000_000, **extra)],
                   requests=2000, intervals=10)


def test_report_says_call_times_were_sampled(tmp_path):
    cap = capture_module.load(write(tmp_path, schema4(loop())))
    notes = assess(analyze(cap)).notes
    assert "call times sampled: 1 call in 16 timed (1,234 calls, --time-sample), so the measured costs behind " \
           "the verdicts are estimates; counts are exact" in notes


def test_every_call_timed_needs_no_note(tmp_path):
    cap = capture_module.load(write(tmp_path, schema4(loop(), time_sample=1)))
    assert not [note for note in assess(analyze(cap)).notes if "sampled" in note]


def test_drop_note_says_when_the_map_filled(tmp_path):
    doc = schema4(loop())
    doc["drops"]["threads"] = 7
    doc["drops"]["execs"] = 0
    doc["intervals"][3]["drops"]["threads"] = 5  # the interval from 3.0 s to 4.0 s
    doc["intervals"][8]["drops"]["threads"] = 2
    cap = capture_module.load(write(tmp_path, doc))
    [note] = [note for note in assess(analyze(cap)).notes if "dropped" in note]
    assert note.startswith("the collector dropped events, a map being full from 3.0 s on: 7 events of threads")


def test_collector_usage_line(tmp_path):
    doc = schema4(loop())
    doc["tool"].update({"cpu_s": 0.25, "max_rss_bytes": 12 * 2**20, "map_bytes": 3 * 2**19})
    cap = capture_module.load(write(tmp_path, doc))
    assert collector_line(analyze(cap)) == ("collector: 0.250 s CPU (2.5% of one CPU over the capture, its start "
                                            "included), 12.0 MiB resident at most, BPF maps 1.50 MiB")
    assert collector_line(analyze(capture_module.load(write(tmp_path, loop(), "old.json")))) is None


def test_diff_says_how_each_side_was_timed(tmp_path, cli):
    before = write(tmp_path, schema4(loop(), time_sample=1), "before.json")
    after = write(tmp_path, schema4(loop(), time_sample=16), "after.json")
    result = cli("diff", str(before), str(after), "--json")
    assert result.returncode == 0, result.stderr
    sampled = json.loads(result.stdout)["time_sample"]
    assert (sampled["before"], sampled["after"]) == (1, 16)
    assert sampled["note"] == ("call times sampled differently: 1 call in 1 timed before, 1 in 16 after; the "
                               "costs are estimates where sampled, the counts exact")
    text = cli("diff", str(before), str(after))
    assert "call times sampled differently" in text.stdout
