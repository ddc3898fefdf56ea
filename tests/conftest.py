"""Privileged tests are marked by where they live: everything under the directories in PRIVILEGED loads BPF
programs, creates network namespaces, or runs servers under load, and is marked `root` here (a test
elsewhere that needs the same says so with @pytest.mark.root). Without root they are skipped, saying why;
`pytest -m "not root"` (make unit) leaves them out altogether."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PRIVILEGED = ("collector", "fanout", "install", "live", "realservers", "refservers", "sweep")
NOT_ROOT = pytest.mark.skip(reason="needs root (BPF, network namespaces, servers under load): run as root, "
                                   "or `make unit` for the tests that do not")


@pytest.hookimpl(tryfirst=True)  # before `-m` selects on the marker
def pytest_collection_modifyitems(items: list) -> None:
    privileged = [TESTS / name for name in PRIVILEGED]
    for item in items:
        if any(item.path.is_relative_to(directory) for directory in privileged):
            item.add_marker(pytest.mark.root)
        if os.geteuid() != 0 and item.get_closest_marker("root"):
            item.add_marker(NOT_ROOT)
