"""`spinscope diff BEFORE AFTER`: what changed between two captures of the same service.

The verdict line comes first and leads with what matters most: labels that appeared or disappeared, with
the numbers that moved them; otherwise the largest changes that stand out of the run-to-run noise
(spinscope.noise). Then every metric: before, after, change, and whether the change is beyond the noise.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from rich.table import Table

from spinscope import htmlpage
from spinscope.capture import load
from spinscope.labels import HANDOFF_OVERHEAD, INFO, SPURIOUS_SELECT, TITLES, WRITE_SPIN, Assessment, assess
from spinscope.metrics import METRICS, PER_REQUEST, Analysis, Metric, analyze
from spinscope.noise import SIGNIFICANT, TOO_FEW, NoiseTest, compare
from spinscope.output import fmt, print_json, terminal, write_text
from spinscope.report import headline, print_label

# The metrics that tell each label's story, in the order a verdict names them.
LABEL_METRICS = {
    WRITE_SPIN: ("futile_retries_per_request", "spin_cpu_share"),
    SPURIOUS_SELECT: ("empty_poll_cpu_share", "poll_zero_fraction"),
    HANDOFF_OVERHEAD: ("handoffs_per_request", "handoff_wait_ms_per_request"),
}
VERDICT_CHANGES = 2  # changes named in a verdict without label changes
UNDEFINED = NoiseTest("n/a", None, None, 0, 0)  # the metric is undefined on one side (no requests, no polls)
MAX_T_SHOWN = 1000  # larger |t| (constant intervals) is shown as ">1000": the digits mean nothing


@dataclass
class Change:
    metric: Metric
    before: float | None
    after: float | None
    noise: NoiseTest

    @property
    def delta(self) -> float | None:
        return None if self.before is None or self.after is None else self.after - self.before

    @property
    def relative(self) -> float | None:
        return self.delta / self.before if self.delta is not None and self.before else None

    def phrase(self) -> str:
        """`+3.9 handoffs per request`, `+41% futex time`, `zero-event poll share 2% → 40%`."""
        m = self.metric
        if m.percent and self.delta is not None:
            return f"{m.phrase} {self.before:.0%} → {self.after:.0%}"
        if m.relative and self.relative is not None:
            return f"{self.relative:+.0%} {m.phrase}"
        if m.relative or self.delta is None:
            return f"{m.phrase} {fmt(self.before)} → {fmt(self.after)} {m.unit}".rstrip()
        return f"{self.delta:+.1f} {m.phrase}"

    def to_dict(self) -> dict:
        return {"name": self.metric.name, "kind": self.metric.kind, "before": self.before, "after": self.after,
                "delta": self.delta, "relative": self.relative, "noise": self.noise.verdict,
                "t": self.noise.t, "df": self.noise.df,
                "intervals_before": self.noise.n_before, "intervals_after": self.noise.n_after}


@dataclass
class Comparison:
    before: Analysis
    after: Analysis
    before_labels: Assessment
    after_labels: Assessment
    changes: list

    @property
    def appeared(self) -> list:
        """Labels at warning or critical after that were not before (an informational note is no label's
        presence: a loop that now waits for EPOLLOUT has write-spin disappear, and keeps a note)."""
        return [l for l in self.after_labels.labels if l.severity != INFO and l.name not in self.before_labels.serious()]

    @property
    def disappeared(self) -> list:
        return [l for l in self.before_labels.labels if l.severity != INFO and l.name not in self.after_labels.serious()]

    @property
    def noise_judged(self) -> bool:
        return any(c.noise.verdict != TOO_FEW for c in self.changes)

    def change(self, name: str) -> Change:
        return next(c for c in self.changes if c.metric.name == name)

    def verdict(self) -> str:
        label_changes = [(label, "appeared") for label in self.appeared] + [(label, "disappeared")
                                                                           for label in self.disappeared]
        if label_changes:
            moved = [self.change(name) for label, _ in label_changes for name in LABEL_METRICS[label.name]]
            numbers = " and ".join(c.phrase() for c in moved if c.delta is not None or c.before != c.after)
            events = ", ".join(f"{TITLES[label.name]} {what}" for label, what in label_changes)
            return f"after: {numbers}: {events}" if numbers else f"after: {events}"
        candidates = [c for c in self.changes if c.delta and (c.noise.verdict == SIGNIFICANT or not self.noise_judged)]
        candidates.sort(key=lambda c: abs(c.relative) if c.relative is not None else 0.0, reverse=True)
        if not candidates:
            return "after: no change beyond the run-to-run noise; no label appeared or disappeared"
        named = " and ".join(c.phrase() for c in candidates[:VERDICT_CHANGES])
        caveat = "" if self.noise_judged else f" ({TOO_FEW})"
        return f"after: {named}{caveat}; no label appeared or disappeared"


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("diff", help="compare two captures of the same service",
                                   description="Compare BEFORE and AFTER: per-request and per-second changes of "
                                   "every metric, labels that appeared or disappeared, and whether each change "
                                   "is larger than the run-to-run noise seen between intervals.")
    parser.add_argument("before", metavar="BEFORE", help="capture of the baseline")
    parser.add_argument("after", metavar="AFTER", help="capture after the change")
    parser.add_argument("--html", metavar="OUT", help="also write a self-contained HTML comparison to OUT")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON instead")
    parser.set_defaults(func=run)


def run(args) -> int:
    comparison = compare_captures(analyze(load(args.before)), analyze(load(args.after)))
    if args.json:
        print_json(to_json(comparison))
    else:
        render_terminal(comparison)
    if args.html:
        write_text(args.html, render_html(comparison))
        print(f"wrote {args.html}", file=sys.stderr if args.json else sys.stdout)
    return 0


def compare_captures(before: Analysis, after: Analysis) -> Comparison:
    changes = []
    for metric in METRICS:
        old, new = before.process[metric.name], after.process[metric.name]
        noise = (compare(before.intervals[metric.name], after.intervals[metric.name])
                 if old is not None and new is not None else UNDEFINED)
        changes.append(Change(metric, old, new, noise))
    return Comparison(before, after, assess(before), assess(after), changes)


def change_rows(comparison: Comparison) -> list:
    rows = []
    for c in comparison.changes:
        pct = c.metric.percent
        change = "n/a" if c.delta is None else (f"{c.delta * 100:+.1f} pts" if pct else f"{c.delta:+.3g}")
        if c.relative is not None and not pct:
            change += f" (×{c.after / c.before:.0f})" if abs(c.relative) >= 10 else f" ({c.relative:+.0%})"
        if c.noise.t is None:
            t = ""
        else:
            t = f" (t={c.noise.t:.1f})" if abs(c.noise.t) < MAX_T_SHOWN else f" (|t|>{MAX_T_SHOWN})"
        rows.append([c.metric.name, c.metric.kind, fmt(c.before, 3, pct), fmt(c.after, 3, pct), change,
                     c.noise.verdict + t])
    return rows


CHANGE_HEADERS = ("metric", "kind", "before", "after", "change", "vs noise")


def label_lines(comparison: Comparison) -> list:
    # A label's summary already names it ("write-spin on ...", "handoff overhead: ...").
    lines = [f"appeared ({l.severity}): {l.summary}" for l in comparison.appeared]
    lines += [f"disappeared (was {l.severity}): {l.summary}" for l in comparison.disappeared]
    kept = comparison.before_labels.serious() & comparison.after_labels.serious()
    lines += [f"still present: {TITLES[name]}" for name in sorted(kept)]
    return lines


def noise_note(comparison: Comparison) -> str:
    b, a = len(comparison.before.intervals), len(comparison.after.intervals)
    if not comparison.noise_judged:
        return (f"{TOO_FEW}: before has {b} and after {a} full intervals (3 each needed); "
                "record with --interval to get them")
    return (f"noise: Welch's t-test on the {b} before and {a} after interval values of each metric, "
            "two-sided at 5%")


def to_json(comparison: Comparison) -> dict:
    def side(analysis: Analysis, labels: Assessment) -> dict:
        return {"file": str(analysis.capture.path), "requests": analysis.requests,
                "duration_s": analysis.capture.duration_s, "intervals": len(analysis.intervals),
                "labels": [{**l.to_dict(), "title": l.title} for l in labels.labels], "notes": labels.notes}

    return {"verdict": comparison.verdict(),
            "before": side(comparison.before, comparison.before_labels),
            "after": side(comparison.after, comparison.after_labels),
            "labels": {"appeared": [l.name for l in comparison.appeared],
                       "disappeared": [l.name for l in comparison.disappeared],
                       "unchanged": sorted(comparison.before_labels.serious() & comparison.after_labels.serious())},
            "metrics": [c.to_dict() for c in comparison.changes],
            "noise": noise_note(comparison)}


def render_terminal(comparison: Comparison) -> None:
    console = terminal()
    console.print(f"[bold]{comparison.verdict()}[/bold]")
    console.print(f"before: {headline(comparison.before)}")
    console.print(f"after:  {headline(comparison.after)}")
    console.print()
    for line in label_lines(comparison) or ["labels: none before, none after"]:
        console.print(line)
    for label in comparison.appeared:
        print_label(console, label)
    console.print()
    table = Table(title="Metrics", title_justify="left")
    for header in CHANGE_HEADERS:
        table.add_column(header, justify="left" if header in ("metric", "kind", "vs noise") else "right")
    for row in change_rows(comparison):
        style = "bold" if row[-1].startswith(SIGNIFICANT) else None
        table.add_row(*row, style=style)
    console.print(table)
    console.print(noise_note(comparison))


def render_html(comparison: Comparison) -> str:
    from spinscope import figures  # matplotlib loads in ~0.5 s: only when a page is drawn

    per_request = [m.name for m in METRICS if m.kind == PER_REQUEST]
    body = [htmlpage.verdict("critical" if comparison.appeared else "ok", comparison.verdict()),
            htmlpage.paragraph(f"before: {headline(comparison.before)}"),
            htmlpage.paragraph(f"after: {headline(comparison.after)}"),
            htmlpage.heading("Labels"),
            *(htmlpage.paragraph(line) for line in label_lines(comparison) or ["no labels before or after"]),
            htmlpage.heading("Metrics"),
            htmlpage.table(CHANGE_HEADERS, change_rows(comparison)),
            htmlpage.paragraph(noise_note(comparison), "note"),
            htmlpage.figure(figures.metric_bars(comparison.before.process, comparison.after.process, per_request),
                            "per-request metrics before and after"),
            htmlpage.figure(figures.time_series({"before": comparison.before.intervals,
                                                 "after": comparison.after.intervals}), "rates per interval")]
    return htmlpage.page("spinscope diff", body)
