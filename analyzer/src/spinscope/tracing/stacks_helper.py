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

Live (`top --stacks`, `exporter --stacks`: LiveStacks), the helper writes a batch of each second's samples
while it runs, tagged from the collector's tag timeline followed through a FIFO (tag_timeline.Follower) by
the same code as a recording's (tagged), and joined to a view's window as `record` folds them (add_rows).
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import stat
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
TAGS_PREFIX = "spinscope-tags-"
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
NOT_FOUND = f"{HELPER_NAME} not found (scripts/build-stacks-helper.sh builds it)"  # record's and the live views' words


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


def find() -> Path | None:
    override = os.environ.get(HELPER_ENV)
    if override:
        return Path(override) if collector.why_not_runnable(Path(override)) is None else None
    checkout = collector.checkout_root()
    places = [checkout / "build" / HELPER_NAME] if checkout else []
    on_path = shutil.which(HELPER_NAME)
    places += [Path(on_path)] if on_path else []
    return next((p for p in places if collector.why_not_runnable(p) is None), None)


def tags_prefix(pid: int | None = None) -> str:
    """The name a process's tag timeline directory starts with: its PID namespace and its PID in it (a /tmp
    shared with a container holds the directories of processes whose PIDs this one cannot see)."""
    return f"{TAGS_PREFIX}{_pid_namespace()}-{os.getpid() if pid is None else pid}-"


