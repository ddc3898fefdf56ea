#!/usr/bin/env python3
"""memcached shards on loopback for the fanout-* reference servers.

Records (YCSB-like): for i in [0, RECORDS) and each size class S in SIZES, key ``user<i>:<S>`` on
shard ``i % N`` holds ``value(i, S)``: S bytes, byte j = 'A' + (i + j) % 26. A fanout-F request
reads user0..user<F-1>, so its response body is ``expected_body(F, S)``.

Command line (state kept in a JSON file so ``stop`` finds the processes)::

    shards.py start --count 4 [--state FILE]     # prints host:port,host:port,... (for --shards)
    shards.py load [--shards SPEC | --state FILE]
    shards.py stop [--state FILE]
    shards.py run --count 4 -- CMD ...           # start + load, run CMD with $SHARDS, stop

From Python: ``with Shards(4) as shards: shards.load(); shards.spec; shards.kill(1)``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

RECORDS = 64
SIZES = (100, 1000, 20000)
DEFAULT_STATE = "/tmp/spinscope-shards.json"


def value(i: int, size: int) -> bytes:
    return bytes(65 + (i + j) % 26 for j in range(size))


def expected_body(fanout: int, size: int) -> bytes:
    return b"".join(value(i, size) for i in range(fanout))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen | None, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"memcached on port {port} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"memcached on port {port} is not listening after {timeout}s")


def memcached_cmd(port: int) -> list[str]:
    binary = shutil.which("memcached") or "/usr/bin/memcached"
    cmd = [binary, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "1", "-m", "64", "-c", "4096"]
    if os.geteuid() == 0:
        cmd += ["-u", "nobody"]  # memcached refuses to run as root
    return cmd


def start_one(port: int | None = None, session: bool = False) -> tuple[subprocess.Popen, int]:
    """One memcached on a free loopback port (retried if the port was taken meanwhile)."""
    for _ in range(5):
        p = port or free_port()
        proc = subprocess.Popen(memcached_cmd(p), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=session)
        try:
            wait_listening(p, proc)
            return proc, p
        except RuntimeError:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if port:
                raise
    raise RuntimeError("could not start memcached")


def parse_spec(spec: str) -> list[tuple[str, int]]:
    out = []
    for part in spec.split(","):
        host, _, port = part.rpartition(":")
        out.append((host, int(port)))
    return out


def _recv_until(sock: socket.socket, needle: bytes, count: int) -> None:
    buf = b""
    while buf.count(needle) < count:
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise RuntimeError("memcached closed the connection while loading")
        buf += chunk
        if b"ERROR" in buf:
            raise RuntimeError(f"memcached refused a record: {buf[-200:]!r}")


def load(spec: str, records: int = RECORDS, sizes=SIZES) -> int:
    """Store every record on its shard; returns the number stored."""
    shards = parse_spec(spec)
    batches = {k: [] for k in range(len(shards))}
    for i in range(records):
        for size in sizes:
            data = value(i, size)
            batches[i % len(shards)].append(b"set user%d:%d 0 0 %d\r\n%s\r\n" % (i, size, size, data))
    stored = 0
    for k, (host, port) in enumerate(shards):
        if not batches[k]:
            continue
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(b"".join(batches[k]))
            _recv_until(s, b"STORED\r\n", len(batches[k]))
            stored += len(batches[k])
    return stored


def get(host: str, port: int, key: str) -> bytes | None:
    """One get, for checks: the value or None on a miss."""
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(f"get {key}\r\n".encode())
        buf = b""
        while not buf.endswith(b"END\r\n"):
            chunk = s.recv(1 << 16)
            if not chunk:
                raise RuntimeError("connection closed")
            buf += chunk
        if buf == b"END\r\n":
            return None
        header, _, rest = buf.partition(b"\r\n")
        return rest[: int(header.split()[3])]


class Shards:
    """N memcached processes on loopback; stop() (or the context manager) kills them all."""

    def __init__(self, count: int):
        self.procs: list[subprocess.Popen] = []
        self.ports: list[int] = []
        try:
            for _ in range(count):
                proc, port = start_one()
                self.procs.append(proc)
                self.ports.append(port)
        except BaseException:
            self.stop()
            raise

    @property
    def spec(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def load(self, records: int = RECORDS) -> int:
        return load(self.spec, records)

    def kill(self, index: int) -> None:
        """SIGKILL one shard (a datastore node dying mid-run)."""
        proc = self.procs[index]
        if proc.poll() is None:
            proc.kill()
        proc.wait()

    def alive(self) -> list[bool]:
        return [p.poll() is None for p in self.procs]

    def stop(self, timeout: float = 5.0) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# ------------------------------------------------------------------ command line

def _read_state(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def cmd_start(args) -> int:
    if os.path.exists(args.state):
        state = _read_state(args.state)
        if any(_pid_alive(pid) for pid in state.get("pids", [])):
            print(f"shards already running (state {args.state}); stop them first", file=sys.stderr)
            return 1
    pids, ports = [], []
    try:
        for k in range(args.count):
            proc, port = start_one(args.base_port + k if args.base_port else None, session=True)
            pids.append(proc.pid)
            ports.append(port)
    except BaseException:
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        raise
    spec = ",".join(f"127.0.0.1:{p}" for p in ports)
    with open(args.state, "w") as f:
        json.dump({"pids": pids, "ports": ports, "spec": spec}, f)
    if not args.no_load:
        load(spec, args.records)
    print(spec)
    return 0


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip() == "memcached"
    except OSError:
        return False


def cmd_load(args) -> int:
    spec = args.shards or _read_state(args.state)["spec"]
    print(f"stored {load(spec, args.records)} records on {len(parse_spec(spec))} shards")
    return 0


def cmd_stop(args) -> int:
    if not os.path.exists(args.state):
        print(f"no state file {args.state}: nothing to stop", file=sys.stderr)
        return 0
    pids = [pid for pid in _read_state(args.state)["pids"] if _pid_alive(pid)]
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while any(_pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids:
        if _pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    os.unlink(args.state)
    return 0


def cmd_run(args) -> int:
    with Shards(args.count) as shards:
        shards.load(args.records)
        env = dict(os.environ, SHARDS=shards.spec)
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        return subprocess.call(command, env=env)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("start", help="start N shards, load the records, print the --shards value")
    p.add_argument("--count", "-n", type=int, default=4)
    p.add_argument("--base-port", type=int, default=0, help="ports base..base+N-1 (default: free ports)")
    p.add_argument("--records", type=int, default=RECORDS)
    p.add_argument("--no-load", action="store_true")
    p.add_argument("--state", default=DEFAULT_STATE)
    p.set_defaults(func=cmd_start)
    p = sub.add_parser("load", help="(re)load the records")
    p.add_argument("--shards")
    p.add_argument("--records", type=int, default=RECORDS)
    p.add_argument("--state", default=DEFAULT_STATE)
    p.set_defaults(func=cmd_load)
    p = sub.add_parser("stop", help="stop the shards started with start")
    p.add_argument("--state", default=DEFAULT_STATE)
    p.set_defaults(func=cmd_stop)
    p = sub.add_parser("run", help="start + load, run a command with $SHARDS set, stop")
    p.add_argument("--count", "-n", type=int, default=4)
    p.add_argument("--records", type=int, default=RECORDS)
    p.add_argument("command", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_run)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
