"""Wakeups whose ready descriptors were handed over (capture schema 6, issue 35) against a fixture that knows
what it did: a poller that deregisters each ready socket and queues it to a worker, the same with pipes, and
a loop that only re-arms its ready socket."""

from __future__ import annotations

import pytest

from collector_harness import run_fixture

CALLS = 200  # tests/fixtures/dispatch.c
CLOCK_SLACK = 1.3  # test_wakeup_cycles.py: the cycles against the thread's own CPU clock


@pytest.fixture(scope="module")
def dispatch(tmp_path_factory):
    return run_fixture("dispatch", tmp_path=tmp_path_factory.mktemp("dispatch"))


def test_a_poller_that_hands_its_ready_sockets_over_makes_dispatch_wakeups_exact(dispatch):
    truth, got = dispatch.truth["dispatcher"], dispatch.thread("dispatcher")
    assert (truth["poll_calls"], truth["poll_events"], truth["epoll_ctl"]) == (CALLS + 1, CALLS, CALLS)
    assert (got["poll_calls"], got["poll_events"], got["poll_zero"]) == (CALLS + 1, CALLS, 1)
    # Every wakeup but none found its socket handed over: a dispatch, not a futile wakeup; the poller read nothing.
    assert (got["poll_dispatch"], got["poll_futile"], got["poll_futile_cycle_ns"]) == (CALLS, 0, 0)
    # It read nothing; its writes put the bytes in the sockets before its first poll (no cycle open then).
    assert (got["read_calls"], got["write_calls"]) == (0, CALLS)
    assert 0 < got["poll_dispatch_cycle_ns"] <= CLOCK_SLACK * truth["loop_cpu_ns"]
    # The worker read every socket the poller handed it, once.
    worker = dispatch.thread("worker")
    assert worker["read_calls"] == dispatch.truth["worker"]["reads"] == CALLS
    assert worker["read_bytes"] == CALLS and worker["read_eagain"] == 0


def test_a_pipe_deregistered_is_no_dispatch(dispatch):
    truth, got = dispatch.truth["pipedel"], dispatch.thread("pipedel")
    assert (got["poll_calls"], got["poll_events"]) == (truth["poll_calls"], truth["poll_events"]) == (CALLS + 1, CALLS)
    assert (got["poll_futile"], got["poll_dispatch"], got["poll_dispatch_cycle_ns"]) == (CALLS, 0, 0)


def test_a_loop_that_only_rearms_its_ready_socket_makes_dispatch_wakeups(dispatch):
    truth, got = dispatch.truth["modloop"], dispatch.thread("modloop")
    assert (got["poll_calls"], got["poll_events"]) == (truth["poll_calls"], truth["poll_events"]) == (CALLS + 1, CALLS)
    assert (got["poll_dispatch"], got["poll_futile"]) == (CALLS, 0)
    assert 0 < got["poll_dispatch_cycle_ns"] <= CLOCK_SLACK * truth["loop_cpu_ns"]


def test_epoll_ctl_is_not_timed(dispatch):
    """epoll_ctl is counted at sys_exit but never timed: with every call timed (the harness's default),
    calls_timed holds the polls and the writes that put a byte in each pipe (modloop: in its socket), not
    the 2 x CALLS (pipedel) and CALLS + 1 (modloop) epoll_ctl calls."""
    assert dispatch.thread("pipedel")["calls_timed"] == (CALLS + 1) + CALLS
    assert dispatch.thread("modloop")["calls_timed"] == (CALLS + 1) + 1
