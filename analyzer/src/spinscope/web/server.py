"""The exporter's HTTP endpoint: `serve` binds it and serves prometheus_client's WSGI app, plain or as the
web configuration file says (config.py: TLS; guard.py: the rate limit, headers and basic auth in
front of the app). Its bounds: at most MAX_CONNECTIONS connections at once, each in a thread of its own
(the TLS handshake in that thread: a client that stalls it never holds the listener), each with a deadline
for its handshake and request headers and one for its response.

The file is read again when it, or a certificate or key it names, changes (a renewed certificate, a
changed Kubernetes Secret), as exporter-toolkit does; a change that does not load is said once and the
configuration before it kept (the toolkit fails each request until the file is fixed).
"""

from __future__ import annotations

import collections
import heapq
import itertools
import os
import socket
import ssl
import threading
import time
from wsgiref.simple_server import WSGIServer

from spinscope.errors import UsageError
from spinscope.web.config import WebConfig, load
from spinscope.web.guard import AuthFailures, guarded
from spinscope.web.protocol import Handler, Notices, landing_page, reason, routed

# The endpoint's bounds, as Go's net/http and Prometheus set them: a node's exporter is scraped by a few
# Prometheus servers, one connection per scrape, each over in milliseconds.
MAX_CONNECTIONS = 40  # served at once (node_exporter's --web.max-requests); more wait in the listen queue
LISTEN_BACKLOG = 128  # connections the kernel holds for us while every slot is taken
HEADER_TIMEOUT_S = 10.0  # from accept: the TLS handshake, the request line and headers (Go's ReadHeaderTimeout)
RESPONSE_TIMEOUT_S = 30.0  # from the headers read: the response computed and written (Go's WriteTimeout)


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

    def __init__(self, app, config: WebConfig, registry, say=lambda message: None, auth_failures=None):
        self.app, self.registry, self.say, self.auth_failures = app, registry, say, auth_failures
        self.failures = None
        self.lock = threading.Lock()
        self._use(config)
        self.stamp = _stamp(config)

    def _use(self, config: WebConfig) -> None:
        if config.users and self.failures is None and self.auth_failures is not None:
            self.failures = AuthFailures(*self.auth_failures)  # registered with the first users, kept from then on
            self.registry.register(self.failures)
        self.config, self.guard = config, guarded(self.app, config, self.failures)
        for warning in config.warnings():  # at start, and at each load of a changed file
            self.say(f"warning: {warning}")

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

    def fire(self, entry: list) -> None:
        """Shut the socket down now, as if its deadline had passed (unless it was cancelled or done)."""
        with self._cond:
            if entry[2] is None:
                return
            _shut_down(entry[2])
            entry[2] = None
            self._cancelled += 1  # in the heap, done: dropped as a cancelled one is

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


PLAIN_TO_TLS = (b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
                b"Client sent an HTTP request to an HTTPS server.\n")  # Go's answer, which Prometheus users know


