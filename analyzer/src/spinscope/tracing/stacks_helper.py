"""The runtime stacks helper (stacks-helper/README.md, docs/stacks.md): the OpenTelemetry eBPF profiler,
embedded in one binary, run beside the collector by `record --stacks` when the target runs a runtime whose
frames only an interpreter unwinder names (CPython, a JVM, Node). The collector unwinds native code
itself (libdw); this helper adds the runtime's frames (`anyio.to_thread.run_sync`,
`java.util.concurrent.ThreadPoolExecutor.execute`), from which the hand-off's user-space cost is read.

Lookup, first executable wins: $SPINSCOPE_STACKS_HELPER alone when set; the checkout's
build/spinscope-stacks-helper (scripts/build-stacks-helper.sh); spinscope-stacks-helper on PATH.
Its samples are folded into the capture's stacks block as source `runtime`, its account as `stacks.helper`.
The helper samples on its own timer, so its samples carry no tags of their own: each gets the tags its
thread had at that moment from the collector's tag timeline (`--tag-timeline`, tracing/tag_timeline.py),
matched on the kernel's monotonic clock, which both stamp. A helper that is missing, fails or is not needed leaves the
collector's stacks as they are, and the capture says which (stacks.helper.error / .skipped).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import defaultdict, deque
from pathlib import Path

from spinscope.tracing import collector, tag_timeline

HELPER_ENV = "SPINSCOPE_STACKS_HELPER"
HELPER_NAME = "spinscope-stacks-helper"
READY_TIMEOUT_S = 30.0  # measured 1.6-2.6 s to load and attach here
STOP_TIMEOUT_S = 20.0
STDERR_LINES_KEPT = 20
RUNTIME_SOURCE = "runtime"
# The profiler's interpreter unwinder for each runtime it unwinds (its --runtime), by the collector's name
# of the runtime (runtime_of): loading one, not
# all ten, is what the helper needs for one target.
UNWINDERS = {"cpython": "python", "jvm": "hotspot", "node": "v8"}
# The standard library modules CPython 3.11+ freezes into its binary (Python/frozen.c's "stdlib - startup"
# and runpy): the profiler gives their frames a bare file name (`runpy.py`), which would pass for a script
# of the target's own run from its directory.
FROZEN_STDLIB = frozenset(("abc", "codecs", "io", "_collections_abc", "_sitebuiltins", "genericpath", "ntpath",
                           "posixpath", "os", "site", "stat", "runpy", "zipimport", "_bootstrap",
                           "_bootstrap_external", "__hello__", "__phello__"))

RUNTIME_TIMEOUT_S = 10.0


def runtime_of(pid: int) -> str | None:
    """`cpython`, `jvm` or `node` when the process runs that runtime, else None (native code, Go: the
    collector names those frames itself; a process gone, or no collector). The runtime is the collector's
    reading (`spinscope-collector --pid PID --runtime`: what the capture's target.runtime says), the one
    rule there is for it."""
    binary = collector.find()
    if binary is None:
        return None
    try:
        done = subprocess.run([str(binary), "--pid", str(pid), "--runtime"], capture_output=True, text=True,
                              timeout=RUNTIME_TIMEOUT_S)
        name = json.loads(done.stdout)["name"] if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError):
        return None
    return name if name in UNWINDERS else None


def not_live(pid: int | None) -> str | None:
    """Why a live view (`top --stacks`, `exporter --stacks`) names none of pid's runtime frames, or None when the
    collector names them all (native code, Go). The helper writes its samples once, when it stops: it cannot
    feed a view each second."""
    runtime = runtime_of(pid) if pid else None
    if runtime is None:
        return None
    return (f"{runtime} target: its runtime's frames are not named live (the runtime stacks helper writes its "
            "samples only when it stops; `spinscope record --stacks` runs it): call sites in native frames")


def find() -> Path | None:
    override = os.environ.get(HELPER_ENV)
    if override:
        return Path(override) if collector.why_not_runnable(Path(override)) is None else None
    checkout = collector.checkout_root()
    places = [checkout / "build" / HELPER_NAME] if checkout else []
    on_path = shutil.which(HELPER_NAME)
    places += [Path(on_path)] if on_path else []
    return next((p for p in places if collector.why_not_runnable(p) is None), None)


class Helper:
    """The helper sampling `pid` (and its children) at `hz` into `out`, started and stopped around the
    collector's recording.

    It runs in a session of its own, so a terminal's Ctrl-C or a signal to our process group does not reach
    it: stop() sends the one SIGTERM that ends its sampling and lets it drain the samples in flight (a second
    signal would cut that short). It dies with the thread that started it (--exit-with-parent: a SIGKILLed
    `record` leaves no profiler running), so start it from the thread that stops it. Its stderr is read to
    the end by a thread of ours (it would block at a pipe's 64 KiB), its last lines kept for the error."""

    def __init__(self, binary: Path, pid: int, hz: int, out: Path, children: bool, runtime: str | None = None):
        self.out = out
        self.argv = [str(binary), "--pid", str(pid), "--hz", str(hz), "--out", str(out), "--timestamps",
                     f"--children={'true' if children else 'false'}", "--runtime", UNWINDERS.get(runtime, "all"),
                     "--exit-with-parent"]
        self.proc: subprocess.Popen | None = None
        self.error: str | None = None
        self.said: deque = deque(maxlen=STDERR_LINES_KEPT)  # its last lines on stderr
        self._sampling = threading.Event()
        self._reader: threading.Thread | None = None
        # Where the collector writes its tag timeline for these samples: a directory of our own, so no
        # other user can put a link where the collector (root) writes.
        self.private = Path(tempfile.mkdtemp(prefix="spinscope-tags-"))
        self.timeline = self.private / "timeline"

    def cleanup(self) -> None:
        shutil.rmtree(self.private, ignore_errors=True)

    def start(self) -> bool:
        """Started and sampling (its `sampling` line seen), or False with self.error set."""
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
        except OSError as exc:
            self.error = f"cannot start {self.argv[0]}: {exc.strerror or exc}"
            return False
        self._reader = threading.Thread(target=self._read_stderr, name="stacks-helper-stderr", daemon=True)
        self._reader.start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline and not self._sampling.wait(0.2) and self.proc.poll() is None:
            pass
        if self._sampling.is_set():
            return True
        self.stop()
        self.error = self._last_words() if self.proc.returncode else "did not start sampling in time"
        return False

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self.said.append(line.strip())
            if ": sampling " in line:
                self._sampling.set()

    def stop(self) -> None:
        """Ended with one SIGTERM (its drain is 0.7 s) and waited for; self.error says what went wrong."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.error = self.error or "did not stop in time: killed, its samples lost"
        if self.proc.returncode and self._sampling.is_set():
            self.error = self.error or self._last_words()

    def _last_words(self) -> str:
        """Its last line on stderr (read to its end), or its exit status."""
        self._reader.join(timeout=1)
        return next((line for line in reversed(self.said) if line), f"exited with status {self.proc.returncode}")


def fold_into(capture_path: Path, helper_out: Path | None, account: dict, timeline: Path | None = None) -> None:
    """The helper's samples (JSON lines at helper_out) added to the capture's stacks block as source
    `runtime`, each with the tags its thread had then (from the collector's tag timeline, when there is
    one), and `account` (its header, or why it did not run, and how its samples were tagged) as
    stacks.helper; the file rewritten atomically. A capture without a stacks block is left alone."""
    doc = json.loads(capture_path.read_text())
    block = doc.get("stacks")
    if not isinstance(block, dict):
        return
    header, rows = _read(helper_out) if helper_out else ({}, [])
    rows, account = _tagged(rows, timeline, {**account})
    frames, index = block.setdefault("frames", []), {}
    for i, frame in enumerate(frames):
        index[_frame_key(frame)] = i
    for row in rows:
        chain = []
        for f in row.get("frames", []):
            frame = _frame(f)
            key = _frame_key(frame)
            if key not in index:
                index[key] = len(frames)
                frames.append(frame)
            chain.append(index[key])
        block.setdefault("stacks", []).append({"tid": int(row.get("tid", 0)), "source": RUNTIME_SOURCE,
                                               "tags": list(row.get("tags", ())),
                                               "count": int(row.get("count", 0)), "weight": int(row.get("count", 0)),
                                               "frames": chain})
    block["helper"] = {**header, **account}
    tmp = capture_path.with_name(capture_path.name + ".helper.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, capture_path)


def _tagged(rows: list, timeline: Path | None, account: dict) -> tuple:
    """The helper's rows split by the tags each sample's thread had at its time (rows with "kt", the
    samples' CLOCK_MONOTONIC times), and the account with how that went (`tags`): the timeline's changes,
    those lost, and samples left untagged. Without a timeline the rows stay as they are, untagged."""
    if timeline is None:
        return rows, account
    tl = tag_timeline.read(timeline)
    if tl.error:
        account["tags"] = {"error": tl.error}
        return rows, account
    out, untagged = [], 0
    for row in rows:
        times = row.get("kt") or []
        if len(times) != int(row.get("count", 0)):  # no times (an older helper): the row as it was
            untagged += int(row.get("count", 0))
            out.append(row)
            continue
        by_tags: dict = defaultdict(int)
        tid = int(row.get("tid", 0))
        for time_ns in times:
            by_tags[tag_timeline.tag_names(tl.tags_at(tid, int(time_ns)))] += 1
        for names, count in by_tags.items():
            out.append({**row, "count": count, "tags": names})
    account["tags"] = {"from": "the collector's tag timeline", "changes": tl.changes, "changes_lost": tl.lost,
                       "complete": tl.complete, "samples_untagged": untagged}
    return out, account


def _read(path: Path) -> tuple:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return {"error": f"no output: {exc.strerror or exc}"}, []
    rows = []
    header: dict = {}
    for i, line in enumerate(lines):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if i == 0 and "helper" in row:
            header = {key: row[key] for key in ("helper", "version", "hz", "samples", "lost", "samples_capped",
                                                "samples_outside_window", "pids_sampled") if key in row}
        elif isinstance(row, dict):
            rows.append(row)
    return header, rows


def _frame(f: dict) -> dict:
    """A helper frame in the capture's frame layout (docs/capture-format.md)."""
    kind = str(f.get("kind") or "native")
    name = f.get("name")
    module = f.get("module")
    return {"kind": kind, "module": str(module or ("[kernel]" if kind == "kernel" else f"[{kind}]")),
            "address": int(f.get("offset") or 0) if kind != "kernel" else 0, "symbol": str(name) if name else None,
            "symbol_offset": 0, "file": _source_file(kind, f.get("file")), "line": int(f.get("line") or 0)}


def _source_file(kind: str, path) -> str | None:
    """A frame's source file without the directories that say where things are installed: a file name, or for
    Python and JavaScript the part that tells the application from its libraries (`site-packages/anyio/to_thread.py`,
    `<stdlib>/queue.py`, `node_modules/express/lib/router.js`), which is what analysis/stacks.py reads."""
    if not path:
        return None
    path = str(path)
    if kind == "python" and "/" not in path and path.removesuffix(".py") in FROZEN_STDLIB:
        return f"<frozen {path.removesuffix('.py')}>"  # the profiler names a frozen module by its file name
    if kind == "node" and "node_modules/" in path:  # an installed package, not the application's script
        return "node_modules/" + path.rsplit("node_modules/", 1)[1]
    if kind == "python":
        for marker in ("site-packages/", "dist-packages/"):
            if marker in path:
                return "site-packages/" + path.split(marker, 1)[1]
        stdlib = re.search(r"/lib/python3\.\d+/(.*)", path)
        if stdlib:
            return "<stdlib>/" + stdlib.group(1)
    return Path(path).name


def _frame_key(frame: dict) -> tuple:
    return (frame.get("kind"), frame.get("module"), frame.get("address"), frame.get("symbol"),
            frame.get("symbol_offset"), frame.get("file"), frame.get("line"))
