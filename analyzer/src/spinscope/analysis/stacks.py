"""Stacks (`--stacks`): where in the target's code each pattern's time and events are.

A capture recorded with `--stacks` holds a `stacks` block (docs/capture-format.md): unique stacks, each
with the thread it was taken on, its source (`cpu` for a cpu-clock sample, or the pattern event at which it
was taken: `spin-write`, `empty-poll`, `futile-wakeup`, `handoff`), the probes' tags at that moment
(`write-stall`, `empty-cycle`, `ready-cycle`, `handoff`, `request`, `kernel`), how many records it stands
for (`count`) and how many events (`weight`: an event stack is taken at most once per thread and source in
each sampling period, and stands for the events since the previous one), and its frames, innermost first.
A runtime helper (the OpenTelemetry eBPF profiler for CPython and HotSpot, docs/stacks.md) adds frames of
kind `python` or `jvm` the same way.

What this module makes of them, per pattern:
- its call sites: the innermost frame of the target's own code on the pattern's event stacks (weighted by
  events) or CPU samples (weighted by time), with three callers of context;
- its sampled CPU share, split into the kernel part (samples inside a syscall) and the user part, from
  the samples whose stack passes through the pattern's machinery (the runtime's thread-pool, queue, future
  and lock frames: MACHINERY, one table per runtime) or whose tags put them in the pattern's window;
- what an export shows (selected, language_view); output/stack_files.py writes folded stacks and pprof.
Nothing here reads the capture's other blocks: each pattern's home joins the two (stack_costs.py).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from spinscope.analysis.patterns import HANDOFF_OVERHEAD, NAGLE_STALL, SPURIOUS_SELECT, WRITE_SPIN

# Sources and tags, as the collector names them (collector/stacks.c).
CPU = "cpu"
RUNTIME = "runtime"  # a runtime helper's sample (tracing/stacks_helper.py): the runtime's own frames, untagged
SPIN_WRITE, EMPTY_POLL, FUTILE_WAKEUP, HANDOFF = "spin-write", "empty-poll", "futile-wakeup", "handoff"
NAGLE_WRITE = "nagle-write"  # schema 9: a response's later write that left bytes held by Nagle's algorithm
EVENT_SOURCES = (SPIN_WRITE, EMPTY_POLL, FUTILE_WAKEUP, HANDOFF, NAGLE_WRITE)
TAG_WRITE_STALL, TAG_EMPTY_CYCLE, TAG_READY_CYCLE = "write-stall", "empty-cycle", "ready-cycle"
TAG_HANDOFF, TAG_REQUEST, TAG_KERNEL = "handoff", "request", "kernel"

# The patterns (analysis/patterns/: their names) and what of the stacks belongs to each: the event sources
# whose stacks are its call sites, and the tags that put a CPU sample in its window.
# (nagle-stall costs no CPU: its call sites are its held writes', no sample is in its window)
PATTERN_SOURCES = {WRITE_SPIN: (SPIN_WRITE,), SPURIOUS_SELECT: (FUTILE_WAKEUP, EMPTY_POLL),
                   HANDOFF_OVERHEAD: (HANDOFF,), NAGLE_STALL: (NAGLE_WRITE,)}
PATTERN_TAGS = {WRITE_SPIN: (TAG_WRITE_STALL,), SPURIOUS_SELECT: (TAG_EMPTY_CYCLE, TAG_READY_CYCLE),
                HANDOFF_OVERHEAD: (TAG_HANDOFF,), NAGLE_STALL: ()}
TOP_CALL_SITES = 5
CONTEXT_FRAMES = 3

# Frame kinds (RUST: native code the collector named with Rust's demangler; NODE: a runtime helper's V8 frame,
# a JavaScript function or one of V8's own; ERROR: where the helper's unwinding stopped).
KERNEL, NATIVE, JIT, PYTHON, JVM, NODE, RUST, ERROR = ("kernel", "native", "jit", "python", "jvm", "node", "rust",
                                                       "error")
LANGUAGE_KINDS = (PYTHON, JVM, JIT, NODE)
# The hand-off's machinery that no table names: a sample of a thread on the hand-off's request path, in the
# hand-off's window (tagged TAG_HANDOFF: in a call that hands over, or woken by another of the target's
# threads and not blocked or polled since), whose stack holds none of the target's own code and no frame of a
# runtime's language: the runtime's native code between a hand-over and the code it was for (machinery_of).
WINDOW = "window"

# The hand-off's machinery, per runtime: a CPU sample whose innermost classified frame is one of these
# spends its time passing work between threads (docs/stacks.md has the table and why each is there).
# Each entry is a regular expression matched against the frame's whole symbol.
MACHINERY = {
    "glibc": (r"(__)?pthread_cond_(wait|timedwait|clockwait|signal|broadcast)(@.*)?",
              r"_*pthread_cond_(wait|signal|broadcast)_common", r"__(lll|futex)_\w+", r"futex_wake",
              r"__new_sem_(wait|post)\w*", r"sem_(wait|timedwait|post)", r"eventfd_(read|write)",
              r"__pthread_mutex_(cond_)?lock_full", r"__condvar_\w+"),
    "kernel": (r"(__x64_sys_|__se_sys_|do_)?futex\w*", r"try_to_wake_up", r"wake_up_q", r"eventfd_(read|write)",
               r"__wake_up_(common|sync_key)\w*", r"pipe_(read|write)"),
    "python": (r"(.*\.)?run_in_threadpool", r"(.*\.)?run_sync(_in_worker_thread)?", r"WorkerThread\.\w+",
               r"CapacityLimiter\.\w+", r"(Simple)?Queue\.(put|get|put_nowait|get_nowait|_put|_get)",
               r"Condition\.(wait|notify|notify_all|_is_owned|_release_save|_acquire_restore)",
               r"Event\.(wait|set)", r"(.*\.)?call_soon_threadsafe", r"(.*\.)?_write_to_self",
               r"(.*\.)?_read_from_self", r"(.*\.)?run_in_executor", r"ThreadPoolExecutor\.(submit|_adjust_thread_count)",
               r"_worker", r"Future\.(set_result|result|_invoke_callbacks|add_done_callback)",
               r"(.*\.)?wrap_future", r"(.*\.)?_copy_future_state", r"(.*\.)?_chain_future\.\w+",
               r"(.*\.)?_set_state", r"(.*\.)?_call_set_state", r"(.*\.)?cancel_shielded_checkpoint",
               r"RunVar\.\w+", r"(.*\.)?to_thread\.\w+", r"BlockingPortal\.\w+"),
    # Only the calls that pass work on or wait for it: not the loops that run what they were given
    # (ThreadPoolExecutor.runWorker, SingleThreadEventExecutor.runAllTasks, NioEventLoop.run), whose tasks'
    # work would then all count, a server that hands nothing over included.
    "jvm": (r"java\.util\.concurrent\.(ThreadPoolExecutor|ScheduledThreadPoolExecutor)\.(execute|submit|addWorker|getTask|"
            r"processWorkerExit|tryTerminate|reject|ensurePrestart|delayedExecute|schedule\w*)",
            r"java\.util\.concurrent\.(AbstractExecutorService\.submit|FutureTask\.(set|setException|finishCompletion|get|"
            r"awaitDone|report))",
            r"java\.util\.concurrent\.(LinkedBlockingQueue|ArrayBlockingQueue|SynchronousQueue|"
            r"LinkedTransferQueue|ConcurrentLinkedQueue|LinkedBlockingDeque)(\$\w+)?\.\w+",
            r"java\.util\.concurrent\.locks\.\w+(\$\w+)?\.\w+", r"java\.util\.concurrent\.CompletableFuture\w*\.\w+",
            r"java\.util\.concurrent\.ForkJoin\w+\.\w+", r"(jdk\.internal\.misc|sun\.misc)\.Unsafe\.(park|unpark)",
            r"io\.netty\.util\.concurrent\.(SingleThreadEventExecutor|DefaultEventExecutor)\w*\.(execute|execute0|"
            r"offerTask|addTask|pollTask\w*|takeTask|wakeup|lazyExecute|startThread|doStartThread)",
            r"io\.netty\.util\.concurrent\.(DefaultPromise|PromiseTask|AbstractEventExecutor)\w*\.(setSuccess\w*|"
            r"trySuccess|setFailure\w*|tryFailure|notifyListener\w*|await\w*|sync\w*|checkNotifyWaiters|"
            r"submit|newPromise)",
            r"io\.netty\.util\.concurrent\.MultithreadEventExecutorGroup\.next",
            r"io\.netty\.util\.internal\.shaded\.org\.jctools\.\S+",
            r"io\.netty\.channel\.(nio\.NioEventLoop|SingleThreadEventLoop|epoll\.EpollEventLoop)\.(wakeup|execute)\w*",
            r"sun\.nio\.ch\.\w+SelectorImpl\.wakeup",  # a thread handing a connection back to its selector's thread
            r"Parker::(park|unpark)", r"Unsafe_(Park|Unpark)", r"os::PlatformEvent::\w+",
            r"os::PlatformMonitor::\w+", r"ObjectMonitor::\w+"),
    # Go's scheduler loop itself (schedule, findRunnable) runs for every goroutine switch, a server that
    # hands nothing over included: only the calls that pass a goroutine work or wake another are counted.
    "go": (r"runtime\.(futexsleep|futexwakeup|notesleep|notewakeup|notetsleepg|chansend1?|chanrecv[12]?|"
           r"selectgo|goready|ready|wakep|semacquire1|semrelease1)",
           r"sync\.\(\*(Cond|Mutex|RWMutex|WaitGroup)\)\.\w+"),
}
_MACHINERY = {runtime: re.compile("|".join(f"(?:{p})" for p in patterns)) for runtime, patterns in MACHINERY.items()}

# Modules whose frames are the runtime's or the C library's, never the target's own code.
_RUNTIME_MODULES = re.compile(r"(libc|libpthread|ld-linux[-\w.]*|libm|libdl|librt|libgcc_s|libstdc\+\+|"
                              r"libpython[\d.]+|python[\d.]*|libjvm|libjli|java|libnio|libnet|node|libuv|"
                              r"libssl|libcrypto|libz|libffi|libev|libevent[\w-]*)(\.so[\d.]*)?(\+.*)?")
_PYTHON_LIBRARY = re.compile(r"(/lib/python[\d.]+/|site-packages/|dist-packages/|<frozen |<stdlib>/)")
# A JavaScript file of the application: a script (not one of Node's own, `node:fs`), not an installed package.
_SCRIPT = re.compile(r"(?!node:|node_modules/).*\.[cm]?[jt]sx?")


@dataclass(frozen=True)
class Frame:
    kind: str            # KERNEL, NATIVE, PYTHON, JVM
    module: str | None   # the file's name (native, kernel: "[kernel]"), or None
    symbol: str | None   # the function, or None when the module has no symbol there
    offset: int = 0      # into the symbol (or the module, when there is no symbol)
    file: str | None = None
    line: int | None = None

    @property
    def name(self) -> str:
        """What a person reads, in the report, top, the exporter and the exports alike: the symbol, a Java
        method as `Class.method` (`void JdkHttpBytes.handle(com.sun.net.httpserver.HttpExchange)` ->
        `JdkHttpBytes.handle`: its line tells overloads apart), else
        module+offset (a frame is never dropped for lack of a name)."""
        if not self.symbol:
            return f"{self.module or '?'}+{self.offset:#x}"
        if self.kind == JVM and "(" in self.symbol and _language_method(self):
            return _jvm_method(self.symbol)
        return self.symbol

    @property
    def where(self) -> str:
        """The name with its source line where known: `spinning_write_site (spin.c:10)`."""
        return f"{self.name} ({self.file}:{self.line})" if self.file and self.line else self.name


@dataclass(frozen=True)
class Stack:
    tid: int
    source: str
    tags: frozenset
    count: int
    weight: int
    frames: tuple  # of Frame, innermost first

    @property
    def in_kernel(self) -> bool:
        return TAG_KERNEL in self.tags


@dataclass
class StackSet:
    hz: int
    stacks: list
    records: dict
    events: dict
    lost: dict
    no_user_frames: int
    truncated: int
    collector_cpu_s: float
    unwinder: str
    tail: dict = field(default_factory=dict)  # events_without_stack, by source
    helper: dict | None = None  # the runtime helper's own account, when it ran
    budget: int = 0    # event stacks a second for the whole target (schema 9; before, per thread and source)
    deferred: int = 0  # events due a stack when the budget was spent (schema 9): they are in the next stack
    modules: dict = field(default_factory=dict)  # the modules' files opened, shared, not opened (schema 9)

    @property
    def cpu_samples(self) -> list:
        return [s for s in self.stacks if s.source == CPU]

    def samples_by_tid(self) -> Counter:
        counts: Counter = Counter()
        for s in self.cpu_samples:
            counts[s.tid] += s.count
        return counts

    @property
    def lost_total(self) -> int:
        return sum(self.lost.values())

    @property
    def names_language(self) -> bool:
        """Whether any of its stacks names a function of a runtime's language (the runtime helper's samples)."""
        return any(_language_method(f) for s in self.stacks for f in s.frames)

    @property
    def runtime_tagged(self) -> bool:
        """Whether the runtime helper's samples carry their threads' tags (from the collector's tag
        timeline): then they, not only the collector's, say which samples are in a pattern's window."""
        tags = (self.helper or {}).get("tags")
        return isinstance(tags, Mapping) and "error" not in tags


def load(capture: Mapping) -> StackSet | None:
    """The capture's stacks, or None when it was recorded without --stacks."""
    block = capture.get("stacks")
    if not isinstance(block, Mapping):
        return None
    frames = [_frame(f) for f in block.get("frames", [])]
    stacks = []
    for s in block.get("stacks", []):
        try:
            chain = tuple(frames[i] for i in s["frames"])
        except (IndexError, TypeError):
            continue  # a frame index out of range: a damaged capture, the stack left out
        stacks.append(Stack(int(s["tid"]), str(s["source"]), frozenset(s.get("tags", ())), int(s["count"]),
                            int(s.get("weight", s["count"])), chain))
    return StackSet(int(block.get("hz", 0)), stacks, dict(block.get("records", {})), dict(block.get("events", {})),
                    dict(block.get("lost", {})), int(block.get("no_user_frames", 0)), int(block.get("truncated", 0)),
                    float(block.get("collector_cpu_s", 0.0)), str(block.get("unwinder", "")),
                    dict(block.get("events_without_stack", {})),
                    block.get("helper") if isinstance(block.get("helper"), Mapping) else None,
                    int(block.get("event_budget_per_s", 0)), int(block.get("deferred", 0)),
                    dict(block.get("modules") or {}))


