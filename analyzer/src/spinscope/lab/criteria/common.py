"""What every criterion shares: the verdicts' words, Finding (what a criterion returns) and Check (one
comparison it makes), the cells a claim reads (tagged: by the tag its matrix group gave them, ok cells
only, repetitions averaged), and the helpers that turn checks into a verdict.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

REPRODUCED = "reproduced"
DIRECTION = "direction reproduced"
NOT_REPRODUCED = "not reproduced"
NOT_MEASURED = "not measured in this run"
ERROR = "error"

SIZE_NAMES = {"/bytes/100": "0.1 KB", "/bytes/10240": "10 KB", "/bytes/102400": "100 KB"}
FOUR = ["thread-per-conn", "event-loop", "reactor-split", "reactor-worker"]
# The parameters that make two cells the same setting (repetitions of a setting are averaged).
SETTING_KEYS = ("arch", "workers", "sndbuf", "write_policy", "poller", "backlog", "path", "mix", "concurrency",
                "rate", "burst", "think_ms", "rcvbuf", "keepalive", "net", "bandwidth", "delay_ms")
# Settings told apart by their server arguments (fanout-split's --backend-loops, --priority), shards, files.
SETTING_KEYS += ("server_args", "shards", "file_set", "memory_max", "drop_caches")


@dataclass
class Finding:
    """What a criterion concluded from a results table."""

    verdict: str = NOT_MEASURED
    ours: str = ""  # the measured numbers, one line
    why: str = ""  # the comparisons that held or failed, or why nothing was measured
    headers: list = field(default_factory=list)  # a table of the numbers compared
    rows: list = field(default_factory=list)
    data: object = None  # what the verdict was computed from, for the claim's figure (not reported)
    reps: list = field(default_factory=list)  # [Finding] on each repetition (lab/confidence.py), 2 or more
    # The timing comparisons the verdict rests on, with their numbers, and the verdict as a function of which
    # of them hold ({name: held} -> verdict): lab/confidence.py weighs each Check over the repetitions and
    # asks `decide` whether the unsettled ones could change the verdict. None for the counting claims.
    checks: list = field(default_factory=list)
    decide: Callable | None = None
    weighed: list = field(default_factory=list)  # [confidence.Weighed]: each Check over the repetitions


@dataclass(frozen=True)
class Check:
    """A timing comparison with its numbers: it holds when `value` >= `threshold`. `value` is a ratio of cell
    means (the larger-is-better side over the other, so that every comparison reads the same way), built of
    `cells` cell means (2 for a/b, 4 for a growth ratio (a2/a1)/(b2/b1)) of `metric` (req/s, ms, ...).
    lab/confidence.py's noise model: log(value) of one repetition has a spread sigma[metric] * sqrt(cells).
    A COUNT (context switches per request, ...) has no such model: its spread between repetitions is not
    one process (x0.7-x2.9 for one setting, +-20% for the next), so it settles only when every repetition
    puts it on the same side. `name` says the comparison without its numbers, so that it is the same on
    every repetition. Truthy when it holds: from_checks counts it like a bool."""

    name: str
    value: float
    threshold: float
    metric: str = "req/s"
    cells: int = 2
    # The threshold is the criterion's own definition, not a paper's number (process_graph's "served 2% less":
    # what equal throughput means at a set rate): the claim's margin delta, the paper's precision, is not put
    # around it (lab/confidence.py).
    exact: bool = False

    def __bool__(self) -> bool:
        return bool(self.value >= self.threshold)  # NaN (a cell missing) does not hold


COUNT = "count"  # Check.metric of a count per request: weighed by agreement, not by a noise model


def ratio(a, b) -> float:
    """a / b as a float: inf when only b is 0 (a count above none), NaN when both are or either is missing
    (a Check on NaN does not hold)."""
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return math.nan
    if math.isnan(a) or math.isnan(b) or (a == 0 and b == 0):
        return math.nan
    return a / b if b else math.inf


# ------------------------------------------------------------------------------------------- selecting cells

def has_tag(table: pd.DataFrame, tag: str) -> pd.Series:
    return table["claims"].fillna("").map(lambda s: tag in str(s).split(";"))


def tagged(table: pd.DataFrame, tag: str) -> pd.DataFrame:
    """Ok cells carrying `tag`, repetitions averaged (numeric columns), one row per distinct setting; the
    setting's parameters read "" where unset, `reps` counts the repetitions."""
    if table.empty or "claims" not in table:
        return table.iloc[0:0]
    sub = table[has_tag(table, tag) & (table["status"] == "ok")].copy()
    if sub.empty:
        return sub
    keys = [c for c in SETTING_KEYS if c in sub]
    for k in keys:
        sub[k] = sub[k].astype(object).where(sub[k].notna(), "")
    numeric = [c for c in sub.columns if c not in keys and pd.api.types.is_numeric_dtype(sub[c])]
    groups = sub.groupby(keys, dropna=False)
    agg = groups[numeric].mean().reset_index()
    if "classes_json" in sub:  # loadgen's per-class statistics: averaged field by field like the columns
        merged = groups["classes_json"].agg(_mean_classes).rename("classes_json").reset_index()
        agg = agg.merge(merged, on=keys, how="left")
    agg["reps"] = groups.size().values
    return agg


