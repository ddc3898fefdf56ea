"""spinscope/tracing/targets.py: the target options record, top and exporter share, their one check, the one usage
error, and the defaults the verbs hold for the collector (equal to what `spinscope-collector --help` says)."""

from __future__ import annotations

import argparse
import io
import os
import re
import subprocess

import pytest
from rich.console import Console

from spinscope.commands import record

from spinscope.cli import DESCRIPTIONS, VERBS, build_parser
from spinscope.errors import SpinscopeError, UsageError
from spinscope.tracing import targets
from spinscope.tracing.collector import COLLECTOR_ENV
from paths import COLLECTOR

needs_collector = pytest.mark.skipif(not os.access(COLLECTOR, os.X_OK), reason="collector not built (make)")
SPECS = {"record": targets.RECORD, "top": targets.TOP, "exporter": targets.EXPORTER}


def parse(spec: targets.Targets, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    targets.add_options(parser, spec)
    return parser.parse_args(argv)


def refusal(spec: targets.Targets, *argv: str) -> str:
    with pytest.raises(UsageError) as raised:
        targets.check(parse(spec, *argv), spec)
    assert raised.value.exit_code == 2
    return str(raised.value)


def cgroup2_mounted() -> bool:
    return any(fstype == "cgroup2" for _, fstype in targets._mounts())


# ---------------------------------------------------------------------------------------------------------
# The rules


@pytest.mark.parametrize("verb", SPECS)
@pytest.mark.parametrize("pid", ["0", "-5"])
def test_every_verb_refuses_a_pid_that_names_no_process_in_the_same_words(verb, pid):
    assert refusal(SPECS[verb], "--pid", pid) == f"--pid must be a positive process id, not {pid}"


@pytest.mark.parametrize("verb", ["record", "top"])
def test_one_target_verbs_need_a_pid_a_cgroup_or_a_command(verb):
    assert refusal(SPECS[verb]) == "--pid PID, --cgroup PATH or -- COMMAND is required"


def with_command(spec: targets.Targets, command: list, *argv: str) -> argparse.Namespace:
    """The options as cli.main hands them over: argv before `--`, the command after it."""
    args = parse(spec, *argv)
    args.command = command
    return args


@pytest.mark.parametrize("verb", ["record", "top"])
@pytest.mark.parametrize("argv, named", [(("--pid", "1"), "--pid"), (("--cgroup", "x"), "--cgroup")])
def test_a_command_is_the_target_alone(verb, argv, named):
    """The collector's rule and words; --cgroup refused before it is looked for."""
    with pytest.raises(UsageError) as raised:
        targets.check(with_command(SPECS[verb], ["true"], *argv), SPECS[verb])
    assert str(raised.value) == f"-- COMMAND goes without {named}: the command is the target"


@pytest.mark.parametrize("verb", ["record", "top"])
def test_a_dash_dash_needs_a_command(verb):
    with pytest.raises(UsageError) as raised:
        targets.check(with_command(SPECS[verb], []), SPECS[verb])
    assert str(raised.value) == "-- must be followed by the command to run"


@pytest.mark.parametrize("verb", ["record", "top"])
def test_one_target_verbs_name_their_target_to_the_collector_one_way(verb):
    """targets.collector_target: what record and top both put on the collector's command line."""
    spec = SPECS[verb]
    assert targets.collector_target(with_command(spec, None, "--pid", "42")) == ["--pid", "42"]
    assert targets.collector_target(with_command(spec, None, "--pid", "42", "-c")) == ["--pid", "42", "--children"]
    assert targets.collector_target(with_command(spec, None, "--cgroup", "/sys/fs/cgroup/a")) == [
        "--cgroup", "/sys/fs/cgroup/a"]
    assert targets.collector_target(with_command(spec, ["true"])) == []  # the collector runs it, after its options


def test_record_passes_children_once():
    args = build_parser("record").parse_args(["record", "--pid", "42", "--children"])
    args.command = None
    cmd = record.collector_command(COLLECTOR, args, COLLECTOR.parent / "out.json")
    assert cmd[:4] == [str(COLLECTOR), "--pid", "42", "--children"] and cmd.count("--children") == 1


def test_cli_splits_the_command_off_at_the_first_dash_dash(monkeypatch):
    """What follows the first `--` is the command's, its own options and `--` included; the other verbs take
    none (argparse refuses a stray word)."""
    seen = []
    monkeypatch.setattr(record, "run", lambda args: seen.append(args) or 0)
    from spinscope import cli

    assert cli.main(["record", "-o", "x.json", "--", "server", "-p", "5", "--", "-o"]) == 0
    assert seen[0].command == ["server", "-p", "5", "--", "-o"] and seen[0].output == "x.json"
    assert seen[0].pid is None
    assert cli.main(["record", "--pid", "7"]) == 0
    assert seen[1].command is None


def test_the_exporter_needs_a_target_of_any_kind():
    assert refusal(targets.EXPORTER) == ("name a target: --pid PID, --comm NAME, --exe PATH or --cgroup PATH "
                                         "(each repeatable)")


@pytest.mark.parametrize("verb", ["record", "top"])
@pytest.mark.parametrize("extra, named", [(("--pid", "1"), "--pid"), (("--children",), "--children")])
def test_a_cgroup_goes_alone_for_one_target_verbs(verb, extra, named):
    """Checked before the cgroup is looked for: `x` need not exist."""
    assert refusal(SPECS[verb], "--cgroup", "x", *extra) == (
        f"--cgroup goes without {named}: it traces every process in the cgroup, children included")


@pytest.mark.skipif(not cgroup2_mounted(), reason="no cgroup v2 hierarchy mounted here")
def test_the_exporter_takes_a_cgroup_next_to_pids_each_its_own_target():
    args = parse(targets.EXPORTER, "--cgroup", "spinscope-not-made-yet", "--pid", "7", "--pid", "8", "--children")
    targets.check(args, targets.EXPORTER)  # a cgroup made later is waited for
    assert args.pid == [7, 8] and len(args.cgroup) == 1 and args.cgroup[0].name == "spinscope-not-made-yet"


def test_time_sample_is_a_power_of_two_up_to_the_collectors_bound():
    assert {n for n in range(-2, 140000) if targets.is_time_sample(n)} == {2 ** k for k in range(17)}
    assert refusal(targets.RECORD, "--pid", "1", "--time-sample", "48") == (
        "--time-sample must be a power of two from 1 to 65536, not 48")
    args = parse(targets.RECORD, "--pid", "1", "--time-sample", "65536")
    targets.check(args, targets.RECORD)
    assert args.time_sample == 65536


@pytest.mark.parametrize("option", ["--max-threads", "--max-sockets"])
def test_map_sizes_are_positive(option):
    assert refusal(targets.RECORD, "--pid", "1", option, "0") == (
        f"{option} must be a positive number of map entries, not 0")


def test_map_sizes_and_pid_ns_are_records_alone():
    for verb in ("top", "exporter"):
        with pytest.raises(SystemExit):
            parse(SPECS[verb], "--pid", "1", "--time-sample", "4")
        with pytest.raises(SystemExit):
            parse(SPECS[verb], "--pid", "1", "--pid-ns", "1")


def test_pid_ns_goes_with_a_pid():
    assert refusal(targets.RECORD, "--cgroup", "x", "--pid-ns", "1") == (
        "--pid-ns goes with --pid: it says which namespace the PID is seen in")
    assert refusal(targets.RECORD, "--pid", "1", "--pid-ns", "") == (
        "--pid-ns is empty: name a PID namespace file (/proc/PID/ns/pid) or a PID in it")


def test_a_process_name_is_linuxs_comm():
    name = "x" * targets.COMM_BYTES_MAX
    targets.check(parse(targets.EXPORTER, "--comm", name), targets.EXPORTER)
    assert refusal(targets.EXPORTER, "--comm", name + "y") == (
        f"--comm {name + 'y'!r}: a process name is 1 to 15 bytes (Linux's comm)")
    assert refusal(targets.EXPORTER, "--comm", "") == "--comm '': a process name is 1 to 15 bytes (Linux's comm)"


# ---------------------------------------------------------------------------------------------------------
# One usage error, printed the same way by every verb


def test_a_usage_error_is_a_spinscope_error_with_exit_2():
    error = UsageError("--x must be y")
    assert isinstance(error, SpinscopeError) and error.exit_code == 2 and str(error) == "--x must be y"


@pytest.fixture
def stand_in(stand_in_collector):
    """A collector that leaves a mark if run: a refused command line must not start it."""
    return stand_in_collector()


@pytest.mark.parametrize("verb", SPECS)
def test_every_verb_prints_a_refusal_as_one_line_and_exits_2(verb, stand_in, cli):
    ran, env = stand_in
    result = cli(verb, "--pid", "0", env=env)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"spinscope {verb}: error: --pid must be a positive process id, not 0\n"
    assert not ran.exists()


# ---------------------------------------------------------------------------------------------------------
# The verb table


@pytest.mark.parametrize("verb", VERBS)
def test_each_verbs_help_and_description_come_from_the_table(verb):
    sub = next(a for a in build_parser(verb)._actions if isinstance(a, argparse._SubParsersAction))
    assert sub.choices[verb].description == DESCRIPTIONS[verb]
    assert next(c.help for c in sub._choices_actions if c.dest == verb) == VERBS[verb][1]


def test_every_verb_has_one_description():
    assert list(DESCRIPTIONS) == list(VERBS)


# ---------------------------------------------------------------------------------------------------------
# The collector: its defaults and its words


def collector_help() -> dict:
    """`spinscope-collector --help` as {option: its help text, continuation lines joined}."""
    text = subprocess.run([COLLECTOR, "--help"], capture_output=True, text=True, check=True, timeout=10).stdout
    options, current = {}, None
    for line in text.splitlines():
        match = re.match(r"\s+(?:-\w, )?--([\w-]+)(?: \S+)?\s{2,}(.*)", line)
        if match:
            current = match[1]
            options[current] = match[2]
        elif current and line.startswith(" " * 20):
            options[current] += " " + line.strip()
        else:
            current = None
    return options


@needs_collector
def test_the_defaults_are_the_collectors():
    said = collector_help()
    defaults = {option: int(re.search(r"default (\d+)", said[option])[1]) for option in targets.COLLECTOR_DEFAULTS}
    assert defaults == targets.COLLECTOR_DEFAULTS


@needs_collector
@pytest.mark.parametrize("argv, spec, python_argv", [
    (["--pid", "0"], targets.RECORD, ["--pid", "0"]),
    (["--pid", "1", "--time-sample", "12"], targets.RECORD, ["--pid", "1", "--time-sample", "12"]),
    (["--cgroup", "x", "--pid", "1"], targets.RECORD, ["--cgroup", "x", "--pid", "1"]),
    (["--cgroup", "x", "--children"], targets.TOP, ["--cgroup", "x", "--children"]),
])
def test_the_collector_refuses_in_the_same_words(argv, spec, python_argv):
    """The collector quotes the value it was given; the rule and its words are the same."""
    result = subprocess.run([COLLECTOR, *argv], capture_output=True, text=True, timeout=10)
    assert result.returncode == 2
    said = result.stderr.removeprefix("spinscope-collector: error: ").rstrip("\n").replace("'", "")
    assert said == refusal(spec, *python_argv)


# ---------------------------------------------------------------------------------------------------------
# record's relayed lines are not wrapped


def test_record_relays_a_long_line_unbroken_into_a_pipe():
    line = "spinscope-collector: wrote /" + "d" * 120 + "/capture.json: 15 processes, 30 threads, 36461 requests"
    out = io.StringIO()
    record.say(Console(file=out, width=80), line)
    assert out.getvalue() == line + "\n"


def test_record_stderr_keeps_the_collectors_lines_whole(tmp_path, cli):
    line = f"spinscope-collector: wrote {tmp_path / ('d' * 100) / 'capture.json'}: 15 processes, 30 threads, 1 requests"
    script = tmp_path / "spinscope-collector"
    script.write_text(f"#!/bin/sh\necho '{line}' >&2\n")
    script.chmod(0o755)
    result = cli("record", "--pid", str(os.getpid()), env={**os.environ, COLLECTOR_ENV: str(script)})
    assert result.returncode == 0, result.stderr
    assert line.replace("spinscope-collector: ", "spinscope record: ", 1) in result.stderr.splitlines()
