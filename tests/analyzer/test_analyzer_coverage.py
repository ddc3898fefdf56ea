"""What the request figures leave out or count otherwise (spinscope.analysis.coverage): channels between the target's
processes (schema 5), HTTP/2 connections (counted by stream from schema 8), TLS connections, and older captures
that could not tell."""

from __future__ import annotations

import pytest

from spinscope.analysis.capture import load
from spinscope.analysis.metrics import analyze
from spinscope.analysis.coverage import coverage_notes, request_counting
from spinscope.analysis.schema import SCHEMA5_COUNTERS
from spinscope.errors import SpinscopeError
from spinscope.output.stack_files import chosen

from captures import capture, thread, write


def schema5(doc: dict) -> dict:
    doc["schema"] = 5
    return doc


def schema8(doc: dict) -> dict:
    doc["schema"] = 8
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
    assert "every per-request figure is per exchange" in note
    assert note.endswith("streams are not counted (capture schema 5, an older collector)")
    assert request_counting(cap) == (
        "requests on 1 HTTP/2 connection counted by exchange, not by stream")


def test_http2_connections_counted_by_stream(tmp_path):
    """Schema 8: the requests are streams; the note says so, where the walk lost its place and what it left."""
    doc = schema8(capture([thread(100, "grpc-nio", read_calls=50, write_calls=60, h2_connections=4, h2_streams=900,
                                  h2_frames=4000, h2_lost=1, h2_lost_calls=3, h2_lost_bytes=5000,
                                  h2_streams_unfollowed=2, requests_read=900)], requests=898))
    cap = load(write(tmp_path, doc))
    [note] = coverage_notes(cap)
    assert note.startswith("4 connections spoke HTTP/2 (cleartext, prior knowledge): their requests are their "
                           "streams (900 streams opened), read from the frame headers")
    assert ("the frame walk lost its place 1 time: 3 calls (5,000 bytes) on those connections were not "
            "followed after it, and the streams in them are not counted") in note
    assert "2 streams opened were not followed to their end" in note
    assert request_counting(cap) == (
        "requests counted by stream on 4 HTTP/2 connections (900 streams), by exchange elsewhere")
    # Nothing lost: nothing said of it.
    doc = schema8(capture([thread(100, read_calls=5, write_calls=5, h2_connections=1, h2_streams=1)], requests=1))
    [note] = coverage_notes(load(write(tmp_path, doc, "clean.json")))
    assert "lost" not in note and "not followed" not in note and "(1 stream opened)" in note


def test_bad_frame_headers_are_said(tmp_path):
    """Schema 9: the times the walk stopped at a header no conforming peer sends are said apart."""
    doc = capture([thread(100, read_calls=5, write_calls=5, h2_connections=1, h2_streams=3, h2_lost=2,
                          h2_lost_calls=4, h2_lost_bytes=700, h2_bad_frames=1)], requests=3)
    doc["schema"] = 9
    [note] = coverage_notes(load(write(tmp_path, doc)))
    assert ("the frame walk lost its place 2 times (1 at a frame header no conforming peer sends: a length above "
            "the largest frame its receiver accepts, an unregistered type, or a stream id or length its type "
            "forbids): 4 calls (700 bytes)") in note


def test_what_the_kernel_left_out_is_said(tmp_path):
    """Schema 9: a kernel without bpf_loop counts HTTP/2 requests by exchange, one whose perf-event programs
    cannot read the maps records without stacks; the capture says which (settings.left_out), and so do the
    notes and the headline."""
    doc = capture([thread(100, "nginx", read_calls=50, write_calls=60, h2_connections=2, requests_read=40)],
                  requests=40)
    doc["schema"] = 9
    doc["host"] = {"kernel": "5.15.0", "hostname": None, "ncpus": 2,
                   "features": {"bpf_loop": False, "perf_event_maps": False}}
    doc["settings"]["left_out"] = ["http2_streams", "stacks"]
    cap = load(write(tmp_path, doc))
    assert not cap.h2_by_stream and cap.left_out == ["http2_streams", "stacks"]
    h2, stacks = coverage_notes(cap)
    assert h2.endswith("streams are not counted (the recording kernel 5.15.0 lacks bpf_loop (Linux 5.17), which "
                       "the frame walk needs)")
    assert stacks == ("--stacks was asked for, but the recording kernel 5.15.0 cannot run the stack sampler (its "
                      "perf-event programs may not read a hash map that is not preallocated: Linux 6.1): this "
                      "capture has no stacks")
    assert request_counting(cap) == "requests on 2 HTTP/2 connections counted by exchange, not by stream"
    with pytest.raises(SpinscopeError, match="--stacks was asked for, but the recording kernel 5.15.0 could not "
                                             "run the sampler"):
        chosen(analyze(cap), None)  # report --folded, --pprof


def test_tls_connections_are_said_counted_by_exchange(tmp_path):
    doc = schema8(capture([thread(100, "envoy", read_calls=50, write_calls=60, tls_connections=3)], requests=40))
    cap = load(write(tmp_path, doc))
    [note] = coverage_notes(cap)
    assert note.startswith("3 connections began with a TLS handshake: encrypted in the syscalls, so HTTP/2 inside "
                           "them (if their ALPN chose it) cannot be counted by stream; their requests are exchanges")
    assert request_counting(cap) == "3 TLS connections by exchange (encrypted: streams not seen)"


def test_nothing_left_out_says_nothing(tmp_path):
    cap = load(write(tmp_path, schema5(capture([thread(100, read_calls=10, write_calls=10)], requests=10))))
    assert coverage_notes(cap) == [] and request_counting(cap) is None


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


def test_top_title_says_how_requests_were_counted(tmp_path):
    from spinscope.live.top import _title, rows

    doc = schema8(capture([thread(100, "grpc-nio", read_calls=50, write_calls=60, h2_connections=4, h2_streams=900,
                                  requests_read=900)], requests=900))
    cap = load(write(tmp_path, doc))
    process, _ = rows(cap, cap, False)
    assert process["counted"] == "requests counted by stream on 4 HTTP/2 connections (900 streams), by exchange elsewhere"
    title = _title({"name": "java (pid 1)", "elapsed": 3.0}, process).plain
    assert title.endswith("(requests counted by stream on 4 HTTP/2 connections (900 streams), by exchange elsewhere)")
    plain = load(write(tmp_path, schema8(capture([thread(100, read_calls=10, write_calls=10)], requests=10)), "p.json"))
    assert rows(plain, plain, False)[0]["counted"] is None
    assert _title({"name": "x", "elapsed": 3.0}, rows(plain, plain, False)[0]).plain.endswith("%")
