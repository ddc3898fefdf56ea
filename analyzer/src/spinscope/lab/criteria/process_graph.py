"""The criteria of the process-graph thesis: light requests' tail latency against a thread pool, with an
unbounded and a bounded pool.
"""

from __future__ import annotations

import json
import math

import pandas as pd

from spinscope.fmt import fixed
from spinscope.lab.criteria.common import (Check, DIRECTION, Finding, NOT_MEASURED, NOT_REPRODUCED, REPRODUCED,
                                           class_latency, ratio, tagged)

PROCESS_GRAPH_BETTER = 0.8  # reproduced: process-graph's light-request p99 at most this share of thread-pool's


def process_graph_light_latency(table: pd.DataFrame) -> Finding:
    d = tagged(table, "process_graph")
    if d.empty:
        return Finding()
    f = Finding(headers=["load", "arch", "/null p50 ms", "/null p99 ms", "/compute p99 ms", "req/s", "errors"])
    for _, r in d.iterrows():
        heavy = next((k for k in json.loads(r["classes_json"] or "{}") if k.startswith("/compute")), None)
        f.rows.append([_load_words(r), r["arch"], fixed(class_latency(r, "/null", "p50"), 3),
                       fixed(class_latency(r, "/null", "p99"), 3),
                       fixed(class_latency(r, heavy, "p99"), 3) if heavy else "n/a",
                       fixed(r["lg_throughput"], 0), fixed(r["lg_errors"], 0)])
    # Every process-graph cell against the thread-pool cells under the same load (a full matrix has several
    # loads and worker counts; each pair is judged, not only the last cell of each arch).
    _, graded, pairs = light_latency_pairs(d)
    f.ours = "/null p99: " + "; ".join(w for w, _ in graded)
    judged_by_pairs(f, graded, pairs)
    if f.verdict == NOT_MEASURED:
        f.why = "need both process-graph and thread-pool"
    return f


# --- D. process-graph thesis with a bounded pool: more connections than workers ----------------------------

PG_EQUAL_TP = 0.02  # two cells serve "the same throughput" when their req/s differ by at most 2%
PG_BOUNDED_BETTER = PROCESS_GRAPH_BETTER  # reproduced: process-graph's light p99 at most 80% of the pool's
LOAD_KEYS = ("mix", "path", "concurrency", "rate", "burst", "keepalive", "think_ms", "net", "sndbuf", "rcvbuf")


def _load_words(row) -> str:
    """A cell's load in a few words ("c=32 rate 400 burst 1:2000:0.5")."""
    def val(key):
        v = row.get(key, "")
        return "" if v is None or (isinstance(v, float) and math.isnan(v)) else v
    words = f"c={int(float(val('concurrency') or 0))}"
    if val("rate") != "":
        words += f" rate {fixed(float(val('rate')), 0)}"
    if val("burst"):
        words += f" burst {val('burst')}"
    if val("keepalive") == "off":
        words += " keep-alive off"
    if val("mix"):
        words += f" mix {val('mix')}"
    return words


