#!/usr/bin/env python3
"""The check of a layout change: every output the analyzer writes, from a base commit and from this
checkout, compared byte for byte.

    python3 scripts/same_outputs.py [BASE]      # BASE: a commit (default main); exit 0 when all are equal

Outputs: for every bundled capture (tests/data/captures, schema1/ too) `report`, `report --json` and
`report --html`; `diff` of each capture against the next one in name order (every capture is a BEFORE and
an AFTER once) and of the pairs the README shows; `--help` of spinscope and of every verb; and, since no
bundled capture has stacks, synthetic captures with a stacks block for each pattern (tests/analyzer:
captures.py's servers with event stacks and runtime samples): their report, --json, and --folded and
--pprof per pattern. The inputs are written once and read by both trees. BASE is checked out in a
temporary git worktree (removed afterwards) and run with PYTHONPATH set to its analyzer, as this checkout
is with its own: the editable install is never what runs.

A move (code changing modules, no behaviour changing) must leave every output equal; the script names the
ones that differ and shows the first lines of each difference.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import difflib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "tests" / "data" / "captures"
VERBS = ("record", "report", "diff", "doctor", "top", "exporter", "sweep", "sweep-report")
PATTERNS = ("write-spin", "spurious-select", "handoff-overhead")
README_PAIRS = (("thread-per-conn", "reactor-split"), ("event-loop-spin-100k", "event-loop-epollout-100k"),
                ("event-loop-epollout-100k", "event-loop-spin-100k"), ("reactor-split", "reactor-worker"))


def stacked_captures(out: Path) -> list:
    """Synthetic captures with a stacks block that gives each pattern call sites and samples (written to
    `out`): the analyzer's stack_costs path, which no bundled capture exercises."""
    sys.path.insert(0, str(ROOT / "tests" / "analyzer"))
    import captures  # noqa: E402  (tests/analyzer/captures.py: the synthetic servers)

    def frame(symbol, kind="native", module="server", file=None, line=0):
        return {"kind": kind, "module": module, "address": 0x1000, "symbol": symbol, "symbol_offset": 4,
                "file": file, "line": line}

    frames = [frame("futex_wait", "kernel", "[kernel]"),
              frame("Condition.wait", "python", "[python]", "<stdlib>/threading.py", 320),
              frame("Queue.get", "python", "[python]", "<stdlib>/queue.py", 171),
              frame("WorkerThread.run", "python", "[python]", "site-packages/anyio/_backends/_asyncio.py", 800),
              frame("endpoint", "python", "[python]", "app.py", 12),
              frame("__write", module="libc.so.6", file="write.c", line=26),
              frame("spin_retry_site", file="server.c", line=42),
              frame("main", file="server.c", line=90),
              frame("epoll_wait", module="libc.so.6"),
              frame("loop_poll", file="loop.c", line=7),
              frame("pthread_cond_signal@@GLIBC_2.3.2", module="libc.so.6"),
              frame("dispatch", file="pool.c", line=30)]

    def stack(tid, chain, count, source="cpu", tags=(), weight=None):
        return {"tid": tid, "source": source, "tags": list(tags), "count": count,
                "weight": count if weight is None else weight, "frames": list(chain)}

    def block(stacks, lost=0, tail=0):
        sources = ("cpu", "spin-write", "empty-poll", "futile-wakeup", "handoff")
        return {"hz": 99, "event_budget_per_s": 99, "unwinder": "elfutils libdw 0.188",
                "records": dict.fromkeys(sources, 10), "events": dict.fromkeys(sources[1:], 10),
                "lost": {"ring_full": lost, "unique_stacks_cap": 0, "out_of_memory": 0}, "settled": True,
                "events_without_stack": {**dict.fromkeys(sources[1:], 0), "handoff": tail}, "no_user_frames": 3,
                "truncated": 0, "collector_cpu_s": 0.01, "helper": None, "frames": copy.deepcopy(frames),
                "stacks": stacks}

    docs = {}
    spin = captures.write_spin_server()
    tid = spin["threads"][0]["tid"]
    docs["stacks-write-spin"] = {**spin, "schema": 6, "stacks": block(
        [stack(tid, [5, 6, 7], 30, "spin-write", weight=900), stack(tid, [5, 6, 7], 40, "cpu", ["write-stall"]),
         stack(tid, [8, 9, 7], 20)], lost=4)}
    loop = captures.spurious_loop()
    tid = loop["threads"][0]["tid"]
    docs["stacks-spurious"] = {**loop, "stacks": block(  # schema 2: its wakeups priced by the calls' time
        [stack(tid, [8, 9, 7], 12, "empty-poll", weight=120), stack(tid, [8, 9, 7], 30, "cpu", ["empty-cycle"]),
         stack(tid, [5, 6, 7], 10)])}
    split = captures.reactor_split()
    tids = [row["tid"] for row in split["threads"]]
    docs["stacks-handoff"] = {**split, "schema": 6, "stacks": block(
        [stack(tids[1], [1, 2, 3], 30, "runtime"), stack(tids[1], [4, 3], 70, "runtime"),
         stack(tids[0], [0, 1, 2, 3], 5, "runtime"), stack(tids[0], [10, 11, 7], 40, "handoff", weight=400),
         stack(tids[0], [10, 11, 7], 9, "cpu", ["handoff"])], tail=7)}
    paths = []
    for name, doc in docs.items():
        path = out / f"{name}.json"
        path.write_text(json.dumps(doc))
        paths.append(path)
    return paths


