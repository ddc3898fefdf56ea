"""The verdicts of schema 5 captures on synthetic servers: herds, busy polling, the whole-cycle costs, the
handoff mechanisms and the copy rate. Each test builds the counters a server of that kind makes and
asserts the verdict both ways: present where the cost is there, absent where the pattern is not."""

from __future__ import annotations

import pytest

import captures
from spinscope.analysis.capture import load
from spinscope.analysis.labels import assess
from spinscope.analysis.metrics import analyze, role_edges
from spinscope.analysis.patterns import BUSY_POLLING, HANDOFF_OVERHEAD, SPURIOUS_SELECT, WRITE_SPIN
from spinscope.analysis.patterns.handoff.measure import (LEADER_FOLLOWER, PER_CONNECTION, POOL_ROUND_TRIP, SHARED_MEMORY,
                                                         measure_handoff)
from spinscope.analysis.patterns.spurious_select import MIN_HERD_WAKEUPS, busy_pollers
from spinscope.analysis.verdicts import CRITICAL, INFO, WARNING

N = 10_000  # requests


def schema5(doc: dict, listeners=(), pids: dict | None = None) -> dict:
    """A synthetic capture as a schema 5 collector writes it; `pids` {tid: pid} puts threads in processes."""
    doc["schema"] = 5
    doc["listeners"] = [{"inode": 1000 + i, "family": "inet", "processes": 1, **entry}
                        for i, entry in enumerate(listeners)]
    doc["drops"]["listeners"] = 0
    for row in doc["threads"]:
        row["pid"] = (pids or {}).get(row["tid"], row["pid"])
    return doc


def judge(doc, capture_file):
    analysis = analyze(load(capture_file(doc)))
    return analysis, assess(analysis)


def herd_worker(tid: int, futile: int, cycle_ns: int, oncpu_ns: float) -> dict:
    """A gunicorn-like sync worker: select() on the listener, accept, read, write, accept until EAGAIN;
    `futile` of its wakeups found the connection taken (accept EAGAIN right after select said ready)."""
    served = N // 4
    return captures.thread(tid, "gunicorn", poll_calls=served + futile, poll_events=served + futile,
                           accept_calls=2 * served + futile, accept_eagain=served + futile, poll_futile=futile,
                           poll_futile_cycle_ns=futile * cycle_ns, read_calls=served, write_calls=served,
                           requests_read=served, responses_written=served, oncpu_ns=oncpu_ns,
                           cs_voluntary=served + futile)


def test_a_herd_is_a_spurious_select_with_its_listener_and_cost(capture_file):
    workers = [herd_worker(10 + i, futile=850, cycle_ns=60_000, oncpu_ns=0.6e9) for i in range(4)]
    doc = schema5(captures.capture(workers, requests=N),
                  listeners=[{"port": 8000, "accept_calls": 23_400, "accept_ok": N, "accept_eagain": 13_400,
                              "processes": 4}],
                  pids={10 + i: 10 + i for i in range(4)})
    analysis, assessment = judge(doc, capture_file)
    label = next(l for l in assessment.labels if l.name == SPURIOUS_SELECT)
    # 3,400 futile wakeups at 60 us each (their whole cycles), of 2.4 s of the four workers' CPU.
    assert label.cpu_share == pytest.approx(3_400 * 60_000 / 2.4e9)
    assert label.severity == WARNING
    assert "thundering herd on port 8000: 4 processes wait on the same listener; 1.3 woken per connection, " \
           "3,400 wakeups found nothing at 60.0 µs each (3,400 returned ready descriptors that gave nothing; " \
           "13,400 accept calls returned EAGAIN)" in label.summary
    assert label.evidence["woken_per_connection"] == pytest.approx(1.34)
    assert any("EPOLLEXCLUSIVE" in fix and "SO_REUSEPORT" in fix for fix in label.fixes)
    # The same herd at 600 us a wakeup (the whole Python loop around accept): critical.
    for row in doc["threads"]:
        row["poll_futile_cycle_ns"] = 850 * 600_000
    doc["totals"]["poll_futile_cycle_ns"] = 4 * 850 * 600_000
    label = next(l for l in judge(doc, capture_file)[1].labels if l.name == SPURIOUS_SELECT)
    assert label.severity == CRITICAL and label.cpu_share == pytest.approx(0.85)


