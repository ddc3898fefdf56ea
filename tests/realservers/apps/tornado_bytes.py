"""A Tornado server for tests/realservers: GET /bytes/N answers N bytes of the refserver pattern (byte i is
'a' + i % 26). Usage: tornado_bytes.py PORT PROCESSES MODE, MODE `shared` (one listening socket bound
before tornado.process.fork_processes: every process waits on it, a thundering herd) or `reuseport` (each
forked process binds its own listener with reuse_port=True: the kernel hands each connection to one).
Runs under Debian's /usr/bin/python3 (python3-tornado from apt), not the tests' interpreter."""

import sys

import tornado.httpserver
import tornado.ioloop
import tornado.netutil
import tornado.process
import tornado.web

ALPHABET = b"abcdefghijklmnopqrstuvwxyz"


def body(n: int) -> bytes:
    return (ALPHABET * (n // 26 + 1))[:n]


class Bytes(tornado.web.RequestHandler):
    def get(self, n: str) -> None:
        self.set_header("Content-Type", "application/octet-stream")
        self.write(body(int(n)))


def main() -> None:
    port, processes, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    app = tornado.web.Application([(r"/bytes/([0-9]+)", Bytes)])
    if mode == "shared":
        sockets = tornado.netutil.bind_sockets(port, "127.0.0.1")
        tornado.process.fork_processes(processes, max_restarts=0)
    else:
        tornado.process.fork_processes(processes, max_restarts=0)
        sockets = tornado.netutil.bind_sockets(port, "127.0.0.1", reuse_port=True)
    server = tornado.httpserver.HTTPServer(app)
    server.add_sockets(sockets)
    tornado.ioloop.IOLoop.current().start()


if __name__ == "__main__":
    main()
