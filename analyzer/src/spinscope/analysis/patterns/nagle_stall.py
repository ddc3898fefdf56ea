"""nagle-stall: responses written in more than one call on a TCP connection with Nagle's algorithm on, whose
last bytes the kernel held until the client's ACK of the first segment arrived, which the client delays
(40 ms on Linux): the request waits on two timers while the server is idle (a finding, docs/labels.md).

The probes (bpf/nagle.bpf.h) prove the hold from the socket right after the write, with the kernel's own
Nagle test, and time it up to the client's next segment: nothing here rests on a gap between requests. A
client that thinks between requests, a server that writes once, or one with TCP_NODELAY set has no hold.
What it costs is the hold's time over the time the clients waited for their responses (the requests' time,
first read to last write, plus the holds after it): what TCP_NODELAY, or writing the response in one call,
saves.
"""

from __future__ import annotations

from dataclasses import dataclass

from spinscope.analysis import counters, savings, stack_costs
from spinscope.analysis.metrics import Analysis
from spinscope.analysis.patterns import NAGLE_STALL
from spinscope.analysis.runtime import CPYTHON, DOTNET, GO, JVM, NATIVE, NODE, runtime_of
from spinscope.analysis.verdicts import MIN_REQUESTS, Finding
from spinscope.fmt import size_class

# How each runtime turns Nagle off on the connections it accepts (docs/labels.md has the table), then the fix
# every runtime has: one write.
NODELAY_FIXES = {
    NATIVE: "set TCP_NODELAY on each accepted socket: setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one)",
    JVM: "turn Nagle off on the server's connections: the JDK's HTTP server with -Dsun.net.httpserver.nodelay=true, "
         "Netty with childOption(ChannelOption.TCP_NODELAY, true), a plain java.net.Socket with setTcpNoDelay(true)",
    GO: "Go sets TCP_NODELAY on every TCP connection by default: find the SetNoDelay(false) on these connections "
        "and remove it",
    NODE: "turn Nagle off on the server's connections: http.createServer({noDelay: true}), or socket.setNoDelay(true) "
          "on each connection (net.Server's sockets keep Nagle on)",
    CPYTHON: "set TCP_NODELAY on each accepted socket: sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1) "
             "(asyncio's transports set it themselves; a plain socket server does not)",
    DOTNET: "set Socket.NoDelay = true on each accepted socket (Kestrel sets it by default)",
}
ONE_WRITE_FIX = ("or write each response in one call: gather header and body with writev() (or a buffered writer "
                 "flushed once per response), or send the header with MSG_MORE, or under TCP_CORK uncorked after "
                 "the body")
EVENTS = "writes left held by Nagle"  # what its event stacks (source nagle-write) stand for

# Named when the holds are at least this share of the time the clients waited for their responses: a hold
# ended by a quick ACK (microseconds, the client's first segments) costs nothing worth acting on.
NAGLE_MIN_SHARE = 0.05


@dataclass
class NagleMeasure:
    requests: int
    holds: int            # holds a segment from the client ended (timed)
    hold_ns: float        # their time, after the requests' last writes
    held_writes: int      # writes that left bytes held (a hold the server wrote after is not timed)
    request_ns: float     # the requests' time, first read to last write
    write_calls: int      # the requests' writes
    tids: list            # the threads whose writes were held
    classes: list         # (bytes_min, bytes_max, responses, holds, hold ms) of the size classes with holds

    @property
    def share(self) -> float:
        """The holds' share of the time the clients waited for their responses."""
        return self.hold_ns / (self.request_ns + self.hold_ns)


def measure(analysis: Analysis) -> NagleMeasure | None:
    sums = analysis.capture.requests
    holds, hold_ns = int(counters.get(sums, "nagle_holds")), float(counters.get(sums, "nagle_hold_ns"))
    if analysis.requests < MIN_REQUESTS or not holds or hold_ns <= 0:
        return None
    m = NagleMeasure(analysis.requests, holds, hold_ns, int(counters.get(analysis.capture.totals, "nagle_held")),
                     float(sums["duration_ns"]), int(sums["write_calls"]),
                     [tid for tid, thread in analysis.threads.items() if counters.get(thread, "nagle_held")],
                     [(row["bytes_min"], row["bytes_max"], row["count"], row["nagle_holds"], row["nagle_hold_ns"] / 1e6)
                      for row in analysis.capture.by_size if counters.get(row, "nagle_holds")])
    return m if m.share >= NAGLE_MIN_SHARE else None


def finding(analysis: Analysis) -> Finding | None:
    m = measure(analysis)
    if m is None:
        return None
    hold_ms = m.hold_ns / 1e6 / m.holds
    request_ms = m.request_ns / 1e6 / m.requests
    writes = m.write_calls / m.requests
    summary = (f"nagle-stall: {m.holds:,} of {m.requests:,} responses ({m.holds / m.requests:.0%}) had their last "
               f"bytes held by Nagle's algorithm until the client's ACK, {hold_ms:,.1f} ms each on average, while "
               f"the server answered in {request_ms:,.3f} ms ({writes:.1f} writes per response, Nagle on): "
               f"{m.share:.0%} of the time the clients waited for their responses; set TCP_NODELAY, or write "
               "each response in one call")
    evidence = {
        "requests": m.requests, "responses_held": m.holds, "held_share_of_responses": round(m.holds / m.requests, 4),
        "hold_ms_total": round(m.hold_ns / 1e6, 3), "hold_ms_per_held_response": round(hold_ms, 3),
        "hold_ms_distribution": _distribution(analysis), "request_ms": round(request_ms, 4),
        "writes_per_request": round(writes, 2), "held_writes": m.held_writes,
        "held_writes_not_timed": max(0, m.held_writes - m.holds),
        "hold_share_of_waited_time": round(m.share, 4),
        "cost_measures": "the holds' time (from the write that left bytes held to the client's next segment) over "
                         "the requests' time plus the holds'",
    }
    details = [f"{size_class(low, high)} responses: {holds:,} of {n:,} held, {ms / holds:,.1f} ms each"
               for low, high, n, holds, ms in m.classes]
    if m.held_writes > m.holds:
        more = m.held_writes - m.holds
        details.append(f"{more:,} more write{'s' if more > 1 else ''} left bytes held whose hold is not timed: the "
                       "response's next write came first (the server was not idle), or the next request or a close")
    runtime = runtime_of(analysis.capture).name
    fixes = [NODELAY_FIXES.get(runtime) or NODELAY_FIXES[NATIVE], ONE_WRITE_FIX]
    found = Finding(NAGLE_STALL, summary, evidence, None, [], fixes=fixes, details=details)
    where = stack_costs.where(analysis, NAGLE_STALL, m.tids)
    if where is not None:
        found.call_sites = [site.to_dict() for site in where.call_sites]
        found.details += stack_costs.where_lines(where, EVENTS)
    return savings.apply(found, savings.of_time(m.share))


def _distribution(analysis: Analysis) -> dict:
    """The held responses' hold times by log2 bucket, in ms (`requests.hist.nagle_hold_ns` without bucket 0,
    the responses not held): {"33.6-67.1": n, ...}."""
    hist = analysis.capture.request_hists.get("nagle_hold_ns") or []
    return {f"{(1 << (k - 1)) / 1e6:.3g}-{(1 << k) / 1e6:.3g}": int(n) for k, n in enumerate(hist) if k and n}


DETECT = {NAGLE_STALL: finding}
