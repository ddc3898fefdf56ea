/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reading the BPF maps into snapshots (snapshot.c), and the threads gone (exited.c): what the capture
 * writer (capture.c) writes, already folded and counted.
 */
#ifndef SPINSCOPE_SNAPSHOT_H
#define SPINSCOPE_SNAPSHOT_H

#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>

#include "spinscope.h"

struct spinscope_bpf;

/*
 * Threads that have run their last, drained from the exited map (exited_drain): each kept as its own
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

struct exited_threads {
	struct thread_key *keys;
	struct thread_stats *threads;
	size_t n, cap, keep;
	__u32 *index; /* open addressing, tid -> row + 1 (0: empty); size a power of two > 2 * keep */
	size_t index_size;
	struct folded_group *groups;
	size_t ngroups;
	struct thread_counters sum; /* of every thread exited, kept or folded */
	__u64 count;                /* threads exited */
	/* Wakeup edges of threads gone, moved out of the wakeups map so it holds live threads' only: up to
	 * 4 * keep edges as they were; past that, the gone side's tid becomes 0 (one edge per live thread
	 * and mechanism). */
	struct wakeup_edge *edges;
	__u64 *edge_counts;
	size_t nedges, edges_cap;
	__u64 edges_sum;
};

int exited_init(struct exited_threads *r, size_t keep);
/* Move what the exited map holds into r; the keys drained are returned in *keys (malloc'd, *n of them)
 * when keys is not NULL. 0 or -errno. */
int exited_drain(struct exited_threads *r, int exited_fd, struct thread_key **keys, size_t *n);
/* Move the wakeup edges that name a drained tid (keys[0..n)) out of the wakeups map into r. */
int exited_edges(struct exited_threads *r, int wakeups_fd, __u32 max_entries, const struct thread_key *keys, size_t n);
void exited_free(struct exited_threads *r);

/*
 * The threads gone as the capture lists them: the exited rows not folded here, then the groups. A kept
 * row whose tid a live thread has taken since is folded here (into a copy of the groups), so a tid names
 * one row of the capture.
 */
struct exited_rows {
	bool *folded; /* per exited row: folded into groups here (not written as a row) */
	struct folded_group *groups;
	size_t ngroups;
};

/* The rows of r beside the live threads live_tids[0..nlive). 0, or -ENOMEM (rows empty). */
int exited_rows_of(const struct exited_threads *r, const __u32 *live_tids, size_t nlive, struct exited_rows *rows);
void exited_rows_free(struct exited_rows *rows);

/* Everything the maps hold at one instant: each map as parallel arrays of its keys and values. */
struct snapshot {
	const struct exited_threads *exited; /* the threads gone so far (not owned) */
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
/* CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns. */
__u64 monotonic_ns(void);

/* Every entry of a hash map as parallel arrays of keys and values (malloc'd, *n of them). 0 or -errno. */
int map_dump(int fd, size_t key_size, size_t value_size, __u32 max_entries, void **keys, void **values,
	     size_t *n);
/* sum += c, counter by counter. */
void counters_add(struct thread_counters *sum, const struct thread_counters *c);

/* Read the maps. With final set, requests still open on sockets are counted too. 0 or -errno. */
int snapshot_read(struct spinscope_bpf *skel, struct exited_threads *exited, struct snapshot *snap, bool final);
void snapshot_free(struct snapshot *snap);
void snapshot_totals(const struct snapshot *snap, struct thread_counters *totals);
__u64 snapshot_wakeups(const struct snapshot *snap);
/* Threads that have exited: those the live map still holds marked exited, and every one drained. */
__u64 snapshot_threads_exited(const struct snapshot *snap);
/* The target process is gone: its threads whose exit the probes did not see (it came before they were
 * live: a process that exits while they attach) are marked exited at now, not left "alive". */
void snapshot_process_gone(struct snapshot *snap, __u32 pid, __u64 now);
/* Every process that had a thread traced, each once: first (unless 0) ahead, then those of the live
 * threads, the exited rows and the folded groups in that order. malloc'd, *n of them; NULL if out of
 * memory. */
__u32 *snapshot_pids(const struct snapshot *snap, __u32 first, size_t *n);

/* The capture's thread rows (live threads and gone ones not folded) and the distinct processes among
 * them, as the report counts them. 0 or -ENOMEM. */
int capture_rows(const struct snapshot *snap, size_t *threads, size_t *processes);

#endif
