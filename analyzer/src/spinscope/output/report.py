"""What `spinscope report` shows of a capture: verdicts first, then the evidence behind them.

Three renderings of the same Analysis + Assessment: a terminal summary (rich, render_terminal), a
self-contained HTML page (render_html) and a JSON document for machines (to_json).
"""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table
from rich.text import Text

from spinscope.analysis.labels import Assessment
from spinscope.analysis.metrics import METRICS, Analysis, role_edges, size_classes
from spinscope.analysis.roles import ROLE_NOUNS, ROLES, activity
from spinscope.analysis.runtime import runtime_of
from spinscope.analysis.verdicts import Finding
from spinscope.fmt import MIN_RATE_S, fixed, per_second, percent, size_class
from spinscope.output import htmlpage
from spinscope.output.console import plain
from spinscope.output.render import detail_lines, headline, print_finding, print_label

MAX_THREAD_ROWS = 30
MAX_EDGES = 10
# (header, column, digits or None for a percentage, meaning): the per-thread evidence. The meaning is the
# column's glossary line, under the table in the terminal and the header's title (on hover) in HTML.
THREAD_COLUMNS = (
    ("writes", "write_calls", 0, "socket write calls"),
    ("EAGAIN", "write_eagain", 0, "socket writes that returned EAGAIN (the send buffer full)"),
    ("EAGAIN retries", "write_spin_eagain", 0, "writes that retried an EAGAIN without waiting (write-spin)"),
    ("waited", "write_waited", 0, "writes that retried a stalled write after waiting for room"),
    ("reads", "read_calls", 0, "socket read calls"),
    ("rd EAGAIN", "read_eagain", 0, "socket reads that returned EAGAIN (nothing to read)"),
    ("polls", "poll_calls", 0, "poll calls (epoll_wait, poll, select and their variants)"),
    ("zero", "poll_zero_fraction", None, "share of poll calls that returned no event"),
    ("no t/o", "poll_nowait_fraction", None, "share of poll calls made with a zero timeout (checks that never wait)"),
    ("ev/poll", "events_per_poll", 1, "events returned per poll call"),
    ("futex", "futex_waits", 0, "futex waits (lock and condition waits)"),
    ("cs", "cs_total", 0, "context switches, voluntary and involuntary"),
    ("CPU ms", "cpu_ms", 0, "time on a CPU"),
    ("woke", "wakeups_sent", 0, "wakeups it sent to the target's threads"),
    ("woken", "wakeups_received", 0, "wakeups it received from the target's threads"),
)
THREAD_HEADERS = ("role", "thread", *(column[0] for column in THREAD_COLUMNS))
THREAD_MEANINGS = ("what the thread does, from its calls (docs/labels.md, \"Thread roles\")", "its name (thread id)",
                   *(column[3] for column in THREAD_COLUMNS))
SIZE_HEADERS = ("size", "responses", "writes/resp", "EAGAIN/resp", "partial/resp", "EAGAIN retries/resp",
                "waits/resp", "ms/req")
METRIC_HEADERS = ("metric", "kind", "value", "meaning")
EDGE_HEADERS = ("waker", "wakee", "mechanism", "wakeups", "per request")


# --- what the terminal, the HTML page and the JSON share --------------------------------------------

def no_label_line() -> str:
    return "No write-spin, spurious select or handoff overhead found."


def thread_glossary() -> str:
    """The threads table's columns, a line: what each header means."""
    return "columns: " + "; ".join(f"{header}: {meaning}" for header, meaning in zip(THREAD_HEADERS, THREAD_MEANINGS))


def thread_rows(analysis: Analysis) -> list:
    """(role, comm/tid, cells...) for the busiest threads, grouped by role (event loops first)."""
    order = {role: i for i, role in enumerate(ROLES)}
    busiest = sorted(analysis.threads.items(), key=lambda item: (order[item[1]["role"]], -activity(item[1])))
    rows = []
    for tid, thread in busiest[:MAX_THREAD_ROWS]:
        row = {**thread, "cs_total": thread["cs_voluntary"] + thread["cs_involuntary"],
               "cpu_ms": thread["oncpu_ns"] / 1e6}
        cells = [percent(row[col], 0) if digits is None else fixed(row[col], digits)
                 for _, col, digits, _ in THREAD_COLUMNS]
        rows.append([ROLE_NOUNS[row["role"]], thread_label(analysis, tid, row), *cells])
    return rows


def thread_label(analysis: Analysis, tid: int, row) -> str:
    """`comm/tid`, and `comm/tid (pid P)` for threads of a forked child when several processes were traced."""
    if _processes(analysis.threads) > 1 and row["pid"] != tid:
        return f"{row['comm']}/{tid} (pid {row['pid']})"
    return f"{row['comm']}/{tid}"


