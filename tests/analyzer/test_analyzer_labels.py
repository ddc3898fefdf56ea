"""Each server of the research gets exactly the labels it deserves, with the right numbers and roles; a
label's severity follows its measured cost, never its counts alone."""

from __future__ import annotations

import importlib

import pytest

import captures
from spinscope.analysis import patterns
from spinscope.analysis.capture import load
from spinscope.analysis.labels import assess, detector
from spinscope.analysis.metrics import analyze
from spinscope.analysis.patterns import HANDOFF_OVERHEAD, PATTERNS, SPURIOUS_SELECT, WRITE_SPIN, WRITE_WAIT
from spinscope.analysis.roles import ACCEPTOR, DISPATCHER, EVENT_LOOP, HANDLER, IDLE, WORKER
from spinscope.analysis.verdicts import CRITICAL, INFO, MIN_REQUESTS, WARNING
from spinscope.fmt import size_class

EXPECTED = {
    "write_spin": {WRITE_SPIN},
    "thread_per_connection": set(),
    "reactor_split": {HANDOFF_OVERHEAD},
    "reactor_worker": {HANDOFF_OVERHEAD},
    "clean_event_loop": set(),
    "spurious_loop": {SPURIOUS_SELECT},
    "imbalanced_loops": {SPURIOUS_SELECT},
}


def analysis_of(doc, capture_file):
    return analyze(load(capture_file(doc)))


def labels_of(doc, capture_file) -> dict:
    return {label.name: label for label in assess(analysis_of(doc, capture_file)).labels}


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_labels_present_exactly_where_deserved(scenario, capture_file):
    assessment = assess(analysis_of(captures.SCENARIOS[scenario](), capture_file))
    assert assessment.names() == EXPECTED[scenario]
    for label in assessment.labels:
        assert label.summary and label.fixes and label.evidence
        assert 0 < label.cpu_share <= 1


def test_write_spin_severity_is_the_measured_share_of_the_spinning_thread(capture_file):
    label = labels_of(captures.write_spin_server(), capture_file)[WRITE_SPIN]
    assert label.summary.startswith("write-spin on 64–128 KiB responses: 40 writes per response, 35 of them "
                                    "retrying an EAGAIN at once, without waiting")
    assert label.evidence["eagain_retries_per_response"] == 35
    # 1.8 s of retry cycles measured in the kernel, less 0.3 s for moving their 300 MB at the rate of
    # the responses' first writes (1 ns a byte), against the loop's 3 s on CPU.
    assert label.cpu_share == pytest.approx(0.5)
    assert label.severity == CRITICAL
    assert "measured 50% of the CPU of event loop 'spinsrv' (tid 100) in those retries" in label.summary
    # The same retries, cheap: the label stays (the pattern is there) but at what it costs.
    doc = captures.write_spin_server()
    for row in (doc["threads"][0], doc["totals"]):
        row["write_spin_ns"] = 0.33e9  # less the 0.3 s its bytes take at the first writes' rate: 1%
    assert labels_of(doc, capture_file)[WRITE_SPIN].severity == INFO


def test_many_complete_writes_are_not_write_spin(capture_file):
    """Chunked responses: 10 writes per response, none stalled, none retried."""
    doc = captures.write_spin_server(eagain_per_request=0, partial_per_request=0, writes_per_request=10,
                                     spin_per_request=0, futile_per_request=0)
    assert WRITE_SPIN not in labels_of(doc, capture_file)


def test_a_server_that_waits_for_writability_gets_a_finding_not_a_label(capture_file):
    """nginx with a 16 KB send buffer: 12 writes and 5 EAGAIN per response, each EAGAIN followed by a
    wait for EPOLLOUT (the retry after a partial write moves bytes): no write-spin label at any severity,
    a write-wait finding (a name of its own) with the waits and the request time."""
    doc = captures.write_spin_server(writes_per_request=12.4, eagain_per_request=4.8, partial_per_request=6,
                                     spin_per_request=4.8, futile_per_request=0, waits_per_request=5.1,
                                     request_ns=2_400_000)
    for row in (doc["threads"][0], doc["totals"]):
        row["write_spin_eagain"] = 0  # no retry of an EAGAIN: every EAGAIN was followed by a wait
    assessment = assess(analysis_of(doc, capture_file))
    assert WRITE_SPIN not in assessment.names()
    finding = next(f for f in assessment.findings if f.name == WRITE_WAIT)
    assert finding.summary.startswith("64–128 KiB responses wait for writability 5.1 times each")
    assert "these requests took 2.40 ms on average" in finding.summary
    assert finding.to_dict()["name"] == "write-wait" and "severity" not in finding.to_dict()


