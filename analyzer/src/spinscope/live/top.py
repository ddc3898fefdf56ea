"""`spinscope top`: watch a server's threads live, refreshed every second.

One row per thread (or per role, `g`): requests/s, writes, EAGAINs and retries of an EAGAIN per request, empty
polls/s, handoffs per request, futex wait, CPU, over the last second; the labels of the last `--window`
seconds on top with their measured share. Keys: `s`/`S` sort by the next/previous column, `r` reverses,
`g` switches between threads and roles, `q` (or Ctrl-C) quits, restoring the terminal; `-o FILE` also
writes the whole session as a capture. Built on rich's Live (alternate screen); the data is the
collector's --stream (spinscope.live.stream, docs/live.md). With `-- COMMAND` the collector runs the command, which
quitting ends (SIGTERM, through the collector), and top's exit status is the command's.
"""

from __future__ import annotations

import argparse
import math
import os
import queue
import select
import signal
import sys
import termios
import time
import tty
from dataclasses import dataclass
from pathlib import Path

from spinscope.errors import SpinscopeError, UsageError
from spinscope.tracing import stacks_helper, targets

DEFAULT_WINDOW_S = targets.TOP_WINDOW_S
ROLE_VIEW_THREADS = 64  # more threads than this: start in the role view


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    fmt: str  # format spec of the value; None shows as "-"


COLUMNS = (
    Column("requests_per_s", "req/s", ",.0f"),
    Column("writes_per_request", "writes/req", ",.2f"),
    Column("eagain_per_request", "EAGAIN/req", ",.2f"),
    Column("eagain_retries_per_request", "EAGAIN retries/req", ",.2f"),
    Column("empty_polls_per_s", "empty polls/s", ",.0f"),
    Column("handoffs_per_request", "handoffs/req", ",.2f"),
    Column("futex_ms_per_s", "futex ms/s", ",.1f"),
    Column("cpu_percent", "CPU %", ".1f"),
)
SORT_KEYS = ("cpu_percent", "requests_per_s", "writes_per_request", "eagain_per_request", "eagain_retries_per_request",
             "empty_polls_per_s", "handoffs_per_request", "futex_ms_per_s", "name")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("top")  # its help and description: cli.VERBS
    targets.add_options(p, targets.TOP)
    p.add_argument("--output", "-o", help="also write what was seen as a capture file, on exit")
    p.add_argument("--window", type=float, default=DEFAULT_WINDOW_S,
                   help=f"seconds the labels are judged over (default {DEFAULT_WINDOW_S:g})")
    p.add_argument("--interval", type=float, default=targets.TOP_REFRESH_S,
                   help=f"seconds between refreshes (default {targets.TOP_REFRESH_S:g})")
    p.add_argument("--roles", action="store_true", help="start with one row per role instead of per thread")
    p.add_argument("--batch", type=int, metavar="N", default=0,
                   help="no screen: print N refreshes as text and exit (for scripts and logs)")
    p.set_defaults(func=run)


# ---------------------------------------------------------------------------------------------------------
# The model: rows from two stream lines


def rows(last, cumulative, by_role: bool) -> tuple:
    """(process row, [row]) over the capture `last` (one window), roles from `cumulative` (the whole
    stream so far, so a thread idle for a second keeps its role). A row: name, tid (None for a role),
    role, threads, ended, and every COLUMNS key (None when undefined). A thread's futex ms/s and CPU % are
    at most the window's (bounded, below); a role's and the process's, the sum of their threads'."""
    from spinscope.analysis.capture import summed
    from spinscope.analysis.counters import handoffs
    from spinscope.analysis.coverage import request_counting
    from spinscope.analysis.metrics import derive
    from spinscope.analysis.roles import infer_roles

    seconds = last.duration_s
    requests = last.request_count
    roles = infer_roles(cumulative.threads, cumulative.request_count)
    threads = {tid: {**thread, "role": roles.get(tid, "idle")} for tid, thread in last.threads.items()}

    def bounded(counters) -> dict:
        """A thread's futex wait and CPU per second of the window, at most the whole window: both are
        counted when they end (a wait when the thread wakes, a run when it is switched out), so a thread
        idle in a wait since before the window, woken in it (at exit, say), would otherwise show seconds of
        waiting in one second (1,025,004.7 ms/s over the last 4 ms of a capture)."""
        limit = seconds * 1e9
        return {"futex_ms_per_s": min(counters["futex_wait_ns"], limit) / 1e6 / seconds if seconds else None,
                "cpu_percent": 100 * min(counters["oncpu_ns"], limit) / 1e9 / seconds if seconds else None}

    def summed_rows(group: list) -> dict:
        """A role's or the process's: the sum of its threads' bounded values."""
        if not seconds:
            return {"futex_ms_per_s": None, "cpu_percent": None}
        each = [bounded(thread) for thread in group]
        return {key: sum(values[key] for values in each) for key in ("futex_ms_per_s", "cpu_percent")}

    def row(counters, name, tid, role, count, ended, own_requests, per_second):
        m = derive(counters, requests, seconds, schema=last.schema)
        return {"name": name, "tid": tid, "role": role, "threads": count, "ended": ended,
                "requests_per_s": own_requests / seconds if seconds else None,
                "writes_per_request": m["writes_per_request"], "eagain_per_request": m["eagain_per_request"],
                "eagain_retries_per_request": m["eagain_retries_per_request"],
                "empty_polls_per_s": counters["poll_zero"] / seconds if seconds else None,
                "handoffs_per_request": m["handoffs_per_request"],
                **per_second,
                "handoffs_per_s": handoffs(counters) / seconds if seconds else None}

    process = row(last.totals, last.name, None, "", len(threads), False, requests, summed_rows(list(threads.values())))
    process["counted"] = request_counting(cumulative)  # since the stream began
    for key, total in (("writes_per_request", "write_calls"), ("eagain_per_request", "write_eagain"),
                       ("eagain_retries_per_request", "spin_eagain")):
        process[key] = last.requests[total] / requests if requests else None
    out = []
    if by_role:
        by_role: dict = {}
        for thread in threads.values():
            by_role.setdefault(thread["role"], []).append(thread)
        for role, group in sorted(by_role.items()):
            sums = summed(group)
            out.append(row(sums, role, None, role, len(group), not any(thread["alive"] for thread in group),
                           sums["responses_written"], summed_rows(group)))
    else:
        for tid, t in threads.items():
            out.append(row(t, t["comm"], tid, t["role"], 1, not t["alive"], t["responses_written"], bounded(t)))
    return process, out


