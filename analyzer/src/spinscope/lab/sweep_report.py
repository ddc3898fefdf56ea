"""`spinscope sweep-report DIR`: the published claims next to what a sweep measured, with a verdict each.

Reads DIR/results.parquet (or results.csv) written by `spinscope sweep` and judges every claim of
lab/claims.py on it (criteria in lab/criteria.py). Outputs: a terminal table (rich), `--json`, and `--html OUT` (the claims table, one
section per claim with its table and figure, the failed cells with their reasons, all cells).

Exit codes: 0 every claim judged; 3 the report was written but a claim's criterion or figure raised (a
bug: shown as "error" with its message); 1 the results table cannot be read.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import pandas as pd

from spinscope import htmlpage
from spinscope.fmt import fixed
from spinscope.lab.claims import judge_all
from spinscope.lab.criteria import DIRECTION, ERROR, NOT_MEASURED, NOT_REPRODUCED, REPRODUCED
from spinscope.lab.results import read_table
from spinscope.output import jsonable, plain, print_json, terminal, write_text

EXIT_OK, EXIT_CLAIM_ERRORS = 0, 3
VERDICT_CSS = {REPRODUCED: "ok", DIRECTION: "warning", NOT_REPRODUCED: "critical", NOT_MEASURED: "info",
               ERROR: "critical"}
VERDICT_STYLE = {REPRODUCED: "bold green", DIRECTION: "bold yellow", NOT_REPRODUCED: "bold red",
                 NOT_MEASURED: "dim", ERROR: "bold white on red"}
ALL_CELLS_COLUMNS = ("cell_id", "group", "status", "arch", "write_policy", "path", "mix", "concurrency", "net",
                     "rcvbuf", "rtt_ms", "lg_throughput", "lat_mean_ms", "lat_p99_ms", "writes_per_request",
                     "handoffs_per_request", "cs_per_request", "labels")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep-report")  # its help and description: cli.VERBS
    p.add_argument("dir", metavar="DIR", type=Path, help="directory written by `spinscope sweep`")
    p.add_argument("--html", metavar="OUT", help="write a self-contained HTML report (figures embedded)")
    p.add_argument("--json", action="store_true", help="print the claims and verdicts as JSON instead")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    table = read_table(args.dir)
    try:
        meta = json.loads((Path(args.dir) / "sweep.json").read_text())
    except (OSError, json.JSONDecodeError):
        meta = {}
    judged = judge_all(table)
    errors = [f"{claim.id}: {finding.why}" for claim, finding in judged if finding.verdict == ERROR]
    if args.json:
        print_json(jsonable(to_json(args.dir, table, judged, meta)))
    else:
        render_terminal(table, judged, meta)
    if args.html:
        page, figure_errors = render_html(args.dir, table, judged, meta)
        write_text(args.html, page)
        errors += figure_errors
        print(f"wrote {args.html}", file=sys.stderr if args.json else sys.stdout)
    for error in errors:
        print(f"spinscope sweep-report: error judging {error}", file=sys.stderr)
    return EXIT_CLAIM_ERRORS if errors else EXIT_OK


def _counts(table: pd.DataFrame) -> tuple:
    """(cells, ok cells)."""
    return len(table), int((table["status"] == "ok").sum()) if len(table) else 0


def to_json(outdir: Path, table: pd.DataFrame, judged: list, meta: dict) -> dict:
    failed = table[table["status"] != "ok"] if len(table) else table
    cells, ok = _counts(table)
    return {"dir": str(outdir), "sweep": meta, "cells": cells, "ok": ok,
            "failed": [{"cell_id": r["cell_id"], "group": r.get("group"), "error": r.get("error")}
                       for _, r in failed.iterrows()],
            "claims": [{"id": claim.id, "title": claim.title, "publication": claim.publication,
                        "source": claim.source, "paper": claim.paper, "value": claim.value,
                        "tolerance": claim.tolerance, "rule": claim.rule, "measured": claim.measured,
                        "ours": finding.ours, "verdict": finding.verdict, "why": finding.why,
                        "headers": finding.headers, "rows": finding.rows} for claim, finding in judged]}


def render_terminal(table: pd.DataFrame, judged: list, meta: dict) -> None:
    from rich.table import Table
    from rich.text import Text

    console = terminal()
    cells, ok = _counts(table)
    console.print(Text.assemble(plain(f"sweep {meta.get('matrix', '?')}", "bold"),
                                f": {cells} cells, {ok} ok, {cells - ok} failed"))
    out = Table(show_lines=False)
    for col in ("claim", "paper", "ours", "verdict"):
        out.add_column(col, overflow="fold")
    for claim, finding in judged:
        verdict = plain(finding.verdict, VERDICT_STYLE[finding.verdict])
        if finding.why:
            verdict.append("\n").append_text(plain(finding.why))
        out.add_row(plain(claim.title), plain(claim.paper), plain(finding.ours or "-"), verdict)
    console.print(out)


def render_html(outdir: Path, table: pd.DataFrame, judged: list, meta: dict) -> tuple:
    """(the page, errors of figures that could not be drawn: "claim: message")."""
    from spinscope.lab import claim_figures  # matplotlib: only when a page is drawn

    cells, ok = _counts(table)
    host = meta.get("host", {})
    body = [htmlpage.paragraph(
        f"Sweep {meta.get('matrix', '?')} in {outdir}: {cells} cells, {ok} ok, {cells - ok} failed. "
        f"Host: kernel {host.get('kernel', '?')}, {host.get('ncpus', '?')} CPUs; "
        + (f"delay: {meta['delay']} (TUN pair, docs/sweep.md)." if meta.get("delay") else
           f"netem (delay) {'available' if meta.get('netem') else 'not available'}."))]
    body.append(htmlpage.heading("Claims"))
    body.append(htmlpage.table(["claim", "paper", "ours", "verdict", "why"],
                               [[c.title, c.paper, f.ours or "-", f.verdict, f.why] for c, f in judged]))
    figure_errors = []
    for claim, finding in judged:
        body.append(htmlpage.heading(claim.title))
        body.append(htmlpage.verdict(VERDICT_CSS[finding.verdict], finding.verdict,
                                     [f"paper ({claim.publication}, {claim.source}): {claim.paper}",
                                      f"measured: {claim.measured}", f"criterion: {claim.rule}",
                                      f"tolerance: {claim.tolerance}", f"ours: {finding.ours or '-'}"]
                                     + ([finding.why] if finding.why else [])))
        if finding.rows:
            body.append(htmlpage.table(finding.headers, finding.rows))
        try:
            pngs = claim_figures.draw(claim.id, finding)
        except Exception as exc:  # noqa: BLE001 - shown on the page and in the exit status, not a crash
            figure_errors.append(f"{claim.id} (figure): {type(exc).__name__}: {exc}")
            body.append(htmlpage.verdict(VERDICT_CSS[ERROR], "figure error", [figure_errors[-1]]))
            pngs = []
        body += [htmlpage.figure(png, claim.title) for png in pngs]
    if cells - ok:
        body.append(htmlpage.heading("Failed cells"))
        failed = table[table["status"] != "ok"]
        body.append(htmlpage.table(["cell", "group", "error"],
                                   [[r["cell_id"], r.get("group"), r.get("error")] for _, r in failed.iterrows()]))
    if cells:
        body.append(htmlpage.heading("All cells"))
        cols = [c for c in ALL_CELLS_COLUMNS if c in table]
        body.append(htmlpage.table(cols, [[_cell(r[c]) for c in cols] for _, r in table.iterrows()]))
    return htmlpage.page("spinscope sweep report", body), figure_errors


def _cell(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return fixed(v, 3)
    return v