def _frame(f: Mapping) -> Frame:
    module = f.get("module")
    kind = f.get("kind") or (KERNEL if module == "[kernel]" else NATIVE)
    symbol = f.get("symbol")
    offset = f.get("symbol_offset", 0) if symbol else f.get("address", 0)
    return Frame(kind, module, symbol, int(offset or 0), f.get("file"), f.get("line") or None)


# ------------------------------------------------------------------ classification


def machinery_runtime(frame: Frame) -> str | None:
    """The runtime whose hand-off machinery this frame is (a MACHINERY key), or None."""
    if not frame.symbol:
        return None
    if frame.kind == KERNEL:
        return "kernel" if _MACHINERY["kernel"].fullmatch(frame.symbol) else None
    if frame.kind == PYTHON:
        return "python" if _MACHINERY["python"].fullmatch(_python_qualname(frame.symbol)) else None
    if frame.kind in (JVM, JIT):  # a JVM's frames from its interpreter unwinder, or its perf map
        return "jvm" if _MACHINERY["jvm"].fullmatch(_jvm_method(frame.symbol)) else None
    # A C++ name without its parameters (`ObjectMonitor::enter`); Go's `sync.(*Mutex).lockSlow` as it is.
    name = frame.symbol.split("(", 1)[0] if "::" in frame.symbol else frame.symbol
    for runtime in ("glibc", "go", "jvm"):  # native frames: libc's, a Go binary's, libjvm's own
        if _MACHINERY[runtime].fullmatch(name):
            return runtime
    return None


