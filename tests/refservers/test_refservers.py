"""Behaviour every reference-server architecture must share (issue 3)."""
import time

import pytest

from refserver_harness import (ARCHS, ASAN_ENV, REFSERVER_ASAN, Reader, connect, expected_body, get,
                      run_loadgen, stop_server)

SIZES = [0, 100, 100 * 1024, 1024 * 1024]

MALFORMED = [
    b"BLAH\r\n\r\n",                                        # no target, no version
    b"GET /null HTTP/9.9\r\n\r\n",                          # unknown version
    b"GET null HTTP/1.1\r\n\r\n",                           # target not absolute
    b"GET /null HTTP/1.1\r\nNoColonHere\r\n\r\n",           # bad header line
    b"GET /null HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",  # bodies are refused
    b"GET /bytes/999999999999 HTTP/1.1\r\n\r\n",            # over the size cap
    b"GET /null HTTP/1.1\r\nX: \x01\r\n\r\n",               # control character
    b"GET /null HTTP/1.1\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n",  # header > 8 KB
    b"\x00" * 9000,                                         # binary junk, never a request
]


def request(path, extra=""):
    return f"GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n".encode()


@pytest.mark.parametrize("arch", ARCHS)
def test_sizes_keepalive_pipelining(refserver, arch):
    """Correct bytes for several sizes, all on one keep-alive connection, then pipelined."""
    srv = refserver(arch)
    with connect(srv.port) as s:
        r = Reader(s)
        for n in SIZES:
            s.sendall(request(f"/bytes/{n}"))
            status, headers, body = r.response()
            assert status == 200 and body == expected_body(n), n
            assert "close" not in headers.get("connection", "")
        s.sendall(request("/null"))
        assert r.response()[:1] == (200,)
        # Three requests in one write must be answered in order.
        s.sendall(request("/bytes/3") + request("/bytes/70000") + request("/compute/5"))
        assert r.response()[2] == b"abc"
        assert r.response()[2] == expected_body(70000)
        status, _, body = r.response()
        assert status == 200 and len(body) == 17
        # 404 keeps the connection open.
        s.sendall(request("/nope"))
        assert r.response()[0] == 404
        s.sendall(request("/bytes/26"))
        assert r.response()[2] == expected_body(26)
    assert stop_server(srv.proc) == 0


