"""Criteria: pure functions of a sweep's results table, one per published claim (lab/claims.py), each
returning a Finding: a verdict, the measured numbers, which comparisons held, a table, and the data a
figure would be drawn from (lab/claim_figures.py draws; nothing here plots).

Cells are picked for a claim by the tag their matrix group gave them (`claims = [...]`), only cells with
status ok count, and repetitions are averaged (tagged()). Every threshold a criterion applies is a named
constant next to it, and the claim records quote the same constants.

Verdicts:

    reproduced                 our numbers match the published ones (within the stated tolerance)
    direction reproduced       the effect goes the published way, but not to the published size/everywhere
    not reproduced             the effect is absent or reversed here (the failing comparisons are named)
    not measured in this run   no ok cell carries what the claim needs
    error                      the criterion raised (Claim.judge): a bug, not a finding

A verdict's words say what was measured, never a cause the sweep did not measure.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

import pandas as pd

from spinscope.fmt import fixed

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


@dataclass
class Finding:
    """What a criterion concluded from a results table."""

    verdict: str = NOT_MEASURED
    ours: str = ""  # the measured numbers, one line
    why: str = ""  # the comparisons that held or failed, or why nothing was measured
    headers: list = field(default_factory=list)  # a table of the numbers compared
    rows: list = field(default_factory=list)
    data: object = None  # what the verdict was computed from, for the claim's figure (not reported)


# ------------------------------------------------------------------------------------------- selecting cells

def _has_tag(table: pd.DataFrame, tag: str) -> pd.Series:
    return table["claims"].fillna("").map(lambda s: tag in str(s).split(";"))


def tagged(table: pd.DataFrame, tag: str) -> pd.DataFrame:
    """Ok cells carrying `tag`, repetitions averaged (numeric columns), one row per distinct setting; the
    setting's parameters read "" where unset, `reps` counts the repetitions."""
    if table.empty or "claims" not in table:
        return table.iloc[0:0]
    sub = table[_has_tag(table, tag) & (table["status"] == "ok")].copy()
    if sub.empty:
        return sub
    keys = [c for c in SETTING_KEYS if c in sub]
    for k in keys:
        sub[k] = sub[k].astype(object).where(sub[k].notna(), "")
    numeric = [c for c in sub.columns if c not in keys and pd.api.types.is_numeric_dtype(sub[c])]
    groups = sub.groupby(keys, dropna=False)
    agg = groups[numeric].mean().reset_index()
    if "classes_json" in sub:
        agg = agg.merge(groups[["classes_json"]].first().reset_index(), on=keys, how="left")
    agg["reps"] = groups.size().values
    return agg


def failed_for(table: pd.DataFrame, tag: str) -> pd.DataFrame:
    """Cells carrying `tag` that failed (with their `error`)."""
    if table.empty or "claims" not in table:
        return table.iloc[0:0]
    return table[_has_tag(table, tag) & (table["status"] != "ok")]


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


def from_checks(checks: list, prefix: str = "") -> tuple:
    """(verdict, why) from named comparisons [(what, held)]: all hold, reproduced; at least half, direction
    reproduced; fewer, not reproduced; none made, not measured. The why names those that fail."""
    if not checks:
        return NOT_MEASURED, prefix
    held = sum(v for _, v in checks)
    failing = [name for name, v in checks if not v]
    verdict = REPRODUCED if held == len(checks) else DIRECTION if held >= len(checks) / 2 else NOT_REPRODUCED
    return verdict, prefix + f"{held}/{len(checks)} comparisons hold" + (f"; fails: {'; '.join(failing)}"
                                                                        if failing else "")


# ------------------------------------------------------------------------------------------- criteria

TABLE3_HANDOFFS = {"reactor-split": 4, "reactor-worker": 2, "thread-per-conn": 0, "event-loop": 0}
TABLE3_TOLERANCE = 0.15  # relative, on the two reactors
TABLE3_NONE = 0.1  # handoffs per request below this count as none


