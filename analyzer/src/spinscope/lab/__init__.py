"""The research lab: sweeps of the reference servers over matrices of settings and network conditions, and
the published claims judged against what a sweep measured. params.py names a cell's parameters; matrix.py
expands a matrix file into cells; runner.py, refserver.py, netcond.py, shards.py and diskset.py run one;
results.py makes the results table; criteria/ holds each seed paper's criteria (a module per paper);
confidence.py turns a criterion's checks into a verdict over repetitions; claims.py lists the claims;
sweep.py and sweep_report.py are the two verbs. The lab uses the profiler core to analyze what it
records; nothing outside the lab imports it. May import: base, tracing, analysis, output.
"""
