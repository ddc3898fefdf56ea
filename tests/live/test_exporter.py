"""`spinscope exporter` scraped by a real Prometheus (Debian's package, its own storage and port): the
request counter's increase agrees with the load generator's count; the exposition passes promtool; every
dashboard and alert expression evaluates; the scrape over TLS with basic auth (--web-config); bad input (a
port in use, a selector matching nothing) and a target that exits and returns."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from live_harness import LOADGEN, REFSERVER, env, free_port, load_lock, spinscope, stop, wait_until
from paths import ROOT

PROMETHEUS = shutil.which("prometheus")


class Exporter:
    def __init__(self, *args: str):
        self.port = free_port()
        self.proc = subprocess.Popen(spinscope("exporter", "--port", str(self.port), *args), env=env(),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        self.lines: list = []
        threading.Thread(target=lambda: self.lines.extend(self.proc.stderr), daemon=True).start()

    def said(self, pattern: str, timeout: float = 20.0) -> str:
        return wait_until(lambda: next((l for l in self.lines if re.search(pattern, l)), None), timeout,
                          f"exporter to say {pattern!r}; it said {self.lines!r}")

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            return r.read().decode()

    def stop(self) -> int:
        stop(self.proc)
        return self.proc.returncode


def start_server(*args: str, program=REFSERVER) -> tuple:
    proc = subprocess.Popen([program, "--arch", "thread-pool", "--port", "0", "--workers", "4", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port = int(re.search(r"listening on \S+:(\d+)", proc.stderr.readline()).group(1))
    return proc, port


def sample(text: str, name: str, **labels) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
    return None


class Prometheus:
    def __init__(self, tmp: Path, target_port: int, scrape: str = ""):
        """`scrape`: more of the job's scrape_config (scheme, tls_config, basic_auth), one key a line."""
        self.port = free_port()
        config = tmp / "prometheus.yml"
        more = "".join(f"    {line}\n" for line in scrape.splitlines())
        config.write_text(f"""
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: [{ROOT / 'deploy' / 'prometheus' / 'spinscope-rules.yml'}]
scrape_configs:
  - job_name: spinscope
    static_configs: [{{targets: ["127.0.0.1:{target_port}"]}}]
{more}""")
        self.proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                                      f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                                     stdout=subprocess.DEVNULL, stderr=open(tmp / "prometheus.log", "w"))

    def query(self, expr: str, at: float | None = None) -> list:
        params = {"query": expr, **({"time": f"{at:.3f}"} if at else {})}
        url = f"http://127.0.0.1:{self.port}/api/v1/query?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=5) as r:
            doc = json.load(r)
        assert doc["status"] == "success", doc
        return doc["data"]["result"]

    def scalar(self, expr: str, at: float | None = None) -> float | None:
        try:
            result = self.query(expr, at)
        except OSError:
            return None
        return float(result[0]["value"][1]) if result else None


@pytest.mark.skipif(not PROMETHEUS, reason="prometheus not installed (apt-get install prometheus)")
def test_prometheus_scrapes_the_request_count(tmp_path):
    server = exporter = prom = None
    try:
        with load_lock():
            server, port = start_server()
            exporter = Exporter("--pid", str(server.pid))
            exporter.said(rf"tracing PID {server.pid}")
            prom = Prometheus(tmp_path, exporter.port)
            selector = f'spinscope_requests_total{{pid="{server.pid}"}}'
            wait_until(lambda: prom.scalar(selector) is not None, 30, "Prometheus to scrape the exporter")
            time.sleep(2.5)  # a few scrapes of the idle counter
            before = time.time()
            result = subprocess.run([LOADGEN, "--port", str(port), "--concurrency", "4", "--requests", "20000",
                                     "--path", "/bytes/1000", "--warmup", "0", "--json"],
                                    capture_output=True, text=True, timeout=60, check=True)
            sent = json.loads(result.stdout)
            assert sent["errors"] == 0 and sent["requests"] == 20000
            time.sleep(3.5)  # the last requests close with the connections: a line, then a scrape
            after = time.time()
            span = max(1, round(after - before + 1))
            increase = prom.scalar(f"{selector} - {selector} offset {span}s", at=after)
            print(f"Prometheus: +{increase:.0f} requests, loadgen: {sent['requests']}")
            assert increase == pytest.approx(sent["requests"], rel=0.05)
            # The same from increase(), which extrapolates to the range's edges.
            extrapolated = prom.scalar(f"increase({selector}[{span + 2}s])", at=after)
            assert extrapolated == pytest.approx(sent["requests"], rel=0.25)
            text = exporter.metrics()
        check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        # Every expression the dashboard and the alert rules hold evaluates against the real exposition.
        sys.path.insert(0, str(ROOT / "tests" / "analyzer"))
        from test_analyzer_live import fleet_exprs

        for where, expr in fleet_exprs():
            expr = (expr.replace("$__rate_interval", "5s").replace('"$instance"', '".*"')
                    .replace('"$process"', '".*"'))
            if expr.startswith("label_values"):
                continue
            prom.query(expr)  # asserts success
        assert prom.scalar(f'sum(spinscope_cpu_seconds_total{{pid="{server.pid}"}})') > 0
        assert exporter.stop() == 0
        assert any("stopped" in line for line in exporter.lines)
    finally:
        for proc in (prom and prom.proc, exporter and exporter.proc, server):
            stop(proc)