def table3_handoffs(table: pd.DataFrame) -> Finding:
    d = tagged(table, "table3")
    got = d.groupby("arch")["handoffs_per_request"].mean() if not d.empty else pd.Series(dtype=float)
    archs = [a for a in TABLE3_HANDOFFS if a in got]
    if not archs:
        return Finding()
    f = Finding(headers=["arch", "paper", "ours", "requests (capture)", "reps"], data=got[archs])
    f.rows = [[a, TABLE3_HANDOFFS[a], fixed(got[a]), fixed(d[d.arch == a]["cap_requests"].mean(), 0),
               int(d[d.arch == a]["reps"].sum())] for a in archs]
    f.ours = ", ".join(f"{a} {fixed(got[a])}" for a in archs)
    missing = [a for a in TABLE3_HANDOFFS if a not in got]
    within = all(abs(got[a] - TABLE3_HANDOFFS[a]) <= TABLE3_TOLERANCE * TABLE3_HANDOFFS[a]
                 for a in ("reactor-split", "reactor-worker") if a in got)
    none = all(got[a] < TABLE3_NONE for a in ("thread-per-conn", "event-loop") if a in got)
    order = all(got[x] > got[y] for x, y in (("reactor-split", "reactor-worker"), ("reactor-worker", "thread-per-conn"),
                                             ("reactor-worker", "event-loop")) if x in got and y in got)
    if within and none and not missing:
        f.verdict = REPRODUCED
        f.why = f"within {TABLE3_TOLERANCE:.0%} of 4 and 2; below {TABLE3_NONE} for thread-per-conn and event-loop"
    elif order:
        f.verdict = DIRECTION
        f.why = ("ordering holds" + (f"; missing {', '.join(missing)}" if missing else "")
                 + ("" if within else f"; not within {TABLE3_TOLERANCE:.0%} of the published values"))
    else:
        f.verdict = NOT_REPRODUCED
        f.why = "the ordering split > worker > (thread-per-conn, event-loop) does not hold"
    return f


TABLE6_SPIN_WRITES = {"/bytes/100": 1, "/bytes/10240": 1, "/bytes/102400": 102}  # the spinning event loop
TABLE6_SMALL_MAX = 1.1  # writes per response at 0.1 and 10 KB
TABLE6_LARGE_RANGE = (10, 1000)  # writes per 100 KB response: tens to hundreds
TABLE6_BLOCKING_MAX = 2  # thread-per-conn's writes per 100 KB response
TABLE6_SPIN_MIN = 4  # direction: at least this many writes per 100 KB response, and 4x thread-per-conn's


