"""--stacks in the analyzer, on synthetic stacks blocks: frames classified per runtime (the hand-off's
machinery, the target's own code), call sites, the hand-off's share with its user-space part, the exports,
the capture layout, and diff saying when a pattern's call sites moved."""

from __future__ import annotations

import copy
import gzip

import pytest

import captures
from spinscope.analysis import stacks as S
from spinscope.analysis.capture import load
from spinscope.analysis.comparison import LabelChange
from spinscope.analysis.labels import assess
from spinscope.analysis.metrics import analyze
from spinscope.analysis.patterns import HANDOFF_OVERHEAD, SPURIOUS_SELECT, WRITE_SPIN
from spinscope.analysis.schema import layout_differences
from spinscope.analysis.verdicts import severity
from spinscope.output import stack_files


def frame(symbol, kind="native", module="server", file=None, line=0):
    return {"kind": kind, "module": module, "address": 0x1000, "symbol": symbol, "symbol_offset": 4,
            "file": file, "line": line}


PY = "python"
FRAMES = [
    frame("futex_wait", "kernel", "[kernel]"),                                              # 0
    frame("Condition.wait", PY, "[python]", "<stdlib>/threading.py", 320),                    # 1
    frame("Queue.get", PY, "[python]", "<stdlib>/queue.py", 171),                             # 2
    frame("WorkerThread.run", PY, "[python]", "site-packages/anyio/_backends/_asyncio.py", 800),  # 3
    frame("Thread._bootstrap_inner", PY, "[python]", "<stdlib>/threading.py", 1038),          # 4
    frame("endpoint", PY, "[python]", "app.py", 12),                                          # 5
    frame("run_sync", PY, "[python]", "site-packages/anyio/to_thread.py", 33),                # 6
    frame("run_in_threadpool", PY, "[python]", "site-packages/starlette/concurrency.py", 41),  # 7
    frame("run_endpoint_function", PY, "[python]", "site-packages/fastapi/routing.py", 190),   # 8
    frame("json.dumps", PY, "[python]", "<stdlib>/json/__init__.py", 231),                    # 9
    frame("__write", module="libc.so.6", file="write.c", line=26),                            # 10
    frame("spin_retry_site", file="server.c", line=42),                                       # 11
    frame("main", file="server.c", line=90),                                                  # 12
    frame("_PyEval_EvalFrameDefault", module="python3.11"),                                   # 13
]


def stack(tid, frames, count=1, source="cpu", tags=(), weight=None):
    return {"tid": tid, "source": source, "tags": list(tags), "count": count,
            "weight": count if weight is None else weight, "frames": frames}


def block(stacks, frames=FRAMES):
    sources = ("cpu", "spin-write", "empty-poll", "futile-wakeup", "handoff")
    return {"hz": 99, "event_budget_per_s": 99, "unwinder": "elfutils libdw 0.188",
            "records": dict.fromkeys(sources, 0), "events": dict.fromkeys(sources[1:], 0),
            "lost": {"ring_full": 0, "unique_stacks_cap": 0, "out_of_memory": 0}, "settled": True,
            "events_without_stack": dict.fromkeys(sources[1:], 0), "no_user_frames": 0, "truncated": 0,
            "collector_cpu_s": 0.01, "helper": None, "frames": copy.deepcopy(frames), "stacks": stacks}


def chain(*indices):
    return tuple(S._frame(FRAMES[i]) for i in indices)


def test_the_innermost_classified_frame_decides_machinery():
    # A worker waiting for its next task: the pool's queue, under the pool's loop: machinery.
    assert S.machinery_of(S.Stack(1, "runtime", frozenset(), 1, 1, chain(1, 2, 3, 4))) == "python"
    # The endpoint the pool runs (its library calls transparent): the endpoint's work, not the pool's.
    assert S.machinery_of(S.Stack(1, "runtime", frozenset(), 1, 1, chain(9, 5, 3, 4))) is None
    # Interpreter internals are transparent; the kernel's futex is machinery too (counted apart: kernel).
    assert S.machinery_of(S.Stack(1, "runtime", frozenset(), 1, 1, chain(13, 6, 7, 8))) == "python"
    assert S.machinery_of(S.Stack(1, "runtime", frozenset(), 1, 1, chain(0, 13, 1, 2, 3))) == "kernel"


@pytest.mark.parametrize("symbol, kind, runtime", [
    ("pthread_cond_signal@@GLIBC_2.3.2", "native", "glibc"), ("__lll_lock_wait", "native", "glibc"),
    ("memcpy", "native", None), ("runtime.chansend1", "native", "go"), ("sync.(*Mutex).lockSlow", "native", "go"),
    ("main.handler", "native", None), ("void java.util.concurrent.LinkedBlockingQueue.offer(java.lang.Object)", "jvm",
                                       "jvm"),
    ("io.netty.util.concurrent.SingleThreadEventExecutor.execute", "jit", "jvm"),
    ("com.example.Handler.handle", "jvm", None), ("BaseEventLoop.call_soon_threadsafe", PY, "python"),
    ("H11Protocol.data_received", PY, None),
])
def test_machinery_table_per_runtime(symbol, kind, runtime):
    assert S.machinery_runtime(S.Frame(kind, "m", symbol)) == runtime


