#!/usr/bin/env bash
# `make demo`: spinscope on bundled reference servers, the way a user would run it.
#   1. a single-threaded event loop that spins on write() with 100 KB responses and a 16 KB send
#      buffer: record it by PID, report it (terminal + HTML);
#   2. the "upgrade" regression: the same light load on thread-per-connection, then on a
#      Tomcat-NIO-style reactor with a worker pool; diff the two captures.
# Everything lands in build/demo/. Each load runs for a few seconds and stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=build/demo
mkdir -p "$OUT"
SPINSCOPE=(python3 -m spinscope)
SERVER_PID=

cleanup() {
    if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID"
        wait "$SERVER_PID" 2>/dev/null || true
    fi
}
trap cleanup EXIT

# start_server NAME ARGS... : start build/refserver, set SERVER_PID and PORT
start_server() {
    local name=$1
    shift
    build/refserver "$@" --port 0 2>"$OUT/$name.server.log" &
    SERVER_PID=$!
    for _ in $(seq 50); do
        PORT=$(sed -n 's/.*listening on [^ ]*:\([0-9]*\) .*/\1/p' "$OUT/$name.server.log")
        [[ -n "$PORT" ]] && return 0
        sleep 0.1
    done
    echo "demo: $name did not start; see $OUT/$name.server.log" >&2
    exit 1
}

# record NAME SECONDS LOADGEN-ARGS... : record the running server while loadgen drives it
record() {
    local name=$1 seconds=$2
    shift 2
    "${SPINSCOPE[@]}" record --pid "$SERVER_PID" --duration $((seconds + 1)) -o "$OUT/$name.json" \
        2>"$OUT/$name.record.log" &
    local recorder=$!
    for _ in $(seq 100); do
        grep -q attached "$OUT/$name.record.log" && break
        sleep 0.05
    done
    build/loadgen --port "$PORT" --duration "$seconds" "$@" >"$OUT/$name.loadgen.txt"
    wait "$recorder"
    cleanup
}

echo "== 1. event loop, 100 KB responses, 16 KB send buffer, writes until done (write-spin)"
start_server event-loop-spin --arch event-loop --write-policy spin --sndbuf 16384
record event-loop-spin 4 --mix 80:/bytes/100,20:/bytes/102400 --concurrency 16 --rcvbuf 4096
"${SPINSCOPE[@]}" report "$OUT/event-loop-spin.json" --html "$OUT/event-loop-spin.html"

echo
echo "== 2. the upgrade: thread-per-connection -> reactor + worker pool, same load"
start_server before --arch thread-per-conn
record before 3 --path /bytes/100 --concurrency 1
start_server after --arch reactor-split --workers 4
record after 3 --path /bytes/100 --concurrency 1
"${SPINSCOPE[@]}" diff "$OUT/before.json" "$OUT/after.json" --html "$OUT/upgrade-diff.html"

echo
echo "demo: captures, HTML reports and logs are in $OUT/"
