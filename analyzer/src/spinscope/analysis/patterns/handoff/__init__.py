"""handoff overhead: requests passed between the target's own threads, graded by what passing them costs.

measure.py measures it (the mechanism; the calls that hand off and wait, both sides; the wake-to-run wait;
busy-waiting for a shared-memory hand-over), threadlife.py a thread created per request, words.py says it
(phrases and fixes per runtime, summary, evidence, details). Here: the grade, the larger of the on-CPU
share (with `--stacks`, plus the user-space part of the runtime's hand-off machinery from stack samples)
and the share of the request time spent waiting for a woken thread to run; its call sites; what its fix
saves.

A label's share is a claim about what its fix saves. Without stacks the share counts the calls that hand
off and wait only, a lower bound, and the label says so; with them it adds the samples in the machinery's
frames outside the kernel (stacks.py, MACHINERY), and the samples in the hand-off's window on its request
path that hold none of the target's own code, whatever the runtime's frames are called (stacks.WINDOW),
where requests are handed over at USER_SHARE_MIN_HANDOFFS a request or more.
"""

from __future__ import annotations

from spinscope.analysis import savings, stack_costs
from spinscope.analysis import stacks as S
from spinscope.analysis.metrics import Analysis, role_edges
from spinscope.analysis.patterns import HANDOFF_OVERHEAD
from spinscope.analysis.patterns.handoff import words
from spinscope.analysis.patterns.handoff.measure import SHARED_MEMORY, measure_handoff
from spinscope.analysis.roles import IDLE
from spinscope.analysis.runtime import runtime_of
from spinscope.analysis.verdicts import SEVERITIES, Label, severity

# The hand-off's machinery frames are the hand-off's cost only where requests are handed over: a server that
# hands over fewer than this many per request still runs its runtime's queues and promises for other work
# (Netty on its event loop: its task queue and write promises, 2% of its samples at one hand-off in 2,855
# requests, measured), and those samples are not a hand-off's. Nor are the waits for a woken thread there:
# Node serving a file from memory or with readFileSync wakes its loop 0.02-0.06 times a request (V8's platform
# threads), and those waits were 1-13% of its short requests' time, graded info or warning (2026-11-28/29).
USER_SHARE_MIN_HANDOFFS = 0.1  # hand-overs per request
STACK_EVENTS = "calls that woke another thread"  # what its event stacks stand for, in its call sites' lines
# The machinery's samples by where they are (stacks.MACHINERY's runtimes, and the window no table names).
RUNTIME_NOUNS = {S.WINDOW: "the runtime's code in the hand-off's window (no table)"}
LOWER_BOUND = ("its CPU share counts the calls that hand off and wait: a lower bound (the runtime's pool, queue "
               "and lock code in user space is not timed; record with --stacks to sample it)")


