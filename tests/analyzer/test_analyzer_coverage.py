"""What the request figures leave out or count otherwise (spinscope.analysis.coverage): channels between the target's
processes (schema 5), HTTP/2 connections, and older captures that could not tell."""

from __future__ import annotations

from spinscope.analysis.capture import load
from spinscope.analysis.coverage import coverage_notes
from spinscope.analysis.schema import SCHEMA5_COUNTERS

from captures import capture, thread, write


def schema5(doc: dict) -> dict:
    doc["schema"] = 5
    return doc


def served(**counters) -> dict:
    return capture([thread(100, "primary", read_calls=900, write_calls=900, **counters),
                    thread(101, "worker", read_calls=301, write_calls=300, channel_reads=300, channel_writes=300,
                           channel_sockets=1)], requests=600)


def test_channels_left_out_of_requests_are_said(tmp_path):
    cap = load(write(tmp_path, schema5(served(channel_reads=300, channel_writes=300, channel_sockets=1))))
    assert (cap.channel_reads, cap.channel_writes, cap.channel_sockets) == (600, 600, 2)
    assert coverage_notes(cap) == [
        "600 reads and 600 writes on 2 channel sockets between the target's processes (socket pairs, not client "
        "connections) were not counted as requests; they are in the socket reads and writes"]


def test_http2_connections_make_requests_exchanges(tmp_path):
    doc = schema5(capture([thread(100, "nginx", read_calls=50, write_calls=60, h2_connections=1)], requests=40))
    cap = load(write(tmp_path, doc))
    assert cap.h2_connections == 1
    [note] = coverage_notes(cap)
    assert note.startswith("1 connection spoke HTTP/2 (cleartext, prior knowledge): their streams are multiplexed")
    assert "every per-request figure is per exchange" in note and note.endswith("streams are not counted")


def test_nothing_left_out_says_nothing(tmp_path):
    cap = load(write(tmp_path, schema5(capture([thread(100, read_calls=10, write_calls=10)], requests=10))))
    assert coverage_notes(cap) == []


def test_older_captures_load_with_the_new_counters_zero_and_say_they_could_not_tell(tmp_path):
    doc = capture([thread(100, read_calls=10, write_calls=10)], requests=10)
    doc["schema"] = 4
    for row in (*doc["threads"], doc["totals"], *(i["counters"] for i in doc["intervals"])):
        for key in SCHEMA5_COUNTERS:
            del row[key]
    cap = load(write(tmp_path, doc))
    assert not cap.channels_told_apart
    assert (cap.channel_reads, cap.channel_writes, cap.channel_sockets, cap.h2_connections) == (0, 0, 0, 0)
    assert coverage_notes(cap) == [
        "capture schema 4 (an older collector) did not tell socket pairs between the target's processes from "
        "client connections: messages on them, if any, are counted as requests"]
    # Without requests there is nothing they could have been counted as.
    doc["requests"]["count"] = 0
    assert coverage_notes(load(write(tmp_path, doc, "norequests.json"))) == []
