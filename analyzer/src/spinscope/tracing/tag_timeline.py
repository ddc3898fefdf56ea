"""The collector's tag timeline (`--tag-timeline FILE`, collector/timeline.h): every change of a target
thread's tags, so that a runtime helper's samples, taken by another program on its own timer, get the tags
their thread had at that moment, as the collector's own samples do (docs/stacks.md).

The file: a 16-byte magic, 16-byte records (u64 time_ns on CLOCK_MONOTONIC, u32 tid, u32 tags as
STACK_TAG_* bits of bpf/spinscope.h), an end marker (time_ns 2**64-1) and one record of two u64: the changes
the ring buffer had no room for, and the records written. A file without the end marker was cut short.
"""

from __future__ import annotations

import bisect
import fcntl
import os
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = b"spinscope-tags1\n"
RECORD = struct.Struct("=QII")
END = 2**64 - 1
# STACK_TAG_* (bpf/spinscope.h) as the capture names them (collector/stacks.c TAG_NAMES). KERNEL is a
# sample's, not a thread's, and NO_THREAD is never noted: neither is in a timeline.
FIFO_BYTES = 1 << 20  # the FIFO's buffer: 65,536 changes, about a second of a busy pool's before its writer waits
F_SETPIPE_SZ = 1031
TAG_BITS = ((0x01, "write-stall"), (0x02, "empty-cycle"), (0x04, "ready-cycle"), (0x08, "handoff"),
            (0x10, "request"))


def tag_names(bits: int) -> tuple:
    return tuple(name for bit, name in TAG_BITS if bits & bit)


@dataclass
class Timeline:
    """Per thread, the times its tags changed (sorted) and the tags from then on. Fed the file's records as
    they come (feed: a whole file once, or a FIFO followed while the collector writes it, Follower)."""

    times: dict = field(default_factory=dict)  # tid -> [time_ns, ...]
    tags: dict = field(default_factory=dict)   # tid -> [bits, ...]
    changes: int = 0
    lost: int = 0          # changes the ring buffer had no room for: a thread's tags are unknown until its next
    complete: bool = False  # the end marker was there (the collector ended cleanly)
    ended: bool = False     # the end marker was read (its account follows it)
    error: str | None = None
    _rest: bytes = b""      # the start of a record the next feed ends

    def tags_at(self, tid: int, time_ns: int) -> int:
        """The tags thread tid had at time_ns: those of its latest change at or before it; none before its
        first change (a thread starts with none, and a change is written whenever they differ)."""
        times = self.times.get(tid)
        if not times:
            return 0
        i = bisect.bisect_right(times, time_ns)
        return self.tags[tid][i - 1] if i else 0

    def feed(self, data: bytes) -> None:
        """The records in data (after the magic), added in time order per thread: each CPU's records are in
        order, not the ring's across CPUs. A record cut at data's end waits for the next feed."""
        data = self._rest + data
        usable = len(data) - len(data) % RECORD.size
        self._rest = data[usable:]
        for time_ns, tid, bits in RECORD.iter_unpack(memoryview(data)[:usable]):
            if self.ended:  # the account: the changes lost, and the records written (two u64)
                lost, written = struct.unpack("=QQ", RECORD.pack(time_ns, tid, bits))
                self.lost, self.complete = lost, written == self.changes
                self._rest = b""
                return
            if time_ns == END:
                self.ended = True
                continue
            times = self.times.setdefault(tid, [])
            tags = self.tags.setdefault(tid, [])
            if not times or time_ns >= times[-1]:
                times.append(time_ns)
                tags.append(bits)
            else:
                i = bisect.bisect_right(times, time_ns)
                times.insert(i, time_ns)
                tags.insert(i, bits)
            self.changes += 1

    def forget(self, before_ns: int, idle_ns: int) -> None:
        """Changes no sample at or after before_ns needs dropped: each thread keeps its latest change before
        it (its tags then) and those after; a thread whose latest change is older than before_ns - idle_ns
        (an exited thread, most likely: a thread on CPU changes its tags as it calls) or that has none but
        one to no tags is dropped whole. A followed timeline stays bounded over hours."""
        for tid in list(self.times):
            times, tags = self.times[tid], self.tags[tid]
            i = bisect.bisect_right(times, before_ns) - 1
            if i == len(times) - 1 and (times[i] < before_ns - idle_ns or tags[i] == 0):
                del self.times[tid], self.tags[tid]
            elif i > 0:
                del times[:i], tags[:i]


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
    tl.feed(data[len(MAGIC):])
    return tl


class Follower:
    """A timeline followed while the collector writes it (`top --stacks`, `exporter --stacks`): `path` made a
    FIFO, its reading end open before the collector opens it (which would wait for one), read to its end by
    a thread of ours into `timeline`. Use it under `lock`. The collector waits when the FIFO is full
    (FIFO_BYTES): close() only after the collector has exited, or its last writes would find no reader."""

    def __init__(self, path: Path):
        self.path = path
        self.timeline = Timeline()
        self.lock = threading.Lock()
        os.mkfifo(path, 0o600)
        self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        # Our own writing end, kept open until close(): with no writer yet (the collector not started) a read
        # would return end-of-file at once, not wait.
        self._hold = os.open(path, os.O_WRONLY)
        os.set_blocking(self._fd, True)
        try:
            fcntl.fcntl(self._fd, F_SETPIPE_SZ, FIFO_BYTES)
        except OSError:  # above /proc/sys/fs/pipe-max-size for a user without CAP_SYS_RESOURCE: 64 KiB
            pass
        self._magic = b""
        self._thread = threading.Thread(target=self._read, name="tag-timeline", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self._fd, FIFO_BYTES)
            except OSError:
                break
            if not data:
                break
            if len(self._magic) < len(MAGIC):
                take = len(MAGIC) - len(self._magic)
                self._magic, data = self._magic + data[:take], data[take:]
                if len(self._magic) == len(MAGIC) and self._magic != MAGIC:
                    with self.lock:
                        self.timeline.error = "the tag timeline is not one (its first bytes are not the collector's)"
                    break
            with self.lock:
                self.timeline.feed(data)

    def close(self) -> None:
        """Stop following (the collector has exited): what it wrote read to the end, the FIFO closed."""
        if self._hold is not None:
            os.close(self._hold)
            self._hold = None
            self._thread.join(timeout=5)
            os.close(self._fd)
