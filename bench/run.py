#!/usr/bin/env python3
"""`make bench`: what spinscope costs a traced server, against the tools people use today, and whether
its counts can be trusted. Writes bench/results/overhead.md and overhead.json.

1. Overhead: a busy server (refserver event-loop, nginx with one worker; 100 B and 100 KB responses;
   closed loop; server pinned to CPU 0, load generator to CPU 1) measured untraced then traced, in
   pairs (A B A B ...), by spinscope, bpftrace with an equivalent script, perf trace -s, strace -f -c
   and libbpf-tools' syscount. Per tool: throughput ratio traced/untraced (median and spread over the
   pairs), p99 latency ratio, the tracer's own CPU, and time to attach.
2. Per-event cost: a tight loop of zero-timeout epoll_wait calls, untraced vs traced: nanoseconds
   added per call, for the traced process and for a bystander process.
3. Accuracy: spinscope's write, EAGAIN and poll counts against strace's on the same run, and its
   request count against the reference server's USDT probes and the load generator.
4. Scale: collector cost per event and map memory as threads (thread-per-conn) and connections
   (event-loop) grow; drops reported by the capture.

The machine is noisy: only ratios measured side by side are reported, never absolute speeds.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from spinscope.lab import refserver

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
RESULTS = ROOT / "bench" / "results"
COLLECTOR = BUILD / "spinscope-collector"
SERVER_CPU, LOAD_CPU = "0", "1"

# The same signals spinscope records, for bpftrace: socket-ish write calls and their EAGAINs, poll
# calls and their empty returns, futex waits, context switches. ($1 is the target PID.)
BPFTRACE_SCRIPT = r"""
tracepoint:syscalls:sys_enter_write, tracepoint:syscalls:sys_enter_writev,
tracepoint:syscalls:sys_enter_sendto, tracepoint:syscalls:sys_enter_sendmsg,
tracepoint:syscalls:sys_enter_sendfile64 /pid == $1/ { @writes[tid] = count(); }
tracepoint:syscalls:sys_exit_write, tracepoint:syscalls:sys_exit_writev,
tracepoint:syscalls:sys_exit_sendto, tracepoint:syscalls:sys_exit_sendmsg,
tracepoint:syscalls:sys_exit_sendfile64 /pid == $1 && args->ret == -11/ { @eagain[tid] = count(); }
tracepoint:syscalls:sys_enter_read, tracepoint:syscalls:sys_enter_recvfrom /pid == $1/ { @reads[tid] = count(); }
tracepoint:syscalls:sys_exit_epoll_wait, tracepoint:syscalls:sys_exit_epoll_pwait,
tracepoint:syscalls:sys_exit_poll, tracepoint:syscalls:sys_exit_select /pid == $1/ {
  @polls[tid] = count(); if (args->ret == 0) { @zero[tid] = count(); } }
