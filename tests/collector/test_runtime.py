"""target.runtime (collector/runtime.c): the collector names the runtime the target runs on from what the
kernel shows: a Go binary's build info (with the version `go version` reads from the same file), a JVM's
libjvm.so (the major version of its JDK), CPython by its library or its executable's name (the version
the interpreter reports), and a C program as native. Each process is started here, recorded for a moment,
and stopped by its PID; `--runtime` says the same without recording, and the runtime stacks helper is chosen
by it (tracing/stacks_helper.py: one reading of the runtime, the collector's). The parsing on hand-made /proc
layouts is tests/c/runtime_test.c."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from spinscope.tracing import stacks_helper

from collector_harness import COLLECTOR, FIXTURES, start_collector

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "realservers"))
from realserver_harness import DEBIAN_PYTHON, binary, ensure_gobytes, free_port, go_toolchain  # noqa: E402

SLEEP_JAVA = 'public class Sleep { public static void main(String[] a) throws Exception { ' \
             'System.out.println("ready"); Thread.sleep(60000); } }'


def runtime_of(proc: subprocess.Popen, tmp_path: Path) -> dict:
    """target.runtime of a capture of PROC (1 s), then PROC stopped; what `--runtime` said of PROC before is
    the same, and the stacks helper is run for it exactly when it unwinds that runtime."""
    output = tmp_path / "capture.json"
    try:
        said = subprocess.run([str(COLLECTOR), "--pid", str(proc.pid), "--runtime"], capture_output=True, text=True,
                              timeout=30)
        helper = stacks_helper.runtime_of(proc.pid)
        collector, err = start_collector(proc.pid, output, "--duration", "1")
        assert collector.wait(timeout=30) == 0, err.drain()
    finally:
        proc.kill()
        proc.wait()
    runtime = json.loads(output.read_text())["target"]["runtime"]
    assert said.returncode == 0 and json.loads(said.stdout) == runtime, said
    assert helper == (runtime["name"] if runtime["name"] in stacks_helper.UNWINDERS else None)
    return runtime


def started(argv: list, ready: str | None = None, **kw) -> subprocess.Popen:
    """ARGV running; with READY, once it printed a line starting with it."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, **kw)
    if ready:
        line = proc.stdout.readline()
        assert line.startswith(ready), line
    return proc


def test_a_go_binary_is_go_with_its_build_version(tmp_path):
    if not go_toolchain():
        pytest.skip("no Go toolchain (scripts/setup.sh does not install one; /usr/local/go/bin/go)")
    program = ensure_gobytes()
    # What Go itself reads from the binary: "PATH: go1.22.3"
    want = subprocess.run([go_toolchain(), "version", str(program)], capture_output=True, text=True,
                          check=True).stdout.split(": go")[1].strip()
    proc = started([str(program), str(free_port())])
    assert runtime_of(proc, tmp_path) == {"name": "go", "version": want, "from": str(program)}


@pytest.mark.parametrize("python", sorted({DEBIAN_PYTHON, str(Path(sys.executable).resolve())}))
def test_python_is_cpython_with_its_version(python, tmp_path):
    if not Path(python).exists():
        pytest.skip(f"{python} not installed")
    proc = started([python, "-c", "import sys, time; print('ready %d.%d' % sys.version_info[:2], flush=True); "
                                  "time.sleep(60)"])
    version = proc.stdout.readline().split()[1]
    runtime = runtime_of(proc, tmp_path)
    assert (runtime["name"], runtime["version"]) == ("cpython", version), runtime
    # by its library when it maps one (libpython3.X.so), else by the executable's name (python3.X)
    assert re.search(rf"(libpython{version}\.so|python{version})[^/]*$", runtime["from"]), runtime


def test_java_is_a_jvm_with_its_major_version(tmp_path):
    java = binary("java")
    if not java:
        pytest.skip("no java")
    settings = subprocess.run([java, "-XshowSettings:properties", "-version"], capture_output=True, text=True).stderr
    want = re.search(r"java\.specification\.version = (\d+)", settings).group(1)
    source = tmp_path / "Sleep.java"
    source.write_text(SLEEP_JAVA)
    proc = started([java, str(source)], ready="ready")  # a single source file, compiled in memory
    runtime = runtime_of(proc, tmp_path)
    assert (runtime["name"], runtime["version"]) == ("jvm", want), runtime
    assert runtime["from"].endswith("/libjvm.so"), runtime


def test_a_c_program_is_native(tmp_path):
    program = FIXTURES / "timers"
    proc = started([str(program)], ready="ready")
    assert runtime_of(proc, tmp_path) == {"name": "native", "version": None, "from": str(program)}


def test_a_command_is_known_by_what_it_execs(tmp_path):
    """With -- COMMAND the process is the collector's own until its exec, after the probes are live: the
    runtime is read when the capture is written, not at attach (it would be the collector's, native)."""
    output = tmp_path / "command.json"
    # --duration ends the command with SIGTERM, and its status (143) is the collector's
    subprocess.run([str(COLLECTOR), "--duration", "1", "-o", str(output), "--", DEBIAN_PYTHON, "-c",
                    "import time; time.sleep(3)"], capture_output=True, timeout=30)
    runtime = json.loads(output.read_text())["target"]["runtime"]
    assert runtime["name"] == "cpython", runtime
