"""Matplotlib figures for the HTML pages, each returned as a base64 PNG string (or None: nothing to draw).

Figures are drawn with the Agg backend so reports work on headless servers; every figure is closed after
rendering so a long-running process does not accumulate them.

Text is drawn as written: mathtext and TeX are off (a thread named `$\\frac{a}{$` would be parsed as a
formula, and fail), and a thread's name goes through untrusted.printable before it meets a label.
"""

from __future__ import annotations

import base64
import io
import math
import warnings

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams.update({"text.parse_math": False, "text.usetex": False})
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from spinscope.analysis.metrics import NOT_HANDOFFS, Analysis  # noqa: E402
from spinscope.analysis.roles import (ACCEPTOR, DISPATCHER, EVENT_LOOP, HANDLER, IDLE, ROLE_NOUNS, WORKER,  # noqa: E402
                                      activity)
from spinscope.fmt import number  # noqa: E402
from spinscope.untrusted import printable  # noqa: E402

ROLE_COLORS = {EVENT_LOOP: "#1f77b4", HANDLER: "#2ca02c", DISPATCHER: "#17becf", ACCEPTOR: "#9467bd",
               WORKER: "#ff7f0e", IDLE: "#7f7f7f"}
MAX_THREADS_SHOWN = 16  # beyond this, per-thread figures show the busiest threads
MAX_GRAPH_THREADS = 4  # beyond this, the handoff graph groups threads by role (a pool reads as one node)
SERIES = (("requests_per_s", "requests/s"), ("writes_per_s", "socket writes/s"),
          ("polls_per_s", "poll calls/s"), ("cs_per_s", "context switches/s"), ("handoffs_per_s", "handoffs/s"))


MIN_EDGE_SHARE = 0.02  # handoff-graph edges below this share of all wakeups are not drawn
EDGE_BEND = 0.2  # curvature of handoff-graph arrows (matplotlib arc3 rad)


LABEL_AT = 0.3  # handoff-graph labels sit this far along their arrow, from the waker


def arc_point(start, end, t):
    """Point at parameter t of matplotlib's arc3 curve from start to end (a quadratic Bezier whose
    control point is the midpoint moved by EDGE_BEND * (dy, -dx)). a->b and b->a bend to opposite
    sides, and each label sits near its own waker, so the two never overlap."""
    (x1, y1), (x2, y2) = start, end
    cx, cy = (x1 + x2) / 2 + EDGE_BEND * (y2 - y1), (y1 + y2) / 2 - EDGE_BEND * (x2 - x1)
    u = 1 - t
    return (u * u * x1 + 2 * t * u * cx + t * t * x2, u * u * y1 + 2 * t * u * cy + t * t * y2)


def outside_legend(ax) -> None:
    """The legend right of the axes, outside them: inside, it covered a value label and a bar segment
    (`bbox_inches="tight"` widens the image to hold it)."""
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def to_png(fig) -> str:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        # A thread name in a script the font lacks (工作线程) is drawn as boxes, once per glyph a warning on
        # stderr: the tables beside the figure show the name in full.
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
        fig.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def thread_label(tid: int, row: pd.Series) -> str:
    return f"{ROLE_NOUNS[row['role']]} {printable(row['comm'])} ({tid})"


def busiest_threads(analysis: Analysis) -> pd.DataFrame:
    """The MAX_THREADS_SHOWN threads that made the most traced calls, busiest first, as a frame (index tid)."""
    threads = analysis.threads
    busiest = sorted(threads, key=lambda tid: -activity(threads[tid]))[:MAX_THREADS_SHOWN]
    columns = list(next(iter(threads.values()), {"tid": 0, "role": "", "comm": "", "poll_calls": 0}))
    return pd.DataFrame.from_records([threads[tid] for tid in busiest], columns=columns).set_index("tid")


