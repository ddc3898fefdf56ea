#!/usr/bin/env python3
"""What `--stacks[=HZ]` costs a busy server, next to perf record. Writes bench/results/stacks_cost.md and .json.

The refserver (event-loop, then reactor-split: two reactors and a hand-off per request, so event stacks
of source `handoff` every request) answers 100 B responses to the load generator, closed loop, the server
pinned to CPU 0 and the load generator and the tracer to CPU 1 (bench/run.py's helpers). Rounds of
U T1 U T2 U ... (U: untraced; the modes' order rotates from round to round): each traced run's ratio is to
the mean of the untraced runs on either side of it. The machine is noisy: ratios only, medians and spread.

Per mode: throughput and server CPU per request against untraced; the tracer's own CPU during the load
(utime+stime from /proc: the collector, or the perf process) and over its whole life (attach and exit
included, from wait4); for spinscope the BPF programs' run time per second (kernel.bpf_stats_enabled, on
for the whole run and restored after), the capture's `stacks.records` and `stacks.collector_cpu_s`; the
output's size (capture JSON, perf.data). perf record only copies stacks: it unwinds in `perf script`, whose
CPU on the file (after the run, outside any measured window) is its unwinder's.

The headline: sampler + unwinder = (on_cpu_sample's run time + the collector's stacks CPU) per second of
capture, as a share of one CPU, and the extra on_sys_exit time with --stacks (event stacks).

    flock /tmp/spinscope-load.lock python3 bench/stacks_cost.py [--pairs 3] [--seconds 5]

(it takes the machine lock itself when no ancestor holds it). `--baseline COLLECTOR` adds a mode
`--stacks 99` run by another build of the collector (a change's before and after, side by side in one run:
write those with --out elsewhere than the reference results).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests"), str(ROOT / "analyzer" / "src")]
import run as bench  # noqa: E402
from machine_lock import load_lock  # noqa: E402

PATH = "/bytes/100"
STATS = Path("/proc/sys/kernel/bpf_stats_enabled")


@dataclass
class Mode:
    name: str
    kind: str  # spinscope | perf
    tracer: bench.Tracer
    hz: int = 0  # --stacks HZ (0: no stacks)


def spinscope(name: str, *extra: str, hz: int = 0, collector: Path | None = None) -> Mode:
    return Mode(name, "spinscope", bench.Tracer(name, lambda pid, w: bench.spinscope_cmd(pid, w, collector, *extra),
                                                bench.SPINSCOPE_READY, "stdout"), hz)


def perf(name: str, *extra: str) -> Mode:
    # No readiness line: run.py's grace period (2 s) after starting it.
    return Mode(name, "perf", bench.Tracer(name, lambda pid, w: ["perf", "record", *extra, "-p", str(pid),
                                                                 "-o", str(w / "perf.data")], None))


MODES = {
    "spinscope": spinscope("spinscope"),
    "stacks99": spinscope("spinscope --stacks 99", "--stacks", "99", hz=99),
    "stacks999": spinscope("spinscope --stacks 999", "--stacks", "999", hz=999),
    "perf-fp": perf("perf record -F 99 -g", "-F", "99", "-g"),
    "perf-dwarf": perf("perf record -F 99 --call-graph dwarf", "-F", "99", "--call-graph", "dwarf"),
}
# The busier-stack case: the modes worth comparing at 99 Hz.
SERVERS = {
    "event-loop": list(MODES),
    "reactor-split": ["spinscope", "stacks99", "perf-dwarf"],
}


def log(msg: str) -> None:
    bench.log(f"stacks_cost: {msg}")


def tree_run_ns(pid: int) -> int:
    """On-CPU nanoseconds so far of pid's live threads and processes below it (schedstat's sum_exec_runtime:
    exact, where utime+stime counts clock ticks of 10 ms)."""
    total = 0
    for p in bench.descendants(pid):
        try:
            tasks = list(Path(f"/proc/{p}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, IndexError, ValueError):
                pass
    return total


def stop_with_rusage(running: bench.Running, timeout: float = 60.0) -> float:
    """Stop the tracer as run.py does (its stop signal), reap it ourselves and return the CPU seconds of its
    whole life (wait4's rusage: attach, run, and the work it does on its way out, e.g. perf's build-ids)."""
    proc = running.proc
    os.killpg(proc.pid, running.tracer.stop_signal) if proc.returncode is None else None
    deadline = time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            pid, status, ru = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime


def perf_script(work: Path) -> dict:
    """`perf script` on the file, pinned to the load CPU, outside any measured window: where perf unwinds
    (--call-graph dwarf) and names. Its CPU, and the samples it printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    out = subprocess.run(bench.pinned(bench.LOAD_CPU, ["perf", "script", "-i", str(work / "perf.data")]),
                         capture_output=True, text=True, timeout=300)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    samples = sum(1 for line in out.stdout.splitlines() if line and not line[0].isspace())
    frames = sum(1 for line in out.stdout.splitlines() if line[:1].isspace() and line.strip())
    return {"script_cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
            "script_wall_s": time.monotonic() - t0, "samples": samples, "frames": frames,
            "script_exit": out.returncode}


