"""USDT ground truth: request__start/request__done counts equal the load generator's counts."""
import os
import re
import select
import shutil
import signal
import subprocess
import time

import pytest

from conftest import REFSERVER, run_loadgen, stop_server

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="bpftrace needs root"),
    pytest.mark.skipif(shutil.which("bpftrace") is None, reason="bpftrace not installed"),
]

N = 1500

PROGRAM = f"""
usdt:{REFSERVER}:refserver:request__start {{ @start = count(); }}
usdt:{REFSERVER}:refserver:request__done {{ @done = count(); @bytes = sum(arg1); @writes = sum(arg2); }}
"""


def start_bpftrace(timeout=30.0):
    """Start bpftrace and wait until its probes are attached."""
    proc = subprocess.Popen(["bpftrace", "-e", PROGRAM], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    seen = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            seen += chunk
            if b"Attaching" in seen:
                time.sleep(0.5)  # "Attaching" is printed just before the probes go live
                return proc, seen
    proc.kill()
    proc.wait()
    raise RuntimeError(f"bpftrace did not attach: {seen.decode(errors='replace')}")


def stop_bpftrace(proc, seen):
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    text = (seen + out).decode(errors="replace")
    return {k: int(v) for k, v in re.findall(r"@(\w+): (\d+)", text)}


@pytest.mark.parametrize("arch", ["event-loop", "n-copy", "process-per-conn", "reactor-split",
                                  "hybrid", "green-threads"])
def test_usdt_counts_match_loadgen(refserver, arch):
    srv = refserver(arch)
    bt, seen = start_bpftrace()
    try:
        res = run_loadgen(srv.port, "--requests", N, "--concurrency", 8, "--path", "/bytes/1000")
        assert stop_server(srv.proc) == 0
    finally:
        counts = stop_bpftrace(bt, seen) if bt.poll() is None else {}
    assert (res["requests"], res["errors"]) == (N, 0)
    assert counts.get("start") == N and counts.get("done") == N, counts
    assert counts["bytes"] == N * 1000
    assert counts["writes"] >= N  # at least one write() per response
