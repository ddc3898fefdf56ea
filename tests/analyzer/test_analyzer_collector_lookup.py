"""Where the analyzer finds the collector (spinscope/tracing/collector.py's docstring): $SPINSCOPE_COLLECTOR alone
when set; else the checkout's build when the package runs from a checkout; else the one bundled in the
package (the wheel from `make dist`); else PATH. Laid out here with stand-in files in a temporary checkout
and a temporary site-packages; tests/install does it for real with the wheel."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spinscope.commands import doctor

from spinscope.tracing import collector
from spinscope.tracing.collector import Candidate


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def places(tmp_path, monkeypatch):
    """A checkout with a build and a bundled collector, an installed package with a bundled collector, and
    a collector on PATH: every candidate present, none of them the real one."""
    checkout = tmp_path / "checkout"
    (checkout / "analyzer" / "src" / "spinscope").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("[project]\nname = 'spinscope'\n")
    site = tmp_path / "venv" / "lib" / "python3" / "site-packages" / "spinscope"
    paths = {
        "build": executable(checkout / "build" / "spinscope-collector"),
        "checkout bundled": executable(checkout / "analyzer" / "src" / "spinscope" / "_bin" / "spinscope-collector"),
        "site bundled": executable(site / "_bin" / "spinscope-collector"),
        "PATH": executable(tmp_path / "bin" / "spinscope-collector"),
    }
    monkeypatch.delenv(collector.COLLECTOR_ENV, raising=False)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")

    def run_from(where: str) -> None:
        """Make the package believe its files are in the checkout or in site-packages."""
        package = checkout / "analyzer" / "src" / "spinscope" if where == "checkout" else site
        monkeypatch.setattr(collector, "PACKAGE_DIR", package)
        monkeypatch.setattr(collector, "repo_root", lambda: package.parents[2])

    return paths, run_from


def test_from_a_checkout_the_build_comes_first(places):
    paths, run_from = places
    run_from("checkout")
    assert collector.candidates() == [Candidate(paths["build"], "the checkout's build"),
                                      Candidate(paths["checkout bundled"], "bundled with the package"),
                                      Candidate(paths["PATH"], "PATH")]
    assert collector.find() == paths["build"]
    paths["build"].chmod(0o644)  # not executable: the next place
    assert collector.locate() == Candidate(paths["checkout bundled"], "bundled with the package")
    paths["checkout bundled"].unlink()
    assert collector.locate() == Candidate(paths["PATH"], "PATH")


def test_installed_package_uses_its_own_collector_and_never_a_checkout(places):
    paths, run_from = places
    run_from("site")
    assert collector.checkout_root() is None
    assert collector.candidates() == [Candidate(paths["site bundled"], "bundled with the package"),
                                      Candidate(paths["PATH"], "PATH")]
    assert collector.find() == paths["site bundled"]
    paths["site bundled"].unlink()
    assert collector.find() == paths["PATH"]


def test_the_environment_variable_alone_when_set(places, monkeypatch, tmp_path):
    paths, run_from = places
    run_from("site")
    monkeypatch.setenv(collector.COLLECTOR_ENV, str(tmp_path / "absent"))
    # No fallback to the bundled or PATH collector: a wrong value is an error.
    assert collector.candidates() == [Candidate(tmp_path / "absent", "$SPINSCOPE_COLLECTOR")]
    assert collector.find() is None
    assert collector.not_found_message() == (
        f"collector not found: {tmp_path / 'absent'} ($SPINSCOPE_COLLECTOR) is not an executable file "
        "(fix or unset $SPINSCOPE_COLLECTOR)")
    monkeypatch.setenv(collector.COLLECTOR_ENV, str(paths["PATH"]))
    assert collector.locate() == Candidate(paths["PATH"], "$SPINSCOPE_COLLECTOR")


def test_doctor_names_the_collector_and_where_it_came_from(places):
    paths, run_from = places
    run_from("site")
    assert doctor.check_collector().detail == f"{paths['site bundled']} (bundled with the package)"
    run_from("checkout")
    assert doctor.check_collector().detail == f"{paths['build']} (the checkout's build)"


def test_nothing_found_says_where_it_looked(places, cli, tmp_path):
    paths, run_from = places
    run_from("site")
    for path in paths.values():
        path.unlink()
    check = doctor.check_collector()
    assert not check.ok
    assert check.detail == f"not found (looked at {paths['site bundled']} (bundled with the package), and on PATH)"
    assert "make dist" in check.remedy


def test_record_without_a_collector_is_one_line(cli, tmp_path):
    env = {**os.environ, collector.COLLECTOR_ENV: str(tmp_path / "absent")}
    result = cli("record", "--pid", str(os.getpid()), "-o", tmp_path / "c.json", env=env)
    assert result.returncode == 1
    assert result.stderr == (f"spinscope record: error: collector not found: {tmp_path / 'absent'} "
                             "($SPINSCOPE_COLLECTOR) is not an executable file (fix or unset $SPINSCOPE_COLLECTOR)\n")
    assert not (tmp_path / "c.json").exists()


def test_the_package_and_the_checkout_are_found_from_where_this_module_sits():
    """PACKAGE_DIR is spinscope/ itself (where a wheel's _bin/ is), not the subpackage collector.py sits in,
    and repo_root() the checkout that holds analyzer/src/spinscope: the lab's binaries and the checkout's
    build are found from it."""
    import spinscope

    package = Path(spinscope.__file__).resolve().parent
    assert collector.PACKAGE_DIR == package
    assert collector.repo_root() == package.parents[2]
    if (package.parents[2] / "pyproject.toml").is_file():  # run from a checkout, as the tests are
        assert collector.checkout_root() == package.parents[2]


def test_a_collector_out_of_this_users_reach_is_said_so(places, monkeypatch):
    """A checkout in a private directory (/root, `mktemp -d`: mode 700) run by another user: stat() of its
    build is refused (PermissionError, which Path.is_file() raises, a traceback), and that is said, not
    taken for a missing file. (Root is never refused: the refusal is played here.)"""
    paths, run_from = places
    run_from("checkout")
    private = paths["build"].parent
    real_stat = Path.stat

    def refused(path, *args, **kwargs):
        if path.is_relative_to(private):
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(Path, "stat", refused)
    assert collector.why_not_runnable(paths["build"]) == collector.UNREACHABLE
    assert collector.find() == paths["checkout bundled"]  # the next candidate, without a traceback
    for path in paths.values():
        if path != paths["build"]:
            path.unlink()
    assert collector.find() is None
    unreachable = f"{paths['build']} (the checkout's build), {collector.UNREACHABLE}"
    assert collector.not_found_message().startswith(f"collector not found (looked at {unreachable}, ")
    assert doctor.check_collector().detail.startswith(f"not found (looked at {unreachable}, ")
    monkeypatch.setenv(collector.COLLECTOR_ENV, str(paths["build"]))
    assert collector.not_found_message() == (f"collector not found: {paths['build']} ($SPINSCOPE_COLLECTOR) is "
                                             f"{collector.UNREACHABLE} (fix or unset $SPINSCOPE_COLLECTOR)")
