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

#define CAPTURE_SCHEMA 5
#define SPINSCOPE_VERSION "0.1.0"

struct spinscope_bpf;

/*
 * Threads that have run their last, drained from the exited map (retired_drain): each kept as its own
 * row up to `keep` (--exited-rows), then folded into one row per process and name (threads_folded), so
 * the collector's memory is bounded however many threads a long capture sees. A tid appears in one row
 * at most: when the kernel reuses a tid, the older thread's row is folded.
 */
#define MAX_FOLDED_GROUPS 1024 /* process-and-name groups; beyond, one "(other names)" group */
struct folded_group {
	__u32 pid;
	char comm[SPINSCOPE_COMM_LEN];
	__u64 threads;
	struct thread_stats sum; /* counters and poll histogram summed, first_seen_ns min, exit_ns max */
};

struct retired {
	struct thread_key *keys;
	struct thread_stats *threads;
	size_t n, cap, keep;
	__u32 *index; /* open addressing, tid -> row + 1 (0: empty); size a power of two > 2 * keep */
	size_t index_size;
	struct folded_group *groups;
	size_t ngroups;
	struct thread_counters sum; /* of every thread retired, kept or folded */
	__u64 count;                /* threads retired */
	/* Wakeup edges of threads gone, moved out of the wakeups map so it holds live threads' only: up to
	 * 4 * keep edges as they were; past that, the gone side's tid becomes 0 (one edge per live thread
	 * and mechanism). */
	struct wakeup_edge *edges;
	__u64 *edge_counts;
	size_t nedges, edges_cap;
	__u64 edges_sum;
};

int retired_init(struct retired *r, size_t keep);
/* Move what the exited map holds into r; the keys drained are returned in *keys (malloc'd, *n of them)
 * when keys is not NULL. 0 or -errno. */
int retired_drain(struct retired *r, int exited_fd, struct thread_key **keys, size_t *n);
/* Move the wakeup edges that name a drained tid (keys[0..n)) out of the wakeups map into r. */
int retired_edges(struct retired *r, int wakeups_fd, __u32 max_entries, const struct thread_key *keys, size_t n);
void retired_free(struct retired *r);

/* Everything the maps hold at one instant: each map as parallel arrays of its keys and values. */
struct snapshot {
	const struct retired *retired; /* the threads gone so far (not owned) */
	__u32 *tids;
	struct thread_stats *threads;
	size_t nthreads;
	struct wakeup_edge *edges;
	__u64 *edge_counts;
	size_t nedges;
	__u32 *exec_pids; /* read at the final snapshot only */
	struct exec_record *execs;
	size_t nexecs;
	struct listener_key *listener_keys;
	struct listener_stats *listeners;
	__u32 *listener_pids; /* processes that called accept on each listener */
	size_t nlisteners;
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
	__u32 exited_rows; /* threads gone kept as rows (settings.exited_rows) */
	__u32 max_sockets;
	int map_fds[16]; /* the BPF maps, for their memory (tool.map_bytes) */
	size_t nmaps;
};

/* CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns. */
__u64 monotonic_ns(void);

/* Read the maps. With final set, requests still open on sockets are counted too. 0 or -errno. */
int snapshot_read(struct spinscope_bpf *skel, struct retired *retired, struct snapshot *snap, bool final);
void snapshot_free(struct snapshot *snap);
void snapshot_totals(const struct snapshot *snap, struct thread_counters *totals);
__u64 snapshot_wakeups(const struct snapshot *snap);

/* Start the series at start_ns. */
void intervals_init(struct intervals *iv, __u64 start_ns);
/* Add the interval that ends with snap, taken at now. 0, or -ENOMEM (the series is kept as it was). */
int intervals_add(struct intervals *iv, const struct snapshot *snap, __u64 now);
void intervals_free(struct intervals *iv);

/* The capture's thread rows (live threads and gone ones not folded) and the distinct processes among
 * them, as the report counts them. 0 or -ENOMEM. */
int capture_rows(const struct snapshot *snap, size_t *threads, size_t *processes);

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
