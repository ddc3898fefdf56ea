"""A label's measured share of CPU must agree with an independent measurement of the same cost.

write-spin: the spinning reference loop's measured share (the on-CPU time of its retries of an EAGAIN)
against what waiting costs instead: the same server with --write-policy epollout under the same load
uses less CPU per request, and the difference, as a share of the spinning server's CPU per request, is
what the spin cost. The two must agree within a factor of 1.5.

handoff overhead: the Tomcat-NIO-style reactor's measured share (on-CPU time of the calls that hand a
request over and of those that wait for it) against what the handoffs cost: thread-per-connection under
the same light load serves each request in one thread, and the reactor's extra CPU per request, as a
share of its own, is what passing the request around cost.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from spinscope.capture import load
from spinscope.labels import CRITICAL, HANDOFF_OVERHEAD, WRITE_SPIN, assess
from spinscope.metrics import analyze

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("refserver_helpers", ROOT / "tests" / "refservers" / "refserver_harness.py")
refhelp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(refhelp)

pytestmark = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0, reason="BPF needs root")]

LOAD = ["--path", "/bytes/102400", "--concurrency", 8, "--rcvbuf", 4096]
FACTOR = 1.5


def record(arch: str, load_args: list, server_args: list, tmp_path: Path):
    out = tmp_path / f"{arch}-{len(list(tmp_path.iterdir()))}.json"
    refhelp.record_under_load(arch, out, load_args, server_args, duration=3.0)
    analysis = analyze(load(out))
    return analysis, {label.name: label for label in assess(analysis).labels}



def test_write_spin_share_agrees_with_the_cpu_the_epollout_policy_saves(tmp_path):
    refhelp.ensure_built()
    spin, spin_labels = record("event-loop", LOAD, ["--sndbuf", "16384", "--write-policy", "spin"], tmp_path)
    waiting, waiting_labels = record("event-loop", LOAD, ["--sndbuf", "16384", "--write-policy", "epollout"],
                                     tmp_path)
    label = spin_labels[WRITE_SPIN]
    assert label.severity == CRITICAL
    independent = 1 - waiting.process["cpu_ms_per_request"] / spin.process["cpu_ms_per_request"]
    assert independent > 0.3, "the spinning loop should cost far more CPU per request"
    assert 1 / FACTOR <= label.cpu_share / independent <= FACTOR, (label.cpu_share, independent)
    # Both ways: the waiting loop gets at most a note.
    assert WRITE_SPIN not in {name for name, l in waiting_labels.items() if l.severity != "info"}


def test_handoff_share_agrees_with_the_cpu_thread_per_connection_saves(tmp_path):
    refhelp.ensure_built()
    light = ["--path", "/bytes/100", "--concurrency", 1]
    reactor, reactor_labels = record("reactor-split", light, ["--workers", "4"], tmp_path)
    threaded, threaded_labels = record("thread-per-conn", light, [], tmp_path)
    label = reactor_labels[HANDOFF_OVERHEAD]
    independent = 1 - threaded.process["cpu_ms_per_request"] / reactor.process["cpu_ms_per_request"]
    assert independent > 0.2, "passing each request around should cost CPU"
    assert 1 / FACTOR <= label.cpu_share / independent <= FACTOR, (label.cpu_share, independent)
    assert HANDOFF_OVERHEAD not in threaded_labels
