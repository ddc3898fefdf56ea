"""Real servers (nginx, Apache, Node.js, Redis, memcached, lighttpd; gunicorn, FastAPI on uvicorn,
HAProxy and a Netty server for the verdict pairs of verdict_pairs.py) on 127.0.0.1, recorded by the
collector while a bounded load runs.

Used by test_realservers.py and by survey.py. A configuration (CONFIGS) is a server, its options and
a load; ``record_config`` starts the server, records it under the load and stops it again:

    run = record_config(CONFIGS["nginx-100"], workdir, docroot)
    run.capture["requests"]["count"], run.load["requests"], run.assessment().labels

Servers run in their own process group and are stopped by PID (SIGTERM, then SIGKILL of that group).
HTTP servers serve /bytes/100 and /bytes/102400 (refserver's body pattern) so build/loadgen drives all
of them. The docroot is a directory in /tmp, not under pytest's tmp_path: nginx, Apache and lighttpd
serve from unprivileged workers, and pytest's temporary root is private to root.

One load at a time on this 2-core machine: every record+load run holds LOAD_LOCK (flock), the lock
other engineers' manual runs take too (`flock /tmp/spinscope-load.lock CMD`).

Other suites' helpers are imported by their module names (unique on purpose; conftest.py names clash).
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
for _suite in ("", "refservers", "collector"):  # survey.py runs this outside pytest too
    if str(TESTS / _suite) not in sys.path:
        sys.path.insert(0, str(TESTS / _suite))

from collector_harness import COLLECTOR, start_collector  # noqa: E402
from machine_lock import LOAD_LOCK, load_lock  # noqa: E402,F401
from refserver_harness import ROOT, ensure_built, expected_body, raise_nofile, run_loadgen  # noqa: E402
from paths import BUILD  # noqa: E402
from spinscope.tracing import stacks_helper  # noqa: E402


def _shards_module():
    """reference-servers/shards/shards.py (free_port, wait_listening), under the name tests/fanout uses."""
    name = "spinscope_shards"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "reference-servers" / "shards" / "shards.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


free_port = _shards_module().free_port
wait_listening = _shards_module().wait_listening

HERE = Path(__file__).resolve().parent
NODE_SERVER = HERE / "bytes_server.js"
APPS = HERE / "apps"  # the Python apps and the Netty server of the verdict pairs
# gunicorn, FastAPI and uvicorn come from Debian's packages (scripts/setup.sh), installed for Debian's
# python3, which may not be the interpreter running the tests: the servers run under this one.
DEBIAN_PYTHON = "/usr/bin/python3"
DIST_PACKAGES = Path("/usr/lib/python3/dist-packages")
NETTY_BUILD = BUILD / "netty"  # netty-all's jars (lib/) and NettyBytes compiled (classes/)
GRPC_BUILD = BUILD / "grpc"  # grpc-netty-shaded's and grpc-stub's jars (lib/) and GrpcBytes compiled (classes/)
GO = "/usr/local/go/bin/go"  # the Go toolchain (or `go` on PATH)
GO_BUILD = BUILD / "gobytes"   # apps/gobytes built (gobytes) and Go's build cache (cache/)
AXUM_BUILD = BUILD / "axumbytes"  # apps/axumbytes built by cargo (target/release/axumbytes)
CARGO = Path.home() / ".cargo" / "bin" / "cargo"  # rustup's (scripts/setup.sh), or `cargo` on PATH
APACHE_MODULES = Path("/usr/lib/apache2/modules")
SETTLE_S = 0.5  # after the load, for the server to read its clients' closes before the probes go
SIZES = (100, 102400)

# ------------------------------------------------------------------ servers


def binary(name: str) -> str | None:
    """The path of an installed program; root's PATH may lack /usr/sbin (nginx, apache2, lighttpd)."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")


