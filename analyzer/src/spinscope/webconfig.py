"""`spinscope exporter --web-config FILE`: TLS and basic authentication for the exporter's endpoint, set
the way Prometheus's own exporters set them: the web configuration file of Prometheus's exporter-toolkit
(node_exporter's `--web.config.file`), so one file and one scrape_config serve a fleet of both.

`load` reads and checks the whole file before anything is attached: every key is known and honoured or
refused by name, the certificate and key load, the client CA loads, every password hash is bcrypt. A
file that is wrong is one line (UsageError, exit 2). `serve` binds the endpoint: at most MAX_CONNECTIONS
connections at once, each in a thread of its own (the TLS handshake in that thread: a client that stalls it
never holds the listener), each with a deadline for its handshake and request headers and one for its
response; then the rate limit, the configured headers and the basic-auth check in front of
prometheus_client's WSGI app.

The file is read again when it, or a certificate or key it names, changes (a renewed certificate, a
changed Kubernetes Secret), as exporter-toolkit does; a change that does not load is said once and the
configuration before it kept (the toolkit fails each request until the file is fixed).

What else differs from exporter-toolkit, and why:
- `client_auth_type` RequestClientCert and RequireAnyClientCert (certificates asked for, not verified)
  are refused: Python's ssl module verifies every certificate a client sends. `cipher_suites` and
  `curve_preferences` (Go's names) are refused: OpenSSL's defaults apply. HTTP/2 is not served (an
  `http2` setting is accepted; Prometheus scrapes over HTTP/1.1 either way).

Basic auth: a bcrypt check costs about 100 ms by design (cost 10), too much for every 15 s scrape, so a
credential that passed is remembered, keyed by an HMAC-SHA256 of (user, stored hash, password) under a
key drawn at start: the cache holds no password, and its keys are useless outside this process. Checks
not in the cache run one at a time (a flood of wrong passwords costs one core, not all), and an unknown
user is checked against a decoy hash of the same cost, so the time taken does not tell which users
exist. Every refusal (401, `WWW-Authenticate: Basic`) counts in spinscope_exporter_auth_failures_total
(reason: missing, no Basic credentials; wrong, an unknown user or a wrong password: the two are not told
apart, to the client or in the metric).
"""

from __future__ import annotations

import base64
import binascii
import collections
import collections.abc
import hashlib
import heapq
import hmac
import ipaddress
import itertools
import os
import re
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

import yaml

from spinscope.errors import UsageError

AUTH_FAILURES = "spinscope_exporter_auth_failures"  # a counter: the exposition says ..._total
AUTH_FAILURE_REASONS = ("missing", "wrong")
CACHE_SIZE = 64  # credentials remembered after a bcrypt check passed (a handful of scrapers, really)
# The endpoint's bounds, as Go's net/http and Prometheus set them: a node's exporter is scraped by a few
# Prometheus servers, one connection per scrape, each over in milliseconds.
MAX_CONNECTIONS = 40  # served at once (node_exporter's --web.max-requests); more wait in the listen queue
LISTEN_BACKLOG = 128  # connections the kernel holds for us while every slot is taken
HEADER_TIMEOUT_S = 10.0  # from accept: the TLS handshake, the request line and headers (Go's ReadHeaderTimeout)
RESPONSE_TIMEOUT_S = 30.0  # from the headers read: the response computed and written (Go's WriteTimeout)

TLS_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
                "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH = {"NoClientCert": ssl.CERT_NONE, "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
               "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}
UNVERIFIED_CLIENT_AUTH = ("RequestClientCert", "RequireAnyClientCert", "RequireClientCert")
# The headers exporter-toolkit lets a file set, and the values it allows (None: any).
HEADERS = {"Strict-Transport-Security": None, "X-Content-Type-Options": ("nosniff",),
           "X-Frame-Options": ("deny", "sameorigin"), "X-XSS-Protection": None, "Content-Security-Policy": None}
