"""spinscope: a kernel-aware profiler for network servers.

The package by concern (docs/architecture-of-the-code.md draws it): tracing (the C collector run from
Python), analysis (a capture to its labels), output (terminal, HTML, figures, JSON), live (the stream,
`top`, the exporter), web (the exporter's HTTP endpoint), commands (the verbs), lab (sweeps and the
published claims). The modules beside this file are the base every package may use: errors, fmt
(numbers for people), untrusted (strings the traced process chose); and the program, above every package:
cli (the verb table, which names each verb's module, the lab's too) and __main__ (`python -m spinscope`).
"""

__version__ = "0.1.0"
