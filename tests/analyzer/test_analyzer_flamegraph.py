"""The page's flame graphs (issue 41, item 3): `report --html` of a capture with stacks draws them in the browser
(d3-flame-graph, vendored and inlined), one view of the whole capture and per pattern found, the pattern's
frames marked, with search and zoom. On a synthetic capture whose folded stacks are known, headless Chromium
runs the page's own `#selftest` (flamegraph.js): the frames drawn, the share a search matches, the root after a
zoom are exact. Names the traced process chose (`</script>`, `<img onerror>`) stay text; without JavaScript
the views are tables; the page makes no request and carries no address but its licences' and the XML
namespaces' names.

Without Chromium the browser tests skip saying so; scripts/setup.sh installs it (apt-get install chromium)."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import subprocess
import time
from urllib.parse import quote

import pytest

import captures
from browser import chromium_command, run_chromium
from paths import DOCS
from spinscope.analysis.capture import load
from spinscope.analysis.labels import assess
from spinscope.analysis.metrics import analyze
from spinscope.output import flamegraph
from test_analyzer_stacks import FRAMES, block, frame, stack

SWITCHES = ("--headless=new", "--virtual-time-budget=5000", "--window-size=1280,1600")
WORKER_RUN = "WorkerThread.run (site-packages/anyio/_backends/_asyncio.py)"
# XML namespaces' names in d3-selection and d3-interpolate: identifiers, never fetched.
NAMESPACES = {"http://www.w3.org/1999/xhtml", "http://www.w3.org/1999/xlink", "http://www.w3.org/2000/svg",
              "http://www.w3.org/2000/xmlns/", "http://www.w3.org/XML/1998/namespace"}


def fixture_capture(frames=FRAMES, comm="reactor") -> dict:
    """reactor_split's counters (a hand-off label) with runtime samples whose folded stacks are (the runtime's
    frames between Python frames left out; the two workers drawn as one root):

        worker threads (2);Thread._bootstrap_inner;WorkerThread.run;Queue.get;Condition.wait 30
        worker threads (2);Thread._bootstrap_inner;WorkerThread.run;endpoint;json.dumps 70
        event loop reactor (300);WorkerThread.run;Queue.get;Condition.wait;_PyEval_EvalFrameDefault;futex_wait 5

    and 400 hand-off events on one stack: 1 + 2 + 6 + 5 = 14 frames in the whole view; the collector sampled
    the same time (4 samples of the loop's, native frames only: a view of their own)."""
    doc = captures.reactor_split(comm=comm)
    doc["threads"][0]["comm"] = comm
    doc["schema"] = 6
    doc["stacks"] = block([stack(301, [1, 2, 3, 4], 30, "runtime"), stack(302, [9, 5, 3, 4], 70, "runtime"),
                           stack(300, [0, 13, 1, 2, 3], 5, "runtime"), stack(300, [10, 13, 13], 4),
                           stack(300, [10, 11, 12], 40, "handoff", weight=400)], frames)
    return doc


def page(tmp_path, doc) -> str:
    path = tmp_path / "capture.json"
    path.write_text(json.dumps(doc))
    analysis = analyze(load(path))
    from spinscope.output import report
    return report.render_html(analysis, assess(analysis))


def chromium(tmp_path, html_text: str, fragment: str = "", *switches) -> str:
    path = tmp_path / "page.html"
    path.write_text(html_text, encoding="utf-8")
    result = run_chromium(tmp_path, *SWITCHES, *switches, "--dump-dom", path.as_uri() + fragment)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def selftest(tmp_path, html_text: str, **asked) -> dict:
    fragment = "#selftest&" + "&".join(f"{k}={quote(v)}" for k, v in asked.items())
    return written(chromium(tmp_path, html_text, fragment))


def written(dom: str) -> dict:
    """What the selftest wrote (the last such element: the viewer's own text names it too)."""
    found = re.findall(r'<pre id="spinscope-selftest">(.*?)</pre>', dom, re.S)
    assert found, "the page's selftest did not run"
    return json.loads(html.unescape(found[-1]))


def test_views_are_the_folded_stacks_of_the_whole_capture_and_of_each_pattern(tmp_path):
    analysis = analyze(load(captures.write(tmp_path, fixture_capture(), "c.json")))
    shown = {v.id: v for v in flamegraph.views(analysis, assess(analysis))}
    assert list(shown) == ["all.samples", "all-other.samples", "handoff-overhead.samples", "handoff-overhead.events"]
    assert [shown[i].total for i in shown] == [105, 4, 35, 400]
    assert shown["all.samples"].said == "105 CPU samples (the runtime helper's), the other sampler's 4 (the same time) left out"
    assert shown["all-other.samples"].title == "the whole capture, the collector's sampler: CPU samples"
    assert [[f.name for f in path[1:]] for path in shown["all-other.samples"].paths] == [
        ["_PyEval_EvalFrameDefault", "_PyEval_EvalFrameDefault", "__write"]]  # no language frame: as it was
    data = flamegraph.data(list(shown.values()))

    def named(node):
        return [data["names"][node[0]], node[1], [named(c) for c in node[3]]]
    assert named(data["views"][0]["tree"]) == [
        "the whole capture: CPU samples", 105, [
            ["event loop reactor (300)", 5, [[WORKER_RUN, 5, [["Queue.get (<stdlib>/queue.py)", 5, [
                ["Condition.wait (<stdlib>/threading.py)", 5, [["_PyEval_EvalFrameDefault", 5, [["futex_wait", 5, []]]]]]]]]]]],
            ["worker threads (2)", 100, [["Thread._bootstrap_inner (<stdlib>/threading.py)", 100, [[WORKER_RUN, 100, [
                ["Queue.get (<stdlib>/queue.py)", 30, [["Condition.wait (<stdlib>/threading.py)", 30, []]]],
                ["endpoint (app.py)", 70, [["json.dumps (<stdlib>/json/__init__.py)", 70, []]]]]]]]]]]]
    # The hand-off's view marks its call site (WorkerThread.run) and its machinery (the queue, the futex).
    kinds = {}

    def walk(node):
        kinds.setdefault(data["names"][node[0]], set()).add(node[2])
        for c in node[3]:
            walk(c)
    walk(data["views"][2]["tree"])
    assert {n for n, k in kinds.items() if k == {flamegraph.SITE}} == {WORKER_RUN}
    assert {n for n, k in kinds.items() if k == {flamegraph.MACHINERY}} == {
        "Queue.get (<stdlib>/queue.py)", "Condition.wait (<stdlib>/threading.py)", "futex_wait"}
    assert flamegraph.heaviest(shown["all.samples"])[:2] == [(WORKER_RUN, 105, 0, flamegraph.RUNTIME),
                                                            ("Thread._bootstrap_inner (<stdlib>/threading.py)", 100, 0,
                                                             flamegraph.RUNTIME)]


def test_the_page_draws_searches_and_zooms_in_chromium(tmp_path):
    text = page(tmp_path, fixture_capture())
    found = selftest(tmp_path, text, search="queue.GET", zoom="worker threads (2)")
    assert found["views"] == ["all.samples", "all-other.samples", "handoff-overhead.samples", "handoff-overhead.events"]
    assert found["frames"] == 14
    assert found["search"] == {"matched": 35, "total": 105, "marked": 2,
                               "said": 'search "queue.GET": 35 of 105 CPU samples (33.3%) in 2 frames'}
    # Zoomed into the workers: the root and the group faded, the group as wide as the chart, its 6 frames drawn.
    assert found["zoom"] == {"found": True, "root": "worker threads (2)", "width": found["zoom"]["chart"],
                             "chart": found["zoom"]["chart"], "frames": 8, "faded": 1}
    assert found["requests"] == 0  # no resource fetched
    marked = selftest(tmp_path, text, view="handoff-overhead.samples", search="futex")
    assert marked["frames"] == 1 + 2 + 4 + 5  # root, two threads, a worker's 4 frames, the loop's 5
    assert marked["search"]["matched"] == 5 and marked["search"]["total"] == 35


def test_a_patterns_evidence_links_to_its_views(tmp_path):
    """Beside the hand-off's evidence, a link to each of its views' tables; following one shows that view."""
    text = page(tmp_path, fixture_capture())
    assert ('<p>Its stacks, in the flame graphs below: <a href="#flame-handoff-overhead.samples">handoff overhead: '
            'its CPU samples</a>, <a href="#flame-handoff-overhead.events">handoff overhead: its events</a></p>') in text
    assert text.count('<details id="flame-') == 4
    dom = chromium(tmp_path, text, "#flame-handoff-overhead.events")
    shown = re.search(r'<div id="spinscope-flame" class="flame">.*?<p class="note">(.*?)</p>', dom, re.S).group(1)
    assert shown == "400 events in 1 event stacks"


def test_names_the_process_chose_stay_text(tmp_path):
    hostile = "</script><img src=x onerror=\"document.title='pwned'\">"
    frames = [dict(f) for f in FRAMES]
    frames[5] = frame(f"end{hostile}point", "python", "[python]", "app.py", 12)
    text = page(tmp_path, fixture_capture(frames, comm="<script>document.title='pwned'</script>&amp;"))
    data = re.search(r'<script type="application/json" id="spinscope-flame-data">(.*?)</script>', text, re.S).group(1)
    assert "<" not in data and ">" not in data and "&" not in data
    assert text.count("<script") == 3 and text.count("</script>") == 3  # the data, the libraries, the viewer
    scripts = re.findall(r"\n<script>(.*?)</script>", text, re.S)  # the policy lets these two run, no other
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'" for s in scripts)
    assert f"script-src {hashes}\">" in text.split("</head>")[0] and len(scripts) == 2
    dom = chromium(tmp_path, text, "#selftest&search=" + quote("onerror"))
    assert html.unescape(re.search(r"<title>(.*?)</title>", dom).group(1)) == \
        "spinscope report: <script>document.title='pwned'</script>&amp; (pid 300)"
    assert "<img src=\"x\"" not in dom and "<img src=x" not in dom
    found = written(dom)
    assert f"end{hostile}point (app.py)" in found["names"]
    assert "event loop <script>document.title='pwned'</script>&amp; (300)" in found["names"]
    assert found["search"]["matched"] == 70


def without_javascript(tmp_path, html_text: str) -> str:
    """The page's DOM once loaded in Chromium with scripts disabled (Emulation.setScriptExecutionDisabled through
    the DevTools protocol on a pipe: `--dump-dom` itself needs scripts, and no switch turns them off in headless
    mode)."""
    with chromium_command(tmp_path, "--headless=new", "--remote-debugging-pipe", "about:blank") as (argv, env):
        page_path = tmp_path / "page.html"
        page_path.write_text(html_text, encoding="utf-8")
        to_chromium, commands = os.pipe()
        replies, from_chromium = os.pipe()
        proc = subprocess.Popen(["bash", "-c", f'exec "$0" "$@" 3<&{to_chromium} 4>&{from_chromium}', *argv], env=env,
                                pass_fds=(to_chromium, from_chromium), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chromium), os.close(from_chromium)
        events, pending, ids = [], b"", iter(range(1, 1000))
        with os.fdopen(commands, "wb", 0) as out, os.fdopen(replies, "rb", 0) as inp:
            def send(method, session=None, **params):
                nonlocal pending
                number = next(ids)
                out.write(json.dumps({"id": number, "method": method, "params": params,
                                      **({"sessionId": session} if session else {})}).encode() + b"\0")
                while True:
                    while b"\0" not in pending:
                        chunk = inp.read(65536)
                        assert chunk, "Chromium closed its DevTools pipe"
                        pending += chunk
                    message, pending = pending.split(b"\0", 1)
                    reply = json.loads(message)
                    if reply.get("id") == number:
                        assert "error" not in reply, reply
                        return reply["result"]
                    events.append(reply.get("method"))
            try:
                target = send("Target.createTarget", url="about:blank")["targetId"]
                session = send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
                send("Page.enable", session)
                send("Emulation.setScriptExecutionDisabled", session, value=True)
                send("Page.navigate", session, url=page_path.as_uri())
                deadline = time.monotonic() + 60
                while "Page.loadEventFired" not in events:
                    assert time.monotonic() < deadline, "the page did not load in 60 s"
                    send("DOM.getDocument", session, depth=0)  # a round trip: the events that came meanwhile
                root = send("DOM.getDocument", session, depth=0)["root"]["nodeId"]
                return send("DOM.getOuterHTML", session, nodeId=root)["outerHTML"]
            finally:
                proc.kill()
                proc.wait(30)


def test_without_javascript_the_views_are_tables(tmp_path):
    dom = without_javascript(tmp_path, page(tmp_path, fixture_capture()))
    assert "<noscript><p class=\"note\">JavaScript is off: each view's heaviest frames are in the tables below.</p>" in dom
    assert '<div class="flame-controls">' not in dom and 'class="partition d3-flame-graph"' not in dom  # no viewer
    summaries = re.findall(r"<summary>(.*?)</summary>", dom)
    assert summaries == [
        "the whole capture: CPU samples: 105 CPU samples (the runtime helper's), the other sampler's 4 (the same "
        "time) left out; its 8 heaviest frames",
        "the whole capture, the collector's sampler: CPU samples: 4 CPU samples (the collector's), the other "
        "sampler's 105 (the same time) left out; its 2 heaviest frames",
        "handoff overhead: its CPU samples: 35 CPU samples (the runtime helper's), the other sampler's 4 (the same "
        "time) left out; its 6 heaviest frames",
        "handoff overhead: its events: 400 events in 1 event stacks; its 3 heaviest frames"]
    first = re.search(r"<details id=\"flame-all.samples\"><summary>.*?</summary>(.*?)</details>", dom, re.S).group(1)
    assert re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td>", first)[:2] == [
        (html.escape(WORKER_RUN, quote=False), "100%", "0%"),
        ("Thread._bootstrap_inner (&lt;stdlib&gt;/threading.py)", "95%", "0%")]


