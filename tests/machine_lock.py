"""The machine-wide lock every test that drives a server under load holds, shared with manual runs and
bench/ through flock(1): `flock /tmp/spinscope-load.lock CMD`. Two loads at once on 2 cores make both
measure each other."""

from __future__ import annotations

import contextlib
import fcntl
from pathlib import Path

LOAD_LOCK = Path("/tmp/spinscope-load.lock")


@contextlib.contextmanager
def load_lock():
    """Exclusive use of the machine for one load run."""
    with open(LOAD_LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
