/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The capture's `intervals`: the series of snapshots taken every --interval, each the change since the
 * previous one.
 */
#ifndef SPINSCOPE_INTERVALS_H
#define SPINSCOPE_INTERVALS_H

#include "snapshot.h"

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
	__u64 prev_requests, prev_wakeups, prev_request_ns, prev_cross_thread;
};

/* Start the series at start_ns. */
void intervals_init(struct intervals *iv, __u64 start_ns);
/* Add the interval that ends with snap, taken at now. 0, or -ENOMEM (the series is kept as it was). */
int intervals_add(struct intervals *iv, const struct snapshot *snap, __u64 now);
void intervals_free(struct intervals *iv);

#endif
