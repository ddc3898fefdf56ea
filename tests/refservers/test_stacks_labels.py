"""--stacks on the reference servers: each label names the function of the server that makes its pattern as
its top call site (the servers are built -O2, without frame pointers, against Debian's libc), and the
report, its JSON and the exports carry them."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from machine_lock import load_lock
from refserver_harness import record_under_load
from spinscope.analysis.capture import load
from spinscope.analysis.labels import assess
from spinscope.analysis.metrics import analyze
from spinscope.analysis.patterns import HANDOFF_OVERHEAD, SPURIOUS_SELECT, WRITE_SPIN

SPIN_SERVER = ["--sndbuf", "16384", "--write-policy", "spin"]
RUNS = {  # label: (arch, server args, load args, collector args, the call sites of the label's events)
    WRITE_SPIN: ("event-loop", SPIN_SERVER, ["--path", "/bytes/102400", "--concurrency", 20, "--rcvbuf", 4096], (),
                 ("conn_write",)),
    # The reactor pushes each request to a worker's queue, the worker its answer to the reactor's mailbox: two
    # hand-offs each way, of about as many wakeups (2.4 and 1.8 per request, measured), either one on top.
    HANDOFF_OVERHEAD: ("reactor-split", ["--workers", "4"], ["--path", "/bytes/100", "--concurrency", 1], (),
                       ("queue_push", "mailbox_push")),
    SPURIOUS_SELECT: ("n-copy", ["--workers", "4"], ["--path", "/bytes/100", "--concurrency", 1, "--keepalive", "off"],
                      ("--children",), ("poller_wait",)),
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    done = {}

    def get(label):
        if label not in done:
            arch, server_args, load_args, extra, _ = RUNS[label]
            output = tmp_path_factory.mktemp(arch) / f"{arch}.json"
            with load_lock():
                record_under_load(arch, output, load_args, server_args, duration=2.0,
                                  collector_args=("--stacks", "99", *extra))
            done[label] = output
        return done[label]

    return get


SOURCES = Path(__file__).resolve().parents[2] / "reference-servers"


def source_line(site: dict) -> str:
    """The text of a reference server's call site's line ('' if the file is not the servers')."""
    files = [path for path in SOURCES.rglob(site["file"]) if path.name == site["file"]]
    if len(files) != 1 or not site.get("line"):
        return ""
    lines = files[0].read_text().splitlines()
    return lines[site["line"] - 1] if site["line"] <= len(lines) else ""


@pytest.mark.parametrize("name", list(RUNS))
def test_the_top_call_site_is_the_servers_own_function(recorded, name):
    output = recorded(name)
    assessment = assess(analyze(load(output)))
    labels = {label.name: label for label in assessment.labels}
    assert name in labels, [label.name for label in assessment.labels]
    label = labels[name]
    expected = RUNS[name][4]
    # A function inlined into the expected one is named as a frame of its own (DWARF inline scopes), with the
    # function it was inlined into as its first caller: either names the site. And a function that ends in a
    # tail call leaves no frame: queue_push ends by jumping to pthread_mutex_unlock (-O2), so a wakeup from
    # that unlock (a worker contending for the queue's lock: 10% of the events on a quiet machine, 38% beside
    # a CPU hog, where the lock's holder is preempted more) is placed at its caller's line, the call of
    # queue_push: the line's own text names it.
    def names(site: dict) -> set:
        called = {function for function in expected if f"{function}(" in source_line(site)}
        return {site["function"], *(caller.split(" (", 1)[0] for caller in site["callers"][:1]), *called}
    top = label.call_sites[0]
    assert names(top) & set(expected), label.call_sites
    assert set(expected) <= set().union(*map(names, label.call_sites)), label.call_sites
    assert top["module"] == "refserver" and top["file"].endswith(".c") and top["line"] > 0
    # The sites named carry most of the label's events between them (the rest, measured 10-11%: the queue's
    # lock, contended, handed over as a pop or push unlocks it).
    assert sum(site["event_share"] for site in label.call_sites if names(site) & set(expected)) > 0.75
    assert any(line.startswith(f"where: {top['function']} (") for line in label.details), label.details


def test_the_handoff_share_adds_the_user_space_part(recorded):
    label = next(label for label in assess(analyze(load(recorded(HANDOFF_OVERHEAD)))).labels
                 if label.name == HANDOFF_OVERHEAD)
    assert label.user_share is not None and label.syscall_share is not None
    assert label.cpu_share == pytest.approx(label.syscall_share + label.user_share)
    assert label.cost_share >= label.cpu_share


def test_report_json_and_exports(recorded, tmp_path):
    output = recorded(WRITE_SPIN)
    folded, pprof = tmp_path / "spin.events.folded", tmp_path / "spin.pb.gz"
    run = subprocess.run([sys.executable, "-m", "spinscope", "report", str(output), "--json", "--folded-events",
                          str(folded), "--pprof", str(pprof), "--pattern", WRITE_SPIN], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    spin = next(label for label in doc["labels"] if label["name"] == WRITE_SPIN)
    assert spin["call_sites"][0]["function"] == "conn_write"
    lines = folded.read_text().splitlines()
    assert lines and all(line.rsplit(" ", 1)[1].isdigit() for line in lines)
    assert any(";conn_write (conn.c:" in line for line in lines)
    assert gzip.decompress(pprof.read_bytes())  # a gzipped profile.proto