def metric_rows(values: dict) -> list:
    """(name, kind, value, meaning): the meaning is the metric's own phrase (metrics.METRICS), the one the
    diff and the verdicts use, so a name is explained the same way everywhere."""
    return [(metric.name, metric.kind, fixed(values[metric.name], 3),
             metric.phrase + (f" ({metric.unit})" if metric.unit else ""))
            for metric in METRICS]


def edge_rows(analysis: Analysis) -> list:
    threads, wakeups, requests = analysis.threads, analysis.capture.wakeups, analysis.requests

    def who(tid):
        if tid == 0:  # a thread gone past the edges kept of exited threads (docs/capture-format.md)
            return "(a thread not named)"
        if tid not in threads:
            return f"tid {tid}"
        return f"{ROLE_NOUNS[threads[tid]['role']]} {threads[tid]['comm']}/{tid}"

    top = sorted(wakeups, key=lambda edge: -edge["count"])[:MAX_EDGES]
    return [[who(edge["waker_tid"]), who(edge["wakee_tid"]), edge["mechanism"], f"{edge['count']:,}",
             fixed(edge["count"] / requests if requests else None)] for edge in top]


def size_rows(analysis: Analysis) -> list:
    """The response-size classes, per response: the table the write-spin verdict reads (metrics.size_classes)."""
    return [[size_class(c.bytes_min, c.bytes_max), f"{c.count:,}",
             *(fixed(v, 1) for v in (c.writes, c.eagain, c.partial, c.eagain_retries, c.waits)),
             fixed(c.request_ms, 3)] for c in size_classes(analysis)]


def role_summary(analysis: Analysis) -> str:
    """`1 event loop, 4 workers`; with several processes traced, per process name:
    `nginx: 1 idle thread (pid 10), 1 event loop (pid 11)` or `apache2, 5 processes: 5 handlers, ...`."""
    threads = analysis.threads
    if not threads:
        return "no threads seen"
    if _processes(threads) == 1:
        return _roles_phrase(thread["role"] for thread in threads.values())
    # A process is named by its first thread's name; processes of one name are counted together.
    process_name: dict = {}
    for thread in threads.values():
        process_name.setdefault(thread["pid"], thread["comm"])
    by_name: dict = {}
    for thread in threads.values():
        by_name.setdefault(process_name[thread["pid"]], []).append(thread)
    parts = []
    for comm, group in by_name.items():
        pids = _processes(group)
        parts.append(f"{comm}, {pids} process{'es' if pids > 1 else ''}: "
                     f"{_roles_phrase(thread['role'] for thread in group)}")
    return "; ".join(parts)


def _processes(threads) -> int:
    """How many processes the threads ({tid: row}, or rows) belong to."""
    return len({thread["pid"] for thread in (threads.values() if isinstance(threads, dict) else threads)})


def _roles_phrase(roles) -> str:
    counts = Counter(roles)
    return ", ".join(f"{counts[role]} {ROLE_NOUNS[role]}{'s' if counts[role] > 1 else ''}"
                     for role in ROLES if role in counts)


def lifecycle_line(analysis: Analysis) -> str | None:
    """Threads created and exited while traced (an on-demand pool's churn), or None when neither."""
    cap = analysis.capture
    created, exited = cap.threads_created, cap.threads_exited
    if not created and not exited:
        return None
    seconds = cap.duration_s
    folded = cap.threads_folded
    kept = (f"; {sum(int(g.get('threads', 0)) for g in folded):,} of the exited are folded into "
            f"{len(folded):,} row{'s' if len(folded) != 1 else ''} by process and name (the threads table "
            "keeps --exited-rows of them)") if folded else ""
    rates = (f" ({per_second(created, seconds)} created, {per_second(exited, seconds)} exited)"
             if per_second(created, seconds) else "")  # no rate over a few milliseconds
    if exited:
        return (f"thread churn: {created:,} thread{'' if created == 1 else 's'} created and {exited:,} exited "
                f"during the capture{rates}{kept}")
    rate = per_second(created, seconds)
    return f"threads created during the capture: {created:,}{f' ({rate})' if rate else ''}, none exited"


def runtime_line(analysis: Analysis) -> str:
    """`runtime: Go 1.22.3`: what the advice below is worded for (analysis/runtime.py)."""
    return f"runtime: {runtime_of(analysis.capture).describe()}"


COLLECTOR_SHARE_MIN_S = 10 * MIN_RATE_S  # the collector's CPU as a share of a capture at least this long