def test_a_herd_that_never_leaves_the_kernel_is_counted_too(capture_file):
    """On one CPU the herd's losers find the listener empty when select() re-checks it, and sleep again
    inside the call: rewaits, not futile wakeups; the same herd, priced by the slices they ran."""
    workers = [herd_worker(10 + i, futile=0, cycle_ns=0, oncpu_ns=0.6e9) for i in range(4)]
    for row in workers:
        row.update(poll_rewaits=2_000, poll_rewait_ns=2_000 * 15_000)
    doc = schema5(captures.capture(workers, requests=N), listeners=[{"port": 8000, "accept_calls": 20_000,
                                                                     "accept_ok": N, "accept_eagain": N}],
                  pids={10 + i: 10 + i for i in range(4)})
    label = next(l for l in judge(doc, capture_file)[1].labels if l.name == SPURIOUS_SELECT)
    assert label.cpu_share == pytest.approx(8_000 * 15_000 / 2.4e9) and label.severity == WARNING
    assert "thundering herd on port 8000" in label.summary
    assert "8,000 wakeups found nothing at 15.0 µs each (8,000 were put back to sleep inside the poll call" \
        in label.summary
    assert label.evidence["woken_per_connection"] == pytest.approx(1.8)


def test_one_worker_accepting_until_eagain_is_no_herd(capture_file):
    """gunicorn -w 1: it accepts until EAGAIN after each request (one EAGAIN per request), but every
    wakeup finds its connection: EAGAIN accepts alone are not a herd."""
    worker = herd_worker(10, futile=0, cycle_ns=0, oncpu_ns=1.2e9)
    doc = schema5(captures.capture([worker], requests=N // 4),
                  listeners=[{"port": 8000, "accept_calls": N // 2, "accept_ok": N // 4, "accept_eagain": N // 4}])
    _, assessment = judge(doc, capture_file)
    assert assessment.labels == [] and assessment.findings == []


def test_too_few_futile_wakeups_are_not_judged(capture_file):
    workers = [herd_worker(10 + i, futile=(MIN_HERD_WAKEUPS - 1) // 4, cycle_ns=600_000, oncpu_ns=0.6e9)
               for i in range(4)]
    doc = schema5(captures.capture(workers, requests=N), pids={10 + i: 10 + i for i in range(4)})
    assert SPURIOUS_SELECT not in judge(doc, capture_file)[1].names()


def busy_poller(nowait_share: float = 1.0, sleeps: int = 0) -> dict:
    """HAProxy with busy-polling: epoll_wait(0) back to back, 99% empty, never blocking."""
    calls = 2_000_000
    return captures.thread(7, "haproxy", poll_calls=calls, poll_nowait=int(nowait_share * calls),
                           poll_zero=int(0.99 * calls), poll_zero_nowait=int(0.99 * nowait_share * calls),
                           poll_zero_nowait_ns=int(0.99 * calls) * 200, poll_events=N, read_calls=N,
                           write_calls=N, oncpu_ns=9.9e9, cs_voluntary=sleeps, cs_involuntary=5_000)


def test_busy_polling_is_a_finding_not_spurious_select(capture_file):
    doc = schema5(captures.capture([busy_poller()], requests=N))
    analysis, assessment = judge(doc, capture_file)
    assert assessment.labels == []
    finding = next(f for f in assessment.findings if f.name == BUSY_POLLING)
    assert finding.cpu_share == pytest.approx(0.99 * 2_000_000 * 200 / 9.9e9)
    assert "never blocks: 200,000 zero-timeout polls a second, 99% of them empty" in finding.summary
    assert "a trade of CPU for wake-up latency" in finding.summary
    assert "severity" not in finding.to_dict()


def test_a_loop_that_blocks_is_not_busy_polling(capture_file):
    """libuv: zero-timeout checks while callbacks are pending, then a blocking wait: it sleeps."""
    doc = schema5(captures.capture([busy_poller(sleeps=100_000)], requests=N))
    analysis, assessment = judge(doc, capture_file)
    assert list(busy_pollers(analysis.threads)) == []
    assert BUSY_POLLING not in assessment.finding_names()


def test_empty_wakeups_are_priced_by_their_whole_cycle(capture_file):
    """Blocking polls that woke with nothing: 20,000 at 5 us inside the call, 40 us with the loop around
    them (schema 5). The cycle is the cost; the call alone is an eighth of it."""
    loop = captures.thread(400, "loop", poll_calls=50_000, poll_zero=20_000, poll_zero_wait_ns=20_000 * 5_000,
                           poll_zero_cycle_ns=20_000 * 40_000, poll_events=N, read_calls=N, write_calls=N,
                           socket_switches=N, oncpu_ns=4e9, cs_voluntary=50_000)
    doc = captures.capture([loop], requests=N)
    old = next(l for l in judge(doc, capture_file)[1].labels if l.name == SPURIOUS_SELECT)
    new = next(l for l in judge(schema5(doc), capture_file)[1].labels if l.name == SPURIOUS_SELECT)
    assert old.cpu_share == pytest.approx(0.1 / 4) and new.cpu_share == pytest.approx(0.8 / 4)
    assert new.severity == CRITICAL and "40.0 µs a wakeup with the loop around it" in new.summary


def pool_threads(handoff_ns: int, oncpu_ns: float) -> list:
    """A database's thread pool at one client: the connection thread hands each query to a pool thread
    and waits for the answer: 1 handoff per query each way... of which only one is a wakeup the pool
    thread receives."""
    conn = captures.thread(500, "conn", poll_calls=N, poll_events=N, read_calls=N, write_calls=N,
                           handoff_oncpu_ns=handoff_ns, oncpu_ns=oncpu_ns)
    pool = captures.thread(501, "pool", futex_waits=N, handoff_oncpu_ns=handoff_ns, oncpu_ns=oncpu_ns)
    return [conn, pool]


def test_handoffs_are_labelled_by_their_cost_not_their_count(capture_file):
    """One handoff per query (under the old 1.5 count gate) with 15% of the CPU in the hand-off calls."""
    doc = captures.capture(pool_threads(handoff_ns=int(0.15e9), oncpu_ns=1e9), wakeups=[(500, 501, N)],
                           requests=N, request_ns=1_000_000)
    label = next(l for l in judge(doc, capture_file)[1].labels if l.name == HANDOFF_OVERHEAD)
    assert label.evidence["handoffs_per_request"] == 1.0
    assert label.cpu_share == pytest.approx(0.15) and label.severity == WARNING
    assert label.evidence["mechanism"] == "dispatch"
    # The same handoffs at 0.5% of the CPU and no wait: not worth naming.
    doc = captures.capture(pool_threads(handoff_ns=int(0.005e9), oncpu_ns=1e9), wakeups=[(500, 501, N)],
                           requests=N, request_ns=1_000_000)
    assert HANDOFF_OVERHEAD not in judge(doc, capture_file)[1].names()


def test_pool_threads_passing_the_selector_role_are_leader_follower(capture_file):
    """A Java pool whose threads each read and answer their request (cross-thread share 0) but wake each
    other to take the selector: not "serve the request in the thread that read it"."""
    pool = [captures.thread(600 + i, "pool", poll_calls=N // 2, poll_events=N, read_calls=N // 4, write_calls=N // 4,
                            requests_read=N // 4, responses_written=N // 4, handoff_oncpu_ns=int(0.05e9),
                            oncpu_ns=0.5e9) for i in range(4)]
    ring = [(600 + i, 600 + (i + 1) % 4, int(2.6 * N) // 4) for i in range(4)]
    doc = captures.capture(pool, wakeups=ring, requests=N)
    analysis, assessment = judge(doc, capture_file)
    label = next(l for l in assessment.labels if l.name == HANDOFF_OVERHEAD)
    assert label.evidence["mechanism"] == LEADER_FOLLOWER
    assert "pass the selector role among themselves" in label.summary
    assert all("thread that read them" not in fix for fix in label.fixes)
    assert any("own selector" in fix for fix in label.fixes)


def round_trip_pool(**extra) -> list:
    """A blocking connector's pool: each thread takes a kept-alive connection from the queue, waits in poll()
    on that one socket (a timed read), reads and answers the request, and queues the connection back, waking
    the next pool thread: one ready descriptor per poll, no accept."""
    return [captures.thread(610 + i, "exec", poll_calls=N // 4, poll_events=N // 4, read_calls=N // 4,
                            write_calls=N // 4, requests_read=N // 4, responses_written=N // 4,
                            handoff_oncpu_ns=int(0.05e9), oncpu_ns=0.5e9, **extra) for i in range(4)]


def test_a_connection_queued_back_to_the_pool_after_each_request_is_a_round_trip_not_leader_follower(capture_file):
    """Issue 35: threads that each wait on their own socket pass connections, not a selector."""
    ring = [(610 + i, 610 + (i + 1) % 4, N // 4) for i in range(4)]
    doc = captures.capture(round_trip_pool(), wakeups=ring, requests=N)
    analysis, assessment = judge(doc, capture_file)
    label = next(l for l in assessment.labels if l.name == HANDOFF_OVERHEAD)
    assert label.evidence["mechanism"] == POOL_ROUND_TRIP
    assert "the connection goes back to the pool after each request" in label.summary
    assert "selector role" not in label.summary and "leader/follower" not in label.summary
    assert any("size the pool" in fix for fix in label.fixes) and any("connector" in fix for fix in label.fixes)
    # The same pool accepting its connections itself (the listener in the set it polls): leader/follower.
    doc = schema5(captures.capture(round_trip_pool(accept_calls=N // 40), wakeups=ring, requests=N))
    measure = measure_handoff(*(lambda a: (a, role_edges(a)))(analyze(load(capture_file(doc)))))
    assert measure.mechanism == LEADER_FOLLOWER


def test_an_accept_lock_between_processes_is_not_a_handoff(capture_file):
    """Pre-forked processes taking turns on an accept mutex wake each other by futex: not a request
    handed over."""
    children = [captures.thread(700 + i, "apache2", poll_calls=N // 4, poll_events=N // 4, read_calls=N // 4,
                                write_calls=N // 4, requests_read=N // 4, responses_written=N // 4,
                                handoff_oncpu_ns=int(0.1e9), oncpu_ns=1e9) for i in range(4)]
    turns = [(700 + i, 700 + (i + 1) % 4, N // 4) for i in range(4)]
    doc = schema5(captures.capture(children, wakeups=turns, requests=N), pids={700 + i: 700 + i for i in range(4)})
    analysis, assessment = judge(doc, capture_file)
    assert HANDOFF_OVERHEAD not in assessment.names()
    # The same wakeups inside one process are handoffs.
    doc = captures.capture(children, wakeups=turns, requests=N)
    assert HANDOFF_OVERHEAD in judge(doc, capture_file)[1].names()


def test_a_connection_handed_over_once_is_per_connection(capture_file):
    """An acceptor handing each new connection to a loop: one handoff per connection, 10 requests each."""
    acceptor = captures.thread(800, "acceptor", poll_calls=N // 10, poll_events=N // 10, accept_calls=N // 10,
                               handoff_oncpu_ns=int(0.02e9), oncpu_ns=0.1e9)
    loop = captures.thread(801, "loop", poll_calls=N, poll_events=2 * N, read_calls=N, write_calls=N,
                           socket_switches=N, handoff_oncpu_ns=int(0.02e9), oncpu_ns=0.4e9)
    doc = schema5(captures.capture([acceptor, loop], wakeups=[(800, 801, N // 10)], requests=N, request_ns=100_000))
    analysis = analyze(load(capture_file(doc)))
    measure = measure_handoff(analysis, role_edges(analysis))
    assert measure.mechanism == PER_CONNECTION
    label = next(l for l in assess(analysis).labels if l.name == HANDOFF_OVERHEAD)
    assert "each new connection is handed to another thread, not each request" in label.summary
    assert any("keep connections alive" in fix for fix in label.fixes)


def test_shared_memory_handoffs_cost_the_busy_waiting_threads_cpu(capture_file):
    main = captures.thread(1, "redis-server", poll_calls=N, poll_events=N, read_calls=N // 3, write_calls=N // 3,
                           socket_switches=N, poll_oncpu_ns=int(1e9), oncpu_ns=9.5e9)
    io = captures.thread(2, "io_thd_1", read_calls=2 * N // 3, write_calls=2 * N // 3, socket_switches=N,
                         oncpu_ns=9.7e9)
    analysis = analyze(load(capture_file(captures.capture([main, io], requests=N, cross_thread=6_800))))
    measure = measure_handoff(analysis, role_edges(analysis))
    assert measure.mechanism == SHARED_MEMORY
    assert measure.cpu_share == pytest.approx((8.5 + 9.7) / (9.5 + 9.7))  # never 0: a ranking by share sees it


def spin_with_header(schema: int) -> dict:
    """A library that writes an 83-byte header on its own, then the body in 4 KB chunks, retrying each
    EAGAIN up to 16 times: the header is each response's first write (11 us for 83 bytes: 138 ns a
    byte); its complete 4 KB body writes copy at 0.25 ns a byte."""
    n = 5_000
    loop = captures.thread(900, "srv", poll_calls=n, poll_events=n, read_calls=n, write_calls=40 * n,
                           write_eagain=10 * n, write_spin_retries=10 * n, write_spin_eagain=10 * n,
                           write_spin_ns=int(10 * n * 2_000), write_spin_bytes=2 * n * 4096,
                           write_first_ns=n * 11_000, write_first_bytes=n * 83,
                           write_copy_ns=int(28 * n * 4096 * 0.25), write_copy_bytes=28 * n * 4096,
                           socket_switches=n, oncpu_ns=1e9)
    doc = captures.capture([loop], requests=n, writes_per_request=40, eagain_per_request=10,
                           spin_per_request=10, futile_per_request=10, response_bytes=120_000)
    return schema5(doc) if schema >= 5 else doc


def test_a_header_written_on_its_own_does_not_erase_the_spin(capture_file):
    old = judge(spin_with_header(2), capture_file)[1]
    new = next(l for l in judge(spin_with_header(5), capture_file)[1].labels if l.name == WRITE_SPIN)
    # Priced at the header's rate, the retries' 40 MB cost 5.5 s: more than their 0.1 s of cycles, nothing is left.
    assert WRITE_SPIN not in old.names()
    assert new.evidence["copy_rate_from"] == "bulk writes"
    assert new.cpu_share == pytest.approx((0.1e9 - 2 * 5_000 * 4096 * 0.25) / 1e9)
    # 9% of a process that keeps 0.1 of a CPU busy: its fix saves 0.009 of one CPU, under SAVING_MIN_CPUS
    assert (new.saving, new.saving_of, new.saving_cpus) == (0.0898, "CPU", 0.009) and new.severity == INFO


def waiting_server(window: int, sndbuf: int = 16_384) -> dict:
    """nginx with a 16 KB send buffer: 5 waits for writability per 100 KB response; at each of its 25,000
    stalls the probes read the send buffer, the bytes queued, the peer's window and the RTT."""
    n, stalls = 5_000, 25_000
    loop = captures.thread(950, "nginx", poll_calls=6 * n, poll_events=6 * n, read_calls=n, write_calls=12 * n,
                           write_eagain=stalls, write_waited=stalls, socket_switches=n, oncpu_ns=1e9,
                           stalls_sampled=stalls, stall_sndbuf_bytes=stalls * sndbuf,
                           stall_queued_bytes=stalls * sndbuf, stall_peer_window_bytes=stalls * window,
                           stall_srtt_us=stalls * 50)
    doc = captures.capture([loop], requests=n, writes_per_request=12, eagain_per_request=5, waits_per_request=5,
                           response_bytes=100_000, request_ns=2_000_000)
    return schema5(doc)


def test_a_stall_says_whether_the_clients_or_the_send_buffer_bound_it(capture_file):
    slow = next(f for f in judge(waiting_server(window=4_096), capture_file)[1].findings if f.name == "write-wait")
    assert "the peers advertised a 4.0 KiB window, smaller than the 16 KiB send buffer" in slow.summary
    assert "the clients read slowly" in slow.summary and slow.evidence["slow_readers"] is True
    assert "not the send buffer" in slow.advice[0]
    full = next(f for f in judge(waiting_server(window=65_536), capture_file)[1].findings if f.name == "write-wait")
    assert "the 16 KiB send buffer was the bound" in full.summary and "raising SO_SNDBUF" in full.summary
    assert full.evidence["stall_peer_window_bytes"] == 65_536 and full.evidence["stall_rtt_ms"] == 0.05


def loop_woken_now_and_then(wakeups: int, wait_ns: int) -> dict:
    """A loop serving N requests that a helper thread wakes WAKEUPS times, each wake-to-run wait WAIT_NS: the
    loop's waits are 6% of the request time when wakeups * wait_ns is N * 12 us (requests take 200 us)."""
    loop = captures.thread(700, "loop", poll_calls=N, poll_events=N, read_calls=N, write_calls=N,
                           futex_waits=wakeups, wakeup_wait_ns=wakeups * wait_ns, oncpu_ns=1e9)
    helper = captures.thread(701, "helper", futex_waits=wakeups, futex_wakes=wakeups, oncpu_ns=1e7)
    return captures.capture([loop, helper], wakeups=[(701, 700, wakeups)], requests=N, request_ns=200_000)


def test_waits_after_a_runtimes_own_wakeups_are_not_graded_as_a_hand_off(capture_file):
    """The waits for a woken thread grade the hand-off only where requests are handed over (0.1 wakeups a request
    or more, as its stack samples' part): a runtime's own thread waking the loop now and then (V8's platform
    threads, 0.02-0.06 a request) is not a request handed over, however long the loop then waits."""
    rare = loop_woken_now_and_then(wakeups=N // 20, wait_ns=240_000)  # 0.05 a request, 12 us a request: 6%
    assert HANDOFF_OVERHEAD not in judge(rare, capture_file)[1].names()
    # the same waits from hand-overs at 0.2 a request: graded, from the latency share (a warning at 6%)
    handed = loop_woken_now_and_then(wakeups=N // 5, wait_ns=60_000)
    label = next(l for l in judge(handed, capture_file)[1].labels if l.name == HANDOFF_OVERHEAD)
    assert label.severity == WARNING and label.cost_share == pytest.approx(0.06)


def test_a_pool_that_shares_its_work_thinly_is_a_pool_not_idle_threads(capture_file):
    """tokio's blocking pool at 16 clients: 100 threads, each woken by the loop for a few tasks and waking it
    back; each did less than 1% of the busiest thread's calls, but together they took a wakeup per request:
    workers, whose waits and window count, not 100 idle threads. A runtime's helper threads woken now and then
    (0.04 a request between them) stay idle."""
    def doc(pool_wakeups_per_request: float) -> dict:
        per_thread = int(pool_wakeups_per_request * N / 100)
        loop = captures.thread(800, "loop", poll_calls=20 * N, poll_events=20 * N, read_calls=20 * N, write_calls=20 * N,
                               futex_waits=N, futex_wakes=N, oncpu_ns=1e9)
        pool = [captures.thread(801 + i, "tokio-runtime-w", futex_waits=per_thread, futex_wakes=per_thread, oncpu_ns=1e7)
                for i in range(100)]
        edges = [(800, 801 + i, per_thread) for i in range(100)] + [(801 + i, 800, per_thread) for i in range(100)]
        return captures.capture([loop, *pool], wakeups=edges, requests=N)

    analysis = judge(doc(1.0), capture_file)[0]
    assert [analysis.threads[801 + i]["role"] for i in range(100)] == ["worker"] * 100
    analysis = judge(doc(0.04), capture_file)[0]
    assert [analysis.threads[801 + i]["role"] for i in range(100)] == ["idle"] * 100
