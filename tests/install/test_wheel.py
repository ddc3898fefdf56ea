"""What `make dist` builds works on a machine with no checkout and no compiler (issue 13, packages).

The wheel is installed in a fresh virtualenv in a temporary directory (--system-site-packages, so pandas
and the rest come from this Python and nothing is downloaded; --no-deps --no-index), and its `spinscope`
is run from a directory outside the checkout with PATH and PYTHONPATH holding nothing of the checkout:
doctor, record on an exact-count fixture, report. The collector it runs must be the wheel's own. The
standalone collector, copied out of the checkout, runs its host checks and records the same fixture with
an empty environment. `make test` builds dist first, so `make dist` here is a no-op there.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paths import DIST, FIXTURES, ROOT

sys.path.insert(0, str(ROOT / "tests" / "collector"))
from collector_harness import LineReader, run_fixture  # noqa: E402

WRITE_KEYS = ["write_calls", "write_bytes", "write_eagain", "write_partial"]
READ_KEYS = ["read_calls", "read_bytes", "read_eagain", "read_eof"]


@pytest.fixture(scope="module")
def dist() -> tuple[Path, Path]:
    """The wheel and the standalone collector of `make dist` (and the fixtures)."""
    made = subprocess.run(["make", "-s", "-C", str(ROOT), "dist", "fixtures"], capture_output=True, text=True,
                          timeout=600)
    assert made.returncode == 0, made.stdout + made.stderr
    wheels = sorted(DIST.glob("spinscope-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0], DIST / "spinscope-collector"


@pytest.fixture(scope="module")
def installed(dist, tmp_path_factory):
    """The wheel installed in a fresh venv: (its bin directory, its bundled collector, a clean environment,
    a working directory outside the checkout)."""
    wheel, _ = dist
    home = tmp_path_factory.mktemp("fresh-host")
    venv = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
                   check=True, timeout=60)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "SPINSCOPE_COLLECTOR")}
    env["PATH"] = f"{venv / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    # The base Python's pip (visible through --system-site-packages) installs into the venv.
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index",
                          "--disable-pip-version-check", "-q", str(wheel)], capture_output=True, text=True,
                         env=env, cwd=home, timeout=120)
    assert pip.returncode == 0, pip.stderr
    package = subprocess.run([str(venv / "bin" / "python"), "-c", "import spinscope; print(spinscope.__file__)"],
                             capture_output=True, text=True, env=env, cwd=home, check=True).stdout.strip()
    package_dir = Path(package).parent
    assert package_dir.is_relative_to(venv) and not package_dir.is_relative_to(ROOT)
    bundled = package_dir / "_bin" / "spinscope-collector"
    assert os.access(bundled, os.X_OK), "the wheel lost the collector's executable bit"
    assert str(ROOT) not in env["PATH"] and not home.is_relative_to(ROOT)
    return venv / "bin", bundled, env, home


def squeeze(text: str) -> str:
    return "".join(text.split())


def doctor_details(table: str) -> dict[str, str]:
    """check name -> its detail cell in doctor's table (folded over lines: compared without whitespace)."""
    details: dict[str, str] = {}
    name = None
    for line in table.splitlines():
        cells = line.split("\u2502")  # the table's column rule
        if len(cells) < 5:
            continue
        name = cells[1].strip() or name
        details[name] = details.get(name, "") + squeeze(cells[3])
    return details


def test_wheel_is_tagged_for_this_platform(dist):
    wheel, _ = dist
    name, version, python, abi, plat = wheel.stem.split("-")
    assert (name, python, abi) == ("spinscope", "py3", "none")
    assert plat == f"linux_{os.uname().machine}"


