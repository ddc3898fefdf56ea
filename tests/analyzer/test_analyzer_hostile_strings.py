"""A traced process chooses its thread names and its command line; in every output they are data.

The terminal shows them as written, never as rich markup, emoji codes or escape sequences (control and
invisible characters as visible escapes, untrusted.printable); the HTML page escapes them and its figures
draw them without mathtext; JSON carries them unchanged. The captures here are bundled recordings whose
names were replaced by hostile ones.
"""

from __future__ import annotations

import html
import json
import warnings
from pathlib import Path

import pytest
from rich.console import Console

from spinscope.analysis.schema import COUNTERS
from spinscope.output.console import plain
from spinscope.untrusted import printable
from paths import CAPTURES


HOSTILE = [
    "[/]",                          # a closing tag with nothing to close: MarkupError
    "x[/bold]y",                    # closing a tag never opened: MarkupError
    "[link=https://evil]ok[/]",     # a hyperlink (OSC 8) in the user's terminal
    "$\\frac{a}{$",                 # matplotlib mathtext that does not parse
    "\x1b[31mred",                  # a raw escape sequence
    "a\rb",                         # carriage return: rewrites the line
    "\u202e",                       # right-to-left override: reorders the line
    "fifteen-bytes!!",              # as long as a comm gets (TASK_COMM_LEN - 1)
    "",                             # no name at all
    ":smile:",                      # a rich emoji code
    "<b>&amp;</b>",                 # HTML
    "tab\there\n",                  # tab and newline
    "\x9b31m",                      # C1 CSI: an escape sequence in one byte
    "back\\slash",                  # a backslash: doubled, so escapes stay unambiguous
]
TARGET_COMM = "\x1b]8;;https://evil\x07[b]click[/b]\x1b]8;;\x07"  # a hyperlink by raw OSC 8
TARGET_CMDLINE = ["/srv/\x1b[2Jserver", "--name=[/]", "$x$"]


def hostile_capture(source: str, names: list) -> dict:
    """The bundled capture `source` with its threads named `names` (in order; idle threads with no
    counts are added when there are more names than threads) and a hostile target name and command line."""
    doc = json.loads((CAPTURES / source).read_text())
    threads = doc["threads"]
    pid = doc["target"]["pid"]
    while len(threads) < len(names):
        idle = {**threads[0], **{counter: 0 for counter in COUNTERS}, "poll_events_hist": []}
        idle["tid"] = max(t["tid"] for t in threads) + 1
        idle["pid"] = pid
        threads.append(idle)
    for thread, name in zip(threads, names):
        thread["comm"] = name
    doc["target"].update(comm=TARGET_COMM, cmdline=TARGET_CMDLINE)
    return doc


@pytest.fixture
def hostile(tmp_path):
    """Two hostile captures: every hostile name lands on a busy thread in one of them."""
    def write(name: str, doc: dict) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(doc))  # ensure_ascii: the lone surrogate is written as \ud800
        return path

    busy = 5  # the threads of either capture, all busy: the others named are idle ones added
    rotated = HOSTILE[busy:2 * busy] + HOSTILE[:busy] + HOSTILE[2 * busy:]
    return (write("before.json", hostile_capture("reactor-split.json", HOSTILE)),
            write("after.json", hostile_capture("reactor-worker.json", rotated)))


def assert_no_terminal_control(text: str) -> None:
    """Nothing that a terminal would act on: no C0 control but the newline, no DEL, no C1."""
    acting = sorted({f"{ord(c):#x}" for c in text if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) < 0xa0})
    assert acting == [], "control characters reached the terminal"
    assert "\u202e" not in text and not any(0xd800 <= ord(c) < 0xe000 for c in text)


def assert_clean_run(result) -> None:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "Error" not in result.stderr, result.stderr


@pytest.mark.parametrize("text, shown", [
    ("refserver", "refserver"),
    ("\x1b[31mred", "\\x1b[31mred"),
    ("a\rb\tc\nd", "a\\rb\\tc\\nd"),
    ("\x00\x7f\x9b", "\\x00\\x7f\\x9b"),
    ("\u202e\u200b", "\\u202e\\u200b"),
    ("\U000e0001", "\\U000e0001"),       # a format character beyond the BMP (language tag)
    ("\ud800", "\\ud800"),
    ("back\\slash", "back\\\\slash"),
    ("[/] $x$ <b> é 工作 🙂", "[/] $x$ <b> é 工作 🙂"),  # markup, TeX, HTML and wide characters are printable
    ("", ""),
])
def test_printable_escapes_what_is_not_shown_as_itself(text, shown):
    assert printable(text) == shown


def test_plain_is_never_markup_or_emoji():
    console = Console(record=True, width=200, color_system=None, file=open("/dev/null", "w"))
    for name in HOSTILE:
        console.print(plain(name, "bold"))
    shown = console.export_text()
    assert shown.splitlines() == [printable(name) for name in HOSTILE]


