"""Numbers for people: how spinscope writes every figure it prints, in three styles and one for sizes.

- fixed(value, digits)      report tables and verdicts: `0.40`, `12.5`, `4,000`
- number(value)             diff: three significant digits, so a before and an after read alike:
                            `0.0555`, `4.13`, `21`, `9,632`
- percent(share)            a share as a percentage, finer when small (`41%`, `8.9%`, `0.35%`), or with
                            a fixed number of decimals (`percent(share, 0)`: `41%`, `0%`)
- size_class(low, high)     a response-size class in binary units: `64–128 KiB`
- per_second(count, seconds) a count as a rate: `500/s`, `2.5/s`, `0.2/s`; None over less than MIN_RATE_S

An undefined value (None or NaN, a metric that cannot be computed) is written NOT_AVAILABLE by all of them.
Standard library only: the verbs that print nothing but text import this without numpy or pandas (numpy's
integers count as integers through numbers.Integral).
"""

from __future__ import annotations

import math
import numbers

NOT_AVAILABLE = "n/a"
SIGNIFICANT_DIGITS = 3  # number()
MAX_DECIMALS = 6  # number() of values so small that 3 significant digits would need more


MIN_RATE_S = 1.0  # a rate is said over at least this long: one thread exiting in a 1.5 ms capture is not "675/s"


def per_second(count, seconds) -> str | None:
    """`62,000/s`, `500/s`, `2.5/s`, `0.2/s` (whole from 10/s on, else number()'s 3 significant digits: 2
    requests in 10 s are not "0/s"), or None when `seconds` is under MIN_RATE_S."""
    if undefined(seconds) or seconds < MIN_RATE_S or undefined(count):
        return None
    rate = count / seconds
    return f"{rate:,.0f}/s" if rate >= 9.5 else f"{number(rate)}/s"


def undefined(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fixed(value, digits: int = 2) -> str:
    """`digits` decimals below 100; from 100 on a whole number with thousands separators."""
    if undefined(value):
        return NOT_AVAILABLE
    if isinstance(value, numbers.Integral) or float(value).is_integer() and abs(value) >= 100:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def number(value, signed: bool = False) -> str:
    """A value in 3 significant digits, without trailing zeros or exponents: `0.0555`, `4.13`, `21`, `9,632`;
    `signed` writes a + on positive values and zero (a change)."""
    if undefined(value):
        return NOT_AVAILABLE
    value = float(value)
    magnitude = abs(value)
    if magnitude >= 999.5:
        text = f"{magnitude:,.0f}"
    elif magnitude == 0:
        text = "0"
    else:
        decimals = min(max(SIGNIFICANT_DIGITS - 1 - math.floor(math.log10(magnitude)), 0), MAX_DECIMALS)
        text = _trim(f"{magnitude:.{decimals}f}")
    if text == "0":
        return "+0" if signed else "0"
    sign = "-" if value < 0 else ("+" if signed else "")
    return sign + text


def percent(share, digits: int | None = None, signed: bool = False) -> str:
    """A share (0.41) as a percentage: with `digits` decimals (`41%`), or by default as finely as a small
    share needs (`41%`, `8.9%`, `0.35%`, trailing zeros dropped); `signed` as in number()."""
    if undefined(share):
        return NOT_AVAILABLE
    if digits is not None:
        return f"{share:+.{digits}%}" if signed else f"{share:.{digits}%}"
    points = float(share) * 100
    magnitude = abs(points)
    if magnitude == 0:
        return "+0%" if signed else "0%"
    decimals = 0 if magnitude >= 9.95 else 1 if magnitude >= 0.995 else min(1 - math.floor(math.log10(magnitude)), 4)
    text = _trim(f"{magnitude:.{decimals}f}")
    sign = "-" if points < 0 else ("+" if signed else "")
    return f"{sign}{text}%"


def _trim(text: str) -> str:
    """`0.500` -> `0.5`, `2.0` -> `2`: the digits a rounding kept, without its trailing zeros."""
    return text.rstrip("0").rstrip(".") if "." in text else text


def size_class(bytes_min: int, bytes_max: int) -> str:
    """`64–128 KiB` for the log2 class [65536, 131071]; `0 B` and `1 B` for the one-value classes."""
    if bytes_min == bytes_max:
        return " ".join(_bytes(bytes_min))
    low, high = _bytes(bytes_min), _bytes(bytes_max + 1)
    if low[1] == high[1]:
        return f"{low[0]}–{high[0]} {high[1]}"
    return f"{low[0]} {low[1]}–{high[0]} {high[1]}"


def _bytes(n: int) -> tuple:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g}", unit
    return str(int(n)), "B"