def _python_qualname(symbol: str) -> str:
    return symbol.rsplit(" ", 1)[-1]


def _jvm_method(symbol: str) -> str:
    """`void java.util.concurrent.LinkedBlockingQueue.offer(java.lang.Object)` -> `java.util...offer`."""
    head = symbol.split("(", 1)[0]
    return head.rsplit(" ", 1)[-1]


def is_own_code(frame: Frame, frames: tuple) -> bool:
    """Whether the frame is the target's own code on its stack (FRAMES, innermost first), rather than its
    runtime's, its libraries', its C library's or the kernel's: the one rule for a call site (the innermost
    such frame), the machinery's entry and where the hand-off's machinery ends (machinery_of). On a stack
    with frames of a runtime's language (Python, Java, JavaScript) the user's code is that language's, and a
    native frame there is the runtime's or an extension's (`_asyncio.cpython-311-x86_64-linux-gnu.so+0x7e21`,
    a JVM's libnio), whatever its module's name; without them a native module's code is the target's own (a
    C server, a Rust binary's own crate)."""
    if frame.kind not in LANGUAGE_KINDS and any(f.kind in LANGUAGE_KINDS for f in frames):
        return False
    if frame.kind == KERNEL or unnamed(frame):
        return False
    if frame.kind == PYTHON:
        return not (frame.file and _PYTHON_LIBRARY.search(frame.file))
    if frame.kind in (JVM, JIT):
        if not _language_method(frame):  # the JVM's stubs (`StubRoutines (1)`) are the JVM's, never a site
            return False
        method = _jvm_method(frame.symbol or "")
        return not method.startswith(("java.", "javax.", "jdk.", "sun.", "com.sun.", "io.netty.", "kotlin."))
    if frame.kind == NODE:
        return bool(frame.file and _SCRIPT.fullmatch(frame.file))
    module = frame.module or ""
    if module.startswith("[") or _RUNTIME_MODULES.fullmatch(module):
        return False
    if frame.kind == RUST:  # a Rust binary holds its crates' code too: its own crate is the one named after it
        return rust_crate(frame.symbol or "") == module.replace("-", "_")
    return not (frame.symbol or "").startswith(("runtime.", "internal/", "syscall.", "sync.", "net.", "net/http."))