def sort_rows(table: list, key: str, reverse: bool) -> list:
    if key == "name":
        return sorted(table, key=lambda r: (r["name"], r["tid"] or 0), reverse=reverse)
    present = [r for r in table if r[key] is not None and not math.isnan(r[key])]
    absent = [r for r in table if r not in present]
    return sorted(present, key=lambda r: r[key], reverse=not reverse) + absent


@dataclass
class LabelLine:
    severity: str  # a label's severity, or "finding" for a finding (busy-polling, write-wait)
    title: str  # the label's or finding's name, as in the report, --json and the exporter
    share: float | None  # what acting on it saves (Label.saving): a share of the process's CPU or request time
    summary: str
    site: str | None = None  # with --stacks: the top call site (`conn_write (conn.c:247)`)
    share_of: str | None = None  # "CPU" or "request time" (Label.saving_of)
    saves: str | None = None  # `saves 25% of the process's CPU, 0.004 of one CPU`, `saves at least ...` (Saving.phrase)


def judge(span) -> tuple:
    """([LabelLine], [note]) of the capture `span` (the last --window seconds)."""
    from spinscope.analysis.labels import assess
    from spinscope.analysis.metrics import analyze

    assessment = assess(analyze(span))
    # labels and findings in one order, by what acting on them saves (the report's order)
    from spinscope.analysis.savings import of_verdict

    return ([LabelLine(getattr(item, "severity", "finding"), item.name, item.saving, item.summary,
                       item.call_sites[0]["where"] if getattr(item, "call_sites", None) else None, item.saving_of,
                       of_verdict(item).phrase() if item.saving is not None else None)
             for item in assessment.ranked()], assessment.notes)


# ---------------------------------------------------------------------------------------------------------
# The view


@dataclass
class ViewState:
    sort: str = "cpu_percent"
    reverse: bool = False
    by_role: bool = False
    ended: str = ""  # why the stream ended, once it has
    saved: str = ""
    runtime: object = None  # with --stacks on a CPython, JVM or Node target: its stacks helper (stacks_helper.LiveStacks)


def _cell(value, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, fmt)


SEVERITY_STYLES = {"critical": "bold red", "warning": "yellow", "info": "cyan", "finding": "dim cyan"}


def render(state: ViewState, header: dict, process: dict, table: list, labels: list, notes: list, height: int):
    """The screen: the header, the labels, the table."""
    from rich.console import Group
    from rich.text import Text

    parts = [_title(header, process)]
    if state.ended:
        parts.append(Text(f"ENDED: {state.ended} (q quits)", style="bold reverse"))
    parts += _label_lines(labels, header, notes)
    shown = sort_rows(table, state.sort, state.reverse)
    room = max(3, height - len(parts) - 5)
    parts.append(_table(state, shown[:room], process))
    more = f"  ({len(shown) - room} more rows)" if len(shown) > room else ""
    parts.append(Text(f"sort: {state.sort}{' (reversed)' if state.reverse else ''}  view: "
                      f"{'roles' if state.by_role else 'threads'}{more}   s/S sort  r reverse  g threads/roles  q quit"
                      + (f"   {state.saved}" if state.saved else ""), style="dim"))
    return Group(*parts)


