"""The collector's per-thread counts must equal what the fixture programs know they did."""

from __future__ import annotations

import pytest

import spinscope

from spinscope.analysis.schema import SCHEMA, layout_differences

from collector_harness import run_fixture

WRITE_KEYS = ["write_calls", "write_bytes", "write_eagain", "write_partial"]
READ_KEYS = ["read_calls", "read_bytes", "read_eagain", "read_eof"]


def test_socket_writes_and_eagain_exact(tmp_path):
    run = run_fixture("sockio", tmp_path=tmp_path)
    truth, got = run.truth["sockwriter"], run.thread("sockwriter")
    assert {k: got[k] for k in WRITE_KEYS} == {k: truth[k] for k in WRITE_KEYS}
    # The fixture's own design: 6 small writes, then a fill, then 25 extra EAGAINs (+1 ending the fill).
    assert truth["write_eagain"] == 26
    assert truth["write_calls"] > 6 + 26
    assert got["write_errors"] == 0
    assert got["write_ns"] > 0
    # Pipe, eventfd and /dev/null writes are not socket writes: the thread made exactly these.
    assert got["read_calls"] == 0


def test_socket_reads_eagain_and_eof_exact(tmp_path):
    run = run_fixture("sockio", tmp_path=tmp_path)
    truth, got = run.truth["sockreader"], run.thread("sockreader")
    assert {k: got[k] for k in READ_KEYS} == {k: truth[k] for k in READ_KEYS}
    assert (got["read_calls"], got["read_eagain"], got["read_eof"]) == (9, 4, 1)
    # It also wrote 4 messages into its own socketpair (socket writes) and 1 into a pipe (not).
    assert got["write_calls"] == 4


def test_zero_event_returns_of_every_poll_call_exact(tmp_path):
    run = run_fixture("polls", tmp_path=tmp_path)
    for name, calls in (("epoller", 3), ("poller", 2), ("selector", 2)):
        truth, got = run.truth[name], run.thread(name)
        assert (got["poll_calls"], got["poll_zero"], got["poll_events"]) == (
            truth["poll_calls"], truth["poll_zero"], truth["poll_events"])
        assert got["poll_zero"] == (7 + 4) * calls  # ZERO + NOWAIT per call kind
        assert got["poll_events_hist"] == [11 * calls, 3 * calls]  # buckets 0 and 1
        assert got["poll_errors"] == 0
        # Zero-timeout calls are checks, told apart from calls that may block, whatever the syscall.
        assert (got["poll_nowait"], got["poll_zero_nowait"]) == (
            truth["poll_nowait"], truth["poll_zero_nowait"]) == (4 * calls, 4 * calls)
        assert got["poll_ns"] >= 7 * calls * 1_000_000  # each empty call with a timeout waited 1 ms
        # On-CPU time inside the calls: far less than the time they waited, and split by kind.
        assert 0 < got["poll_zero_nowait_ns"] < got["poll_oncpu_ns"] < got["poll_ns"]
        assert 0 < got["poll_zero_wait_ns"] < got["poll_oncpu_ns"]
        # Each empty call that slept was woken by its timer: a wakeup from interrupt context, never
        # a hand-off from whichever thread the timer interrupt landed on. (A call whose 1 ms ran out
        # before it slept returns with no wakeup at all; the timers fixture asserts exact counts.)
        assert 0 < got["wakeups_irq"] <= got["poll_zero"]
        # Nothing else woke it: no other process, and no sibling but by contention on the process's
        # memory map (a sibling's munmap or exit while it faulted, now and then): never a handoff.
        assert got["wakeups_external"] == 0 and got["wakeup_wait_ns"] == 0
        into = {e["mechanism"]: e["count"] for e in run.capture["wakeups"] if e["wakee_tid"] == got["tid"]}
        assert set(into) <= {"mm", "exit"} and sum(into.values()) == got["wakeups_received"]
    # Main is woken only by its threads exiting (pthread_join): exit wakeups, so no handoff wait.
    pid = run.capture["target"]["pid"]
    main = next(t for t in run.capture["threads"] if t["tid"] == pid)
    into_main = [e for e in run.capture["wakeups"] if e["wakee_tid"] == pid]
    assert into_main and {e["mechanism"] for e in into_main} == {"exit"}
    assert main["wakeup_wait_ns"] == 0