def test_call_site_is_the_innermost_own_frame_and_a_machinery_entry_its_outermost():
    spin = S.Stack(1, "spin-write", frozenset(), 1, 7, chain(10, 11, 12))
    site, context = S.call_site(spin)
    assert site.where == "spin_retry_site (server.c:42)" and [f.name for f in context] == ["main"]
    entry, context, through = S.machinery_entry(S.Stack(1, "runtime", frozenset(), 1, 1, chain(13, 6, 7, 8)))
    assert entry.name == "run_in_threadpool" and context[0].name == "run_endpoint_function" and through is None


def fastapi_like(user_machinery: int, other: int) -> dict:
    """reactor_split's counters, with runtime samples on its threads: user_machinery in the pool's queue,
    other in the endpoint."""
    doc = captures.reactor_split()
    doc["schema"] = 6
    doc["stacks"] = block([stack(301, [1, 2, 3, 4], user_machinery, "runtime"),
                           stack(301, [9, 5, 3, 4], other, "runtime"),
                           stack(300, [0, 13, 1, 2, 3], 5, "runtime"),
                           stack(300, [10, 11, 12], 40, "handoff", weight=400)])
    return doc


def test_the_handoff_share_adds_its_user_space_machinery(capture_file):
    doc = fastapi_like(30, 70)
    label = next(l for l in assess(analyze(load(capture_file(doc)))).labels if l.name == HANDOFF_OVERHEAD)
    plain = next(l for l in assess(analyze(load(capture_file(captures.reactor_split(), "plain.json")))).labels
                 if l.name == HANDOFF_OVERHEAD)
    # 30 of the involved threads' 105 runtime samples in user-space machinery (the 5 in the kernel's futex
    # are the syscall part's).
    assert label.user_share == pytest.approx(30 / 105)
    assert label.syscall_share == pytest.approx(plain.cpu_share)
    assert label.cpu_share == pytest.approx(plain.cpu_share + 30 / 105)
    assert label.severity == severity(label.cost_share)
    top = label.call_sites[0]
    assert (top["function"], top["samples"]) == ("WorkerThread.run", 30)  # the pool's loop, where it entered
    assert any(line.startswith("stack samples: 28.6% of their CPU in the hand-off's machinery") for line in
               label.details)
    assert "more of their CPU in the hand-off's machinery in user space (stack samples)" in label.summary


def test_without_runtime_samples_the_collectors_cpu_samples_are_read(capture_file):
    doc = fastapi_like(0, 0)
    doc["stacks"]["stacks"] = [stack(301, [10, 11, 12], 10), stack(301, [0, 13, 1, 2, 3], 4)]
    label = next(l for l in assess(analyze(load(capture_file(doc)))).labels if l.name == HANDOFF_OVERHEAD)
    assert label.user_share == 0.0  # the machinery sample is in the kernel: the syscall part's
    assert label.call_sites[0]["function"] == "WorkerThread.run"


def test_a_capture_with_stacks_has_exactly_the_layout():
    doc = fastapi_like(1, 1)

    def of_stacks(doc):  # (the synthetic capture's other blocks are a hand-made subset)
        return [line for line in layout_differences(doc) if line.startswith("stacks")]

    assert of_stacks(doc) == []
    del doc["stacks"]["settled"]
    assert of_stacks(doc) == ["stacks: missing ['settled'], unexpected []"]


def test_folded_and_pprof():
    stackset = S.load({"stacks": block([stack(7, [10, 11, 12], 3), stack(7, [10, 11, 12], 2, "spin-write",
                                                                                weight=90)])})
    samples, events = ([s for s in stackset.stacks if S.is_sample(s) == kind] for kind in (True, False))
    assert stack_files.folded(samples, {7: "loop (7)"}) == "loop (7);main (server.c:90);spin_retry_site (server.c:42);__write (write.c:26) 3\n"
    assert stack_files.folded(events, {7: "loop (7)"}) == "loop (7);main (server.c:90);spin_retry_site (server.c:42);__write (write.c:26) 90\n"
    with pytest.raises(ValueError):
        stack_files.folded(stackset.stacks)  # samples and events are never added up
    profile = gzip.decompress(stack_files.pprof(stackset.stacks, 99, 2.0, {7: "loop (7)"}))
    for text in (b"spin_retry_site", b"server.c", b"loop (7)", b"spin-write", b"events", b"nanoseconds"):
        assert text in profile