def traced_run(mode: Mode, server: bench.Server, seconds: float) -> dict:
    """One run of the load under mode's tracer: the load's result and the tracer's figures."""
    with tempfile.TemporaryDirectory(prefix="spinscope-stacks-cost-") as tmp:
        work = Path(tmp)
        running = bench.start_tracer(mode.tracer, server.pid, work)
        try:
            progs0 = bench.collector_prog_stats(running.proc.pid) if mode.kind == "spinscope" else {}
            cpu0, ns0, t0 = bench.tree_cpu_seconds(running.proc.pid), tree_run_ns(running.proc.pid), time.monotonic()
            load = bench.loadgen(server.port, PATH, seconds, server_pid=server.pid)
            window = time.monotonic() - t0
            cpu = bench.tree_cpu_seconds(running.proc.pid) - cpu0
            run_ns = tree_run_ns(running.proc.pid) - ns0
            progs1 = bench.collector_prog_stats(running.proc.pid) if mode.kind == "spinscope" else {}
        finally:
            life_cpu = stop_with_rusage(running)
        row = {"load": load, "window_s": window, "tracer_cpu_s": cpu, "tracer_cpu_share": cpu / window,
               "tracer_run_share": run_ns / 1e9 / window,
               "tracer_life_cpu_s": life_cpu, "attach_s": running.attach_s, "exit": running.proc.returncode}
        programs = {}
        for name, (runs, ns) in progs1.items():
            runs0, ns0 = progs0.get(name, (0, 0))
            programs[name] = {"runs": runs - runs0, "ns": ns - ns0, "ns_per_s": (ns - ns0) / window,
                              "ns_per_run": (ns - ns0) / (runs - runs0) if runs > runs0 else None}
        row["programs"] = programs
        if mode.kind == "spinscope":
            path = work / "capture.json"
            row["output_bytes"] = path.stat().st_size
            cap = json.loads(path.read_text())
            row["capture_duration_s"] = cap["duration_s"]
            stacks = cap.get("stacks")
            if stacks:
                row["stacks"] = {k: stacks[k] for k in ("records", "events", "events_without_stack", "lost",
                                                         "no_user_frames", "truncated", "collector_cpu_s")}
                row["stacks"]["unique_stacks"] = len(stacks["stacks"])
                row["stacks"]["frames"] = len(stacks["frames"])
                sampler = programs.get("on_cpu_sample", {}).get("ns_per_s", 0.0) / 1e9
                row["sampler_share"] = sampler
                row["unwinder_share"] = stacks["collector_cpu_s"] / cap["duration_s"]
                row["sampler_unwinder_share"] = sampler + row["unwinder_share"]
        else:
            path = work / "perf.data"
            row["output_bytes"] = path.stat().st_size if path.exists() else 0
            row["perf"] = perf_script(work) if path.exists() else {}
            if row["perf"]:
                # perf's record-time CPU is its copier; perf script's is its unwinder (per second of run)
                row["unwinder_share"] = row["perf"]["script_cpu_s"] / window
        return row


def ratio(row: dict, before: dict, after: dict, key) -> float:
    base = (key(before) + key(after)) / 2
    return key(row["load"]) / base if base else float("nan")