@pytest.mark.parametrize("name", ["futexwait", "bitsetwait", "condwait"])
def test_futex_waits_and_time_waited(tmp_path, name, futex_run):
    truth, got = futex_run.truth[name], futex_run.thread(name)
    assert got["futex_waits"] == truth["futex_waits"] == 5
    # Time in the syscall is a little less than the fixture's clock around it; tolerance 5%.
    assert truth["futex_wait_ns"] * 0.95 <= got["futex_wait_ns"] <= truth["futex_wait_ns"]
    assert got["futex_wait_ns"] >= 5 * 20_000_000


def test_futex_wakes_exact(futex_run):
    assert futex_run.thread("futexwait")["futex_wakes"] == 4
    assert futex_run.thread("bitsetwait")["futex_wakes"] == 0


@pytest.fixture(scope="module")
def futex_run(tmp_path_factory):
    return run_fixture("futexes", tmp_path=tmp_path_factory.mktemp("futex"))


def test_timer_wakeups_landing_on_a_sibling_thread_are_not_handoffs(tmp_path):
    """The timer interrupts that end the sleeper's sleeps hit its sibling spinning in user mode."""
    run = run_fixture("timers", tmp_path=tmp_path)
    sleeper, spinner = run.thread("sleeper"), run.thread("spinner")
    assert sleeper["wakeups_irq"] == run.truth["sleeper"]["sleeps"] == 20
    assert sleeper["wakeups_received"] == 0
    assert not [e for e in run.capture["wakeups"] if e["wakee_tid"] == sleeper["tid"]]
    assert spinner["cs_involuntary"] + spinner["cs_voluntary"] >= 1  # they did share the CPU


def test_handoff_edges_exact(tmp_path):
    rounds = 500
    run = run_fixture("pingpong", str(rounds), tmp_path=tmp_path)
    ping, pong = run.truth["ping"]["tid"], run.truth["pong"]["tid"]
    edges = {(e["waker_tid"], e["wakee_tid"]): e["count"] for e in run.capture["wakeups"]}
    assert edges[(ping, pong)] == rounds
    assert edges[(pong, ping)] == rounds
    # Per-thread sums agree with the edges (a thread's exit may also wake main in pthread_join).
    for tid, thread in ((ping, run.thread("ping")), (pong, run.thread("pong"))):
        assert thread["wakeups_sent"] == sum(c for (w, _), c in edges.items() if w == tid)
        assert thread["wakeups_received"] == sum(c for (_, e), c in edges.items() if e == tid)
    # A pipe write is an I/O handoff: the writes and the reads they end are timed as its cost.
    assert run.thread("ping")["handoff_oncpu_ns"] > 0 and run.thread("pong")["handoff_oncpu_ns"] > 0
    mechanisms = {(e["waker_tid"], e["wakee_tid"]): e["mechanism"] for e in run.capture["wakeups"]}
    assert mechanisms[(ping, pong)] == mechanisms[(pong, ping)] == "io"
    for name in ("ping", "pong"):  # each also wakes main in pthread_join as it exits: not a handoff
        thread = run.thread(name)
        assert thread["wakeups_sent_io"] == rounds
        assert thread["wakeups_sent"] - thread["wakeups_sent_io"] == thread["wakeups_sent_exit"] <= 1
    # Pipes are not sockets.
    assert run.thread("ping")["write_calls"] == run.thread("pong")["write_calls"] == 0
    # Each hand-off blocks the sender: at least one voluntary switch per round.
    assert run.thread("ping")["cs_voluntary"] >= rounds
    assert run.thread("pong")["cs_voluntary"] >= rounds
    totals = run.capture["totals"]
    assert totals["wakeups_sent"] == sum(edges.values())


