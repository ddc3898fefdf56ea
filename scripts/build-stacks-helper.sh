#!/usr/bin/env bash
# Builds build/spinscope-stacks-helper: the OpenTelemetry eBPF profiler
# (go.opentelemetry.io/ebpf-profiler, pinned below) embedded as a Go library,
# with spinscope's in-process reporter (stacks-helper/). One static-ish binary,
# no clang (the profiler's BPF object is committed in its module), no gRPC.
#
# Steps: fetch the pinned module through the Go module proxy (an explicit
# version: the proxy does not answer @latest for it), copy it to
# build/stacks-helper/, apply stacks-helper/patches/*.patch (the memlock rlimit
# change: see the patch's header), point a go.work at the patched copy, build.
#
# Idempotent: does nothing when the binary is newer than every input (sources,
# go.mod/go.sum, patches, this script). Bounded: each go step has a timeout.
# On failure it prints one line naming the step, the error and the full log.
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILER_MODULE=go.opentelemetry.io/ebpf-profiler
PROFILER_VERSION=v0.0.202633   # keep in step with stacks-helper/go.mod
OUT=build/spinscope-stacks-helper
WORK=build/stacks-helper
LOG=$WORK/build.log
SRC=stacks-helper
STEP_TIMEOUT=${STACKS_HELPER_BUILD_TIMEOUT:-900}   # seconds per go step

mkdir -p "$WORK"
: > "$LOG"
fail() {
    local last
    last=$(grep -v '^\s*$' "$LOG" | tail -n 1 | cut -c1-300 || true)
    echo "build-stacks-helper: FAILED ($1): ${last:-no output} [log: $LOG]" >&2
    exit 1
}

# The Go toolchain (scripts/go-toolchain.sh: Go >= 1.25; `make setup` installs one where there is none).
GO=$(bash scripts/go-toolchain.sh 2>>"$LOG") || fail "go toolchain"

# Up to date?
stamp_inputs() {
    { echo "$PROFILER_VERSION"; "$GO" version 2>/dev/null || true
      sha256sum "$0" "$SRC"/go.mod "$SRC"/go.sum "$SRC"/*.go "$SRC"/patches/*.patch; } | sha256sum | cut -d' ' -f1
}
STAMP=$(stamp_inputs)
if [[ -x "$OUT" && -f "$OUT.stamp" && "$(cat "$OUT.stamp")" == "$STAMP" ]]; then
    echo "build-stacks-helper: up to date: $OUT"
    exit 0
fi

command -v patch >/dev/null 2>&1 || { echo "patch: not found (apt-get install patch)" > "$LOG"; fail "patch tool"; }
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0

# 1. The pinned profiler module, from the module proxy (or the module cache).
MODDIR=$(timeout "$STEP_TIMEOUT" "$GO" mod download -json "$PROFILER_MODULE@$PROFILER_VERSION" 2>>"$LOG" \
         | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p') || true
[[ -n "$MODDIR" && -d "$MODDIR" ]] || fail "download $PROFILER_MODULE@$PROFILER_VERSION"

# 2. A patched copy (redone when the patches change).
PATCHED=$WORK/ebpf-profiler-$PROFILER_VERSION
PATCH_SUM=$(cat "$SRC"/patches/*.patch | sha256sum | cut -d' ' -f1)
if [[ ! -f "$PATCHED/.spinscope-patched" || "$(cat "$PATCHED/.spinscope-patched")" != "$PATCH_SUM" ]]; then
    rm -rf "$PATCHED"
    cp -r "$MODDIR" "$PATCHED"
    chmod -R u+w "$PATCHED"
    for p in "$SRC"/patches/*.patch; do
        patch -p1 --forward --batch -d "$PATCHED" < "$p" >>"$LOG" 2>&1 || fail "apply $(basename "$p")"
    done
    echo "$PATCH_SUM" > "$PATCHED/.spinscope-patched"
fi

# 3. A workspace that builds stacks-helper/ against the patched copy; the
#    module's own go.mod/go.sum stay untouched.
cat > "$WORK/go.work" <<EOF
go 1.25.0

use ../../$SRC

replace $PROFILER_MODULE $PROFILER_VERSION => ./ebpf-profiler-$PROFILER_VERSION
EOF
export GOWORK=$PWD/$WORK/go.work

# 4. Build.
t0=$(date +%s)
rc=0
timeout "$STEP_TIMEOUT" "$GO" build -trimpath -ldflags "-s -w" -o "$OUT.tmp" ./"$SRC" >>"$LOG" 2>&1 || rc=$?
[[ $rc == 124 ]] && fail "go build timed out after ${STEP_TIMEOUT}s; STACKS_HELPER_BUILD_TIMEOUT raises it"
[[ $rc == 0 ]] || fail "go build"
mv "$OUT.tmp" "$OUT"
echo "$STAMP" > "$OUT.stamp"
echo "build-stacks-helper: built $OUT ($(du -h "$OUT" | cut -f1), $(( $(date +%s) - t0 )) s)"