def collector_line(analysis: Analysis) -> str | None:
    """What the collector itself used (tool.cpu_s and friends, schema 4), or None for older captures."""
    usage = analysis.capture.collector_usage
    if usage["cpu_s"] is None:
        return None
    seconds = analysis.capture.duration_s
    # Its CPU time includes its start (loading and attaching the probes, about 0.05 s) and the writing: a
    # share of the capture's time only when that is long enough for them not to make it (4029% of one CPU
    # for a 1.5 ms capture).
    share = (f" ({percent(usage['cpu_s'] / seconds)} of one CPU over the capture, its start included)"
             if seconds >= COLLECTOR_SHARE_MIN_S else " (its start, loading the probes, included)")
    return (f"collector: {fixed(usage['cpu_s'], 3)} s CPU{share}, {(usage['max_rss_bytes'] or 0) / 2**20:.1f} MiB "
            f"resident at most, BPF maps {(usage['map_bytes'] or 0) / 2**20:.2f} MiB")


def to_json(analysis: Analysis, assessment: Assessment) -> dict:
    cap = analysis.capture
    threads = [{key: value for key, value in thread.items() if key != "poll_events_hist"}
               for thread in analysis.threads.values()]
    return {
        "capture": {"file": str(cap.path), "target": cap.target, "runtime": runtime_of(cap).to_dict(),
                    "duration_s": cap.duration_s,
                    "end_reason": cap.end_reason, "requests": analysis.requests, "drops": cap.drops,
                    "threads_created": cap.threads_created, "threads_exited": cap.threads_exited,
                    "collector": cap.collector_usage},
        "metrics": {"process": analysis.process, "threads": threads,
                    "roles": {role: [tid for tid, thread in analysis.threads.items() if thread["role"] == role]
                              for role in ROLES}},
        "labels": [label.to_dict() for label in assessment.labels],
        "findings": [finding.to_dict() for finding in assessment.findings],
        "notes": assessment.notes,
    }


# --- terminal ---------------------------------------------------------------------------------------

def render_terminal(analysis: Analysis, assessment: Assessment, console: Console) -> None:
    """Every line through output.plain: thread and process names are the target's to choose."""
    _terminal_verdicts(analysis, assessment, console)
    console.print(_table("Process metrics", METRIC_HEADERS, metric_rows(analysis.process),
                         left=set(METRIC_HEADERS) - {"value"}))
    _terminal_threads(analysis, console)
    _terminal_requests(analysis, console)
    edges = edge_rows(analysis)
    if edges:
        console.print(_table("Wakeup graph (top edges)", EDGE_HEADERS, edges, left={"waker", "wakee", "mechanism"}))
        console.print(plain(roles_line(analysis)))
    else:
        console.print()
        console.print(Text.assemble(("Wakeup graph", "bold"), ": no thread of the target woke another"))


def _table(title: str, headers, rows, left: set, no_wrap: bool = False) -> Table:
    """A terminal table from (headers, rows): the `left` columns left-justified (and, with no_wrap, never
    wrapped), the others right."""
    table = Table(title=title, title_justify="left")
    for header in headers:
        table.add_column(header, justify="left" if header in left else "right", no_wrap=no_wrap and header in left)
    for row in rows:
        table.add_row(*map(plain, row))
    return table


def _terminal_verdicts(analysis: Analysis, assessment: Assessment, console: Console) -> None:
    """The headline, the threads in a line, then the labels, findings and notes."""
    console.print(Text.assemble(("spinscope report", "bold"), " ", plain(headline(analysis))))
    console.print(plain(f"threads: {role_summary(analysis)}"))
    console.print(plain(runtime_line(analysis)))
    if lifecycle_line(analysis):
        console.print(plain(lifecycle_line(analysis)))
    console.print()
    if not assessment.labels:
        console.print(plain(no_label_line(), "bold green"))
    for item in assessment.ranked():  # labels and findings by what acting on them saves
        (print_finding if isinstance(item, Finding) else print_label)(console, item)
    for note in assessment.notes:
        console.print(plain(f"note: {note}", "italic"))
    console.print()


def _terminal_threads(analysis: Analysis, console: Console) -> None:
    """The threads table, what its columns mean, and what the collector cost."""
    console.print(_table("Threads", THREAD_HEADERS, thread_rows(analysis), left={"role", "thread"}, no_wrap=True))
    if more_threads_line(analysis):
        console.print(more_threads_line(analysis))
    console.print(thread_glossary(), style="dim", markup=False, soft_wrap=True)
    if collector_line(analysis):
        console.print(plain(collector_line(analysis), "dim"))


def more_threads_line(analysis: Analysis) -> str | None:
    more = len(analysis.threads) - MAX_THREAD_ROWS
    return f"... and {more} more threads" if more > 0 else None


