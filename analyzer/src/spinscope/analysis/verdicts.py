"""What a verdict is: a label (a problem, graded by what its fix saves) or a finding (worth knowing, no
severity), their names and titles: one name each, in the report, `--json`, `top`, the exporter and
docs/labels.md. The patterns (labels.py, patterns/) make them; output/ and live/ show them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# Label names (problems) and finding names (not problems): one name each, in the report, `--json`, `top`,
# the exporter and docs/labels.md.
WRITE_SPIN = "write-spin"
SPURIOUS_SELECT = "spurious-select"
HANDOFF_OVERHEAD = "handoff-overhead"
WRITE_WAIT = "write-wait"
BUSY_POLLING = "busy-polling"
NAGLE_STALL = "nagle-stall"
LABEL_NAMES = (WRITE_SPIN, SPURIOUS_SELECT, HANDOFF_OVERHEAD)
FINDING_NAMES = (WRITE_WAIT, BUSY_POLLING, NAGLE_STALL)
TITLES = {WRITE_SPIN: "write-spin", SPURIOUS_SELECT: "spurious select", HANDOFF_OVERHEAD: "handoff overhead",
          WRITE_WAIT: "waits for writability", BUSY_POLLING: "busy polling",
          NAGLE_STALL: "responses held by Nagle's algorithm"}


class _Verdict:
    """What a Label and a Finding share: a title from the name, and the dict `--json` writes (fields, title)."""

    name: str

    @property
    def title(self) -> str:
        return TITLES[self.name]

    def to_dict(self) -> dict:
        return {**asdict(self), "title": self.title}


@dataclass
class Label(_Verdict):
    name: str
    severity: str
    summary: str
    evidence: dict
    cpu_share: float | None  # measured share of the involved threads' on-CPU time (None: not measurable)
    fixes: list
    details: list = field(default_factory=list)  # human lines: per size class, per thread, per edge
    estimated: bool = False  # the cost is estimated, not measured (the summary says how)
    cost_share: float | None = None  # the share the severity follows (CPU, or request time for handoffs)
    syscall_share: float | None = None  # cpu_share's part timed by the syscall and scheduler probes
    user_share: float | None = None  # ...and its user-space part from stack samples (None: not sampled)
    call_sites: list = field(default_factory=list)  # where, from stack samples (analysis/stack_costs.py)
    saving: float | None = None  # what the fix saves: a share of the process's CPU or the request time (savings.py)
    saving_of: str | None = None  # which: "CPU" or "request time"; and a CPU saving in CPUs
    saving_cpus: float | None = None


@dataclass
class Finding(_Verdict):
    """Something a server does that costs request time or CPU, with no severity: by design, not a problem by
    itself (write-wait, busy-polling: its measured cost and what to weigh it against), or by a setting whose
    fix is known (nagle-stall: its fixes)."""

    name: str
    summary: str
    evidence: dict
    cpu_share: float | None
    advice: list  # what to weigh it against (`weigh: ...`)
    saving: float | None = None  # what acting on it saves, on the labels' scale (savings.py), of and in CPUs:
    saving_of: str | None = None
    saving_cpus: float | None = None
    # A finding that is a defect of configuration rather than a trade (nagle-stall): how to remove it, the
    # lines that say its numbers, and with --stacks where (as a label's).
    fixes: list = field(default_factory=list)
    details: list = field(default_factory=list)
    call_sites: list = field(default_factory=list)
