"""A sweep's results: one cell's capture analyzed into a result document, result documents into one
tidy row per cell, and the output directory's tables.

Layout of a sweep directory DIR (docs/sweep.md): DIR/cells/CELLID.json (one result document per
finished cell, written atomically), DIR/captures/CELLID.json (the capture of each ok cell),
DIR/results.csv and DIR/results.parquet (rebuilt from every cell file), DIR/sweep.json (the run).
"""

from __future__ import annotations

import datetime
import json
import math
import os
from pathlib import Path

import pandas as pd

from spinscope.analysis.patterns import LABEL_NAMES
from spinscope.errors import SpinscopeError
from spinscope.lab.params import PARAMS


def analyze_capture(path: Path) -> dict:
    """The process-level metrics, labels and a few raw sums of one capture (what a table row needs)."""
    from spinscope.analysis.capture import load
    from spinscope.analysis.labels import assess
    from spinscope.analysis.metrics import analyze

    cap = load(path)
    analysis = analyze(cap)
    assessment = assess(analysis)
    t = cap.totals
    calls = t["read_calls"] + t["write_calls"] + t["poll_calls"] + t["futex_waits"] + t["futex_wakes"]
    traced_ns = t["futex_wait_ns"] + t["poll_ns"] + t["read_ns"] + t["write_ns"]
    return {
        "metrics": {k: (None if v is None or (isinstance(v, float) and not math.isfinite(v)) else float(v))
                    for k, v in analysis.process.items()},
        "labels": [{"name": lab.name, "severity": lab.severity, "cpu_share": lab.cpu_share,
                    "summary": lab.summary} for lab in assessment.labels],
        "notes": assessment.notes,
        "requests": int(cap.request_count),
        "handoffs": sum(edge["count"] for edge in cap.wakeups),
        "duration_s": cap.duration_s,
        "end_reason": cap.end_reason,
        "threads_seen": cap.threads_seen,
        "processes": len(cap.target_pids),
        "write_calls": int(cap.requests["write_calls"]),
        "futex_share": (float(t["futex_waits"] + t["futex_wakes"]) / calls) if calls else None,
        "futex_wait_share": (float(t["futex_wait_ns"]) / traced_ns) if traced_ns else None,
        "cs_voluntary": int(t["cs_voluntary"]),  # switched out blocking: the server's own
        "cs_involuntary": int(t["cs_involuntary"]),  # preempted: the machine's share of cs_per_request
        "by_size": cap.by_size,
    }


# ------------------------------------------------------------------------------- fanout tier (DoubleFace claims)
FANOUT_GET_MAX = 64  # a memcached `get` is 16-31 bytes: response-size classes below this are shard queries


def fanout_figures(path: Path) -> dict:
    """Per-HTTP-request and per-event-loop figures of a fanout-* server's capture (the DoubleFace claims).

    The collector counts a request on every socket where a read is followed by writes, so each shard
    connection's response-then-next-get counts too; the HTTP requests are the response-size classes from
    FANOUT_GET_MAX bytes up (docs/architectures.md, "Measuring it"). The front loop is the main thread
    (tid = pid: the HTTP loop of fanout-split and fanout-pool, the only loop of fanout-shared); the backend
    loops are the other threads that called epoll_wait (fanout-split's backend loops, fanout-pool's port
    thread)."""
    from spinscope.analysis.capture import load

    cap = load(path)
    t, th = cap.totals, cap.threads
    http = sum(row["count"] for row in cap.by_size if row["bytes_min"] >= FANOUT_GET_MAX)
    pid = cap.target_pid
    main = [thread for tid, thread in th.items() if tid == pid]
    others = [thread for tid, thread in th.items() if tid != pid and thread["poll_calls"] > 0]

    def total(rows, key):
        return sum(row[key] for row in rows)

    def ratio(a, b):
        return float(a) / float(b) if b else None
    return {
        "http_requests": http,
        "threads": int(len(th)),  # distinct threads seen during the capture (exited ones included)
        "threads_created": int(t.get("threads_created", 0)),
        "polls_per_http": ratio(t["poll_calls"], http),
        "poll_cpu_share": ratio(t["poll_oncpu_ns"], t["oncpu_ns"]),
        "cs_per_http": ratio(t["cs_voluntary"] + t["cs_involuntary"], http),
        "handoffs_per_http": ratio(sum(edge["count"] for edge in cap.wakeups), http),
        "futex_per_http": ratio(t["futex_waits"] + t["futex_wakes"], http),
        "front_events_per_poll": ratio(total(main, "poll_events"), total(main, "poll_calls")) if main else None,
        "backend_events_per_poll": (ratio(total(others, "poll_events"), total(others, "poll_calls"))
                                    if others else None),
        "backend_loops": int(len(others)),
    }


FANOUT_COLUMNS = ("http_requests", "threads", "threads_created", "polls_per_http", "poll_cpu_share", "cs_per_http",
                  "handoffs_per_http", "futex_per_http", "front_events_per_poll", "backend_events_per_poll",
                  "backend_loops")
# ------------------------------------------------------------------------------- end of the fanout tier


LATENCY_KEYS = (("mean", "lat_mean_ms"), ("p50", "lat_p50_ms"), ("p90", "lat_p90_ms"), ("p99", "lat_p99_ms"),
                ("p99.9", "lat_p999_ms"), ("max", "lat_max_ms"))


