"""A label's measured share of CPU must agree with an independent measurement of the same cost.

write-spin: the spinning reference loop's measured share (the on-CPU time of its retries of an EAGAIN)
against what waiting costs instead: the same server with --write-policy epollout under the same load
uses less CPU per request, and the difference, as a share of the spinning server's CPU per request, is
what the spin cost. The two must agree within a factor of 1.5.

handoff overhead: the Tomcat-NIO-style reactor's measured share (on-CPU time of the calls that hand a
request over and of those that wait for it) against what the handoffs cost: the single-threaded event
loop under the same light load serves each request with the same epoll machinery and no pool, and the
reactor's extra CPU per request, as a share of its own, is what passing the request around cost.
(Thread-per-connection, which has no epoll at all, is a less fair reference and a noisier one.)
"""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path

import pytest

from spinscope.analysis.capture import load
from spinscope.analysis.labels import assess
from spinscope.analysis.metrics import analyze
from spinscope.analysis.patterns import HANDOFF_OVERHEAD, WRITE_SPIN
from spinscope.analysis.verdicts import CRITICAL
from paths import ROOT

_spec = importlib.util.spec_from_file_location("refserver_helpers", ROOT / "tests" / "refservers" / "refserver_harness.py")
refhelp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(refhelp)

LOAD = ["--path", "/bytes/102400", "--concurrency", 8, "--rcvbuf", 4096]
LIGHT = ["--path", "/bytes/100", "--concurrency", 1]
FACTOR = 1.5
# The handoff share is a lower bound: it times the calls that hand a request over or wait for it, not
# what else passing it around costs (futex wakes that found no waiter, the reactor's extra polls and
# epoll_ctl re-arms, preemptions, cold caches after a migration). How much that leaves out depends on the
# machine's speed: 0.74-0.75 of the independent figure with this VM at 6 k requests/s, 0.53-0.55 at 18 k
# (2026-11-23). It must not claim more than the cost, nor far less.
HANDOFF_LOWER_BOUND = 2.5
ROUNDS = 3  # pairs of runs, alternating; the medians are compared (one 3 s pair moves by 2x here)
# The write-spin share of one 3 s capture moves from 0.26 to 0.80 here while the independent figure stays
# at 0.49-0.65: the cycles of the retries are steady, but the copy rate that prices their bytes, taken from
# the writes that did not spin, moves from 1.1 to 4.1 ns a byte between half-second intervals of one run
# (2026-11-26, 17 runs). One low capture in five: the median of three fell below 1/1.5 of the figure
# about one run in ten. Four pairs and their means: a low capture moves the mean by a quarter of its gap.
SPIN_ROUNDS = 4
# CPU times are clock deltas, and time the hypervisor steals from the VM counts in them: it inflates the
# spinning loop's retry cycles and the waiting loop's CPU alike (at 10-31% steal the independent share
# fell from 0.55 to 0.05-0.5). Only pairs recorded with less steal than this are compared.
MAX_STEAL = 0.08


def record(arch: str, load_args: list, server_args: list, tmp_path: Path):
    out = tmp_path / f"{arch}-{len(list(tmp_path.iterdir()))}.json"
    refhelp.record_under_load(arch, out, load_args, server_args, duration=3.0)
    analysis = analyze(load(out))
    return analysis, {label.name: label for label in assess(analysis).labels}


def cpu_ticks() -> tuple:
    """(steal, total) jiffies of all CPUs, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[7], sum(fields)


def compare(label_name: str, costly: tuple, cheaper: tuple, tmp_path: Path, rounds: int = ROUNDS,
            middle=statistics.median) -> tuple:
    """Record the costly and the cheaper server in alternating pairs until `rounds` pairs ran with less
    than MAX_STEAL hypervisor steal (at most twice as many pairs, else skip: CPU times mean nothing then);
    returns the middle (median, or mean) measured share of the label on the costly one, the middle
    independent share (1 - the cheaper server's CPU per request over the costly one's), and the last two
    label sets."""
    refhelp.ensure_built()
    measured, independent, steals = [], [], []
    for _ in range(2 * rounds):
        steal_before, total_before = cpu_ticks()
        costly_run, costly_labels = record(*costly, tmp_path)
        cheaper_run, cheaper_labels = record(*cheaper, tmp_path)
        steal_after, total_after = cpu_ticks()
        steals.append((steal_after - steal_before) / max(total_after - total_before, 1))
        if steals[-1] >= MAX_STEAL:
            continue
        measured.append(costly_labels[label_name].cpu_share)
        independent.append(1 - cheaper_run.process["cpu_ms_per_request"] / costly_run.process["cpu_ms_per_request"])
        if len(measured) == rounds:
            return middle(measured), middle(independent), costly_labels, cheaper_labels
    pytest.skip(f"the hypervisor stole {', '.join(f'{s:.0%}' for s in steals)} of the CPUs during the pairs "
                f"(fewer than {rounds} under {MAX_STEAL:.0%}): CPU-time comparisons are meaningless now")


def test_write_spin_share_agrees_with_the_cpu_the_epollout_policy_saves(tmp_path):
    spin = ("event-loop", LOAD, ["--sndbuf", "16384", "--write-policy", "spin"])
    waiting = ("event-loop", LOAD, ["--sndbuf", "16384", "--write-policy", "epollout"])
    measured, independent, spin_labels, waiting_labels = compare(WRITE_SPIN, spin, waiting, tmp_path,
                                                                 SPIN_ROUNDS, statistics.fmean)
    assert spin_labels[WRITE_SPIN].severity == CRITICAL
    assert independent > 0.3, "the spinning loop should cost far more CPU per request"
    assert 1 / FACTOR <= measured / independent <= FACTOR, (measured, independent)
    # Both ways: the waiting loop gets at most a note.
    assert WRITE_SPIN not in {name for name, label in waiting_labels.items() if label.severity != "info"}


def test_handoff_share_agrees_with_the_cpu_a_single_loop_saves(tmp_path):
    reactor = ("reactor-split", LIGHT, ["--workers", "4"])
    loop = ("event-loop", LIGHT, [])
    measured, independent, _, loop_labels = compare(HANDOFF_OVERHEAD, reactor, loop, tmp_path)
    assert independent > 0.2, "passing each request around should cost CPU"
    assert 1 / HANDOFF_LOWER_BOUND <= measured / independent <= FACTOR, (measured, independent)
    assert HANDOFF_OVERHEAD not in loop_labels
