#!/usr/bin/env bash
# Prints the path of a Go toolchain that builds the runtime stacks helper (stacks-helper/go.mod: Go >= 1.25),
# installing one where there is none (`make setup` runs this as root).
#
# Found, first wins: $GO; `go` on PATH; /usr/local/go/bin/go; the one this script installed before. Else,
# with --install: the pinned toolchain (GO_PIN below) as the Go module proxy serves it, the module
# golang.org/toolchain@v0.0.1-GO_PIN.linux-ARCH that GOTOOLCHAIN downloads, fetched with whatever `go` there
# is (Debian 12's golang-go, 1.19, is installed for that when there is none: it downloads modules, and
# checks them against the checksum database, sum.golang.org, as every go command does) and copied to
# $GO_HOME/GO_PIN with its commands made executable (a module's files are stored read-only, without
# execute bits). Nothing is installed without --install: the build says which Go it needs instead.
set -euo pipefail

GO_PIN=go1.26.8                                   # built and tested with here
GO_MIN=${SPINSCOPE_GO_MIN:-1.25}                  # stacks-helper/go.mod's go line
GO_HOME=${SPINSCOPE_GO_HOME:-/usr/local/lib/spinscope-go}
ARCH=$(uname -m | sed 's/x86_64/amd64/; s/aarch64/arm64/')

new_enough() {  # the go binary $1 is at least GO_MIN
    local v
    v=$("$1" env GOVERSION 2>/dev/null) || return 1
    v=${v#go}
    [[ "$(printf '%s\n%s\n' "$GO_MIN" "$v" | sort -V | head -n 1)" == "$GO_MIN" ]]
}

candidates=("${GO:-}" "$(command -v go || true)" /usr/local/go/bin/go "$GO_HOME/$GO_PIN/bin/go")
for go in "${candidates[@]}"; do
    if [[ -n "$go" && -x "$go" ]] && new_enough "$go"; then
        echo "$go"
        exit 0
    fi
done
if [[ "${1:-}" != --install ]]; then
    echo "go-toolchain: no Go >= $GO_MIN (looked at \$GO, PATH, /usr/local/go, $GO_HOME/$GO_PIN); \`make setup\` installs $GO_PIN" >&2
    exit 1
fi

downloader=$(for go in "${candidates[@]}"; do [[ -n "$go" && -x "$go" ]] && { echo "$go"; break; }; done || true)
if [[ -z "$downloader" ]]; then
    echo "go-toolchain: installing Debian's golang-go to download $GO_PIN with" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-go >/dev/null
    downloader=/usr/bin/go
fi
module=golang.org/toolchain@v0.0.1-$GO_PIN.linux-$ARCH
cache=$(mktemp -d)
trap 'chmod -R u+w "$cache" 2>/dev/null; rm -rf "$cache"' EXIT
echo "go-toolchain: downloading $module (the Go module proxy, with $("$downloader" env GOVERSION))" >&2
dir=$(cd "$cache" && GOMODCACHE=$cache/mod GOFLAGS=-modcacherw GOTOOLCHAIN=local GO111MODULE=on \
      timeout 900 "$downloader" mod download -json "$module" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[[ -n "$dir" && -f "$dir/bin/go" ]] || { echo "go-toolchain: download of $module failed" >&2; exit 1; }
mkdir -p "$GO_HOME"
rm -rf "$GO_HOME/$GO_PIN.tmp"
cp -r "$dir" "$GO_HOME/$GO_PIN.tmp"
chmod -R u+w "$GO_HOME/$GO_PIN.tmp"
chmod +x "$GO_HOME/$GO_PIN.tmp"/bin/* "$GO_HOME/$GO_PIN.tmp"/pkg/tool/*/*
rm -rf "$GO_HOME/$GO_PIN"
mv "$GO_HOME/$GO_PIN.tmp" "$GO_HOME/$GO_PIN"
new_enough "$GO_HOME/$GO_PIN/bin/go" || { echo "go-toolchain: $GO_HOME/$GO_PIN/bin/go does not run" >&2; exit 1; }
echo "$GO_HOME/$GO_PIN/bin/go"
