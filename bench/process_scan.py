"""What `spinscope exporter --comm/--exe/--children` pays to find its targets on a node with many
processes: the CPU time of one full read of /proc (live.processes(): every process's stat and exe) and
of the exporter's scan every 2 s (live.ProcessTable: /proc listed, new processes read, all of them read
again every 10 s), with N idle processes added to the machine's own. CPU time of this process
(time.process_time), the median of 20, so another process on the machine moves it little. Holds the
machine-wide load lock (it starts N processes).

    python3 bench/process_scan.py [N]     (default 1000)

To compare with another checkout's analyzer, run it with PYTHONPATH=OTHER/analyzer/src: a checkout
without ProcessTable is measured for the full read alone.
"""
from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]
from machine_lock import load_lock  # noqa: E402

from spinscope.live import stream as live  # noqa: E402
from spinscope.live.exporter import SCAN_EVERY_S  # noqa: E402

RUNS = 20


def cpu_ms(work) -> float:
    times = []
    for _ in range(RUNS):
        start = time.process_time()
        work()
        times.append((time.process_time() - start) * 1e3)
    return statistics.median(times)


def measure(extra: int) -> str:
    before = len(live.processes())
    idle = subprocess.Popen(["sh", "-c", f"i=0; while [ $i -lt {extra} ]; do sleep 3600 & i=$((i + 1)); done; wait"],
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(live.processes()) < before + extra and time.monotonic() < deadline:
            time.sleep(0.5)
        users = len(live.processes())
        entries = sum(name.isdigit() for name in os.listdir("/proc"))
        full = cpu_ms(live.processes)
        lines = [f"{entries} processes in /proc, {users} of them user processes ({extra} idle ones added)",
                 f"full read (live.processes): {full:.1f} ms of CPU, {full / users * 1e3:.0f} us a process; "
                 f"every {SCAN_EVERY_S:g} s: {full / SCAN_EVERY_S / 10:.2f}% of a CPU"]
        table_class = getattr(live, "ProcessTable", None)
        if table_class is not None:
            clock = [0.0]
            table = table_class(clock=lambda: clock[0])
            table.scan()
            clock[0] = 1.0  # before the rescan: list /proc, read what is new (nothing, here)
            between = cpu_ms(table.scan)
            scans = table.rescan_s / SCAN_EVERY_S  # per rescan period: one full read, the rest listings
            per_s = (full + (scans - 1) * between) / table.rescan_s
            lines.append(f"exporter scan (ProcessTable): {between:.2f} ms of CPU between full reads, one full "
                         f"read every {table.rescan_s:g} s: {per_s / 10:.2f}% of a CPU")
        return "\n".join(lines)
    finally:
        os.killpg(idle.pid, signal.SIGKILL)
        idle.wait()


if __name__ == "__main__":
    with load_lock():
        print(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 1000))
