/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Can this host run the collector? The checks it makes before loading anything, each with what was
 * found and, when it fails, what to do. `spinscope-collector --check [--json]` prints them (and adds
 * loading and attaching the probes); `spinscope doctor` renders that JSON.
 */
#ifndef SPINSCOPE_CHECKS_H
#define SPINSCOPE_CHECKS_H

#include <stdbool.h>
#include <stdio.h>

struct check {
	const char *name;
	bool ok;
	bool skipped; /* not tried: an earlier check it depends on failed */
	bool optional; /* not ok, it turns a part of the capture off but the collector still runs */
	char detail[256];
	char remedy[256];
};

enum host_check {
	CHECK_PRIVILEGES, CHECK_BTF, CHECK_TRACEFS, CHECK_TRACEPOINTS, CHECK_KERNEL, CHECK_BPF_LOOP,
	CHECK_PERF_EVENT_MAPS, HOST_CHECKS
};

/* The oldest kernel the probes load on: Linux 6.2 (the bpf_rdonly_cast kfunc, on every socket call). */
#define KERNEL_FLOOR_MAJOR 6
#define KERNEL_FLOOR_MINOR 2

/* What the kernel's BPF offers that a part of the capture needs, probed with libbpf (privileges needed;
 * without them both read false). $SPINSCOPE_KERNEL_FEATURES_OFF (tests) names features to take as missing,
 * comma-separated: bpf_loop, perf_event_maps. */
struct kernel_features {
	bool bpf_loop;        /* the helper (Linux 5.17): HTTP/2 connections walked by stream */
	bool perf_event_maps; /* a perf-event program may read a hash map not preallocated (Linux 6.1): --stacks */
};
void kernel_features_probe(struct kernel_features *f);

/* Run the host checks into checks[0..HOST_CHECKS). Returns the first that failed (an optional check never
 * does), or NULL. */
const struct check *host_checks(struct check checks[HOST_CHECKS]);

/* A check's outcome, with its detail and remedy set printf-style. */
void check_pass(struct check *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void check_fail(struct check *c, const char *remedy, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void check_skip(struct check *c, const char *why);

/* The checks as one JSON document ({"ok": ..., "checks": [...]}) on out. */
void checks_print_json(FILE *out, const struct check *checks, size_t n);

#endif
