"""Shared fixtures for the analyzer tests: synthetic capture files and running the CLI as a user would."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import captures
from spinscope.tracing.collector import COLLECTOR_ENV


@pytest.fixture
def capture_file(tmp_path):
    """capture_file(doc, name) writes a capture document and returns its path."""
    def write(doc: dict, name: str = "capture.json"):
        return captures.write(tmp_path, doc, name)
    return write


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python3 -m spinscope ARGS`, as a subprocess: exit code, stdout and stderr as the user sees them."""
    return subprocess.run([sys.executable, "-m", "spinscope", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def stand_in_collector(tmp_path):
    """make(then="") -> (ran, env): a collector that is a script (SPINSCOPE_COLLECTOR in env), which writes
    its arguments to `ran` when it runs, then runs the shell lines `then`. No root needed; a command line
    refused before the collector starts leaves no `ran`."""
    def make(then: str = ""):
        ran = tmp_path / "ran"
        script = tmp_path / "spinscope-collector"
        script.write_text(f'#!/bin/sh\necho "$@" > {ran}\n{then}')
        script.chmod(0o755)
        return ran, {**os.environ, COLLECTOR_ENV: str(script)}
    return make
