"""Two captures of the same service compared (`spinscope diff`): what changed, and whether it is larger
than the run-to-run noise.

The verdict line comes first and leads with what matters most: labels that appeared or disappeared, with
the numbers that moved them; otherwise the changes that stand out of the run-to-run noise (spinscope.analysis.noise),
ranked first by what they say about a label (the metrics in LABEL_METRICS, per-request ones first, then CPU
per request), then by their effect size: Welch's |t|, the change measured in its own noise, which compares
across metrics where a raw percentage does not (+4,000,000% of a near-zero rate is noise, +1.4 handoffs per
request at t=54 is the story). Per-second rates and run-queue wait, which follow load and scheduling more
than the server's design, come after everything else.

Then every metric: before, after, change, and whether the change is beyond the noise. The verdict and the
table write a metric's values the same way (`Change.value_text`), in the same unit, and a relative change
(+41%, ×12) only of a base that is meaningfully above zero (`Change.floor`, RELATIVE_MIN_BASE): from a zero
or near-zero base a change reads `0 → 0.46 ms per request`.

Noise is judged on the intervals that carry load (noise.loaded): the idle tail of a capture that outlasted
its load would otherwise bury any change in the spread of near-empty intervals. Every interval left out of
the noise test, cut short or nearly idle, is named with why (`NoiseSample.left_out`).

A label present (warning or critical) on both sides is reported as changed when its severity changed or
its measured share (`cpu_share`) moved by SHARE_CHANGE_POINTS or more (`LabelChange`); a severity change
is a label event in the verdict, like a label that appeared. Labels are handled by name, severity,
cpu_share and summary only, so a detector's new label needs nothing here.

A capture whose collector dropped events (a full map: threads or requests not followed) has
counts that are lower bounds, and a change between it and another capture may be the drops' doing. Such
a comparison is qualified everywhere it is written: the verdict starts with a warning naming the drops,
the drops and what each touches are listed, and the table marks every metric they touch.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from spinscope.analysis.labels import Assessment, assess
from spinscope.analysis.patterns import HANDOFF_OVERHEAD, SPURIOUS_SELECT, TITLES, WRITE_SPIN
from spinscope.analysis.verdicts import CRITICAL, INFO, WARNING, WARNING_SHARE, Label
from spinscope.analysis.savings import saving_line
from spinscope.analysis.metrics import (CPU_SHARE, METRICS, MIN_INTERVAL_SHARE, PER_REQUEST, PER_SECOND, Analysis,
                                        Metric, dropped)
from spinscope.analysis.noise import (MIN_LOAD_SHARE, SIGNIFICANT, TOO_FEW, WITHIN_NOISE, NoiseTest, compare,
                                      load_reference, loaded)
from spinscope.fmt import NOT_AVAILABLE, number, percent

# The metrics that tell each label's story, in the order a verdict names them. Names that metrics.METRICS
# does not (yet) compute are skipped.
LABEL_METRICS = {
    WRITE_SPIN: ("eagain_retries_per_request", "spin_cpu_share"),
    SPURIOUS_SELECT: ("empty_poll_cpu_share", "poll_zero_fraction", "events_per_poll"),
    HANDOFF_OVERHEAD: ("handoffs_per_request", "handoff_wait_ms_per_request", "cross_thread_share"),
}
CPU_PER_REQUEST = "cpu_ms_per_request"  # the cost every label's story ends in: ranked right after them
REQUEST_MS = "request_ms"  # with CPU per request and the CPU shares, on the scale of what a fix saves
LAST_METRICS = ("runq_ms_per_request",)  # with the per-second rates: scheduling and load, not design
VERDICT_CHANGES = 2  # changes named in a verdict without label changes, and numbers named per label change
UNDEFINED = NoiseTest("n/a", None, None, 0, 0)  # the metric is undefined on one side (no requests, no polls)
MAX_T_SHOWN = 1000  # larger |t| (constant intervals) is shown as ">1000": the digits mean nothing

# Below its floor a value is as good as zero: no percentage is taken of it, and a change between two
# values under it is not named. Percentages (shares) are floored at 0.1 points and never shown relative.
PERCENT_FLOOR = 0.001
MS_FLOOR = 0.001         # 1 us
RATE_FLOOR = 1.0         # one event per second
CPUS_FLOOR = 0.001       # a thousandth of a CPU
COUNT_FLOOR = 0.01       # one event per 100 requests (or calls)
RELATIVE_MIN_BASE = 0.01  # and a base under 1% of the after value (beyond ×100) gives no percentage either
TIMES_FROM = 10  # ratios after/before of at least this read "×N" rather than "+900%"

# A label present on both sides whose measured share (cpu_share) moved by this much (absolute, 5 points:
# the whole width of the warning threshold, labels.WARNING_SHARE) is reported as changed even at the same
# severity. Smaller moves are left to the metrics table: a share is a whole-capture value, without
# interval noise to judge it by.
SHARE_CHANGE_POINTS = 0.05
SEVERITIES = (INFO, WARNING, CRITICAL)  # in rising order

# Why an interval is left out of the noise test (`LeftOut.reason`, `intervals_left_out[].reason` in --json).
CUT_SHORT = "cut short"      # shorter than metrics.MIN_INTERVAL_SHARE of the nominal interval
LITTLE_LOAD = "little load"  # fewer requests/s than noise.MIN_LOAD_SHARE of the capture's reference rate


def title(name: str) -> str:
    """How text names a label: its title, or its name for a label this version has no title for."""
    return TITLES.get(name, name)


def unit_of(metric: Metric) -> str:
    """What the table's values are measured in: the metric's unit, else its kind (`per request`)."""
    return metric.unit or metric.kind


def floor_of(metric: Metric) -> float:
    if metric.percent:
        return PERCENT_FLOOR
    if "ms" in metric.unit.split():
        return MS_FLOOR
    if metric.unit == "CPUs":
        return CPUS_FLOOR
    if metric.kind == PER_SECOND:
        return RATE_FLOOR
    return COUNT_FLOOR


def story_metrics() -> set:
    return {name for names in LABEL_METRICS.values() for name in names}


def tier(metric: Metric) -> int:
    """Where a change ranks in a verdict: 0 the per-request metrics of a label's story, 1 CPU per request
    and the rest of the labels' metrics (CPU shares, poll ratios), 2 everything else, 3 per-second rates
    and run-queue wait."""
    if metric.kind == PER_SECOND or metric.name in LAST_METRICS:
        return 3
    story = story_metrics()
    if metric.name in story and metric.kind == PER_REQUEST:
        return 0
    if metric.name in story or metric.name == CPU_PER_REQUEST:
        return 1
    return 2


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
    def floor(self) -> float:
        return floor_of(self.metric)

    @property
    def relative(self) -> float | None:
        """delta / before, or None when that is meaningless: a share (changes in points), an undefined
        side, a base under the metric's floor or under RELATIVE_MIN_BASE of the after value."""
        if self.metric.percent or self.delta is None:
            return None
        base = abs(self.before)
        if base < self.floor or base < RELATIVE_MIN_BASE * abs(self.after):
            return None
        return self.delta / self.before

    @property
    def negligible(self) -> bool:
        """Both sides under the floor (or undefined): nothing worth naming moved."""
        values = [abs(v) for v in (self.before, self.after) if v is not None]
        return not values or max(values) < self.floor

    @property
    def visible(self) -> bool:
        """The change shows in the numbers as written (1.0001 → 1.0002 does not)."""
        return self.value_text(self.before) != self.value_text(self.after)

    @property
    def size(self) -> float:
        """The change relative to the larger side (bounded, defined from a zero base): the effect size
        when there is no noise to measure it against."""
        if self.delta is None:
            return 0.0
        return abs(self.delta) / max(abs(self.before), abs(self.after), self.floor)

    def value_text(self, value: float | None) -> str:
        return percent(value) if self.metric.percent else number(value)

    def delta_text(self) -> str:
        if self.delta is None:
            return NOT_AVAILABLE
        return f"{percent(self.delta, signed=True)[:-1]} pts" if self.metric.percent else number(self.delta, True)

    def relative_text(self) -> str | None:
        """`+41%`, `-89%` or `×12`; None when there is no meaningful base."""
        relative = self.relative
        if relative is None:
            return None
        if relative + 1 >= TIMES_FROM:
            return f"×{relative + 1:,.0f}"
        return percent(relative, 0, signed=True)

    def span(self) -> str:
        """`0.025 → 0.0555 ms per request`: the values as the table writes them, with their unit."""
        unit = self.metric.unit
        return f"{self.value_text(self.before)} → {self.value_text(self.after)}" + (f" {unit}" if unit else "")

    def phrase(self) -> str:
        """`+3.9 handoffs per request`, `+41% futex wait in requests (0.3 → 0.423 ms per request)`,
        `zero-event poll share 2% → 40%`, `futex wait in requests 0 → 0.46 ms per request`."""
        m = self.metric
        if m.percent or self.delta is None or (m.unit and not m.relative):
            return f"{m.phrase} {self.span()}"
        if m.relative:
            relative = self.relative_text()
            return f"{relative} {m.phrase} ({self.span()})" if relative else f"{m.phrase} {self.span()}"
        return f"{self.delta_text()} {m.phrase}"

    def change_text(self) -> str:
        """The table's change cell: `+2.04 (+97%)`, `+0.114`, `+8.9 pts`, `n/a`."""
        relative = self.relative_text()
        return self.delta_text() + (f" ({relative})" if relative else "")

    def rank_key(self) -> tuple:
        """Smaller ranks first: tier, then |t| (larger first), then the size of the change."""
        t = self.noise.t
        return (tier(self.metric), -(abs(t) if t is not None else 0.0), -self.size)

    def to_dict(self) -> dict:
        return {"name": self.metric.name, "kind": self.metric.kind, "unit": unit_of(self.metric),
                "before": self.before, "after": self.after, "delta": self.delta, "relative": self.relative,
                "noise": self.noise.verdict, "t": self.noise.t, "df": self.noise.df,
                "intervals_before": self.noise.n_before, "intervals_after": self.noise.n_after}


