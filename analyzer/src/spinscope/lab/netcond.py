"""Network conditions for sweeps: a network namespace for the server, joined to the root namespace by a
veth pair, with bandwidth (tbf) and, where the kernel has sch_netem, added delay.

Layout (one namespace per sweep run, created on the first cell that needs it, removed at the end, also on
errors and Ctrl-C):

    root namespace                          namespace spinscope-PID
    loadgen, collector  --  ssPIDh 10.200.X.1/30 <==veth==> ssPIDn 10.200.X.2/30  --  refserver

The /30 lives on the veth only (no route leaves the machine). Bandwidth is shaped with tbf on both
ends (requests leave through the host end, responses through the namespace end). Delay needs netem on
the same two ends; when `tc qdisc add ... netem` fails (this kernel has no sch_netem) the condition is
refused with NetcondUnsupported and the sweep records the cell as failed with that reason.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import statistics
import subprocess
import time

from spinscope.errors import SpinscopeError

PREFIX = "spinscope-"
NS_RE = re.compile(r"^spinscope-(\d+)\b")
SUBNET = "10.200"
TBF_LATENCY = "100ms"


class NetcondUnsupported(SpinscopeError):
    """A network condition this machine cannot provide (e.g. delay without sch_netem)."""


def _ip(*args: str, check: bool = True, netns: str | None = None) -> subprocess.CompletedProcess:
    cmd = (["ip", "netns", "exec", netns] if netns else []) + list(args)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    if check and proc.returncode != 0:
        raise SpinscopeError(f"`{' '.join(cmd)}` failed: {proc.stderr.strip() or proc.returncode}")
    return proc


def list_namespaces() -> list:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cleanup_stale() -> list:
    """Remove spinscope namespaces left by sweeps that no longer run (killed with SIGKILL)."""
    removed = []
    for name in list_namespaces():
        m = NS_RE.match(name)
        if m and not _pid_alive(int(m.group(1))):
            Namespace(owner_pid=int(m.group(1))).teardown()
            removed.append(name)
    return removed


def bandwidth_bytes(rate: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmg]?)(bit|bps)", rate.strip().lower())
    if not m:
        raise SpinscopeError(f"bandwidth {rate!r}: expected a tc rate such as 100mbit, 1gbit or 10mbps")
    value = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
    return value / 8 if m.group(3) == "bit" else value


class Namespace:
    """The sweep's server namespace and veth pair. Use as a context manager or call setup/teardown."""

    def __init__(self, owner_pid: int | None = None):
        pid = owner_pid or os.getpid()
        self.name = f"{PREFIX}{pid}"
        self.host_if = f"ss{pid}h"
        self.ns_if = f"ss{pid}n"
        self.host_addr = self.ns_addr = None
        self.active = False
        self.condition = None  # (bandwidth, delay_ms) currently applied

    # --- life cycle ---------------------------------------------------------------------------------
    def _free_octet(self) -> int:
        used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
        for octet in [os.getpid() % 250, *range(250)]:
            if f" {SUBNET}.{octet}." not in used:
                return octet
        raise SpinscopeError(f"no free /30 left in {SUBNET}.0.0/16")

    def setup(self) -> "Namespace":
        if self.active:
            return self
        self.teardown()  # a leftover of the same name (pid reuse) must not block us
        octet = self._free_octet()
        self.host_addr, self.ns_addr = f"{SUBNET}.{octet}.1", f"{SUBNET}.{octet}.2"
        self.active = True
        try:
            _ip("ip", "netns", "add", self.name)
            _ip("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if,
                "netns", self.name)
            _ip("ip", "addr", "add", f"{self.host_addr}/30", "dev", self.host_if)
            _ip("ip", "link", "set", self.host_if, "up")
            _ip("ip", "addr", "add", f"{self.ns_addr}/30", "dev", self.ns_if, netns=self.name)
            _ip("ip", "link", "set", self.ns_if, "up", netns=self.name)
            _ip("ip", "link", "set", "lo", "up", netns=self.name)
        except BaseException:
            self.teardown()
            raise
        return self

    def teardown(self) -> None:
        """Kill whatever still runs in the namespace, delete the veth pair and the namespace."""
        if self.name in list_namespaces():
            pids = _ip("ip", "netns", "pids", self.name, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            _ip("ip", "link", "del", self.host_if, check=False)
            _ip("ip", "netns", "del", self.name, check=False)
        else:
            _ip("ip", "link", "del", self.host_if, check=False)
        self.active = False
        self.condition = None

    def __enter__(self) -> "Namespace":
        return self.setup()

    def __exit__(self, *exc) -> None:
        self.teardown()

    # --- conditions ---------------------------------------------------------------------------------
    def exec_prefix(self) -> list:
        return ["ip", "netns", "exec", self.name]

    def apply(self, bandwidth: str | None, delay_ms: float | None) -> None:
        """Shape both ends of the veth: tbf for bandwidth, netem for delay (one-way delay_ms / 2 on each
        end, so the added round trip is delay_ms)."""
        condition = (bandwidth or None, float(delay_ms or 0))
        if condition == self.condition:
            return
        for dev, ns in ((self.host_if, None), (self.ns_if, self.name)):
            _ip("tc", "qdisc", "del", "dev", dev, "root", check=False, netns=ns)
        self.condition = (None, 0.0)
        if condition[1] > 0:
            half = condition[1] / 2
            for dev, ns in ((self.host_if, None), (self.ns_if, self.name)):
                cmd = ["tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", f"{half:g}ms"]
                if bandwidth:
                    cmd += ["rate", bandwidth]
                proc = _ip(*cmd, check=False, netns=ns)
                if proc.returncode != 0:
                    for d, n in ((self.host_if, None), (self.ns_if, self.name)):
                        _ip("tc", "qdisc", "del", "dev", d, "root", check=False, netns=n)
                    raise NetcondUnsupported(
                        "delay unsupported here: `tc qdisc add ... netem` failed "
                        f"({proc.stderr.strip() or proc.returncode}); this kernel has no sch_netem")
        elif bandwidth:
            rate = bandwidth_bytes(bandwidth)
            burst = max(64 * 1024, int(rate / 100))  # at least 10 ms of traffic, at least 64 KiB
            for dev, ns in ((self.host_if, None), (self.ns_if, self.name)):
                _ip("tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", bandwidth, "burst",
                    str(burst), "latency", TBF_LATENCY, netns=ns)
        self.condition = condition


def netem_available() -> bool:
    """True if this kernel accepts a netem qdisc (tried on a throwaway dummy device in a namespace)."""
    ns = Namespace(owner_pid=os.getpid())
    probe = f"{ns.name}-probe"
    try:
        _ip("ip", "netns", "add", probe)
        ok = _ip("tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms",
                 check=False, netns=probe).returncode == 0
    except SpinscopeError:
        ok = False
    finally:
        _ip("ip", "netns", "del", probe, check=False)
    return ok


def measure_rtt(host: str, port: int, samples: int = 10, timeout: float = 2.0) -> float | None:
    """Median TCP connect time to host:port in milliseconds (one SYN/SYN-ACK round trip): the RTT the
    cell actually got. None if no connection succeeded."""
    times = []
    for _ in range(samples):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            start = time.perf_counter()
            s.connect((host, port))
            times.append((time.perf_counter() - start) * 1000)
        except OSError:
            pass
        finally:
            s.close()
    return statistics.median(times) if times else None
