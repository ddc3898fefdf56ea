"""The load generator: exact counts, deterministic mixes, error accounting, JSON shape."""
import socket
import subprocess
import threading
import time

import pytest

from refserver_harness import LOADGEN, run_loadgen, stop_server

LAT_KEYS = {"mean", "p50", "p90", "p99", "p99.9", "max"}


@pytest.fixture
def server(refserver):
    srv = refserver("event-loop")
    yield srv
    assert stop_server(srv.proc) == 0


def test_json_shape_and_exact_requests(server):
    res = run_loadgen(server.port, "--requests", 777, "--concurrency", 5, "--path", "/bytes/100",
                      "--verify")
    assert set(res) == {"requests", "throughput", "errors", "duration_s", "bytes", "latency_ms",
                        "classes"}
    assert (res["requests"], res["errors"]) == (777, 0)
    assert set(res["latency_ms"]) == LAT_KEYS
    lat = res["latency_ms"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99.9"] <= lat["max"]
    assert res["classes"]["/bytes/100"]["requests"] == 777
    assert res["bytes"] > 777 * 100 and res["throughput"] > 0


def test_mix_is_deterministic_for_a_seed(server):
    args = ["--requests", 2000, "--concurrency", 4, "--mix", "98:/bytes/100,2:/bytes/10240"]

    def counts(seed):
        res = run_loadgen(server.port, *args, "--seed", seed)
        return {k: v["requests"] for k, v in res["classes"].items()}

    first = counts(1)
    assert counts(1) == first
    assert sum(first.values()) == 2000
    assert 10 <= first["/bytes/10240"] <= 100  # ~2%
    # Other seeds give other sequences (a single pair could tie on counts by chance).
    assert len({counts(s)["/bytes/10240"] for s in (1, 2, 3)}) > 1


def test_keepalive_off_threads_and_warmup(server):
    res = run_loadgen(server.port, "--requests", 400, "--concurrency", 8, "--threads", 2,
                      "--keepalive", "off", "--warmup", 0.2, "--path", "/null")
    assert (res["requests"], res["errors"]) == (400, 0)


def test_open_loop_rate_and_burst(server):
    res = run_loadgen(server.port, "--rate", 2000, "--requests", 300, "--path", "/bytes/10")
    assert (res["requests"], res["errors"]) == (300, 0)
    # No base rate: only the burst sends; 200 requests at 1000/s starting at t=0.1 s.
    res = run_loadgen(server.port, "--burst", "0.1:1000:5", "--requests", 200,
                      "--path", "/bytes/10")
    assert (res["requests"], res["errors"]) == (200, 0)


def test_duration_stops_by_itself(server):
    res = run_loadgen(server.port, "--duration", 0.5, "--concurrency", 2, "--think-ms", 1,
                      timeout=10)
    assert res["requests"] > 0 and res["errors"] == 0
    assert 0.4 < res["duration_s"] < 2


def _python_server(handle):
    """A listening socket on 127.0.0.1 whose connections are each given to handle(conn) on a thread,
    until the socket is closed."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)

    def serve():
        while True:
            try:
                c, _ = lsock.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(c,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return lsock


def _slow_server(delay):
    """A keep-alive server that answers every request with a 5-byte body after DELAY seconds."""
    def answer(c):
        with c:
            while c.recv(4096):
                time.sleep(delay)
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabcde")

    return _python_server(answer)


def test_drain_awaits_the_requests_in_flight():
    lsock = _slow_server(0.3)
    try:
        port = lsock.getsockname()[1]
        # Each connection sends at 0 and at 0.3 s; the second request is in flight when 0.45 s end.
        args = ["--duration", 0.45, "--concurrency", 4, "--path", "/bytes/5"]
        assert run_loadgen(port, *args)["requests"] == 4
        res = run_loadgen(port, *args, "--drain")
        assert (res["requests"], res["errors"]) == (8, 0)
        assert res["duration_s"] >= 0.55
    finally:
        lsock.close()


def test_connection_failures_are_errors_not_crashes():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = run_loadgen(port, "--requests", 20, "--concurrency", 2, timeout=30)
    assert res["requests"] == 0 and res["errors"] == 20


def _fake_server(response):
    """A one-response-per-connection server that answers every request with `response`."""
    def answer(c):
        with c:
            c.recv(4096)
            c.sendall(response)

    return _python_server(answer)


@pytest.mark.parametrize("response,verify", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nabcdX", True),  # body
    (b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nabcd", False),  # length
    (b"HTTP/1.1 500 Oops\r\nContent-Length: 5\r\nConnection: close\r\n\r\nabcde", False),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", False),                         # truncated
])
def test_bad_responses_are_counted(response, verify):
    lsock = _fake_server(response)
    try:
        args = ["--requests", 10, "--concurrency", 1, "--path", "/bytes/5"]
        res = run_loadgen(lsock.getsockname()[1], *args, *(["--verify"] if verify else []))
        assert (res["requests"], res["errors"]) == (0, 10)
    finally:
        lsock.close()


@pytest.mark.parametrize("reply,args,ok", [
    (b"END\r\n", [], True),                                            # a get that misses
    (b"VALUE key:1 0 5\r\nabcde\r\nEND\r\n", ["--verify"], True),         # a get that hits
    (b"STORED\r\n", ["--path", "set"], True),
    (b"VALUE key:1 0 5\r\nabcdX\r\nEND\r\n", ["--verify"], False),        # value
    (b"VALUE key:1 0 5\r\nabcde\r\nEND!\r\n", ["--verify"], False),       # trailer
    (b"VALUE key:1 0 4\r\nabcd\r\nEND\r\n", [], False),                   # length
    (b"VALUE key:1 0 5\r\nabc", [], False),                              # truncated
    (b"STORED\r\n", [], False),                                         # a set's reply to a get
    (b"END\r\n", ["--path", "set"], False),
    (b"SERVER_ERROR out of memory storing object\r\n", ["--path", "set"], False),
])
def test_memcache_replies_are_checked(reply, args, ok):
    lsock = _fake_server(reply)  # one reply per connection
    try:
        res = run_loadgen(lsock.getsockname()[1], "--protocol", "memcache", "--value-bytes", 5,
                          "--keepalive", "off", "--requests", 10, "--concurrency", 1, *args)
        assert (res["requests"], res["errors"]) == ((10, 0) if ok else (0, 10))
    finally:
        lsock.close()


def test_human_output_and_bad_usage(server):
    out = subprocess.run([str(LOADGEN), "--port", str(server.port), "--requests", "10"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    assert "10 requests, 0 errors" in out
    for bad in (["--burst", "x"], ["--mix", "1:nope"], []):
        p = subprocess.run([str(LOADGEN), *bad], capture_output=True, timeout=5)
        assert p.returncode == 2, bad
    for bad, says in ((["--protocol", "smtp"], "bad --protocol"),
                      (["--protocol", "memcache", "--path", "/null"], "want W:get|set"),
                      (["--protocol", "memcache", "--value-bytes", "0"], "usage:")):
        p = subprocess.run([str(LOADGEN), "--port", str(server.port), *bad], capture_output=True,
                           text=True, timeout=5)
        assert p.returncode == 2 and says in p.stderr, bad
