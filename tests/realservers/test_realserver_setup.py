"""The real servers as configured by realserver_harness serve what the loads expect, and the loads count
exactly: a wrong config (a docroot the workers cannot read, a missing module) fails here, not as an
odd capture."""
from __future__ import annotations

import pytest

from realserver_harness import SIZES, RedisLoad, load_lock, run_loadgen
from realserver_harness import realserver, www  # noqa: F401  (fixtures)

HTTP_SERVERS = {  # test id -> (server kind, options)
    "nginx": ("nginx", {}),
    "nginx-sndbuf16k": ("nginx", {"sndbuf": "16k"}),
    "apache-event": ("apache-event", {}),
    "apache-prefork": ("apache-prefork", {}),
    "node": ("node", {}),
    "lighttpd": ("lighttpd", {}),
}


@pytest.mark.parametrize("name", list(HTTP_SERVERS))
def test_http_servers_serve_the_bytes(realserver, name):  # noqa: F811
    kind, options = HTTP_SERVERS[name]
    server = realserver(kind, **options)
    with load_lock():
        for n in SIZES:
            res = run_loadgen(server.port, "--path", f"/bytes/{n}", "--requests", 50, "--concurrency", 2,
                              "--verify", "--rcvbuf", 4096)
            assert (res["requests"], res["errors"]) == (50, 0), (n, server.log_tail())


def test_memcache_load_counts_gets_and_sets_exactly(realserver):  # noqa: F811
    server = realserver("memcached")
    with load_lock():
        res = run_loadgen(server.port, "--protocol", "memcache", "--mix", "1:get,1:set", "--keys", 50,
                          "--value-bytes", 1000, "--requests", 3000, "--concurrency", 6, "--threads", 2,
                          "--verify")
    assert (res["requests"], res["errors"]) == (3000, 0)
    classes = res["classes"]
    assert classes["get"]["requests"] + classes["set"]["requests"] == 3000
    # 50 keys, every other request a set: nearly every get hits, and its 1000-byte value was checked.
    assert res["bytes"] > 0.9 * classes["get"]["requests"] * 1000


def test_redis_load_counts_its_requests(realserver):  # noqa: F811
    server = realserver("redis")
    with load_lock():
        res = RedisLoad(requests=500, clients=5).run(server.port)
    assert res["requests"] == 1000 and set(res["by_test"]) == {"SET", "GET"}
