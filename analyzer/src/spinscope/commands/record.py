"""`spinscope record`: run the collector against a PID, a cgroup or a command, and show progress until the
capture is written.

The collector (C, libbpf) does the work; this wrapper picks a capture name, shows a progress bar on
long captures once the collector says its probes are live, and makes sure Ctrl-C ends the capture the
way the collector expects: the signal reaches the collector (same process group, or forwarded), which
reads its maps, writes the file and detaches. The wrapper only waits for that, so an interrupted
capture is still complete.

With `-- COMMAND [ARG...]` the collector starts the command itself (held before its exec until the probes
are live: collector/command.c) and its exit status is passed on as ours. The command has the terminal:
our stdin, stdout and stderr (the collector's messages come to us on a pipe of their own, --log-fd), no
progress bar, and Ctrl-C reaches it from the terminal, not from us: we pass on SIGTERM only.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

from spinscope.errors import SpinscopeError, UsageError
from spinscope.tracing import collector, stacks_helper, targets
from spinscope.tracing.targets import cgroup_dir  # noqa: F401 (spinscope.commands.record.cgroup_dir, as before targets.py)

DEFAULT_INTERVAL_S = targets.RECORD_INTERVAL_S


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("record")  # its help and description: cli.VERBS
    targets.add_options(p, targets.RECORD)
    p.add_argument("--duration", "-d", type=float, default=0.0,
                   help="seconds to record (default: until Ctrl-C or the process exits); with -- COMMAND, the command is "
                   "then sent SIGTERM and waited for")
    p.add_argument("--output", "-o",
                   help="capture file (default: spinscope-PID-TIMESTAMP.json, spinscope-cgroup-NAME-TIMESTAMP.json or "
                   "spinscope-COMMAND-TIMESTAMP.json)")
    p.add_argument("--interval", "-i", type=float, default=DEFAULT_INTERVAL_S,
                   help=f"seconds between counter snapshots, used by diff to judge noise "
                   f"(default {DEFAULT_INTERVAL_S:g}; 0 disables)")
    p.add_argument("--cmdline", action="store_true",
                   help="keep the target's argument values in the capture (they may hold secrets; by default "
                   "only its executable and argument count)")
    p.add_argument("--hostname", action="store_true", help="keep this host's name in the capture")
    p.add_argument("--quiet", "-q", action="store_true", help="only print errors")
    p.add_argument("--ready-fd", type=int, metavar="N",
                   help="once the probes are live, write the collector's ready line (JSON) to file descriptor "
                   "N and close it (for scripts that start load only then)")
    p.set_defaults(func=run)


def collector_command(path: Path, args: argparse.Namespace, output: Path) -> list[str]:
    """The collector's options; a command (args.command) goes after them all (collector.start)."""
    # The collector ends the capture (and writes it) if this wrapper is killed outright.
    cmd = [str(path), *targets.collector_target(args), "--output", str(output), "--exit-with-parent"]
    if args.duration:
        cmd += ["--duration", f"{args.duration:g}"]
    if args.interval:
        cmd += ["--interval", f"{args.interval:g}"]
    for flag in ("cmdline", "hostname"):
        if getattr(args, flag):
            cmd.append(f"--{flag}")
    if args.max_threads:
        cmd += ["--max-threads", str(args.max_threads)]
    if args.max_sockets:
        cmd += ["--max-sockets", str(args.max_sockets)]
    if args.time_sample:
        cmd += ["--time-sample", str(args.time_sample)]
    return cmd