def test_requests_and_writes_per_request_exact(tmp_path):
    requests, writes = 40, 5
    run = run_fixture("reqserver", str(requests), str(writes), tmp_path=tmp_path)
    server = run.thread("server")
    assert run.truth["server"]["requests"] == requests
    assert server["write_calls"] == requests * writes
    req = run.capture["requests"]
    assert req["count"] == requests
    assert req["write_calls"] == requests * writes
    assert req["write_bytes"] == requests * writes * 100
    assert req["write_eagain"] == 0
    assert req["cross_thread"] == 0
    # log2 buckets: 5 writes -> bucket 3 ([4, 7]); 500 bytes -> bucket 9 ([256, 511]).
    assert req["hist"]["write_calls"] == [0, 0, 0, requests]
    assert req["hist"]["write_bytes"][9] == requests
    [size_class] = req["by_size"]
    assert size_class == {"bytes_min": 256, "bytes_max": 511, "count": requests,
                          "write_calls": requests * writes, "write_eagain": 0, "write_partial": 0,
                          "spin_retries": 0, "spin_eagain": 0, "write_waited": 0, "write_bytes": requests * writes * 100,
                          "cross_thread": 0, "duration_ns": size_class["duration_ns"], "nagle_holds": 0,
                          "nagle_hold_ns": 0}
    assert size_class["duration_ns"] == req["duration_ns"] > 0
    # The thread that read every request also wrote every response.
    assert server["requests_read"] == server["responses_written"] == requests
    # The client is a separate (forked, untraced) process: its threads are not in the capture.
    assert {t["pid"] for t in run.capture["threads"]} == {run.capture["target"]["pid"]}


def test_children_forked_before_attach_are_followed(tmp_path):
    run = run_fixture("prefork", tmp_path=tmp_path, collector_args=("--children",))
    children = [run.truth["child0"]["tid"], run.truth["child1"]["tid"]]
    assert sorted(run.capture["target"]["pids"][1:]) == sorted(children)
    for name in ("child0", "child1"):
        assert run.thread(name)["write_calls"] == run.truth[name]["write_calls"] == 7


def test_children_are_not_followed_without_the_option(tmp_path):
    run = run_fixture("prefork", tmp_path=tmp_path)
    assert run.capture["target"]["pids"] == [run.capture["target"]["pid"]]
    assert run.capture["totals"]["write_calls"] == 0


def test_outgoing_connections_serve_no_requests(tmp_path):
    """The traced process as a client (to a database, a shard): its exchanges are not its requests."""
    run = run_fixture("reqclient", tmp_path=tmp_path)
    exchanges = run.truth["client"]["exchanges"]
    client = run.thread("client")
    assert client["write_calls"] == client["read_calls"] == exchanges
    assert run.capture["requests"]["count"] == 0
    assert run.capture["requests"]["unattributed_writes"] == exchanges


def test_request_still_open_at_the_end_is_counted(tmp_path):
    """The last response's socket is closed by process exit, not by close(): the request is still
    open in the probe's map when the capture ends, and the collector counts it."""
    run = run_fixture("reqserver", "6", "2", "noclose", tmp_path=tmp_path)
    req = run.capture["requests"]
    assert (req["count"], req["write_calls"], req["open_at_end"]) == (6, 12, 1)
    assert req["hist"]["write_calls"] == [0, 0, 6]


