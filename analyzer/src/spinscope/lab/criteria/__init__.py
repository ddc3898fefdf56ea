"""Criteria: pure functions of a sweep's results table, one per published claim (lab/claims.py), each
returning a Finding: a verdict, the measured numbers, which comparisons held, a table, and the data a
figure would be drawn from (lab/claim_figures.py draws; nothing here plots).

Cells are picked for a claim by the tag their matrix group gave them (`claims = [...]`), only cells with
status ok count, and repetitions are averaged (tagged()). Every threshold a criterion applies is a named
constant next to it, and the claim records quote the same constants.

Verdicts:

    reproduced                 our numbers match the published ones (within the stated tolerance)
    direction reproduced       the effect goes the published way, but not to the published size/everywhere
    not reproduced             the effect is absent or reversed here (the failing comparisons are named)
    not measured in this run   no ok cell carries what the claim needs
    error                      the criterion raised (Claim.judge): a bug, not a finding

A criterion's verdict is the pooled one; the report's verdict also weighs the repetitions (lab/confidence.py:
"unstable", "too few repetitions", "needs the full matrix").

A verdict's words say what was measured, never a cause the sweep did not measure.

One module per seed paper's claims: event_flow ("The Impact of Event Processing Flow on Asynchronous
Server Efficiency"), events_fast ("Are events fast?"), comparing ("Comparing the Performance of Web Server
Architectures"), process_graph (the process-graph thesis), doubleface (DoubleFaceAD, the fanout tier);
common.py holds what they share (Finding, Check, the verdicts' words, selecting cells). A paper's module
imports only common.
"""
