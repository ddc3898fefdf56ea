"""The sweep's own memcached shards (lab/shards.py): started and loaded on demand, reused while healthy,
restarted when one died, replaced for another count, stopped by Runner.close(); a cell whose shards cannot
start fails with the reason, and the matrix refuses shards over veth."""
import shutil
import socket

import pytest

from fanout_helpers import shards_mod, value
from paths import BUILD, LOADGEN, REFSERVER
from spinscope.errors import SpinscopeError
from spinscope.lab import shards as shardset
from spinscope.lab.matrix import cell_id, parse_matrix_text
from spinscope.lab.runner import Processes, Runner, Tools, sweep_tag

needs_memcached = pytest.mark.skipif(shutil.which("memcached") is None, reason="memcached not installed")


def refused(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return False
    except OSError:
        return True


@needs_memcached
def test_shard_set_lifecycle(tmp_path):
    tag = sweep_tag(tmp_path)
    shards = shardset.ShardSet(Processes(tag).popen_kwargs())
    try:
        spec = shards.ensure(2)
        assert spec == shards.spec and len(shards.ports) == 2 and shards.healthy()
        assert shards_mod.get("127.0.0.1", shards.ports[1], "user1:20000") == value(1, 20000)  # loaded
        # every shard carries the sweep's tag: a SIGKILLed sweep's shards are found as leftovers
        environ = open(f"/proc/{shards.pids[0]}/environ", "rb").read().split(b"\0")
        assert f"SPINSCOPE_SWEEP={tag}".encode() in environ
        assert shards.ensure(2) == spec  # healthy: reused
        shards.procs[0].kill()
        shards.procs[0].wait()
        shards.ensure(2)  # one died: a new, loaded set
        assert shards.healthy() and shards_mod.get("127.0.0.1", shards.ports[0], "user0:100") == value(0, 100)
        old = list(shards.ports)
        shards.ensure(3)  # another count: replaced
        assert len(shards.ports) == 3 and all(refused(p) for p in old if p not in shards.ports)
    finally:
        procs, ports = list(shards.procs), list(shards.ports)
        shards.stop()
    assert all(p.poll() is not None for p in procs) and all(refused(p) for p in ports)


@needs_memcached
def test_runner_close_stops_the_shards(tmp_path):
    runner = Runner(Tools(REFSERVER, LOADGEN, BUILD / "x"), tmp_path)
    cell = parse_matrix_text('[[group]]\narch = "fanout-shared"\nshards = 2\npath = "/fanout/2/100"\n').cells[0]
    cmd = runner.server_command(cell.params, "127.0.0.1")
    assert cmd[cmd.index("--shards") + 1] == runner.shards.spec
    procs = list(runner.shards.procs)
    runner.close()
    assert all(p.poll() is not None for p in procs) and not runner.shards.procs


def test_cell_fails_without_memcached(tmp_path, monkeypatch):
    monkeypatch.setattr(shardset.shutil, "which", lambda name: None)
    monkeypatch.setattr(shardset, "Path", lambda p: type("P", (), {"exists": lambda self: False})())
    runner = Runner(Tools(REFSERVER, LOADGEN, BUILD / "x"), tmp_path)
    cell = parse_matrix_text('[[group]]\narch = "fanout-shared"\nshards = 4\npath = "/fanout/2/100"\n').cells[0]
    result = runner.run(cell)
    runner.close()
    assert result["status"] == "failed" and "memcached is not installed" in result["error"]


def test_matrix_shards_rules():
    with pytest.raises(SpinscopeError, match="shards need net"):
        parse_matrix_text('[[group]]\narch = "fanout-shared"\nshards = 4\nnet = "veth"\n')
    plain = parse_matrix_text('[[group]]\narch = "event-loop"\n').cells[0]
    assert plain.id == "event-loop-0223352a22"  # unset new parameters leave the ids as they were
    with_shards = parse_matrix_text('[[group]]\narch = "event-loop"\nshards = 4\n').cells[0]
    assert with_shards.id != plain.id and cell_id(with_shards.params) == with_shards.id
