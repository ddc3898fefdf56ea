"""Figures of the claims report: drawn from what each claim's criterion returned (Finding.data), never
from a verdict, and each returned as a base64 PNG (spinscope.output.figures.to_png) for the HTML page.

FIGURES maps a claim id to its drawing function; claims without an entry have no figure.
"""

from __future__ import annotations

import pandas as pd

from spinscope.lab.criteria.common import Finding, SIZE_NAMES
from spinscope.lab.criteria.event_flow import TABLE3_HANDOFFS, TABLE6_SPIN_WRITES
from spinscope.output.figures import plt, to_png  # pyplot with the headless backend the core's figures chose


def draw(claim_id: str, finding: Finding) -> list:
    """The claim's figures as base64 PNGs; none when it has no figure or its criterion gave no data."""
    if finding.data is None or claim_id not in FIGURES:
        return []
    return FIGURES[claim_id](finding.data)


def _lines(d: pd.DataFrame, x: str, y: str, series: str, facet: str, title: str, ylabel: str,
           facet_names: dict | None = None) -> str:
    """One panel per value of `facet`, one line per value of `series`, log2 x axis."""
    facets = [f for f in (facet_names or {}) if f in set(d[facet])] or sorted(set(d[facet]))
    fig, axes = plt.subplots(1, len(facets), figsize=(4 * len(facets), 3.2), squeeze=False)
    for ax, f in zip(axes[0], facets):
        for name, s in d[d[facet] == f].groupby(series):
            s = s.sort_values(x)
            ax.plot(s[x], s[y], marker="o", label=str(name))
        ax.set_xscale("log", base=2)
        ax.set_title(f"{(facet_names or {}).get(f, f)}", fontsize=9)
        ax.set_xlabel(x)
    axes[0][0].set_ylabel(ylabel)
    axes[0][-1].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return to_png(fig)


def table3(handoffs: pd.Series) -> list:
    """Measured handoffs per request as bars, the paper's values as marks."""
    fig, ax = plt.subplots(figsize=(6, 3.2))
    archs = list(handoffs.index)
    ax.bar(archs, list(handoffs), color="#4c72b0", label="measured")
    ax.scatter(archs, [TABLE3_HANDOFFS[a] for a in archs], color="#c44e52", marker="_", s=900, label="paper",
               zorder=3)
    ax.set_ylabel("handoffs per request")
    ax.legend()
    ax.set_title("Table 3: handoffs per request, concurrency 1")
    return [to_png(fig)]


def table6(writes: pd.DataFrame) -> list:
    """Writes per response by size, one bar per server, and the paper's 100 KB value."""
    fig, ax = plt.subplots(figsize=(7, 3.4))
    paths = list(writes.columns)
    width = 0.8 / max(1, len(writes.index))
    for i, v in enumerate(writes.index):
        ax.bar([j + i * width for j in range(len(paths))], [writes.loc[v, p] for p in paths], width, label=v)
    ax.set_xticks([j + width * (len(writes.index) - 1) / 2 for j in range(len(paths))])
    ax.set_xticklabels([SIZE_NAMES[p] for p in paths])
    ax.set_yscale("log")
    ax.axhline(TABLE6_SPIN_WRITES["/bytes/102400"], color="#c44e52", ls="--", lw=1, label="paper, spin 100 KB")
    ax.set_ylabel("write calls per response")
    ax.legend(fontsize=7)
    ax.set_title("Table 6: write calls per response (16 KB SO_SNDBUF, veth)")
    return [to_png(fig)]


def fig6_7(cells: pd.DataFrame) -> list:
    """Throughput and context switches per second during the load, against concurrency, per size."""
    return [_lines(cells, "concurrency", "lg_throughput", "arch", "path", "Figure 6: throughput vs concurrency",
                   "requests/s", facet_names=SIZE_NAMES),
            _lines(cells.assign(cs_per_s=cells["cs_per_s_load"]), "concurrency", "cs_per_s", "arch", "path",
                   "Figure 7: context switches per second (during load) vs concurrency", "context switches/s",
                   facet_names=SIZE_NAMES)]


