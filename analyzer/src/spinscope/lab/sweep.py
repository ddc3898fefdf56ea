"""`spinscope sweep MATRIX -o DIR`: run the reference servers over a matrix of settings and record every cell.

The verb only drives: the matrix comes from lab.matrix, each cell is run by lab.runner, and after every
cell the tables DIR/results.parquet and DIR/results.csv are rebuilt from all cell files (lab.results), so
an interrupted sweep (Ctrl-C, SIGTERM) leaves a consistent dataset: the cell that was running is
discarded and everything it started is killed. Cells already in DIR are skipped. A sweep killed outright
(SIGKILL) cannot stop its children: the next sweep into DIR finds them by their SPINSCOPE_SWEEP tag and
stops them first.

Exit codes: 0 every cell ok; 3 the sweep finished but some cells failed (recorded in the tables);
2 invalid matrix or options; 130 interrupted.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import shutil
import signal
import sys
from pathlib import Path

from rich.text import Text

from spinscope.errors import SpinscopeError
from spinscope.fmt import fixed
from spinscope.lab import netcond, sequential
from spinscope.lab.matrix import describe, parse_matrix
from spinscope.lab.results import load_results, timestamp, write_json, write_tables
from spinscope.lab.runner import Runner, find_tools, stop_leftovers, sweep_tag
from spinscope.output.console import plain
from spinscope.untrusted import printable

EXIT_OK, EXIT_FAILED_CELLS, EXIT_INTERRUPTED = 0, 3, 130


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep")  # its help and description: cli.VERBS
    p.add_argument("matrix", metavar="MATRIX", help="matrix file (e.g. matrices/quick.toml)")
    p.add_argument("-o", "--output", metavar="DIR", required=True, type=Path, help="output directory")
    p.add_argument("--list", action="store_true", help="print the cells (id and parameters) and exit")
    p.add_argument("--only", metavar="GLOB", help="run only cells whose id or group matches GLOB")
    p.add_argument("--retry-failed", action="store_true", help="re-run cells recorded as failed")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar or per-cell lines")
    p.set_defaults(func=run)


def _summary(result: dict) -> Text:
    """One cell's outcome for its progress line (a failure's reason quotes the programs' output: plain)."""
    if result["status"] != "ok":
        return Text.assemble(("failed", "red"), plain(f": {result['error']}"))
    lg = result["loadgen"]
    m = result["analysis"]["metrics"]
    labels = ",".join(lab["name"] for lab in result["analysis"]["labels"]) or "-"
    return plain(f"{lg['throughput']:.0f} req/s p99 {fixed(lg['latency_ms'].get('p99'))} ms, "
                 f"{fixed(m.get('writes_per_request'), 1)} writes/req, {fixed(m.get('handoffs_per_request'))} "
                 f"handoffs/req, labels {labels}")


