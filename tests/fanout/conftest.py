"""Fixtures for the fanout tier: memcached shards loaded with the records, and fanout servers."""
from __future__ import annotations

import shutil

import pytest

from fanout_helpers import SHARD_COUNT, Shards, refhelp

requires_memcached = pytest.mark.skipif(shutil.which("memcached") is None and
                                        not __import__("os").path.exists("/usr/bin/memcached"),
                                        reason="memcached not installed (apt-get install memcached)")


@pytest.fixture(scope="session", autouse=True)
def _fanout_built():
    refhelp.ensure_built()


@pytest.fixture(scope="module")
def shards():
    """SHARD_COUNT loaded memcached shards for a whole module (stopped at its end)."""
    if shutil.which("memcached") is None:
        pytest.skip("memcached not installed")
    with Shards(SHARD_COUNT) as s:
        s.load()
        yield s


@pytest.fixture
def fresh_shards():
    """Shards for one test (for tests that kill or stop one)."""
    if shutil.which("memcached") is None:
        pytest.skip("memcached not installed")
    with Shards(SHARD_COUNT) as s:
        s.load()
        yield s


@pytest.fixture
def fanout_server():
    """fanout_server(arch, shards_spec, *args) -> refhelp.Server; all killed after the test."""
    started = []

    def factory(arch, spec, *args):
        server = refhelp.start_server(arch, "--shards", spec, *args)
        started.append(server)
        return server

    yield factory
    for server in started:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()
