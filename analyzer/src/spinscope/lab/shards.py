"""The memcached shards of the fanout cells, started, loaded and stopped by the sweep itself.

A cell with `shards = N` (docs/sweep.md) runs its fanout-* server with `--shards SPEC`, SPEC naming N
memcached processes on loopback that the sweep started and loaded with the records of
reference-servers/shards/shards.py (the one definition of the records, imported from there by path).
The shards live for the sweep: the first cell that asks for N starts them, later cells with the same N
reuse them after a check (every process alive, a record readable; otherwise they are restarted and
reloaded), a cell asking for another N replaces them, and Runner.close() stops them (the end of the
sweep, an error, Ctrl-C, SIGTERM). Every shard is started like the sweep's other children (own session,
SPINSCOPE_SWEEP in its environment), so a sweep killed outright leaves shards the next sweep into the
same directory finds and stops (runner.stop_leftovers).

Shards listen on 127.0.0.1 of the root network namespace: a `net = "veth"` cell (server in the sweep's
namespace) cannot reach them, and the matrix refuses the combination.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

from spinscope.tracing.collector import repo_root

LOAD_CHECK_KEY = "user0:100"  # a record every loaded shard set holds (record 0, the smallest size class)


class ShardsUnavailable(Exception):
    """memcached is missing or a shard did not start or load; the message says which."""


def shards_module():
    """reference-servers/shards/shards.py, imported by path (it is a script, not a package)."""
    name = "spinscope_lab_shards_script"
    if name in sys.modules:
        return sys.modules[name]
    path = repo_root() / "reference-servers" / "shards" / "shards.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class ShardSet:
    """N loaded memcached shards on loopback, started through `spawn` (the sweep's Processes.popen_kwargs)."""

    def __init__(self, popen_kwargs: dict | None = None):
        self.popen_kwargs = popen_kwargs or {"start_new_session": True, "stdin": subprocess.DEVNULL}
        self.procs: list = []
        self.ports: list = []

    @property
    def spec(self) -> str:
        """The `--shards` value: host:port,..."""
        return ",".join(f"127.0.0.1:{port}" for port in self.ports)

    @property
    def pids(self) -> list:
        return [proc.pid for proc in self.procs]

    def healthy(self) -> bool:
        """Every shard running and the records there (one get on the first shard)."""
        if not self.procs or any(proc.poll() is not None for proc in self.procs):
            return False
        try:
            return shards_module().get("127.0.0.1", self.ports[0], LOAD_CHECK_KEY) is not None
        except (OSError, RuntimeError):
            return False

    def ensure(self, count: int) -> str:
        """The spec of `count` running, loaded shards: the current ones if they are that many and healthy,
        else new ones (the old ones stopped first)."""
        if len(self.procs) == count and self.healthy():
            return self.spec
        self.stop()
        mod = shards_module()
        if shutil.which("memcached") is None and not Path("/usr/bin/memcached").exists():
            raise ShardsUnavailable("memcached is not installed (apt-get install memcached)")
        try:
            for _ in range(count):
                self._start_one(mod)
            stored = mod.load(self.spec)
        except (OSError, RuntimeError) as exc:
            self.stop()
            raise ShardsUnavailable(f"memcached shards: {exc}") from None
        if stored == 0:
            self.stop()
            raise ShardsUnavailable("memcached shards: no record stored")
        return self.spec

    def _start_one(self, mod) -> None:
        last = None
        for _ in range(5):  # a free port can be taken between the probe and memcached's bind
            port = mod.free_port()
            proc = subprocess.Popen(mod.memcached_cmd(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    **self.popen_kwargs)
            try:
                mod.wait_listening(port, proc)
            except RuntimeError as exc:
                last = exc
                _kill(proc)
                continue
            self.procs.append(proc)
            self.ports.append(port)
            return
        raise RuntimeError(f"could not start memcached: {last}")

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM every shard, SIGKILL those still there after `timeout` s; forget them."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill(proc)
        self.procs, self.ports = [], []


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
