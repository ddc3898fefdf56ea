"""memcached shards: start, load the YCSB-like records, stop, from Python and from the command line."""
import socket
import subprocess
import sys

from fanout_helpers import ROOT, Shards, shards_mod, value

SCRIPT = ROOT / "reference-servers" / "shards" / "shards.py"


def refused(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return False
    except OSError:
        return True


def test_shards_start_load_and_stop_cleanly():
    with Shards(3) as shards:
        assert all(shards.alive()) and len(set(shards.ports)) == 3
        assert shards.load() == shards_mod.RECORDS * len(shards_mod.SIZES)
        for i, size in [(0, 100), (1, 1000), (5, 20000), (63, 100)]:
            host, port = "127.0.0.1", shards.ports[i % 3]
            assert shards_mod.get(host, port, f"user{i}:{size}") == value(i, size)
            # ... and only there
            assert shards_mod.get(host, shards.ports[(i + 1) % 3], f"user{i}:{size}") is None
        procs, ports = list(shards.procs), list(shards.ports)
    assert all(p.poll() is not None for p in procs)
    assert all(refused(p) for p in ports)


def test_value_pattern_is_documented():
    assert value(0, 3) == b"ABC" and value(2, 3) == b"CDE" and value(25, 2) == b"ZA"
    assert shards_mod.expected_body(2, 3) == b"ABCBCD"


def test_command_line_start_load_stop(tmp_path):
    state = tmp_path / "shards.json"
    run = lambda *a: subprocess.run([sys.executable, str(SCRIPT), *a, "--state", str(state)],  # noqa: E731
                                    capture_output=True, text=True, timeout=30)
    started = run("start", "--count", "2")
    assert started.returncode == 0, started.stderr
    spec = started.stdout.strip()
    ports = [int(part.rsplit(":", 1)[1]) for part in spec.split(",")]
    try:
        assert len(ports) == 2
        assert shards_mod.get("127.0.0.1", ports[1], "user1:20000") == value(1, 20000)
        again = run("start", "--count", "2")
        assert again.returncode == 1 and "already running" in again.stderr
        loaded = run("load")
        assert loaded.returncode == 0 and "stored 192 records on 2 shards" in loaded.stdout
    finally:
        stopped = run("stop")
    assert stopped.returncode == 0 and not state.exists()
    assert all(refused(p) for p in ports)


def test_memcached_does_not_run_as_root():
    with Shards(1) as shards:
        with open(f"/proc/{shards.procs[0].pid}/status") as f:
            uid = next(line for line in f if line.startswith("Uid:")).split()[1]
        assert uid != "0"