def test_spurious_select_is_judged_by_measured_time(capture_file):
    label = labels_of(captures.spurious_loop(), capture_file)[SPURIOUS_SELECT]
    assert label.summary.startswith("spurious select: 40% of poll calls return no events "
                                    "(20,000 blocking calls that woke with nothing at 5.0 µs each)")
    assert label.cpu_share == pytest.approx(0.125)
    assert label.severity == WARNING
    # Node.js-like: most polls are zero-timeout checks returning nothing, at 1-2 us each: 1.4% of CPU.
    n = 20_000
    loop = captures.thread(600, "node", poll_calls=60_000, poll_zero=40_000, poll_nowait=50_000,
                           poll_zero_nowait=40_000, poll_zero_nowait_ns=40_000 * 1_500, poll_events=n,
                           read_calls=n, write_calls=n, socket_switches=n, oncpu_ns=4.2e9)
    label = labels_of(captures.capture([loop], requests=n), capture_file)[SPURIOUS_SELECT]
    assert label.severity == INFO and label.cpu_share == pytest.approx(0.06 / 4.2)
    assert "40,000 zero-timeout checks at 1.5 µs each" in label.summary
    # Cheaper still (under 1% of CPU): not worth naming at all.
    loop["poll_zero_nowait_ns"] = 40_000 * 500
    assert SPURIOUS_SELECT not in labels_of(captures.capture([loop], requests=n), capture_file)


def test_imbalanced_loops_are_named(capture_file):
    label = labels_of(captures.imbalanced_loops(), capture_file)[SPURIOUS_SELECT]
    assert "event loop 'front' (tid 700) handles 0.7 events per poll call while event loop 'back' (tid 701) handles 22" \
        in label.summary
    assert label.evidence["quiet_loop_tid"] == 700 and label.evidence["busy_loop_events_per_poll"] == 22
    assert label.estimated and "estimated from its measured poll time" in label.summary


def test_reading_until_eagain_is_not_spurious_but_mostly_eagain_reads_are(capture_file):
    """An edge-triggered loop reads until EAGAIN: one EAGAIN per wakeup (here 37%) is its design."""
    doc = captures.clean_event_loop()
    assert SPURIOUS_SELECT not in labels_of(doc, capture_file)
    for row in (doc["threads"][0], doc["totals"]):
        row["read_eagain"], row["read_eagain_ns"] = 32_000, 32_000 * 4_000
    label = labels_of(doc, capture_file)[SPURIOUS_SELECT]
    assert "80% of socket reads return EAGAIN" in label.summary


def test_idle_timer_ticks_are_not_spurious(capture_file):
    """A loop waking 100 times a second on a timer, with nothing to do, is not spinning."""
    loop = captures.thread(1, "idle", poll_calls=1_000, poll_zero=1_000, poll_zero_wait_ns=1_000 * 5_000,
                           oncpu_ns=1e7)
    assessment = assess(analysis_of(captures.capture([loop]), capture_file))
    assert assessment.labels == []
    assert "no requests were observed" in assessment.notes[0]


def test_handoff_overhead_costs_are_measured(capture_file):
    label = labels_of(captures.reactor_split(), capture_file)[HANDOFF_OVERHEAD]
    assert label.evidence["handoffs_per_request"] == 4.0
    assert label.evidence["handoff_wait_ms_per_request"] == pytest.approx(0.08)
    assert label.evidence["handoff_wait_share_of_request_time"] == pytest.approx(0.4)
    # The calls that handed off or were handed to: 4 us per request in the reactor, 6 us in the
    # workers, against the threads' CPU time.
    assert label.cpu_share == pytest.approx((4_000 + 6_000) / (40_000 + 30_000))
    assert label.severity == CRITICAL  # 40% of every request spent waiting for a woken thread
    assert "4.0 handoffs between threads per request (event loop → worker 2.0, worker → event loop 2.0)" \
        in label.summary
    assert label.details == ["event loop → worker: 20000 wakeups, 2.00 per request",
                             "worker → event loop: 20000 wakeups, 2.00 per request",
                             "its CPU share counts the calls that hand off and wait: a lower bound (the runtime's "
                             "pool, queue and lock code in user space is not timed; record with --stacks to sample "
                             "it)"]
    # Without stack samples: the share is the syscall-measured part only, and said to be a lower bound.
    assert (label.syscall_share, label.user_share, label.call_sites) == (label.cpu_share, None, [])
    assert labels_of(captures.reactor_worker(), capture_file)[HANDOFF_OVERHEAD].evidence["handoffs_per_request"] == 2.0


