"""`record --stacks` with the runtime stacks helper on a Python and a Java target that spend their time in
functions of their own: the exports hold the helper's samples (never the collector's of the same time as
well), open in `go tool pprof` with those functions on top, and have none of the interpreter's frames
between language frames; and a SIGKILLed `record` leaves no helper running (--exit-with-parent)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from machine_lock import load_lock
from paths import ROOT
from spinscope.tracing import stacks_helper

PYTHON_TARGET = textwrap.dedent("""\
    import os, sys, threading, time

    def inner_work(n):
        total = 0
        for i in range(n):
            total += i * i
        return total

    def spinning_in_python():
        while True:
            inner_work(20000)
            time.sleep(0.001)

    threading.Thread(target=spinning_in_python, daemon=True).start()
    print(os.getpid(), flush=True)
    time.sleep(float(sys.argv[1]))
""")

JAVA_TARGET = textwrap.dedent("""\
    public class Spin {
        static long spinningInJava(long n) {
            long total = 0;
            for (long i = 0; i < n; i++) total += Long.toString(i).hashCode();
            return total;
        }
        public static void main(String[] args) throws Exception {
            Thread t = new Thread(() -> { long x = 0; while (true) x += spinningInJava(20000); }, "spinner");
            t.setDaemon(true);
            t.start();
            System.out.println(ProcessHandle.current().pid());
            Thread.sleep((long) (Double.parseDouble(args[0]) * 1000));
        }
    }
