"""`spinscope record`: run the collector against a PID or a cgroup and show progress until the capture is
written.

The collector (C, libbpf) does the work; this wrapper picks a capture name, shows a progress bar on
long captures once the collector says its probes are live, and makes sure Ctrl-C ends the capture the
way the collector expects: the signal reaches the collector (same process group, or forwarded), which
reads its maps, writes the file and detaches. The wrapper only waits for that, so an interrupted
capture is still complete.
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

from spinscope import collector
from spinscope.errors import SpinscopeError

DEFAULT_INTERVAL_S = 1.0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "record",
        help="attach to a running process (or a cgroup) and write a capture",
        description="Attach spinscope's probes to a running process, or to every process in a cgroup, and "
        "write a capture (JSON) when the duration ends, on Ctrl-C, or when the process exits (the cgroup is "
        "removed).",
    )
    p.add_argument("--pid", "-p", type=int, help="process to trace")
    p.add_argument("--pid-ns", metavar="NS",
                   help="--pid is as seen in this PID namespace (a container's): /proc/X/ns/pid of any process X "
                   "in it, or X; it is translated to this host's PID (said on stderr, not kept in the capture)")
    p.add_argument("--cgroup", metavar="PATH",
                   help="instead of --pid: every process in this cgroup v2 and its descendants, also those that "
                   "enter it later (a systemd unit, a pod); a directory of the cgroup2 mount, absolute or below it")
    p.add_argument("--duration", "-d", type=float, default=0.0,
                   help="seconds to record (default: until Ctrl-C or the process exits)")
    p.add_argument("--output", "-o",
                   help="capture file (default: spinscope-PID-TIMESTAMP.json)")
    p.add_argument("--interval", "-i", type=float, default=DEFAULT_INTERVAL_S,
                   help=f"seconds between counter snapshots, used by diff to judge noise "
                   f"(default {DEFAULT_INTERVAL_S:g}; 0 disables)")
    p.add_argument("--children", "-c", action="store_true",
                   help="also trace processes it forks (process-per-connection, n-copy)")
    p.add_argument("--max-threads", type=int, help="threads the maps can hold (default 16384)")
    p.add_argument("--max-sockets", type=int, help="sockets with a request in flight (default 65536)")
    p.add_argument("--time-sample", type=int, metavar="N",
                   help="time 1 call in N (a power of two; default 16; 1: every call, at about twice the "
                        "probes' cost per call): counts stay exact, the costs are estimates")
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
    # The collector ends the capture (and writes it) if this wrapper is killed outright.
    target = ["--cgroup", str(args.cgroup)] if args.cgroup is not None else ["--pid", str(args.pid)]
    cmd = [str(path), *target, "--output", str(output), "--exit-with-parent"]
    if args.duration:
        cmd += ["--duration", f"{args.duration:g}"]
    if args.interval:
        cmd += ["--interval", f"{args.interval:g}"]
    for flag in ("children", "cmdline", "hostname"):
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
    """spinscope-PID-TIME.json, or spinscope-cgroup-NAME-TIME.json (its last component, in safe letters)."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    if args.cgroup is not None:
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(args.cgroup).name).strip("._") or "root"
        return Path(f"spinscope-cgroup-{name[:64]}-{stamp}.json")
    return Path(f"spinscope-{args.pid}-{stamp}.json")


def _unescape_mountinfo(field: str) -> str:
    return re.sub(r"\\([0-3][0-7]{2})", lambda m: chr(int(m.group(1), 8)), field)


def _mounts(mountinfo: Path = Path("/proc/self/mountinfo")) -> list[tuple[str, str]]:
    """(mount point, file system type) of each mount of this process's namespace."""
    mounts = []
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return mounts
    for line in lines:
        before, _, after = line.partition(" - ")
        fields = before.split(" ")
        if len(fields) >= 5 and after:
            mounts.append((_unescape_mountinfo(fields[4]), after.split(" ")[0]))
    return mounts


def cgroup_dir(arg: str, mountinfo: Path = Path("/proc/self/mountinfo"), must_exist: bool = True) -> Path:
    """The directory --cgroup names, as the collector resolves it: a path on this host (/sys/fs/cgroup/a),
    a path below the cgroup2 mount (a), or the cgroup's path in its hierarchy as /proc/PID/cgroup shows it
    (/a). Raises SpinscopeError (exit 2) unless it is a directory of a cgroup v2 hierarchy. With
    must_exist=False (the exporter waits for a cgroup made later) a path that does not exist yet is
    returned as it will be: below the cgroup2 mount, unless it is already a path there."""
    def usage(message: str) -> SpinscopeError:
        return SpinscopeError(message, exit_code=2)

    if not arg:
        raise usage("--cgroup must name a cgroup v2 directory, not ''")
    mounts = _mounts(mountinfo)
    unified = [point for point, fstype in mounts if fstype == "cgroup2"]
    if not unified:
        raise usage(f"--cgroup {arg}: no cgroup v2 hierarchy is mounted on this host")
    candidate = Path(arg)
    if not candidate.is_absolute() or not candidate.exists():
        candidate = Path(unified[0]) / arg.lstrip("/")
    if not candidate.exists():
        if must_exist:
            raise usage(f"--cgroup {arg}: no such cgroup")
        path = Path(arg)
        if not any(path.is_absolute() and Path(point) in path.parents for point in unified):
            path = Path(unified[0]) / arg.lstrip("/")
        return Path(os.path.normpath(path))
    resolved = Path(os.path.realpath(candidate))
    under = [(point, fstype) for point, fstype in mounts
             if point == "/" or resolved == Path(point) or Path(point) in resolved.parents]
    fstype = max(under, key=lambda mount: len(mount[0]))[1] if under else ""
    if fstype == "cgroup":
        raise usage(f"--cgroup {arg} is in a cgroup v1 hierarchy: spinscope follows cgroup v2 (the unified "
                    f"hierarchy, mounted at {unified[0]})")
    if fstype != "cgroup2":
        raise usage(f"--cgroup {arg} is not in a cgroup v2 hierarchy (mounted at {unified[0]})")
    if not resolved.is_dir():
        raise usage(f"--cgroup {arg} is a file, not a cgroup directory")
    return resolved


