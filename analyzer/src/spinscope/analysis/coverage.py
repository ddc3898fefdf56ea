"""What a capture's request figures cover: the socket traffic left out of requests, and what one request is.

The probes count a request as a read burst followed by a write burst on a socket that serves clients
(docs/capture-format.md, "requests"). Two things change what that means, and the report says them rather
than letting the per-request figures mislead quietly:

- reads and writes on channels between the target's processes (socket pairs: a Node.js cluster's IPC, a
  master handing work to workers) are not requests, and are left out of them (schema 5);
- on an HTTP/2 connection (cleartext: its first read began with the preface) streams are multiplexed: from
  schema 8 its requests are its streams, read from the frame headers, and the report says where that walk
  lost its place; before, a request there was an exchange that may hold several HTTP requests;
- a connection that began with a TLS ClientHello is encrypted in the syscalls: its requests are exchanges,
  and whether it speaks HTTP/2 inside cannot be seen.

`request_counting` is the short form of the last two, for headlines (report, diff) and `top`, from a
capture's totals.
"""

from __future__ import annotations

from spinscope.analysis.capture import Capture


def coverage_notes(cap: Capture) -> list[str]:
    """The sentences about what the request figures of `cap` leave out or count otherwise; [] if nothing."""
    notes = [note for note in (_older_schema_note(cap), _channels_note(cap), _h2_note(cap), _tls_note(cap),
                               _stacks_left_out_note(cap)) if note]
    return notes


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def request_counting(cap: Capture) -> str | None:
    """How requests were counted, when not all as exchanges: `requests counted by stream on 4 HTTP/2
    connections (1,234 streams); 2 TLS connections by exchange`; None when every connection's requests are
    exchanges (HTTP/1, and captures before schema 5)."""
    totals = cap.totals
    h2, tls = int(totals.get("h2_connections", 0)), int(totals.get("tls_connections", 0))
    parts = []
    if h2 and cap.h2_by_stream:
        parts.append(f"requests counted by stream on {_plural(h2, 'HTTP/2 connection')} "
                     f"({_plural(int(totals.get('h2_streams', 0)), 'stream')}), by exchange elsewhere")
    elif h2:
        parts.append(f"requests on {_plural(h2, 'HTTP/2 connection')} counted by exchange, not by stream")
    if tls:
        parts.append(f"{_plural(tls, 'TLS connection')} by exchange (encrypted: streams not seen)")
    return "; ".join(parts) or None


def _older_schema_note(cap: Capture) -> str | None:
    # Before schema 5 every socket the target read and wrote was taken as serving: nothing in such a
    # capture tells how many of its requests were messages between its own processes.
    if cap.channels_told_apart or cap.request_count == 0:
        return None
    return (f"capture schema {cap.schema} (an older collector) did not tell socket pairs between the target's "
            "processes from client connections: messages on them, if any, are counted as requests")


def _channels_note(cap: Capture) -> str | None:
    reads, writes = cap.channel_reads, cap.channel_writes
    if not reads and not writes:
        return None
    sockets = cap.channel_sockets
    return (f"{reads:,} reads and {writes:,} writes on {sockets:,} channel socket{'s' if sockets != 1 else ''} "
            "between the target's processes (socket pairs, not client connections) were not counted as "
            "requests; they are in the socket reads and writes")


def _h2_note(cap: Capture) -> str | None:
    connections = cap.h2_connections
    if not connections:
        return None
    spoke = f"{_plural(connections, 'connection')} spoke HTTP/2 (cleartext, prior knowledge)"
    if not cap.h2_by_stream:
        why = (f"the recording kernel {cap.kernel} lacks bpf_loop (Linux 5.17), which the frame walk needs"
               if "http2_streams" in cap.left_out else f"capture schema {cap.schema}, an older collector")
        return (f"{spoke}: their streams are multiplexed, so a request here is an exchange (a read burst and the "
                "writes after it) that may hold several HTTP requests, and every per-request figure is per "
                f"exchange; streams are not counted ({why})")
    t = cap.totals
    note = (f"{spoke}: their requests are their streams ({_plural(int(t['h2_streams']), 'stream')} opened), "
            "read from the frame headers (a client HEADERS frame opens one, the server's END_STREAM or an "
            "RST_STREAM ends it); a request's writes are its connection's since the previous stream ended; "
            "other connections' requests are exchanges")
    if t["h2_lost"] or t["h2_lost_calls"]:
        bad = int(t["h2_bad_frames"])
        note += (f"; the frame walk lost its place {_plural(int(t['h2_lost']), 'time')}"
                 + (f" ({bad:,} at a frame header no conforming peer sends: a length above the largest frame its "
                    "receiver accepts, an unregistered type, or a stream id or length its type forbids)" if bad else "")
                 + f": {_plural(int(t['h2_lost_calls']), 'call')} ({_plural(int(t['h2_lost_bytes']), 'byte')}) on "
                 "those connections were not followed after it, and the streams in them are not counted")
    if t["h2_streams_unfollowed"]:
        note += (f"; {_plural(int(t['h2_streams_unfollowed']), 'stream')} opened were not followed to their end "
                 "(their connection closed first, or a stream 64 ids on took their slot): not counted as requests")
    return note


def _stacks_left_out_note(cap: Capture) -> str | None:
    if "stacks" not in cap.left_out:
        return None
    return (f"--stacks was asked for, but the recording kernel {cap.kernel} cannot run the stack sampler (its "
            "perf-event programs may not read a hash map that is not preallocated: Linux 6.1): this capture has "
            "no stacks")


def _tls_note(cap: Capture) -> str | None:
    connections = int(cap.totals["tls_connections"])
    if not connections:
        return None
    return (f"{_plural(connections, 'connection')} began with a TLS handshake: encrypted in the syscalls, so "
            "HTTP/2 inside them (if their ALPN chose it) cannot be counted by stream; their requests are "
            "exchanges (a read burst and the writes after it), which on a multiplexed connection may hold "
            "several HTTP requests")
