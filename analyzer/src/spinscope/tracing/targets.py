"""What `record`, `top` and `exporter` trace, said the same way by each: the options that name a target,
declared once as an argument group each verb adds, checked once before anything is attached, and the
defaults the verbs and the collector share.

A verb says which target options it takes with a `Targets` row (RECORD, TOP, EXPORTER): one target (a
process, a cgroup, or a command the collector runs: `-- COMMAND [ARG...]`, split off by cli.main) or several
(the exporter, which also finds processes by name); record also sizes the collector's maps. `add_options` declares them, `check` refuses what the collector would refuse or misread,
with the collector's words where it has a rule of its own (collector/main.c), and resolves --cgroup to its
directory. Every refusal is a UsageError: one line, exit 2.

This module imports nothing heavy: `spinscope record --help` loads it.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass
from pathlib import Path

from spinscope.errors import UsageError

# ---------------------------------------------------------------------------------------------------------
# Defaults, in one place

# The collector's own defaults (its --help says them; tests/analyzer/test_analyzer_targets.py holds the two
# equal): a verb that does not pass an option gets these.
COLLECTOR_DEFAULTS = {
    "max-threads": 16384,  # threads the maps can hold
    "max-sockets": 65536,  # sockets with a request in flight
    "time-sample": 16,  # 1 call in N timed
    "exited-rows": 1024,  # threads gone kept as rows of their own
    "checkpoint": 10,  # seconds between rewrites of the capture so far
}
TIME_SAMPLE_MAX = 65536  # the collector's bound too
STACKS_HZ = 99  # --stacks without a rate (docs/stacks.md): off the beat of 100 Hz timers
STACKS_HZ_MAX = 1000  # the collector's bound too: cpu-clock samples are hrtimer interrupts

# The verbs' own defaults (the collector has none for these: they say how a verb drives it).
RECORD_INTERVAL_S = 1.0  # seconds between counter snapshots, used by diff to judge noise
TOP_WINDOW_S = 10.0  # seconds top judges its labels over
TOP_REFRESH_S = 1.0  # seconds between top's refreshes (the collector's --interval)
EXPORTER_WINDOW_S = 30.0  # seconds the exporter judges its labels over
EXPORTER_PORT = 9863

COMM_BYTES_MAX = 15  # Linux's comm: 16 bytes with the NUL


# ---------------------------------------------------------------------------------------------------------
# Which target options a verb takes


@dataclass(frozen=True)
class Targets:
    verb: str
    several: bool = False  # --pid and --cgroup repeatable, each a target of its own (with --comm, --exe)
    pid_ns: bool = False  # --pid-ns: the PID as a container sees it
    map_sizes: bool = False  # --max-threads, --max-sockets, --time-sample
    cgroup_may_come_later: bool = False  # a --cgroup that does not exist yet is waited for
    command: bool = False  # `-- COMMAND [ARG...]` instead of a target: the collector runs it (args.command)


RECORD = Targets("record", pid_ns=True, map_sizes=True, command=True)
TOP = Targets("top", command=True)
EXPORTER = Targets("exporter", several=True, cgroup_may_come_later=True)


def add_options(parser: argparse.ArgumentParser, spec: Targets) -> None:
    """The target options `spec` names, in a group of their own in the verb's --help."""
    if spec.command:
        parser.usage = f"spinscope {spec.verb} [options] (--pid PID | --cgroup PATH | -- COMMAND [ARG...])"
        parser.set_defaults(command=None)
    group = parser.add_argument_group("target", "what to trace" + (
        "; or, after all options, -- COMMAND [ARG...]: run the command and trace it and its children from its "
        "first syscall (its exit ends the capture; spinscope's exit status is the command's)" if spec.command else ""))
    more = " (repeatable)" if spec.several else ""
    repeat = {"action": "append", "default": []} if spec.several else {}
    group.add_argument("--pid", "-p", type=int, **repeat, help=f"a process to trace, all its threads{more}")
    if spec.pid_ns:
        group.add_argument("--pid-ns", metavar="NS",
                           help="--pid is as seen in this PID namespace (a container's): /proc/X/ns/pid of any "
                           "process X in it, or X; it is translated to this host's PID (said on stderr, not kept "
                           "in the capture)")
    if spec.several:
        group.add_argument("--comm", action="append", default=[], metavar="NAME",
                           help="every process named NAME (its /proc comm), now and later (repeatable)")
        group.add_argument("--exe", action="append", default=[], metavar="PATH",
                           help="every process running the executable PATH, now and later (repeatable)")
    group.add_argument("--cgroup", metavar="PATH", **repeat, help=_cgroup_help(spec))
    group.add_argument("--children", "-c", action="store_true",
                       help="also trace the processes a target forks, those running and those forked later "
                       "(pre-forked workers, process-per-connection, n-copy)"
                       + ("; --cgroup targets hold their children already" if spec.several else
                          "; not with --cgroup, which holds them already"))
    if spec.map_sizes:
        _add_map_sizes(parser)
    parser.add_argument_group("stacks", "where in the target's code (docs/stacks.md)").add_argument(
        "--stacks", type=int, nargs="?", const=STACKS_HZ, default=0, metavar="HZ",
        help=f"also sample the target's call stacks, HZ times a second on each CPU (default {STACKS_HZ}), tagged with "
        "what each thread was doing, and the call sites of each pattern's events; adds each label's call sites and "
        "the hand-off's user-space cost. No frame pointers or restart needed; off by default")
    parser.add_argument_group("stacks").add_argument(
        "--stacks-budget", type=int, default=0, metavar="N",
        help="with --stacks: the pattern events' stacks a second for the whole target, shared by its threads "
        "(default 4 x HZ); the events due a stack past it weigh in their thread's next stack, and the report says "
        "how many")


