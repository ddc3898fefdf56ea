"""The live path: servers watched while they run. stream.py starts a collector with --stream and turns its
line a second into captures (selectors, processes found by name); top.py is `spinscope top`, a terminal
view of the threads every second; exporter.py is `spinscope exporter`, which follows targets as they come
and go, and exposition.py what it writes at each scrape (every metric family, the views of the targets).
The HTTP endpoint is the web package's, given the registry to serve. May import: base, tracing, analysis,
output, web.
"""