def default_output(args: argparse.Namespace) -> Path:
    """spinscope-PID-TIME.json, spinscope-cgroup-NAME-TIME.json (its last component), or
    spinscope-COMMAND-TIME.json (the command's file name); names in safe letters."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")

    def safe(name: str, empty: str) -> str:
        return (re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or empty)[:64]

    if args.command:
        return Path(f"spinscope-{safe(Path(args.command[0]).name, 'command')}-{stamp}.json")
    if args.cgroup is not None:
        return Path(f"spinscope-cgroup-{safe(Path(args.cgroup).name, 'root')}-{stamp}.json")
    return Path(f"spinscope-{args.pid}-{stamp}.json")


def check_options(args: argparse.Namespace) -> None:
    """Refuse what the collector would misread or fail on late, before anything runs: one line each,
    exit 2 (UsageError). (argparse's type=float takes `nan` and `inf`.)"""
    targets.check(args, targets.RECORD)
    for option, value in (("--duration", args.duration), ("--interval", args.interval)):
        if not math.isfinite(value) or value < 0:
            raise UsageError(f"{option} must be a number of seconds >= 0, not {value:g}")
    if args.output is not None:
        if not args.output:
            raise UsageError("--output is empty: name the capture file")
        if Path(args.output).is_dir():
            raise UsageError(f"--output {args.output} is a directory: name the capture file")
    if args.ready_fd is not None and not _is_open(args.ready_fd):
        raise UsageError(f"--ready-fd {args.ready_fd} is not an open file descriptor")


def run(args: argparse.Namespace) -> int:
    check_options(args)
    path = collector.find()
    if path is None:
        raise SpinscopeError(collector.not_found_message())
    from rich.console import Console

    console = Console(stderr=True, quiet=args.quiet)
    if args.pid_ns is not None:
        from spinscope.tracing import pidns

        translated = pidns.translate(args.pid, args.pid_ns)
        say(console, f"spinscope record: {translated.describe()}")
        args = argparse.Namespace(**{**vars(args), "pid": translated.host_pid})
    output = Path(args.output) if args.output else default_output(args)
    helper = _runtime_helper(args, output, console)
    argv = collector_command(path, args, output)
    if helper is not None and helper[0] is not None:  # the helper's samples get their threads' tags from it
        argv += ["--tag-timeline", str(helper[0].timeline)]
    try:
        started, messages = _start(argv, args.command)
    except BaseException:
        if helper is not None:  # no capture to fold into: the helper stopped, its samples dropped
            _fold_runtime_stacks(helper, None, console)
        raise
    proc = started.proc
    errors: list[str] = []
    relay = threading.Thread(target=_relay, args=(messages, console, args.quiet, errors), daemon=True)
    relay.start()

    # Ctrl-C in a terminal reaches the collector too (same process group); a signal sent to this
    # process alone is forwarded. Either way we wait for the collector to write the capture. With a
    # command, only SIGTERM is: SIGINT and SIGHUP come from the terminal, to the whole foreground group
    # (the collector and the command have theirs), and a second SIGINT means "now" to many servers.
    def forward(signum: int, _frame: object) -> None:
        if proc.poll() is None and (signum == signal.SIGTERM or not args.command):
            proc.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        wait_with_progress(started, args.duration, console, args.ready_fd, bar=not args.command)
        relay.join(timeout=5)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if args.command:
            messages.close()

    returncode = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    # With a command the exit status is the command's: whether the capture was written, the collector's
    # error line says.
    written = proc.returncode == 0 if not args.command else proc.returncode >= 0 and not errors
    if helper is not None:
        _fold_runtime_stacks(helper, output if written else None, console)
    if written and not args.quiet:
        say(console, f"next: spinscope report {output}")
    return returncode


def _runtime_helper(args: argparse.Namespace, output: Path, console):
    """With --stacks on a process that runs CPython, a JVM or Node: the runtime stacks helper started
    (tracing/stacks_helper.py), or the reason it is not, as (helper or None, its output, account)."""
    if not args.stacks:
        return None
    if args.command or args.cgroup is not None:  # their processes' runtimes are not known before they start
        return None, None, {"skipped": f"{'-- COMMAND' if args.command else '--cgroup'}: the runtime stacks helper is "
                            "not run (it samples known PIDs): CPython, JVM and Node frames are not named"}
    runtime = stacks_helper.runtime_of(args.pid)
    if runtime is None:
        return None
    binary = stacks_helper.find()
    if binary is None:
        reason = (f"{runtime} target: {stacks_helper.NOT_FOUND}: its runtime's frames are not named, and the "
                  "hand-off's user-space cost not measured")
        say(console, f"spinscope record: warning: {reason}")
        return None, None, {"runtime": runtime, "skipped": reason}
    out = output.with_name(output.name + ".runtime-stacks")
    helper = stacks_helper.Helper(binary, args.pid, args.stacks, out, args.children, runtime)
    if not helper.start():
        helper.cleanup()  # its timeline's directory: no collector will write there
        say(console, f"spinscope record: warning: the {runtime} stacks helper did not start: {helper.error}")
        return None, None, {"runtime": runtime, "error": helper.error}
    say(console, f"spinscope record: {runtime} target: sampling its runtime's frames with {binary.name}")
    return helper, out, {"runtime": runtime}


def _fold_runtime_stacks(started, output: Path | None, console) -> None:
    """The helper stopped and its samples folded into the capture (if one was written)."""
    helper, out, account = started
    if helper is not None:
        helper.stop()
        if helper.error:
            account["error"] = helper.error
    try:
        if output is not None and output.exists():
            stacks_helper.fold_into(output, out, account, helper.timeline if helper is not None else None)
    except (OSError, ValueError) as exc:
        say(console, f"spinscope record: warning: the runtime's stacks were not added to {output}: {exc}")
    finally:
        if out is not None:
            out.unlink(missing_ok=True)
        if helper is not None:
            helper.cleanup()


def _start(argv: list, command: list | None) -> tuple:
    """(the collector started, the file its messages come on). With a command, the command's streams are
    ours (the collector passes its own on) and the collector's messages come on a pipe."""
    if not command:
        started = collector.start(argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  errors="replace", bufsize=1)
        return started, started.proc.stderr
    log_read, log_write = os.pipe()
    try:
        started = collector.start([*argv, "--log-fd", str(log_write)], command=command, pass_fds=(log_write,))
    except BaseException:
        os.close(log_read)
        raise
    finally:
        os.close(log_write)
    return started, open(log_read, errors="replace", buffering=1)


COLLECTOR_PREFIX = "spinscope-collector: "


def _relay(messages, console, quiet: bool, errors: list) -> None:
    """The collector's lines, said as they come (with --quiet, only its errors) as `record`'s own: one
    prefix for every line of the verb, `spinscope record: error: ...` as `top` and the others say theirs;
    its errors kept in `errors`."""
    for line in messages:
        line = line.rstrip("\n")
        if line.startswith(COLLECTOR_PREFIX):
            line = "spinscope record: " + line[len(COLLECTOR_PREFIX):]
        if ": error:" in line:
            errors.append(line)
        if not quiet or ": error:" in line:
            say(console, line)


def say(console, line: str) -> None:
    """One line as written (it may quote the target's name: output.plain), never wrapped by rich: into a
    file or a pipe rich assumes 80 columns and would break a long line (a path, the closing counts) in
    two; a terminal wraps a long line itself."""
    from spinscope.output.console import plain

    console.print(plain(line), soft_wrap=True)


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def wait_with_progress(started: collector.Collector, duration: float, console, ready_fd: int | None,
                       bar: bool = True) -> None:
    """Wait for the collector, with a bar over the duration once the probes are live (TTY only, and if
    `bar`), passing its ready line on to ready_fd."""
    proc = started.proc
    try:
        ready = started.wait_ready(timeout=collector.READY_TIMEOUT_S)
    except (collector.NotReady, TimeoutError):
        proc.wait()  # it failed (its error is relayed) or is stuck loading: Ctrl-C still ends it
        return
    if ready_fd is not None:
        with os.fdopen(ready_fd, "w") as out:
            out.write(json.dumps(ready) + "\n")
    if not (bar and console.is_terminal and not console.quiet):
        proc.wait()
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    columns = [TextColumn("recording"), BarColumn(), TimeElapsedColumn()]
    if duration:
        columns.append(TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("record", total=duration or None)
        start = time.monotonic()
        while proc.poll() is None:
            progress.update(task, completed=min(time.monotonic() - start, duration or 0))
            time.sleep(0.1)
