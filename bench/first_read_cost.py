"""The extra cost of a connection's first read (bench/first_read_cost.c): with no tracer, with a collector
of schema 4 (given: e.g. another checkout's build) and with this checkout's. Holds the machine-wide load
lock; pins nothing (each figure: the median run of 7, each run's median of 20,000 reads).

    python3 bench/first_read_cost.py [OTHER_COLLECTOR]
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "collector"), str(ROOT / "analyzer" / "src")]
from collector_harness import COLLECTOR, start_collector  # noqa: E402
from machine_lock import load_lock  # noqa: E402

PROGRAM = ROOT / "build" / "first_read_cost"
REPEAT = 7  # runs of each tool; the median run's figures are printed


def once(family: str, payload: str, collector: Path | None, n: int = 20000) -> dict:
    proc = subprocess.Popen([str(PROGRAM), family, str(n), payload], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    pid = int(proc.stdout.readline().split()[1])
    tracer = None
    with tempfile.TemporaryDirectory() as tmp:
        if collector:
            tracer, _ = start_collector(pid, Path(tmp) / "c.json", program=collector)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        result = json.loads(proc.stdout.readline())
        proc.wait()
        if tracer:
            tracer.wait(timeout=30)
    return result


def main() -> None:
    subprocess.run(["cc", "-O2", str(ROOT / "bench" / "first_read_cost.c"), "-o", str(PROGRAM)], check=True)
    tools = {"none": None, "this": COLLECTOR}
    if len(sys.argv) > 1:
        tools["other"] = Path(sys.argv[1])
    with load_lock():
        for family, payload in (("unix", "h2"), ("tcp", "h2"), ("tcp", "http1")):
            # The tools in turn, REPEAT rounds: drift on a shared machine falls on each alike.
            runs: dict = {name: [] for name in tools}
            for _ in range(REPEAT):
                for name, tool in tools.items():
                    runs[name].append(once(family, payload, tool))
            for name, results in runs.items():
                print(json.dumps({"family": family, "payload": payload, "tool": name,
                                  **{k: sorted(r[k] for r in results)[REPEAT // 2] for k in results[0]}}), flush=True)


if __name__ == "__main__":
    main()
