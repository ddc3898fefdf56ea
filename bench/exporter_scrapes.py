"""The exporter's own CPU and memory with one busy target, scraped as a fleet would (docs/live.md): the
event-loop refserver answering 100 B responses to the load generator at full speed, `spinscope exporter
--pid` following it, /metrics fetched every 15 s for 60 s after 10 s of warming up. The figures are the
exporter's Python process alone (its collector is a child: `bench/run.py --parts live` counts the tree).
Holds the machine-wide load lock; the analyzer measured is the one `python3 -m spinscope` imports (set
PYTHONPATH to compare checkouts; SPINSCOPE_COLLECTOR to use another checkout's collector).

    python3 bench/exporter_scrapes.py
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests")]
import run as bench  # noqa: E402
from machine_lock import load_lock  # noqa: E402

SECONDS, SCRAPE_S, WARM_UP_S = 60, 15, 10


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process itself (not its children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_bytes(pid: int, key: str) -> int:
    return int(re.search(rf"^{key}:\s*(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M).group(1)) * 1024


def measure() -> str:
    server = bench.start_refserver("event-loop")
    try:
        port = bench.free_port()
        exporter = subprocess.Popen([sys.executable, "-m", "spinscope", "exporter", "--pid", str(server.pid),
                                     "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    text=True, start_new_session=True)
        try:
            bench.Lines(exporter.stderr).wait_for(r"tracing PID", 60)
            load: dict = {}
            loader = threading.Thread(target=lambda: load.update(
                bench.loadgen(server.port, "/bytes/100", SECONDS + WARM_UP_S + 5)))
            loader.start()
            time.sleep(WARM_UP_S)  # imports done, the first windows judged
            cpu0, t0 = cpu_seconds(exporter.pid), time.monotonic()
            sizes = []
            for _ in range(SECONDS // SCRAPE_S):
                sizes.append(len(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()))
                time.sleep(SCRAPE_S)
            cpu, seconds = cpu_seconds(exporter.pid) - cpu0, time.monotonic() - t0
            rss, peak = status_bytes(exporter.pid, "VmRSS"), status_bytes(exporter.pid, "VmHWM")
            loader.join()
        finally:
            exporter.send_signal(signal.SIGINT)
            exporter.wait(30)
        rate = load.get("requests", 0) / (SECONDS + WARM_UP_S + 5)
        return (f"exporter: {cpu / seconds:.2%} of one CPU over {seconds:.0f} s, {rss / 2**20:.1f} MiB resident "
                f"(peak {peak / 2**20:.1f} MiB); the target at {rate:,.0f} requests/s; scrapes of "
                f"{', '.join(f'{n:,}' for n in sizes)} bytes")
    finally:
        server.stop()


if __name__ == "__main__":
    with load_lock():
        print(measure())
