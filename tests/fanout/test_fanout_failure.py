"""A shard that dies or hangs mid-run gives the client a prompt 502, never a hang."""
import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from fanout_helpers import FANOUT_ARCHS, expected_body, refhelp, request
from fanout_helpers import _fanout_built, fanout_server, fresh_shards  # noqa: F401 (fixtures)

CLIENT_TIMEOUT = 3.0  # a response slower than this is a hang


class Client(threading.Thread):
    """Sends GET /fanout/4/100 (records on shards 0-3) back to back on a keep-alive connection,
    reconnecting if the server closes it; records (time, status, latency) per response."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.results, self.error, self.stop = port, [], None, threading.Event()

    def run(self):
        try:
            while not self.stop.is_set():
                with refhelp.connect(self.port, timeout=CLIENT_TIMEOUT) as s:
                    reader = refhelp.Reader(s)
                    while not self.stop.is_set():
                        start = time.monotonic()
                        s.sendall(request("/fanout/4/100"))
                        status, headers, body = reader.response()
                        self.results.append((start, status, time.monotonic() - start))
                        if status == 200:
                            assert body == expected_body(4, 100)
                        if headers.get("connection") == "close":
                            break
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


@pytest.mark.parametrize("arch", FANOUT_ARCHS)
def test_shard_killed_mid_run_gives_502(fresh_shards, fanout_server, arch):
    srv = fanout_server(arch, fresh_shards.spec)
    client = Client(srv.port)
    client.start()
    time.sleep(0.3)
    killed_at = time.monotonic()
    fresh_shards.kill(1)
    time.sleep(0.7)
    client.stop.set()
    client.join(timeout=CLIENT_TIMEOUT + 2)
    assert not client.is_alive() and client.error is None, client.error
    before = [r for r in client.results if r[0] + r[2] < killed_at]
    after = [r for r in client.results if r[0] > killed_at + 0.05]
    assert before and all(status == 200 for _, status, _ in before)
    assert after and all(status == 502 for _, status, _ in after), after[:5]
    assert max(latency for _, _, latency in client.results) < 1.0
    # Requests that do not touch the dead shard still work; the server stops cleanly.
    status, _, body = refhelp.get(srv.port, "/fanout/1/1k")
    assert status == 200 and body == expected_body(1, 1000)
    assert refhelp.get(srv.port, "/fanout/2/100")[0] == 502
    assert refhelp.stop_server(srv.proc) == 0


def stopped(pid: int, timeout: float = 10.0) -> None:
    """Wait until every thread of PID is stopped. SIGSTOP stops a multithreaded process (memcached: 4 workers)
    only once one of its threads has taken the signal and told the others: until then a thread woken by a
    request serves it (a fresh-clone run beside a CPU hog got 200 from the "hung" shard)."""
    deadline = time.monotonic() + timeout
    while True:
        states = []
        for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
            try:
                states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
            except (FileNotFoundError, ProcessLookupError):
                continue
        if states and all(state in ("T", "t") for state in states):
            return
        assert time.monotonic() < deadline, f"PID {pid} not stopped after {timeout} s: {states}"
        time.sleep(0.01)


@pytest.mark.parametrize("arch", FANOUT_ARCHS)
def test_hung_shard_times_out_with_502(fresh_shards, fanout_server, arch):
    srv = fanout_server(arch, fresh_shards.spec, "--shard-timeout-ms", "300")
    assert refhelp.get(srv.port, "/fanout/4/100")[0] == 200  # connections to every shard are open
    hung = fresh_shards.procs[2]
    os.kill(hung.pid, signal.SIGSTOP)
    stopped(hung.pid)
    try:
        start = time.monotonic()
        status, _, _ = refhelp.get(srv.port, "/fanout/4/100")
        elapsed = time.monotonic() - start
    finally:
        os.kill(hung.pid, signal.SIGCONT)
    assert status == 502
    assert 0.25 <= elapsed < 1.5
    assert refhelp.stop_server(srv.proc) == 0


@pytest.mark.parametrize("arch", FANOUT_ARCHS)
def test_no_shard_listening_is_502_at_once(fanout_server, arch):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = fanout_server(arch, f"127.0.0.1:{port}")
    start = time.monotonic()
    assert refhelp.get(srv.port, "/fanout/3/100")[0] == 502
    assert time.monotonic() - start < 0.5
    assert refhelp.stop_server(srv.proc) == 0
