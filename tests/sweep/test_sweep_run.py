"""Running sweeps for real (root): resumption, failed cells, Ctrl-C, and the report on the result."""
import json
import signal
import subprocess
import time

import pandas as pd
import pytest

from sweephelp import ROOT, sweep_processes, run_sweep, sweep_cmd, write_matrix

TINY = """
name = "tiny"
[defaults]
duration = 1.0
warmup = 0.2
interval = 0.5
[[group]]
name = "t3"
claims = ["table3"]
arch = ["reactor-worker", "event-loop"]
workers = 4
concurrency = 1
"""


def cell_files(out):
    return sorted((out / "cells").glob("*.json"))


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory):
    """A 2-cell sweep of ~1 s cells, run once for the module."""
    tmp = tmp_path_factory.mktemp("tiny")
    matrix = write_matrix(tmp, TINY)
    out = tmp / "out"
    proc = run_sweep(matrix, "-o", out, "-q")
    return matrix, out, proc


def test_tiny_sweep_rows(tiny_sweep):
    _, out, proc = tiny_sweep
    assert proc.returncode == 0, proc.stderr
    files = cell_files(out)
    assert len(files) == 2
    for table in (pd.read_parquet(out / "results.parquet"), pd.read_csv(out / "results.csv")):
        assert len(table) == 2 and set(table["status"]) == {"ok"}
        for col in ("cell_id", "arch", "concurrency", "lg_throughput", "lat_p99_ms", "lg_errors",
                    "handoffs_per_request", "writes_per_request", "cs_per_s", "labels", "rtt_ms"):
            assert col in table.columns
    table = pd.read_parquet(out / "results.parquet").set_index("arch")
    assert table.loc["event-loop", "handoffs_per_request"] < 0.2
    assert 1.5 < table.loc["reactor-worker", "handoffs_per_request"] < 2.5
    assert "handoff-overhead" in table.loc["reactor-worker", "labels"]
    for f in files:
        doc = json.loads(f.read_text())
        assert (out / doc["capture"]).exists()


def test_rerun_skips_and_reruns_only_missing(tiny_sweep):
    matrix, out, _ = tiny_sweep
    before = {f.name: json.loads(f.read_text())["started_at"] for f in cell_files(out)}
    proc = run_sweep(matrix, "-o", out)
    assert proc.returncode == 0
    assert "2 of 2 cells already" in proc.stderr
    assert {f.name: json.loads(f.read_text())["started_at"] for f in cell_files(out)} == before
    victim = cell_files(out)[0]
    victim.unlink()
    time.sleep(1.1)  # started_at has one-second resolution
    proc = run_sweep(matrix, "-o", out, "-q")
    assert proc.returncode == 0
    after = {f.name: json.loads(f.read_text())["started_at"] for f in cell_files(out)}
    assert set(after) == set(before)
    assert after[victim.name] != before[victim.name]
    assert all(after[n] == before[n] for n in before if n != victim.name)
    assert len(pd.read_parquet(out / "results.parquet")) == 2


def test_report_on_tiny_sweep(tiny_sweep, tmp_path):
    _, out, _ = tiny_sweep
    proc = subprocess.run(sweep_cmd("sweep-report", out, "--json", "--html", tmp_path / "r.html"),
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    claims = {c["id"]: c for c in doc["claims"]}
    assert set(claims) >= {"table3", "table6", "fig6_7", "table4", "fig11_12", "fig14_16", "events_fast",
                           "compare_arch", "process_graph", "fanout_tables", "fanout_fig13", "fanout_fig15",
                           "compare_arch_disk"}  # a superset: claims are added in parallel
    assert set(claims) >= {"crossover", "table6_default", "events_fast_ab", "process_graph_bounded", "server_cpus"}
    allowed = {"reproduced", "direction reproduced", "not reproduced", "not measured in this run"}
    assert all(c["verdict"] in allowed for c in claims.values())
    # two of the four Table 3 servers were run: measured, with their rows
    assert claims["table3"]["verdict"] != "not measured in this run"
    assert {r[0] for r in claims["table3"]["rows"]} == {"reactor-worker", "event-loop"}
    assert claims["table6"]["verdict"] == "not measured in this run"
    html = (tmp_path / "r.html").read_text()
    assert "data:image/png;base64," in html and "Table 3" in html and "not measured in this run" in html
    term = subprocess.run(sweep_cmd("sweep-report", out), capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert term.returncode == 0 and "Table 6" in term.stdout and "verdict" in term.stdout


def test_failed_cell_is_recorded_and_sweep_goes_on(tmp_path):
    matrix = write_matrix(tmp_path, """
[defaults]
duration = 1.0
warmup = 0
[[group]]
arch = ["no-such-arch", "event-loop"]
""")
    out = tmp_path / "out"
    proc = run_sweep(matrix, "-o", out, "-q")
    assert proc.returncode == 3, proc.stderr  # documented: finished, some cells failed
    table = pd.read_csv(out / "results.csv").set_index("arch")
    assert table.loc["no-such-arch", "status"] == "failed"
    assert "server did not start" in table.loc["no-such-arch", "error"]
    assert table.loc["event-loop", "status"] == "ok"
    assert not list((out / "captures").glob("no-such-arch*"))
    # failed cells are skipped on a re-run unless asked
    proc = run_sweep(matrix, "-o", out, "-q")
    assert proc.returncode == 3
    proc = run_sweep(matrix, "-o", out, "--retry-failed")
    assert proc.returncode == 3 and "1 cells run" in proc.stderr


def test_ctrl_c_leaves_consistent_dataset(tmp_path):
    matrix = write_matrix(tmp_path, """
[defaults]
duration = 1.5
warmup = 0.2
[[group]]
arch = ["event-loop", "thread-per-conn", "reactor-worker", "netty"]
""")
    out = tmp_path / "out"
    proc = subprocess.Popen(sweep_cmd("sweep", matrix, "-o", out, "-q"), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not cell_files(out):
        time.sleep(0.1)
    time.sleep(1.0)  # well inside the second cell
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    files = cell_files(out)
    assert 1 <= len(files) < 4
    for table in (pd.read_parquet(out / "results.parquet"), pd.read_csv(out / "results.csv")):
        assert sorted(table["cell_id"]) == sorted(f.stem for f in files)
    captures = {p.stem for p in (out / "captures").iterdir()}
    assert captures <= {f.stem for f in files}  # the interrupted cell's capture is gone
    assert json.loads((out / "sweep.json").read_text())["interrupted"] is True
    # Its children were killed and waited for; a grandchild the kernel is still tearing down may linger a
    # moment (a fixed sleep here was a guess at how long).
    deadline = time.monotonic() + 10
    while sweep_processes(out) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sweep_processes(out) == set()
    # resuming finishes the rest
    proc = run_sweep(matrix, "-o", out, "-q")
    assert proc.returncode == 0 and len(cell_files(out)) == 4
