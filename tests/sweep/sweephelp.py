"""Helpers for the sweep tests: write a matrix, run `spinscope sweep` as a child process, find leftovers."""
import subprocess
import sys
from pathlib import Path

from spinscope.lab.runner import find_leftovers, sweep_tag
from paths import ROOT



def write_matrix(tmp_path, text, name="m.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def sweep_cmd(*args):
    return [sys.executable, "-m", "spinscope", *map(str, args)]


def run_sweep(*args, timeout=120):
    return subprocess.run(sweep_cmd("sweep", *args), capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def sweep_processes(outdir):
    """PIDs of processes a sweep writing to `outdir` started (they carry SPINSCOPE_SWEEP=<outdir>)."""
    return {leftover.pid for leftover in find_leftovers(sweep_tag(Path(outdir)))}


def spinscope_namespaces():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.startswith("spinscope-")}


def spinscope_links():
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()
            if line.split(":")[1].strip().startswith("ss")}

