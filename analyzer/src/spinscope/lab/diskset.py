"""Disk-bound cells: a file set on disk, served with sendfile(2) (refserver --docroot), and a cgroup v2
memory limit on the server so that its page cache cannot hold the set and reads miss.

`file_set = "COUNTxSIZE"` (e.g. "2048x128K"): COUNT files named 0..COUNT-1 of SIZE bytes each, created
once under FILES_ROOT/<spec>/ (on the root file system: a tmpfs would keep them in memory) and reused;
loadgen asks for `/file/*` with `--keys COUNT` (a uniformly random file per request).
`drop_caches` (default: on with a file set): before each cell the set's pages are dropped from the page
cache with posix_fadvise(POSIX_FADV_DONTNEED), file by file (only these files; no global drop_caches),
so every cell starts cold and no page stays charged to whoever created or read it last.
`memory_max = "48M"`: the server runs in a fresh cgroup (a child of the cgroup v2 root found in
/proc/self/mountinfo) with that memory.max (on a hybrid host whose v2 hierarchy has no memory controller,
as here, a child of the v1 memory hierarchy with memory.limit_in_bytes); the page cache it reads is charged there, so a set larger
than the limit keeps missing and each miss blocks the thread in the read. The cgroup is removed after
the cell (and by Runner.close() on an error or Ctrl-C). What the cell read from storage is measured, not
assumed: the server processes' /proc/PID/io read_bytes and the cgroup's memory.stat/memory.events.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

FILES_ROOT = Path("/var/tmp/spinscope-files")  # on disk, not tmpfs
CGROUP_PREFIX = "spinscope-disk-"
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
MAX_SET_BYTES = 4 << 30  # a file set larger than this is a typo


def parse_size(text: str) -> int:
    """"48M" -> bytes (K, M, G are powers of 1024; no unit: bytes)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", str(text), re.IGNORECASE)
    if not m or int(m.group(1)) == 0:
        raise ValueError(f"size {text!r}: expected a number with an optional K/M/G, e.g. 48M")
    return int(m.group(1)) * UNITS[m.group(2).upper()]


def parse_file_set(text: str) -> tuple:
    """"2048x128K" -> (2048, 131072)."""
    m = re.fullmatch(r"\s*(\d+)\s*x\s*(\S+)\s*", str(text))
    if not m or int(m.group(1)) == 0:
        raise ValueError(f"file_set {text!r}: expected COUNTxSIZE, e.g. 2048x128K")
    count, size = int(m.group(1)), parse_size(m.group(2))
    if count * size > MAX_SET_BYTES:
        raise ValueError(f"file_set {text!r}: {count * size / 2**30:.1f} GiB, more than {MAX_SET_BYTES >> 30} GiB")
    return count, size


def set_dir(spec: str) -> Path:
    count, size = parse_file_set(spec)
    return FILES_ROOT / f"{count}x{size}"


def ensure_file_set(spec: str) -> Path:
    """The directory of the file set, created (and synced to disk) if missing or incomplete."""
    count, size = parse_file_set(spec)
    root = set_dir(spec)
    done = root / ".complete"
    if done.exists():
        return root
    root.mkdir(parents=True, exist_ok=True)
    block = (bytes(range(256)) * 4096)[: 1 << 20]  # 1 MiB, not zeros (no file system may elide it)
    for i in range(count):
        path = root / str(i)
        if path.exists() and path.stat().st_size == size:
            continue
        with open(path, "wb") as f:
            left = size
            while left:
                n = min(left, len(block))
                f.write(block[:n])
                left -= n
    os.sync()
    done.write_text(f"{count} files of {size} bytes\n")
    return root


