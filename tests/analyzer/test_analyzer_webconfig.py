"""spinscope/web/config.py, guard.py and server.py: `spinscope exporter --web-config FILE`,
exporter-toolkit's web configuration file, and the endpoint that serves with it. Every refusal is one line
naming the key, before anything is attached; basic auth answers 401 with `WWW-Authenticate: Basic`, counts
it, and runs bcrypt once per credential that passed; TLS (and client certificates) on a real local
endpoint. The end-to-end scrape by Prometheus is tests/live/test_exporter.py."""

from __future__ import annotations

import base64
import http.client
import re
import select
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import bcrypt
import pytest
from prometheus_client import CollectorRegistry, Gauge

from certs import Authority
from spinscope.cli import main
from spinscope.errors import UsageError
from spinscope.live import exposition
from spinscope.web import config as webconfig, guard as webguard, protocol as webprotocol, server as webserver
from paths import ROOT

PASSWORD = "correct horse"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict:
    """A CA with a server certificate for 127.0.0.1 and a client's; another CA with a client of its own."""
    d = tmp_path_factory.mktemp("pki")
    ca, other = Authority(d, "ca"), Authority(d, "other-ca")
    return {"dir": d, "ca": ca.cert_file, "server": ca.issue("server", ["127.0.0.1", "localhost"]),
            "client": ca.issue("client", ["scraper.example"], client=True),
            "client2": ca.issue("client2", ["intruder.example"], client=True),
            "stranger": other.issue("stranger", ["scraper.example"], client=True)}


@pytest.fixture(scope="module")
def hashed() -> str:
    return bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()  # cost 4: the tests' speed


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "web.yml"
    path.write_text(text)
    return path


def tls_block(pki: dict, extra: str = "") -> str:
    cert, key = pki["server"]
    return f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n{extra}"


# ---------------------------------------------------------------------------------------------------------
# The file


def test_a_full_file_loads_with_paths_relative_to_it(pki, hashed, tmp_path):
    (tmp_path / "tls").mkdir()
    for name in ("server.pem", "server.key", "ca.pem"):
        (tmp_path / "tls" / name).write_bytes((pki["dir"] / name).read_bytes())
    path = write(tmp_path, f"""
tls_server_config:
  cert_file: tls/server.pem
  key_file: tls/server.key
  client_ca_file: tls/ca.pem
  client_auth_type: RequireAndVerifyClientCert
  client_allowed_sans: [scraper.example, "::1"]
  min_version: TLS13
http_server_config:
  http2: false
  headers: {{X-Frame-Options: deny, Strict-Transport-Security: max-age=3600}}
basic_auth_users:
  prometheus: {hashed}
rate_limit: {{interval: 250ms, burst: 20}}
""")
    config = webconfig.load(str(path))
    assert config.tls.verify_mode == ssl.CERT_REQUIRED
    assert config.tls.minimum_version == ssl.TLSVersion.TLSv1_3
    assert config.tls.maximum_version == ssl.TLSVersion.TLSv1_3
    assert config.allowed_sans == ("scraper.example", "::1")
    assert config.users == {"prometheus": hashed.encode()}
    assert config.headers == {"X-Frame-Options": "deny", "Strict-Transport-Security": "max-age=3600"}
    assert config.rate == (0.25, 20)
    assert config.describe() == "TLS, client certificates required, basic auth: 1 user, rate limit 4/s, burst 20"


def test_defaults_and_empty_parts(pki, hashed, tmp_path):
    config = webconfig.load(str(write(tmp_path, tls_block(pki))))
    assert config.tls.verify_mode == ssl.CERT_NONE
    assert config.tls.minimum_version == ssl.TLSVersion.TLSv1_2  # exporter-toolkit's default
    assert config.tls.options & ssl.OP_CIPHER_SERVER_PREFERENCE
    assert config.users == {} and config.rate is None and config.headers == {}
    # An empty file, an empty tls_server_config, no users, interval 0: nothing asked of a client.
    empty = webconfig.load(str(write(tmp_path, "# nothing\ntls_server_config: {}\nbasic_auth_users: {}\n"
                                               "rate_limit: {interval: 0}\n")))
    assert (empty.tls, empty.users, empty.rate) == (None, {}, None)
    assert empty.describe() == "no TLS, no basic auth"


def test_inline_certificate_and_key(pki, tmp_path):
    cert, key = pki["server"]
    indent = lambda text: "\n".join("    " + line for line in text.splitlines())  # noqa: E731
    config = webconfig.load(str(write(tmp_path, f"tls_server_config:\n  cert: |\n{indent(cert.read_text())}\n"
                                                f"  key: |\n{indent(key.read_text())}\n")))
    assert config.tls is not None