def table6_write_calls(table: pd.DataFrame) -> Finding:
    d = tagged(table, "table6")
    if d.empty:
        return Finding()
    d = d.assign(variant=d.apply(variant, axis=1))
    pivot = d.pivot_table(index="variant", columns="path", values="writes_per_request", aggfunc="mean")
    paths = [p for p in SIZE_NAMES if p in pivot.columns]
    f = Finding(headers=["server", *[SIZE_NAMES[p] for p in paths], "EAGAIN/resp at 100 KB", "label at 100 KB"],
                data=pivot[paths])
    for v in pivot.index:
        big = d[(d.variant == v) & (d.path == "/bytes/102400")]
        f.rows.append([v, *[fixed(pivot.loc[v, p], 1) for p in paths],
                       fixed(big["eagain_per_request"].mean(), 1) if len(big) else "n/a",
                       (big["labels"].iloc[0] or "none") if len(big) and "labels" in big else "n/a"])

    def val(v, p):
        return float(pivot.loc[v, p]) if v in pivot.index and p in pivot.columns else math.nan
    spin = "event-loop (spin)"
    s01, s10, s100 = val(spin, "/bytes/100"), val(spin, "/bytes/10240"), val(spin, "/bytes/102400")
    tpc = val("thread-per-conn", "/bytes/102400")
    f.ours = f"spinning loop {fixed(s01, 1)} / {fixed(s10, 1)} / {fixed(s100, 1)}; thread-per-conn at 100 KB {fixed(tpc, 1)}"
    low, high = TABLE6_LARGE_RANGE
    if math.isnan(s100):
        f.verdict, f.why = NOT_MEASURED, "no spinning event-loop cell at 100 KB"
    elif (s01 <= TABLE6_SMALL_MAX and s10 <= TABLE6_SMALL_MAX and low <= s100 <= high
          and (math.isnan(tpc) or tpc <= TABLE6_BLOCKING_MAX)):
        f.verdict = REPRODUCED
        f.why = (f"at most {TABLE6_SMALL_MAX} writes per response at 0.1 and 10 KB; {low}-{high} at 100 KB"
                 f" ({fixed(s100 / TABLE6_SPIN_WRITES['/bytes/102400'], 2)}x the paper's 102)")
    elif s100 > TABLE6_SPIN_MIN and (math.isnan(tpc) or s100 > TABLE6_SPIN_MIN * tpc):
        f.verdict = DIRECTION
        f.why = f"many writes at 100 KB, but outside {low}-{high}, or more than {TABLE6_SMALL_MAX} at smaller sizes"
    else:
        f.verdict = NOT_REPRODUCED
        f.why = (f"at most {TABLE6_SPIN_MIN} writes per 100 KB response on the spinning loop, or not "
                 f"{TABLE6_SPIN_MIN}x thread-per-conn's")
    return f


def fig6_7_orderings(table: pd.DataFrame) -> Finding:
    d = tagged(table, "fig6_7")
    d = d[d["arch"].isin(FOUR)] if not d.empty else d
    if d.empty:
        return Finding()
    f = Finding(headers=["size", "concurrency", *[f"{a} req/s" for a in FOUR], *[f"{a} cs/req" for a in FOUR]],
                data=d)
    cs_ok = tp_ok = total = 0
    failing = []
    for (path, conc), s in d.groupby(["path", "concurrency"]):
        tp = s.set_index("arch")["lg_throughput"]
        cs = s.set_index("arch")["cs_per_request"]
        f.rows.append([SIZE_NAMES.get(path, path), int(conc), *[fixed(tp.get(a), 0) for a in FOUR],
                       *[fixed(cs.get(a), 2) for a in FOUR]])
        if not all(a in tp for a in FOUR):
            continue
        total += 1
        cs_held = cs["reactor-split"] > cs["reactor-worker"] > max(cs["thread-per-conn"], cs["event-loop"]) * 0.999
        tp_held = tp["reactor-split"] < tp["reactor-worker"] < min(tp["thread-per-conn"], tp["event-loop"])
        cs_ok += cs_held
        tp_ok += tp_held
        if not (cs_held and tp_held):
            failing.append(f"{SIZE_NAMES.get(path, path)} c={int(conc)}")
    f.ours = (f"context-switch ordering split > worker > (tpc, event-loop) in {cs_ok}/{total} slices; "
              f"throughput ordering split < worker < (tpc, event-loop) in {tp_ok}/{total}")
    if total == 0:
        f.verdict, f.why = NOT_MEASURED, "no slice has all four servers"
    elif cs_ok == total and tp_ok == total:
        f.verdict, f.why = REPRODUCED, "both orderings hold at every size and concurrency"
    elif cs_ok + tp_ok >= total:
        f.verdict, f.why = DIRECTION, f"orderings hold in most slices; not both at {', '.join(failing)}"
    else:
        f.verdict, f.why = NOT_REPRODUCED, "orderings hold in fewer than half of the slices"
    return f


TABLE4_ORDER = ("event-loop", "thread-per-conn", "reactor-worker", "reactor-split")  # increasing futex share
TABLE4_TIE = 0.005  # futex shares closer than this (absolute) count as a tie