TLS_KEYS = ("cert_file", "key_file", "cert", "key", "client_ca_file", "client_ca", "client_auth_type",
            "client_allowed_sans", "min_version", "max_version", "prefer_server_cipher_suites")
UNSUPPORTED_TLS_KEYS = {
    "cipher_suites": "Go's cipher suite names; OpenSSL's defaults apply",
    "curve_preferences": "Go's curve names; OpenSSL's defaults apply",
}
BCRYPT = re.compile(r"\$2[abxy]?\$(\d\d)\$[./A-Za-z0-9]{53}")
GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
GO_UNITS_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass
class WebConfig:
    path: Path
    tls: ssl.SSLContext | None = None
    allowed_sans: tuple = ()  # client certificates must name one of these (empty: any verified one)
    users: dict = field(default_factory=dict)  # user -> bcrypt hash (bytes); empty: no basic auth
    headers: dict = field(default_factory=dict)  # added to every response
    rate: tuple | None = None  # (seconds between requests, burst): a token bucket
    files: tuple = ()  # the files tls_server_config names: a change to one is a change to the configuration

    def describe(self) -> str:
        """What the endpoint asks of a client, for the exporter's `serving` line."""
        parts = []
        if self.tls is not None:
            mode = self.tls.verify_mode
            parts.append("TLS" + {ssl.CERT_REQUIRED: ", client certificates required",
                                  ssl.CERT_OPTIONAL: ", client certificates verified if given"}.get(mode, ""))
        if self.users:
            parts.append(f"basic auth: {len(self.users)} user{'s' if len(self.users) != 1 else ''}")
        if self.rate:
            parts.append(f"rate limit {1 / self.rate[0]:g}/s, burst {self.rate[1]}")
        return ", ".join(parts) or "no TLS, no basic auth"


# ---------------------------------------------------------------------------------------------------------
# The file


class _Refused(Exception):
    """A problem in the file: load() prefixes the option and the file's name."""


def load(path: str) -> WebConfig:
    """The web configuration in `path`, every part checked (certificates loaded, hashes parsed). Raises
    UsageError, one line, naming the key that is wrong."""
    if not path:
        raise UsageError("--web-config needs a file name")
    try:
        return _load(Path(path))
    except _Refused as exc:
        raise UsageError(f"--web-config {path}: {exc}") from None