REFUSALS = [  # (file text; {cert}, {key}, {ca}, {hash} filled in), the message after "--web-config FILE: "
    ("tls_server_config: [\n", "not valid YAML: expected the node content, but found "
                               "'<stream end>' at line 2, column 1"),
    ("a: b\x00\n", "not valid YAML: special characters are not allowed (character 5)"),
    ("- a\n- b\n", "the file must be a mapping of keys to values, not a list"),
    ("tls_server_confg: {{}}\n", "unknown key 'tls_server_confg' (known: tls_server_config, http_server_config, "
                               "basic_auth_users, rate_limit)"),
    ("tls_server_config: {{cert_file: {cert}, key_file: {key}, cert_flie: x}}\n",
     "unknown key 'tls_server_config.cert_flie' (known: cert_file, key_file, cert, key, client_ca_file, client_ca, "
     "client_auth_type, client_allowed_sans, min_version, max_version, prefer_server_cipher_suites, "
     "cipher_suites, curve_preferences)"),
    ("tls_server_config: {{cert_file: {cert}, key_file: {key}, cipher_suites: [TLS_AES_128_GCM_SHA256]}}\n",
     "tls_server_config.cipher_suites is not supported (Go's cipher suite names; OpenSSL's defaults apply); "
     "remove it"),
    ("tls_server_config: {{key_file: {key}}}\n", "tls_server_config: cert_file (or cert) is missing"),
    ("tls_server_config: {{cert_file: {cert}}}\n", "tls_server_config: key_file (or key) is missing"),
    ("tls_server_config: {{min_version: TLS13}}\n", "tls_server_config: cert_file (or cert) is missing"),
    ("tls_server_config: {{cert_file: {cert}, key_file: nowhere.key}}\n",
     "tls_server_config.key_file nowhere.key: No such file or directory"),
    ("tls_server_config: {{cert_file: {key}, key_file: {key}}}\n",
     "tls_server_config: the certificate and key do not load as PEM, a certificate and its own private key "
     "(not PEM)"),
    ("tls_server_config: {{cert_file: {cert}, key_file: {otherkey}}}\n",
     "tls_server_config: the certificate and key do not load as PEM, a certificate and its own private key "
     "(KEY_VALUES_MISMATCH)"),
    ("tls_server_config: {{cert_file: {cert}, key_file: {key}, min_version: TLS1.2}}\n",
     "tls_server_config.min_version: 'TLS1.2' is not one of TLS10, TLS11, TLS12, TLS13"),
    ("tls_server_config: {{cert_file: {cert}, key_file: {key}, min_version: TLS13, max_version: TLS12}}\n",
     "tls_server_config: min_version is above max_version"),
    ("tls_server_config: {{cert_file: {cert}, key_file: {key}, client_auth_type: RequireAnyClientCert, "
     "client_ca_file: {ca}}}\n",
     "tls_server_config.client_auth_type RequireAnyClientCert is not supported (Python's ssl verifies every "
     "certificate a client sends): use VerifyClientCertIfGiven or RequireAndVerifyClientCert"),
    ("tls_server_config: {{cert_file: {cert}, key_file: {key}, client_auth_type: Always}}\n",
     "tls_server_config.client_auth_type: 'Always' is not one of NoClientCert, VerifyClientCertIfGiven, "
     "RequireAndVerifyClientCert, RequestClientCert, RequireAnyClientCert, RequireClientCert"),
    ("tls_server_config: {{cert_file: {cert}, key_file: {key}, client_ca_file: {ca}}}\n",
     "tls_server_config: client_ca_file is given without a client_auth_type that checks client certificates "
     "(RequireAndVerifyClientCert)"),
    ("tls_server_config: {{cert_file: {cert}, key_file: {key}, client_auth_type: RequireAndVerifyClientCert}}\n",
     "tls_server_config: client_auth_type RequireAndVerifyClientCert needs client_ca_file, the CA that signs "
     "the client certificates"),
    ("tls_server_config: {{cert_file: {cert}, key_file: {key}, client_auth_type: RequireAndVerifyClientCert, "
     "client_ca_file: {key}}}\n",
     "tls_server_config: the client CA does not load as PEM certificates (NO_CERTIFICATE_OR_CRL_FOUND)"),
    ("tls_server_config: {{cert_file: {cert}, key_file: {key}, client_allowed_sans: [a]}}\n",
     "tls_server_config.client_allowed_sans needs client_auth_type RequireAndVerifyClientCert"),
    ("basic_auth_users: {{alice: {secret}}}\n",
     "basic_auth_users.alice: not a bcrypt hash ($2y$10$ and 53 characters, e.g. from "
     "`htpasswd -nBC 10 \"\" | tr -d ':\\n'`)"),
    ("basic_auth_users: {{alice: {md5}}}\n",
     "basic_auth_users.alice: not a bcrypt hash ($2y$10$ and 53 characters, e.g. from "
     "`htpasswd -nBC 10 \"\" | tr -d ':\\n'`)"),
    ("basic_auth_users:\n  alice: {hash}\n  alice: {hash}\n",
     "not valid YAML: the key 'alice' is given twice at line 3, column 3"),
    ("basic_auth_users: {{'a:b': {hash}}}\n",
     "basic_auth_users: 'a:b' cannot be a user name (empty, or holds ':', which ends the name in basic auth)"),
    ("basic_auth_users: {{123: {hash}}}\n", "basic_auth_users: the key 123 is not a string (quote it)"),
    ("basic_auth_users: [alice]\n", "basic_auth_users must be a mapping of keys to values, not a list"),
    ("http_server_config: {{headers: {{Server: x}}}}\n",
     "http_server_config.headers: 'Server' cannot be set (one of Strict-Transport-Security, "
     "X-Content-Type-Options, X-Frame-Options, X-XSS-Protection, Content-Security-Policy)"),
    ("http_server_config: {{headers: {{X-Frame-Options: allow}}}}\n",
     "http_server_config.headers.X-Frame-Options: 'allow' is not one of deny, sameorigin"),
    ("http_server_config: {{http2: maybe}}\n", "http_server_config.http2 must be true or false, not a string"),
    ("rate_limit: {{interval: 1 second, burst: 5}}\n",
     "rate_limit.interval: '1 second' is not a duration (e.g. 1s, 250ms; 0: no limit)"),
    ("rate_limit: {{interval: 1s}}\n", "rate_limit.burst must be a whole number of requests, at least 1, not 0"),
]


