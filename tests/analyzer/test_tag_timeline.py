"""The collector's tag timeline as the analyzer reads it (tracing/tag_timeline.py): the file layout of
collector/timeline.h, read back from bytes written here."""

from __future__ import annotations

import re
import struct

from paths import ROOT
from spinscope.tracing import tag_timeline as T


def write(path, records, end=True, lost=0, written=None):
    body = b"".join(T.RECORD.pack(*r) for r in records)
    if end:
        body += T.RECORD.pack(T.END, 0, 0) + struct.pack("=QQ", lost, len(records) if written is None else written)
    path.write_bytes(T.MAGIC + body)


def test_the_tag_bits_are_the_collectors():
    header = (ROOT / "bpf" / "spinscope.h").read_text()
    bits = {name: int(value, 16) for name, value in re.findall(r"#define STACK_TAG_(\w+) (0x[0-9a-f]+)", header)}
    named = {name.replace("-", "_").upper(): bit for bit, name in T.TAG_BITS}
    assert named == {name: bit for name, bit in bits.items() if name not in ("KERNEL", "NO_THREAD")}


def test_tags_at_a_time_are_the_latest_change_before_it(tmp_path):
    # Two CPUs' records interleaved out of time order, as the ring buffer may hold them.
    write(tmp_path / "t", [(200, 7, 0x08), (100, 7, 0x04), (150, 9, 0x01), (300, 7, 0)])
    tl = T.read(tmp_path / "t")
    assert tl.error is None and tl.complete and tl.changes == 4 and tl.lost == 0
    assert [tl.tags_at(7, t) for t in (50, 100, 199, 200, 299, 300, 10**12)] == [0, 0x04, 0x04, 0x08, 0x08, 0, 0]
    assert tl.tags_at(9, 149) == 0 and tl.tags_at(9, 150) == 0x01
    assert tl.tags_at(11, 500) == 0  # a thread without a change never had a tag
    assert T.tag_names(0x0C) == ("ready-cycle", "handoff")


def test_a_cut_or_foreign_file_says_so(tmp_path):
    write(tmp_path / "cut", [(100, 7, 0x08)], end=False)
    cut = T.read(tmp_path / "cut")
    assert cut.error is None and not cut.complete and cut.changes == 1
    write(tmp_path / "lost", [(100, 7, 0x08)], lost=5)
    assert T.read(tmp_path / "lost").lost == 5
    (tmp_path / "other").write_bytes(b"not a timeline at all")
    assert T.read(tmp_path / "other").error.startswith("the tag timeline is not one")
    assert T.read(tmp_path / "missing").error.startswith("cannot read the tag timeline")
