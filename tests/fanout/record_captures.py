#!/usr/bin/env python3
"""Re-record the fanout golden captures in tests/data/captures (root, collector built, memcached).

    python3 tests/fanout/record_captures.py

fanout-split and fanout-shared: 4 shards, GET /fanout/20/100 (20 records of 100 B), 8 connections;
fanout-pool and fanout-shared: GET /fanout/8/20k, 8 connections. Collector: 3 s (1.5 s for the pool,
whose hundreds of short-lived threads make a large file; 2 s for the 20k shared run), interval 0.5 s.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fanout_helpers import CAPTURES, SHARD_COUNT, Shards, compact, record  # noqa: E402

RUNS = [
    ("fanout-split-small.json", "fanout-split", ["--path", "/fanout/20/100", "--concurrency", 8], 3.0),
    ("fanout-shared-small.json", "fanout-shared", ["--path", "/fanout/20/100", "--concurrency", 8], 3.0),
    ("fanout-pool-20k.json", "fanout-pool", ["--path", "/fanout/8/20k", "--concurrency", 8], 1.5),
    ("fanout-shared-20k.json", "fanout-shared", ["--path", "/fanout/8/20k", "--concurrency", 8], 2.0),
]


def main() -> int:
    with Shards(SHARD_COUNT) as shards:
        shards.load()
        for name, arch, load, duration in RUNS:
            out = CAPTURES / name
            capture, result = record(arch, shards.spec, out, load, duration=duration)
            compact(out)
            print(f"{name}: {result['requests']} requests, {result['errors']} errors, "
                  f"{capture['totals']['threads_created']} threads created")
    return 0


if __name__ == "__main__":
    sys.exit(main())
