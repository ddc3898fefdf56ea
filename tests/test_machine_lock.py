"""The machine lock (machine_lock.py) taken again inside itself by the same process: a script holding it
around a helper that takes it too (record_pair) waited for itself forever, and every test run's loads
queued behind it (2026-11-29, a measurement beside a fresh-clone run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

NESTED = """
import sys
sys.path.insert(0, {tests!r})
import machine_lock
from pathlib import Path
machine_lock.LOAD_LOCK = Path({lock!r})
with machine_lock.load_lock():
    with machine_lock.load_lock():
        print("nested")
"""


def test_the_lock_taken_again_by_its_holder_does_not_wait(tmp_path):
    lock = tmp_path / "load.lock"
    lock.touch()
    run = subprocess.run([sys.executable, "-c", NESTED.format(tests=str(Path(__file__).parent), lock=str(lock))],
                         capture_output=True, text=True, timeout=20)
    assert (run.returncode, run.stdout.strip()) == (0, "nested"), run.stderr


def test_another_process_still_waits_for_it(tmp_path):
    """...while a process that does not hold it, and descends from none that does, waits."""
    lock = tmp_path / "load.lock"
    lock.touch()
    holder = subprocess.Popen(["flock", str(lock), "sleep", "30"])
    try:
        waiter = ("import sys; sys.path.insert(0, {tests!r}); import machine_lock; from pathlib import Path; "
                  "machine_lock.LOAD_LOCK = Path({lock!r}); print(machine_lock.held_by_an_ancestor())")
        for _ in range(100):  # until flock(1) holds it
            if str(holder.pid) in Path("/proc/locks").read_text():
                break
            subprocess.run(["sleep", "0.05"])
        run = subprocess.run([sys.executable, "-c", waiter.format(tests=str(Path(__file__).parent), lock=str(lock))],
                             capture_output=True, text=True, timeout=20)
        assert run.stdout.strip() == "False", run.stderr
    finally:
        holder.kill()
        holder.wait()
