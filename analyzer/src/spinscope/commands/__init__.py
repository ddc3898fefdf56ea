"""The verbs of the `spinscope` command line, kept thin: argument parsing, then calls into the packages
below. The verb table is the program's (spinscope/cli.py, above every package: it imports only the verb
asked for, by name, so the live verbs `top` and `exporter` and the lab's `sweep` and `sweep-report` are
run from their own packages); record.py runs the collector on a target; report.py and diff.py read captures and hand them to the
output; doctor.py checks the host. May import: base, tracing, analysis, output, live.
"""
