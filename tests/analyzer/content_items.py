"""The content of a terminal text and of an HTML page, as comparable items: the lines of text (a label's
summary, a detail, a note) and the tables' rows. Headings and table titles are structure, not content;
whitespace runs are one space."""

from __future__ import annotations

import re
from html.parser import HTMLParser

BOX = "│┃"
RULES = set("┏┓┗┛┡┩└┘━─┳┻╇╈┼╋┃│┌┐┴┬├┤ ")


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def terminal_items(text: str) -> tuple:
    """(lines, rows) of a console's text export (wide enough that no line wraps)."""
    lines, rows = [], []
    raw_lines = text.splitlines()
    for i, raw in enumerate(raw_lines):
        line = raw.rstrip()
        if not line.strip() or set(line) <= RULES:
            continue
        if i + 1 < len(raw_lines) and raw_lines[i + 1].lstrip().startswith("┏"):
            continue  # a table's title: structure, as the page's headings
        if line.lstrip()[0] in "┏┡└":  # a border with the table's columns' joints
            continue
        if line.lstrip()[0] in BOX:
            rows.append(tuple(norm(cell) for cell in re.split(f"[{BOX}]", line.strip())[1:-1]))
        else:
            lines.append(norm(line))
    return lines, rows


class _Page(HTMLParser):
    TEXT = {"p", "strong", "li", "h1", "h2", "th", "td"}

    def __init__(self):
        super().__init__()
        self.lines, self.rows, self.headings = [], [], []
        self._stack, self._text, self._row = [], [], None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self._row = []
        if tag in self.TEXT:
            self._stack.append(tag)
            self._text = []

    def handle_endtag(self, tag):
        if tag == "tr" and self._row is not None:
            self.rows.append(tuple(self._row))
            self._row = None
        if tag in self.TEXT and self._stack and self._stack[-1] == tag:
            self._stack.pop()
            text = norm("".join(self._text))
            if tag in ("th", "td"):
                self._row.append(text)
            elif tag in ("h1", "h2"):
                self.headings.append(text)
            elif text:
                self.lines.append(text)
            self._text = []

    def handle_data(self, data):
        if self._stack:
            self._text.append(data)


def page_items(page: str) -> tuple:
    """(lines, rows, headings) of an HTML page."""
    parser = _Page()
    parser.feed(page)
    return parser.lines, parser.rows, parser.headings
