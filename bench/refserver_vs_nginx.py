#!/usr/bin/env python3
"""Benchmark: refserver's single-threaded event loop against nginx and lighttpd.

All three serve the same two resources, /bytes/100 and /bytes/102400 (nginx and lighttpd
from static files holding refserver's body pattern, so one loadgen command fits all),
each with one worker process pinned to CPU 0, driven by build/loadgen pinned to CPU 1.
Servers are measured alternately, in a rotating order, for several short rounds; the
median throughput per (server, size) is reported with ratios against nginx and lighttpd.

    python3 bench/refserver_vs_nginx.py [--rounds 5] [--duration 3] [--concurrency 50]

Writes bench/results/refserver_vs_nginx.md and .json.  Not a test: numbers depend on the
machine.  Needs nginx, lighttpd, taskset and a built tree (make -C reference-servers).
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from spinscope.lab import refserver

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
RESULTS = ROOT / "bench" / "results"
SIZES = [100, 102400]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def body(n):
    return (b"abcdefghijklmnopqrstuvwxyz" * (n // 26 + 1))[:n]


def wait_listening(port, proc, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


def nginx_config(tmp, docroot, port):
    conf = tmp / "nginx.conf"
    conf.write_text(f"""
user root;
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    sendfile on;
    tcp_nodelay on;
    keepalive_timeout 75s;
    keepalive_requests 100000000;
    client_body_temp_path {tmp}/nginx-body;
    proxy_temp_path {tmp}/nginx-proxy;
    fastcgi_temp_path {tmp}/nginx-fastcgi;
    uwsgi_temp_path {tmp}/nginx-uwsgi;
    scgi_temp_path {tmp}/nginx-scgi;
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{port};
        root {docroot};
    }}
}}
""")
    return ["nginx", "-c", str(conf), "-e", str(tmp / "nginx-error.log")]


def lighttpd_config(tmp, docroot, port):
    conf = tmp / "lighttpd.conf"
    conf.write_text(f"""
server.document-root = "{docroot}"
server.bind = "127.0.0.1"
server.port = {port}
server.errorlog = "{tmp}/lighttpd-error.log"
server.max-worker = 0
server.max-keep-alive-requests = 100000000
server.max-keep-alive-idle = 75
server.max-connections = 4096
mimetype.assign = ( "" => "application/octet-stream" )
""")
    return ["lighttpd", "-D", "-f", str(conf)]


def start(name, cmd, port, procs):
    proc = subprocess.Popen(["taskset", "-c", "0", *cmd], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(proc)
    wait_listening(port, proc)
    return proc


def loadgen(port, size, args, duration, verify=False):
    cmd = ["taskset", "-c", "1", str(BUILD / "loadgen"), "--port", str(port),
           "--path", f"/bytes/{size}", "--concurrency", str(args.concurrency), "--json"]
    if verify:
        cmd += ["--requests", "200", "--verify"]
    else:
        cmd += ["--duration", str(duration), "--warmup", str(args.warmup)]
    out = subprocess.run(cmd, check=True, capture_output=True, timeout=duration + 60)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--warmup", type=float, default=0.5)
    ap.add_argument("--concurrency", type=int, default=50)
    args = ap.parse_args()

    for tool in ("nginx", "lighttpd", "taskset"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found")
    subprocess.run(["make", "-s", "-C", str(ROOT / "reference-servers"), f"BUILD={BUILD}"],
                   check=True)

    procs = []
    tmp = Path(tempfile.mkdtemp(prefix="refbench-"))
    try:
        docroot = tmp / "www"
        (docroot / "bytes").mkdir(parents=True)
        for n in SIZES:
            (docroot / "bytes" / str(n)).write_bytes(body(n))
        os.chmod(tmp, 0o755)

        servers = {}
        cmd = refserver.command("event-loop", program=str(BUILD / "refserver"))
        ours = refserver.start(["taskset", "-c", "0", *cmd], stdin=subprocess.DEVNULL)
        procs.append(ours.proc)
        servers["refserver event-loop"] = ours.port
        port = free_port()
        start("nginx", nginx_config(tmp, docroot, port), port, procs)
        servers["nginx"] = port
        port = free_port()
        start("lighttpd", lighttpd_config(tmp, docroot, port), port, procs)
        servers["lighttpd"] = port

        # Same bytes from everyone before measuring anything.
        for name, port in servers.items():
            for n in SIZES:
                res = loadgen(port, n, args, 0, verify=True)
                if res["errors"] or res["requests"] != 200:
                    sys.exit(f"{name} served /bytes/{n} wrongly: {res}")

        names = list(servers)
        samples = {(name, n): [] for name in names for n in SIZES}
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in SIZES:
                for name in order:
                    res = loadgen(servers[name], n, args, args.duration)
                    samples[(name, n)].append(res)
                    print(f"round {r + 1}/{args.rounds} {name:22s} /bytes/{n:<7d} "
                          f"{res['throughput']:10.0f} req/s  p99 {res['latency_ms']['p99']:.3f} ms"
                          f"  errors {res['errors']}", flush=True)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)

    summary = {"config": {"rounds": args.rounds, "duration_s": args.duration,
                          "concurrency": args.concurrency, "server_cpu": 0, "loadgen_cpu": 1,
                          "cpu_count": os.cpu_count()},
               "results": {}, "ratios": {}}
    for (name, n), runs in samples.items():
        summary["results"].setdefault(name, {})[f"/bytes/{n}"] = {
            "throughput_median": statistics.median(x["throughput"] for x in runs),
            "throughput_all": [x["throughput"] for x in runs],
            "p50_ms_median": statistics.median(x["latency_ms"]["p50"] for x in runs),
            "p99_ms_median": statistics.median(x["latency_ms"]["p99"] for x in runs),
            "errors": sum(x["errors"] for x in runs),
        }
    ours = summary["results"]["refserver event-loop"]
    for other in ("nginx", "lighttpd"):
        for n in SIZES:
            key = f"/bytes/{n}"
            summary["ratios"][f"refserver/{other} {key}"] = round(
                ours[key]["throughput_median"] / summary["results"][other][key]["throughput_median"], 3)

    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "refserver_vs_nginx.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = ["# refserver event-loop vs nginx vs lighttpd", "",
             f"One worker each on CPU 0, loadgen on CPU 1, {args.concurrency} keep-alive "
             f"connections, {args.rounds} alternating rounds of {args.duration:g} s "
             f"(+{args.warmup:g} s warmup); medians.", "",
             "| server | path | req/s (median) | p50 ms | p99 ms | errors |",
             "|---|---|---:|---:|---:|---:|"]
    for name in names:
        for n in SIZES:
            x = summary["results"][name][f"/bytes/{n}"]
            lines.append(f"| {name} | /bytes/{n} | {x['throughput_median']:.0f} | "
                         f"{x['p50_ms_median']:.3f} | {x['p99_ms_median']:.3f} | {x['errors']} |")
    lines += ["", "| ratio (throughput) | value |", "|---|---:|"]
    lines += [f"| {k} | {v:.3f} |" for k, v in summary["ratios"].items()]
    (RESULTS / "refserver_vs_nginx.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
