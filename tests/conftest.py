"""Privileged tests are marked by where they live: everything under the directories in PRIVILEGED loads BPF
programs, creates network namespaces, or runs servers under load, and is marked `root` here (a test
elsewhere that needs the same says so with @pytest.mark.root). Without root they are skipped, saying why;
`pytest -m "not root"` (make unit) leaves them out altogether."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PRIVILEGED = ("collector", "fanout", "install", "live", "realservers", "refservers", "sweep")
NOT_ROOT = pytest.mark.skip(reason="needs root (BPF, network namespaces, servers under load): run as root, "
                                   "or `make unit` for the tests that do not")


def pytest_configure(config) -> None:
    """SIGINT and SIGQUIT as a terminal's foreground job has them, for the suite and all it starts. A shell
    without job control starts a background job (`make test &` from a script, some CI runners) with both
    ignored, and an ignored signal stays ignored across exec: the tests that play a terminal's Ctrl-C
    (record -- COMMAND, a sweep) then sent it to processes that never saw it (a command's `trap ... INT`
    cannot even be set in a shell started so) and waited for an end that never came (issue 42). A
    handler, unlike SIG_IGN, is reset to the default by exec."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


@pytest.hookimpl(tryfirst=True)  # before `-m` selects on the marker
def pytest_collection_modifyitems(items: list) -> None:
    privileged = [TESTS / name for name in PRIVILEGED]
    for item in items:
        if any(item.path.is_relative_to(directory) for directory in privileged):
            item.add_marker(pytest.mark.root)
        if os.geteuid() != 0 and item.get_closest_marker("root"):
            item.add_marker(NOT_ROOT)