def handoff_overhead(analysis: Analysis) -> Label | None:
    """Requests passed between the target's own threads, graded by what passing them costs: the larger of
    the on-CPU share of the calls that hand off and wait (busy-waiting too, for a shared-memory hand-over;
    its user-space machinery with stacks) and the share of the request time spent waiting for a woken
    thread to run."""
    edges = role_edges(analysis)
    m = measure_handoff(analysis, edges)
    if m is None:
        return None
    # its user-space part, with --stacks (a shared-memory hand-over's estimate has user space in it already)
    rate = None if m.mechanism == SHARED_MEMORY else max(m.per_request, m.lives.per_request if m.lives else 0.0)
    # its window is read on the involved threads on the request path, not idle ones (a runtime's helpers), where
    # the stacks can tell the user's code from the runtime's (stack_costs.language_unnamed: the notes say so)
    unnamed = stack_costs.language_unnamed(analysis)
    path = [] if unnamed else [tid for tid in m.involved if analysis.threads[tid]["role"] != IDLE]
    found = stack_costs.where(analysis, HANDOFF_OVERHEAD, m.involved, path)
    user = user_share(found, rate)
    cpu = whole_share(m.cpu_share, user)
    latency = m.latency_share if m.mechanism == SHARED_MEMORY or counted(rate) else None
    shares = [s for s in (cpu, latency) if s is not None]
    cost = max(shares) if shares else None
    level = severity(cost)
    if level is None:
        return None
    runtime = runtime_of(analysis.capture).name
    fixes = (words.handoff_fixes(runtime, m.mechanism) if words.names_mechanism(analysis, m)
             else words.few_handoffs_fixes(runtime))
    label = Label(HANDOFF_OVERHEAD, level, words.summary(analysis, m, edges, runtime), words.evidence(analysis, m),
                  cpu, fixes, words.detail_lines(m, edges, analysis.requests), m.mechanism == SHARED_MEMORY,
                  cost_share=cost)
    label = stack_costs.attach(label, found, m.cpu_share, STACK_EVENTS, user, _stack_lines(found, rate, user,
                                                                                           m.cpu_share))
    if found is None:
        label.details.append(LOWER_BOUND)
    elif user:
        label.summary += f"; {user:.0%} more of their CPU in the hand-off's machinery in user space (stack samples)"
    if latency is None and m.latency_share:
        label.details.append(f"the waits for a woken thread ({m.latency_share:.0%} of the request time) are not graded: "
                             f"{rate or 0:.2f} wakeups per request, fewer than {USER_SHARE_MIN_HANDOFFS}, are not "
                             "requests handed over (a runtime's own threads waking the request's for their work)")
    # Without the stacks, or with stacks that cannot tell the runtime's code from the user's, the CPU share
    # leaves the user-space machinery out: the fix saves at least it.
    claim = savings.AT_LEAST if found is None or unnamed else savings.SAVES
    return savings.apply(label, savings.of_cpu(analysis, cpu, m.cpu_ns, claim), savings.of_time(latency),
                         tier=severity, order=SEVERITIES)


def whole_share(syscall_share: float | None, user: float | None) -> float | None:
    """The label's CPU share: the syscall-measured part plus the user-space part the stacks add, at most the
    whole (both are shares of the same threads' CPU, each estimated: their sum can pass 1)."""
    return syscall_share if user is None else min(1.0, (syscall_share or 0.0) + user)


def counted(handoffs_per_request: float | None) -> bool:
    """Whether the machinery's samples are the hand-off's: requests are handed over at USER_SHARE_MIN_HANDOFFS
    a request or more."""
    return handoffs_per_request is not None and handoffs_per_request >= USER_SHARE_MIN_HANDOFFS


def user_share(found: S.PatternStacks | None, handoffs_per_request: float | None) -> float | None:
    """The user-space part the stacks add to the hand-off's share (its machinery's samples outside the
    kernel, of its threads' samples); None without stacks or where they are not the hand-off's."""
    return found.user_share if found is not None and counted(handoffs_per_request) else None


def _stack_lines(found: S.PatternStacks | None, rate: float | None, user: float | None,
                 syscall_share: float | None) -> tuple:
    """What the stacks say of the machinery: its samples and their runtimes, counted in the share or not."""
    if found is None:
        return ()
    lines = []
    if not counted(rate) and found.machinery_user:
        lines.append(f"stack samples: {found.machinery_user} of {found.samples} in the runtime's queue, pool and lock "
                     f"frames, not counted as the hand-off's: {rate or 0:.2f} hand-overs per request (fewer than "
                     f"{USER_SHARE_MIN_HANDOFFS}), so those frames serve other work")
    if user is not None:
        runtimes = ", ".join(f"{RUNTIME_NOUNS.get(name, name)} {n}" for name, n in sorted(found.machinery_runtimes.items()))
        lines.append(f"stack samples: {user:.1%} of their CPU in the hand-off's machinery in user space "
                     f"({found.machinery_user} of {found.samples} samples; by runtime: {runtimes or 'none'}), beside "
                     f"{syscall_share or 0:.1%} in the calls that hand off and wait: "
                     f"{(syscall_share or 0) + user:.1%} in all")
    return tuple(lines)


DETECT = {HANDOFF_OVERHEAD: handoff_overhead}
