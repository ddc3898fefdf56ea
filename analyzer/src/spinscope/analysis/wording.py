"""How the verdicts say things, shared by every pattern's home (analysis/patterns/): threads named by role
and name, a measured share in words, a line per busy thread, and the notes on what a capture leaves out (a
program replaced by execve, the first drop of a kind, sampled call times, a checkpoint). Phrasing only: no
threshold is set here (verdicts.py and the patterns' homes hold them).
"""

from __future__ import annotations

from typing import Mapping

from spinscope.analysis.roles import thread_name
from spinscope.analysis.verdicts import MIN_CALLS
from spinscope.fmt import fixed, undefined


def exec_notes(execs: list) -> list:
    """A note per traced process that replaced its program while traced (Capture.execs) after counted
    calls: its counts are of two programs. A wrapper that exec'd before any (calls_before 0: `sh -c 'exec
    ./server'`) mixes nothing: the capture is named after the program it runs (Capture.program)."""
    notes = []
    for record in execs:
        if record.get("calls_before") == 0:
            continue
        times = "once" if record.get("count") == 1 else f"{record.get('count')} times"
        notes.append(f"process {record.get('pid')} replaced its program (execve) {times} while traced, the latest "
                     f"at {fixed(record.get('t_s'), 1)} s, to run {record.get('filename')} as "
                     f"{record.get('comm')}: its counts mix the programs before and after")
    return notes


def first_drop(intervals: list, key: str) -> str:
    """` from 12.0 s on`: when the capture's intervals (schema 4) say the first drop of this kind came."""
    first = next((row for row in intervals if row.get(f"drops_{key}", 0) > 0), None)
    if first is None:
        return ""
    return f" from {fixed(first['t_s'] - first['duration_s'], 1)} s on"


def unseen_switches_note(unseen: int) -> str:
    """The switches in the kernel ran no tracing program for (totals.switch_ins_unseen, schema 10)."""
    return (f"{unseen:,} switch{'es' if unseen != 1 else ''} in of the target's threads ran no tracing program (a "
            "switch from a task the kernel's tracing skips); each was taken to be at the thread's next counted "
            "syscall's exit, so the on-CPU time before that is counted switched out")


def sampling_note(time_sample: int, timed: int) -> str:
    return (f"call times sampled: 1 call in {time_sample} timed ({timed:,} calls, --time-sample), so the "
            "measured costs behind the verdicts are estimates; counts are exact")


def share_phrase(share: float | None, whose: str, where: str = "", estimated: bool = False) -> str:
    """`, measured 62% of the CPU of event loop 'x' (tid 1)`; `about` instead of `measured` for an estimate."""
    if share is None:
        return ""
    amount = f"{share:.0%}" if share >= 0.01 else "under 1%"
    return f", {'about' if estimated else 'measured'} {amount} of {whose}" + (f" {where}" if where else "")


def whose_cpu(threads: Mapping[int, Mapping], tids) -> str:
    """`the CPU of event loop 'nginx' (tid 812)`, `the CPU of the 3 threads involved`."""
    tids = list(tids)
    if len(tids) == 1:
        return f"the CPU of {name_of(threads, tids[0])}"
    return f"the CPU of the {len(tids)} threads involved"


def who(threads: Mapping[int, Mapping], tids) -> str:
    """`event loop 'haproxy' (tid 812)`, `3 threads`."""
    tids = list(tids)
    return name_of(threads, tids[0]) if len(tids) == 1 else f"{len(tids)} threads"


def rounded(value: float | None, digits: int = 3) -> float | None:
    return None if undefined(value) else round(float(value), digits)


def name_of(threads: Mapping[int, Mapping], tid: int) -> str:
    return thread_name(threads[tid]["role"], threads[tid]["comm"], int(tid))


def thread_lines(threads: Mapping[int, Mapping], part: str, whole: str, phrase: str) -> list:
    busy = sorted((tid for tid, row in threads.items() if row[whole] >= MIN_CALLS), key=lambda tid: -threads[tid][part])
    return [f"{name_of(threads, tid)}: {threads[tid][part] / threads[tid][whole]:.0%} {phrase}"
            for tid in busy if threads[tid][part]]


def checkpoint_note(cap) -> str:
    """A capture that is its collector's last checkpoint (end_reason "checkpoint"), with its journal."""
    journaled = ""
    if cap.journaled:
        journaled = (f", and {cap.journaled} interval{'s' if cap.journaled > 1 else ''} after it up to "
                     f"{fixed(cap.intervals[-1]['t_s'], 1)} s from its journal (the totals and verdicts "
                     "end at the checkpoint)")
    return (f"incomplete: the collector stopped without writing its final capture (killed?); this is "
            f"its last checkpoint, {fixed(cap.duration_s, 1)} s into the recording{journaled}")
