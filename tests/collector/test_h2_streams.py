"""HTTP/2 connections (schema 8): their requests are streams, followed in the frame headers of the reads and
writes (bpf/h2.bpf.h), counted exactly however the frames are cut into calls; and the walk says when it
lost its place."""

from __future__ import annotations

from collector_harness import run_fixture

H2_WALK_STEPS = 512  # bpf/spinscope.h: a PING frame takes 2 steps (its header, its payload skipped)
PING_FRAME = 17


def test_streams_counted_exactly(tmp_path):
    connections = 4
    run = run_fixture("h2streams", str(connections), tmp_path=tmp_path)
    truth, got, cap = run.truth["server"], run.thread("server"), run.capture
    # 7 streams a connection: 1, 3 interleaved, 1 split across reads, 1 reset by the client, 1 HEADERS only.
    assert truth["streams"] == 7 * connections and truth["reset"] == connections
    assert truth["responses"] == 6 * connections
    assert got["h2_connections"] == connections
    assert got["h2_streams"] == got["requests_read"] == truth["streams"]
    # Every stream ended: by the server's END_STREAM (answered) or the client's RST_STREAM.
    assert cap["requests"]["count"] == truth["streams"]
    assert got["responses_written"] == truth["responses"]
    # Every frame header, read and written, walked once; nothing lost, nothing left open.
    assert got["h2_frames"] == truth["frames_read"] + truth["frames_written"]
    assert got["h2_lost"] == got["h2_lost_calls"] == got["h2_lost_bytes"] == 0
    assert got["h2_streams_unfollowed"] == 0
    # The connection's writes are in the requests' sums: each answering read's one writev, and round 2's
    # split header's write of 4 bytes.
    assert cap["requests"]["write_calls"] == got["write_calls"]
    assert sum(cap["requests"]["hist"]["duration_ns"]) == truth["streams"]
    assert cap["requests"]["unattributed_writes"] == 0


def test_lost_place_said(tmp_path):
    run = run_fixture("h2streams", "lost", tmp_path=tmp_path)
    truth, got, cap = run.truth["server"], run.thread("server"), run.capture
    assert truth["ping_bytes"] == truth["pings"] * PING_FRAME
    walked = H2_WALK_STEPS // 2 * PING_FRAME  # the PINGs the walk read before its bound
    assert got["h2_connections"] == 1 and got["h2_lost"] == 1
    # The read of the PINGs (from the bound on) and the stream's read after it: not walked.
    assert got["h2_lost_calls"] == 2
    assert got["h2_lost_bytes"] == truth["ping_bytes"] - walked + truth["after"]
    # Frames walked: SETTINGS, 256 PINGs, the server's 3 frames; the stream after the loss is not counted.
    assert got["h2_frames"] == 1 + H2_WALK_STEPS // 2 + 3
    assert got["h2_streams"] == got["requests_read"] == 0 and cap["requests"]["count"] == 0


def test_tls_connections_counted_by_exchange(tmp_path):
    """A first read shaped as a TLS ClientHello: a TLS connection, whose requests stay exchanges."""
    run = run_fixture("h2streams", "tls", tmp_path=tmp_path)
    truth, got, cap = run.truth["server"], run.thread("server"), run.capture
    assert got["tls_connections"] == truth["tls_connections"] == 3
    assert got["h2_connections"] == got["h2_frames"] == 0
    assert cap["requests"]["count"] == got["requests_read"] == truth["exchanges"] == 9
