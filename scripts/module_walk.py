#!/usr/bin/env python3
"""The walk of a computation through spinscope's modules (issue 44's measure of a layout): a depth-first
walk of its call graph as the code runs, each function entered once (its first call, with what it calls;
later calls of it are not walked again). The walk is in a module while a function of it runs; entering a
function of another module, or returning to one, moves it. Counted: stays (consecutive steps in one module
collapsed), the modules entered, and returns (stays in a module the walk had already left); and the same
with each pattern's home (a package under analysis/patterns/) as one place.

    PYTHONPATH=analyzer/src python3 scripts/module_walk.py run CAPTURE         # `spinscope report CAPTURE`
    PYTHONPATH=analyzer/src python3 scripts/module_walk.py assess CAPTURE      # every verdict
    PYTHONPATH=analyzer/src python3 scripts/module_walk.py handoff-overhead CAPTURE [--sequence]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

PATTERNS_PACKAGE = "spinscope.analysis.patterns."


def walk(fn, *args) -> list:
    """The modules the walk of fn(*args) is in, consecutive repeats collapsed."""
    seq, seen, walked = [], set(), []

    def at(name: str) -> None:
        if not seq or seq[-1] != name:
            seq.append(name)

    def profile(frame, event, arg):
        name = frame.f_globals.get("__name__", "")
        ours = name.startswith("spinscope")
        if event == "call":
            on = (walked[-1] if walked else True) and (not ours or frame.f_code not in seen)
            if ours and on:
                seen.add(frame.f_code)
                at(name)
            walked.append(on)
        elif event == "return":
            on = walked.pop() if walked else False
            caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
            if on and ours and caller.startswith("spinscope"):
                at(caller)

    sys.setprofile(profile)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return seq


def counted(seq: list) -> dict:
    seen, returns = set(), 0
    for module in seq:
        returns += module in seen
        seen.add(module)
    return {"stays": len(seq), "modules": len(seen), "returns": returns}


def as_homes(seq: list) -> list:
    out = []
    for module in seq:
        if module.startswith(PATTERNS_PACKAGE):
            module = PATTERNS_PACKAGE + module[len(PATTERNS_PACKAGE):].split(".")[0]
        if not out or out[-1] != module:
            out.append(module)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", help="run, assess, or a pattern's name (write-spin, handoff-overhead, ...)")
    parser.add_argument("capture", type=Path)
    parser.add_argument("--sequence", action="store_true", help="also print the modules in the walk's order")
    args = parser.parse_args()
    from spinscope.analysis import labels
    from spinscope.analysis.capture import load
    from spinscope.analysis.metrics import analyze
    from spinscope.analysis.patterns import PATTERNS
    from spinscope.cli import build_parser
    from spinscope.commands import report

    if args.what == "run":  # the arguments as `spinscope report CAPTURE` parses them
        fn, arg = report.run, build_parser("report").parse_args(["report", str(args.capture)])
    else:
        arg = analyze(load(args.capture))
        fn = labels.assess if args.what == "assess" else labels.detector(
            next(p for p in PATTERNS if p.name == args.what))
    with contextlib.redirect_stdout(io.StringIO()):
        fn(arg)  # once first: modules loaded and caches warm, so the walk is the computation
        seq = walk(fn, arg)
    print(json.dumps({"modules": counted(seq), "homes as one place": counted(as_homes(seq))}))
    if args.sequence:
        print(" -> ".join(m.removeprefix("spinscope.") for m in seq))
    return 0


if __name__ == "__main__":
    sys.exit(main())
