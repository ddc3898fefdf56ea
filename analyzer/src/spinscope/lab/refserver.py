"""Starting a reference server (build/refserver) and reading its listening line: the one place that does.

Once its socket listens, refserver writes one line to stderr (reference-servers/common/main.c,
docs/architectures.md):

    refserver: listening on HOST:PORT arch=ARCH workers=N sndbuf=EFFECTIVE|default

`start(command)` runs a command line that ends up exec'ing refserver (it may be wrapped in `taskset -c`
or `ip netns exec`), waits for that line and returns a RefServer with the parsed fields and the process.
Its stderr is drained on a thread from then on, so a chatty server never blocks on a full pipe and the
caller can still read what it wrote (RefServer.stderr_lines). The sweep runner, the reference-server
test harness and the benchmarks all start servers through here.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import threading
import time
from dataclasses import dataclass, field

from spinscope.errors import SpinscopeError
from spinscope.tracing.collector import repo_root

LISTEN_RE = re.compile(r"refserver: listening on (\S+):(\d+) arch=(\S+) workers=(\d+) sndbuf=(\S+)")
START_TIMEOUT_S = 10.0


class RefserverDidNotStart(SpinscopeError):
    """The server exited, or printed no listening line in time; the message ends with its last lines."""


def binary() -> str:
    """The refserver built by `make` in this checkout."""
    return str(repo_root() / "build" / "refserver")


def command(arch: str, *args, host: str | None = None, port: int = 0, program: str | None = None) -> list:
    """`refserver --arch ARCH --port PORT [--host HOST] ARGS...` (port 0: an ephemeral port)."""
    cmd = [program or binary(), "--arch", arch, "--port", str(port)]
    if host is not None:
        cmd += ["--host", host]
    return cmd + [str(a) for a in args]


@dataclass
class RefServer:
    """A listening reference server: what its listening line says, and the process."""

    proc: subprocess.Popen
    host: str
    port: int
    arch: str
    workers: int
    sndbuf: int | None  # effective SO_SNDBUF (Linux doubles what was asked); None: the kernel default
    listen_line: str
    stderr_lines: list = field(default_factory=list)  # every line so far, the listening line included

    @property
    def sndbuf_text(self) -> str:
        """The sndbuf field as printed: a byte count or `default`."""
        return "default" if self.sndbuf is None else str(self.sndbuf)

    _reader: threading.Thread | None = field(default=None, init=False, repr=False)

    def stderr_text(self) -> str:
        """Everything written to stderr so far (all of it, once the process has exited and been reaped)."""
        if self.proc.poll() is not None and self._reader is not None:
            self._reader.join(timeout=5)
        return "".join(line + "\n" for line in self.stderr_lines)


def parse_listen_line(line: str) -> dict | None:
    """The fields of a listening line (host, port, arch, workers, sndbuf), or None if `line` is not one."""
    m = LISTEN_RE.search(line)
    if m is None:
        return None
    return {"host": m.group(1), "port": int(m.group(2)), "arch": m.group(3), "workers": int(m.group(4)),
            "sndbuf": None if m.group(5) == "default" else int(m.group(5)), "listen_line": m.group(0)}


def _drain(stream, lines: list, pending: bytes) -> threading.Thread:
    """Append the stream's lines to `lines` until EOF; `pending` is the start of the first one."""
    def run():
        head = pending
        for raw in stream:
            lines.append((head + raw).decode(errors="replace").rstrip("\n"))
            head = b""
        if head:
            lines.append(head.decode(errors="replace"))
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def start(cmd: list, timeout: float = START_TIMEOUT_S, spawn=subprocess.Popen, **popen_kwargs) -> RefServer:
    """Run `cmd` (stdout discarded, stderr piped) and wait up to `timeout` s for the listening line.

    `spawn` creates the process (subprocess.Popen, or a caller's wrapper that tracks its children);
    `popen_kwargs` go to it (env, stdin, ...). If the process exits or stays silent, it is killed and
    RefserverDidNotStart is raised with its exit code and last lines."""
    proc = spawn(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **popen_kwargs)
    lines: list = []
    partial = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], 0.1)
            if ready:
                chunk = os.read(proc.stderr.fileno(), 4096)
                if not chunk:
                    break
                partial += chunk
                while b"\n" in partial:
                    raw, partial = partial.split(b"\n", 1)
                    lines.append(raw.decode(errors="replace"))
                    fields = parse_listen_line(lines[-1])
                    if fields is not None:
                        server = RefServer(proc=proc, stderr_lines=lines, **fields)
                        server._reader = _drain(proc.stderr, lines, partial)
                        return server
            elif proc.poll() is not None:
                break
    except BaseException:
        _kill(proc)
        raise
    try:  # stderr closed or the process gone: it is exiting, and its exit code says why
        why = f"exit {proc.wait(timeout=1)}"
    except subprocess.TimeoutExpired:
        why = f"no listening line within {timeout:g} s"
    _kill(proc)
    seen = [line.strip() for line in lines + [partial.decode(errors="replace")] if line.strip()]
    raise RefserverDidNotStart(f"refserver did not start ({why}): {' | '.join(seen[-3:]) or 'no output'}")


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
