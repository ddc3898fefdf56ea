"""HTTP/2 connections (schema 8): their requests are streams, followed in the frame headers of the reads and
writes (bpf/h2.bpf.h), counted exactly however the frames are cut into calls and however many threads read
and write a connection; the walk says when it lost its place; on a kernel without bpf_loop (forced here) the
capture counts them by exchange and says so."""

from __future__ import annotations

import os
import subprocess

from collector_harness import COLLECTOR, run_fixture

from spinscope.analysis.capture import load
from spinscope.analysis.coverage import coverage_notes

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


def test_two_threads_on_one_connection_counted_exactly(tmp_path):
    """One thread reads a connection while another writes it (Go's HTTP/2 server): every stream opens and
    ends once, whichever thread ends it (the client resets some before their answer and some after)."""
    run = run_fixture("h2streams", "threads", tmp_path=tmp_path)
    reader, writer = run.truth["h2-reader"], run.truth["h2-writer"]
    got_r, got_w, cap = run.thread("h2-reader"), run.thread("h2-writer"), run.capture
    streams, reset_first = reader["streams"], reader["reset_before_answer"]
    assert streams == writer["answers"] == 2000 and reset_first == 500
    assert got_r["h2_connections"] == 1
    assert got_r["h2_streams"] == got_r["requests_read"] == streams and got_w["h2_streams"] == 0
    assert cap["requests"]["count"] == streams
    # The client's reset in the same write as its HEADERS ends those streams on the reader; the writer's
    # END_STREAM ends every other, and finds the reset ones gone: never counted twice.
    assert got_w["responses_written"] == streams - reset_first and got_r["responses_written"] == 0
    assert cap["requests"]["cross_thread"] == streams - reset_first
    assert got_r["h2_frames"] == reader["frames_read"] and got_w["h2_frames"] == writer["frames_written"]
    for got in (got_r, got_w):
        assert got["h2_lost"] == got["h2_lost_calls"] == got["h2_bad_frames"] == 0
        assert got["h2_streams_unfollowed"] == 0


def test_bad_frame_header_stops_the_walk_and_is_said(tmp_path):
    """A PING 9 bytes long (PING is 8): no conforming peer sends it, so the reads' walk stops there; the
    writes' goes on. The first message was peeked at before it was read: the peek decides the connection is
    HTTP/2 but is not walked (walked, its bytes would be walked twice, the second time as garbage)."""
    run = run_fixture("h2streams", "bad", tmp_path=tmp_path)
    truth, got, cap = run.truth["server"], run.thread("server"), run.capture
    assert got["h2_connections"] == 1
    assert got["h2_bad_frames"] == got["h2_lost"] == got["h2_lost_calls"] == 1
    assert got["h2_lost_bytes"] == truth["bad_read"] - 9  # the bytes after the bad header
    # Walked: SETTINGS and stream 1's HEADERS read, the two answers written; stream 3 never opened.
    assert got["h2_frames"] == 4 and got["h2_streams"] == cap["requests"]["count"] == 1
    note = " ".join(coverage_notes(load(tmp_path / "h2streams.json")))
    assert "lost its place 1 time (1 at a frame header no conforming peer sends" in note


def test_without_bpf_loop_http2_counted_by_exchange_and_said(tmp_path):
    """The kernel's features forced missing (as a kernel before 5.17 lacks bpf_loop, before 6.1 the
    sampler's map access): the capture runs, HTTP/2 requests are exchanges, no stacks, and it says so."""
    env = {**os.environ, "SPINSCOPE_KERNEL_FEATURES_OFF": "bpf_loop,perf_event_maps"}
    connections = 4
    run = run_fixture("h2streams", str(connections), tmp_path=tmp_path, env=env, collector_args=("--stacks", "49"))
    got, cap = run.thread("server"), run.capture
    assert cap["host"]["features"] == {"bpf_loop": False, "perf_event_maps": False}
    assert cap["settings"]["left_out"] == ["http2_streams", "stacks"] and "stacks" not in cap
    assert got["h2_connections"] == connections
    assert got["h2_streams"] == got["h2_frames"] == got["h2_lost_calls"] == 0
    # An exchange per answering read: the four rounds of each connection.
    assert cap["requests"]["count"] == got["requests_read"] == 4 * connections
    assert any("lacks bpf_loop" in line for line in run.collector_stderr)
    assert any("recording without --stacks" in line for line in run.collector_stderr)
    notes = " ".join(coverage_notes(load(tmp_path / "h2streams.json")))
    assert "lacks bpf_loop (Linux 5.17)" in notes and "this capture has no stacks" in notes


def test_check_says_what_a_missing_feature_turns_off():
    env = {**os.environ, "SPINSCOPE_KERNEL_FEATURES_OFF": "bpf_loop"}
    done = subprocess.run([str(COLLECTOR), "--check"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert ("check bpf_loop: off: missing: HTTP/2 connections' requests are counted by exchange, not by stream"
            in done.stderr)
    assert "check perf-event map access: ok" in done.stderr and "check kernel: ok: Linux " in done.stderr
