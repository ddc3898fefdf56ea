"""Is a change between two captures larger than the run-to-run noise?

Each capture's interval snapshots give a sample of every metric (one value per interval). Two samples are
compared with Welch's t-test (means compared against their standard errors, without assuming equal
variances), two-sided at ALPHA = 0.05. The critical value of Student's t is taken from a table for small
degrees of freedom and from the Cornish-Fisher expansion above it, so only numpy is needed.

With fewer than MIN_INTERVALS values on either side there is no spread to compare against, and the answer
is "too few intervals to judge noise" rather than a guess.

Only the intervals that carry load are a sample of the server at work (`loaded`): the idle tail of a capture
that outlasted its load (requests per interval 2982, 3125, 3099, 50, 0) holds per-request values of a few
requests or none, whose spread buried a ×32 change of CPU per request (t=2.6; t=212 in a recording with
load in every interval).

A rate over the whole capture (requests/s, calls/s, CPU use: a total, a count or a sum of times, over the
capture's duration) is compared as what it is, two totals over their durations (`compare_totals`), not as a
mean of interval values: a capture whose load filled 3 of its 12 seconds has a whole-capture rate a quarter
of its loaded intervals', and the change of the one judged against the spread of the others read Redis's
requests/s -97% "within noise (t=-3.6)". A total's variance is its intervals' dispersion times the total
(quasi-Poisson: an interval's count varies `dispersion` times as much as a Poisson count of its mean,
never less than a Poisson count), so idle seconds add neither to the total nor to its noise. With every
interval loaded and equal, this is Welch's t on the intervals; it reads the same with any idle part.
Either way Welch–Satterthwaite's degrees of freedom come from the intervals, so with 3 intervals a side a
change beyond about 2.5 times the intervals' spread (standard deviation) is significant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

MIN_INTERVALS = 3
ALPHA = 0.05
SIGNIFICANT = "significant"
WITHIN_NOISE = "within noise"
TOO_FEW = "too few intervals to judge noise"
# Which test judged a change (NoiseTest.test; the diff's table and --json say it).
INTERVALS_TEST = "intervals"  # Welch's t on the interval values
TOTALS_TEST = "totals"        # the capture totals, with their intervals' dispersion (compare_totals)

# Two-sided 5% critical values of Student's t for 1..30 degrees of freedom.
_T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
          2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
          2.045, 2.042)
_Z_975 = 1.959964
RESCALE_ABOVE = 1e50

# An interval carries load when its requests/s reach MIN_LOAD_SHARE of the capture's reference rate: the
# median over the intervals with at least LOAD_REFERENCE_SHARE of the busiest interval's rate. The median
# shrugs off a burst, and leaving the near-idle intervals out of it keeps it the loaded intervals' median
# even when the capture idled most of its time (a plain median would then be an idle interval's).
MIN_LOAD_SHARE = 0.5
LOAD_REFERENCE_SHARE = 0.1


@dataclass(frozen=True)
class NoiseTest:
    verdict: str          # SIGNIFICANT, WITHIN_NOISE or TOO_FEW
    t: float | None       # Welch's t (after - before); None when not computed
    df: float | None
    n_before: int
    n_after: int
    test: str | None = None  # INTERVALS_TEST or TOTALS_TEST; None when no test was made


@dataclass(frozen=True)
class Total:
    """A total over a capture as a rate: `rate` over `seconds` (the whole capture's), and the rates of the
    intervals that sample its noise (`interval_rates`) over theirs (`interval_seconds`)."""

    rate: float
    seconds: float
    interval_rates: Sequence[float]
    interval_seconds: Sequence[float]
    events: bool = True  # a count of events (requests, calls), which varies at least as a Poisson count does;
    # else a measured quantity (CPU time), whose intervals alone say how it varies

    def intervals(self) -> np.ndarray:
        """The intervals' own totals (rate × seconds), those that are defined."""
        totals = np.asarray(self.interval_rates, dtype=float) * np.asarray(self.interval_seconds, dtype=float)
        return totals[np.isfinite(totals)]


def t_critical(df: float) -> float:
    """Two-sided 5% critical t; non-integer df round down (the conservative side)."""
    whole = max(1, int(math.floor(df)))
    if whole <= len(_T_975):
        return _T_975[whole - 1]
    z = _Z_975
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


def welch(difference: float, va: float, vb: float, na: int, nb: int, test: str) -> NoiseTest:
    """The verdict on `difference` given the two sides' variances of their estimates (va, vb) and how many
    intervals each came from (the Welch–Satterthwaite degrees of freedom). No change is never
    significant; a change between two exactly known values always is."""
    if not difference:
        return NoiseTest(WITHIN_NOISE, 0.0, None, na, nb, test)
    if va + vb == 0:
        return NoiseTest(SIGNIFICANT, math.copysign(math.inf, difference), math.inf, na, nb, test)
    t = difference / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1))
    verdict = SIGNIFICANT if abs(t) > t_critical(df) else WITHIN_NOISE
    return NoiseTest(verdict, float(t), float(df), na, nb, test)


