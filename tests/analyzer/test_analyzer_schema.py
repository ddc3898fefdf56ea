"""The capture schema has one source, bpf/spinscope.h: the collector writes its counters, request sums,
request histograms, drops and interval fields from X-macros there. The analyzer's key lists
(schema.LAYOUT) must name exactly those, the format document must name every key, and the captures the
collector wrote (bundled here; freshly recorded in tests/collector) must have exactly that layout."""

from __future__ import annotations

import json
import re

import pytest

from paths import CAPTURES as CAPTURES_DIR
from paths import ROOT
from spinscope.analysis.schema import (BY_SIZE_KEYS, COUNTERS, DROP_KEYS, FORMAT, INTERVAL_KEYS, LAYOUT, REQUEST_HISTS,
                                       REQUEST_SUMS, SCHEMA, layout_differences)

CAPTURES = sorted(CAPTURES_DIR.glob("*.json"))


def xmacro(name: str) -> list:
    """The X(...) entries' first arguments of `#define NAME(X)` in bpf/spinscope.h, in order."""
    header = (ROOT / "bpf" / "spinscope.h").read_text()
    body = re.search(rf"#define {name}\(X\)(.*?)\n(?!\s*X\(|\s*\\)", header, re.S)
    assert body, name
    return re.findall(r"\bX\((\w+)", body.group(1))


@pytest.mark.parametrize("keys,macro", [(COUNTERS, "SPINSCOPE_COUNTERS"), (REQUEST_SUMS, "SPINSCOPE_REQUEST_SUMS"),
                                        (REQUEST_HISTS, "SPINSCOPE_REQUEST_HISTS"), (DROP_KEYS, "SPINSCOPE_DROPS"),
                                        (INTERVAL_KEYS, "SPINSCOPE_INTERVAL_FIELDS")])
def test_key_lists_match_the_collectors_xmacros(keys, macro):
    assert list(keys) == xmacro(macro)


def test_response_classes_are_bounds_and_the_request_sums():
    assert list(BY_SIZE_KEYS) == ["bytes_min", "bytes_max", *xmacro("SPINSCOPE_REQUEST_SUMS")]


def test_one_schema_number():
    """The schema the analyzer reads up to is the one the collector writes (collector/capture.h) and the one
    docs/capture-format.md describes, in its title and its example; the format's name likewise."""
    header = (ROOT / "collector" / "capture.h").read_text()
    written = (ROOT / "collector" / "capture.c").read_text()
    doc = (ROOT / "docs" / "capture-format.md").read_text()
    assert [int(n) for n in re.findall(r"#define CAPTURE_SCHEMA (\d+)", header)] == [SCHEMA]
    assert re.findall(r'"format", json_object_new_string\("([^"]*)"\)', written) == [FORMAT]
    assert re.match(r"# Capture format \(schema (\d+)\)\n", doc).group(1) == str(SCHEMA)
    example = json.loads(re.search(r"```json\n(\{.*?\n\})\n```", doc, re.S).group(1))
    assert (example["schema"], example["format"]) == (SCHEMA, FORMAT)


def test_format_document_names_every_key():
    doc = (ROOT / "docs" / "capture-format.md").read_text()
    keys = {key for block in LAYOUT.values() for key in block}
    assert sorted(key for key in keys if f"`{key}`" not in doc and f"`{key}." not in doc
                  and f".{key}`" not in doc) == []


@pytest.mark.parametrize("path", [p for p in CAPTURES if json.loads(p.read_text())["schema"] >= 2],
                         ids=lambda p: p.stem)
def test_bundled_captures_have_exactly_the_layout(path):
    assert layout_differences(json.loads(path.read_text())) == []


LISTENER = {"inode": 52817, "family": "inet", "port": 8080, "accept_calls": 1340, "accept_ok": 1000,
            "accept_eagain": 340, "processes": 4}


