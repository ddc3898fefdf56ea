#!/usr/bin/env bash
# Installs what spinscope needs to build, run and test on Debian 12 (run as root).
# Idempotent and quick when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

# The -dev packages hold the static libraries (libbpf.a, libelf.a, libz.a, libjson-c.a, and libc.a in
# libc6-dev) that `make dist` links into the standalone collector.
APT_PACKAGES=(
    make gcc libc6-dev clang llvm pkg-config
    libbpf-dev bpftool libelf-dev libdw-dev liblzma-dev libbz2-dev zlib1g-dev libjson-c-dev systemtap-sdt-dev
    iproute2 procps strace memcached
    chromium  # tests/analyzer/test_analyzer_pages_browser.py, test_analyzer_flamegraph.py: the HTML pages in a real browser
)
# Rust's demangler, linked into the collector (collector/rustc-demangle/): Debian's cargo unless one is
# installed already (rustup's).
command -v cargo >/dev/null || [[ -x "$HOME/.cargo/bin/cargo" ]] || APT_PACKAGES+=(cargo)
# Extra tools: the tracers `make bench` compares with, the servers it, the reference benchmark and
# tests/realservers run (with redis-benchmark).
if [[ "${SPINSCOPE_SETUP_EXTRAS:-1}" == 1 ]]; then
    APT_PACKAGES+=(nginx-light lighttpd wrk bpftrace linux-perf libbpf-tools
                   apache2 redis-server redis-tools
                   tmux prometheus  # tests/live: `top` in tmux, the exporter scraped by Prometheus
                   nghttp2-client  # h2load: HTTP/2 load for tests/realservers (nginx-h2c-100)
                   # tests/realservers/verdict_pairs.py: gunicorn, FastAPI on uvicorn and Tornado (for
                   # Debian's python3), HAProxy, and a Netty server built with Maven (netty-all from Maven
                   # Central); the Go server of tests/realservers/test_runtimes.py needs a Go toolchain
                   # (/usr/local/go or golang-go), which is skipped without one
                   haproxy gunicorn python3-fastapi python3-uvicorn python3-tornado openjdk-17-jdk-headless maven)
    # Node.js: Debian's nodejs unless a node is installed already (e.g. from NodeSource).
    [[ -x /usr/bin/node ]] || APT_PACKAGES+=(nodejs)
fi

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The server packages start system services; spinscope starts its own instances.
for svc in nginx lighttpd apache2 redis-server memcached prometheus haproxy; do
    if command -v systemctl >/dev/null && systemctl is-active --quiet "$svc" 2>/dev/null; then
        systemctl stop "$svc" || true
        systemctl disable "$svc" >/dev/null 2>&1 || true
    elif [[ -x "/etc/init.d/$svc" ]] && "/etc/init.d/$svc" status >/dev/null 2>&1; then
        # no systemd (a container): the package's postinst started it through its init script
        "/etc/init.d/$svc" stop >/dev/null 2>&1 || true
        update-rc.d "$svc" disable >/dev/null 2>&1 || true
    fi
done

# tracefs is where libbpf resolves tracepoint ids; some boots leave it unmounted.
if [[ ! -d /sys/kernel/tracing/events ]]; then
    mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi

# Debian's own python3 ships without pip and marks itself externally managed (PEP 668); a root-only
# analysis tool installs into it anyway, like the distribution's python3-* packages do.
if ! python3 -m pip --version >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip >/dev/null
fi
pip_flags=(-q --disable-pip-version-check)
if [[ -f "$(python3 -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')/EXTERNALLY-MANAGED" ]]; then
    pip_flags+=(--break-system-packages)
fi
python3 -m pip install "${pip_flags[@]}" -e ".[test]"

# The runtime stacks helper (`--stacks` on CPython, JVM and Node targets: stacks-helper/README.md), built
# with Go >= 1.25 from the Go module proxy (about a minute the first time, nothing when it is up to date).
# scripts/go-toolchain.sh finds that Go, or installs the pinned one from the module proxy (Debian 12's
# golang-go is 1.19). Without the helper `--stacks` still unwinds native code, and says that the runtime's
# frames are not named.
if go=$(bash scripts/go-toolchain.sh --install); then
    GO=$go bash scripts/build-stacks-helper.sh || echo "setup: warning: the runtime stacks helper was not built (above)" >&2
else
    echo "setup: warning: no Go toolchain (above): the runtime stacks helper (stacks-helper/) is not built" >&2
fi
