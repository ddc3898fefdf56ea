"""--stacks: the call sites of each pattern's events are named, and the events' weights add up to the exact
counts, on a fixture built without frame pointers (tests/fixtures/callsites.c)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spinscope.analysis import stacks as S
from spinscope.analysis.patterns import HANDOFF_OVERHEAD, SPURIOUS_SELECT, WRITE_SPIN
from spinscope.output import stack_files
from spinscope.tracing import tag_timeline as T

from collector_harness import COLLECTOR, FIXTURES, run_fixture

SPINS, EMPTIES, ITEMS = 5000, 150, 200
HZ = "199"


@pytest.fixture(scope="module")
def timeline_path(tmp_path_factory):
    return tmp_path_factory.mktemp("timeline") / "tags"


@pytest.fixture(scope="module")
def run(tmp_path_factory, timeline_path):
    # A budget for the whole target above what the fixture's threads take: this file holds each thread's
    # own stride (test_stacks_budget.py holds the target's budget).
    return run_fixture("callsites", tmp_path=tmp_path_factory.mktemp("callsites"),
                       collector_args=("--stacks", HZ, "--stacks-budget", "100000", "--tag-timeline",
                                       str(timeline_path)))


def events(stackset, tid, source):
    return [s for s in stackset.stacks if s.tid == tid and s.source == source]


def test_the_block_says_how_it_was_made(run):
    block = run.capture["stacks"]
    assert block["hz"] == int(HZ)
    assert block["unwinder"].startswith("elfutils libdw ")
    assert block["settled"] is True
    assert block["lost"] == {"ring_full": 0, "unique_stacks_cap": 0, "out_of_memory": 0}
    assert set(block["events_without_stack"]) == {"spin-write", "empty-poll", "futile-wakeup", "handoff", "nagle-write"}


def tail(run, source):
    return run.capture["stacks"]["events_without_stack"][source]


def weights_by_site(got) -> dict:
    sites: dict = {}
    for s in got:
        name = S.call_site(s)[0].name
        sites[name] = sites.get(name, 0) + s.weight
    return sites


def test_spin_retries_weigh_exactly_what_was_retried_and_name_their_function(run):
    """The fill's last write returns EAGAIN after a partial one, which is a spin retry of its own (in spinner):
    the thread's first event, so it gets the first stack, alone. Then SPINS retries in spin_retry_site, every
    one of them in the stacks' weights or in the tail after the thread's last stack."""
    tid = run.truth["spinner"]["tid"]
    got = events(S.load(run.capture), tid, S.SPIN_WRITE)
    counted = run.thread("spinner")["write_spin_empty"]
    assert counted == SPINS + 1
    assert sum(s.weight for s in got) + tail(run, S.SPIN_WRITE) == counted
    sites = weights_by_site(got)
    assert sites.pop("spinner") == 1
    assert sites.pop("spin_retry_site") + tail(run, S.SPIN_WRITE) == SPINS
    assert sites == {}
    # The stride kept the stacks to about twice the budget a second, however fast the retries came.
    assert sum(s.count for s in got) < 2 * int(HZ) + 24


def test_empty_polls_weigh_exactly_what_was_polled_and_name_their_function(run):
    tid = run.truth["idler"]["tid"]
    got = events(S.load(run.capture), tid, S.EMPTY_POLL)
    assert sum(s.weight for s in got) + tail(run, S.EMPTY_POLL) == EMPTIES == run.thread("idler")["poll_zero"]
    assert set(weights_by_site(got)) == {"empty_poll_site"}
    # 150 polls in ~0.2 s: under the budget (HZ a second), a stack for each.
    assert sum(s.count for s in got) == EMPTIES


def test_handoff_wakes_come_from_the_queue_push(run):
    tid = run.truth["producer"]["tid"]
    got = events(S.load(run.capture), tid, S.HANDOFF)
    woken = sum(s.weight for s in got) + tail(run, S.HANDOFF)
    # Each push wakes the consumer when it is asleep, which the producer's 1 ms sleep makes nearly always,
    # from pthread_cond_signal, and once more from the mutex's unlock when the woken consumer found it held.
    assert ITEMS // 2 <= woken <= 2 * ITEMS
    assert {S.call_site(s)[0].name for s in got} == {"queue_push"}
    # Nothing else in the fixture hands anything over.
    others = [s for s in S.load(run.capture).stacks if s.source == S.HANDOFF and s.tid != tid]
    assert others == []


def test_the_caller_of_libc_is_on_the_stack_without_frame_pointers(run):
    """The frame a frame-pointer walk loses (the caller of write(), under a libc without frame pointers)."""
    tid = run.truth["spinner"]["tid"]
    stack = next(s for s in events(S.load(run.capture), tid, S.SPIN_WRITE) if s.weight == 1)
    names = [f.name for f in stack.frames]
    assert names[0] in ("__write", "write", "__libc_write"), names
    assert names[1] == "spinner", names  # the thread's first spin retry: the fill's last write
    assert "start_thread" in names, names
    own = stack.frames[1]
    assert own.module == "callsites" and own.file == "callsites.c" and own.line > 0


def test_every_module_is_opened_while_its_process_runs(run):
    """Each ELF file the fixture maps is opened when its process's modules are first reported, while it runs, not
    when a frame first needs it: a record drained after the process exited (its exit path in the dynamic
    loader, `_dl_fini`) could not open it then (/proc/PID/map_files gone) and was counted unopened (a fresh-clone
    run of 2026-11-29). The fixture maps itself, the C library and the dynamic loader (ldd), and no frame of
    this capture needs the loader."""
    linked = subprocess.run(["ldd", str(FIXTURES / "callsites")], capture_output=True, text=True, check=True).stdout
    files = {line.split("=>")[-1].split("(")[0].strip() for line in linked.splitlines() if "/" in line}
    modules = run.capture["stacks"]["modules"]
    assert (modules["opened"], modules["unopened"], modules["unopened_names"]) == (1 + len(files), 0, []), (files, modules)


def container(mount_point: Path, pid_namespace: bool) -> tuple[str, ...]:
    """A wrapper that runs the fixture (its path, the last argument) from a file that exists only in a mount
    namespace of its own, on a tmpfs mounted over mount_point (empty outside it), as a container runs its
    image's binaries; and, with pid_namespace, as PID 1 of a PID namespace of its own."""
    pid = ("--pid", "--fork", "--kill-child", "--mount-proc") if pid_namespace else ()
    script = 'mount -t tmpfs tmpfs "$0" && cp "$1" "$0/callsites" && exec "$0/callsites"'
    return ("unshare", "--mount", "--propagation", "private", *pid, "sh", "-c", script, str(mount_point))


