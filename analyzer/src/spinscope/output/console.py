"""Output helpers shared by the verbs that print results: the terminal, JSON-safe values, writing files."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

from spinscope.errors import SpinscopeError
from spinscope.untrusted import printable

# Wide enough for the thread table when output goes to a file or pipe (rich would assume 80 columns).
PIPE_WIDTH = 160


def terminal() -> Console:
    return Console(highlight=False, width=None if sys.stdout.isatty() else PIPE_WIDTH)


def plain(text, style: str = "") -> Text:
    """`text` for the terminal as written, in `style`: never read as rich markup or emoji codes, its
    control and invisible characters as escapes (untrusted.printable). Everything spinscope prints
    that holds a string it did not write (a thread name, a collector's error line) goes through here;
    styles are applied to Text, never written as markup around such a string."""
    return Text(printable(str(text)), style=style)


def jsonable(value):
    """Plain JSON types: numpy scalars unwrapped, NaN and infinities as null (they are not JSON)."""
    # Without numpy loaded no value is a numpy scalar: report and doctor print without importing it.
    np = sys.modules.get("numpy")

    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if np is not None and isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def print_json(doc: dict) -> None:
    json.dump(jsonable(doc), sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def write_text(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise SpinscopeError(f"{path}: cannot write: {exc.strerror or exc}") from None
