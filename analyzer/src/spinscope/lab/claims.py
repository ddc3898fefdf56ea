"""The published claims a sweep is compared with, as data: one Claim record each (CLAIMS).

A record says which publication and which table or figure, what the paper reports and the numbers its
criterion compares with, the tolerance, the rule in words, what the sweep measures for it, and the
criterion itself (a pure function of the results table, lab/criteria/). Where a paper explains an
effect by a cause (handoffs cause context switches, ...), the record gives it as the paper's claim; the
criterion judges only the measured effect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

from spinscope.lab import confidence
from spinscope.lab.criteria import common, comparing, doubleface, event_flow, events_fast, process_graph

EVENT_FLOW = "The Impact of Event Processing Flow on Asynchronous Server Efficiency"
EVENTS_FAST = '"Are events fast?"'
COMPARING = "Comparing the Performance of Web Server Architectures (EuroSys 2007)"
PROCESS_GRAPH = "process-graph thesis"

# The margins delta (docs/sweep.md, "At the threshold"). None of the seed papers states the spread of its
# numbers, and the resolution of their figures was not measured here: every timing claim's delta is a stated
# practical size, the same for all, except where a claim's criterion names its own tie.
PRACTICAL = confidence.Delta(0.10, "a stated practical size, not the paper's precision (not measured): a 10% "
                                   "difference in req/s, latency or CPU per request, about one 2-3 s cell's spread here")
CROSSOVER_TIE = confidence.Delta(event_flow.CROSSOVER_MARGIN, "the claim's own tie: its criterion counts a lead of less "
                                                              f"than {event_flow.CROSSOVER_MARGIN:.0%} of req/s as none")


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
    criterion: Callable[[pd.DataFrame], common.Finding]
    # Repetitions of its cells a verdict needs (lab/confidence.py): the counting claims' counts per request
    # do not move between runs (1); a throughput or latency comparison on two shared cores does.
    min_reps: int = confidence.TIMING_REPS
    # The margin delta of a timing claim (confidence.Delta: its size and where it comes from), declared before
    # any run: a comparison whose interval lies within threshold ± delta reads "at the threshold", one that
    # clears the band holds or fails. None for the counting claims (their bands are their tolerance).
    delta: confidence.Delta | None = None

    def judge(self, table: pd.DataFrame) -> common.Finding:
        """The criterion's finding on `table`; an exception in it is the verdict "error" with its message."""
        try:
            return self.criterion(table)
        except Exception as exc:  # noqa: BLE001 - one broken criterion must not hide the other claims
            return common.Finding(common.ERROR, why=f"{type(exc).__name__}: {exc}")