def rust_crate(symbol: str) -> str:
    """The crate of a demangled Rust path, `crate::module::item`; of an impl's method, `<Type as Trait>::method`,
    the type's crate when the type has a path (`<axumbytes::Handler as tower::Service>::call`), else the
    trait's (`<F as axum::handler::Handler<(M,T1),S>>::call`)."""
    path = symbol
    if path.startswith("<"):
        self_type, _, trait = path[1:].partition(" as ")
        self_type = self_type.lstrip("&*[(").removeprefix("mut ").removeprefix("const ").removeprefix("dyn ")
        path = self_type if "::" in self_type.split("<", 1)[0] else trait
    return path.split("::", 1)[0]


def machinery_of(stack: Stack, on_path: bool = False) -> str | None:
    """The runtime of the hand-off machinery this sample is in: walking from the innermost frame out, the
    first frame that is either machinery (its runtime) or the target's own code (None: the sample is the
    code's own work, even if a pool's frames run it further out, as a pool runs every task). With none of
    either on a sample of a thread on the hand-off's request path (ON_PATH) in the hand-off's window: WINDOW,
    the runtime's code between a hand-over and the code it was for, whatever its names (libuv's completion,
    tokio's task harness), when the stack holds no frame of a runtime's language either: a Python, Java or
    JavaScript frame there, the user's or a library's, is the request's work (a framework's routing, its
    protocol code, its response writes), which the same server does without the hand-over; the window on an
    event loop's thread spans nearly all of its time (FastAPI's loop: 203 of its 222 samples)."""
    for frame in stack.frames:
        runtime = machinery_runtime(frame)
        if runtime:
            return runtime
        # (a frame the helper could not name may be the user's: it ends the walk as the user's code does)
        if is_own_code(frame, stack.frames) or unnamed(frame):
            return None
    # A stack cut short by an unwinding error cannot say it holds none of the target's code.
    unwound = not any(frame.kind == ERROR for frame in stack.frames)
    native = not any(_language_method(frame) for frame in stack.frames)
    return WINDOW if on_path and unwound and native and TAG_HANDOFF in stack.tags else None


