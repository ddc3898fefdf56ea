#!/usr/bin/env python3
"""The runtime stacks helper live (`--every 1`, as `top --stacks` and `exporter --stacks` run it) against
one-shot (`--duration`, as `record --stacks` runs it), side by side on one CPython target whose thread
spends about half of one CPU in Python functions of random depth and order (many unique stacks a second, as
a server's are): the helper's CPU while sampling (its process's utime+stime from /proc, from its `sampling`
line to the end of the window; its BPF runs in the sampled task's context and is not in it), rounds
alternating; and with --rss-minutes, its resident memory (VmRSS, VmHWM) each minute of one live run that
long (its batches read and dropped, as a view does).

    flock /tmp/spinscope-load.lock python3 bench/helper_live_cost.py --rounds 2 --seconds 60
    python3 bench/helper_live_cost.py --rounds 0 --rss-minutes 10      # no load generator: no lock needed
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HELPER = ROOT / "build" / "spinscope-stacks-helper"
TICK = os.sysconf("SC_CLK_TCK")
TARGET = textwrap.dedent("""\
    import random, time

    def a(n, d): return b(n, d - 1) if d else sum(i * i for i in range(n))
    def b(n, d): return (c if d % 2 else a)(n, d - 1) if d else sum(range(n))
    def c(n, d): return (a if random.random() < 0.5 else b)(n, d - 1) if d else max(range(n))

    while True:
        end = time.monotonic() + 0.01
        while time.monotonic() < end:
            a(2000, random.randint(0, 12))
        time.sleep(0.01)
""")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def memory_kib(pid: int) -> dict:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {line.split(":")[0]: int(line.split()[1]) for line in status if line.startswith(("VmRSS", "VmHWM"))}


def start(target: int, out: str, *extra: str) -> subprocess.Popen:
    proc = subprocess.Popen([str(HELPER), "--pid", str(target), "--hz", "99", "--out", out, "--timestamps",
                             "--runtime", "python", *extra], stdout=subprocess.PIPE if out == "-" else None,
                            stderr=subprocess.PIPE, text=True)
    while ": sampling " not in proc.stderr.readline():
        if proc.poll() is not None:
            raise SystemExit(f"the helper exited: {proc.returncode}")
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    return proc


def drain(proc: subprocess.Popen, counts: dict) -> None:
    """Its batches read and dropped: headers and stack lines counted."""
    for line in proc.stdout:
        counts["headers" if line.startswith('{"helper"') else "lines"] += 1


def one(target: int, mode: str, seconds: float, work: Path) -> dict:
    counts = {"headers": 0, "lines": 0}
    if mode == "live":
        proc = start(target, "-", "--every", "1")
        threading.Thread(target=drain, args=(proc, counts), daemon=True).start()
    else:
        proc = start(target, str(work / "oneshot.jsonl"))
    before, target_before = cpu_s(proc.pid), cpu_s(target)
    time.sleep(seconds)
    sampling, target_cpu = cpu_s(proc.pid) - before, cpu_s(target) - target_before
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    return {"mode": mode, "cpu_share": round(sampling / seconds, 4), "target_cpu_share": round(target_cpu / seconds, 3),
            **counts}


def together(target: int, seconds: float, work: Path) -> dict:
    """Both at once on the same target, the same seconds: the machine's noise the same for both."""
    counts = {"headers": 0, "lines": 0}
    oneshot = start(target, str(work / "oneshot.jsonl"))
    live = start(target, "-", "--every", "1")
    threading.Thread(target=drain, args=(live, counts), daemon=True).start()
    before = {"oneshot": cpu_s(oneshot.pid), "live": cpu_s(live.pid)}
    time.sleep(seconds)
    row = {mode: round((cpu_s(proc.pid) - before[mode]) / seconds, 4)
           for mode, proc in (("oneshot", oneshot), ("live", live))}
    for proc in (oneshot, live):
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    return {"mode": "together", **row, **counts}


def rss(target: int, minutes: int) -> list:
    counts = {"headers": 0, "lines": 0}
    proc = start(target, "-", "--every", "1")
    threading.Thread(target=drain, args=(proc, counts), daemon=True).start()
    rows = []
    begun = time.monotonic()
    for minute in range(1, minutes + 1):
        time.sleep(max(0.0, begun + 60 * minute - time.monotonic()))
        rows.append({"minute": minute, **memory_kib(proc.pid), "cpu_s": cpu_s(proc.pid), **counts})
        print(rows[-1], flush=True)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--together", type=int, default=0, metavar="N", help="N rounds of both helpers at once")
    ap.add_argument("--rss-minutes", type=int, default=0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="helperlive-"))
    (work / "target.py").write_text(TARGET)
    target = subprocess.Popen([sys.executable, str(work / "target.py")])
    try:
        time.sleep(1)
        for r in range(args.rounds):
            for mode in (("oneshot", "live") if r % 2 == 0 else ("live", "oneshot")):
                row = one(target.pid, mode, args.seconds, work)
                print({"round": r + 1, **row}, flush=True)
        for r in range(args.together):
            print({"round": r + 1, **together(target.pid, args.seconds, work)}, flush=True)
        if args.rss_minutes:
            rss(target.pid, args.rss_minutes)
    finally:
        target.kill()
        target.wait()


if __name__ == "__main__":
    main()