CLAIMS = (
    Claim(
        id="table3", title="Table 3: handoffs per request (low concurrency)",
        publication=EVENT_FLOW, source="Table 3",
        paper="reactor-split 4, reactor-worker 2, thread-per-conn 0, event-loop 0",
        value=event_flow.TABLE3_HANDOFFS,
        tolerance=f"±{event_flow.TABLE3_TOLERANCE:.0%} on the reactors; below {event_flow.TABLE3_NONE} counts as 0",
        rule="reproduced: all four measured, reactors within the tolerance, the others below "
             f"{event_flow.TABLE3_NONE}; direction: split > worker > (thread-per-conn, event-loop)",
        measured="handoffs_per_request (wakeups between the server's threads per request, from the capture); "
                 "concurrency 1, /bytes/100, --workers 4",
        criterion=event_flow.table3_handoffs, min_reps=1),
    Claim(
        id="table6", title="Table 6: write calls per response, 16 KB send buffer",
        publication=EVENT_FLOW, source="Table 6",
        paper="spinning event loop: 1 / 1 / ~102 for 0.1 / 10 / 100 KB; blocking thread-per-conn ~1",
        value=event_flow.TABLE6_SPIN_WRITES,
        tolerance="at most {} at 0.1 and 10 KB; {}-{} at 100 KB (wide: the count moves with the client's "
                  "receive window, see fig11_12); thread-per-conn at most {}".format(
                      event_flow.TABLE6_SMALL_MAX, *event_flow.TABLE6_LARGE_RANGE, event_flow.TABLE6_BLOCKING_MAX),
        rule="reproduced: every bound holds; direction: more than "
             f"{event_flow.TABLE6_SPIN_MIN} writes per 100 KB response and {event_flow.TABLE6_SPIN_MIN}x thread-per-conn's",
        measured="writes_per_request (socket write calls per response, from the capture); veth, SO_SNDBUF "
                 "16384, client SO_RCVBUF 4096; event-loop spin and epollout, netty, thread-per-conn",
        criterion=event_flow.table6_write_calls, min_reps=1),
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
        delta=PRACTICAL, criterion=event_flow.fig6_7_orderings),
    Claim(
        id="table4", title="Table 4: futex share",
        publication=EVENT_FLOW, source="Table 4",
        paper="event-loop < thread-per-conn < reactor-worker < reactor-split",
        value=event_flow.TABLE4_ORDER,
        tolerance=f"ordering only; shares within {event_flow.TABLE4_TIE:.1%} count as a tie (no ordering)",
        rule=f"reproduced: the strict ordering, each step at least {event_flow.TABLE4_TIE:.1%}; direction: both "
             "reactors above both others",
        measured="futex_share (futex wait+wake calls / traced socket, poll and futex calls, capture), averaged "
                 "over the fig6_7 cells' sizes and concurrencies",
        criterion=event_flow.table4_futex_share, min_reps=1),
    Claim(
        id="fig11_12", title="Figures 11/12: latency and small receive windows make write-spin worse",
        publication=EVENT_FLOW, source="Figures 11 and 12 (and Figure 10's write-spin vs latency)",
        paper="write calls per 100 KB response grow as the network delay grows and as the client "
              f"receive window shrinks (spinning event loop, small send buffer); its throughput falls "
              f"{event_flow.FIG11_PAPER_DROP:.0%} at +{event_flow.FIG11_PAPER_DELAY_MS:g} ms",
        value={"throughput_drop": event_flow.FIG11_PAPER_DROP, "at_delay_ms": event_flow.FIG11_PAPER_DELAY_MS,
               "writes": "fall as the client receive window grows, grow with delay"},
        tolerance=f"drop within {event_flow.FIG11_DROP_TOLERANCE:.0%} of {event_flow.FIG11_PAPER_DROP:.0%}; writes "
                  f"{event_flow.FIG11_WRITES_RISE:g}x from +0 to the largest delay; smallest window over "
                  f"{event_flow.FIG12_FALL}x the largest's; each step may go against the trend by "
                  f"{1 / event_flow.FIG12_SLACK - 1:.0%}",
        rule="reproduced: writes fall with the window, grow with delay, the drop at +5 ms within the tolerance, "
             f"and the spinning loop below --write-policy {event_flow.FIG11_CONTRAST} at every added delay; at least "
             "half of these: direction; a part not measured: direction at most",
        measured="writes_per_request over the client SO_RCVBUF axis at no added delay, and over delay_ms (the "
                 "delay line, docs/sweep.md) at the smallest window; lg_throughput; rtt_ms; veth/TUN, event-loop "
                 f"spin (and {event_flow.FIG11_CONTRAST} at the delays), SO_SNDBUF 16384, /bytes/102400, 4 connections",
        delta=PRACTICAL, criterion=event_flow.fig11_12_latency_and_window),
    Claim(
        id="fig14_16", title="Figures 14/16: netty vs the spinning loop; hybrid across heavy-request ratios",
        publication=EVENT_FLOW, source="Figures 14 and 16",
        paper="netty beats the spinning loop at 100 KB and loses at 0.1 KB; hybrid best at every heavy ratio 0-100%",
        value="netty > spin at 100 KB; netty < spin at 0.1 KB; hybrid the best at every heavy ratio",
        tolerance=f"hybrid within {1 - event_flow.FIG16_NEAR_BEST:.0%} of the best counts as best",
        rule="every comparison holds: reproduced; at least half: direction",
        measured="lg_throughput (loadgen) of the Table 6 cells and of mixes of /bytes/100 and /bytes/102400 "
                 "(0, 10, 100% heavy) on veth, SO_SNDBUF 16384",
        delta=PRACTICAL, criterion=event_flow.fig14_16_netty_hybrid),
    Claim(
        id="events_fast", title='"Are events fast?": mean latency vs concurrency',
        publication=EVENTS_FAST, source="latency vs concurrency",
        paper="process-per-conn slowest; thread-per-conn close to the event loop; green threads fastest "
              "among the threaded designs; the accept queue (--backlog) limits what a server sees",
        value="process-per-conn slowest; thread-per-conn close to event-loop; green-threads fastest threaded",
        tolerance=f"slowest: within {1 - events_fast.EVENTS_FAST_SLOWEST:.0%} of the maximum; close: at most "
                  f"{events_fast.EVENTS_FAST_CLOSE - 1:.0%} above event-loop",
        rule="every comparison at every concurrency holds: reproduced; at least half: direction; the "
             "backlog cells are reported, not judged",
        measured="lat_mean_ms (loadgen) over a concurrency axis; backlog cells: lg_throughput, lg_errors, lat_p99_ms",
        delta=PRACTICAL, criterion=events_fast.events_fast_latency),
    Claim(
        id="compare_arch", title='"Comparing the performance of web server architectures"',
        publication=COMPARING, source="throughput and syscall comparisons",
        paper="n-copy (one event loop per CPU) beats a single event loop on a multi-core host; poll/select cost "
              "grows with the interest set, epoll's does not (the disk-bound comparison: compare_arch_disk)",
        value="n-copy > event-loop; poll, select CPU growth > epoll's",
        tolerance="comparisons only",
        rule="every comparison holds: reproduced; at least half: direction",
        measured="lg_throughput of event-loop and n-copy (in-memory /bytes cells); "
                 "cpu_ms_per_request of event-loop per poller over mostly idle connections (think_ms)",
        delta=PRACTICAL, criterion=comparing.compare_arch_checks),
    Claim(
        id="process_graph", title="process-graph thesis: light requests next to heavy ones, steady load plus a burst",
        publication=PROCESS_GRAPH, source="light-request latency under a burst",
        paper="light (/null) requests keep a lower latency on process-graph than on a thread pool",
        value="process-graph's /null p99 < thread-pool's",
        tolerance=f"reproduced at least {1 - process_graph.PROCESS_GRAPH_BETTER:.0%} lower; lower by less: direction",
        rule=f"reproduced: /null p99 at most {process_graph.PROCESS_GRAPH_BETTER:.0%} of thread-pool's; direction: lower",
        measured="loadgen's per-class p99 of /null in a mix with /compute/2000, --rate with a --burst",
        delta=PRACTICAL, criterion=process_graph.process_graph_light_latency),
)


