"""The runtime stacks helper in live views without root (tracing/stacks_helper.py's LiveStacks, tracing/
tag_timeline.py's Follower): the tag timeline fed in pieces and followed through a FIFO as the collector writes
it, the helper's batches read from its output, tagged and joined to a window of the collector's stream, so
that `top --stacks` and the exporter name a Python call site with the report's own analysis; and what they say
when the helper does not run. The helper and the collector themselves: tests/live/test_live_stacks.py."""

from __future__ import annotations

import os
import queue
import struct
import sys
import threading
import time
from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

import captures
from test_analyzer_live import zeroed
from spinscope.analysis import capture
from spinscope.live import exposition, stream as live, top
from spinscope.tracing import stacks_helper
from spinscope.tracing import tag_timeline as T

WRITE_STALL, REQUEST = 0x01, 0x10
SECOND = 10**9


def records(rows) -> bytes:
    return b"".join(T.RECORD.pack(*row) for row in rows)


def ended(rows, lost=0) -> bytes:
    return records(rows) + T.RECORD.pack(T.END, 0, 0) + struct.pack("=QQ", lost, len(rows))


def test_a_timeline_fed_in_pieces_is_the_file_read_whole(tmp_path):
    """Records cut anywhere between two feeds (a FIFO's reads end where they end), two CPUs' records out of
    order, the end marker and its account: the same timeline as the file read at once."""
    rows = [(200, 7, 0x08), (100, 7, 0x04), (150, 9, 0x01), (300, 7, 0), (250, 9, 0)]
    data = ended(rows, lost=3)
    (tmp_path / "t").write_bytes(T.MAGIC + data)
    whole = T.read(tmp_path / "t")
    for size in (1, 7, 16, 23, len(data)):
        fed = T.Timeline()
        for i in range(0, len(data), size):
            fed.feed(data[i:i + size])
        assert (fed.times, fed.tags, fed.changes, fed.lost, fed.complete) == \
               (whole.times, whole.tags, 5, 3, True), size
    assert whole.tags_at(7, 199) == 0x04 and whole.tags_at(9, 260) == 0


def test_a_followed_timeline_forgets_what_no_sample_needs():
    """forget(before): every thread's tags at before and after are what they were; a thread idle longer
    than idle_ns, or whose last change took its tags away, is gone: the followed timeline stays bounded."""
    tl = T.Timeline()
    tl.feed(records([(t, 7, WRITE_STALL if t % 2 else 0) for t in range(100, 200)]  # a busy thread
                    + [(50, 8, REQUEST), (60, 9, 0), (10, 10, REQUEST)]))      # one idle in a request, one done, one old
    before = {(tid, t): tl.tags_at(tid, t) for tid in (7, 8, 9, 10) for t in range(150, 260)}
    tl.forget(150, idle_ns=120)
    assert {(tid, t): tl.tags_at(tid, t) for tid in (7, 8, 9, 10) for t in range(150, 260)} == \
           {key: value if key[0] != 10 else 0 for key, value in before.items()}
    assert tl.times[7] == list(range(150, 200)) and tl.times[8] == [50] and 9 not in tl.times and 10 not in tl.times


def test_a_fifo_is_followed_as_the_collector_writes_it(tmp_path):
    """The collector opens the FIFO after us and writes a drain at a time: each change is there as it
    comes, not when the collector ends; its end marker and account arrive before close() returns."""
    follower = T.Follower(tmp_path / "timeline")
    writer = os.open(tmp_path / "timeline", os.O_WRONLY)  # as the collector opens it: a reader is there
    try:
        os.write(writer, T.MAGIC + records([(100, 7, WRITE_STALL)])[:10])
        os.write(writer, records([(100, 7, WRITE_STALL)])[10:] + records([(200, 7, 0)]))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with follower.lock:
                if follower.timeline.changes == 2:
                    break
            time.sleep(0.01)
        with follower.lock:
            assert follower.timeline.tags_at(7, 150) == WRITE_STALL and not follower.timeline.ended
        os.write(writer, T.RECORD.pack(T.END, 0, 0) + struct.pack("=QQ", 0, 2))
    finally:
        os.close(writer)
    follower.close()
    assert follower.timeline.complete and follower.timeline.changes == 2 and follower.timeline.error is None