def test_mm_lock_wakeups_are_contention_not_handoffs(capture_file):
    """Apache worker MPM: most in-process wakeups come from mmap/munmap, not from passing requests."""
    doc = captures.reactor_split(wakeups=[(300, 301 + i, 2 * 10_000 // 4, "mm") for i in range(4)]
                                 + [(301 + i, 300, 2 * 10_000 // 4, "mm") for i in range(4)])
    analysis = analysis_of(doc, capture_file)
    assert analysis.process["handoffs_per_request"] == 0
    assert analysis.process["contention_wakeups_per_request"] == 4.0
    assert HANDOFF_OVERHEAD not in {label.name for label in assess(analysis).labels}


def test_requests_moved_through_shared_memory_are_handoffs(capture_file):
    """Redis with io-threads: 68% of requests are read by one thread and answered by another, and no
    thread wakes another: the handoff is found, its cost estimated from the busy-waiting threads' CPU
    outside their calls (never 0: a label ranked by its share must not come last), and said to be."""
    n = 10_000
    main = captures.thread(1, "redis-server", poll_calls=n, poll_events=n, read_calls=n // 3, write_calls=n // 3,
                           socket_switches=n, oncpu_ns=9.5e9)
    io = captures.thread(2, "io_thd_1", read_calls=2 * n // 3, write_calls=2 * n // 3, socket_switches=n,
                         oncpu_ns=9.7e9, cs_involuntary=2_000)
    label = labels_of(captures.capture([main, io], requests=n, cross_thread=6_800), capture_file)[HANDOFF_OVERHEAD]
    assert label.estimated and label.cpu_share == pytest.approx(1.0) and label.severity == CRITICAL
    assert label.evidence["mechanism"] == "shared-memory"
    assert label.summary.startswith("handoff overhead: requests are handed over through shared memory, the "
                                    "threads busy-waiting: 68% of requests are answered by another thread")
    assert "'io_thd_1' 97% on CPU, 97% runnable" in label.summary  # on CPU nearly all of the 10 s: busy-waiting


def test_busy_waiting_threads_sharing_one_cpu_are_found_by_their_runnable_time(capture_file):
    """Redis with io-threads under taskset -c 0 (a 32 s capture, 2026-12): the main and I/O threads each on
    the CPU 29% of the capture and waiting for it 69%, 2 and 21 voluntary switches. On CPU half the capture
    (the rule before) no thread was busy and the label went; runnable (on CPU or in the run queue), both are."""
    n, seconds = 60_000, 32.0
    main = captures.thread(1, "redis-server", poll_calls=1_257, poll_events=60_000, read_calls=n // 2,
                           write_calls=n // 2, socket_switches=n, oncpu_ns=9.35e9, runq_ns=22.3e9, cs_voluntary=21,
                           cs_involuntary=22_426, poll_oncpu_ns=int(0.04e9), read_ns=int(0.07e9),
                           write_ns=int(0.34e9))
    io = captures.thread(2, "io_thd_1", read_calls=n // 2, write_calls=n // 2, socket_switches=n,
                         oncpu_ns=9.35e9, runq_ns=22.3e9, cs_voluntary=2, cs_involuntary=22_069,
                         read_ns=int(0.09e9), write_ns=int(0.32e9))
    doc = captures.capture([main, io], requests=n, cross_thread=58_600, duration_s=seconds)
    label = labels_of(doc, capture_file)[HANDOFF_OVERHEAD]
    assert label.evidence["mechanism"] == "shared-memory" and label.severity == CRITICAL
    inside = (0.04 + 0.07 + 0.34) + (0.09 + 0.32)
    assert label.cpu_share == pytest.approx((2 * 9.35 - inside) / (2 * 9.35))
    assert "'io_thd_1' 29% on CPU, 99% runnable" in label.summary
    # The same threads sleeping instead of waiting for the CPU (runnable 39% of the capture) busy-wait for
    # nothing: no busy thread, no shared-memory hand-over to price.
    for thread in (main, io):
        thread["runq_ns"] = int(3.2e9)
    doc = captures.capture([main, io], requests=n, cross_thread=58_600, duration_s=seconds)
    assert HANDOFF_OVERHEAD not in labels_of(doc, capture_file)


def test_futex_time_per_request_counts_only_waits_inside_requests(capture_file):
    """Idle pool threads parked in futex waits are not a per-request cost."""
    doc = captures.thread_per_connection()
    for row in (doc["threads"][0], doc["totals"]):
        row["futex_waits"] += 1_000
        row["futex_wait_ns"] += int(56e9)  # 7 ms per request if it were counted
    analysis = analysis_of(doc, capture_file)
    assert analysis.process["futex_ms_per_request"] == 0
    doc["threads"][1]["futex_wait_req_ns"] = doc["totals"]["futex_wait_req_ns"] = 8_000 * 50_000
    assert analysis_of(doc, capture_file).process["futex_ms_per_request"] == pytest.approx(0.05)


def test_small_samples_are_not_judged(capture_file):
    doc = captures.reactor_split(requests=MIN_REQUESTS - 1)
    assessment = assess(analysis_of(doc, capture_file))
    assert HANDOFF_OVERHEAD not in assessment.names()
    assert f"only {MIN_REQUESTS - 1} requests" in assessment.notes[0]


def test_captures_without_measured_costs_get_no_verdict(capture_file):
    """A schema 1 capture has counts only: no verdict is drawn from its missing costs."""
    doc = captures.write_spin_server()
    doc["schema"] = 1
    assessment = assess(analysis_of(doc, capture_file))
    assert assessment.labels == []
    assert "no measured costs" in assessment.notes[0]


def test_zero_requests_leave_per_request_metrics_undefined(capture_file):
    analysis = analysis_of(captures.capture([captures.thread(1, write_calls=10, poll_calls=30)]), capture_file)
    assert analysis.process["writes_per_request"] is None
    assert analysis.process["handoffs_per_request"] is None
    assert analysis.process["writes_per_s"] == 1.0


def test_roles(capture_file):
    def roles(doc):
        return {tid: thread["role"] for tid, thread in analysis_of(doc, capture_file).threads.items()}

    # The reactor reads and writes, and wakes a worker twice per request: an event loop that dispatches.
    assert roles(captures.reactor_split()) == {300: EVENT_LOOP, **{t: WORKER for t in range(301, 305)}}
    # It only polls and wakes: a dispatcher; its workers read and write whole requests: handlers.
    assert roles(captures.reactor_worker()) == {400: DISPATCHER, 401: HANDLER, 402: HANDLER}
    tpc = roles(captures.thread_per_connection())
    assert tpc[200] == IDLE and {tpc[t] for t in range(201, 209)} == {HANDLER}
    assert roles(captures.imbalanced_loops()) == {700: EVENT_LOOP, 701: EVENT_LOOP}
    acceptor = captures.thread(1, "acceptor", poll_calls=500, poll_events=500)
    handler = captures.thread(2, "handler", read_calls=20_000, write_calls=10_000, requests_read=10_000)
    assert roles(captures.capture([acceptor, handler], requests=10_000)) == {1: ACCEPTOR, 2: HANDLER}
    # A pre-forked process: reads until EAGAIN, then polls its one connection for the next request.
    prefork = captures.thread(3, "apache2", read_calls=20_000, read_eagain=10_000, write_calls=10_000,
                              poll_calls=10_000, poll_events=10_000, requests_read=10_000, socket_switches=50)
    assert roles(captures.capture([prefork], requests=10_000)) == {3: HANDLER}
    # A listener that wakes a worker for each new connection.
    listener = captures.thread(4, "memcached", poll_calls=300, poll_events=300)
    worker = captures.thread(5, "mc-worker", poll_calls=10_000, poll_events=10_000, read_calls=10_000,
                             write_calls=10_000, requests_read=10_000, socket_switches=9_000)
    doc = captures.capture([listener, worker], wakeups=[(4, 5, 50, "io")], requests=10_000)
    assert roles(doc) == {4: DISPATCHER, 5: EVENT_LOOP}


def test_size_class_names():
    assert size_class(65536, 131071) == "64–128 KiB"
    assert size_class(512, 1023) == "512 B–1 KiB"
    assert size_class(0, 0) == "0 B"


def thread_per_request(schema: int = 7) -> dict:
    """A reader that creates a thread to answer each of 1,000 requests (schema 7): each new thread writes the
    response (no request read), exits and wakes its joiner; clones of 20 us, first-run waits of 10 us, exits
    of 15 us; a thread per connection created while traced too, which reads its own requests."""
    n = 1_000
    reader = captures.thread(1, "reader", read_calls=n, requests_read=n, clone_calls=n + 1, clone_ns=(n + 1) * 20_000,
                             threads_created=n + 1, oncpu_ns=int(0.1e9))
    answers = [captures.thread(100 + i, "answer", write_calls=1, responses_written=1, thread_starts=1,
                               thread_start_wait_ns=10_000, runq_ns=10_000, exit_oncpu_ns=15_000, oncpu_ns=50_000)
               for i in range(n)]
    conn = captures.thread(99, "conn", read_calls=10, requests_read=10, write_calls=10, thread_starts=1,
                           oncpu_ns=int(0.001e9))
    doc = captures.capture([reader, conn, *answers], wakeups=[(100 + i, 1, 1, "exit") for i in range(n)], requests=n,
                           cross_thread=n, request_ns=100_000)
    for row in doc["threads"]:
        row["alive"] = row["tid"] < 100
        row["first_seen_s"] = 0.0 if row["tid"] == 1 else 1.0
    doc["schema"] = schema
    return doc


def test_a_thread_created_per_request_is_its_own_mechanism_and_cost(capture_file):
    label = labels_of(thread_per_request(), capture_file)[HANDOFF_OVERHEAD]
    evidence = label.evidence
    assert evidence["mechanism"] == "thread-per-request"
    # The answer threads, not the thread per connection (it reads its own requests).
    assert (evidence["threads_created_on_request_path"], evidence["threads_exited_on_request_path"]) == (1000, 1000)
    assert (evidence["clone_us_per_thread"], evidence["start_wait_us_per_thread"], evidence["exit_us_per_thread"]) \
        == (20.0, 10.0, 15.0)
    # CPU: the clones and exits over the reader's and the answers' CPU; latency: 10 us of 100 us.
    assert label.cpu_share == pytest.approx(1000 * (20_000 + 15_000) / (0.1e9 + 1000 * 50_000))
    assert evidence["request_path_wait_ms_per_request"] == 0.01
    assert label.summary.startswith("handoff overhead: a thread is created to serve requests and exits after it: "
                                    "1.0 threads created and 1.0 exited per request on the request path (creating "
                                    "one cost its creator 20 µs in clone, it waited 10 µs to first run, its exit "
                                    "took 15 µs of CPU)")
    assert label.fixes[0].startswith("create no thread per request: hand requests to a pool of threads")


def test_captures_before_schema_7_know_no_thread_lives(capture_file):
    """A schema 6 capture has no thread_starts (the same rows, the counters 0): no thread is said to be
    created for requests, the first_seen_s rule included (before schema 7 it is not read so)."""
    doc = thread_per_request(schema=6)
    for row in doc["threads"]:
        for key in ("clone_calls", "clone_ns", "thread_starts", "thread_start_wait_ns", "exit_oncpu_ns"):
            row.pop(key, None)
    for key in ("clone_calls", "clone_ns", "thread_starts", "thread_start_wait_ns", "exit_oncpu_ns"):
        doc["totals"].pop(key, None)
        for interval in doc["intervals"]:
            interval["counters"].pop(key, None)
    label = labels_of(doc, capture_file).get(HANDOFF_OVERHEAD)
    assert label is None or "threads_created_per_request" not in label.evidence
    assert label is None or label.evidence["mechanism"] != "thread-per-request"


def test_the_list_of_patterns_and_their_homes_agree():
    """patterns/__init__.py is the one list: each row's home (a module or package of analysis/patterns/)
    detects exactly the names whose rows name it, labels first, then findings, as a report says them."""
    homes: dict = {}
    for pattern in PATTERNS:
        assert detector(pattern).__module__.startswith(f"{patterns.__name__}.{pattern.home}")
        homes.setdefault(pattern.home, set()).add(pattern.name)
    for home, names in homes.items():
        assert set(importlib.import_module(f"{patterns.__name__}.{home}").DETECT) == names
    assert [p.label for p in PATTERNS] == sorted((p.label for p in PATTERNS), reverse=True)
    assert len({p.name for p in PATTERNS}) == len(PATTERNS) == len(patterns.TITLES)