def table4_futex_share(table: pd.DataFrame) -> Finding:
    d = tagged(table, "table4")
    d = d[d["arch"].isin(FOUR)] if not d.empty else d
    if d.empty:
        return Finding()
    share = d.groupby("arch")["futex_share"].mean()
    wait = d.groupby("arch")["futex_wait_share"].mean()
    f = Finding(headers=["arch", "futex calls / traced syscalls", "futex wait time / syscall time"])
    f.rows = [[a, f"{share[a]:.3%}" if a in share else "n/a", f"{wait[a]:.3%}" if a in wait else "n/a"]
              for a in TABLE4_ORDER]
    f.ours = ", ".join(f"{a} {share[a]:.3%}" for a in TABLE4_ORDER if a in share)
    if not all(a in share for a in TABLE4_ORDER):
        f.verdict, f.why = DIRECTION if len(share) > 1 else NOT_MEASURED, "not all four servers measured"
        return f
    vals = [share[a] for a in TABLE4_ORDER]
    if all(x < y for x, y in zip(vals, vals[1:])):
        f.verdict, f.why = REPRODUCED, "strict ordering, averaged over sizes and concurrencies"
    elif max(vals[:2]) < min(vals[2:]):
        f.verdict = DIRECTION
        f.why = ("both reactors above event-loop and thread-per-conn, which tie (within "
                 f"{TABLE4_TIE:.1%})" if abs(vals[0] - vals[1]) < TABLE4_TIE else
                 "both reactors above event-loop and thread-per-conn; the order inside a pair differs")
    else:
        f.verdict = NOT_REPRODUCED
        f.why = "event-loop or thread-per-conn has a futex share at least as high as a reactor's"
    return f


FIG12_FALL = 1.2  # writes per response at the smallest window over those at the largest
FIG12_SLACK = 0.9  # a step to a larger window may go up by at most 1/0.9 (noise)


def fig11_12_write_spin(table: pd.DataFrame) -> Finding:
    """The receive-window part (Figure 12), on the spinning loop's cells (fig11_12_latency_and_window adds
    the delay part)."""
    d = tagged(table, "fig11_12")
    if not d.empty and "write_policy" in d:
        d = d[d["write_policy"].isin(["spin", ""])]  # the delay part's non-spinning contrast is not this series
    failed = failed_for(table, "fig11_12")
    delay_note = ""
    if len(failed) and failed["error"].fillna("").str.contains("delay unsupported").any():
        delay_note = "delay part not measured: its cells failed (delay unsupported here, see their errors)"
    if d.empty:
        return Finding(why=delay_note)
    nodelay = d[d["delay_ms"].astype(float) == 0].copy()
    nodelay["rcvbuf_n"] = pd.to_numeric(nodelay["rcvbuf"].replace("", math.nan))
    nodelay = nodelay.dropna(subset=["rcvbuf_n"]).sort_values("rcvbuf_n")
    f = Finding(headers=["client rcvbuf", "delay ms", "RTT ms (measured)", "writes/resp", "EAGAIN/resp", "req/s"],
                data=nodelay[["rcvbuf_n", "writes_per_request"]] if len(nodelay) >= 2 else None)
    for _, r in d.sort_values(["delay_ms", "rcvbuf"], key=lambda s: pd.to_numeric(s.replace("", 0))).iterrows():
        f.rows.append([r["rcvbuf"] or "default", fixed(float(r["delay_ms"]), 0), fixed(r["rtt_ms"], 3),
                       fixed(r["writes_per_request"], 1), fixed(r["eagain_per_request"], 1), fixed(r["lg_throughput"], 0)])
    delayed = d[d["delay_ms"].astype(float) > 0]
    w = list(nodelay["writes_per_request"])
    f.ours = ", ".join(f"rcvbuf {int(b)}: {fixed(x, 1)} writes/resp" for b, x in zip(nodelay["rcvbuf_n"], w))
    if len(w) >= 2 and w[0] > FIG12_FALL * w[-1] and all(x >= y * FIG12_SLACK for x, y in zip(w, w[1:])):
        f.verdict = DIRECTION
        f.why = "receive-window part: smaller windows, more writes per response"
        if len(delayed) == 0:
            f.why += "; " + (delay_note or "delay part not measured")
    elif len(w) >= 2:
        f.verdict, f.why = NOT_REPRODUCED, "writes per response do not fall as the receive window grows"
    else:
        f.why = delay_note or "need at least two receive windows"
    return f