def decode(data: bytes) -> dict:
    """profile.proto's fields, read with the protobuf wire format: {field: [value or bytes, ...]}."""
    fields: dict = {}
    i = 0

    def varint():
        nonlocal i
        n = shift = 0
        while True:
            byte = data[i]
            i += 1
            n |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return n
    while i < len(data):
        key = varint()
        if key & 7 == 0:
            value = varint()
        else:
            size = varint()
            value, i = data[i:i + size], i + size
        fields.setdefault(key >> 3, []).append(value)
    return fields


def packed(data: bytes) -> list:
    out, n, shift = [], 0, 0
    for byte in data:
        n |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            out.append(n)
            n = shift = 0
    return out


def test_an_export_reads_the_runtime_helpers_samples_without_the_interpreters_frames():
    """A Python thread sampled by both samplers (the same time), and its event stacks: the exports read the
    helper's samples (they name the Python functions), never the collector's as well, with the interpreter's
    frames between Python functions left out (as py-spy shows Python) and its native leaf kept; a pprof
    profile's CPU samples are of type cpu, its default, and its events of type events, never in one value."""
    py = [0, 10, 5, 13, 6, 13, 4, 13]  # futex, __write, endpoint, _PyEval.., run_sync, _PyEval.., _bootstrap, _PyEval..
    stackset = S.load({"stacks": block([stack(7, py, 4, "runtime"), stack(7, [10, 13, 13], 4),
                                        stack(7, [10, 13], 1, "handoff", weight=30)])})
    chosen = S.selected(stackset)
    assert [(s.source, s.count) for s in chosen] == [("runtime", 4), ("handoff", 1)]
    assert stack_files.folded([chosen[0]], {7: "py (7)"}) == (
        "py (7);Thread._bootstrap_inner (<stdlib>/threading.py:1038);run_sync (site-packages/anyio/to_thread.py:33);"
        "endpoint (app.py:12);__write (write.c:26);futex_wait 4\n")
    assert "_PyEval_EvalFrameDefault" in stack_files.folded([chosen[0]], all_frames=True)
    assert stack_files.folded([stackset.stacks[1]]).count("_PyEval_EvalFrameDefault") == 2  # no language frame: as it was

    profile = decode(gzip.decompress(stack_files.pprof(chosen, 99, 2.0, {7: "py (7)"})))
    strings = [b.decode() for b in profile[6]]
    types = [tuple(strings[v] for v in decode(t).values() for v in v) for t in profile[1]]
    assert types == [("samples", "count"), ("cpu", "nanoseconds"), ("events", "count")]
    assert strings[profile[14][0]] == "cpu"  # what go tool pprof shows first
    functions = {decode(f)[1][0]: strings[decode(f)[2][0]] for f in profile[5]}
    locations = {decode(loc)[1][0]: functions[decode(decode(loc)[4][0])[1][0]] for loc in profile[4]}
    samples = [(packed(decode(s)[2][0]), [locations[i] for i in packed(decode(s)[1][0])]) for s in profile[2]]
    period = int(1e9 / 99)
    assert samples == [([4, 4 * period, 0], ["futex_wait", "__write", "endpoint", "run_sync", "Thread._bootstrap_inner"]),
                       ([0, 0, 30], ["__write", "_PyEval_EvalFrameDefault"])]


def test_diff_says_the_top_call_site_moved(capture_file):
    before = next(l for l in assess(analyze(load(capture_file(fastapi_like(30, 70), "a.json")))).labels
                  if l.name == HANDOFF_OVERHEAD)
    doc = fastapi_like(30, 70)
    doc["stacks"]["stacks"][0]["frames"] = [1, 2, 6, 7, 8]  # now the pool is entered from run_in_threadpool
    doc["stacks"]["stacks"][0]["count"] = doc["stacks"]["stacks"][0]["weight"] = 60
    after = next(l for l in assess(analyze(load(capture_file(doc, "b.json")))).labels if l.name == HANDOFF_OVERHEAD)
    change = LabelChange(before, after)
    assert change.sites_moved and "call_sites" in change.to_dict()["changed"]
    assert "top call site WorkerThread.run" in change.what() and "→ run_in_threadpool" in change.what()
    assert not LabelChange(before, before).sites_moved


def test_machinery_counts_as_the_handoffs_only_where_requests_are_handed_over():
    """A server that hands almost nothing over still runs its runtime's queues and promises (Netty on its
    event loop: 2% of its samples at one hand-over in 2,855 requests): those samples are not a hand-off's."""
    from spinscope.analysis.patterns import handoff

    stackset = S.load({"stacks": block([stack(1, [1, 2, 3, 4], 10, "runtime"), stack(1, [9, 5, 3, 4], 90, "runtime")])})
    found = S.pattern_stacks(stackset, HANDOFF_OVERHEAD)
    assert not handoff.counted(0.0004) and handoff.user_share(found, 0.0004) is None
    assert handoff.counted(2.0) and handoff.user_share(found, 2.0) == pytest.approx(0.1)
    # Another pattern never adds a user-space part (its cycles are timed whole): only the hand-off's home has one.
    assert S.pattern_stacks(stackset, WRITE_SPIN).machinery_user == 0


