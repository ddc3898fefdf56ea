"""The machine-wide lock every test that drives a server under load holds, shared with manual runs and
bench/ through flock(1): `flock /tmp/spinscope-load.lock CMD`. Two loads at once on 2 cores make both
measure each other.

A test run started under that lock (`flock /tmp/spinscope-load.lock pytest ...`) already has the machine:
its tests must not wait for the lock their own ancestor holds (they would wait forever), so the lock is
taken only when neither an ancestor process nor this one holds it: taken again inside a `with load_lock()`
of the same process (a script that holds it around a helper that takes it too), a second flock on a new
descriptor would wait for the first forever, and every other load behind it."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

LOAD_LOCK = Path("/tmp/spinscope-load.lock")


def _ancestors() -> set:
    """The pids of this process's ancestors."""
    found, pid = set(), os.getppid()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the (comm), which may hold spaces
    return found


def held_by_an_ancestor() -> bool:
    """Whether this process, or one it descends from, holds the lock (flock(1) around the test run)."""
    try:
        inode = LOAD_LOCK.stat().st_ino
        locks = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return False
    holders = set()
    for line in locks:  # "1: FLOCK  ADVISORY  WRITE 12081 fd:01:1234 0 EOF"; waiters are marked "->"
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and "->" not in fields and fields[5].endswith(f":{inode}"):
            holders.add(int(fields[4]))
    return bool(holders & (_ancestors() | {os.getpid()}))


@contextlib.contextmanager
def load_lock():
    """Exclusive use of the machine for one load run (at once when an ancestor already holds it)."""
    if held_by_an_ancestor():
        yield
        return
    with open(LOAD_LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
