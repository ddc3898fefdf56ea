# spinscope: `make` builds everything, `make test` sets up and runs the test suite,
# `make demo` records and reports a bundled reference server, `make bench` measures overhead,
# `make dist` builds what installs on a machine without clang or a checkout (build/dist/).

BUILD      := $(abspath build)
CLANG      ?= clang
BPFTOOL    ?= bpftool
CC         ?= gcc
ARCH       := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
CFLAGS     ?= -O2 -g
WARN       := -Wall -Wextra
PYTHON     ?= python3
# The version has one source, spinscope/__init__.py: pyproject.toml reads it (dynamic), the collector is
# compiled with it (SPINSCOPE_VERSION), the wheel is named by it.
VERSION_SRC := analyzer/src/spinscope/__init__.py
VERSION    := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' $(VERSION_SRC))
MACHINE    := $(shell uname -m)
# Extra flags for the BPF object, for experiments: make BUILD=/tmp/x BPF_CFLAGS=-DSOMETHING
BPF_CFLAGS ?=
COLLECTOR_CPPFLAGS := -I$(BUILD) -Ibpf -Icollector -DSPINSCOPE_VERSION='"$(VERSION)"'

BPF_SRC    := bpf/spinscope.bpf.c
BPF_HDRS   := $(wildcard bpf/*.h)
COLLECTOR_SRCS := $(wildcard collector/*.c)
COLLECTOR_HDRS := $(wildcard collector/*.h)
# Rust's demangler for the collector's stack frames (collector/rustc-demangle/: the rustc-demangle crate behind
# one C function), a static library built with cargo at the versions of its Cargo.lock.
RUST_DEMANGLE := $(BUILD)/rustc-demangle/release/libspinscope_rustc_demangle.a
CARGO ?= $(shell command -v cargo || echo $(HOME)/.cargo/bin/cargo)
FIXTURE_SRCS := $(wildcard tests/fixtures/*.c)
FIXTURES   := $(patsubst tests/fixtures/%.c,$(BUILD)/fixtures/%,$(FIXTURE_SRCS))

.PHONY: all collector refservers fixtures ctests dist setup test unit demo bench clean

all: collector refservers fixtures ctests

collector: $(BUILD)/spinscope-collector

$(BUILD):
	mkdir -p $@

# CO-RE: the BPF object is compiled once against this header and relocated at load time by libbpf.
$(BUILD)/vmlinux.h: | $(BUILD)
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(BUILD)/spinscope.bpf.o: $(BPF_SRC) $(BPF_HDRS) $(BUILD)/vmlinux.h
	$(CLANG) -O2 -g -target bpf -D__TARGET_ARCH_$(ARCH) $(WARN) -Wno-unused-parameter $(BPF_CFLAGS) \
		-I$(BUILD) -Ibpf -c $(BPF_SRC) -o $@
	llvm-strip -g $@ 2>/dev/null || true

$(BUILD)/spinscope.skel.h: $(BUILD)/spinscope.bpf.o
	$(BPFTOOL) gen skeleton $< name spinscope_bpf > $@.tmp && mv $@.tmp $@

$(BUILD)/spinscope-collector: $(COLLECTOR_SRCS) $(COLLECTOR_HDRS) $(BPF_HDRS) $(BUILD)/spinscope.skel.h $(VERSION_SRC) $(RUST_DEMANGLE)
	$(CC) $(CFLAGS) $(WARN) $(COLLECTOR_CPPFLAGS) $(COLLECTOR_SRCS) -o $@ \
		$(shell pkg-config --libs libbpf json-c) -ldw -lelf -lz -lstdc++ $(RUST_DEMANGLE)

$(RUST_DEMANGLE): collector/rustc-demangle/Cargo.toml collector/rustc-demangle/Cargo.lock collector/rustc-demangle/lib.rs
	CARGO_TARGET_DIR=$(BUILD)/rustc-demangle $(CARGO) build --release --locked --quiet \
		--manifest-path collector/rustc-demangle/Cargo.toml
	touch $@

# The collector's C units tested on their own (tests/c/*_test.c, run by tests/collector/test_c_units.py):
# each links with the collector's sources but its own main().
CTEST_SRCS := $(wildcard tests/c/*_test.c)
CTESTS     := $(patsubst tests/c/%.c,$(BUILD)/ctests/%,$(CTEST_SRCS))
ctests: $(CTESTS)

$(BUILD)/ctests/%: tests/c/%.c $(wildcard tests/c/*.h) $(filter-out collector/main.c,$(COLLECTOR_SRCS)) $(COLLECTOR_HDRS) $(BPF_HDRS) $(BUILD)/spinscope.skel.h $(RUST_DEMANGLE)
	mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(WARN) $(COLLECTOR_CPPFLAGS) $< $(filter-out collector/main.c,$(COLLECTOR_SRCS)) -o $@ \
		$(shell pkg-config --libs libbpf json-c) -ldw -lelf -lz -lstdc++ $(RUST_DEMANGLE)

# `make dist`: build/dist/spinscope-collector, a collector that runs on any x86-64 Linux with a BTF kernel and
# nothing installed (copy it to a host where Python is not wanted: record there, analyse elsewhere), and
# build/dist/spinscope-VERSION-py3-none-linux_MACHINE.whl, the Python package with that collector inside
# (spinscope/_bin/spinscope-collector; setup.py), tagged for this platform since it carries native code.
# The collector is linked fully static: libbpf, libelf, libdw (--stacks' unwinder, with its bzip2 and xz
# decompressors), libstdc++'s demangler, zlib, json-c and glibc too (libelf here needs no zstd), `ldd` says
# "not a dynamic executable". The linker warns that libdw's debuginfod client uses dlopen: that path runs
# only with DEBUGINFOD_URLS set, which the collector unsets (collector/stacks.c), so it never runs; and that
# Rust's standard library (in the demangler's static library, collector/rustc-demangle/) holds getpwuid_r and
# getaddrinfo: its home directory and name lookups, which the demangler never calls. The
# BPF object is inside it (the skeleton), as in every build. Building the wheel fetches setuptools from
# PyPI (pip's build isolation).
DIST  := $(BUILD)/dist
WHEEL := $(DIST)/spinscope-$(VERSION)-py3-none-linux_$(MACHINE).whl
PY_SRCS := $(shell find analyzer/src/spinscope -name '*.py')
PKG_DATA := $(wildcard analyzer/src/spinscope/output/vendor/* analyzer/src/spinscope/output/flamegraph.js)  # pyproject's package-data

dist: $(DIST)/spinscope-collector $(WHEEL) $(DIST)/spinscope-stacks-helper

# The runtime stacks helper (stacks-helper/README.md), beside the wheel: one static Go executable, 20 MB,
# which `--stacks` runs on CPython, JVM and Node targets when it is on PATH (install it as
# /usr/local/bin/spinscope-stacks-helper). Built by scripts/build-stacks-helper.sh into build/ (Go >= 1.25:
# `make setup` installs it where missing).
HELPER_SRCS := $(wildcard stacks-helper/*.go stacks-helper/go.mod stacks-helper/go.sum stacks-helper/patches/*.patch)
$(DIST)/spinscope-stacks-helper: $(HELPER_SRCS) scripts/build-stacks-helper.sh scripts/go-toolchain.sh
	bash scripts/build-stacks-helper.sh
	@mkdir -p $(dir $@)
	cp build/spinscope-stacks-helper $@.tmp
	mv $@.tmp $@

$(DIST)/spinscope-collector: $(COLLECTOR_SRCS) $(COLLECTOR_HDRS) $(BPF_HDRS) $(BUILD)/spinscope.skel.h $(VERSION_SRC) $(RUST_DEMANGLE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(WARN) $(COLLECTOR_CPPFLAGS) $(COLLECTOR_SRCS) -o $@.tmp -static -s \
		$(shell pkg-config --static --libs libbpf json-c) -ldw -lbz2 -llzma -lelf -lz -lstdc++ $(RUST_DEMANGLE)
	mv $@.tmp $@

$(WHEEL): $(DIST)/spinscope-collector $(PY_SRCS) $(PKG_DATA) pyproject.toml setup.py
	rm -rf $(BUILD)/setuptools $(DIST)/*.whl
	SPINSCOPE_BUNDLE_COLLECTOR=$(DIST)/spinscope-collector \
		$(PYTHON) -m pip wheel --no-deps --disable-pip-version-check -q -w $(DIST) .
	@test -f $@ || { echo "make dist: pip built $$(ls $(DIST)/*.whl), not $@" >&2; exit 1; }

refservers: | $(BUILD)
	$(MAKE) -C reference-servers BUILD=$(BUILD)

fixtures: $(FIXTURES)

$(BUILD)/fixtures/%: tests/fixtures/%.c $(wildcard tests/fixtures/*.h)
	@mkdir -p $(dir $@)
	$(CC) -O1 -g $(WARN) $(FIXTURE_CFLAGS) -pthread $< -o $@

# --stacks' call sites must be found without frame pointers, as in most distributions' builds.
$(BUILD)/fixtures/callsites: FIXTURE_CFLAGS = -fomit-frame-pointer

setup:
	bash scripts/setup.sh

# CI's command (.ci/run). It builds dist too: tests/install installs that wheel in a fresh venv.
test: setup
	$(MAKE) all dist
	$(PYTHON) -m pytest -q tests

# The quick loop: every test not marked `root` (tests/conftest.py), i.e. the analyzer's on synthetic and
# bundled captures. No root, no apt, no build; runs as any user, one worker per CPU (pytest-xdist: about
# 2 minutes on 2 CPUs, 4 in one process). Needs the package installed once (`make setup`, or
# `pip install -e .[test]`).
# PYTHONPATH: this checkout's analyzer first, whichever checkout the editable install points at (a git
# worktree's `make unit` would otherwise test the main tree's code).
unit:
	PYTHONPATH=$(abspath analyzer/src) $(PYTHON) -m pytest -q -n auto -m "not root" tests

demo: setup
	$(MAKE) all
	$(PYTHON) scripts/demo.py

bench: setup
	$(MAKE) all $(BUILD)/syscall_cost
	$(PYTHON) bench/run.py
	$(PYTHON) bench/server_cost.py

$(BUILD)/syscall_cost: bench/syscall_cost.c
	$(CC) -O2 $(WARN) $< -o $@

clean:
	rm -rf $(BUILD)

# `make reproduce`: the quick matrix (matrices/quick.toml, ~20 min with its extra repetitions) and the claims report. Resumable:
# cells already in REPRODUCE_DIR are skipped (remove it for a fresh run). Sweep exit 3 means some
# cells failed (recorded in the report, e.g. delay cells without sch_netem) and does not fail the target.
REPRODUCE_DIR ?= $(BUILD)/sweep-quick
.PHONY: reproduce
reproduce: setup
	$(MAKE) all
	$(PYTHON) -m spinscope sweep matrices/quick.toml -o $(REPRODUCE_DIR) || [ $$? -eq 3 ]
	$(PYTHON) -m spinscope sweep-report $(REPRODUCE_DIR) --html $(REPRODUCE_DIR)/report.html