def tagged_helper(stacks):
    """A block whose runtime helper's samples were tagged through the collector's tag timeline."""
    b = block(stacks)
    b["helper"] = {"helper": "otel-ebpf-profiler", "samples": sum(s["count"] for s in stacks if s["source"] == "runtime"),
                   "tags": {"from": "the collector's tag timeline", "changes": 10, "changes_lost": 0,
                            "complete": True, "samples_untagged": 0}}
    return b


def test_tagged_runtime_samples_say_where_a_wakeup_for_nothing_is():
    """A framework's futile wakeups: the collector's samples name only the interpreter, the helper's (tagged
    through the timeline) name the framework's loop, whose innermost Python frame is the call site (no
    frame of the target's own code on the stack); untagged helper samples are not read for it."""
    stacks = [stack(7, [13, 12], 5, "cpu", ["ready-cycle"]),
              stack(7, [0, 10, 2, 3, 4], 3, "runtime", ["ready-cycle"]),  # kernel, libc, then Python
              stack(7, [9, 4], 4, "runtime", [])]
    found = S.pattern_stacks(S.load({"stacks": tagged_helper(stacks)}), SPURIOUS_SELECT)
    assert found.sampled == S.RUNTIME and (found.samples, found.window_samples) == (7, 3)
    assert found.call_sites[0].frame.name == "Queue.get"  # the innermost Python frame, not libc's (no own code)
    assert [f.name for f in found.call_sites[0].context] == ["WorkerThread.run", "Thread._bootstrap_inner"]
    exported = S.selected(S.load({"stacks": tagged_helper(stacks)}), SPURIOUS_SELECT)
    assert [(s.source, s.count) for s in exported] == [("runtime", 3)]
    untagged = block(stacks)
    untagged["helper"] = {"helper": "otel-ebpf-profiler"}  # no tags: the collector's samples are read
    assert S.pattern_stacks(S.load({"stacks": untagged}), SPURIOUS_SELECT).sampled == S.CPU


def test_the_handoffs_call_sites_are_its_machinery_not_the_work_it_handed_over():
    """A pool thread woken by a hand-off runs the endpoint in its hand-off window: those samples are in the
    window, but the call site is where the machinery was entered."""
    stacks = [stack(8, [5, 3, 4], 9, "runtime", ["handoff"]),  # the endpoint, run by the pool thread
              stack(8, [0, 1, 2, 3, 4], 2, "runtime", ["handoff"])]
    found = S.pattern_stacks(S.load({"stacks": tagged_helper(stacks)}), HANDOFF_OVERHEAD)
    assert found.window_samples == 11
    assert [site.frame.name for site in found.call_sites] == ["WorkerThread.run"]


def test_a_timeline_with_losses_is_said(capture_file):
    """Nothing silent: a tag timeline that lost changes, or could not be read, is a note of the report."""
    from spinscope.analysis.stack_costs import notes
    lossy = tagged_helper([stack(7, [0, 2, 3, 4], 3, "runtime", ["ready-cycle"])])
    lossy["helper"]["tags"].update(changes_lost=12, complete=True)
    said = notes(analyze(load(capture_file({**captures.clean_event_loop(), "stacks": lossy}, "lossy.json"))))
    assert any("lost 12 changes" in line for line in said), said
    lossy["helper"]["tags"] = {"error": "cannot read the tag timeline: No such file or directory"}
    said = notes(analyze(load(capture_file({**captures.clean_event_loop(), "stacks": lossy}, "error.json"))))
    assert any("untagged (cannot read the tag timeline" in line for line in said), said


def test_the_budgets_held_back_stacks_and_the_modules_not_opened_are_said(capture_file):
    """Nothing silent (schema 9): the events due a stack when the target's budget was spent, and the modules the collector
    could not open (the first 16 named, the rest counted)."""
    from spinscope.analysis.stack_costs import notes
    said_of = block([stack(7, [0, 2, 3, 4], 3)])
    said_of.update(event_budget_per_s=396, deferred=1234, ring_bytes=8 << 20,
                   modules={"opened": 3, "shared": 40, "evicted": 0, "unopened": 18,
                            "unopened_names": [f"lib{i}.so" for i in range(16)]})
    said = notes(analyze(load(capture_file({**captures.clean_event_loop(), "stacks": said_of}, "said.json"))))
    assert [line for line in said if "budget" in line or "opened" in line] == [
        "stacks: the target's budget of 396 event stacks a second was spent at 1,234 events due a stack: they weigh "
        "in their thread's next stack, so the call sites' events stay exact, from fewer stacks",
        "stacks: 18 modules of the target could not be opened (" + ", ".join(f"lib{i}.so" for i in range(16))
        + " and 2 more): their frames are named module+offset, without function, file or line"]


