"""`spinscope doctor`: can the collector run on this host, and if not, what exactly to do about it.

Each check says ok or missing with a remedy a user can act on. Required checks decide the exit code
(0 all pass, 1 otherwise); an optional one (a collector build without --check) is only reported.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from spinscope.output import terminal
from spinscope.paths import COLLECTOR_ENV, collector_candidates, find_collector

TRACEFS = Path("/sys/kernel/tracing")
BTF = Path("/sys/kernel/btf/vmlinux")
CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF = 21, 38, 39
CHECK_TIMEOUT_S = 60

# The tracepoints the collector attaches to (collector/probes.c): the two raw syscall tracepoints,
# which it filters to the target and to the syscalls it counts, and four scheduler events.
TRACEPOINTS = ("raw_syscalls/sys_enter", "raw_syscalls/sys_exit", "sched/sched_switch", "sched/sched_waking",
               "sched/sched_process_fork", "sched/sched_process_exit")


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    remedy: str = ""
    required: bool = True


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("doctor", help="check that this host can run the collector",
                                   description="Check privileges, kernel BTF, tracefs, the tracepoints and the "
                                   "collector binary; say what is missing and how to fix it.")
    parser.set_defaults(func=run)


def run(args) -> int:
    checks = all_checks()
    console = terminal()
    table = Table(title="spinscope doctor", title_justify="left")
    for header in ("check", "status", "detail", "remedy"):
        table.add_column(header, overflow="fold")
    for check in checks:
        status = "[green]ok[/green]" if check.ok else ("[red]missing[/red]" if check.required
                                                         else "[yellow]missing (optional)[/yellow]")
        table.add_row(check.name, status, check.detail, check.remedy)
    console.print(table)
    failed = [c.name for c in checks if c.required and not c.ok]
    if failed:
        console.print(f"[bold red]not ready:[/bold red] {', '.join(failed)}")
        return 1
    console.print("[bold green]ready:[/bold green] spinscope record can run on this host")
    return 0


def all_checks() -> list:
    privileges = check_privileges()
    checks = [privileges, check_btf(), check_tracefs()]
    checks += check_tracepoints()
    collector = check_collector()
    checks.append(collector)
    if collector.ok and privileges.ok:
        checks.append(check_collector_probes(find_collector()))
    return checks


def effective_capabilities(status: Path = Path("/proc/self/status")) -> int:
    for line in status.read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def has_capability(caps: int, bit: int) -> bool:
    return bool(caps >> bit & 1)


def check_privileges() -> Check:
    name = "privileges"
    if os.geteuid() == 0:
        return Check(name, True, "running as root")
    caps = effective_capabilities()
    if has_capability(caps, CAP_BPF) and has_capability(caps, CAP_PERFMON):
        return Check(name, True, "CAP_BPF and CAP_PERFMON")
    if has_capability(caps, CAP_SYS_ADMIN):  # kernels before 5.8 know only this one
        return Check(name, True, "CAP_SYS_ADMIN")
    return Check(name, False, "not root, and neither CAP_BPF+CAP_PERFMON nor CAP_SYS_ADMIN",
                 "run as root (sudo spinscope ...), or grant the collector the capabilities: "
                 "sudo setcap cap_bpf,cap_perfmon+ep build/spinscope-collector")


def check_btf() -> Check:
    if BTF.exists():
        return Check("kernel BTF", True, str(BTF))
    return Check("kernel BTF", False, f"{BTF} not found",
                 "boot a kernel built with CONFIG_DEBUG_INFO_BTF=y (Debian, Ubuntu and Fedora kernels since "
                 "5.x ship it); the collector relocates its probes with BTF")


def check_tracefs() -> Check:
    if (TRACEFS / "events").is_dir():
        return Check("tracefs", True, f"{TRACEFS} mounted")
    return Check("tracefs", False, f"{TRACEFS}/events not found (tracefs not mounted)",
                 f"sudo mount -t tracefs nodev {TRACEFS}")


def check_tracepoints() -> list:
    """One check listing which of the collector's tracepoints are missing, if any."""
    events = TRACEFS / "events"
    if not events.is_dir():
        return [Check("tracepoints", False, "cannot be checked until tracefs is mounted",
                      f"sudo mount -t tracefs nodev {TRACEFS}")]
    missing = [point for point in TRACEPOINTS if not (events / point).is_dir()]
    return [Check("tracepoints", not missing,
                  f"{len(TRACEPOINTS) - len(missing)} of {len(TRACEPOINTS)} present"
                  + (f"; missing: {', '.join(missing)}" if missing else ""),
                  "" if not missing else "enable CONFIG_FTRACE_SYSCALLS and CONFIG_TRACEPOINTS in the "
                  "kernel; without them the collector cannot attach")]


def check_collector() -> Check:
    path = find_collector()
    if path:
        return Check("collector", True, str(path))
    looked = ", ".join(str(p) for p in collector_candidates()) or "build/spinscope-collector"
    if os.environ.get(COLLECTOR_ENV):
        remedy = f"point {COLLECTOR_ENV} at an executable spinscope-collector, or unset it"
    else:
        remedy = "build it: make collector (run scripts/setup.sh first for the toolchain)"
    return Check("collector", False, f"not found (looked at {looked})", remedy)


def check_collector_probes(collector: Path) -> Check:
    """Let the collector load and attach its probes (`--check`), the one test that proves it all works."""
    name = "probes load and attach"
    try:
        result = subprocess.run([str(collector), "--check"], capture_output=True, text=True,
                                timeout=CHECK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Check(name, False, f"{collector.name} --check did not finish in {CHECK_TIMEOUT_S} s",
                     "run it by hand to see where it hangs")
    except OSError as exc:
        return Check(name, False, f"cannot run {collector}: {exc.strerror or exc}", "rebuild it: make collector")
    output = (result.stderr.strip() or result.stdout.strip()).splitlines()
    message = output[-1] if output else ""
    if result.returncode == 0:
        return Check(name, True, f"{collector.name} --check passed")
    if any(word in message.lower() for word in ("unrecognized", "unknown option", "invalid option", "usage")):
        return Check(name, True, "skipped: this collector build has no --check", required=False)
    return Check(name, False, message or f"{collector.name} --check exited {result.returncode}",
                 "fix what the collector reports; the checks above show the usual causes")