@pytest.mark.parametrize("text, message", REFUSALS, ids=[m.split(":")[0][:40] + str(i) for i, (_, m) in
                                                           enumerate(REFUSALS)])
def test_a_bad_file_is_one_line_naming_the_key(pki, hashed, tmp_path, text, message):
    cert, key = pki["server"]
    path = write(tmp_path, text.format(cert=cert, key=key, ca=pki["ca"], otherkey=pki["client"][1], hash=hashed,
                                       secret="hunter2", md5="$apr1$abcdefgh$0123456789abcdefghijkl"))
    with pytest.raises(UsageError) as refused:
        webconfig.load(str(path))
    assert str(refused.value) == f"--web-config {path}: {message}"
    assert refused.value.exit_code == 2
    assert "hunter2" not in str(refused.value) and "$apr1$" not in str(refused.value)  # a secret is never said


def test_a_file_that_cannot_be_read(tmp_path):
    for path, why in ((tmp_path / "missing.yml", "No such file or directory"), (tmp_path, "Is a directory")):
        with pytest.raises(UsageError, match=f"^--web-config {path}: cannot read it: {why}$"):
            webconfig.load(str(path))


def test_an_encrypted_key_is_refused_without_asking_for_a_passphrase(pki, tmp_path):
    from cryptography.hazmat.primitives import serialization

    cert, key = pki["server"]
    loaded = serialization.load_pem_private_key(key.read_bytes(), None)
    locked = tmp_path / "locked.key"
    locked.write_bytes(loaded.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.BestAvailableEncryption(b"pass")))
    with pytest.raises(UsageError, match="tls_server_config: the key is encrypted; give it unencrypted"):
        webconfig.load(str(write(tmp_path, f"tls_server_config: {{cert_file: {cert}, key_file: {locked}}}\n")))