def test_a_jvm_hand_back_is_named_by_the_java_method_that_entered_the_runtimes_machinery():
    """A pool thread handing a connection back: libc's condition variable under libjvm's monitor (C++
    names with their parameters), under a JVM stub, under the selector's wakeup. The call site is the Java
    method, not pthread_cond_signal; native C++ machinery matches without its parameters."""
    frames = [frame("pthread_cond_signal@@GLIBC_2.3.2", module="libc.so.6"),
              frame("ObjectMonitor::ExitEpilog(JavaThread*, ObjectWaiter*)", module="libjvm.so"),
              frame("monitorexit_nofpu Runtime1 stub", "jvm", "[jvm]"),
              frame("java.nio.channels.Selector sun.nio.ch.EPollSelectorImpl.wakeup()", "jvm", "[jvm]",
                    "EPollSelectorImpl.java", 251),
              frame("void sun.net.httpserver.ServerImpl.addEvent(sun.net.httpserver.Event)", "jvm", "[jvm]",
                    "ServerImpl.java", 480)]
    stackset = S.load({"stacks": block([stack(3, [0, 1, 2, 3, 4], 5, "runtime")], frames)})
    assert S.machinery_runtime(stackset.stacks[0].frames[1]) == "jvm"
    found = S.pattern_stacks(stackset, HANDOFF_OVERHEAD)
    site = found.call_sites[0]
    assert site.frame.name == "sun.nio.ch.EPollSelectorImpl.wakeup" and site.samples == 5
    assert site.context[0].name == "sun.net.httpserver.ServerImpl.addEvent"
    # Java as `Class.method`, its line telling overloads apart, wherever a frame is shown: the report's where
    # lines, the label's JSON (top and the exporter read it), the folded stacks and pprof (frame.name, where)
    assert site.to_dict()["where"] == "sun.nio.ch.EPollSelectorImpl.wakeup (EPollSelectorImpl.java:251)"
    assert site.to_dict()["callers"] == ["sun.net.httpserver.ServerImpl.addEvent (ServerImpl.java:480)"]
    from spinscope.output.stack_files import folded
    assert folded(stackset.stacks) == ("tid 3;sun.net.httpserver.ServerImpl.addEvent (ServerImpl.java:480);"
                                       "sun.nio.ch.EPollSelectorImpl.wakeup (EPollSelectorImpl.java:251);"
                                       "monitorexit_nofpu Runtime1 stub;ObjectMonitor::ExitEpilog(JavaThread*, ObjectWaiter*);"
                                       "pthread_cond_signal@@GLIBC_2.3.2 5\n")
    assert S.Frame(S.JVM, None, "StubRoutines (1) [call_stub_return_address]").name.startswith("StubRoutines (1)")


# A Node server handing its file reads to libuv's pool, and a Rust one handing work to tokio's blocking pool:
# runtimes and pool libraries that no machinery table names (issue 39).
UNNAMED = [
    frame("uv__work_done", module="node"),                                                      # 0
    frame("uv__io_poll", module="node"),                                                        # 1
    frame("readFileAfterStat", "node", "[node]", "node:fs"),                                    # 2
    frame("V8::ExitFrame", "node", "[node]"),                                                   # 3
    frame("serveFile", "node", "[node]", "server.js", 25),                                      # 4
    frame("route", "node", "[node]", "node_modules/express/lib/router.js", 9),                  # 5
    frame("pthread_cond_signal@@GLIBC_2.3.2", module="libc.so.6"),                              # 6
    frame("uv_fs_open", module="node"),                                                         # 7
    frame("tokio::runtime::task::harness::Harness<T,S>::complete", "rust", "my-server"),         # 8
    frame("<F as axum::handler::Handler<(M, T1), S>>::call::{{closure}}", "rust", "my-server"),  # 9
    frame("my_server::bytes::{{closure}}", "rust", "my-server", "main.rs", 30),                 # 10
    frame("<my_server::Sum as core::ops::FnOnce<()>>::call_once", "rust", "my-server"),          # 11
    frame("futex_wake", "kernel", "[kernel]"),                                                  # 12
]


def unnamed(*indices):
    return tuple(S._frame(UNNAMED[i]) for i in indices)


def test_own_code_on_runtimes_no_table_names():
    """JavaScript in the application's script is its own, Node's own modules and installed packages are not;
    in a Rust binary the crate named after it is its own, the crates linked into it are not (an impl's method
    by its type's crate where the type has a path, else its trait's)."""
    own = [S.is_own_code(frame, (frame,)) for frame in map(S._frame, UNNAMED)]
    assert [i for i, mine in enumerate(own) if mine] == [4, 10, 11]
    assert S.rust_crate("<F as axum::handler::Handler<(M, T1), S>>::call") == "axum"
    assert S.rust_crate("<&mut my_server::Reader as std::io::Read>::read") == "my_server"
    assert S.rust_crate("std::sys::sync::condvar::futex::Condvar::wait") == "std"
    # V8's own frames are no JavaScript function: never a call site.
    assert not S._language_method(S._frame(UNNAMED[3])) and S._language_method(S._frame(UNNAMED[2]))


