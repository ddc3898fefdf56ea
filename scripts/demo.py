"""`make demo`: spinscope on bundled reference servers, the way a user would run it.

  1. a single-threaded event loop that spins on write() with 100 KB responses and a 16 KB send buffer:
     record it by PID, report it (terminal + HTML);
  2. the "upgrade" regression: the same light load on thread-per-connection, then on a Tomcat-NIO-style
     reactor with a worker pool; diff the two captures.

Everything lands in build/demo/. Each load runs for a few seconds and stops by itself. Servers start
through spinscope.lab.refserver (which reads their listening line), and the load starts once
`spinscope record` says the probes are live (its --ready-fd line, through spinscope.tracing.collector).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from spinscope.lab import refserver
from spinscope.tracing import collector

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "demo"
SPINSCOPE = [sys.executable, "-m", "spinscope"]


def record(name: str, seconds: int, server_args: list, load_args: list, *record_args) -> Path:
    """Start a server, record it (with record_args) while loadgen drives it for `seconds`, stop it; the
    capture's path."""
    capture = OUT / f"{name}.json"
    with open(OUT / f"{name}.record.log", "w") as log:
        server = refserver.start(refserver.command(*server_args))
        try:
            started = collector.start([*SPINSCOPE, "record", "--pid", server.proc.pid, "--duration", seconds + 1,
                                       "-o", capture, *record_args], stderr=log)
            started.wait_ready()
            with open(OUT / f"{name}.loadgen.txt", "w") as load:
                subprocess.run([ROOT / "build" / "loadgen", "--port", str(server.port), "--duration",
                                str(seconds), *load_args], stdout=load, check=True)
            if started.proc.wait() != 0:
                sys.exit(f"demo: recording {name} failed; see {log.name}")
        finally:
            server.proc.terminate()
            server.proc.wait()
            (OUT / f"{name}.server.log").write_text(server.stderr_text())
    return capture


def spinscope(*args) -> None:
    subprocess.run([*SPINSCOPE, *map(str, args)], check=True)


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    print("== 1. event loop, 100 KB responses, 16 KB send buffer, writes until done (write-spin); with --stacks, "
          "where in its code", flush=True)
    spin = record("event-loop-spin", 4, ["event-loop", "--write-policy", "spin", "--sndbuf", 16384],
                  ["--mix", "80:/bytes/100,20:/bytes/102400", "--concurrency", "16", "--rcvbuf", "4096"], "--stacks")
    spinscope("report", spin, "--html", OUT / "event-loop-spin.html", "--folded", OUT / "event-loop-spin.folded")

    print("\n== 2. the upgrade: thread-per-connection -> reactor + worker pool, same load", flush=True)
    light = ["--path", "/bytes/100", "--concurrency", "1"]
    before = record("before", 3, ["thread-per-conn"], light)
    after = record("after", 3, ["reactor-split", "--workers", 4], light)
    spinscope("diff", before, after, "--html", OUT / "upgrade-diff.html")

    print(f"\ndemo: captures, HTML reports and logs are in {OUT.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