def call_site(stack: Stack) -> tuple:
    """(the innermost frame of the target's own code, CONTEXT_FRAMES of its callers); with none of its own
    code on the stack, the nearest the stack comes to it (_site_index: the framework's code that made the
    call, `SyncWorker.wait`); with nothing the user can change, (None, ()): a site is never the kernel's,
    the C library's or a runtime's own native code (`__x64_sys_futex`, libuv's `uv_cond_wait ← worker`),
    which are context (callers, through)."""
    frames = stack.frames
    i, _ = _site_index(frames, 0)
    return (None, ()) if i is None else (frames[i], frames[i + 1:i + 1 + CONTEXT_FRAMES])


def _site_index(frames: tuple, start: int) -> tuple:
    """(index, own) of the frame that places a stack, from START outwards: the innermost that is the target's
    own code (own) or a Rust library's frame instantiated for it (rustc names an inlined generic by its last
    segment and its arguments: `spawn_blocking_inner<axumbytes::bytes::{async_fn#0}::{closure_env#0}, u64>`,
    nearer the hand-over than `axumbytes::main` further out); else, on a server written entirely in a
    framework, the innermost frame of the runtime's language (gunicorn's `SyncWorker.wait`); else (None,
    False)."""
    own = next((i for i in range(start, len(frames)) if is_own_code(frames[i], frames)
                or _made_for_own_code(frames[i])), None)
    if own is not None:
        return own, is_own_code(frames[own], frames)
    return next((i for i in range(start, len(frames)) if _language_method(frames[i]) and not unnamed(frames[i])),
                None), False


