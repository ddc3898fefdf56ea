"""`spinscope report FILE`: verdicts first, then the evidence behind them.

The capture is analyzed (spinscope.analysis) and shown by spinscope.output.report: a terminal summary, a
self-contained HTML page (--html OUT) or a JSON document for machines (--json).
"""

from __future__ import annotations

import sys

from spinscope.analysis.capture import load
from spinscope.analysis.labels import assess
from spinscope.analysis.metrics import analyze
from spinscope.errors import UsageError
from spinscope.output import stack_files
from spinscope.output.console import print_json, terminal, write_text
from spinscope.output.report import render_html, render_terminal, to_json


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("report", help="name the problems in a capture and show the evidence",
                                   description="Summarise a capture: verdicts (write-spin, spurious select, "
                                   "handoff overhead) first, then per-thread and per-request evidence.")
    parser.add_argument("capture", metavar="FILE", help="capture written by `spinscope record`")
    parser.add_argument("--html", metavar="OUT", help="also write a self-contained HTML report to OUT")
    parser.add_argument("--json", action="store_true", help="print the metrics and labels as JSON instead")
    stacks = parser.add_argument_group("stacks", "a capture recorded with --stacks (docs/stacks.md)")
    stacks.add_argument("--folded", metavar="OUT", help="also write its CPU samples as folded lines (FlameGraph, "
                        "speedscope) to OUT: the runtime helper's where it ran, else the collector's")
    stacks.add_argument("--folded-events", metavar="OUT", help="also write its event stacks as folded lines, "
                        "weighted by the events each stands for, to OUT")
    stacks.add_argument("--pprof", metavar="OUT", help="also write its stacks as a gzipped pprof profile (go tool "
                        "pprof, Grafana Pyroscope, speedscope) to OUT: sample types cpu (the default) and events")
    stacks.add_argument("--pattern", choices=stack_files.PATTERNS, help="with the above: only that pattern's event "
                        "stacks and the CPU samples in its window (default: all of them)")
    stacks.add_argument("--all-frames", action="store_true", help="with the above: keep the runtime's own frames "
                        "between Python or Java frames (_PyEval_EvalFrameDefault, JVM stubs), left out by default")
    parser.set_defaults(func=run)


def run(args) -> int:
    exports = args.folded or args.folded_events or args.pprof
    if (args.pattern or args.all_frames) and not exports:
        raise UsageError(f"{'--pattern' if args.pattern else '--all-frames'} goes with --folded, --folded-events "
                         "or --pprof")
    analysis = analyze(load(args.capture))
    if exports:  # before anything is printed: a capture without stacks is refused first
        stack_files.chosen(analysis, args.pattern)
    assessment = assess(analysis)
    if args.json:
        print_json(to_json(analysis, assessment))
    else:
        render_terminal(analysis, assessment, terminal())
    said = sys.stderr if args.json else sys.stdout
    if args.html:
        write_text(args.html, render_html(analysis, assessment))
        print(f"wrote {args.html}", file=said)
    hidden = "" if args.all_frames else "; the runtime's own frames between Python or Java frames left out (--all-frames)"
    for out, events in ((args.folded, False), (args.folded_events, True)):
        if out:
            what = stack_files.write_folded(analysis, out, args.pattern, events, args.all_frames)
            print(f"wrote {out} (folded, {what}{hidden})", file=said)
    if args.pprof:
        what = stack_files.write_pprof(analysis, args.pprof, args.pattern, args.all_frames)
        print(f"wrote {args.pprof} (pprof, {what}{hidden})", file=said)
    return 0
