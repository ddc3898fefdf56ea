/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The threads gone (exited.c): drained from the exited map, kept as rows or folded, with their wakeup
 * edges. Knows nothing of snapshots (snapshot.h reads these); reads the maps with maps.h.
 */
#ifndef SPINSCOPE_EXITED_H
#define SPINSCOPE_EXITED_H

#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>

#include "spinscope.h"

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

#endif