@dataclass
class RealServer:
    kind: str
    proc: subprocess.Popen
    port: int
    children: bool  # record with --children (a master with worker processes)
    workdir: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the server's logs in its workdir (for failure messages)."""
        out = []
        for log in sorted(self.workdir.glob("*.log")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {log.name}\n" + "\n".join(text))
        return "\n".join(out)


def stop(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM to the server, then SIGKILL to whatever is left of its process group (its workers)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.wait()


def _nginx(workdir: Path, port: int, docroot: Path, sndbuf: str | None = None, http2: bool = False) -> list[str]:
    """nginx with a master and one worker (the worker runs as nobody); Debian's stock sendfile and
    tcp_nopush, no access log; `listen ... sndbuf=` when asked; `listen ... http2` (cleartext HTTP/2 with
    prior knowledge, h2c: nginx 1.22 then speaks only HTTP/2 on the port) when asked."""
    listen = f"127.0.0.1:{port}" + (f" sndbuf={sndbuf}" if sndbuf else "") + (" http2" if http2 else "")
    (workdir / "nginx.conf").write_text(f"""\
master_process on;
worker_processes 1;
daemon off;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    default_type application/octet-stream;
    client_body_temp_path {workdir}/body;
    proxy_temp_path {workdir}/proxy;
    fastcgi_temp_path {workdir}/fastcgi;
    uwsgi_temp_path {workdir}/uwsgi;
    scgi_temp_path {workdir}/scgi;
    server {{
        listen {listen};
        root {docroot};
    }}
}}
""")
    return [binary("nginx"), "-p", str(workdir), "-c", str(workdir / "nginx.conf"),
            "-e", str(workdir / "error.log")]


APACHE_MPM = {
    # One child with 8 worker threads and its listener thread. More workers than the load's
    # connections: with every worker busy, the listener closes idle keep-alive connections and a
    # request sent on one meanwhile fails.
    "event": """\
StartServers 1
ServerLimit 1
ThreadLimit 8
ThreadsPerChild 8
MinSpareThreads 1
MaxSpareThreads 8
MaxRequestWorkers 8
""",
    # Four single-threaded children, a fixed pool: the load uses at most 4 connections.
    "prefork": """\
StartServers 4
MinSpareServers 4
MaxSpareServers 4
ServerLimit 4
MaxRequestWorkers 4
""",
}


def _apache(workdir: Path, port: int, docroot: Path, mpm: str) -> list[str]:
    """apache2 in the foreground with a minimal config in its own ServerRoot, workers as nobody.
    Keep-alive without Debian's limit of 100 requests per connection: Apache closes the connection
    after the 100th response without saying so (no Connection: close), and the client's next request,
    already sent, fails."""
    (workdir / "apache2.conf").write_text(f"""\
ServerRoot "{workdir}"
ServerName localhost
Listen 127.0.0.1:{port}
PidFile {workdir}/apache2.pid
DefaultRuntimeDir {workdir}
ErrorLog {workdir}/error.log
LogLevel warn
LoadModule mpm_{mpm}_module {APACHE_MODULES}/mod_mpm_{mpm}.so
LoadModule authz_core_module {APACHE_MODULES}/mod_authz_core.so
{APACHE_MPM[mpm]}
User nobody
Group nogroup
KeepAlive On
MaxKeepAliveRequests 0
KeepAliveTimeout 5
DocumentRoot "{docroot}"
<Directory "{docroot}">
    Require all granted
</Directory>
""")
    return [binary("apache2"), "-d", str(workdir), "-f", str(workdir / "apache2.conf"), "-DFOREGROUND"]


def _lighttpd(workdir: Path, port: int, docroot: Path) -> list[str]:
    """lighttpd in the foreground, defaults otherwise, serving as nobody (its error log is stderr: it
    opens a log file only after dropping root)."""
    (workdir / "lighttpd.conf").write_text(f"""\
server.document-root = "{docroot}"
server.bind = "127.0.0.1"
server.port = {port}
server.username = "nobody"
server.groupname = "nogroup"
mimetype.assign = ( "" => "application/octet-stream" )
""")
    return [binary("lighttpd"), "-D", "-f", str(workdir / "lighttpd.conf")]


def _redis(workdir: Path, port: int, docroot: Path, io_threads: int = 1) -> list[str]:
    cmd = [binary("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
           "--appendonly", "no", "--daemonize", "no", "--dir", str(workdir),
           "--logfile", str(workdir / "redis.log")]
    if io_threads > 1:
        cmd += ["--io-threads", str(io_threads), "--io-threads-do-reads", "yes"]
    return cmd


def _memcached(workdir: Path, port: int, docroot: Path, threads: int = 4) -> list[str]:
    cmd = [binary("memcached"), "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", str(threads),
           "-m", "64", "-c", "1024"]
    return cmd + (["-u", "nobody"] if os.geteuid() == 0 else [])  # memcached refuses to run as root


def _node(workdir: Path, port: int, docroot: Path, workers: int = 0) -> list[str]:
    """Node's http module; with workers, under the cluster module (the primary hands each connection to a
    worker over that worker's IPC channel, a socket pair)."""
    return [binary("node"), str(NODE_SERVER), str(port)] + ([str(workers)] if workers else [])


def _gunicorn(workdir: Path, port: int, docroot: Path, workers: int = 4, listener: str = "shared") -> list[str]:
    """gunicorn's sync workers (a master and WORKERS processes) serving apps/wsgi_bytes.py. LISTENER `shared`:
    each worker waits in select() on the master's listener and then accepts (a herd); `epoll-exclusive`: each
    waits on it in epoll with EPOLLEXCLUSIVE (apps/gunicorn_epoll_exclusive.py); `per-worker`: each
    worker binds its own with SO_REUSEPORT (apps/gunicorn_listener_per_worker.py; the master binds a Unix
    socket in WORKDIR). A sync worker closes the connection after each response (no keep-alive)."""
    if listener == "shared":
        bind = ["--bind", f"127.0.0.1:{port}"]
    elif listener == "epoll-exclusive":
        bind = ["--bind", f"127.0.0.1:{port}", "--config", str(APPS / "gunicorn_epoll_exclusive.py")]
    else:
        bind = ["--bind", f"unix:{workdir / 'master.sock'}", "--config", str(APPS / "gunicorn_listener_per_worker.py")]
    return ["/usr/bin/env", f"SPINSCOPE_GUNICORN_PORT={port}", DEBIAN_PYTHON, "-m", "gunicorn", "--workers",
            str(workers), "--worker-class", "sync", *bind, "--chdir", str(APPS), "--error-logfile",
            str(workdir / "error.log"), "--log-level", "warning", "wsgi_bytes:app"]


def _fastapi(workdir: Path, port: int, docroot: Path, endpoint: str = "async") -> list[str]:
    """uvicorn with one worker (a single process, asyncio loop and h11 as Debian ships them) serving
    apps/fastapi_bytes.py with its endpoint declared `def` (run in the thread pool) or `async def`."""
    return ["/usr/bin/env", f"SPINSCOPE_ENDPOINT={endpoint}", DEBIAN_PYTHON, "-m", "uvicorn",
            "--app-dir", str(APPS), "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            "--no-access-log", "--log-level", "warning", "fastapi_bytes:app"]


def haproxy_body(n: int = 100) -> str:
    """What HAProxy answers itself: the /bytes/100 pattern, for every path."""
    return expected_body(n).decode()


def _haproxy(workdir: Path, port: int, docroot: Path, busy_polling: bool = False) -> list[str]:
    """Debian's HAProxy (2.6) in the foreground, one thread, answering every request itself with
    `http-request return` (no backend). `busy-polling` in `global` makes the thread poll without
    sleeping: lower latency for a whole CPU, a trade the documentation describes."""
    (workdir / "haproxy.cfg").write_text(f"""\
global
    nbthread 1
{"    busy-polling" if busy_polling else ""}
defaults
    mode http
    timeout client 10s
    timeout connect 5s
    timeout server 10s
frontend bytes
    bind 127.0.0.1:{port}
    http-request return status 200 content-type application/octet-stream string "{haproxy_body()}"
""")
    return [binary("haproxy"), "-db", "-f", str(workdir / "haproxy.cfg")]


def ensure_java(build: Path, source: Path, pom: Path | None = None, jar: str | None = None) -> Path:
    """SOURCE compiled into BUILD/classes once (again when it changes), against the jars POM's dependencies
    are, fetched by Maven into BUILD/lib the first time (when JAR, a glob, matches none there); returns BUILD."""
    lib, classes = build / "lib", build / "classes"
    if pom is not None and not any(lib.glob(jar)):
        subprocess.run(["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                        f"-DoutputDirectory={lib}"], check=True, capture_output=True, timeout=600)
    compiled = classes / source.with_suffix(".class").name
    if not compiled.exists() or compiled.stat().st_mtime < source.stat().st_mtime:
        subprocess.run(["javac", "-d", str(classes), "-sourcepath", str(source.parent),
                        *(["-cp", f"{lib}/*"] if pom else []), str(source)],
                       check=True, capture_output=True, timeout=300)
    return build


def ensure_netty() -> Path:
    """netty-all (4.1.x, and the jars it depends on) in build/netty/lib, apps/NettyBytes.java compiled into
    build/netty/classes; returns build/netty."""
    return ensure_java(NETTY_BUILD, APPS / "NettyBytes.java", APPS / "pom.xml", "netty-all-4.1.*.jar")


def _netty(workdir: Path, port: int, docroot: Path, executor: bool = False) -> list[str]:
    """apps/NettyBytes.java: the HTTP handler on a DefaultEventExecutorGroup (EXECUTOR) or on the
    event loop."""
    build = ensure_netty()
    # C1 only: the JVM reaches its steady speed within a few seconds of load instead of the 10-15 s C2
    # took here (a 3 s recording after a short warmup would otherwise time the JIT).
    return [binary("java"), "-XX:TieredStopAtLevel=1", "-cp", f"{build / 'classes'}:{build / 'lib'}/*",
            "NettyBytes", str(port), "executor" if executor else "loop"]


def ensure_jdkhttp() -> Path:
    """apps/JdkHttpBytes.java compiled into build/jdkhttp/classes (the JDK only: nothing to fetch)."""
    return ensure_java(BUILD / "jdkhttp", APPS / "JdkHttpBytes.java") / "classes"


def _jdkhttp(workdir: Path, port: int, docroot: Path, pool: bool = False, nodelay: bool = True) -> list[str]:
    """apps/JdkHttpBytes.java: the JDK's HTTP server, each exchange handed to a 4-thread executor (POOL) or
    answered on its dispatcher thread. C1 only, as for Netty. With TCP_NODELAY (NODELAY: the JDK's property
    for it) unless told otherwise: the server writes a response's headers and body apart, and without it
    Nagle's algorithm holds the body for the client's delayed ACK, 40 ms a request (22 requests a second, the
    nagle-stall pair)."""
    return [binary("java"), "-XX:TieredStopAtLevel=1", f"-Dsun.net.httpserver.nodelay={str(nodelay).lower()}",
            "-cp", str(ensure_jdkhttp()), "JdkHttpBytes", str(port), "pool" if pool else "direct"]


def ensure_jboss() -> Path:
    """jboss-threads (and the jars it depends on) in build/jboss/lib, apps/JbossPoolBytes.java (and the
    JdkHttpBytes handler it serves with) compiled into build/jboss/classes; returns build/jboss."""
    return ensure_java(BUILD / "jboss", APPS / "JbossPoolBytes.java", APPS / "jboss" / "pom.xml", "jboss-threads-*.jar")


def _jboss(workdir: Path, port: int, docroot: Path) -> list[str]:
    """apps/JbossPoolBytes.java: the JDK's HTTP server, each exchange handed to a jboss-threads pool of 4. C1
    only and TCP_NODELAY, as _jdkhttp."""
    build = ensure_jboss()
    return [binary("java"), "-XX:TieredStopAtLevel=1", "-Dsun.net.httpserver.nodelay=true",
            "-cp", f"{build / 'classes'}:{build / 'lib'}/*", "JbossPoolBytes", str(port)]


def ensure_grpc() -> Path:
    """grpc-netty-shaded and grpc-stub (1.85.1, and the jars they depend on) in build/grpc/lib,
    apps/grpc/GrpcBytes.java (server and client) compiled into build/grpc/classes; returns build/grpc."""
    return ensure_java(GRPC_BUILD, APPS / "grpc" / "GrpcBytes.java", APPS / "grpc" / "pom.xml",
                       "grpc-netty-shaded-*.jar")


def _grpc_java(build: Path, *args) -> list[str]:
    # C1 only, as Netty's (_netty).
    return [binary("java"), "-XX:TieredStopAtLevel=1", "-cp", f"{build / 'classes'}:{build / 'lib'}/*",
            "GrpcBytes", *map(str, args)]


def _grpc(workdir: Path, port: int, docroot: Path, direct: bool = False) -> list[str]:
    """apps/grpc/GrpcBytes.java's server: a unary method answering 100 bytes, its handler on grpc's default
    executor (a cached thread pool) or on the event loop (directExecutor)."""
    return _grpc_java(ensure_grpc(), "server", port, "direct" if direct else "executor")


def go_toolchain() -> str | None:
    return GO if Path(GO).exists() else binary("go")


def ensure_gobytes() -> Path:
    """apps/gobytes (net/http, the standard library only: it builds offline) built into build/gobytes
    once, Go's build cache beside it; returns the binary."""
    source, out = APPS / "gobytes", GO_BUILD / "gobytes"
    newest = max(f.stat().st_mtime for f in source.iterdir())
    if not out.exists() or out.stat().st_mtime < newest:
        env = {**os.environ, "GOCACHE": str(GO_BUILD / "cache"), "GOPATH": str(GO_BUILD / "gopath"),
               "GOPROXY": "off", "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
        subprocess.run([go_toolchain(), "build", "-o", str(out), "."], cwd=source, env=env, check=True,
                       capture_output=True, timeout=600)
    return out


def _go(workdir: Path, port: int, docroot: Path, gomaxprocs: int | None = None) -> list[str]:
    """apps/gobytes (Go's net/http: a goroutine per connection on Go's scheduler and netpoller), with
    GOMAXPROCS when given (else Go's default: the CPUs it may run on)."""
    env = [f"GOMAXPROCS={gomaxprocs}"] if gomaxprocs else []
    return ["/usr/bin/env", *env, str(ensure_gobytes()), str(port)]


def cargo_toolchain() -> str | None:
    return str(CARGO) if CARGO.exists() else binary("cargo")


def ensure_axumbytes() -> Path:
    """apps/axumbytes (axum 0.8 on tokio, its crates from crates.io at the versions of its Cargo.lock) built
    in release mode with line tables into build/axumbytes once (again when a source changes); returns the
    binary."""
    source, target = APPS / "axumbytes", AXUM_BUILD / "target"
    out = target / "release" / "axumbytes"
    newest = max(f.stat().st_mtime for f in [*source.iterdir(), *(source / "src").iterdir()] if f.is_file())
    if not out.exists() or out.stat().st_mtime < newest:
        subprocess.run([cargo_toolchain(), "build", "--release", "--locked"], cwd=source,
                       env={**os.environ, "CARGO_TARGET_DIR": str(target)}, check=True, capture_output=True,
                       timeout=1200)
    return out


def _axum(workdir: Path, port: int, docroot: Path, mode: str = "inline") -> list[str]:
    """apps/axumbytes: each request's 1 KiB checksum computed inline on the runtime's worker, handed to
    tokio's blocking pool (MODE blocking: spawn_blocking) or to a thread of its own over a channel (channel)."""
    return [str(ensure_axumbytes()), str(port), mode]


def _node_file(workdir: Path, port: int, docroot: Path, mode: str = "readfile") -> list[str]:
    """apps/node_file_bytes.js: each request's file read with fs.readFile (MODE readfile: libuv's thread
    pool) or fs.readFileSync (sync: on the event loop), kept in memory after its first read (memory), or asked
    of a worker thread that keeps it (worker)."""
    return [binary("node"), str(APPS / "node_file_bytes.js"), str(port), str(docroot), mode]


def _tornado(workdir: Path, port: int, docroot: Path, processes: int = 4, mode: str = "shared") -> list[str]:
    """apps/tornado_bytes.py: PROCESSES forked by tornado.process.fork_processes, on one listener bound
    before the fork (MODE shared: all wait on it) or each on its own with reuse_port=True (reuseport)."""
    return [DEBIAN_PYTHON, str(APPS / "tornado_bytes.py"), str(port), str(processes), mode]


@dataclass(frozen=True)
class ServerKind:
    command: object  # (workdir, port, docroot, **options) -> argv
    binaries: tuple
    children: bool = False  # record the parent with --children
    files: tuple = ()  # other files it needs


SERVER_KINDS = {
    "nginx": ServerKind(_nginx, ("nginx",), children=True),
    "apache-event": ServerKind(lambda *a, **kw: _apache(*a, mpm="event", **kw), ("apache2",), children=True,
                               files=(APACHE_MODULES / "mod_mpm_event.so",)),
    "apache-prefork": ServerKind(lambda *a, **kw: _apache(*a, mpm="prefork", **kw), ("apache2",),
                                 children=True, files=(APACHE_MODULES / "mod_mpm_prefork.so",)),
    "lighttpd": ServerKind(_lighttpd, ("lighttpd",)),
    "node": ServerKind(_node, ("node",)),
    "node-cluster": ServerKind(lambda *a, **kw: _node(*a, workers=2, **kw), ("node",), children=True),
    "redis": ServerKind(_redis, ("redis-server", "redis-benchmark")),
    "memcached": ServerKind(_memcached, ("memcached",)),
    "gunicorn": ServerKind(_gunicorn, (DEBIAN_PYTHON,), children=True, files=(DIST_PACKAGES / "gunicorn",)),
    "fastapi": ServerKind(_fastapi, (DEBIAN_PYTHON,),
                          files=(DIST_PACKAGES / "fastapi", DIST_PACKAGES / "uvicorn")),
    "haproxy": ServerKind(_haproxy, ("haproxy",)),
    "netty": ServerKind(_netty, ("java", "javac", "mvn")),
    "grpc": ServerKind(_grpc, ("java", "javac", "mvn")),
    "go": ServerKind(_go, ("go",)),
    "axum": ServerKind(_axum, ("cargo",)),
    "node-file": ServerKind(_node_file, ("node",)),
    "jdkhttp": ServerKind(_jdkhttp, ("java", "javac")),
    "jboss": ServerKind(_jboss, ("java", "javac", "mvn")),
    "tornado": ServerKind(_tornado, (DEBIAN_PYTHON,), children=True, files=(DIST_PACKAGES / "tornado",)),
}


def missing_binaries(kind: str) -> list[str]:
    """What is not installed of what server KIND needs (scripts/setup.sh installs all of it)."""
    need = SERVER_KINDS[kind]
    found = {"go": go_toolchain, "cargo": cargo_toolchain}
    return [b for b in need.binaries if (found[b]() if b in found else binary(b)) is None] + \
        [str(f) for f in need.files if not f.exists()]


@contextlib.contextmanager
def start_server(kind: str, workdir: Path, docroot: Path, **options):
    """A running server of KIND listening on a free 127.0.0.1 port; stopped (with its workers) on exit.
    Config files and logs go to WORKDIR. Option cpus="0" runs it under `taskset -c 0` (it and every
    thread and process it starts; taskset execs the server, so the PID is the server's)."""
    spec = SERVER_KINDS[kind]
    cpus = options.pop("cpus", None)
    pin = ["taskset", "-c", cpus] if cpus else []
    workdir.mkdir(parents=True, exist_ok=True)
    raise_nofile()
    for attempt in range(3):  # a free port can be taken before the server binds it
        port = free_port()
        with open(workdir / "stderr.log", "wb") as log:
            proc = subprocess.Popen(pin + spec.command(workdir, port, docroot, **options), cwd=workdir,
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        server = RealServer(kind, proc, port, spec.children, workdir)
        try:
            wait_listening(port, proc, timeout=10.0)
            break
        except RuntimeError:
            stop(proc)
            if attempt == 2:
                raise RuntimeError(f"{kind} did not start (exit code {proc.returncode})\n"
                                   f"{server.log_tail()}") from None
    try:
        if spec.children:
            _wait_for_children(server)
        yield server
    finally:
        stop(proc)


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _wait_for_children(server: RealServer, timeout: float = 10.0) -> None:
    """A master is listening before its workers exist; record only once they do."""
    deadline = time.monotonic() + timeout
    while not _children(server.pid):
        if time.monotonic() > deadline or server.proc.poll() is not None:
            raise RuntimeError(f"{server.kind} started no worker process\n{server.log_tail()}")
        time.sleep(0.05)
    time.sleep(0.2)  # let the workers finish their start-up before the collector adopts them


@contextlib.contextmanager
def docroot():
    """/bytes/100 and /bytes/102400 in a world-readable temporary directory under /tmp (removed after)."""
    root = Path(tempfile.mkdtemp(prefix="spinscope-www-"))
    try:
        (root / "bytes").mkdir()
        for n in SIZES:
            (root / "bytes" / str(n)).write_bytes(expected_body(n))
        for path in (root, root / "bytes", *(root / "bytes").iterdir()):
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------ loads


class LoadgenLoad:
    """build/loadgen, closed loop on keep-alive connections for `duration` s, no warmup, and the
    requests in flight at the end awaited (--drain): it counts every request the server saw."""
    duration: float

    def args(self) -> list:
        raise NotImplementedError

    def run(self, port: int) -> dict:
        return run_loadgen(port, *self.args(), "--duration", self.duration, "--warmup", 0, "--drain",
                           timeout=self.duration + 60)


@dataclass(frozen=True)
class HttpLoad(LoadgenLoad):
    path: str
    concurrency: int = 20
    duration: float = 3.0
    rcvbuf: int = 0  # client receive buffer (a small TCP window); 0: the default
    keepalive: bool = True  # False: a new connection for each request (Connection: close)

    def args(self) -> list:
        args = ["--path", self.path, "--concurrency", self.concurrency]
        args += [] if self.keepalive else ["--keepalive", "off"]
        return args + (["--rcvbuf", self.rcvbuf] if self.rcvbuf else [])

    def describe(self) -> str:
        window = f", {self.rcvbuf} B client windows" if self.rcvbuf else ""
        connections = "connections" if self.keepalive else "clients, a new connection per request"
        return f"GET {self.path}, {self.concurrency} {connections}{window}"


@dataclass(frozen=True)
class H2Load:
    """h2load (Debian's nghttp2-client): exactly REQUESTS GETs of PATH over CLIENTS cleartext HTTP/2
    connections (prior knowledge), STREAMS concurrent streams on each."""
    path: str
    requests: int = 4000
    clients: int = 4
    streams: int = 10

    def run(self, port: int) -> dict:
        out = subprocess.run([binary("h2load"), "-n", str(self.requests), "-c", str(self.clients),
                              "-m", str(self.streams), f"http://127.0.0.1:{port}{self.path}"],
                             check=True, capture_output=True, text=True, timeout=120)
        # "requests: 4000 total, 4000 started, 4000 done, 4000 succeeded, 0 failed, 0 errored, 0 timeout"
        line = next(line for line in out.stdout.splitlines() if line.startswith("requests:"))
        counts = {word: int(number) for number, word in
                  (part.split()[:2] for part in line.removeprefix("requests:").split(","))}
        return {"requests": counts["succeeded"], "errors": counts["failed"] + counts["errored"],
                "connections": self.clients, "streams": self.streams}

    def describe(self) -> str:
        return f"h2load {self.requests} x GET {self.path}, {self.clients} connections x {self.streams} streams"


@dataclass(frozen=True)
class GrpcLoad:
    """apps/grpc/GrpcBytes.java's client (gRPC-Java, h2c): CHANNELS channels (a connection each), OUTSTANDING
    unary calls in flight on each for `duration` s, then the calls in flight awaited: it counts every call
    the server answered."""
    channels: int = 4
    outstanding: int = 1
    duration: float = 3.0

    def run(self, port: int) -> dict:
        out = subprocess.run(_grpc_java(ensure_grpc(), "client", port, self.channels, self.outstanding,
                                        self.duration), check=True, capture_output=True, text=True,
                             timeout=self.duration + 90)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        return {"requests": result["calls"], "errors": result["errors"], "connections": self.channels}

    def describe(self) -> str:
        return f"gRPC unary calls, {self.channels} channels x {self.outstanding} outstanding"


@dataclass(frozen=True)
class MemcacheLoad(LoadgenLoad):
    """get/set (MIX by weight) on keep-alive connections."""
    concurrency: int = 8
    duration: float = 3.0
    mix: str = "9:get,1:set"
    value_bytes: int = 100

    def args(self) -> list:
        return ["--protocol", "memcache", "--mix", self.mix, "--value-bytes", self.value_bytes,
                "--concurrency", self.concurrency]

    def describe(self) -> str:
        return f"memcache {self.mix} ({self.value_bytes} B values), {self.concurrency} connections"


@dataclass(frozen=True)
class RedisLoad:
    """redis-benchmark: exactly REQUESTS requests of each command in TESTS over CLIENTS connections."""
    requests: int = 50000
    clients: int = 50
    tests: str = "set,get"
    value_bytes: int = 100

    def run(self, port: int) -> dict:
        out = subprocess.run([binary("redis-benchmark"), "-h", "127.0.0.1", "-p", str(port), "-c",
                              str(self.clients), "-n", str(self.requests), "-t", self.tests,
                              "-d", str(self.value_bytes), "-r", "10000", "--csv"],
                             check=True, capture_output=True, text=True, timeout=120)
        rows = [line.split('","') for line in out.stdout.splitlines() if line.startswith('"')][1:]
        rps = {row[0].strip('"'): float(row[1]) for row in rows}
        assert len(rps) == len(self.tests.split(",")), out.stdout + out.stderr
        total = self.requests * len(rps)
        duration = sum(self.requests / r for r in rps.values())
        return {"requests": total, "errors": 0, "duration_s": round(duration, 4),
                "throughput": round(total / duration, 2), "by_test": rps}

    def describe(self) -> str:
        return f"redis-benchmark {self.tests} x {self.requests}, {self.clients} clients"


def collector_program() -> Path:
    """The collector to record with: $SPINSCOPE_COLLECTOR when set (as for the analyzer: another
    checkout's build, to record with its probes), else this checkout's build/spinscope-collector."""
    return Path(os.environ.get("SPINSCOPE_COLLECTOR") or COLLECTOR)


@contextlib.contextmanager
def recording(server: RealServer, output: Path, interval: float = 1.0, stacks: int = 0):
    """The collector attached to SERVER (with --children for a master) for the body of the with; then
    SETTLE_S for the server to see its clients go, and the collector stopped (SIGINT) and waited for.
    With STACKS (a rate), --stacks, and for a CPython, JVM or Node server the runtime stacks helper beside
    it, as `spinscope record --stacks` runs them (its samples folded into the capture after).
    The caller holds the load lock."""
    extra = ["--children"] if server.children else []
    helper = runtime_helper(server, output, stacks) if stacks else None
    if stacks:
        extra += ["--stacks", str(stacks)]
    if helper is not None:
        extra += ["--tag-timeline", str(helper.timeline)]
    collector, err = start_collector(server.pid, output, *extra, "--interval", f"{interval:g}",
                                     program=collector_program())
    try:
        yield
        time.sleep(SETTLE_S)
    finally:
        collector.send_signal(signal.SIGINT)
        try:
            code = collector.wait(timeout=60)
        except subprocess.TimeoutExpired:
            collector.kill()
            collector.wait()
            raise
        finally:
            if helper is not None:
                helper.stop()
    assert code == 0, f"collector exited with {code}: {err.seen}"
    if helper is not None:
        assert helper.error is None, f"the runtime stacks helper: {helper.error}"
        stacks_helper.fold_into(output, helper.out, {"runtime": stacks_helper.runtime_of(server.pid)}, helper.timeline)
        helper.out.unlink(missing_ok=True)
        helper.cleanup()


def runtime_helper(server: RealServer, output: Path, hz: int):
    """The runtime stacks helper sampling SERVER, started, when it runs a runtime the helper unwinds
    (None for native servers); a failure to find or start it fails the test that asked for stacks."""
    runtime = stacks_helper.runtime_of(server.pid) or next(
        (r for r in map(stacks_helper.runtime_of, _children(server.pid)) if r), None)
    if runtime is None:
        return None
    binary = stacks_helper.find()
    assert binary is not None, f"{stacks_helper.HELPER_NAME} not built (scripts/build-stacks-helper.sh)"
    helper = stacks_helper.Helper(binary, server.pid, hz, output.with_name(output.name + ".runtime-stacks"),
                                  server.children, runtime)
    assert helper.start(), f"the runtime stacks helper did not start: {helper.error}"
    return helper



def record_under_load(server: RealServer, output: Path, load, interval: float = 1.0) -> tuple[Path, dict]:
    """Attach the collector to SERVER (with --children for a master), run LOAD to its end (the load
    generators finish the requests they started), let the server see its clients go, then stop the
    collector (SIGINT) and wait for it.

    Returns (capture path, load result with "requests": what the client completed)."""
    with load_lock(), recording(server, output, interval):
        result = load.run(server.port)
    return output, result


# ------------------------------------------------------------------ configurations


@dataclass(frozen=True)
class Config:
    name: str
    server: str  # a SERVER_KINDS key
    load: object  # HttpLoad, MemcacheLoad or RedisLoad
    options: dict = field(default_factory=dict)  # server options (sndbuf, io_threads, threads, cpus, ...)
    about: str = ""
    warmup_s: float = 0.0  # load before the recording, unrecorded (a JIT compiling the hot paths)


def _configs(*configs: Config) -> dict:
    return {c.name: c for c in configs}


CONFIGS = _configs(
    Config("nginx-100", "nginx", HttpLoad("/bytes/100"), about="nginx, 1 worker, Debian's defaults"),
    Config("nginx-sndbuf16k-100k-rcv4k", "nginx", HttpLoad("/bytes/102400", rcvbuf=4096, duration=4.0),
           {"sndbuf": "16k"}, "nginx, listen sndbuf=16k, clients with 4 KB windows"),
    Config("nginx-sndbuf16k-100k", "nginx", HttpLoad("/bytes/102400"), {"sndbuf": "16k"},
           "nginx, listen sndbuf=16k, normal clients"),
    Config("apache-event-100", "apache-event", HttpLoad("/bytes/100", concurrency=4),
           about="Apache event MPM, 1 child x 8 threads"),
    Config("apache-prefork-100", "apache-prefork", HttpLoad("/bytes/100", concurrency=4),
           about="Apache prefork MPM, 4 children"),
    Config("node-100k-rcv4k", "node", HttpLoad("/bytes/102400", rcvbuf=4096, duration=4.0),
           about="Node.js http, clients with 4 KB windows"),
    Config("node-100", "node", HttpLoad("/bytes/100"), about="Node.js http"),
    Config("node-cluster-100", "node-cluster", HttpLoad("/bytes/100"),
           about="Node.js http under the cluster module: a primary handing connections to 2 workers"),
    # Every request on a new connection: the primary hands each to a worker over its IPC channel, and the
    # worker acknowledges it (schema 4 counted those messages as requests too: about 1.7 per request).
    Config("node-cluster-close", "node-cluster", HttpLoad("/bytes/100", keepalive=False),
           about="Node.js cluster, primary + 2 workers, a connection per request"),
    Config("redis", "redis", RedisLoad(), about="Redis, single-threaded"),
    # Fewer requests: on 2 cores threaded I/O ran from 30 K down to 6 K requests/s (its I/O thread
    # busy-waits for work, competing with the main thread and the client for the CPUs).
    Config("redis-io-threads", "redis", RedisLoad(requests=30000), {"io_threads": 2},
           about="Redis, --io-threads 2 --io-threads-do-reads yes"),
    # The same on one CPU: the I/O thread busy-waits for the main thread's hand-over on the CPU the main
    # thread needs (about 1,900 requests/s here, against 3,800 unpinned), so fewer requests still.
    Config("redis-io-threads-cpu0", "redis", RedisLoad(requests=10000), {"io_threads": 2, "cpus": "0"},
           about="Redis, --io-threads 2 --io-threads-do-reads yes, under taskset -c 0"),
    Config("memcached", "memcached", MemcacheLoad(), about="memcached -t 4"),
    Config("lighttpd-100", "lighttpd", HttpLoad("/bytes/100"), about="lighttpd"),
    Config("lighttpd-100k", "lighttpd", HttpLoad("/bytes/102400"), about="lighttpd"),
)

# The bad and good configurations of verdict_pairs.py's pairs (not in CONFIGS: test_realservers.py's checks
# run over CONFIGS; these are recorded in pairs by verdict_pairs.py). The loads are short: a pair is
# recorded several times, alternating.
# One client, a new connection per request: the workers wait in select() between connections, so each
# connection wakes them all (at 4 clients they are mostly busy serving and the herd barely shows: 0.06
# futile wakeups per request, against 0.56 at one client).
HERD_LOAD = HttpLoad("/bytes/100", concurrency=1, keepalive=False)
NODE_MODES = {"readfile": "fs.readFile per request (libuv's pool)", "memory": "the file kept in memory",
              "worker": "the file asked of a worker thread (worker_threads) per request",
              "sync": "fs.readFileSync per request (the same reads on the event loop, nothing handed over)"}
AXUM_MODES = {"blocking": "per request through spawn_blocking", "inline": "inline",
              "channel": "per request to a thread of its own over std's mpsc, back over a tokio oneshot"}
VERDICT_CONFIGS = _configs(
    Config("gunicorn-w4", "gunicorn", HERD_LOAD, {"workers": 4},
           "gunicorn, 4 sync workers on 2 CPUs, a new connection per request"),
    Config("gunicorn-w1", "gunicorn", HERD_LOAD, {"workers": 1},
           "gunicorn, 1 sync worker, a new connection per request"),
    Config("gunicorn-w4-exclusive", "gunicorn", HERD_LOAD, {"workers": 4, "listener": "epoll-exclusive"},
           "gunicorn, 4 sync workers waiting on the shared listener in epoll with EPOLLEXCLUSIVE, a new connection "
           "per request"),
    Config("gunicorn-w4-own-listeners", "gunicorn", HERD_LOAD, {"workers": 4, "listener": "per-worker"},
           "gunicorn, 4 sync workers each on a listener of its own (SO_REUSEPORT, bound after the fork), a new "
           "connection per request"),
    *(Config(f"fastapi-{endpoint}-c{clients}", "fastapi", HttpLoad("/bytes/100", concurrency=clients),
             {"endpoint": endpoint}, f"FastAPI on uvicorn (1 worker), `{endpoint}` endpoint, {clients} clients")
      for endpoint in ("def", "async") for clients in (1, 16)),
    Config("haproxy-busy-polling", "haproxy", HttpLoad("/bytes/100", concurrency=1), {"busy_polling": True},
           "HAProxy, 1 thread, busy-polling, answering itself, 1 client"),
    Config("haproxy", "haproxy", HttpLoad("/bytes/100", concurrency=1), {"busy_polling": False},
           "HAProxy, 1 thread, answering itself, 1 client"),
    # 4 s of load first: the JIT compiles the request path (JIT threads' CPU would count otherwise).
    Config("netty-executor", "netty", HttpLoad("/bytes/100", concurrency=4), {"executor": True},
           "Netty 4.1 NIO, handler on a DefaultEventExecutorGroup(4), 4 connections", warmup_s=4.0),
    Config("netty-loop", "netty", HttpLoad("/bytes/100", concurrency=4), {"executor": False},
           "Netty 4.1 NIO, handler on the event loop, 4 connections", warmup_s=4.0),
    Config("netty-executor-cpu0", "netty", HttpLoad("/bytes/100", concurrency=4), {"executor": True, "cpus": "0"},
           "Netty 4.1 NIO, handler on a DefaultEventExecutorGroup(4), under taskset -c 0, 4 connections",
           warmup_s=4.0),
    Config("jdkhttp-pool", "jdkhttp", HttpLoad("/bytes/100", concurrency=1), {"pool": True},
           "the JDK's HTTP server (com.sun.net.httpserver), each exchange on a 4-thread executor, 1 client",
           warmup_s=4.0),
    Config("jdkhttp-direct", "jdkhttp", HttpLoad("/bytes/100", concurrency=1), {"pool": False},
           "the JDK's HTTP server, each exchange answered on its dispatcher thread, 1 client", warmup_s=4.0),
    # Nagle's algorithm holds each body for the client's delayed ACK: 12-25 requests a second, so 6 s of load
    # for the 50 requests a finding is judged from.
    Config("jdkhttp-nagle", "jdkhttp", HttpLoad("/bytes/100", concurrency=1, duration=6.0),
           {"pool": False, "nodelay": False},
           "the JDK's HTTP server without -Dsun.net.httpserver.nodelay=true, answering on its dispatcher thread, "
           "1 client", warmup_s=4.0),
    # Go's net/http: a goroutine per connection, multiplexed on GOMAXPROCS threads by Go's scheduler, which
    # parks and wakes threads itself (its netpoller): no selector role, no dispatch the user wrote.
    *(Config(f"go-p{procs}-c16", "go", HttpLoad("/bytes/100", concurrency=16), {"gomaxprocs": procs},
             f"Go net/http, GOMAXPROCS={procs}, 16 keep-alive clients") for procs in (1, 2)),
    # Pinned to one CPU and saturated (16 clients on a CPU it shares with nothing of its own): its polls
    # all return events, the loop is busy, not busy-polling.
    Config("go-cpu0-c16", "go", HttpLoad("/bytes/100", concurrency=16), {"cpus": "0"},
           "Go net/http under taskset -c 0 (GOMAXPROCS 1, Go's default there), 16 keep-alive clients"),
    # The runtimes and pool libraries no code of the analyzer names (issue 39): libuv's thread pool under
    # Node's fs.readFile, tokio's blocking pool under axum. 1 and 16 keep-alive clients.
    *(Config(f"node-{mode}-c{clients}", "node-file", HttpLoad("/bytes/100", concurrency=clients), {"mode": mode},
             f"Node, {NODE_MODES[mode]}, {clients} clients", warmup_s=4.0)
      for mode in NODE_MODES for clients in (1, 16)),
    *(Config(f"axum-{mode}-c{clients}", "axum", HttpLoad("/bytes/100", concurrency=clients), {"mode": mode},
             f"axum/tokio, a 1 KiB checksum {AXUM_MODES[mode]}, {clients} clients", warmup_s=1.0)
      for mode in AXUM_MODES for clients in (1, 16)),
    # Held out (issue 39): recorded only once the rule was fixed, as they came out (test_verdict_pairs.py).
    Config("jboss-pool", "jboss", HttpLoad("/bytes/100", concurrency=1), {},
           "the JDK's HTTP server, each exchange on a jboss-threads EnhancedQueueExecutor of 4, 1 client",
           warmup_s=4.0),
    Config("tornado-shared", "tornado", HERD_LOAD, {"mode": "shared"},
           "Tornado, 4 processes forked on one listener (fork_processes), a new connection per request"),
    Config("tornado-reuseport", "tornado", HERD_LOAD, {"mode": "reuseport"},
           "Tornado, 4 processes each with its own listener (reuse_port=True), a new connection per request"),
)


# HTTP/2 (h2c): the load generator's requests are multiplexed streams, which a capture does not count (it
# counts exchanges: docs/capture-format.md, h2_connections). Apart from CONFIGS, whose request counts are
# held to the load generator's.
# gRPC-Java unary calls (h2c): a request is a stream, 1 or 16 outstanding on each of 4 channels, the handler on
# grpc's executor (each call handed to a worker thread) or on the event loop (directExecutor).
GRPC_CONFIGS = _configs(*(
    Config(f"grpc-{where}-c{outstanding}", "grpc", GrpcLoad(outstanding=outstanding), {"direct": where == "direct"},
           f"gRPC-Java 1.85 (grpc-netty-shaded), handler on {'the event loop (directExecutor)' if where == 'direct' else 'the default executor'}, "
           f"4 channels x {outstanding} outstanding unary calls", warmup_s=4.0)
    for where in ("executor", "direct") for outstanding in (1, 16)))

H2_CONFIGS = _configs(
    Config("nginx-h2c-100", "nginx", H2Load("/bytes/100"), {"http2": True},
           about="nginx, listen http2 (cleartext, prior knowledge), 4 connections x 10 streams"),
)


@dataclass
class Run:
    """One recorded configuration: the capture (path and document) and the load generator's result."""
    config: Config
    path: Path
    capture: dict
    load: dict

    def analysis(self):
        from spinscope.analysis.capture import load
        from spinscope.analysis.metrics import analyze
        return analyze(load(self.path))

    def assessment(self):
        from spinscope.analysis.labels import assess
        return assess(self.analysis())


def ensure_ready() -> None:
    """Build the collector and loadgen (cheap when up to date)."""
    ensure_built()
    subprocess.run(["make", "-s", "-C", str(ROOT), "collector"], check=True, stdout=subprocess.DEVNULL)


def warm_up(server: RealServer, config: Config) -> None:
    """CONFIG's load for its warmup_s, unrecorded (nothing when 0), under the load lock."""
    if config.warmup_s:
        with load_lock():
            dataclasses.replace(config.load, duration=config.warmup_s).run(server.port)


def record_config(config: Config, workdir: Path, www: Path, capture_dir: Path | None = None) -> Run:
    """Start CONFIG's server, record it under its load, stop it. The capture is
    CAPTURE_DIR/<name>.json (default: WORKDIR)."""
    output = (capture_dir or workdir) / f"{config.name}.json"
    with start_server(config.server, workdir / "server", www, **config.options) as server:
        warm_up(server, config)
        path, result = record_under_load(server, output, config.load)
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.kind} exited during the run\n{server.log_tail()}")
    return Run(config, path, json.loads(path.read_text()), result)


# ------------------------------------------------------------------ fixtures (imported by the test modules)


@pytest.fixture(scope="session")
def www():
    """The shared docroot of the HTTP servers."""
    with docroot() as root:
        yield root


@pytest.fixture
def realserver(tmp_path, www):
    """Factory fixture: realserver(kind, **options) -> RealServer; all stopped after the test."""
    with contextlib.ExitStack() as stack:
        def start(kind: str, **options) -> RealServer:
            if missing := missing_binaries(kind):
                pytest.skip(f"{kind}: {', '.join(missing)} not installed (scripts/setup.sh installs it)")
            return stack.enter_context(start_server(kind, tmp_path / kind, www, **options))
        yield start
