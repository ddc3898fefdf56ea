"""docs/labels.md states the thresholds the analyzer uses: every named constant it gives a value for must
have that value in the code, and every constant the detectors use must be documented there. The version
the docs quote is spinscope.__version__, the one source."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

import spinscope
from spinscope.analysis import counters, metrics, noise, patterns, roles, savings, verdicts
from paths import DOCS, ROOT

DOC = DOCS / "labels.md"
# Every module of the patterns' homes (analysis/patterns/, a package's modules too).
HOMES = tuple(importlib.import_module(m.name) for m in pkgutil.walk_packages(patterns.__path__, f"{patterns.__name__}."))
MODULES = (*HOMES, verdicts, roles, noise, metrics, counters, savings)  # where each is defined first
# `NAME` | 50 |   `NAME` (0.9)   `NAME` = 20%   `NAME`, 0.9,
VALUE = r"(-?\d[\d,]*(?:\.\d+)?)\s*(%?)"
PATTERNS = (re.compile(r"`([A-Z][A-Z0-9_]+)`\s*\|\s*" + VALUE + r"\s*\|"),
            re.compile(r"`([A-Z][A-Z0-9_]+)`\s*\(" + VALUE + r"[),:;\s]"),
            re.compile(r"`([A-Z][A-Z0-9_]+)`\s*=\s*" + VALUE),
            re.compile(r"`([A-Z][A-Z0-9_]+)`,\s*" + VALUE + r"[,):]"))


def constant(name: str):
    for module in MODULES:
        if hasattr(module, name):
            return getattr(module, name)
    return None


def documented() -> dict:
    """{name: [values stated for it]} from docs/labels.md (joined across line breaks)."""
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    found: dict = {}
    for pattern in PATTERNS:
        for name, number, percent in pattern.findall(text):
            value = float(number.replace(",", "")) / (100 if percent else 1)
            found.setdefault(name, []).append(value)
    return found


def test_documented_thresholds_equal_the_constants():
    stated = documented()
    assert len(stated) >= 20, f"the patterns found only {sorted(stated)}: the page's format changed?"
    wrong = {name: (values, constant(name)) for name, values in stated.items()
             if constant(name) is not None and any(v != pytest.approx(float(constant(name))) for v in values)}
    assert wrong == {}


def test_every_detector_threshold_is_documented():
    names = {name for module in (*HOMES, verdicts) for name, value in vars(module).items()
             if name.isupper() and isinstance(value, (int, float)) and not isinstance(value, bool)}
    text = DOC.read_text(encoding="utf-8")
    assert {name for name in names if f"`{name}`" not in text} == set()


def test_counters_mechanisms_match_the_capture_vocabulary():
    from spinscope.analysis.schema import MECHANISMS

    assert set(counters.COUNTED_MECHANISMS) | {"other"} == set(MECHANISMS)
    assert set(counters.NOT_HANDOFFS) <= set(MECHANISMS)


def test_the_copy_rates_threshold_is_the_probes():
    header = (ROOT / "bpf" / "spinscope.h").read_text()
    [value] = re.findall(r"#define WRITE_COPY_MIN (\d+)", header)
    assert int(value) == counters.COPY_MIN_BYTES


def test_the_docs_quote_the_one_version():
    """The wheel's name in the README and the collector's tool.version in the format's example: a release
    changes spinscope/__init__.py, and this says what else quotes it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    example = (DOCS / "capture-format.md").read_text(encoding="utf-8")
    quoted = re.findall(r"spinscope-(\d+\.\d+\.\d+)-py3", readme)
    quoted += re.findall(r'"name": "spinscope-collector", "version": "([^"]+)"', example)
    assert len(quoted) >= 3 and set(quoted) == {spinscope.__version__}
