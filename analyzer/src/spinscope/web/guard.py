"""What the exporter's endpoint asks of each request, as its web configuration file (config.py) says:
the rate limit, then basic authentication, and the headers added to every response; `guarded` puts them in
front of prometheus_client's WSGI app.

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
import hashlib
import hmac
import os
import threading
import time

from spinscope.web.config import BCRYPT, WebConfig

AUTH_FAILURE_REASONS = ("missing", "wrong")
CACHE_SIZE = 64  # credentials remembered after a bcrypt check passed (a handful of scrapers, really)


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
    """The refusals counted as a Prometheus counter {reason} (a collector: no _created series), both reasons
    from 0 so that rate() sees the first failure. Its name and help are the caller's (the exporter's
    spinscope_exporter_auth_failures, exporter.METRICS): this package knows no metric of its own."""

    def __init__(self, name: str, help: str):  # noqa: A002 (Prometheus's word)
        self.name, self.help = name, help
        self.counts = dict.fromkeys(AUTH_FAILURE_REASONS, 0)
        self.lock = threading.Lock()

    def inc(self, reason: str) -> None:
        with self.lock:
            self.counts[reason] += 1

    def describe(self):
        return self.collect()

    def collect(self):
        from prometheus_client.core import CounterMetricFamily

        family = CounterMetricFamily(self.name, self.help, labels=["reason"])
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