class Server(WSGIServer):
    """prometheus_client's WSGI server, bounded: at most `max_connections` connections at once, each in a
    thread of its own. Beyond them, connections wait in the kernel's listen queue until one ends, as
    behind Prometheus's own --web.max-connections (Go's netutil.LimitListener): the threads, descriptors
    and memory an endpoint on a node's network can be made to hold are bounded. But a connection that has
    not sent its request headers yet holds its slot only until a new connection needs it: with every slot
    taken, the one that has waited longest for its headers is closed, so idle connections cannot hold a
    scrape back (a scrape sends its headers at once). Each connection has
    `header_timeout` from its accept to its request headers (the TLS handshake included) and
    `response_timeout` from there to its end, so a client that connects and says nothing, or says it a
    byte at a time, loses its connection and frees its slot. TLS is done in the connection's own thread
    (prometheus_client wraps the listening socket: its handshakes run one at a time in the accept loop,
    where one silent client stops every scrape)."""

    request_queue_size = LISTEN_BACKLOG
    current: Current | None = None

    def __init__(self, address, handler, max_connections: int = MAX_CONNECTIONS,
                 header_timeout: float = HEADER_TIMEOUT_S, response_timeout: float = RESPONSE_TIMEOUT_S,
                 say=lambda message: None):
        super().__init__(address, handler, bind_and_activate=False)
        self.slots = threading.BoundedSemaphore(max_connections)
        self.waiting: collections.OrderedDict = collections.OrderedDict()  # before their headers, oldest first
        self.waiting_lock = threading.Lock()
        self.notices = Notices(say)
        self.header_timeout, self.response_timeout = header_timeout, response_timeout
        self.watchdog = Watchdog()
        self.local = threading.local()  # .fd and .deadline of the connection this thread serves

    def get_request(self):
        """Accept a connection (serve_forever asks only when one is there) once a slot is free: with every
        slot taken, the connection that has waited longest for its request headers is closed to make room.
        No slot within half a second (every one serving a request) is an OSError, which serve_forever
        takes as nothing accepted: it goes round again, and sees a shutdown()."""
        if not self.slots.acquire(blocking=False):
            with self.waiting_lock:
                oldest = self.waiting.popitem(last=False)[1] if self.waiting else None
            if oldest is not None:
                self.watchdog.fire(oldest)  # its thread's read ends: it gives its slot back
            if not self.slots.acquire(timeout=0.5):
                raise OSError("every connection slot is serving a request")
        try:
            return super().get_request()
        except BaseException:
            self.slots.release()
            raise

    def process_request(self, request, client_address):
        """The connection's handshake and headers deadline runs from its accept; its thread serves it."""
        deadline = self.watchdog.arm(request.fileno(), self.header_timeout)
        with self.waiting_lock:
            self.waiting[deadline[1]] = deadline
        try:
            threading.Thread(target=self._connection, args=(request, client_address, deadline),
                             name="spinscope-http-connection", daemon=True).start()
        except BaseException:  # no thread: the caller closes the request
            self._served(deadline)
            self.watchdog.cancel(deadline)
            self.slots.release()
            raise

    def _connection(self, request, client_address, deadline: list) -> None:
        self.local.fd, self.local.deadline = request.fileno(), deadline
        conn = request
        try:
            conn, serve = self._handshake(request, client_address)
            if serve:
                self.finish_request(conn, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self._served(deadline)
            self.watchdog.cancel(self.local.deadline)  # first: once closed, the fd is the next one's
            self.shutdown_request(conn)
            if conn is not request:
                request.close()  # detached by the TLS wrap: nothing left to close but the object
            self.slots.release()

    def headers_read(self) -> None:
        """The request is in: its connection now has response_timeout to answer it (protocol.Handler), and
        is no longer one that a new connection may close to take its slot."""
        self._served(self.local.deadline)
        self.watchdog.cancel(self.local.deadline)
        self.local.deadline = self.watchdog.arm(self.local.fd, self.response_timeout)

    def _served(self, header_deadline: list) -> None:
        with self.waiting_lock:
            self.waiting.pop(header_deadline[1], None)

    def _handshake(self, request, client_address) -> tuple:
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
        except ssl.SSLError as exc:  # a failed handshake (no client certificate, an unknown CA): its own end
            if not isinstance(exc, ssl.SSLEOFError):  # not a client (or a deadline) that just closed
                host, port = client_address[:2]
                self.notices("tls", f"TLS handshake error from {f'[{host}]' if ':' in host else host}:{port}: "
                             f"{reason(exc)}")
            return conn, False
        except (OSError, ValueError):  # gone: reset, or closed by its deadline
            return conn, False
        if config.allowed_sans and not config.allows_client(conn.getpeercert()):
            return conn, False
        return conn, True

    def handle_error(self, request, client_address):
        """A client that went away mid-response: nothing to report (the base class prints a traceback)."""

    def server_close(self):
        super().server_close()
        self.watchdog.close()


def serve(address: str, port: int, registry, config: WebConfig | None, say=lambda message: None,
          max_connections: int = MAX_CONNECTIONS, header_timeout: float = HEADER_TIMEOUT_S,
          response_timeout: float = RESPONSE_TIMEOUT_S, auth_failures: tuple | None = None) -> Server:
    """Bind address:port and serve the registry's metrics at /metrics (protocol.routed: a landing page at
    /), in a thread, as `config` says (None: plain HTTP, no file), within the bounds Server describes.
    `say`: for the file's warnings, a change of it, loaded or refused, and clients' notices (at most one a
    minute of each kind). `auth_failures`: (name, help) of the counter of basic-auth refusals, registered in
    the registry once the file has users (None: not counted). Raises OSError when the address cannot be
    bound."""
    from prometheus_client import make_wsgi_app

    from spinscope import __version__

    app = routed(make_wsgi_app(registry), landing_page(
        "spinscope exporter", "What a network server's threads do, for Prometheus: write-spin, spurious "
        "select, handoff overhead and their evidence.", __version__))
    family = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    server_class = type("Server", (Server,), {"address_family": family})
    server = server_class((address, port), Handler, max_connections, header_timeout, response_timeout, say)
    try:
        server.server_bind()
        server.server_activate()
    except OSError:
        server.server_close()
        raise
    if config is None:
        server.set_app(app)
    else:
        current = server.current = Current(app, config, registry, say, auth_failures)
        server.set_app(lambda environ, start_response: current.get()[1](environ, start_response))
    threading.Thread(target=server.serve_forever, name="spinscope-http", daemon=True).start()
    return server


def url(address: str, port: int, config: WebConfig | None) -> str:
    host = f"[{address}]" if ":" in address else address
    return f"{'https' if config is not None and config.tls is not None else 'http'}://{host}:{port}/metrics"
