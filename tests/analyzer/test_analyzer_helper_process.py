"""The runtime stacks helper as a process (tracing/stacks_helper.Helper), on a stand-in that behaves as the
helper does at its edges: one `sampling` line on stderr, then warnings, and its output written on SIGTERM.
Its stderr is read to the end (a helper that writes more than a pipe holds is not blocked), it runs in a
session of its own (a signal to our process group does not cut its drain short), it is told to exit with
its parent, and its last words are the error when it fails."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

from spinscope.tracing import stacks_helper

STAND_IN = textwrap.dedent("""\
    import signal, sys, time
    argv = sys.argv[1:]
    out = argv[argv.index("--out") + 1]
    mode = argv[argv.index("--pid") + 1]
    if mode == "fail":
        sys.stderr.write("spinscope-stacks-helper: profiler failed to start: no BTF\\n")
        sys.exit(1)
    stopped = []
    signal.signal(signal.SIGTERM, lambda *_: stopped.append(1))
    sys.stderr.write("spinscope-stacks-helper: sampling pid 1 at 99 Hz\\n")
    sys.stderr.flush()
    for i in range(4096):  # 256 KiB of warnings: four times what a pipe holds
        sys.stderr.write(f"warning {i:05d} " + "x" * 49 + "\\n")
    sys.stderr.flush()
    while not stopped:
        time.sleep(0.01)
    with open(out, "w") as f:
        f.write(" ".join(argv) + "\\n")
""")


def stand_in(tmp_path):
    path = tmp_path / "helper"
    path.write_text(f"#!{sys.executable}\n" + STAND_IN)
    path.chmod(0o755)
    return path


def test_a_helper_that_writes_more_than_a_pipe_holds_is_drained_and_stops_cleanly(tmp_path):
    out = tmp_path / "out"
    helper = stacks_helper.Helper(stand_in(tmp_path), 1, 99, out, children=True, runtime="cpython")
    try:
        assert helper.start(), helper.error
        time.sleep(0.5)  # it writes its 256 KiB of warnings
        assert os.getsid(helper.proc.pid) == helper.proc.pid  # a session of its own: no group signal reaches it
        started = time.monotonic()
        helper.stop()
        assert time.monotonic() - started < 5
        assert helper.proc.returncode == 0 and helper.error is None
        assert out.read_text().split() == ["--pid", "1", "--hz", "99", "--out", str(out), "--timestamps",
                                           "--children=true", "--runtime", "python", "--exit-with-parent"]
        assert helper.said[-1].startswith("warning 04095 ")  # read to its end, the last lines kept
        assert len(helper.said) == stacks_helper.STDERR_LINES_KEPT
        # its tag timeline's directory is named after this process (reap_tag_directories reads it there)
        assert helper.private.name.startswith(stacks_helper.tags_prefix())
    finally:
        helper.cleanup()
    assert not helper.private.exists()


def test_a_helper_that_fails_says_why(tmp_path):
    helper = stacks_helper.Helper(stand_in(tmp_path), "fail", 99, tmp_path / "out", children=False)
    try:
        assert not helper.start()
        assert helper.error == "spinscope-stacks-helper: profiler failed to start: no BTF"
    finally:
        helper.cleanup()


def test_a_killed_records_tag_directory_is_removed_by_the_next_one(tmp_path):
    """A `record --stacks` killed before it removes its tag timeline's directory (SIGKILL) leaves it behind:
    the next helper removes the directories of processes of its PID namespace that are gone, and only those:
    its own process's and a live one's stay, another namespace's stays (its PIDs are not ours to judge), and
    a link or a file of that name is never followed or removed."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = tmp_path / f"{stacks_helper.tags_prefix(gone.pid)}abc_def1"
    live = tmp_path / f"{stacks_helper.tags_prefix()}abc_def2"
    other_namespace = tmp_path / f"{stacks_helper.TAGS_PREFIX}1-{gone.pid}-abc_def3"
    elsewhere = tmp_path / "elsewhere"
    for path in (dead, live, other_namespace, elsewhere):
        path.mkdir()
        (path / "timeline").write_bytes(b"x")
    link = tmp_path / f"{stacks_helper.tags_prefix(gone.pid)}link"
    link.symlink_to(elsewhere)
    file = tmp_path / f"{stacks_helper.tags_prefix(gone.pid)}file"
    file.write_bytes(b"x")
    old_style = tmp_path / f"{stacks_helper.TAGS_PREFIX}k2j4h5g6"  # before the directories were named after their process
    old_style.mkdir()

    assert stacks_helper.reap_tag_directories(tmp_path) == [dead]
    assert not dead.exists()
    assert live.is_dir() and other_namespace.is_dir() and (elsewhere / "timeline").exists()
    assert link.is_symlink() and file.exists() and old_style.is_dir()
