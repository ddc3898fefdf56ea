"""Helpers for the fanout-tier tests: shards, fanout servers, and recording a capture under load.

Fixtures live here too (not in a conftest.py: tests/refservers' modules do `from conftest import ...`,
which breaks when pytest has loaded another directory's conftest last); test modules import the ones
they use.

The refserver helpers (start_server, Reader, run_loadgen...) are loaded from tests/refservers/refserver_harness.py
by path under another module name, so this suite never depends on which `conftest` module pytest
imported last.
"""
from __future__ import annotations

import importlib.util
import json
import sys
import shutil
from pathlib import Path

import pytest
from paths import ROOT, BUILD, COLLECTOR, CAPTURES  # noqa: F401 (the suites import them from here too)

FANOUT_ARCHS = ["fanout-sync", "fanout-pool", "fanout-split", "fanout-shared"]
SHARD_COUNT = 4


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


refhelp = _load("refserver_helpers", ROOT / "tests" / "refservers" / "refserver_harness.py")
shards_mod = _load("spinscope_shards", ROOT / "reference-servers" / "shards" / "shards.py")
Shards, expected_body, value = shards_mod.Shards, shards_mod.expected_body, shards_mod.value


def request(path: str, extra: str = "") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n".encode()


def http_requests(capture: dict, min_bytes: int = 64) -> int:
    """HTTP responses in a capture of a fanout server. The collector also counts each shard connection's
    get as a "request" (a read followed by a write on a socket: the response, then the next get), so the
    HTTP responses are the response-size classes above the size of a get command (< 64 bytes)."""
    return sum(row["count"] for row in capture["requests"]["by_size"] if row["bytes_min"] >= min_bytes)


def handoffs(capture: dict) -> int:
    return sum(edge["count"] for edge in capture["wakeups"])


def record(arch: str, shards_spec: str, output: Path, loadgen_args: list, server_args: list = (),
           duration: float = 3.0, warmup: float = 0.7) -> tuple[dict, dict]:
    """Run ARCH (with the shards) under loadgen, record DURATION s; returns (capture, loadgen result)."""
    return refhelp.record_under_load(arch, output, loadgen_args, ["--shards", shards_spec, *server_args],
                                     duration=duration, warmup=warmup)


def compact(path: Path) -> None:
    """Rewrite a capture without indentation (the pool's hundreds of threads make it large)."""
    doc = json.loads(path.read_text())
    path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")


# ------------------------------------------------------------------ fixtures (imported by the test modules)


@pytest.fixture(scope="session", autouse=True)
def _fanout_built():
    refhelp.ensure_built()


def loaded_shards():
    """SHARD_COUNT memcached shards with the records loaded, stopped when the generator closes."""
    if shutil.which("memcached") is None:
        pytest.skip("memcached not installed")
    with Shards(SHARD_COUNT) as s:
        s.load()
        yield s


@pytest.fixture(scope="module")
def shards():
    """Loaded shards shared by a whole module."""
    yield from loaded_shards()


@pytest.fixture
def fresh_shards():
    """Shards for one test (for tests that kill or stop one)."""
    yield from loaded_shards()


@pytest.fixture
def fanout_server():
    """fanout_server(arch, shards_spec, *args) -> refhelp.Server; all killed after the test."""
    with refhelp.server_factory() as start:
        yield lambda arch, spec, *args: start(arch, "--shards", spec, *args)