def light_latency_pairs(d: pd.DataFrame, light: str = "/null") -> tuple:
    """Rows and graded comparisons of process-graph against thread-pool under the same load, one per load
    setting (LOAD_KEYS) and pair of worker counts: (rows, [(what, grade)], [[Check]]), the Checks of each
    pair as _pair_grade reads them, with grade REPRODUCED (light p99
    at most PG_BOUNDED_BETTER of the pool's, at equal throughput or with the pool behind), DIRECTION (lower),
    or NOT_REPRODUCED. Where throughputs differ by more than PG_EQUAL_TP, the server that served less is the
    worse one: its missing requests were still waiting when the run ended, and their latency is not in its
    percentiles."""
    rows, graded, pairs = [], [], []
    keys = [k for k in LOAD_KEYS if k in d]
    for _, s in d.groupby(keys, dropna=False):
        where = _load_words(s.iloc[0])
        stats = {}
        for _, r in s.iterrows():
            workers = r.get("workers", "")
            name = r["arch"] + (f" x{int(float(workers))}" if workers not in ("", None) else "")
            stats[name] = (r["arch"], class_latency(r, light, "p99"), class_latency(r, light, "max"), r["lg_throughput"])
            rows.append([where, name, fixed(class_latency(r, light, "p50"), 3), fixed(stats[name][1], 3),
                         fixed(stats[name][2], 3), fixed(r["lg_throughput"], 0), fixed(r["lg_errors"], 0)])
        for pg, (a1, p1, m1, t1) in stats.items():
            for tp, (a2, p2, m2, t2) in stats.items():
                if a1 != "process-graph" or a2 != "thread-pool" or p1 is None or p2 is None:
                    continue
                what = f"{pg} {fixed(p1, 3)} vs {tp} {fixed(p2, 3)} ms (max {fixed(m1, 1)} vs {fixed(m2, 1)}) at {where}"
                gap = (t1 - t2) / max(t1, t2) if max(t1, t2) else 0.0
                # Served "less" is more than PG_EQUAL_TP behind: t2 < (1 - PG_EQUAL_TP) * t1. Throughput at a
                # set rate has its own noise (the rate sets it), hence its own metric.
                pair = [Check(f"{tp} served {PG_EQUAL_TP:.0%} less than {pg} at {where}", ratio(t1, t2),
                              1 / (1 - PG_EQUAL_TP), "req/s at a set rate", exact=True),
                        Check(f"{pg} served {PG_EQUAL_TP:.0%} less than {tp} at {where}", ratio(t2, t1),
                              1 / (1 - PG_EQUAL_TP), "req/s at a set rate", exact=True),
                        Check(f"{pg} {light} p99 at most {PG_BOUNDED_BETTER:.0%} of {tp}'s at {where}", ratio(p2, p1),
                              1 / PG_BOUNDED_BETTER, "p99 ms"),
                        Check(f"{pg} {light} p99 below {tp}'s at {where}", ratio(p2, p1), 1.0, "p99 ms")]
                pairs.append(pair)
                grade = _pair_grade([c.name for c in pair], {c.name: bool(c) for c in pair})
                if grade == REPRODUCED and pair[0]:
                    what += f"; the pool served {gap:.0%} less"
                elif grade == NOT_REPRODUCED and pair[1]:
                    what += f"; process-graph served {-gap:.0%} less"
                elif grade == DIRECTION:
                    what += f"; lower by less than {1 - PG_BOUNDED_BETTER:.0%}"
                graded.append((what, grade))
    return rows, graded, pairs


def _pair_grade(names: list, held: dict) -> str:
    """A process-graph/thread-pool pair's grade from its four Checks (light_latency_pairs): the server that
    served less is the worse one; at equal throughput, the light requests' p99."""
    pool_less, pg_less, better, lower = (held[n] for n in names)
    return (REPRODUCED if pool_less else NOT_REPRODUCED if pg_less else REPRODUCED if better else
            DIRECTION if lower else NOT_REPRODUCED)


def judged_by_pairs(f: Finding, graded: list, pairs: list) -> Finding:
    """`f` with verdict_of_grades' verdict and why, and the pairs' Checks and rule for lab/confidence.py."""
    f.verdict, f.why = verdict_of_grades(graded)
    names = [[c.name for c in pair] for pair in pairs]
    f.checks = [c for pair in pairs for c in pair]
    f.decide = lambda held: verdict_of_grades([("", _pair_grade(n, held)) for n in names])[0]
    return f


def verdict_of_grades(graded: list) -> tuple:
    """(verdict, why) over graded comparisons: all reproduced, reproduced; at least half at least in direction,
    direction reproduced; else not reproduced. The why lists each comparison."""
    if not graded:
        return NOT_MEASURED, "need process-graph and thread-pool under the same load"
    good = sum(g in (REPRODUCED, DIRECTION) for _, g in graded)
    verdict = (REPRODUCED if all(g == REPRODUCED for _, g in graded) else
               DIRECTION if good >= len(graded) / 2 else NOT_REPRODUCED)
    return verdict, f"{good}/{len(graded)} comparisons lower on process-graph: " + "; ".join(
        f"{w} ({g})" for w, g in graded)


def process_graph_bounded(table: pd.DataFrame) -> Finding:
    d = tagged(table, "process_graph_bounded")
    if d.empty:
        return Finding()
    f = Finding(headers=["load", "server", "/null p50 ms", "/null p99 ms", "/null max ms", "req/s", "errors"], data=d)
    f.rows, graded, pairs = light_latency_pairs(d)
    f.ours = "; ".join(w for w, _ in graded)
    judged_by_pairs(f, graded, pairs)
    return f
