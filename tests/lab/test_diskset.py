"""lab/diskset.py: file-set and size specs, the file set on disk, the per-cell memory cgroup (root only),
and the matrix rules for file_set / memory_max."""
import os

import pytest

from spinscope.errors import SpinscopeError
from spinscope.lab import diskset
from spinscope.lab.matrix import parse_matrix_text


def test_specs():
    assert diskset.parse_size("48M") == 48 << 20 and diskset.parse_size("128K") == 128 << 10
    assert diskset.parse_file_set("2048x128K") == (2048, 128 << 10)
    for bad in ("", "x1M", "0x1M", "10", "10x0", "100000x1G"):
        with pytest.raises(ValueError):
            diskset.parse_file_set(bad)


def test_file_set_created_once(tmp_path, monkeypatch):
    monkeypatch.setattr(diskset, "FILES_ROOT", tmp_path)
    root = diskset.ensure_file_set("3x5K")
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == ["0", "1", "2"]
    assert all((root / n).stat().st_size == 5 << 10 for n in "012")
    mtime = (root / "0").stat().st_mtime_ns
    assert diskset.ensure_file_set("3x5K") == root and (root / "0").stat().st_mtime_ns == mtime
    diskset.drop_file_set("3x5K")  # fadvise on each file: no error


@pytest.mark.skipif(os.geteuid() != 0, reason="creating cgroups needs root")
def test_memory_cgroup_lifecycle():
    root, version = diskset.memory_hierarchy()
    if root is None:
        pytest.skip("no memory cgroup hierarchy")
    cg = diskset.MemoryCgroup("16M")
    try:
        assert cg.path.is_dir() and cg.path.parent == root
        limit = (cg.path / ("memory.max" if version == 2 else "memory.limit_in_bytes")).read_text().strip()
        assert int(limit) == 16 << 20
        cmd = cg.wrap(["sh", "-c", "cat /proc/self/cgroup"])
        import subprocess
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        assert cg.path.name in out
        assert cg.stats()["cgroup_version"] == version
    finally:
        cg.remove()
    assert not cg.path.exists()


def test_matrix_rules():
    with pytest.raises(SpinscopeError, match="need a file_set"):
        parse_matrix_text('[[group]]\narch = "event-loop"\nmemory_max = "48M"\n')
    with pytest.raises(SpinscopeError, match="COUNTxSIZE"):
        parse_matrix_text('[[group]]\narch = "event-loop"\nfile_set = "lots"\n')
    cell = parse_matrix_text('[[group]]\narch = "event-loop"\nfile_set = "4x1K"\nmemory_max = "8M"\npath = "/file/*"\n').cells[0]
    assert cell.params["file_set"] == "4x1K" and cell.id != parse_matrix_text('[[group]]\narch = "event-loop"\n').cells[0].id
