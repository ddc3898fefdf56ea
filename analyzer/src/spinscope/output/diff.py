"""What `spinscope diff` shows of a Comparison (spinscope.analysis.comparison): the verdict, the labels,
the metrics table with each change against the noise, the dropped events; in the terminal, as an HTML page
and as JSON."""

from __future__ import annotations

from rich.table import Table

from spinscope.analysis.comparison import (LITTLE_LOAD, MAX_T_SHOWN, Comparison, NoiseSample, by_side,
                                           left_out_lines, title, unit_of)
from spinscope.analysis.coverage import request_counting
from spinscope.analysis.labels import Assessment
from spinscope.analysis.metrics import METRICS, PER_REQUEST, Analysis, drop_line
from spinscope.analysis.noise import MIN_INTERVALS, SIGNIFICANT, TOO_FEW
from spinscope.output import htmlpage
from spinscope.output.console import plain, terminal
from spinscope.output.render import detail_lines, headline, print_label_details


def change_rows(comparison: Comparison) -> list:
    """One row per metric, its values written as the verdict writes them (Change.value_text), and when
    a side dropped events, which drops touch it (`after: threads, sockets`)."""
    rows = []
    for c in comparison.changes:
        if c.noise.t is None:
            t = ""
        else:
            t = f" (t={c.noise.t:.1f})" if abs(c.noise.t) < MAX_T_SHOWN else f" (|t|>{MAX_T_SHOWN})"
        row = [c.metric.name, unit_of(c.metric), c.value_text(c.before), c.value_text(c.after),
               c.change_text(), c.noise.verdict + t]
        if comparison.drops:
            row.append(by_side((side, drop.key) for side, drop in comparison.drops_touching(c.metric)))
        rows.append(row)
    return rows


NO_LABELS = "labels: none before, none after"
CHANGE_HEADERS = ("metric", "unit", "before", "after", "change", "vs noise")
DROPS_HEADER = "dropped events"
DROPS_LINE = f"dropped events (the metrics they touch are marked in the table's '{DROPS_HEADER}' column):"


def change_headers(comparison: Comparison) -> tuple:
    return (*CHANGE_HEADERS, DROPS_HEADER) if comparison.drops else CHANGE_HEADERS


def drop_lines(comparison: Comparison) -> list:
    """`after: 812 events of threads the threads map had no room for (every count is a lower bound, ...); ...`
    per side and kind."""
    return [f"{side}: {drop_line(drop, count)}" for side, drop, count in comparison.drops]


def label_entries(comparison: Comparison) -> list:
    """[(line, Label whose details and fixes the terminal prints under the line, or None)]: each label's
    summary is written once, in its line."""
    # A label's summary already names it ("write-spin on ...", "handoff overhead: ..."). Labels and findings
    # in one order, by what acting on them saves (the side that has it, the after side when both do).
    entries = [(f"appeared ({l.severity}): {l.summary}", l, l) for l in comparison.appeared]
    entries += [(f"disappeared (was {l.severity}): {l.summary}", None, l) for l in comparison.disappeared]
    entries += [(f"changed ({c.what()}): {c.after.summary}", None, c.after) for c in comparison.label_changes]
    entries += [(f"still present: {title(c.name)}", None, c.after) for c in comparison.present if not c.changed]
    for name, old, new in comparison.findings():
        where = "finding on both sides" if old and new else ("finding appeared" if new else "finding disappeared")
        entries.append((f"{where}: {name.upper()} {(new or old).summary}", new or old, new or old))
    return [(line, item) for line, item, ranked in sorted(entries, key=lambda e: -(e[2].saving or 0.0))]


def label_lines(comparison: Comparison) -> list:
    return [line for line, _ in label_entries(comparison)]


def sampling_note(comparison: Comparison) -> str | None:
    """How the two captures timed their calls, when either sampled (settings.time_sample)."""
    before, after = comparison.before.capture.time_sample, comparison.after.capture.time_sample
    if before == after == 1:
        return None
    if before == after:
        return (f"call times sampled on both sides (1 call in {before} timed): the costs are estimates, "
                "the counts exact")
    return (f"call times sampled differently: 1 call in {before} timed before, 1 in {after} after; the costs "
            "are estimates where sampled, the counts exact")


def counting_note(comparison: Comparison) -> str | None:
    """When the two captures count requests differently (HTTP/2 connections by stream on one side only, or
    by exchange on both, or TLS connections): the per-request figures then compare unlike requests."""
    sides = [(analysis.capture, request_counting(analysis.capture))
             for analysis in (comparison.before, comparison.after)]
    (before, b), (after, a) = sides
    if b is None and a is None:
        return None
    if before.h2_by_stream != after.h2_by_stream and (before.h2_connections or after.h2_connections):
        return (f"requests are counted differently: before, {b or 'every request an exchange'}; after, "
                f"{a or 'every request an exchange'}: the per-request figures compare unlike requests "
                "(capture schema 8 counts HTTP/2 streams, older ones exchanges)")
    return f"requests counted: before, {b or 'all by exchange'}; after, {a or 'all by exchange'}"


def noise_note(comparison: Comparison) -> str:
    b, a = len(comparison.before_noise.values), len(comparison.after_noise.values)
    idle = any(i.reason == LITTLE_LOAD for sample in (comparison.before_noise, comparison.after_noise)
               for i in sample.left_out)
    if not comparison.noise_judged:
        return (f"{TOO_FEW}: before has {b} and after {a} full intervals{' that carry load' if idle else ''} "
                f"({MIN_INTERVALS} each needed); record with --interval{' while the load runs' if idle else ''} "
                "to get them")
    return (f"noise: Welch's t-test on the {b} before and {a} after interval values of each metric, "
            "two-sided at 5%" + (" (the intervals that carry load)" if idle else ""))


