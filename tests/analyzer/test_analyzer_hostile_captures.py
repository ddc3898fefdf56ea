"""Captures travel and may be hostile: every malformed one is refused with one line, never a traceback,
and whatever loads is reported, as text, JSON and HTML, and diffed. A table of the known hostile
variants, then hypothesis mutating a real capture."""

from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import captures
from spinscope.analysis.capture import load
from spinscope.analysis.schema import MAX_HISTOGRAM_BUCKETS
from spinscope.cli import main
from spinscope.errors import SpinscopeError

GOOD = captures.reactor_split()


def mutated(change) -> dict:
    doc = copy.deepcopy(GOOD)
    change(doc)
    return doc


def setter(path: str, value):
    """A change that sets the key at a dotted path ("threads.0.comm") to value."""
    def change(doc):
        *parents, last = path.split(".")
        node = doc
        for step in parents:
            node = node[int(step)] if isinstance(node, list) else node[step]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return change


HOSTILE = {  # name: (document text, what the one error line says)
    "deep-nesting": ("[" * 200_000 + "]" * 200_000, "nested too deeply"),
    "counter-2^64": (json.dumps(mutated(setter("totals.write_calls", 2**64))), "totals.write_calls is not a count"),
    "counter-1e30": (json.dumps(mutated(setter("threads.0.write_calls", 1e30))), "threads[0].write_calls is not a count"),
    "5000-digit-int": (json.dumps(GOOD).replace('"duration_s": 10.0', '"duration_s": ' + "9" * 5000),
                       "not a spinscope capture"),
    "negative-count": (json.dumps(mutated(setter("requests.count", -1))), "requests.count is not a count (-1)"),
    "negative-writes": (json.dumps(mutated(setter("threads.1.write_calls", -241188))), "is not a count (-241188)"),
    "fractional-count": (json.dumps(mutated(setter("totals.poll_calls", 1.5))), "totals.poll_calls is not a count"),
    "bool-count": (json.dumps(mutated(setter("totals.poll_calls", True))), "totals.poll_calls is not a count (True)"),
    "nan-literal": (json.dumps(mutated(setter("duration_s", math.nan))), "duration_s is not a seconds (nan)"),
    "infinity-literal": (json.dumps(mutated(setter("threads.0.first_seen_s", math.inf))),
                         "threads[0].first_seen_s is not a seconds (inf)"),
    "string-first-seen": (json.dumps(mutated(setter("threads.0.first_seen_s", "yesterday"))),
                          "threads[0].first_seen_s is not a seconds ('yesterday')"),
    "target-string": (json.dumps(mutated(setter("target", "nginx"))), "target is not a object ('nginx')"),
    "settings-string": (json.dumps(mutated(setter("settings", "fast"))), "settings is not a object"),
    "host-list": (json.dumps(mutated(setter("host", []))), "host is not a object"),
    "comm-number": (json.dumps(mutated(setter("threads.0.comm", 7))), "threads[0].comm is not a text (7)"),
    "cmdline-numbers": (json.dumps(mutated(setter("target.cmdline", [1, 2]))), "target.cmdline is not a list of text"),
    "thread-not-object": (json.dumps(mutated(setter("threads.2", "x"))), "threads[2] is not an object ('x')"),
    "huge-histogram": (json.dumps(mutated(setter("threads.0.poll_events_hist", [1] * 100_000))),
                       "threads[0].poll_events_hist is not a histogram"),
    "histogram-of-text": (json.dumps(mutated(setter("requests.hist.write_calls", ["a"]))),
                          "requests.hist.write_calls is not a histogram"),
    "intervals-object": (json.dumps(mutated(setter("intervals", {}))), "intervals is not a list"),
    "interval-counters-list": (json.dumps(mutated(setter("intervals.0.counters", []))),
                               "intervals[0].counters is not a object"),
    "drops-negative": (json.dumps(mutated(setter("drops.threads", -5))), "drops.threads is not a count (-5)"),
    "execs-not-list": (json.dumps(mutated(setter("target.execs", "x"))), "target.execs is not a list"),
    "lone-surrogate": (json.dumps(GOOD).replace('"comm": "reactor"', '"comm": "a\\ud800b"', 1),
                       "target.comm is not a text ('a\\ud800b')"),
    "bom": ("\ufeff" + json.dumps(GOOD), "invalid JSON at byte 0"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_capture_is_one_line_error(case, tmp_path, capsys):
    """In process (spinscope.cli.main, as `python -m spinscope` runs it): an exception other than the
    one-line error would fail the test with its traceback."""
    text, expected = HOSTILE[case]
    path = tmp_path / "capture.json"
    path.write_text(text)
    for args in (["report", path], ["report", path, "--html", tmp_path / "x.html"], ["diff", path, path]):
        assert main([str(a) for a in args]) == 1
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert out == "" and len(lines) == 1 and expected in lines[0], err


def test_a_capture_above_the_size_bound_is_refused_before_reading(tmp_path, cli):
    path = tmp_path / "capture.json"
    path.write_text(json.dumps(GOOD) + " " * 2**20)  # valid, and over 1 MiB
    result = cli("report", path, env={**os.environ, "SPINSCOPE_MAX_CAPTURE_MB": "1"})
    assert result.returncode == 1
    assert "larger than a capture is read (1 MiB; SPINSCOPE_MAX_CAPTURE_MB raises it)" in result.stderr


# ------------------------------------------------------------------------------------------------
# Fuzzing: hypothesis mutates a real capture; load() either returns a Capture or raises SpinscopeError.

def paths_of(doc, prefix=()):
    """Every (path tuple) to a value in doc."""
    yield prefix
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from paths_of(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc[:3]):  # the first elements are enough to reach every kind of key
            yield from paths_of(value, (*prefix, i))


PATHS = [p for p in paths_of(GOOD) if p]
ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.lists(st.integers(min_value=-5, max_value=5), max_size=MAX_HISTOGRAM_BUCKETS + 3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3), st.just([[[[[]]]]]),
)


@st.composite
def mutations(draw):
    doc = copy.deepcopy(GOOD)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        path = draw(st.sampled_from(PATHS))
        node = doc
        try:
            for step in path[:-1]:
                node = node[step]
            if draw(st.booleans()) or not isinstance(node, dict):
                node[path[-1]] = draw(ODD_VALUES)
            else:
                del node[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or replaced the way there
    return doc


@seed(20261123)
@settings(max_examples=500, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(doc=mutations())
def test_fuzzed_captures_load_or_fail_cleanly(doc, tmp_path_factory):
    path = Path(tmp_path_factory.mktemp("fuzz")) / "capture.json"
    path.write_text(json.dumps(doc))
    try:
        cap = load(path)
    except SpinscopeError as exc:
        assert "\n" not in str(exc)
        return
    # What loads is analysed and judged without error.
    from spinscope.analysis.labels import assess
    from spinscope.analysis.metrics import analyze

    assess(analyze(cap))
