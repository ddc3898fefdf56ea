"""The C collector seen from Python: where it is, how to start it and know when its probes are live,
and what its host checks found. Everything that runs the collector (record, doctor, the lab's sweeps,
bench/ and the tests) goes through here.

Lookup, first executable wins (candidates(); `spinscope doctor` names the one found and where from):
  1. $SPINSCOPE_COLLECTOR, alone when set (nothing else is tried: a wrong value is an error, not a fallback);
  2. the checkout's build/spinscope-collector, when this package runs from a checkout (an editable install,
     or PYTHONPATH=analyzer/src): there `make` has just rebuilt it, and it is the one matching the source;
  3. the collector bundled in the package, spinscope/_bin/spinscope-collector (a wheel from `make dist`);
  4. spinscope-collector on PATH (the standalone binary copied to a host, or a pure-Python install).
2 before 3: a wheel installed in site-packages has no checkout, so it always uses its own collector; a
checkout only has a bundled one if someone copied it into the source tree, and then the fresh build wins.

Readiness: the collector is given `--ready-fd N`, the write end of a pipe. Once its probes are live it
writes one JSON line there ({"ready": true, "pid": ..., "probes": ..., "attach_s": ...}) and closes it;
if it fails first, the pipe closes empty and its one-line error is on its stderr. Nothing parses the
collector's human log (which -q silences).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

COLLECTOR_ENV = "SPINSCOPE_COLLECTOR"
COLLECTOR_NAME = "spinscope-collector"
READY_TIMEOUT_S = 60.0  # loading and attaching takes ~0.1 s; a verifier on a slow kernel, seconds


PACKAGE_DIR = Path(__file__).resolve().parents[1]  # spinscope/, this module being spinscope/tracing/collector.py
BUNDLED_DIR = "_bin"  # in the package; setup.py puts the collector there when `make dist` builds the wheel


def repo_root() -> Path:
    """The repository checkout this package runs from (analyzer/src/spinscope/tracing/collector.py -> root)."""
    return PACKAGE_DIR.parents[2]


def checkout_root() -> Path | None:
    """repo_root() when the package really runs from a checkout (analyzer/src/spinscope beside the project's
    pyproject.toml), None when it is installed (site-packages/spinscope)."""
    root = repo_root()
    if PACKAGE_DIR == root / "analyzer" / "src" / "spinscope" and (root / "pyproject.toml").is_file():
        return root
    return None


@dataclass(frozen=True)
class Candidate:
    """A place the collector may be, and what that place is (said by doctor and in errors)."""

    path: Path
    source: str

    def __str__(self) -> str:
        return f"{self.path} ({self.source})"


def candidates() -> list[Candidate]:
    """The places find() looks, in order (the module docstring says why this order)."""
    override = os.environ.get(COLLECTOR_ENV)
    if override:
        return [Candidate(Path(override), f"${COLLECTOR_ENV}")]
    places = []
    checkout = checkout_root()
    if checkout is not None:
        places.append(Candidate(checkout / "build" / COLLECTOR_NAME, "the checkout's build"))
    places.append(Candidate(PACKAGE_DIR / BUNDLED_DIR / COLLECTOR_NAME, "bundled with the package"))
    on_path = shutil.which(COLLECTOR_NAME)
    if on_path:
        places.append(Candidate(Path(on_path), "PATH"))
    return places


def locate() -> Candidate | None:
    """The first of candidates() that is an executable file, or None."""
    for candidate in candidates():
        if candidate.path.is_file() and os.access(candidate.path, os.X_OK):
            return candidate
    return None


def find() -> Path | None:
    """The collector executable to run, or None when none of candidates() is executable."""
    found = locate()
    return found.path if found else None


def not_found_message() -> str:
    """One line: where find() looked, and how to get a collector."""
    looked = ", ".join(str(c) for c in candidates())
    if os.environ.get(COLLECTOR_ENV):
        return f"collector not found: {looked} is not an executable file (fix or unset ${COLLECTOR_ENV})"
    return (f"collector not found (looked at {looked}, and PATH has no {COLLECTOR_NAME}); install the wheel "
            f"from `make dist`, put {COLLECTOR_NAME} on PATH or in ${COLLECTOR_ENV}, or build it in a checkout "
            f"with `make`")


class NotReady(Exception):
    """The collector exited, or closed its ready descriptor, before its probes were live."""


@dataclass
class Collector:
    """A started collector whose readiness can be awaited. `proc` is the Popen; read its stderr (if
    piped) while waiting, since a verbose collector can fill the pipe before it is ready."""

    proc: subprocess.Popen
    _ready_fd: int

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> dict:
        """The collector's ready line, once its probes are live.

        Raises NotReady if it closed the descriptor without one (it failed: its error is on its stderr;
        the process is left for the caller to reap), TimeoutError if neither happened in time.
        """
        deadline = time.monotonic() + timeout
        data = b""
        try:
            while not data.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._ready_fd], [], [], left)[0]:
                    raise TimeoutError(f"the collector was not ready within {timeout:g} s")
                chunk = os.read(self._ready_fd, 4096)
                if not chunk:
                    raise NotReady("the collector stopped before its probes were live")
                data += chunk
        finally:
            self.close()
        return json.loads(data)

    def close(self) -> None:
        if self._ready_fd >= 0:
            os.close(self._ready_fd)
            self._ready_fd = -1


def start(argv: list[str], command: list[str] | None = None, **popen_kwargs) -> Collector:
    """Start the collector (argv[0] is its path) with a ready descriptor; `command`: the collector runs it
    (`-- COMMAND [ARG...]`, after every option). popen_kwargs go to Popen (pass_fds are passed on with the
    ready descriptor)."""
    read_fd, write_fd = os.pipe()
    pass_fds = (write_fd, *popen_kwargs.pop("pass_fds", ()))  # the caller's own (a --stream pipe)
    tail = ["--", *command] if command is not None else []
    try:
        proc = subprocess.Popen([*map(str, argv), "--ready-fd", str(write_fd), *tail], pass_fds=pass_fds,
                                **popen_kwargs)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return Collector(proc, read_fd)


@dataclass
class Check:
    """One of the collector's host checks (`spinscope-collector --check --json`)."""

    name: str
    ok: bool
    detail: str
    remedy: str = ""
    skipped: bool = False
    optional: bool = False  # not ok, a part of the capture is left out (said in it), but record still runs


def run_checks(collector: Path, timeout: float) -> list[Check]:
    """The collector's own checks of this host (privileges, BTF, tracefs, tracepoints, loading and
    attaching its probes). Raises OSError, subprocess.TimeoutExpired, or ValueError when the collector
    gives no check report (its last stderr line is the message)."""
    result = subprocess.run([str(collector), "--check", "--json"], capture_output=True, text=True,
                            timeout=timeout)
    try:
        report = json.loads(result.stdout)
        return [Check(c["name"], bool(c["ok"]), c["detail"], c.get("remedy", ""), bool(c.get("skipped")),
                      bool(c.get("optional"))) for c in report["checks"]]
    except (ValueError, KeyError, TypeError):
        lines = (result.stderr.strip() or result.stdout.strip()).splitlines()
        raise ValueError(lines[-1] if lines else f"{collector.name} --check exited {result.returncode}") from None
