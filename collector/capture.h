/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Writing the capture document (docs/capture-format.md) from a snapshot and the intervals: the writer only
 * writes; what it writes is read and folded in snapshot.c, exited.c and intervals.c.
 */
#ifndef SPINSCOPE_CAPTURE_H
#define SPINSCOPE_CAPTURE_H

#include <json-c/json.h>

#include "checks.h"
#include "intervals.h"
#include "runtime.h"
#include "snapshot.h"

#define CAPTURE_SCHEMA 10
#ifndef SPINSCOPE_VERSION /* from analyzer/src/spinscope/__init__.py, by the Makefile: one source */
#error "SPINSCOPE_VERSION is defined by the Makefile (-DSPINSCOPE_VERSION), from spinscope/__init__.py"
#endif

struct cgroup_target;
struct stacks;

struct capture_meta {
	int pid;                            /* 0 in cgroup mode */
	const struct cgroup_target *cgroup; /* the target cgroup (--cgroup), or NULL */
	bool follow_children;
	bool started;   /* the collector started the target (-- COMMAND): its first exec is its start (jexecs) */
	char comm[256]; /* the process's name; in cgroup mode, the cgroup's */
	char exe[4096];       /* the executable's path at attach ("" if unreadable) */
	char *cmdline;        /* NUL-separated arguments */
	size_t cmdline_len;
	bool keep_cmdline;    /* write the argument values (--cmdline); else only their count */
	bool keep_hostname;   /* write the host's name (--hostname) */
	char start_time[40]; /* ISO 8601 UTC */
	__u64 start_mono_ns; /* CLOCK_MONOTONIC when the probes went live */
	double duration_s;
	const char *end_reason;
	double interval_s;
	double checkpoint_s;
	__u32 max_threads;
	__u32 time_sample; /* 1 call in N timed (settings.time_sample) */
	__u32 exited_rows; /* threads gone kept as rows (settings.exited_rows) */
	__u32 max_sockets;
	int map_fds[16]; /* the BPF maps, for their memory (tool.map_bytes) */
	size_t nmaps;
	const struct stacks *stacks; /* --stacks: the stacks so far, or NULL */
	struct kernel_features features; /* probed at attach (host.features) */
	bool stacks_left_out; /* --stacks asked, this kernel cannot (settings.left_out) */
	struct target_runtime runtime; /* the target's runtime (runtime.c); name "" until read: null */
};

/* target.runtime: {name, version, from}, or NULL when it was never read (name ""). */
json_object *capture_runtime(const struct target_runtime *rt);

/* Write the capture as JSON to fd. 0 or -errno. */
int capture_write(int fd, const struct capture_meta *meta, const struct snapshot *snap,
		  const struct intervals *intervals);

/* Append one interval to fd as a JSON line (the interval journal). 0 or -errno. */
int capture_interval_line(int fd, const struct interval *it);
/* Write the capture as one line of JSON (compact, ending in a newline) to fd, all of it unless the write
 * fails: --stream. 0 or -errno (-EPIPE: the reader has gone). */
int capture_write_line(int fd, const struct capture_meta *meta, const struct snapshot *snap,
		       const struct intervals *intervals);

#endif