def spread(values: list) -> dict:
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def measure_server(arch: str, modes: list, pairs: int, seconds: float) -> list:
    server = bench.start_refserver(arch)
    samples = {m: [] for m in modes}
    try:
        bench.loadgen(server.port, PATH, 1.0)  # warm up
        untraced = lambda: bench.loadgen(server.port, PATH, seconds, server_pid=server.pid)  # noqa: E731
        for r in range(pairs):
            order = modes[r % len(modes):] + modes[:r % len(modes)]
            before = untraced()
            for key in order:
                mode = MODES[key]
                try:
                    row = traced_run(mode, server, seconds)
                except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
                    log(f"{arch} {mode.name} failed: {exc}")
                    before = untraced()
                    continue
                after = untraced()
                row["throughput_ratio"] = ratio(row, before, after, lambda x: x["throughput"])
                row["server_cpu_per_request_ratio"] = ratio(row, before, after,
                                                            lambda x: x["server_cpu_us_per_request"])
                row["untraced_rps"] = (before["throughput"] + after["throughput"]) / 2
                samples[key].append(row)
                log(f"{arch} round {r + 1} {mode.name}: throughput x{row['throughput_ratio']:.3f}, tracer "
                    f"{row['tracer_cpu_share']:.1%}, sampler+unwinder "
                    f"{row.get('sampler_unwinder_share', float('nan')):.2%}, output {row['output_bytes']:,} B")
                before = after
    finally:
        server.stop()
    return [summarize(arch, key, samples[key]) for key in modes]


def summarize(arch: str, key: str, rows: list) -> dict:
    mode = MODES[key]
    s = {"server": arch, "mode": mode.name, "kind": mode.kind, "hz": mode.hz, "pairs": len(rows), "runs": rows}
    if not rows:
        return s
    s["throughput_ratio"] = spread([r["throughput_ratio"] for r in rows])
    s["server_cpu_per_request_ratio"] = spread([r["server_cpu_per_request_ratio"] for r in rows])
    s["tracer_cpu_share"] = spread([r["tracer_cpu_share"] for r in rows])
    s["tracer_run_share"] = spread([r["tracer_run_share"] for r in rows])
    s["tracer_life_cpu_s"] = spread([r["tracer_life_cpu_s"] for r in rows])
    s["output_bytes"] = spread([r["output_bytes"] for r in rows])
    s["untraced_rps"] = statistics.median(r["untraced_rps"] for r in rows)
    s["requests_per_s"] = statistics.median(r["load"]["throughput"] for r in rows)
    names = sorted({n for r in rows for n in r["programs"]})
    s["programs"] = {n: {"ns_per_s": spread([r["programs"].get(n, {}).get("ns_per_s", 0.0) for r in rows]),
                         "ns_per_run": spread([r["programs"].get(n, {}).get("ns_per_run") for r in rows]),
                         "runs_per_request": spread([r["programs"].get(n, {}).get("runs", 0) / r["load"]["requests"]
                                                     for r in rows if r["load"]["requests"]])}
                     for n in names}
    if mode.kind == "spinscope" and rows[0].get("stacks"):
        s["sampler_share"] = spread([r["sampler_share"] for r in rows])
        s["unwinder_share"] = spread([r["unwinder_share"] for r in rows])
        s["sampler_unwinder_share"] = spread([r["sampler_unwinder_share"] for r in rows])
        s["collector_cpu_s"] = spread([r["stacks"]["collector_cpu_s"] for r in rows])
        s["records"] = {src: statistics.median(r["stacks"]["records"].get(src, 0) for r in rows)
                        for src in rows[0]["stacks"]["records"]}
        s["records_per_s"] = spread([sum(r["stacks"]["records"].values()) / r["capture_duration_s"] for r in rows])
        s["server_cpu_share"] = spread([r["load"]["throughput"] * r["load"]["server_cpu_us_per_request"] / 1e6
                                        for r in rows])
        s["lost"] = {k: max(r["stacks"]["lost"][k] for r in rows) for k in rows[0]["stacks"]["lost"]}
        s["unique_stacks"] = statistics.median(r["stacks"]["unique_stacks"] for r in rows)
    if mode.kind == "perf" and rows[0].get("perf"):
        s["perf_samples_per_s"] = statistics.median(r["perf"]["samples"] / r["window_s"] for r in rows)
        s["perf_samples"] = statistics.median(r["perf"]["samples"] for r in rows)
        s["perf_script_cpu_s"] = spread([r["perf"]["script_cpu_s"] for r in rows])
        s["unwinder_share"] = spread([r["unwinder_share"] for r in rows])
    return s


def fmt_spread(x: dict, f: str = "{:.3f}") -> str:
    if not x or x.get("median") is None:
        return "n/a"
    return f"{f.format(x['median'])} [{f.format(x['min'])}, {f.format(x['max'])}]"


def size(n: float) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def ms_per_s(s: dict, prog: str) -> str:
    p = s.get("programs", {}).get(prog)
    return fmt_spread({k: v / 1e6 for k, v in p["ns_per_s"].items()}, "{:.2f}") if p else "-"