@pytest.mark.parametrize("pid_namespace", [False, True], ids=["mount-namespace", "and-pid-namespace"])
def test_a_binary_only_in_the_targets_mount_namespace_names_its_call_site(tmp_path, pid_namespace):
    """The collector opens the target's modules as the target maps them (/proc/PID/map_files), not by their
    path in its own filesystem, where this one is not: function, file and line, and its callers."""
    mount_point = tmp_path / "image"
    mount_point.mkdir()
    got = run_fixture("callsites", tmp_path=tmp_path, wrapper=container(mount_point, pid_namespace),
                      collector_args=("--stacks", HZ))
    assert list(mount_point.iterdir()) == []  # the binary is not on the collector's side
    modules = got.capture["stacks"]["modules"]
    assert modules["unopened"] == 0 and modules["unopened_names"] == []
    site = S.pattern_stacks(S.load(got.capture), WRITE_SPIN).call_sites[0]
    assert (site.frame.name, site.frame.module, site.frame.file) == ("spin_retry_site", "callsites", "callsites.c")
    assert site.frame.line > 0
    assert [f.name for f in site.context][:2] == ["spinner", "start_thread"]


def test_a_module_that_cannot_be_opened_is_said(tmp_path):
    """A module the collector cannot open (its file deleted once mapped, and no CAP_SYS_ADMIN or
    CAP_CHECKPOINT_RESTORE for /proc/PID/map_files) is counted and named in the capture, and the report says
    its frames are module+offset: never the host's file of that path, never silently."""
    binary = tmp_path / "callsites-gone"
    deleted = f'cp "$0" {binary} || exit 1; (while kill -0 $$ && ! grep -qs callsites-gone /proc/$$/maps; ' \
              f'do sleep 0.01; done; rm {binary}) & exec {binary}'
    collector = tmp_path / "collector"
    collector.write_text(f"#!/bin/sh\nexec setpriv --bounding-set -sys_admin,-checkpoint_restore "
                         f"--inh-caps -sys_admin,-checkpoint_restore {COLLECTOR} \"$@\"\n")
    collector.chmod(0o755)
    got = run_fixture("callsites", tmp_path=tmp_path, wrapper=("sh", "-c", deleted), program=collector,
                      collector_args=("--stacks", HZ))
    modules = got.capture["stacks"]["modules"]
    assert (modules["unopened"], modules["unopened_names"]) == (1, ["callsites-gone (deleted)"])
    site = S.pattern_stacks(S.load(got.capture), WRITE_SPIN).call_sites[0]
    assert (site.frame.module, site.frame.symbol) == ("callsites-gone (deleted)", None)
    from spinscope.analysis import capture, metrics, stack_costs
    notes = stack_costs.notes(metrics.analyze(capture.loads(json.dumps(got.capture).encode())))
    assert [n for n in notes if "could not be opened" in n] == [
        "stacks: 1 module of the target could not be opened (callsites-gone (deleted)): its frames are named "
        "module+offset, without function, file or line"]