def compare(before, after, difference: float | None = None) -> NoiseTest:
    """Welch's t-test of two samples of one metric (values that are not finite, from undefined intervals,
    are dropped). `difference`, when given, is the change to judge (the whole-capture values' after -
    before, the change a diff writes) in place of the difference of the samples' means: the intervals give
    the spread only. They may measure it differently from the whole capture (writes per request: every
    write in an interval, the requests' own writes in the whole), and a constant offset between the two
    once made `2 -> 2, +0%` "significant (t=-250.3)". No change is never significant."""
    a = np.asarray(before, dtype=float)
    b = np.asarray(after, dtype=float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if len(a) < MIN_INTERVALS or len(b) < MIN_INTERVALS:
        return NoiseTest(TOO_FEW, None, None, len(a), len(b))
    # t and its degrees of freedom do not depend on the unit. Values so large that the fourth powers below
    # would overflow (a forged capture's rates can reach 1e300) are taken in units of the largest.
    largest = max(np.abs(a).max(), np.abs(b).max())
    if largest > RESCALE_ABOVE:
        a, b = a / largest, b / largest
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    if difference is None:
        difference = b.mean() - a.mean()
    elif largest > RESCALE_ABOVE:
        difference = difference / largest
    return welch(difference, va, vb, len(a), len(b), INTERVALS_TEST)


def compare_totals(before: Total, after: Total) -> NoiseTest:
    """Two totals over their captures compared as totals (the module docstring): the change is the rates'
    after - before, each rate's variance dispersion × total / seconds², the dispersion the variance of the
    intervals' totals over their mean (for a count of events, at least 1: a Poisson count's)."""
    a, b = before.intervals(), after.intervals()
    totals = (before.rate * before.seconds, after.rate * after.seconds)
    if (len(a) < MIN_INTERVALS or len(b) < MIN_INTERVALS or min(before.seconds, after.seconds) <= 0
            or not all(map(math.isfinite, totals))):
        return NoiseTest(TOO_FEW, None, None, len(a), len(b))
    # In units of the largest total (t does not depend on the unit): the squares below stay finite for a
    # forged capture's 1e300, and the Poisson floor is one event in those units.
    unit = max(np.abs(a).max(), np.abs(b).max(), *map(abs, totals)) or 1.0
    variances = []
    for side, intervals, total in ((before, a / unit, totals[0] / unit), (after, b / unit, totals[1] / unit)):
        mean, poisson = intervals.mean(), 1 / unit if side.events else 0.0
        dispersion = max(intervals.var(ddof=1) / mean, poisson) if mean > 0 else poisson
        variances.append(dispersion * abs(total) / side.seconds ** 2)
    return welch((after.rate - before.rate) / unit, *variances, len(a), len(b), TOTALS_TEST)


def load_reference(rates) -> float:
    """The reference requests/s of a capture's intervals (see MIN_LOAD_SHARE); 0 without any request."""
    r = np.asarray(rates, dtype=float)
    r = r[np.isfinite(r)]
    if not len(r) or r.max() <= 0:
        return 0.0
    return float(np.median(r[r >= LOAD_REFERENCE_SHARE * r.max()]))


def loaded(rates) -> np.ndarray:
    """Which intervals carry load, from their requests/s: at least MIN_LOAD_SHARE of `load_reference`. A
    capture without any request has no load to judge by, and every interval counts."""
    r = np.asarray(rates, dtype=float)
    reference = load_reference(r)
    if reference <= 0:
        return np.ones(len(r), dtype=bool)
    return np.isfinite(r) & (r >= MIN_LOAD_SHARE * reference)
