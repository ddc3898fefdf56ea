#!/usr/bin/env python3
"""Real servers in a documented bad and good configuration, recorded in alternating pairs: the ground
truth for spinscope's verdicts (issue "Verdicts that name real bugs").

    python3 tests/realservers/verdict_pairs.py --out DIR [--only PAIR ...] [--rounds N]

Needs root (the collector) and the servers scripts/setup.sh installs. Records with $SPINSCOPE_COLLECTOR
when set, else this checkout's build/spinscope-collector. Writes to DIR, for each pair and side (bad,
good; pinned, unpinned for the pinning pair):

  <pair>-<side>.json        the capture (with --rounds N > 1: <pair>-<side>-r<i>.json, i = 1..N)
  <pair>-<side>.load.json   the load generator's result (the same suffixes)
  summary.json              per pair: what each side measured (below) and the medians over the rounds

A side's figures (summarize_side):
  requests.capture / requests.load     the requests the capture counted / the load generator completed
  throughput                           the load generator's requests per second
  cpu_ms_per_request                   the server's CPU (utime + stime of its processes in /proc, read
                                       before and after the load) per request the load generator completed:
                                       measured without the collector's counters or the analyzer
  capture_cpu_ms_per_request           the capture's on-CPU time (totals.oncpu_ns) per request it counted
  handoffs_per_request, polls_per_request, empty_polls_per_request (polls that returned no event),
  read_eagain_per_request              from the capture's totals, per request it counted
  accept_calls_per_request, accept_eagain_per_request, poll_futile_per_request
                                       the same of schema 5's counters (null in older captures)
  listeners                            schema 5's listening sockets (accepts per socket), else null
  counters_unknown_to_analyzer         totals the analyzer of this checkout does not know (a newer
                                       collector's counters: accept EAGAIN, futile wakeups, ...), as counts
  labels                               what the analyzer of this checkout says: name, severity, cpu_share
  steal                                the hypervisor's share of the CPUs' time during the round's pair

A pair's medians (summarize_pair), over the rounds recorded with less than MAX_STEAL steal:
  independent_share = 1 - cpu_ms_per_request(good) / cpu_ms_per_request(bad), per round, then the median:
  the share of the bad side's CPU that the documented fix saves, the figure a label's cpu_share is held to.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from realserver_harness import (VERDICT_CONFIGS, Config, RealServer, Run, docroot, ensure_ready,  # noqa: E402
                                load_lock, missing_binaries, recording, start_server, warm_up)

from spinscope.analysis.patterns import (BUSY_POLLING, FINDING_NAMES, HANDOFF_OVERHEAD, NAGLE_STALL,  # noqa: E402
                                         SPURIOUS_SELECT)
# CPU times are clock deltas, and time the hypervisor steals from the VM counts in them (at 10-31% steal
# test_label_costs.py saw an independent share fall from 0.55 to 0.05-0.5): only rounds recorded with
# less steal than this make the medians.
MAX_STEAL = 0.08
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Pair:
    name: str
    bad: str  # VERDICT_CONFIGS names
    good: str
    label: str  # the finding the bad side must get and the good side must not
    about: str
    sides: tuple = ("bad", "good")  # what the two configurations are called in file names and the summary
    stacks: int = 0  # record both sides with --stacks at this rate (and the runtime stacks helper)
    min_requests: int = 200  # requests the load must complete on each side for its verdicts to mean anything

    def configs(self) -> dict:
        return dict(zip(self.sides, (VERDICT_CONFIGS[self.bad], VERDICT_CONFIGS[self.good])))


PAIRS = {pair.name: pair for pair in (
    # The good side is the herd's fix at the same worker count (issue 39): until 2026-11-29 it was 1 worker, which
    # also took away 3 processes (the w4 -> w1 saving, 0.21-0.30 a round, is mostly theirs, not the herd's).
    Pair("gunicorn-herd", "gunicorn-w4", "gunicorn-w4-own-listeners", SPURIOUS_SELECT,
         "4 sync workers select() on one listener and all wake for each new connection; all but one then "
         "get EAGAIN from accept() (a thundering herd). With a listener of its own per worker (SO_REUSEPORT) the "
         "kernel wakes one.", stacks=99),
    Pair("fastapi-threadpool-c1", "fastapi-def-c1", "fastapi-async-c1", HANDOFF_OVERHEAD,
         "a `def` endpoint runs in the thread pool: each request goes loop -> pool thread -> loop; "
         "`async def` runs on the loop. 1 client.", stacks=99),
    Pair("fastapi-threadpool-c16", "fastapi-def-c16", "fastapi-async-c16", HANDOFF_OVERHEAD,
         "the same at 16 clients", stacks=99),
    Pair("tornado-herd", "tornado-shared", "tornado-reuseport", SPURIOUS_SELECT,
         "4 Tornado processes forked on one listener all wake for each new connection (a herd); with "
         "reuse_port=True each has its own listener and the kernel wakes one. 1 client, a connection per request: "
         "the herd's fix must come first, before the zero-timeout checks both sides' asyncio loops make."),
    Pair("haproxy-busy-polling", "haproxy-busy-polling", "haproxy", BUSY_POLLING,
         "busy-polling in global: the thread polls without sleeping, a CPU for latency on purpose (it must be "
         "named as that trade, with its cost, and not be told to block: no spurious-select). 1 client."),
    Pair("netty-executor", "netty-executor", "netty-loop", HANDOFF_OVERHEAD,
         "the HTTP handler added on a DefaultEventExecutorGroup: each request goes event loop -> executor "
         "thread -> event loop; on the event loop it does not", stacks=99),
    Pair("jdkhttp-pool", "jdkhttp-pool", "jdkhttp-direct", HANDOFF_OVERHEAD,
         "the JDK's HTTP server with an executor: its dispatcher thread hands each exchange to a pool thread "
         "(Executors.newFixedThreadPool(4)); without one it answers on the dispatcher thread. 1 client.",
         stacks=99),
    Pair("jdkhttp-nagle", "jdkhttp-nagle", "jdkhttp-direct", NAGLE_STALL,
         "the JDK's HTTP server writes a response's headers and body in two calls; without "
         "-Dsun.net.httpserver.nodelay=true Nagle's algorithm holds the body until the client's delayed ACK of the "
         "headers (40 ms). 1 client.", stacks=99, min_requests=50),
    # Runtimes and pool libraries that no code of the analyzer names (issue 39): the hand-off's cost must be
    # found without a table of their frames.
    # (At 16 clients, node-readfile-c16 and axum-blocking-c16 in VERDICT_CONFIGS, for manual runs: Node's good
    # side was graded a warning on 0.01 wakeups per request whose waits were 10% of its short request time.)
    # Its good side reads the same file with fs.readFileSync on the event loop: the fix of the hand-off alone (the
    # file kept in memory, its good side until 2026-11-29, saves the reads too; re-recorded then, by /proc, the
    # memory side saved 0.71 and 0.81 of the CPU per request, readFileSync 0.72 and 0.74: the reads cost little).
    Pair("node-readfile-c1", "node-readfile-c1", "node-sync-c1", HANDOFF_OVERHEAD,
         "Node's fs.readFile per request: libuv hands each of its calls (open, fstat, read, close) to its thread "
         "pool and the result back to the event loop; with fs.readFileSync the same reads are made on the event "
         "loop and nothing is handed over. 1 client.", stacks=99),
    Pair("axum-blocking-c1", "axum-blocking-c1", "axum-inline-c1", HANDOFF_OVERHEAD,
         "axum/tokio with a 1 KiB checksum per request through spawn_blocking: each request goes worker -> "
         "blocking pool thread -> worker; inline, it does not. Release build. 1 client.", stacks=99),
    # Held out (issue 39): pool libraries and runtimes' hand-overs no code of the analyzer names, recorded only
    # after the rule was fixed and kept as they came out (test_verdict_pairs.py, HELD_OUT).
    Pair("axum-channel-c1", "axum-channel-c1", "axum-inline-c1", HANDOFF_OVERHEAD,
         "axum/tokio handing each request's checksum to a thread of its own over std::sync::mpsc and back over "
         "tokio::sync::oneshot; inline, it does not. 1 client.", stacks=99),
    Pair("jboss-pool", "jboss-pool", "jdkhttp-direct", HANDOFF_OVERHEAD,
         "the JDK's HTTP server handing each exchange to a jboss-threads EnhancedQueueExecutor; without an "
         "executor its dispatcher thread answers. 1 client.", stacks=99),
    Pair("node-worker-c1", "node-worker-c1", "node-memory-c1", HANDOFF_OVERHEAD,
         "Node asking a worker thread (worker_threads) for the file per request over its message port; kept in "
         "memory on the event loop, nothing is handed over. 1 client.", stacks=99),
    # The reactor + executor server of the issue ("CRITICAL when pinned to one CPU and unlabelled when not",
    # under the old count gate). Not the herd: on one CPU select() re-checks the listener before it returns
    # and the woken workers go back to sleep inside the kernel, so pinned, the herd costs less (measured:
    # 0.42 against 0.58 ms CPU per request) and its label may rightly differ.
    Pair("pinned-executor", "netty-executor-cpu0", "netty-executor", HANDOFF_OVERHEAD,
         "the Netty executor server under taskset -c 0 and unpinned: both must get the same labels, the "
         "severity at most one tier apart", sides=("pinned", "unpinned")),
)}


# ------------------------------------------------------------------ measuring


def process_tree(pid: int) -> list[int]:
    """PID and its descendants (gunicorn's master and workers)."""
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            children = task / "children"
            if children.exists():
                todo += [int(c) for c in children.read_text().split()]
    return tree


def tree_cpu_s(pid: int) -> float:
    """utime + stime of PID and its descendants, in seconds (/proc/<pid>/stat: all threads, live and
    exited). A process that exits between two readings takes its time with it: the servers' workers
    live as long as the server."""
    total = 0
    for p in process_tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5), after pid and (comm)
    return total / CLK_TCK