FIG16_NEAR_BEST = 0.95  # hybrid's throughput at least this share of the best server's


def fig14_16_netty_hybrid(table: pd.DataFrame) -> Finding:
    d = tagged(table, "fig14_16")
    if d.empty:
        return Finding()
    d = d.assign(variant=d.apply(variant, axis=1))
    f = Finding(headers=["workload", "hybrid req/s", "netty req/s", "event-loop (spin) req/s", "best"])
    checks, lines = [], []
    single = d[d["mix"] == ""]
    tp = single.pivot_table(index="variant", columns="path", values="lg_throughput", aggfunc="mean")
    for path in ("/bytes/100", "/bytes/102400"):
        if path in tp.columns and {"netty", "event-loop (spin)"} <= set(tp.index):
            n, s_ = tp.loc["netty", path], tp.loc["event-loop (spin)", path]
            big = path == "/bytes/102400"
            checks.append((f"netty {'beats' if big else 'loses to'} the spinning loop at {SIZE_NAMES[path]}",
                           bool(n > s_ if big else n < s_)))
            lines.append(f"{SIZE_NAMES[path]}: netty {fixed(n, 0)} vs spin {fixed(s_, 0)} req/s")
            f.rows.append([SIZE_NAMES[path] + " (Table 6 cells)", "n/a", fixed(n, 0), fixed(s_, 0),
                           "netty" if n > s_ else "event-loop (spin)"])
    mixed = d[d["mix"] != ""].copy()
    if not mixed.empty:
        mixed["heavy"] = mixed["mix"].map(heavy_share)
        mp = mixed.pivot_table(index="heavy", columns="variant", values="lg_throughput", aggfunc="mean")
        f.data = mp
        hybrid_best = []
        for heavy, r in mp.iterrows():
            f.rows.append([f"{heavy:.0%} heavy (100 KB)", fixed(r.get("hybrid"), 0), fixed(r.get("netty"), 0),
                           fixed(r.get("event-loop (spin)"), 0), r.idxmax()])
            if "hybrid" in r:
                hybrid_best.append((f"hybrid within {1 - FIG16_NEAR_BEST:.0%} of the best at {heavy:.0%} heavy",
                                    bool(r["hybrid"] >= FIG16_NEAR_BEST * r.max())))
        lines.append(f"hybrid within {1 - FIG16_NEAR_BEST:.0%} of the best at "
                     f"{sum(v for _, v in hybrid_best)}/{len(hybrid_best)} heavy ratios")
        checks += hybrid_best
    f.ours = "; ".join(lines)
    f.verdict, f.why = from_checks(checks)
    return f


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
            checks.append((f"process-per-conn slowest at c={conc}",
                           bool(lat["process-per-conn"] >= EVENTS_FAST_SLOWEST * lat.max())))
        if {"thread-per-conn", "event-loop"} <= set(lat.index):
            checks.append((f"thread-per-conn within {EVENTS_FAST_CLOSE - 1:.0%} of event-loop at c={conc}",
                           bool(lat["thread-per-conn"] <= EVENTS_FAST_CLOSE * lat["event-loop"])))
        if "green-threads" in lat:
            others = [lat[a] for a in THREADED if a in lat]
            if others:
                checks.append((f"green-threads fastest threaded design at c={conc}",
                               bool(lat["green-threads"] <= min(others))))
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
    f.verdict, f.why = from_checks(checks, prefix)
    f.data = d if checks else None
    return f