# =========================================================================================================
# Fanout tier: DoubleFaceAD (Middleware 2020). Which reference server stands for which of the paper's
# drivers: lab/criteria/doubleface.py (AIO -> fanout-pool, NettyBackend -> fanout-split --backend-loops K,
# sync -> fanout-sync, DoubleFaceAD -> fanout-shared --priority fanout). The memcached shards are started
# and loaded by the sweep (`shards = 4`, lab/shards.py).
DOUBLEFACE_AD = "DoubleFaceAD: A New Datastore Driver Architecture to Optimize Fanout Query Performance (Middleware 2020)"

FANOUT_CLAIMS = (
    Claim(
        id="fanout_tables", title="DoubleFaceAD Tables 1-3: threads, lock share, select calls, events per select",
        publication=DOUBLEFACE_AD, source="Tables 1, 2 and 3",
        paper="the AIO driver's hidden on-demand pool runs many threads with large responses (Table 1) and "
              "spends a large share on locks (Table 2); NettyBackend's separate backend loop makes more select "
              "calls, with a larger CPU share, and its HTTP loop handles ~0.7 events per select against ~22.7 on "
              "the backend loop (Table 3); of 1, 2 and 4 backend loops, two are best",
        value={"events per select": doubleface.FANOUT_T3_PAPER, "best backend loops": doubleface.FANOUT_BEST_LOOPS},
        tolerance=f"pool threads >= {doubleface.FANOUT_T1_THREADS_RATIO}x the shared reactor's; backend loop's events "
                  f"per epoll_wait >= {doubleface.FANOUT_T3_IMBALANCE:g}x the HTTP loop's (the paper's ratio is 32x); "
                  "the rest are orderings",
        rule="each comparison per workload: Table 1 (20 KB records) fanout-pool's threads and threads created; "
             "Table 2 fanout-pool's futex share above the reactors'; Table 3 (0.1 KB records) fanout-split x1 "
             "more epoll_wait per HTTP request and a larger epoll_wait CPU share than fanout-shared, the imbalance, "
             "and fanout-split x2 the highest throughput of x1/x2/x4; all hold: reproduced; at least half: direction",
        measured="capture columns per cell: threads_seen, fo_threads_created, futex_share (futex calls / traced calls), "
                 "fo_polls_per_http (epoll_wait calls per HTTP response), fo_poll_cpu_share (on-CPU time in "
                 "epoll_wait / on-CPU time), fo_front_events_per_poll (main thread = HTTP loop), "
                 "fo_backend_events_per_poll (the other polling threads), lg_throughput; 4 memcached shards "
                 "started by the sweep, closed loop, /fanout/20/100 and /fanout/8/20000, 8 connections",
        delta=PRACTICAL, criterion=doubleface.fanout_tables),
    Claim(
        id="fanout_fig13", title="DoubleFaceAD Figure 13: throughput of the fanout-aware shared reactor",
        publication=DOUBLEFACE_AD, source="Figure 13",
        paper="DoubleFaceAD's throughput is 20%, 25% and 34% higher than the other drivers' (up to 34%)",
        value=doubleface.FIG13_PAPER_GAINS,
        tolerance=f"reproduced from {doubleface.FIG13_GAIN_MIN:+.0%} over every baseline (the paper's smallest "
                  "gain, 20%, halved)",
        rule=f"reproduced: {doubleface.DOUBLEFACE} at least {doubleface.FIG13_GAIN_MIN:+.0%} over fanout-split (its "
             "best K), fanout-pool and fanout-sync on every workload; direction: ahead in at least half the "
             "comparisons; otherwise not reproduced",
        measured="lg_throughput (closed loop, 8 connections, 4 memcached shards) of fanout-shared --priority fanout "
                 "against fanout-split --backend-loops 1/2/4, fanout-pool and fanout-sync on the same workload; "
                 "fanout-shared without priority is reported, not judged",
        delta=PRACTICAL, criterion=doubleface.fanout_fig13_throughput),
    Claim(
        id="fanout_fig15", title="DoubleFaceAD Figure 15: tail latency of the fanout-aware shared reactor",
        publication=DOUBLEFACE_AD, source="Figure 15",
        paper="DoubleFaceAD's 99th percentile response time is 1.9x lower than the other drivers'",
        value=doubleface.FIG15_PAPER_RATIO,
        tolerance=f"reproduced from {doubleface.FIG15_RATIO_MIN}x (the paper's 1.9x less ~20%)",
        rule=f"reproduced: every baseline's p99 at least {doubleface.FIG15_RATIO_MIN}x {doubleface.DOUBLEFACE}'s on "
             "every workload; direction: lower in at least half the comparisons; otherwise not reproduced",
        measured="lat_p99_ms (loadgen, closed loop, 8 connections) of a mix of short and long fanout requests "
                 "(90% /fanout/1/100, 10% /fanout/20/20000: the priority writes short responses first) on "
                 "fanout-shared --priority fanout against fanout-split (best K), fanout-pool and fanout-sync",
        delta=PRACTICAL, criterion=doubleface.fanout_fig15_tail),
)
CLAIMS = CLAIMS + FANOUT_CLAIMS
# ================================================================================== end of the fanout tier


