"""What a capture's stacks (`--stacks`, analysis/stacks.py) add to a label: where its events and time are
(its call sites), and for the hand-off the part of its cost that no syscall or scheduler tracepoint
times, the runtime's pool, queue and lock code in user space (docs/stacks.md).

A label's share is a claim about what its fix saves. Without stacks the hand-off's share counts the calls
that hand off and wait only, a lower bound, and the label says so; with them the share adds the
user-space samples of the hand-off's machinery, and the severity follows the sum. write-spin and
spurious-select time whole cycles already (a retry's or a futile wakeup's loop iteration, user space
included): the stacks add their call sites, not cost.
"""

from __future__ import annotations

from dataclasses import dataclass

from spinscope.analysis import stacks as S
from spinscope.analysis.metrics import Analysis

# The hand-off's machinery frames are the hand-off's cost only where requests are handed over: a server that
# hands over fewer than this many per request still runs its runtime's queues and promises for other work
# (Netty on its event loop: its task queue and write promises, 2% of its samples at one hand-off in 2,855
# requests, measured), and those samples are not a hand-off's.
USER_SHARE_MIN_HANDOFFS = 0.1  # hand-overs per request
CALL_SITES_SAID = 3  # call sites written as detail lines (all TOP_CALL_SITES are in the JSON)...
MIN_SHARE_SAID = 0.01  # ...the first always, the others from this share of the pattern's events or samples
EVENT_NOUNS = {S.WRITE_SPIN: "retries of an EAGAIN", S.SPURIOUS_SELECT: "futile wakeups and empty polls",
               S.HANDOFF_OVERHEAD: "calls that woke another thread", S.NAGLE_STALL: "writes left held by Nagle"}


@dataclass
class Where:
    """One pattern's stacks on its involved threads."""

    pattern: str
    found: S.PatternStacks
    stackset: S.StackSet
    handoffs_per_request: float | None = None  # the hand-off's rate, which its user-space part needs

    @property
    def counted(self) -> bool:
        """Whether the machinery's samples are the hand-off's: requests are handed over at
        USER_SHARE_MIN_HANDOFFS a request or more."""
        return (self.pattern == S.HANDOFF_OVERHEAD and self.handoffs_per_request is not None
                and self.handoffs_per_request >= USER_SHARE_MIN_HANDOFFS)

    @property
    def user_share(self) -> float | None:
        """The user-space part this adds to the label's share: the hand-off's machinery only."""
        return self.found.user_share if self.counted else None


def stack_set(analysis: Analysis) -> S.StackSet | None:
    """The capture's stacks, read once per capture."""
    raw = analysis.capture.raw
    if "stacks" not in raw:
        return None
    cache = analysis.__dict__.setdefault("_stacks", {})
    if "set" not in cache:
        cache["set"] = S.load(raw)
    return cache["set"]


def where(analysis: Analysis, pattern: str, tids, handoffs_per_request: float | None = None) -> Where | None:
    """What the stacks say of `pattern` on the threads `tids` (for the hand-off, with its hand-overs per
    request); None without stacks."""
    stackset = stack_set(analysis)
    if stackset is None:
        return None
    return Where(pattern, S.pattern_stacks(stackset, pattern, tids), stackset, handoffs_per_request)


def whole_share(syscall_share: float | None, found: Where | None) -> float | None:
    """The label's share: the syscall-measured part plus the user-space part the stacks add."""
    user = found.user_share if found else None
    if user is None:
        return syscall_share
    return (syscall_share or 0.0) + user


def attach(label, found: Where | None, syscall_share: float | None):
    """The label with its share's parts, its call sites and the lines that say them (the label is
    returned, changed)."""
    label.syscall_share = syscall_share
    label.user_share = found.user_share if found else None
    if found is None:
        if label.name == S.HANDOFF_OVERHEAD:
            label.details.append("its CPU share counts the calls that hand off and wait: a lower bound (the "
                                 "runtime's pool, queue and lock code in user space is not timed; record with "
                                 "--stacks to sample it)")
        return label
    label.call_sites = [site.to_dict() for site in found.found.call_sites]
    label.details.extend(_lines(label, found))
    if label.user_share:
        label.summary += (f"; {label.user_share:.0%} more of their CPU in the hand-off's machinery in user space "
                          "(stack samples)")
    return label


