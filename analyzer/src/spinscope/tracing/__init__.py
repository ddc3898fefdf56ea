"""The C collector seen from Python: collector.py finds the binary, starts it and knows when its probes
are live, and reads its host checks; targets.py holds the options that name what `record`, `top` and
`exporter` trace, checked once before anything is attached; pidns.py turns a container's PID into this
namespace's. Light on purpose (standard library only): `spinscope record` loads it without the analysis.
May import: base.
"""