@pytest.mark.parametrize("arch", ARCHS)
def test_connection_close_and_http10(refserver, arch):
    srv = refserver(arch)
    with connect(srv.port) as s:
        r = Reader(s)
        s.sendall(request("/bytes/10", "Connection: close\r\n"))
        status, headers, body = r.response()
        assert (status, body, headers["connection"]) == (200, expected_body(10), "close")
        assert r.at_eof()
    with connect(srv.port) as s:
        r = Reader(s)
        s.sendall(b"GET /bytes/5 HTTP/1.0\r\n\r\n")
        assert r.response()[2] == b"abcde"
        assert r.at_eof()
    with connect(srv.port) as s:
        r = Reader(s)
        s.sendall(b"GET /bytes/5 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        assert r.response()[1]["connection"] == "keep-alive"
        s.sendall(b"GET /null HTTP/1.0\r\n\r\n")
        assert r.response()[0] == 200
        assert r.at_eof()
    assert stop_server(srv.proc) == 0


@pytest.mark.parametrize("arch", ARCHS)
def test_malformed_gets_400_and_server_survives(refserver, arch):
    srv = refserver(arch)
    for bad in MALFORMED:
        with connect(srv.port) as s:
            r = Reader(s)
            try:
                s.sendall(bad)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server may answer and close before reading all of it
            status, headers, _ = r.response()
            assert status == 400, bad[:40]
            assert headers["connection"] == "close"
            assert r.at_eof()
    # A client that disconnects mid-request or mid-response must not hurt either.
    with connect(srv.port) as s:
        s.sendall(b"GET /bytes/100")
    with connect(srv.port) as s:
        s.sendall(request("/bytes/4000000"))
    assert get(srv.port, "/bytes/100")[2] == expected_body(100)
    assert stop_server(srv.proc) == 0


@pytest.mark.parametrize("arch", ARCHS)
def test_1000_concurrent_connections(refserver, arch):
    srv = refserver(arch)
    # thread-pool holds a worker per open connection, so with keep-alive the 1000 clients
    # would wait for each other forever; they must close between requests there.
    keepalive = "off" if arch == "thread-pool" else "on"
    res = run_loadgen(srv.port, "--concurrency", 1000, "--requests", 3000, "--path",
                      "/bytes/100", "--keepalive", keepalive, "--verify")
    assert (res["requests"], res["errors"]) == (3000, 0)
    assert stop_server(srv.proc) == 0


@pytest.mark.parametrize("arch", ARCHS)
def test_sigterm_with_open_connections(refserver, arch):
    """Exit 0 within 1 s of SIGTERM even with idle and half-sent connections open."""
    srv = refserver(arch)
    idle = connect(srv.port)
    idle.sendall(request("/bytes/10"))
    Reader(idle).response()
    partial = connect(srv.port)
    partial.sendall(b"GET /bytes/1")
    time.sleep(0.1)
    t0 = time.monotonic()
    rc = stop_server(srv.proc, timeout=5)
    elapsed = time.monotonic() - t0
    idle.close()
    partial.close()
    assert rc == 0
    assert elapsed < 1.0, elapsed


@pytest.mark.parametrize("arch", ARCHS)
def test_asan_build(refserver, arch):
    """The AddressSanitizer build: correct bytes, 400s, clean exit, no leaks or UB reports."""
    srv = refserver(arch, binary=REFSERVER_ASAN, env=ASAN_ENV)
    with connect(srv.port) as s:
        r = Reader(s)
        for n in (100, 300000):
            s.sendall(request(f"/bytes/{n}"))
            assert r.response()[2] == expected_body(n)
    for bad in (MALFORMED[0], MALFORMED[7]):
        with connect(srv.port) as s:
            s.sendall(bad)
            assert Reader(s).response()[0] == 400
    res = run_loadgen(srv.port, "--concurrency", 20, "--requests", 300, "--path", "/bytes/5000",
                      "--verify")
    assert (res["requests"], res["errors"]) == (300, 0)
    rc = stop_server(srv.proc, timeout=10)
    err = srv.stderr_text()
    assert rc == 0, err
    assert "Sanitizer" not in err and "runtime error" not in err, err


def test_sndbuf_reported_and_applied(refserver):
    srv = refserver("event-loop", "--sndbuf", 65536)
    assert srv.listen_line.endswith("sndbuf=131072")  # Linux doubles it
    assert get(srv.port, "/bytes/2000000")[2] == expected_body(2000000)
    assert stop_server(srv.proc) == 0
    srv = refserver("event-loop")
    assert srv.listen_line.endswith("arch=event-loop workers=1 sndbuf=default")
    assert stop_server(srv.proc) == 0


@pytest.mark.parametrize("poller", ["epoll", "poll", "select"])
@pytest.mark.parametrize("policy", ["epollout", "spin"])
def test_event_loop_pollers_and_write_policies(refserver, poller, policy):
    # A small send buffer and receive buffer force EAGAIN on the 1 MB responses.
    srv = refserver("event-loop", "--poller", poller, "--write-policy", policy, "--sndbuf", 8192)
    res = run_loadgen(srv.port, "--concurrency", 8, "--requests", 200, "--rcvbuf", 16384,
                      "--mix", "9:/bytes/100,1:/bytes/1048576", "--verify")
    assert (res["requests"], res["errors"]) == (200, 0)
    assert stop_server(srv.proc) == 0


@pytest.mark.parametrize("arch", ["reactor-split", "reactor-worker", "poller-dispatch", "netty", "hybrid",
                                  "pipeline", "green-threads", "process-graph", "n-copy"])
def test_small_sndbuf_large_responses(refserver, arch):
    """Partial writes and EAGAIN on every architecture that uses non-blocking sockets."""
    srv = refserver(arch, "--sndbuf", 8192)
    res = run_loadgen(srv.port, "--concurrency", 16, "--requests", 200, "--rcvbuf", 16384,
                      "--mix", "3:/bytes/100,1:/bytes/1048576", "--verify")
    assert (res["requests"], res["errors"]) == (200, 0)
    assert stop_server(srv.proc) == 0


def test_unknown_arch_and_bad_options_fail_cleanly():
    import subprocess
    from refserver_harness import REFSERVER
    for args in (["--arch", "nope"], ["--arch", "event-loop", "--workers", "0"],
                 ["--arch", "event-loop", "--poller", "kqueue"], []):
        p = subprocess.run([str(REFSERVER), "--port", "0", *args], capture_output=True,
                           timeout=5)
        assert p.returncode == 2, args
        assert b"usage" in p.stderr


def test_busy_port_is_an_error(refserver):
    import subprocess
    from refserver_harness import REFSERVER
    srv = refserver("event-loop")
    p = subprocess.run([str(REFSERVER), "--arch", "event-loop", "--port", str(srv.port)],
                       capture_output=True, timeout=5)
    assert p.returncode == 1 and b"bind" in p.stderr
    assert stop_server(srv.proc) == 0


def test_raw_socket_never_sees_garbage_after_close(refserver):
    """After a 400 the server closes: the bytes that followed are never parsed."""
    srv = refserver("event-loop")
    with connect(srv.port) as s:
        s.sendall(b"NOPE\r\n\r\n" + request("/bytes/5"))
        r = Reader(s)
        assert r.response()[0] == 400
        assert r.at_eof()
    assert stop_server(srv.proc) == 0


# =========================================================================================== claims block:
# the settings the crossover and events_fast_ab claims run at (matrices/*.toml): 1,000 connections.

@pytest.mark.parametrize("arch, args", [("thread-per-conn", ()), ("event-loop", ("--write-policy", "spin")),
                                        ("event-loop", ("--write-policy", "epollout"))])
def test_1000_connections_100k_small_sndbuf(refserver, arch, args):
    """The crossover cells: 100 KB responses to 1,000 keep-alive connections through a 16 KB SO_SNDBUF."""
    srv = refserver(arch, "--sndbuf", 16384, *args)
    # a spinning loop serves one connection at a time: on a busy machine the last of 1,000 waits long
    res = run_loadgen(srv.port, "--concurrency", 1000, "--requests", 2000, "--path", "/bytes/102400", "--verify",
                      "--timeout-ms", 30000)
    assert (res["requests"], res["errors"]) == (2000, 0)
    assert stop_server(srv.proc) == 0


@pytest.mark.parametrize("arch", ["event-loop", "green-threads", "thread-per-conn", "process-per-conn"])
def test_keepalive_off_one_request_per_connection(refserver, arch):
    """The events_fast_ab cells: every request on a new connection the server closes after the response."""
    srv = refserver(arch)
    res = run_loadgen(srv.port, "--concurrency", 1000, "--requests", 3000, "--path", "/bytes/100",
                      "--keepalive", "off", "--verify")
    assert (res["requests"], res["errors"]) == (3000, 0)
    assert stop_server(srv.proc) == 0
# =========================================================================================== end claims block
