/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef SPINSCOPE_PROBES_H
#define SPINSCOPE_PROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

struct spinscope_bpf;
struct bpf_link;

/* The tracefs mount point, mounting it if needed; NULL if unavailable. */
const char *tracefs_dir(void);

/* Fill the BPF side's syscall table (before load). */
void probes_configure(struct spinscope_bpf *skel);

/* Number of (program, tracepoint) pairs; an upper bound on the links probes_attach makes. */
size_t probes_count(void);

/* The tracepoint of pair i (< probes_count()): its name, and its category in *category. */
const char *probes_tracepoint(size_t i, const char **category);

/*
 * Attach every program to its tracepoint (host_checks() has made sure they exist). On failure returns a negative errno with a one-line
 * reason in err; links made so far are in links[0..*nlinks) and must still be detached.
 */
int probes_attach(struct spinscope_bpf *skel, struct bpf_link **links, size_t max_links,
		  size_t *nlinks, char *err, size_t errlen);

void probes_detach(struct bpf_link **links, size_t nlinks);

#endif