def test_per_pattern_call_sites(run):
    stackset = S.load(run.capture)
    spin = S.pattern_stacks(stackset, WRITE_SPIN)
    assert spin.call_sites[0].frame.name == "spin_retry_site" and spin.call_sites[0].event_share > 0.99
    idle = S.pattern_stacks(stackset, SPURIOUS_SELECT)
    assert idle.call_sites[0].frame.name == "empty_poll_site"
    handoff = S.pattern_stacks(stackset, HANDOFF_OVERHEAD)
    assert handoff.call_sites[0].frame.name == "queue_push"


def test_exports_open_in_the_usual_tools(run, tmp_path):
    stackset = S.load(run.capture)
    text = stack_files.folded(s for s in S.selected(stackset, WRITE_SPIN) if s.source == S.SPIN_WRITE)
    lines = text.splitlines()
    assert lines and all(line.rsplit(" ", 1)[1].isdigit() for line in lines)
    assert sum(int(line.rsplit(" ", 1)[1]) for line in lines if "spin_retry_site" in line) \
        == SPINS - tail(run, S.SPIN_WRITE)
    blob = stack_files.pprof(stackset.stacks, stackset.hz, run.capture["duration_s"])
    assert blob[:2] == b"\x1f\x8b"  # gzip, as pprof reads it


# A stand-in JIT: x86-64 code in an anonymous executable mapping (count ecx down from 2^28, return), run
# from Python through ctypes for about a second.
JIT_LOOP = """
import ctypes, mmap, os, sys, time
code = bytes.fromhex("b900000010" "ffc9" "75fc" "c3")
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(code)
loop = ctypes.CFUNCTYPE(None)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
sys.stdout.write(f"ready {os.getpid()}\\n"); sys.stdout.flush()
sys.stdin.readline()
end = time.monotonic() + 1.0
while time.monotonic() < end:
    loop()
"""


