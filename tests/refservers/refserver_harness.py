"""Shared helpers for tests that need a reference server or the load generator.

Other suites can import these directly (``from tests.refservers.conftest import ...`` or by
path) or use the ``refserver`` fixture, a factory that kills whatever it started:

    srv = refserver("event-loop", "--workers", "2")   # a spinscope.lab.refserver.RefServer

Servers are started by spinscope.lab.refserver, which also reads their listening line.
"""
import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import time
from pathlib import Path

from spinscope.lab import refserver
from paths import ROOT, BUILD, REFSERVER, COLLECTOR, REFSERVER_ASAN, LOADGEN


ARCHS = [
    "thread-per-conn", "process-per-conn", "thread-pool", "event-loop", "n-copy",
    "reactor-split", "reactor-worker", "poller-dispatch", "netty", "hybrid", "pipeline", "green-threads",
    "process-graph",
]

# ASan: fail on leaks at exit; UBSan: make any report fatal so the exit code shows it.
ASAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=66",
            "UBSAN_OPTIONS": "halt_on_error=1:exitcode=67:print_stacktrace=1"}


def expected_body(n):
    """The documented /bytes/N pattern: byte i is 'a' + i % 26."""
    alphabet = b"abcdefghijklmnopqrstuvwxyz"
    return (alphabet * (n // 26 + 1))[:n]


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def ensure_built():
    """Build the servers if needed (cheap when up to date)."""
    subprocess.run(["make", "-s", "-C", str(ROOT / "reference-servers"), f"BUILD={BUILD}"],
                   check=True, stdout=subprocess.DEVNULL)


def start_server(arch, *args, binary=REFSERVER, env=None, timeout=10.0):
    """Start refserver on an ephemeral port; returns a RefServer once it is listening."""
    raise_nofile()
    return refserver.start(refserver.command(arch, *args, program=str(binary)), timeout=timeout,
                           stdin=subprocess.DEVNULL, env=dict(os.environ, **(env or {})))


def start_refserver(arch, *args, **kwargs):
    """(proc, port) for a refserver that is listening; the caller must stop it."""
    server = start_server(arch, *args, **kwargs)
    return server.proc, server.port


@contextlib.contextmanager
def server_factory():
    """Yields factory(arch, *args, **kwargs) -> RefServer that starts refservers and kills those still
    running on exit: the body of the refserver and fanout_server fixtures."""
    started = []

    def factory(arch, *args, **kwargs):
        server = start_server(arch, *args, **kwargs)
        started.append(server)
        return server

    try:
        yield factory
    finally:
        for server in started:
            if server.proc.poll() is None:
                server.proc.kill()
                server.proc.wait()


def stop_server(proc, timeout=5.0):
    """SIGTERM, then wait; SIGKILL if it does not exit in time.  Returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"server did not exit within {timeout}s of SIGTERM")
    return proc.returncode


def connect(port, timeout=10.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


class Reader:
    """Reads HTTP/1.1 responses (Content-Length framed) from a socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise EOFError("connection closed")
        self.buf += chunk

    def response(self):
        """-> (status, headers dict with lower-case names, body bytes)."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers["content-length"])
        while len(self.buf) < length:
            self._fill()
        body, self.buf = self.buf[:length], self.buf[length:]
        return status, headers, body

    def at_eof(self):
        """True if the peer closed the connection (and sent nothing more)."""
        if self.buf:
            return False
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True


def get(port, path, keepalive=False):
    """One request on a fresh connection -> (status, headers, body)."""
    with connect(port) as s:
        conn = "" if keepalive else "Connection: close\r\n"
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n{conn}\r\n".encode())
        return Reader(s).response()


def run_loadgen(port, *args, timeout=120):
    """Run loadgen with --json; returns the parsed result."""
    raise_nofile()
    out = subprocess.run([str(LOADGEN), "--port", str(port), "--json", *map(str, args)],
                         check=True, capture_output=True, timeout=timeout)
    return json.loads(out.stdout)


def record_under_load(arch, output, loadgen_args, server_args=(), duration=3.0, warmup=0.7, collector_args=()):
    """Run ARCH under loadgen and record DURATION s of it with the collector (after WARMUP s of load),
    with COLLECTOR_ARGS besides; returns (capture, loadgen result)."""
    server = start_server(arch, *server_args)
    loadgen = None
    try:
        raise_nofile()
        loadgen = subprocess.Popen(
            [str(LOADGEN), "--port", str(server.port), "--json", "--warmup", "0.3",
             "--duration", f"{duration + warmup + 0.5:g}", *map(str, loadgen_args)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(warmup)
        subprocess.run([str(COLLECTOR), "--pid", str(server.proc.pid), "-o", str(output),
                        "--duration", f"{duration:g}", "--interval", "0.5", *collector_args],
                       check=True, capture_output=True, timeout=duration + 60)
        out, err = loadgen.communicate(timeout=duration + 30)
        assert loadgen.returncode == 0, err
        result = json.loads(out)
    finally:
        if loadgen and loadgen.poll() is None:
            loadgen.kill()
            loadgen.wait()
        stop_server(server.proc)
    return json.loads(Path(output).read_text()), result
