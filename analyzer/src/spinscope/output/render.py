"""What `report` and `diff` both write about a capture: its one-line headline and a label's verdict."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from spinscope.analysis.coverage import request_counting
from spinscope.analysis.labels import Finding, Label
from spinscope.analysis.metrics import Analysis
from spinscope.output.console import plain

SEVERITY_STYLE = {"critical": "bold red", "warning": "bold yellow", "info": "bold blue"}


def headline(analysis: Analysis) -> str:
    """`spinsrv (pid 100): 10.0 s, 1 thread, 5,000 requests (500/s)`."""
    cap = analysis.capture
    rate = analysis.process["requests_per_s"]
    n, processes = len(cap.threads), len({thread["pid"] for thread in cap.threads.values()})
    who = f"{processes} processes, " if processes > 1 else ""
    counted = request_counting(cap.totals, cap.schema)
    return (f"{cap.name}: {cap.duration_s:.1f} s, {who}{n} thread{'' if n == 1 else 's'}, "
            f"{analysis.requests:,} requests" + (f" ({rate:,.0f}/s)" if rate is not None else "")
            + (f"; {counted}" if counted else ""))


def print_label(console: Console, label: Label) -> None:
    """The severity and summary, then the details and fixes indented below (a summary or detail may
    name a thread: plain text)."""
    console.print(Text.assemble(plain(label.severity.upper(), SEVERITY_STYLE[label.severity]), " ",
                                plain(label.summary)))
    print_label_details(console, label)


def print_label_details(console: Console, label: Label) -> None:
    """A label's details and fixes, indented (under a line that already gave its summary)."""
    for line in label.details:
        console.print(plain(f"    {line}"))
    for fix in label.fixes:
        console.print(plain(f"    fix: {fix}"))


def print_finding(console: Console, finding: Finding) -> None:
    """A finding is not a label: its name instead of a severity, then what to weigh it against."""
    console.print(Text.assemble(plain(finding.name.upper(), "bold cyan"), " ", plain(finding.summary)))
    for advice in finding.advice:
        console.print(plain(f"    weigh: {advice}"))
