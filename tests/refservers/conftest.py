"""Fixtures of the reference-server tests. The helpers live in refserver_harness.py, a module with a
unique name, because `from conftest import ...` resolves to whichever test directory's conftest pytest
loaded first."""

import pytest

from refserver_harness import ensure_built, server_factory


@pytest.fixture(scope="session", autouse=True)
def _built():
    ensure_built()


@pytest.fixture
def refserver():
    """Factory fixture: refserver(arch, *args, binary=..., env=...) -> Server; all killed after."""
    with server_factory() as factory:
        yield factory