def cpu_ticks() -> tuple:
    """(steal, total) jiffies of all CPUs, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[7], sum(fields)


@dataclass
class SideRun(Run):
    """A recorded side of a pair: a Run, and the server's CPU seconds during the load, from /proc."""
    server_cpu_s: float = 0.0
    _assessment: object = field(default=None, repr=False)

    def assessment(self):
        """The analyzer's labels, computed once (summaries and failure messages ask several times)."""
        if self._assessment is None:
            self._assessment = super().assessment()
        return self._assessment


def record_side(config: Config, workdir: Path, www: Path, output: Path, stacks: int = 0) -> SideRun:
    """Start CONFIG's server, warm it up if the config says so, record it under its load (with --stacks at
    that rate when given) reading its CPU time before and after the load, stop it."""
    with start_server(config.server, workdir, www, **config.options) as server:
        warm_up(server, config)
        with load_lock(), recording(server, output, stacks=stacks):
            before = tree_cpu_s(server.pid)
            result = config.load.run(server.port)
            cpu_s = tree_cpu_s(server.pid) - before
        check_alive(server)
    return SideRun(config, output, json.loads(output.read_text()), result, server_cpu_s=cpu_s)


def check_alive(server: RealServer) -> None:
    if server.proc.poll() is not None:
        raise RuntimeError(f"{server.kind} exited during the run\n{server.log_tail()}")


