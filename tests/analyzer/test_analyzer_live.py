"""The live pieces that need no collector: windows between two stream lines, the rows `top` shows, the
exporter's exposition from a capture, the Prometheus buckets from log2 ones, process selectors, and the
fleet files in deploy/ (every metric the dashboard and the alert rules query is one the exporter writes)."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from spinscope.analysis import capture, schema
from spinscope.analysis.labels import assess
from spinscope.analysis.metrics import analyze

from spinscope.analysis.patterns import FINDING_NAMES, LABEL_NAMES
from spinscope.errors import SpinscopeError
from spinscope.live import exporter, exposition, stream as live, top
from paths import CAPTURES, DEPLOY



def zeroed(doc: dict) -> dict:
    """The same capture at its start: every count 0, the same threads."""
    doc = copy.deepcopy(doc)
    doc["duration_s"] = 0.0
    for row in doc["threads"]:
        row.update({key: 0 for key in schema.COUNTERS}, poll_events_hist=[])
    doc["totals"].update({key: 0 for key in schema.COUNTERS})
    for edge in doc["wakeups"]:
        edge["count"] = 0
    doc["requests"].update({key: 0 for key in (*schema.REQUEST_SUMS, "unattributed_writes")},
                           hist={key: [] for key in schema.REQUEST_HISTS}, by_size=[])
    doc["drops"] = {key: 0 for key in schema.DROP_KEYS}
    if isinstance(doc.get("stacks"), dict):  # the collector only appends stacks: none yet
        doc["stacks"]["stacks"] = []
    return doc


@pytest.fixture(scope="module")
def spin():
    return capture.load(CAPTURES / "event-loop-spin-100k.json")


@pytest.fixture(scope="module")
def split():
    return capture.load(CAPTURES / "reactor-split.json")


def test_a_window_from_the_start_is_the_whole_capture(split):
    start = capture.from_document(zeroed(split.raw))
    whole = live.window(start, split)
    assert whole.duration_s == pytest.approx(split.duration_s)
    assert whole.totals == split.totals
    assert whole.requests == split.requests
    assert whole.request_hists == split.request_hists

    def counters(cap):
        return {tid: {key: thread[key] for key in schema.COUNTERS} for tid, thread in cap.threads.items()}
    assert counters(whole) == counters(split)
    assert sum(edge["count"] for edge in whole.wakeups) == sum(edge["count"] for edge in split.wakeups)
    assert whole.intervals == []


def test_a_window_of_nothing_counts_nothing(split):
    nothing = live.window(split, split)
    assert nothing.duration_s == 0
    assert sum(nothing.totals[key] for key in schema.COUNTERS) == 0
    assert nothing.request_count == 0 and nothing.by_size == []
    assert all(hist == [] for hist in nothing.request_hists.values())


def test_a_reused_tid_counts_whole(split):
    older = copy.deepcopy(split.raw)
    tid = older["threads"][0]["tid"]
    older["threads"][0]["pid"] += 1  # another process had that tid before
    got = live.window(capture.from_document(older), split)
    assert got.threads[tid]["oncpu_ns"] == split.threads[tid]["oncpu_ns"]


def test_history_keeps_a_window():
    def line(t):
        doc = json.loads((CAPTURES / "event-loop-clean.json").read_text())
        doc["duration_s"] = t
        return live.Line(capture.from_document(doc), t)

    history = live.History(3)
    assert history.last() is None and history.span() is None
    for t in range(10):
        history.add(line(float(t)))
    assert history.newest.capture.duration_s == 9
    assert history.lines[0].capture.duration_s == 6  # the window's start: 3 s before the newest
    assert history.last().duration_s == 1 and history.span().duration_s == 3


def test_loads_checks_a_line_as_load_does_a_file(spin, monkeypatch):
    data = json.dumps(spin.raw).encode()
    assert capture.loads(data).request_count == spin.request_count
    with pytest.raises(SpinscopeError, match="stream line: not a spinscope capture"):
        capture.loads(b'{"format": "x"}', "stream line")
    with pytest.raises(SpinscopeError, match="truncated JSON"):
        capture.loads(data[:100])
    monkeypatch.setattr(capture, "MAX_CAPTURE_BYTES", 10)
    with pytest.raises(SpinscopeError, match="larger than a capture is read"):
        capture.loads(data)


def test_top_rows_per_thread_and_per_role(split):
    process, rows = top.rows(split, split, by_role=False)
    assert len(rows) == len(split.threads)
    assert process["requests_per_s"] == pytest.approx(split.request_count / split.duration_s)
    assert sum(r["cpu_percent"] for r in rows) == pytest.approx(process["cpu_percent"])
    assert process["handoffs_per_request"] > 1.5  # the reactor hands every request over and back
    _, roles = top.rows(split, split, by_role=True)
    assert {r["name"] for r in roles} == {r["role"] for r in rows}
    assert sum(r["threads"] for r in roles) == len(rows)
    ordered = top.sort_rows(rows, "cpu_percent", reverse=False)
    assert [r["cpu_percent"] for r in ordered] == sorted((r["cpu_percent"] for r in rows), reverse=True)


def test_top_screen_shows_labels_and_rows(spin):
    from rich.console import Console

    process, rows = top.rows(spin, spin, by_role=False)
    labels, notes = top.judge(spin)
    assert [label.title for label in labels] == ["write-spin"]
    console = Console(width=160, record=True, file=open("/dev/null", "w"))
    console.print(top.render(top.ViewState(), {"name": spin.name, "elapsed": 3.0, "window": 3.0}, process, rows,
                             labels, notes, height=40))
    text = console.export_text()
    assert "CRITICAL write-spin" in text
    assert re.search(r"\b%d\s+event-loop\s+refserver" % rows[0]["tid"], text)
    assert "process" in text and "q quit" in text


def test_top_says_in_its_title_when_a_runtimes_frames_are_not_named_live(spin, monkeypatch):
    """`top --stacks` on CPython (this interpreter) says why its call sites are native frames; on a process
    without a runtime the helper unwinds it says nothing. Which runtime a process runs is the
    collector's reading (`--runtime`: tests/collector/test_runtime.py), given here as it says it."""
    from rich.console import Console

    from spinscope.tracing import stacks_helper

    native = os.getppid()
    monkeypatch.setattr(stacks_helper, "runtime_of", {os.getpid(): "cpython", native: None}.get)
    note = stacks_helper.not_live(os.getpid())
    assert note.startswith("cpython target: its runtime's frames are not named live")
    assert stacks_helper.not_live(native) is None
    process, rows = top.rows(spin, spin, by_role=False)
    console = Console(width=400, record=True, file=open("/dev/null", "w"))
    console.print(top.render(top.ViewState(stacks_note=note), {"name": spin.name, "elapsed": 3.0, "window": 3.0,
                                                                "stacks_note": note}, process, rows, [], [], 40))
    assert note in console.export_text()


