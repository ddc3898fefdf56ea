"""The runtime a capture's target runs on: what the collector read (target.runtime, from the mapped
libraries, the executable's name and a Go binary's build info: docs/capture-format.md), or for a capture
without it what the capture itself shows (a JVM's thread names, the executable's name); "unknown" rather
than a guess. The advice of every verdict is worded for it (each pattern's home, analysis/patterns/).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from spinscope.analysis.capture import Capture

GO, JVM, CPYTHON, NODE, DOTNET, NATIVE, UNKNOWN = "go", "jvm", "cpython", "node", "dotnet", "native", "unknown"
RUNTIMES = (GO, JVM, CPYTHON, NODE, DOTNET, NATIVE)
NAMES = {GO: "Go", JVM: "JVM", CPYTHON: "CPython", NODE: "Node.js", DOTNET: ".NET", NATIVE: "native",
         UNKNOWN: "unknown"}
# Threads only a HotSpot JVM names so (comm holds 15 bytes: "C2 CompilerThre").
JVM_THREADS = ("C2 CompilerThre", "C1 CompilerThre", "GC Thread#", "VM Thread", "VM Periodic Tas", "G1 Main Marker",
               "Signal Dispatch", "Reference Handl")


@dataclass(frozen=True)
class Runtime:
    name: str            # one of RUNTIMES, or UNKNOWN
    version: str | None
    source: str          # "capture" (target.runtime), "thread names", "executable", or "" for unknown
    said: bool = False   # unknown: whether the capture has target.runtime (null: the collector could not read it)

    def describe(self) -> str:
        """`Go 1.22.3`, `JVM 17 (from its thread names)`, `unknown (the capture does not say)`."""
        if self.name == UNKNOWN and self.said:
            return "unknown (the collector could not read it: a cgroup, or a process gone before the capture was written)"
        if self.name == UNKNOWN:
            return "unknown (the capture does not say: recorded by an older collector)"
        version = f" {self.version}" if self.version else ""
        how = "" if self.source == "capture" else f" (from its {self.source})"
        return f"{NAMES[self.name]}{version}{how}"

    def to_dict(self) -> dict:
        return {"name": self.name, "version": self.version, "source": self.source}


def runtime_of(cap: Capture) -> Runtime:
    recorded = cap.target.get("runtime")
    if isinstance(recorded, dict) and recorded.get("name") in RUNTIMES:
        return Runtime(str(recorded["name"]), recorded.get("version") or None, "capture")
    comms = [str(thread.get("comm", "")) for thread in cap.threads.values()]
    if any(comm.startswith(JVM_THREADS) for comm in comms):
        return Runtime(JVM, None, "thread names")
    exe = cap.target_exe.rsplit("/", 1)[-1]
    if match := re.fullmatch(r"python(3(?:\.\d+)?)", exe):
        return Runtime(CPYTHON, match.group(1) if "." in match.group(1) else None, "executable")
    if exe in ("node", "nodejs"):
        return Runtime(NODE, None, "executable")
    if exe == "java":
        return Runtime(JVM, None, "executable")
    return Runtime(UNKNOWN, None, "", said="runtime" in cap.target)
