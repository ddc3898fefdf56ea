"""What a capture's request figures cover: the socket traffic left out of requests, and what one request is.

The probes count a request as a read burst followed by a write burst on a socket that serves clients
(docs/capture-format.md, "requests"). Two things change what that means, and the report says them rather
than letting the per-request figures mislead quietly:

- reads and writes on channels between the target's processes (socket pairs: a Node.js cluster's IPC, a
  master handing work to workers) are not requests, and are left out of them (schema 5);
- on an HTTP/2 connection streams are multiplexed, so a request as counted is an exchange that may hold
  several HTTP requests.
"""

from __future__ import annotations

from spinscope.analysis.capture import Capture


def coverage_notes(cap: Capture) -> list[str]:
    """The sentences about what the request figures of `cap` leave out or count otherwise; [] if nothing."""
    notes = [note for note in (_older_schema_note(cap), _channels_note(cap), _h2_note(cap)) if note]
    return notes


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
    return (f"{connections:,} connection{'s' if connections != 1 else ''} spoke HTTP/2 (cleartext, prior knowledge): "
            "their streams are multiplexed, so a request here is an exchange (a read burst and the writes "
            "after it) that may hold several HTTP requests, and every per-request figure is per exchange; "
            "streams are not counted")
