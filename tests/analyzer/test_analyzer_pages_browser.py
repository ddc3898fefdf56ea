"""The pages in a real browser (issue 32, item 7): `report --html` and `diff --html` of bundled captures,
laid out by headless Chromium at 1280 and 800 px wide, screenshots kept in the test's tmp dir. A script
added to the page writes the bounding boxes of the body's blocks into it, read back from `--dump-dom`:
every block (headings, paragraphs, verdicts, tables, figures) lies within the text column, none overlaps
the next, and the page never scrolls sideways. Before, the threads table was 1,167 px wide in a 737 px
column at 800 px.

The figures' legends are inside their PNGs, out of the DOM's sight: test_figure_legends_cover_nothing
checks them in matplotlib's own boxes.

Without Chromium the browser tests skip saying so; .ci/run installs it (apt-get install chromium)."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest

import captures
from browser import run_chromium
from paths import CAPTURES
from spinscope.analysis.capture import load
from spinscope.analysis.comparison import compare_captures
from spinscope.analysis.labels import assess
from spinscope.analysis.metrics import analyze
from spinscope.output import diff, figures, report
from test_analyzer_flamegraph import fixture_capture

WIDTHS = (1280, 800)
SLACK_PX = 1.0  # sub-pixel rounding

PROBE = """
window.addEventListener('load', () => {
  const body = document.body.getBoundingClientRect(), style = getComputedStyle(document.body);
  const column = {left: body.left + parseFloat(style.paddingLeft), right: body.right - parseFloat(style.paddingRight)};
  const blocks = [...document.body.children].filter(e => !['SCRIPT', 'NOSCRIPT', 'PRE'].includes(e.tagName)).map(e => {
    const r = e.getBoundingClientRect();
    return {tag: e.tagName, cls: e.className, text: (e.textContent || e.alt || '').slice(0, 60),
            left: r.left, right: r.right, top: r.top, bottom: r.bottom};
  });
  const out = document.createElement('pre');
  out.id = 'spinscope-rects';
  out.textContent = JSON.stringify({column, viewport: document.documentElement.clientWidth,
                                    page_width: document.documentElement.scrollWidth, blocks});
  document.body.appendChild(out);
});
"""


def with_probe(page: str) -> str:
    """The page with PROBE at its end, and let run by its policy (the page's own scripts, by their hashes)."""
    allowed = f"'sha256-{base64.b64encode(hashlib.sha256(PROBE.encode()).digest()).decode()}'"
    page = re.sub(r"script-src ('none')?", lambda m: f"script-src {allowed}" + ("" if m.group(1) else " "), page, count=1)
    return page.replace("</body>", f"<script>{PROBE}</script></body>")

PAGES = {
    "report-reactor-100k": lambda tmp: _report("reactor-split-100k-sndbuf16k.json"),
    "report-fanout-pool": lambda tmp: _report("fanout-pool-20k.json"),
    "diff-handoff-appears": lambda tmp: _diff("thread-per-conn.json", "reactor-split.json"),
    "report-flame-graphs": lambda tmp: _report(captures.write(tmp, fixture_capture(), "flame.json")),  # --stacks
}


def _report(name) -> str:
    analysis = analyze(load(CAPTURES / name))
    return report.render_html(analysis, assess(analysis))


def _diff(before: str, after: str) -> str:
    return diff.render_html(compare_captures(analyze(load(CAPTURES / before)), analyze(load(CAPTURES / after))))


def chromium(tmp_path, *args) -> str:
    result = run_chromium(tmp_path, "--headless", "--virtual-time-budget=10000", *args, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", PAGES)
def test_a_page_lies_within_its_column(name, width, tmp_path):
    page = PAGES[name](tmp_path)
    path = tmp_path / f"{name}.html"
    path.write_text(with_probe(page), encoding="utf-8")
    chromium(tmp_path, f"--window-size={width},1200", f"--screenshot={tmp_path / f'{name}-{width}.png'}",
             path.as_uri())
    assert (tmp_path / f"{name}-{width}.png").stat().st_size > 0
    dom = chromium(tmp_path, f"--window-size={width},1200", "--dump-dom", path.as_uri())
    found = re.search(r'<pre id="spinscope-rects">(.*?)</pre>', dom, re.S)
    assert found, "the probe did not run"
    rects = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                       .replace("&gt;", ">"))
    column = rects["column"]
    assert rects["page_width"] <= rects["viewport"], "the page scrolls sideways"
    outside = [(b["tag"], b["cls"], b["text"], round(b["left"]), round(b["right"])) for b in rects["blocks"]
               if b["left"] < column["left"] - SLACK_PX or b["right"] > column["right"] + SLACK_PX]
    assert outside == [], f"blocks outside the {column['left']:.0f}-{column['right']:.0f} px column"
    blocks = [b for b in rects["blocks"] if b["bottom"] > b["top"]]
    overlaps = [(a["text"], b["text"]) for a, b in zip(blocks, blocks[1:]) if b["top"] < a["bottom"] - SLACK_PX]
    assert overlaps == []
    assert any(b["cls"] == "wide" for b in blocks)  # the tables were laid out (in their boxes)


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("name", ["reactor-split-100k-sndbuf16k.json", "fanout-pool-20k.json",
                                  "event-loop-spin-100k.json"])
def test_figure_legends_cover_nothing(name, monkeypatch):
    """Each figure's legend, in the drawn figure's pixels, covers no bar, no value label and no tick label
    of any axes (before: metric_bars' legend sat on the last bar and its `before → after` label)."""
    drawn = []

    def check(fig):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            box = legend.get_window_extent(renderer)
            for other in fig.axes:
                covered = [a for a in [*other.patches, *other.texts, *other.get_yticklabels(), *other.get_xticklabels()]
                           if a.get_visible() and a.get_window_extent(renderer).width > 0
                           and _overlap(box, a.get_window_extent(renderer))]
                assert covered == [], f"{ax.get_title()}: the legend covers {covered[:3]}"
            drawn.append(ax.get_title())
        return "png"

    monkeypatch.setattr(figures, "to_png", check)
    analysis = analyze(load(CAPTURES / name))
    figures.syscall_mix(analysis)
    figures.events_per_poll_hist(analysis)
    other = analyze(load(CAPTURES / "event-loop-clean.json"))
    figures.time_series({"before": other.intervals, "after": analysis.intervals})
    names = ["writes_per_request", "handoffs_per_request", "cpu_ms_per_request", "request_ms"]
    figures.metric_bars(other.process, analysis.process, names)
    assert {"Syscall mix per thread", "Rates per interval",
            "Before and after (each metric scaled to the larger value)"} <= set(drawn)