def row_of(result: dict) -> dict:
    """One tidy row per cell: parameters, load, capture metrics, labels."""
    from spinscope.analysis.metrics import METRICS

    p = result["params"]
    row = {"cell_id": result["id"], "group": result["group"], "claims": ";".join(result.get("claims", [])),
           "status": result["status"], "error": result.get("error")}
    row.update({k: p.get(k) for k in PARAMS})
    row["repetition"] = p.get("repetition", 0)
    server = result.get("server", {})
    row["sndbuf_effective"] = server.get("sndbuf_effective")
    row["rtt_ms"] = result.get("rtt_ms")
    lg = result.get("loadgen") or {}
    row["lg_requests"] = lg.get("requests")
    row["lg_throughput"] = lg.get("throughput")
    row["lg_errors"] = lg.get("errors")
    row["lg_bytes"] = lg.get("bytes")
    for key, col in LATENCY_KEYS:
        row[col] = (lg.get("latency_ms") or {}).get(key)
    row["classes_json"] = json.dumps(lg["classes"], sort_keys=True) if lg.get("classes") else None
    a = result.get("analysis") or {}
    metrics = a.get("metrics") or {}
    for m in METRICS:
        row[m.name] = metrics.get(m.name)
    row["cap_requests"] = a.get("requests")
    row["cap_handoffs"] = a.get("handoffs")
    row["cap_write_calls"] = a.get("write_calls")
    row["cap_duration_s"] = a.get("duration_s")
    row["threads_seen"] = a.get("threads_seen")
    row["futex_share"] = a.get("futex_share")
    row["futex_wait_share"] = a.get("futex_wait_share")
    cs = metrics.get("cs_per_request")
    row["cs_per_s_load"] = cs * lg["throughput"] if cs is not None and lg.get("throughput") else None
    switches = (a.get("cs_voluntary") or 0) + (a.get("cs_involuntary") or 0)
    row["cs_voluntary_per_request"] = cs * a["cs_voluntary"] / switches if cs is not None and switches else None
    labels = a.get("labels") or []
    row["labels"] = ";".join(f"{lab['name']}:{lab['severity']}" for lab in labels)
    for name in LABEL_NAMES:
        row["label_" + name.replace("-", "_")] = next((lab["severity"] for lab in labels if lab["name"] == name), None)
    row["by_size_json"] = json.dumps(a["by_size"]) if a.get("by_size") else None
    disk = result.get("disk") or {}  # disk-bound cells: dk_* (runner: cgroup, /proc/PID/io)
    requests = lg.get("requests") or 0
    row["dk_read_mb"] = disk["read_bytes"] / 2**20 if "read_bytes" in disk else None
    row["dk_read_kb_per_request"] = disk["read_bytes"] / 1024 / requests if "read_bytes" in disk and requests else None
    row["dk_cache_mb"] = disk["file"] / 2**20 if "file" in disk else None
    row["dk_max_events"] = disk.get("max_events")
    fanout = a.get("fanout") or {}  # fanout tier: fo_* (fanout_figures), empty for other servers
    for key in FANOUT_COLUMNS:
        row["fo_" + key] = fanout.get(key)
    row["elapsed_s"] = result.get("elapsed_s")
    row["started_at"] = result.get("started_at")
    return row


def load_results(outdir: Path) -> list:
    """Every result document in DIR/cells, in cell-id order."""
    results = []
    for path in sorted((outdir / "cells").glob("*.json")):
        try:
            results.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue  # not ours or unreadable: never written half (atomic rename)
    return results


def results_frame(outdir: Path) -> pd.DataFrame:
    """The results table: one row per cell file."""
    rows = [row_of(r) for r in load_results(outdir)]
    return pd.DataFrame.from_records(rows) if rows else pd.DataFrame(columns=["cell_id", "status"])


def write_tables(outdir: Path) -> pd.DataFrame:
    """Rebuild DIR/results.csv and DIR/results.parquet from every cell file (atomically)."""
    frame = results_frame(outdir)
    csv_tmp = outdir / ".results.csv.tmp"
    frame.to_csv(csv_tmp, index=False)
    os.replace(csv_tmp, outdir / "results.csv")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return frame  # CSV only; sweep-report reads either
    pq_tmp = outdir / ".results.parquet.tmp"
    frame.to_parquet(pq_tmp, index=False)
    os.replace(pq_tmp, outdir / "results.parquet")
    return frame


def write_json(path: Path, doc: dict) -> None:
    """Write `doc` atomically (a temporary file renamed over `path`): readers never see half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str, allow_nan=False) + "\n")
    os.replace(tmp, path)


def timestamp() -> str:
    """Now, UTC, to the second: the `started_at` / `finished_at` of result documents."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_table(outdir: Path) -> pd.DataFrame:
    """DIR/results.parquet, or DIR/results.csv where there is no Parquet file (what sweep-report reads)."""
    outdir = Path(outdir)
    parquet, csv = outdir / "results.parquet", outdir / "results.csv"
    try:
        if parquet.exists():
            return pd.read_parquet(parquet)
        if csv.exists():
            return pd.read_csv(csv)
    except Exception as exc:  # noqa: BLE001 - any reader failure is one line for the user
        raise SpinscopeError(f"{outdir}: cannot read the results table: {exc}") from None
    raise SpinscopeError(f"{outdir}: no results.parquet or results.csv (run `spinscope sweep` first)")
