"""`spinscope record --pid N --pid-ns NS`: N is a PID as seen inside a PID namespace (a container's), and
the collector, which runs in this namespace, needs the PID this namespace gives the same process.

NS is a PID namespace file: /proc/X/ns/pid of any process X in the container (or its
ns/pid_for_children, or a bind mount of either), or X alone as a shorthand for /proc/X/ns/pid. The
namespace is told by the file's identity (device and inode, the `pid:[...]` number); its type is asked of
the kernel (ioctl NS_GET_NSTYPE), so a network namespace file is refused, not mistaken. Every process in
this /proc whose own PID namespace is that one has, as the last field of its status file's NSpid line, its
PID in that namespace: the process whose last field is N is the one. Processes in namespaces nested deeper
(a container inside the container) are not searched: their /proc/X/ns/pid is another namespace.
"""

from __future__ import annotations

import errno
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from spinscope.errors import SpinscopeError, UsageError

NS_GET_NSTYPE = 0xB703  # _IO(0xb7, 0x3), <linux/nsfs.h>, Linux 4.11
CLONE_NEWPID = 0x20000000
NS_TYPES = {0x00020000: "mount", 0x02000000: "cgroup", 0x04000000: "UTS", 0x08000000: "IPC",
            0x10000000: "user", CLONE_NEWPID: "PID", 0x40000000: "network", 0x00000080: "time"}


@dataclass(frozen=True)
class Translation:
    pid_in_ns: int
    namespace: str  # pid:[inode], as /proc/X/ns/pid links say
    host_pid: int

    def describe(self) -> str:
        return f"PID {self.pid_in_ns} in namespace {self.namespace} is PID {self.host_pid} here"


def namespace_path(value: str) -> Path:
    """--pid-ns's value as a file: a bare process id means that process's /proc/X/ns/pid."""
    return Path(f"/proc/{value}/ns/pid") if value.isdigit() else Path(value)


def namespace_id(value: str) -> tuple[int, int]:
    """(st_dev, st_ino) of the PID namespace --pid-ns names. Raises UsageError (exit 2) when it
    names no file, or a file that is not a PID namespace."""
    path = namespace_path(value)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        shown = f" ({path})" if str(path) != value else ""
        raise UsageError(f"--pid-ns {value}: {exc.strerror.lower()}{shown}") from None
    try:
        try:
            kind = fcntl.ioctl(fd, NS_GET_NSTYPE)
        except OSError as exc:
            if exc.errno in (errno.ENOTTY, errno.EINVAL):
                raise UsageError(f"--pid-ns {value}: not a namespace file (give /proc/PID/ns/pid of a "
                                     f"process in the container, or that PID)") from None
            raise UsageError(f"--pid-ns {value}: {exc.strerror.lower()}") from None
        if kind != CLONE_NEWPID:
            raise UsageError(f"--pid-ns {value}: a {NS_TYPES.get(kind, hex(kind))} namespace, not a PID "
                                 f"namespace (give /proc/PID/ns/pid)")
        st = os.fstat(fd)
        return st.st_dev, st.st_ino
    finally:
        os.close(fd)


def nspid(status: str) -> list[int]:
    """The NSpid line of a /proc/X/status: the process's PID in each namespace, this /proc's first."""
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            return [int(field) for field in line.split()[1:]]
    return []


def translate(pid: int, value: str) -> Translation:
    """The process with PID `pid` in the PID namespace --pid-ns `value` names, as a PID of this /proc.
    Raises UsageError (exit 2) for a --pid-ns that is no PID namespace, SpinscopeError (exit 1) when no
    process has that PID there."""
    dev, ino = namespace_id(value)
    namespace = f"pid:[{ino}]"
    members = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            st = os.stat(entry / "ns" / "pid")
            if (st.st_dev, st.st_ino) != (dev, ino):
                continue
            # bytes: the Name line is the process's own choice, not necessarily UTF-8 (untrusted.py)
            levels = nspid((entry / "status").read_bytes().decode("utf-8", "replace"))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue  # exited while we looked, or not ours to see (then it is not ours to trace either)
        members += 1
        if levels and levels[-1] == pid:
            return Translation(pid, namespace, int(entry.name))
    where = f"the PID namespace of --pid-ns {value} ({namespace})"
    if not members:  # a namespace file kept open or bind-mounted after its processes exited
        raise SpinscopeError(f"no process is left in {where}")
    raise SpinscopeError(f"no process has PID {pid} in {where}, which holds {members} "
                         f"process{'es' if members != 1 else ''}")
