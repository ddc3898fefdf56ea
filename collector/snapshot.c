// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Reading the BPF maps into a snapshot (the threads gone drained on the way, exited.c), and what a
 * snapshot sums to: its totals, its wakeups, the processes it saw.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "maps.h"
#include "snapshot.h"
#include "spinscope.skel.h"

/*
 * The probes add a thread's on-CPU (off-CPU) time when it switches out (in): a thread on a CPU when
 * the maps are read has its current slice still open. Close it at the read, or a loop that never
 * sleeps shows a fraction of its CPU time.
 */
static void close_open_slices(struct thread_stats *s, __u64 now)
{
	if (s->switch_in_ns && now > s->switch_in_ns)
		s->c.oncpu_ns += now - s->switch_in_ns;
	else if (s->switch_out_ns && now > s->switch_out_ns && !(s->flags & THREAD_EXITED))
		s->c.offcpu_ns += now - s->switch_out_ns;
}

static int read_threads(int fd, __u32 max_entries, struct snapshot *snap)
{
	__u64 now = monotonic_ns();
	int err = map_dump(fd, sizeof(*snap->tids), sizeof(*snap->threads), max_entries, (void **)&snap->tids,
			   (void **)&snap->threads, &snap->nthreads);

	for (size_t i = 0; !err && i < snap->nthreads; i++)
		close_open_slices(&snap->threads[i], now);
	return err;
}

static void add_request_stats(struct request_stats *sum, const struct request_stats *r)
{
	/* request_stats is all __u64: add it element-wise. */
	const __u64 *src = (const __u64 *)r;
	__u64 *dst = (__u64 *)sum;

	for (size_t i = 0; i < sizeof(*r) / sizeof(__u64); i++)
		dst[i] += src[i];
}

static int read_requests(int fd, struct snapshot *snap)
{
	int ncpus = libbpf_num_possible_cpus();
	struct request_stats *percpu;
	__u32 zero = 0;

	if (ncpus <= 0)
		return ncpus ? ncpus : -EINVAL;
	percpu = calloc(ncpus, sizeof(*percpu));
	if (!percpu)
		return -ENOMEM;
	if (bpf_map_lookup_elem(fd, &zero, percpu)) {
		free(percpu);
		return -errno;
	}
	for (int cpu = 0; cpu < ncpus; cpu++)
		add_request_stats(&snap->requests, &percpu[cpu]);
	free(percpu);
	return 0;
}

/* Requests still being answered at the final read: counted with the finished ones. */
static int read_open_requests(int fd, __u32 max_entries, struct snapshot *snap)
{
	struct socket_state *states;
	__u64 *sockets;
	size_t n;
	int err = map_dump(fd, sizeof(*sockets), sizeof(*states), max_entries, (void **)&sockets,
			   (void **)&states, &n);

	for (size_t i = 0; !err && i < n; i++) {
		if (states[i].phase == REQ_WRITING && states[i].write_calls) {
			request_stats_add(&snap->requests, &states[i]);
			snap->open_requests++;
		}
	}
	free(sockets);
	free(states);
	return err;
}

/* The live threads read, less those the drain just found gone: a thread that exited between the two reads
 * is counted once, from its final copy. */
static void drop_drained(struct snapshot *snap, const struct thread_key *drained, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		for (size_t i = 0; i < snap->nthreads; i++) {
			if (snap->tids[i] != drained[k].tid || snap->threads[i].start_ns != drained[k].start_ns)
				continue;
			snap->nthreads--;
			snap->tids[i] = snap->tids[snap->nthreads];
			snap->threads[i] = snap->threads[snap->nthreads];
			break;
		}
	}
}

/* The listeners, and how many processes called accept on each (from the listener_pids map's pairs). */
static int read_listeners(struct spinscope_bpf *skel, struct snapshot *snap)
{
	struct bpf_map *pids_map = skel->maps.listener_pids;
	struct listener_pid *pairs = NULL;
	__u8 *ones = NULL;
	size_t npairs = 0;
	int err;

	err = map_dump(bpf_map__fd(skel->maps.listeners), sizeof(*snap->listener_keys), sizeof(*snap->listeners),
		       bpf_map__max_entries(skel->maps.listeners), (void **)&snap->listener_keys,
		       (void **)&snap->listeners, &snap->nlisteners);
	if (!err)
		err = map_dump(bpf_map__fd(pids_map), sizeof(*pairs), sizeof(*ones), bpf_map__max_entries(pids_map),
			       (void **)&pairs, (void **)&ones, &npairs);
	if (!err) {
		snap->listener_pids = calloc(snap->nlisteners + 1, sizeof(*snap->listener_pids));
		err = snap->listener_pids ? 0 : -ENOMEM;
	}
	for (size_t i = 0; !err && i < snap->nlisteners; i++)
		for (size_t k = 0; k < npairs; k++)
			snap->listener_pids[i] += !memcmp(&pairs[k].listener, &snap->listener_keys[i],
							  sizeof(pairs[k].listener));
	free(pairs);
	free(ones);
	return err;
}

