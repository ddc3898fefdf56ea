"""Output: what the analysis found, shown to people and machines. console.py is the terminal, JSON-safe
values and files written; render.py a capture's headline and a label's verdict, shared by report and
diff; report.py and diff.py the two verbs' pages (terminal, HTML and JSON); htmlpage.py the
self-contained HTML page; figures.py the PNG figures (matplotlib, loaded only when a page is drawn);
flamegraph.py the page's flame graphs (d3-flame-graph, vendored in vendor/; our viewer flamegraph.js);
stack_files.py the stacks as files (folded, pprof).
Nothing here computes a metric or a verdict: it takes them from the analysis. May import: base, analysis.
"""
