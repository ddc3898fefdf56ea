"""`spinscope sweep MATRIX -o DIR`: run the reference servers over a matrix of settings and record every cell.

A matrix (TOML, docs/sweep.md) has `[defaults]` and a list of `[[group]]` tables. In a group every key whose
value is a list is an axis; the group expands to the cartesian product of its axes, times its `variants`
(a list of tables merged over the group, for combinations that are not a product), times `repetitions`.
Each cell is identified by a stable hash of its parameters, so a re-run skips the cells already in DIR.

Per cell: (network condition) -> start refserver (pinned with taskset when asked, inside the sweep's
network namespace for `net = "veth"`) -> wait for its listening line -> sample the RTT (TCP connect time)
-> warm-up load -> start the collector and wait until it is attached -> measured load (loadgen --json) ->
stop the collector (SIGINT: it writes the capture) -> stop the server (SIGTERM) -> analyze the capture ->
DIR/cells/CELLID.json. A failure anywhere is recorded in that file with its reason and the sweep goes on.
After every cell the tables DIR/results.parquet and DIR/results.csv are rebuilt from all cell files, so
an interrupted sweep (Ctrl-C, SIGTERM) leaves a consistent dataset: the cell that was running is
discarded and everything it started is killed.

Exit codes: 0 every cell ok; 3 the sweep finished but some cells failed (recorded in the tables);
2 invalid matrix or options; 130 interrupted.
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import hashlib
import itertools
import json
import math
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from spinscope.lab import netcond
from spinscope.errors import SpinscopeError
from spinscope.paths import find_collector, repo_root

EXIT_OK, EXIT_FAILED_CELLS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 3, 2, 130

# name -> (accepted python types, default). None means "not passed" (the program's own default).
PARAMS = {
    "arch": ((str,), None),
    "workers": ((int,), None),
    "sndbuf": ((int,), None),
    "write_policy": ((str,), None),
    "poller": ((str,), None),
    "backlog": ((int,), None),
    "server_args": ((str,), None),
    "path": ((str,), "/bytes/100"),
    "mix": ((str,), None),
    "concurrency": ((int,), 8),
    "rate": ((int, float), None),
    "burst": ((str,), None),
    "think_ms": ((int, float), None),
    "keepalive": ((str,), "on"),
    "rcvbuf": ((int,), None),
    "threads": ((int,), None),
    "loadgen_args": ((str,), None),
    "net": ((str,), "loopback"),
    "bandwidth": ((str,), None),
    "delay_ms": ((int, float), 0),
    "duration": ((int, float), 3.0),
    "warmup": ((int, float), 1.0),
    "interval": ((int, float), 1.0),
    "server_cpus": ((str, int), None),
    "loadgen_cpus": ((str, int), None),
    "children": ((bool,), None),
}
CHOICES = {"write_policy": ("spin", "epollout"), "poller": ("epoll", "poll", "select"),
           "keepalive": ("on", "off"), "net": ("loopback", "veth")}
GROUP_KEYS = {"name", "claims", "variants", "repetitions"}
TOP_KEYS = {"name", "description", "defaults", "group"}
CHILDREN_ARCHS = {"process-per-conn", "n-copy"}  # traced with --children unless the cell says otherwise
CELL_OVERHEAD_S = 1.5  # start, RTT sample, attach, stop: used for the time-left estimate

LISTEN_RE = re.compile(r"refserver: listening on (\S+):(\d+) arch=(\S+) workers=(\d+) sndbuf=(\S+)")


# ------------------------------------------------------------------------------------------- matrix

@dataclass
class Cell:
    params: dict
    group: str
    claims: list = field(default_factory=list)

    @property
    def id(self) -> str:
        return cell_id(self.params)

    def estimate_s(self) -> float:
        return float(self.params["warmup"]) + float(self.params["duration"]) + CELL_OVERHEAD_S


@dataclass
class Matrix:
    name: str
    description: str
    path: Path
    text: str
    cells: list


def cell_id(params: dict) -> str:
    """`ARCH-HASH`: a hash of every parameter (defaults filled in), stable across runs and machines."""
    canon = json.dumps({k: params.get(k) for k in sorted(PARAMS)} | {"repetition": params.get("repetition", 0)},
                       sort_keys=True, separators=(",", ":"))
    return f"{params['arch']}-{hashlib.sha1(canon.encode()).hexdigest()[:10]}"


def _check_value(where: str, key: str, value) -> None:
    types, _ = PARAMS[key]
    if isinstance(value, bool) and bool not in types:
        raise SpinscopeError(f"{where}: {key} = {value!r}: expected {'/'.join(t.__name__ for t in types)}",
                             exit_code=EXIT_USAGE)
    if not isinstance(value, types):
        raise SpinscopeError(f"{where}: {key} = {value!r}: expected {'/'.join(t.__name__ for t in types)}",
                             exit_code=EXIT_USAGE)
    if key in CHOICES and value not in CHOICES[key]:
        raise SpinscopeError(f"{where}: {key} = {value!r}: expected one of {', '.join(CHOICES[key])}",
                             exit_code=EXIT_USAGE)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        raise SpinscopeError(f"{where}: {key} = {value!r}: must be >= 0", exit_code=EXIT_USAGE)


def _expand_group(where: str, table: dict) -> list:
    """Cartesian product of the list-valued keys of `table` -> list of {key: scalar}."""
    axes = []
    for key, value in table.items():
        if key not in PARAMS:
            raise SpinscopeError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(PARAMS))})",
                                 exit_code=EXIT_USAGE)
        values = value if isinstance(value, list) else [value]
        if not values:
            raise SpinscopeError(f"{where}: {key} is an empty list", exit_code=EXIT_USAGE)
        for v in values:
            _check_value(where, key, v)
        axes.append([(key, v) for v in values])
    return [dict(combo) for combo in itertools.product(*axes)]


def _finish(where: str, params: dict) -> dict:
    full = {k: default for k, (_, default) in PARAMS.items()}
    full.update(params)
    if not full["arch"]:
        raise SpinscopeError(f"{where}: no arch", exit_code=EXIT_USAGE)
    if full["mix"]:
        full["path"] = None
    if full["net"] != "veth" and (full["bandwidth"] or full["delay_ms"]):
        raise SpinscopeError(f"{where}: bandwidth and delay_ms need net = \"veth\"", exit_code=EXIT_USAGE)
    if full["bandwidth"]:
        try:
            netcond._bandwidth_bytes(full["bandwidth"])
        except SpinscopeError as exc:
            raise SpinscopeError(f"{where}: {exc}", exit_code=EXIT_USAGE) from None
    if full["duration"] <= 0:
        raise SpinscopeError(f"{where}: duration must be > 0", exit_code=EXIT_USAGE)
    for key in ("server_cpus", "loadgen_cpus"):
        if full[key] is not None:
            full[key] = str(full[key])
    for key in ("duration", "warmup", "interval", "delay_ms"):
        full[key] = float(full[key])
    return full


def parse_matrix(path: str | Path) -> Matrix:
    """Read and expand a matrix file; any problem is one SpinscopeError line naming the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpinscopeError(f"{path}: cannot read: {exc.strerror or exc}", exit_code=EXIT_USAGE) from None
    return parse_matrix_text(text, path)