def jobs(inputs: Path, stacked: list) -> list:
    """(output name, argv after `spinscope`, file the output is written to or None for stdout)."""
    bundled = sorted(CAPTURES.glob("*.json")) + sorted((CAPTURES / "schema1").glob("*.json"))
    out = [("help", ["--help"], None)] + [(f"help-{verb}", [verb, "--help"], None) for verb in VERBS]
    for path in bundled + stacked:
        name = path.relative_to(CAPTURES).as_posix() if path.is_relative_to(CAPTURES) else path.name
        name = name.replace("/", "-").removesuffix(".json")
        out += [(f"report-{name}", ["report", str(path)], None), (f"json-{name}", ["report", str(path), "--json"], None),
                (f"html-{name}", ["report", str(path), "--html", "{out}"], "html")]
    for path in stacked:
        name = path.stem
        out.append((f"folded-{name}", ["report", str(path), "--folded", "{out}"], "folded"))
        for pattern in PATTERNS:
            out.append((f"folded-{name}-{pattern}", ["report", str(path), "--folded", "{out}", "--pattern", pattern],
                        "folded"))
            out.append((f"pprof-{name}-{pattern}", ["report", str(path), "--pprof", "{out}", "--pattern", pattern],
                        "pb.gz"))
    pairs = [(bundled[i], bundled[(i + 1) % len(bundled)]) for i in range(len(bundled))]
    pairs += [(CAPTURES / f"{a}.json", CAPTURES / f"{b}.json") for a, b in README_PAIRS]
    pairs += [(stacked[i], stacked[(i + 1) % len(stacked)]) for i in range(len(stacked))]
    for a, b in pairs:
        out.append((f"diff-{a.stem}--{b.stem}", ["diff", str(a), str(b)], None))
        out.append((f"diffjson-{a.stem}--{b.stem}", ["diff", str(a), str(b), "--json"], None))
    return out


def run_all(tree: Path, outdir: Path, todo: list) -> None:
    """Every job with `tree`'s analyzer, into outdir (a file per job: what it printed, its exit status, and
    the file it wrote)."""
    outdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(tree / "analyzer" / "src"), "COLUMNS": "120", "LINES": "50",
           "TERM": "dumb", "NO_COLOR": "1", "TZ": "UTC", "SPINSCOPE_COLLECTOR": "/nonexistent"}
    env.pop("FORCE_COLOR", None)

    def one(job):
        name, argv, written = job
        target = f"{name}.{written}" if written else None  # relative: the same words in both runs
        argv = [target if a == "{out}" else a for a in argv]
        done = subprocess.run([sys.executable, "-m", "spinscope", *argv], capture_output=True, env=env,
                              cwd=outdir, timeout=300)
        (outdir / f"{name}.out").write_bytes(done.stdout + b"\n--- stderr\n" + done.stderr
                                             + f"\n--- exit {done.returncode}\n".encode())

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(one, todo))


def emptied(directory: Path) -> Path:
    """directory, with nothing left in it from an earlier run."""
    for old in directory.glob("*") if directory.exists() else ():
        old.unlink()
    return directory


def compare(a: Path, b: Path) -> list:
    """The names of the outputs that differ (or exist in one directory only), with a few lines of each."""
    differ = []
    names = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    for name in names:
        x, y = a / name, b / name
        if not (x.exists() and y.exists()):
            differ.append(f"{name}: only in {'the base' if x.exists() else 'this checkout'}")
            continue
        if x.read_bytes() == y.read_bytes():
            continue
        try:
            lines = list(difflib.unified_diff(x.read_text().splitlines(), y.read_text().splitlines(), "base", "here",
                                              lineterm="", n=0))[:12]
        except UnicodeDecodeError:
            lines = ["(binary)"]
        differ.append(f"{name}:\n    " + "\n    ".join(lines))
    return differ


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", nargs="?", default="main", help="the commit to compare with (default: main)")
    parser.add_argument("--keep", metavar="DIR", help="write the outputs to DIR/base-COMMIT and DIR/here and keep "
                        "them; a later run with the same DIR reuses DIR/base-COMMIT (the base's outputs) when it "
                        "was made for the same outputs")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--verify", f"{args.base}^{{commit}}"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="same-outputs-") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        inputs = work / "inputs"
        inputs.mkdir(parents=True, exist_ok=True)
        todo = jobs(inputs, stacked_captures(inputs))
        base, complete = work / f"base-{commit}", work / f"base-{commit}.complete"
        made = json.dumps([name for name, _, _ in todo])  # a base made for other outputs is made again
        if not complete.exists() or complete.read_text() != made:
            base_tree = Path(tmp) / "base-tree"
            subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(base_tree), commit], cwd=ROOT,
                           check=True)
            try:
                run_all(base_tree, emptied(base), todo)
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(base_tree)], cwd=ROOT, check=True)
            complete.write_text(made)
        here = emptied(work / "here")
        run_all(ROOT, here, todo)
        differ = compare(base, here)
    print(f"{len(todo)} outputs, base {commit[:10]} against {ROOT}: "
          + ("all equal" if not differ else f"{len(differ)} differ"))
    for line in differ:
        print(line)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