""")
LIFETIME_S, WARM_S = "300", 1.5
# Seconds recorded (the helper has the target's mappings and unwind tables before it says it samples: the JIT's
# code is named from the JVM's perf map as it appears, so the JVM records longer).
DURATION_S = {"python": "4", "java": "10"}


def go() -> str:
    """The Go toolchain scripts/go-toolchain.sh finds (`make setup` installs one): go tool pprof reads the profile."""
    found = subprocess.run(["bash", str(ROOT / "scripts" / "go-toolchain.sh")], capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    return found.stdout.strip()


@pytest.fixture(scope="module", autouse=True)
def helper_built():
    assert stacks_helper.find(), f"{stacks_helper.HELPER_NAME} not built (scripts/build-stacks-helper.sh)"


def start_target(kind: str, tmp: Path) -> subprocess.Popen:
    if kind == "python":
        (tmp / "spinning.py").write_text(PYTHON_TARGET)
        argv = [sys.executable, str(tmp / "spinning.py"), LIFETIME_S]
    else:
        (tmp / "Spin.java").write_text(JAVA_TARGET)
        subprocess.run(["javac", "-d", str(tmp), str(tmp / "Spin.java")], check=True, timeout=120)
        argv = ["java", "-Xshare:auto", "-cp", str(tmp), "Spin", LIFETIME_S]
    target = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    int(target.stdout.readline())  # running
    time.sleep(WARM_S)  # its thread spinning, the JVM's classes loaded
    return target


def spinscope(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spinscope", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module", params=["python", "java"])
def recorded(request, tmp_path_factory):
    """(kind, the capture, its folded samples, its pprof profile, what report said) of a recorded target."""
    tmp = tmp_path_factory.mktemp(request.param)
    capture = tmp / "capture.json"
    with load_lock():
        target = start_target(request.param, tmp)
        try:
            run = spinscope("record", "--pid", str(target.pid), "--stacks", "99", "--duration", DURATION_S[request.param],
                            "--quiet", "-o", str(capture))
            assert run.returncode == 0, run.stderr
        finally:
            target.kill()
            target.wait()
    folded, pprof = tmp / "samples.folded", tmp / "profile.pb.gz"
    report = spinscope("report", str(capture), "--folded", str(folded), "--pprof", str(pprof))
    assert report.returncode == 0, report.stderr
    return request.param, json.loads(capture.read_text()), folded.read_text(), pprof, report.stdout


# The target's own function as every export shows it (a Java method as `Class.method`, without its return type
# and parameters: stacks.Frame.name; the capture keeps the helper's whole signature)
OWN = {"python": "inner_work (spinning.py:", "java": "Spin.spinningInJava (Spin.java:"}


def test_the_folded_samples_are_the_helpers_in_the_languages_terms(recorded):
    kind, capture, folded, _, said = recorded
    helper = capture["stacks"]["helper"]
    assert "error" not in helper and helper["samples"] > 0
    runtime = sum(s["count"] for s in capture["stacks"]["stacks"] if s["source"] == "runtime")
    lines = folded.splitlines()
    assert sum(int(line.rsplit(" ", 1)[1]) for line in lines) == runtime == helper["samples"]
    assert f"{runtime:,} CPU samples (the runtime helper's)" in said
    assert any(f";{OWN[kind]}" in line for line in lines), folded
    for internal in ("_PyEval_EvalFrameDefault", "python3.11+", "StubRoutines", "call_stub", "JavaCalls"):
        assert internal not in folded


def test_go_tool_pprof_shows_the_languages_functions_with_samples(recorded):
    kind, capture, _, pprof, _ = recorded
    top = subprocess.run([go(), "tool", "pprof", "-top", str(pprof)], capture_output=True, text=True, timeout=120)
    assert top.returncode == 0, top.stderr
    assert "Type: cpu" in top.stdout
    function = {"python": " inner_work", "java": " Spin.spinningInJava"}[kind]
    row = next(line for line in top.stdout.splitlines() if line.rstrip().endswith(function))
    assert float(row.split()[3].removesuffix("ms").removesuffix("s")) > 0  # its cumulative CPU time


def helpers_of(pid: int) -> list:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        comm, rest = stat.split("(", 1)[1].rsplit(")", 1)
        if int(rest.split()[1]) == pid and stacks_helper.HELPER_NAME.startswith(comm):
            found.append(int(entry.name))
    return found


def test_a_sigkilled_record_leaves_no_helper_running(tmp_path):
    target = start_target("python", tmp_path)
    record = subprocess.Popen([sys.executable, "-m", "spinscope", "record", "--pid", str(target.pid), "--stacks",
                               "99", "--duration", "60", "-o", str(tmp_path / "capture.json")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for line in record.stderr:  # the helper is sampling
            if "sampling its runtime's frames" in line:
                break
        helpers = helpers_of(record.pid)
        assert len(helpers) == 1
        record.send_signal(signal.SIGKILL)
        record.wait()
        deadline = time.monotonic() + 5
        while Path(f"/proc/{helpers[0]}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not Path(f"/proc/{helpers[0]}").exists()
    finally:
        if record.poll() is None:
            record.kill()
        target.kill()
        target.wait()


def test_the_targets_are_loaded_before_sampling_begins(tmp_path):
    """The helper loads its targets' mappings and unwind tables before it says it samples, not when its BPF
    first meets them on a CPU: that is reported to user space through a latch that a PID event in the
    profiler's start-up gap left set, so in 1 capture of 10 under load no target was loaded during a whole
    3.5 s window (0 samples; stacks-helper/patches). A target asleep all along is never on a CPU: it is
    loaded only if it is loaded first, and its load is logged before the `sampling` line."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        run = subprocess.run([str(stacks_helper.find()), "--pid", str(sleeper.pid), "--duration", "0.5", "--out",
                              str(tmp_path / "out.json"), "--runtime", "python", "--debug"],
                             capture_output=True, text=True, timeout=120)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stderr.splitlines()
    sampling = next(i for i, line in enumerate(lines) if "spinscope-stacks-helper: sampling pid" in line)
    loaded = [i for i, line in enumerate(lines) if line.endswith(f"+ PID: {sleeper.pid}")]
    assert loaded and loaded[0] < sampling, "\n".join(lines[-40:])
