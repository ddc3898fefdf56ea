/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reading the BPF maps into snapshots (snapshot.c): what the capture writer (capture.c) writes, already
 * folded and counted. A snapshot reads the threads gone from exited.h (drained by exited.c), and the maps
 * with maps.h: snapshot.c -> exited.c -> maps.c, one direction.
 */
#ifndef SPINSCOPE_SNAPSHOT_H
#define SPINSCOPE_SNAPSHOT_H

#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>

#include "exited.h"
#include "maps.h"
#include "spinscope.h"

struct spinscope_bpf;

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
