"""`spinscope` command line: one sub-command per verb, each in its own module, imported only when chosen.

VERBS maps each verb to its module and the one line `spinscope --help` shows for it. The chosen verb's
module exposes `add_parser(subparsers)`, which registers its sub-command and sets `func` (taking the
parsed arguments, returning an exit code); every other verb gets a bare sub-command from the table, so
that help, usage and `invalid choice` errors list them all without importing any of them (the verbs
pull in pandas, matplotlib and rich: `spinscope --version` and `spinscope record` need none of it).
Errors meant for the user are raised as SpinscopeError and printed here as a single line.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from spinscope import __version__
from spinscope.errors import SpinscopeError

VERBS = {  # verb: (module, help line)
    "record": ("spinscope.record", "attach to a running process (or a cgroup) and write a capture"),
    "report": ("spinscope.report", "name the problems in a capture and show the evidence"),
    "diff": ("spinscope.diff", "compare two captures of the same service"),
    "doctor": ("spinscope.doctor", "check that this host can run the collector"),
    "top": ("spinscope.top", "watch a running server's threads live"),
    "exporter": ("spinscope.exporter", "serve live metrics of running servers to Prometheus"),
    "sweep": ("spinscope.lab.sweep", "run reference servers over a matrix of settings and record every cell"),
    "sweep-report": ("spinscope.lab.sweep_report", "compare a sweep's results with the published claims"),
}


def chosen_verb(argv: list[str]) -> str | None:
    """The verb in `argv`: its first word that is not an option (the top level has no option that takes
    a value), or None when there is none or it names no verb (argparse then says what is wrong)."""
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    return word if word in VERBS else None


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The parser with `verb`'s sub-command complete (its module imported) and the others by name only."""
    parser = argparse.ArgumentParser(
        prog="spinscope",
        description="Kernel-aware profiler for network servers: names write-spin, "
        "spurious select and handoff overhead in a running process.",
    )
    parser.add_argument("--version", action="version", version=f"spinscope {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True
    for name, (module, help_line) in VERBS.items():
        if name == verb:
            importlib.import_module(module).add_parser(sub)
        else:
            sub.add_parser(name, help=help_line)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(chosen_verb(argv)).parse_args(argv)
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