def parse_matrix_text(text: str, path: Path = Path("<matrix>")) -> Matrix:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpinscopeError(f"{path}: not valid TOML: {exc}", exit_code=EXIT_USAGE) from None
    unknown = set(doc) - TOP_KEYS
    if unknown:
        raise SpinscopeError(f"{path}: unknown top-level key(s) {', '.join(sorted(unknown))} "
                             f"(known: {', '.join(sorted(TOP_KEYS))})", exit_code=EXIT_USAGE)
    defaults = doc.get("defaults", {})
    if not isinstance(defaults, dict):
        raise SpinscopeError(f"{path}: [defaults] must be a table", exit_code=EXIT_USAGE)
    for key, value in defaults.items():
        if key == "repetitions":
            continue  # checked per group
        if key not in PARAMS or isinstance(value, list):
            raise SpinscopeError(f"{path}: [defaults] {key}: unknown key or a list (axes belong in groups)",
                                 exit_code=EXIT_USAGE)
        _check_value(f"{path}: [defaults]", key, value)
    groups = doc.get("group", [])
    if not isinstance(groups, list) or not groups or not all(isinstance(g, dict) for g in groups):
        raise SpinscopeError(f"{path}: no [[group]] tables (a matrix needs at least one)", exit_code=EXIT_USAGE)
    cells: dict = {}
    for index, group in enumerate(groups):
        name = str(group.get("name", f"group{index + 1}"))
        where = f"{path}: group {name!r}"
        claims = group.get("claims", [])
        if isinstance(claims, str):
            claims = [claims]
        reps = group.get("repetitions", doc.get("defaults", {}).get("repetitions", 1))
        if not isinstance(reps, int) or isinstance(reps, bool) or reps < 1:
            raise SpinscopeError(f"{where}: repetitions must be an integer >= 1", exit_code=EXIT_USAGE)
        variants = group.get("variants", [{}])
        if not isinstance(variants, list) or not variants or not all(isinstance(v, dict) for v in variants):
            raise SpinscopeError(f"{where}: variants must be a non-empty list of tables", exit_code=EXIT_USAGE)
        base = {k: v for k, v in group.items() if k not in GROUP_KEYS}
        for vindex, variant in enumerate(variants):
            vwhere = where if variant == {} else f"{where} variant {vindex + 1}"
            for combo in _expand_group(vwhere, {**base, **variant}):
                params = _finish(vwhere, {**{k: v for k, v in defaults.items() if k != "repetitions"}, **combo})
                for rep in range(reps):
                    cell = Cell(params={**params, "repetition": rep}, group=name, claims=list(claims))
                    if cell.id in cells:  # the same cell asked for twice: run once, keep both tags
                        known = cells[cell.id]
                        known.claims += [c for c in claims if c not in known.claims]
                    else:
                        cells[cell.id] = cell
    return Matrix(name=str(doc.get("name", path.stem)), description=str(doc.get("description", "")),
                  path=path, text=text, cells=list(cells.values()))