@pytest.mark.skipif(not PROMETHEUS, reason="prometheus not installed (apt-get install prometheus)")
@pytest.mark.parametrize("client_certs", [False, True], ids=["tls", "mutual-tls"])
def test_prometheus_scrapes_over_tls_with_basic_auth(tmp_path, client_certs):
    """--web-config (docs/live.md's example): Prometheus with scheme https, the CA and basic auth (and, with
    client_certs, its own certificate) scrapes it (up == 1, the target's series); a request without
    credentials and one with a wrong password get 401 and `WWW-Authenticate: Basic`, and
    spinscope_exporter_auth_failures_total counts exactly those two. With client_certs, a client without a
    certificate does not get past the handshake (and is no auth failure)."""
    import bcrypt

    sys.path.insert(0, str(ROOT / "tests" / "analyzer"))
    from certs import Authority

    ca = Authority(tmp_path)
    cert, key = ca.issue("exporter", ["127.0.0.1"])
    client_cert, client_key = ca.issue("prometheus", ["prometheus.example"], client=True)
    (tmp_path / "password").write_text("s3cret")
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(10)).decode()  # the cost the docs suggest
    web = tmp_path / "web.yml"
    mutual = (f"  client_ca_file: {ca.cert_file.name}\n  client_auth_type: RequireAndVerifyClientCert\n"
              "  client_allowed_sans: [prometheus.example]\n") if client_certs else ""
    web.write_text(f"tls_server_config:\n  cert_file: {cert.name}\n  key_file: {key.name}\n{mutual}"
                   f"basic_auth_users:\n  prometheus: {hashed}\n")
    tls_config = f"ca_file: {ca.cert_file}" + (f", cert_file: {client_cert}, key_file: {client_key}"
                                               if client_certs else "")
    target = subprocess.Popen(["sleep", "120"])
    exporter = prom = None
    try:
        exporter = Exporter("--pid", str(target.pid), "--web-config", str(web))
        tls = "TLS, client certificates required" if client_certs else "TLS"
        exporter.said(rf"serving https://127.0.0.1:{exporter.port}/metrics \({tls}, basic auth: 1 user\)")
        exporter.said(rf"tracing PID {target.pid}")
        prom = Prometheus(tmp_path, exporter.port, f"scheme: https\ntls_config: {{{tls_config}}}\n"
                          f"basic_auth: {{username: prometheus, password_file: {tmp_path / 'password'}}}")
        wait_until(lambda: prom.scalar('up{job="spinscope"}') == 1, 30, "Prometheus to scrape the exporter")
        wait_until(lambda: prom.scalar(f'spinscope_target_info{{pid="{target.pid}"}}') == 1, 30, "the target")

        ctx = ssl.create_default_context(cafile=str(ca.cert_file))
        url = f"https://127.0.0.1:{exporter.port}/metrics"
        if client_certs:
            # No certificate: the handshake fails (under TLS 1.3 the client may see it only at its first read).
            with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
                urllib.request.urlopen(url, timeout=10, context=ctx)
            ctx.load_cert_chain(client_cert, client_key)

        def get(password: str | None) -> tuple:
            request = urllib.request.Request(url)
            if password is not None:
                token = base64.b64encode(f"prometheus:{password}".encode()).decode()
                request.add_header("Authorization", f"Basic {token}")
            try:
                with urllib.request.urlopen(request, timeout=10, context=ctx) as response:
                    return response.status, response.headers, response.read().decode()
            except urllib.error.HTTPError as refused:
                return refused.code, refused.headers, ""

        for password in (None, "wrong"):
            status, headers, _ = get(password)
            assert (status, headers["WWW-Authenticate"]) == (401, "Basic")
        status, _, text = get("s3cret")
        assert status == 200
        assert sample(text, "spinscope_exporter_auth_failures_total", reason="missing") == 1
        assert sample(text, "spinscope_exporter_auth_failures_total", reason="wrong") == 1
        assert sample(text, "spinscope_target_info", pid=target.pid) == 1
        # Impatient clients (a scrape timeout, a health check): an authenticated GET, closed before the answer
        # is read. Each printed a 24-line traceback (ssl.SSLEOFError in wsgiref); now one line at most.
        token = base64.b64encode(b"prometheus:s3cret")
        for _ in range(3):
            with ctx.wrap_socket(socket.create_connection(("127.0.0.1", exporter.port)),
                                 server_hostname="127.0.0.1") as impatient:
                impatient.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic " + token + b"\r\n\r\n")
        assert get("s3cret")[0] == 200
        # Prometheus's own scrapes, with the right password, were never refused: it sees the same two.
        wait_until(lambda: prom.scalar("sum(spinscope_exporter_auth_failures_total)") == 2, 15,
                   "Prometheus to see the two failures")
        assert prom.scalar('up{job="spinscope"}') == 1
        assert exporter.stop() == 0
        gone = [line for line in exporter.lines if "closed its connection before its answer was sent" in line]
        assert len(gone) <= 1 and not any("Traceback" in line for line in exporter.lines), exporter.lines
        # The client without a certificate is one line (a notice, at most one a minute); nothing else errs.
        handshakes = [line for line in exporter.lines if "TLS handshake error from 127.0.0.1:" in line]
        assert len(handshakes) == (1 if client_certs else 0), exporter.lines
        assert not any("Traceback" in line or "rror" in line for line in exporter.lines
                       if line not in handshakes), exporter.lines
    finally:
        for proc in (prom and prom.proc, exporter and exporter.proc, target):
            stop(proc)


