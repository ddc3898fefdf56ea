"""A minimal self-contained HTML page: inline CSS, tables, PNG figures as data URIs. No scripts, no
external resources, so a report can be mailed or attached to a ticket and open anywhere.

Every text given to these functions is data, never markup: it is escaped here (a thread may name itself
`<script>`), with its control and invisible characters written as escapes first (untrusted.printable).
"""

from __future__ import annotations

import html

from spinscope.untrusted import printable

CSS = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2em auto; padding: 0 1.5em;
       max-width: 1100px; color: #222; line-height: 1.4; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
.verdict { padding: 0.6em 1em; margin: 0.6em 0; border-left: 6px solid; background: #fafafa; }
.critical { border-color: #c62828; } .warning { border-color: #ef6c00; } .info { border-color: #1565c0; }
.ok { border-color: #2e7d32; } .note { color: #555; font-style: italic; }
img { max-width: 100%; display: block; margin: 0.8em 0; }
.wide { max-width: 100%; overflow-x: auto; } p, li, strong { overflow-wrap: anywhere; }
"""


def escape(text) -> str:
    """`text` as HTML character data or an attribute value."""
    return html.escape(printable(str(text)))


def page(title: str, body: list) -> str:
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{escape(title)}</title>"
            f"<style>{CSS}</style></head><body>\n<h1>{escape(title)}</h1>\n" + "\n".join(body) + "\n</body></html>\n")


def heading(text: str) -> str:
    return f"<h2>{escape(text)}</h2>"


def paragraph(text: str, css: str = "") -> str:
    return f"<p class=\"{css}\">{escape(text)}</p>" if css else f"<p>{escape(text)}</p>"


def verdict(css: str, headline: str, lines: list = ()) -> str:
    items = "".join(f"<li>{escape(line)}</li>" for line in lines)
    return f"<div class=\"verdict {css}\"><strong>{escape(headline)}</strong>" + (f"<ul>{items}</ul>" if items else "") + "</div>"


def table(headers: list, rows: list, titles: tuple | None = None) -> str:
    """A table; titles, if given, one per header: what it means, shown on hover."""
    head = "".join(f"<th title=\"{escape(t)}\">{escape(h)}</th>" if t else f"<th>{escape(h)}</th>"
                   for h, t in zip(headers, titles or [""] * len(headers)))
    body = "".join("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    # in a box as wide as the text column at most, that scrolls sideways when the table is wider (a
    # threads table of 17 columns is 1,170 px wide at 800 px)
    return f"<div class=\"wide\"><table><tr>{head}</tr>{body}</table></div>"


def figure(png_base64: str | None, alt: str) -> str:
    if png_base64 is None:
        return ""
    return f"<img alt=\"{escape(alt)}\" src=\"data:image/png;base64,{png_base64}\">"
