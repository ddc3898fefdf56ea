"""The evidence rule (analysis/claims.py): no verdict's summary, fixes or advice claims a mechanism at a
rate its own evidence does not show. Run over every verdict of every bundled capture, over synthetic
captures of each mechanism at a rate that supports its words and at one that does not, and checked to
fail on a sentence that claims too much. The real-server captures are held to it in tests/realservers."""

from __future__ import annotations

import pytest

import captures
from paths import CAPTURES
from spinscope.analysis.capture import load
from spinscope.analysis.claims import unsupported
from spinscope.analysis.labels import assess
from spinscope.analysis.metrics import analyze
from spinscope.analysis.patterns import BUSY_POLLING, HANDOFF_OVERHEAD, SPURIOUS_SELECT
from spinscope.analysis.patterns.handoff.measure import DISPATCH, LEADER_FOLLOWER, PER_CONNECTION, SHARED_MEMORY
from spinscope.analysis.verdicts import Label
from test_analyzer_verdicts import N, busy_poller, herd_worker, pool_threads, schema5

BUNDLED = sorted(CAPTURES.rglob("*.json"))


def verdicts(path) -> list:
    assessment = assess(analyze(load(path)))
    return [*assessment.labels, *assessment.findings]


def wrong_words(path) -> list:
    return [line for verdict in verdicts(path) for line in unsupported(verdict)]


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: str(p.relative_to(CAPTURES)))
def test_every_bundled_verdict_holds_to_its_evidence(path):
    assert wrong_words(path) == []


def dispatch(per_request: float) -> dict:
    """A connection thread handing queries to a pool thread, `per_request` handoffs per query, 15% of the
    CPU in the hand-off calls."""
    return captures.capture(pool_threads(handoff_ns=int(0.15e9), oncpu_ns=1e9), wakeups=[(500, 501, int(per_request * N))],
                            requests=N, request_ns=1_000_000)