def test_port_in_use_is_one_line_before_attaching():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(spinscope("exporter", "--pid", "1", "--port", str(port)), env=env(),
                                capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"spinscope exporter: error: cannot serve on 127.0.0.1:{port}: Address already in use"]


def test_a_target_that_exits_and_returns(tmp_path):
    # A server under a name of its own, so that --comm matches only it.
    name = f"ssr{time.monotonic_ns() % 10**8}"
    program = tmp_path / name
    shutil.copy(REFSERVER, program)
    exporter = first = second = None
    try:
        exporter = Exporter("--comm", name, "--exe", str(tmp_path / "nothing"))
        exporter.said(rf"--comm {name} matches no process; waiting for one")
        exporter.said(r"--exe \S+/nothing matches no process; waiting for one")
        text = wait_until(lambda: sample(exporter.metrics(), "spinscope_targets") == 0 and exporter.metrics(), 10,
                          "the exposition")
        assert sample(text, "spinscope_selector_matches", selector=f"--comm {name}") == 0
        assert exporter.proc.poll() is None  # it waits

        first, _ = start_server(program=program)
        exporter.said(rf"--comm {name}: tracing PID {first.pid}")
        wait_until(lambda: sample(exporter.metrics(), "spinscope_target_info", pid=first.pid) == 1, 10, "first target")
        stop(first)
        exporter.said(rf"PID {first.pid} exited; its series are dropped")
        wait_until(lambda: sample(exporter.metrics(), "spinscope_targets") == 0, 10, "the target dropped")
        assert sample(exporter.metrics(), "spinscope_target_info", pid=first.pid) is None

        second, _ = start_server(program=program)
        exporter.said(rf"--comm {name}: tracing PID {second.pid}")
        text = wait_until(lambda: sample(exporter.metrics(), "spinscope_target_info", pid=second.pid) == 1
                          and exporter.metrics(), 10, "the returning target")
        assert sample(text, "spinscope_targets") == 1
        assert exporter.stop() == 0
    finally:
        for proc in (exporter and exporter.proc, first, second):
            stop(proc)


def test_several_pids_and_a_pid_that_exits_does_not_come_back():
    target, other = subprocess.Popen(["sleep", "60"]), subprocess.Popen(["sleep", "60"])
    exporter = Exporter("--pid", str(target.pid), "--pid", str(other.pid))
    try:
        exporter.said(rf"tracing PID {target.pid}")
        exporter.said(rf"tracing PID {other.pid}")
        wait_until(lambda: sample(exporter.metrics(), "spinscope_targets") == 2, 10, "two targets")
        stop(target)
        exporter.said(rf"PID {target.pid} exited")
        exporter.said(r"a PID does not come back")
        text = wait_until(lambda: sample(exporter.metrics(), "spinscope_targets") == 1 and exporter.metrics(), 10,
                          "one target left")
        assert sample(text, "spinscope_target_info", pid=other.pid) == 1
        assert sample(text, "spinscope_selector_matches", selector=f"--pid {target.pid}") == 0
        assert exporter.proc.poll() is None
    finally:
        exporter.stop()
        stop(target)
        stop(other)