def test_the_exporter_refuses_a_bad_file_before_attaching(tmp_path, capsys):
    """check_options reads the file: exit 2 and one line, before the collector is even looked for."""
    path = write(tmp_path, "basic_auth_users: {alice: plain}\n")
    assert main(["exporter", "--pid", "1", "--web-config", str(path)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"spinscope exporter: error: --web-config {path}: basic_auth_users.alice: not a bcrypt hash ($2y$10$ and "
        "53 characters, e.g. from `htpasswd -nBC 10 \"\" | tr -d ':\\n'`)"]


def test_a_go_duration():
    assert webconfig.go_duration("1s") == 1.0
    assert webconfig.go_duration("250ms") == 0.25
    assert webconfig.go_duration("1m30s") == 90.0
    assert webconfig.go_duration("1.5h") == 5400.0
    assert webconfig.go_duration("0") == 0.0
    for bad in ("1", "s", "1 s", "1x", "-1s", ""):
        assert webconfig.go_duration(bad) is None


# ---------------------------------------------------------------------------------------------------------
# Basic auth


def test_basic_credentials_from_the_header():
    def basic(raw: bytes) -> str:
        return "Basic " + base64.b64encode(raw).decode()

    assert webguard.basic_credentials(basic(b"alice:pa:ss")) == (b"alice", b"pa:ss")  # split at the first ':'
    assert webguard.basic_credentials(basic(b"alice:")) == (b"alice", b"")
    assert webguard.basic_credentials("basic " + base64.b64encode(b"a:b").decode()) == (b"a", b"b")
    for header in (None, "", "Bearer abc", "Basic !!!", basic(b"no-colon")):
        assert webguard.basic_credentials(header) is None


def test_credentials_check_once_then_remember_by_a_keyed_digest(hashed, monkeypatch):
    creds = webguard.Credentials({"alice": hashed.encode()})
    calls = []
    real = bcrypt.checkpw
    monkeypatch.setattr(bcrypt, "checkpw", lambda password, stored: calls.append(password) or real(password, stored))
    assert creds.check(b"alice", PASSWORD.encode())
    assert creds.check(b"alice", PASSWORD.encode())
    assert creds.check(b"alice", PASSWORD.encode())
    assert calls == [PASSWORD.encode()]  # bcrypt ran once; the next two were the cache
    assert not creds.check(b"alice", b"wrong")
    assert not creds.check(b"alice", b"wrong")  # a failure is not remembered: bcrypt each time
    assert not creds.check(b"mallory", PASSWORD.encode())  # an unknown user: checked against the decoy
    assert not creds.check(b"\xff", PASSWORD.encode())
    assert not creds.check(b"alice", b"x" * 73)  # bcrypt refuses over 72 bytes: never a match
    assert len(calls) == 1 + 2 + 2 + 1
    assert creds.cached() == 1
    key = next(iter(creds._passed))
    assert len(key) == 32 and PASSWORD.encode() not in key  # a digest, not the password


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(webguard, "CACHE_SIZE", 3)
    users = {f"u{i}": bcrypt.hashpw(b"pw", bcrypt.gensalt(4)) for i in range(5)}
    creds = webguard.Credentials(users)
    for user in users:
        assert creds.check(user.encode(), b"pw")
    assert creds.cached() == 3


def test_rate_limit_is_a_token_bucket():
    now = [0.0]
    limit = webguard.RateLimit(1.0, 2, clock=lambda: now[0])
    assert [limit.allow() for _ in range(3)] == [True, True, False]
    now[0] = 0.5
    assert not limit.allow()
    now[0] = 1.0
    assert [limit.allow(), limit.allow()] == [True, False]
    now[0] = 100.0  # a long pause refills to the burst, no more
    assert [limit.allow() for _ in range(3)] == [True, True, False]


# ---------------------------------------------------------------------------------------------------------
# A real endpoint


class Endpoint:
    """webserver.serve on a free port of 127.0.0.1, serving one gauge; what it says is in .said."""

    def __init__(self, config, **bounds):
        self.registry = CollectorRegistry()
        Gauge("spinscope_test_up", "A sample to find in the scrape.", registry=self.registry).set(1)
        self.said = []
        self.server = webserver.serve("127.0.0.1", 0, self.registry, config, self.said.append,
                                      auth_failures=exposition.auth_failures(), **bounds)
        self.port = self.server.server_address[1]
        self.scheme = "https" if config is not None and config.tls is not None else "http"

    def get(self, auth: tuple | None = None, ctx: ssl.SSLContext | None = None, timeout: float = 10) -> tuple:
        """(status, headers, body) of GET /metrics."""
        request = urllib.request.Request(f"{self.scheme}://127.0.0.1:{self.port}/metrics")
        if auth:
            request.add_header("Authorization", "Basic " + base64.b64encode(":".join(auth).encode()).decode())
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=ctx) as response:
                return response.status, response.headers, response.read().decode()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.headers, refused.read().decode()

    def said_within(self, matches, timeout: float = 10) -> list:
        """The lines said that match, once there is one (the server says them from its own threads), or
        [] after timeout seconds."""
        deadline = time.monotonic() + timeout
        while not (lines := [line for line in self.said if matches(line)]) and time.monotonic() < deadline:
            time.sleep(0.02)
        return lines

    def failures(self, reason: str) -> float | None:
        return self.registry.get_sample_value("spinscope_exporter_auth_failures_total", {"reason": reason})

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def client_context(pki: dict, cert: tuple | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki["ca"]))
    if cert:
        ctx.load_cert_chain(*cert)
    return ctx


def test_plain_http_without_a_file():
    endpoint = Endpoint(None)
    try:
        status, _, body = endpoint.get()
        assert status == 200 and "spinscope_test_up 1.0" in body
        assert "spinscope_exporter_auth_failures" not in body  # no basic auth, no counter
    finally:
        endpoint.close()


