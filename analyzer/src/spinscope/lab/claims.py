"""The published claims a sweep is compared with, as data: one Claim record each (CLAIMS).

A record says which publication and which table or figure, what the paper reports and the numbers its
criterion compares with, the tolerance, the rule in words, what the sweep measures for it, and the
criterion itself (a pure function of the results table, lab/criteria.py). Where a paper explains an
effect by a cause (handoffs cause context switches, ...), the record gives it as the paper's claim; the
criterion judges only the measured effect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

from spinscope.lab import criteria

EVENT_FLOW = "The Impact of Event Processing Flow on Asynchronous Server Efficiency"
EVENTS_FAST = '"Are events fast?"'
COMPARING = "Comparing the Performance of Web Server Architectures (EuroSys 2007)"
PROCESS_GRAPH = "process-graph thesis"


@dataclass(frozen=True)
class Claim:
    """One published claim and how a sweep judges it."""

    id: str  # the tag matrix groups give the cells this claim reads
    title: str
    publication: str  # which paper
    source: str  # where in it: table, figure, section
    paper: str  # what the paper reports, in words (the reports' "paper" column)
    value: object  # the paper's numbers or orderings that the criterion compares with
    tolerance: str  # how far from `value` still counts as reproduced
    rule: str  # the criterion in words: when reproduced, when direction reproduced
    measured: str  # what the sweep measures for it: which cells, which columns
    criterion: Callable[[pd.DataFrame], criteria.Finding]

    def judge(self, table: pd.DataFrame) -> criteria.Finding:
        """The criterion's finding on `table`; an exception in it is the verdict "error" with its message."""
        try:
            return self.criterion(table)
        except Exception as exc:  # noqa: BLE001 - one broken criterion must not hide the other claims
            return criteria.Finding(criteria.ERROR, why=f"{type(exc).__name__}: {exc}")


