"""Shared fixtures for the analyzer tests: synthetic capture files and running the CLI as a user would."""

from __future__ import annotations

import subprocess
import sys

import pytest

import captures


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