def python_frame(name, file, line):
    return {"kind": "python", "name": name, "file": file, "line": line, "module": None, "offset": None}


SPIN_SEND = [python_frame("spin_send", "/srv/app/server.py", 14), python_frame("on_readable", "/srv/app/server.py", 30),
             python_frame("main", "/srv/app/server.py", 50)]
LOOP = [python_frame("select", "/usr/lib/python3.11/selectors.py", 468),
        python_frame("main", "/srv/app/server.py", 45)]


def batch(interval: int, start_ns: int, rows: list) -> tuple:
    header = {"helper": "otel-ebpf-profiler", "version": "v0", "hz": 99, "samples": sum(r["count"] for r in rows),
              "lost": 0, "samples_capped": 0, "samples_outside_window": 0, "stacks": len(rows), "interval": interval,
              "kt_started_ns": start_ns, "kt_ended_ns": start_ns + SECOND, "final": False}
    return header, rows


def row(tid: int, frames: list, times: list) -> dict:
    return {"pid": 100, "tid": tid, "comm": "spinsrv", "count": len(times), "frames": frames, "kt": times,
            "ts": times}


def stream_lines(t0: float) -> list:
    """Two stream lines of the write-spin server 10 s apart, received at t0 and t0 + 10 (time.monotonic()),
    with a stacks block of the collector's that has no sample of its own."""
    # The collector's event stacks of the spin name the C function under Python's socket.send.
    sock_send = {"kind": "native", "module": "_socket.cpython-311-x86_64-linux-gnu.so", "address": 0x7e21,
                 "symbol": "sock_send_impl", "symbol_offset": 4, "file": None, "line": 0}
    events = [{"tid": 100, "source": "spin-write", "tags": ["write-stall"], "count": 50, "weight": 5000, "frames": [0]}]
    doc = {**captures.write_spin_server(), "stacks": {"hz": 99, "frames": [sock_send], "stacks": events, "helper": None}}
    start = zeroed(doc)
    start["stacks"] = {"hz": 99, "frames": [], "stacks": [], "helper": None}
    return [live.Line(capture.from_document(start), t0), live.Line(capture.from_document(doc), t0 + 10)]


