"""`spinscope report FILE`: verdicts first, then the evidence behind them.

The capture is analyzed (spinscope.analysis) and shown by spinscope.output.report: a terminal summary, a
self-contained HTML page (--html OUT) or a JSON document for machines (--json).
"""

from __future__ import annotations

import sys

from spinscope.analysis.capture import load
from spinscope.analysis.labels import assess
from spinscope.analysis.metrics import analyze
from spinscope.output.console import print_json, terminal, write_text
from spinscope.output.report import render_html, render_terminal, to_json


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("report", help="name the problems in a capture and show the evidence",
                                   description="Summarise a capture: verdicts (write-spin, spurious select, "
                                   "handoff overhead) first, then per-thread and per-request evidence.")
    parser.add_argument("capture", metavar="FILE", help="capture written by `spinscope record`")
    parser.add_argument("--html", metavar="OUT", help="also write a self-contained HTML report to OUT")
    parser.add_argument("--json", action="store_true", help="print the metrics and labels as JSON instead")
    parser.set_defaults(func=run)


def run(args) -> int:
    analysis = analyze(load(args.capture))
    assessment = assess(analysis)
    if args.json:
        print_json(to_json(analysis, assessment))
    else:
        render_terminal(analysis, assessment, terminal())
    if args.html:
        write_text(args.html, render_html(analysis, assessment))
        print(f"wrote {args.html}", file=sys.stderr if args.json else sys.stdout)
    return 0
