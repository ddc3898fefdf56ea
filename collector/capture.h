/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reading the BPF maps into snapshots, and writing the capture document (docs/capture-format.md).
 */
#ifndef SPINSCOPE_CAPTURE_H
#define SPINSCOPE_CAPTURE_H

#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>

#include "spinscope.h"

#define CAPTURE_SCHEMA 4
#define SPINSCOPE_VERSION "0.1.0"

struct spinscope_bpf;

/* Everything the maps hold at one instant: each map as parallel arrays of its keys and values. */
struct snapshot {
	__u32 *tids;
	struct thread_stats *threads;
	size_t nthreads;
	struct wakeup_edge *edges;
	__u64 *edge_counts;
	size_t nedges;
	__u32 *exec_pids; /* read at the final snapshot only */
	struct exec_record *execs;
	size_t nexecs;
	struct request_stats requests; /* summed over CPUs */
	struct global_stats globals;
	__u64 open_requests; /* requests still being written at the final read (counted in requests) */
};

/* One entry of the capture's `intervals`: its fields are SPINSCOPE_INTERVAL_FIELDS. */
#define INTERVAL_TYPE_seconds double
#define INTERVAL_TYPE_count __u64
#define INTERVAL_TYPE_counters struct thread_counters
#define INTERVAL_TYPE_drops struct drop_counts
struct interval {
#define X(name, kind) INTERVAL_TYPE_##kind name;
	SPINSCOPE_INTERVAL_FIELDS(X)
#undef X
};

/* The series of snapshots taken every --interval: each entry the change since the previous one. */
struct intervals {
	struct interval *items;
	size_t n, cap;
	__u64 start_ns; /* when the probes went live */
	__u64 prev_ns;  /* the previous snapshot (start_ns at first) */
	struct thread_counters prev;
	struct drop_counts prev_drops;
	__u64 prev_requests, prev_wakeups;
};

struct cgroup_target;

struct capture_meta {
	int pid;                            /* 0 in cgroup mode */
	const struct cgroup_target *cgroup; /* the target cgroup (--cgroup), or NULL */
	bool follow_children;
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
	__u32 max_sockets;
	int map_fds[16]; /* the BPF maps, for their memory (tool.map_bytes) */
	size_t nmaps;
};

/* CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns. */
__u64 monotonic_ns(void);

/* Read the maps. With final set, requests still open on sockets are counted too. 0 or -errno. */
int snapshot_read(struct spinscope_bpf *skel, struct snapshot *snap, bool final);
void snapshot_free(struct snapshot *snap);
void snapshot_totals(const struct snapshot *snap, struct thread_counters *totals);
__u64 snapshot_wakeups(const struct snapshot *snap);

/* Start the series at start_ns. */
void intervals_init(struct intervals *iv, __u64 start_ns);
/* Add the interval that ends with snap, taken at now. 0, or -ENOMEM (the series is kept as it was). */
int intervals_add(struct intervals *iv, const struct snapshot *snap, __u64 now);
void intervals_free(struct intervals *iv);

/* Write the capture as JSON to fd. 0 or -errno. */
int capture_write(int fd, const struct capture_meta *meta, const struct snapshot *snap,
		  const struct intervals *intervals);

/* Write the capture as one line of JSON (compact, ending in a newline) to fd, all of it unless the write
 * fails: --stream. 0 or -errno (-EPIPE: the reader has gone). */
int capture_write_line(int fd, const struct capture_meta *meta, const struct snapshot *snap,
		       const struct intervals *intervals);

#endif
