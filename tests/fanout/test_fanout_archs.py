"""Every fanout architecture answers GET /fanout/F/SIZE with the F records, in order."""
import subprocess

import pytest

from fanout_helpers import FANOUT_ARCHS, expected_body, refhelp, request
from fanout_helpers import _fanout_built, fanout_server, shards  # noqa: F401 (fixtures)

CASES = [(1, "100", 100), (3, "0.1k", 100), (4, "1000", 1000), (7, "1k", 1000), (5, "20k", 20000),
         (20, "20000", 20000), (64, "100", 100)]


@pytest.mark.parametrize("arch", FANOUT_ARCHS)
def test_assembled_bytes_keepalive_and_pipelined(shards, fanout_server, arch):
    srv = fanout_server(arch, shards.spec)
    with refhelp.connect(srv.port) as s:
        r = refhelp.Reader(s)
        for fanout, name, size in CASES:
            s.sendall(request(f"/fanout/{fanout}/{name}"))
            status, headers, body = r.response()
            assert status == 200, (fanout, name)
            assert body == expected_body(fanout, size), (fanout, name)
        # Pipelined, mixed with a plain request: answered in order.
        s.sendall(request("/fanout/2/1k") + request("/bytes/26") + request("/fanout/9/100"))
        assert r.response()[2] == expected_body(2, 1000)
        assert r.response()[2] == refhelp.expected_body(26)
        assert r.response()[2] == expected_body(9, 100)
    assert refhelp.stop_server(srv.proc) == 0


@pytest.mark.parametrize("arch", FANOUT_ARCHS)
@pytest.mark.parametrize("target", ["/fanout/0/100", "/fanout/65/100", "/fanout/2/333", "/fanout/x/100"])
def test_bad_fanout_is_400(shards, fanout_server, arch, target):
    srv = fanout_server(arch, shards.spec)
    status, _, _ = refhelp.get(srv.port, target)
    assert status == 400


@pytest.mark.parametrize("arch,args", [
    ("fanout-sync", []),
    ("fanout-pool", ["--pool-max", "3", "--pool-idle-ms", "5"]),
    ("fanout-split", ["--backend-loops", "3", "--shard-conns", "4"]),
    ("fanout-shared", ["--workers", "2", "--priority", "fanout"]),
    ("fanout-shared", ["--shard-conns", "2"]),
])
def test_under_load_without_errors(shards, fanout_server, arch, args):
    srv = fanout_server(arch, shards.spec, *args)
    res = refhelp.run_loadgen(srv.port, "--requests", 600, "--concurrency", 8,
                              "--mix", "40:/fanout/20/100,40:/fanout/3/1k,20:/fanout/6/20k", timeout=60)
    assert (res["requests"], res["errors"]) == (600, 0)
    for fanout, name, size in [(20, "100", 100), (6, "20k", 20000)]:
        status, _, body = refhelp.get(srv.port, f"/fanout/{fanout}/{name}")
        assert status == 200 and body == expected_body(fanout, size)
    assert refhelp.stop_server(srv.proc) == 0


@pytest.mark.parametrize("arch", FANOUT_ARCHS)
def test_fanout_needs_shards(arch):
    out = subprocess.run([str(refhelp.REFSERVER), "--arch", arch, "--port", "0"], capture_output=True,
                         text=True, timeout=10)
    assert out.returncode == 1 and "needs --shards" in out.stderr
    bad = subprocess.run([str(refhelp.REFSERVER), "--arch", arch, "--port", "0", "--shards", "nohost"],
                         capture_output=True, text=True, timeout=10)
    assert bad.returncode == 1 and "bad --shards" in bad.stderr


def test_other_architectures_answer_404(fanout_server):
    srv = refhelp.start_server("event-loop")
    try:
        assert refhelp.get(srv.port, "/fanout/2/100")[0] == 404
    finally:
        refhelp.stop_server(srv.proc)