@dataclass
class Round:
    sides: dict  # side name -> SideRun
    steal: float  # the hypervisor's share of the CPUs' time while the pair ran


def record_pair(pair: Pair, workdir: Path, www: Path, capture_dir: Path, rounds: int = 1,
                max_rounds: int | None = None) -> list:
    """Record PAIR's two sides one after the other (bad first), ROUNDS times, alternating; with
    MAX_ROUNDS, go on until ROUNDS rounds had less than MAX_STEAL steal or MAX_ROUNDS ran. Returns every
    Round recorded. Files: <pair>-<side>.json, with -r<i> when more than one round may be recorded."""
    done: list = []
    limit = max(rounds, max_rounds or rounds)
    for i in range(1, limit + 1):
        suffix = f"-r{i}" if limit > 1 else ""
        steal_before, total_before = cpu_ticks()
        sides = {}
        for side, config in pair.configs().items():
            output = capture_dir / f"{pair.name}-{side}{suffix}.json"
            sides[side] = record_side(config, workdir / f"{side}{suffix}", www, output, pair.stacks)
            output.with_suffix(".load.json").write_text(json.dumps(sides[side].load, indent=1) + "\n")
        steal_after, total_after = cpu_ticks()
        done.append(Round(sides, (steal_after - steal_before) / max(total_after - total_before, 1)))
        if sum(r.steal < MAX_STEAL for r in done) >= rounds:
            break
    return done


def missing(pair: Pair) -> list:
    """What is not installed of what PAIR's servers need."""
    return sorted({m for config in pair.configs().values() for m in missing_binaries(config.server)})


# ------------------------------------------------------------------ summaries


def per(value: float, requests: int) -> float | None:
    return value / requests if requests else None


def labels_of(run: Run) -> list | str:
    """[{name, severity, cpu_share, estimated}] of the analyzer of this checkout, or its error (the
    analyzer may be mid-change, or not know a newer collector's schema)."""
    try:
        labels = run.assessment().labels
    except Exception as e:  # noqa: BLE001  (shown, not hidden: the summary says what went wrong)
        return f"analyzer error: {type(e).__name__}: {e}"
    return [{"name": label.name, "severity": label.severity,
             "cpu_share": None if label.cpu_share is None else float(label.cpu_share),
             "estimated": label.estimated} for label in labels]


def unknown_counters(totals: dict) -> dict:
    """The totals the analyzer of this checkout does not read (counters a newer collector added)."""
    try:
        from spinscope.analysis.schema import COUNTERS
    except ImportError:
        return {}
    known = {*COUNTERS, "threads_seen", "threads_exited", "processes_created"}
    return {key: value for key, value in totals.items() if key not in known}