def test_tls_and_basic_auth(pki, hashed, tmp_path):
    config = webconfig.load(str(write(tmp_path, tls_block(pki) + f"basic_auth_users: {{alice: {hashed}}}\n"
                                      "http_server_config: {headers: {X-Content-Type-Options: nosniff}}\n")))
    endpoint = Endpoint(config)
    ctx = client_context(pki)
    try:
        assert (endpoint.failures("missing"), endpoint.failures("wrong")) == (0, 0)  # both series from the start
        status, headers, _ = endpoint.get(ctx=ctx)
        assert status == 401 and headers["WWW-Authenticate"] == "Basic"
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert endpoint.get(("alice", "wrong"), ctx)[0] == 401
        assert endpoint.get(("mallory", PASSWORD), ctx)[0] == 401
        status, headers, body = endpoint.get(("alice", PASSWORD), ctx)
        assert status == 200 and "spinscope_test_up 1.0" in body
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert 'spinscope_exporter_auth_failures_total{reason="wrong"} 2.0' in body
        assert "spinscope_exporter_auth_failures_created" not in body  # like the exporter's own families
        # The family is exposition.METRICS's (a name is a contract): its help and labels, written only with users.
        spec = exposition.FAMILIES[exposition.AUTH_FAILURES]
        assert spec.when and spec.labels == ("reason",)
        assert f"# HELP spinscope_exporter_auth_failures_total {spec.help}" in body
        if shutil.which("promtool"):
            check = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True)
            assert check.returncode == 0, check.stdout + check.stderr
        assert (endpoint.failures("missing"), endpoint.failures("wrong")) == (1, 2)
        # Plain HTTP to the TLS port gets Go's answer; the endpoint serves on.
        with pytest.raises(urllib.error.HTTPError) as plain:
            urllib.request.urlopen(f"http://127.0.0.1:{endpoint.port}/metrics", timeout=10)
        assert plain.value.code == 400
        assert plain.value.read() == b"Client sent an HTTP request to an HTTPS server.\n"
        assert endpoint.get(("alice", PASSWORD), ctx)[0] == 200
        assert endpoint.failures("missing") == 1
    finally:
        endpoint.close()


def test_client_certificates(pki, tmp_path):
    config = webconfig.load(str(write(tmp_path, tls_block(pki, f"  client_ca_file: {pki['ca']}\n"
                                      "  client_auth_type: RequireAndVerifyClientCert\n"
                                      "  client_allowed_sans: [scraper.example]\n"))))
    endpoint = Endpoint(config)
    try:
        assert endpoint.get(ctx=client_context(pki, pki["client"]))[0] == 200
        for refused in (None, pki["stranger"], pki["client2"]):  # none; another CA's; a SAN not allowed
            with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
                endpoint.get(ctx=client_context(pki, refused))
        assert endpoint.get(ctx=client_context(pki, pki["client"]))[0] == 200
    finally:
        endpoint.close()


def test_a_stalled_handshake_does_not_hold_the_others(pki, tmp_path):
    """A client that connects and says nothing holds its own thread only (prometheus_client's server does
    the handshake in its accept loop: there, this client would stop every scrape)."""
    endpoint = Endpoint(webconfig.load(str(write(tmp_path, tls_block(pki)))))
    silent = socket.create_connection(("127.0.0.1", endpoint.port))
    try:
        assert endpoint.get(ctx=client_context(pki))[0] == 200
    finally:
        silent.close()
        endpoint.close()


def test_the_watchdog_shuts_a_socket_down_at_its_deadline_unless_cancelled():
    watchdog = webserver.Watchdog()
    (late, late_peer), (cancelled, cancelled_peer) = socket.socketpair(), socket.socketpair()
    try:
        kept = watchdog.arm(cancelled.fileno(), 0.5)
        watchdog.cancel(kept)
        watchdog.arm(late.fileno(), 0.5)
        late.settimeout(30)
        assert late.recv(1) == b""  # shut down: the read it was blocked in ends
        cancelled_peer.sendall(b"x")
        assert cancelled.recv(1) == b"x"  # the cancelled deadline never fired
        # A flood of short connections leaves no pile of cancelled deadlines behind.
        for entry in [watchdog.arm(cancelled.fileno(), 3600) for _ in range(1000)]:
            watchdog.cancel(entry)
        assert len(watchdog._heap) <= 1
    finally:
        watchdog.close()
        for sock in (late, late_peer, cancelled, cancelled_peer):
            sock.close()


def connection_threads() -> int:
    return sum(thread.name == "spinscope-http-connection" for thread in threading.enumerate())


