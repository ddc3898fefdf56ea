// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The collector's interval series (intervals.c, intervals_add) on snapshots built by hand: each interval
 * is the change since the one before, a total that reads lower than before (a torn read of an entry
 * the probes were updating) gives a zero change rather than a wrapped-around one, and the intervals add
 * up to the largest total read. Prints one line per failed check; exits 1 if any failed.
 */
#include <stdio.h>
#include <string.h>

#include "intervals.h"

#include "check.h"

/* A snapshot of one live thread with these times and writes, and one wakeup edge counted `wakeups`. */
static void one_thread(struct snapshot *snap, struct thread_stats *t, __u64 *edge_count, __u64 offcpu,
		       __u64 writes, __u64 wakeups)
{
	static struct wakeup_edge edge = { .waker_tid = 1, .wakee_tid = 2 };
	static __u32 tid = 2;

	memset(snap, 0, sizeof(*snap));
	memset(t, 0, sizeof(*t));
	t->c.offcpu_ns = offcpu;
	t->c.write_calls = writes;
	*edge_count = wakeups;
	snap->tids = &tid;
	snap->threads = t;
	snap->nthreads = 1;
	snap->edges = &edge;
	snap->edge_counts = edge_count;
	snap->nedges = 1;
}

int main(void)
{
	const __u64 s = 1000000000ULL;
	/* offcpu_ns as read: 100, then 300 (a slice counted twice), then 250 (the true total), then 400 */
	const __u64 offcpu[] = { 100, 300, 250, 400 };
	const __u64 writes[] = { 5, 7, 7, 10 };
	const __u64 wakeups[] = { 3, 6, 4, 9 };
	const __u64 want_offcpu[] = { 100, 200, 0, 100 };
	const __u64 want_writes[] = { 5, 2, 0, 3 };
	const __u64 want_wakeups[] = { 3, 3, 0, 3 };
	struct intervals iv;
	struct snapshot snap;
	struct thread_stats t;
	__u64 edge_count, sum_offcpu = 0, sum_writes = 0;

	intervals_init(&iv, s);
	for (int i = 0; i < 4; i++) {
		one_thread(&snap, &t, &edge_count, offcpu[i], writes[i], wakeups[i]);
		snap.requests.sum.count = 10 * (i + 1);
		snap.requests.sum.duration_ns = 5000 * (i + 1) * (i + 1); /* 5, 15, 25, 35 us in the intervals */
		snap.requests.sum.cross_thread = 2 * (i + 1);
		CHECK_EQ("intervals_add", intervals_add(&iv, &snap, s + (i + 1) * s / 10), 0);
	}
	CHECK_EQ("intervals", iv.n, 4);
	for (size_t i = 0; i < iv.n; i++) {
		const struct interval *it = &iv.items[i];

		CHECK_EQ("offcpu_ns", it->counters.offcpu_ns, want_offcpu[i]);
		CHECK_EQ("write_calls", it->counters.write_calls, want_writes[i]);
		CHECK_EQ("wakeups_in_process", it->wakeups_in_process, want_wakeups[i]);
		CHECK_EQ("requests", it->requests, 10);
		CHECK_EQ("request_ns", it->request_ns, 5000 * (2 * i + 1));
		CHECK_EQ("cross_thread", it->cross_thread, 2);
		CHECK_EQ("duration_ms", (__u64)(it->duration_s * 1000 + 0.5), 100);
		sum_offcpu += it->counters.offcpu_ns;
		sum_writes += it->counters.write_calls;
	}
	CHECK_EQ("sum of offcpu_ns", sum_offcpu, 400);
	CHECK_EQ("sum of write_calls", sum_writes, 10);
	intervals_free(&iv);
	if (!failures)
		printf("ok: intervals\n");
	return failures ? 1 : 0;
}