def markdown(results: dict) -> str:
    st = results["settings"]
    out = ["# What `--stacks` costs, next to perf record", "",
           f"Machine: {os.cpu_count()} CPUs (a VM: no hardware PMU, so spinscope and perf both sample on "
           f"`cpu-clock`), kernel {st['kernel']}, perf {st['perf']}. refserver, 100 B responses, closed loop, "
           f"100 connections; server pinned to CPU {bench.SERVER_CPU}, load generator and tracer to CPU "
           f"{bench.LOAD_CPU}. {st['pairs']} rounds of {st['seconds']:g} s runs: untraced, then each mode with an "
           "untraced run after it (modes rotate per round); a traced run's ratio is to the mean of the untraced "
           "runs on either side. Figures: median [min, max] over rounds. kernel.bpf_stats_enabled was "
           f"{'on for the whole run (two clock reads per BPF program run: spinscope rows pay it, perf rows do not)' if st['bpf_stats'] else 'off (no BPF run times)'}.",
           "", f"Re-run: `{st['command']}`", ""]
    out += ["## Per mode", "",
            "*Tracer CPU*: the tracer process's utime+stime during the load, share of one CPU (in brackets: "
            "its exact on-CPU time, schedstat, median). *Sampler + "
            "unwinder*: (on_cpu_sample's BPF run time + the capture's `stacks.collector_cpu_s`) per second, share "
            "of one CPU; for perf, `perf script`'s CPU on the file per second recorded (perf unwinds after the "
            "run, not during it). *Output*: the capture JSON, or perf.data.", "",
            "| server | mode | throughput ratio | server CPU/request ratio | tracer CPU | sampler + unwinder "
            "| on_cpu_sample ms/s | on_sys_exit ms/s | output |",
            "|---|---|---|---|---|---|---|---|---|"]
    for s in results["modes"]:
        if not s["pairs"]:
            out.append(f"| {s['server']} | {s['mode']} | failed | | | | | | |")
            continue
        su = fmt_spread(s.get("sampler_unwinder_share"), "{:.2%}") if s.get("sampler_unwinder_share") else (
            fmt_spread(s["unwinder_share"], "{:.2%}") + " (perf script)" if s.get("unwinder_share") else "-")
        out.append(f"| {s['server']} | {s['mode']} | {fmt_spread(s['throughput_ratio'])} | "
                   f"{fmt_spread(s['server_cpu_per_request_ratio'])} | {fmt_spread(s['tracer_cpu_share'], '{:.1%}')} "
                   f"({s['tracer_run_share']['median']:.2%}) "
                   f"| {su} | {ms_per_s(s, 'on_cpu_sample')} | {ms_per_s(s, 'on_sys_exit')} | "
                   f"{size(s['output_bytes']['median'])} |")
    out += ["", "## Stacks recorded", "",
            "| server | mode | records/s | records (median run, by source) | lost | unique stacks | collector_cpu_s "
            "| µs per record | tracer CPU, whole life |", "|---|---|---|---|---|---|---|---|---|"]
    for s in results["modes"]:
        if not s["pairs"]:
            continue
        if s.get("records"):
            n = sum(s["records"].values())
            recs = ", ".join(f"{k} {v:,.0f}" for k, v in s["records"].items() if v)
            lost = ", ".join(f"{k} {v}" for k, v in s["lost"].items() if v) or "0"
            per = s["collector_cpu_s"]["median"] / n * 1e6 if n else float("nan")
            out.append(f"| {s['server']} | {s['mode']} | {s['records_per_s']['median']:,.0f} | {recs} | {lost} | "
                       f"{s['unique_stacks']:,.0f} | {fmt_spread(s['collector_cpu_s'], '{:.3f}')} s | {per:.0f} | "
                       f"{fmt_spread(s['tracer_life_cpu_s'], '{:.2f}')} s |")
        elif s.get("perf_samples") is not None:
            out.append(f"| {s['server']} | {s['mode']} | {s['perf_samples'] / st['seconds']:,.0f} | "
                       f"{s['perf_samples']:,.0f} samples (perf script) | | | perf script "
                       f"{fmt_spread(s['perf_script_cpu_s'], '{:.3f}')} s | "
                       f"{s['perf_script_cpu_s']['median'] / max(s['perf_samples'], 1) * 1e6:.0f} | "
                       f"{fmt_spread(s['tracer_life_cpu_s'], '{:.2f}')} s |")
        else:
            out.append(f"| {s['server']} | {s['mode']} | | | | | | | {fmt_spread(s['tracer_life_cpu_s'], '{:.2f}')} s |")
    out += ["", "## on_sys_exit with and without --stacks", "",
            "| server | mode | on_sys_exit ms/s | runs per request | ns per run | extra vs no stacks |",
            "|---|---|---|---|---|---|"]
    for server in dict.fromkeys(s["server"] for s in results["modes"]):
        rows = [s for s in results["modes"] if s["server"] == server and s["kind"] == "spinscope" and s["pairs"]]
        base = next((s for s in rows if not s["hz"]), None)
        for s in rows:
            p = s["programs"].get("on_sys_exit")
            if not p:
                continue
            extra = ""
            if base and s is not base and base["programs"].get("on_sys_exit"):
                b = base["programs"]["on_sys_exit"]
                d_run = p["ns_per_run"]["median"] - b["ns_per_run"]["median"]
                d_req = (p["ns_per_run"]["median"] * p["runs_per_request"]["median"]
                         - b["ns_per_run"]["median"] * b["runs_per_request"]["median"])
                extra = f"{d_run:+.0f} ns per run, {d_req:+.0f} ns per request"
            out.append(f"| {server} | {s['mode']} | {ms_per_s(s, 'on_sys_exit')} | "
                       f"{p['runs_per_request']['median']:.2f} | {p['ns_per_run']['median']:.0f} | {extra} |")
    out += ["", "## Headline", ""] + results.get("headline", []) + [""]
    notes = results.get("notes")
    if notes:
        out += ["## Reading", "", notes.rstrip(), ""]
    return "\n".join(out)