def _cgroup_help(spec: Targets) -> str:
    what = ("every process in this cgroup v2 and its descendants, also those that enter it later (a systemd unit, "
            "a pod); a directory of the cgroup2 mount, absolute or below it")
    if spec.several:
        return f"{what}: one target, one collector; waited for while it does not exist (repeatable)"
    return f"instead of --pid: {what}"


def _add_map_sizes(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("collector", "how much the collector holds and times")
    group.add_argument("--max-threads", type=int, metavar="N",
                       help=f"threads the maps can hold (default {COLLECTOR_DEFAULTS['max-threads']})")
    group.add_argument("--max-sockets", type=int, metavar="N",
                       help=f"sockets with a request in flight (default {COLLECTOR_DEFAULTS['max-sockets']})")
    group.add_argument("--time-sample", type=int, metavar="N",
                       help=f"time 1 call in N (a power of two; default {COLLECTOR_DEFAULTS['time-sample']}; 1: "
                       "every call, at about twice the probes' cost per call): counts stay exact, the costs are "
                       "estimates")


# ---------------------------------------------------------------------------------------------------------
# The rules, checked before anything is attached


def check(args: argparse.Namespace, spec: Targets) -> None:
    """Refuse a target the collector would refuse or misread (argparse's type=int takes `0` and `-5`), then
    resolve --cgroup to its directory. Raises UsageError."""
    _check_named(args, spec)
    if not spec.several:
        _check_cgroup_alone(args)
    for pid in _pids(args):
        if pid <= 0:
            raise UsageError(f"--pid must be a positive process id, not {pid}")
    if spec.map_sizes:
        _check_map_sizes(args)
    if not 0 <= args.stacks <= STACKS_HZ_MAX:
        raise UsageError(f"--stacks takes a rate from 1 to {STACKS_HZ_MAX} samples a second, not {args.stacks}")
    if args.stacks_budget and (args.stacks_budget < 0 or not args.stacks):
        raise UsageError("--stacks-budget takes a number of stacks a second, with --stacks")
    if spec.pid_ns:
        _check_pid_ns(args)
    for name in getattr(args, "comm", ()):
        if not name or len(name.encode()) > COMM_BYTES_MAX:
            raise UsageError(f"--comm {name!r}: a process name is 1 to {COMM_BYTES_MAX} bytes (Linux's comm)")
    _resolve_cgroups(args, spec)


def stacks_args(args: argparse.Namespace) -> list:
    """--stacks and its budget on the collector's command line, as the verb was given them (or nothing)."""
    if not getattr(args, "stacks", 0):
        return []
    budget = getattr(args, "stacks_budget", 0)
    return ["--stacks", str(args.stacks), *(["--stacks-budget", str(budget)] if budget else [])]


def collector_target(args: argparse.Namespace) -> list:
    """What selects a one-target verb's target (record, top) on the collector's command line, once checked:
    nothing for a command (the collector runs it, after its options, and follows its children itself)."""
    stacks = stacks_args(args)
    if getattr(args, "command", None):
        return stacks
    if args.cgroup is not None:
        return ["--cgroup", str(args.cgroup), *stacks]
    return ["--pid", str(args.pid)] + (["--children"] if args.children else []) + stacks


def _pids(args: argparse.Namespace) -> list:
    return args.pid if isinstance(args.pid, list) else [] if args.pid is None else [args.pid]


def _check_named(args: argparse.Namespace, spec: Targets) -> None:
    command = getattr(args, "command", None) if spec.command else None
    if command is not None:  # the collector's rules and words
        if not command:
            raise UsageError("-- must be followed by the command to run")
        if args.pid is not None or args.cgroup is not None:
            raise UsageError(f"-- COMMAND goes without {'--pid' if args.pid is not None else '--cgroup'}: the command "
                             "is the target")
        return
    if spec.several and not (args.pid or args.comm or args.exe or args.cgroup):
        raise UsageError("name a target: --pid PID, --comm NAME, --exe PATH or --cgroup PATH (each repeatable)")
    if not spec.several and args.pid is None and args.cgroup is None:
        # the collector's words, less its --check
        raise UsageError("--pid PID, --cgroup PATH or -- COMMAND is required" if spec.command else
                         "--pid PID or --cgroup PATH is required")


def _check_cgroup_alone(args: argparse.Namespace) -> None:
    """A cgroup's processes' children start in it (and a PID's cgroup may hold others): one target. The
    collector's rule and words."""
    if args.cgroup is not None and (args.pid is not None or args.children):
        raise UsageError(f"--cgroup goes without {'--pid' if args.pid is not None else '--children'}: it traces "
                         "every process in the cgroup, children included")


def _check_map_sizes(args: argparse.Namespace) -> None:
    for option, value in (("--max-threads", args.max_threads), ("--max-sockets", args.max_sockets)):
        if value is not None and value <= 0:
            raise UsageError(f"{option} must be a positive number of map entries, not {value}")
    sample = args.time_sample
    if sample is not None and not is_time_sample(sample):
        raise UsageError(f"--time-sample must be a power of two from 1 to {TIME_SAMPLE_MAX}, not {sample}")


def is_time_sample(n: int) -> bool:
    """1 call in n timed: a power of two (the probes test a mask), at most TIME_SAMPLE_MAX."""
    return 0 < n <= TIME_SAMPLE_MAX and not n & (n - 1)


def _check_pid_ns(args: argparse.Namespace) -> None:
    if args.pid_ns is not None and not args.pid_ns:
        raise UsageError("--pid-ns is empty: name a PID namespace file (/proc/PID/ns/pid) or a PID in it")
    if args.pid_ns is not None and args.pid is None:
        raise UsageError("--pid-ns goes with --pid: it says which namespace the PID is seen in")


def _resolve_cgroups(args: argparse.Namespace, spec: Targets) -> None:
    if spec.several:
        args.cgroup = [cgroup_dir(path, must_exist=not spec.cgroup_may_come_later) for path in args.cgroup]
    elif args.cgroup is not None:
        args.cgroup = str(cgroup_dir(args.cgroup))


# ---------------------------------------------------------------------------------------------------------
# --cgroup's directory


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
    (/a). Raises UsageError unless it is a directory of a cgroup v2 hierarchy. With must_exist=False (the
    exporter waits for a cgroup made later) a path that does not exist yet is returned as it will be:
    below the cgroup2 mount, unless it is already a path there."""
    if not arg:
        raise UsageError("--cgroup must name a cgroup v2 directory, not ''")
    mounts = _mounts(mountinfo)
    unified = [point for point, fstype in mounts if fstype == "cgroup2"]
    if not unified:
        raise UsageError(f"--cgroup {arg}: no cgroup v2 hierarchy is mounted on this host")
    candidate = Path(arg)
    if not candidate.is_absolute() or not candidate.exists():
        candidate = Path(unified[0]) / arg.lstrip("/")
    if not candidate.exists():
        if must_exist:
            raise UsageError(f"--cgroup {arg}: no such cgroup")
        return _cgroup_to_come(arg, unified)
    resolved = Path(os.path.realpath(candidate))
    fstype = _fstype_of(resolved, mounts)
    if fstype == "cgroup":
        raise UsageError(f"--cgroup {arg} is in a cgroup v1 hierarchy: spinscope follows cgroup v2 (the unified "
                         f"hierarchy, mounted at {unified[0]})")
    if fstype != "cgroup2":
        raise UsageError(f"--cgroup {arg} is not in a cgroup v2 hierarchy (mounted at {unified[0]})")
    if not resolved.is_dir():
        raise UsageError(f"--cgroup {arg} is a file, not a cgroup directory")
    return resolved


def _cgroup_to_come(arg: str, unified: list) -> Path:
    """Where a cgroup that does not exist yet will be: arg if it is a path below a cgroup2 mount, else below
    the first."""
    path = Path(arg)
    if not any(path.is_absolute() and Path(point) in path.parents for point in unified):
        path = Path(unified[0]) / arg.lstrip("/")
    return Path(os.path.normpath(path))


def _fstype_of(path: Path, mounts: list) -> str:
    """The file system type of the deepest mount path is on ("" if none)."""
    under = [(point, fstype) for point, fstype in mounts
             if point == "/" or path == Path(point) or Path(point) in path.parents]
    return max(under, key=lambda mount: len(mount[0]))[1] if under else ""
