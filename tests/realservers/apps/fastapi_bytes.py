"""A FastAPI app for uvicorn: GET /bytes/N answers N bytes of the refserver pattern.

SPINSCOPE_ENDPOINT=def declares the endpoint with `def`: FastAPI runs it in Starlette's thread pool
(anyio worker threads), so every request goes from the event loop to a pool thread and back.
SPINSCOPE_ENDPOINT=async declares it `async def`: the event loop runs it itself.
Runs under Debian's /usr/bin/python3 (python3-fastapi and python3-uvicorn from apt)."""

import os

from fastapi import FastAPI
from fastapi.responses import Response

ALPHABET = b"abcdefghijklmnopqrstuvwxyz"
ENDPOINT = os.environ.get("SPINSCOPE_ENDPOINT", "async")
if ENDPOINT not in ("def", "async"):
    raise SystemExit(f"SPINSCOPE_ENDPOINT must be def or async, not {ENDPOINT!r}")

app = FastAPI()


def body(n: int) -> Response:
    return Response((ALPHABET * (n // 26 + 1))[:n], media_type="application/octet-stream")


if ENDPOINT == "def":
    @app.get("/bytes/{n}")
    def bytes_in_the_pool(n: int) -> Response:
        return body(n)
else:
    @app.get("/bytes/{n}")
    async def bytes_on_the_loop(n: int) -> Response:
        return body(n)
