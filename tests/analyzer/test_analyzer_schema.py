"""The capture schema has one source, bpf/spinscope.h: the analyzer's key lists and the format document
must name exactly the counters and request sums the collector writes from its X-macros."""

from __future__ import annotations

import re
from pathlib import Path

from spinscope.capture import BY_SIZE_KEYS, COUNTERS, REQUEST_SUMS

ROOT = Path(__file__).resolve().parents[2]


def xmacro(name: str) -> list:
    """The X(...) entries of `#define NAME(X)` in bpf/spinscope.h, in order."""
    header = (ROOT / "bpf" / "spinscope.h").read_text()
    body = re.search(rf"#define {name}\(X\)(.*?)\n(?!\s*X\(|\s*\\)", header, re.S)
    assert body, name
    return re.findall(r"\bX\((\w+)\)", body.group(1))


def test_thread_counters_match_the_collector():
    assert list(COUNTERS) == xmacro("SPINSCOPE_COUNTERS")


def test_request_sums_match_the_collector():
    assert list(REQUEST_SUMS) == xmacro("SPINSCOPE_REQUEST_SUMS")
    assert list(BY_SIZE_KEYS) == ["bytes_min", "bytes_max", *xmacro("SPINSCOPE_REQUEST_SUMS")]


def test_format_document_names_every_key():
    doc = (ROOT / "docs" / "capture-format.md").read_text()
    missing = [key for key in (*COUNTERS, *REQUEST_SUMS) if f"`{key}`" not in doc]
    assert missing == []
