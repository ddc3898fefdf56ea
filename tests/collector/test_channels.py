"""Requests only on sockets that serve clients (schema 5): a socket pair between the target's processes is a
channel, whose messages are no requests; and HTTP/2 connections recognised by their first read."""

from __future__ import annotations

from collector_harness import run_fixture


def test_channel_messages_are_not_requests(tmp_path):
    requests = 30
    run = run_fixture("channels", str(requests), tmp_path=tmp_path, collector_args=("--children",))
    primary, worker, unixserver = (run.truth[name] for name in ("primary", "worker", "unixserver"))
    assert primary["requests"] == unixserver["requests"] == requests
    assert primary["channel_reads"] == worker["channel_reads"] == requests  # a job and its reply each
    cap = run.capture
    # The TCP connection's and the Unix listener's requests, and not one of the channel's messages.
    assert cap["requests"]["count"] == primary["requests"] + unixserver["requests"]
    assert run.thread("primary")["requests_read"] == run.thread("primary")["responses_written"] == requests
    assert run.thread("unixserver")["requests_read"] == requests
    # Each channel read and write counted as the fixture made them, and still among the socket calls.
    for name in ("primary", "worker"):
        got = run.thread(name)
        assert (got["channel_reads"], got["channel_writes"]) == (
            run.truth[name]["channel_reads"], run.truth[name]["channel_writes"])
    worker_got = run.thread("worker")
    assert worker_got["read_calls"] == worker["channel_reads"] + 1  # and the read of 0 that ended it
    assert worker_got["write_calls"] == worker["channel_writes"]
    # The two ends of the one socket pair, each first used by one thread.
    assert run.thread("primary")["channel_sockets"] == worker_got["channel_sockets"] == 1
    assert cap["totals"]["channel_sockets"] == 2
    # The clients (descendants, followed) made outgoing connections, TCP and Unix: no requests, no channel.
    for name in ("tcpclient", "unixclient"):
        got = run.thread(name)
        assert got["write_calls"] == got["read_calls"] == requests
        assert got["requests_read"] == got["channel_reads"] == got["channel_writes"] == 0
    # Writes in no request: the channel's and the clients'.
    assert cap["requests"]["unattributed_writes"] == 2 * requests + 2 * requests
    assert cap["totals"]["h2_connections"] == 0


def test_http2_connections_by_their_preface(tmp_path):
    connections, h2 = 12, 8
    run = run_fixture("h2preface", str(connections), str(h2), tmp_path=tmp_path)
    truth, got = run.truth["server"], run.thread("server")
    assert truth["h2_connections"] == h2 and truth["requests"] == connections + 1
    # Each of read, recvfrom, readv and recvmsg saw the preface on 2 connections; the HTTP/1.1 ones, and
    # the preface sent as a connection's second message, are not HTTP/2 connections.
    assert got["h2_connections"] == h2
    # Their requests are streams (schema 8): the preface and SETTINGS open none; the answer ("k") is no
    # frame the walk can finish (a frame header's first byte). The others' are exchanges, as before.
    assert run.capture["requests"]["count"] == connections + 1 - h2
    assert got["h2_streams"] == 0 and got["h2_frames"] == h2 and got["h2_lost"] == 0
    assert got["channel_reads"] == got["channel_writes"] == 0
