"""refserver --split-writes (a response's header and body in two writes) with and without --nagle (no
TCP_NODELAY), one keep-alive client: with Nagle on each body waits for the client's delayed ACK of its header,
and the capture gets the nagle-stall finding, its call site the server's write (--stacks), its saving within a
factor of 2 of what TCP_NODELAY saves of the client's request time (the load generator's requests/s, side by
side); with TCP_NODELAY, or Nagle on and one write a response, nothing is held and nothing is said."""

from __future__ import annotations

import pytest

from machine_lock import load_lock
from refserver_harness import record_under_load
from spinscope.analysis.capture import load
from spinscope.analysis.labels import assess
from spinscope.analysis.patterns import NAGLE_STALL
from spinscope.analysis.verdicts import MIN_REQUESTS
from spinscope.analysis.metrics import analyze

LOAD = ["--path", "/bytes/100", "--concurrency", 1]
# side: (server args, load args besides LOAD, seconds recorded): held responses come at most 25 a second (12 on
# a busy machine), and the finding is judged from 50 requests (MIN_REQUESTS). The one-write side's client thinks
# 40 ms between requests: the same gaps as the held side's, and nothing held.
SIDES = {"nagle": (["--split-writes", "--nagle"], [], 6.0), "nodelay": (["--split-writes"], [], 2.0),
         "one-write": (["--nagle"], ["--think-ms", 40], 6.0)}
SAVING_FACTOR = 2.0


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """side -> (capture, load result, assessment), the three sides recorded back to back."""
    runs = {}
    with load_lock():
        for side, (server_args, load_args, seconds) in SIDES.items():
            output = tmp_path_factory.mktemp(side) / f"{side}.json"
            capture, result = record_under_load("event-loop", output, [*LOAD, *load_args], server_args,
                                                duration=seconds, collector_args=("--stacks", "99"))
            runs[side] = (capture, result, assess(analyze(load(output))))
    return runs


def test_split_writes_with_nagle_are_held_and_named(recorded):
    capture, result, assessment = recorded["nagle"]
    req = capture["requests"]
    # Each response's body is held once (the connection's first quick ACKs came before the capture, in the
    # warm-up; a body is not held when the loop was switched out for the client's whole delayed-ACK time between
    # the two writes, on a busy machine), and each hold is ended by the client's segment: no later write of the
    # response came first. The request open at the end may still wait for its ACK.
    assert result["errors"] == 0 and req["count"] >= 50
    assert 0.8 * req["count"] <= req["nagle_holds"] <= req["count"], req
    # Held writes and timed holds: equal but for the request open at the end, and (as the fixture's exact test
    # found, 49 of 50 once) a hold whose end was not timed: 136 held, 134 holds in a clean-clone run (session
    # 11). At most 2% apart; the cause of the untimed end is not yet found.
    held = capture["totals"]["nagle_held"]
    assert 0 <= held - req["nagle_holds"] <= 1 + 0.02 * held, (held, req["nagle_holds"])
    found = {f.name: f for f in assessment.findings}[NAGLE_STALL]
    assert found.evidence["responses_held"] == req["nagle_holds"]
    assert found.call_sites and found.call_sites[0]["function"] == "conn_write", found.call_sites
    assert any(line.startswith("where: conn_write") for line in found.details), found.details


def test_its_saving_is_what_nodelay_saves(recorded):
    """The finding's saving (a share of the time the client waited) against 1 - the request time with
    TCP_NODELAY / without, from the load generator's requests per second (one client: the request time is
    1 / the rate)."""
    bad, good = recorded["nagle"], recorded["nodelay"]
    found = {f.name: f for f in bad[2].findings}[NAGLE_STALL]
    independent = 1 - bad[1]["throughput"] / good[1]["throughput"]
    context = f"saving {found.saving}, TCP_NODELAY saves {independent:.4f} ({bad[1]['throughput']} against " \
              f"{good[1]['throughput']} requests/s)"
    assert independent > 0.5, context  # the pair shows the bug: 40 ms a request against microseconds
    assert 1 / SAVING_FACTOR <= found.saving / independent <= SAVING_FACTOR, context


@pytest.mark.parametrize("side", ["nodelay", "one-write"])
def test_nothing_held_with_nodelay_or_one_write(recorded, side):
    """TCP_NODELAY with two writes a response; Nagle on with one write a response and a client that thinks
    40 ms between requests (gaps like the held side's: the finding rests on held bytes, not on gaps)."""
    capture, result, assessment = recorded[side]
    assert result["errors"] == 0 and capture["requests"]["count"] >= MIN_REQUESTS  # enough to be judged
    assert capture["totals"]["nagle_held"] == capture["requests"]["nagle_holds"] == 0
    assert NAGLE_STALL not in assessment.finding_names()