def test_report_terminal_shows_the_names_as_written(hostile, cli):
    for path in hostile:
        result = cli("report", path)
        assert_clean_run(result)
        assert_no_terminal_control(result.stdout)
        assert "\x1b]8;" not in result.stdout  # no hyperlink
        assert printable(TARGET_COMM) in result.stdout.splitlines()[0]
        names = json.loads(path.read_text())["threads"]
        for thread in names:
            assert f"{printable(thread['comm'])}/{thread['tid']}" in result.stdout
        assert ":smile:" in result.stdout and "\U0001f604" not in result.stdout


def test_report_html_renders_figures_and_escapes_the_names(hostile, cli, tmp_path):
    for path in hostile:
        out = tmp_path / f"{path.stem}.html"
        result = cli("report", path, "--html", out)
        assert_clean_run(result)
        page = out.read_text(encoding="utf-8")
        assert page.count("data:image/png;base64,") >= 4  # syscall mix, writes, events per poll, handoff graph
        assert_no_terminal_control(page.replace("\n", ""))
        assert html.escape(printable(TARGET_COMM)) in page
        for thread in json.loads(path.read_text())["threads"]:
            assert html.escape(f"{printable(thread['comm'])}/{thread['tid']}") in page
        assert "<b>&amp;</b>" not in page and "[link=https://evil]ok[/]" in page


@pytest.mark.parametrize("names", [["$\\frac{a}{$", "\x1b[31mred"], ["[/]", "\u202e"], ["", "$"],
                                   ["工作线程", "🙂x"]])
def test_handoff_graph_draws_hostile_names(names, capture_file):
    """The graph names each thread when it has few (fanout-split-small: two), in text without mathtext,
    and says nothing on stderr of glyphs its font lacks."""
    from spinscope.analysis.capture import load
    from spinscope.analysis.metrics import analyze
    from spinscope.output import figures

    analysis = analyze(load(capture_file(hostile_capture("fanout-split-small.json", names))))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert figures.handoff_graph(analysis) and figures.syscall_mix(analysis)


def test_report_json_carries_the_names_unchanged(hostile, cli):
    for path in hostile:
        result = cli("report", "--json", path)
        assert_clean_run(result)
        doc = json.loads(result.stdout)
        source = json.loads(path.read_text())
        assert [t["comm"] for t in doc["metrics"]["threads"]] == [t["comm"] for t in source["threads"]]
        assert doc["capture"]["target"]["comm"] == TARGET_COMM
        assert doc["capture"]["target"]["cmdline"] == TARGET_CMDLINE


def test_diff_of_hostile_captures(hostile, cli, tmp_path):
    before, after = hostile
    result = cli("diff", before, after)
    assert_clean_run(result)
    assert_no_terminal_control(result.stdout)
    assert "\x1b]8;" not in result.stdout
    assert result.stdout.count(printable(TARGET_COMM)) >= 2  # before: and after: headlines

    out = tmp_path / "diff.html"
    assert_clean_run(cli("diff", before, after, "--html", out))
    page = out.read_text(encoding="utf-8")
    assert html.escape(printable(TARGET_COMM)) in page and page.count("data:image/png;base64,") >= 1

    result = cli("diff", "--json", before, after)
    assert_clean_run(result)
    doc = json.loads(result.stdout)
    assert doc["before"]["file"] == str(before) and doc["after"]["file"] == str(after)


@pytest.mark.parametrize("name", ["x[/bold]y", "\x1b[31mred", "a\rb", "$\\frac{a}{$"])
def test_a_verdict_naming_a_hostile_thread(name, tmp_path, cli):
    """write-spin appears between the clean and the spinning loop, and its verdict names the spinning
    thread: as data in the terminal and the page, unchanged in JSON."""
    paths = []
    for source in ("event-loop-clean.json", "event-loop-spin-100k.json"):
        paths.append(tmp_path / source)
        paths[-1].write_text(json.dumps(hostile_capture(source, [name])))
    thread = f"event loop '{name}' (tid {json.loads(paths[1].read_text())['threads'][0]['tid']})"

    result = cli("diff", *paths)
    assert_clean_run(result)
    assert_no_terminal_control(result.stdout)
    assert "appeared (critical): write-spin" in result.stdout
    assert printable(thread) in result.stdout

    doc = json.loads(cli("diff", "--json", *paths).stdout)
    summary, = (label["summary"] for label in doc["after"]["labels"] if label["name"] == "write-spin")
    assert thread in summary

    out = tmp_path / "diff.html"
    assert_clean_run(cli("report", paths[1], "--html", out))
    assert html.escape(printable(thread)) in out.read_text(encoding="utf-8")