def test_the_handoffs_window_without_own_code_is_its_machinery_whatever_the_names():
    """No table names libuv's completion or tokio's task harness: a sample in the hand-off's window (tagged),
    on a thread of its request path, whose stack holds none of the target's own code and no frame of the
    runtime's language, is the hand-off's; with the user's code on it, a library's JavaScript (the request's
    work, done without the hand-over too), untagged, or on a thread off the path (a JIT compiler's), it is
    not."""
    window = frozenset({"handoff"})
    completion = S.Stack(1, "runtime", window, 1, 1, unnamed(0, 1))
    assert S.machinery_of(completion, on_path=True) == S.WINDOW
    assert S.machinery_of(completion, on_path=False) is None
    assert S.machinery_of(S.Stack(1, "runtime", frozenset(), 1, 1, unnamed(0, 1)), on_path=True) is None
    assert S.machinery_of(S.Stack(1, "runtime", window, 1, 1, unnamed(2, 3, 0, 1)), on_path=True) is None
    assert S.machinery_of(S.Stack(1, "runtime", window, 1, 1, unnamed(5, 4, 0, 1)), on_path=True) is None
    assert S.machinery_of(S.Stack(2, "cpu", window, 1, 1, unnamed(8, 9)), on_path=True) == S.WINDOW
    assert S.machinery_of(S.Stack(2, "cpu", window, 1, 1, unnamed(11, 8)), on_path=True) is None
    stackset = S.load({"stacks": block([stack(1, [0, 1], 6, "cpu", ["handoff"]),
                                        stack(1, [4, 0, 1], 10, "cpu", ["handoff"]),
                                        stack(3, [0, 1], 4, "cpu", ["handoff"])], UNNAMED)})
    found = S.pattern_stacks(stackset, HANDOFF_OVERHEAD, tids=[1, 3], path_tids=[1])
    assert (found.samples, found.machinery_user, found.machinery_runtimes) == (20, 6, {S.WINDOW: 6})
    # Its cost, not where it is: the window makes no call site (the machinery and the events say where).
    assert found.call_sites == []
    # A stack the helper could not unwind cannot say it holds none of the target's code.
    broken = S.Stack(1, "runtime", window, 1, 1, (S.Frame(S.ERROR, "[error]", "[unwind error 4012 in unknown]"),))
    assert S.machinery_of(broken, on_path=True) is None


def test_one_own_code_rule_for_sites_and_machinery():
    """Whether a frame is the user's code is a rule of its stack, the same for a call site and for where the
    machinery ends: an extension module's frame on a Python stack (`_asyncio...so`, on every asyncio task's
    stack) is neither, so a sample in the pool's frames above it is the pool's; alone it is a C server's own."""
    asyncio_so = S.Frame(S.NATIVE, "_asyncio.cpython-311-x86_64-linux-gnu.so", None, 0x84a1)
    current_task = S.Frame(S.PYTHON, None, "current_task", file="<stdlib>/asyncio/tasks.py", line=38)
    pool = S.Frame(S.PYTHON, None, "run_sync_in_worker_thread", file="site-packages/anyio/_backends/_asyncio.py",
                   line=901)
    frames = (asyncio_so, current_task, pool)
    assert not S.is_own_code(asyncio_so, frames) and S.is_own_code(asyncio_so, (asyncio_so,))
    assert S.machinery_of(S.Stack(1, "runtime", frozenset(), 1, 1, frames)) == "python"
    assert S.call_site(S.Stack(1, "handoff", frozenset(), 1, 1, frames))[0] is current_task


def test_a_handoff_is_placed_at_the_users_code_that_entered_the_machinery():
    """The call site of a hand-over is the user's function that made it, the machinery's entry beside it:
    `serveFile (server.js:25)`, through what it called (`readFile`, not V8's frame between them); the JSON
    says both."""
    stackset = S.load({"stacks": block([stack(1, [12, 6, 7, 3, 2, 3, 4, 5], 3, "runtime", ["handoff", "kernel"])],
                                       UNNAMED)})
    site = S.pattern_stacks(stackset, HANDOFF_OVERHEAD).call_sites[0]
    assert (site.frame.where, site.through.name, site.samples) == ("serveFile (server.js:25)", "readFileAfterStat", 3)
    assert site.to_dict()["through"] == "readFileAfterStat" and site.to_dict()["callers"] == ["route (node_modules/express/lib/router.js:9)"]