def unnamed(frame: Frame) -> bool:
    """A frame of a runtime's language that the runtime helper could not name (`[unsymbolized python frame]`,
    stacks-helper/README.md; a code object it had not read yet): its code is the language's, whose it is
    nobody can say, so it is never a call site (the named frames around it place the stack)."""
    return frame.kind in LANGUAGE_KINDS and (not frame.symbol or frame.symbol.startswith("[unsymbolized "))


def _made_for_own_code(frame: Frame) -> bool:
    """A Rust frame whose name holds a path of the binary's own crate (in its generic arguments)."""
    crate = (frame.module or "").replace("-", "_")
    return frame.kind == RUST and bool(crate) and f"{crate}::" in (frame.symbol or "")


# ------------------------------------------------------------------ per pattern


@dataclass
class CallSite:
    frame: Frame
    context: tuple
    through: Frame | None = None  # the hand-off's machinery the site called into, when the site is own code
    own: bool = False  # the target's own code or a frame instantiated for it (else a framework's frame)
    events: int = 0    # events (event stacks' weights) here
    samples: int = 0   # CPU samples in the pattern's window here
    event_share: float = 0.0
    sample_share: float = 0.0
    share: float = 0.0  # the one the pattern's sites are ranked by (pattern_stacks): a live view's too

    def to_dict(self) -> dict:
        return {"function": self.frame.name, "module": self.frame.module, "file": self.frame.file,
                "line": self.frame.line, "kind": self.frame.kind, "where": self.frame.where,
                "callers": [f.where for f in self.context], "through": self.through.name if self.through else None,
                "events": self.events, "samples": self.samples,
                "event_share": round(self.event_share, 4), "sample_share": round(self.sample_share, 4),
                "share": round(self.share, 4)}


@dataclass
class PatternStacks:
    pattern: str
    samples: int              # the CPU samples of the threads considered
    window_samples: int       # ...in the pattern's window (its tags)
    machinery_user: int       # ...in user space in the runtime's machinery (hand-off only)
    machinery_kernel: int     # ...in the kernel in the machinery (already in the syscall-measured part)
    machinery_runtimes: dict  # runtime -> samples
    events: int               # events the pattern's event stacks stand for
    call_sites: list = field(default_factory=list)
    sampled: str = CPU        # whose samples: the collector's (cpu) or a runtime helper's (runtime)
    unplaced_events: int = 0   # events whose stacks hold nothing the user can change (no call site)
    unplaced_samples: int = 0  # ...and window samples
    unplaced_where: str | None = None  # the innermost frames of most of them, as context

    @property
    def user_share(self) -> float | None:
        """The share of the threads' CPU the pattern spends in user space that the syscall and scheduler
        tracepoints do not time: the hand-off's machinery frames outside the kernel."""
        return self.machinery_user / self.samples if self.samples else None

    @property
    def window_share(self) -> float | None:
        return self.window_samples / self.samples if self.samples else None

    def to_dict(self) -> dict:
        return {"sampled_by": self.sampled, "samples": self.samples, "window_samples": self.window_samples,
                "window_share": _round(self.window_share), "machinery_samples_user": self.machinery_user,
                "machinery_samples_kernel": self.machinery_kernel, "machinery_runtimes": self.machinery_runtimes,
                "user_share": _round(self.user_share), "events": self.events,
                "unplaced_events": self.unplaced_events, "unplaced_samples": self.unplaced_samples,
                "call_sites": [c.to_dict() for c in self.call_sites]}


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 4)


