"""A minimal self-contained HTML page: inline CSS, tables, PNG figures as data URIs, and only the scripts
its caller inlines (the flame graphs: output/flamegraph.py). No external resources, so a report can be mailed
or attached to a ticket and open anywhere; its Content-Security-Policy lets it load none (`default-src
'none'`) and run no script but its own (each by its sha256), whatever a name in it says.

Every text given to these functions is data, never markup: it is escaped here (a thread may name itself
`<script>`), with its control and invisible characters written as escapes first (untrusted.printable); data
for a script is JSON in a `<script type="application/json">`, with `<`, `>` and `&` escaped (json_data).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json

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
details { margin: 0.3em 0; } summary { cursor: pointer; overflow-wrap: anywhere; }
.flame-controls { display: flex; flex-wrap: wrap; gap: 0.4em 0.8em; align-items: center; margin: 0.6em 0; }
.flame-controls select, .flame-controls input { max-width: 100%; font: inherit; }
.flame-legend span { display: inline-block; margin-right: 1em; font-size: 0.85em; }
.flame-legend i { display: inline-block; width: 0.9em; height: 0.9em; margin-right: 0.3em; vertical-align: -0.1em; }
.flame-details { min-height: 2.8em; font-size: 0.85em; overflow-wrap: anywhere; }
.flame svg { display: block; }
"""


def escape(text) -> str:
    """`text` as HTML character data or an attribute value."""
    return html.escape(printable(str(text)))


def page(title: str, body: list, scripts: list = ()) -> str:
    """The page: its blocks, then its scripts (JavaScript we inline, never a name's text), the only ones its
    policy lets run."""
    policy = f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src {script_sources(scripts)}"
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\"><title>{escape(title)}</title>"
            f"<style>{CSS}</style></head><body>\n<h1>{escape(title)}</h1>\n" + "\n".join(body)
            + "".join(f"\n<script>{script}</script>" for script in scripts) + "\n</body></html>\n")


def script_sources(scripts: list) -> str:
    """The policy's script-src for these scripts: each one's hash, or 'none'."""
    hashes = [base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() for s in scripts]
    return " ".join(f"'sha256-{h}'" for h in hashes) or "'none'"


def json_data(element_id: str, value) -> str:
    """`value` as JSON for the page's scripts to read (JSON.parse of the element's text): ASCII, with `<`,
    `>` and `&` as \\u escapes, so no string in it can end the element or start another."""
    text = json.dumps(value, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f"<script type=\"application/json\" id=\"{escape(element_id)}\">{text}</script>"


def heading(text: str, anchor: str | None = None) -> str:
    return f"<h2 id=\"{escape(anchor)}\">{escape(text)}</h2>" if anchor else f"<h2>{escape(text)}</h2>"


def details(summary: str, content: str, anchor: str | None = None) -> str:
    """A block shown when its summary is clicked (no script needed); content is markup made here."""
    opening = f"<details id=\"{escape(anchor)}\">" if anchor else "<details>"
    return f"{opening}<summary>{escape(summary)}</summary>{content}</details>"


def links(lead: str, targets: list) -> str:
    """A paragraph: lead, then links to places in the page, [(text, anchor)]."""
    return f"<p>{escape(lead)} " + ", ".join(f"<a href=\"#{escape(anchor)}\">{escape(text)}</a>"
                                             for text, anchor in targets) + "</p>"


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
