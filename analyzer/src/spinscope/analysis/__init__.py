"""The analysis core: a capture (JSON written by the collector) to what it says about the server, with no
output of its own. The steps run one way: capture.py loads and checks the document; counters.py reads
each quantity from the counters once; roles.py names what each thread does; metrics.py computes the
metrics; measures.py what each pattern costs (threadlife.py: threads created per request and what their
creation, first run and exit cost); labels.py says it as labels, findings and notes (with
coverage.py: what the request figures leave out). noise.py (is a change larger than run-to-run noise)
and comparison.py (two captures side by side, for `diff`) sit on top of metrics and labels. The coming
stacks work (sampler output, unwinding, symbolization) adds its own step here. May import: base.
"""