def _title(header: dict, process: dict):
    from rich.text import Text

    from spinscope.output.console import plain

    title = Text()
    title.append("spinscope top  ", style="bold")
    title.append_text(plain(header["name"]))
    title.append(f"  {header['elapsed']:.0f} s  {process['threads']} thread{'' if process['threads'] == 1 else 's'}  "
                 f"{_cell(process['requests_per_s'], ',.0f')} req/s  CPU {_cell(process['cpu_percent'], '.0f')}%")
    if process.get("counted"):
        title.append(f"  ({process['counted']})", style="dim")
    if header.get("stacks_note"):
        title.append(f"  ({header['stacks_note']})", style="dim")
    return title


def _label_lines(labels: list, header: dict, notes: list) -> list:
    """A line per label, cut to the screen's width; without one, that there is none (and the first note)."""
    from rich.text import Text

    from spinscope.output.console import plain

    if not labels:
        return [Text(f"no label over the last {header['window']:.0f} s" + (f": {notes[0]}" if notes else ""),
                     style="dim")]
    lines = []
    for label in labels:
        line = Text(f"{label.severity.upper():8} ", style=SEVERITY_STYLES.get(label.severity, ""))
        line.append(f"{label.title}", style="bold")
        if label.saves:
            line.append(f"  {label.saves}")
        if label.site:
            line.append("  at ")
            line.append_text(plain(label.site))
        line.append("  ")
        line.append_text(plain(label.summary))
        line.no_wrap = True
        line.overflow = "ellipsis"
        lines.append(line)
    return lines


def _table(state: ViewState, rows: list, process: dict):
    """The rows shown (threads, or roles), the sort column marked, and the process's row last."""
    from rich.table import Table
    from rich.text import Text

    from spinscope.output.console import plain

    table_view = Table(box=None, header_style="bold reverse", pad_edge=False, expand=False)
    table_view.add_column("tid" if not state.by_role else "threads", justify="right")
    table_view.add_column("role" if not state.by_role else "", no_wrap=True)
    table_view.add_column("thread" if not state.by_role else "role", no_wrap=True, max_width=24)
    for column in COLUMNS:
        marker = (" v" if not state.reverse else " ^") if column.key == state.sort else ""
        table_view.add_column(column.title + marker, justify="right")
    for r in rows:
        first = str(r["threads"]) if state.by_role else str(r["tid"])
        role = "ended" if r["ended"] else ("" if state.by_role else r["role"])
        table_view.add_row(first, role, plain(r["name"]), *(_cell(r[c.key], c.fmt) for c in COLUMNS),
                           style="dim" if r["ended"] else None)
    table_view.add_row("", "", Text("process", style="bold"), *(_cell(process[c.key], c.fmt) for c in COLUMNS),
                       style="bold")
    return table_view


# ---------------------------------------------------------------------------------------------------------
# The verb


def check_options(args: argparse.Namespace) -> None:
    targets.check(args, targets.TOP)
    for option, value in (("--window", args.window), ("--interval", args.interval)):
        if not math.isfinite(value) or value <= 0:
            raise UsageError(f"{option} must be a number of seconds > 0, not {value:g}")
    if args.interval < 0.1:
        raise UsageError("--interval must be at least 0.1 s")
    if args.output is not None and (not args.output or Path(args.output).is_dir()):
        raise UsageError(f"--output {args.output!r} must name a capture file")
    if not args.batch and not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("top needs a terminal (or --batch N for text)")


class Keys:
    """Single keys from the terminal, without echo, until restored."""

    def __init__(self) -> None:
        self.fd = sys.stdin.fileno()
        self.saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd)

    def read(self, timeout: float) -> str:
        if select.select([self.fd], [], [], timeout)[0]:
            return os.read(self.fd, 32).decode(errors="replace")
        return ""

    def restore(self) -> None:
        termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)


