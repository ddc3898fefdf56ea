"""A WSGI hello app for gunicorn: GET /bytes/N answers N bytes of the refserver pattern (byte i is
'a' + i % 26), so build/loadgen --verify checks it like every other HTTP server of tests/realservers.
Runs under Debian's /usr/bin/python3 (gunicorn from apt), not the tests' interpreter."""

ALPHABET = b"abcdefghijklmnopqrstuvwxyz"


def body(n: int) -> bytes:
    return (ALPHABET * (n // 26 + 1))[:n]


def app(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if not path.startswith("/bytes/") or not path[7:].isdigit():
        start_response("404 Not Found", [("Content-Length", "0")])
        return [b""]
    data = body(int(path[7:]))
    start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(len(data)))])
    return [data]
