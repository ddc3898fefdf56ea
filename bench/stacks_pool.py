#!/usr/bin/env python3
"""What `--stacks` costs the collector on a 200-thread pool (tests/fixtures/pool.c), two collectors side by
side: this checkout's and a baseline build (a change's before). Writes OUT.md and OUT.json.

Rounds of baseline, then this checkout (the order alternating per round), each a fresh pool of WORKERS
threads handing items over for SECONDS with the collector attached at --stacks HZ. Per run: the event
stacks taken (and per second), the records the ring lost, the events due a stack when the budget was spent, the collector's
CPU over its whole life (`tool.cpu_s`) and in the unwinder (`stacks.collector_cpu_s`), its peak RSS, the
wakeups the wakeups map dropped, and the items the pool handed over (the pool's own throughput, which a
busier collector takes CPU from on 2 CPUs). Medians and [min, max] over rounds.

    python3 bench/stacks_pool.py --baseline /tmp/main/build/spinscope-collector [--rounds 3] [--out FILE]

(it takes the machine lock itself when no ancestor holds it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "collector"), str(ROOT / "analyzer" / "src")]
from collector_harness import COLLECTOR, run_fixture  # noqa: E402
from machine_lock import load_lock  # noqa: E402

FIGURES = {  # name: (what, from a run)
    "event_stacks": ("event stacks", lambda c: sum(n for k, n in c["stacks"]["records"].items() if k != "cpu")),
    "event_stacks_per_s": ("event stacks per second of capture (the budget is per second of the probes' clock: "
                           "a capture of 3.0 s spans 4 of them)",
                           lambda c: sum(n for k, n in c["stacks"]["records"].items() if k != "cpu") / c["duration_s"]),
    "ring_full": ("records lost (ring full)", lambda c: c["stacks"]["lost"]["ring_full"]),
    "deferred": ("events due a stack when the budget was spent (deferred)", lambda c: c["stacks"].get("deferred", 0)),
    "tool_cpu_s": ("collector CPU, whole life (s)", lambda c: c["tool"]["cpu_s"]),
    "unwinder_cpu_s": ("unwinder CPU (s)", lambda c: c["stacks"]["collector_cpu_s"]),
    "max_rss_mib": ("collector peak RSS (MiB)", lambda c: c["tool"]["max_rss_bytes"] / 2**20),
    "wakeup_edges_dropped": ("wakeups dropped (wakeups map full)", lambda c: c["drops"]["wakeup_edges"]),
}


def one(collector: Path, workers: int, seconds: float, hz: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        run = run_fixture("pool", str(workers), str(seconds), tmp_path=Path(tmp), program=collector,
                          collector_args=("--stacks", str(hz), "--time-sample", "16"))
    row = {key: get(run.capture) for key, (_, get) in FIGURES.items()}
    row["items"] = run.truth["submitter"]["submitted"]
    return row


def number(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def spread(values: list) -> str:
    return f"{number(statistics.median(values))} [{number(min(values))}, {number(max(values))}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, required=True, help="the other collector (the before)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--hz", type=int, default=99)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "stacks_pool")
    args = parser.parse_args()
    collectors = {"baseline": args.baseline.resolve(), "this checkout": COLLECTOR}
    rows: dict = {name: [] for name in collectors}
    with load_lock():
        for r in range(args.rounds):
            for name in (list(collectors) if r % 2 == 0 else list(reversed(collectors))):
                rows[name].append(one(collectors[name], args.workers, args.seconds, args.hz))
                print(f"stacks_pool: round {r + 1} {name}: {rows[name][-1]}", file=sys.stderr)
    out = [f"# `--stacks {args.hz}` on a {args.workers}-thread pool, two collectors side by side", "",
           f"tests/fixtures/pool.c: {args.workers} workers, {args.seconds:g} s, {args.rounds} rounds alternating "
           f"(baseline: `{args.baseline}`). Median [min, max].", "",
           f"Re-run: `python3 bench/stacks_pool.py --baseline {args.baseline} --rounds {args.rounds} --workers "
           f"{args.workers} --seconds {args.seconds:g} --hz {args.hz}`", "",
           "| | " + " | ".join(collectors) + " |", "|---|" + "---|" * len(collectors)]
    for key, (what, _) in [*FIGURES.items(), ("items", ("items the pool handed over", None))]:
        out.append(f"| {what} | " + " | ".join(spread([row[key] for row in rows[name]]) for name in collectors) + " |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"settings": vars(args) | {"baseline": str(args.baseline),
                                                                                   "out": str(args.out)},
                                                         "rows": rows}, indent=2))
    args.out.with_suffix(".md").write_text("\n".join(out) + "\n")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
