"""Responses held by Nagle's algorithm (bpf/nagle.bpf.h, the nagle-stall finding): counted exactly on the
reqserver fixture, whose client delays its ACKs (TCP_QUICKACK off before each request), and nothing where
nothing is held: the same server with TCP_NODELAY, or writing each response once."""

from __future__ import annotations

from spinscope.analysis.capture import from_document
from spinscope.analysis.labels import assess
from spinscope.analysis.patterns import NAGLE_STALL
from spinscope.analysis.metrics import analyze

from collector_harness import run_fixture


def held(run) -> tuple:
    """(writes that left bytes held, holds ended by the client's segment, requests) of a run."""
    req = run.capture["requests"]
    return run.thread("server")["nagle_held"], req["nagle_holds"], req["count"]


def truth(run) -> tuple:
    """The same, as the fixture saw them (the bytes its socket kept unsent after each write)."""
    server = run.truth["server"]
    return server["held_writes"], server["holds_timed"], server["requests"]


# A later write is held unless the server thread was switched out for the client's whole delayed-ACK time
# between two writes of a response (a busy machine): at least this share of them are, or the fixture's design
# did not hold.
MOST = 0.8


def findings(run) -> dict:
    return {f.name: f for f in assess(analyze(from_document(run.capture, "fixture"))).findings}


def test_each_split_response_is_held_once(tmp_path):
    """50 requests, each answered by 2 writes on a socket with Nagle on: each second write is held until the
    client's delayed ACK of the first, 50 holds (as the fixture saw them: a few fewer on a busy machine), each
    ended by that ACK; the finding says so."""
    run = run_fixture("reqserver", "50", "2", "nagle", tmp_path=tmp_path)
    writes, holds, requests = held(run)
    # Held writes and requests exactly as the fixture saw them; holds ended by an ACK one fewer at most: a
    # clean-clone CI run counted 49 holds of 50 held writes (one hold's end not timed). The likely cause, a
    # fact of this machine: no tracing program runs while a thread of the sandbox's init (PID 1) is current
    # (in 8 s, 0 of ~16,000 softirq, timer, interrupt and wakeup events had it current, though its threads
    # ran; and every switch out of it is unseen: switch_ins_unseen), so the client's segment processed in a
    # softirq on top of it fires no tcp_probe program, and that hold never ends.
    true_writes, true_holds, true_requests = truth(run)
    assert (writes, requests) == (true_writes, true_requests) and true_holds - 1 <= holds <= true_holds, truth(run)
    assert holds >= MOST * 50
    req = run.capture["requests"]
    assert req["nagle_hold_ns"] > 0 and sum(req["hist"]["nagle_hold_ns"][1:]) == holds
    [size_class] = req["by_size"]
    assert size_class["nagle_holds"] == holds
    found = findings(run)[NAGLE_STALL]
    assert (found.evidence["responses_held"], found.evidence["held_writes"]) == (holds, writes)
    assert found.saving_of == "request time" and found.fixes


def test_a_write_while_held_starts_the_hold_again(tmp_path):
    """3 writes a response: the third comes while the second's bytes are held (held again, the second's hold
    not timed: the server was writing); one hold a response is ended by the ACK."""
    run = run_fixture("reqserver", "10", "3", "nagle", tmp_path=tmp_path)
    writes, holds, requests = held(run)
    true_writes, true_holds, true_requests = truth(run)
    # One hold fewer at most, as in test_each_split_response_is_held_once (a clean-clone run beside a load of
    # 10 failed here once): a tcp_probe that ran no program (that test's note), or, not shown, the client's
    # segment processed between the write's Nagle test and the hold's start.
    assert (writes, requests) == (true_writes, true_requests) and true_holds - 1 <= holds <= true_holds, truth(run)
    assert writes >= MOST * 20 and holds >= MOST * 10


def test_nothing_is_held_with_nodelay_or_one_write(tmp_path):
    """The same client delaying its ACKs: a server with TCP_NODELAY writing twice, and one with Nagle on writing
    once (a response's first write is never behind its own segment), hold nothing."""
    for args in (("60", "2", "delack"), ("60", "1", "nagle")):
        run = run_fixture("reqserver", *args, tmp_path=tmp_path)
        assert held(run) == truth(run) == (0, 0, 60), args
        assert NAGLE_STALL not in findings(run), args
