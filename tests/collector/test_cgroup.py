"""A cgroup as the target (--cgroup): every process in the cgroup v2 or below it is traced, including those
started in it or moved into it after attach, with exact counts; one outside is not; the capture says what
was selected, and ends when the cgroup is removed (not when it empties). Bad --cgroup values are refused in
one line before anything is attached."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from spinscope.analysis.schema import layout_differences
from spinscope.tracing import collector

from collector_harness import COLLECTOR, FIXTURES, LineReader

WRITE_KEYS = ["write_calls", "write_bytes", "write_eagain", "write_partial"]
READ_KEYS = ["read_calls", "read_bytes", "read_eagain", "read_eof"]


def mounts(fstype: str) -> list[str]:
    """Mount points of this file system type (/proc/self/mountinfo)."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        if after.split(" ")[0] == fstype:
            points.append(before.split(" ")[4])
    return points


UNIFIED = next(iter(mounts("cgroup2")), None)
pytestmark = pytest.mark.skipif(UNIFIED is None, reason="no cgroup v2 hierarchy mounted")


def kill_all(cgroup: Path) -> None:
    """Kill every process in cgroup and below, and wait until it is empty."""
    for _ in range(100):
        pids = [int(pid) for procs in cgroup.rglob("cgroup.procs") for pid in procs.read_text().split()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def remove(cgroup: Path) -> None:
    """Remove cgroup and its descendants, deepest first, once their processes are gone."""
    if not cgroup.exists():
        return
    kill_all(cgroup)
    for directory in sorted((p for p in cgroup.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        directory.rmdir()
    cgroup.rmdir()


@pytest.fixture
def cgroup():
    """A fresh cgroup spinscope-test-PID under the cgroup2 mount, with a child cgroup `inner`; removed after."""
    path = Path(UNIFIED) / f"spinscope-test-{os.getpid()}"
    remove(path)
    path.mkdir()
    (path / "inner").mkdir()
    try:
        yield path
    finally:
        remove(path)


def start_fixture(name: str, cgroup: Path | None = None) -> tuple[subprocess.Popen, LineReader, int]:
    """Fixture NAME started in cgroup (it enters it before it execs), or where we are; once it is ready."""
    def enter() -> None:
        (cgroup / "cgroup.procs").write_text(str(os.getpid()))

    proc = subprocess.Popen([str(FIXTURES / name)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            preexec_fn=enter if cgroup else None)
    out = LineReader(proc.stdout)
    pid = int(out.wait_for(lambda line: line.startswith("ready")).split()[1])
    return proc, out, pid


def finish(proc: subprocess.Popen, out: LineReader) -> dict:
    """Say go, wait for the fixture to end, and return what it counted per thread name."""
    proc.stdin.write("go\n")
    proc.stdin.flush()
    out.wait_for(lambda line: line == "done", timeout=30)
    assert proc.wait(timeout=30) == 0
    return {row["thread"]: row for row in map(json.loads, (l for l in out.seen if l.startswith("{")))}


def test_processes_that_enter_a_cgroup_after_attach_are_traced_and_others_not(cgroup, tmp_path):
    output = tmp_path / "cgroup.json"
    cgroup_id = os.stat(cgroup).st_ino
    started = collector.start([COLLECTOR, "--cgroup", cgroup, "-o", output, "--time-sample", "1"],
                              stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = LineReader(started.proc.stderr)
    procs: dict = {}
    try:
        ready = started.wait_ready(timeout=30)
        assert ready["pid"] == 0
        # Started in the cgroup, in its child cgroup, moved into it once running, and never in it.
        for which, where in (("in", cgroup), ("nested", cgroup / "inner"), ("moved", None), ("outside", None)):
            procs[which] = start_fixture("sockio", where)
        (cgroup / "cgroup.procs").write_text(str(procs["moved"][2]))
        truth = {which: finish(proc, out) for which, (proc, out, _) in procs.items()}
        pid = {which: p for which, (_, _, p) in procs.items()}

        # Empty now: not an end, more processes may come. Removing the child cgroup is not one either.
        time.sleep(0.5)
        assert started.proc.poll() is None
        (cgroup / "inner").rmdir()
        time.sleep(0.3)
        assert started.proc.poll() is None
        cgroup.rmdir()  # the end
        assert started.proc.wait(timeout=10) == 0, err.drain()
    finally:
        if started.proc.poll() is None:
            started.proc.kill()
            started.proc.wait()
        for proc, _, _ in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    cap = json.loads(output.read_text())
    assert cap["end_reason"] == "target-exited"
    assert any("was removed" in line for line in err.drain())
    target = cap["target"]
    assert target["cgroup"] == {"path": f"/{cgroup.relative_to(UNIFIED)}", "id": cgroup_id}
    assert (target["pid"], target["comm"], target["exe"], target["argc"]) == (0, cgroup.name, None, 0)

    threads = {(t["pid"], t["comm"]): t for t in cap["threads"]}
    for which in ("in", "nested", "moved"):
        writer, reader = threads[(pid[which], "sockwriter")], threads[(pid[which], "sockreader")]
        assert {k: writer[k] for k in WRITE_KEYS} == {k: truth[which]["sockwriter"][k] for k in WRITE_KEYS}, which
        assert {k: reader[k] for k in READ_KEYS} == {k: truth[which]["sockreader"][k] for k in READ_KEYS}, which
        assert pid[which] in target["pids"]
    assert pid["outside"] not in {t["pid"] for t in cap["threads"]} | set(target["pids"])
    assert started.proc.pid not in {t["pid"] for t in cap["threads"]}  # the collector itself never is
    # The two started in the cgroup were traced from their exec on.
    assert {pid["in"], pid["nested"]} <= {e["pid"] for e in target["execs"]}
    assert set(target["pids"]) == {t["pid"] for t in cap["threads"]}
    assert layout_differences(cap) == []


def test_the_threads_in_the_cgroup_at_attach_are_seeded(cgroup, tmp_path):
    """An idle process already in the cgroup appears in the capture with its threads."""
    sleeper = subprocess.Popen(["sleep", "30"], preexec_fn=lambda: (cgroup / "inner" / "cgroup.procs")
                               .write_text(str(os.getpid())))
    try:
        output = tmp_path / "seeded.json"
        result = subprocess.run([str(COLLECTOR), "--cgroup", str(cgroup), "-o", str(output), "--duration", "0.3",
                                 "-q"], capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr
    finally:
        sleeper.kill()
        sleeper.wait()
    cap = json.loads(output.read_text())
    assert cap["end_reason"] == "duration"
    [thread] = [t for t in cap["threads"] if t["pid"] == sleeper.pid]
    assert thread["comm"] == "sleep" and thread["first_seen_s"] == 0
    assert cap["target"]["pids"] == [sleeper.pid]


def bad_cgroups(cgroup_file: str) -> list:
    cases = [("/nonexistent-spinscope-cgroup", "no such cgroup"), ("", "must name a cgroup v2 directory"),
             (cgroup_file, "is a file, not a cgroup directory"), ("/etc", "is not in a cgroup v2 hierarchy")]
    v1 = mounts("cgroup")
    if v1:
        cases.append((v1[0], "is in a cgroup v1 hierarchy"))
    return cases


@pytest.mark.parametrize("value, message", bad_cgroups(f"{UNIFIED}/cgroup.procs"))
def test_bad_cgroups_are_refused_in_one_line(value, message, tmp_path):
    result = subprocess.run([str(COLLECTOR), "--cgroup", value, "-o", str(tmp_path / "x.json")],
                            capture_output=True, text=True, timeout=20)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2
    assert len(lines) == 1 and ": error: --cgroup" in lines[0] and message in lines[0], lines
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("extra", [["--pid", "1"], ["--children"]])
def test_cgroup_goes_alone(extra, tmp_path):
    result = subprocess.run([str(COLLECTOR), "--cgroup", UNIFIED, *extra, "-o", str(tmp_path / "x.json")],
                            capture_output=True, text=True, timeout=20)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"spinscope-collector: error: --cgroup goes without {extra[0]}: it traces every process in the cgroup, "
        "children included"]


def test_check_takes_no_cgroup():
    result = subprocess.run([str(COLLECTOR), "--check", "--cgroup", UNIFIED], capture_output=True, text=True,
                            timeout=20)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["spinscope-collector: error: --check checks this host and takes "
                                                  "no --cgroup"]