def requests_line(analysis: Analysis) -> str:
    """`Requests: 544 counted, 43.179 ms each on average, ...`: the terminal's and the page's."""
    requests = analysis.capture.requests
    return (f"Requests: {analysis.requests:,} counted, "
            f"{fixed(analysis.process['request_ms'], 3)} ms each on average, "
            f"{fixed(analysis.process['writes_per_request'])} writes, "
            f"{fixed(analysis.process['eagain_per_request'])} EAGAIN per request; "
            f"{requests['cross_thread']:,} finished in another thread than they started; "
            f"{requests['unattributed_writes']:,} writes belonged to no request")


def roles_line(analysis: Analysis) -> str | None:
    """`wakeups between roles: handler → dispatcher 489, dispatcher → handler 417` (None without any)."""
    edges = role_edges(analysis)
    return ("wakeups between roles: " + ", ".join(f"{ROLE_NOUNS[a]} → {ROLE_NOUNS[b]} {n:,}"
                                                  for (a, b), n in edges.items())) if edges else None


def _terminal_requests(analysis: Analysis, console: Console) -> None:
    """The requests in a line, then their responses by size."""
    console.print()
    console.print(Text.assemble(("Requests", "bold"), plain(requests_line(analysis)[len("Requests"):])))
    if analysis.capture.by_size:
        console.print(_table("Responses by size", SIZE_HEADERS, size_rows(analysis), left={"size"}))


# --- HTML -------------------------------------------------------------------------------------------

def verdict_blocks(assessment: Assessment) -> list:
    blocks = [] if assessment.labels else [htmlpage.verdict("ok", no_label_line())]
    for item in assessment.ranked():  # labels and findings by what acting on them saves, as the terminal
        finding = isinstance(item, Finding)
        blocks.append(htmlpage.verdict("info" if finding else item.severity,
                                       f"{item.name.upper() if finding else item.severity.upper()} {item.summary}",
                                       detail_lines(item)))
    blocks += [htmlpage.paragraph(f"note: {note}", "note") for note in assessment.notes]
    return blocks


def _evidence_cell(value) -> str:
    """A number as the tables show numbers; a word (a mechanism, where a rate came from) as it is."""
    return value if isinstance(value, str) else fixed(value, 3)


def render_html(analysis: Analysis, assessment: Assessment) -> str:
    from spinscope.output import figures, flamegraph  # matplotlib loads in ~0.5 s: only when a page is drawn

    body = [htmlpage.paragraph(headline(analysis)), htmlpage.paragraph(f"threads: {role_summary(analysis)}"),
            htmlpage.paragraph(runtime_line(analysis)),
            *([htmlpage.paragraph(lifecycle_line(analysis))] if lifecycle_line(analysis) else []),
            *([htmlpage.paragraph(collector_line(analysis), "note")] if collector_line(analysis) else []),
            htmlpage.heading("Verdicts"), *verdict_blocks(assessment)]
    flames = flamegraph.section(analysis, assessment)  # --stacks
    for label in assessment.labels:
        body.append(htmlpage.heading(f"Evidence: {label.title}"))
        body.append(htmlpage.table(["evidence", "value"], [[k, _evidence_cell(v)] for k, v in label.evidence.items()]))
        if flames.links(label.name):
            body.append(htmlpage.links("Its stacks, in the flame graphs below:", flames.links(label.name)))
    body += flames.blocks
    body += [htmlpage.heading("Threads"),
             htmlpage.table(THREAD_HEADERS, thread_rows(analysis), titles=THREAD_MEANINGS),
             *([htmlpage.paragraph(more_threads_line(analysis))] if more_threads_line(analysis) else []),
             htmlpage.paragraph(thread_glossary(), "note"),
             htmlpage.figure(figures.syscall_mix(analysis), "syscall mix per thread"),
             htmlpage.heading("Requests"), htmlpage.paragraph(requests_line(analysis)),
             htmlpage.table(SIZE_HEADERS, size_rows(analysis)),
             htmlpage.figure(figures.writes_per_request_hist(analysis), "writes per request histogram"),
             htmlpage.heading("Event loops"),
             htmlpage.figure(figures.events_per_poll_hist(analysis), "events per poll call per thread"),
             htmlpage.heading("Handoffs"),
             *([htmlpage.table(EDGE_HEADERS, edge_rows(analysis)), htmlpage.paragraph(roles_line(analysis))]
               if edge_rows(analysis) else [htmlpage.paragraph("Wakeup graph: no thread of the target woke another")]),
             htmlpage.figure(figures.handoff_graph(analysis), "handoff graph between threads")]
    series = figures.time_series({"capture": analysis.intervals})
    if series:
        body += [htmlpage.heading("Over time"), htmlpage.figure(series, "rates per interval")]
    body += [htmlpage.heading("All metrics"),
             htmlpage.table(METRIC_HEADERS, metric_rows(analysis.process))]
    return htmlpage.page(f"spinscope report: {analysis.capture.name}", body, flames.scripts)