def leader_follower(per_request: float) -> dict:
    """4 pool threads each answering what it read, passing the selector round a ring."""
    pool = [captures.thread(600 + i, "pool", poll_calls=N // 2, poll_events=N, read_calls=N // 4, write_calls=N // 4,
                            requests_read=N // 4, responses_written=N // 4, handoff_oncpu_ns=int(0.05e9),
                            oncpu_ns=0.5e9) for i in range(4)]
    return captures.capture(pool, wakeups=[(600 + i, 600 + (i + 1) % 4, int(per_request * N) // 4) for i in range(4)],
                            requests=N)


def per_connection(requests_per_connection: int) -> dict:
    acceptor = captures.thread(800, "acceptor", poll_calls=N // 10, poll_events=N // 10,
                               accept_calls=N // requests_per_connection, handoff_oncpu_ns=int(0.02e9), oncpu_ns=0.1e9)
    loop = captures.thread(801, "loop", poll_calls=N, poll_events=2 * N, read_calls=N, write_calls=N,
                           socket_switches=N, handoff_oncpu_ns=int(0.02e9), oncpu_ns=0.4e9)
    return schema5(captures.capture([acceptor, loop], wakeups=[(800, 801, N // 10)], requests=N, request_ns=100_000))


def shared_memory() -> dict:
    main = captures.thread(1, "redis-server", poll_calls=N, poll_events=N, read_calls=N // 3, write_calls=N // 3,
                           socket_switches=N, poll_oncpu_ns=int(1e9), oncpu_ns=9.5e9)
    io = captures.thread(2, "io_thd_1", read_calls=2 * N // 3, write_calls=2 * N // 3, socket_switches=N, oncpu_ns=9.7e9)
    return captures.capture([main, io], requests=N, cross_thread=6_800)


def herd() -> dict:
    workers = [herd_worker(10 + i, futile=850, cycle_ns=60_000, oncpu_ns=0.6e9) for i in range(4)]
    return schema5(captures.capture(workers, requests=N),
                   listeners=[{"port": 8000, "accept_calls": 23_400, "accept_ok": N, "accept_eagain": 13_400,
                               "processes": 4}], pids={10 + i: 10 + i for i in range(4)})


SYNTHETIC = {
    "dispatch-round-trip": (lambda: dispatch(2.0), HANDOFF_OVERHEAD),
    "dispatch-one-way": (lambda: dispatch(1.0), HANDOFF_OVERHEAD),
    "dispatch-rare": (lambda: dispatch(0.1), HANDOFF_OVERHEAD),
    "leader-follower": (lambda: leader_follower(2.6), HANDOFF_OVERHEAD),
    "leader-follower-rare": (lambda: leader_follower(0.2), HANDOFF_OVERHEAD),
    "per-connection": (lambda: per_connection(10), HANDOFF_OVERHEAD),
    "shared-memory": (shared_memory, HANDOFF_OVERHEAD),
    "herd": (herd, SPURIOUS_SELECT),
    "busy-polling": (lambda: schema5(captures.capture([busy_poller()], requests=N)), BUSY_POLLING),
}


@pytest.mark.parametrize("name", list(SYNTHETIC))
def test_every_mechanisms_words_hold_to_its_evidence(name, capture_file):
    build, verdict = SYNTHETIC[name]
    path = capture_file(build())
    assert verdict in {v.name for v in verdicts(path)}, name  # the mechanism is there to be worded
    assert wrong_words(path) == []


@pytest.mark.parametrize("build,mechanism", [(lambda: leader_follower(0.2), LEADER_FOLLOWER),
                                             (lambda: dispatch(0.1), DISPATCH)])
def test_a_rare_handoff_says_what_was_measured_not_a_mechanism(build, mechanism, capture_file):
    label = next(v for v in verdicts(capture_file(build())) if v.name == HANDOFF_OVERHEAD)
    assert label.evidence["mechanism"] == mechanism
    text = " ".join([label.summary, *label.fixes])
    assert "selector" not in text and "each request" not in text and "every request" not in text, text
    rate = label.evidence["handoffs_per_request"]
    assert f"{rate:.2f} wakeups between threads per request (one in about {1 / rate:.0f} requests woke another " \
           "thread; a hand-over to a thread already awake wakes none)" in label.summary
    assert label.fixes[0].startswith("few requests woke another thread: the wait is for a CPU")


def test_the_mechanisms_words_are_kept_at_their_rate(capture_file):
    words = {2.0: "each request is handed to another thread and back", 1.0: "requests are handed to other threads"}
    for rate, phrase in words.items():
        label = next(v for v in verdicts(capture_file(dispatch(rate))) if v.name == HANDOFF_OVERHEAD)
        assert f"handoff overhead: {phrase}: {rate:.1f} handoffs" in label.summary
    label = next(v for v in verdicts(capture_file(leader_follower(2.6))) if v.name == HANDOFF_OVERHEAD)
    assert "pass the selector role among themselves" in label.summary
    label = next(v for v in verdicts(capture_file(per_connection(10))) if v.name == HANDOFF_OVERHEAD)
    assert label.evidence["mechanism"] == PER_CONNECTION and label.evidence["handoffs_per_connection"] == 1.0
    label = next(v for v in verdicts(capture_file(shared_memory())) if v.name == HANDOFF_OVERHEAD)
    assert label.evidence["mechanism"] == SHARED_MEMORY


def test_the_rule_finds_a_sentence_that_claims_too_much():
    label = Label(HANDOFF_OVERHEAD, "warning", "handoff overhead: each request is answered by the thread that read "
                  "it, but the pool threads pass the selector role among themselves", {"handoffs_per_request": 0.016},
                  0.02, ["the pool threads pass the selector role to each other for every request: ..."])
    assert len(unsupported(label)) == 4  # "each request is", "selector role" in the summary; both in the fix
    label.evidence["handoffs_per_request"] = 1.0
    assert unsupported(label) == []
