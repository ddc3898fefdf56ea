#!/usr/bin/env python3
"""How long `spinscope report` takes, and how much memory, on big captures (synthetic, valid).

    python3 bench/capture_scale.py [THREADS INTERVALS ...]

Builds a capture from a real one (tests/data/captures/reactor-split.json's first thread as the model)
with THREADS threads and INTERVALS intervals, then times `spinscope report` (text) on it in a child
process and reads the child's peak RSS. The loader refuses files above SPINSCOPE_MAX_CAPTURE_MB
(default 128 MiB) before reading them; this says what a file under that bound costs.
"""

from __future__ import annotations

import copy
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "tests" / "data" / "captures" / "reactor-split.json"


def big_capture(threads: int, intervals: int) -> dict:
    doc = json.loads(MODEL.read_text())
    model_thread, model_interval = doc["threads"][0], doc["intervals"][0]
    doc["threads"] = [{**copy.deepcopy(model_thread), "tid": 100_000 + i} for i in range(threads)]
    doc["intervals"] = [{**copy.deepcopy(model_interval), "t_s": float(i + 1)} for i in range(intervals)]
    doc["totals"]["threads_seen"] = threads
    return doc


def measure(threads: int, intervals: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="spinscope-scale-") as work:
        path = Path(work) / "capture.json"
        path.write_text(json.dumps(big_capture(threads, intervals)))
        start = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "spinscope", "report", str(path)], capture_output=True,
                                text=True)
        seconds = time.monotonic() - start
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB -> MiB, max over children
        return {"threads": threads, "intervals": intervals, "file_mib": path.stat().st_size / 2**20,
                "report_s": seconds, "peak_rss_mib": peak, "exit": result.returncode}


def main() -> int:
    sizes = [int(a) for a in sys.argv[1:]] or [1_000, 100, 16_384, 3_600]
    print("| threads | intervals | file | report time | peak RSS (largest so far) | exit |")
    print("|---|---|---|---|---|---|")
    for threads, intervals in zip(sizes[::2], sizes[1::2]):
        r = measure(threads, intervals)
        print(f"| {r['threads']:,} | {r['intervals']:,} | {r['file_mib']:.0f} MiB | {r['report_s']:.1f} s | "
              f"{r['peak_rss_mib']:.0f} MiB | {r['exit']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
