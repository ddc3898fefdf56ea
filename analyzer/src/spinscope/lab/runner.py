"""Running one sweep cell: the processes it starts, in order, and the result document it yields.

Per cell: (network condition) -> start refserver (pinned with taskset when asked, inside the sweep's
network namespace for `net = "veth"`) and wait for its listening line -> sample the RTT (TCP connect
time) -> warm-up load -> start the collector and wait until its probes are live -> measured load (loadgen
--json) -> stop the collector (SIGINT: it writes the capture) -> stop the server (SIGTERM) -> analyze
the capture. A failure anywhere makes a result with status "failed" and the reason; every process the
cell started is killed before the next cell.
"""

from __future__ import annotations

import json
import os
import select
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from spinscope.errors import SpinscopeError
from spinscope.lab import netcond, refserver
from spinscope.lab import shards as shardset
from spinscope.lab import diskset
from spinscope.lab.matrix import Cell
from spinscope.lab.results import analyze_capture, fanout_figures, timestamp
from spinscope.tracing import collector
from spinscope.tracing.collector import repo_root

CHILDREN_ARCHS = {"process-per-conn", "n-copy"}  # traced with --children unless the cell says otherwise
ATTACH_TIMEOUT_S = 20.0


class CellFailed(Exception):
    """A cell could not be measured; the message is recorded as its error."""


SWEEP_ENV = "SPINSCOPE_SWEEP"  # in every child's environment: the sweep's output directory (sweep_tag)
LEFTOVER_STOP_S = 5.0  # SIGTERM, then SIGKILL after this long


def sweep_tag(outdir: Path) -> str:
    """The SWEEP_ENV value of a sweep's children: its output directory, absolute."""
    return str(outdir.resolve())


class Processes:
    """Every child process of the sweep, each in its own session so that a whole tree can be signalled."""

    def __init__(self, tag: str = ""):
        self.procs: list = []
        # Every child carries SPINSCOPE_SWEEP=<output dir> in its environment, so leftovers can be told
        # apart from other servers on the machine (find_leftovers).
        self.env = {**os.environ, SWEEP_ENV: tag}

    def popen(self, cmd: list, **kwargs) -> subprocess.Popen:
        return self.track(subprocess.Popen(cmd, **self.popen_kwargs(), **kwargs))

    def popen_kwargs(self) -> dict:
        """How every child is started: its own session, no stdin, the sweep's tag in its environment."""
        return {"start_new_session": True, "stdin": subprocess.DEVNULL, "env": self.env}

    def track(self, proc: subprocess.Popen) -> subprocess.Popen:
        """Count proc among the sweep's children (stopped by kill_all)."""
        self.procs.append(proc)
        return proc

    @staticmethod
    def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 5.0) -> int | None:
        """Signal the process group, wait, SIGKILL the group if it does not go. Returns the exit code."""
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        try:  # leftovers of the group (forked children of a process-per-conn server)
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if proc.poll() is None:
            proc.wait(timeout=5)
        return proc.returncode

    def kill_all(self) -> None:
        for proc in self.procs:
            self.stop(proc, signal.SIGTERM, timeout=2.0)
        self.procs.clear()


@dataclass(frozen=True)
class Leftover:
    """A process a sweep started and did not stop (the sweep was SIGKILLed)."""

    pid: int
    name: str  # its comm, for saying what was stopped


def find_leftovers(tag: str) -> list:
    """[Leftover] for every process whose environment holds SPINSCOPE_SWEEP=tag, other than this process
    and its ancestors (which may have been started with the tag by hand). Processes whose environment
    cannot be read (another user's, without root) are not found."""
    entry = f"{SWEEP_ENV}={tag}".encode()
    spared = _ancestry(os.getpid())
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) not in spared and _tagged(int(proc.name), entry):
            found.append(Leftover(int(proc.name), _read(proc / "comm").strip()))
    return found


