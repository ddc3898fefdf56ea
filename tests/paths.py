"""Where the tests find the checkout's files, in one place: the build's binaries, the recorded captures,
the docs and deployment files. Importable from every test directory, as machine_lock is."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ANALYZER = ROOT / "analyzer" / "src"
BUILD = ROOT / "build"
COLLECTOR = BUILD / "spinscope-collector"
FIXTURES = BUILD / "fixtures"  # tests/fixtures/*.c, built by make
CTESTS = BUILD / "ctests"      # tests/c/*_test.c, built by make
REFSERVER = BUILD / "refserver"
REFSERVER_ASAN = BUILD / "refserver-asan"
LOADGEN = BUILD / "loadgen"
DIST = BUILD / "dist"          # make dist
CAPTURES = ROOT / "tests" / "data" / "captures"  # recorded captures (tests/analyzer/record_captures.py)
DOCS = ROOT / "docs"
DEPLOY = ROOT / "deploy"
PYPROJECT = ROOT / "pyproject.toml"