tracepoint:syscalls:sys_enter_futex /pid == $1/ { @futex[tid] = count(); }
tracepoint:sched:sched_switch /pid == $1/ { @cs[tid] = count(); }
BEGIN { printf("ready\n"); }
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def pinned(cpu: str, cmd: list) -> list:
    return ["taskset", "-c", cpu, *cmd]


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (and its reaped children), in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = sum(int(x) for x in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list:
    """pid and every process below it, now (the exporter's collectors are its children)."""
    children: dict = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of a process, the children it has reaped, and the ones still running."""
    return sum(cpu_seconds(p) for p in descendants(pid))


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of a process and the processes below it, now."""
    total = 0
    for p in descendants(pid):
        try:
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            pass
    return total


class Lines:
    """The lines of a process's output stream, read on a thread: wait for one with a timeout, and the
    pipe never fills up however chatty the process is."""

    def __init__(self, stream):
        self.queue: queue.Queue = queue.Queue()
        self.seen: list = []
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream) -> None:
        for line in stream:
            self.queue.put(line.rstrip("\n"))
        self.queue.put(None)

    def wait_for(self, pattern: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                raise RuntimeError(f"no line matching {pattern!r} within {timeout}s; saw {self.seen[-5:]!r}")
            self.seen.append(line)
            if re.search(pattern, line):
                return line


# ------------------------------------------------------------------------------------------------
# Servers


@dataclass
class Server:
    name: str
    proc: subprocess.Popen
    pid: int  # the process to trace (nginx: the single worker)
    port: int
    workdir: Path | None = None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def start_refserver(arch: str = "event-loop", *args: str) -> Server:
    cmd = refserver.command(arch, *args, program=str(BUILD / "refserver"))
    server = refserver.start(pinned(SERVER_CPU, cmd), stdin=subprocess.DEVNULL)
    return Server(f"refserver {arch}", server.proc, server.proc.pid, server.port)


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx() -> Server:
    """nginx with one worker serving the same paths as refserver from static files; master_process off
    so the one process we trace is the one serving."""
    work = Path(tempfile.mkdtemp(prefix="spinscope-nginx-"))
    (work / "root" / "bytes").mkdir(parents=True)
    for size in (100, 102400):
        (work / "root" / "bytes" / str(size)).write_bytes(bytes(ord("a") + i % 26 for i in range(size)))
    port = free_port()
    (work / "nginx.conf").write_text(textwrap.dedent(f"""
        daemon off; master_process off; worker_processes 1;
        pid {work}/nginx.pid; error_log {work}/error.log;
        events {{ worker_connections 16384; }}
        http {{
          access_log off; sendfile on; tcp_nopush on; keepalive_requests 10000000;
          default_type application/octet-stream;
          client_body_temp_path {work}/tmp; proxy_temp_path {work}/tmp; fastcgi_temp_path {work}/tmp;
          uwsgi_temp_path {work}/tmp; scgi_temp_path {work}/tmp;
          server {{ listen 127.0.0.1:{port}; root {work}/root; }}
        }}"""))
    proc = subprocess.Popen(pinned(SERVER_CPU, ["nginx", "-c", str(work / "nginx.conf"), "-p", str(work)]),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import socket
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return Server("nginx", proc, proc.pid, port, work)
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("nginx did not start")


def loadgen(port: int, path: str, seconds: float, concurrency: int = 100, *extra: str,
            server_pid: int | None = None) -> dict:
    """Run the load generator; with server_pid, also the server's CPU seconds per request (the
    cost a tracer adds runs in the server's own context, and unlike throughput this is not moved
    by other guests stealing the CPU)."""
    cpu0 = cpu_seconds(server_pid) if server_pid else 0.0
    out = subprocess.run(pinned(LOAD_CPU, [str(BUILD / "loadgen"), "--port", str(port), "--path", path,
                                           "--concurrency", str(concurrency), "--duration", str(seconds),
                                           "--json", *extra]),
                         capture_output=True, text=True, timeout=seconds + 60)
    if out.returncode != 0:
        raise RuntimeError(f"loadgen failed: {out.stderr.strip()}")
    result = json.loads(out.stdout)
    if server_pid and result["requests"]:
        result["server_cpu_us_per_request"] = (cpu_seconds(server_pid) - cpu0) / result["requests"] * 1e6
    return result


# ------------------------------------------------------------------------------------------------
# Tracers


@dataclass
class Tracer:
    """How to run one tool against a PID: its command, and the line that says its probes are live."""
    name: str
    command: callable  # (pid, workdir) -> argv
    ready: str | None  # regex on stderr/stdout; None: no signal, wait READY_GRACE_S
    ready_stream: str = "stderr"
    stop_signal: int = signal.SIGINT
    available: callable = lambda: True

    READY_GRACE_S = 2.0


def spinscope_cmd(pid, work, collector=None, *extra):
    # The collector's readiness line (docs: --ready-fd) on its otherwise unused stdout.
    return [str(collector or COLLECTOR), "--pid", str(pid), "-o", str(work / "capture.json"), "--ready-fd", "1",
            *extra]


def bpftrace_cmd(pid, work):
    script = work / "equivalent.bt"
    script.write_text(BPFTRACE_SCRIPT)
    return ["bpftrace", str(script), str(pid)]


SPINSCOPE_READY = r'^\{"ready": true'


def exporter_cmd(pid, work, *extra):
    return [sys.executable, "-m", "spinscope", "exporter", "--pid", str(pid), "--port", str(free_port()), *extra]


# The live part's tools: the one-shot recorder against the exporter, continuous and duty-cycled (the
# duty cycle is shortened to fit a run: 2 s of every 6, where a fleet would use 10/60).
LIVE_DUTY = "2/6"
LIVE_TRACERS = [
    Tracer("exporter", exporter_cmd, r"tracing PID"),
    Tracer(f"exporter --duty {LIVE_DUTY}", lambda pid, w: exporter_cmd(pid, w, "--duty", LIVE_DUTY), r"tracing PID"),
]
TRACERS = [
    Tracer("spinscope", spinscope_cmd, SPINSCOPE_READY, "stdout"),
    # Every call timed (the default times 1 in 16): what exact call times cost.
    Tracer("spinscope --time-sample 1", lambda pid, w: spinscope_cmd(pid, w, None, "--time-sample", "1"),
           SPINSCOPE_READY, "stdout"),
    Tracer("bpftrace", bpftrace_cmd, r"^ready", "stdout", available=lambda: shutil.which("bpftrace")),
    Tracer("perf trace -s", lambda pid, w: ["perf", "trace", "-s", "-p", str(pid), "-o", str(w / "perf.txt")],
           None, available=lambda: shutil.which("perf")),
    Tracer("strace -f -c", lambda pid, w: ["strace", "-f", "-c", "-p", str(pid), "-o", str(w / "strace.txt")],
           r"attached", available=lambda: shutil.which("strace")),
    # stdbuf: syscount announces itself with printf, which stays in stdio's buffer on a pipe
    Tracer("syscount (libbpf-tools)", lambda pid, w: ["stdbuf", "-oL", "syscount", "-p", str(pid)],
           r"Tracing syscalls", "stdout", available=lambda: shutil.which("syscount")),
]


def tracer(name: str) -> Tracer:
    return next(t for t in TRACERS if t.name == name)


@dataclass
class Running:
    tracer: Tracer
    proc: subprocess.Popen
    attach_s: float | None
    cpu_start: float
    work: Path
    stdout: Lines
    rss_bytes: int = 0

    def stop(self) -> float:
        """Stop the tracer; return the CPU seconds it (and the processes it started) used while running.
        Its resident memory just before is left in self.rss_bytes."""
        used = tree_cpu_seconds(self.proc.pid) - self.cpu_start
        self.rss_bytes = tree_rss_bytes(self.proc.pid)
        if self.proc.poll() is None:
            self.proc.send_signal(self.tracer.stop_signal)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return used


def start_tracer(tracer: Tracer, pid: int, work: Path) -> Running:
    t0 = time.monotonic()
    proc = subprocess.Popen(pinned(LOAD_CPU, tracer.command(pid, work)), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    out, err = Lines(proc.stdout), Lines(proc.stderr)
    try:
        if tracer.ready:
            (err if tracer.ready_stream == "stderr" else out).wait_for(tracer.ready, 60)
            attach = time.monotonic() - t0
        else:
            time.sleep(Tracer.READY_GRACE_S)
            attach = None
    except RuntimeError:
        proc.kill()
        proc.wait()
        raise
    return Running(tracer, proc, attach, tree_cpu_seconds(proc.pid), work, out)


# ------------------------------------------------------------------------------------------------
# 1. Overhead


@dataclass
class Sample:
    """One traced run, with the untraced runs just before and after it on the same server."""
    before: dict
    traced: dict
    after: dict
    tracer_cpu: float
    attach_s: float | None
    tracer_rss_bytes: int = 0

    def ratio(self, key) -> float:
        base = (key(self.before) + key(self.after)) / 2
        return key(self.traced) / base if base else float("nan")


@dataclass
class Case:
    target: str
    path: str
    tool: str
    samples: list = field(default_factory=list)
    error: str | None = None

    def summary(self) -> dict:
        row = {"target": self.target, "path": self.path, "tool": self.tool, "samples": len(self.samples),
               "error": self.error}
        if not self.samples:
            return row
        ratios = [s.ratio(lambda r: r["throughput"]) for s in self.samples]
        p99 = [s.ratio(lambda r: r["latency_ms"]["p99"]) for s in self.samples]
        cpu = [s.ratio(lambda r: r["server_cpu_us_per_request"]) for s in self.samples]
        attach = [s.attach_s for s in self.samples if s.attach_s is not None]
        row.update({
            "throughput_ratio_median": statistics.median(ratios),
            "throughput_ratio_min": min(ratios), "throughput_ratio_max": max(ratios),
            "p99_ratio_median": statistics.median(p99),
            "server_cpu_per_request_ratio_median": statistics.median(cpu),
            "server_cpu_per_request_ratio_min": min(cpu), "server_cpu_per_request_ratio_max": max(cpu),
            "untraced_server_cpu_us_per_request": statistics.median(
                s.before["server_cpu_us_per_request"] for s in self.samples),
            "tracer_cpu_share": statistics.median(s.tracer_cpu for s in self.samples),
            "tracer_rss_bytes_median": statistics.median(s.tracer_rss_bytes for s in self.samples),
            "attach_s_median": statistics.median(attach) if attach else None,
            "untraced_rps_median": statistics.median(s.before["throughput"] for s in self.samples),
        })
        return row


def overhead(args) -> list:
    """Every tool on both servers and both sizes (the --tools, --targets and --paths given)."""
    tools = [t for t in TRACERS if t.available() and (not args.tools or t.name.split()[0] in args.tools)]
    return compare_tools(args, tools, args.targets, args.paths or ("/bytes/100", "/bytes/102400"), args.seconds)


def live_cost(args) -> list:
    """The exporter, continuous and duty-cycled, against the one-shot recorder, on both servers at 100 B:
    what each costs the target, and the tracer's own CPU and memory (the exporter's Python and its
    collectors together). Runs are 4x as long as the overhead part's, so a duty-cycled run holds two
    cycles. No scrapes: the exporter's cost here is following the stream and judging the labels."""
    tools = [tracer("spinscope"), *LIVE_TRACERS]
    return compare_tools(args, tools, args.targets, ("/bytes/100",), args.seconds * 4)


def compare_tools(args, tools: list, only_targets, paths, seconds: float) -> list:
    """Rounds of U T1 U T2 U ... U: each traced run is compared with the mean of the untraced runs on
    either side of it, so slow drift of the machine cancels out; the tools take turns within a round."""
    targets = {"event-loop": lambda: start_refserver("event-loop"), "nginx": start_nginx}
    summaries = []
    for target_name, start in targets.items():
        if target_name == "nginx" and not shutil.which("nginx"):
            log("bench: nginx not installed; skipping it")
            continue
        if only_targets and target_name not in only_targets:
            continue
        for path in paths:
            cases = {tool.name: Case(target_name, path, tool.name) for tool in tools}
            server = start()
            try:
                loadgen(server.port, path, 1.0)  # warm up
                run = lambda: loadgen(server.port, path, seconds, server_pid=server.pid)  # noqa: E731
                for _ in range(args.pairs):
                    before = run()
                    for tool in tools:
                        case = cases[tool.name]
                        if case.error:
                            continue
                        try:
                            with tempfile.TemporaryDirectory(prefix="spinscope-bench-") as work:
                                running = start_tracer(tool, server.pid, Path(work))
                                traced = run()
                                cpu = running.stop()
                        except (RuntimeError, subprocess.TimeoutExpired) as exc:
                            case.error = str(exc)
                            log(f"bench: {tool.name} failed on {target_name} {path}: {exc}")
                            continue
                        after = run()
                        case.samples.append(Sample(before, traced, after, cpu / seconds, running.attach_s,
                                                   running.rss_bytes))
                        before = after
            finally:
                server.stop()
            for case in cases.values():
                s = case.summary()
                summaries.append(s)
                if case.samples:
                    log(f"bench: {target_name} {path} {case.tool}: throughput x{s['throughput_ratio_median']:.3f} "
                        f"[{s['throughput_ratio_min']:.3f}, {s['throughput_ratio_max']:.3f}], "
                        f"p99 x{s['p99_ratio_median']:.2f}, server CPU/request "
                        f"x{s['server_cpu_per_request_ratio_median']:.3f}")
    return summaries


# ------------------------------------------------------------------------------------------------
# 2. Per-event cost


def syscall_cost_once(mode: str, trace: str, tool: Tracer | None, calls: int,
                      program_stats: list | None = None) -> float:
    """ns per call of `syscall_cost MODE`, with tool attached to it (trace=self), to a bystander
    (trace=other), or not at all. With program_stats, the collector's per-program stats are appended to
    it just before the calls and just after them (while its programs are still attached)."""
    proc = subprocess.Popen(pinned(SERVER_CPU, [str(BUILD / "syscall_cost"), mode, str(calls)]),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    pid = int(proc.stdout.readline().split()[1])
    bystander = running = None
    with tempfile.TemporaryDirectory(prefix="spinscope-bench-") as work:
        try:
            if trace != "none":
                if trace == "other":
                    bystander = subprocess.Popen(["sleep", "300"])
                running = start_tracer(tool, bystander.pid if bystander else pid, Path(work))
            if program_stats is not None:
                program_stats.append(collector_prog_stats(running.proc.pid))
            proc.stdin.write("go\n")
            proc.stdin.flush()
            result = json.loads(proc.stdout.readline())
            if program_stats is not None:
                program_stats.append(collector_prog_stats(running.proc.pid))
            proc.stdin.close()  # it exits at the end of its input
            proc.wait(timeout=30)
        finally:
            if running:
                running.stop()
            if bystander:
                bystander.kill()
                bystander.wait()
    return result["ns_per_call"]


# The calls of bench/syscall_cost.c timed and traced: a poll, a channel's write and read (a socket pair in
# one process: the write's loop drains it, one read per write), and a server's read and write on an accepted
# TCP connection (a request read, its response written: the path of every served request).
CALLS = ("epoll", "write", "read", "serve-read", "serve-write")
# ...and the same server's calls on an HTTP/2 connection, each a 17-byte frame the probes' walk reads (its
# cost per call: these against serve-read and serve-write; `--modes h2-read h2-write serve-read serve-write`).
H2_CALLS = ("h2-read", "h2-write")
# A syscall no tracer here counts: under bpf_stats, what one run of a program costs that does nothing (the
# stats' own clock reads and the dispatch), subtracted from every run to compare programs' own work.
FLOOR_CALL = "getppid"


def per_event_cost(args) -> list:
    rows = []
    # syscount counts every syscall by number and nothing else: the floor of a syscall-tracepoint tool.
    tools = [t for t in TRACERS if t.name.split()[0] in ("spinscope", "bpftrace", "syscount") and t.available()
             and (not args.tools or t.name.split()[0] in args.tools)]
    for mode in CALLS:
        base = [syscall_cost_once(mode, "none", None, args.calls) for _ in range(args.repeat)]
        for tool in tools:
            for trace in ("self", "other"):
                traced = [syscall_cost_once(mode, trace, tool, args.calls) for _ in range(args.repeat)]
                # min of repeats: the least-disturbed run of each, as with any microbenchmark here
                row = {"call": mode, "tool": tool.name, "traced": "the target" if trace == "self" else
                       "a bystander", "untraced_ns": min(base), "traced_ns": min(traced),
                       "added_ns": min(traced) - min(base)}
                rows.append(row)
                log(f"bench: {mode} {tool.name} ({row['traced']}): +{row['added_ns']:.0f} ns per call")
    return rows


# What each kind of probe costs a syscall that is not its target's, by kind: the floor under any design.
# bpftrace attaches each through a perf event (raw_syscalls too), with a PID filter and a count.
PROBE_KINDS = [
    ("raw_syscalls:sys_exit", "tracepoint:raw_syscalls:sys_exit /pid == $1/ { @c = count(); }"),
    ("syscalls:sys_exit_futex (another syscall)", "tracepoint:syscalls:sys_exit_futex /pid == $1/ { @c = count(); }"),
    ("syscalls:sys_exit_epoll_wait (this syscall)",
     "tracepoint:syscalls:sys_exit_epoll_wait /pid == $1/ { @c = count(); }"),
    ("sock:sock_send_length", "tracepoint:sock:sock_send_length /pid == $1/ { @c = count(); }"),
    ("sched:sched_switch", "tracepoint:sched:sched_switch /pid == $1/ { @c = count(); }"),
]


def probe_kinds(args) -> list:
    """A bystander's zero-timeout epoll_wait under one probe of each kind (bpftrace, filtered to a
    sleeping process), next to spinscope and syscount: which probes put every syscall of every process
    on a slow path, and how slow. Min of --repeat runs each."""
    def script_tracer(name: str, script: str) -> Tracer:
        def command(pid, work):
            path = work / "probe.bt"
            path.write_text(script + '\nBEGIN { printf("ready\\n"); }\n')
            return ["bpftrace", str(path), str(pid)]
        return Tracer(f"bpftrace {name}", command, r"^ready", "stdout")

    if not shutil.which("bpftrace"):
        log("bench: bpftrace not installed; skipping probe_kinds")
        return []
    tools = [script_tracer(name, script) for name, script in PROBE_KINDS] + [
        t for t in (tracer("spinscope"), tracer("syscount (libbpf-tools)")) if t.available()]
    base = min(syscall_cost_once("epoll", "none", None, args.calls) for _ in range(args.repeat))
    rows = []
    for tool in tools:
        traced = min(syscall_cost_once("epoll", "other", tool, args.calls) for _ in range(args.repeat))
        rows.append({"tool": tool.name, "untraced_ns": base, "traced_ns": traced, "added_ns": traced - base})
        log(f"bench: a bystander's epoll_wait under {tool.name}: +{traced - base:.0f} ns")
    return rows


def spinscope_variants(args) -> list:
    """The spinscope rows to compare program by program: the default, and --baseline's collector."""
    return [t for t in TRACERS if t.name.startswith("spinscope") and "time-sample" not in t.name]


def program_costs(args) -> list:
    """Per BPF program, with kernel.bpf_stats_enabled: runs per traced call and ns per run, for the
    target's calls and a bystander's, so each probe change's effect shows program by program; the median of
    --repeat runs. (The stats add two clock reads to every run: compare these figures with each other, not
    with the per-call cost above; program_summary takes the per-run floor off.)"""
    rows = []
    # syscount's one program (it counts at sys_exit and attaches nothing at sys_enter) is the floor
    tools = spinscope_variants(args) + [t for t in TRACERS if t.name.startswith("syscount") and t.available()]
    runs = [(tool, mode, trace) for tool in tools for mode in args.modes or CALLS for trace in ("self", "other")]
    runs.append((tools[0], FLOOR_CALL, "self"))  # the per-run floor (see FLOOR_CALL)
    for tool, mode, trace in runs:
        samples: dict = {}  # program -> [(runs per call, ns per run)], one per repetition
        for _ in range(args.repeat):
            snapshots: list = []
            bpf_stats(True)
            try:
                syscall_cost_once(mode, trace, tool, args.calls, program_stats=snapshots)
            finally:
                bpf_stats(False)
            before, after = snapshots
            for name in after:
                runs = after[name][0] - before.get(name, (0, 0))[0]
                if runs:
                    ns = (after[name][1] - before.get(name, (0, 0))[1]) / runs
                    samples.setdefault(name, []).append((runs / args.calls, ns))
        for name in sorted(samples):
            # the median run of each program: one disturbed repetition (a test's load meanwhile) moves it little
            per_call, ns = statistics.median(x[0] for x in samples[name]), statistics.median(x[1] for x in samples[name])
            rows.append({"tool": tool.name, "call": mode, "traced": "the target" if trace == "self" else "a bystander",
                         "program": name, "runs_per_call": per_call, "ns_per_run": ns})
            log(f"bench: {tool.name} {mode} ({rows[-1]['traced']}) {name}: {per_call:.2f} runs per call, "
                f"{ns:.0f} ns per run")
    return rows


def load_program_costs(args) -> list:
    """Per BPF program under a server's load (100 B responses): runs per request and ns per run, for each
    spinscope variant, with the map memory its collector holds."""
    rows = []
    targets = {"event-loop": lambda: start_refserver("event-loop"), "nginx": start_nginx}
    for target_name, start in targets.items():
        if target_name == "nginx" and not shutil.which("nginx"):
            continue
        server = start()
        try:
            loadgen(server.port, "/bytes/100", 1.0)  # warm up
            for tool in spinscope_variants(args):
                with tempfile.TemporaryDirectory(prefix="spinscope-bench-") as work:
                    bpf_stats(True)
                    try:
                        running = start_tracer(tool, server.pid, Path(work))
                        before = collector_prog_stats(running.proc.pid)
                        load = loadgen(server.port, "/bytes/100", args.seconds)
                        after = collector_prog_stats(running.proc.pid)
                        maps = collector_map_bytes(running.proc.pid)  # after the load: the maps grow with use
                        running.stop()
                    finally:
                        bpf_stats(False)
                for name in sorted(after):
                    runs = after[name][0] - before.get(name, (0, 0))[0]
                    if runs and load["requests"]:
                        ns = (after[name][1] - before.get(name, (0, 0))[1]) / runs
                        rows.append({"target": target_name, "tool": tool.name, "program": name,
                                     "runs_per_request": runs / load["requests"], "ns_per_run": ns,
                                     "map_bytes": maps})
                        log(f"bench: {target_name} {tool.name} {name}: {rows[-1]['runs_per_request']:.2f} runs per "
                            f"request, {ns:.0f} ns per run")
        finally:
            server.stop()
    return rows


# ------------------------------------------------------------------------------------------------
# 3. Accuracy


STRACE_ROW = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(\d+)?\s*(\w+)\s*$")


def parse_strace_c(text: str) -> dict:
    rows = {}
    for line in text.splitlines():
        m = STRACE_ROW.match(line)
        if m:
            rows[m.group(3)] = {"calls": int(m.group(1)), "errors": int(m.group(2) or 0)}
    return rows


def accuracy(args) -> dict:
    """One run of a write-spinning event loop traced at once by spinscope, strace and a USDT counter."""
    # A 4 KB send buffer and a 2 KB client window: every 100 KB response hits EAGAIN many times.
    server = start_refserver("event-loop", "--write-policy", "spin", "--sndbuf", "4096")
    work = Path(tempfile.mkdtemp(prefix="spinscope-accuracy-"))
    try:
        loadgen(server.port, "/bytes/100", 0.5, 4)
        usdt = subprocess.Popen(["bpftrace", "-e", f'usdt:{BUILD / "refserver"}:refserver:request__done '
                                 f'/pid == {server.pid}/ {{ @done = count(); }} BEGIN {{ printf("ready\\n"); }}'],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True)
        usdt_lines = Lines(usdt.stdout)
        usdt_lines.wait_for("^ready", 60)
        # strace's window encloses spinscope's: spinscope can only see fewer calls, never more.
        strace = start_tracer(tracer("strace -f -c"), server.pid, work)
        spin = start_tracer(tracer("spinscope"), server.pid, work)
        load = json.loads(subprocess.run(
            pinned(LOAD_CPU, [str(BUILD / "loadgen"), "--port", str(server.port), "--mix",
                              "70:/bytes/100,30:/bytes/102400", "--concurrency", "8", "--requests",
                              str(args.requests), "--rcvbuf", "2048", "--json"]),
            capture_output=True, text=True, timeout=600).stdout)
        time.sleep(0.2)
        spin.stop()
        strace.stop()
        usdt.send_signal(signal.SIGINT)
        usdt.wait(timeout=30)
        usdt_lines.wait_for(r"@done", 5)
        usdt_out = "\n".join(usdt_lines.seen)
    finally:
        server.stop()
    cap = json.loads((work / "capture.json").read_text())
    st = parse_strace_c((work / "strace.txt").read_text())
    shutil.rmtree(work, ignore_errors=True)
    writes = sum(st.get(c, {}).get("calls", 0) for c in ("write", "writev", "sendto", "sendmsg", "sendfile"))
    eagain = sum(st.get(c, {}).get("errors", 0) for c in ("write", "writev", "sendto", "sendmsg"))
    polls = sum(st.get(c, {}).get("calls", 0) for c in ("epoll_wait", "epoll_pwait", "poll", "select"))
    usdt_done = int(re.search(r"@done: (\d+)", usdt_out).group(1))
    t = cap["totals"]

    def rel(ours, theirs):
        return (ours - theirs) / theirs if theirs else None

    return {
        "requests_loadgen": load["requests"], "requests_usdt": usdt_done,
        "requests_spinscope": cap["requests"]["count"],
        "write_calls": {"spinscope": t["write_calls"], "strace": writes, "rel_diff": rel(t["write_calls"], writes)},
        "write_eagain": {"spinscope": t["write_eagain"], "strace": eagain, "rel_diff": rel(t["write_eagain"], eagain)},
        "poll_calls": {"spinscope": t["poll_calls"], "strace": polls, "rel_diff": rel(t["poll_calls"], polls)},
        "requests_rel_diff_usdt": rel(cap["requests"]["count"], usdt_done),
    }


# ------------------------------------------------------------------------------------------------
# 4. Scale


def bpf_stats(enable: bool) -> None:
    Path("/proc/sys/kernel/bpf_stats_enabled").write_text("1" if enable else "0")


def collector_prog_stats(pid: int) -> dict:
    """(runs, ns) so far of each BPF program the tracer process `pid` holds, by name: the programs whose ids
    its descriptors' fdinfo gives, so another tracer loaded meanwhile (a test's collector) is not counted."""
    ids = set()
    for info in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            found = re.search(r"^prog_id:\s*(\d+)", info.read_text(), re.M)
        except OSError:  # a descriptor closed meanwhile
            continue
        if found:
            ids.add(int(found.group(1)))
    progs = json.loads(subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True).stdout)
    return {p["name"]: (p.get("run_cnt", 0), p.get("run_time_ns", 0)) for p in progs if p["id"] in ids}


def collector_map_bytes(pid: int) -> int:
    """The kernel memory of the BPF maps the collector process `pid` holds: the memlock line of each of its
    map descriptors' fdinfo (by process, so another collector running meanwhile is not counted)."""
    total = 0
    for info in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            text = info.read_text()
        except OSError:
            continue
        if "map_type:" in text:
            total += int(re.search(r"^memlock:\s*(\d+)", text, re.M).group(1))
    return total


def scale(args) -> list:
    rows = []
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    cases = [("thread-per-conn", n, "threads") for n in (1, 8, 64, 512)]
    cases += [("event-loop", n, "connections") for n in (100, 1000, 10000)]
    bpf_stats(True)
    try:
        for arch, n, what in cases:
            server = start_refserver(arch)
            work = Path(tempfile.mkdtemp(prefix="spinscope-scale-"))
            try:
                running = start_tracer(tracer("spinscope"), server.pid, work)
                before = collector_prog_stats(running.proc.pid)
                load = loadgen(server.port, "/bytes/100", args.seconds, n)
                after = collector_prog_stats(running.proc.pid)
                maps = collector_map_bytes(running.proc.pid)  # after the load: the maps grow with use
                running.stop()
                cap = json.loads((work / "capture.json").read_text())
            finally:
                server.stop()
                shutil.rmtree(work, ignore_errors=True)
            events = sum(after[k][0] - before.get(k, (0, 0))[0] for k in after)
            ns = sum(after[k][1] - before.get(k, (0, 0))[1] for k in after)
            rows.append({"server": arch, "scale": f"{n} {what}", "threads_seen": cap["totals"]["threads_seen"],
                         "requests": cap["requests"]["count"], "rps": load["throughput"],
                         "bpf_ns_per_event": ns / events if events else None, "events": events,
                         "map_bytes": maps, "drops": cap["drops"]})
            log(f"bench: scale {arch} {n} {what}: {rows[-1]['bpf_ns_per_event']:.0f} ns/event, "
                f"maps {maps / 2**20:.1f} MiB, drops {cap['drops']}")
    finally:
        bpf_stats(False)
    return rows


# ------------------------------------------------------------------------------------------------
# Report


def pct(x):
    return "n/a" if x is None else f"{x:+.2%}"


def program_summary(programs: list) -> list:
    """The per-program rows as BPF time per traced call: runs per call times ns per run, summed over the
    programs; then net of the per-run floor (FLOOR_CALL's run: the stats' clock reads and the dispatch,
    paid by every run whatever it does), which compares the programs' own work; then, for the target's
    calls, spinscope's net time less syscount's on the same call."""
    floor = next((r["ns_per_run"] for r in programs if r["call"] == FLOOR_CALL and r["program"] == "on_sys_enter"),
                 None)
    per_call: dict = {}
    for r in programs:
        if r["call"] == FLOOR_CALL:
            continue
        key = (r.get("tool", "spinscope"), r["call"], r["traced"])
        gross, net = per_call.get(key, (0.0, 0.0))
        per_call[key] = (gross + r["runs_per_call"] * r["ns_per_run"],
                         net + r["runs_per_call"] * (r["ns_per_run"] - (floor or 0.0)))
    syscount = {(call, traced): net for (tool, call, traced), (_, net) in per_call.items()
                if tool.startswith("syscount")}
    out = ["", "BPF time per call: the programs' runs per call times their ns per run, summed. *Net*: less "
           f"the floor every run pays, {floor:.0f} ns (one run of a program that returns at once, on "
           f"{FLOOR_CALL}: the stats' two clock reads and the dispatch), times the runs. *Over syscount*: net, "
           "less syscount's net on the same call. (The write loop also drains its socket pair, one read per "
           "write; a second tracepoint's dispatch before its program, ~20-30 ns, is in no column.)" if floor
           else "BPF time per call (runs per call times ns per run, summed; no floor measured):", "",
           "| collector | call | process traced | BPF ns per call | net | over syscount |", "|---|---|---|---|---|---|"]
    for (tool, call, traced), (gross, net) in per_call.items():
        over = syscount.get((call, traced))
        over_text = f"{net - over:+.0f}" if over is not None and floor and not tool.startswith("syscount") else ""
        net_text = f"{net:.0f}" if floor else ""
        out.append(f"| {tool} | {call} | {traced} | {gross:.0f} | {net_text} | {over_text} |")
    return out + [""]


def markdown(results: dict) -> str:
    out = ["# spinscope overhead and accuracy", "",
           f"Machine: {os.cpu_count()} CPUs, kernel {os.uname().release}. Server pinned to CPU {SERVER_CPU}, "
           f"load generator and tracers to CPU {LOAD_CPU}; closed loop, 100 connections; "
           f"{results['settings']['pairs']} rounds of {results['settings']['seconds']} s runs: untraced, then "
           "each tool in turn with an untraced run after each. A traced run's ratio is to the mean of "
           "the untraced runs on either side of it; the table gives the median [min, max] over rounds.", ""]
    if results.get("overhead"):
        out += ["## Throughput and latency under each tracer", "",
                "| target | response | tool | server CPU per request | throughput ratio | p99 ratio | "
                "tracer's own CPU | attach |",
                "|---|---|---|---|---|---|---|---|"]
        for s in results["overhead"]:
            size = "100 B" if s["path"].endswith("/100") else "100 KB"
            if not s["samples"]:
                out.append(f"| {s['target']} | {size} | {s['tool']} | failed: {s['error']} | | | | |")
                continue
            attach = "n/a" if s["attach_s_median"] is None else f"{s['attach_s_median']:.2f} s"
            p99 = "n/a" if s["p99_ratio_median"] is None else f"{s['p99_ratio_median']:.2f}"
            cpu = (f"{s['server_cpu_per_request_ratio_median']:.3f} [{s['server_cpu_per_request_ratio_min']:.3f}, "
                   f"{s['server_cpu_per_request_ratio_max']:.3f}]")
            out.append(f"| {s['target']} | {size} | {s['tool']} | {cpu} | {s['throughput_ratio_median']:.3f} "
                       f"[{s['throughput_ratio_min']:.3f}, {s['throughput_ratio_max']:.3f}] | {p99} | "
                       f"{s['tracer_cpu_share']:.1%} | {attach} |")
        out.append("")
    if results.get("live"):
        out += ["## Live: the exporter against the one-shot recorder (100 B responses)", "",
                f"Runs of {results['settings']['seconds'] * 4:g} s; `--duty {LIVE_DUTY}`: probes live 2 s of every "
                "6 (a fleet would use 10/60). The tracer's CPU and memory are its whole process tree: the "
                "exporter's Python and the collectors it runs. No scrapes.", "",
                "| target | tool | server CPU per request | throughput ratio | tracer's own CPU | tracer's memory |",
                "|---|---|---|---|---|---|"]
        for s in results["live"]:
            if not s["samples"]:
                out.append(f"| {s['target']} | {s['tool']} | failed: {s['error']} | | | |")
                continue
            cpu = (f"{s['server_cpu_per_request_ratio_median']:.3f} [{s['server_cpu_per_request_ratio_min']:.3f}, "
                   f"{s['server_cpu_per_request_ratio_max']:.3f}]")
            out.append(f"| {s['target']} | {s['tool']} | {cpu} | {s['throughput_ratio_median']:.3f} "
                       f"[{s['throughput_ratio_min']:.3f}, {s['throughput_ratio_max']:.3f}] | "
                       f"{s['tracer_cpu_share']:.1%} | {s['tracer_rss_bytes_median'] / 2**20:.0f} MiB |")
        out.append("")
    if results.get("probe_kinds"):
        out += ["## What each kind of probe costs a bystander", "",
                "A process's zero-timeout `epoll_wait` while one probe of each kind traces another (sleeping) "
                "process: bpftrace scripts of one probe with a PID filter, then spinscope and syscount.", "",
                "| probe | untraced | traced | added |", "|---|---|---|---|"]
        for r in results["probe_kinds"]:
            out.append(f"| {r['tool']} | {r['untraced_ns']:.0f} ns | {r['traced_ns']:.0f} ns | "
                       f"{r['added_ns']:+.0f} ns |")
        out.append("")
    if results.get("per_event"):
        out += ["## Cost per traced call", "", "| call | tool | process traced | untraced | traced | added |",
                "|---|---|---|---|---|---|"]
        for r in results["per_event"]:
            out.append(f"| {r['call']} | {r['tool']} | {r['traced']} | {r['untraced_ns']:.0f} ns | "
                       f"{r['traced_ns']:.0f} ns | {r['added_ns']:+.0f} ns |")
        out.append("")
    if results.get("programs"):
        out += ["## Cost per program (kernel.bpf_stats_enabled, which adds two clock reads per run)", "",
                "| collector | call | process traced | program | runs per call | ns per run |",
                "|---|---|---|---|---|---|"]
        for r in results["programs"]:
            if r["runs_per_call"] >= 0.01:  # not the scheduler's few runs in a loop of syscalls
                out.append(f"| {r.get('tool', 'spinscope')} | {r['call']} | {r['traced']} | {r['program']} | "
                           f"{r['runs_per_call']:.2f} | {r['ns_per_run']:.0f} |")
        out += program_summary(results["programs"])
    if results.get("load_programs"):
        out += ["## Cost per program under load (100 B responses, kernel.bpf_stats_enabled)", "",
                "| target | collector | program | runs per request | ns per run | ns per request | map memory |",
                "|---|---|---|---|---|---|---|"]
        for r in results["load_programs"]:
            out.append(f"| {r['target']} | {r['tool']} | {r['program']} | {r['runs_per_request']:.2f} | "
                       f"{r['ns_per_run']:.0f} | {r['runs_per_request'] * r['ns_per_run']:.0f} | "
                       f"{r['map_bytes'] / 2**20:.2f} MiB |")
        out.append("")
    if results.get("accuracy"):
        a = results["accuracy"]
        out += ["## Accuracy", "", "| count | spinscope | reference | difference |", "|---|---|---|---|"]
        for key in ("write_calls", "write_eagain", "poll_calls"):
            out.append(f"| {key} | {a[key]['spinscope']} | {a[key]['strace']} (strace -c) | {pct(a[key]['rel_diff'])} |")
        out.append(f"| requests | {a['requests_spinscope']} | {a['requests_usdt']} (USDT), "
                   f"{a['requests_loadgen']} (load generator) | {pct(a['requests_rel_diff_usdt'])} |")
        out.append("")
    if results.get("scale"):
        out += ["## Scale", "", "| server | scale | threads seen | BPF ns per event | map memory | drops |",
                "|---|---|---|---|---|---|"]
        for r in results["scale"]:
            drops = sum(r["drops"].values())
            ns = "n/a" if r["bpf_ns_per_event"] is None else f"{r['bpf_ns_per_event']:.0f}"
            out.append(f"| {r['server']} | {r['scale']} | {r['threads_seen']} | {ns} | "
                       f"{r['map_bytes'] / 2**20:.1f} MiB | {drops} |")
        out.append("")
    # The reading of these numbers, written by hand: kept beside this script so a regeneration keeps it.
    notes = Path(__file__).with_name("overhead_notes.md")
    if notes.exists():
        out.append(notes.read_text().rstrip())
        out.append("")
    return "\n".join(out)


PARTS = ("overhead", "per_event", "programs", "load_programs", "accuracy", "scale", "live", "probe_kinds")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 pairs of 2 s, fewer calls: a smoke run")
    parser.add_argument("--pairs", type=int, default=5, help="rounds per target and size")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--calls", type=int, default=2_000_000)
    parser.add_argument("--modes", nargs="*", choices=CALLS + H2_CALLS,
                        help="programs: only these calls of bench/syscall_cost.c (default: all but the HTTP/2 ones)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--tools", nargs="*", help="only these tools (first word: spinscope bpftrace perf strace syscount)")
    parser.add_argument("--parts", nargs="*", default=list(PARTS), choices=PARTS,
                        help="run only these parts; the others' results in --out are kept")
    parser.add_argument("--targets", nargs="*", choices=("event-loop", "nginx"), help="overhead: only these servers")
    parser.add_argument("--paths", nargs="*", choices=("/bytes/100", "/bytes/102400"),
                        help="overhead: only these response sizes")
    parser.add_argument("--out", type=Path, default=RESULTS / "overhead")
    parser.add_argument("--baseline", type=Path, metavar="COLLECTOR",
                        help="an earlier spinscope-collector binary, measured side by side as 'spinscope baseline' "
                             "(e.g. one built from the previous release: before/after in one run)")
    args = parser.parse_args()
    if args.baseline:
        baseline = args.baseline.resolve()
        TRACERS.insert(1, Tracer("spinscope baseline", lambda pid, w: spinscope_cmd(pid, w, baseline),
                                 SPINSCOPE_READY, "stdout"))
    if args.quick:
        args.pairs, args.seconds, args.calls, args.repeat, args.requests = 2, 2.0, 500_000, 2, 1000
    if os.geteuid() != 0:
        log("bench: needs root (BPF tracers)")
        return 1
    for binary in ("refserver", "loadgen", "spinscope-collector", "syscall_cost"):
        if not (BUILD / binary).exists():
            log(f"bench: build/{binary} missing: run `make bench` (it builds everything first)")
            return 1
    results = {"settings": {"pairs": args.pairs, "seconds": args.seconds, "calls": args.calls,
                            "repeat": args.repeat, "kernel": os.uname().release}}
    previous = args.out.with_suffix(".json")
    if set(args.parts) != set(PARTS) and previous.exists():
        # Re-running some parts: keep the others' results (and the settings they were made with).
        results = json.loads(previous.read_text())
    parts = {"overhead": overhead, "per_event": per_event_cost, "programs": program_costs,
             "load_programs": load_program_costs, "accuracy": accuracy, "scale": scale, "live": live_cost,
             "probe_kinds": probe_kinds}
    for name in args.parts:
        rows = parts[name](args)
        if name == "overhead" and (args.targets or args.paths or args.tools) and results.get(name):
            # A partial re-run replaces its own rows and keeps the rest (other tools, targets, sizes).
            key = lambda r: (r["target"], r["path"], r["tool"])  # noqa: E731
            fresh = {key(r) for r in rows}
            rows = [r for r in results[name] if key(r) not in fresh] + rows
            tools = [t.name for t in TRACERS]
            rows.sort(key=lambda r: (r["target"] != "event-loop", r["path"] != "/bytes/100",
                                     tools.index(r["tool"]) if r["tool"] in tools else len(tools)))
        results[name] = rows
        args.out.with_suffix(".json").write_text(json.dumps(results, indent=2))  # each part as it ends
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=2))
    args.out.with_suffix(".md").write_text(markdown(results))
    log(f"bench: wrote {args.out.with_suffix('.md')} and .json")
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
