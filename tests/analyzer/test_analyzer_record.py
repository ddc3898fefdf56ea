"""`spinscope record` refuses bad options before the collector starts: one line, exit 2. The collector
here is a script (SPINSCOPE_COLLECTOR) that leaves a mark when it runs, so no root is needed."""

from __future__ import annotations

import os

import pytest

from spinscope.tracing.collector import COLLECTOR_ENV


@pytest.fixture
def collector(stand_in_collector):
    """A stand-in collector: records its arguments in `ran`, prints a line naming a hostile target on
    stderr, and exits without probes (so record waits for nothing)."""
    return stand_in_collector("printf 'spinscope-collector: attached to PID 1 ([/]\\033[31m)\\n' >&2\n")


@pytest.mark.parametrize("options, message", [
    (["--max-threads", "0"], "--max-threads must be a positive number of map entries, not 0"),
    (["--max-threads=-1"], "--max-threads must be a positive number of map entries, not -1"),
    (["--max-sockets", "0"], "--max-sockets must be a positive number of map entries, not 0"),
    (["--duration", "nan"], "--duration must be a number of seconds >= 0, not nan"),
    (["--duration", "inf"], "--duration must be a number of seconds >= 0, not inf"),
    (["--interval=-inf"], "--interval must be a number of seconds >= 0, not -inf"),
    (["--interval", "NaN"], "--interval must be a number of seconds >= 0, not nan"),
    (["-o", ""], "--output is empty: name the capture file"),
    (["-o", "."], "--output . is a directory: name the capture file"),
    (["--pid", "0"], "--pid must be a positive process id, not 0"),
    (["--time-sample", "0"], "--time-sample must be a power of two from 1 to 65536, not 0"),
    (["--time-sample", "12"], "--time-sample must be a power of two from 1 to 65536, not 12"),
    (["--time-sample", "131072"], "--time-sample must be a power of two from 1 to 65536, not 131072"),
    (["--stacks", "1001"], "--stacks takes a rate from 1 to 1000 samples a second, not 1001"),
    (["--stacks=-5"], "--stacks takes a rate from 1 to 1000 samples a second, not -5"),
])
def test_bad_options_are_refused_before_the_collector_starts(options, message, collector, cli):
    ran, env = collector
    result = cli("record", "--pid", str(os.getpid()), *options, env=env)
    assert result.returncode == 2
    assert result.stderr == f"spinscope record: error: {message}\n"
    assert not ran.exists()


def test_good_options_reach_the_collector(collector, cli, tmp_path):
    ran, env = collector
    out = tmp_path / "capture.json"
    result = cli("record", "--pid", str(os.getpid()), "--max-threads", "64", "--duration", "1.5", "-o", out,
                 "--time-sample", "4", env=env)
    assert result.returncode == 0, result.stderr
    assert ran.read_text().split()[:9] == ["--pid", str(os.getpid()), "--output", str(out), "--exit-with-parent",
                                           "--duration", "1.5", "--interval", "1"]
    assert "--max-threads 64" in ran.read_text() and "--time-sample 4" in ran.read_text()
    assert "--stacks" not in ran.read_text()  # off unless asked
    # Its stderr is relayed as data: the target's name as written, no escape sequence.
    assert "attached to PID 1 ([/]\\x1b[31m)" in result.stderr and "\x1b" not in result.stderr


def test_a_command_goes_to_the_collector_after_every_option_and_its_status_comes_back(tmp_path, cli):
    """`record [options] -- COMMAND`: the collector gets its options, then `-- COMMAND` untouched (the command's
    own options and `--` included), its messages on --log-fd; its exit status (the command's) is record's."""
    ran = tmp_path / "ran"
    script = tmp_path / "spinscope-collector"
    # A stand-in: records its arguments, says one line on the --log-fd descriptor, exits as a command would.
    script.write_text(f"#!/bin/sh\necho \"$@\" > {ran}\n"
                      "while [ $# -gt 0 ]; do [ \"$1\" = --log-fd ] && fd=$2; shift; done\n"
                      "echo 'spinscope-collector: wrote x' >&$fd\nexit 3\n")
    script.chmod(0o755)
    out = tmp_path / "run.json"
    result = cli("record", "-o", out, "--duration", "2", "--", "server", "-p", "5", "--", "-o", "x",
                 env={**os.environ, COLLECTOR_ENV: str(script)})
    assert result.returncode == 3, result.stderr
    words = ran.read_text().split()
    assert words[:7] == ["--output", str(out), "--exit-with-parent", "--duration", "2", "--interval", "1"]
    assert "--pid" not in words and "--log-fd" in words
    assert words[-9:-7][0] == "--ready-fd" and words[-7:] == ["--", "server", "-p", "5", "--", "-o", "x"]
    # The collector's lines are said as record's own (one prefix for the verb, as top's and the others')
    assert result.stderr == f"spinscope record: wrote x\nnext: spinscope report {out}\n"


@pytest.mark.parametrize("options, message", [
    (["--"], "-- must be followed by the command to run"),
    (["--pid", "1", "--", "true"], "-- COMMAND goes without --pid: the command is the target"),
    (["--cgroup", "x", "--", "true"], "-- COMMAND goes without --cgroup: the command is the target"),
    (["--pid-ns", "1", "--", "true"], "--pid-ns goes with --pid: it says which namespace the PID is seen in"),
])
def test_a_command_alone_is_the_target(options, message, collector, cli):
    ran, env = collector
    result = cli("record", *options, env=env)
    assert result.returncode == 2
    assert result.stderr == f"spinscope record: error: {message}\n"
    assert not ran.exists()


@pytest.mark.parametrize("options, passed", [(["--stacks"], "--stacks 99"), (["--stacks", "499"], "--stacks 499"),
                                             (["--stacks=0"], None)])
def test_stacks_reach_the_collector(options, passed, collector, cli, tmp_path):
    ran, env = collector
    result = cli("record", "--pid", str(os.getpid()), "-o", tmp_path / "c.json", *options, env=env)
    assert result.returncode == 0, result.stderr
    assert (passed in ran.read_text()) if passed else "--stacks" not in ran.read_text()
