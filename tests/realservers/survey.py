#!/usr/bin/env python3
"""Record every real-server configuration once and print what spinscope sees, one row each.

    python3 tests/realservers/survey.py [--out DIR] [--only NAME ...] [--analyze-only]

Needs root (the collector). The captures stay in DIR (default build/survey) as NAME.json, with the load
generator's result as NAME.load.json; --analyze-only prints the table from those files again (with the
analyzer as it is now) instead of recording. Columns, all per request of the capture:

  requests   capture / load generator
  writes, EAGAIN, partial   write calls, EAGAIN and partial returns of requests (requests block)
  polls, zero   poll-family calls, and those that returned no event (totals)
  wakeups   wakeups between the server's own threads (sum of the wakeups edges)
  cross   share of requests answered by another thread than the one that read them
  CPU ms    on-CPU time of the server (totals.oncpu_ns)
  labels    name:severity and estimated CPU share
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from realserver_harness import CONFIGS, ROOT, Run, docroot, ensure_ready, missing_binaries, record_config  # noqa: E402

COLUMNS = ["config", "requests (capture/load)", "writes", "EAGAIN", "partial", "polls", "zero polls",
           "wakeups", "cross", "CPU ms", "labels"]


def per(n: float, requests: int, digits: int = 2) -> str:
    return f"{n / requests:.{digits}f}" if requests else "n/a"


def labels_text(run: Run) -> str:
    try:
        labels = run.assessment().labels
    except Exception as e:  # the analyzer may be mid-change: show it, keep the row
        return f"analyzer error: {type(e).__name__}: {e}"
    parts = []
    for label in labels:
        share = "" if label.cpu_share is None else f" {label.cpu_share:.1%}"
        parts.append(f"{label.name}:{label.severity}{share}")
    return ", ".join(parts) or "-"


def row(run: Run) -> list[str]:
    cap = run.capture
    req, totals = cap["requests"], cap["totals"]
    n = req["count"]
    wakeups = sum(edge["count"] for edge in cap["wakeups"])
    return [run.config.name, f"{n} / {run.load['requests']}", per(req["write_calls"], n),
            per(req["write_eagain"], n), per(req["write_partial"], n), per(totals["poll_calls"], n),
            per(totals["poll_zero"], n), per(wakeups, n, 3), per(req["cross_thread"], n, 3),
            per(totals["oncpu_ns"] / 1e6, n, 4), labels_text(run)]


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [COLUMNS, *rows]) for i in range(len(COLUMNS))]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(COLUMNS), line(["-" * w for w in widths]), *map(line, rows)])


def saved(name: str, out: Path) -> Run:
    path = out / f"{name}.json"
    return Run(CONFIGS[name], path, json.loads(path.read_text()),
               json.loads((out / f"{name}.load.json").read_text()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "survey", help="where the captures go")
    ap.add_argument("--only", nargs="+", choices=list(CONFIGS), metavar="NAME",
                    help=f"these configurations only: {', '.join(CONFIGS)}")
    ap.add_argument("--analyze-only", action="store_true", help="table from the captures in --out")
    args = ap.parse_args()
    names = args.only or list(CONFIGS)
    args.out.mkdir(parents=True, exist_ok=True)

    rows, skipped = [], []
    if args.analyze_only:
        for name in names:
            if (args.out / f"{name}.json").exists():
                rows.append(row(saved(name, args.out)))
            else:
                skipped.append(f"{name}: no capture in {args.out}")
    else:
        if os.geteuid() != 0:
            sys.exit("survey: the collector needs root")
        ensure_ready()
        with docroot() as www, tempfile.TemporaryDirectory(prefix="spinscope-survey-") as work:
            for name in names:
                config = CONFIGS[name]
                if missing := missing_binaries(config.server):
                    skipped.append(f"{name}: {', '.join(missing)} not installed")
                    continue
                print(f"survey: {name}: {config.about}; {config.load.describe()}", file=sys.stderr, flush=True)
                run = record_config(config, Path(work) / name, www, capture_dir=args.out)
                (args.out / f"{name}.load.json").write_text(json.dumps(run.load, indent=1) + "\n")
                rows.append(row(run))
    print(table(rows))
    for line in skipped:
        print(f"skipped {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
