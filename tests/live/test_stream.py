"""The collector's --stream: a line per interval, each a capture the analyzer loads; the last one the final
capture, whose counts are the fixture's exact ones; a reader that goes away ends the collector cleanly,
leaving nothing attached."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

from spinscope.analysis import capture

from spinscope.tracing import collector

from live_harness import COLLECTOR, FIXTURES, bpf_ids_loaded, bpf_ids_of, stop, wait_until

WRITE_KEYS = ["write_calls", "write_bytes", "write_eagain", "write_partial"]
READ_KEYS = ["read_calls", "read_bytes", "read_eagain", "read_eof"]


def start_streaming(pid: int, *extra: str):
    """The collector on pid streaming every 0.05 s to a pipe: (process, read end as a file, stderr lines)."""
    read_fd, write_fd = os.pipe()
    started = collector.start([COLLECTOR, "--pid", pid, "--interval", "0.05", "--stream", write_fd, *extra],
                              pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    os.close(write_fd)
    stderr: list = []
    threading.Thread(target=lambda: stderr.extend(started.proc.stderr), daemon=True).start()
    started.wait_ready(timeout=30)
    return started.proc, os.fdopen(read_fd, "rb"), stderr


def test_stream_lines_end_with_the_exact_counts(tmp_path):
    fixture = subprocess.Popen([str(FIXTURES / "sockio")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    proc = None
    try:
        pid = int(fixture.stdout.readline().split()[1])
        proc, stream, stderr = start_streaming(pid)
        lines = [stream.readline(), stream.readline()]  # two intervals before the fixture works
        fixture.stdin.write("go\n")
        fixture.stdin.flush()
        out = fixture.communicate(timeout=30)[0]
        lines += stream.readlines()  # to the end: the collector ends with its target
        assert proc.wait(timeout=30) == 0, stderr
    finally:
        stop(fixture)
        stop(proc)
    truth = {row["thread"]: row for row in map(json.loads, (l for l in out.splitlines() if l.startswith("{")))}
    assert len(lines) >= 3 and all(line.endswith(b"\n") and line.count(b"\n") == 1 for line in lines)
    caps = [capture.loads(line, f"line {i}") for i, line in enumerate(lines)]  # every line a valid capture
    assert [c.raw["end_reason"] for c in caps] == ["live"] * (len(caps) - 1) + ["target-exited"]
    assert all(len(c.raw["intervals"]) == 1 for c in caps)  # the latest interval only
    durations = [c.duration_s for c in caps]
    assert durations == sorted(durations)
    assert caps[0].totals["write_calls"] == 0  # before "go"
    last = caps[-1]
    for name, keys in (("sockwriter", WRITE_KEYS), ("sockreader", READ_KEYS)):
        row = last.threads[truth[name]["tid"]]
        assert {k: int(row[k]) for k in keys} == {k: truth[name][k] for k in keys}
    assert not any(p.name.endswith(".json") for p in tmp_path.iterdir())
    assert not any("wrote" in line for line in stderr)  # --stream alone writes no file


def test_reader_closing_the_stream_ends_the_collector_cleanly():
    target = subprocess.Popen(["sleep", "60"])
    proc = None
    try:
        proc, stream, stderr = start_streaming(target.pid)
        ours = bpf_ids_of(proc.pid)
        assert {kind for kind, _ in ours} == {"prog", "link"}
        assert ours <= bpf_ids_loaded()
        stream.readline()
        stream.readline()
        closed = time.monotonic()
        stream.close()
        assert proc.wait(timeout=10) == 0, stderr
        assert time.monotonic() - closed < 3  # POLLERR on the pipe: it does not wait for the next line
        wait_until(lambda: not (ours & bpf_ids_loaded()), 10, "the collector's programs and links to go")
        assert any("(stream-closed)" in line for line in stderr), stderr
        assert target.poll() is None  # the target is left alone
    finally:
        stop(proc)
        stop(target)


def test_stream_needs_an_interval_and_an_open_descriptor():
    result = subprocess.run([COLLECTOR, "--pid", "1", "--stream", "1"], capture_output=True, text=True)
    assert result.returncode == 2 and "--stream needs --interval" in result.stderr
    result = subprocess.run([COLLECTOR, "--pid", "1", "--interval", "1", "--stream", "97"], capture_output=True,
                            text=True)
    assert result.returncode == 2 and "--stream 97 is not an open file descriptor" in result.stderr
