"""Strings spinscope did not write, shown as data.

A traced process chooses its thread names and its command line; a collector, server or load generator
writes its own error lines. Shown as they are, such a string can drive the reader's terminal (ESC starts
an escape sequence: colours, a hyperlink, a new window title; CR rewrites the line), reorder the line it
sits on (bidirectional overrides), hide (zero-width characters) or fail to encode (a lone surrogate).
`printable` writes those characters as escapes instead, so what a report shows is what the process
named itself, byte for byte readable.

Each output keeps its own syntax from being interpreted on top of that: the terminal takes rich Text
(`output.plain`), never markup; the HTML page escapes with `html.escape` (htmlpage); figures turn off
matplotlib's mathtext (figures). JSON is for machines and carries every string unchanged.
"""

from __future__ import annotations

# The characters written with a short escape; everything else not printable is \xNN, \uNNNN or \UNNNNNNNN,
# as Python's repr() writes it. A backslash is doubled, so that an escape is never ambiguous: a thread
# named `\x1b` (four characters) shows as `\\x1b`, one named ESC as `\x1b`.
SHORT_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def printable(text: str) -> str:
    """`text` with every character that is not printable (str.isprintable: controls C0, DEL and C1,
    format characters such as bidirectional overrides and zero-width joiners, separators other than
    the space, surrogates, unassigned code points) and the backslash written as an escape."""
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(_escape(char) if char == "\\" or not char.isprintable() else char for char in text)


def _escape(char: str) -> str:
    if char in SHORT_ESCAPES:
        return SHORT_ESCAPES[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
