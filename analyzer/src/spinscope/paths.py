"""Where spinscope finds the pieces it does not ship in the Python package (shared by record and doctor).

The package is installed editable from analyzer/src, so the repository root is three directories above
this file; the collector is built by `make` into build/spinscope-collector there. SPINSCOPE_COLLECTOR
overrides the lookup, and a collector on PATH is the last resort (a packaged install).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

COLLECTOR_ENV = "SPINSCOPE_COLLECTOR"
COLLECTOR_NAME = "spinscope-collector"


def repo_root() -> Path:
    """The repository checkout this package runs from (analyzer/src/spinscope/paths.py -> root)."""
    return Path(__file__).resolve().parents[3]


def collector_candidates() -> list[Path]:
    """The places find_collector() looks, in order: $SPINSCOPE_COLLECTOR alone when set, else the
    repository build directory, then PATH."""
    override = os.environ.get(COLLECTOR_ENV)
    if override:
        return [Path(override)]
    candidates = [repo_root() / "build" / COLLECTOR_NAME]
    on_path = shutil.which(COLLECTOR_NAME)
    if on_path:
        candidates.append(Path(on_path))
    return candidates


def find_collector() -> Path | None:
    """The collector executable to run, or None when none of collector_candidates() is executable."""
    for candidate in collector_candidates():
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None
