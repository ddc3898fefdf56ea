"""Headless Chromium for the tests that check a page in a browser: one way to find it and run it.

Chromium writes its profile to --user-data-dir and its singleton socket to a directory of its own under TMPDIR
(/tmp/org.chromium.Chromium.*, left behind by every run): the profile goes to the test's tmp_path, the rest to a
directory removed after the run."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(name)), None)
QUIET = ("--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run")


@contextlib.contextmanager
def chromium_command(tmp_path: Path, *switches):
    """(argv, environment) of Chromium with QUIET and SWITCHES (its headless mode among them), its profile in
    TMP_PATH, its temporary files in a directory of their own, removed on leaving (under /tmp: its singleton
    socket's path must fit a Unix socket's 108 bytes, which pytest's tmp_path can exceed); a skip that says
    so when it is not installed."""
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt-get install -y chromium; scripts/setup.sh and .ci/run install "
                    "it): the page is not checked in a browser")
    scratch = tempfile.mkdtemp(prefix="spinscope-chromium-")
    try:
        yield [CHROMIUM, *QUIET, f"--user-data-dir={tmp_path / 'profile'}", *switches], {**os.environ, "TMPDIR": scratch}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_chromium(tmp_path: Path, *switches, timeout: float = 120) -> subprocess.CompletedProcess:
    """Chromium run to its end (chromium_command), its output captured as text."""
    with chromium_command(tmp_path, *switches) as (argv, env):
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