@dataclass(frozen=True)
class LeftOut:
    """An interval of a capture that the noise test does not use, and why."""

    interval: int      # its number in the capture, 1 for the first
    start_s: float
    end_s: float
    requests: int
    reason: str        # CUT_SHORT or LITTLE_LOAD

    @property
    def rate(self) -> float:
        duration = self.end_s - self.start_s
        return self.requests / duration if duration > 0 else 0.0

    def to_dict(self) -> dict:
        return {"interval": self.interval, "start_s": self.start_s, "end_s": self.end_s,
                "requests": self.requests, "reason": self.reason}


@dataclass
class NoiseSample:
    """One capture's side of the noise test: the interval values it compares (the rows of
    Analysis.intervals that carry load), the intervals it leaves out, and the requests/s the load was
    judged against (noise.load_reference)."""

    values: pd.DataFrame
    left_out: list
    reference: float


def noise_sample(analysis: Analysis) -> NoiseSample:
    """The loaded full intervals of a capture, and every other interval as a LeftOut (Analysis.intervals
    already lacks the cut-short ones; they are found again by their end time)."""
    full = pd.DataFrame.from_records(analysis.intervals, columns=["t_s", *(m.name for m in METRICS)]).astype(float)
    is_loaded = loaded(full["requests_per_s"])
    kept_ends, loaded_ends = set(full["t_s"]), set(full["t_s"][is_loaded])
    left_out = []
    for number_, row in enumerate(analysis.capture.intervals, start=1):
        if row["t_s"] in loaded_ends:
            continue
        reason = LITTLE_LOAD if row["t_s"] in kept_ends else CUT_SHORT
        left_out.append(LeftOut(number_, row["t_s"] - row["duration_s"], row["t_s"], row["requests"], reason))
    return NoiseSample(full[is_loaded], left_out, load_reference(full["requests_per_s"]))


