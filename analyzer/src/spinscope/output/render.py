"""What `report` and `diff` both write about a capture: its one-line headline and a label's verdict."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from spinscope.analysis.coverage import request_counting
from spinscope.analysis.verdicts import Finding, Label
from spinscope.analysis.savings import saving_line
from spinscope.analysis.metrics import Analysis
from spinscope.fmt import per_second
from spinscope.output.console import plain

SEVERITY_STYLE = {"critical": "bold red", "warning": "bold yellow", "info": "bold blue"}


def headline(analysis: Analysis) -> str:
    """`spinsrv (pid 100): 10.0 s, 1 thread, 5,000 requests (500/s)`."""
    cap = analysis.capture
    rate = per_second(analysis.requests, cap.duration_s)
    n, processes = len(cap.threads), len({thread["pid"] for thread in cap.threads.values()})
    who = f"{processes} processes, " if processes > 1 else ""
    counted = request_counting(cap)
    return (f"{cap.name}: {cap.duration_s:.1f} s, {who}{n} thread{'' if n == 1 else 's'}, "
            f"{analysis.requests:,} request{'' if analysis.requests == 1 else 's'}" + (f" ({rate})" if rate else "")
            + (f"; {counted}" if counted else ""))


def print_label(console: Console, label: Label) -> None:
    """The severity and summary, then the details and fixes indented below (a summary or detail may
    name a thread: plain text)."""
    console.print(Text.assemble(plain(label.severity.upper(), SEVERITY_STYLE[label.severity]), " ",
                                plain(label.summary)))
    print_label_details(console, label)


def detail_lines(verdict) -> list:
    """What a label's fix saves, its details and fixes (`fix: ...`); a finding's saving and advice
    (`weigh: ...`): the lines written under its summary, in the terminal and on the pages alike."""
    saves = [saving_line(verdict)] if saving_line(verdict) else []
    weigh = verdict.advice if isinstance(verdict, Finding) else []
    return [*saves, *verdict.details, *(f"fix: {fix}" for fix in verdict.fixes), *(f"weigh: {a}" for a in weigh)]


def print_label_details(console: Console, label) -> None:
    """A label's or finding's detail_lines, indented (under a line that already gave its summary)."""
    for line in detail_lines(label):
        console.print(plain(f"    {line}"))


def print_finding(console: Console, finding: Finding) -> None:
    """A finding is not a label: its name instead of a severity, then what to weigh it against."""
    console.print(Text.assemble(plain(finding.name.upper(), "bold cyan"), " ", plain(finding.summary)))
    print_label_details(console, finding)