# =========================================================================================================
# Pariag et al. with disk: files by sendfile(2), the server's page cache bounded by a memory cgroup.
DISK_CLAIMS = (
    Claim(
        id="compare_arch_disk", title='"Comparing the performance of web server architectures": disk-bound file serving',
        publication=COMPARING, source="SPED / SYMPED / thread-per-connection / WatPipe under a working set larger than memory",
        paper="with a file set larger than memory, the event-driven SYMPED (one process per CPU) and the pipelined "
              "WatPipe are about equal and ahead of thread-per-connection; SPED (one event loop) is hurt by blocking "
              "disk reads",
        value="n-copy ~ pipeline > thread-per-conn; event-loop behind, losing more to the disk than n-copy",
        tolerance=f"about equal: within {comparing.COMPARE_DISK_EQUAL:.0%}; the rest are orderings; cells count as "
                  f"disk-bound only if the server read at least {comparing.COMPARE_DISK_MISS_KB} KB per request from storage",
        rule="every comparison holds: reproduced; at least half: direction; fewer: not reproduced; no measured "
             "page-cache misses: not measured",
        measured="lg_throughput and lat_p99_ms of /file/* (uniform over the file set, sendfile) on event-loop (SPED), "
                 "n-copy --workers 2 (SYMPED), thread-per-conn and pipeline --workers 2; disk-bound: 2048 files of 128 KB "
                 "(256 MiB) with the server in a memory cgroup of 48 MiB, pages dropped before each cell; cached: 256 "
                 "files (32 MiB), no limit; dk_read_kb_per_request = /proc/PID/io read_bytes of the server's processes "
                 "during the load / requests",
        delta=PRACTICAL, criterion=comparing.compare_disk),
)
CLAIMS = CLAIMS + DISK_CLAIMS
# ================================================================================== end of the disk comparison


