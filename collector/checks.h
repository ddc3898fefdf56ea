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
	char detail[256];
	char remedy[256];
};

enum host_check { CHECK_PRIVILEGES, CHECK_BTF, CHECK_TRACEFS, CHECK_TRACEPOINTS, HOST_CHECKS };

/* Run the host checks into checks[0..HOST_CHECKS). Returns the first that failed, or NULL. */
const struct check *host_checks(struct check checks[HOST_CHECKS]);

/* A check's outcome, with its detail and remedy set printf-style. */
void check_pass(struct check *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void check_fail(struct check *c, const char *remedy, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void check_skip(struct check *c, const char *why);

/* The checks as one JSON document ({"ok": ..., "checks": [...]}) on out. */
void checks_print_json(FILE *out, const struct check *checks, size_t n);

#endif