def test_the_shares_sum_is_at_most_the_whole():
    from spinscope.analysis.patterns.handoff import whole_share

    assert whole_share(0.95, 0.3) == 1.0 and whole_share(0.2, 0.1) == pytest.approx(0.3)
    assert whole_share(0.2, None) == 0.2 and whole_share(None, 0.1) == pytest.approx(0.1)


def test_a_capture_without_the_runtime_helper_says_so(capture_file):
    """Nothing silent: a runtime target recorded with --stacks but without the helper (not built, not started,
    or a -- COMMAND target), one whose helper took no sample, or a live view's stream (no helper beside the
    collector) is read from native frames, and the notes say what that means for the share and the grade."""
    from spinscope.analysis.stack_costs import notes

    def said(helper, runtime="cpython"):
        doc = captures.clean_event_loop()
        doc["target"] = {**doc["target"], "runtime": {"name": runtime, "version": "3.11", "from": "python3.11"}}
        stacks = block([stack(7, [13, 12], 5, "cpu", ["handoff"])])
        if helper is not None:
            stacks["helper"] = helper
        return notes(analyze(load(capture_file({**doc, "stacks": stacks}, "capture.json"))))

    meaning = (": no CPython function is named, and native frames cannot tell the user's code from the runtime's, "
               "so the hand-off's window is not counted: its user-space part is the C library's and the kernel's "
               "machinery only, a lower bound, and its share and grade can be below what `record --stacks` gives "
               "with the helper")
    assert ("stacks: without the runtime helper's samples (cpython target: spinscope-stacks-helper not found)"
            + meaning) in said({"runtime": "cpython", "skipped": "cpython target: spinscope-stacks-helper not found"})
    assert ("stacks: without the runtime helper's samples (it ran but took no sample of the target)" + meaning
            in said({"helper": "otel-ebpf-profiler", "samples": 0, "pids_sampled": None, "runtime": "cpython"}))
    assert ("stacks: without the runtime helper's samples (none ran beside the collector: a live view's stream, or "
            "the collector alone)" + meaning) in said(None)
    assert not any(line.startswith("stacks: without the runtime helper") for line in said(None, runtime="go"))


def test_on_a_language_stack_a_native_frame_or_a_jvm_stub_is_never_the_site():
    """The clean-clone run of session 11: FastAPI's hand-off site was `_asyncio.cpython-311-x86_64-linux-gnu.so
    +0x7e21` (an extension module, whose name is in no runtime table) and the JDK pool's `StubRoutines (1)`.
    On a stack with frames of the runtime's language the user's code is that language's; a JVM stub is the
    JVM's. Without language frames a native module's code is still the target's own (a C server)."""
    asyncio_so = S.Frame(S.NATIVE, "_asyncio.cpython-311-x86_64-linux-gnu.so", None, 0x7e21)
    pool = S.Frame(S.PYTHON, None, "run_in_threadpool", file="site-packages/starlette/concurrency.py", line=41)
    endpoint = S.Frame(S.PYTHON, None, "root", file="orders.py", line=41)
    site, context = S.call_site(S.Stack(1, "handoff", frozenset(), 1, 1, (asyncio_so, pool, endpoint)))
    assert site is endpoint and context == ()
    assert S.is_own_code(asyncio_so, (asyncio_so,))  # alone, as in a C server's stack
    stub = S.Frame(S.JVM, None, "StubRoutines (1) [call_stub_return_address]")
    handle = S.Frame(S.JVM, None, "void JdkHttpBytes.handle(com.sun.net.httpserver.HttpExchange)")
    assert not S.is_own_code(stub, (stub, handle)) and S.is_own_code(handle, (stub, handle))
    site, _ = S.call_site(S.Stack(1, "handoff", frozenset(), 1, 1, (stub, handle)))
    assert site is handle


def test_a_frame_the_helper_could_not_name_is_never_the_site():
    """A fresh-clone run beside a CPU hog (2026-11-29) placed gunicorn's herd at `[unsymbolized python frame]`
    (the helper had not yet read that code object), a Python frame with no file, taken for the user's own.
    The named frames around it place the stack: the user's, else the framework's."""
    blank = S.Frame(S.PYTHON, "[python]", "[unsymbolized python frame]")
    accept = S.Frame(S.PYTHON, None, "SyncWorker.accept", file="site-packages/gunicorn/workers/sync.py", line=28)
    run = S.Frame(S.PYTHON, None, "SyncWorker.run", file="site-packages/gunicorn/workers/sync.py", line=125)
    assert not S.is_own_code(blank, (blank, accept, run)) and S.unnamed(blank) and not S.unnamed(accept)
    site, context = S.call_site(S.Stack(1, "futile-wakeup", frozenset(), 1, 1, (blank, accept, run)))
    assert site is accept and context == (run,)
    handler = S.Frame(S.PYTHON, None, "app", file="myapp.py", line=7)
    assert S.call_site(S.Stack(1, "handoff", frozenset(), 1, 1, (blank, accept, handler)))[0] is handler
    assert S.call_site(S.Stack(1, "handoff", frozenset(), 1, 1, (blank,))) == (None, ())