@pytest.mark.parametrize("how", ["file", "symlink"])
def test_a_perf_map_names_jit_frames_only_when_it_is_the_targets_own_file(tmp_path, how):
    """Frames outside every file mapping are named from the target's /tmp/perf-PID.map (a JIT's), a plain
    file of the target's owner; a symbolic link there is refused: it could lead the collector, root, to
    another file of the host. The map below names the whole address space: every unnamed frame would take
    its name."""
    import subprocess
    from collector_harness import LineReader, start_collector

    target = subprocess.Popen([sys.executable, "-c", JIT_LOOP], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    perf_map = Path(f"/tmp/perf-{target.pid}.map")
    elsewhere = tmp_path / "elsewhere.map"
    try:
        out = LineReader(target.stdout)
        out.wait_for(lambda line: line.startswith("ready"))
        content = "0 7fffffffffff SPINSCOPE_PERF_MAP_SYMBOL\n"
        if how == "file":
            perf_map.write_text(content)
        else:
            elsewhere.write_text(content)
            perf_map.symlink_to(elsewhere)
        output = tmp_path / "jit.json"
        collector, err = start_collector(target.pid, output, "--stacks", "499")
        target.stdin.write("go\n")
        target.stdin.flush()
        assert target.wait(timeout=30) == 0
        assert collector.wait(timeout=30) == 0, err.drain()
        frames = json.loads(output.read_text())["stacks"]["frames"]
        named = [f for f in frames if f["symbol"] == "SPINSCOPE_PERF_MAP_SYMBOL"]
        if how == "file":
            assert named and all(f["kind"] == "jit" and f["module"] == "[jit]" for f in named)
        else:
            assert named == []
    finally:
        if target.poll() is None:
            target.kill()
        perf_map.unlink(missing_ok=True)


def test_the_tag_timeline_holds_every_change_of_every_thread(run, timeline_path):
    """--tag-timeline: each thread's tags, changed exactly where the fixture changes what it does. The spinner
    stalls once and never waits again, the idler's polls are all empty, the consumer is woken by the producer
    every time: one change each (two more for each time it is woken by memory-map lock contention). The producer's tags go to `handoff` in each call that wakes the consumer and
    back when it returns: two changes per wake, as many wakes as its hand-off events."""
    tl = T.read(timeline_path)
    assert tl.error is None and tl.complete and tl.lost == 0
    tags = {name: [T.tag_names(bits) for bits in tl.tags.get(row["tid"], [])] for name, row in run.truth.items()}
    assert tags["spinner"] == [("write-stall",)]
    assert tags["idler"] == [("empty-cycle",)]
    # A thread blocked on the memory-map lock and woken by its release was not handed anything: its tags go
    # back to none then, until its next hand-off. (A switch in that ran no program, as every one after the
    # sandbox's PID 1 here, once made the consumer (handoff, none, handoff) 1 run in ~16 beside a CPU hog:
    # the probes now take it to be at the thread's next syscall's exit, switch_ins_unseen.)
    mm_woken = sum(w["count"] for w in run.capture["wakeups"]
                   if w["wakee_tid"] == run.truth["consumer"]["tid"] and w["mechanism"] == "mm")
    assert tags["consumer"][::2] == [("handoff",)] * len(tags["consumer"][::2])
    assert tags["consumer"][1::2] == [()] * len(tags["consumer"][1::2]) and len(tags["consumer"]) % 2 == 1
    assert len(tags["consumer"]) <= 1 + 2 * mm_woken
    producer = run.truth["producer"]["tid"]
    wakes = sum(s.weight for s in events(S.load(run.capture), producer, S.HANDOFF)) + tail(run, S.HANDOFF)
    sent = run.thread("producer")
    # ...and a wakeup made from inside mmap/mprotect (the spinner faulting while main creates a thread) or by
    # exiting is none either: counted in wakeups_sent, never a hand-off event.
    assert wakes == sent["wakeups_sent"] - sent["wakeups_sent_mm"] - sent["wakeups_sent_exit"]
    assert tags["producer"] == [("handoff",), ()] * wakes
    assert tl.changes == len(tags["spinner"]) + len(tags["idler"]) + len(tags["consumer"]) + 2 * wakes
    for tid, times in tl.times.items():
        assert times == sorted(times) and times[0] > 0


def test_a_runtime_helpers_samples_get_the_tags_their_thread_had(run, timeline_path, tmp_path):
    """A helper sample at a moment of the producer's timeline gets the producer's tags then; the samples of
    one stack are split by tags, and their counts kept."""
    tl = T.read(timeline_path)
    producer = run.truth["producer"]["tid"]
    on, off = tl.times[producer][0], tl.times[producer][1]  # `handoff` from on to off, none after
    capture = tmp_path / "capture.json"
    capture.write_text(json.dumps(run.capture))
    helper_out = tmp_path / "helper.jsonl"
    helper_out.write_text(json.dumps({"helper": "test", "samples": 3}) + "\n" + json.dumps(
        {"pid": 1, "tid": producer, "count": 3, "kt": [on, (on + off) // 2, off],
         "frames": [{"kind": "python", "name": "queue.put", "file": "/usr/lib/python3.11/queue.py", "line": 1}]}) + "\n")
    from spinscope.tracing import stacks_helper
    stacks_helper.fold_into(capture, helper_out, {"runtime": "cpython"}, timeline_path)
    block = json.loads(capture.read_text())["stacks"]
    rows = sorted((tuple(s["tags"]), s["count"]) for s in block["stacks"] if s["source"] == "runtime")
    assert rows == [((), 1), (("handoff",), 2)]
    assert block["helper"]["tags"]["changes"] == tl.changes and block["helper"]["tags"]["samples_untagged"] == 0