def closed_by_the_server(sock: socket.socket, within: float) -> bool:
    """Whether the server ends the connection (an end of file or a reset) within `within` seconds."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_idle_connections_cannot_hold_a_scrape_back(pki, tmp_path, tls):
    """Connections that say nothing (or, with TLS, start a handshake and stop) hold at most max_connections
    threads, and never a scrape back: with every slot taken, a new connection closes the one that has
    waited longest for its headers. The header deadline here (an hour) is far beyond the scrape's timeout,
    so a scrape made to wait for it would fail (it did: 41 idle connections held node scrapes 10 s)."""
    config = webconfig.load(str(write(tmp_path, tls_block(pki)))) if tls else None
    limit = 3
    endpoint = Endpoint(config, max_connections=limit, header_timeout=3600.0)
    ctx = client_context(pki) if tls else None
    idle = [socket.create_connection(("127.0.0.1", endpoint.port)) for _ in range(limit + 2)]
    try:
        if tls:
            idle[-1].sendall(b"\x16\x03\x01")  # the start of a ClientHello, never finished
        # The 4th and 5th each closed the oldest: the first two, in the order they came (the listen queue's).
        assert [closed_by_the_server(sock, within=30) for sock in idle[:2]] == [True, True]
        status, _, body = endpoint.get(ctx=ctx, timeout=60)  # closes the 3rd to get in
        assert status == 200 and "spinscope_test_up 1.0" in body
        assert closed_by_the_server(idle[2], within=30)
        assert connection_threads() <= limit
        assert [endpoint.get(ctx=ctx, timeout=60)[0] for _ in range(2 * limit)] == [200] * (2 * limit)
        assert connection_threads() <= limit
    finally:
        for sock in idle:
            sock.close()
        endpoint.close()


def test_a_request_sent_a_byte_at_a_time_is_cut_at_the_header_deadline():
    """Slowloris: a byte every 50 ms meets no timeout of a single read, but the request headers' deadline
    (1 s here) ends the connection; the endpoint serves on."""
    endpoint = Endpoint(None, header_timeout=1.0)
    drip = socket.create_connection(("127.0.0.1", endpoint.port))
    try:
        request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X-Padding: " + b"a" * 1000
        closed = False
        for byte in request:  # 50 s at most, while the deadline is 1 s
            try:
                drip.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if select.select([drip], [], [], 0.05)[0]:
                closed = closed_by_the_server(drip, within=1)
                break
        assert closed
        assert endpoint.get()[0] == 200
    finally:
        drip.close()
        endpoint.close()


def test_rate_limited_requests_get_429(pki, tmp_path):
    endpoint = Endpoint(webconfig.load(str(write(tmp_path, "rate_limit: {interval: 1h, burst: 2}\n"))))
    try:
        assert [endpoint.get()[0] for _ in range(3)] == [200, 200, 429]
    finally:
        endpoint.close()


# ---------------------------------------------------------------------------------------------------------
# The files that show it: docs/live.md and deploy/kubernetes/




def test_the_docs_example_loads(pki, tmp_path):
    import re

    text = (ROOT / "docs" / "live.md").read_text()
    example = re.search(r"```yaml\n# /etc/spinscope/web.yml\n(.*?)```", text, re.S).group(1)
    cert, key = pki["server"]
    (tmp_path / "exporter.crt").write_bytes(cert.read_bytes())
    (tmp_path / "exporter.key").write_bytes(key.read_bytes())
    config = webconfig.load(str(write(tmp_path, example)))
    assert config.describe() == "TLS, basic auth: 1 user"


def test_the_daemonset_serves_the_secrets_web_config(pki, tmp_path):
    import yaml

    spec = yaml.safe_load((ROOT / "deploy" / "kubernetes" / "daemonset.yaml").read_text())["spec"]["template"]["spec"]
    container = spec["containers"][0]
    args = container["args"]
    web = Path(args[args.index("--web-config") + 1])
    mount = next(m for m in container["volumeMounts"] if Path(m["mountPath"]) == web.parent)
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    files = {item["path"]: source["secret"]["name"] for source in volume["projected"]["sources"]
             for item in source["secret"]["items"]}
    assert files == {"web.yml": "spinscope-exporter-web", "tls.crt": "spinscope-exporter-tls",
                     "tls.key": "spinscope-exporter-tls"}
    assert "httpGet" not in container["readinessProbe"]  # /metrics would answer 401
    # The Secret's web.yml, as mounted: refused while its placeholder is there, loaded once it is a hash.
    secret = yaml.safe_load((ROOT / "deploy" / "kubernetes" / "web-config-secret.yaml").read_text())
    assert secret["metadata"]["name"] == "spinscope-exporter-web"
    cert, key = pki["server"]
    (tmp_path / "tls.crt").write_bytes(cert.read_bytes())
    (tmp_path / "tls.key").write_bytes(key.read_bytes())
    text = secret["stringData"][web.name]
    with pytest.raises(UsageError, match="basic_auth_users.prometheus: not a bcrypt hash"):
        webconfig.load(str(write(tmp_path, text)))
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
    config = webconfig.load(str(write(tmp_path, text.replace("REPLACE-WITH-A-BCRYPT-HASH", hashed))))
    assert config.describe() == "TLS, basic auth: 1 user"


def replace(path: Path, data: bytes) -> None:
    """Write as a Kubernetes Secret's volume changes: a new file renamed over the old."""
    new = path.with_name(path.name + ".new")
    new.write_bytes(data)
    new.replace(path)


