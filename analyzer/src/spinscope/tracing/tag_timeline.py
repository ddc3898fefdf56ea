"""The collector's tag timeline (`--tag-timeline FILE`, collector/timeline.h): every change of a target
thread's tags, so that a runtime helper's samples, taken by another program on its own timer, get the tags
their thread had at that moment, as the collector's own samples do (docs/stacks.md).

The file: a 16-byte magic, 16-byte records (u64 time_ns on CLOCK_MONOTONIC, u32 tid, u32 tags as
STACK_TAG_* bits of bpf/spinscope.h), an end marker (time_ns 2**64-1) and one record of two u64: the changes
the ring buffer had no room for, and the records written. A file without the end marker was cut short.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = b"spinscope-tags1\n"
RECORD = struct.Struct("=QII")
END = 2**64 - 1
# STACK_TAG_* (bpf/spinscope.h) as the capture names them (collector/stacks.c TAG_NAMES). KERNEL is a
# sample's, not a thread's, and NO_THREAD is never noted: neither is in a timeline.
TAG_BITS = ((0x01, "write-stall"), (0x02, "empty-cycle"), (0x04, "ready-cycle"), (0x08, "handoff"),
            (0x10, "request"))


def tag_names(bits: int) -> tuple:
    return tuple(name for bit, name in TAG_BITS if bits & bit)


@dataclass
class Timeline:
    """Per thread, the times its tags changed (sorted) and the tags from then on."""

    times: dict = field(default_factory=dict)  # tid -> [time_ns, ...]
    tags: dict = field(default_factory=dict)   # tid -> [bits, ...]
    changes: int = 0
    lost: int = 0          # changes the ring buffer had no room for: a thread's tags are unknown until its next
    complete: bool = False  # the end marker was there (the collector ended cleanly)
    error: str | None = None

    def tags_at(self, tid: int, time_ns: int) -> int:
        """The tags thread tid had at time_ns: those of its latest change at or before it; none before its
        first change (a thread starts with none, and a change is written whenever they differ)."""
        times = self.times.get(tid)
        if not times:
            return 0
        i = bisect.bisect_right(times, time_ns)
        return self.tags[tid][i - 1] if i else 0


def read(path: Path) -> Timeline:
    """The timeline in path; its error set (and nothing else) when it cannot be read or is not one."""
    tl = Timeline()
    try:
        data = path.read_bytes()
    except OSError as exc:
        tl.error = f"cannot read the tag timeline: {exc.strerror or exc}"
        return tl
    if not data.startswith(MAGIC):
        tl.error = "the tag timeline is not one (its first bytes are not the collector's)"
        return tl
    body = memoryview(data)[len(MAGIC):]
    usable = len(body) - len(body) % RECORD.size
    rows: dict = {}
    end_at = None
    for i, (time_ns, tid, bits) in enumerate(RECORD.iter_unpack(body[:usable])):
        if time_ns == END:
            end_at = i
            break
        rows.setdefault(tid, []).append((time_ns, bits))
        tl.changes += 1
    if end_at is not None and (end_at + 2) * RECORD.size <= usable:
        lost, written = struct.unpack_from("=QQ", body, (end_at + 1) * RECORD.size)
        tl.lost, tl.complete = lost, written == tl.changes
    for tid, seq in rows.items():
        seq.sort(key=lambda row: row[0])  # each CPU's records are in order, not the ring's across CPUs
        tl.times[tid] = [t for t, _ in seq]
        tl.tags[tid] = [b for _, b in seq]
    return tl