# ------------------------------------------------------------------------------------------- processes

class CellFailed(Exception):
    """A cell could not be measured; the message is recorded as its error."""


class Processes:
    """Every child process of the sweep, each in its own session so that a whole tree can be signalled."""

    def __init__(self, tag: str = ""):
        self.procs: list = []
        # Every child carries SPINSCOPE_SWEEP=<output dir> in its environment, so leftovers can be told
        # apart from other servers on the machine.
        self.env = dict(os.environ, SPINSCOPE_SWEEP=tag)

    def popen(self, cmd: list, **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(cmd, start_new_session=True, stdin=subprocess.DEVNULL, env=self.env, **kwargs)
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


def _reader(stream, lines: list, event: threading.Event | None = None, word: str = "") -> threading.Thread:
    def run():
        for raw in stream:
            line = raw.decode(errors="replace").rstrip("\n") if isinstance(raw, bytes) else raw.rstrip("\n")
            lines.append(line)
            if event is not None and word in line:
                event.set()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _tail(lines: list, n: int = 3) -> str:
    return " | ".join(line.strip() for line in lines[-n:] if line.strip()) or "no output"


# ------------------------------------------------------------------------------------------- one cell

@dataclass
class Tools:
    refserver: Path
    loadgen: Path
    collector: Path


def find_tools() -> Tools:
    build = repo_root() / "build"
    collector = find_collector()
    missing = [p for p in (build / "refserver", build / "loadgen") if not os.access(p, os.X_OK)]
    if collector is None:
        missing.append(build / "spinscope-collector")
    if missing:
        raise SpinscopeError(f"not built: {', '.join(map(str, missing))}; run `make all`")
    return Tools(build / "refserver", build / "loadgen", collector)


class Runner:
    """Runs cells; owns the processes and the network namespace it creates."""

    def __init__(self, tools: Tools, outdir: Path):
        self.tools = tools
        self.outdir = outdir
        self.procs = Processes(str(outdir.resolve()))
        self.ns: netcond.Namespace | None = None
        self.current_capture: Path | None = None

    def close(self) -> None:
        self.procs.kill_all()
        if self.current_capture is not None:
            self.current_capture.unlink(missing_ok=True)
            self.current_capture = None
        if self.ns is not None:
            self.ns.teardown()
            self.ns = None

    def namespace(self) -> netcond.Namespace:
        if self.ns is None:
            self.ns = netcond.Namespace()
            self.ns.setup()
        return self.ns

    # --- pieces -------------------------------------------------------------------------------------
    def server_command(self, p: dict, host: str) -> list:
        cmd = [str(self.tools.refserver), "--arch", p["arch"], "--port", "0", "--host", host]
        for key, flag in (("workers", "--workers"), ("sndbuf", "--sndbuf"), ("write_policy", "--write-policy"),
                          ("poller", "--poller"), ("backlog", "--backlog")):
            if p[key] is not None:
                cmd += [flag, str(p[key])]
        if p["server_args"]:
            cmd += shlex.split(p["server_args"])
        if p["server_cpus"] is not None:
            cmd = ["taskset", "-c", p["server_cpus"], *cmd]
        if p["net"] == "veth":
            cmd = self.namespace().exec_prefix() + cmd
        return cmd

    def loadgen_command(self, p: dict, host: str, port: int, duration: float) -> list:
        cmd = [str(self.tools.loadgen), "--host", host, "--port", str(port), "--json",
               "--warmup", "0", "--duration", f"{duration:g}", "--concurrency", str(p["concurrency"]),
               "--keepalive", p["keepalive"]]
        cmd += ["--mix", p["mix"]] if p["mix"] else ["--path", p["path"]]
        for key, flag in (("rate", "--rate"), ("burst", "--burst"), ("think_ms", "--think-ms"),
                          ("rcvbuf", "--rcvbuf"), ("threads", "--threads")):
            if p[key] is not None:
                cmd += [flag, f"{p[key]:g}" if isinstance(p[key], float) else str(p[key])]
        if p["loadgen_args"]:
            cmd += shlex.split(p["loadgen_args"])
        if p["loadgen_cpus"] is not None:
            cmd = ["taskset", "-c", p["loadgen_cpus"], *cmd]
        return cmd

    def start_server(self, p: dict, host: str, timeout: float = 10.0):
        proc = self.procs.popen(self.server_command(p, host), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        lines: list = []
        buf = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], 0.1)
            if ready:
                chunk = os.read(proc.stderr.fileno(), 4096)
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    lines.append(line.decode(errors="replace"))
                    m = LISTEN_RE.search(lines[-1])
                    if m:
                        _reader(proc.stderr, lines)
                        return proc, int(m.group(2)), m, lines
            elif proc.poll() is not None:
                break
        proc.poll()
        raise CellFailed(f"server did not start (exit {proc.returncode}): {_tail(lines + [buf.decode(errors='replace')])}")

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
        p = cell.params
        started = time.time()
        result = {"id": cell.id, "group": cell.group, "claims": cell.claims, "params": p,
                  "started_at": _now(), "status": "ok", "error": None}
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
        server, port, listen, server_lines = self.start_server(p, host)
        out["server"] = {"pid": server.pid, "listen_line": listen.group(0), "workers": int(listen.group(4)),
                         "sndbuf_effective": listen.group(5)}
        out["rtt_ms"] = netcond.measure_rtt(host, port)

        if p["warmup"] > 0:
            self.run_loadgen(self.loadgen_command(p, host, port, p["warmup"]), p["warmup"])

        children = p["children"] if p["children"] is not None else p["arch"] in CHILDREN_ARCHS
        ccmd = [str(self.tools.collector), "--pid", str(server.pid), "--duration", f"{p['duration'] + 10:g}",
                "-o", str(capture)]
        if p["interval"] > 0:
            ccmd += ["--interval", f"{p['interval']:g}"]
        if children:
            ccmd.append("--children")
        collector = self.procs.popen(ccmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        attached = threading.Event()
        clines: list = []
        creader = _reader(collector.stderr, clines, attached, "attached")
        deadline = time.monotonic() + 20
        while not attached.wait(0.05):
            if collector.poll() is not None or time.monotonic() > deadline:
                creader.join(timeout=2)
                raise CellFailed(f"collector failed to attach (exit {collector.poll()}): {_tail(clines)}")

        out["loadgen"] = self.run_loadgen(self.loadgen_command(p, host, port, p["duration"]), p["duration"])
        rc = self.procs.stop(collector, signal.SIGINT, timeout=15)
        creader.join(timeout=2)
        if rc != 0 or not capture.exists():
            raise CellFailed(f"collector failed (exit {rc}): {_tail(clines)}")
        rc = self.procs.stop(server, signal.SIGTERM, timeout=5)
        out["server"]["exit_code"] = rc
        if server.poll() is None or rc not in (0, -signal.SIGTERM):
            out["server"]["stderr_tail"] = _tail(server_lines)
        if not out["loadgen"].get("requests"):
            raise CellFailed(f"no request completed ({out['loadgen'].get('errors', 0)} errors)")
        out["capture"] = str(capture.relative_to(self.outdir))
        out["analysis"] = analyze_capture(capture)
        return out


def analyze_capture(path: Path) -> dict:
    """The process-level metrics, labels and a few raw sums of one capture (what a table row needs)."""
    from spinscope.capture import load
    from spinscope.labels import assess
    from spinscope.metrics import analyze

    cap = load(path)
    analysis = analyze(cap)
    assessment = assess(analysis)
    t = cap.totals
    calls = t["read_calls"] + t["write_calls"] + t["poll_calls"] + t["futex_waits"] + t["futex_wakes"]
    return {
        "metrics": {k: (None if v is None or (isinstance(v, float) and not math.isfinite(v)) else float(v))
                    for k, v in analysis.process.items()},
        "labels": [{"name": lab.name, "severity": lab.severity, "cpu_share": lab.cpu_share,
                    "summary": lab.summary} for lab in assessment.labels],
        "notes": assessment.notes,
        "requests": int(cap.request_count),
        "handoffs": int(cap.wakeups["count"].sum()) if len(cap.wakeups) else 0,
        "duration_s": cap.duration_s,
        "end_reason": cap.raw.get("end_reason"),
        "threads_seen": int(t.get("threads_seen", 0)),
        "processes": len(cap.target.get("pids", [])),
        "write_calls": int(cap.requests["write_calls"]),
        "futex_share": (float(t["futex_waits"] + t["futex_wakes"]) / calls) if calls else None,
        "futex_wait_share": (float(t["futex_wait_ns"]) / (t["futex_wait_ns"] + t["poll_ns"] + t["read_ns"]
                             + t["write_ns"])) if (t["futex_wait_ns"] + t["poll_ns"] + t["read_ns"]
                                                  + t["write_ns"]) else None,
        "by_size": cap.by_size.to_dict(orient="records"),
    }


# ------------------------------------------------------------------------------------------- tables

LATENCY_KEYS = (("mean", "lat_mean_ms"), ("p50", "lat_p50_ms"), ("p90", "lat_p90_ms"), ("p99", "lat_p99_ms"),
                ("p99.9", "lat_p999_ms"), ("max", "lat_max_ms"))
LABEL_NAMES = ("write-spin", "spurious-select", "handoff-overhead")


def row_of(result: dict) -> dict:
    """One tidy row per cell: parameters, load, capture metrics, labels."""
    from spinscope.metrics import METRICS

    p = result["params"]
    row = {"cell_id": result["id"], "group": result["group"], "claims": ";".join(result.get("claims", [])),
           "status": result["status"], "error": result.get("error")}
    row.update({k: p.get(k) for k in PARAMS})
    row["repetition"] = p.get("repetition", 0)
    server = result.get("server", {})
    row["sndbuf_effective"] = server.get("sndbuf_effective")
    row["rtt_ms"] = result.get("rtt_ms")
    lg = result.get("loadgen") or {}
    row["lg_requests"] = lg.get("requests")
    row["lg_throughput"] = lg.get("throughput")
    row["lg_errors"] = lg.get("errors")
    row["lg_bytes"] = lg.get("bytes")
    for key, col in LATENCY_KEYS:
        row[col] = (lg.get("latency_ms") or {}).get(key)
    row["classes_json"] = json.dumps(lg["classes"], sort_keys=True) if lg.get("classes") else None
    a = result.get("analysis") or {}
    metrics = a.get("metrics") or {}
    for m in METRICS:
        row[m.name] = metrics.get(m.name)
    row["cap_requests"] = a.get("requests")
    row["cap_handoffs"] = a.get("handoffs")
    row["cap_write_calls"] = a.get("write_calls")
    row["cap_duration_s"] = a.get("duration_s")
    row["threads_seen"] = a.get("threads_seen")
    row["futex_share"] = a.get("futex_share")
    row["futex_wait_share"] = a.get("futex_wait_share")
    cs = metrics.get("cs_per_request")
    row["cs_per_s_load"] = cs * lg["throughput"] if cs is not None and lg.get("throughput") else None
    labels = a.get("labels") or []
    row["labels"] = ";".join(f"{lab['name']}:{lab['severity']}" for lab in labels)
    for name in LABEL_NAMES:
        row["label_" + name.replace("-", "_")] = next((lab["severity"] for lab in labels if lab["name"] == name), None)
    row["by_size_json"] = json.dumps(a["by_size"]) if a.get("by_size") else None
    row["elapsed_s"] = result.get("elapsed_s")
    row["started_at"] = result.get("started_at")
    return row


def load_results(outdir: Path) -> list:
    results = []
    for path in sorted((outdir / "cells").glob("*.json")):
        try:
            results.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue  # not ours or unreadable: never written half (atomic rename)
    return results


def results_frame(outdir: Path) -> pd.DataFrame:
    rows = [row_of(r) for r in load_results(outdir)]
    return pd.DataFrame.from_records(rows) if rows else pd.DataFrame(columns=["cell_id", "status"])


def write_tables(outdir: Path) -> pd.DataFrame:
    """Rebuild DIR/results.csv and DIR/results.parquet from every cell file (atomically)."""
    frame = results_frame(outdir)
    csv_tmp = outdir / ".results.csv.tmp"
    frame.to_csv(csv_tmp, index=False)
    os.replace(csv_tmp, outdir / "results.csv")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return frame  # CSV only; sweep-report reads either
    pq_tmp = outdir / ".results.parquet.tmp"
    frame.to_parquet(pq_tmp, index=False)
    os.replace(pq_tmp, outdir / "results.parquet")
    return frame


def _write_json(path: Path, doc: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str, allow_nan=False) + "\n")
    os.replace(tmp, path)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------------------------------- the verb