def test_the_page_names_no_address_but_licences_and_xml_namespaces(tmp_path):
    text = page(tmp_path, fixture_capture())
    # Each vendored file inlined as npm publishes it (vendor/SHA256SUMS, checked against the registry by
    # scripts/vendor-flamegraph.sh), its licence with it.
    sums = dict(line.split()[::-1] for line in (flamegraph.VENDOR / "SHA256SUMS").read_text().splitlines())
    for name, _ in flamegraph._manifest():
        for suffix in ("min.js", "LICENSE"):
            content = (flamegraph.VENDOR / f"{name}.{suffix}").read_bytes()
            assert hashlib.sha256(content).hexdigest() == sums[f"{name}.{suffix}"]
        assert (flamegraph.VENDOR / f"{name}.min.js").read_text() in text
    licences = flamegraph.licences()
    assert licences in text and "Apache License" in licences and "Robert Penner" in licences
    outside = text.replace(licences, "")
    outside = re.sub(r"^// https://d3js\.org/[\w-]+/ v[\d.]+ Copyright .*$", "", outside, flags=re.M)  # each module's
    assert set(re.findall(r"https?://[^\s\"'<>)]*", outside)) <= NAMESPACES
    assert "default-src 'none'" in text


def test_the_docs_say_what_the_page_holds():
    """docs/stacks.md's section: the library's version, the size of the scripts, the tables' length."""
    section = (DOCS / "stacks.md").read_text().split("## The page's flame graphs")[1].split("\n## ")[0]
    version = dict(flamegraph._manifest())["d3-flame-graph"]
    scripts = flamegraph.licences() + "\n" + "\n".join(flamegraph._vendored()) + (flamegraph.HERE / "flamegraph.js").read_text()
    said = " ".join(section.split())
    assert f"d3-flame-graph {version} with the d3 modules it uses" in said
    assert f"{round(len(scripts.encode()) / 1000)} KB a page" in said
    assert f"a table of its {flamegraph.TOP_FRAMES} heaviest frames" in said