def compare_arch_checks(table: pd.DataFrame) -> Finding:
    d = tagged(table, "compare_arch")
    if d.empty:
        return Finding()
    f = Finding(headers=["cells", "metric", "values"])
    checks, lines = [], []
    one_loop = d[d["poller"] == ""]
    tp = one_loop.groupby("arch")["lg_throughput"].mean()
    if {"n-copy", "event-loop"} <= set(tp.index):
        checks.append(("n-copy beats event-loop", bool(tp["n-copy"] > tp["event-loop"])))
        lines.append(f"n-copy {fixed(tp['n-copy'], 0)} vs event-loop {fixed(tp['event-loop'], 0)} req/s")
        f.rows.append(["event-loop vs n-copy", "req/s", lines[-1]])
    t6 = tagged(table, "table6")
    if not t6.empty:
        big = t6[t6["path"] == "/bytes/102400"].assign(variant=lambda x: x.apply(variant, axis=1))
        w = big.groupby("variant")["writes_per_request"].mean()
        if {"thread-per-conn", "event-loop (epollout)"} <= set(w.index):
            checks.append(("blocking writes need fewer calls", bool(w["thread-per-conn"] < w["event-loop (epollout)"])))
            lines.append(f"100 KB writes/resp: blocking {fixed(w['thread-per-conn'], 1)}, "
                         f"non-blocking epollout {fixed(w['event-loop (epollout)'], 1)}")
            f.rows.append(["blocking vs non-blocking (Table 6 cells)", "writes per 100 KB response", lines[-1]])
    pol = d[d["poller"] != ""]
    think = pd.to_numeric(pol["think_ms"], errors="coerce").fillna(0) if "think_ms" in pol else None
    if think is not None and (think > 0).any():
        pol = pol[think > 0]  # mostly idle connections: the interest set grows, the work per call does not
    if not pol.empty and pol["concurrency"].nunique() >= 2:
        lo, hi = pol["concurrency"].min(), pol["concurrency"].max()
        cpu = pol.pivot_table(index="poller", columns="concurrency", values="cpu_ms_per_request", aggfunc="mean")
        f.data = cpu
        growth = (cpu[hi] / cpu[lo]).to_dict()
        for poller, g in growth.items():
            f.rows.append([f"event-loop --poller {poller}", f"CPU ms/request c={lo} -> c={hi}",
                           f"{fixed(cpu.loc[poller, lo], 4)} -> {fixed(cpu.loc[poller, hi], 4)} (x{fixed(g)})"])
        if "epoll" in growth:
            for poller in ("poll", "select"):
                if poller in growth:
                    checks.append((f"{poller} cost grows more than epoll's", bool(growth[poller] > growth["epoll"])))
        lines.append("CPU/request growth " + ", ".join(f"{k} x{fixed(v)}" for k, v in growth.items()))
    f.ours = "; ".join(lines)
    ncopy = one_loop[one_loop["arch"] == "n-copy"]
    note = ""
    if len(ncopy) and not (ncopy["cap_requests"].fillna(0) > 0).any():
        note = "n-copy's captures recorded no request: its comparison uses loadgen throughput only. "
    f.verdict, f.why = from_checks(checks, note)
    return f


PROCESS_GRAPH_BETTER = 0.8  # reproduced: process-graph's light-request p99 at most this share of thread-pool's


def process_graph_light_latency(table: pd.DataFrame) -> Finding:
    d = tagged(table, "process_graph")
    if d.empty:
        return Finding()
    f = Finding(headers=["arch", "/null p50 ms", "/null p99 ms", "/compute p99 ms", "req/s", "errors"])
    lat = {}
    for _, r in d.iterrows():
        heavy = next((k for k in json.loads(r["classes_json"] or "{}") if k.startswith("/compute")), None)
        lat[r["arch"]] = class_latency(r, "/null", "p99")
        f.rows.append([r["arch"], fixed(class_latency(r, "/null", "p50"), 3), fixed(lat[r["arch"]], 3),
                       fixed(class_latency(r, heavy, "p99"), 3) if heavy else "n/a",
                       fixed(r["lg_throughput"], 0), fixed(r["lg_errors"], 0)])
    pg, tp = lat.get("process-graph"), lat.get("thread-pool")
    if pg is None or tp is None:
        f.why = "need both process-graph and thread-pool"
        return f
    f.ours = f"/null p99: process-graph {fixed(pg, 3)} ms, thread-pool {fixed(tp, 3)} ms"
    if pg < PROCESS_GRAPH_BETTER * tp:
        f.verdict = REPRODUCED
    elif pg < tp:
        f.verdict, f.why = DIRECTION, f"lower, but by less than {1 - PROCESS_GRAPH_BETTER:.0%}"
    else:
        f.verdict, f.why = NOT_REPRODUCED, "process-graph's /null p99 is not below thread-pool's"
    return f