def stop_leftovers(tag: str, timeout: float = LEFTOVER_STOP_S) -> list:
    """Stop the leftovers of the sweep tagged `tag` (SIGTERM, SIGKILL after `timeout`) and return them.

    Each is signalled through a pidfd opened after checking that the pid still carries the tag, so a pid
    that was reused between the scan and the signal is not touched."""
    entry = f"{SWEEP_ENV}={tag}".encode()
    pidfds = {}
    for leftover in find_leftovers(tag):
        try:
            pidfd = os.pidfd_open(leftover.pid)
        except ProcessLookupError:
            continue
        if _tagged(leftover.pid, entry):
            pidfds[leftover] = pidfd
        else:
            os.close(pidfd)
    try:
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, timeout)):
            running = [fd for fd in pidfds.values() if not _exited(fd, 0)]
            for pidfd in running:
                try:
                    signal.pidfd_send_signal(pidfd, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait
            for pidfd in running:
                _exited(pidfd, max(0.0, deadline - time.monotonic()))
    finally:
        for pidfd in pidfds.values():
            os.close(pidfd)
    return list(pidfds)


def _tagged(pid: int, entry: bytes) -> bool:
    try:
        return entry in (Path("/proc") / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:  # exited, or not ours to read
        return False


def _exited(pidfd: int, timeout: float) -> bool:
    """Whether the process of `pidfd` has exited, waiting up to `timeout` seconds (a pidfd polls readable
    once it has)."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


def _ancestry(pid: int) -> set:
    """`pid` and its ancestors."""
    chain = set()
    while pid > 0 and pid not in chain:
        chain.add(pid)
        stat = _read(Path("/proc") / str(pid) / "stat")
        # `pid (comm) state ppid ...`: the comm may hold spaces and parentheses, so read after the last ")".
        pid = int(stat.rpartition(")")[2].split()[1]) if ")" in stat else 0
    return chain


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _tail(lines: list, n: int = 3) -> str:
    """The last `n` non-empty lines of a process's output, on one line (for error messages)."""
    return " | ".join(line.strip() for line in lines[-n:] if line.strip()) or "no output"


@dataclass
class Collector:
    """A running collector whose probes are live."""

    proc: subprocess.Popen
    stderr_lines: list
    reader: threading.Thread


def start_collector(procs: Processes, program: Path, pid: int, capture: Path, duration: float,
                    interval: float, children: bool, timeout: float = ATTACH_TIMEOUT_S) -> Collector:
    """Start the collector on `pid` (writing `capture` when stopped) and return once its probes are
    live (its --ready-fd line), so that load sent afterwards is recorded. Raises CellFailed if it exits
    first or is not ready within `timeout` s."""
    cmd = [str(program), "--pid", str(pid), "--duration", f"{duration:g}", "-o", str(capture)]
    if interval > 0:
        cmd += ["--interval", f"{interval:g}"]
    if children:
        cmd.append("--children")
    started = collector.start(cmd, **procs.popen_kwargs(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    proc = procs.track(started.proc)
    lines: list = []

    def read():
        for raw in proc.stderr:
            lines.append(raw.decode(errors="replace").rstrip("\n"))
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        started.wait_ready(timeout)
    except (collector.NotReady, TimeoutError) as exc:
        reader.join(timeout=2)
        raise CellFailed(f"collector not ready (exit {proc.poll()}): {exc}: {_tail(lines)}") from None
    return Collector(proc, lines, reader)


@dataclass
class Tools:
    """The programs a cell runs, built by `make all`."""

    refserver: Path
    loadgen: Path
    collector: Path


def find_tools() -> Tools:
    """The built programs, or a SpinscopeError naming the missing ones."""
    server, loadgen = Path(refserver.binary()), repo_root() / "build" / "loadgen"
    program = collector.find()
    missing = [p for p in (server, loadgen) if not os.access(p, os.X_OK)]
    if program is None:
        missing.append(repo_root() / "build" / "spinscope-collector")
    if missing:
        raise SpinscopeError(f"not built: {', '.join(map(str, missing))}; run `make all`")
    return Tools(server, loadgen, program)


class Runner:
    """Runs cells; owns the processes and the network namespace it creates."""

    def __init__(self, tools: Tools, outdir: Path):
        self.tools = tools
        self.outdir = outdir
        self.procs = Processes(sweep_tag(outdir))
        self.ns: netcond.Namespace | None = None
        self.current_capture: Path | None = None
        self.shards = shardset.ShardSet(self.procs.popen_kwargs())  # memcached for `shards = N` cells
        self.cgroup: diskset.MemoryCgroup | None = None  # a file_set cell's server cgroup (memory.max)

    def close(self) -> None:
        """Kill what still runs, drop the unfinished cell's capture, remove the namespace."""
        self.procs.kill_all()
        self.shards.stop()  # the fanout cells' memcached shards live for the sweep
        try:
            self.disk_teardown()
        except CellFailed:
            pass  # its processes would not go: left for the next sweep's diskset.cleanup_stale()
        if self.current_capture is not None:
            self.current_capture.unlink(missing_ok=True)
            self.current_capture = None
        if self.ns is not None:
            self.ns.teardown()
            self.ns = None

    def namespace(self) -> netcond.Namespace:
        """The sweep's network namespace, created on first use."""
        if self.ns is None:
            self.ns = netcond.Namespace(env=self.procs.env)  # the delay line carries the sweep's tag too
            self.ns.setup()
        return self.ns

    # --- pieces -------------------------------------------------------------------------------------
    def server_command(self, p: dict, host: str) -> list:
        cmd = refserver.command(p["arch"], host=host, program=str(self.tools.refserver))
        for key, flag in (("workers", "--workers"), ("sndbuf", "--sndbuf"), ("write_policy", "--write-policy"),
                          ("poller", "--poller"), ("backlog", "--backlog")):
            if p[key] is not None:
                cmd += [flag, str(p[key])]
        if p["server_args"]:
            cmd += shlex.split(p["server_args"])
        if p.get("shards"):  # fanout tier: the sweep's own memcached shards, started and loaded on demand
            try:
                cmd += ["--shards", self.shards.ensure(p["shards"])]
            except shardset.ShardsUnavailable as exc:
                raise CellFailed(str(exc)) from None
        if p.get("file_set"):  # disk-bound cells: serve the file set, from inside the cell's cgroup
            cmd += ["--docroot", str(diskset.set_dir(p["file_set"]))]
        if p["server_cpus"] is not None:
            cmd = ["taskset", "-c", p["server_cpus"], *cmd]
        if p["net"] == "veth":
            cmd = self.namespace().exec_prefix() + cmd
        if p.get("file_set") and self.cgroup is not None:
            cmd = self.cgroup.wrap(cmd)
        return cmd

    # --- disk-bound cells (lab/diskset.py) -----------------------------------------------------------
    def disk_setup(self, p: dict) -> None:
        """The file set on disk, its pages dropped (unless drop_caches = false), a fresh cgroup with the
        cell's memory.max ("max" when unset) for the server."""
        try:
            diskset.ensure_file_set(p["file_set"])
            if p.get("drop_caches") is not False:
                diskset.drop_file_set(p["file_set"])
            self.cgroup = diskset.MemoryCgroup(p.get("memory_max") or "max")
        except (OSError, ValueError) as exc:
            raise CellFailed(f"disk set-up: {exc}") from None

    def disk_teardown(self) -> None:
        """Remove the cell's cgroup (its processes must be stopped first)."""
        if self.cgroup is not None:
            cgroup, self.cgroup = self.cgroup, None
            try:
                cgroup.remove()
            except OSError as exc:
                raise CellFailed(f"cgroup {cgroup.path} not removed: {exc}") from None

    def loadgen_command(self, p: dict, host: str, port: int, duration: float) -> list:
        cmd = [str(self.tools.loadgen), "--host", host, "--port", str(port), "--json",
               "--warmup", "0", "--duration", f"{duration:g}", "--concurrency", str(p["concurrency"]),
               "--keepalive", p["keepalive"]]
        cmd += ["--mix", p["mix"]] if p["mix"] else ["--path", p["path"]]
        for key, flag in (("rate", "--rate"), ("burst", "--burst"), ("think_ms", "--think-ms"),
                          ("rcvbuf", "--rcvbuf"), ("threads", "--threads")):
            if p[key] is not None:
                cmd += [flag, f"{p[key]:g}" if isinstance(p[key], float) else str(p[key])]
        if p.get("file_set") and "*" in (p["path"] or p["mix"] or ""):  # /file/*: a random file of the set
            cmd += ["--keys", str(diskset.parse_file_set(p["file_set"])[0])]
        if p["loadgen_args"]:
            cmd += shlex.split(p["loadgen_args"])
        if p["loadgen_cpus"] is not None:
            cmd = ["taskset", "-c", p["loadgen_cpus"], *cmd]
        return cmd

    def run_loadgen(self, cmd: list, duration: float) -> dict:
        proc = self.procs.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = proc.communicate(timeout=duration + 30)
        except subprocess.TimeoutExpired:
            self.procs.stop(proc, signal.SIGKILL)
            raise CellFailed(f"loadgen did not finish within {duration + 30:g}s") from None
        if proc.returncode != 0:
            raise CellFailed(f"loadgen failed (exit {proc.returncode}): "
                             f"{_tail(err.decode(errors='replace').splitlines())}")
        try:
            return json.loads(out)
        except json.JSONDecodeError:
            raise CellFailed(f"loadgen printed no JSON: {out[:200]!r}") from None

    # --- the cell -----------------------------------------------------------------------------------
    def run(self, cell: Cell) -> dict:
        """Run `cell`; the result document (status "ok" or "failed" with the reason), never an exception
        for a cell that could not be measured."""
        p = cell.params
        started = time.time()
        result = {"id": cell.id, "group": cell.group, "claims": cell.claims, "params": p,
                  "started_at": timestamp(), "status": "ok", "error": None}
        capture = self.outdir / "captures" / f"{cell.id}.json"
        capture.parent.mkdir(parents=True, exist_ok=True)
        capture.unlink(missing_ok=True)
        self.current_capture = capture
        try:
            result.update(self._measure(cell, capture))
        except (CellFailed, SpinscopeError) as exc:
            result["status"], result["error"] = "failed", str(exc)
        finally:
            self.procs.kill_all()
            try:
                self.disk_teardown()
            except CellFailed as exc:
                result["status"], result["error"] = "failed", str(exc)
        if result["status"] != "ok":
            capture.unlink(missing_ok=True)
        self.current_capture = None
        result["elapsed_s"] = round(time.time() - started, 3)
        return result

    def _measure(self, cell: Cell, capture: Path) -> dict:
        p = cell.params
        out: dict = {}
        if p["net"] == "veth":
            ns = self.namespace()
            ns.apply(p["bandwidth"], p["delay_ms"])
            host = ns.ns_addr
        else:
            host = "127.0.0.1"
        if p.get("file_set"):
            self.disk_setup(p)
        server = refserver.start(self.server_command(p, host), spawn=self.procs.popen)
        port = server.port
        out["server"] = {"pid": server.proc.pid, "listen_line": server.listen_line, "workers": server.workers,
                         "sndbuf_effective": server.sndbuf_text}
        out["rtt_ms"] = netcond.measure_rtt(host, port)

        if p["warmup"] > 0:
            self.run_loadgen(self.loadgen_command(p, host, port, p["warmup"]), p["warmup"])

        children = p["children"] if p["children"] is not None else p["arch"] in CHILDREN_ARCHS
        recording = start_collector(self.procs, self.tools.collector, server.proc.pid, capture,
                                    duration=p["duration"] + 10, interval=p["interval"], children=children)

        disk_before = self.cgroup.read_bytes() if self.cgroup is not None else None
        line_before = self.ns.delayline_stats() if p["net"] == "veth" and p["delay_ms"] else None
        out["loadgen"] = self.run_loadgen(self.loadgen_command(p, host, port, p["duration"]), p["duration"])
        if self.cgroup is not None:  # measured, not assumed: what the server read from storage during the load
            out["disk"] = {"read_bytes": self.cgroup.read_bytes() - disk_before, "cgroup": str(self.cgroup.path),
                           "memory_max": p.get("memory_max"), **self.cgroup.stats()}
        if line_before is not None:
            out["delayline"] = netcond.delayline_delta(line_before, self.ns.delayline_stats())
        rc = self.procs.stop(recording.proc, signal.SIGINT, timeout=15)
        recording.reader.join(timeout=2)
        if rc != 0 or not capture.exists():
            raise CellFailed(f"collector failed (exit {rc}): {_tail(recording.stderr_lines)}")
        rc = self.procs.stop(server.proc, signal.SIGTERM, timeout=5)
        out["server"]["exit_code"] = rc
        if server.proc.poll() is None or rc not in (0, -signal.SIGTERM):
            out["server"]["stderr_tail"] = _tail(server.stderr_lines)
        if not out["loadgen"].get("requests"):
            raise CellFailed(f"no request completed ({out['loadgen'].get('errors', 0)} errors)")
        out["capture"] = str(capture.relative_to(self.outdir))
        out["analysis"] = analyze_capture(capture)
        if p["arch"].startswith("fanout-"):  # per-HTTP-request and per-loop figures (fanout claims)
            out["analysis"]["fanout"] = fanout_figures(capture)
        if p.get("shards"):
            out["shards"] = {"count": p["shards"], "spec": self.shards.spec, "pids": self.shards.pids}
        return out
