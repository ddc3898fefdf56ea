"""USDT ground truth: request__start/request__done counts equal the load generator's counts."""
import os
import re
import select
import shutil
import signal
import subprocess
import time

import pytest

from refserver_harness import REFSERVER, run_loadgen, stop_server

pytestmark = pytest.mark.skipif(shutil.which("bpftrace") is None, reason="bpftrace not installed")

N = 1500

# Probes on the binary fire in every process running it (other test suites may run refserver at
# the same time), so count only the server under test and its forked children.
PROGRAM = """
BEGIN {{ printf("READY\\n"); }}
usdt:{binary}:refserver:request__start /pid == {pid} || curtask->real_parent->tgid == {pid}/
{{ @start = count(); }}
usdt:{binary}:refserver:request__done /pid == {pid} || curtask->real_parent->tgid == {pid}/
{{ @done = count(); @bytes = sum(arg1); @writes = sum(arg2); }}
interval:ms:100 {{ print(@done); }}
"""
# The server is stopped only once every response's request__done has fired (@done reaches N, printed by
# bpftrace every 100 ms), not as soon as the client has them all: a process-per-conn child fires it after its
# write returns, the client can read the response before the child runs again, and the parent's SIGTERM kills
# its children at once (a fresh-clone run beside a CPU hog, 2026-11-29: start 1500, done 1499, writes 1499).
DONE_WAIT_S = 30.0


def read_until(proc, seen: bytes, enough, timeout: float) -> tuple:
    """Read bpftrace's output until enough(all read so far) holds, its output ends or the timeout passes:
    (whether it held, all read)."""
    deadline = time.monotonic() + timeout
    while not enough(seen) and time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            seen += chunk
    return enough(seen), seen


def start_bpftrace(server_pid, timeout=30.0):
    """Start bpftrace for one server and wait until its probes are attached."""
    program = PROGRAM.format(binary=REFSERVER, pid=server_pid)
    proc = subprocess.Popen(["bpftrace", "-e", program], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    # bpftrace prints "Attaching N probes..." before attaching; BEGIN runs after.
    attached, seen = read_until(proc, b"", lambda out: b"Attaching" in out and b"READY" in out, timeout)
    if attached:
        return proc, seen
    proc.kill()
    proc.wait()
    raise RuntimeError(f"bpftrace did not attach: {seen.decode(errors='replace')}")


def wait_for_done(proc, seen, n, timeout=DONE_WAIT_S):
    """Read bpftrace's output until its @done count reaches n or the timeout passes; returns all it read."""
    def done(out: bytes) -> bool:
        counts = re.findall(rb"@done: (\d+)", out)
        return bool(counts) and int(counts[-1]) >= n

    return read_until(proc, seen, done, timeout)[1]


def stop_bpftrace(proc, seen):
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    text = (seen + out).decode(errors="replace")
    return {k: int(v) for k, v in re.findall(r"@(\w+): (\d+)", text)}


@pytest.mark.parametrize("arch", ["event-loop", "n-copy", "process-per-conn", "reactor-split", "poller-dispatch",
                                  "hybrid", "green-threads"])
def test_usdt_counts_match_loadgen(refserver, arch):
    srv = refserver(arch)
    bt, seen = start_bpftrace(srv.proc.pid)
    try:
        res = run_loadgen(srv.port, "--requests", N, "--concurrency", 8, "--path", "/bytes/1000")
        seen = wait_for_done(bt, seen, N)
        assert stop_server(srv.proc) == 0
    finally:
        counts = stop_bpftrace(bt, seen) if bt.poll() is None else {}
    assert (res["requests"], res["errors"]) == (N, 0)
    assert counts.get("start") == N and counts.get("done") == N, counts
    assert counts["bytes"] == N * 1000
    assert counts["writes"] >= N  # at least one write() per response
