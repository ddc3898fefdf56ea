"""`spinscope` command line: one sub-command per verb, each in its own module.

Every module named in VERBS exposes `add_parser(subparsers)` which registers its sub-command and sets
`func` (taking the parsed arguments, returning an exit code). Errors meant for the user are raised as
SpinscopeError and printed here as a single line.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from spinscope import __version__
from spinscope.errors import SpinscopeError

VERBS = ["record", "report", "diff", "doctor", "lab.sweep", "lab.sweep_report"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spinscope",
        description="Kernel-aware profiler for network servers: names write-spin, "
        "spurious select and handoff overhead in a running process.",
    )
    parser.add_argument("--version", action="version", version=f"spinscope {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True
    for verb in VERBS:
        try:
            module = importlib.import_module(f"spinscope.{verb}")
        except ModuleNotFoundError as exc:
            if exc.name != f"spinscope.{verb}":
                raise
            continue  # verb not built yet
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except SpinscopeError as exc:
        print(f"spinscope {args.verb}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"spinscope {args.verb}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
