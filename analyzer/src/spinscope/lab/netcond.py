"""Network conditions for sweeps: a network namespace for the server, joined to the root namespace by a
veth pair, or, for cells with added delay, by two TUN devices and the delay line between them; bandwidth
with tbf on either.

Layout (one namespace per sweep run, created on the first cell that needs it, removed at the end, also on
errors and Ctrl-C):

    root namespace                          namespace spinscope-PID
    loadgen, collector  --  ssPIDh 10.200.X.1/30 <==veth==> ssPIDn 10.200.X.2/30  --  refserver

    with delay_ms > 0 (the same names and addresses, so the server and loadgen see no difference):
    loadgen, collector  --  ssPIDh 10.200.X.1/30 (tun)      ssPIDn 10.200.X.2/30 (tun)  --  refserver
                                    `-- build/delayline: holds each packet delay_ms/2 --'

The /30 lives on that pair only (no route leaves the machine). Bandwidth is shaped with tbf on both
ends (requests leave through the host end, responses through the namespace end).

Delay: this kernel has no sch_netem (nor sch_fq), so delay is added in userspace, at the packet level:
build/delayline (reference-servers/delayline/delayline.c) reads every IP packet the kernel routes out of
one TUN device, holds it delay_ms / 2 and writes it into the other, each way, so `delay_ms` is the round
trip added (the papers' "+5 ms"). It forwards packets and does not terminate TCP: the server's send
buffer, the client's receive window and the ACK clock behave as over a link with that RTT. The link mode
follows the cell: a cell without delay gets the veth pair back (veth's RTT is ~0.02-0.04 ms; through the
line, delay_ms plus ~0.02-0.1 ms), a cell with a different delay restarts the line; the delay line runs from the first
delay cell until the next mode change or the namespace's teardown (SIGTERM; it also gets SIGTERM if the
sweep dies). NetcondUnsupported: the delay line cannot run here (not built, no /dev/net/tun).
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import statistics
import subprocess
import time

from spinscope.errors import SpinscopeError
from spinscope.tracing.collector import repo_root

PREFIX = "spinscope-"
NS_RE = re.compile(r"^spinscope-(\d+)\b")
SUBNET = "10.200"
TBF_LATENCY = "100ms"


DELAYLINE_READY_S = 5.0  # the delay line opens two devices and says "ready"
DELAYLINE_FIFO = 10  # SCHED_FIFO priority: the line's timing must not depend on how busy the CPUs are


class NetcondUnsupported(SpinscopeError):
    """A network condition this machine cannot provide (e.g. delay when the delay line cannot run)."""


def delayline_binary():
    """The delay line built by `make` in this checkout (reference-servers/delayline/delayline.c)."""
    return repo_root() / "build" / "delayline"


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

    def __init__(self, owner_pid: int | None = None, env: dict | None = None):
        pid = owner_pid or os.getpid()
        self.name = f"{PREFIX}{pid}"
        self.host_if = f"ss{pid}h"
        self.ns_if = f"ss{pid}n"
        self.host_addr = self.ns_addr = None
        self.active = False
        self.condition = None  # (bandwidth, delay_ms) currently applied
        self.link = None  # "veth" or "tun": what joins the namespace now
        self.env = env  # the delay line's environment (the sweep's tag, runner.SWEEP_ENV)
        self.delayline: subprocess.Popen | None = None
        self.delayline_exit: dict | None = None  # the last delay line's exit counters

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
            _ip("ip", "link", "set", "lo", "up", netns=self.name)
            self._make_link("veth")
        except BaseException:
            self.teardown()
            raise
        return self

    def _make_link(self, kind: str) -> None:
        """Join the namespace by `kind` ("veth" or "tun"), replacing what joined it; same names and
        addresses either way. The delay line must not be running (it holds the TUN devices)."""
        _ip("ip", "link", "del", self.host_if, check=False)  # a veth pair goes with either end
        _ip("ip", "link", "del", self.ns_if, check=False, netns=self.name)
        self.link = None
        if kind == "veth":
            _ip("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if,
                "netns", self.name)
        else:
            # Persistent TUN devices (the delay line attaches to them by name): created here rather than by
            # the line, so that they, their addresses and their tbf outlive a restart of the line for
            # another delay, and are removed with the namespace like the veth pair.
            _ip("ip", "tuntap", "add", "dev", self.host_if, "mode", "tun")
            _ip("ip", "tuntap", "add", "dev", self.ns_if, "mode", "tun", netns=self.name)
            # No IPv6 on the pair: router solicitations would only be noise on the line.
            _ip("sysctl", "-qw", f"net.ipv6.conf.{self.host_if}.disable_ipv6=1", check=False)
            _ip("sysctl", "-qw", f"net.ipv6.conf.{self.ns_if}.disable_ipv6=1", check=False, netns=self.name)
        _ip("ip", "addr", "add", f"{self.host_addr}/30", "dev", self.host_if)
        _ip("ip", "link", "set", self.host_if, "up")
        _ip("ip", "addr", "add", f"{self.ns_addr}/30", "dev", self.ns_if, netns=self.name)
        _ip("ip", "link", "set", self.ns_if, "up", netns=self.name)
        self.link = kind

    # --- the delay line -----------------------------------------------------------------------------
    def _start_delayline(self, rtt_ms: float) -> None:
        program = delayline_binary()
        if not os.access(program, os.X_OK):
            raise NetcondUnsupported(f"delay unsupported here: {program} not built; run `make all`")
        cmd = [str(program), "--outer", self.host_if, "--inner", self.ns_if, "--inner-netns", self.name,
               "--rtt-ms", f"{rtt_ms:g}", "--fifo", str(DELAYLINE_FIFO), "--die-with-parent"]
        # Its own session (a Ctrl-C to the sweep's terminal is the sweep's to handle; teardown stops the
        # line); stdout: one JSON line per event.
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, env=self.env)
        self.delayline = proc
        ready = self._read_event(DELAYLINE_READY_S)
        if ready is None or ready.get("event") != "ready":
            self._stop_delayline()
            err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
            raise NetcondUnsupported(f"delay unsupported here: the delay line did not start "
                                     f"(exit {proc.returncode}): {err or 'no output'}")

    def _read_event(self, timeout: float) -> dict | None:
        """The delay line's next JSON line, or None if none comes within `timeout` s or it exited."""
        proc = self.delayline
        if proc is None or proc.stdout is None:
            return None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = proc.stdout.readline()
        try:
            return json.loads(line) if line else None
        except json.JSONDecodeError:
            return None

    def delayline_stats(self, timeout: float = 2.0) -> dict | None:
        """The running delay line's counters (SIGUSR1 makes it print them), or None without one."""
        proc = self.delayline
        if proc is None or proc.poll() is not None:
            return None
        proc.send_signal(signal.SIGUSR1)
        event = self._read_event(timeout)
        return event if event and event.get("event") == "stats" else None

    def _stop_delayline(self) -> None:
        """SIGTERM the delay line (SIGKILL after 5 s); keep its exit counters in delayline_exit."""
        proc, self.delayline = self.delayline, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
        events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        self.delayline_exit = next((e for e in reversed(events) if e.get("event") == "exit"), None)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()

    def teardown(self) -> None:
        """Stop the delay line, kill whatever still runs in the namespace, delete the link pair and the
        namespace."""
        self._stop_delayline()
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
        self.link = None

    def __enter__(self) -> "Namespace":
        return self.setup()

    def __exit__(self, *exc) -> None:
        self.teardown()

    # --- conditions ---------------------------------------------------------------------------------
    def exec_prefix(self) -> list:
        return ["ip", "netns", "exec", self.name]

    def apply(self, bandwidth: str | None, delay_ms: float | None) -> None:
        """Put the cell's condition on the pair: delay_ms > 0, the TUN pair with the delay line adding
        delay_ms of round trip (delay_ms / 2 each way); otherwise the veth pair. Bandwidth: tbf on both
        ends of either (on the TUN devices it shapes before the line's hold, serialization before
        propagation, as on a link)."""
        condition = (bandwidth or None, float(delay_ms or 0))
        if condition == self.condition:
            return
        kind = "tun" if condition[1] > 0 else "veth"
        running = self.condition[1] if self.condition and self.delayline is not None else 0.0
        self.condition = None  # until this one is fully applied
        if self.delayline is not None and (kind != "tun" or running != condition[1]):
            self._stop_delayline()
        if kind != self.link:
            try:
                self._make_link(kind)
            except SpinscopeError as exc:
                if kind == "tun":  # no TUN support here: the delay cells fail saying so, the others run
                    raise NetcondUnsupported(f"delay unsupported here: no TUN pair ({exc})") from None
                raise
        for dev, ns in ((self.host_if, None), (self.ns_if, self.name)):
            _ip("tc", "qdisc", "del", "dev", dev, "root", check=False, netns=ns)
        if bandwidth:
            rate = bandwidth_bytes(bandwidth)
            burst = max(64 * 1024, int(rate / 100))  # at least 10 ms of traffic, at least 64 KiB
            for dev, ns in ((self.host_if, None), (self.ns_if, self.name)):
                _ip("tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", bandwidth, "burst",
                    str(burst), "latency", TBF_LATENCY, netns=ns)
        if kind == "tun" and self.delayline is None:
            self._start_delayline(condition[1])
        self.condition = condition


def delayline_delta(before: dict, after: dict | None) -> dict | None:
    """What the delay line did between two of its stats events: per direction, packets forwarded, dropped
    (queue full) and write errors, and the deepest queue so far (a cell records this for its load)."""
    if after is None:
        return None
    out = {"rtt_ms": after.get("rtt_ms")}
    for way in ("to_inner", "to_outer"):
        b, a = before.get(way, {}), after.get(way, {})
        out[way] = {k: a.get(k, 0) - b.get(k, 0) for k in ("packets", "bytes", "dropped", "write_errors")}
        out[way]["max_queue"] = a.get("max_queue")
    return out


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
