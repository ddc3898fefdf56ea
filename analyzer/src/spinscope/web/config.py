"""`spinscope exporter --web-config FILE`: the web configuration file of Prometheus's exporter-toolkit
(node_exporter's `--web.config.file`), which sets TLS and basic authentication for the exporter's endpoint
the way Prometheus's own exporters set them, so one file and one scrape_config serve a fleet of both.

This module is the file: `load` reads and checks the whole of it before anything is attached: every key
is known and honoured or refused by name, the certificate and key load, the client CA loads, every
password hash is bcrypt. A file that is wrong is one line (UsageError, exit 2). What the file asks of a
request (basic auth, the rate limit, the headers) is guard.py's; the endpoint that serves with it, and
loads it again when it changes, server.py's.

What else differs from exporter-toolkit, and why:
- `client_auth_type` RequestClientCert and RequireAnyClientCert (certificates asked for, not verified)
  are refused: Python's ssl module verifies every certificate a client sends. `cipher_suites` and
  `curve_preferences` (Go's names) are refused: OpenSSL's defaults apply. HTTP/2 is not served (an
  `http2` setting is accepted; Prometheus scrapes over HTTP/1.1 either way).
"""

from __future__ import annotations

import collections.abc
import functools
import ipaddress
import os
import re
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from spinscope.errors import UsageError

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

    def warnings(self) -> list:
        """What the file allows that it should not, said when it is loaded (exporter-toolkit says nothing)."""
        if self.users and self.tls is None:
            return [f"--web-config {self.path}: basic_auth_users without tls_server_config: passwords cross the "
                    "network in clear text (add tls_server_config, or bind 127.0.0.1)"]
        return []

    def allows_client(self, cert: dict | None) -> bool:
        """Whether a verified client certificate (getpeercert()) names one of allowed_sans."""
        names = []
        for kind, value in (cert or {}).get("subjectAltName", ()):
            names.append(_san(value.strip()) if kind == "IP Address" else value)
        return any(name in self.allowed_sans for name in names)


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
    doc = _mapping(_parse(path), "the file")
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


def _parse(path: Path):
    """The file's YAML document ({} for an empty file); what is wrong with it said without its text (it
    may hold a key)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise _Refused(f"cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise _Refused("not UTF-8 text") from None
    import yaml  # here, not at the top: the exporter without --web-config does not hold PyYAML (1.3 MiB resident)

    try:
        doc = yaml.load(text, Loader=_strict_loader(yaml))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise _Refused(f"not valid YAML: {exc.problem or exc.context}{where}") from None
    except yaml.reader.ReaderError as exc:  # a control character
        raise _Refused(f"not valid YAML: {exc.reason} (character {exc.position + 1})") from None
    except yaml.YAMLError as exc:
        raise _Refused(f"not valid YAML: {' '.join(str(exc).split())}") from None
    return doc if doc is not None else {}


@functools.cache
def _strict_loader(yaml):
    """PyYAML's safe loader, refusing a key given twice (PyYAML keeps the last; exporter-toolkit's strict Go
    YAML refuses)."""

    class StrictLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, collections.abc.Hashable) and key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"the key {key!r} is given twice",
                                                            key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep)

    return StrictLoader


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
    """(the server's SSLContext, the client SANs allowed) from tls_server_config, checked in the order a
    reader of the file would: its keys, the versions, the certificate and key, the client certificates."""
    get = _tls_strings(doc)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _tls_versions(ctx, get)
    _cipher_preference(ctx, doc)
    _certificate(ctx, get, base)
    auth = _client_auth(get)
    if get["client_ca"] or get["client_ca_file"]:
        _client_ca(ctx, get, base)
        ctx.verify_mode = CLIENT_AUTH[auth]
    return ctx, _allowed_sans(doc, auth)


def _tls_strings(doc: dict) -> dict:
    """The string keys of tls_server_config (None: not given), each PEM given one way, a certificate and a
    key given."""
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
    return get


def _tls_versions(ctx: ssl.SSLContext, get: dict) -> None:
    """min_version and max_version (TLS12 and TLS13 by default, as in exporter-toolkit)."""
    versions = {}
    for key, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        name = get[key] or default
        if name not in TLS_VERSIONS:
            raise _Refused(f"tls_server_config.{key}: {name!r} is not one of {', '.join(TLS_VERSIONS)}")
        versions[key] = TLS_VERSIONS[name]
    if versions["min_version"] > versions["max_version"]:
        raise _Refused("tls_server_config: min_version is above max_version")
    ctx.minimum_version, ctx.maximum_version = versions["min_version"], versions["max_version"]


def _cipher_preference(ctx: ssl.SSLContext, doc: dict) -> None:
    prefer = doc.get("prefer_server_cipher_suites", True)
    if not isinstance(prefer, bool):
        raise _Refused(f"tls_server_config.prefer_server_cipher_suites must be true or false, not {_kind(prefer)}")
    if prefer:
        ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    else:
        ctx.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE


def _certificate(ctx: ssl.SSLContext, get: dict, base: Path) -> None:
    """The server's certificate and its unencrypted key, from files or inline."""
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


def _client_auth(get: dict) -> str:
    """client_auth_type (NoClientCert by default): one that verifies, with a client CA exactly when it
    checks client certificates."""
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
    return auth


def _client_ca(ctx: ssl.SSLContext, get: dict, base: Path) -> None:
    """The CA that signs the client certificates, from a file or inline."""
    try:
        if get["client_ca_file"]:
            ctx.load_verify_locations(cafile=str(_path(get["client_ca_file"], base, "client_ca_file")))
        else:
            ctx.load_verify_locations(cadata=get["client_ca"])
    except (ssl.SSLError, ValueError) as exc:
        raise _Refused(f"tls_server_config: the client CA does not load as PEM certificates "
                       f"({getattr(exc, 'reason', None) or exc})") from None


def _allowed_sans(doc: dict, auth: str) -> tuple:
    """client_allowed_sans, IP addresses in their canonical spelling (empty: any verified certificate)."""
    sans = doc.get("client_allowed_sans")
    if sans is not None:
        if not isinstance(sans, list) or not all(isinstance(s, str) and s for s in sans):
            raise _Refused("tls_server_config.client_allowed_sans must be a list of names (DNS, IP, e-mail, URI)")
        if auth != "RequireAndVerifyClientCert":
            raise _Refused("tls_server_config.client_allowed_sans needs client_auth_type RequireAndVerifyClientCert")
    return tuple(_san(s) for s in sans or ())


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