def judge_all(table: pd.DataFrame, needs_full=(), looks: int = 1, stopped: dict | None = None) -> list:
    """[(claim, finding)] for every claim, in CLAIMS order, each verdict weighed over the repetitions of its
    cells (lab/confidence.py); the claims in `needs_full` are those the sweep's matrix does not settle;
    `looks` and `stopped` are the sequential test's (lab/sequential.py)."""
    return confidence.judge_all(CLAIMS, table, needs_full, looks, stopped)



# =========================================================================================== claims block:
# crossover, table6_default, events_fast_ab, process_graph_bounded, server_cpus (issue #16, wt-claims).
CLAIMS = CLAIMS + (
    Claim(
        id="crossover", title="Figures 4/6c: thread-per-conn vs the event loop at 100 KB, crossover concurrency",
        publication=EVENT_FLOW, source="Figure 4, Figure 6(c)",
        paper="at 100 KB responses the thread-based server has the higher throughput below some concurrency and "
              "the single-threaded event loop above it (the event loop's write-spin costs it at low concurrency)",
        value="thread-per-conn ahead at the lowest concurrency, the spinning event loop ahead from a crossover "
              "concurrency to the highest; the measured figure is that crossover concurrency",
        tolerance=f"'ahead' means at least {event_flow.CROSSOVER_MARGIN:.0%} more req/s (closer is a tie); the crossover "
                  "is interpolated in log(concurrency) between the last concurrency where thread-per-conn leads and "
                  "the first from which the loop stays ahead; no number is compared with the paper's (its testbed "
                  "and JVM servers set where the crossover falls)",
        rule="reproduced: in every condition measured, the spinning loop below thread-per-conn by the margin at the "
             "lowest concurrency and above it by the margin at the highest, with a crossover between; direction: "
             "a crossover without the margins, or the loop/thread-per-conn ratio grows with concurrency; else not "
             "reproduced. The non-spinning loop (--write-policy epollout) is reported, not judged",
        measured="lg_throughput of thread-per-conn, event-loop spin and event-loop epollout at /bytes/102400 over "
                 "concurrency 10-1000 (quick) / 10-2000 (full); quick: veth, SO_SNDBUF 16384 (32768 effective), "
                 "default client window, server pinned to CPU 0 and loadgen to CPU 1, so one server CPU for both "
                 "designs and a loop that spins; full adds loopback with the default buffers (no spin: 1 write "
                 "per response)",
        delta=CROSSOVER_TIE, criterion=event_flow.crossover_throughput),
    Claim(
        id="table6_default", title="Table 6 at the default client receive window: writes per 100 KB response",
        publication=EVENT_FLOW, source="Table 6",
        paper=f"spinning event loop with a 16 KB send buffer: {event_flow.TABLE6_PAPER_100KB} write calls per 100 KB "
              "response, 1 per 0.1 and 10 KB response; the blocking thread-based server ~1",
        value={"paper_100KB": event_flow.TABLE6_PAPER_100KB, "sndbuf_asked": event_flow.TABLE6_SNDBUF_ASKED,
               "sndbuf_linux": event_flow.TABLE6_SNDBUF_LINUX, "expected_here": event_flow.TABLE6_DEFAULT_EXPECTED},
        tolerance=(f"{event_flow.TABLE6_DEFAULT_RANGE[0]:g}-{event_flow.TABLE6_DEFAULT_RANGE[1]:g} writes per 100 KB response. "
                   f"Centre: the paper's {event_flow.TABLE6_PAPER_100KB} scaled to Linux's buffer (SO_SNDBUF "
                   f"{event_flow.TABLE6_SNDBUF_ASKED} gives {event_flow.TABLE6_SNDBUF_LINUX} bytes: half as many buffer fills "
                   f"per response, so {event_flow.TABLE6_DEFAULT_EXPECTED:g} with the paper's EAGAIN retries per fill). The "
                   "retries per fill depend on the loop's write-call rate against the client's drain rate (CPU share, "
                   "JVM vs C, link), so the band is wide: from one EAGAIN per fill on average (2 x 102400 / "
                   f"{event_flow.TABLE6_SNDBUF_LINUX}; fewer is not a spin) to {event_flow.TABLE6_DEFAULT_FACTOR}x the scaled "
                   f"value; at most {event_flow.TABLE6_SMALL_MAX} at 0.1 and 10 KB; thread-per-conn at most "
                   f"{event_flow.TABLE6_BLOCKING_MAX}"),
        rule="reproduced: every bound holds; direction: more than "
             f"{event_flow.TABLE6_SPIN_MIN} writes per 100 KB response and {event_flow.TABLE6_SPIN_MIN}x thread-per-conn's; "
             "the 4 KB-window cells stay with the table6 claim (their count is set by the small window: hundreds)",
        measured="writes_per_request (capture) of event-loop spin and thread-per-conn, veth, SO_SNDBUF 16384, the "
                 "client's default receive window (no --rcvbuf), concurrency 4, 0.1 / 10 / 100 KB",
        criterion=event_flow.table6_default_window, min_reps=1),
    Claim(
        id="events_fast_ab", title='"Are events fast?" with keep-alive off: one request per connection',
        publication=EVENTS_FAST, source="title claim; ApacheBench-style load",
        paper="user-level (green) threads serve as fast as an event loop; creating a kernel thread, or worse a "
              "process, per connection costs throughput",
        value="green-threads >= 90% of event-loop; process-per-conn lowest; thread-per-conn >= 80% of event-loop; "
              "green-threads the fastest threaded design",
        tolerance=f"green threads at least {events_fast.EVENTS_AB_AS_FAST:.0%} of the event loop's req/s; thread-per-conn "
                  f"at least {events_fast.EVENTS_AB_CLOSE:.0%} (the events_fast claim's 25% closeness, as throughput)",
        rule="every comparison at every concurrency holds: reproduced; at least half: direction",
        measured="lg_throughput and lat_p99_ms (loadgen, --keepalive off: connect, one request, close) of event-loop, "
                 "green-threads, thread-per-conn (a thread per request) and process-per-conn (a fork per request), "
                 "/bytes/100, loopback",
        delta=PRACTICAL, criterion=events_fast.events_fast_keepalive_off),
    Claim(
        id="process_graph_bounded", title="process-graph thesis with a bounded pool: 8 workers, 32+ connections",
        publication=PROCESS_GRAPH, source="light-request latency when the pool queues",
        paper="with more connections than workers a thread pool makes light requests wait behind whole "
              "connections; a process graph with the same number of workers keeps their p99 and max latency lower",
        value="process-graph x8 /null p99 < thread-pool x8's, at equal throughput",
        tolerance=f"equal throughput: req/s within {process_graph.PG_EQUAL_TP:.0%} (open-loop --rate, so both are offered the "
                  f"same requests); a server that served more than {process_graph.PG_EQUAL_TP:.0%} less counts as the worse "
                  f"(its missing requests were still queued at the end); reproduced at most "
                  f"{process_graph.PG_BOUNDED_BETTER:.0%} of the pool's p99",
        rule="per load setting: every pair reproduced: reproduced; at least half lower: direction; else not "
             "reproduced; /null max latency is reported next to p99",
        measured="loadgen per-class /null p50, p99, max and lg_throughput; mix 90:/null,10:/compute/2000, --rate 400 "
                 "with a burst to 2000/s, --concurrency 32 (quick) and 64 (full), keep-alive on (and off in full); "
                 "process-graph --workers 8 vs thread-pool --workers 8",
        delta=PRACTICAL, criterion=process_graph.process_graph_bounded),
    Claim(
        id="server_cpus", title="One and two server CPUs: one event loop vs N copies",
        publication=COMPARING, source="one copy vs N copies on 1 and N CPUs (the multi-processor figures)",
        paper="a single event-loop process cannot use a second CPU; N copies of it (one per CPU) can, and on one "
              "CPU the copies gain nothing",
        value="2 CPUs: n-copy > 1.1 x event-loop; 1 CPU: n-copy >= 0.9 x event-loop; n-copy gains more from the "
              "second CPU than event-loop",
        tolerance=f"n-copy at least {comparing.NCOPY_GAIN - 1:.0%} ahead on the most CPUs; within "
                  f"{1 - comparing.NCOPY_SAME:.0%} on one",
        rule="every comparison holds: reproduced; at least half: direction. Caveat: the machine has 2 cores and "
             "the load generator runs on them too, so 'two server CPUs' is two CPUs shared with the client",
        measured="lg_throughput of event-loop and n-copy --workers 2 with the server under taskset -c 0 and -c 0-1 "
                 "(server_cpus axis), /bytes/100, concurrency 32",
        delta=PRACTICAL, criterion=comparing.server_cpus_scaling),
)
# =========================================================================================== end claims block