def runs(intervals: list) -> list:
    """Consecutive LeftOut intervals grouped: [[first, last], ...] from intervals in ascending order."""
    grouped = []
    for interval in intervals:
        if grouped and interval.interval == grouped[-1][1].interval + 1:
            grouped[-1][1] = interval
        else:
            grouped.append([interval, interval])
    return grouped


def interval_ranges(intervals: list) -> tuple:
    """(`intervals 1, 4-5`, `0-20, 60-100 s`): the numbers and the times of ascending LeftOut intervals."""
    grouped = runs(intervals)
    numbers = ", ".join(str(a.interval) if a is b else f"{a.interval}-{b.interval}" for a, b in grouped)
    times = ", ".join(f"{number(a.start_s)}-{number(b.end_s)}" for a, b in grouped)
    return f"interval{'s' if len(intervals) > 1 else ''} {numbers}", f"{times} s"


def left_out_lines(side: str, analysis: Analysis, sample: NoiseSample) -> list:
    """`intervals 4-5 of before.json (before, 60-100 s) left out of the noise test: ...`, one line per
    reason."""
    lines = []
    for reason in (LITTLE_LOAD, CUT_SHORT):
        intervals = [i for i in sample.left_out if i.reason == reason]
        if not intervals:
            continue
        numbers, times = interval_ranges(intervals)
        where = f"{numbers} of {analysis.capture.path.name} ({side}, {times}) left out of the noise test"
        if reason == LITTLE_LOAD:
            rates = [i.rate for i in intervals]
            had = number(rates[0]) if len(rates) == 1 else f"{number(min(rates))} to {number(max(rates))}"
            lines.append(f"{where}: fewer than {percent(MIN_LOAD_SHARE, 0)} of the requests/s of the median busy "
                         f"interval ({number(sample.reference)}/s); {'it' if len(rates) == 1 else 'they'} "
                         f"had {had}/s")
        else:
            nominal = analysis.capture.interval_s
            of = f"the {number(nominal)} s interval" if nominal else "the longest interval"
            lines.append(f"{where}: shorter than {percent(MIN_INTERVAL_SHARE, 0)} of {of}")
    return lines


