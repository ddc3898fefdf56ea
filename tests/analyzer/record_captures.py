#!/usr/bin/env python3
"""Re-record the reference-server golden captures in tests/data/captures (root, everything built).

    python3 tests/analyzer/record_captures.py [NAME ...]

The servers and loads are the table in tests/data/captures/README.md; the collector records 3 s (2 s
for the clean event loop) after 0.7 s of load, with 0.5 s intervals.
"""
import importlib.util
import sys
from paths import ROOT, CAPTURES

_spec = importlib.util.spec_from_file_location("refserver_helpers", ROOT / "tests" / "refservers" / "refserver_harness.py")
refhelp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(refhelp)

SPIN_SERVER = ["--sndbuf", "16384", "--write-policy"]
RUNS = {  # name: (arch, server args, load args, seconds recorded)
    "event-loop-clean.json": ("event-loop", [], ["--path", "/bytes/1000", "--concurrency", 8], 2.0),
    "event-loop-spin-100k.json": ("event-loop", [*SPIN_SERVER, "spin"],
                                  ["--path", "/bytes/102400", "--concurrency", 20, "--rcvbuf", 4096], 3.0),
    "event-loop-epollout-100k.json": ("event-loop", [*SPIN_SERVER, "epollout"],
                                      ["--path", "/bytes/102400", "--concurrency", 8, "--rcvbuf", 4096], 3.0),
    "thread-per-conn.json": ("thread-per-conn", [], ["--path", "/bytes/100", "--concurrency", 1], 3.0),
    "reactor-split.json": ("reactor-split", ["--workers", "4"], ["--path", "/bytes/100", "--concurrency", 1], 3.0),
    "reactor-worker.json": ("reactor-worker", ["--workers", "4"], ["--path", "/bytes/100", "--concurrency", 1], 3.0),
    "poller-dispatch.json": ("poller-dispatch", [], ["--path", "/bytes/100", "--concurrency", 16], 3.0),
    # Nagle's algorithm holds each body for the client's delayed ACK: 20-25 requests a second
    "event-loop-nagle.json": ("event-loop", ["--split-writes", "--nagle"], ["--path", "/bytes/100", "--concurrency", 1],
                              6.0),
}


def main(names: list) -> int:
    for name in names or RUNS:
        arch, server_args, load, seconds = RUNS[name]
        capture, result = refhelp.record_under_load(arch, CAPTURES / name, load, server_args, duration=seconds)
        print(f"{name}: {capture['requests']['count']} requests recorded, {result['requests']} by the load "
              f"generator, {result['errors']} errors")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