def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run reference servers over a matrix of settings and record every cell",
                       description="Expand a matrix file (TOML, docs/sweep.md) into cells; for each, run a "
                       "reference server under load while recording it, and collect one row per cell in "
                       "DIR/results.parquet and DIR/results.csv. Re-running skips cells already in DIR. "
                       "Exit: 0 all cells ok, 3 some cells failed, 2 bad matrix, 130 interrupted.")
    p.add_argument("matrix", metavar="MATRIX", help="matrix file (e.g. matrices/quick.toml)")
    p.add_argument("-o", "--output", metavar="DIR", required=True, type=Path, help="output directory")
    p.add_argument("--list", action="store_true", help="print the cells (id and parameters) and exit")
    p.add_argument("--only", metavar="GLOB", help="run only cells whose id or group matches GLOB")
    p.add_argument("--retry-failed", action="store_true", help="re-run cells recorded as failed")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar or per-cell lines")
    p.set_defaults(func=run)


def describe(p: dict) -> str:
    parts = [p["arch"]]
    for key in ("workers", "sndbuf", "write_policy", "poller", "backlog"):
        if p[key] is not None:
            parts.append(f"{key}={p[key]}")
    parts.append(f"mix={p['mix']}" if p["mix"] else p["path"])
    parts.append(f"c={p['concurrency']}")
    for key in ("rate", "burst", "rcvbuf", "bandwidth"):
        if p[key] is not None:
            parts.append(f"{key}={p[key]}")
    if p["keepalive"] != "on":
        parts.append("keepalive=off")
    if p["net"] != "loopback":
        parts.append(p["net"] + (f" +{p['delay_ms']:g}ms" if p["delay_ms"] else ""))
    if p.get("repetition"):
        parts.append(f"rep {p['repetition']}")
    return " ".join(parts)