# Counters of capture schema 5 summarized per request when a capture has them: accept and accept4 calls,
# those that found no connection (EAGAIN: another worker took it), and poll calls whose ready descriptors
# gave nothing (docs/capture-format.md of schema 5).
SCHEMA5_PER_REQUEST = ("accept_calls", "accept_eagain", "poll_futile")


def summarize_side(run: SideRun) -> dict:
    cap, load = run.capture, run.load
    totals, counted = cap["totals"], cap["requests"]["count"]
    handoffs = totals["wakeups_sent"] - totals["wakeups_sent_mm"] - totals["wakeups_sent_exit"]
    return {
        "config": run.config.name,
        "about": run.config.about,
        "load": run.config.load.describe(),
        "capture": run.path.name,
        "schema": cap["schema"],
        "requests": {"capture": counted, "load": load["requests"]},
        "errors": load["errors"],
        "throughput": load["throughput"],
        "server_cpu_s": round(run.server_cpu_s, 3),
        "cpu_ms_per_request": per(run.server_cpu_s * 1e3, load["requests"]),
        "capture_cpu_ms_per_request": per(totals["oncpu_ns"] / 1e6, counted),
        "handoffs_per_request": per(handoffs, counted),
        "polls_per_request": per(totals["poll_calls"], counted),
        "empty_polls_per_request": per(totals["poll_zero"], counted),
        "read_eagain_per_request": per(totals["read_eagain"], counted),
        # Schema 5 counters (None in older captures, which do not count them)
        **{f"{key}_per_request": per(totals[key], counted) if key in totals else None
           for key in SCHEMA5_PER_REQUEST},
        "listeners": cap.get("listeners"),
        "counters_unknown_to_analyzer": unknown_counters(totals),
        "labels": labels_of(run),
    }


def independent_share(bad: SideRun, good: SideRun) -> float:
    """1 - the good side's CPU per request / the bad side's (server CPU from /proc, the load tool's
    requests): the share of the bad side's CPU the fix saves."""
    return 1 - (good.server_cpu_s / good.load["requests"]) / (bad.server_cpu_s / bad.load["requests"])


def label_share(run: Run, name: str) -> float | None:
    """The measured CPU share of the label (or finding) `name` on a run, None when it is not there."""
    assessment = run.assessment()
    given = {item.name: item for item in (*assessment.labels, *assessment.findings)}
    share = given[name].cpu_share if name in given else None
    return None if share is None else float(share)


def median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize_pair(pair: Pair, rounds: list) -> dict:
    first, second = pair.sides
    valid = [r for r in rounds if r.steal < MAX_STEAL]
    shares, label_shares = [], []
    for r in valid:
        shares.append(independent_share(r.sides[first], r.sides[second]))
        try:
            label_shares.append(label_share(r.sides[first], pair.label))
        except Exception:  # noqa: BLE001  (the analyzer's error is in the sides' labels)
            label_shares.append(None)
    return {
        "pair": pair.name,
        "about": pair.about,
        "label": pair.label,
        "sides": list(pair.sides),
        "rounds": [{"steal": round(r.steal, 4), **{side: summarize_side(run) for side, run in r.sides.items()}}
                   for r in rounds],
        "rounds_under_max_steal": len(valid),
        "max_steal": MAX_STEAL,
        "median": {
            **{f"{side}_cpu_ms_per_request": median([per(r.sides[side].server_cpu_s * 1e3,
                                                         r.sides[side].load["requests"]) for r in valid])
               for side in pair.sides},
            **{f"{side}_throughput": median([r.sides[side].load["throughput"] for r in valid])
               for side in pair.sides},
            "independent_share": median(shares),
            f"{first}_label_cpu_share": median(label_shares),
        },
    }


# ------------------------------------------------------------------ by hand


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="*", choices=list(PAIRS), default=list(PAIRS))
    parser.add_argument("--rounds", type=int, default=1, help="pairs of runs of each pair, alternating")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ensure_ready()
    summary = {}
    with docroot() as www, tempfile.TemporaryDirectory(prefix="spinscope-pairs-") as work:
        for name in args.only:
            pair = PAIRS[name]
            if absent := missing(pair):
                summary[name] = {"pair": name, "skipped": f"not installed: {', '.join(absent)}"}
                print(f"{name}: skipped, {', '.join(absent)} not installed", file=sys.stderr)
                continue
            started = time.monotonic()
            rounds = record_pair(pair, Path(work) / name, www, args.out, rounds=args.rounds)
            summary[name] = summarize_pair(pair, rounds)
            print(f"{name}: {time.monotonic() - started:.0f} s, median {summary[name]['median']}", file=sys.stderr)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