def noise_left_out(comparison: Comparison) -> list:
    """The lines naming the intervals each side leaves out of the noise test, and why."""
    return (left_out_lines("before", comparison.before, comparison.before_noise)
            + left_out_lines("after", comparison.after, comparison.after_noise))


def to_json(comparison: Comparison) -> dict:
    def side(analysis: Analysis, labels: Assessment, sample: NoiseSample) -> dict:
        return {"file": str(analysis.capture.path), "requests": analysis.requests,
                "duration_s": analysis.capture.duration_s, "intervals": len(analysis.intervals),
                "noise_intervals": len(sample.values),
                "intervals_left_out": [i.to_dict() for i in sample.left_out],
                "labels": [l.to_dict() for l in labels.labels], "notes": labels.notes}

    return {"verdict": comparison.verdict(),
            "before": side(comparison.before, comparison.before_labels, comparison.before_noise),
            "after": side(comparison.after, comparison.after_labels, comparison.after_noise),
            "labels": {"appeared": [l.name for l in comparison.appeared],
                       "disappeared": [l.name for l in comparison.disappeared],
                       "unchanged": comparison.unchanged},
            "label_changes": [c.to_dict() for c in comparison.label_changes],
            "metrics": [{**c.to_dict(), "drops": [{"side": side, "kind": drop.key}
                                                  for side, drop in comparison.drops_touching(c.metric)]}
                        for c in comparison.changes],
            "drops": {"before": comparison.before.capture.drops, "after": comparison.after.capture.drops,
                      "warning": comparison.drops_warning(), "effects": drop_lines(comparison)},
            "noise": noise_note(comparison),
            "request_counting": counting_note(comparison),
            "noise_left_out": noise_left_out(comparison),
            "time_sample": {"before": comparison.before.capture.time_sample,
                            "after": comparison.after.capture.time_sample, "note": sampling_note(comparison)}}


def render_terminal(comparison: Comparison) -> None:
    """Every line through output.plain: a capture's process and thread names are the target's to choose."""
    console = terminal()
    style = "bold red" if comparison.drops else "bold"
    console.print(plain(comparison.verdict(), style), soft_wrap=True)  # one line, however long
    console.print(plain(f"before: {headline(comparison.before)}"))
    console.print(plain(f"after:  {headline(comparison.after)}"))
    if counting_note(comparison):
        console.print(plain(counting_note(comparison), "bold" if "differently" in counting_note(comparison) else ""),
                      soft_wrap=True)
    if comparison.drops:
        console.print(plain(DROPS_LINE, "bold red"))
        for line in drop_lines(comparison):
            console.print(plain(f"    {line}"))
    console.print()
    entries = label_entries(comparison) or [(NO_LABELS, None)]
    for line, label in entries:
        console.print(plain(line), soft_wrap=True)  # a summary is one line, however long
        if label is not None:
            print_label_details(console, label)
    console.print()
    table = Table(title="Metrics", title_justify="left")
    for header in change_headers(comparison):
        table.add_column(header, justify="left" if header in ("metric", "unit", "vs noise", DROPS_HEADER) else "right")
    for change, row in zip(comparison.changes, change_rows(comparison)):
        style = "bold" if change.noise.verdict == SIGNIFICANT else None
        table.add_row(*map(plain, row), style=style)
    console.print(table)
    console.print(plain(noise_note(comparison)))
    for line in noise_left_out(comparison):
        console.print(plain(line), soft_wrap=True)  # one line per side and reason, however long
    if sampling_note(comparison):
        console.print(plain(sampling_note(comparison)))


def _css(item) -> str:
    """A label's or finding's border on the page: its severity's colour (a finding's: info)."""
    return getattr(item, "severity", "info") if item is not None else "ok"


def render_html(comparison: Comparison) -> str:
    from spinscope.output import figures  # matplotlib loads in ~0.5 s: only when a page is drawn

    per_request = [m.name for m in METRICS if m.kind == PER_REQUEST]
    worse = comparison.appeared or comparison.drops or any(c.rose for c in comparison.label_changes)
    body = [htmlpage.verdict("critical" if worse else "ok", comparison.verdict()),
            htmlpage.paragraph(f"before: {headline(comparison.before)}"),
            htmlpage.paragraph(f"after: {headline(comparison.after)}"),
            *([htmlpage.paragraph(counting_note(comparison), "note")] if counting_note(comparison) else [])]
    if comparison.drops:
        body += [htmlpage.heading("Dropped events"),
                 htmlpage.verdict("critical", DROPS_LINE, drop_lines(comparison))]
    # the terminal's lines: each label's or finding's line, and under it what the terminal prints under it
    body += [htmlpage.heading("Labels"),
             *(htmlpage.verdict(_css(item), line, detail_lines(item) if item is not None else [])
               for line, item in label_entries(comparison) or [(NO_LABELS, None)]),
             htmlpage.heading("Metrics"),
             htmlpage.table(change_headers(comparison), change_rows(comparison)),
             htmlpage.paragraph(noise_note(comparison), "note"),
             *(htmlpage.paragraph(line, "note") for line in noise_left_out(comparison)),
             *([htmlpage.paragraph(sampling_note(comparison), "note")] if sampling_note(comparison) else []),
             htmlpage.figure(figures.metric_bars(comparison.before.process, comparison.after.process, per_request),
                             "per-request metrics before and after"),
             htmlpage.figure(figures.time_series({"before": comparison.before.intervals,
                                                  "after": comparison.after.intervals}), "rates per interval")]
    return htmlpage.page("spinscope diff", body)
