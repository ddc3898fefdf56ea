"""The runtime a capture's target runs on: what the collector read (target.runtime, from the mapped
libraries, the executable's name and a Go binary's build info: docs/capture-format.md, collector/runtime.c),
the one reading of it (the runtime stacks helper is chosen by it too); a capture without it (an older
collector, --cgroup) is "unknown" rather than a guess. The advice of every verdict is worded for it (each pattern's home, analysis/patterns/).
"""

from __future__ import annotations

from dataclasses import dataclass

from spinscope.analysis.capture import Capture

GO, JVM, CPYTHON, NODE, DOTNET, NATIVE, UNKNOWN = "go", "jvm", "cpython", "node", "dotnet", "native", "unknown"
RUNTIMES = (GO, JVM, CPYTHON, NODE, DOTNET, NATIVE)
# An interpreter's or a JIT's: their functions are no native frame, so the collector's stacks cannot tell the
# user's code from the runtime's (a runtime helper's samples name them: tracing/stacks_helper.py).
LANGUAGE_RUNTIMES = (JVM, CPYTHON, NODE, DOTNET)
NAMES = {GO: "Go", JVM: "JVM", CPYTHON: "CPython", NODE: "Node.js", DOTNET: ".NET", NATIVE: "native",
         UNKNOWN: "unknown"}


@dataclass(frozen=True)
class Runtime:
    name: str            # one of RUNTIMES, or UNKNOWN
    version: str | None
    source: str          # "capture" (target.runtime), or "" for unknown
    said: bool = False   # unknown: whether the capture has target.runtime (null: the collector could not read it)

    def describe(self) -> str:
        """`Go 1.22.3`, `JVM 17`, `unknown (the capture does not say: recorded by an older collector)`."""
        if self.name == UNKNOWN and self.said:
            return "unknown (the collector could not read it: a cgroup, or a process gone before the capture was written)"
        if self.name == UNKNOWN:
            return "unknown (the capture does not say: recorded by an older collector)"
        return f"{NAMES[self.name]} {self.version}" if self.version else NAMES[self.name]

    def to_dict(self) -> dict:
        return {"name": self.name, "version": self.version, "source": self.source}


def runtime_of(cap: Capture) -> Runtime:
    recorded = cap.target.get("runtime")
    if isinstance(recorded, dict) and recorded.get("name") in RUNTIMES:
        return Runtime(str(recorded["name"]), recorded.get("version") or None, "capture")
    return Runtime(UNKNOWN, None, "", said="runtime" in cap.target)