def test_top_keys_change_the_view_in_order_and_q_quits():
    state = top.ViewState()
    assert not top._press(state, "ssrg")
    assert (state.sort, state.reverse, state.by_role) == (top.SORT_KEYS[2], True, True)
    assert not top._press(state, "SSS")  # back past the first: the last
    assert state.sort == top.SORT_KEYS[-1]
    assert top._press(state, "rqg")  # a q quits; what follows it is left
    assert (state.reverse, state.by_role) == (False, True)
    assert not top._press(state, "x") and state.sort == top.SORT_KEYS[-1]  # an unknown key is nothing


def test_log2_buckets_become_cumulative_prometheus_buckets():
    # bucket 0: value 0 (1 request); bucket 1: 1 (2); bucket 2: 2..3 (3); bucket 4: 8..15 (4)
    got = exposition._log2_buckets([1, 2, 3, 0, 4], range(0, 5))
    assert got == [("0.0", 1), ("1.0", 3), ("3.0", 6), ("7.0", 6), ("15.0", 10), ("+Inf", 10)]
    seconds = exposition._log2_buckets([0] * 11 + [5], range(10, 12), 1e-9)
    assert seconds == [("1.023e-06", 0), ("2.047e-06", 5), ("+Inf", 5)]


def scraped(cap, labels=()) -> str:
    view = exposition.view_of(cap, f"--pid {cap.target['pid']}", list(labels))
    registry = CollectorRegistry()

    class Fixed:
        def collect(self):
            return exposition.families([view], {f"--pid {cap.target['pid']}": 1})

    registry.register(Fixed())
    return generate_latest(registry).decode()


