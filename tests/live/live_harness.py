"""Helpers for the live tests: free ports, a reference server, the collector's BPF objects, waiting."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

from machine_lock import load_lock  # noqa: F401 (the live tests take it from here)
from paths import ROOT, BUILD, COLLECTOR, FIXTURES, LOADGEN, REFSERVER, ANALYZER  # noqa: F401 (the suites import them from here too)



def env() -> dict:
    """The environment that runs this checkout's analyzer and collector."""
    return {**os.environ, "PYTHONPATH": str(ANALYZER), "SPINSCOPE_COLLECTOR": str(COLLECTOR)}


def spinscope(*args: str) -> list:
    return [sys.executable, "-m", "spinscope", *args]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout: float, what: str, every: float = 0.1):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; last: {last!r}")


def bpf_ids_of(pid: int) -> set:
    """("prog", id) and ("link", id) of the BPF programs and links process pid holds open (its fdinfo)."""
    ids = set()
    fdinfo = Path(f"/proc/{pid}/fdinfo")
    for entry in fdinfo.iterdir():
        try:
            text = entry.read_text()
        except OSError:
            continue
        for kind in ("prog", "link"):
            m = re.search(rf"^{kind}_id:\s*(\d+)", text, re.M)
            if m:
                ids.add((kind, int(m.group(1))))
    return ids


def bpf_ids_loaded() -> set:
    """("prog", id) and ("link", id) of every BPF program and link in the kernel now (bpftool)."""
    ids = set()
    for kind in ("prog", "link"):
        out = subprocess.run(["bpftool", "-j", kind, "show"], capture_output=True, text=True, check=True).stdout
        ids |= {(kind, item["id"]) for item in json.loads(out or "[]")}
    return ids


def stop(proc: subprocess.Popen | None, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL: a process this test started, by its own handle."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