def test_capture_document_shape(tmp_path):
    run = run_fixture("reqserver", "3", "1", tmp_path=tmp_path, collector_args=("--interval", "0.2"))
    cap = run.capture
    assert cap["schema"] == SCHEMA == 10 and cap["format"] == "spinscope-capture"
    # This kernel has what every part of the capture needs (probed at attach): nothing left out.
    assert cap["host"]["features"] == {"bpf_loop": True, "perf_event_maps": True}
    assert cap["settings"]["left_out"] == []
    # One version: the collector is built with the package's (the Makefile reads spinscope/__init__.py).
    assert cap["tool"] == {**cap["tool"], "name": "spinscope-collector", "version": spinscope.__version__}
    assert cap["settings"]["time_sample"] == 1  # the harness times every call
    # What the collector itself used, and when maps filled (none here).
    assert cap["tool"]["cpu_s"] > 0 and cap["tool"]["max_rss_bytes"] > 2**20
    assert 0 < cap["tool"]["map_bytes"] < 4 * 2**20
    assert cap["intervals"] and all(i["drops"] == dict.fromkeys(cap["drops"], 0) for i in cap["intervals"])
    assert cap["end_reason"] == "target-exited"
    assert cap["target"]["comm"] == "reqserver"
    assert cap["target"]["argc"] == 3 and cap["target"]["cmdline"] is None  # values only with --cmdline
    assert cap["target"]["exe"].endswith("/fixtures/reqserver") and cap["target"]["execs"] == []
    assert cap["duration_s"] > 0
    names = {t["comm"] for t in cap["threads"]}
    assert {"reqserver", "server"} <= names
    # Totals are the sum over threads, exited ones included.
    for key in ("write_calls", "read_calls", "cs_voluntary", "futex_waits"):
        assert cap["totals"][key] == sum(t[key] for t in cap["threads"])
    assert cap["totals"]["threads_created"] == 1  # the server thread (the client forked before attach)
    assert cap["totals"]["threads_exited"] == cap["totals"]["threads_seen"]
    # Interval deltas add up to the totals.
    assert len(cap["intervals"]) >= 1
    for key in ("write_calls", "read_calls"):
        assert sum(iv["counters"][key] for iv in cap["intervals"]) == cap["totals"][key]
    # ... and the requests' times and cross-thread answers (schema 8) to the requests block's sums
    for key, total in (("requests", "count"), ("request_ns", "duration_ns"), ("cross_thread", "cross_thread")):
        assert sum(iv[key] for iv in cap["intervals"]) == cap["requests"][total], key
    assert sum(iv["requests"] for iv in cap["intervals"]) == cap["requests"]["count"] == 3
    assert cap["drops"] == {"threads": 0, "sockets": 0, "wakeup_edges": 0, "pids": 0, "exited": 0, "execs": 0,
                           "listeners": 0}
    assert cap["threads_folded"] == []  # no more threads gone than --max-threads keeps as rows
    # Every key, and no other, that schema.LAYOUT (checked against bpf/spinscope.h and the docs) names.
    assert layout_differences(cap) == []


def test_futex_handoffs_are_futex_wakeups(tmp_path):
    rounds = 300
    run = run_fixture("pingpong", str(rounds), "futex", tmp_path=tmp_path)
    ping, pong = run.truth["ping"]["tid"], run.truth["pong"]["tid"]
    edges = {(e["waker_tid"], e["wakee_tid"], e["mechanism"]): e["count"] for e in run.capture["wakeups"]}
    assert edges[(ping, pong, "futex")] == edges[(pong, ping, "futex")] == rounds
    assert run.thread("pong")["wakeups_sent_futex"] == rounds
    # The futex wakes and waits were timed on the CPU: some time, far less than the waits took.
    assert 0 < run.thread("pong")["futex_oncpu_ns"] < run.thread("pong")["futex_wait_ns"]
    # Every futex call of the rounds woke the other thread or was woken by it: all a handoff's cost.
    for name in ("ping", "pong"):
        thread = run.thread(name)
        assert 0.5 * thread["futex_oncpu_ns"] < thread["handoff_oncpu_ns"] <= thread["oncpu_ns"]


