"""How the exporter's endpoint speaks HTTP: as Go's net/http and exporter-toolkit do, which is what
Prometheus users know. `/metrics` serves the metrics (GET, and HEAD: the same headers, no body), `/` a
landing page that links them, any other path `404 page not found`; no `Server` header; a request whose
headers are too large gets 431 in plain text, read to its end first (closing with bytes unread would reset
the connection before the client reads the answer); a client that goes away before its answer is sent is
one line at most (Notices), never a traceback.

wsgiref (the standard library's WSGI server, which prometheus_client's own endpoint uses) does the parsing;
this module sets what it answers and how it fails.
"""

from __future__ import annotations

import re
import socket
import sys
import threading
import time
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler

LINGER_READ_S = 2.0  # after an error answer: how long one read of what the client still sends may wait
LINGER_BYTES = 16 << 20  # and how much of it is read at most (the header deadline bounds the time too)
NOTICE_EVERY_S = 60.0  # a kind of client notice is said at most once in this time

NOT_FOUND = b"404 page not found\n"  # Go's http.NotFound
ALLOW = "GET, HEAD, OPTIONS"  # the methods /metrics answers (any other: 405)


def landing_page(name: str, description: str, version: str) -> bytes:
    """exporter-toolkit's landing page, in short: the exporter's name and a link to its metrics (relative,
    so that it holds behind a proxy's path prefix)."""
    import html

    return (f'<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="UTF-8"><title>{html.escape(name)}</title></head>\n'
            f"<body>\n<h1>{html.escape(name)}</h1>\n<p>{html.escape(description)}</p>\n"
            '<ul><li><a href="metrics">Metrics</a></li></ul>\n'
            f"<p>version: {html.escape(version)}</p>\n</body>\n</html>\n").encode()


def routed(metrics, landing: bytes):
    """The WSGI app of the endpoint's paths: `metrics` (a WSGI app) at /metrics, `landing` at /, 404 else."""

    def app(environ, start_response):
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
        if path == "/metrics":
            if method == "HEAD":
                return _head(metrics, environ, start_response)

            def allowing(status, headers, exc_info=None):  # prometheus_client's Allow, with HEAD
                headers = [(name, ALLOW if name.lower() == "allow" else value) for name, value in headers]
                return start_response(status, headers, exc_info)

            return metrics(environ, allowing)
        if path == "/":
            body, status, kind = landing, "200 OK", "text/html; charset=utf-8"
        else:
            body, status, kind = NOT_FOUND, "404 Not Found", "text/plain; charset=utf-8"
        start_response(status, [("Content-Type", kind), ("Content-Length", str(len(body)))])
        return [b"" if method == "HEAD" else body]

    return app


def _head(app, environ, start_response) -> list:
    """HEAD as Go's net/http answers it: the GET's status and headers (its length too), no body."""
    answer: list = []

    def start(status, headers, exc_info=None):
        answer[:] = [status, headers]
        return lambda data: None

    result = app({**environ, "REQUEST_METHOD": "GET"}, start)
    try:
        length = sum(len(chunk) for chunk in result)
    finally:
        if hasattr(result, "close"):
            result.close()
    status, headers = answer
    if not any(name.lower() == "content-length" for name, _ in headers):
        headers = [*headers, ("Content-Length", str(length))]
    start_response(status, headers)
    return [b""]


class Notices:
    """Lines about clients (one went away before its answer was sent, a TLS handshake failed): a scrape
    timeout, a health check or a scanner does this all day, so each kind is said at most once every
    NOTICE_EVERY_S, with how many more there were since."""

    def __init__(self, say, every: float = NOTICE_EVERY_S, clock=time.monotonic):
        self.say, self.every, self.clock = say, every, clock
        self.lock = threading.Lock()
        self.kinds: dict = {}  # kind -> [when said, how many not said since]

    def __call__(self, kind: str, line: str) -> None:
        with self.lock:
            now = self.clock()
            said = self.kinds.get(kind)
            if said is not None and now - said[0] < self.every:
                said[1] += 1
                return
            more = said[1] if said else 0
            self.kinds[kind] = [now, 0]
        self.say(line + (f" ({more} more like it since the last such line)" if more else ""))


def reason(exc: BaseException) -> str:
    """An OSError's words, without OpenSSL's source position: `EOF occurred in violation of protocol`."""
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return re.sub(r"\s*\(_ssl\.c:\d+\)$", "", text)


class Answer(ServerHandler):
    """wsgiref's response writer, without its `Server` header (Go's net/http sends none) and without a
    traceback when the client has gone: a write that fails after the app answered is the client's doing,
    said as one notice."""

    server_software = None

    def handle_error(self):
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError) and self.status is not None:  # the app answered: writing it failed
            handler = self.request_handler
            handler.server.notices("gone", f"{_peer(handler.client_address)} closed its connection before its "
                                   f"answer was sent ({reason(exc)})")
            self.close()
            return
        super().handle_error()


def _peer(address) -> str:
    host, port = address[0], address[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Handler(WSGIRequestHandler):
    """One connection's request: parsed by http.server, answered by Answer. Errors (431 for headers too
    large, 414, 400) are plain text with the status's own words, as Go's."""

    error_message_format = "%(code)d %(message)s\n"
    error_content_type = "text/plain; charset=utf-8"
    failed = False

    def handle(self):
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:
            self.requestline, self.request_version, self.command = "", "", ""
            self.send_error(414)
            return
        if not self.parse_request():  # an error was answered
            return
        answer = Answer(self.rfile, self.wfile, self.get_stderr(), self.get_environ(), multithread=False)
        answer.request_handler = self
        answer.run(self.server.get_app())

    def parse_request(self) -> bool:
        """The request line and headers read: from here the connection has the response's deadline."""
        if not super().parse_request():
            return False
        self.server.headers_read()
        return True

    def send_error(self, code, message=None, explain=None):
        """The status's own phrase (http.server's would say `Line too long`), and the rest of the request
        read before the connection is closed (finish)."""
        self.failed = True
        super().send_error(code)

    def send_response(self, code, message=None):
        """http.server's, without the `Server` header."""
        self.log_request(code)
        self.send_response_only(code, message)
        self.send_header("Date", self.date_time_string())

    def finish(self):
        super().finish()
        if self.failed:
            _linger(self.connection)

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        """A scrape is not news; refusals are counted in the metric instead."""


def _linger(conn) -> None:
    """After an error answer to a request not read to its end: say we are done writing, then read and
    drop what the client still sends until it closes (LINGER_BYTES at most; the connection's deadline
    bounds the time). Closing with bytes unread would send a reset, and the client, still sending its
    oversized headers, would lose the answer (a 431 it never sees)."""
    try:
        conn.settimeout(LINGER_READ_S)
        conn.shutdown(socket.SHUT_WR)  # on a TLS connection: from here its raw bytes, which are dropped
        read = 0
        while read < LINGER_BYTES:
            data = conn.recv(65536)
            if not data:
                break
            read += len(data)
    except (OSError, ValueError):
        pass