# ============================================================================ Figures 10-12: added delay
# (the delay line, lab/netcond.py). The spinning loop's write calls per 100 KB response and its throughput
# against the round trip added, next to the same loop with --write-policy epollout at the same settings
# (both face the same TCP window/RTT limit, so what the spinning loop loses beyond the contrast is the
# write-spin's). fig11_12_latency_and_window judges this and the receive-window part together.

FIG11_PAPER_DELAY_MS = 5.0  # the paper: the spinning loop's throughput falls 95% at +5 ms
FIG11_PAPER_DROP = 0.95
FIG11_DROP_TOLERANCE = 0.05  # reproduced: a drop within 5 percentage points of 95% (0.90-1.00)
FIG11_WRITES_RISE = 2.0  # writes per response at the largest delay over those at no added delay
FIG11_CONTRAST = "epollout"  # the non-spinning write policy the delay cells are compared with


def _by_delay(d: pd.DataFrame, policy: str) -> pd.DataFrame:
    """One row per added delay (ms, ascending) for `policy` at the smallest client window that has a delayed
    cell: the delay series the criterion reads."""
    s = d[d["write_policy"] == policy].copy() if "write_policy" in d else d.iloc[0:0]
    if s.empty:
        return s
    s["delay_n"] = pd.to_numeric(s["delay_ms"], errors="coerce").fillna(0)
    s["rcvbuf_n"] = pd.to_numeric(s["rcvbuf"].replace("", math.nan))
    delayed = s[s["delay_n"] > 0]
    if delayed.empty:
        return delayed
    window = delayed["rcvbuf_n"].min() if delayed["rcvbuf_n"].notna().any() else math.nan
    s = s[s["rcvbuf_n"] == window] if not math.isnan(window) else s[s["rcvbuf_n"].isna()]
    return s.groupby("delay_n")[["writes_per_request", "lg_throughput", "rtt_ms", "eagain_per_request"]] \
        .mean().reset_index().assign(rcvbuf_n=window)


