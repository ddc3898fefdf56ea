"""`spinscope report`: verdicts first, evidence after; JSON for machines; an HTML page a browser renders."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

import captures
from browser import run_chromium



def test_terminal_report_leads_with_the_verdict(capture_file, cli):
    result = cli("report", capture_file(captures.write_spin_server()))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("spinscope report spinsrv (pid 100): 10.0 s, 1 thread, 5,000 requests (500/s)")
    verdict = next(i for i, line in enumerate(lines) if "write-spin on" in line)
    assert lines[verdict].startswith("CRITICAL write-spin on 64–128 KiB responses: 40 writes per response, 35 of them retrying")
    assert verdict < next(i for i, line in enumerate(lines) if line.startswith("Threads"))
    assert any("fix: on EAGAIN stop writing and wait for EPOLLOUT" in line for line in lines)
    assert any("event loop" in line and "spinsrv/100" in line and "200,000" in line for line in lines)


def test_terminal_report_names_roles_and_wakeup_edges(capture_file, cli):
    out = cli("report", capture_file(captures.reactor_split())).stdout
    assert "threads: 1 event loop, 4 workers" in out
    assert "handoff overhead: each request is handed to another thread and back: 4.0 handoffs between threads per request" in out
    assert "Wakeup graph (top edges)" in out
    assert "event loop reactor/300" in out and "worker worker/301" in out


def test_healthy_server_says_so(capture_file, cli):
    out = cli("report", capture_file(captures.thread_per_connection())).stdout
    assert "No write-spin, spurious select or handoff overhead found." in out
    assert "threads: 8 handlers, 1 idle thread" in out


def test_no_requests_is_said_not_hidden(capture_file, cli):
    doc = captures.capture([captures.thread(1, poll_calls=100, poll_zero=100)])
    out = cli("report", capture_file(doc)).stdout
    assert "note: no requests were observed" in out
    assert "n/a" in out


def test_json_output(capture_file, cli):
    result = cli("report", "--json", capture_file(captures.reactor_split()))
    doc = json.loads(result.stdout)
    assert set(doc) == {"capture", "metrics", "labels", "findings", "notes"}
    assert doc["metrics"]["process"]["handoffs_per_request"] == 4.0
    assert doc["metrics"]["roles"]["event-loop"] == [300]
    label, = doc["labels"]
    assert label["name"] == "handoff-overhead" and label["title"] == "handoff overhead"
    assert {"severity", "summary", "evidence", "cpu_share", "fixes"} <= set(label)
    threads = {t["tid"]: t for t in doc["metrics"]["threads"]}
    assert threads[301]["role"] == "worker" and threads[301]["events_per_poll"] is None  # NaN becomes null


def test_json_with_zero_requests_is_valid_json(capture_file, cli):
    doc = captures.capture([captures.thread(1, write_calls=5)])
    out = json.loads(cli("report", "--json", capture_file(doc)).stdout)
    assert out["metrics"]["process"]["writes_per_request"] is None and out["labels"] == []


@pytest.fixture
def html_report(tmp_path, capture_file, cli):
    out = tmp_path / "report.html"
    result = cli("report", capture_file(captures.reactor_split()), "--html", out)
    assert result.returncode == 0, result.stderr
    return out


def test_html_is_self_contained_with_figures(html_report):
    html = html_report.read_text()
    assert "handoff overhead: each request is handed to another thread and back: 4.0 handoffs between threads per request" in html
    assert html.count("data:image/png;base64,") >= 5  # mix, writes hist, events hist, graph, time series
    assert "http://" not in html and "https://" not in html and "<script" not in html


def test_html_renders_in_headless_chromium(html_report, tmp_path):
    png = tmp_path / "screenshot.png"
    run_chromium(tmp_path, "--headless", f"--screenshot={png}", "--window-size=1200,2000", html_report.as_uri(),
                 timeout=90)
    assert png.exists() and png.stat().st_size > 20_000
    pixels = np.asarray(Image.open(png).convert("L"))
    assert pixels.std() > 20  # text, tables and plots, not a blank page
    assert (pixels < 100).mean() > 0.01  # a fair amount of dark ink


def test_thread_columns_say_what_they_mean(capture_file, cli, html_report):
    """Every header of the threads table has its glossary line: one line under the table in the terminal
    (not wrapped into a file), the header's title in HTML."""
    from spinscope.output import report

    assert len(report.THREAD_MEANINGS) == len(report.THREAD_HEADERS)
    assert all(meaning.strip() for meaning in report.THREAD_MEANINGS)
    out = cli("report", capture_file(captures.write_spin_server())).stdout
    glossary = [line for line in out.splitlines() if line.startswith("columns: role: ")]
    assert len(glossary) == 1
    assert "; no t/o: share of poll calls made with a zero timeout (checks that never wait);" in glossary[0]
    assert "; woken: wakeups it received from the target's threads" in glossary[0]
    assert '<th title="share of poll calls made with a zero timeout (checks that never wait)">no t/o</th>' in \
        html_report.read_text()


def test_a_short_capture_prints_no_absurd_rate(capture_file, cli):
    """Rates and shares over a few milliseconds: a 1.5 ms capture printed `0.060 s CPU (4029% of one CPU)`
    (the collector's CPU time includes loading the probes, before the capture) and `675/s exited` (one
    thread); 2 requests in 10 s printed `(0/s)`. Now no rate under a second, the collector's share only of a
    capture long enough to carry it, and a rate under 10/s in significant digits."""
    doc = captures.capture([captures.thread(1), captures.thread(2)], requests=2, duration_s=0.0015)
    doc["schema"] = 4
    doc["tool"].update(cpu_s=0.06, max_rss_bytes=12 << 20, map_bytes=2 << 20)
    doc["totals"].update(threads_created=1, threads_exited=1)
    lines = cli("report", capture_file(doc)).stdout.splitlines()
    assert lines[0] == "spinscope report server (pid 1): 0.0 s, 2 threads, 2 requests"
    assert "thread churn: 1 thread created and 1 exited during the capture" in lines
    assert ("collector: 0.060 s CPU (its start, loading the probes, included), 12.0 MiB resident at most, BPF maps "
            "2.00 MiB") in lines
    doc = captures.capture([captures.thread(1), captures.thread(2)], requests=2, duration_s=10.0)
    doc["schema"] = 4
    doc["tool"].update(cpu_s=0.06, max_rss_bytes=12 << 20, map_bytes=2 << 20)
    lines = cli("report", capture_file(doc)).stdout.splitlines()
    assert lines[0] == "spinscope report server (pid 1): 10.0 s, 2 threads, 2 requests (0.2/s)"
    assert any(line.startswith("collector: 0.060 s CPU (0.6% of one CPU over the capture, its start included)")
               for line in lines)
