"""The pages carry what the terminal says (issue 32, item 7): the content items of `report` and `diff` in
the terminal and on their HTML page are derived from both outputs (tests/analyzer/content_items.py) and
compared. Before, `diff --html` left out the `fix:` lines and the per-edge wakeup lines the terminal diff
prints under a label that appeared, and the report's page left out the requests line and the threads
table's column meanings.

The page has more than the terminal in two named ways only: its figures (images, not text) and each
label's evidence table (the terminal's `--json` has it)."""

from __future__ import annotations

import pytest
from rich.console import Console

import captures
from content_items import page_items, terminal_items
from paths import CAPTURES
from spinscope.analysis.capture import load
from spinscope.analysis.comparison import compare_captures
from spinscope.analysis.labels import assess
from spinscope.analysis.metrics import analyze
from spinscope.output import diff, report

GOLDEN = sorted(p.name for p in CAPTURES.glob("*.json"))


def console() -> Console:
    return Console(record=True, width=5000, color_system=None, file=open("/dev/null", "w"))


def compare_items(text: str, page: str, evidence_rows=()) -> None:
    lines, rows = terminal_items(text)
    page_lines, page_rows, headings = page_items(page)
    # the same lines, wherever each side puts them (the page gives the collector's line under the headline)
    assert sorted(lines) == sorted(page_lines)
    assert sorted(rows) == sorted(r for r in page_rows if r not in evidence_rows)


@pytest.mark.parametrize("name", GOLDEN)
def test_a_report_page_carries_the_terminal_report(name):
    analysis = analyze(load(CAPTURES / name))
    assessment = assess(analysis)
    out = console()
    report.render_terminal(analysis, assessment, out)
    text = out.export_text()
    # the terminal's title line `spinscope report NAME ...` is the page's title (h1) and first paragraph
    first, rest = text.split("\n", 1)
    assert first.startswith("spinscope report ")
    evidence = {("evidence", "value"), *((k, report._evidence_cell(v)) for label in assessment.labels
                                          for k, v in label.evidence.items())}
    compare_items(first[len("spinscope report "):] + "\n" + rest, report.render_html(analysis, assessment),
                  evidence)


@pytest.mark.parametrize("before, after", [
    ("thread-per-conn.json", "reactor-split.json"),   # handoff overhead appears: its details and fixes
    ("reactor-split-100k-sndbuf16k.json", "event-loop-100k-sndbuf16k.json"),  # a finding on both sides
    ("event-loop-spin-100k.json", "event-loop-epollout-100k.json"),  # write-spin disappears
])
def test_a_diff_page_carries_the_terminal_diff(before, after, monkeypatch):
    comparison = compare_captures(analyze(load(CAPTURES / before)), analyze(load(CAPTURES / after)))
    out = console()
    monkeypatch.setattr(diff, "terminal", lambda: out)
    diff.render_terminal(comparison)
    text = out.export_text()
    page = diff.render_html(comparison)
    compare_items(text, page)
    entries = diff.label_entries(comparison)
    if before == "thread-per-conn.json":  # the appeared label's fixes and per-edge lines are on the page
        label = next(item for _, item in entries if item is not None)
        assert any(line.startswith("fix: ") for line in page_items(page)[0])
        assert any("→" in line and "wakeups" in line for line in label.details)


def test_a_synthetic_diff_with_drops_carries_the_same_lines(capture_file, monkeypatch):
    after = captures.reactor_split()
    after["drops"]["threads"] = 812
    comparison = compare_captures(analyze(load(capture_file(captures.thread_per_connection(), "b.json"))),
                                  analyze(load(capture_file(after, "a.json"))))
    out = console()
    monkeypatch.setattr(diff, "terminal", lambda: out)
    diff.render_terminal(comparison)
    compare_items(out.export_text(), diff.render_html(comparison))