def test_exposition_of_a_capture(spin):
    labels = exposition.judge(spin)
    assert [name for name, severity, *_ in labels if severity is None] == []  # the spinning loop: no finding
    text = scraped(spin, labels + [("busy-polling", None, 0.3, [])])
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {s.name for f in families.values() for s in f.samples}
    assert samples == exposition.sample_names(conditional=False)  # every family always written, nothing else
    # A finding is exported as a finding, never as a label.
    assert [s.labels["finding"] for s in families["spinscope_finding"].samples] == ["busy-polling"]
    assert all(s.labels["label"] != "busy-polling" for s in families["spinscope_label"].samples)
    def value(name, **match):
        return sum(s.value for s in families[name].samples if s.name == name + "_total" or s.name == name
                   if all(s.labels.get(k) == v for k, v in match.items()))
    assert value("spinscope_requests") == spin.request_count
    assert value("spinscope_socket_writes") == spin.totals["write_calls"]
    assert value("spinscope_socket_writes", result="eagain") == spin.totals["write_eagain"]
    assert value("spinscope_cpu_seconds") == pytest.approx(spin.totals["oncpu_ns"] / 1e9)
    assert value("spinscope_label", label="write-spin", severity="critical") == 1
    buckets = [s for s in families["spinscope_request_writes"].samples if s.name.endswith("_bucket")]
    assert [s.value for s in buckets] == sorted(s.value for s in buckets)
    assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == spin.request_count
    assert all("tid" not in s.labels for f in families.values() for s in f.samples)
    # HTTP/1 only: no connection counted by stream or TLS.
    assert value("spinscope_connections") == value("spinscope_http2_streams") == 0


