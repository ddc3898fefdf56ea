#!/usr/bin/env python3
"""A long capture of a thread-churning target: the collector's memory and the capture's size over time.

The target is tests/fixtures/churn paced at --rate threads a second (each thread makes one socket write
and exits: an on-demand pool, a thread per request). The collector records it with --interval 10 and
its default checkpoints; every 10 s this samples the collector's resident memory (VmRSS) and the
checkpoint file's size. At the end it writes bench/results/long_capture.md with the series, the final
capture's size, its totals against the fixture's own count, and the figures for an hour, extrapolated
from the last minutes' growth (and said to be).

    python3 bench/long_capture.py --minutes 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
RESULTS = ROOT / "bench" / "results"


def rss_bytes(pid: int) -> int:
    """VmRSS of pid, 0 once it has exited."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=1000, help="threads created per second")
    parser.add_argument("--collector", type=Path, default=BUILD / "spinscope-collector")
    parser.add_argument("--out", type=Path, default=RESULTS / "long_capture.md")
    args = parser.parse_args()
    seconds = args.minutes * 60
    n = int(seconds * args.rate)
    work = Path(tempfile.mkdtemp(prefix="spinscope-long-"))
    output = work / "capture.json"
    churn = subprocess.Popen([str(BUILD / "fixtures" / "churn"), str(n), str(args.rate)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    pid = int(churn.stdout.readline().split()[1])
    read_fd, write_fd = os.pipe()
    collector = subprocess.Popen([str(args.collector), "--pid", str(pid), "-o", str(output), "--interval", "10",
                                  "--ready-fd", str(write_fd), "-q"], pass_fds=[write_fd])
    os.close(write_fd)
    if not os.read(read_fd, 4096):
        print("long_capture: the collector did not start", file=sys.stderr)
        return 1
    churn.stdin.write("go\n")
    churn.stdin.flush()
    start = time.monotonic()
    samples = []
    while churn.poll() is None:
        time.sleep(10)
        rss = rss_bytes(collector.pid) if collector.poll() is None else 0
        if not rss:  # the target has ended and the collector with it: its last figures are in the capture
            break
        size = output.stat().st_size if output.exists() else 0
        samples.append((time.monotonic() - start, rss, size))
        print(f"long_capture: {samples[-1][0]:.0f} s: collector {samples[-1][1] / 2**20:.1f} MiB resident, "
              f"checkpoint {size / 2**20:.2f} MiB", file=sys.stderr)
    truth = json.loads(next(line for line in churn.stdout.read().splitlines() if line.startswith("{")))
    collector.wait(timeout=60)
    cap = json.loads(output.read_text())
    size = output.stat().st_size
    elapsed = cap["duration_s"]
    # Extrapolate from the growth over the last half of the run (after the kept rows have filled up).
    half = [s for s in samples if s[0] >= elapsed / 2] or samples
    (t0, rss0, size0), (t1, rss1, size1) = half[0], half[-1]
    per_s = lambda a, b: (b - a) / (t1 - t0) if t1 > t0 else 0.0  # noqa: E731
    hour_rss = rss1 + per_s(rss0, rss1) * (3600 - t1)
    hour_size = size + per_s(size0, size1) * (3600 - elapsed)
    lines = [
        "# A long capture of a thread-churning target", "",
        f"`bench/long_capture.py --minutes {args.minutes:g} --rate {args.rate}`: tests/fixtures/churn making "
        f"{args.rate:,} threads a second (each one socket write, then exit), recorded with `--interval 10` and the "
        f"default checkpoints (every 10 s). Kernel {os.uname().release}.", "",
        "| time | collector resident | checkpoint file |", "|---|---|---|",
        *[f"| {t:.0f} s | {rss / 2**20:.1f} MiB | {sz / 2**20:.2f} MiB |" for t, rss, sz in samples], "",
        f"Final capture: {elapsed:.0f} s, {size / 2**20:.2f} MiB, {len(cap['threads']):,} thread rows, "
        f"{sum(g['threads'] for g in cap['threads_folded']):,} threads folded into "
        f"{len(cap['threads_folded'])} rows, {len(cap['intervals'])} intervals; collector peak "
        f"{cap['tool']['max_rss_bytes'] / 2**20:.1f} MiB resident, {cap['tool']['cpu_s']:.1f} s CPU, BPF maps "
        f"{cap['tool']['map_bytes'] / 2**20:.2f} MiB; drops {cap['drops']}.", "",
        f"Exact: {cap['totals']['write_calls']:,} socket writes counted of {truth['writes']:,} made, "
        f"{cap['totals']['threads_created']:,} threads created of {truth['threads']:,}, "
        f"{truth['reused_tids']:,} tids reused by the kernel.", "",
        f"For an hour at this rate, **extrapolated** (not measured) from the growth over the last half of this "
        f"run: collector about {hour_rss / 2**20:.0f} MiB resident, capture about {hour_size / 2**20:.1f} MiB. "
        "What grows is the interval series (one entry per 10 s) and the folded rows' counts; the thread rows "
        "stop at --exited-rows and the maps hold live threads only.", "",
    ]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