def fig11_delay_checks(table: pd.DataFrame) -> tuple:
    """(checks [(what, held)], the spinning loop's delay series, the contrast's, the numbers in words)."""
    d = tagged(table, "fig11_12")
    spin = _by_delay(d, "spin") if not d.empty else d
    contrast = _by_delay(d, FIG11_CONTRAST) if not d.empty else d
    checks, lines = [], []
    if spin.empty or 0.0 not in set(spin["delay_n"]):
        return checks, spin, contrast, lines
    base = spin[spin["delay_n"] == 0].iloc[0]
    w = list(spin["writes_per_request"])
    lines.append("spin writes/resp " + " / ".join(f"{fixed(x, 0)}" for x in w) + " at +"
                 + " / +".join(f"{x:g}" for x in spin["delay_n"]) + " ms")
    checks.append((f"writes per response grow with delay ({FIG11_WRITES_RISE:g}x from +0 to "
                   f"+{spin['delay_n'].max():g} ms, no step down by more than {1 - FIG12_SLACK:.0%})",
                   bool(w[-1] >= FIG11_WRITES_RISE * w[0] and all(y >= x * FIG12_SLACK for x, y in zip(w, w[1:])))))
    at = spin[spin["delay_n"] == FIG11_PAPER_DELAY_MS]
    if len(at) and base["lg_throughput"] > 0:
        drop = 1 - at.iloc[0]["lg_throughput"] / base["lg_throughput"]
        lines.append(f"throughput {fixed(base['lg_throughput'], 0)} -> {fixed(at.iloc[0]['lg_throughput'], 1)} "
                     f"req/s at +{FIG11_PAPER_DELAY_MS:g} ms ({-drop:+.1%}; paper {-FIG11_PAPER_DROP:+.0%})")
        checks.append((f"throughput drop at +{FIG11_PAPER_DELAY_MS:g} ms within {FIG11_DROP_TOLERANCE:.0%} of "
                       f"the paper's {FIG11_PAPER_DROP:.0%} (measured {drop:.1%})",
                       bool(abs(drop - FIG11_PAPER_DROP) <= FIG11_DROP_TOLERANCE)))
    both = spin.merge(contrast, on="delay_n", suffixes=("", "_c"))
    for _, r in both[both["delay_n"] > 0].iterrows():
        lines.append(f"+{r['delay_n']:g} ms: spin {fixed(r['lg_throughput'], 1)} vs {FIG11_CONTRAST} "
                     f"{fixed(r['lg_throughput_c'], 1)} req/s")
        checks.append((f"the spinning loop below {FIG11_CONTRAST} at +{r['delay_n']:g} ms (throughput)",
                       bool(r["lg_throughput"] < r["lg_throughput_c"])))
    return checks, spin, contrast, lines


def fig11_12_latency_and_window(table: pd.DataFrame) -> Finding:
    """Figures 11/12 (and Figure 10's write-spin vs latency): the receive-window part
    (fig11_12_write_spin) as one comparison, the delay part's comparisons (fig11_delay_checks) beside it.
    Every comparison holds and both parts measured: reproduced; at least half: direction; fewer: not
    reproduced. With one part missing, direction at most."""
    window = fig11_12_write_spin(table)
    checks, spin, contrast, lines = fig11_delay_checks(table)
    d = tagged(table, "fig11_12")
    f = Finding(headers=["server", "client rcvbuf", "delay ms", "RTT ms (measured)", "writes/resp", "EAGAIN/resp",
                         "req/s"],
                data={"by_window": window.data, "spin": spin if len(spin) else None,
                      "contrast": contrast if len(contrast) else None})
    if not d.empty:
        d = d.assign(variant=d.apply(variant, axis=1), delay_n=pd.to_numeric(d["delay_ms"], errors="coerce").fillna(0),
                     rcvbuf_n=pd.to_numeric(d["rcvbuf"].replace("", math.nan)))
        for _, r in d.sort_values(["variant", "delay_n", "rcvbuf_n"]).iterrows():
            f.rows.append([r["variant"], r["rcvbuf"] or "default", fixed(r["delay_n"], 0), fixed(r["rtt_ms"], 3),
                           fixed(r["writes_per_request"], 1), fixed(r["eagain_per_request"], 1),
                           fixed(r["lg_throughput"], 1)])
    delay_measured = bool(checks)
    if window.verdict != NOT_MEASURED:
        checks.insert(0, ("writes per response fall as the client receive window grows",
                          window.verdict != NOT_REPRODUCED))
    f.ours = "; ".join(([window.ours] if window.ours else []) + lines)
    f.verdict, f.why = from_checks(checks)
    missing = [part for part, measured in (("receive-window", window.verdict != NOT_MEASURED),
                                           ("delay", delay_measured)) if not measured]
    if missing:
        failed = failed_for(table, "fig11_12")
        failed = failed[pd.to_numeric(failed["delay_ms"], errors="coerce").fillna(0) > 0] if len(failed) else failed
        notes = [f"{part} part not measured" + (f": its cells failed ({str(failed['error'].iloc[0])[:120]})"
                                                 if part == "delay" and len(failed) else "") for part in missing]
        if f.verdict == REPRODUCED:
            f.verdict = DIRECTION
        f.why = "; ".join(([f.why] if checks else []) + notes)
    return f