def cpu_model() -> str | None:
    """The CPU's model name from /proc/cpuinfo (the README's reproduction table names the machine by it)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return " ".join(value.split())
    except OSError:
        pass
    return None


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    matrix = parse_matrix(args.matrix)
    cells = matrix.cells
    if args.only:
        cells = [c for c in cells if fnmatch.fnmatch(c.id, args.only) or fnmatch.fnmatch(c.group, args.only)]
    if args.list:
        for cell in cells:
            print(f"{cell.id}\t{cell.group}\t{describe(cell.params)}")
        print(f"{len(cells)} cells, about {sum(c.estimate_s() for c in cells) / 60:.1f} min"
              + (f", then at most {matrix.sequential['budget_s'] / 60:.1f} min of extra repetitions for the claims "
                 f"left unsettled ({matrix.sequential['looks']} looks)" if matrix.sequential else ""), file=sys.stderr)
        return EXIT_OK
    if os.geteuid() != 0:
        raise SpinscopeError("the collector needs root (BPF): run as root")
    tools = find_tools()
    outdir: Path = args.output
    console = Console(stderr=True, quiet=args.quiet, highlight=False)
    stopped = stop_leftovers(sweep_tag(outdir))  # a sweep into outdir that was SIGKILLed left them
    if stopped:
        console.print(plain(f"sweep: stopped {len(stopped)} process{'es' if len(stopped) > 1 else ''} an earlier "
                            f"sweep in {outdir} left running: "
                            + ", ".join(f"{left.name} (pid {left.pid})" for left in stopped)))
    (outdir / "cells").mkdir(parents=True, exist_ok=True)
    (outdir / "captures").mkdir(exist_ok=True)
    for stale in (outdir / "captures").glob(".*.tmp*"):
        stale.unlink(missing_ok=True)
    shutil.copyfile(matrix.path, outdir / "matrix.toml") if matrix.path.exists() else None
    netcond.cleanup_stale()
    from spinscope.lab import diskset
    diskset.cleanup_stale()  # memory cgroups of a sweep killed outright

    done = {r["id"]: r for r in load_results(outdir)}
    todo = [c for c in cells if c.id not in done or (args.retry_failed and done[c.id]["status"] != "ok")]
    meta = {"matrix": matrix.name, "matrix_path": str(matrix.path), "description": matrix.description,
            "cells": len(cells), "needs_full": matrix.needs_full, "skipped": len(cells) - len(todo), "started_at": timestamp(),
            "host": {"kernel": os.uname().release, "ncpus": os.cpu_count(), "hostname": os.uname().nodename,
                     "cpu_model": cpu_model()},
            "sequential": ({"looks": matrix.sequential["looks"], "budget_s": matrix.sequential["budget_s"]}
                           if matrix.sequential else None),
            "netem": netcond.netem_available(), "delay": "delay line",  # delay_ms: netcond's TUN delay line
            "interrupted": False, "finished_at": None}
    write_json(outdir / "sweep.json", meta)
    if len(cells) - len(todo):
        console.print(plain(f"sweep: {len(cells) - len(todo)} of {len(cells)} cells already in {outdir}, skipped"))

    def on_term(signum, frame):
        raise KeyboardInterrupt
    old_term = signal.signal(signal.SIGTERM, on_term)
    runner = Runner(tools, outdir)
    failed = 0
    interrupted = False
    columns = [TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[cells]}"),
               TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn()]
    total_s = sum(c.estimate_s() for c in todo)
    try:
        with Progress(*columns, console=console, transient=False, disable=args.quiet) as progress:
            task = progress.add_task("sweep", total=total_s or 1, cells=f"0/{len(todo)} cells")
            count = {"done": 0, "all": len(todo)}

            def run_cells(cells: list) -> None:
                nonlocal failed
                for cell in cells:
                    progress.update(task, description=f"sweep {escape(printable(cell.group))}")  # markup
                    result = runner.run(cell)
                    write_json(outdir / "cells" / f"{cell.id}.json", result)
                    write_tables(outdir)
                    failed += result["status"] != "ok"
                    progress.console.print(Text.assemble(plain(f"{cell.id} {describe(cell.params)}: "),
                                                         _summary(result)), soft_wrap=True)
                    count["done"] += 1
                    progress.update(task, advance=cell.estimate_s(), cells=f"{count['done']}/{count['all']} cells")

            def more(cells: list) -> None:  # a sequential round (lab/sequential.py)
                count["all"] += len(cells)
                progress.update(task, total=progress.tasks[0].total + sum(c.estimate_s() for c in cells))
                run_cells(cells)

            run_cells(todo)
            if matrix.sequential and not args.only:
                meta["sequential"] = sequential.extend(matrix, outdir, more,
                                                       say=lambda line: progress.console.print(plain(line)))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        runner.close()
        signal.signal(signal.SIGTERM, old_term)
        frame = write_tables(outdir)
        meta.update(interrupted=interrupted, finished_at=timestamp())
        write_json(outdir / "sweep.json", meta)
    all_failed = int((frame["status"] != "ok").sum()) if len(frame) else 0
    if interrupted:
        console.print(plain(f"sweep: interrupted; {len(frame)} cells recorded in {outdir} (the running cell "
                            "was discarded)"))
        return EXIT_INTERRUPTED
    extra = sum(r["cells"] for r in (meta.get("sequential") or {}).get("rounds", []))
    console.print(plain(f"sweep: {len(todo) + extra} cells run{f' ({extra} extra repetitions)' if extra else ''}, "
                        f"{failed} failed ({all_failed} failed in {outdir} overall); "
                        f"tables: {outdir / 'results.parquet'}, {outdir / 'results.csv'}"))
    console.print(plain(f"next: spinscope sweep-report {outdir} --html {outdir / 'report.html'}"))
    return EXIT_FAILED_CELLS if all_failed else EXIT_OK