def _mean_classes(docs: pd.Series) -> str | None:
    """The repetitions' per-class statistics (classes_json) averaged: every number present in all of them
    (the mean of their p99s, as the columns are means; taking one repetition's would pair one run's p99 of
    a server with another run's of its rival)."""
    parsed = [json.loads(d) for d in docs if isinstance(d, str) and d]
    if not parsed:
        return None

    def mean(values):
        if all(isinstance(v, dict) for v in values):
            common = set(values[0]).intersection(*values[1:])
            return {k: mean([v[k] for v in values]) for k in sorted(common)}
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            return sum(values) / len(values)
        return values[0]
    return json.dumps(mean(parsed), sort_keys=True)


def failed_for(table: pd.DataFrame, tag: str) -> pd.DataFrame:
    """Cells carrying `tag` that failed (with their `error`)."""
    if table.empty or "claims" not in table:
        return table.iloc[0:0]
    return table[has_tag(table, tag) & (table["status"] != "ok")]


# ------------------------------------------------------------------------------------------- helpers

def variant(row) -> str:
    """A server as the tables name it: the arch, with its write policy where one was set."""
    name = row["arch"]
    if row.get("write_policy"):
        name += f" ({row['write_policy']})"
    return name


def heavy_share(mix: str) -> float | None:
    """Share of the requests in a loadgen `mix` whose response is 64 KiB or more (/bytes/N)."""
    if not mix:
        return None
    total = heavy = 0.0
    for part in str(mix).split(","):
        weight, _, path = part.partition(":")
        w = float(weight)
        total += w
        m = re.match(r"/bytes/(\d+)", path)
        if m and int(m.group(1)) >= 65536:
            heavy += w
    return heavy / total if total else None


def class_latency(row, path: str, key: str = "p99") -> float | None:
    """Latency `key` (ms) of the requests for `path` in a mixed-load cell, from loadgen's per-class stats."""
    try:
        classes = json.loads(row["classes_json"])
        return float(classes[path]["latency_ms"][key])
    except (KeyError, TypeError, ValueError, json.JSONDecodeError):
        return None


def _named(check) -> tuple:
    """(what, held) of a comparison: a Check; (what, held); or (what, [Check, ...]), which holds when every
    Check of the list does (a two-sided "within" is two Checks)."""
    if isinstance(check, Check):
        return check.name, bool(check)
    what, held = check
    return what, all(bool(c) for c in held) if isinstance(held, list) else bool(held)


def _held_by(check, held: dict, fallback: bool) -> bool:
    """Whether `check` (as _named reads it) holds when its Checks hold as `held` ({name: bool}) says."""
    if isinstance(check, Check):
        return held.get(check.name, fallback)
    if isinstance(check[1], list):
        return all(held.get(c.name, bool(c)) for c in check[1])
    return fallback


def _checks_in(checks: list) -> list:
    return [c for item in checks for c in ([item] if isinstance(item, Check) else
                                           item[1] if isinstance(item[1], list) else [])]


def count_verdict(held: list) -> str:
    """All hold, reproduced; at least half, direction reproduced; fewer, not reproduced; none, not measured."""
    if not held:
        return NOT_MEASURED
    n = sum(held)
    return REPRODUCED if n == len(held) else DIRECTION if n >= len(held) / 2 else NOT_REPRODUCED


def from_checks(checks: list, prefix: str = "") -> tuple:
    """(verdict, why) from named comparisons, Checks or [(what, held)]: count_verdict of those that hold. The
    why names those that fail."""
    if not checks:
        return NOT_MEASURED, prefix
    named = [_named(c) for c in checks]
    held = sum(v for _, v in named)
    failing = [name for name, v in named if not v]
    return count_verdict([v for _, v in named]), prefix + f"{held}/{len(checks)} comparisons hold" + (
        f"; fails: {'; '.join(failing)}" if failing else "")


def judged_by_checks(f: Finding, checks: list, prefix: str = "") -> Finding:
    """`f` with from_checks' verdict and why, and the Checks and their rule for lab/confidence.py (the plain
    (what, held) comparisons among `checks`, counts, keep the value they have here)."""
    f.verdict, f.why = from_checks(checks, prefix)
    named = [(c, _named(c)[1]) for c in checks]
    f.checks = _checks_in(checks)
    f.decide = lambda held: count_verdict([_held_by(c, held, v) for c, v in named])
    return f


# The CPU pinning of a cell is part of its setting (the server_cpus axis): cells that differ only in it are
# not repetitions of each other.
SETTING_KEYS = SETTING_KEYS + tuple(k for k in ("server_cpus", "loadgen_cpus") if k not in SETTING_KEYS)
CONDITION_KEYS = ("net", "sndbuf", "rcvbuf", "server_cpus", "loadgen_cpus", "keepalive", "delay_ms", "bandwidth")


def condition_of(row) -> str:
    """The network/buffer/CPU condition of a cell in words ("veth, sndbuf 16384, server CPUs 0")."""
    parts = []
    for key, name in (("net", ""), ("sndbuf", "sndbuf "), ("rcvbuf", "client rcvbuf "),
                      ("server_cpus", "server CPUs "), ("loadgen_cpus", "loadgen CPUs "),
                      ("keepalive", "keep-alive "), ("delay_ms", "delay ms "), ("bandwidth", "")):
        v = row.get(key, "")
        if v == "" or v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        if key == "keepalive" and v == "on":
            continue
        if key == "delay_ms" and float(v) == 0:
            continue
        parts.append(f"{name}{int(v) if isinstance(v, float) and v.is_integer() else v}")
    return ", ".join(parts) or "loopback, defaults"