def _pid_namespace() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def reap_tag_directories(root: Path | None = None) -> list:
    """Remove the tag timeline directories (Helper.private) that a spinscope process left behind when it was
    killed before it could (SIGKILL, or a signal during its start): each is named after its process
    (tags_prefix), and is removed when that process, of this PID namespace, is gone, and the directory is this
    user's, a directory, not a link. Returns what was removed."""
    root = Path(root or tempfile.gettempdir())
    removed = []
    namespace = _pid_namespace()
    for path in root.glob(f"{TAGS_PREFIX}{namespace}-*-*"):
        pid = path.name[len(f"{TAGS_PREFIX}{namespace}-"):].split("-", 1)[0]
        try:
            info = path.lstat()
        except OSError:
            continue
        if not namespace or not pid.isdigit() or not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() \
                or _alive(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process (EPERM): alive
        return True
    return True


class Helper:
    """The helper sampling `pid` (and its children) at `hz` into `out`, started and stopped around the
    collector's recording.

    It runs in a session of its own, so a terminal's Ctrl-C or a signal to our process group does not reach
    it: stop() sends the one SIGTERM that ends its sampling and lets it drain the samples in flight (a second
    signal would cut that short). It dies with the thread that started it (--exit-with-parent: a SIGKILLed
    `record` leaves no profiler running), so start it from the thread that stops it. Its stderr is read to
    the end by a thread of ours (it would block at a pipe's 64 KiB), its last lines kept for the error."""

    def __init__(self, binary: Path, pid: int, hz: int, out: Path | None, children: bool, runtime: str | None = None,
                 every: float = 0):
        """out: the file it writes when it stops; or, with `every` (live), None: a batch of each interval of that
        many seconds arrives on `batches` while it samples, as (header, rows) (stacks-helper/README.md)."""
        self.out = out
        self.argv = [str(binary), "--pid", str(pid), "--hz", str(hz), "--out", str(out) if out else "-",
                     "--timestamps", f"--children={'true' if children else 'false'}", "--runtime",
                     UNWINDERS.get(runtime, "all"), "--exit-with-parent", *(["--every", f"{every:g}"] if every else [])]
        self.batches: queue.Queue = queue.Queue()
        self.proc: subprocess.Popen | None = None
        self.error: str | None = None
        self.said: deque = deque(maxlen=STDERR_LINES_KEPT)  # its last lines on stderr
        self._sampling = threading.Event()
        self._reader: threading.Thread | None = None
        # Where the collector writes its tag timeline for these samples: a directory of our own, so no
        # other user can put a link where the collector (root) writes; named after this process, so that the
        # next one removes it if this one is killed before it can (SIGKILL): reap_tag_directories.
        reap_tag_directories()
        self.private = Path(tempfile.mkdtemp(prefix=tags_prefix()))
        self.timeline = self.private / "timeline"

    def cleanup(self) -> None:
        shutil.rmtree(self.private, ignore_errors=True)

    def start(self) -> bool:
        """Started and sampling (its `sampling` line seen), or False with self.error set."""
        return self.launch() and self.wait_sampling()

    def launch(self) -> bool:
        """Started (it loads for 1.6-2.6 s: wait_sampling() waits for that), or False with self.error set."""
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL if self.out else subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
        except OSError as exc:
            self.error = f"cannot start {self.argv[0]}: {exc.strerror or exc}"
            return False
        self._reader = threading.Thread(target=self._read_stderr, name="stacks-helper-stderr", daemon=True)
        self._reader.start()
        if not self.out:
            threading.Thread(target=self._read_batches, name="stacks-helper-batches", daemon=True).start()
        return True

    def wait_sampling(self) -> bool:
        """Sampling (its `sampling` line seen), or False with self.error set (and it stopped)."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline and not self._sampling.wait(0.2) and self.proc.poll() is None:
            pass
        if self._sampling.is_set():
            return True
        self.stop()
        self.error = self._last_words() if self.proc.returncode else "did not start sampling in time"
        return False

    def _read_batches(self) -> None:
        """Live: its batches, each a header that says how many stack lines follow, put on `batches`."""
        lines = iter(self.proc.stdout)
        for line in lines:
            header = _header(line)
            if header is None or not isinstance(header.get("stacks", 0), int):
                continue
            rows = []
            for _ in range(max(0, header.get("stacks", 0))):
                try:
                    row = json.loads(next(lines))
                except (StopIteration, ValueError):
                    return
                if isinstance(row, dict):
                    rows.append(row)
            self.batches.put((header, rows))

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
    rows, account = tagged(rows, tag_timeline.read(timeline) if timeline else None, {**account})
    add_rows(block, rows)
    block["helper"] = {**header, **account}
    tmp = capture_path.with_name(capture_path.name + ".helper.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, capture_path)


def add_rows(block: dict, rows: list) -> None:
    """The helper's rows (tagged) appended to a capture's stacks block as source `runtime`, their frames
    added to its frame table (each frame once)."""
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


def tagged(rows: list, tl: tag_timeline.Timeline | None, account: dict) -> tuple:
    """The helper's rows split by the tags each sample's thread had at its time (rows with "kt", the
    samples' CLOCK_MONOTONIC times) in the collector's tag timeline, and the account with how that went
    (`tags`): the timeline's changes, those lost, and samples left untagged. Without a timeline the rows
    stay as they are, untagged."""
    if tl is None:
        return rows, account
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
            out.append({**{k: v for k, v in row.items() if k not in ("ts", "kt")}, "count": count, "tags": names})
    account["tags"] = {"from": "the collector's tag timeline", "changes": tl.changes, "changes_lost": tl.lost,
                       "complete": tl.complete, "samples_untagged": untagged}
    return out, account


HEADER_KEYS = ("helper", "version", "hz", "samples", "lost", "samples_capped", "samples_outside_window",
               "pids_sampled")
BATCH_KEYS = ("stacks", "interval", "kt_started_ns", "kt_ended_ns", "final")  # a live batch's header has these too


def _header(line: str) -> dict | None:
    """A header line's keys that spinscope keeps, or None when the line is not a header."""
    try:
        row = json.loads(line)
    except ValueError:
        return None
    if not isinstance(row, dict) or "helper" not in row:
        return None
    return {key: row[key] for key in (*HEADER_KEYS, *BATCH_KEYS) if key in row}


def _read(path: Path) -> tuple:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return {"error": f"no output: {exc.strerror or exc}"}, []
    rows = []
    header: dict = {}
    for i, line in enumerate(lines):
        if i == 0 and (first := _header(line)) is not None:
            header = {key: first[key] for key in HEADER_KEYS if key in first}
            continue
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
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


# ---------------------------------------------------------------------------------------------------------
# Live: the helper beside `top --stacks` and `exporter --stacks`

LIVE_EVERY_S = 1.0  # the helper's batches: a second each, as the collector's stream lines
LIVE_SLACK_S = 5.0  # batches kept beyond a view's window: they come a second or two after their samples
TAGS_IDLE_S = 600.0  # a followed tag timeline forgets a thread this long without a change (Timeline.forget)
# LiveStacks.state: what the exporter's spinscope_stacks_helper_up says in its `reason` label
RUNNING, MISSING, FAILED, EXITED, DUTY = "", "not-found", "failed", "exited", "duty-cycled"


class LiveStacks:
    """The runtime stacks helper beside a live view's collector, for a CPython, JVM or Node target: it writes a
    batch of each second's samples while it runs (`--every 1`), which take() tags with the tags their threads
    had then, from the collector's tag timeline followed through a FIFO (`collector_args()`), as fold_into
    tags a recording's; between() hands a view the samples of its window. It keeps the batches of the view's
    window (and LIVE_SLACK_S): bounded for as long as the view runs. `state` (RUNNING or why not) and `note()` say whether the
    view's call sites name the runtime's frames.

    Order: start() (the helper loads while the collector attaches), the collector started with
    collector_args() and ready, wait(); at the end close() once the collector has exited (the FIFO is read to
    its end)."""

    def __init__(self, runtime: str, window_s: float):
        self.runtime = runtime
        self.keep_ns = int((window_s + LIVE_SLACK_S) * 1e9)
        self.helper: Helper | None = None
        self.follower: tag_timeline.Follower | None = None
        self.state = RUNNING
        self.error: str | None = None
        self.batches: deque = deque()  # (header, tagged rows, tags account), oldest first

    @classmethod
    def start(cls, pid: int, hz: int, children: bool, window_s: float, duty: bool = False) -> LiveStacks | None:
        """The helper started on pid when it runs a runtime the helper unwinds (None when it does not: the
        collector names its frames), or a LiveStacks that says why it was not (state, note())."""
        runtime = runtime_of(pid)
        if runtime is None:
            return None
        live = cls(runtime, window_s)
        binary = find()
        if duty:  # a helper per cycle would load (1.6-2.6 s of CPU) every cycle
            live.state = DUTY
        elif binary is None:
            live.state = MISSING
        else:
            helper = Helper(binary, pid, hz, None, children, runtime, every=LIVE_EVERY_S)
            try:  # the FIFO first: no helper is left running without it
                live.follower = tag_timeline.Follower(helper.timeline)
            except OSError as exc:
                live.state, live.error = FAILED, f"cannot make the tag timeline's FIFO: {exc.strerror or exc}"
                helper.cleanup()
                return live
            if helper.launch():
                live.helper = helper
            else:
                live.state, live.error = FAILED, helper.error
                live.follower.close()
                live.follower = None
                helper.cleanup()
        return live

    def collector_args(self) -> list:
        """The collector's option that writes the tag timeline this helper's samples are tagged from."""
        return ["--tag-timeline", str(self.follower.path)] if self.follower else []

    def wait(self) -> bool:
        """The helper sampling, or False with state and error saying why not. Called once the collector is
        ready (it has opened the FIFO): the FIFO's name and its directory are removed then, the pipe kept by
        the descriptors open on it, so that a view killed outright leaves nothing in the temporary directory."""
        if self.helper is None:
            return False
        self.helper.cleanup()
        if not self.helper.wait_sampling():
            self.state, self.error = FAILED, self.helper.error
            return False
        return True

    def take(self) -> None:
        """The batches that arrived, tagged and kept; those older than keep_s, and the timeline's changes no
        kept sample needs, dropped. A helper that exited says so in state and note()."""
        if self.helper is None:
            return
        while True:
            try:
                header, rows = self.helper.batches.get_nowait()
            except queue.Empty:
                break
            with self.follower.lock:
                rows, account = tagged(rows, self.follower.timeline, {})
            self.batches.append((header, rows, account.get("tags", {})))
        if self.state == RUNNING and self.helper.proc.poll() is not None:
            self.state, self.error = EXITED, self.helper._last_words()
        if self.batches:
            newest = self.batches[-1][0].get("kt_ended_ns", 0)
            while self.batches and self.batches[0][0].get("kt_ended_ns", 0) < newest - self.keep_ns:
                self.batches.popleft()
            with self.follower.lock:
                self.follower.timeline.forget(self.batches[0][0].get("kt_started_ns", 0), int(TAGS_IDLE_S * 1e9))

    def between(self, start_ns: int, end_ns: int) -> tuple:
        """(rows, account) of the batches whose interval's middle is within [start_ns, end_ns] on
        CLOCK_MONOTONIC (a window of the collector's stream, by when its lines came): the rows as fold_into
        adds them, the account as a capture's stacks.helper says it (`live`: the batches; without the
        timeline's changes lost and whether it is complete, which the collector writes when it ends)."""
        chosen = [(h, rows, tags) for h, rows, tags in self.batches
                  if start_ns <= (h.get("kt_started_ns", 0) + h.get("kt_ended_ns", 0)) // 2 <= end_ns]
        account: dict = {"runtime": self.runtime, "live": {"batches": len(chosen), "every_s": LIVE_EVERY_S}}
        if chosen:
            first = chosen[0][0]
            account.update({key: first[key] for key in ("helper", "version", "hz") if key in first})
            for key in ("samples", "lost", "samples_capped", "samples_outside_window"):
                account[key] = sum(int(h.get(key, 0)) for h, _, _ in chosen)
            tags = {key: value for key, value in chosen[-1][2].items() if key not in ("changes_lost", "complete")}
            if "error" not in tags:
                tags["samples_untagged"] = sum(int(t.get("samples_untagged", 0)) for _, _, t in chosen)
            account["tags"] = tags
        return [row for _, rows, _ in chosen for row in rows], account

    def note(self) -> str:
        """What a view says of its call sites: named in the runtime's frames, or why not."""
        if self.state == RUNNING:
            return f"{self.runtime} target: its frames named by {HELPER_NAME}"
        why = {MISSING: NOT_FOUND,
               DUTY: "the runtime stacks helper is not run with --duty (it would load again each cycle)",
               FAILED: f"the runtime stacks helper did not start: {self.error}",
               EXITED: f"the runtime stacks helper exited: {self.error}"}[self.state]
        return f"{self.runtime} target: {why}: call sites in native frames"

    def close(self) -> None:
        """The helper stopped (one SIGTERM), the timeline read to its end and closed: after the collector."""
        if self.helper is not None:
            self.helper.stop()
        if self.follower is not None:
            self.follower.close()
        if self.helper is not None:
            self.helper.cleanup()