def fake_live(t0_ns: int) -> stacks_helper.LiveStacks:
    """A LiveStacks whose helper and timeline are stand-ins: the spinning thread 100 in a write stall for the
    window's first 8 s, sampled in spin_send then; in its loop's select after."""
    runtime = stacks_helper.LiveStacks("cpython", window_s=10)
    runtime.helper = SimpleNamespace(batches=queue.Queue(), proc=SimpleNamespace(poll=lambda: None))
    timeline = T.Timeline()
    timeline.feed(records([(t0_ns + SECOND // 2, 100, WRITE_STALL), (t0_ns + 8 * SECOND, 100, 0)]))
    runtime.follower = SimpleNamespace(lock=threading.Lock(), timeline=timeline, path="/nowhere")
    for i in range(10):
        start = t0_ns + i * SECOND
        times = [start + SECOND // 2 + k for k in range(9)]
        runtime.helper.batches.put(batch(i, start, [row(100, SPIN_SEND if i < 8 else LOOP, times)]))
    return runtime


def test_a_window_names_the_runtime_helpers_call_site_as_the_report_does():
    """The helper's batches tagged by the thread's tags at each sample (write-stall in spin_send), joined to
    the window of the stream's lines: top's label line and the exporter's call-site series name the Python
    function, with the analysis the report runs; without the helper, the window is the collector's alone."""
    t0 = time.monotonic() - 20
    runtime = fake_live(int(t0 * 1e9))
    runtime.take()
    assert len(runtime.batches) == 10 and runtime.state == stacks_helper.RUNNING
    history = live.History(10)
    for line in stream_lines(t0):
        history.add(line)
    span = history.span(runtime)
    helper = span.raw["stacks"]["helper"]
    assert helper["samples"] == 90 and helper["live"] == {"batches": 10, "every_s": 1.0}
    assert helper["tags"]["samples_untagged"] == 0 and "changes_lost" not in helper["tags"]
    by_tags: dict = {}
    for s in span.raw["stacks"]["stacks"]:
        by_tags[tuple(s["tags"])] = by_tags.get(tuple(s["tags"]), 0) + s["count"]
    assert by_tags == {("write-stall",): 72 + 50, (): 18}  # and the collector's event stacks  # 8 s stalled of spin_send's samples; the loop's untagged
    labels, _ = top.judge(span)
    spin = next(label for label in labels if label.title == "write-spin")
    assert spin.site == "spin_send (server.py:14)"
    judged = exposition.judge(span)
    view = exposition.view_of(span, "--pid 100", judged, stacks_helper=(runtime.runtime, runtime.state))
    text = exposition_text([view])
    sites = [s for f in text_string_to_metric_families(text) for s in f.samples
             if s.name == "spinscope_label_call_site_ratio" and s.labels["label"] == "write-spin"]
    assert sites[0].labels["function"] == "spin_send" and sites[0].labels["rank"] == "1"  # not sock_send_impl
    up = [s for f in text_string_to_metric_families(text) for s in f.samples if s.name == "spinscope_stacks_helper_up"]
    assert [(s.labels["runtime"], s.labels["reason"], s.value) for s in up] == [("cpython", "", 1.0)]
    collectors = history.span()
    assert not [s for s in collectors.raw["stacks"]["stacks"] if s["source"] == "runtime"]
    assert next(label for label in top.judge(collectors)[0] if label.title == "write-spin").site.startswith(
        "sock_send_impl")  # without the helper: the native frame


def exposition_text(views: list) -> str:
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    registry.register(exposition.ViewsCollector(SimpleNamespace(snapshot=lambda: (views, {}))))
    return generate_latest(registry).decode()


def test_batches_older_than_the_window_and_the_changes_they_needed_are_dropped():
    """Bounded for as long as a view runs: the batches of the window and LIVE_SLACK_S kept, the timeline's
    changes before the oldest of them forgotten."""
    t0 = time.monotonic_ns()
    runtime = stacks_helper.LiveStacks("cpython", window_s=2)
    runtime.helper = SimpleNamespace(batches=queue.Queue(), proc=SimpleNamespace(poll=lambda: None))
    timeline = T.Timeline()
    timeline.feed(records([(t0 + i * SECOND, 100, WRITE_STALL * (i % 2)) for i in range(30)]))
    runtime.follower = SimpleNamespace(lock=threading.Lock(), timeline=timeline)
    for i in range(30):
        runtime.helper.batches.put(batch(i, t0 + i * SECOND, [row(100, SPIN_SEND, [t0 + i * SECOND + 1])]))
    runtime.take()
    kept = [h["interval"] for h, _, _ in runtime.batches]
    assert kept == list(range(30 - 2 - int(stacks_helper.LIVE_SLACK_S) - 1, 30))
    assert timeline.times[100][0] <= t0 + kept[0] * SECOND < timeline.times[100][1]


def test_a_helper_that_exits_or_does_not_run_is_said():
    """Each reason the runtime's frames are not named live is in top's title and in the exporter's metric."""
    runtime = stacks_helper.LiveStacks("cpython", window_s=10)
    runtime.state = stacks_helper.MISSING
    assert runtime.note() == (f"cpython target: {stacks_helper.HELPER_NAME} not found (scripts/build-stacks-helper.sh "
                              "builds it): call sites in native frames")
    assert runtime.collector_args() == [] and not runtime.wait()
    exited = fake_live(time.monotonic_ns())
    exited.helper.proc = SimpleNamespace(poll=lambda: 1)
    exited.helper._last_words = lambda: "spinscope-stacks-helper: profiler failed"
    exited.take()
    assert exited.state == stacks_helper.EXITED
    assert exited.note() == ("cpython target: the runtime stacks helper exited: spinscope-stacks-helper: profiler "
                             "failed: call sites in native frames")
    view = exposition.view_of(capture.from_document(captures.write_spin_server()), "--pid 100", [],
                              stacks_helper=("cpython", exited.state))
    up = [s for f in text_string_to_metric_families(exposition_text([view])) for s in f.samples
          if s.name == "spinscope_stacks_helper_up"]
    assert [(s.labels["reason"], s.value) for s in up] == [("exited", 0.0)]


STAND_IN = """\
import json, signal, sys, time
args = sys.argv[1:]
assert args[args.index("--out") + 1] == "-" and args[args.index("--every") + 1] == "1", args
def emit(i, final):
    rows = [{"pid": 1, "tid": 1, "comm": "x", "count": 1, "frames": [], "kt": [i]} for _ in range(i)]
    print(json.dumps({"helper": "otel-ebpf-profiler", "samples": i, "lost": 0, "stacks": len(rows),
                      "interval": i, "kt_started_ns": i, "kt_ended_ns": i + 1, "final": final}))
    for r in rows:
        print(json.dumps(r))
    sys.stdout.flush()
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
print("spinscope-stacks-helper: sampling pid 1 at 99 Hz", file=sys.stderr, flush=True)
for i in range(3):
    emit(i, False)
while not stop:
    time.sleep(0.05)
emit(3, True)
"""


def test_the_helpers_live_batches_are_read_as_it_writes_them(tmp_path):
    """Live, the helper's output is a pipe of batches, each a header that says how many stack lines follow:
    each arrives whole while it runs; one SIGTERM ends it after its final batch."""
    script = tmp_path / "stand-in-helper"
    script.write_text(f"#!{sys.executable}\n{STAND_IN}")
    script.chmod(0o755)
    helper = stacks_helper.Helper(script, 1, 99, None, True, "cpython", every=1.0)
    try:
        assert helper.start(), helper.error
        got = [helper.batches.get(timeout=10) for _ in range(3)]
        assert [(h["interval"], len(rows)) for h, rows in got] == [(0, 0), (1, 1), (2, 2)]
        helper.stop()
        final = helper.batches.get(timeout=10)
        assert final[0]["final"] and len(final[1]) == 3 and helper.proc.returncode == 0 and helper.error is None
    finally:
        helper.stop()
        helper.cleanup()


def test_live_stacks_start_only_on_a_runtime_the_helper_unwinds(monkeypatch):
    """No helper for a process whose frames the collector names (None: nothing said); on CPython with no
    helper found, or with --duty, a LiveStacks that says why."""
    monkeypatch.setattr(stacks_helper, "runtime_of", {1: None, 2: "cpython"}.get)
    assert stacks_helper.LiveStacks.start(1, 99, True, 10) is None
    monkeypatch.setattr(stacks_helper, "find", lambda: None)
    assert stacks_helper.LiveStacks.start(2, 99, True, 10).state == stacks_helper.MISSING
    monkeypatch.setattr(stacks_helper, "find", lambda: "/bin/true")
    duty = stacks_helper.LiveStacks.start(2, 99, True, 10, duty=True)
    assert duty.state == stacks_helper.DUTY and duty.helper is None and "--duty" in duty.note()


def test_a_helper_that_cannot_start_or_fails_leaves_the_view_running_and_says_why(tmp_path, monkeypatch):
    """A helper that cannot be executed, or that exits with its one-line error before it samples: the view
    gets a LiveStacks that says so (FAILED, its words), no FIFO for the collector, nothing left running."""
    monkeypatch.setattr(stacks_helper, "runtime_of", lambda pid: "cpython")
    broken = tmp_path / "broken-helper"
    broken.write_text("#!/nonexistent/interpreter\n")
    broken.chmod(0o755)
    monkeypatch.setattr(stacks_helper, "find", lambda: broken)
    cannot = stacks_helper.LiveStacks.start(1, 99, True, 10)
    assert cannot.state == stacks_helper.FAILED and cannot.error.startswith(f"cannot start {broken}")
    assert cannot.helper is None and cannot.collector_args() == [] and not cannot.wait()
    failing = tmp_path / "failing-helper"
    failing.write_text(f"#!{sys.executable}\nimport sys\n"
                       "sys.exit('spinscope-stacks-helper: profiler failed to start: no BTF')\n")
    failing.chmod(0o755)
    monkeypatch.setattr(stacks_helper, "find", lambda: failing)
    fails = stacks_helper.LiveStacks.start(1, 99, True, 10)
    assert fails.collector_args()[0] == "--tag-timeline" and not fails.wait()
    assert fails.state == stacks_helper.FAILED
    assert fails.note() == ("cpython target: the runtime stacks helper did not start: spinscope-stacks-helper: "
                            "profiler failed to start: no BTF: call sites in native frames")
    fails.close()
    assert fails.helper.proc.returncode == 1 and not fails.follower.path.exists()