def test_the_file_is_loaded_again_when_it_or_its_certificate_changes(pki, tmp_path):
    cert, key = pki["server"]
    (tmp_path / "tls.crt").write_bytes(cert.read_bytes())
    (tmp_path / "tls.key").write_bytes(key.read_bytes())

    def users(password: bytes) -> bytes:
        hashed = bcrypt.hashpw(password, bcrypt.gensalt(4)).decode()
        return (f"tls_server_config: {{cert_file: tls.crt, key_file: tls.key}}\n"
                f"basic_auth_users: {{alice: {hashed}}}\n").encode()

    path = tmp_path / "web.yml"
    path.write_bytes(users(b"first"))
    endpoint = Endpoint(webconfig.load(str(path)))
    ctx = client_context(pki)
    try:
        assert endpoint.get(("alice", "first"), ctx)[0] == 200
        assert endpoint.said == []  # nothing changed, nothing said
        replace(path, users(b"second"))
        assert endpoint.get(("alice", "first"), ctx)[0] == 401
        assert endpoint.get(("alice", "second"), ctx)[0] == 200
        assert endpoint.said == [f"--web-config {path}: loaded again (TLS, basic auth: 1 user)"]
        assert endpoint.failures("wrong") == 1  # the counter goes on across the change

        # A renewed certificate, from another CA: clients trusting only the first one now fail.
        renewed = Authority(tmp_path, "renewed-ca")
        new_cert, new_key = renewed.issue("renewed", ["127.0.0.1"])
        replace(tmp_path / "tls.key", new_key.read_bytes())
        replace(tmp_path / "tls.crt", new_cert.read_bytes())
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            endpoint.get(("alice", "second"), ctx)
        renewed_ctx = ssl.create_default_context(cafile=str(renewed.cert_file))
        assert endpoint.get(("alice", "second"), renewed_ctx)[0] == 200
        # The server's thread says the failed handshake after the client has seen it fail: waited for (a run
        # beside a CPU hog asserted before the line was said).
        handshakes = endpoint.said_within(lambda line: line.startswith("TLS handshake error from 127.0.0.1:"))
        assert len(handshakes) == 1 and handshakes[0].endswith(": [SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca")
        endpoint.said.remove(handshakes[0])
        assert endpoint.said[1:] == [f"--web-config {path}: loaded again (TLS, basic auth: 1 user)"]

        # A change that does not load: said once, and the endpoint goes on as it was.
        replace(path, b"basic_auth_users: {alice: plain}\n")
        for _ in range(3):
            assert endpoint.get(("alice", "second"), renewed_ctx)[0] == 200
        assert endpoint.said[2:] == [f"--web-config {path}: basic_auth_users.alice: not a bcrypt hash ($2y$10$ and 53 "
                                     "characters, e.g. from `htpasswd -nBC 10 \"\" | tr -d ':\\n'`); still serving "
                                     "the configuration loaded before"]
    finally:
        endpoint.close()


# ---------------------------------------------------------------------------------------------------------
# HTTP as exporter-toolkit's endpoint speaks it (issue 32)


def test_a_client_that_closes_before_its_answer_is_one_line_never_a_traceback(pki, hashed, tmp_path, capfd):
    """A scrape timeout, a health check or a scanner: an authenticated GET over TLS, closed before reading
    the answer. Each one printed wsgiref's 24-line traceback (ssl.SSLEOFError); now a line, once a minute."""
    config = webconfig.load(str(write(tmp_path, tls_block(pki) + f"basic_auth_users: {{alice: {hashed}}}\n")))
    endpoint = Endpoint(config)
    ctx = client_context(pki)
    request = (b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic "
               + base64.b64encode(f"alice:{PASSWORD}".encode()) + b"\r\n\r\n")
    try:
        for _ in range(5):
            with ctx.wrap_socket(socket.create_connection(("127.0.0.1", endpoint.port)),
                                 server_hostname="127.0.0.1") as impatient:
                impatient.sendall(request)
        assert endpoint.get(("alice", PASSWORD), ctx)[0] == 200  # served on; the five are done before it
        err = capfd.readouterr().err
        assert "Traceback" not in err and err == ""
        assert len(endpoint.said) <= 1
        for line in endpoint.said:
            assert re.fullmatch(r"127\.0\.0\.1:\d+ closed its connection before its answer was sent \(.+\)", line)
    finally:
        endpoint.close()