def _summary(result: dict) -> str:
    if result["status"] != "ok":
        return f"[red]failed[/red]: {result['error']}"
    lg = result["loadgen"]
    m = result["analysis"]["metrics"]
    def f(v, d=2):
        return "n/a" if v is None else f"{v:.{d}f}"
    labels = ",".join(lab["name"] for lab in result["analysis"]["labels"]) or "-"
    return (f"{lg['throughput']:.0f} req/s p99 {f(lg['latency_ms'].get('p99'))} ms, "
            f"{f(m.get('writes_per_request'), 1)} writes/req, {f(m.get('handoffs_per_request'))} handoffs/req, "
            f"labels {labels}")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    matrix = parse_matrix(args.matrix)
    cells = matrix.cells
    if args.only:
        cells = [c for c in cells if fnmatch.fnmatch(c.id, args.only) or fnmatch.fnmatch(c.group, args.only)]
    if args.list:
        for cell in cells:
            print(f"{cell.id}\t{cell.group}\t{describe(cell.params)}")
        print(f"{len(cells)} cells, about {sum(c.estimate_s() for c in cells) / 60:.1f} min", file=sys.stderr)
        return EXIT_OK
    if os.geteuid() != 0:
        raise SpinscopeError("the collector needs root (BPF): run as root")
    tools = find_tools()
    outdir: Path = args.output
    (outdir / "cells").mkdir(parents=True, exist_ok=True)
    (outdir / "captures").mkdir(exist_ok=True)
    for stale in (outdir / "captures").glob(".*.tmp*"):
        stale.unlink(missing_ok=True)
    shutil.copyfile(matrix.path, outdir / "matrix.toml") if matrix.path.exists() else None
    netcond.cleanup_stale()

    done = {r["id"]: r for r in load_results(outdir)}
    todo = [c for c in cells if c.id not in done or (args.retry_failed and done[c.id]["status"] != "ok")]
    console = Console(stderr=True, quiet=args.quiet, highlight=False)
    meta = {"matrix": matrix.name, "matrix_path": str(matrix.path), "description": matrix.description,
            "cells": len(cells), "skipped": len(cells) - len(todo), "started_at": _now(),
            "host": {"kernel": os.uname().release, "ncpus": os.cpu_count(), "hostname": os.uname().nodename},
            "netem": netcond.netem_available(), "interrupted": False, "finished_at": None}
    _write_json(outdir / "sweep.json", meta)
    if len(cells) - len(todo):
        console.print(f"sweep: {len(cells) - len(todo)} of {len(cells)} cells already in {outdir}, skipped")

    def on_term(signum, frame):
        raise KeyboardInterrupt
    old_term = signal.signal(signal.SIGTERM, on_term)
    runner = Runner(tools, outdir)
    failed = 0
    interrupted = False
    columns = [TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[cells]}"),
               TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn()]
    total_s = sum(c.estimate_s() for c in todo)
    try:
        with Progress(*columns, console=console, transient=False, disable=args.quiet) as progress:
            task = progress.add_task("sweep", total=total_s or 1, cells=f"0/{len(todo)} cells")
            for index, cell in enumerate(todo):
                progress.update(task, description=f"sweep {escape(cell.group)}")
                result = runner.run(cell)
                _write_json(outdir / "cells" / f"{cell.id}.json", result)
                write_tables(outdir)
                failed += result["status"] != "ok"
                progress.console.print(f"{escape(cell.id)} {escape(describe(cell.params))}: {_summary(result)}",
                                       soft_wrap=True)
                progress.update(task, advance=cell.estimate_s(), cells=f"{index + 1}/{len(todo)} cells")
    except KeyboardInterrupt:
        interrupted = True
    finally:
        runner.close()
        signal.signal(signal.SIGTERM, old_term)
        frame = write_tables(outdir)
        meta.update(interrupted=interrupted, finished_at=_now())
        _write_json(outdir / "sweep.json", meta)
    all_failed = int((frame["status"] != "ok").sum()) if len(frame) else 0
    if interrupted:
        console.print(f"sweep: interrupted; {len(frame)} cells recorded in {outdir} (the running cell was "
                      "discarded)")
        return EXIT_INTERRUPTED
    console.print(f"sweep: {len(todo)} cells run, {failed} failed ({all_failed} failed in {outdir} overall); "
                  f"tables: {outdir / 'results.parquet'}, {outdir / 'results.csv'}")
    console.print(f"next: spinscope sweep-report {outdir} --html {outdir / 'report.html'}")
    return EXIT_FAILED_CELLS if all_failed else EXIT_OK
