"""What `spinscope exporter` writes at each scrape: every metric family it serves (METRICS, the contract
the dashboard and alert rules in deploy/ are tested against) and how a target's latest line becomes its
samples. A View is a target as the next scrape shows it (threads summed by name and role: no series is per
thread id); `families` turns the views into prometheus_client families, the per-request histograms being
the kernel's log2 buckets as Prometheus buckets (`le` = 2^k - 1). The labels are judged here too (`judge`),
over the span of lines the exporter hands in. Names follow Prometheus's conventions: the prefix
`spinscope_`, base units (seconds, bytes), `_total` on counters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

JUDGE_EVERY_S = 5.0
WRITES_LE_MAX = 20  # writes per request buckets: le = 0, 1, 3, ..., 2^20 - 1, +Inf
DURATION_K = range(10, 37)  # request-time buckets: le = (2^k - 1) ns for k in 10..36 (1 us to 69 s), +Inf

PROCESS = ("pid", "process")
GROUP = ("pid", "process", "thread", "role")


@dataclass(frozen=True)
class Family:
    name: str  # without _total for counters (prometheus_client adds it)
    kind: str  # counter, gauge, histogram
    help: str
    labels: tuple
    when: str = ""  # written only then (a configuration that adds it); "": always, by families()


AUTH_FAILURES = "spinscope_exporter_auth_failures"  # counted by the endpoint (web.guard), named here

METRICS = (
    Family("spinscope_targets", "gauge", "Processes being traced.", ()),
    Family("spinscope_selector_matches", "gauge", "Processes a target option matches now.", ("selector",)),
    Family("spinscope_target_info", "gauge", "A traced process: its executable and the option that selected it.",
           (*PROCESS, "exe", "selector")),
    Family("spinscope_traced_seconds", "counter", "Seconds the probes have been live on the target.", PROCESS),
    Family("spinscope_sampled_ratio", "gauge", "Share of the time the probes are live (1: continuous).", PROCESS),
    Family("spinscope_requests", "counter", "Requests answered (a read burst, then at least one write; on an HTTP/2 "
           "cleartext connection a stream).", PROCESS),
    Family("spinscope_request_writes", "histogram", "Socket write calls per request.", PROCESS),
    Family("spinscope_request_duration_seconds", "histogram",
           "Request time: first read returned to last write returned.", PROCESS),
    Family("spinscope_drops", "counter", "Entries the probes could not record, a map being full.", (*PROCESS, "kind")),
    Family("spinscope_label", "gauge", "A verdict over the last window: 1 while it holds.",
           (*PROCESS, "label", "severity")),
    Family("spinscope_label_cost_ratio", "gauge",
           "A verdict's measured cost: share of the involved threads' CPU (or of request time).", (*PROCESS, "label")),
    Family("spinscope_label_call_site_ratio", "gauge",
           "With --stacks: a verdict's top call sites (rank 1 to 3, one per function and module): the share of its "
           "events there (of its CPU samples where the runtime stacks helper's samples rank them, or for a pattern "
           "without events in the window).",
           (*PROCESS, "label", "rank", "function", "module"),
           when="--stacks"),
    Family("spinscope_stacks_helper_up", "gauge",
           "With --stacks on a CPython, JVM or Node target: 1 while the runtime stacks helper names the runtime's "
           "frames in its call sites; 0 when it does not, and why (reason: not-found, failed, exited, duty-cycled).",
           (*PROCESS, "runtime", "reason"), when="--stacks"),
    Family("spinscope_finding", "gauge",
           "A finding over the last window (busy-polling, write-wait, nagle-stall: a cost with no severity): 1 while it holds.",
           (*PROCESS, "finding")),
    Family("spinscope_threads", "gauge", "Live threads in the group.", GROUP),
    Family("spinscope_responses", "counter", "Requests whose first response write the group made (on an HTTP/2 "
           "connection: streams it ended).", GROUP),
    Family("spinscope_connections", "counter",
           "Serving connections whose requests are not counted as exchanges, by how: stream (HTTP/2 cleartext, "
           "its streams), tls (a TLS ClientHello: exchanges, HTTP/2 inside unseen); first read by the group.",
           (*GROUP, "counted")),
    Family("spinscope_http2_streams", "counter", "HTTP/2 streams opened (each a request) that the group read.", GROUP),
    Family("spinscope_http2_unfollowed_bytes", "counter",
           "Bytes of HTTP/2 reads and writes the frame walk did not follow (it lost its place): their streams "
           "are not counted.", GROUP),
    Family("spinscope_socket_writes", "counter", "Socket write calls by result.", (*GROUP, "result")),
    Family("spinscope_socket_write_bytes", "counter", "Bytes socket writes moved.", GROUP),
    Family("spinscope_socket_reads", "counter", "Socket read calls by result.", (*GROUP, "result")),
    Family("spinscope_socket_read_bytes", "counter", "Bytes socket reads moved.", GROUP),
    Family("spinscope_write_retries", "counter",
           "Socket writes retried without waiting for writability, by what they retried: an EAGAIN (the spin) "
           "or a partial write.", (*GROUP, "after")),
    Family("spinscope_write_retry_cpu_seconds", "counter",
           "On-CPU time of the retries' whole cycles (previous write's return to the retry's return).", GROUP),
    Family("spinscope_polls", "counter", "Poll-family calls (epoll_wait, poll, select) by outcome.",
           (*GROUP, "outcome")),
    Family("spinscope_poll_nowait_calls", "counter", "Poll calls with a zero timeout (checks, not waits).", GROUP),
    Family("spinscope_empty_poll_cpu_seconds", "counter",
           "On-CPU time in polls that returned nothing and in reads that returned EAGAIN.", GROUP),
    Family("spinscope_accepts", "counter", "accept and accept4 calls by result (eagain: nothing to take).",
           (*GROUP, "result")),
    Family("spinscope_futile_wakeups", "counter",
           "Poll wakeups whose ready descriptors gave nothing (a herd: another waiter took it).", GROUP),
    Family("spinscope_futex_waits", "counter", "futex wait calls.", GROUP),
    Family("spinscope_futex_wait_seconds", "counter", "Time spent in futex waits (wall).", GROUP),
    Family("spinscope_context_switches", "counter", "Context switches away from the group's threads.",
           (*GROUP, "kind")),
    Family("spinscope_wakeups", "counter",
           "Wakeups of the target's own threads the group made, by mechanism (handoffs: all but mm and exit).",
           (*GROUP, "mechanism")),
    Family("spinscope_handoff_wait_seconds", "counter", "Wake-to-run latency of the handoffs the group received.",
           GROUP),
    Family("spinscope_handoff_cpu_seconds", "counter", "On-CPU time in the calls that hand off or are handed to.",
           GROUP),
    Family("spinscope_runqueue_wait_seconds", "counter", "Time runnable but waiting for a CPU.", GROUP),
    Family("spinscope_cpu_seconds", "counter", "Time on CPU while traced.", GROUP),
    Family(AUTH_FAILURES, "counter",
           "Requests refused for their basic-auth credentials (401): missing (none, or not Basic), wrong (an "
           "unknown user or a wrong password).", ("reason",), when="--web-config with basic_auth_users"),
)
FAMILIES = {family.name: family for family in METRICS}


def sample_names(conditional: bool = True) -> set:
    """Every sample name the exposition can hold (counters' _total, histograms' _bucket/_sum/_count);
    without `conditional`, only those of the families always written (Family.when empty)."""
    names = set()
    for family in METRICS:
        if family.when and not conditional:
            continue
        if family.kind == "counter":
            names.add(family.name + "_total")
        elif family.kind == "histogram":
            names |= {family.name + suffix for suffix in ("_bucket", "_sum", "_count")}
        else:
            names.add(family.name)
    return names


def auth_failures() -> tuple:
    """(name, help) of the counter the endpoint keeps of its basic-auth refusals: a family of METRICS."""
    return AUTH_FAILURES, FAMILIES[AUTH_FAILURES].help


# ---------------------------------------------------------------------------------------------------------
# What a target's latest line says, ready for a scrape


@dataclass
class View:
    """A target as the next scrape shows it: computed when a line arrives, read by the scrape thread."""

    pid: int  # 0 for a cgroup target (its processes are summed; `process` is the cgroup's name)
    process: str
    exe: str
    selector: str
    traced_s: float
    sampled: float
    requests: dict  # the request sums and `hist` (Capture.requests, Capture.request_hists)
    drops: dict
    groups: list  # [(thread name, role, live threads, {counter: value})]
    # [(name, severity, cost share or None, [(function, module, share)] top call sites)]; findings: severity None
    labels: list = field(default_factory=list)
    stacks_helper: tuple | None = None  # with --stacks on a managed runtime: (runtime, why not or "")


def view_of(cap, selector: str, labels: list, sampled: float = 1.0, stacks_helper: tuple | None = None) -> View:
    """The View of a capture (the stream's latest line): threads summed by name and role."""
    from spinscope.analysis.roles import infer_roles
    from spinscope.analysis.schema import COUNTERS

    roles = infer_roles(cap.threads, cap.request_count)
    by_group: dict = {}
    for tid, thread in cap.threads.items():
        by_group.setdefault((thread["comm"], roles[tid]), []).append(thread)
    groups = []
    for (comm, role), group in sorted(by_group.items()):
        sums = {key: sum(thread[key] for thread in group) for key in COUNTERS}
        groups.append((comm, role, sum(thread["alive"] for thread in group), sums))
    return View(pid=cap.target_pid, process=cap.target_comm, exe=cap.target_exe,
                selector=selector, traced_s=cap.duration_s, sampled=sampled,
                requests={**cap.requests, "hist": cap.request_hists}, drops=cap.drops, groups=groups,
                labels=labels, stacks_helper=stacks_helper)


def scaled(base: View | None, cur: View, factor: float) -> View:
    """base + cur x factor: a duty-cycled target's counters, every finished cycle's counts scaled to the
    whole period they stand for (the probes were live `1 / factor` of it). traced_s is not scaled."""
    def add(a, b):
        if isinstance(b, dict):
            return {k: add(a.get(k, 0) if isinstance(a, dict) else 0, v) for k, v in b.items()}
        if isinstance(b, list):
            a = a if isinstance(a, list) else []
            return [add(a[i] if i < len(a) else 0, v) for i, v in enumerate(b)] + a[len(b):]
        return (a or 0) + b * factor if isinstance(b, (int, float)) and not isinstance(b, bool) else b

    groups = {(comm, role): (0, counters) for comm, role, _, counters in (base.groups if base else [])}
    for comm, role, alive, counters in cur.groups:
        groups[(comm, role)] = (alive, add(groups.get((comm, role), (0, {}))[1], counters))
    return View(pid=cur.pid, process=cur.process, exe=cur.exe, selector=cur.selector,
                traced_s=(base.traced_s if base else 0.0) + cur.traced_s, sampled=cur.sampled,
                requests=add(base.requests if base else {}, cur.requests),
                drops=add(base.drops if base else {}, cur.drops),
                groups=[(comm, role, alive, counters) for (comm, role), (alive, counters) in sorted(groups.items())],
                labels=cur.labels, stacks_helper=cur.stacks_helper)


def judge(span) -> list:
    """[(name, severity, cost share)] of the labels over a window capture, then the findings (severity None)."""
    from spinscope.analysis.labels import assess
    from spinscope.analysis.metrics import analyze

    assessment = assess(analyze(span))
    return ([(label.name, label.severity, label.cost_share, _top_sites(label)) for label in assessment.labels]
            + [(finding.name, None, finding.cpu_share, []) for finding in assessment.findings])


CALL_SITES_EXPORTED = 3  # per label: the exporter's cardinality stays bounded


def _top_sites(label) -> list:
    """[(function, module, share)] of the label's top call sites, one per function and module (the sites of one
    function at other lines or under other callers summed: one series per site), each site's share the one
    the analysis ranks them by (CallSite.share: of its events, or of its CPU samples where the runtime
    helper's samples rank them or it has no events), ranked by share, then by name: the same data, the same
    ranks."""
    shares: dict = {}
    for site in label.call_sites:
        key = (site["function"], site["module"] or "")
        shares[key] = shares.get(key, 0.0) + site["share"]
    ranked = sorted(((round(share, 4), key) for key, share in shares.items()), key=lambda r: (-r[0], r[1]))
    return [(function, module, share) for share, (function, module) in ranked[:CALL_SITES_EXPORTED]]


def _log2_buckets(hist: list, ks, scale: float = 1.0) -> list:
    """Cumulative Prometheus buckets from a log2 histogram (bucket 0: value 0; bucket k: [2^(k-1), 2^k - 1]):
    one per k in ks with le = (2^k - 1) * scale, then +Inf."""
    out, running, i = [], 0, 0
    for k in ks:
        while i <= k and i < len(hist):
            running += hist[i]
            i += 1
        out.append((_le((2**k - 1) * scale), running))
    out.append(("+Inf", sum(hist)))
    return out


def _le(value: float) -> str:
    return f"{int(value)}.0" if value == int(value) else format(value, ".10g")


def families(views: list, selectors: dict):
    """The metric families for the current views; `selectors`: {selector text: processes matched now}."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

    made = {}
    for family in (f for f in METRICS if not f.when):
        cls = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily, "histogram": HistogramMetricFamily}[family.kind]
        made[family.name] = cls(family.name, family.help, labels=list(family.labels))

    def add(name: str, labels: tuple, value: float) -> None:
        if name not in made:  # a family written only when there is something for it (Family.when)
            family = next(f for f in METRICS if f.name == name)
            made[name] = GaugeMetricFamily(family.name, family.help, labels=list(family.labels))
        made[name].add_metric([str(v) for v in labels], value)

    add("spinscope_targets", (), len(views))
    for text, count in selectors.items():
        add("spinscope_selector_matches", (text,), count)
    for v in views:
        proc = (v.pid or "", v.process)
        _process_samples(made, add, v, proc)
        for comm, role, alive, c in v.groups:
            add("spinscope_threads", (*proc, comm, role), alive)
            _group_samples(add, (*proc, comm, role), c)
    return list(made.values())


def _process_samples(made: dict, add, v, proc: tuple) -> None:
    """A view's samples labelled by its process: what it is, its requests, drops, labels and findings."""
    add("spinscope_target_info", (*proc, v.exe, v.selector), 1)
    add("spinscope_traced_seconds", proc, v.traced_s)
    add("spinscope_sampled_ratio", proc, v.sampled)
    add("spinscope_requests", proc, v.requests["count"])
    hist = v.requests["hist"]
    made["spinscope_request_writes"].add_metric(
        [str(x) for x in proc], _log2_buckets(hist["write_calls"], range(0, WRITES_LE_MAX + 1)),
        sum_value=v.requests["write_calls"])
    made["spinscope_request_duration_seconds"].add_metric(
        [str(x) for x in proc], _log2_buckets(hist["duration_ns"], DURATION_K, 1e-9),
        sum_value=v.requests["duration_ns"] / 1e9)
    for kind, count in v.drops.items():
        add("spinscope_drops", (*proc, kind), count)
    if v.stacks_helper:
        runtime, reason = v.stacks_helper
        add("spinscope_stacks_helper_up", (*proc, runtime, reason), 0 if reason else 1)
    for name, severity, share, *sites in v.labels:
        if severity is None:
            add("spinscope_finding", (*proc, name), 1)
            continue
        add("spinscope_label", (*proc, name, severity), 1)
        if share is not None:
            add("spinscope_label_cost_ratio", (*proc, name), share)
        for rank, (function, module, site_share) in enumerate(sites[0] if sites else [], 1):
            add("spinscope_label_call_site_ratio", (*proc, name, rank, function, module),
                site_share)


def _group_samples(add, g: tuple, c) -> None:
    """The samples of one (process, comm, role) group of threads, from its counters (the quantities as
    spinscope.analysis.counters defines them)."""
    from spinscope.analysis import counters as counts

    add("spinscope_responses", g, c["responses_written"])
    add("spinscope_connections", (*g, "stream"), c["h2_connections"])
    add("spinscope_connections", (*g, "tls"), c["tls_connections"])
    add("spinscope_http2_streams", g, c["h2_streams"])
    add("spinscope_http2_unfollowed_bytes", g, c["h2_lost_bytes"])
    for result, value in counts.writes_by_result(c).items():
        add("spinscope_socket_writes", (*g, result), value)
    add("spinscope_socket_write_bytes", g, c["write_bytes"])
    for result, value in counts.reads_by_result(c).items():
        add("spinscope_socket_reads", (*g, result), value)
    add("spinscope_socket_read_bytes", g, c["read_bytes"])
    add("spinscope_write_retries", (*g, "eagain"), counts.eagain_retries(c))
    add("spinscope_write_retries", (*g, "partial"), counts.partial_retries(c))
    add("spinscope_write_retry_cpu_seconds", g, c["write_spin_ns"] / 1e9)
    for outcome, value in counts.polls_by_outcome(c).items():
        add("spinscope_polls", (*g, outcome), value)
    add("spinscope_poll_nowait_calls", g, c["poll_nowait"])
    add("spinscope_empty_poll_cpu_seconds", g, counts.empty_poll_ns(c) / 1e9)
    for result, value in counts.accepts_by_result(c).items():
        add("spinscope_accepts", (*g, result), value)
    add("spinscope_futile_wakeups", g, counts.herd_wakeups(c))
    add("spinscope_futex_waits", g, c["futex_waits"])
    add("spinscope_futex_wait_seconds", g, c["futex_wait_ns"] / 1e9)
    add("spinscope_context_switches", (*g, "voluntary"), c["cs_voluntary"])
    add("spinscope_context_switches", (*g, "involuntary"), c["cs_involuntary"])
    for mechanism, value in counts.wakeups_by_mechanism(c).items():
        add("spinscope_wakeups", (*g, mechanism), value)
    add("spinscope_handoff_wait_seconds", g, c["wakeup_wait_ns"] / 1e9)
    add("spinscope_handoff_cpu_seconds", g, c["handoff_oncpu_ns"] / 1e9)
    add("spinscope_runqueue_wait_seconds", g, c["runq_ns"] / 1e9)
    add("spinscope_cpu_seconds", g, c["oncpu_ns"] / 1e9)


class ViewsCollector:
    """prometheus_client's custom collector: the exporter's views at the moment of the scrape."""

    def __init__(self, exporter):  # live.exporter.Exporter: its snapshot() of views and selectors
        self.exporter = exporter

    def describe(self):
        return []  # nothing to check at registration: the families depend on the targets

    def collect(self):
        views, selectors = self.exporter.snapshot()
        return families(views, selectors)
