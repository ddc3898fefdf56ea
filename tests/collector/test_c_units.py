"""The collector's C units on their own: each tests/c/*_test.c is built by `make` into build/ctests/ and
prints one line per failed check (and exits 1)."""

from __future__ import annotations

import subprocess

import pytest
from paths import CTESTS, ROOT

UNITS = sorted(p.stem for p in (ROOT / "tests" / "c").glob("*_test.c"))


@pytest.mark.parametrize("unit", UNITS)
def test_c_unit(unit: str) -> None:
    binary = CTESTS / unit
    assert binary.exists(), f"{binary} not built: run make"
    result = subprocess.run([binary], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("ok:"), result.stdout
