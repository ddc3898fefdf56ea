"""`spinscope sweep-report DIR`: the published claims next to what a sweep measured, with a verdict each.

Reads DIR/results.parquet (or results.csv) written by `spinscope sweep`. Cells are picked for a claim by
the `claims` tags their matrix group gave them (docs/sweep.md lists the tags), only cells with status ok
count, and repetitions are averaged. Every claim gets one of four verdicts:

    reproduced              our numbers match the published ones (within the stated tolerance)
    direction reproduced    the effect goes the published way, but not to the published size/everywhere
    not reproduced          the effect is absent or reversed here (the reason when known)
    not measured in this run   no ok cell carries the claim's tag

Outputs: a terminal table (rich), `--json`, and `--html OUT` (figures as embedded PNGs, tables, the
failed cells with their reasons).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from spinscope import htmlpage
from spinscope.lab.results import read_table
from spinscope.output import jsonable, print_json, terminal, write_text

REPRODUCED = "reproduced"
DIRECTION = "direction reproduced"
NOT_REPRODUCED = "not reproduced"
NOT_MEASURED = "not measured in this run"
VERDICT_CSS = {REPRODUCED: "ok", DIRECTION: "warning", NOT_REPRODUCED: "critical", NOT_MEASURED: "info"}
VERDICT_STYLE = {REPRODUCED: "bold green", DIRECTION: "bold yellow", NOT_REPRODUCED: "bold red",
                 NOT_MEASURED: "dim"}
TABLE3_TOLERANCE = 0.15
SIZE_NAMES = {"/bytes/100": "0.1 KB", "/bytes/10240": "10 KB", "/bytes/102400": "100 KB"}
FOUR = ["thread-per-conn", "event-loop", "reactor-split", "reactor-worker"]


@dataclass
class Claim:
    id: str
    title: str
    paper: str
    ours: str = ""
    verdict: str = NOT_MEASURED
    why: str = ""
    headers: list = field(default_factory=list)
    rows: list = field(default_factory=list)
    figure: str | None = None  # base64 PNG

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("figure")
        return d


# ------------------------------------------------------------------------------------------- data

def tagged(frame: pd.DataFrame, tag: str) -> pd.DataFrame:
    """Ok cells carrying `tag`, repetitions averaged (numeric columns), one row per distinct cell setting."""
    if frame.empty or "claims" not in frame:
        return frame.iloc[0:0]
    mask = frame["claims"].fillna("").map(lambda s: tag in str(s).split(";")) & (frame["status"] == "ok")
    sub = frame[mask].copy()
    if sub.empty:
        return sub
    keys = [c for c in ("arch", "workers", "sndbuf", "write_policy", "poller", "backlog", "path", "mix",
                        "concurrency", "rate", "burst", "think_ms", "rcvbuf", "keepalive", "net", "bandwidth", "delay_ms")
            if c in sub]
    for k in keys:
        sub[k] = sub[k].astype(object).where(sub[k].notna(), "")
    numeric = [c for c in sub.columns if c not in keys and pd.api.types.is_numeric_dtype(sub[c])]
    agg = sub.groupby(keys, dropna=False)[numeric].mean().reset_index()
    firsts = sub.groupby(keys, dropna=False)[["classes_json"]].first().reset_index() if "classes_json" in sub else None
    if firsts is not None:
        agg = agg.merge(firsts, on=keys, how="left")
    agg["reps"] = sub.groupby(keys, dropna=False).size().values
    return agg


def failed_for(frame: pd.DataFrame, tag: str) -> pd.DataFrame:
    if frame.empty or "claims" not in frame:
        return frame.iloc[0:0]
    mask = frame["claims"].fillna("").map(lambda s: tag in str(s).split(";")) & (frame["status"] != "ok")
    return frame[mask]


def num(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def variant(row) -> str:
    name = row["arch"]
    if row.get("write_policy"):
        name += f" ({row['write_policy']})"
    return name


def heavy_share(mix: str) -> float | None:
    """Share of requests in `mix` whose response is 64 KiB or more (/bytes/N) or compute >= 1000 units."""
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
    try:
        classes = json.loads(row["classes_json"])
        return float(classes[path]["latency_ms"][key])
    except (KeyError, TypeError, ValueError, json.JSONDecodeError):
        return None


def _fig():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _png(fig) -> str:
    from spinscope.figures import to_png
    return to_png(fig)


# ------------------------------------------------------------------------------------------- claims

def claim_table3(frame: pd.DataFrame) -> Claim:
    c = Claim("table3", "Table 3: handoffs per request (low concurrency)",
              "reactor-split 4, reactor-worker 2, thread-per-conn 0, event-loop 0")
    d = tagged(frame, "table3")
    if d.empty:
        return c
    paper = {"reactor-split": 4, "reactor-worker": 2, "thread-per-conn": 0, "event-loop": 0}
    got = d.groupby("arch")["handoffs_per_request"].mean()
    c.headers = ["arch", "paper", "ours", "requests (capture)", "reps"]
    c.rows = [[a, paper.get(a, "-"), num(got.get(a)), num(d[d.arch == a]["cap_requests"].mean(), 0),
               int(d[d.arch == a]["reps"].sum())] for a in paper if a in got]
    c.ours = ", ".join(f"{a} {num(got[a])}" for a in paper if a in got)
    missing = [a for a in paper if a not in got]
    within = all(abs(got[a] - paper[a]) <= TABLE3_TOLERANCE * paper[a] for a in ("reactor-split", "reactor-worker")
                 if a in got)
    zeros = all(got[a] < 0.1 for a in ("thread-per-conn", "event-loop") if a in got)
    order = all(got.get(x, math.nan) > got.get(y, math.nan) for x, y in
                (("reactor-split", "reactor-worker"), ("reactor-worker", "thread-per-conn"),
                 ("reactor-worker", "event-loop")) if x in got and y in got)
    if within and zeros and not missing:
        c.verdict = REPRODUCED
        c.why = f"within {TABLE3_TOLERANCE:.0%} of 4 and 2; below 0.1 for the designs without handoffs"
    elif order:
        c.verdict = DIRECTION
        c.why = ("ordering holds" + (f"; missing {', '.join(missing)}" if missing else "")
                 + ("" if within else f"; not within {TABLE3_TOLERANCE:.0%} of the published values"))
    else:
        c.verdict = NOT_REPRODUCED
        c.why = "the ordering split > worker > (thread-per-conn, event-loop) does not hold"
    plt = _fig()
    fig, ax = plt.subplots(figsize=(6, 3.2))
    archs = [a for a in paper if a in got]
    ax.bar(archs, [got[a] for a in archs], color="#4c72b0", label="measured")
    ax.scatter(archs, [paper[a] for a in archs], color="#c44e52", marker="_", s=900, label="paper", zorder=3)
    ax.set_ylabel("handoffs per request")
    ax.legend()
    ax.set_title("Table 3: handoffs per request, concurrency 1")
    c.figure = _png(fig)
    return c


def claim_table6(frame: pd.DataFrame) -> Claim:
    c = Claim("table6", "Table 6: write calls per response, 16 KB send buffer",
              "spinning event loop: 1 / 1 / ~102 for 0.1 / 10 / 100 KB; blocking thread-per-conn ~1")
    d = tagged(frame, "table6")
    if d.empty:
        return c
    d = d.assign(variant=d.apply(variant, axis=1))
    pivot = d.pivot_table(index="variant", columns="path", values="writes_per_request", aggfunc="mean")
    paths = [p for p in SIZE_NAMES if p in pivot.columns]
    c.headers = ["server", *[SIZE_NAMES[p] for p in paths], "EAGAIN/resp at 100 KB", "label at 100 KB"]
    for v in pivot.index:
        big = d[(d.variant == v) & (d.path == "/bytes/102400")]
        c.rows.append([v, *[num(pivot.loc[v, p], 1) for p in paths],
                       num(big["eagain_per_request"].mean(), 1) if len(big) else "n/a",
                       (big["labels"].iloc[0] or "none") if len(big) and "labels" in big else "n/a"])
    spin = "event-loop (spin)"
    def val(v, p):
        try:
            return float(pivot.loc[v, p])
        except KeyError:
            return math.nan
    s100, s10, s01 = val(spin, "/bytes/102400"), val(spin, "/bytes/10240"), val(spin, "/bytes/100")
    tpc = val("thread-per-conn", "/bytes/102400")
    c.ours = f"spinning loop {num(s01, 1)} / {num(s10, 1)} / {num(s100, 1)}; thread-per-conn at 100 KB {num(tpc, 1)}"
    if math.isnan(s100):
        c.verdict, c.why = NOT_MEASURED, "no spinning event-loop cell at 100 KB"
    elif s01 <= 1.1 and s10 <= 1.1 and 10 <= s100 <= 1000 and (math.isnan(tpc) or tpc <= 2):
        c.verdict = REPRODUCED
        c.why = ("one write for responses that fit the buffer; tens to hundreds for 100 KB"
                 f" ({num(s100 / 102, 2)}x the paper's 102)")
    elif s100 > 4 and (math.isnan(tpc) or s100 > 4 * tpc):
        c.verdict, c.why = DIRECTION, "spinning at 100 KB, but outside tens-to-hundreds or small sizes take > 1 write"
    else:
        c.verdict, c.why = NOT_REPRODUCED, "no write-spin at 100 KB"
    plt = _fig()
    fig, ax = plt.subplots(figsize=(7, 3.4))
    width = 0.8 / max(1, len(pivot.index))
    for i, v in enumerate(pivot.index):
        ax.bar([j + i * width for j in range(len(paths))], [pivot.loc[v, p] for p in paths], width, label=v)
    ax.set_xticks([j + width * (len(pivot.index) - 1) / 2 for j in range(len(paths))])
    ax.set_xticklabels([SIZE_NAMES[p] for p in paths])
    ax.set_yscale("log")
    ax.axhline(102, color="#c44e52", ls="--", lw=1, label="paper, spin 100 KB")
    ax.set_ylabel("write calls per response")
    ax.legend(fontsize=7)
    ax.set_title("Table 6: write calls per response (16 KB SO_SNDBUF, veth)")
    c.figure = _png(fig)
    return c


def _lines(d: pd.DataFrame, x: str, y: str, series: str, facet: str, title: str, ylabel: str,
           logx: bool = True, facet_names: dict | None = None) -> str:
    plt = _fig()
    facets = [f for f in (facet_names or {}) if f in set(d[facet])] or sorted(set(d[facet]))
    fig, axes = plt.subplots(1, len(facets), figsize=(4 * len(facets), 3.2), squeeze=False)
    for ax, f in zip(axes[0], facets):
        sub = d[d[facet] == f]
        for name, s in sub.groupby(series):
            s = s.sort_values(x)
            ax.plot(s[x], s[y], marker="o", label=str(name))
        if logx:
            ax.set_xscale("log", base=2)
        ax.set_title(f"{(facet_names or {}).get(f, f)}", fontsize=9)
        ax.set_xlabel(x)
    axes[0][0].set_ylabel(ylabel)
    axes[0][-1].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _png(fig)


def claim_fig6_7(frame: pd.DataFrame) -> Claim:
    c = Claim("fig6_7", "Figures 6/7: throughput and context switches vs concurrency",
              "more handoffs per request mean more context switches and lower throughput: "
              "reactor-split < reactor-worker < thread-per-conn, event-loop (throughput, small responses)")
    d = tagged(frame, "fig6_7")
    d = d[d["arch"].isin(FOUR)] if not d.empty else d
    if d.empty:
        return c
    c.headers = ["size", "concurrency", *[f"{a} req/s" for a in FOUR], *[f"{a} cs/req" for a in FOUR]]
    cs_ok = tp_ok = total = 0
    for (path, conc), s in d.groupby(["path", "concurrency"]):
        tp = s.set_index("arch")["lg_throughput"]
        cs = s.set_index("arch")["cs_per_request"]
        c.rows.append([SIZE_NAMES.get(path, path), int(conc), *[num(tp.get(a), 0) for a in FOUR],
                       *[num(cs.get(a), 2) for a in FOUR]])
        if not all(a in tp for a in FOUR):
            continue
        total += 1
        cs_ok += cs["reactor-split"] > cs["reactor-worker"] > max(cs["thread-per-conn"], cs["event-loop"]) * 0.999
        tp_ok += tp["reactor-split"] < tp["reactor-worker"] < min(tp["thread-per-conn"], tp["event-loop"])
    c.ours = (f"context-switch ordering split > worker > (tpc, event-loop) in {cs_ok}/{total} slices; "
              f"throughput ordering split < worker < (tpc, event-loop) in {tp_ok}/{total}")
    if total == 0:
        c.verdict, c.why = NOT_MEASURED, "no slice has all four servers"
    elif cs_ok == total and tp_ok == total:
        c.verdict, c.why = REPRODUCED, "both orderings hold at every size and concurrency"
    elif cs_ok + tp_ok >= total:
        c.verdict = DIRECTION
        c.why = ("orderings hold in most slices; with 2 cores, large responses are bandwidth/copy bound "
                 "and the designs converge")
    else:
        c.verdict, c.why = NOT_REPRODUCED, "orderings hold in fewer than half of the slices"
    d2 = d.assign(cs_per_s=d["cs_per_s_load"])
    figs = [_lines(d, "concurrency", "lg_throughput", "arch", "path", "Figure 6: throughput vs concurrency",
                   "requests/s", facet_names=SIZE_NAMES),
            _lines(d2, "concurrency", "cs_per_s", "arch", "path",
                   "Figure 7: context switches per second (during load) vs concurrency", "context switches/s",
                   facet_names=SIZE_NAMES)]
    c.figure = figs
    return c


def claim_table4(frame: pd.DataFrame) -> Claim:
    c = Claim("table4", "Table 4: futex share",
              "event-loop < thread-per-conn < reactor-worker < reactor-split")
    d = tagged(frame, "table4")
    d = d[d["arch"].isin(FOUR)] if not d.empty else d
    if d.empty:
        return c
    share = d.groupby("arch")["futex_share"].mean()
    order = ["event-loop", "thread-per-conn", "reactor-worker", "reactor-split"]
    c.headers = ["arch", "futex calls / traced syscalls", "futex wait time / syscall time"]
    wait = d.groupby("arch")["futex_wait_share"].mean()
    c.rows = [[a, f"{share[a]:.3%}" if a in share else "n/a", f"{wait[a]:.3%}" if a in wait else "n/a"]
              for a in order]
    c.ours = ", ".join(f"{a} {share[a]:.3%}" for a in order if a in share)
    if not all(a in share for a in order):
        c.verdict, c.why = DIRECTION if len(share) > 1 else NOT_MEASURED, "not all four servers measured"
        return c
    vals = [share[a] for a in order]
    if all(x < y for x, y in zip(vals, vals[1:])):
        c.verdict, c.why = REPRODUCED, "strict ordering, averaged over sizes and concurrencies"
        if vals[1] < 0.001:
            c.why += ("; event-loop and thread-per-conn are both near zero (thread-per-conn's few futex calls "
                      "come from thread start-up, not from requests)")
    elif max(vals[:2]) < min(vals[2:]):
        c.verdict = DIRECTION
        c.why = ("both reactors far above the designs without handoffs; event-loop and thread-per-conn tie "
                 "(neither waits on futexes per request)") if abs(vals[0] - vals[1]) < 0.005 else \
            "reactors above the others; the order inside a pair differs"
    else:
        c.verdict, c.why = NOT_REPRODUCED, "a design without handoffs shows as much futex activity as a reactor"
    return c


def claim_fig11_12(frame: pd.DataFrame) -> Claim:
    c = Claim("fig11_12", "Figures 11/12: latency and small receive windows make write-spin worse",
              "write calls per 100 KB response grow as the network delay grows and as the client "
              "receive window shrinks (spinning event loop, small send buffer)")
    d = tagged(frame, "fig11_12")
    failed = failed_for(frame, "fig11_12")
    delay_note = ""
    if len(failed) and failed["error"].fillna("").str.contains("delay unsupported").any():
        delay_note = "delay part not measured: this kernel has no sch_netem (cells recorded as failed)"
    if d.empty:
        c.why = delay_note
        return c
    nodelay = d[d["delay_ms"].astype(float) == 0].copy()
    nodelay["rcvbuf_n"] = pd.to_numeric(nodelay["rcvbuf"].replace("", math.nan))
    nodelay = nodelay.dropna(subset=["rcvbuf_n"]).sort_values("rcvbuf_n")
    c.headers = ["client rcvbuf", "delay ms", "RTT ms (measured)", "writes/resp", "EAGAIN/resp", "req/s"]
    for _, r in d.sort_values(["delay_ms", "rcvbuf"], key=lambda s: pd.to_numeric(s.replace("", 0))).iterrows():
        c.rows.append([r["rcvbuf"] or "default", num(float(r["delay_ms"]), 0), num(r["rtt_ms"], 3),
                       num(r["writes_per_request"], 1), num(r["eagain_per_request"], 1), num(r["lg_throughput"], 0)])
    delayed = d[d["delay_ms"].astype(float) > 0]
    w = list(nodelay["writes_per_request"])
    c.ours = ", ".join(f"rcvbuf {int(b)}: {num(x, 1)} writes/resp" for b, x in zip(nodelay["rcvbuf_n"], w))
    if len(w) >= 2 and w[0] > 1.2 * w[-1] and all(x >= y * 0.9 for x, y in zip(w, w[1:])):
        c.verdict = DIRECTION
        c.why = "receive-window part: smaller windows, more writes per response"
        if len(delayed) == 0:
            c.why += "; " + (delay_note or "delay part not measured")
    elif len(w) >= 2:
        c.verdict, c.why = NOT_REPRODUCED, "writes per response do not fall as the receive window grows"
    else:
        c.why = delay_note or "need at least two receive windows"
    if len(nodelay) >= 2:
        plt = _fig()
        fig, ax = plt.subplots(figsize=(5, 3.2))
        ax.plot(nodelay["rcvbuf_n"], nodelay["writes_per_request"], marker="o")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("client SO_RCVBUF (bytes)")
        ax.set_ylabel("write calls per 100 KB response")
        ax.set_title("Figure 12: write-spin vs client receive window (veth)", fontsize=10)
        c.figure = _png(fig)
    return c


def claim_fig14_16(frame: pd.DataFrame) -> Claim:
    c = Claim("fig14_16", "Figures 14/16: netty vs the spinning loop; hybrid across heavy-request ratios",
              "netty beats the spinning loop at 100 KB and loses at 0.1 KB; hybrid best at every heavy ratio 0-100%")
    d = tagged(frame, "fig14_16")
    if d.empty:
        return c
    d = d.assign(variant=d.apply(variant, axis=1))
    checks = []  # (what, holds)
    single = d[d["mix"] == ""]
    tp = single.pivot_table(index="variant", columns="path", values="lg_throughput", aggfunc="mean")
    lines = []
    c.headers = ["workload", "hybrid req/s", "netty req/s", "event-loop (spin) req/s", "best"]
    for path in ("/bytes/100", "/bytes/102400"):
        if path in tp.columns and {"netty", "event-loop (spin)"} <= set(tp.index):
            n, s_ = tp.loc["netty", path], tp.loc["event-loop (spin)", path]
            big = path == "/bytes/102400"
            checks.append((f"netty {'beats' if big else 'loses to'} the spinning loop at {SIZE_NAMES[path]}",
                           bool(n > s_ if big else n < s_)))
            lines.append(f"{SIZE_NAMES[path]}: netty {num(n, 0)} vs spin {num(s_, 0)} req/s")
            c.rows.append([SIZE_NAMES[path] + " (Table 6 cells)", "n/a", num(n, 0), num(s_, 0),
                           "netty" if n > s_ else "event-loop (spin)"])
    mixed = d[d["mix"] != ""].copy()
    hybrid_best = []
    if not mixed.empty:
        mixed["heavy"] = mixed["mix"].map(heavy_share)
        mp = mixed.pivot_table(index="heavy", columns="variant", values="lg_throughput", aggfunc="mean")
        for heavy, r in mp.iterrows():
            best = r.idxmax()
            c.rows.append([f"{heavy:.0%} heavy (100 KB)", num(r.get("hybrid"), 0), num(r.get("netty"), 0),
                           num(r.get("event-loop (spin)"), 0), best])
            if "hybrid" in r:
                hybrid_best.append((f"hybrid within 5% of the best at {heavy:.0%} heavy",
                                    bool(r["hybrid"] >= 0.95 * r.max())))
        lines.append(f"hybrid within 5% of the best at {sum(v for _, v in hybrid_best)}/{len(hybrid_best)} "
                     "heavy ratios")
        plt = _fig()
        fig, ax = plt.subplots(figsize=(5, 3.2))
        for v in mp.columns:
            ax.plot([h * 100 for h in mp.index], mp[v], marker="o", label=v)
        ax.set_xlabel("heavy (100 KB) requests, %")
        ax.set_ylabel("requests/s")
        ax.set_yscale("log")
        ax.legend(fontsize=7)
        ax.set_title("Figure 16: throughput vs heavy-request ratio (veth, 16 KB SO_SNDBUF)", fontsize=9)
        c.figure = _png(fig)
    checks += hybrid_best
    c.ours = "; ".join(lines)
    _verdict_from_checks(c, checks)
    return c


def _verdict_from_checks(c: Claim, checks: list, prefix: str = "") -> None:
    """All hold: reproduced; at least half: direction reproduced; fewer: not reproduced. The why names
    the comparisons that fail."""
    if not checks:
        return
    held = sum(v for _, v in checks)
    failing = [name for name, v in checks if not v]
    if held == len(checks):
        c.verdict = REPRODUCED
    elif held >= len(checks) / 2:
        c.verdict = DIRECTION
    else:
        c.verdict = NOT_REPRODUCED
    c.why = prefix + (f"{held}/{len(checks)} comparisons hold" +
                      (f"; fails: {'; '.join(failing)}" if failing else ""))


def claim_events_fast(frame: pd.DataFrame) -> Claim:
    c = Claim("events_fast", '"Are events fast?": mean latency vs concurrency',
              "process-per-conn slowest; thread-per-conn close to the event loop; green threads fastest "
              "among the threaded designs; the accept queue (--backlog) limits what a server sees")
    d = tagged(frame, "events_fast")
    if d.empty:
        return c
    d = d[d["backlog"] == ""] if "backlog" in d else d
    c.headers = ["concurrency", *sorted(set(d["arch"]))]
    checks = []
    threaded = ["thread-per-conn", "process-per-conn", "thread-pool"]
    for conc, s in d.groupby("concurrency"):
        lat = s.groupby("arch")["lat_mean_ms"].mean()
        c.rows.append([int(conc), *[num(lat.get(a), 3) for a in c.headers[1:]]])
        if "process-per-conn" in lat:
            checks.append((f"process-per-conn slowest at c={conc}", bool(lat["process-per-conn"] >= 0.95 * lat.max())))
        if {"thread-per-conn", "event-loop"} <= set(lat.index):
            checks.append((f"thread-per-conn within 25% of event-loop at c={conc}",
                           bool(lat["thread-per-conn"] <= 1.25 * lat["event-loop"])))
        if "green-threads" in lat:
            others = [lat[a] for a in threaded if a in lat]
            if others:
                checks.append((f"green-threads fastest threaded design at c={conc}",
                               bool(lat["green-threads"] <= min(others))))
    c.ours = "mean latency ms: " + "; ".join(
        f"c={r[0]}: " + ", ".join(f"{a} {v}" for a, v in zip(c.headers[1:], r[1:])) for r in c.rows)
    backlog = tagged(frame, "events_fast")
    backlog = backlog[backlog["backlog"] != ""] if "backlog" in backlog else backlog.iloc[0:0]
    if not backlog.empty:
        c.ours += "; backlog cells: " + ", ".join(
            f"backlog {int(float(r['backlog']))} (c={int(r['concurrency'])}, {r['arch']}): "
            f"{num(r['lg_throughput'], 0)} req/s, {num(r['lg_errors'], 0)} errors, p99 {num(r['lat_p99_ms'])} ms"
            for _, r in backlog.iterrows())
    else:
        c.why = "accept-queue (--backlog) part not measured in this run; "
    _verdict_from_checks(c, checks, prefix=c.why)
    if checks:
        c.figure = _lines(d.assign(one="mean latency"), "concurrency", "lat_mean_ms", "arch", "one",
                          '"Are events fast?": mean latency vs concurrency', "mean latency (ms)")
    return c


def claim_compare_arch(frame: pd.DataFrame) -> Claim:
    c = Claim("compare_arch", '"Comparing the performance of web server architectures"',
              "n-copy (one event loop per CPU) beats a single event loop on a multi-core host; blocking writes "
              "need fewer calls than non-blocking ones; poll/select cost grows with the interest set, epoll's does not")
    d = tagged(frame, "compare_arch")
    if d.empty:
        return c
    checks, lines = [], []
    c.headers = ["cells", "metric", "values"]
    nc = d[d["poller"] == ""]
    tp = nc.groupby("arch")["lg_throughput"].mean()
    if {"n-copy", "event-loop"} <= set(tp.index):
        checks.append(("n-copy beats event-loop", bool(tp["n-copy"] > tp["event-loop"])))
        lines.append(f"n-copy {num(tp['n-copy'], 0)} vs event-loop {num(tp['event-loop'], 0)} req/s")
        c.rows.append(["event-loop vs n-copy", "req/s", lines[-1]])
    t6 = tagged(frame, "table6")
    if not t6.empty:
        big = t6[t6["path"] == "/bytes/102400"].assign(variant=lambda x: x.apply(variant, axis=1))
        w = big.groupby("variant")["writes_per_request"].mean()
        if {"thread-per-conn", "event-loop (epollout)"} <= set(w.index):
            checks.append(("blocking writes need fewer calls",
                           bool(w["thread-per-conn"] < w["event-loop (epollout)"])))
            lines.append(f"100 KB writes/resp: blocking {num(w['thread-per-conn'], 1)}, "
                         f"non-blocking epollout {num(w['event-loop (epollout)'], 1)}")
            c.rows.append(["blocking vs non-blocking (Table 6 cells)", "writes per 100 KB response", lines[-1]])
    pol = d[d["poller"] != ""]
    if "think_ms" in pol and (pd.to_numeric(pol["think_ms"], errors="coerce").fillna(0) > 0).any():
        pol = pol[pd.to_numeric(pol["think_ms"], errors="coerce").fillna(0) > 0]  # idle interest set
    if not pol.empty and pol["concurrency"].nunique() >= 2:
        lo, hi = pol["concurrency"].min(), pol["concurrency"].max()
        cpu = pol.pivot_table(index="poller", columns="concurrency", values="cpu_ms_per_request", aggfunc="mean")
        growth = (cpu[hi] / cpu[lo]).to_dict()
        for p_, g in growth.items():
            c.rows.append([f"event-loop --poller {p_}", f"CPU ms/request c={lo} -> c={hi}",
                           f"{num(cpu.loc[p_, lo], 4)} -> {num(cpu.loc[p_, hi], 4)} (x{num(g)})"])
        if "epoll" in growth:
            for p_ in ("poll", "select"):
                if p_ in growth:
                    checks.append((f"{p_} cost grows more than epoll's", bool(growth[p_] > growth["epoll"])))
        lines.append("CPU/request growth " + ", ".join(f"{k} x{num(v)}" for k, v in growth.items()))
        plt = _fig()
        fig, ax = plt.subplots(figsize=(5, 3.2))
        for p_ in cpu.index:
            ax.plot(cpu.columns, cpu.loc[p_] * 1000, marker="o", label=p_)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("connections (interest set)")
        ax.set_ylabel("CPU µs per request")
        ax.legend()
        ax.set_title("poller cost vs interest set (event-loop)", fontsize=10)
        c.figure = _png(fig)
    c.ours = "; ".join(lines)
    note = ""
    ncopy = nc[nc["arch"] == "n-copy"]
    if len(ncopy) and not (ncopy["cap_requests"].fillna(0) > 0).any():
        note = ("n-copy's processes are forked before the collector attaches and --children follows only later "
                "forks, so its capture is empty; throughput comes from loadgen. ")
    _verdict_from_checks(c, checks, prefix=note)
    return c


def claim_process_graph(frame: pd.DataFrame) -> Claim:
    c = Claim("process_graph", "process-graph thesis: light requests next to heavy ones, steady load plus a burst",
              "light (/null) requests keep a lower latency on process-graph than on a thread pool")
    d = tagged(frame, "process_graph")
    if d.empty:
        return c
    c.headers = ["arch", "/null p50 ms", "/null p99 ms", "/compute p99 ms", "req/s", "errors"]
    lat = {}
    for _, r in d.iterrows():
        heavy = next((k for k in json.loads(r["classes_json"] or "{}") if k.startswith("/compute")), None)
        lat[r["arch"]] = class_latency(r, "/null", "p99")
        c.rows.append([r["arch"], num(class_latency(r, "/null", "p50"), 3), num(lat[r["arch"]], 3),
                       num(class_latency(r, heavy, "p99"), 3) if heavy else "n/a",
                       num(r["lg_throughput"], 0), num(r["lg_errors"], 0)])
    pg, tp = lat.get("process-graph"), lat.get("thread-pool")
    if pg is None or tp is None:
        c.why = "need both process-graph and thread-pool"
        return c
    c.ours = f"/null p99: process-graph {num(pg, 3)} ms, thread-pool {num(tp, 3)} ms"
    if pg < tp:
        c.verdict = REPRODUCED if pg < 0.8 * tp else DIRECTION
        c.why = "" if pg < 0.8 * tp else "lower, but by less than 20%"
    else:
        c.verdict = NOT_REPRODUCED
        c.why = ("the thread pool serves each connection on its own thread, so a light request never waits "
                 "behind a heavy one of another connection; process-graph's 2 executors queue them")
    return c


CLAIMS = (claim_table3, claim_table6, claim_fig6_7, claim_table4, claim_fig11_12, claim_fig14_16,
          claim_events_fast, claim_compare_arch, claim_process_graph)


def evaluate(frame: pd.DataFrame) -> list:
    claims = []
    for fn in CLAIMS:
        try:
            claims.append(fn(frame))
        except Exception as exc:  # noqa: BLE001 - one broken claim must not hide the others
            name = fn.__name__.removeprefix("claim_")
            claims.append(Claim(name, name, "", verdict=NOT_MEASURED, why=f"could not evaluate: {exc}"))
    return claims


# ------------------------------------------------------------------------------------------- rendering

def to_json(outdir: Path, frame: pd.DataFrame, claims: list, meta: dict) -> dict:
    failed = frame[frame["status"] != "ok"] if len(frame) else frame
    return {"dir": str(outdir), "sweep": meta, "cells": int(len(frame)),
            "ok": int((frame["status"] == "ok").sum()) if len(frame) else 0,
            "failed": [{"cell_id": r["cell_id"], "group": r.get("group"), "error": r.get("error")}
                       for _, r in failed.iterrows()],
            "claims": [cl.to_dict() for cl in claims]}


def render_terminal(frame: pd.DataFrame, claims: list, meta: dict) -> None:
    from rich.table import Table
    console = terminal()
    ok = int((frame["status"] == "ok").sum()) if len(frame) else 0
    console.print(f"[bold]sweep {meta.get('matrix', '?')}[/bold]: {len(frame)} cells, {ok} ok, "
                  f"{len(frame) - ok} failed")
    table = Table(show_lines=False)
    for col in ("claim", "paper", "ours", "verdict"):
        table.add_column(col, overflow="fold")
    for cl in claims:
        table.add_row(cl.title, cl.paper, cl.ours or "-",
                      f"[{VERDICT_STYLE[cl.verdict]}]{cl.verdict}[/]" + (f"\n{cl.why}" if cl.why else ""))
    console.print(table)


def render_html(outdir: Path, frame: pd.DataFrame, claims: list, meta: dict) -> str:
    ok = int((frame["status"] == "ok").sum()) if len(frame) else 0
    body = [htmlpage.paragraph(
        f"Sweep {meta.get('matrix', '?')} in {outdir}: {len(frame)} cells, {ok} ok, {len(frame) - ok} failed. "
        f"Host: kernel {meta.get('host', {}).get('kernel', '?')}, {meta.get('host', {}).get('ncpus', '?')} CPUs; "
        f"netem (delay) {'available' if meta.get('netem') else 'not available'}.")]
    body.append(htmlpage.heading("Claims"))
    body.append(htmlpage.table(["claim", "paper", "ours", "verdict", "why"],
                               [[cl.title, cl.paper, cl.ours or "-", cl.verdict, cl.why] for cl in claims]))
    for cl in claims:
        body.append(htmlpage.heading(cl.title))
        body.append(htmlpage.verdict(VERDICT_CSS[cl.verdict], f"{cl.verdict}",
                                     [f"paper: {cl.paper}", f"ours: {cl.ours or '-'}"] + ([cl.why] if cl.why else [])))
        if cl.rows:
            body.append(htmlpage.table(cl.headers, cl.rows))
        for png in (cl.figure if isinstance(cl.figure, list) else [cl.figure]):
            body.append(htmlpage.figure(png, cl.title))
    if len(frame) and (frame["status"] != "ok").any():
        body.append(htmlpage.heading("Failed cells"))
        failed = frame[frame["status"] != "ok"]
        body.append(htmlpage.table(["cell", "group", "error"],
                                   [[r["cell_id"], r.get("group"), r.get("error")] for _, r in failed.iterrows()]))
    if len(frame):
        body.append(htmlpage.heading("All cells"))
        cols = [c for c in ("cell_id", "group", "status", "arch", "write_policy", "path", "mix", "concurrency",
                            "net", "rcvbuf", "rtt_ms", "lg_throughput", "lat_mean_ms", "lat_p99_ms",
                            "writes_per_request", "handoffs_per_request", "cs_per_request", "labels") if c in frame]
        body.append(htmlpage.table(cols, [[_cell(r[c]) for c in cols] for _, r in frame.iterrows()]))
    return htmlpage.page("spinscope sweep report", body)


def _cell(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return num(v, 3)
    return v


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep-report", help="compare a sweep's results with the published claims",
                       description="Read a sweep directory's results table and put each published claim next "
                       "to what was measured, with a verdict: reproduced, direction reproduced, not "
                       "reproduced, or not measured in this run.")
    p.add_argument("dir", metavar="DIR", type=Path, help="directory written by `spinscope sweep`")
    p.add_argument("--html", metavar="OUT", help="write a self-contained HTML report (figures embedded)")
    p.add_argument("--json", action="store_true", help="print the claims and verdicts as JSON instead")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    frame = read_table(args.dir)
    try:
        meta = json.loads((Path(args.dir) / "sweep.json").read_text())
    except (OSError, json.JSONDecodeError):
        meta = {}
    claims = evaluate(frame)
    if args.json:
        print_json(jsonable(to_json(args.dir, frame, claims, meta)))
    else:
        render_terminal(frame, claims, meta)
    if args.html:
        write_text(args.html, render_html(args.dir, frame, claims, meta))
        print(f"wrote {args.html}", file=sys.stderr if args.json else sys.stdout)
    return 0
