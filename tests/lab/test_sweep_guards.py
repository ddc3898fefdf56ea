"""What a sweep checks before it runs anything, and what it cleans up when it starts, without root: a matrix
file that is not UTF-8, a matrix asking for more cells than a sweep takes (refused before any cell is made),
and the processes an earlier sweep into the same directory left running when it was SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from spinscope.errors import SpinscopeError
from spinscope.lab.matrix import EXIT_USAGE, MAX_CELLS, parse_matrix, parse_matrix_text
from spinscope.lab.runner import SWEEP_ENV, find_leftovers, stop_leftovers, sweep_tag


def sweep(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spinscope", "sweep", *map(str, args)], capture_output=True,
                          text=True, timeout=60)


def test_a_matrix_that_is_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "m.toml"
    path.write_bytes(b'[[group]]\narch = "event-loop"\nname = "caf\xe9"\n')
    with pytest.raises(SpinscopeError, match=r"m.toml: not UTF-8 text \(byte 41\)") as error:
        parse_matrix(path)
    assert error.value.exit_code == EXIT_USAGE
    result = sweep(path, "-o", tmp_path / "out", "--list")
    assert result.returncode == EXIT_USAGE and result.stdout == ""
    assert result.stderr == f"spinscope sweep: error: {path}: not UTF-8 text (byte 41); a matrix is a TOML file\n"


def test_too_many_cells_are_refused_before_any_is_made(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('[[group]]\narch = "event-loop"\nrepetitions = 100000000\n')
    started = time.monotonic()
    result = sweep(path, "-o", tmp_path / "out", "--list")
    assert time.monotonic() - started < 30  # expanding 10^8 cells takes minutes and gigabytes
    assert result.returncode == EXIT_USAGE and result.stdout == ""
    assert result.stderr == (f"spinscope sweep: error: {path}: the matrix asks for 100,000,000 cells, more than "
                             f"the {MAX_CELLS:,} a sweep takes (axes × variants × repetitions of every group)\n")


def test_the_cell_count_multiplies_axes_variants_and_repetitions():
    def matrix(rcvbuf: str, repetitions: int) -> str:
        concurrency = ", ".join(str(n) for n in range(1, 101))
        return (f'[[group]]\narch = "event-loop"\nconcurrency = [{concurrency}]\nrcvbuf = {rcvbuf}\n'
                'variants = [{ poller = "epoll" }, { poller = ["poll", "select"] }]\n'
                f"repetitions = {repetitions}\n")

    assert len(parse_matrix_text(matrix("[1, 2]", 2)).cells) == 100 * 2 * (1 + 2) * 2
    rcvbufs = "[" + ", ".join(str(n) for n in range(1, 101)) + "]"
    with pytest.raises(SpinscopeError, match="asks for 30,000 cells"):  # 100 × 100 × (1 + 2)
        parse_matrix_text(matrix(rcvbufs, 1))
    at_bound = f'[[group]]\narch = "event-loop"\nrepetitions = {MAX_CELLS}\n'
    assert len(parse_matrix_text(at_bound).cells) == MAX_CELLS


def tagged_sleeper(tag: str, ignore_term: bool = False) -> subprocess.Popen:
    """A process as the sweep starts them (own session, SPINSCOPE_SWEEP=tag), sleeping; `ignore_term`:
    it takes SIGKILL to stop it."""
    code = ("import signal, sys, time\n"
            + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if ignore_term else "")
            + "print('ready', flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, SWEEP_ENV: tag},
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout.readline() == "ready\n"  # its signal disposition is set
    return proc


def test_leftovers_of_the_same_directory_are_stopped(tmp_path):
    tag, other = sweep_tag(tmp_path / "out"), sweep_tag(tmp_path / "other")
    polite, stubborn, stranger = tagged_sleeper(tag), tagged_sleeper(tag, ignore_term=True), tagged_sleeper(other)
    try:
        assert {p.pid for p in find_leftovers(tag)} == {polite.pid, stubborn.pid}
        stopped = stop_leftovers(tag, timeout=2.0)
        assert {p.pid for p in stopped} == {polite.pid, stubborn.pid}
        assert all(p.name.startswith("python") for p in stopped)
        assert polite.wait(timeout=5) == -signal.SIGTERM
        assert stubborn.wait(timeout=5) == -signal.SIGKILL
        assert stranger.poll() is None and find_leftovers(tag) == []
        assert stop_leftovers(tag) == []
    finally:
        for proc in (polite, stubborn, stranger):
            proc.kill()
            proc.wait()


def test_a_process_never_counts_itself_or_its_parents_as_leftovers(tmp_path):
    """A sweep started with the tag in its own environment (by hand, or by a script that exported it)
    does not stop itself or the shell that started it."""
    tag = sweep_tag(tmp_path / "out")
    script = ("import sys; from spinscope.lab.runner import find_leftovers; "
              f"print([p.pid for p in find_leftovers({tag!r})])")
    shell = subprocess.run(["sh", "-c", f'{sys.executable} -c "{script}"; true'],
                           env={**os.environ, SWEEP_ENV: tag}, capture_output=True, text=True, timeout=60)
    assert shell.stdout == "[]\n", shell.stderr
