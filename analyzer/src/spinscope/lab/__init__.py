"""The research lab: sweeps of the reference servers over matrices of settings, network conditions, and
the published claims judged against what a sweep measured.

The lab uses the profiler core (spinscope.analysis.capture, metrics, labels, ...) to analyze what it records; the
core never imports the lab (tests/analyzer/test_analyzer_layering.py checks it).
"""