def run(args: argparse.Namespace) -> int:
    check_options(args)
    from rich.console import Console

    from spinscope.live import stream as live

    # The runtime stacks helper loads (about 2 s) while the collector attaches; it is stopped after the collector.
    runtime = (stacks_helper.LiveStacks.start(args.pid, args.stacks, args.children, args.window)
               if args.stacks and args.pid else None)
    try:
        stream = live.LiveCollector(targets.collector_target(args), output=Path(args.output) if args.output else None,
                                    interval=args.interval, command=args.command,
                                    extra=runtime.collector_args() if runtime else ())
    except BaseException:
        if runtime:
            runtime.close()
        raise
    err = Console(stderr=True)
    try:
        stream.wait_ready()
        if runtime:
            runtime.wait()
    except SpinscopeError as exc:
        stream.close()
        if runtime:
            runtime.close()
        if args.command and stream.proc.returncode in (126, 127):  # a shell's: not executable, not found
            raise SpinscopeError(str(exc), exit_code=stream.proc.returncode) from None
        raise
    history = live.History(args.window)
    state = ViewState(by_role=args.roles, runtime=runtime)
    status = 0
    try:
        if args.batch:
            status = _batch(args, stream, history, state)
        else:
            status = _screen(args, stream, history, state)
    finally:
        # With a command, the collector passes our SIGTERM on to it and waits for it (STOP_TIMEOUT_S).
        returncode = stream.stop()
        stream.close()
        if runtime:
            runtime.close()
        # With a command, the exit status is the command's: the collector's error line says it failed.
        written = returncode == 0 if not args.command else returncode >= 0 and not stream.error()
        if args.output:
            if written and Path(args.output).exists():
                err.print(f"spinscope top: wrote {args.output}", highlight=False)
            else:
                err.print(f"spinscope top: error: {args.output} not written: {stream.error() or 'the collector failed'}",
                          highlight=False)
    if args.command:  # the command's exit status, as the collector passed it on
        return returncode if returncode >= 0 else 128 - returncode
    return status


def _frame(args, history, state, height):
    """The renderable for the latest lines, or None before two lines."""
    last = history.last()
    if last is None:
        return None
    if state.runtime:
        state.runtime.take()
    span = history.span(state.runtime)
    newest = history.newest.capture
    process, table = rows(last, newest, state.by_role)
    labels, notes = judge(span)
    header = {"name": newest.name, "elapsed": newest.duration_s, "window": span.duration_s,
              "stacks_note": state.runtime.note() if state.runtime else None}
    return render(state, header, process, table, labels, notes, height)


def _ended_text(ended) -> str:
    reason = {"target-exited": "the target exited", "signal": "the collector was stopped",
              "duration": "the duration ended"}.get(ended.end_reason or "", ended.end_reason or "the collector stopped")
    error = next((line.split(": error: ", 1)[1] for line in reversed(ended.stderr) if ": error: " in line), "")
    # With -- COMMAND: how it ended, however the capture did (`the command (PID 12) exited with status 124
    # after 3.0 s`), as the collector says it.
    how = next((line.split(": ", 1)[1] for line in reversed(ended.stderr) if ": the command (PID " in line), "")
    return reason + (f": {error}" if error else "") + (f"; {how}" if how else "")


def _pump(stream, history, state) -> bool:
    """Take the lines that arrived; True if anything changed."""
    from spinscope.live.stream import Ended

    changed = False
    while True:
        try:
            item = stream.lines.get_nowait()
        except queue.Empty:
            return changed
        changed = True
        if isinstance(item, Ended):
            state.ended = _ended_text(item)
        else:
            history.add(item)


def _press(state: ViewState, keys: str) -> bool:
    """The keys pressed, applied to the view in order: s and S the next and previous sort column, r reverses
    it, g switches threads and roles. True at a q (quit): the keys after it are left."""
    for k in keys:
        if k in "qQ":
            return True
        if k in "sS":
            step = 1 if k == "s" else -1
            state.sort = SORT_KEYS[(SORT_KEYS.index(state.sort) + step) % len(SORT_KEYS)]
        elif k == "r":
            state.reverse = not state.reverse
        elif k == "g":
            state.by_role = not state.by_role
    return False


def _screen(args, stream, history, state) -> int:
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    console = Console()
    keys = Keys()

    def leave(signum, _frame):  # SIGTERM, or the terminal hung up: leave the screen as q does
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, leave) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with Live(Text("spinscope top: waiting for the first second of data..."), console=console, screen=True,
                  auto_refresh=False, transient=True) as view:
            role_decided = args.roles
            while True:
                changed = _pump(stream, history, state)
                if not role_decided and history.newest is not None:
                    state.by_role = len(history.newest.capture.threads) > ROLE_VIEW_THREADS
                    role_decided = True
                key = keys.read(0.1)
                if _press(state, key):
                    return 0
                if changed or key:
                    frame = _frame(args, history, state, console.size.height)
                    if frame is None and state.ended:
                        frame = Text(f"spinscope top: ENDED: {state.ended} (q quits)")
                    if frame is not None:
                        view.update(frame, refresh=True)
    except KeyboardInterrupt:
        return 0
    finally:
        keys.restore()
        for s, handler in previous.items():
            signal.signal(s, handler)


def _batch(args, stream, history, state) -> int:
    from rich.console import Console

    console = Console(width=160)
    printed = 0
    while printed < args.batch and not state.ended:
        time.sleep(0.05)
        if _pump(stream, history, state) and history.last() is not None:
            frame = _frame(args, history, state, 10_000)
            console.print(frame)
            printed += 1
    if state.ended:
        console.print(f"ENDED: {state.ended}")
    return 0