int snapshot_read(struct spinscope_bpf *skel, struct exited_threads *exited, struct snapshot *snap, bool final)
{
	struct bpf_map *threads = skel->maps.threads, *wakeups = skel->maps.wakeups, *sockets = skel->maps.sockets;
	struct thread_key *drained = NULL;
	size_t ndrained = 0;
	int err;

	memset(snap, 0, sizeof(*snap));
	snap->exited = exited;
	snap->globals = skel->bss->globals;
	/* Live threads first, then the ones gone: a thread retiring in between is in both, and counted once. */
	err = read_threads(bpf_map__fd(threads), bpf_map__max_entries(threads), snap);
	if (!err)
		err = exited_drain(exited, bpf_map__fd(skel->maps.exited), &drained, &ndrained);
	if (!err)
		drop_drained(snap, drained, ndrained);
	if (!err)
		err = exited_edges(exited, bpf_map__fd(wakeups), bpf_map__max_entries(wakeups), drained, ndrained);
	free(drained);
	if (!err)
		err = map_dump(bpf_map__fd(wakeups), sizeof(*snap->edges), sizeof(*snap->edge_counts),
			       bpf_map__max_entries(wakeups), (void **)&snap->edges, (void **)&snap->edge_counts,
			       &snap->nedges);
	if (!err)
		err = read_requests(bpf_map__fd(skel->maps.requests), snap);
	if (!err && final)
		err = read_open_requests(bpf_map__fd(sockets), bpf_map__max_entries(sockets), snap);
	if (!err) /* small too: the stream's lines name the program a wrapper exec'd (spinscope top) */
		err = map_dump(bpf_map__fd(skel->maps.execs), sizeof(*snap->exec_pids), sizeof(*snap->execs),
			       bpf_map__max_entries(skel->maps.execs), (void **)&snap->exec_pids,
			       (void **)&snap->execs, &snap->nexecs);
	if (!err) /* small, and the stream's lines (not final) carry them too */
		err = read_listeners(skel, snap);
	return err;
}

void snapshot_free(struct snapshot *snap)
{
	free(snap->tids);
	free(snap->threads);
	free(snap->edges);
	free(snap->edge_counts);
	free(snap->exec_pids);
	free(snap->execs);
	free(snap->listener_keys);
	free(snap->listeners);
	free(snap->listener_pids);
	snap->listener_keys = NULL;
	snap->listeners = NULL;
	snap->listener_pids = NULL;
	snap->exec_pids = NULL;
	snap->execs = NULL;
	snap->tids = NULL;
	snap->threads = NULL;
	snap->edges = NULL;
	snap->edge_counts = NULL;
}

void snapshot_totals(const struct snapshot *snap, struct thread_counters *totals)
{
	memset(totals, 0, sizeof(*totals));
	for (size_t i = 0; i < snap->nthreads; i++)
		counters_add(totals, &snap->threads[i].c);
	if (snap->exited)
		counters_add(totals, &snap->exited->sum);
}

__u64 snapshot_wakeups(const struct snapshot *snap)
{
	__u64 sum = 0;

	for (size_t i = 0; i < snap->nedges; i++)
		sum += snap->edge_counts[i];
	if (snap->exited)
		sum += snap->exited->edges_sum;
	return sum;
}

__u64 snapshot_threads_exited(const struct snapshot *snap)
{
	__u64 exited = snap->exited ? snap->exited->count : 0;

	for (size_t i = 0; i < snap->nthreads; i++)
		exited += !!(snap->threads[i].flags & THREAD_EXITED);
	return exited;
}

void snapshot_process_gone(struct snapshot *snap, __u32 pid, __u64 now)
{
	for (size_t i = 0; i < snap->nthreads; i++) {
		struct thread_stats *t = &snap->threads[i];

		if (t->pid == pid && !(t->flags & THREAD_EXITED)) {
			t->flags |= THREAD_EXITED;
			t->exit_ns = now;
		}
	}
}

/* The pid of the i-th thread of the snapshot: the live ones, then the exited rows, then the folded groups. */
static __u32 nth_pid(const struct snapshot *snap, size_t i)
{
	const struct exited_threads *r = snap->exited;
	size_t nexited = r ? r->n : 0;

	if (i < snap->nthreads)
		return snap->threads[i].pid;
	if (i < snap->nthreads + nexited)
		return r->threads[i - snap->nthreads].pid;
	return r->groups[i - snap->nthreads - nexited].pid;
}

__u32 *snapshot_pids(const struct snapshot *snap, __u32 first, size_t *n)
{
	const struct exited_threads *r = snap->exited;
	size_t total = snap->nthreads + (r ? r->n + r->ngroups : 0);
	__u32 *pids = calloc(total + 2, sizeof(*pids));

	*n = 0;
	if (!pids)
		return NULL;
	if (first)
		pids[(*n)++] = first;
	for (size_t i = 0; i < total; i++) {
		__u32 pid = nth_pid(snap, i);
		bool dup = !pid;

		for (size_t j = 0; j < *n && !dup; j++) /* linear: a capture sees few processes */
			dup = pids[j] == pid;
		if (!dup)
			pids[(*n)++] = pid;
	}
	return pids;
}

static int compare_u32(const void *a, const void *b)
{
	__u32 x = *(const __u32 *)a, y = *(const __u32 *)b;

	return (x > y) - (x < y);
}

/* The capture's thread rows (the live threads, and the gone ones not folded: exited_rows_of) and the distinct
 * processes among them: what the report counts. 0, or -ENOMEM. */
int capture_rows(const struct snapshot *snap, size_t *threads, size_t *processes)
{
	const struct exited_threads *r = snap->exited;
	size_t nexited = r ? r->n : 0, n = 0;
	__u32 *pids = malloc((snap->nthreads + nexited + 1) * sizeof(*pids));
	struct exited_rows rows = { 0 };

	if (!pids || (r && exited_rows_of(r, snap->tids, snap->nthreads, &rows))) {
		free(pids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < snap->nthreads; i++)
		pids[n++] = snap->threads[i].pid;
	for (size_t i = 0; i < nexited; i++)
		if (!rows.folded[i])
			pids[n++] = r->threads[i].pid;
	exited_rows_free(&rows);
	*threads = n;
	qsort(pids, n, sizeof(*pids), compare_u32);
	*processes = 0;
	for (size_t i = 0; i < n; i++)
		*processes += i == 0 || pids[i] != pids[i - 1];
	free(pids);
	return 0;
}