def serious_label(assessment: Assessment, name: str) -> Label:
    """The label called `name` at warning or critical (Assessment.serious() holds its name)."""
    return next(l for l in assessment.labels if l.name == name and l.severity != INFO)


@dataclass
class LabelChange:
    """A label at warning or critical on both sides: its severity, its measured share, and whether either
    changed (a severity change, or a share moved by SHARE_CHANGE_POINTS or more)."""

    before: Label
    after: Label

    @property
    def name(self) -> str:
        return self.after.name

    @property
    def severity_changed(self) -> bool:
        return self.before.severity != self.after.severity

    @property
    def rose(self) -> bool:
        return SEVERITIES.index(self.after.severity) > SEVERITIES.index(self.before.severity)

    @property
    def share_delta(self) -> float | None:
        if self.before.cpu_share is None or self.after.cpu_share is None:
            return None
        return self.after.cpu_share - self.before.cpu_share

    @property
    def share_changed(self) -> bool:
        return self.share_delta is not None and abs(self.share_delta) >= SHARE_CHANGE_POINTS

    @property
    def top_sites(self) -> tuple:
        """(before, after): each side's top call site (`--stacks` captures), or None."""
        return tuple(label.call_sites[0]["where"] if label.call_sites else None for label in (self.before, self.after))

    @property
    def sites_moved(self) -> bool:
        """Both sides have call sites (recorded with --stacks) and the top one is not the same function."""
        before, after = (label.call_sites[0]["function"] if label.call_sites else None
                         for label in (self.before, self.after))
        return before is not None and after is not None and before != after

    @property
    def changed(self) -> bool:
        return self.severity_changed or self.share_changed or self.sites_moved

    def event(self) -> str:
        """The verdict's words for a severity change: `write-spin warning → critical`."""
        return f"{title(self.name)} {self.before.severity} → {self.after.severity}"

    def what(self) -> str:
        """`warning → critical; CPU share 16% → 27%`, `critical; CPU share 36% → 46%`."""
        severity = (f"{self.before.severity} → {self.after.severity}" if self.severity_changed
                    else self.after.severity)
        moved = "; top call site {} → {}".format(*self.top_sites) if self.sites_moved else ""
        if self.share_delta is None:
            return severity + moved
        return f"{severity}; CPU share {percent(self.before.cpu_share)} → {percent(self.after.cpu_share)}{moved}"

    def to_dict(self) -> dict:
        return {"name": self.name,
                "severity": {"before": self.before.severity, "after": self.after.severity},
                "cpu_share": {"before": self.before.cpu_share, "after": self.after.cpu_share},
                # with --stacks on either side only: captures without stacks compare as before
                **({"top_call_site": dict(zip(("before", "after"), self.top_sites))} if any(self.top_sites) else {}),
                "changed": [what for what, changed in (("severity", self.severity_changed),
                                                       ("cpu_share", self.share_changed),
                                                       ("call_sites", self.sites_moved)) if changed]}


