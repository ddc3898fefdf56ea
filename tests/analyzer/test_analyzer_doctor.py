"""`spinscope doctor` renders the collector's own host checks (`--check --json`): what is missing is
named with its remedy and sets the exit code. The checks themselves are tested on the collector
(tests/collector/test_errors.py); here the collector is a script printing a known report."""

from __future__ import annotations

import json
import os

import pytest

from spinscope.commands import doctor

from spinscope.tracing import collector

PASSING = [
    {"name": "privileges", "ok": True, "skipped": False, "detail": "running as root", "remedy": ""},
    {"name": "kernel BTF", "ok": True, "skipped": False, "detail": "/sys/kernel/btf/vmlinux", "remedy": ""},
    {"name": "probes attach", "ok": True, "skipped": False, "detail": "6 probes live in 0.080 s", "remedy": ""},
]


def fake_collector(tmp_path, monkeypatch, script: str):
    path = tmp_path / "spinscope-collector"
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    monkeypatch.setenv(collector.COLLECTOR_ENV, str(path))
    return path


def reporting(tmp_path, monkeypatch, checks: list, status: int) -> None:
    report = json.dumps({"ok": status == 0, "checks": checks})
    fake_collector(tmp_path, monkeypatch, f"cat <<'EOF'\n{report}\nEOF\nexit {status}")


def by_name(checks):
    return {check.name: check for check in checks}


def test_ready_host(tmp_path, monkeypatch, capsys):
    reporting(tmp_path, monkeypatch, PASSING, 0)
    assert doctor.run(None) == 0
    out = capsys.readouterr().out
    assert "ready: spinscope record can run on this host" in out
    assert "6 probes live in 0.080 s" in out and "running as root" in out


def test_failed_check_is_named_with_its_remedy(tmp_path, monkeypatch, capsys):
    failing = [PASSING[0],
               {"name": "tracepoints", "ok": False, "skipped": False,
                "detail": "tracepoint sched/sched_waking is missing from this kernel (5 of 6 present)",
                "remedy": "a kernel built with CONFIG_FTRACE_SYSCALLS and CONFIG_TRACEPOINTS"},
               {"name": "probes load", "ok": False, "skipped": True,
                "detail": "not tried: the host checks above failed", "remedy": ""}]
    reporting(tmp_path, monkeypatch, failing, 1)
    checks = by_name(doctor.all_checks())
    assert checks["collector"].ok
    assert not checks["tracepoints"].ok and "CONFIG_FTRACE_SYSCALLS" in checks["tracepoints"].remedy
    assert checks["probes load"].skipped
    assert doctor.run(None) == 1
    out = capsys.readouterr().out
    assert "not ready: tracepoints" in out  # a skipped check is not itself a failure
    assert "skipped" in out


def test_a_missing_feature_is_off_not_a_failure(tmp_path, monkeypatch, capsys):
    """An optional check (a kernel feature a part of the capture needs) that fails: shown as off, with what
    it turns off; the host is still ready."""
    loop = {"name": "bpf_loop", "ok": False, "skipped": False, "optional": True,
            "detail": "missing: HTTP/2 connections' requests are counted by exchange, not by stream",
            "remedy": "Linux 5.17 or later has it"}
    reporting(tmp_path, monkeypatch, [*PASSING, loop], 0)
    checks = by_name(doctor.all_checks())
    assert checks["bpf_loop"].optional and not checks["bpf_loop"].ok
    assert doctor.run(None) == 0
    out = capsys.readouterr().out
    assert "off" in out and "counted by exchange" in out and "ready: spinscope record can run" in out


def test_missing_collector(tmp_path, monkeypatch):
    monkeypatch.setenv(collector.COLLECTOR_ENV, str(tmp_path / "absent"))
    checks = doctor.all_checks()
    assert [c.name for c in checks] == ["collector"]
    assert not checks[0].ok and "SPINSCOPE_COLLECTOR" in checks[0].remedy


@pytest.mark.parametrize("script,detail", [
    ("echo 'spinscope-collector: unrecognized option --json' >&2; exit 2",
     "spinscope-collector: unrecognized option --json"),
    ("echo 'not json'; exit 1", "not json"),
    ("exit 3", "spinscope-collector --check exited 3"),
])
def test_collector_without_a_check_report(tmp_path, monkeypatch, script, detail):
    """An old or broken collector: its last line is the detail, and rebuilding is the remedy."""
    fake_collector(tmp_path, monkeypatch, script)
    check = by_name(doctor.all_checks())["host checks"]
    assert not check.ok and check.detail == detail and "make collector" in check.remedy
    assert doctor.run(None) == 1


def test_doctor_cli_exit_code(cli, tmp_path):
    env = {**os.environ, collector.COLLECTOR_ENV: str(tmp_path / "absent")}
    result = cli("doctor", env=env)
    assert result.returncode == 1
    assert "not ready:" in result.stdout and "collector" in result.stdout


def test_check_text_is_shown_as_written(tmp_path, monkeypatch, capsys):
    """The collector writes the checks' names, details and remedies: never read as rich markup."""
    odd = [{"name": "[/]", "ok": False, "skipped": False, "detail": "x[/bold]y \x1b[31m",
            "remedy": "[link=https://evil]ok[/]"}]
    reporting(tmp_path, monkeypatch, odd, 1)
    assert doctor.run(None) == 1
    out = capsys.readouterr().out
    assert "[/]" in out and "x[/bold]y \\x1b[31m" in out and "[link=https://evil]ok[/]" in out
    assert "\x1b" not in out and "not ready: [/]" in out
