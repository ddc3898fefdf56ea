"""What a capture's stacks (`--stacks`, analysis/stacks.py) add to a label, for every pattern: where its
events and time are (its call sites, with the lines that say them), and what limits the stacks of a capture
(its notes). What a pattern adds of its own is in its home: the hand-off's user-space part, the runtime's
pool, queue and lock code that no syscall or scheduler tracepoint times (analysis/patterns/handoff/,
docs/stacks.md). write-spin and spurious-select time whole cycles already (a retry's or a futile wakeup's
loop iteration, user space included): the stacks add their call sites, not cost.
"""

from __future__ import annotations

from spinscope.analysis import stacks as S
from spinscope.analysis.metrics import Analysis
from spinscope.analysis.runtime import LANGUAGE_RUNTIMES, NAMES, runtime_of

CALL_SITES_SAID = 3  # call sites written as detail lines (all TOP_CALL_SITES are in the JSON)...
MIN_SHARE_SAID = 0.01  # ...the first always, the others from this share of the pattern's events or samples


def stack_set(analysis: Analysis) -> S.StackSet | None:
    """The capture's stacks, read once per capture."""
    raw = analysis.capture.raw
    if "stacks" not in raw:
        return None
    cache = analysis.__dict__.setdefault("_stacks", {})
    if "set" not in cache:
        cache["set"] = S.load(raw)
    return cache["set"]


def language_unnamed(analysis: Analysis) -> bool:
    """Whether the capture's stacks are of a language runtime's target (an interpreter, a JIT) and name none of
    its functions (no runtime helper's samples: recorded without it, or a live view's stream): native frames
    cannot tell the user's code from the runtime's there."""
    stackset = stack_set(analysis)
    return (stackset is not None and runtime_of(analysis.capture).name in LANGUAGE_RUNTIMES
            and not stackset.names_language)


def where(analysis: Analysis, pattern: str, tids, path_tids=()) -> S.PatternStacks | None:
    """What the stacks say of `pattern` on the threads `tids` (for the hand-off, its window read on
    `path_tids`: stacks.pattern_stacks); None without stacks."""
    stackset = stack_set(analysis)
    if stackset is None:
        return None
    return S.pattern_stacks(stackset, pattern, tids, path_tids)


def attach(label, found: S.PatternStacks | None, syscall_share: float | None, events: str,
           user_share: float | None = None, lines: tuple = ()):
    """The label with its share's parts (`user_share`: what the stacks add to it, its pattern's own), its
    call sites and the lines that say them: the pattern's own `lines` first, then where its `events` (what
    its event stacks stand for, in words) and its samples are. The label is returned, changed."""
    label.syscall_share = syscall_share
    label.user_share = user_share
    if found is None:
        return label
    label.call_sites = [site.to_dict() for site in found.call_sites]
    label.details.extend([*lines, *where_lines(found, events)])
    return label


def where_lines(f: S.PatternStacks, events: str) -> list:
    """`where: FUNCTION (FILE:LINE) ← callers: N% of its EVENTS`, for the first call sites."""
    lines = []
    if not f.call_sites and not (f.unplaced_events or f.unplaced_samples):
        lines.append(f"where: no stack of this pattern was sampled on its threads ({f.samples} CPU samples, "
                     f"{f.events} events)")
    for i, site in enumerate(f.call_sites[:CALL_SITES_SAID]):
        if i and max(site.event_share, site.sample_share) < MIN_SHARE_SAID:
            break
        callers = " ← ".join(frame.where for frame in site.context)
        share = (f"{site.event_share:.0%} of {f.events:,} {events}" if site.events else
                 f"{site.sample_share:.0%} of its {f.window_samples:,} CPU samples")
        through = f" (through {site.through.name})" if site.through else ""
        lines.append(f"where: {site.frame.where}{through}" + (f" ← {callers}" if callers else "") + f": {share}")
    unplaced = [f"{n / total:.0%} of {total:,} {unit}" for n, total, unit in
                ((f.unplaced_events, f.events, events), (f.unplaced_samples, f.window_samples, "CPU samples"))
                if n and n / total >= MIN_SHARE_SAID]
    if unplaced:
        lines.append(f"where: not placed, {' and '.join(unplaced)}: their stacks hold only the kernel's, the C "
                     "library's or the runtime's own frames, no code of the target's or of its runtime's language "
                     f"(most in {f.unplaced_where})")
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
    helper = stackset.helper or {}
    if language_unnamed(analysis):
        why = (helper.get("skipped") or helper.get("error")
               or ("it ran but took no sample of the target" if helper else
                   "none ran beside the collector: a live view's stream, or the collector alone"))
        out.append(f"stacks: without the runtime helper's samples ({why}): no {NAMES[runtime_of(analysis.capture).name]}"
                   " function is named, and native frames cannot tell the user's code from the runtime's, so the "
                   "hand-off's window is not counted: its user-space part is the C library's and the kernel's "
                   "machinery only, a lower bound, and its share and grade can be below what `record --stacks` "
                   "gives with the helper")
    tags = helper.get("tags")
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
    if stackset.deferred:
        out.append(f"stacks: the target's budget of {stackset.budget:,} event stacks a second was spent at "
                   f"{stackset.deferred:,} events due a stack: they weigh in their thread's next stack, so the call "
                   "sites' events stay exact, from fewer stacks")
    unopened = int(stackset.modules.get("unopened", 0))
    if unopened:
        names = [str(n) for n in stackset.modules.get("unopened_names") or ()]
        more = unopened - len(names)
        listed = ", ".join(names) + (f" and {more:,} more" if more > 0 else "")
        out.append(f"stacks: {unopened:,} module{'s' if unopened != 1 else ''} of the target could not be opened "
                   f"({listed}): {'their' if unopened != 1 else 'its'} frames are named module+offset, without "
                   "function, file or line")
    return out