def _load(path: Path) -> WebConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise _Refused(f"cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise _Refused("not UTF-8 text") from None
    try:
        doc = yaml.load(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as exc:  # said without the file's text: it may hold a key
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise _Refused(f"not valid YAML: {exc.problem or exc.context}{where}") from None
    except yaml.reader.ReaderError as exc:  # a control character
        raise _Refused(f"not valid YAML: {exc.reason} (character {exc.position + 1})") from None
    except yaml.YAMLError as exc:
        raise _Refused(f"not valid YAML: {' '.join(str(exc).split())}") from None
    doc = _mapping(doc if doc is not None else {}, "the file")
    _known(doc, ("tls_server_config", "http_server_config", "basic_auth_users", "rate_limit"), "")
    config = WebConfig(path=path)
    base = path.parent  # relative file names are relative to the file, as in exporter-toolkit
    if doc.get("tls_server_config"):  # an empty one is no TLS, as in exporter-toolkit
        tls = _mapping(doc["tls_server_config"], "tls_server_config")
        config.tls, config.allowed_sans = _tls(tls, base)
        config.files = tuple(base / tls[key] for key in ("cert_file", "key_file", "client_ca_file") if tls.get(key))
    if doc.get("http_server_config") is not None:
        config.headers = _http(_mapping(doc["http_server_config"], "http_server_config"))
    if doc.get("basic_auth_users") is not None:
        config.users = _users(_mapping(doc["basic_auth_users"], "basic_auth_users"))
    if doc.get("rate_limit") is not None:
        config.rate = _rate(_mapping(doc["rate_limit"], "rate_limit"))
    return config


class _StrictLoader(yaml.SafeLoader):
    """A key given twice is refused (PyYAML keeps the last; exporter-toolkit's strict Go YAML refuses)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, collections.abc.Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"the key {key!r} is given twice",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def _mapping(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise _Refused(f"{where} must be a mapping of keys to values, not {_kind(value)}")
    for key in value:
        if not isinstance(key, str):
            raise _Refused(f"{where}: the key {key!r} is not a string (quote it)")
    return value


def _kind(value) -> str:
    return {list: "a list", str: "a string", bool: "true/false", int: "a number", float: "a number",
            type(None): "empty"}.get(type(value), type(value).__name__)


def _known(doc: dict, keys, where: str) -> None:
    for key in doc:
        if key not in keys:
            raise _Refused(f"unknown key {where + key!r} (known: {', '.join(keys)})")


def _string(doc: dict, key: str, where: str) -> str | None:
    value = doc.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _Refused(f"{where}.{key} must be a string, not {_kind(value)}")
    return value


def _tls(doc: dict, base: Path) -> tuple:
    for key, why in UNSUPPORTED_TLS_KEYS.items():
        if doc.get(key):
            raise _Refused(f"tls_server_config.{key} is not supported ({why}); remove it")
    _known(doc, (*TLS_KEYS, *UNSUPPORTED_TLS_KEYS), "tls_server_config.")
    get = {key: _string(doc, key, "tls_server_config") for key in
           ("cert_file", "key_file", "cert", "key", "client_ca_file", "client_ca", "client_auth_type",
            "min_version", "max_version")}
    for inline, file in (("cert", "cert_file"), ("key", "key_file"), ("client_ca", "client_ca_file")):
        if get[inline] and get[file]:
            raise _Refused(f"tls_server_config: give {inline} or {file}, not both")
    if not (get["cert"] or get["cert_file"]):
        raise _Refused("tls_server_config: cert_file (or cert) is missing")
    if not (get["key"] or get["key_file"]):
        raise _Refused("tls_server_config: key_file (or key) is missing")

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = {}
    for key, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        name = get[key] or default
        if name not in TLS_VERSIONS:
            raise _Refused(f"tls_server_config.{key}: {name!r} is not one of {', '.join(TLS_VERSIONS)}")
        versions[key] = TLS_VERSIONS[name]
    if versions["min_version"] > versions["max_version"]:
        raise _Refused("tls_server_config: min_version is above max_version")
    ctx.minimum_version, ctx.maximum_version = versions["min_version"], versions["max_version"]
    prefer = doc.get("prefer_server_cipher_suites", True)
    if not isinstance(prefer, bool):
        raise _Refused(f"tls_server_config.prefer_server_cipher_suites must be true or false, not {_kind(prefer)}")
    if prefer:
        ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    else:
        ctx.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE

    with (_pem(get["cert"], get["cert_file"], base, "cert") as cert,
          _pem(get["key"], get["key_file"], base, "key") as key):
        try:
            ctx.load_cert_chain(cert, key, password=_no_passphrase)
        except _Encrypted:
            raise _Refused("tls_server_config: the key is encrypted; give it unencrypted (a Secret's file, "
                           "readable by root only)") from None
        except ssl.SSLError as exc:
            raise _Refused(f"tls_server_config: the certificate and key do not load as PEM, a certificate and "
                           f"its own private key ({exc.reason or 'not PEM'})") from None

    auth = get["client_auth_type"] or "NoClientCert"
    if auth in UNVERIFIED_CLIENT_AUTH:
        raise _Refused(f"tls_server_config.client_auth_type {auth} is not supported (Python's ssl verifies every "
                       "certificate a client sends): use VerifyClientCertIfGiven or RequireAndVerifyClientCert")
    if auth not in CLIENT_AUTH:
        raise _Refused(f"tls_server_config.client_auth_type: {auth!r} is not one of "
                       f"{', '.join((*CLIENT_AUTH, *UNVERIFIED_CLIENT_AUTH))}")
    has_ca = bool(get["client_ca"] or get["client_ca_file"])
    if has_ca and auth == "NoClientCert":
        raise _Refused("tls_server_config: client_ca_file is given without a client_auth_type that checks "
                       "client certificates (RequireAndVerifyClientCert)")
    if not has_ca and auth != "NoClientCert":
        raise _Refused(f"tls_server_config: client_auth_type {auth} needs client_ca_file, the CA that signs the "
                       "client certificates")
    if has_ca:
        try:
            if get["client_ca_file"]:
                ctx.load_verify_locations(cafile=str(_path(get["client_ca_file"], base, "client_ca_file")))
            else:
                ctx.load_verify_locations(cadata=get["client_ca"])
        except (ssl.SSLError, ValueError) as exc:
            raise _Refused(f"tls_server_config: the client CA does not load as PEM certificates "
                           f"({getattr(exc, 'reason', None) or exc})") from None
        ctx.verify_mode = CLIENT_AUTH[auth]

    sans = doc.get("client_allowed_sans")
    if sans is not None:
        if not isinstance(sans, list) or not all(isinstance(s, str) and s for s in sans):
            raise _Refused("tls_server_config.client_allowed_sans must be a list of names (DNS, IP, e-mail, URI)")
        if auth != "RequireAndVerifyClientCert":
            raise _Refused("tls_server_config.client_allowed_sans needs client_auth_type RequireAndVerifyClientCert")
    return ctx, tuple(_san(s) for s in sans or ())


def _path(name: str, base: Path, key: str) -> Path:
    path = base / name
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise _Refused(f"tls_server_config.{key} {name}: {exc.strerror or exc}") from None
    return path


class _pem:
    """A PEM given inline or as a file, as a path ssl can load: the file's, or an anonymous memory file's
    (the key never touches a disk)."""

    def __init__(self, inline: str | None, name: str | None, base: Path, key: str):
        self.inline, self.name, self.base, self.key, self.fd = inline, name, base, key, None

    def __enter__(self) -> str:
        if self.name:
            return str(_path(self.name, self.base, f"{self.key}_file"))
        self.fd = os.memfd_create(f"spinscope-{self.key}", os.MFD_CLOEXEC)
        os.write(self.fd, self.inline.encode())
        return f"/proc/self/fd/{self.fd}"

    def __exit__(self, *_exc) -> None:
        if self.fd is not None:
            os.close(self.fd)


class _Encrypted(Exception):
    pass


def _no_passphrase():
    """ssl asks for a key's passphrase on the terminal unless given a callback: there is none to give."""
    raise _Encrypted


def _san(name: str) -> str:
    """A SAN as getpeercert() will show it, IP addresses in their one canonical spelling."""
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


def _http(doc: dict) -> dict:
    _known(doc, ("http2", "headers"), "http_server_config.")
    if not isinstance(doc.get("http2", True), bool):
        raise _Refused(f"http_server_config.http2 must be true or false, not {_kind(doc['http2'])}")
    headers = _mapping(doc.get("headers") or {}, "http_server_config.headers")
    for name, value in headers.items():
        if name not in HEADERS:
            raise _Refused(f"http_server_config.headers: {name!r} cannot be set (one of {', '.join(HEADERS)})")
        if not isinstance(value, str) or "\n" in value or "\r" in value:
            raise _Refused(f"http_server_config.headers.{name} must be a one-line string")
        if HEADERS[name] and value not in HEADERS[name]:
            raise _Refused(f"http_server_config.headers.{name}: {value!r} is not one of {', '.join(HEADERS[name])}")
    return {name: value for name, value in headers.items() if value}


def _users(doc: dict) -> dict:
    users = {}
    for user, hashed in doc.items():
        if not user or ":" in user:
            raise _Refused(f"basic_auth_users: {user!r} cannot be a user name (empty, or holds ':', which ends "
                           "the name in basic auth)")
        match = BCRYPT.fullmatch(hashed) if isinstance(hashed, str) else None
        if not match or not 4 <= int(match.group(1)) <= 31:  # the value is a secret: never repeated
            raise _Refused(f"basic_auth_users.{user}: not a bcrypt hash ($2y$10$ and 53 characters, e.g. from "
                           "`htpasswd -nBC 10 \"\" | tr -d ':\\n'`)")
        users[user] = hashed.encode()
    return users


def _rate(doc: dict) -> tuple | None:
    _known(doc, ("interval", "burst"), "rate_limit.")
    interval = doc.get("interval", 0)
    seconds = go_duration(interval) if isinstance(interval, str) else interval
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
        raise _Refused(f"rate_limit.interval: {interval!r} is not a duration (e.g. 1s, 250ms; 0: no limit)")
    if seconds == 0:
        return None
    burst = doc.get("burst", 0)
    if isinstance(burst, bool) or not isinstance(burst, int) or burst < 1:
        raise _Refused(f"rate_limit.burst must be a whole number of requests, at least 1, not {burst!r}")
    return float(seconds), burst


def go_duration(text: str) -> float | None:
    """Seconds in a Go duration (`1s`, `250ms`, `1m30s`, `0`), or None if it is not one."""
    if text == "0":
        return 0.0
    parts = GO_DURATION.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        return None
    return sum(float(number) * GO_UNITS_S[unit] for number, unit in parts)


# ---------------------------------------------------------------------------------------------------------
# Basic auth


class Credentials:
    """The users' bcrypt hashes, and the credentials that passed, remembered by a keyed digest."""

    def __init__(self, users: dict):
        import bcrypt

        self.users = users
        self._key = os.urandom(32)
        self._passed: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()  # the cache
        self._bcrypt = threading.Lock()  # one bcrypt check at a time
        cost = max(int(BCRYPT.fullmatch(h.decode()).group(1)) for h in users.values()) if users else 4
        self._decoy = bcrypt.hashpw(os.urandom(16), bcrypt.gensalt(cost))

    def _digest(self, user: bytes, stored: bytes, password: bytes) -> bytes:
        message = b"".join(len(part).to_bytes(4, "big") + part for part in (user, stored, password))
        return hmac.new(self._key, message, hashlib.sha256).digest()

    def check(self, user: bytes, password: bytes) -> bool:
        """Whether user and password match a configured user, in time that does not say which users exist."""
        import bcrypt

        try:
            stored = self.users.get(user.decode("utf-8"))
        except UnicodeDecodeError:
            stored = None
        digest = self._digest(user, stored or self._decoy, password)
        with self._lock:
            if digest in self._passed:
                self._passed.move_to_end(digest)
                return True
        with self._bcrypt:
            try:
                ok = bcrypt.checkpw(password, stored or self._decoy)
            except ValueError:  # over 72 bytes, which bcrypt would have cut: never a match
                ok = False
        if not ok or stored is None:
            return False
        with self._lock:
            self._passed[digest] = None
            while len(self._passed) > CACHE_SIZE:
                self._passed.popitem(last=False)
        return True

    def cached(self) -> int:
        with self._lock:
            return len(self._passed)


def basic_credentials(header: str | None) -> tuple | None:
    """(user, password) as bytes from an Authorization header, or None if it holds no Basic credentials."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, colon, password = decoded.partition(b":")
    return (user, password) if colon else None


class RateLimit:
    """A token bucket: `burst` requests at once, then one every `interval` seconds (Go's rate.Limiter)."""

    def __init__(self, interval: float, burst: int, clock=time.monotonic):
        self.interval, self.burst, self.clock = interval, burst, clock
        self.tokens, self.at = float(burst), clock()
        self.lock = threading.Lock()

    def allow(self) -> bool:
        with self.lock:
            now = self.clock()
            self.tokens = min(self.burst, self.tokens + (now - self.at) / self.interval)
            self.at = now
            if self.tokens < 1:
                return False
            self.tokens -= 1
            return True


class AuthFailures:
    """spinscope_exporter_auth_failures_total{reason}, as exporter.METRICS names it: a collector like the
    exporter's own (no _created series), both reasons from 0 so that rate() sees the first failure."""

    def __init__(self):
        self.counts = dict.fromkeys(AUTH_FAILURE_REASONS, 0)
        self.lock = threading.Lock()

    def inc(self, reason: str) -> None:
        with self.lock:
            self.counts[reason] += 1

    def describe(self):
        return self.collect()

    def collect(self):
        from prometheus_client.core import CounterMetricFamily

        from spinscope.exporter import FAMILIES

        spec = FAMILIES[AUTH_FAILURES]
        family = CounterMetricFamily(spec.name, spec.help, labels=list(spec.labels))
        with self.lock:
            for reason, count in self.counts.items():
                family.add_metric([reason], count)
        return [family]


def guarded(app, config: WebConfig, failures: AuthFailures | None = None):
    """The WSGI app behind the file's rate limit, headers and basic auth; `failures` counts each 401."""
    credentials = Credentials(config.users) if config.users else None
    limit = RateLimit(*config.rate) if config.rate else None
    extra = list(config.headers.items())

    def refuse(start_response, status: str, headers: list) -> list:
        body = f"{status.split(' ', 1)[1]}\n".encode()
        start_response(status, [("Content-Type", "text/plain; charset=utf-8"),
                                ("Content-Length", str(len(body))), *headers, *extra])
        return [body]

    def guard(environ, start_response):
        if limit is not None and not limit.allow():
            return refuse(start_response, "429 Too Many Requests", [])
        if credentials is not None:
            given = basic_credentials(environ.get("HTTP_AUTHORIZATION"))
            if given is None or not credentials.check(*given):
                if failures is not None:
                    failures.inc("missing" if given is None else "wrong")
                return refuse(start_response, "401 Unauthorized", [("WWW-Authenticate", "Basic")])

        def start(status, headers, exc_info=None):
            return start_response(status, [*headers, *extra], exc_info)

        return app(environ, start)

    return guard


# ---------------------------------------------------------------------------------------------------------
# Serving


def _stamp(config: WebConfig) -> tuple:
    """What says the file, or a file it names, has changed: each one's identity, size and mtime (a
    Kubernetes Secret's files are replaced, not rewritten: a new inode)."""
    stamp = []
    for path in (config.path, *config.files):
        try:
            st = os.stat(path)
            stamp.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError as exc:
            stamp.append(exc.errno)
    return tuple(stamp)


class Current:
    """The configuration each connection is served with: the file's, loaded again when it or a certificate
    it names changes (a renewed certificate, a changed Secret), as exporter-toolkit does. A change that does
    not load is said once and the previous configuration kept: a bad edit never takes the endpoint down."""

    def __init__(self, app, config: WebConfig, registry, say=lambda message: None):
        self.app, self.registry, self.say = app, registry, say
        self.failures = None
        self.lock = threading.Lock()
        self._use(config)
        self.stamp = _stamp(config)

    def _use(self, config: WebConfig) -> None:
        if config.users and self.failures is None:  # registered with the first users, kept from then on
            self.failures = AuthFailures()
            self.registry.register(self.failures)
        self.config, self.guard = config, guarded(self.app, config, self.failures)

    def get(self) -> tuple:
        """(the WebConfig, its guarded WSGI app), loaded again first if the files changed."""
        with self.lock:
            stamp = _stamp(self.config)
            if stamp != self.stamp:
                self.stamp = stamp
                try:
                    config = load(str(self.config.path))
                except UsageError as exc:
                    self.say(f"{exc}; still serving the configuration loaded before")
                else:
                    self._use(config)
                    self.stamp = _stamp(config)  # the files it names now
                    self.say(f"--web-config {config.path}: loaded again ({config.describe()})")
            return self.config, self.guard


class Watchdog:
    """Deadlines for connections: one thread shuts a connection's socket down when its deadline passes,
    which ends the read or write its own thread is blocked in. A socket timeout bounds one call only: a
    client that sends a byte every few seconds (slowloris) would never meet one, and hold its thread for
    good. Go's net/http sets a deadline on the whole exchange instead; this is that deadline."""

    def __init__(self):
        self._cond = threading.Condition()
        self._heap: list = []  # [when, sequence, fd]; fd None once cancelled or done
        self._cancelled = 0  # entries in the heap that are cancelled: dropped when they are half of it
        self._sequence = itertools.count()
        self._closed = False
        threading.Thread(target=self._run, name="spinscope-http-deadlines", daemon=True).start()

    def arm(self, fd: int, seconds: float) -> list:
        """Shut fd's socket down in `seconds` unless cancel() comes first."""
        entry = [time.monotonic() + seconds, next(self._sequence), fd]
        with self._cond:
            heapq.heappush(self._heap, entry)
            self._cond.notify()
        return entry

    def cancel(self, entry: list) -> None:
        """Called before the socket is closed: from then on its fd, which the next connection may be
        given, is never touched (the shutdown runs under the same lock)."""
        with self._cond:
            if entry[2] is None:  # cancelled before, or its deadline passed
                return
            entry[2] = None
            self._cancelled += 1
            if self._cancelled > len(self._heap) // 2:  # a flood of short connections: do not keep them all
                self._heap = [e for e in self._heap if e[2] is not None]
                heapq.heapify(self._heap)
                self._cancelled = 0

    def close(self) -> None:
        """The thread ends once every deadline armed has passed or been cancelled."""
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while self._heap or not self._closed:
                now = time.monotonic()
                while self._heap and (self._heap[0][2] is None or self._heap[0][0] <= now):
                    entry = heapq.heappop(self._heap)
                    if entry[2] is None:
                        self._cancelled -= 1
                    else:
                        _shut_down(entry[2])
                        entry[2] = None  # done: a cancel() after it has nothing to do
                self._cond.wait(self._heap[0][0] - now if self._heap else None)


def _shut_down(fd: int) -> None:
    """Shut down the socket behind fd (both directions) without closing fd, which its connection's thread
    owns: the read or write that thread is in returns at once, an end of file or an error."""
    try:
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # the client closed it first
        pass


class _QuietHandler(WSGIRequestHandler):
    def parse_request(self) -> bool:
        """The request line and headers read: from here the connection has the response's deadline."""
        if not super().parse_request():
            return False
        self.server.headers_read()
        return True

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        """A scrape is not news; refusals are counted in the metric instead."""


PLAIN_TO_TLS = (b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
                b"Client sent an HTTP request to an HTTPS server.\n")  # Go's answer, which Prometheus users know


class Server(WSGIServer):
    """prometheus_client's WSGI server, bounded: at most `max_connections` connections at once, each in a
    thread of its own. Beyond them, connections wait in the kernel's listen queue until one ends, as
    behind Prometheus's own --web.max-connections (Go's netutil.LimitListener): the threads, descriptors
    and memory an endpoint on a node's network can be made to hold are bounded. Each connection has
    `header_timeout` from its accept to its request headers (the TLS handshake included) and
    `response_timeout` from there to its end, so a client that connects and says nothing, or says it a
    byte at a time, loses its connection and frees its slot. TLS is done in the connection's own thread
    (prometheus_client wraps the listening socket: its handshakes run one at a time in the accept loop,
    where one silent client stops every scrape)."""

    request_queue_size = LISTEN_BACKLOG
    current: Current | None = None

    def __init__(self, address, handler, max_connections: int = MAX_CONNECTIONS,
                 header_timeout: float = HEADER_TIMEOUT_S, response_timeout: float = RESPONSE_TIMEOUT_S):
        super().__init__(address, handler, bind_and_activate=False)
        self.slots = threading.BoundedSemaphore(max_connections)
        self.header_timeout, self.response_timeout = header_timeout, response_timeout
        self.watchdog = Watchdog()
        self.local = threading.local()  # .fd and .deadline of the connection this thread serves

    def get_request(self):
        """Accept a connection once a slot is free. No slot within half a second is an OSError, which
        serve_forever takes as nothing accepted: it goes round again, and sees a shutdown()."""
        if not self.slots.acquire(timeout=0.5):
            raise OSError("every connection slot is taken")
        try:
            return super().get_request()
        except BaseException:
            self.slots.release()
            raise

    def process_request(self, request, client_address):
        """The connection's handshake and headers deadline runs from its accept; its thread serves it."""
        deadline = self.watchdog.arm(request.fileno(), self.header_timeout)
        try:
            threading.Thread(target=self._connection, args=(request, client_address, deadline),
                             name="spinscope-http-connection", daemon=True).start()
        except BaseException:  # no thread: the caller closes the request
            self.watchdog.cancel(deadline)
            self.slots.release()
            raise

    def _connection(self, request, client_address, deadline: list) -> None:
        self.local.fd, self.local.deadline = request.fileno(), deadline
        conn = request
        try:
            conn, serve = self._handshake(request)
            if serve:
                self.finish_request(conn, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.watchdog.cancel(self.local.deadline)  # first: once closed, the fd is the next one's
            self.shutdown_request(conn)
            if conn is not request:
                request.close()  # detached by the TLS wrap: nothing left to close but the object
            self.slots.release()

    def headers_read(self) -> None:
        """The request is in: its connection now has response_timeout to answer it (_QuietHandler)."""
        self.watchdog.cancel(self.local.deadline)
        self.local.deadline = self.watchdog.arm(self.local.fd, self.response_timeout)

    def _handshake(self, request) -> tuple:
        """(the connection to serve, whether to serve it): without TLS, the request itself; with TLS, the
        TLS connection once the handshake and the file's client SAN check passed."""
        config = self.current.get()[0] if self.current is not None else None
        if config is None or config.tls is None:
            return request, True
        try:
            first = request.recv(1, socket.MSG_PEEK)
        except OSError:
            return request, False
        if not first:  # gone, or its deadline passed
            return request, False
        if first != b"\x16":  # not a TLS handshake record: plain HTTP, most likely
            try:
                request.sendall(PLAIN_TO_TLS)
            except OSError:
                pass
            return request, False
        conn = config.tls.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        try:
            conn.do_handshake()
        except (OSError, ValueError):  # a failed handshake (no client certificate, an unknown CA): its own end
            return conn, False
        if config.allowed_sans and not _san_allowed(conn.getpeercert(), config.allowed_sans):
            return conn, False
        return conn, True

    def handle_error(self, request, client_address):
        """A client that went away mid-response: nothing to report (the base class prints a traceback)."""

    def server_close(self):
        super().server_close()
        self.watchdog.close()


def _san_allowed(cert: dict | None, allowed: tuple) -> bool:
    names = []
    for kind, value in (cert or {}).get("subjectAltName", ()):
        names.append(_san(value.strip()) if kind == "IP Address" else value)
    return any(name in allowed for name in names)


def serve(address: str, port: int, registry, config: WebConfig | None, say=lambda message: None,
          max_connections: int = MAX_CONNECTIONS, header_timeout: float = HEADER_TIMEOUT_S,
          response_timeout: float = RESPONSE_TIMEOUT_S) -> Server:
    """Bind address:port and serve the registry's metrics on every path, in a thread, as `config` says
    (None: plain HTTP, no file), within the bounds Server describes. `say`: for a change of the file,
    loaded or refused. Raises OSError when the address cannot be bound."""
    from prometheus_client import make_wsgi_app

    app = make_wsgi_app(registry)
    family = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    server_class = type("Server", (Server,), {"address_family": family})
    server = server_class((address, port), _QuietHandler, max_connections, header_timeout, response_timeout)
    try:
        server.server_bind()
        server.server_activate()
    except OSError:
        server.server_close()
        raise
    if config is None:
        server.set_app(app)
    else:
        current = server.current = Current(app, config, registry, say)
        server.set_app(lambda environ, start_response: current.get()[1](environ, start_response))
    threading.Thread(target=server.serve_forever, name="spinscope-http", daemon=True).start()
    return server


def url(address: str, port: int, config: WebConfig | None) -> str:
    host = f"[{address}]" if ":" in address else address
    return f"{'https' if config is not None and config.tls is not None else 'http'}://{host}:{port}/metrics"
