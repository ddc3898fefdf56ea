"""`top --stacks` and `exporter --stacks` on a CPython server run the runtime stacks helper live: the
write-spin label's call site is the Python function that spins (spin_send), in top's label line and in the
exporter's call-site series, with spinscope_stacks_helper_up saying it runs; the helper is gone when top
exits, when top is SIGKILLed (--exit-with-parent) and when the exporter stops. Needs root, the collector
and the helper (scripts/build-stacks-helper.sh). Without root: tests/analyzer/test_analyzer_live_stacks.py."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from live_harness import LOADGEN, env, load_lock, spinscope, stop, wait_until
from spinscope.tracing import stacks_helper

# An event loop that writes each 1 MB response into a 16 KiB send buffer by calling send() again at once on
# EAGAIN (write-spin), in a function of its own.
SERVER = textwrap.dedent("""\
    import selectors, socket, sys

    RESPONSE = b"HTTP/1.1 200 OK\\r\\nContent-Length: 1000000\\r\\n\\r\\n" + b"x" * 1_000_000


    def spin_send(conn, data):
        view = memoryview(data)
        while view:
            try:
                view = view[conn.send(view):]
            except BlockingIOError:
                continue


    def on_readable(conn, pending, sel):
        try:
            data = conn.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            sel.unregister(conn)
            conn.close()
            return
        pending[conn] = pending.get(conn, b"") + data
        while b"\\r\\n\\r\\n" in pending[conn]:
            _, pending[conn] = pending[conn].split(b"\\r\\n\\r\\n", 1)
            try:
                spin_send(conn, RESPONSE)
            except OSError:
                return


    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    print(listener.getsockname()[1], flush=True)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    pending = {}
    while True:
        for key, _ in sel.select():
            if key.fileobj is listener:
                try:
                    conn, _ = listener.accept()
                except BlockingIOError:
                    continue
                conn.setblocking(False)
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
                sel.register(conn, selectors.EVENT_READ)
            else:
                on_readable(key.fileobj, pending, sel)
""")
LOAD_S = 40  # bounded: every load stops by itself


@pytest.fixture(scope="module", autouse=True)
def helper_built():
    assert stacks_helper.find(), f"{stacks_helper.HELPER_NAME} not built (scripts/build-stacks-helper.sh)"


def start(tmp: Path) -> tuple:
    """The Python server and its load (2 clients that read through a 16 KiB buffer), as (server, load)."""
    (tmp / "spinserver.py").write_text(SERVER)
    server = subprocess.Popen([sys.executable, str(tmp / "spinserver.py")], stdout=subprocess.PIPE, text=True)
    port = int(server.stdout.readline())
    load = subprocess.Popen([LOADGEN, "--port", str(port), "--concurrency", "2", "--duration", str(LOAD_S),
                             "--rcvbuf", "16384", "--path", "/bytes/1000000"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return server, load


def helpers_of(pid: int) -> list:
    """The PIDs of the stacks helpers sampling process pid (by their command line: `--pid PID`)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(stacks_helper.HELPER_NAME.encode()) and [b"--pid", str(pid).encode()] == \
                argv[argv.index(b"--pid"):argv.index(b"--pid") + 2]:
            found.append(int(entry.name))
    return found


def test_top_names_a_python_call_site_and_leaves_no_helper(tmp_path):
    server = load = top = None
    try:
        with load_lock():
            server, load = start(tmp_path)
            time.sleep(1)
            top = subprocess.run(spinscope("top", "--pid", str(server.pid), "--stacks", "--batch", "10"), env=env(),
                                 capture_output=True, text=True, timeout=120)
            left = helpers_of(server.pid)
        assert top.returncode == 0, top.stderr
        frames = top.stdout.split("spinscope top  ")
        assert all("(cpython target: its frames named by spinscope-stacks-helper)" in f for f in frames[1:]), frames
        sites = [line for line in top.stdout.splitlines() if re.match(r"[A-Z]+ +write-spin ", line)]
        assert sites and " at spin_send (spinserver.py:" in sites[-1], top.stdout
        assert left == []  # stopped with top
    finally:
        stop(load)
        stop(server)


def test_a_sigkilled_top_leaves_no_helper(tmp_path):
    server = load = top = None
    try:
        with load_lock():
            server, load = start(tmp_path)
            top = subprocess.Popen(spinscope("top", "--pid", str(server.pid), "--stacks", "--batch", "100"),
                                   env=env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            top.stdout.readline()  # a first screen: the helper is sampling (top waited for it)
            helpers = helpers_of(server.pid)
            assert len(helpers) == 1
            top.kill()
            top.wait()
            wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in helpers), 10,
                       "the helper to die with top")
    finally:
        stop(top)
        stop(load)
        stop(server)


def test_the_exporter_has_a_python_call_site_series_and_stops_its_helper(tmp_path):
    from test_exporter import Exporter, sample  # noqa: E402 (tests/live: the exporter's own harness)

    server = load = exporter = None
    try:
        with load_lock():
            server, load = start(tmp_path)
            exporter = Exporter("--pid", str(server.pid), "--stacks", "--window", "6")
            exporter.said(rf"PID {server.pid}: cpython target: its frames named by spinscope-stacks-helper", 60)
            proc = (str(server.pid), "python3")

            def spin_site() -> str | None:
                text = exporter.metrics()
                return text if sample(text, "spinscope_label_call_site_ratio", label="write-spin", rank="1",
                                      function="spin_send") else None

            text = wait_until(spin_site, 40, "a write-spin call site in spin_send")
            helpers = helpers_of(server.pid)
            assert sample(text, "spinscope_stacks_helper_up", pid=proc[0], runtime="cpython", reason="") == 1
            assert len(helpers) == 1
            assert exporter.stop() == 0
        assert not any(Path(f"/proc/{pid}").exists() for pid in helpers)
    finally:
        if exporter:
            exporter.stop()
        stop(load)
        stop(server)