def syscall_mix(analysis: Analysis) -> str | None:
    """Stacked bars: each thread's socket writes, socket reads, poll calls and futex waits."""
    threads = busiest_threads(analysis)
    threads = threads[threads["role"] != IDLE]
    if threads.empty:
        return None
    parts = (("write_calls", "socket writes", "#d62728"), ("read_calls", "socket reads", "#2ca02c"),
             ("poll_calls", "poll calls", "#1f77b4"), ("futex_waits", "futex waits", "#ff7f0e"))
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(threads) + 1.4))
    labels = [thread_label(tid, row) for tid, row in threads.iterrows()]
    left = np.zeros(len(threads))
    for column, name, color in parts:
        values = threads[column].to_numpy(dtype=float)
        ax.barh(labels, values, left=left, label=name, color=color)
        left += values
    ax.invert_yaxis()
    ax.set_xlabel("calls during the capture")
    ax.set_title("Syscall mix per thread")
    outside_legend(ax)
    return to_png(fig)


def log2_labels(n: int) -> list:
    """Bucket names of a log2 histogram: 0, 1, 2–3, 4–7, ..."""
    return ["0"] + [str(1 << (k - 1)) if k == 1 else f"{1 << (k - 1)}–{(1 << k) - 1}" for k in range(1, n)]


def writes_per_request_hist(analysis: Analysis) -> str | None:
    counts = analysis.capture.request_hists["write_calls"]
    if not sum(counts):
        return None
    fig, ax = plt.subplots(figsize=(7, 3.4))
    ax.bar(range(len(counts)), counts, color="#d62728")
    ax.set_xticks(range(len(counts)), log2_labels(len(counts)), rotation=45, ha="right", fontsize=8)
    ax.set_xlabel("socket write calls per request")
    ax.set_ylabel("requests")
    ax.set_title("Writes per request")
    return to_png(fig)


def events_per_poll_hist(analysis: Analysis) -> str | None:
    """Share of each polling thread's calls by number of events returned (log2 buckets)."""
    threads = busiest_threads(analysis)
    threads = threads[threads["poll_calls"] > 0]
    if threads.empty:
        return None
    width = max(len(hist) for hist in threads["poll_events_hist"]) or 1
    fig, ax = plt.subplots(figsize=(8, 3.4))
    bar = 0.8 / len(threads)
    for i, (tid, row) in enumerate(threads.iterrows()):
        hist = np.array(row["poll_events_hist"] + [0] * (width - len(row["poll_events_hist"])), dtype=float)
        share = hist / hist.sum() if hist.sum() else hist
        ax.bar(np.arange(width) + i * bar, share, width=bar, label=thread_label(tid, row))
    ax.set_xticks(np.arange(width) + 0.4 - bar / 2, log2_labels(width), rotation=45, ha="right",
                  fontsize=8)
    ax.set_xlabel("events returned per poll call")
    ax.set_ylabel("share of the thread's poll calls")
    ax.set_title("Events per poll call")
    outside_legend(ax)
    return to_png(fig)


def _graph_node(analysis: Analysis, roles: dict, involved):
    """The graph's node name for a tid: the thread (its role, name and tid), or for more than
    MAX_GRAPH_THREADS threads its role (and how many threads of it are involved)."""
    if len(involved) <= MAX_GRAPH_THREADS:
        def node(tid):
            comm = printable(analysis.threads[tid]["comm"] if tid in analysis.threads else "?")
            return f"{ROLE_NOUNS[roles.get(tid, WORKER)]}\n{comm} ({tid})"
        return node
    per_role = pd.Series([roles.get(t, WORKER) for t in involved]).value_counts()

    def role_node(tid):
        role = roles.get(tid, WORKER)
        n = per_role[role]
        return f"{ROLE_NOUNS[role]}\n({n} thread{'s' if n > 1 else ''})"
    return role_node