def test_notices_are_said_once_a_minute_with_how_many_were_not():
    said, now = [], [0.0]
    notices = webprotocol.Notices(said.append, clock=lambda: now[0])
    for t in (0.0, 1.0, 2.0, 30.0, 61.0):
        now[0] = t
        notices("gone", f"at {t:g}")
    notices("tls", "another kind")
    assert said == ["at 0", "at 61 (3 more like it since the last such line)", "another kind"]


def raw(endpoint, request: bytes, ctx: ssl.SSLContext | None = None) -> bytes:
    """What the endpoint answers `request`, read to the end (an end of file or a TLS close)."""
    sock = socket.create_connection(("127.0.0.1", endpoint.port), timeout=30)
    if ctx is not None:
        sock = ctx.wrap_socket(sock, server_hostname="127.0.0.1")
    answer = b""
    with sock:
        sock.sendall(request)
        while True:
            try:
                data = sock.recv(65536)
            except ssl.SSLEOFError:  # the endpoint ended its side without a TLS close (Go's does too)
                break
            if not data:
                break
            answer += data
    return answer


def test_head_the_landing_page_and_no_server_header():
    endpoint = Endpoint(None)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=30)
        answers = {}
        for method, path in (("GET", "/metrics"), ("HEAD", "/metrics"), ("GET", "/"), ("HEAD", "/"),
                             ("GET", "/nothing"), ("POST", "/metrics")):
            conn.request(method, path)
            response = conn.getresponse()
            answers[method, path] = (response.status, response.headers, response.read())
            conn.close()
        status, headers, body = answers["GET", "/metrics"]
        assert status == 200 and b"spinscope_test_up 1.0" in body
        status, head, empty = answers["HEAD", "/metrics"]
        assert (status, empty, head["Content-Type"]) == (200, b"", headers["Content-Type"])
        assert int(head["Content-Length"]) == len(body)
        status, headers, page = answers["GET", "/"]
        assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
        assert b'<a href="metrics">Metrics</a>' in page and b"<title>spinscope exporter</title>" in page
        assert answers["HEAD", "/"][0::2] == (200, b"")
        assert answers["GET", "/nothing"][0::2] == (404, b"404 page not found\n")
        assert (answers["POST", "/metrics"][0], answers["POST", "/metrics"][1]["Allow"]) == (405, "GET, HEAD, OPTIONS")
        assert [headers["Server"] for _, headers, _ in answers.values()] == [None] * len(answers)
    finally:
        endpoint.close()


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_oversized_headers_get_431_in_plain_text(pki, tmp_path, tls):
    """A 1 MB header line (the connection was closed under the client, which never saw a status) and 5,000
    headers (431 with an HTML body): both 431, plain text, as Go's net/http answers; the endpoint serves on."""
    endpoint = Endpoint(webconfig.load(str(write(tmp_path, tls_block(pki)))) if tls else None)
    ctx = client_context(pki) if tls else None
    expected = (b"HTTP/1.0 431 Request Header Fields Too Large\r\n", b"Content-Type: text/plain; charset=utf-8\r\n",
                b"\r\n\r\n431 Request Header Fields Too Large\n")
    try:
        long_line = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * (1 << 20) + b"\r\n\r\n"
        many = b"GET /metrics HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(5000)) + b"\r\n"
        for request in (long_line, many):
            answer = raw(endpoint, request, ctx)
            assert answer.startswith(expected[0]) and expected[1] in answer and answer.endswith(expected[2])
            assert b"Server:" not in answer
        assert endpoint.get(ctx=ctx)[0] == 200
    finally:
        endpoint.close()


def test_basic_auth_without_tls_is_warned_once(pki, hashed, tmp_path):
    path = write(tmp_path, f"basic_auth_users: {{alice: {hashed}}}\n")
    endpoint = Endpoint(webconfig.load(str(path)))
    try:
        assert endpoint.get(("alice", PASSWORD))[0] == 200
        assert endpoint.get(("alice", PASSWORD))[0] == 200
        assert endpoint.said == [f"warning: --web-config {path}: basic_auth_users without tls_server_config: "
                                 "passwords cross the network in clear text (add tls_server_config, or bind 127.0.0.1)"]
    finally:
        endpoint.close()
    with_tls = Endpoint(webconfig.load(str(write(tmp_path, tls_block(pki) + f"basic_auth_users: {{alice: {hashed}}}\n"))))
    try:
        assert with_tls.said == []
    finally:
        with_tls.close()


def test_the_exporter_without_a_file_does_not_load_yaml():
    """PyYAML is imported when a file is read, not with the endpoint's modules (1.3 MiB of the exporter's
    memory, bench/results/server_cost.md)."""
    code = ("import sys, spinscope.live.exporter, spinscope.web.server, spinscope.web.config\n"
            "assert 'yaml' not in sys.modules, 'yaml imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