def test_a_site_is_never_code_the_user_cannot_change():
    """The clean-clone runs of session 11 ranked `__x64_sys_futex ← do_syscall_64` (a stack of kernel frames
    only) and libuv's pool thread waiting for work (`__futex_abstimed_wait_common ← pthread_cond_wait ←
    uv_cond_wait ← worker`) first among the hand-off's sites. Such stacks place nothing: they count, and the
    where line says how many were not placed; the user's function (`serveFile`) is the site."""
    from spinscope.analysis.stack_costs import where_lines
    frames = [frame("__x64_sys_futex", "kernel", "[kernel]"), frame("do_syscall_64", "kernel", "[kernel]"),
              frame("__futex_abstimed_wait_common", module="libc.so.6"),
              frame("__GI___pthread_cond_wait", module="libc.so.6"), frame("uv_cond_wait", module="node"),
              frame("worker", module="node"),
              frame("spawn_blocking_inner<my_server::bytes::{async_fn#0}::{closure_env#0}, u64>", "rust", "my-server",
                    "pool.rs", 373),
              frame("tokio::runtime::blocking::pool::spawn_blocking", "rust", "my-server", "pool.rs", 370)]
    frames += UNNAMED[4:5] + UNNAMED[12:13]  # serveFile (server.js:25), futex_wake
    kernel_only = S.Stack(1, "handoff", frozenset(), 1, 1, tuple(map(S._frame, frames[0:2])))
    idle_wait = S.Stack(2, "runtime", frozenset({"handoff"}), 1, 1, tuple(map(S._frame, frames[2:6])))
    assert S.call_site(kernel_only) == (None, ()) and S.machinery_entry(idle_wait) == (None, (), None)
    tokio = S.Stack(3, "cpu", frozenset(), 1, 1, tuple(map(S._frame, [frames[2], frames[6], frames[7]])))
    assert S.call_site(tokio)[0].name.startswith("spawn_blocking_inner<my_server::bytes")
    stackset = S.load({"stacks": block([stack(1, [0, 1], 40, "handoff"), stack(2, [2, 3, 4, 5], 6, "runtime", ["handoff"]),
                                        stack(4, [9, 8], 3, "runtime", ["handoff"])], frames)})
    found = S.pattern_stacks(stackset, HANDOFF_OVERHEAD)
    assert [site.frame.name for site in found.call_sites] == ["serveFile"]
    assert (found.unplaced_events, found.unplaced_samples) == (40, 6)
    assert where_lines(found, "hand-offs")[-1] == (
        "where: not placed, 100% of 40 hand-offs and 67% of 9 CPU samples: their stacks hold only the kernel's, the "
        "C library's or the runtime's own frames, no code of the target's or of its runtime's language (most in "
        "__x64_sys_futex ← do_syscall_64)")


def test_the_users_code_ranks_first_and_nearest_the_hand_over():
    """Among the hand-off's sites the user's own code comes first, a framework's frame (the nearest a stack
    without it comes) after, whatever their samples: Netty's handler (`channelRead0`, 8 samples) before its
    executor's `execute` (42). On a Rust stack the innermost frame of the user's code or instantiated for it
    places it: tokio's `spawn_blocking_inner<my_server::bytes...>`, not `my_server::main` further out."""
    frames = [frame("io.netty.util.concurrent.SingleThreadEventExecutor.execute(java.lang.Runnable)", "jvm", "[jvm]",
                    "SingleThreadEventExecutor.java", 817),
              frame("void io.netty.channel.AbstractChannelHandlerContext.invokeChannelRead(java.lang.Object)", "jvm",
                    "[jvm]", "AbstractChannelHandlerContext.java", 379),
              frame("void NettyBytes$BytesHandler.channelRead0(io.netty.channel.ChannelHandlerContext)", "jvm", "[jvm]",
                    "NettyBytes.java", 59),
              frame("spawn_blocking_inner<my_server::bytes::{async_fn#0}::{closure_env#0}, u64>", "rust", "my-server",
                    "pool.rs", 373),
              frame("my_server::main", "rust", "my-server", "main.rs", 9)]
    stackset = S.load({"stacks": block([stack(1, [0, 1], 42, "runtime"), stack(2, [0, 2], 8, "runtime")], frames)})
    sites = S.pattern_stacks(stackset, HANDOFF_OVERHEAD).call_sites
    assert [(site.frame.name, site.samples) for site in sites] == [("NettyBytes$BytesHandler.channelRead0", 8), (
        "io.netty.util.concurrent.SingleThreadEventExecutor.execute", 42)]
    tokio = S.Stack(3, "handoff", frozenset(), 1, 1, (S._frame(FRAMES[0]), *map(S._frame, frames[3:])))
    assert S.call_site(tokio)[0].name.startswith("spawn_blocking_inner<my_server::bytes")