def test_spin_retries_and_writes_after_a_wait_exact(tmp_path):
    """Retries of a stalled write without polling are spin retries; after a poll they are not."""
    run = run_fixture("stalls", tmp_path=tmp_path)
    truth, got = run.truth["stalls"], run.thread("stalls")
    keys = ["write_calls", "write_eagain", "write_partial", "write_spin_retries", "write_spin_eagain",
            "write_spin_empty", "write_waited"]
    assert {k: got[k] for k in keys} == {k: truth[k] for k in keys}
    assert truth["write_spin_retries"] >= 3 * 20  # SPINS per request, at least
    assert truth["write_waited"] >= 3
    # The same per request, and in the response-size class (512 KiB).
    req = run.capture["requests"]
    assert (req["count"], req["spin_retries"], req["spin_eagain"], req["write_waited"], req["write_calls"]) == (
        3, truth["write_spin_retries"], truth["write_spin_eagain"], truth["write_waited"], truth["write_calls"])
    [size_class] = req["by_size"]
    assert (size_class["bytes_min"], size_class["spin_retries"]) == (512 * 1024, truth["write_spin_retries"])
    # On-CPU time: of the stalled calls, part of the socket writes' time; of the retries' whole cycles
    # (loop, syscall entry and exit, the call), more than the time inside those calls.
    assert 0 < got["write_eagain_ns"] + got["write_partial_ns"] <= got["write_ns"]
    assert 0 < got["write_spin_ns"] <= got["oncpu_ns"]
    assert truth["write_spin_empty"] > 0 and 0 < got["write_spin_empty_ns"] < got["write_spin_ns"]
    assert 0 < got["write_spin_bytes"] < got["write_bytes"]
    # What bound each stall, read at the stall: the send buffer the fixture set (as the kernel made it), at
    # every one of them; the client's receive window, which its 4 KB receive buffer (8 KB once the kernel
    # doubles it) caps.
    stalls = truth["write_eagain"] + truth["write_partial"]
    assert got["stalls_sampled"] == stalls
    assert got["stall_sndbuf_bytes"] == stalls * truth["sndbuf"]
    assert 0 < got["stall_queued_bytes"] <= stalls * 2 * truth["sndbuf"]
    assert got["stall_peer_window_bytes"] <= stalls * 8192
    # The first write of each of the 3 responses: the rate at which the thread moves bytes unstalled.
    assert 0 < got["write_first_bytes"] <= 3 * 64 * 1024 and got["write_first_ns"] > 0


def test_futex_time_in_a_request_apart_from_idle_parking(tmp_path):
    requests = 20
    run = run_fixture("reqserver", str(requests), "1", "futex", tmp_path=tmp_path)
    server, idler = run.thread("server"), run.thread("idler")
    # The server's one futex wait per request, between reading it and answering it.
    assert server["futex_waits_req"] == requests
    assert server["futex_wait_req_ns"] >= requests * 1_000_000 * 0.9
    # The idle thread parked all along, never with a request.
    assert idler["futex_waits"] == run.truth["idler"]["futex_waits"] >= 1
    assert idler["futex_waits_req"] == idler["futex_wait_req_ns"] == 0


def test_parent_closing_its_copy_does_not_end_the_childs_request(tmp_path):
    """Fork per connection: only the socket's last close ends its request."""
    run = run_fixture("forkclose", tmp_path=tmp_path, collector_args=("--children",))
    req = run.capture["requests"]
    assert req["count"] == run.truth["forkclose"]["requests"] == 20
    assert req["write_calls"] == 20
    # The client, forked before the collector attached, is a descendant too (adopted at attach):
    # its 20 requests go out on connections it made, which serve no requests.
    assert req["unattributed_writes"] == 20
    # A child that exits while the parent waits for it in waitpid wakes it: an exit, not a handoff;
    # the only other wakeups are the pipe writes between them.
    main_tid = run.capture["target"]["pid"]
    into_main = [e for e in run.capture["wakeups"] if e["wakee_tid"] == main_tid]
    assert {e["mechanism"] for e in into_main} <= {"exit", "io"}
    assert 1 <= sum(e["count"] for e in into_main if e["mechanism"] == "exit") <= 5