def without_schema5_counters(doc: dict) -> dict:
    """doc as a schema 4 collector wrote it: no accept counts, wakeup cycles or copy rate, no listeners."""
    from spinscope.analysis.schema import SCHEMA5_COUNTERS

    for block in (*doc["threads"], doc["totals"], *(iv["counters"] for iv in doc["intervals"])):
        for key in SCHEMA5_COUNTERS:
            block.pop(key, None)
    doc.pop("listeners", None)
    doc["schema"] = 4
    for interval in doc["intervals"]:
        interval["drops"] = {key: 0 for key in DROP_KEYS if key != "listeners"}
    return doc


def test_schema4_captures_read_the_schema5_counters_as_zero(capture_file):
    import captures
    from spinscope.analysis.capture import load
    from spinscope.analysis.schema import SCHEMA5_COUNTERS

    doc = without_schema5_counters(captures.clean_event_loop())
    cap = load(capture_file(doc))
    assert all(thread[key] == 0 for thread in cap.threads.values() for key in SCHEMA5_COUNTERS)
    assert all(cap.totals[key] == 0 for key in SCHEMA5_COUNTERS)
    assert cap.listeners == []
    assert cap.drops["listeners"] == 0


def test_older_captures_read_the_dispatch_counters_as_zero_and_keep_their_layout():
    """Captures before schema 6 (the golden ones): no poll_dispatch, nothing missing, read as 0."""
    from paths import CAPTURES
    from spinscope.analysis.capture import load
    from spinscope.analysis.schema import SCHEMA6_COUNTERS, layout_differences

    for name in ("fanout-pool-20k.json", "reactor-worker.json"):
        doc = json.loads((CAPTURES / name).read_text())
        assert doc["schema"] < 6 and not SCHEMA6_COUNTERS & set(doc["totals"])
        assert layout_differences(doc) == []
        cap = load(CAPTURES / name)
        assert all(cap.totals[key] == 0 for key in SCHEMA6_COUNTERS)
        assert all(thread[key] == 0 for thread in cap.threads.values() for key in SCHEMA6_COUNTERS)


def test_schema5_listeners_are_read_and_checked(capture_file):
    import captures
    from spinscope.analysis.capture import load
    from spinscope.errors import SpinscopeError

    doc = captures.clean_event_loop()
    doc["schema"] = 5
    doc["listeners"] = [LISTENER]
    cap = load(capture_file(doc))
    assert cap.listeners == [LISTENER] and list(cap.listeners[0]) == list(LAYOUT["listeners[]"])
    doc["listeners"] = [{key: value for key, value in LISTENER.items() if key != "processes"}]
    with pytest.raises(SpinscopeError, match=r"listeners\[0\] lacks 'processes'"):
        load(capture_file(doc, "lacking.json"))
    doc["listeners"] = [dict(LISTENER, accept_eagain=-1)]
    with pytest.raises(SpinscopeError, match=r"listeners\[0\]\.accept_eagain is not a count"):
        load(capture_file(doc, "negative.json"))


def test_each_key_has_one_row_no_older_than_its_block():
    """KEYS names each key once, and no key is older than the block holding it: layout_differences takes a
    block all of whose rows are newer than a document's schema as not due (target.cgroup in schema 3)."""
    from spinscope.analysis.schema import KEYS

    assert len({(row.path, row.key) for row in KEYS}) == len(KEYS)
    blocks = {(f"{row.path}.{row.key}" if row.path else row.key): row.since for row in KEYS}
    assert [row for row in KEYS if row.path and row.since < blocks[row.path.removesuffix("[]")]] == []
    assert {row.path.removesuffix("[]") for row in KEYS if row.path} <= set(blocks)


def test_a_schema_says_which_keys_are_due():
    """A key added by a later schema is neither missing from an older capture nor read from it."""
    from spinscope.analysis.schema import KEYS

    since = {(row.path, row.key): row.since for row in KEYS}
    assert since[("target", "exe")] == since[("settings", "checkpoint_s")] == 3
    assert since[("threads[]", "calls_timed")] == since[("intervals[].counters", "calls_timed")] == 4
    assert since[("totals", "write_spin_ns")] == since[("requests.by_size[]", "duration_ns")] == 2
    assert since[("drops", "listeners")] == since[("intervals[].drops", "listeners")] == 5
    assert since[("intervals[].drops", "threads")] == 4 and since[("drops", "threads")] == 1
