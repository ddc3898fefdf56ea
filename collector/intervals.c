// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The capture's `intervals`: the change of the counters between snapshots taken every --interval.
 */
#include <errno.h>
#include <stdlib.h>

#include "intervals.h"

void intervals_init(struct intervals *iv, __u64 start_ns)
{
	*iv = (struct intervals){ .start_ns = start_ns, .prev_ns = start_ns };
}

int intervals_add(struct intervals *iv, const struct snapshot *snap, __u64 now)
{
	struct thread_counters totals;
	__u64 wakeups = snapshot_wakeups(snap);
	struct interval *it;

	if (iv->n == iv->cap) {
		size_t cap = iv->cap ? iv->cap * 2 : 64;
		struct interval *grown = realloc(iv->items, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		iv->items = grown;
		iv->cap = cap;
	}
	snapshot_totals(snap, &totals);
	it = &iv->items[iv->n++];
	it->t_s = (now - iv->start_ns) / 1e9;
	it->duration_s = (now - iv->prev_ns) / 1e9;
	it->requests = snap->requests.sum.count - iv->prev_requests;
	it->request_ns = snap->requests.sum.duration_ns - iv->prev_request_ns;
	it->cross_thread = snap->requests.sum.cross_thread - iv->prev_cross_thread;
	it->wakeups_in_process = wakeups > iv->prev_wakeups ? wakeups - iv->prev_wakeups : 0;
	/*
	 * A counter's total never falls, but a read can make it look as if it did: the probes update a
	 * thread's times while the kernel copies its entry, so a copy can hold a slice already added and
	 * its start still set, and close_open_slices() then adds the slice twice (CI once saw a 17 ms dip in
	 * offcpu_ns between two intervals). Take each total as the largest seen so far: the
	 * interval after a dip gets the change from that largest value, and the intervals add up to the
	 * largest total read.
	 */
#define X(name)                                                                                    \
	it->counters.name = totals.name > iv->prev.name ? totals.name - iv->prev.name : 0;          \
	if (totals.name < iv->prev.name)                                                            \
		totals.name = iv->prev.name;
	SPINSCOPE_COUNTERS(X)
#undef X
#define X(name) it->drops.name = snap->globals.drops_##name - iv->prev_drops.name;
	SPINSCOPE_DROPS(X)
#undef X
#define X(name) iv->prev_drops.name = snap->globals.drops_##name;
	SPINSCOPE_DROPS(X)
#undef X
	iv->prev = totals;
	iv->prev_requests = snap->requests.sum.count;
	iv->prev_request_ns = snap->requests.sum.duration_ns;
	iv->prev_cross_thread = snap->requests.sum.cross_thread;
	if (wakeups > iv->prev_wakeups)
		iv->prev_wakeups = wakeups;
	iv->prev_ns = now;
	return 0;
}

void intervals_free(struct intervals *iv)
{
	free(iv->items);
	iv->items = NULL;
	iv->n = iv->cap = 0;
}