CLAIMS = (
    Claim(
        id="table3", title="Table 3: handoffs per request (low concurrency)",
        publication=EVENT_FLOW, source="Table 3",
        paper="reactor-split 4, reactor-worker 2, thread-per-conn 0, event-loop 0",
        value=criteria.TABLE3_HANDOFFS,
        tolerance=f"±{criteria.TABLE3_TOLERANCE:.0%} on the reactors; below {criteria.TABLE3_NONE} counts as 0",
        rule="reproduced: all four measured, reactors within the tolerance, the others below "
             f"{criteria.TABLE3_NONE}; direction: split > worker > (thread-per-conn, event-loop)",
        measured="handoffs_per_request (wakeups between the server's threads per request, from the capture); "
                 "concurrency 1, /bytes/100, --workers 4",
        criterion=criteria.table3_handoffs),
    Claim(
        id="table6", title="Table 6: write calls per response, 16 KB send buffer",
        publication=EVENT_FLOW, source="Table 6",
        paper="spinning event loop: 1 / 1 / ~102 for 0.1 / 10 / 100 KB; blocking thread-per-conn ~1",
        value=criteria.TABLE6_SPIN_WRITES,
        tolerance="at most {} at 0.1 and 10 KB; {}-{} at 100 KB (wide: the count moves with the client's "
                  "receive window, see fig11_12); thread-per-conn at most {}".format(
                      criteria.TABLE6_SMALL_MAX, *criteria.TABLE6_LARGE_RANGE, criteria.TABLE6_BLOCKING_MAX),
        rule="reproduced: every bound holds; direction: more than "
             f"{criteria.TABLE6_SPIN_MIN} writes per 100 KB response and {criteria.TABLE6_SPIN_MIN}x thread-per-conn's",
        measured="writes_per_request (socket write calls per response, from the capture); veth, SO_SNDBUF "
                 "16384, client SO_RCVBUF 4096; event-loop spin and epollout, netty, thread-per-conn",
        criterion=criteria.table6_write_calls),
    Claim(
        id="fig6_7", title="Figures 6/7: throughput and context switches vs concurrency",
        publication=EVENT_FLOW, source="Figures 6 and 7",
        paper="more handoffs per request mean more context switches and lower throughput: "
              "reactor-split < reactor-worker < thread-per-conn, event-loop (throughput, small responses)",
        value=("context switches per request: reactor-split > reactor-worker > thread-per-conn, event-loop",
               "throughput: reactor-split < reactor-worker < thread-per-conn, event-loop"),
        tolerance="orderings only",
        rule="reproduced: both orderings in every size x concurrency slice with all four servers; "
             "direction: in at least half of the slice-orderings",
        measured="cs_per_request (context switches per request, capture) and lg_throughput (loadgen); "
                 "the paper's attribution to handoffs is not tested here",
        criterion=criteria.fig6_7_orderings),
    Claim(
        id="table4", title="Table 4: futex share",
        publication=EVENT_FLOW, source="Table 4",
        paper="event-loop < thread-per-conn < reactor-worker < reactor-split",
        value=criteria.TABLE4_ORDER,
        tolerance=f"ordering only; shares within {criteria.TABLE4_TIE:.1%} count as a tie for direction",
        rule="reproduced: the strict ordering; direction: both reactors above both others",
        measured="futex_share (futex wait+wake calls / traced socket, poll and futex calls, capture), averaged "
                 "over the fig6_7 cells' sizes and concurrencies",
        criterion=criteria.table4_futex_share),
    Claim(
        id="fig11_12", title="Figures 11/12: latency and small receive windows make write-spin worse",
        publication=EVENT_FLOW, source="Figures 11 and 12 (and Figure 10's write-spin vs latency)",
        paper="write calls per 100 KB response grow as the network delay grows and as the client "
              f"receive window shrinks (spinning event loop, small send buffer); its throughput falls "
              f"{criteria.FIG11_PAPER_DROP:.0%} at +{criteria.FIG11_PAPER_DELAY_MS:g} ms",
        value={"throughput_drop": criteria.FIG11_PAPER_DROP, "at_delay_ms": criteria.FIG11_PAPER_DELAY_MS,
               "writes": "fall as the client receive window grows, grow with delay"},
        tolerance=f"drop within {criteria.FIG11_DROP_TOLERANCE:.0%} of {criteria.FIG11_PAPER_DROP:.0%}; writes "
                  f"{criteria.FIG11_WRITES_RISE:g}x from +0 to the largest delay; smallest window over "
                  f"{criteria.FIG12_FALL}x the largest's; each step may go against the trend by "
                  f"{1 / criteria.FIG12_SLACK - 1:.0%}",
        rule="reproduced: writes fall with the window, grow with delay, the drop at +5 ms within the tolerance, "
             f"and the spinning loop below --write-policy {criteria.FIG11_CONTRAST} at every added delay; at least "
             "half of these: direction; a part not measured: direction at most",
        measured="writes_per_request over the client SO_RCVBUF axis at no added delay, and over delay_ms (the "
                 "delay line, docs/sweep.md) at the smallest window; lg_throughput; rtt_ms; veth/TUN, event-loop "
                 f"spin (and {criteria.FIG11_CONTRAST} at the delays), SO_SNDBUF 16384, /bytes/102400, 4 connections",
        criterion=criteria.fig11_12_latency_and_window),
    Claim(
        id="fig14_16", title="Figures 14/16: netty vs the spinning loop; hybrid across heavy-request ratios",
        publication=EVENT_FLOW, source="Figures 14 and 16",
        paper="netty beats the spinning loop at 100 KB and loses at 0.1 KB; hybrid best at every heavy ratio 0-100%",
        value="netty > spin at 100 KB; netty < spin at 0.1 KB; hybrid the best at every heavy ratio",
        tolerance=f"hybrid within {1 - criteria.FIG16_NEAR_BEST:.0%} of the best counts as best",
        rule="every comparison holds: reproduced; at least half: direction",
        measured="lg_throughput (loadgen) of the Table 6 cells and of mixes of /bytes/100 and /bytes/102400 "
                 "(0, 10, 100% heavy) on veth, SO_SNDBUF 16384",
        criterion=criteria.fig14_16_netty_hybrid),
    Claim(
        id="events_fast", title='"Are events fast?": mean latency vs concurrency',
        publication=EVENTS_FAST, source="latency vs concurrency",
        paper="process-per-conn slowest; thread-per-conn close to the event loop; green threads fastest "
              "among the threaded designs; the accept queue (--backlog) limits what a server sees",
        value="process-per-conn slowest; thread-per-conn close to event-loop; green-threads fastest threaded",
        tolerance=f"slowest: within {1 - criteria.EVENTS_FAST_SLOWEST:.0%} of the maximum; close: at most "
                  f"{criteria.EVENTS_FAST_CLOSE - 1:.0%} above event-loop",
        rule="every comparison at every concurrency holds: reproduced; at least half: direction; the "
             "backlog cells are reported, not judged",
        measured="lat_mean_ms (loadgen) over a concurrency axis; backlog cells: lg_throughput, lg_errors, lat_p99_ms",
        criterion=criteria.events_fast_latency),
    Claim(
        id="compare_arch", title='"Comparing the performance of web server architectures"',
        publication=COMPARING, source="throughput and syscall comparisons",
        paper="n-copy (one event loop per CPU) beats a single event loop on a multi-core host; blocking writes "
              "need fewer calls than non-blocking ones; poll/select cost grows with the interest set, epoll's does not",
        value="n-copy > event-loop; blocking < non-blocking writes; poll, select CPU growth > epoll's",
        tolerance="comparisons only",
        rule="every comparison holds: reproduced; at least half: direction",
        measured="lg_throughput of event-loop and n-copy; writes_per_request of the Table 6 cells at 100 KB; "
                 "cpu_ms_per_request of event-loop per poller over mostly idle connections (think_ms)",
        criterion=criteria.compare_arch_checks),
    Claim(
        id="process_graph", title="process-graph thesis: light requests next to heavy ones, steady load plus a burst",
        publication=PROCESS_GRAPH, source="light-request latency under a burst",
        paper="light (/null) requests keep a lower latency on process-graph than on a thread pool",
        value="process-graph's /null p99 < thread-pool's",
        tolerance=f"reproduced at least {1 - criteria.PROCESS_GRAPH_BETTER:.0%} lower; lower by less: direction",
        rule=f"reproduced: /null p99 at most {criteria.PROCESS_GRAPH_BETTER:.0%} of thread-pool's; direction: lower",
        measured="loadgen's per-class p99 of /null in a mix with /compute/2000, --rate with a --burst",
        criterion=criteria.process_graph_light_latency),
)


def judge_all(table: pd.DataFrame) -> list:
    """[(claim, finding)] for every claim, in CLAIMS order."""
    return [(claim, claim.judge(table)) for claim in CLAIMS]