def test_doctor_uses_the_wheels_collector(installed):
    bin_dir, bundled, env, home = installed
    result = subprocess.run([str(bin_dir / "spinscope"), "doctor"], capture_output=True, text=True, env=env,
                            cwd=home, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    details = doctor_details(result.stdout)
    assert details["collector"] == squeeze(f"{bundled} (bundled with the package)")
    assert "ready: spinscope record can run on this host" in result.stdout


def test_record_and_report_a_fixture_from_the_wheel(installed):
    bin_dir, bundled, env, home = installed
    capture = home / "sockio.json"
    fixture = subprocess.Popen([str(FIXTURES / "sockio")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, cwd=home)
    record = None
    try:
        out = LineReader(fixture.stdout)
        pid = int(out.wait_for(lambda line: line.startswith("ready")).split()[1])
        ready_r, ready_w = os.pipe()
        record = subprocess.Popen([str(bin_dir / "spinscope"), "record", "--pid", str(pid), "-o", str(capture),
                                   "--ready-fd", str(ready_w), "-q"], pass_fds=(ready_w,), env=env, cwd=home,
                                  stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        os.close(ready_w)
        with os.fdopen(ready_r) as ready:
            assert select.select([ready], [], [], 30)[0], "record was not ready in 30 s"
            line = ready.readline()
        assert json.loads(line)["pid"] == pid, (line, record.stderr.read() if not line else "")
        # The collector record started (its only child) is the wheel's, not the checkout's build.
        children = Path(f"/proc/{record.pid}/task/{record.pid}/children").read_text().split()
        assert [os.readlink(f"/proc/{child}/exe") for child in children] == [str(bundled)]
        fixture.stdin.write("go\n")
        fixture.stdin.flush()
        out.wait_for(lambda line: line == "done", timeout=60)
        assert fixture.wait(timeout=30) == 0
        assert record.wait(timeout=30) == 0, record.stderr.read()
    finally:
        for proc in (fixture, record):
            if proc and proc.poll() is None:
                proc.kill()
                proc.wait()
    truth = {row["thread"]: row for row in map(json.loads, (l for l in out.seen if l.startswith("{")))}

    report = subprocess.run([str(bin_dir / "spinscope"), "report", str(capture), "--json"], capture_output=True,
                            text=True, env=env, cwd=home, timeout=120)
    assert report.returncode == 0, report.stderr
    threads = {t["tid"]: t for t in json.loads(report.stdout)["metrics"]["threads"]}
    writer, reader = threads[truth["sockwriter"]["tid"]], threads[truth["sockreader"]["tid"]]
    assert {k: writer[k] for k in WRITE_KEYS} == {k: truth["sockwriter"][k] for k in WRITE_KEYS}
    assert writer["write_eagain"] == 26  # the fixture's design: 25 extra EAGAINs + the one ending the fill
    assert {k: reader[k] for k in READ_KEYS} == {k: truth["sockreader"][k] for k in READ_KEYS}
    assert (reader["read_calls"], reader["read_eagain"], reader["read_eof"]) == (9, 4, 1)

    text = subprocess.run([str(bin_dir / "spinscope"), "report", str(capture)], capture_output=True, text=True,
                          env=env, cwd=home, timeout=120)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"spinscope report sockio (pid {pid}): ")


def test_standalone_collector_needs_nothing_installed(dist, tmp_path):
    """Copied to a host where Python is not wanted: no shared library, no environment, no checkout."""
    _, standalone = dist
    binary = tmp_path / "spinscope-collector"
    shutil.copy2(standalone, binary)
    ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    assert "not a dynamic executable" in ldd.stdout + ldd.stderr
    check = subprocess.run([str(binary), "--check", "--json"], capture_output=True, text=True, env={},
                           cwd=tmp_path, timeout=60)
    assert check.returncode == 0, check.stderr
    report = json.loads(check.stdout)
    assert report["ok"] is True and all(c["ok"] for c in report["checks"])
    assert {"privileges", "kernel BTF", "probes load", "probes attach"} <= {c["name"] for c in report["checks"]}

    run = run_fixture("sockio", tmp_path=tmp_path, program=binary, env={})
    truth, got = run.truth["sockwriter"], run.thread("sockwriter")
    assert {k: got[k] for k in WRITE_KEYS} == {k: truth[k] for k in WRITE_KEYS}
    truth, got = run.truth["sockreader"], run.thread("sockreader")
    assert {k: got[k] for k in READ_KEYS} == {k: truth[k] for k in READ_KEYS}
    assert run.capture["tool"]["name"] == "spinscope-collector"
