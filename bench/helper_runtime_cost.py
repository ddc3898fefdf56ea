#!/usr/bin/env python3
"""The runtime stacks helper's cost with every interpreter unwinder loaded (`--runtime all`, the profiler's
default) against only the target's (`--runtime python`), side by side on one FastAPI server (`def`
endpoint, 1 client) under load: time and CPU to its `sampling` line, and its CPU per second while sampling
(its process's utime+stime from /proc; its BPF runs in the sampled task's context and is not in it).

    flock /tmp/spinscope-load.lock python3 bench/helper_runtime_cost.py [--rounds 3] [--seconds 8]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "realservers"), str(ROOT / "tests"), str(ROOT / "analyzer" / "src")]
from realserver_harness import VERDICT_CONFIGS, start_server, warm_up  # noqa: E402

HELPER = ROOT / "build" / "spinscope-stacks-helper"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def one(server_pid: int, runtime: str, seconds: float, out: Path) -> dict:
    start = time.monotonic()
    proc = subprocess.Popen([str(HELPER), "--pid", str(server_pid), "--hz", "99", "--out", str(out),
                             "--runtime", runtime], stderr=subprocess.PIPE, text=True)
    while ": sampling " not in proc.stderr.readline():
        if proc.poll() is not None:
            raise SystemExit(f"the helper exited: {proc.returncode}")
    ready_s, ready_cpu = time.monotonic() - start, cpu_s(proc.pid)
    time.sleep(seconds)
    sampling_cpu = cpu_s(proc.pid) - ready_cpu
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    return {"ready_s": ready_s, "ready_cpu_s": ready_cpu, "cpu_share": sampling_cpu / seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8.0)
    args = ap.parse_args()
    config = VERDICT_CONFIGS["fastapi-def-c1"]
    work = Path(tempfile.mkdtemp(prefix="helpercost-"))
    rows: dict = {"all": [], "python": []}
    with start_server(config.server, work, work, **config.options) as server:
        warm_up(server, config)
        load = subprocess.Popen([str(ROOT / "build" / "loadgen"), "--port", str(server.port), "--concurrency", "1",
                                 "--duration", str(args.rounds * 2 * (args.seconds + 6) + 5)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(args.rounds):
                for runtime in rows:
                    rows[runtime].append(one(server.pid, runtime, args.seconds, work / "out.jsonl"))
        finally:
            load.kill()
            load.wait()
    print("| --runtime | to `sampling` (s) | CPU to `sampling` (s) | CPU while sampling, % of one CPU |")
    print("|---|---|---|---|")
    for runtime, runs in rows.items():
        med = lambda key: statistics.median(r[key] for r in runs)  # noqa: E731
        spread = lambda key: f"[{min(r[key] for r in runs):.2f}, {max(r[key] for r in runs):.2f}]"  # noqa: E731
        print(f"| {runtime} | {med('ready_s'):.2f} {spread('ready_s')} | {med('ready_cpu_s'):.2f} {spread('ready_cpu_s')} "
              f"| {100 * med('cpu_share'):.2f}% [{100 * min(r['cpu_share'] for r in runs):.2f}, "
              f"{100 * max(r['cpu_share'] for r in runs):.2f}] |")


if __name__ == "__main__":
    main()