def test_duty_cycle_samples_and_says_so():
    target = subprocess.Popen(["sleep", "60"])
    exporter = Exporter("--pid", str(target.pid), "--duty", "2/3")
    try:
        exporter.said(rf"tracing PID {target.pid} \(sleep\), 2 s every 3 s")
        # Two cycles: the probes were live about 4 s of about 5.
        traced = wait_until(lambda: (sample(exporter.metrics(), "spinscope_traced_seconds_total") or 0) > 3.5
                            and sample(exporter.metrics(), "spinscope_traced_seconds_total"), 15, "two cycles")
        assert traced < 4.5
        assert sample(exporter.metrics(), "spinscope_sampled_ratio") == pytest.approx(2 / 3)
        stop(target)  # exits while sampled: dropped at its cycle's end or start
        exporter.said(rf"PID {target.pid} (exited|ended)", timeout=10)
    finally:
        exporter.stop()
        stop(target)


def _cgroup2_mount() -> Path | None:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        if after.split(" ")[0] == "cgroup2":
            return Path(before.split(" ")[4])
    return None


def _empty_and_remove(cgroup: Path) -> None:
    if not cgroup.exists():
        return
    for pid in (cgroup / "cgroup.procs").read_text().split():
        subprocess.run(["kill", "-9", pid], capture_output=True)
    wait_until(lambda: not (cgroup / "cgroup.procs").read_text().split(), 10, f"{cgroup} to empty")
    cgroup.rmdir()


@pytest.mark.skipif(_cgroup2_mount() is None, reason="no cgroup v2 hierarchy mounted")
def test_a_cgroup_target_counts_exactly_and_is_followed_when_it_is_made_again():
    """--cgroup before the cgroup exists: it waits; made, it is traced by one collector, every process that
    enters counted under the cgroup's name (no pid label) with the load generator's exact request count;
    removed, its series go; made again, it is traced again."""
    name = f"spinscope-exporter-test-{time.monotonic_ns() % 10**8}"
    cgroup = _cgroup2_mount() / name
    exporter = server = None

    def enter() -> None:
        (cgroup / "cgroup.procs").write_text(str(os.getpid()))

    try:
        exporter = Exporter("--cgroup", str(cgroup))
        exporter.said(rf"--cgroup {cgroup}: no such cgroup; waiting for it")
        assert sample(exporter.metrics(), "spinscope_targets") == 0
        cgroup.mkdir()
        exporter.said(rf"--cgroup {cgroup}: tracing cgroup {cgroup}")
        with load_lock():
            server = subprocess.Popen([REFSERVER, "--arch", "thread-pool", "--port", "0", "--workers", "4"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=enter)
            port = int(re.search(r"listening on \S+:(\d+)", server.stderr.readline()).group(1))
            result = subprocess.run([LOADGEN, "--port", str(port), "--concurrency", "4", "--requests", "3000",
                                     "--path", "/bytes/1000", "--warmup", "0", "--json"],
                                    capture_output=True, text=True, timeout=60, check=True)
        sent = json.loads(result.stdout)
        assert sent["errors"] == 0 and sent["requests"] == 3000
        labels = {"pid": "", "process": name}
        # The connections close after the last response: within a line or two, every request is counted.
        wait_until(lambda: sample(exporter.metrics(), "spinscope_requests_total", **labels) == 3000, 10,
                   "the exporter to count the 3000 requests")
        text = exporter.metrics()
        assert sample(text, "spinscope_target_info", **labels, selector=f"--cgroup {cgroup}") == 1
        threads = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("spinscope_threads{") and 'pid=""' in line and f'process="{name}"' in line]
        assert sum(threads) == 5  # the server's main thread and its 4 workers, summed over roles
        assert sample(text, "spinscope_selector_matches", selector=f"--cgroup {cgroup}") == 1

        stop(server)
        _empty_and_remove(cgroup)
        exporter.said(rf"cgroup {cgroup} was removed; its series are dropped")
        wait_until(lambda: sample(exporter.metrics(), "spinscope_targets") == 0, 10, "the target dropped")
        exporter.said(rf"--cgroup {cgroup}: no such cgroup any more; waiting for it")
        cgroup.mkdir()
        wait_until(lambda: sum(f"tracing cgroup {cgroup}" in line for line in exporter.lines) == 2, 20,
                   "the cgroup traced again")
        wait_until(lambda: sample(exporter.metrics(), "spinscope_targets") == 1, 10, "the target back")
        assert exporter.stop() == 0
    finally:
        stop(exporter and exporter.proc)
        stop(server)
        _empty_and_remove(cgroup)
