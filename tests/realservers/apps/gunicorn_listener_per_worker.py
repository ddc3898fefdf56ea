"""A gunicorn config file (`gunicorn -c`) that gives each worker a listener of its own: the fix of the herd at
the same worker count. gunicorn binds its listeners in the master before it forks, so every worker inherits
the same socket (with --reuse-port too: the option is set on that one socket), and every worker waiting in
select() on it is woken for each connection. Here the master binds only a Unix socket nobody connects to
(--bind), and each worker, just after its fork, binds its own TCP listener with SO_REUSEPORT on the port in
SPINSCOPE_GUNICORN_PORT: the kernel hands each connection to one worker's listener and wakes that worker only."""

import os
import socket

from gunicorn.sock import TCPSocket


def post_fork(server, worker):
    for inherited in worker.sockets:
        inherited.sock.close()  # the socket, not the wrapper: UnixSocket.close would unlink the master's path
    address = ("127.0.0.1", int(os.environ["SPINSCOPE_GUNICORN_PORT"]))
    # (not gunicorn's reuse_port setting: it would set SO_REUSEPORT on the master's Unix socket too, which refuses it)
    own = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    own.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    own.bind(address)
    worker.sockets = [TCPSocket(address, server.cfg, server.log, fd=own.detach())]  # gunicorn's listen() and options