def pattern_stacks(stacks: StackSet, pattern: str, tids: Iterable[int] | None = None,
                   path_tids: Iterable[int] = ()) -> PatternStacks:
    """What the stacks say of `pattern` on the threads `tids` (all when None). The hand-off's machinery is
    read from the runtime helper's samples where it sampled those threads (they name the runtime's own
    frames), else from the collector's CPU samples; on the threads `path_tids` (those on the hand-off's
    request path), its window's samples without the target's own code too (machinery_of)."""
    keep = None if tids is None else set(tids)
    on_path = set(path_tids)
    sources, tags = PATTERN_SOURCES[pattern], set(PATTERN_TAGS[pattern])
    mine = [s for s in stacks.stacks if keep is None or s.tid in keep]
    sampled = sampler(mine, pattern, stacks.runtime_tagged)
    samples = window = mach_user = mach_kernel = events = 0
    runtimes: Counter = Counter()
    sites: dict = {}
    # events and samples whose stacks hold nothing the user can change, by their innermost frames
    unplaced: dict = {"events": Counter(), "samples": Counter()}
    for s in mine:
        if s.source in sources:
            events += s.weight
            _place(sites, unplaced, s, call_site(s), events=s.weight)
            continue
        if s.source != sampled:
            continue
        samples += s.count
        runtime = machinery_of(s, s.tid in on_path) if pattern == HANDOFF_OVERHEAD else None
        if runtime:
            runtimes[runtime] += s.count
            if s.in_kernel or (s.frames and s.frames[0].kind == KERNEL):
                mach_kernel += s.count
            else:
                mach_user += s.count
            window += s.count
            if runtime != WINDOW:  # the window's samples are its cost; where it happens, its machinery says
                _place(sites, unplaced, s, machinery_entry(s), samples=s.count)
        elif tags & s.tags:
            window += s.count
            # A hand-off's window runs on into the work the thread was handed (a pool thread's endpoint):
            # where that work is says nothing of where the hand-off is, which its machinery and events say.
            if pattern != HANDOFF_OVERHEAD:
                _place(sites, unplaced, s, call_site(s), samples=s.count)
    # By events, but where a runtime helper sampled the threads by samples: its samples name the runtime's
    # frames, which the collector's event stacks (native frames only: `python3.11+0x27d465`) cannot; among the
    # sites with some of those, the user's own code first (a framework's frame, the nearest a stack without it
    # comes, after).
    order = (lambda c: (-c.samples, -c.events)) if sampled == RUNTIME else (lambda c: (-c.events, -c.samples))
    ranked = sorted(sites.values(), key=lambda c: (order(c)[0] == 0, not c.own, *order(c), c.frame.where))
    # The share the order follows, the same kind for every site: of the samples where they rank first (and
    # some site has samples), else of the events.
    by_samples = any(c.samples for c in ranked) and (sampled == RUNTIME or not events)
    for c in ranked:
        c.event_share = c.events / events if events else 0.0
        c.sample_share = c.samples / window if window else 0.0
        c.share = c.sample_share if by_samples else c.event_share
    most = (unplaced["events"] or unplaced["samples"]).most_common(1)
    return PatternStacks(pattern, samples, window, mach_user, mach_kernel, dict(runtimes), events,
                         ranked[:TOP_CALL_SITES], sampled, unplaced["events"].total(), unplaced["samples"].total(),
                         most[0][0] if most else None)


def sampler(stacks: Iterable[Stack], pattern: str | None, runtime_tagged: bool) -> str:
    """Whose CPU samples say where a pattern's time goes (both samplers sample the same time: one is read):
    the runtime helper's where it sampled these threads, for the hand-off and for no pattern (all the
    samples: an export) always (its samples name the runtime's frames) and for the others when its samples
    carry tags; else the collector's."""
    by_helper = pattern in (None, HANDOFF_OVERHEAD) or runtime_tagged
    return RUNTIME if by_helper and any(s.source == RUNTIME for s in stacks) else CPU


