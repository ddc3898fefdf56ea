// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The threads that are gone: drained from the exited map, kept as rows up to --exited-rows, then folded by
 * process and name; their wakeup edges moved out of the wakeups map.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>

#include "exited.h"
#include "maps.h"

int exited_init(struct exited_threads *r, size_t keep)
{
	memset(r, 0, sizeof(*r));
	r->keep = keep;
	r->index_size = 64;
	while (r->index_size < 2 * keep + 2)
		r->index_size *= 2;
	r->index = calloc(r->index_size, sizeof(*r->index));
	r->groups = calloc(MAX_FOLDED_GROUPS, sizeof(*r->groups));
	return r->index && r->groups ? 0 : -ENOMEM;
}

void exited_free(struct exited_threads *r)
{
	free(r->edges);
	free(r->edge_counts);
	free(r->keys);
	free(r->threads);
	free(r->index);
	free(r->groups);
	memset(r, 0, sizeof(*r));
}

/* The index slot of tid: its row's (+ 1), or the empty slot where it would go. */
static __u32 *index_slot(const struct exited_threads *r, __u32 tid)
{
	size_t mask = r->index_size - 1, i = (tid * 2654435761u) & mask;

	while (r->index[i] && r->keys[r->index[i] - 1].tid != tid)
		i = (i + 1) & mask;
	return &r->index[i];
}


/* Fold thread t into its process-and-name group of groups[0..*n). */
static void fold_thread(struct folded_group *groups, size_t *n, const struct thread_stats *t)
{
	struct folded_group *g = NULL;

	for (size_t i = 0; i < *n && !g; i++)
		if (groups[i].pid == t->pid && !memcmp(groups[i].comm, t->comm, SPINSCOPE_COMM_LEN))
			g = &groups[i];
	if (!g && *n < MAX_FOLDED_GROUPS) {
		g = &groups[(*n)++];
		g->pid = t->pid;
		memcpy(g->comm, t->comm, SPINSCOPE_COMM_LEN);
		g->sum.first_seen_ns = t->first_seen_ns;
	} else if (!g) { /* a target making thousands of names: the last group takes the rest */
		g = &groups[MAX_FOLDED_GROUPS - 1];
		g->pid = 0;
		memset(g->comm, 0, SPINSCOPE_COMM_LEN);
		snprintf(g->comm, SPINSCOPE_COMM_LEN, "(other names)");
	}
	g->threads++;
	counters_add(&g->sum.c, &t->c);
	for (int i = 0; i < POLL_HIST_BUCKETS; i++)
		g->sum.poll_hist[i] += t->poll_hist[i];
	if (t->first_seen_ns < g->sum.first_seen_ns)
		g->sum.first_seen_ns = t->first_seen_ns;
	if (t->exit_ns > g->sum.exit_ns)
		g->sum.exit_ns = t->exit_ns;
}

static int exited_add(struct exited_threads *r, const struct thread_key *key, const struct thread_stats *t)
{
	__u32 *slot = index_slot(r, key->tid);

	r->count++;
	counters_add(&r->sum, &t->c);
	if (*slot) { /* the kernel reused the tid: the older thread is folded, the newer keeps the row */
		size_t i = *slot - 1;

		if (r->keys[i].start_ns > key->start_ns) {
			fold_thread(r->groups, &r->ngroups, t);
			return 0;
		}
		fold_thread(r->groups, &r->ngroups, &r->threads[i]);
		r->keys[i] = *key;
		r->threads[i] = *t;
		return 0;
	}
	if (r->n >= r->keep) {
		fold_thread(r->groups, &r->ngroups, t);
		return 0;
	}
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		struct thread_key *keys = realloc(r->keys, cap * sizeof(*keys));
		struct thread_stats *threads;

		if (!keys)
			return -ENOMEM;
		r->keys = keys;
		threads = realloc(r->threads, cap * sizeof(*threads));
		if (!threads)
			return -ENOMEM;
		r->threads = threads;
		r->cap = cap;
	}
	r->keys[r->n] = *key;
	r->threads[r->n] = *t;
	*slot = ++r->n;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	__u32 x = *(const __u32 *)a, y = *(const __u32 *)b;

	return x < y ? -1 : x > y;
}

static void exited_edge_add(struct exited_threads *r, struct wakeup_edge e, __u64 count, const __u32 *gone, size_t ngone)
{
	size_t i;

	r->edges_sum += count;
	if (r->nedges >= 4 * r->keep) { /* full: name the gone side 0, which keeps one edge per live side */
		if (bsearch(&e.waker_tid, gone, ngone, sizeof(*gone), cmp_u32))
			e.waker_tid = 0;
		if (bsearch(&e.wakee_tid, gone, ngone, sizeof(*gone), cmp_u32))
			e.wakee_tid = 0;
	}
	for (i = 0; i < r->nedges; i++) /* linear: edges move out at most once per thread gone */
		if (!memcmp(&r->edges[i], &e, sizeof(e)))
			break;
	if (i == r->nedges) {
		if (r->nedges == r->edges_cap) {
			size_t cap = r->edges_cap ? 2 * r->edges_cap : 64;
			struct wakeup_edge *edges = realloc(r->edges, cap * sizeof(*edges));
			__u64 *counts = edges ? realloc(r->edge_counts, cap * sizeof(*counts)) : NULL;

			if (edges)
				r->edges = edges;
			if (!counts)
				return; /* out of memory: the count is in edges_sum, the edge is lost */
			r->edge_counts = counts;
			r->edges_cap = cap;
		}
		r->edges[i] = e;
		r->edge_counts[i] = 0;
		r->nedges++;
	}
	r->edge_counts[i] += count;
}

