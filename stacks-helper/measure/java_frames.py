#!/usr/bin/env python3
"""HotSpot frames through spinscope-stacks-helper: a com.sun.net.httpserver server (java/PoolServer.java)
answering on its dispatcher thread ("direct") or handing each exchange to a 4-thread executor ("pool"),
1 client for --seconds. Prints whether JVM frames come out named (interpreted and JIT-compiled), and the
share of samples whose innermost classified frame is executor machinery.

    flock /tmp/spinscope-load.lock python3 stacks-helper/measure/java_frames.py
"""

import argparse
import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fastapi_machinery import ROOT, cpu_s, stop, wait_port  # noqa: E402

JAVA_MACHINERY = ("java.util.concurrent.ThreadPoolExecutor", "java.util.concurrent.LinkedBlockingQueue",
                  "java.util.concurrent.locks.", "java.util.concurrent.FutureTask",
                  "java.util.concurrent.Executors", "jdk.internal.misc.Unsafe.park",
                  "jdk.internal.misc.Unsafe.unpark", "java.util.concurrent.locks.LockSupport")


def machinery(f: dict) -> str | None:
    name = f.get("name") or ""
    if f.get("kind") == "jvm" and any(m in name for m in JAVA_MACHINERY):
        return "executor"
    if f.get("kind") in ("kernel", "native") and "futex" in name:
        return "futex"
    if f.get("kind") == "native" and name.startswith(("pthread_cond_", "Parker::", "Unsafe_Park",
                                                     "Unsafe_Unpark")):
        return "park"
    return None


def run(args, mode: str, port: int, outdir: Path) -> dict:
    classes = ROOT / "build" / "stacks-helper" / "java"
    server = subprocess.Popen(["java", "-Xmx256m", "-Dsun.net.httpserver.nodelay=true", "-cp", str(classes), "PoolServer", str(port), mode],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    helper = None
    try:
        wait_port(port, 30)
        # Warm up (JIT) and let the server age past the processes the helper should skip.
        subprocess.run([args.loadgen, "--port", str(port), "--path", "/bytes/100", "--concurrency", "1",
                        "--duration", str(args.settle)], capture_output=True, timeout=args.settle + 30)
        outfile = outdir / f"stacks-java-{mode}.jsonl"
        helper = subprocess.Popen([args.helper, "--pid", str(server.pid), "--hz", str(args.hz),
                                   "--out", str(outfile)], stderr=subprocess.PIPE, text=True)
        t = time.monotonic()
        while "sampling" not in (line := helper.stderr.readline()):
            if (not line and helper.poll() is not None) or time.monotonic() - t > 90:
                raise RuntimeError("helper did not start")
        s0, h0, t0 = cpu_s(server.pid), cpu_s(helper.pid), time.monotonic()
        lg = subprocess.run([args.loadgen, "--port", str(port), "--path", "/bytes/100", "--concurrency", "1",
                             "--duration", str(args.seconds), "--json"], capture_output=True, text=True,
                            timeout=args.seconds + 30)
        s1, h1, t1 = cpu_s(server.pid), cpu_s(helper.pid), time.monotonic()
        stop(helper, signal.SIGTERM)
        lines = outfile.read_text().splitlines()
        head, stacks = json.loads(lines[0]), [json.loads(x) for x in lines[1:]]
    finally:
        if helper is not None:
            stop(helper)
        stop(server)
    total = sum(s["count"] for s in stacks)
    kinds, jvm_named, jvm_all, inner, top = Counter(), 0, 0, Counter(), Counter()
    for s in stacks:
        cls = "other"
        for f in s["frames"]:
            kinds[f["kind"]] += s["count"]
            if f["kind"] == "jvm":
                jvm_all += s["count"]
                jvm_named += s["count"] * (not f["name"].startswith("[unsymbolized"))
        for f in s["frames"]:
            if f["kind"] == "jvm" and "PoolServer.handle" in f["name"]:
                cls = "endpoint"
                break
            if m := machinery(f):
                cls = "machinery:" + m
                break
        inner[cls] += s["count"]
        jf = [f["name"] for f in s["frames"] if f["kind"] == "jvm"][:3]
        if jf:
            top[" <- ".join(jf)] += s["count"]
    mach = sum(v for k, v in inner.items() if k.startswith("machinery:"))
    load = json.loads(lg.stdout) if lg.stdout.strip().startswith("{") else {}
    return {"mode": mode, "samples": total, "lost": head["lost"], "server_cpu_s": round(s1 - s0, 3),
            "window_s": round(t1 - t0, 2), "helper_cpu_pct": round(100 * (h1 - h0) / (t1 - t0), 2),
            "requests": load.get("requests"),
            "frames_by_kind": dict(kinds), "jvm_frames_named_share": round(jvm_named / jvm_all, 4) if jvm_all else None,
            "innermost": dict(inner), "machinery_share": round(mach / total, 4) if total else None,
            "top_jvm_leaf3": top.most_common(8)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--helper", default=str(ROOT / "build" / "spinscope-stacks-helper"))
    ap.add_argument("--loadgen", default=str(ROOT / "build" / "loadgen"))
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--settle", type=float, default=15)
    ap.add_argument("--hz", type=int, default=99)
    ap.add_argument("--port", type=int, default=18281)
    ap.add_argument("--out-dir", default=str(ROOT / "build" / "stacks-helper" / "measure"))
    args = ap.parse_args()
    classes = ROOT / "build" / "stacks-helper" / "java"
    classes.mkdir(parents=True, exist_ok=True)
    subprocess.run(["javac", "-d", str(classes), str(Path(__file__).parent / "java" / "PoolServer.java")],
                   check=True, timeout=120)
    outdir = Path(args.out_dir)
    outdir.mkdir(parents=True, exist_ok=True)
    res = [run(args, m, args.port + i, outdir) for i, m in enumerate(("pool", "direct"))]
    (outdir / "java-results.json").write_text(json.dumps(res, indent=1))
    for r in res:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