def check_options(args: argparse.Namespace) -> None:
    """Refuse what the collector would misread or fail on late, before anything runs: one line each,
    exit 2. (argparse's type=int takes `0` and `-5`, type=float takes `nan` and `inf`.)"""
    def usage(message: str) -> SpinscopeError:
        return SpinscopeError(message, exit_code=2)

    if args.pid is None and args.cgroup is None:
        raise usage("--pid PID or --cgroup PATH is required")
    if args.cgroup is not None and (args.pid is not None or args.children):
        raise usage(f"--cgroup goes without {'--pid' if args.pid is not None else '--children'}: it traces every "
                    "process in the cgroup, children included")
    if args.pid is not None and args.pid <= 0:
        raise usage(f"--pid must be a positive process id, not {args.pid}")
    for option, value in (("--duration", args.duration), ("--interval", args.interval)):
        if not math.isfinite(value) or value < 0:
            raise usage(f"{option} must be a number of seconds >= 0, not {value:g}")
    for option, value in (("--max-threads", args.max_threads), ("--max-sockets", args.max_sockets)):
        if value is not None and value <= 0:
            raise usage(f"{option} must be a positive number of map entries, not {value}")
    sample = args.time_sample
    if sample is not None and (sample <= 0 or sample & (sample - 1) or sample > 65536):
        raise usage(f"--time-sample must be a power of two from 1 to 65536, not {sample}")
    if args.output is not None:
        if not args.output:
            raise usage("--output is empty: name the capture file")
        if Path(args.output).is_dir():
            raise usage(f"--output {args.output} is a directory: name the capture file")
    if args.pid_ns is not None and not args.pid_ns:
        raise usage("--pid-ns is empty: name a PID namespace file (/proc/PID/ns/pid) or a PID in it")
    if args.pid_ns is not None and args.pid is None:
        raise usage("--pid-ns goes with --pid: it says which namespace the PID is seen in")
    if args.ready_fd is not None and not _is_open(args.ready_fd):
        raise usage(f"--ready-fd {args.ready_fd} is not an open file descriptor")
    if args.cgroup is not None:
        args.cgroup = str(cgroup_dir(args.cgroup))


def run(args: argparse.Namespace) -> int:
    check_options(args)
    path = collector.find()
    if path is None:
        raise SpinscopeError(collector.not_found_message())
    from rich.console import Console

    from spinscope.output import plain

    console = Console(stderr=True, quiet=args.quiet)
    if args.pid_ns is not None:
        from spinscope import pidns

        translated = pidns.translate(args.pid, args.pid_ns)
        console.print(plain(f"spinscope record: {translated.describe()}"))
        args = argparse.Namespace(**{**vars(args), "pid": translated.host_pid})
    output = Path(args.output) if args.output else default_output(args)
    started = collector.start(collector_command(path, args, output), stdin=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, errors="replace", bufsize=1)
    proc = started.proc

    def relay_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            line = line.rstrip("\n")
            if not args.quiet or ": error:" in line:
                console.print(plain(line))  # it may quote the target's name

    relay = threading.Thread(target=relay_stderr, daemon=True)
    relay.start()

    # Ctrl-C in a terminal reaches the collector too (same process group); a signal sent to this
    # process alone is forwarded. Either way we wait for the collector to write the capture.
    def forward(signum: int, _frame: object) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        wait_with_progress(started, args.duration, console, args.ready_fd)
        relay.join(timeout=5)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)

    if proc.returncode == 0 and not args.quiet:
        console.print(plain(f"next: spinscope report {output}"))
    return proc.returncode if proc.returncode >= 0 else 128 - proc.returncode


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def wait_with_progress(started: collector.Collector, duration: float, console, ready_fd: int | None) -> None:
    """Wait for the collector, with a bar over the duration once the probes are live (TTY only), passing
    its ready line on to ready_fd."""
    proc = started.proc
    try:
        ready = started.wait_ready(timeout=collector.READY_TIMEOUT_S)
    except (collector.NotReady, TimeoutError):
        proc.wait()  # it failed (its error is relayed) or is stuck loading: Ctrl-C still ends it
        return
    if ready_fd is not None:
        with os.fdopen(ready_fd, "w") as out:
            out.write(json.dumps(ready) + "\n")
    if not (console.is_terminal and not console.quiet):
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