def unwind_cost(modes: list) -> dict:
    """collector_cpu_s = fixed + per_record x records, least squares over a server's --stacks runs (of more
    than one rate): the unwinder's cost split into what the first records pay (libdw's module reports, CFI,
    symbol tables and line info, each unique address named once) and what each further record costs."""
    fits = {}
    for server in dict.fromkeys(s["server"] for s in modes):
        runs = [r for s in modes if s["server"] == server and s["kind"] == "spinscope" and s["hz"]
                for r in s["runs"] if r.get("stacks")]
        if len({s["hz"] for s in modes if s["server"] == server and s["kind"] == "spinscope" and s["hz"]}) < 2:
            continue  # one rate: the records vary by noise only, no line to fit
        xs = [sum(r["stacks"]["records"].values()) for r in runs]
        ys = [r["stacks"]["collector_cpu_s"] for r in runs]
        if len(set(xs)) > 2:
            fit = statistics.linear_regression(xs, ys)
            fits[server] = {"fixed_s": fit.intercept, "per_record_s": fit.slope, "runs": len(runs)}
    return fits


def headline(modes: list, fits: dict) -> list:
    lines = []
    for s in modes:
        if s.get("sampler_unwinder_share") and s["pairs"]:
            lines.append(f"- {s['server']}, {s['mode']}: sampler + unwinder together "
                         f"**{s['sampler_unwinder_share']['median']:.2%} of one CPU** (on_cpu_sample "
                         f"{s['sampler_share']['median']:.2%}, unwinding {s['unwinder_share']['median']:.2%}); "
                         f"throughput x{s['throughput_ratio']['median']:.3f}, collector "
                         f"{s['tracer_cpu_share']['median']:.1%} of one CPU")
        if s["kind"] == "perf" and s["pairs"] and s.get("unwinder_share"):
            lines.append(f"- {s['server']}, {s['mode']}: perf record {s['tracer_cpu_share']['median']:.1%} of one "
                         f"CPU while recording, perf script {s['unwinder_share']['median']:.2%} per second recorded; "
                         f"throughput x{s['throughput_ratio']['median']:.3f}, perf.data "
                         f"{size(s['output_bytes']['median'])}")
    for server in dict.fromkeys(s["server"] for s in modes):
        rows = {s["hz"]: s for s in modes if s["server"] == server and s["kind"] == "spinscope" and s["pairs"]}
        base = rows.get(0)
        for hz, s in rows.items():
            if hz and base and "on_sys_exit" in s["programs"] and "on_sys_exit" in base["programs"]:
                d = (s["programs"]["on_sys_exit"]["ns_per_s"]["median"]
                     - base["programs"]["on_sys_exit"]["ns_per_s"]["median"]) / 1e6
                b, p = base["programs"]["on_sys_exit"], s["programs"]["on_sys_exit"]
                per_req = (p["ns_per_run"]["median"] * p["runs_per_request"]["median"]
                           - b["ns_per_run"]["median"] * b["runs_per_request"]["median"])
                lines.append(f"- {server}: on_sys_exit with --stacks {hz} vs without: "
                             f"{p['ns_per_run']['median'] - b['ns_per_run']['median']:+.0f} ns per run "
                             f"({b['ns_per_run']['median']:.0f} -> {p['ns_per_run']['median']:.0f}), {per_req:+.0f} ns "
                             f"per request; per second {d:+.2f} ms ({d / 10:+.3f}% of one CPU; moves with the "
                             f"throughput of the runs)")
    for server, fit in fits.items():
        rates = {s["hz"]: s for s in modes if s["server"] == server and s["kind"] == "spinscope" and s["hz"]}
        line = (f"- {server}, the unwinder's cost split (least squares over {fit['runs']} captures): "
                f"{fit['fixed_s'] * 1e3:.0f} ms once per capture (the first records: libdw's modules, CFI, "
                f"symbols and lines) + {fit['per_record_s'] * 1e6:.1f} µs per record")
        for hz, s in sorted(rates.items()):
            steady = s["sampler_share"]["median"] + fit["per_record_s"] * s["records_per_s"]["median"]
            line += (f"; at {hz} Hz, past that first cost, sampler + unwinder "
                     f"{steady:.2%} of one CPU ({s['records_per_s']['median']:.0f} records/s; a thread busy all "
                     f"the time would give {hz}/s: "
                     f"{s['sampler_share']['median'] + fit['per_record_s'] * hz:.2%})")
        lines.append(line)
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=3, help="rounds (untraced/traced pairs per mode)")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each run")
    parser.add_argument("--servers", nargs="*", choices=list(SERVERS), default=list(SERVERS))
    parser.add_argument("--no-bpf-stats", action="store_true", help="leave kernel.bpf_stats_enabled alone")
    parser.add_argument("--out", type=Path, default=bench.RESULTS / "stacks_cost")
    parser.add_argument("--baseline", type=Path, help="also --stacks 99 with this collector (the before)")
    parser.add_argument("--render-only", action="store_true",
                        help="measure nothing: rewrite the .md from the .json (and the .md's hand-written Reading)")
    args = parser.parse_args()
    if args.render_only:
        results = json.loads(args.out.with_suffix(".json").read_text())
        return write(args, results)
    if os.geteuid() != 0:
        log("needs root")
        return 1
    for binary in ("refserver", "loadgen", "spinscope-collector"):
        if not (bench.BUILD / binary).exists():
            log(f"build/{binary} missing: make all")
            return 1
    if args.baseline:
        MODES["stacks99-baseline"] = spinscope(f"spinscope --stacks 99 (baseline {args.baseline})", "--stacks", "99",
                                               hz=99, collector=args.baseline.resolve())
        for arch in args.servers:
            SERVERS[arch].insert(SERVERS[arch].index("stacks99"), "stacks99-baseline")
    perf_version = subprocess.run(["perf", "--version"], capture_output=True, text=True).stdout.strip()
    argv = " ".join(sys.argv[1:])
    results = {"settings": {"pairs": args.pairs, "seconds": args.seconds, "kernel": os.uname().release,
                            "perf": perf_version.replace("perf version ", ""), "bpf_stats": not args.no_bpf_stats,
                            "command": f"flock /tmp/spinscope-load.lock python3 bench/stacks_cost.py {argv}".strip()},
               "modes": []}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally below restores the sysctl
    t0 = time.monotonic()
    with load_lock():
        previous = STATS.read_text().strip()
        try:
            if not args.no_bpf_stats:
                bench.bpf_stats(True)
            for arch in args.servers:
                results["modes"] += measure_server(arch, SERVERS[arch], args.pairs, args.seconds)
        finally:
            STATS.write_text(previous)
    results["settings"]["elapsed_s"] = time.monotonic() - t0
    return write(args, results)


def write(args, results: dict) -> int:
    results["unwind_fit"] = unwind_cost(results["modes"])
    results["headline"] = headline(results["modes"], results["unwind_fit"])
    # The reading of the numbers is written by hand at the end of the .md: a regeneration keeps it.
    md = args.out.with_suffix(".md")
    if md.exists() and "\n## Reading\n" in md.read_text():
        results["notes"] = md.read_text().split("\n## Reading\n", 1)[1].lstrip("\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=2))
    args.out.with_suffix(".md").write_text(markdown(results))
    log(f"wrote {args.out.with_suffix('.md')} and .json (measured in {results['settings']['elapsed_s']:.0f} s)")
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