def test_exposition_says_which_connections_were_counted_by_stream():
    cap = capture.load(CAPTURES / "event-loop-spin-100k.json")  # its own copy: its counters are changed
    for row in (*cap.threads.values(), cap.totals):
        row.update(h2_connections=4, h2_streams=900, tls_connections=2, h2_lost_bytes=17)
    families = {f.name: f for f in text_string_to_metric_families(scraped(cap))}

    def value(name, **match):
        return sum(s.value for s in families[name].samples
                   if all(s.labels.get(k) == v for k, v in match.items()) and not s.name.endswith("_created"))
    threads = len(cap.threads)
    assert value("spinscope_connections", counted="stream") == 4 * threads
    assert value("spinscope_connections", counted="tls") == 2 * threads
    assert value("spinscope_http2_streams") == 900 * threads
    assert value("spinscope_http2_unfollowed_bytes") == 17 * threads


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (Debian's prometheus package) not installed")
def test_exposition_passes_promtool(spin):
    result = subprocess.run(["promtool", "check", "metrics"], input=scraped(spin, exposition.judge(spin)),
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def queried_metrics(expr: str) -> set:
    """The metric names a PromQL expression reads (label names and functions are not spinscope_*)."""
    return set(re.findall(r"\bspinscope_[a-z0-9_]+", expr))


def fleet_exprs() -> list:
    dashboard = json.loads((DEPLOY / "grafana" / "spinscope-dashboard.json").read_text())
    exprs = [(f"panel {p['title']!r}", t["expr"]) for p in dashboard["panels"] for t in p.get("targets", ())]
    exprs += [(f"variable {v['name']}", v["definition"]) for v in dashboard["templating"]["list"] if "definition" in v]
    rules = yaml.safe_load((DEPLOY / "prometheus" / "spinscope-rules.yml").read_text())
    exprs += [(f"rule {r['alert']}", r["expr"]) for g in rules["groups"] for r in g["rules"]]
    return exprs


def test_every_metric_the_dashboard_and_rules_query_is_exported():
    exprs = fleet_exprs()
    assert len(exprs) > 30
    unknown = {(where, name) for where, expr in exprs for name in queried_metrics(expr)
               if name not in exposition.sample_names()}
    assert unknown == set()
    assert all(queried_metrics(expr) for _, expr in exprs), "an expression that queries no spinscope metric"
    # Each of the three signals has its panels.
    titles = " ".join(where for where, _ in exprs)
    for word in ("Spin retries", "Poll calls", "Handoffs per request", "Labels"):
        assert word in titles


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (Debian's prometheus package) not installed")
def test_rules_pass_promtool():
    result = subprocess.run(["promtool", "check", "rules", str(DEPLOY / "prometheus" / "spinscope-rules.yml")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_daemonset_grants_what_the_collector_needs():
    spec = yaml.safe_load((DEPLOY / "kubernetes" / "daemonset.yaml").read_text())["spec"]["template"]["spec"]
    assert spec["hostPID"] is True
    container = spec["containers"][0]
    assert {"BPF", "PERFMON"} <= set(container["securityContext"]["capabilities"]["add"])
    assert container["args"][0] == "exporter"


def test_selectors_match_by_pid_name_and_executable():
    procs = {1: live.Proc(1, 0, "init", "/sbin/init"), 10: live.Proc(10, 1, "nginx", "/usr/sbin/nginx"),
             11: live.Proc(11, 10, "nginx", "/usr/sbin/nginx"), 20: live.Proc(20, 1, "nginx", "/opt/nginx")}
    assert live.matches(live.Selector("pid", "11"), procs) == [11]
    assert live.matches(live.Selector("pid", "99"), procs) == []
    # A worker whose parent matches too is its master's: only the masters are targets.
    assert live.matches(live.Selector("comm", "nginx"), procs) == [10, 20]
    assert live.matches(live.Selector("exe", "/opt/nginx"), procs) == [20]
    assert not live.Selector("pid", "11").can_return and live.Selector("comm", "nginx").can_return
    # What each asks of the collector: a cgroup is one target whatever --children says.
    assert live.Selector("pid", "11", children=True).collector_args(11) == ["--pid", "11", "--children"]
    assert live.Selector("comm", "nginx").collector_args(10) == ["--pid", "10"]
    assert live.Selector("cgroup", "/sys/fs/cgroup/pod").collector_args() == ["--cgroup", "/sys/fs/cgroup/pod"]
    assert live.Selector("cgroup", "/sys/fs/cgroup/pod").can_return


def test_processes_of_given_pids_are_those_of_the_whole_scan():
    """The exporter with PIDs alone reads only their /proc entries: the same Proc as a whole scan gives, and
    nothing for a PID that is gone or a kernel thread (pid 2, kthreadd)."""
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        whole = live.processes()
        got = live.processes(only=[sleeper.pid, 2, 2**22 + 1])
        assert got == {sleeper.pid: whole[sleeper.pid]}
        assert got[sleeper.pid].comm == "sleep" and got[sleeper.pid].ppid == os.getpid()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_process_table_reads_new_processes_at_once_and_all_of_them_at_the_rescan():
    """ProcessTable, the exporter's scan for --comm and --exe: a process started or ended since the last
    scan shows at the next one; one already known is read again only at the rescan, which is when its exec
    (a new name, a new executable) shows."""
    now = [0.0]
    table = live.ProcessTable(rescan_s=10.0, clock=lambda: now[0])
    # Python until its stdin says go, then sleep (an entrypoint that execs its server).
    execs = subprocess.Popen([sys.executable, "-c", "import os, sys; sys.stdin.readline(); "
                              "os.execvp('sleep', ['sleep', '30'])"], stdin=subprocess.PIPE)
    later = None
    try:
        first = table.scan()
        assert first[execs.pid] == live.processes(only=[execs.pid])[execs.pid]
        assert first[execs.pid].comm.startswith("python") and first[execs.pid].ppid == os.getpid()
        later = subprocess.Popen(["sleep", "30"])
        execs.stdin.write(b"go\n")
        execs.stdin.flush()
        for _ in range(1000):  # until the exec is done (the kernel's own name for it changes)
            if open(f"/proc/{execs.pid}/comm").read().strip() == "sleep":
                break
            time.sleep(0.01)
        else:
            pytest.fail("the process did not exec")
        now[0] = 5.0
        second = table.scan()
        assert second[later.pid] == live.processes(only=[later.pid])[later.pid]  # new: read at once
        assert second[execs.pid] == first[execs.pid]  # known: as it was, until the rescan
        later.kill()
        later.wait()
        now[0] = 10.0
        third = table.scan()
        assert later.pid not in third  # gone: dropped at once
        assert third[execs.pid].comm == "sleep" and third[execs.pid].exe == os.path.realpath(shutil.which("sleep"))
    finally:
        for proc in (execs, later):
            if proc is not None:
                proc.kill()
                proc.wait()


def test_exporter_refuses_bad_options():
    from spinscope.cli import main

    assert main(["exporter"]) == 2
    assert main(["exporter", "--pid", "1", "--port", "70000"]) == 2
    assert main(["exporter", "--comm", "a-name-longer-than-15"]) == 2


def test_duty_cycle_scales_each_finished_cycle(spin):
    import argparse

    assert exporter.duty_cycle("10/60") == (10.0, 60.0)
    for bad in ("60/10", "1/60", "10", "a/b", "10/5000"):
        with pytest.raises(argparse.ArgumentTypeError):
            exporter.duty_cycle(bad)
    cycle = exposition.view_of(spin, "--pid 1", [], sampled=0.25)
    once = exposition.scaled(None, cycle, 4.0)
    twice = exposition.scaled(once, cycle, 4.0)
    assert once.requests["count"] == 4 * spin.request_count and twice.requests["count"] == 8 * spin.request_count
    assert twice.requests["hist"]["write_calls"] == [8 * n for n in spin.request_hists["write_calls"]]
    assert twice.traced_s == pytest.approx(2 * spin.duration_s)  # the time traced is not scaled
    assert twice.groups[0][3]["oncpu_ns"] == 8 * spin.totals["oncpu_ns"]
    assert twice.sampled == 0.25


def part_of(doc: dict, fraction: float) -> dict:
    """The same capture a `fraction` of the way through: every count, sum and histogram bucket scaled down
    (rounded down), so that a window from it to the whole is a real difference, not the whole capture."""
    def scale(value):
        return int(value * fraction)
    part = copy.deepcopy(doc)
    part["duration_s"] = doc["duration_s"] * fraction
    for row in part["threads"]:
        row.update({key: scale(row[key]) for key in schema.COUNTERS if key in row},
                   poll_events_hist=[scale(v) for v in row["poll_events_hist"]])
    part["totals"].update({key: scale(part["totals"][key]) for key in schema.COUNTERS if key in part["totals"]})
    for edge in part["wakeups"]:
        edge["count"] = scale(edge["count"])
    requests = part["requests"]
    requests.update({key: scale(requests[key]) for key in (*schema.REQUEST_SUMS, "unattributed_writes")
                     if key in requests})
    requests["hist"] = {key: [scale(v) for v in hist] for key, hist in requests["hist"].items()}
    for row in requests["by_size"]:
        row.update({key: scale(row[key]) for key in schema.REQUEST_SUMS if key in row})
    return part


JUDGED = ["event-loop-spin-100k.json", "event-loop-epollout-100k.json", "reactor-split.json", "reactor-worker.json",
          "thread-per-conn.json", "fanout-pool-20k.json", "event-loop-nagle.json"]


def test_the_exporter_judges_a_window_as_report_does_and_without_pandas(tmp_path):
    """The exporter's labels and findings over a window are report's over the same window, to the cost
    share (one implementation), and judging them and writing every family loads neither pandas nor numpy
    (the exporter's memory and CPU budget, issue 23)."""
    import captures
    from test_analyzer_verdicts import N, busy_poller, herd_worker, schema5

    docs = {name: json.loads((CAPTURES / name).read_text()) for name in JUDGED}
    docs.update({name: make() for name, make in captures.SCENARIOS.items()})
    docs["busy-poller"] = schema5(captures.capture([busy_poller()], requests=N))
    docs["herd"] = schema5(captures.capture([herd_worker(10 + i, 850, 60_000, 0.6e9) for i in range(4)], requests=N),
                           listeners=[{"port": 8000, "accept_calls": 23_400, "accept_ok": N, "accept_eagain": 13_400,
                                       "processes": 4}], pids={10 + i: 10 + i for i in range(4)})
    files = []
    for name, doc in docs.items():
        span = live.window(capture.from_document(part_of(doc, 1 / 3)), capture.from_document(doc))
        assert span.duration_s == pytest.approx(doc["duration_s"] * 2 / 3)
        path = tmp_path / f"{name.removesuffix('.json')}.window.json"
        path.write_text(json.dumps(span.raw))
        files.append(path)
    script = """
import json, sys
from spinscope.analysis import capture, schema
from spinscope.analysis.labels import assess
from spinscope.analysis.metrics import analyze
from spinscope.live import exposition
judged = {}
for path in sys.argv[1:]:
    cap = capture.load(path)
    labels = exposition.judge(cap)
    view = exposition.view_of(cap, "--pid 1", labels)
    families = list(exposition.families([view], {"--pid 1": 1}))
    judged[path] = [list(label) for label in labels]
print(json.dumps({"judged": judged, "families": len(families),
                  "loaded": sorted(m for m in ("pandas", "numpy") if m in sys.modules)}))
"""
    result = subprocess.run([sys.executable, "-c", script, *map(str, files)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["loaded"] == [] and out["families"] == len([f for f in exposition.METRICS if not f.when])
    seen = set()
    for path in files:
        report = subprocess.run([sys.executable, "-m", "spinscope", "report", "--json", str(path)],
                                capture_output=True, text=True, timeout=120)
        assert report.returncode == 0, report.stderr
        doc = json.loads(report.stdout)
        sites = [exported_sites(label["call_sites"]) for label in doc["labels"]]
        expected = ([[label["name"], label["severity"], label["cost_share"], label_sites]
                     for label, label_sites in zip(doc["labels"], sites)]
                    + [[finding["name"], None, finding["cpu_share"], []] for finding in doc["findings"]])
        assert out["judged"][str(path)] == expected, path.name
        seen |= {name for name, *_ in expected}
    assert seen == set(LABEL_NAMES) | set(FINDING_NAMES)  # every label and finding was judged both ways


def exported_sites(call_sites: list) -> list:
    """The exporter's top 3 call sites of report's: one per function and module, shares of one kind."""
    kind = "event_share" if any(site["events"] for site in call_sites) else "sample_share"
    shares: dict = {}
    for site in call_sites:
        key = (site["function"], site["module"] or "")
        shares[key] = shares.get(key, 0) + site[kind]
    return [[f, m, share] for share, (f, m) in sorted(((round(v, 4), k) for k, v in shares.items()),
                                                      key=lambda r: (-r[0], r[1]))][:3]


def test_the_exporters_call_sites_are_one_series_per_site_ranked_the_same_for_the_same_data():
    """Two call sites of one function (its other callers) are one series, their shares summed; a site without
    events of a label with events is 0 of them, not its share of samples; equal shares rank by name, whatever
    order the sites came in."""
    def site(function, events, event_share, sample_share, module="libc.so.6"):
        return {"function": function, "module": module, "events": events, "event_share": event_share,
                "sample_share": sample_share}
    sites = [site("pthread_cond_signal@@GLIBC_2.3.2", 40, 0.4, 0.1), site("queue_push", 20, 0.2, 0.0, "server"),
             site("pthread_cond_signal@@GLIBC_2.3.2", 20, 0.2, 0.3), site("eventfd_write", 20, 0.2, 0.0),
             site("run_in_threadpool", 0, 0.0, 0.6, None)]
    expected = [("pthread_cond_signal@@GLIBC_2.3.2", "libc.so.6", 0.6), ("eventfd_write", "libc.so.6", 0.2),
                ("queue_push", "server", 0.2)]
    for order in (sites, sites[::-1], sites[1:] + sites[:1]):
        label = SimpleNamespace(call_sites=order)
        assert exposition._top_sites(label) == expected
    assert [tuple(s) for s in exported_sites(sites)] == expected


def open_fds() -> set:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("ready", [True, False], ids=["stopped", "failed"])
def test_a_closed_live_collector_leaves_no_descriptor_open(stand_in_collector, monkeypatch, ready):
    """close() closes our ends of the collector's pipes (its stream, its messages), and so does a
    wait_ready() that fails, while the LiveCollector is still referenced: not the garbage collector's job,
    in an exporter that starts collectors for days."""
    # The stand-in says it is ready on its --ready-fd (or fails, with the collector's one-line error), then
    # waits for the SIGTERM that ends a capture (its trap set before it says so: a SIGTERM right after the
    # ready line killed it, status -15, under load).
    tell = ('echo \'{"ready": true}\' > /proc/self/fd/$fd' if ready  # dash redirects fds 0-9 only
            else 'echo "spinscope-collector: error: no such process" >&2; exit 1')
    _, env = stand_in_collector(f'while [ $# -gt 1 ]; do [ "$1" = --ready-fd ] && fd=$2; shift; done\n'
                                f'trap "exit 0" TERM\n{tell}\nwhile :; do sleep 0.1; done\n')
    monkeypatch.setenv("SPINSCOPE_COLLECTOR", env["SPINSCOPE_COLLECTOR"])
    before = open_fds()
    stream = live.LiveCollector(["--pid", "1"], extra=("--quiet",))
    assert len(open_fds() - before) >= 2  # the stream and the messages, at least, while it runs
    if ready:
        assert stream.wait_ready(timeout=30) == {"ready": True}
        stream.close()
        assert stream.proc.returncode == 0
    else:
        with pytest.raises(SpinscopeError, match="^no such process$"):
            stream.wait_ready(timeout=30)
    # None of the descriptors it opened is left. (Not `== before`: a daemon thread of an earlier test in
    # this worker, a reader seeing its pipe end, may close one of its own meanwhile: 1 run in 3 under load.)
    assert stream._stream.closed and stream._messages.closed
    assert not open_fds() - before


def test_the_final_screen_divides_by_a_full_window_and_no_thread_waits_over_1000_ms_per_s(split):
    """`top -- timeout 4 refserver --arch thread-pool` ended on `futex ms/s 1,025,004.7` per thread: its idle
    workers' waits, counted when they end (all at once, at exit), divided by the 4 ms between the last
    live line and the final one. The final screen now spans the last full interval and the rest, and a
    thread's wait (and CPU) per second is at most the window's; the process row is the sum of its threads'."""
    def line(t: float, end_reason: str = "live", woken_ns: int = 0) -> live.Line:
        doc = zeroed(split.raw) if t == 0 else copy.deepcopy(split.raw)
        doc["duration_s"], doc["end_reason"] = t, end_reason
        if t:
            for row in doc["threads"]:  # the counts so far, growing with t
                for key in schema.COUNTERS:
                    row[key] = int(row.get(key, 0) * t / split.duration_s)
                row["futex_wait_ns"] += woken_ns  # every thread woken at the end from a wait as long as the run
                row["oncpu_ns"] += woken_ns
        return live.Line(capture.from_document(doc), t)

    history = live.History(10)
    for t in (0.0, 1.0, 2.0, 3.0):
        history.add(line(t))
    history.add(line(3.004, "target-exited", woken_ns=3_000_000_000))
    last = history.last()
    assert last.duration_s == pytest.approx(1.004)  # not 0.004
    for by_role in (False, True):
        process, table = top.rows(last, history.newest.capture, by_role)
        if not by_role:  # each waited the whole window, no more
            assert [r["futex_ms_per_s"] for r in table] == [1000.0] * len(split.threads)
        assert all(r["futex_ms_per_s"] <= 1000.0 * r["threads"] and r["cpu_percent"] <= 100.0 * r["threads"]
                   for r in table)
        assert process["futex_ms_per_s"] == pytest.approx(sum(r["futex_ms_per_s"] for r in table))
        assert process["cpu_percent"] == pytest.approx(sum(r["cpu_percent"] for r in table))
    # A final line a full interval after the one before (--duration on a tick) is a window of its own.
    history.lines.pop()
    history.add(line(4.0, "duration"))
    assert history.last().duration_s == pytest.approx(1.0)


def test_the_ended_line_says_how_the_command_ended():
    """`top -- COMMAND`'s last screen said `ENDED: the target exited` and never the command's status."""
    said = ["spinscope-collector: started PID 12 (sh): 7 probes live in 0.2 s",
            "spinscope-collector: the command (PID 12) was killed by signal 15 (SIGTERM) after 3.0 s: status 143",
            "spinscope-collector: streamed: 1 process, 2 threads, 0 requests, 3.0 s (duration)"]
    assert top._ended_text(live.Ended(143, "duration", said)) == (
        "the duration ended; the command (PID 12) was killed by signal 15 (SIGTERM) after 3.0 s: status 143")
    assert top._ended_text(live.Ended(0, "target-exited", said[:1])) == "the target exited"


# ---------------------------------------------------------------------------------------------------------
# One verdict however obtained (issue 39): `report` of a recorded capture, and `top` and the exporter on the
# collector's stream of the same run, give the same labels and grades, or a line says what the view could not
# see. The stream is the capture as the collector writes it: `record` folds the runtime helper's samples and its
# account in afterwards, and a window has no intervals.

def streamed(doc: dict) -> dict:
    """The collector's stream of the run `record` wrote DOC of: no runtime helper's samples nor account."""
    doc = copy.deepcopy(doc)
    if isinstance(doc.get("stacks"), dict):
        doc["stacks"]["helper"] = None
        doc["stacks"]["stacks"] = [s for s in doc["stacks"]["stacks"] if s["source"] != "runtime"]
    return doc


def with_python_stacks(doc: dict) -> dict:
    """DOC as a CPython server's with --stacks: its pool threads' samples, the collector's (native frames: the
    interpreter's, a futex wait in libc) and the runtime helper's (Python: the queue the pool waits in, the
    endpoint), all in the hand-off's window."""
    doc = copy.deepcopy(doc)
    doc["target"]["runtime"] = {"name": "cpython", "version": "3.11", "from": "python3.11"}
    frames = [{"kind": "native", "module": "python3.11", "address": 0x27d465},
              {"kind": "native", "module": "libc.so.6", "symbol": "__futex_abstimed_wait_common"},
              {"kind": "python", "module": "[python]", "symbol": "Queue.get", "file": "<stdlib>/queue.py", "line": 171},
              {"kind": "python", "module": "[python]", "symbol": "WorkerThread.run",
               "file": "site-packages/anyio/_backends/_asyncio.py", "line": 857},
              {"kind": "python", "module": "[python]", "symbol": "root", "file": "orders.py", "line": 41}]
    tids = [row["tid"] for row in doc["threads"]]
    rows = [{"tid": tid, "source": source, "tags": ["handoff"], "count": count, "weight": count, "frames": chain}
            for tid in tids for source, chain, count in (("cpu", [1, 0], 20), ("cpu", [0], 20),
                                                         ("runtime", [2, 3], 20), ("runtime", [4, 3], 20))]
    doc["stacks"] = {"hz": 99, "event_budget_per_s": 99, "unwinder": "elfutils libdw 0.188", "records": {},
                     "events": {}, "lost": {}, "events_without_stack": {}, "no_user_frames": 0, "truncated": 0,
                     "collector_cpu_s": 0.01, "frames": frames, "stacks": rows,
                     "helper": {"helper": "otel-ebpf-profiler", "samples": 40 * len(tids), "runtime": "cpython",
                                "pids_sampled": [doc["target"]["pid"]]}}
    return doc


@pytest.mark.parametrize("made", [lambda doc: doc, with_python_stacks], ids=["native", "cpython-with-helper"])
def test_one_grade_however_obtained(made, tmp_path, cli):
    recorded = made(json.loads((CAPTURES / "reactor-worker.json").read_text()))
    path = tmp_path / "capture.json"
    path.write_text(json.dumps(recorded))
    reported = json.loads(cli("report", path, "--json").stdout)
    run = live.window(capture.from_document(zeroed(streamed(recorded))), capture.from_document(streamed(recorded)))
    lines, notes = top.judge(run)
    exported = exposition.judge(run)
    graded = {label["name"]: label["severity"] for label in reported["labels"]}
    assert graded == {line.title: line.severity for line in lines if line.severity != "finding"}
    assert graded == {name: severity for name, severity, _, _ in exported if severity is not None}
    assert graded == {"handoff-overhead": "critical"}
    unnamed = ("stacks: without the runtime helper's samples (none ran beside the collector: a live view's stream, "
               "or the collector alone): no CPython function is named")
    assert [note for note in notes if note.startswith(unnamed)] == [note for note in notes if "runtime helper" in note]
    assert any(note.startswith(unnamed) for note in notes) == (made is with_python_stacks)
    assert not any("runtime helper" in note for note in reported["notes"])
    label = next(label for label in reported["labels"] if label["name"] == "handoff-overhead")
    seen = next(label for label in assess(analyze(run)).labels if label.name == "handoff-overhead")
    if made is with_python_stacks:
        # With the helper the pool's wait (Queue.get) is its machinery: 0.5 of the threads' samples; the stream's
        # native frames name the same wait in libc (__futex_abstimed_wait_common), and the interpreter's frames
        # beside it, which could be the endpoint's, are not counted: the same 0.5 here, a lower bound.
        assert (label["user_share"], seen.user_share) == (0.5, 0.5)
    else:
        assert label["user_share"] is None and seen.user_share is None
    assert label["cpu_share"] == pytest.approx(seen.cpu_share)
