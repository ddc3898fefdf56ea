#!/usr/bin/env python3
"""FastAPI `def` vs `async def` under spinscope-stacks-helper: which share of the server's on-CPU
samples is in thread-pool machinery frames, and what the helper costs.

For each endpoint kind: start uvicorn (one process, Debian's python3, tests/realservers/apps/
fastapi_bytes.py, as tests/realservers starts it), start the helper on the server's PID and wait for
its "sampling" line, run the load generator (1 client by default) for --seconds, stop the helper
with SIGTERM, classify its stacks. Around the load window it reads the server's and the helper's
utime+stime from /proc and, if kernel.bpf_stats_enabled can be set, the run time of the helper's
BPF programs (bpftool prog show). Everything started here is stopped here, by PID.

Run it under the machine's load lock:
    flock /tmp/spinscope-load.lock python3 stacks-helper/measure/fastapi_machinery.py
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ROOT / "tests" / "realservers" / "apps"
TICK = os.sysconf("SC_CLK_TCK")

# Thread-pool machinery, per frame (kind, name, file). A sample is attributed to the innermost
# (closest to the leaf) frame that is either machinery or the endpoint itself.
ENDPOINT_NAMES = ("bytes_in_the_pool", "bytes_on_the_loop")


def machinery(frame: dict) -> str | None:
    name = frame.get("name") or ""
    file = frame.get("file") or ""
    kind = frame.get("kind")
    if kind == "python":
        if "/anyio/" in file and ("run_sync" in name or "CapacityLimiter" in name
                                  or "WorkerThread" in name or file.endswith("to_thread.py")):
            return "anyio"
        if "starlette/concurrency.py" in file and "run_in_threadpool" in name:
            return "anyio"
        if "/concurrent/futures/" in file:
            return "concurrent.futures"
        if file.endswith("/queue.py"):
            return "queue.Queue"
        if file.endswith("/threading.py") and name.split(".")[0] in ("Condition", "Event", "Semaphore",
                                                                      "BoundedSemaphore", "Lock", "RLock"):
            return "threading sync"
        if "/asyncio/" in file and name.split(".")[-1] in ("call_soon_threadsafe", "_write_to_self",
                                                           "_read_from_self"):
            return "asyncio self-pipe"
    elif kind in ("kernel", "native"):
        if "futex" in name:
            return "futex"
    return None


def is_endpoint(frame: dict) -> bool:
    return frame.get("kind") == "python" and frame.get("name", "").split(".")[-1] in ENDPOINT_NAMES


def classify(stacks: list[dict]) -> dict:
    total = sum(s["count"] for s in stacks)
    out = {"samples": total, "innermost": {}, "any_machinery": 0, "by_thread": {}}
    for s in stacks:
        n = s["count"]
        cls = "other"
        for f in s["frames"]:  # leaf first
            if is_endpoint(f):
                cls = "endpoint"
                break
            m = machinery(f)
            if m:
                cls = "machinery:" + m
                break
        out["innermost"][cls] = out["innermost"].get(cls, 0) + n
        if any(machinery(f) for f in s["frames"]):
            out["any_machinery"] += n
        thread = "main" if s["tid"] == s["pid"] else "other threads"
        out["by_thread"][thread] = out["by_thread"].get(thread, 0) + n
    mach = sum(v for k, v in out["innermost"].items() if k.startswith("machinery:"))
    out["machinery_share"] = round(mach / total, 4) if total else None
    out["any_machinery_share"] = round(out["any_machinery"] / total, 4) if total else None
    out["endpoint_share"] = round(out["innermost"].get("endpoint", 0) / total, 4) if total else None
    return out


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


PROFILER_PROGS = ("native_tracer_entry", "perf_", "tracepoint__", "kprobe__")


def bpf_prog_ids() -> set:
    try:
        out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True,
                             timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return set()
    return {p["id"] for p in json.loads(out or "[]")}


def bpf_stats(exclude: set) -> dict:
    """Run time of the helper's programs: those loaded since `exclude` was taken, named as the
    profiler names its programs (this bpftool lists no owning PIDs)."""
    try:
        out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True,
                             timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    stats = {}
    for p in json.loads(out or "[]"):
        if p["id"] not in exclude and p.get("name", "").startswith(PROFILER_PROGS):
            stats[f'{p.get("name", "?")}#{p["id"]}'] = (p.get("run_time_ns", 0), p.get("run_cnt", 0))
    return stats


def wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server did not listen on {port}")


def stop(proc: subprocess.Popen, sig=signal.SIGTERM, timeout: float = 15) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def run_one(args, endpoint: str, port: int, outdir: Path) -> dict:
    env = dict(os.environ, SPINSCOPE_ENDPOINT=endpoint)
    server = subprocess.Popen(
        ["/usr/bin/python3", "-m", "uvicorn", "--app-dir", str(APPS), "--host", "127.0.0.1",
         "--port", str(port), "--workers", "1", "--no-access-log", "--log-level", "warning",
         "fastapi_bytes:app"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    helper = None
    try:
        wait_port(port, 20)
        subprocess.run([args.loadgen, "--port", str(port), "--path", "/bytes/100", "--concurrency", "1",
                        "--duration", "1"], capture_output=True, timeout=20)  # warm up
        # A server that has run for a while, as spinscope finds them: the helper's default
        # --min-process-age (the target's age less 1 s) then skips processes started since.
        time.sleep(max(0.0, args.settle - 1))
        outfile = outdir / f"stacks-{endpoint}.jsonl"
        before = bpf_prog_ids()
        extra = ["--cpuprofile", str(outdir / f"helper-{endpoint}.pprof")] if args.helper_profile else []
        extra += ["--debug"] if args.helper_verbose else []
        helper = subprocess.Popen([args.helper, "--pid", str(server.pid), "--hz", str(args.hz),
                                   "--out", str(outfile), *extra], stderr=subprocess.PIPE, text=True)
        h_start = time.monotonic()
        line = ""
        while "sampling" not in line:  # the helper's one "sampling has begun" line
            line = helper.stderr.readline()
            if not line and helper.poll() is not None:
                raise RuntimeError(f"helper exited {helper.returncode} before sampling")
            if time.monotonic() - h_start > 90:
                raise RuntimeError("helper did not start within 90 s")
        attach_s = time.monotonic() - h_start
        if args.helper_verbose:  # keep draining the helper's log into a file
            import shutil
            import threading
            logf = open(outdir / f"helper-{endpoint}.log", "w")
            threading.Thread(target=shutil.copyfileobj, args=(helper.stderr, logf), daemon=True).start()
        helper_cpu_at_attach = cpu_s(helper.pid)
        s0, h0, b0, t0 = cpu_s(server.pid), cpu_s(helper.pid), bpf_stats(before), time.monotonic()
        lg = subprocess.run([args.loadgen, "--port", str(port), "--path", "/bytes/100", "--concurrency",
                             str(args.clients), "--duration", str(args.seconds), "--json"],
                            capture_output=True, text=True, timeout=args.seconds + 30)
        s1, h1, b1, t1 = cpu_s(server.pid), cpu_s(helper.pid), bpf_stats(before), time.monotonic()
        stop(helper, signal.SIGTERM)
        lines = outfile.read_text().splitlines()
        head = json.loads(lines[0])
        stacks = [json.loads(x) for x in lines[1:]]
        load = json.loads(lg.stdout) if lg.stdout.strip().startswith("{") else {"raw": lg.stdout[-300:]}
        bpf = {}
        for k, (ns1, cnt1) in b1.items():
            ns0, cnt0 = b0.get(k, (0, 0))
            if cnt1 - cnt0:
                bpf[k] = {"run_ns": ns1 - ns0, "runs": cnt1 - cnt0}
        wall = t1 - t0
        bpf_ns = sum(v["run_ns"] for v in bpf.values())
        res = {
            "endpoint": endpoint,
            "window_s": round(wall, 2),
            "requests": load.get("requests") or load.get("completed") or load.get("ok"),
            "server_cpu_s": round(s1 - s0, 3),
            "helper_attach_s": round(attach_s, 2),
            "helper_cpu_startup_s": round(helper_cpu_at_attach, 3),
            "helper_cpu_window_s": round(h1 - h0, 3),
            "helper_cpu_window_pct_of_one_cpu": round(100 * (h1 - h0) / wall, 2),
            "bpf_run_ms_window": round(bpf_ns / 1e6, 1) if bpf else None,
            "bpf_pct_of_one_cpu": round(100 * bpf_ns / 1e9 / wall, 2) if bpf else None,
            "bpf_programs": dict(sorted(bpf.items(), key=lambda kv: -kv[1]["run_ns"])[:6]),
            "header": head,
            "classes": classify(stacks),
            "load": {k: load[k] for k in list(load)[:12]} if isinstance(load, dict) else load,
        }
        return res
    finally:
        if helper is not None:
            stop(helper, signal.SIGTERM)
        stop(server, signal.SIGTERM)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--helper", default=str(ROOT / "build" / "spinscope-stacks-helper"))
    ap.add_argument("--loadgen", default=str(ROOT / "build" / "loadgen"))
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--hz", type=int, default=99)
    ap.add_argument("--port", type=int, default=18271)
    ap.add_argument("--out-dir", default=str(ROOT / "build" / "stacks-helper" / "measure"))
    ap.add_argument("--endpoints", default="def,async")
    ap.add_argument("--settle", type=float, default=15, help="seconds the server runs before the helper starts")
    ap.add_argument("--helper-verbose", action="store_true", help="keep the helper's debug log")
    ap.add_argument("--helper-profile", action="store_true", help="the helper writes its Go CPU profile")
    args = ap.parse_args()
    outdir = Path(args.out_dir)
    outdir.mkdir(parents=True, exist_ok=True)

    stats_path = Path("/proc/sys/kernel/bpf_stats_enabled")
    old_stats = stats_path.read_text().strip() if stats_path.exists() else None
    try:
        if old_stats == "0":
            stats_path.write_text("1")
    except OSError:
        pass
    results = []
    try:
        for i, ep in enumerate(args.endpoints.split(",")):
            results.append(run_one(args, ep, args.port + i, outdir))
    finally:
        if old_stats == "0":
            try:
                stats_path.write_text("0")
            except OSError:
                pass
    (outdir / "results.json").write_text(json.dumps(results, indent=1))
    for r in results:
        c = r["classes"]
        print(f'{r["endpoint"]:>5}: {c["samples"]} samples ({r["header"]["lost"]} lost), '
              f'machinery {c["machinery_share"]:.1%} (any frame: {c["any_machinery_share"]:.1%}), '
              f'endpoint {c["endpoint_share"]:.1%}; server cpu {r["server_cpu_s"]} s in {r["window_s"]} s; '
              f'helper {r["helper_cpu_window_pct_of_one_cpu"]}% of a CPU (startup {r["helper_cpu_startup_s"]} s '
              f'CPU, {r["helper_attach_s"]} s), BPF {r["bpf_pct_of_one_cpu"]}% of a CPU')
        print("       innermost:", json.dumps(c["innermost"], sort_keys=True))
    print(f"details: {outdir / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
