"""`spinscope doctor`: can the collector run on this host, and if not, what exactly to do about it.

The checks are the collector's own (`spinscope-collector --check --json`: privileges, kernel BTF,
tracefs, the tracepoints, the kernel's release against the oldest the probes load on, the BPF features a
part of the capture needs, loading and attaching the probes), so doctor and the collector cannot
disagree; doctor adds only finding the collector (which one, and from where: $SPINSCOPE_COLLECTOR, the
checkout's build, the one bundled with the package, or PATH), and renders each check as ok, missing, off (an
optional check: what it names is left out of captures, which say so) or skipped, with a remedy a user can
act on. Exit code 0 when all but the optional pass, 1 otherwise.
"""

from __future__ import annotations

import os
import subprocess

from spinscope.tracing import collector, stacks_helper
from spinscope.tracing.collector import Check

CHECK_TIMEOUT_S = 60


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("doctor")  # its help and description: cli.VERBS
    parser.set_defaults(func=run)


def run(args) -> int:
    from rich.table import Table

    from spinscope.output.console import plain, terminal

    checks = all_checks()
    console = terminal()
    table = Table(title="spinscope doctor", title_justify="left")
    for header in ("check", "status", "detail", "remedy"):
        table.add_column(header, overflow="fold")
    for check in checks:  # the collector wrote the names, details and remedies: plain text
        status = (plain("ok", "green") if check.ok else plain("skipped", "yellow") if check.skipped
                  else plain("off", "yellow") if check.optional else plain("missing", "red"))
        table.add_row(plain(check.name), status, plain(check.detail), plain(check.remedy))
    console.print(table)
    failed = [c.name for c in checks if not c.ok and not c.skipped and not c.optional]
    if failed:
        console.print(plain("not ready:", "bold red"), plain(", ".join(failed)))
        return 1
    console.print(plain("ready:", "bold green"), "spinscope record can run on this host")
    return 0


def all_checks() -> list[Check]:
    found = check_collector()
    if not found.ok:
        return [found]
    path = collector.find()
    try:
        return [found, *collector.run_checks(path, CHECK_TIMEOUT_S), check_stacks_helper()]
    except subprocess.TimeoutExpired:
        failure = f"{path.name} --check did not finish in {CHECK_TIMEOUT_S} s", "run it by hand to see where it hangs"
    except OSError as exc:
        failure = f"cannot run {path}: {exc.strerror or exc}", "rebuild it: make collector"
    except ValueError as exc:  # no report: a collector older than --check --json, or one that crashed
        failure = str(exc), "rebuild it: make collector"
    return [found, Check("host checks", False, *failure)]


def check_collector() -> Check:
    """Which collector record would run, and where it was found (the lookup order: spinscope.tracing.collector)."""
    found = collector.locate()
    if found:
        return Check("collector", True, str(found))
    looked = ", ".join(str(p) for p in collector.candidates())
    if os.environ.get(collector.COLLECTOR_ENV):
        remedy = f"point {collector.COLLECTOR_ENV} at an executable spinscope-collector, or unset it"
    else:
        remedy = ("install the wheel from `make dist` (it carries the collector), put spinscope-collector on "
                  "PATH, or in a checkout build it: make collector (scripts/setup.sh installs the toolchain)")
    return Check("collector", False, f"not found (looked at {looked}, and on PATH)", remedy)


def check_stacks_helper() -> Check:
    """The runtime stacks helper `record --stacks` runs beside the collector on CPython, JVM and Node targets:
    optional (without it --stacks unwinds native code only), so never a reason the host is not ready."""
    helper = stacks_helper.find()
    if helper:
        return Check("stacks helper", True, f"{helper} (names CPython, JVM and Node frames for --stacks)")
    return Check("stacks helper", False, "not built: --stacks names native frames only on CPython, JVM and Node "
                 "targets", "scripts/build-stacks-helper.sh (Go from the module proxy; make setup runs it)",
                 skipped=True)
