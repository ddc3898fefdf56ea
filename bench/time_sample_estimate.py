#!/usr/bin/env python3
"""Does the sampled on-CPU time (--time-sample 16, the default: 1 call in 16 timed, its time counted 16
times) agree with timing every call (--time-sample 1)? The checkpolls fixture's CALLS zero-timeout polls,
recorded both ways, alternating, ROUNDS times: the on-CPU ns per poll each way and their ratio per round.
The two runs of a round are separate processes on a shared machine, so the ratio carries the machine's
noise as well as the sampling error (about 1% at ~6,000 timed calls); tests/collector/test_time_sample.py
holds what is exact (counts, the scaling by 16, the share of calls timed), this file the timing.

    flock /tmp/spinscope-load.lock python3 bench/time_sample_estimate.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "analyzer" / "src"), str(ROOT / "tests"), str(ROOT / "tests" / "collector")]
from collector_harness import run_fixture  # noqa: E402

CALLS = 100_000


def ns_per_poll(time_sample: int, tmp: Path) -> float:
    out = tmp / str(time_sample)
    out.mkdir()
    run = run_fixture("checkpolls", str(CALLS), tmp_path=out, collector_args=("--time-sample", str(time_sample)))
    got = run.thread("checker")
    assert got["poll_zero_nowait"] == run.truth["checker"]["poll_zero"] == CALLS
    return got["poll_zero_nowait_ns"] / CALLS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ratios = []
    print("| round | every call timed, ns per poll | 1 in 16 timed, ns per poll | ratio |")
    print("|---|---|---|---|")
    for n in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory() as tmp:
            every, sampled = ns_per_poll(1, Path(tmp)), ns_per_poll(16, Path(tmp))
        ratios.append(sampled / every)
        print(f"| {n} | {every:.1f} | {sampled:.1f} | {ratios[-1]:.3f} |", flush=True)
    print(f"\nratio: median {statistics.median(ratios):.3f}, range {min(ratios):.3f} to {max(ratios):.3f}")


if __name__ == "__main__":
    main()