int exited_edges(struct exited_threads *r, int wakeups_fd, __u32 max_entries, const struct thread_key *keys, size_t n)
{
	struct wakeup_edge *edges;
	__u32 *gone;
	__u64 *counts;
	size_t nedges;
	int err;

	if (!n)
		return 0;
	gone = malloc(n * sizeof(*gone));
	if (!gone)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		gone[i] = keys[i].tid;
	qsort(gone, n, sizeof(*gone), cmp_u32);
	err = map_dump(wakeups_fd, sizeof(*edges), sizeof(*counts), max_entries, (void **)&edges, (void **)&counts,
		       &nedges);
	for (size_t i = 0; !err && i < nedges; i++) {
		if (!bsearch(&edges[i].waker_tid, gone, n, sizeof(*gone), cmp_u32) &&
		    !bsearch(&edges[i].wakee_tid, gone, n, sizeof(*gone), cmp_u32))
			continue;
		/* A thread gone makes no more wakeups, nor gets any: its edges are final. */
		if (bpf_map_delete_elem(wakeups_fd, &edges[i]) == 0)
			exited_edge_add(r, edges[i], counts[i], gone, n);
	}
	free(edges);
	free(counts);
	free(gone);
	return err;
}

#define DRAIN_BATCH 128

/* Keep or fold one batch of drained threads, appending their keys to *drained (when drained). 0 or -errno. */
static int exited_batch(struct exited_threads *r, const struct thread_key *keys, const struct thread_stats *values,
			__u32 count, struct thread_key **drained, size_t *ndrained)
{
	if (drained && count) { /* room for the batch at once: one realloc per batch, not per thread */
		struct thread_key *grown = realloc(*drained, (*ndrained + count) * sizeof(**drained));

		if (!grown)
			return -ENOMEM;
		*drained = grown;
	}
	for (__u32 i = 0; i < count; i++) {
		int err = exited_add(r, &keys[i], &values[i]);

		if (err)
			return err;
		if (drained)
			(*drained)[(*ndrained)++] = keys[i];
	}
	return 0;
}

int exited_drain(struct exited_threads *r, int exited_fd, struct thread_key **drained, size_t *ndrained)
{
	struct thread_key *keys = malloc(DRAIN_BATCH * sizeof(*keys));
	struct thread_stats *values = malloc(DRAIN_BATCH * sizeof(*values));
	__u64 token = 0;
	bool first = true;
	int err = 0;

	if (ndrained)
		*ndrained = 0;
	if (drained)
		*drained = NULL;
	if (!keys || !values) {
		free(keys);
		free(values);
		return -ENOMEM;
	}
	for (;;) {
		__u32 count = DRAIN_BATCH;
		int ret = bpf_map_lookup_and_delete_batch(exited_fd, first ? NULL : &token, &token, keys, values,
							  &count, NULL);

		ret = ret ? -errno : 0;
		first = false;
		err = exited_batch(r, keys, values, count, drained, ndrained);
		if (err || ret == -ENOENT) /* ENOENT: the walk is complete */
			break;
		if (ret) {
			err = ret;
			break;
		}
	}
	free(keys);
	free(values);
	return err;
}

int exited_rows_of(const struct exited_threads *r, const __u32 *live_tids, size_t nlive, struct exited_rows *rows)
{
	memset(rows, 0, sizeof(*rows));
	rows->groups = malloc(MAX_FOLDED_GROUPS * sizeof(*rows->groups));
	rows->folded = calloc(r->n + 1, sizeof(*rows->folded));
	if (!rows->groups || !rows->folded) {
		exited_rows_free(rows);
		return -ENOMEM;
	}
	memcpy(rows->groups, r->groups, r->ngroups * sizeof(*rows->groups));
	rows->ngroups = r->ngroups;
	for (size_t i = 0; i < nlive; i++) {
		__u32 row = *index_slot(r, live_tids[i]);

		if (row && !rows->folded[row - 1]) {
			rows->folded[row - 1] = true;
			fold_thread(rows->groups, &rows->ngroups, &r->threads[row - 1]);
		}
	}
	return 0;
}

void exited_rows_free(struct exited_rows *rows)
{
	free(rows->groups);
	free(rows->folded);
	memset(rows, 0, sizeof(*rows));
}
