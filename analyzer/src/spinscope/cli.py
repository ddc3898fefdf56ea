"""`spinscope` command line: one sub-command per verb, each in its own module, imported only when chosen.
The program, above every package (the console script and `python -m spinscope` run main): it alone names
the verbs of commands/, live/ and lab/, so that no package below imports the lab.

VERBS maps each verb to its module and the one line `spinscope --help` shows for it, DESCRIPTIONS to the
paragraph its own --help starts with: the only place either is written. The chosen verb's module exposes
`add_parser(subparsers)`, which registers its sub-command (getting its help and description from these
tables) and sets `func` (taking the parsed arguments, returning an exit code); every other verb gets a
bare sub-command from the table, so that help, usage and `invalid choice` errors list them all without
importing any of them (the verbs pull in pandas, matplotlib and rich: `spinscope --version` and
`spinscope record` need none of it).
Errors meant for the user are raised as SpinscopeError (UsageError for a command line refused, exit 2) and
printed here as a single line, the same way for every verb.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from spinscope import __version__
from spinscope.errors import SpinscopeError

VERBS = {  # verb: (module, help line)
    "record": ("spinscope.commands.record", "attach to a running process (or a cgroup) and write a capture"),
    "report": ("spinscope.commands.report", "name the problems in a capture and show the evidence"),
    "diff": ("spinscope.commands.diff", "compare two captures of the same service"),
    "doctor": ("spinscope.commands.doctor", "check that this host can run the collector"),
    "top": ("spinscope.live.top", "watch a running server's threads live"),
    "exporter": ("spinscope.live.exporter", "serve live metrics of running servers to Prometheus"),
    "sweep": ("spinscope.lab.sweep", "run reference servers over a matrix of settings and record every cell"),
    "sweep-report": ("spinscope.lab.sweep_report", "compare a sweep's results with the published claims"),
}

# Verbs that also run a command: `spinscope VERB [options] -- COMMAND [ARG...]`. Everything after the first
# `--` is the command's, whatever it looks like (its own options are its own); main() sets args.command.
COMMAND_VERBS = ("record", "top")

DESCRIPTIONS = {  # verb: the first paragraph of `spinscope VERB --help`
    "record": "Attach spinscope's probes to a running process, or to every process in a cgroup, and write a "
    "capture (JSON) when the duration ends, on Ctrl-C, or when the process exits (the cgroup is removed). With "
    "`-- COMMAND [ARG...]` instead, run the command (in this environment, directory and terminal) and trace it and "
    "its children from its first syscall: its exit ends the capture and its exit status is spinscope's (128+N if "
    "signal N killed it; 127: not found, 126: not executable). Ctrl-C reaches the command as usual; SIGTERM to "
    "spinscope is passed on to it; --duration ends the capture and sends it SIGTERM. Either way the capture is "
    "written.",
    "report": "Summarise a capture: verdicts (write-spin, spurious select, handoff overhead) first, then "
    "per-thread and per-request evidence.",
    "diff": "Compare BEFORE and AFTER: per-request and per-second changes of every metric, labels that appeared "
    "or disappeared, and whether each change is larger than the run-to-run noise seen between intervals.",
    "doctor": "Check privileges, kernel BTF, tracefs, the tracepoints and the collector binary; say what is "
    "missing and how to fix it.",
    "top": "Attach to a running process (or every process in a cgroup) and show its threads live, every second: "
    "requests, writes, EAGAINs and retries of an EAGAIN per request, empty polls, handoffs, futex wait, CPU, and "
    "the labels of the last seconds. Keys: s/S sort, r reverse, g threads or roles, q quit. With `-- COMMAND "
    "[ARG...]` instead of a target, run the command and watch it from its first syscall (q or Ctrl-C sends it "
    "SIGTERM; spinscope's exit status is the command's).",
    "exporter": "Trace running servers and serve their spinscope signals to Prometheus "
    "(http://ADDRESS:PORT/metrics; HTTPS and basic auth with --web-config). Targets: --pid (once), --comm and "
    "--exe (every process that matches, also later: restarts are picked up), --cgroup (every process in it). "
    "Repeat them for several targets.",
    "sweep": "Expand a matrix file (TOML, docs/sweep.md) into cells; for each, run a reference server under load "
    "while recording it, and collect one row per cell in DIR/results.parquet and DIR/results.csv. Re-running "
    "skips cells already in DIR. Exit: 0 all cells ok, 3 some cells failed, 2 bad matrix, 130 interrupted.",
    "sweep-report": "Read a sweep directory's results table and put each published claim next to what was "
    "measured, with a verdict: reproduced, direction reproduced, not reproduced, or not measured in this run; "
    "unstable (its repetitions disagree), too few repetitions, or needs the full matrix (or error, when judging "
    "a claim failed: exit 3). --compare DIR1 DIR2: two sweeps side by side; --readme-table DIR...: the README's "
    "table from one or more runs, with their stability.",
}


class FromTable:
    """The sub-parsers as a verb's module sees them: `add_parser(verb)` gets the verb's help line and
    description from VERBS and DESCRIPTIONS, whatever the module passes (the table is their one source)."""

    def __init__(self, sub: argparse._SubParsersAction):
        self.sub = sub

    def add_parser(self, verb: str, **kwargs) -> argparse.ArgumentParser:
        kwargs.update(help=VERBS[verb][1], description=DESCRIPTIONS[verb])
        return self.sub.add_parser(verb, **kwargs)


def chosen_verb(argv: list[str]) -> str | None:
    """The verb in `argv`: its first word that is not an option (the top level has no option that takes
    a value), or None when there is none or it names no verb (argparse then says what is wrong)."""
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    return word if word in VERBS else None


def split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """(argv before the first `--`, the command after it), or (argv, None) without a `--`."""
    if "--" not in argv:
        return argv, None
    at = argv.index("--")
    return argv[:at], argv[at + 1:]


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
            importlib.import_module(module).add_parser(FromTable(sub))
        else:
            sub.add_parser(name, help=help_line)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    verb = chosen_verb(argv)
    command = None
    if verb in COMMAND_VERBS:
        argv, command = split_command(argv)
    args = build_parser(verb).parse_args(argv)
    if verb in COMMAND_VERBS:
        args.command = command
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