def fig11_12(by_window: pd.DataFrame) -> list:
    """Writes per 100 KB response against the client's receive buffer."""
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(by_window["rcvbuf_n"], by_window["writes_per_request"], marker="o")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("client SO_RCVBUF (bytes)")
    ax.set_ylabel("write calls per 100 KB response")
    ax.set_title("Figure 12: write-spin vs client receive window (veth)", fontsize=10)
    return [to_png(fig)]


def fig14_16(throughput: pd.DataFrame) -> list:
    """Throughput per server against the share of heavy (100 KB) requests."""
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for v in throughput.columns:
        ax.plot([h * 100 for h in throughput.index], throughput[v], marker="o", label=v)
    ax.set_xlabel("heavy (100 KB) requests, %")
    ax.set_ylabel("requests/s")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    ax.set_title("Figure 16: throughput vs heavy-request ratio (veth, 16 KB SO_SNDBUF)", fontsize=9)
    return [to_png(fig)]


def events_fast(cells: pd.DataFrame) -> list:
    """Mean latency against concurrency, one line per server."""
    return [_lines(cells.assign(one="mean latency"), "concurrency", "lat_mean_ms", "arch", "one",
                   '"Are events fast?": mean latency vs concurrency', "mean latency (ms)")]


def compare_arch(cpu: pd.DataFrame) -> list:
    """CPU per request of the event loop per poller against the number of connections."""
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for poller in cpu.index:
        ax.plot(cpu.columns, cpu.loc[poller] * 1000, marker="o", label=poller)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("connections (interest set)")
    ax.set_ylabel("CPU µs per request")
    ax.legend()
    ax.set_title("poller cost vs interest set (event-loop)", fontsize=10)
    return [to_png(fig)]


FIGURES = {"table3": table3, "table6": table6, "fig6_7": fig6_7, "fig11_12": fig11_12, "fig14_16": fig14_16,
           "events_fast": events_fast, "compare_arch": compare_arch}


# =========================================================================================== claims block (wt-claims)
def crossover(cells: pd.DataFrame) -> list:
    """Throughput against concurrency at 100 KB, one line per server, one panel per condition."""
    return [_lines(cells, "concurrency", "lg_throughput", "variant", "condition",
                   "Figures 4/6c: thread-per-conn vs the event loop at 100 KB", "req/s")]


FIGURES["crossover"] = crossover
# =========================================================================================== end claims block
# ============================================================================ Figures 10-12: added delay
# fig11_12's criterion (fig11_12_latency_and_window) returns {"by_window", "spin", "contrast"}: the
# receive-window series drawn as before, and the delay series beside it.

from matplotlib.ticker import FuncFormatter  # noqa: E402 (this block's own import, kept with it)


def fig11_12_latency(data: dict) -> list:
    """Figure 12's panel (writes vs receive window), then writes per response and throughput against the
    added round trip, the spinning loop next to the non-spinning contrast."""
    figures = fig11_12(data["by_window"]) if data.get("by_window") is not None else []
    series = [(name, s) for name, s in (("spin", data.get("spin")), ("epollout", data.get("contrast")))
              if s is not None and len(s)]
    if not series:
        return figures
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for name, s in series:
        axes[0].plot(s["delay_n"], s["writes_per_request"], marker="o", label=name)
        axes[1].plot(s["delay_n"], s["lg_throughput"], marker="o", label=name)
    for ax, label in zip(axes, ("write calls per 100 KB response", "requests/s")):
        ax.set_xlabel("added round trip (ms, delay line)")
        ax.set_ylabel(label)
        ax.set_yscale("log")
        # Plain tick labels: the default log labels are mathtext, which spinscope.output.figures turns off.
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
        ax.legend(fontsize=7)
    fig.suptitle("Figures 10/11: write-spin and throughput vs added delay (client SO_RCVBUF "
                 f"{int(series[0][1]['rcvbuf_n'].iloc[0]) if series[0][1]['rcvbuf_n'].notna().any() else 'default'})",
                 fontsize=10)
    fig.tight_layout()
    return figures + [to_png(fig)]


FIGURES["fig11_12"] = fig11_12_latency
