"""`spinscope doctor` on a simulated host: what is missing is named, with a remedy, and sets the exit code."""

from __future__ import annotations

import os

import pytest

from spinscope import doctor, paths


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A fake tracefs with every tracepoint, a BTF file, root, and a collector whose --check passes."""
    tracefs = tmp_path / "tracing"
    for point in doctor.TRACEPOINTS:
        (tracefs / "events" / point).mkdir(parents=True)
    btf = tmp_path / "vmlinux"
    btf.write_text("")
    monkeypatch.setattr(doctor, "TRACEFS", tracefs)
    monkeypatch.setattr(doctor, "BTF", btf)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    collector(tmp_path, monkeypatch, "exit 0")
    return tmp_path


def collector(tmp_path, monkeypatch, script: str):
    path = tmp_path / "spinscope-collector"
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    monkeypatch.setenv(paths.COLLECTOR_ENV, str(path))
    return path


def by_name(checks):
    return {check.name: check for check in checks}


def test_ready_host(host, capsys):
    assert doctor.run(None) == 0
    out = capsys.readouterr().out
    assert "ready: spinscope record can run on this host" in out
    assert "probes load and attach" in out


def test_missing_tracefs_suggests_mount(host, monkeypatch):
    monkeypatch.setattr(doctor, "TRACEFS", host / "nothing")
    checks = by_name(doctor.all_checks())
    assert not checks["tracefs"].ok
    assert checks["tracefs"].remedy == f"sudo mount -t tracefs nodev {host / 'nothing'}"
    assert doctor.run(None) == 1


def test_missing_tracepoints_are_listed(host):
    (doctor.TRACEFS / "events" / "sched" / "sched_waking").rmdir()
    (doctor.TRACEFS / "events" / "raw_syscalls" / "sys_exit").rmdir()
    checks = by_name(doctor.all_checks())
    assert not checks["tracepoints"].ok
    assert checks["tracepoints"].detail == ("4 of 6 present; missing: raw_syscalls/sys_exit, "
                                            "sched/sched_waking")
    assert doctor.run(None) == 1


def test_unprivileged_without_capabilities(host, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(doctor, "effective_capabilities", lambda: 0)
    checks = by_name(doctor.all_checks())
    assert not checks["privileges"].ok and "setcap cap_bpf,cap_perfmon+ep" in checks["privileges"].remedy
    assert "probes load and attach" not in checks  # not attempted without privileges
    monkeypatch.setattr(doctor, "effective_capabilities", lambda: 1 << doctor.CAP_BPF | 1 << doctor.CAP_PERFMON)
    assert doctor.check_privileges().ok


def test_capabilities_are_read_from_capeff(tmp_path):
    status = tmp_path / "status"
    status.write_text("Name:\tpython3\nCapEff:\t000000c000000000\n")
    caps = doctor.effective_capabilities(status)
    assert doctor.has_capability(caps, doctor.CAP_BPF) and doctor.has_capability(caps, doctor.CAP_PERFMON)
    assert not doctor.has_capability(caps, doctor.CAP_SYS_ADMIN)


def test_missing_collector(host, monkeypatch):
    monkeypatch.setenv(paths.COLLECTOR_ENV, str(host / "absent"))
    checks = by_name(doctor.all_checks())
    assert not checks["collector"].ok and "SPINSCOPE_COLLECTOR" in checks["collector"].remedy
    assert "probes load and attach" not in checks


def test_failing_check_shows_the_collectors_line(host, monkeypatch):
    collector(host, monkeypatch, "echo 'spinscope-collector: failed to attach sched_switch: EPERM' >&2; exit 1")
    check = by_name(doctor.all_checks())["probes load and attach"]
    assert not check.ok and check.detail == "spinscope-collector: failed to attach sched_switch: EPERM"


def test_collector_without_check_option_is_skipped(host, monkeypatch):
    collector(host, monkeypatch, "echo 'spinscope-collector: unrecognized option --check' >&2; exit 2")
    check = by_name(doctor.all_checks())["probes load and attach"]
    assert check.ok and "skipped" in check.detail


# Not yet for a user who cannot read the tracefs mount point (0700 on Debian): `(TRACEFS / "events").is_dir()`
# raises PermissionError there and doctor ends in a traceback. Strict: passing there fails, to drop this mark.
@pytest.mark.xfail(os.geteuid() != 0 and not os.access(doctor.TRACEFS, os.X_OK), raises=AssertionError,
                   strict=True, reason="doctor crashes when it cannot read the tracefs mount point")
def test_doctor_cli_exit_code(cli, tmp_path):
    env = {**os.environ, paths.COLLECTOR_ENV: str(tmp_path / "absent")}
    result = cli("doctor", env=env)
    assert result.returncode == 1
    assert "not ready:" in result.stdout and "collector" in result.stdout