def handoff_graph(analysis: Analysis) -> str | None:
    """Who hands off to whom: threads (or roles, for many threads) on a circle, arrows sized by handoffs
    (wakeups other than mm-lock contention and thread exit)."""
    wakeups = pd.DataFrame.from_records([edge for edge in analysis.capture.wakeups if edge["mechanism"] not in NOT_HANDOFFS],
                                        columns=["waker_tid", "wakee_tid", "count", "mechanism"])
    if wakeups.empty or not wakeups["count"].sum():
        return None
    roles = {tid: thread["role"] for tid, thread in analysis.threads.items()}
    involved = pd.unique(wakeups[["waker_tid", "wakee_tid"]].to_numpy().ravel())
    node = _graph_node(analysis, roles, involved)
    color_of = {node(t): ROLE_COLORS[roles.get(t, WORKER)] for t in involved}
    edges = (wakeups.assign(a=wakeups["waker_tid"].map(node), b=wakeups["wakee_tid"].map(node))
             .groupby(["a", "b"])["count"].sum())
    # Edges carrying a sliver of the wakeups would only bury the ones that matter.
    total = edges.sum()
    minor = edges[edges < MIN_EDGE_SHARE * total]
    edges = edges[edges >= MIN_EDGE_SHARE * total]
    names = sorted(set(edges.index.get_level_values(0)) | set(edges.index.get_level_values(1)))
    angle = {name: 2 * math.pi * i / len(names) + math.pi / 2 for i, name in enumerate(names)}
    pos = {name: (math.cos(a), math.sin(a)) for name, a in angle.items()}

    fig, ax = plt.subplots(figsize=(7, 6))
    biggest = edges.max()
    requests = analysis.requests
    for (a, b), count in edges.items():
        label = f"{count / requests:.2f}/req" if requests else f"{count}"
        if a == b:  # within a role: workers waking workers
            x, y = pos[a]
            ax.annotate(f"among themselves: {label}", (x, y - 0.22), ha="center", va="top", fontsize=8)
            continue
        ax.annotate("", xy=pos[b], xytext=pos[a],
                    arrowprops=dict(arrowstyle="-|>", lw=0.8 + 5 * count / biggest, color="#555555",
                                    shrinkA=16, shrinkB=16, connectionstyle=f"arc3,rad={EDGE_BEND}"))
        ax.annotate(label, arc_point(pos[a], pos[b], LABEL_AT), ha="center", va="center", fontsize=8,
                    color="#333333", bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8))
    for name, (x, y) in pos.items():
        ax.scatter([x], [y], s=700, color=color_of.get(name, "#7f7f7f"), zorder=3)
        ax.annotate(name, (1.3 * x, 1.3 * y), ha="center", va="center", fontsize=8, zorder=4)
    ax.set_xlim(-1.7, 1.7)
    ax.set_ylim(-1.6, 1.6)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title("Handoffs: wakeups between the target's threads")
    if len(minor):
        edge_word = "edge" if len(minor) == 1 else "edges"
        ax.text(0, -1.55, f"{len(minor)} minor {edge_word} ({minor.sum() / total:.1%} of wakeups) not drawn",
                ha="center", fontsize=8, color="#777777")
    return to_png(fig)


def time_series(frames: dict) -> str | None:
    """Per-second rates over time; `frames` maps a legend name to interval metrics (Analysis.intervals)."""
    frames = {name: pd.DataFrame.from_records(rows).astype(float) for name, rows in frames.items() if rows}
    if not frames:
        return None
    fig, axes = plt.subplots(len(SERIES), 1, figsize=(8, 1.7 * len(SERIES)), sharex=True)
    for ax, (column, title) in zip(axes, SERIES):
        for name, frame in frames.items():
            ax.plot(frame["t_s"], frame[column], marker="o", markersize=3, label=name)
        ax.set_ylabel(title, fontsize=8)
        ax.set_ylim(bottom=0)
    axes[-1].set_xlabel("seconds since start")
    if len(frames) > 1:
        outside_legend(axes[0])
    axes[0].set_title("Rates per interval")
    return to_png(fig)


def metric_bars(before: dict, after: dict, names: list) -> str | None:
    """Before/after bars for the named metrics (each scaled to its own larger value)."""
    names = [n for n in names if before.get(n) is not None or after.get(n) is not None]
    if not names:
        return None
    b = np.array([before.get(n) or 0.0 for n in names], dtype=float)
    a = np.array([after.get(n) or 0.0 for n in names], dtype=float)
    scale = np.maximum(np.maximum(a, b), 1e-12)
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(names) + 1.2))
    y = np.arange(len(names))
    ax.barh(y - 0.2, b / scale, height=0.4, label="before", color="#7f7f7f")
    ax.barh(y + 0.2, a / scale, height=0.4, label="after", color="#1f77b4")
    for i in range(len(names)):
        ax.annotate(f"{number(b[i])} → {number(a[i])}", (1.02, y[i]), va="center", fontsize=8)
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.35)
    ax.set_xticks([])
    outside_legend(ax)
    ax.set_title("Before and after (each metric scaled to the larger value)")
    return to_png(fig)
