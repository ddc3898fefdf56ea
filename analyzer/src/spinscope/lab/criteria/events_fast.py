"""The criteria of "Are events fast?": mean latency of threads against the event loop, with keep-alive
and without it (one request per connection, like ApacheBench).
"""

from __future__ import annotations


import pandas as pd

from spinscope.fmt import fixed
from spinscope.lab.criteria.common import Check, Finding, judged_by_checks, ratio, tagged

EVENTS_FAST_SLOWEST = 0.95  # process-per-conn's mean latency at least this share of the slowest server's
EVENTS_FAST_CLOSE = 1.25  # thread-per-conn's mean latency at most this multiple of event-loop's
THREADED = ("thread-per-conn", "process-per-conn", "thread-pool")


def events_fast_latency(table: pd.DataFrame) -> Finding:
    d = tagged(table, "events_fast")
    if d.empty:
        return Finding()
    d, backlog = d[d["backlog"] == ""], d[d["backlog"] != ""]
    f = Finding(headers=["concurrency", *sorted(set(d["arch"]))])
    checks = []
    for conc, s in d.groupby("concurrency"):
        lat = s.groupby("arch")["lat_mean_ms"].mean()
        f.rows.append([int(conc), *[fixed(lat.get(a), 3) for a in f.headers[1:]]])
        if "process-per-conn" in lat:
            rest = lat.drop("process-per-conn")
            checks.append(Check(f"process-per-conn slowest at c={conc}",
                                ratio(lat["process-per-conn"], rest.max()) if len(rest) else 1.0,
                                EVENTS_FAST_SLOWEST, "mean latency ms"))
        if {"thread-per-conn", "event-loop"} <= set(lat.index):
            checks.append(Check(f"thread-per-conn within {EVENTS_FAST_CLOSE - 1:.0%} of event-loop at c={conc}",
                                ratio(lat["event-loop"], lat["thread-per-conn"]), 1 / EVENTS_FAST_CLOSE,
                                "mean latency ms"))
        if "green-threads" in lat:
            others = [lat[a] for a in THREADED if a in lat]
            if others:
                checks.append(Check(f"green-threads fastest threaded design at c={conc}",
                                    ratio(min(others), lat["green-threads"]), 1.0, "mean latency ms"))
    f.ours = "mean latency ms: " + "; ".join(
        f"c={r[0]}: " + ", ".join(f"{a} {v}" for a, v in zip(f.headers[1:], r[1:])) for r in f.rows)
    prefix = ""
    if not backlog.empty:
        f.ours += "; backlog cells: " + ", ".join(
            f"backlog {int(float(r['backlog']))} (c={int(r['concurrency'])}, {r['arch']}): "
            f"{fixed(r['lg_throughput'], 0)} req/s, {fixed(r['lg_errors'], 0)} errors, p99 {fixed(r['lat_p99_ms'])} ms"
            for _, r in backlog.iterrows())
    else:
        prefix = "accept-queue (--backlog) part not measured in this run; "
    judged_by_checks(f, checks, prefix)
    f.data = d if checks else None
    return f


# --- C. "Are events fast?" with keep-alive off (one request per connection, like ApacheBench) -------------

EVENTS_AB_AS_FAST = 0.9  # green threads' throughput at least this share of the event loop's ("as fast")
EVENTS_AB_CLOSE = 1 / EVENTS_FAST_CLOSE  # thread-per-conn's throughput at least this share of the loop's (0.8)


def events_fast_keepalive_off(table: pd.DataFrame) -> Finding:
    d = tagged(table, "events_fast_ab")
    if d.empty:
        return Finding()
    d = d[d["keepalive"] == "off"]
    if d.empty:
        return Finding(why="no keep-alive off cell")
    archs = [a for a in ("event-loop", "green-threads", "thread-per-conn", "process-per-conn") if a in set(d["arch"])]
    f = Finding(headers=["concurrency", *[f"{a} req/s" for a in archs], *[f"{a} p99 ms" for a in archs]], data=d)
    checks = []
    for conc, s in d.groupby("concurrency"):
        tp = s.groupby("arch")["lg_throughput"].mean()
        p99 = s.groupby("arch")["lat_p99_ms"].mean()
        f.rows.append([int(conc), *[fixed(tp.get(a), 0) for a in archs], *[fixed(p99.get(a), 2) for a in archs]])
        c = f"c={int(conc)}"
        if {"green-threads", "event-loop"} <= set(tp.index):
            checks.append(Check(f"green threads at least {EVENTS_AB_AS_FAST:.0%} of the event loop's req/s at {c}",
                                ratio(tp["green-threads"], tp["event-loop"]), EVENTS_AB_AS_FAST))
        if "process-per-conn" in tp and len(tp) > 1:
            checks.append(Check(f"process-per-conn the lowest req/s at {c}",
                                ratio(tp.drop("process-per-conn").min(), tp["process-per-conn"]), 1.0))
        if {"thread-per-conn", "event-loop"} <= set(tp.index):
            checks.append(Check(f"thread-per-conn at least {EVENTS_AB_CLOSE:.0%} of the event loop's req/s at {c}",
                                ratio(tp["thread-per-conn"], tp["event-loop"]), EVENTS_AB_CLOSE))
        threaded = [tp[a] for a in ("thread-per-conn", "process-per-conn") if a in tp]
        if "green-threads" in tp and threaded:
            checks.append(Check(f"green threads the fastest threaded design at {c}",
                                ratio(tp["green-threads"], max(threaded)), 1.0))
    f.ours = "keep-alive off, req/s: " + "; ".join(
        f"c={r[0]}: " + ", ".join(f"{a} {v}" for a, v in zip(archs, r[1:1 + len(archs)])) for r in f.rows)
    return judged_by_checks(f, checks)
