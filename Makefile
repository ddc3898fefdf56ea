# spinscope: `make` builds everything, `make test` sets up and runs the test suite,
# `make demo` records and reports a bundled reference server, `make bench` measures overhead.

BUILD      := $(abspath build)
CLANG      ?= clang
BPFTOOL    ?= bpftool
CC         ?= gcc
ARCH       := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
CFLAGS     ?= -O2 -g
WARN       := -Wall -Wextra
PYTHON     ?= python3
# Extra flags for the BPF object, for experiments: make BUILD=/tmp/x BPF_CFLAGS=-DSOMETHING
BPF_CFLAGS ?=

BPF_SRC    := bpf/spinscope.bpf.c
BPF_HDRS   := $(wildcard bpf/*.h)
COLLECTOR_SRCS := $(wildcard collector/*.c)
COLLECTOR_HDRS := $(wildcard collector/*.h)
FIXTURE_SRCS := $(wildcard tests/fixtures/*.c)
FIXTURES   := $(patsubst tests/fixtures/%.c,$(BUILD)/fixtures/%,$(FIXTURE_SRCS))

.PHONY: all collector refservers fixtures setup test unit demo bench clean

all: collector refservers fixtures

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

$(BUILD)/spinscope-collector: $(COLLECTOR_SRCS) $(COLLECTOR_HDRS) $(BPF_HDRS) $(BUILD)/spinscope.skel.h
	$(CC) $(CFLAGS) $(WARN) -I$(BUILD) -Ibpf -Icollector $(COLLECTOR_SRCS) -o $@ \
		$(shell pkg-config --libs libbpf json-c) -lelf -lz

refservers: | $(BUILD)
	$(MAKE) -C reference-servers BUILD=$(BUILD)

fixtures: $(FIXTURES)

$(BUILD)/fixtures/%: tests/fixtures/%.c $(wildcard tests/fixtures/*.h)
	@mkdir -p $(dir $@)
	$(CC) -O1 -g $(WARN) -pthread $< -o $@

setup:
	bash scripts/setup.sh

test: setup
	$(MAKE) all
	$(PYTHON) -m pytest -q tests

# The quick loop: every test not marked `root` (tests/conftest.py), i.e. the analyzer's on synthetic and
# bundled captures. No root, no apt, no build (about 40 s); runs as any user. Needs the package
# installed once (`make setup`, or `pip install -e .[test]`).
unit:
	$(PYTHON) -m pytest -q -m "not root" tests

demo: setup
	$(MAKE) all
	$(PYTHON) scripts/demo.py

bench: setup
	$(MAKE) all $(BUILD)/syscall_cost
	$(PYTHON) bench/run.py

$(BUILD)/syscall_cost: bench/syscall_cost.c
	$(CC) -O2 $(WARN) $< -o $@

clean:
	rm -rf $(BUILD)

# `make reproduce`: the quick matrix (matrices/quick.toml, ~5 min) and the claims report. Resumable:
# cells already in REPRODUCE_DIR are skipped (remove it for a fresh run). Sweep exit 3 means some
# cells failed (recorded in the report, e.g. delay cells without sch_netem) and does not fail the target.
REPRODUCE_DIR ?= $(BUILD)/sweep-quick
.PHONY: reproduce
reproduce: setup
	$(MAKE) all
	$(PYTHON) -m spinscope sweep matrices/quick.toml -o $(REPRODUCE_DIR) || [ $$? -eq 3 ]
	$(PYTHON) -m spinscope sweep-report $(REPRODUCE_DIR) --html $(REPRODUCE_DIR)/report.html