def _lines(label, found: Where) -> list:
    f = found.found
    lines = []
    if found.pattern == S.HANDOFF_OVERHEAD and not found.counted and f.machinery_user:
        lines.append(f"stack samples: {f.machinery_user} of {f.samples} in the runtime's queue, pool and lock frames, "
                     f"not counted as the hand-off's: {found.handoffs_per_request or 0:.2f} hand-overs per request "
                     f"(fewer than {USER_SHARE_MIN_HANDOFFS}), so those frames serve other work")
    if label.user_share is not None:
        runtimes = ", ".join(f"{name} {n}" for name, n in sorted(f.machinery_runtimes.items()))
        lines.append(f"stack samples: {label.user_share:.1%} of their CPU in the hand-off's machinery in user "
                     f"space ({f.machinery_user} of {f.samples} samples; by runtime: {runtimes or 'none'}), beside "
                     f"{label.syscall_share or 0:.1%} in the calls that hand off and wait: "
                     f"{(label.syscall_share or 0) + label.user_share:.1%} in all")
    return lines + site_lines(found)


def site_lines(found: Where) -> list:
    """`where: FUNCTION (FILE:LINE) ← callers: N% of its events`, for the first call sites (a label's and a
    finding's)."""
    f = found.found
    lines = []
    if not f.call_sites:
        lines.append(f"where: no stack of this pattern was sampled on its threads ({f.samples} CPU samples, "
                     f"{f.events} events)")
    for i, site in enumerate(f.call_sites[:CALL_SITES_SAID]):
        if i and max(site.event_share, site.sample_share) < MIN_SHARE_SAID:
            break
        callers = " ← ".join(frame.where for frame in site.context)
        share = (f"{site.event_share:.0%} of {f.events:,} {EVENT_NOUNS[found.pattern]}" if site.events else
                 f"{site.sample_share:.0%} of its {f.window_samples:,} CPU samples")
        lines.append(f"where: {site.frame.where}" + (f" ← {callers}" if callers else "") + f": {share}")
    return lines


def notes(analysis: Analysis) -> list:
    """What limits the stacks of a capture: records lost, events without a stack, stacks cut short."""
    stackset = stack_set(analysis)
    if stackset is None:
        return []
    out = []
    if stackset.lost_total:
        lost = ", ".join(f"{n:,} {why.replace('_', ' ')}" for why, n in stackset.lost.items() if n)
        out.append(f"stacks: records lost ({lost}): call sites and sampled shares are from the rest")
    tail = sum(stackset.tail.values())
    if tail:
        out.append(f"stacks: {tail:,} events came after their thread's last stack of their kind and are in no "
                   "call site's count (event stacks are 1 in a stride, docs/stacks.md)")
    tags = (stackset.helper or {}).get("tags")
    if isinstance(tags, dict) and tags.get("error"):
        out.append(f"stacks: the runtime helper's samples are untagged ({tags['error']}): they name the hand-off's "
                   "machinery but no pattern's window")
    elif isinstance(tags, dict) and (tags.get("changes_lost") or tags.get("complete") is False
                                     or tags.get("samples_untagged")):
        out.append(f"stacks: the tag timeline that tags the runtime helper's samples lost {tags.get('changes_lost', 0):,} "
                   f"changes{'' if tags.get('complete', True) else ' and was cut short'} and left "
                   f"{tags.get('samples_untagged', 0):,} samples untagged: those threads' windows are approximate")
    if stackset.no_user_frames:
        out.append(f"stacks: {stackset.no_user_frames:,} records could not be unwound in user space (kept with "
                   "their kernel frames)")
    return out