def drop_file_set(spec: str) -> None:
    """Drop the set's pages from the page cache (POSIX_FADV_DONTNEED on each file; clean pages go)."""
    count, _ = parse_file_set(spec)
    root = set_dir(spec)
    for i in range(count):
        try:
            fd = os.open(root / str(i), os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _mounts() -> list:
    """(mount point, filesystem type, super options) of each mount, from /proc/self/mountinfo."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = right.split()
        if fields and len(left.split()) > 4:
            found.append((Path(left.split()[4]), fields[0], fields[-1].split(",")))
    return found


def cgroup2_root() -> Path | None:
    """Where cgroup v2 is mounted, or None."""
    return next((point for point, fstype, _ in _mounts() if fstype == "cgroup2"), None)


def cgroup1_memory_root() -> Path | None:
    """Where a cgroup v1 hierarchy with the memory controller is mounted (a hybrid host), or None."""
    return next((point for point, fstype, options in _mounts() if fstype == "cgroup" and "memory" in options), None)


def memory_hierarchy() -> tuple:
    """(root, version) of the hierarchy whose memory controller limits a cell: cgroup v2 where its root
    offers `memory`, else a v1 memory hierarchy (hybrid hosts: this one has v2 at /sys/fs/cgroup/unified
    with only hugetlb, and memory on v1), else (None, None)."""
    v2 = cgroup2_root()
    if v2 is not None:
        try:
            if "memory" in (v2 / "cgroup.controllers").read_text().split():
                return v2, 2
        except OSError:
            pass
    v1 = cgroup1_memory_root()
    return (v1, 1) if v1 is not None else (None, None)


class MemoryCgroup:
    """A fresh memory cgroup with a limit, for one cell's server: cgroup v2 memory.max, or on a hybrid host
    (memory controller on v1) memory.limit_in_bytes, which charges and limits the page cache the same way."""

    def __init__(self, memory_max: str, name: str | None = None):
        root, self.version = memory_hierarchy()
        if root is None:
            raise OSError("no cgroup hierarchy with the memory controller (cgroup v2 or v1) in /proc/self/mountinfo")
        if self.version == 2:
            controllers = (root / "cgroup.subtree_control").read_text().split()
            if "memory" not in controllers:
                (root / "cgroup.subtree_control").write_text("+memory")
        self.path = root / (name or f"{CGROUP_PREFIX}{os.getpid()}-{time.monotonic_ns()}")
        self.path.mkdir()
        try:
            limit = "max" if memory_max == "max" else str(parse_size(memory_max))
            if self.version == 2:
                (self.path / "memory.max").write_text(limit)
                if (self.path / "memory.swap.max").exists():
                    (self.path / "memory.swap.max").write_text("0")
            else:
                (self.path / "memory.limit_in_bytes").write_text("-1" if limit == "max" else limit)
        except OSError:
            self.remove()
            raise

    def wrap(self, cmd: list) -> list:
        """`cmd` started inside the cgroup: a shell joins it, then execs the command (same pid)."""
        return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.path), *cmd]

    def pids(self) -> list:
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def read_bytes(self) -> int:
        """Bytes the processes in the cgroup made the storage layer fetch (/proc/PID/io read_bytes)."""
        total = 0
        for pid in self.pids():
            try:
                for line in Path(f"/proc/{pid}/io").read_text().splitlines():
                    if line.startswith("read_bytes:"):
                        total += int(line.split()[1])
            except OSError:
                continue
        return total

    def stats(self) -> dict:
        """memory.stat's file/anon bytes and refaults, memory.events' max, memory.peak where there is one."""
        out = {"cgroup_version": self.version}
        try:
            stat = dict(line.split() for line in (self.path / "memory.stat").read_text().splitlines())
            if self.version == 1:  # v1 names: cache, rss, failcnt, max_usage_in_bytes
                out["file"] = int(stat.get("cache", 0))
                out["anon"] = int(stat.get("rss", 0))
                out["pgmajfault"] = int(stat.get("pgmajfault", 0))
                out["max_events"] = int((self.path / "memory.failcnt").read_text())
                out["peak"] = int((self.path / "memory.max_usage_in_bytes").read_text())
                return out
            for key in ("file", "anon", "workingset_refault_file", "pgmajfault"):
                if key in stat:
                    out[key] = int(stat[key])
            events = dict(line.split() for line in (self.path / "memory.events").read_text().splitlines())
            out["max_events"] = int(events.get("max", 0))
            if (self.path / "memory.peak").exists():
                out["peak"] = int((self.path / "memory.peak").read_text())
        except (OSError, ValueError):
            pass
        return out

    def remove(self, timeout: float = 5.0) -> None:
        """Remove the cgroup once its processes are gone (the caller stopped them)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def cleanup_stale() -> list:
    """Remove the memory cgroups of sweeps that no longer run (a SIGKILLed sweep's); returns their paths."""
    root, _ = memory_hierarchy()
    removed = []
    if root is None:
        return removed
    for path in root.glob(f"{CGROUP_PREFIX}*"):
        m = re.match(rf"{CGROUP_PREFIX}(\d+)-", path.name)
        if m and not Path(f"/proc/{m.group(1)}").exists():
            try:
                path.rmdir()
                removed.append(path)
            except OSError:
                pass
    return removed