def machinery_entry(stack: Stack) -> tuple:
    """Where a sample in the hand-off's machinery entered it: (site, CONTEXT_FRAMES of its callers, the
    machinery's entry or None). The site is the target's own code that called into the machinery where
    there is some (`serveFile (server.js:25)`, the entry `uv_fs_open` beside it); else the outermost
    machinery frame of the runtime's language (the call that hands off, `run_in_threadpool`, or the pool's
    loop, `WorkerThread.run`), or, when the machinery is native (libc's condition variable, libjvm's
    monitor) under frames of the runtime's language, the language frame that called into it
    (`EPollSelectorImpl.wakeup`, not `pthread_cond_signal ← ObjectMonitor::ExitEpilog`): the call site is
    said in the target's terms. With neither (a pool thread's wait in libc under libuv's loop, a stack of
    the kernel's frames only), (None, (), None): no site, as call_site."""
    frames = stack.frames
    i, own = _site_index(frames, max(i for i, f in enumerate(frames) if machinery_runtime(f)))
    if i is None:
        return None, (), None
    # through: what the user's code called, in its terms (not a JVM stub, not V8's frames)
    through = next((frames[j] for j in range(i - 1, -1, -1)
                    if frames[j].kind not in LANGUAGE_KINDS or _language_method(frames[j])), None) if own else None
    return frames[i], frames[i + 1:i + 1 + CONTEXT_FRAMES], through


def _language_method(frame: Frame) -> bool:
    """A Python function, a Java method (not one of the JVM's stubs: `monitorexit_nofpu Runtime1 stub`) or a
    JavaScript function (one with a source file: V8's own frames, `V8::ExitFrame`, have none)."""
    symbol = frame.symbol or ""
    if frame.kind == NODE:
        return bool(frame.file)
    return frame.kind in (PYTHON, JVM, JIT) and not (symbol.endswith(" stub") or symbol.startswith("StubRoutines"))


def _place(sites: dict, unplaced: dict, stack: Stack, where: tuple, events: int = 0, samples: int = 0) -> None:
    """Count EVENTS and SAMPLES of STACK at the site WHERE (call_site's or machinery_entry's), or as unplaced
    (by its innermost user-space frames, else its kernel ones)."""
    frame, context, *through = where
    if frame is None:
        user = [f for f in stack.frames if f.kind not in (KERNEL, ERROR)] or stack.frames
        innermost = " ← ".join(f.where for f in user[:2])
        for kind, n in (("events", events), ("samples", samples)):
            if n:
                unplaced[kind][innermost] += n
        return
    via = through[0] if through else None
    key = (frame.where, tuple(f.where for f in context), via.name if via else None)  # a line, not an instruction
    own = is_own_code(frame, stack.frames) or _made_for_own_code(frame)
    site = sites.setdefault(key, CallSite(frame, context, via, own=own))
    site.events += events
    site.samples += samples


# ------------------------------------------------------------------ exports


def is_sample(stack: Stack) -> bool:
    """A CPU sample (the collector's or the runtime helper's: its weight is time), not an event stack (its
    weight is events): the two are never added up in one value."""
    return stack.source in (CPU, RUNTIME)


def selected(stacks: StackSet, pattern: str | None = None) -> list:
    """What an export or a flame graph shows: the CPU samples of one sampler (the runtime helper's where it
    ran, as it names the runtime's frames; the two sample the same time, so never both) and the event
    stacks; or of one pattern, its event stacks and the samples in its window or machinery, from the sampler
    that pattern_stacks reads."""
    timed = sampler(stacks.stacks, pattern, stacks.runtime_tagged)
    out = []
    for s in stacks.stacks:
        if not is_sample(s):
            if pattern is None or s.source in PATTERN_SOURCES[pattern]:
                out.append(s)
        elif s.source == timed and (pattern is None or s.tags & set(PATTERN_TAGS[pattern])
                                    or (pattern == HANDOFF_OVERHEAD and machinery_of(s))):
            out.append(s)
    return out


def language_view(frames: tuple) -> tuple:
    """The frames as py-spy shows Python: in a stack with frames of the runtime's language, the runtime's own
    frames outward of the innermost one left out (_PyEval_EvalFrameDefault, `python3.11+0x584b23`, the
    JVM's stubs and call stubs, the thread's start), the native and kernel frames it called into kept (libc's
    write, the futex the sample waited in). A stack without language frames is as it was."""
    innermost = next((i for i, f in enumerate(frames) if _language_method(f)), None)
    if innermost is None:
        return frames
    return frames[:innermost] + tuple(f for f in frames[innermost:] if _language_method(f))
