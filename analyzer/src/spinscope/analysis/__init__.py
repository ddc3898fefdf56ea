"""The analysis core: a capture (JSON written by the collector) to what it says about the server, with no
output of its own. The steps run one way: capture.py loads and checks the document; counters.py reads
each quantity from the counters once; roles.py names what each thread does; metrics.py computes the
metrics; patterns/ holds a home per pattern (write-spin, spurious select, handoff overhead and the findings
that belong to them: each its measure, grade, words and fixes per runtime, call sites and user-space cost),
on the shared verdicts.py (Label, Finding, the tiers), savings.py, runtime.py and wording.py, their words
held to their counts by claims.py (the evidence rule); labels.py runs every pattern in the list's order and adds the capture's notes (with
coverage.py: what the request figures leave out). stacks.py reads a capture's stacks (`--stacks`) and
stack_costs.py joins them to a label. noise.py (is a change larger than run-to-run noise) and
comparison.py (two captures side by side, for `diff`) sit on top of metrics and labels. May import: base.
"""