def by_side(items) -> str:
    """`before: 3 pids; after: 812 threads, 40 sockets` from (side, text) pairs."""
    sides: dict = {}
    for side, text in items:
        sides.setdefault(side, []).append(text)
    return "; ".join(f"{side}: {', '.join(texts)}" for side, texts in sides.items())


@dataclass
class Comparison:
    before: Analysis
    after: Analysis
    before_labels: Assessment
    after_labels: Assessment
    changes: list
    before_noise: NoiseSample
    after_noise: NoiseSample

    @property
    def appeared(self) -> list:
        """Labels at warning or critical after that were not before (an informational note is no label's
        presence: a loop that now waits for EPOLLOUT has write-spin disappear, and keeps a note)."""
        return [l for l in self.after_labels.labels if l.severity != INFO and l.name not in self.before_labels.serious()]

    @property
    def disappeared(self) -> list:
        return [l for l in self.before_labels.labels if l.severity != INFO and l.name not in self.after_labels.serious()]

    @property
    def present(self) -> list:
        """[LabelChange] for every label at warning or critical on both sides, changed or not."""
        kept = self.before_labels.serious() & self.after_labels.serious()
        return [LabelChange(serious_label(self.before_labels, name), serious_label(self.after_labels, name))
                for name in sorted(kept)]

    @property
    def label_changes(self) -> list:
        """The labels present on both sides whose severity or measured share changed (LabelChange)."""
        return [c for c in self.present if c.changed]

    @property
    def unchanged(self) -> list:
        """Names of the labels present on both sides at the same severity and about the same share."""
        return [c.name for c in self.present if not c.changed]

    @property
    def noise_judged(self) -> bool:
        """Whether any metric had enough intervals on both sides for a t-test (an undefined metric, n/a,
        says nothing about the intervals)."""
        return any(c.noise.verdict in (SIGNIFICANT, WITHIN_NOISE) for c in self.changes)

    @property
    def drops(self) -> list:
        """[(side, Drop, count)] for each kind of event the before or the after capture dropped."""
        return [(side, drop, count) for side, analysis in (("before", self.before), ("after", self.after))
                for drop, count in dropped(analysis.capture.drops)]

    def drops_touching(self, metric: Metric) -> list:
        """[(side, Drop)] for the drops that make `metric` unreliable."""
        return [(side, drop) for side, drop, _ in self.drops if metric.name in drop.metrics]

    def drops_warning(self) -> str | None:
        """`WARNING: events dropped (after: 812 threads, 40 sockets): ...`, or None when neither side
        dropped any."""
        if not self.drops:
            return None
        lost = by_side((side, f"{count:,} {drop.key}") for side, drop, count in self.drops)
        return f"WARNING: events dropped ({lost}): counts are lower bounds, a change may be the drops' doing"

    def change(self, name: str) -> Change:
        return next(c for c in self.changes if c.metric.name == name)

    def find(self, name: str) -> Change | None:
        return next((c for c in self.changes if c.metric.name == name), None)

    def saved(self, change: Change) -> float | None:
        """A change on the scale labels are graded on (what a fix saves, analysis/savings.py): of the request
        time or the CPU per request (relative to the larger side), or a CPU share (in points); None for a
        count, a rate or a wait (waits in requests overlap: a pool's futex waits can exceed the request
        time), which say how, not how much."""
        if change.delta is None:
            return None
        if change.metric.name in (REQUEST_MS, CPU_PER_REQUEST):
            return abs(change.delta) / max(abs(change.before), abs(change.after), change.floor)
        return abs(change.delta) if change.metric.kind == CPU_SHARE else None

    def ranked(self) -> list:
        """The changes a verdict may name, most telling first: beyond the noise (or, without enough
        intervals, any), visible in the numbers and not between two near-zero values. The changes of the
        request time or the CPU lead, the largest first (`saved`); then counts and rates (Change.rank_key)."""
        judged = self.noise_judged
        candidates = [c for c in self.changes if c.delta and c.visible and not c.negligible
                      and (c.noise.verdict == SIGNIFICANT or (not judged and c.noise.verdict == TOO_FEW))]
        return sorted(candidates, key=lambda c: (0, -self.saved(c), ()) if self.saved(c) is not None
                      else (1, 0.0, c.rank_key()))

    def moved(self, label_name: str) -> list:
        """The numbers of a label's story that moved, at most VERDICT_CHANGES (the most telling), in the
        story's order. Labels are judged on whole-capture values, so a whole-capture value that visibly
        changed counts whatever its interval noise (the table says how it compares)."""
        changes = [c for c in (self.find(name) for name in LABEL_METRICS.get(label_name, ())) if c is not None]
        moved = [c for c in changes if c.visible and not c.negligible]
        chosen = sorted(moved, key=Change.rank_key)[:VERDICT_CHANGES]
        return [c for c in moved if c in chosen]

    def verdict(self) -> str:
        """The one line that leads the comparison, after the drops warning when there is one."""
        warning = self.drops_warning()
        return f"{warning}; {self._verdict()}" if warning else self._verdict()

    def _verdict(self) -> str:
        # A severity change is a label event like an appearance; a share that moved at the same severity
        # is in the labels' lines, not the verdict.
        label_events = ([(label.name, f"{title(label.name)} appeared") for label in self.appeared]
                        + [(label.name, f"{title(label.name)} disappeared") for label in self.disappeared]
                        + [(c.name, c.event()) for c in self.label_changes if c.severity_changed])
        if label_events:
            moved = []
            for name, _ in label_events:
                moved += [c for c in self.moved(name) if c not in moved]
            numbers = " and ".join(c.phrase() for c in moved)
            events = ", ".join(event for _, event in label_events)
            return (f"after: {numbers}: {events}" if numbers else f"after: {events}") + self.findings_said()
        candidates = self.ranked()
        findings = self.findings_said()
        if not candidates:
            return f"after: no change beyond the run-to-run noise; no label appeared or disappeared{findings}"
        named = " and ".join(c.phrase() for c in candidates[:VERDICT_CHANGES])
        caveat = "" if self.noise_judged else f" ({TOO_FEW})"
        return f"after: {named}{caveat}; no label appeared or disappeared{findings}"

    def findings(self) -> list:
        """[(finding name, before Finding or None, after Finding or None)], the larger saving first."""
        before = {f.name: f for f in self.before_labels.findings}
        after = {f.name: f for f in self.after_labels.findings}
        names = sorted(set(before) | set(after), key=lambda n: -max(
            (f.saving or 0.0) for f in (before.get(n), after.get(n)) if f is not None))
        return [(name, before.get(name), after.get(name)) for name in names]

    def findings_said(self) -> str:
        """`; write-wait on both sides (acting on it saves 100% of the request time)`: the findings a verdict
        without a label event names, that changed or that save the user at least WARNING_SHARE."""
        said = []
        for name, old, new in self.findings():
            where = "on both sides" if old and new else ("appeared" if new else "disappeared")
            shown = new or old
            if (old and new) and (shown.saving or 0.0) < WARNING_SHARE:
                continue
            saves = f" ({saving_line(shown)})" if saving_line(shown) else ""
            said.append(f"{name} {where}{saves}")
        return "".join(f"; {line}" for line in said)


def compare_captures(before: Analysis, after: Analysis) -> Comparison:
    """Whole-capture values compared, each change judged on the loaded intervals of both sides."""
    old_sample, new_sample = noise_sample(before), noise_sample(after)
    old_values, new_values = old_sample.values, new_sample.values
    changes = []
    for metric in METRICS:
        old, new = before.process.get(metric.name), after.process.get(metric.name)
        if old is not None and new is not None and metric.name in old_values and metric.name in new_values:
            noise = compare(old_values[metric.name], new_values[metric.name], new - old)
        else:
            noise = UNDEFINED
        changes.append(Change(metric, old, new, noise))
    return Comparison(before, after, assess(before), assess(after), changes, old_sample, new_sample)
