"""`spinscope diff BEFORE AFTER`: what changed between two captures of the same service.

The two captures are analyzed and compared (spinscope.analysis.comparison: the verdict, the changes
against the run-to-run noise, the labels that appeared or went), and shown by spinscope.output.diff: in the
terminal, as a self-contained HTML page (--html OUT) or as JSON (--json).
"""

from __future__ import annotations

import sys

from spinscope.analysis.capture import load
from spinscope.analysis.comparison import compare_captures
from spinscope.analysis.metrics import analyze
from spinscope.output.console import print_json, write_text
from spinscope.output.diff import render_html, render_terminal, to_json


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("diff", help="compare two captures of the same service",
                                   description="Compare BEFORE and AFTER: per-request and per-second changes of "
                                   "every metric, labels that appeared or disappeared, and whether each change "
                                   "is larger than the run-to-run noise seen between intervals.")
    parser.add_argument("before", metavar="BEFORE", help="capture of the baseline")
    parser.add_argument("after", metavar="AFTER", help="capture after the change")
    parser.add_argument("--html", metavar="OUT", help="also write a self-contained HTML comparison to OUT")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON instead")
    parser.set_defaults(func=run)


def run(args) -> int:
    comparison = compare_captures(analyze(load(args.before)), analyze(load(args.after)))
    if args.json:
        print_json(to_json(comparison))
    else:
        render_terminal(comparison)
    if args.html:
        write_text(args.html, render_html(comparison))
        print(f"wrote {args.html}", file=sys.stderr if args.json else sys.stdout)
    return 0
