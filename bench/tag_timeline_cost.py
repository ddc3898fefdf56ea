#!/usr/bin/env python3
"""What the tag timeline (`--tag-timeline`, with --stacks: docs/stacks.md) adds to the probes: the
refserver's reactor-split (two threads and a hand-off per request: tag changes every request) under a
closed-loop load, the collector attached for SECONDS at a time with `--stacks 99` alone and with
`--tag-timeline`, alternating, ROUNDS times. Per BPF program: runs and run time over the middle of each
attachment (kernel.bpf_stats_enabled, read with bpftool), ns per run and ms per second; and the timeline's
records per second.

    flock /tmp/spinscope-load.lock python3 bench/tag_timeline_cost.py [--rounds 3] [--seconds 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "analyzer" / "src")]
from spinscope.tracing import tag_timeline  # noqa: E402

BUILD = ROOT / "build"
PROGRAMS = ("on_sys_exit", "on_sched_switch", "on_sched_waking")
STATS = Path("/proc/sys/kernel/bpf_stats_enabled")


def programs() -> list:
    return json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                                     check=True).stdout)


def prog_stats(before: set) -> dict:
    """name -> (run_cnt, run_time_ns) of the BPF programs loaded since `before` (the ids then): the
    collector's (this bpftool does not say which process holds a program)."""
    return {p["name"]: (p.get("run_cnt", 0), p.get("run_time_ns", 0)) for p in programs()
            if p["id"] not in before and p.get("name") in PROGRAMS}


def attach(server: int, seconds: float, timeline: Path | None, out: Path) -> dict:
    extra = ["--tag-timeline", str(timeline)] if timeline else []
    loaded = {p["id"] for p in programs()}
    proc = subprocess.Popen([str(BUILD / "spinscope-collector"), "--pid", str(server), "--stacks", "99", *extra,
                             "--duration", str(seconds + 2), "-o", str(out), "-q"])
    time.sleep(1.0)
    a, t0 = prog_stats(loaded), time.monotonic()
    time.sleep(seconds)
    b, t1 = prog_stats(loaded), time.monotonic()
    proc.wait(timeout=60)
    row = {name: {"runs_per_s": (b[name][0] - a[name][0]) / (t1 - t0),
                  "ns_per_run": (b[name][1] - a[name][1]) / max(b[name][0] - a[name][0], 1),
                  "ms_per_s": (b[name][1] - a[name][1]) / 1e6 / (t1 - t0)} for name in PROGRAMS if name in a}
    if timeline:
        tl = tag_timeline.read(timeline)
        row["changes_per_s"] = tl.changes / (seconds + 2)
        row["changes_lost"] = tl.lost
    row["requests"] = json.loads(out.read_text())["requests"]["count"] if out.exists() else None
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    args = ap.parse_args()
    before = STATS.read_text().strip()
    STATS.write_text("1")
    work = Path(tempfile.mkdtemp(prefix="tagcost-"))
    server = subprocess.Popen([str(BUILD / "refserver"), "--arch", "reactor-split", "--port", "18181"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    total = args.rounds * 2 * (args.seconds + 3.5) + 5
    load = None
    try:
        time.sleep(0.5)
        load = subprocess.Popen([str(BUILD / "loadgen"), "--port", "18181", "--concurrency", "8", "--duration",
                                 f"{total:g}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        rows = {"stacks 99": [], "stacks 99 + tag timeline": []}
        for _ in range(args.rounds):
            rows["stacks 99"].append(attach(server.pid, args.seconds, None, work / "a.json"))
            rows["stacks 99 + tag timeline"].append(attach(server.pid, args.seconds, work / "tl", work / "b.json"))
    finally:
        for p in (load, server):
            if p is not None:
                p.kill()
                p.wait()
        STATS.write_text(before)
    print("| mode | program | runs/s | ns per run | ms/s |")
    print("|---|---|---|---|---|")
    for mode, runs in rows.items():
        for name in PROGRAMS:
            med = lambda key: statistics.median(r[name][key] for r in runs)  # noqa: E731
            print(f"| {mode} | {name} | {med('runs_per_s'):,.0f} | {med('ns_per_run'):.0f} | {med('ms_per_s'):.2f} |")
    tl = rows["stacks 99 + tag timeline"]
    print(f"\ntag changes per second: {statistics.median(r['changes_per_s'] for r in tl):,.0f} "
          f"(lost: {sum(r['changes_lost'] for r in tl)})")


if __name__ == "__main__":
    main()
