// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <json-c/json.h>

#include "capture.h"
#include "cgroup.h"
#include "procfs.h"
#include "spinscope.skel.h"

/* ---------------------------------------------------------------------------------------- */
/* Reading the maps                                                                           */

__u64 monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

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

/*
 * Every entry of a hash map, as parallel arrays of keys and values (malloc'd), read in batches: the
 * kernel walks the map bucket by bucket, so entries the probes delete meanwhile cannot make the walk
 * start over and count an entry twice (as a get_next_key walk whose current key was deleted does).
 */
static int map_dump(int fd, size_t key_size, size_t value_size, __u32 max_entries, void **keys,
		    void **values, size_t *n)
{
	__u64 token = 0; /* hash maps' batch position: a bucket index */
	size_t cap = max_entries ? max_entries : 1;
	bool first = true;
	int err = 0;

	*n = 0;
	*keys = malloc(cap * key_size);
	*values = malloc(cap * value_size);
	if (!*keys || !*values)
		return -ENOMEM;
	while (*n < cap) {
		__u32 count = cap - *n;

		err = bpf_map_lookup_batch(fd, first ? NULL : &token, &token, (char *)*keys + *n * key_size,
					   (char *)*values + *n * value_size, &count, NULL);
		err = err ? -errno : 0;
		*n += count;
		first = false;
		if (err == -ENOENT) /* the walk is complete */
			return 0;
		if (err)
			return err;
	}
	return 0;
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

/* ---------------------------------------------------------------------------------------- */
/* Threads that are gone                                                                      */

int retired_init(struct retired *r, size_t keep)
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

void retired_free(struct retired *r)
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
static __u32 *index_slot(const struct retired *r, __u32 tid)
{
	size_t mask = r->index_size - 1, i = (tid * 2654435761u) & mask;

	while (r->index[i] && r->keys[r->index[i] - 1].tid != tid)
		i = (i + 1) & mask;
	return &r->index[i];
}

static void add_counters(struct thread_counters *sum, const struct thread_counters *c)
{
#define X(name) sum->name += c->name;
	SPINSCOPE_COUNTERS(X)
#undef X
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
	add_counters(&g->sum.c, &t->c);
	for (int i = 0; i < POLL_HIST_BUCKETS; i++)
		g->sum.poll_hist[i] += t->poll_hist[i];
	if (t->first_seen_ns < g->sum.first_seen_ns)
		g->sum.first_seen_ns = t->first_seen_ns;
	if (t->exit_ns > g->sum.exit_ns)
		g->sum.exit_ns = t->exit_ns;
}

static int retire(struct retired *r, const struct thread_key *key, const struct thread_stats *t)
{
	__u32 *slot = index_slot(r, key->tid);

	r->count++;
	add_counters(&r->sum, &t->c);
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

static void retired_edge_add(struct retired *r, struct wakeup_edge e, __u64 count, const __u32 *gone, size_t ngone)
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

int retired_edges(struct retired *r, int wakeups_fd, __u32 max_entries, const struct thread_key *keys, size_t n)
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
			retired_edge_add(r, edges[i], counts[i], gone, n);
	}
	free(edges);
	free(counts);
	free(gone);
	return err;
}

#define DRAIN_BATCH 128

int retired_drain(struct retired *r, int exited_fd, struct thread_key **drained, size_t *ndrained)
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
		for (__u32 i = 0; i < count && !err; i++) {
			err = retire(r, &keys[i], &values[i]);
			if (!err && drained) {
				struct thread_key *grown = realloc(*drained, (*ndrained + 1) * sizeof(**drained));

				if (!grown) {
					err = -ENOMEM;
					break;
				}
				*drained = grown;
				grown[(*ndrained)++] = keys[i];
			}
		}
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

/* The live threads read, less those the drain just found gone: a thread that retired between the two reads
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

int snapshot_read(struct spinscope_bpf *skel, struct retired *retired, struct snapshot *snap, bool final)
{
	struct bpf_map *threads = skel->maps.threads, *wakeups = skel->maps.wakeups, *sockets = skel->maps.sockets;
	struct thread_key *drained = NULL;
	size_t ndrained = 0;
	int err;

	memset(snap, 0, sizeof(*snap));
	snap->retired = retired;
	snap->globals = skel->bss->globals;
	/* Live threads first, then the ones gone: a thread retiring in between is in both, and counted once. */
	err = read_threads(bpf_map__fd(threads), bpf_map__max_entries(threads), snap);
	if (!err)
		err = retired_drain(retired, bpf_map__fd(skel->maps.exited), &drained, &ndrained);
	if (!err)
		drop_drained(snap, drained, ndrained);
	if (!err)
		err = retired_edges(retired, bpf_map__fd(wakeups), bpf_map__max_entries(wakeups), drained, ndrained);
	free(drained);
	if (!err)
		err = map_dump(bpf_map__fd(wakeups), sizeof(*snap->edges), sizeof(*snap->edge_counts),
			       bpf_map__max_entries(wakeups), (void **)&snap->edges, (void **)&snap->edge_counts,
			       &snap->nedges);
	if (!err)
		err = read_requests(bpf_map__fd(skel->maps.requests), snap);
	if (!err && final)
		err = read_open_requests(bpf_map__fd(sockets), bpf_map__max_entries(sockets), snap);
	if (!err && final)
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
		add_counters(totals, &snap->threads[i].c);
	if (snap->retired)
		add_counters(totals, &snap->retired->sum);
}

__u64 snapshot_wakeups(const struct snapshot *snap)
{
	__u64 sum = 0;

	for (size_t i = 0; i < snap->nedges; i++)
		sum += snap->edge_counts[i];
	if (snap->retired)
		sum += snap->retired->edges_sum;
	return sum;
}

/* ---------------------------------------------------------------------------------------- */
/* Intervals                                                                                  */

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

/* ---------------------------------------------------------------------------------------- */
/* JSON                                                                                       */

static json_object *jint(__u64 v)
{
	return json_object_new_uint64(v);
}

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no overlongs, surrogates or code points
 * above U+10FFFF), or 0 if the byte at p does not start one. */
static size_t utf8_sequence(const unsigned char *p, size_t left)
{
	unsigned char lo = 0x80, hi = 0xBF; /* the range of the second byte */
	size_t n;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xC2 && p[0] <= 0xDF)
		n = 2;
	else if (p[0] >= 0xE0 && p[0] <= 0xEF)
		n = 3, lo = p[0] == 0xE0 ? 0xA0 : 0x80, hi = p[0] == 0xED ? 0x9F : 0xBF;
	else if (p[0] >= 0xF0 && p[0] <= 0xF4)
		n = 4, lo = p[0] == 0xF0 ? 0x90 : 0x80, hi = p[0] == 0xF4 ? 0x8F : 0xBF;
	else
		return 0;
	if (left < n || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if ((p[i] & 0xC0) != 0x80)
			return 0;
	return n;
}

/*
 * A string the target chose (a thread name, an argument, a path) as JSON text: whatever bytes it holds,
 * the capture stays valid UTF-8. Each byte that does not start a well-formed sequence becomes U+FFFD;
 * control characters are escaped by json-c (\u001b). docs/capture-format.md says so.
 */
static json_object *jtext(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t left = strlen(s), used = 0;
	char *clean = malloc(3 * left + 1);
	json_object *o;

	if (!clean)
		return json_object_new_string("\xEF\xBF\xBD");
	while (left) {
		size_t n = utf8_sequence(p, left);

		if (n) {
			memcpy(clean + used, p, n);
			used += n;
		} else {
			memcpy(clean + used, "\xEF\xBF\xBD", 3); /* U+FFFD REPLACEMENT CHARACTER */
			used += 3;
			n = 1;
		}
		p += n;
		left -= n;
	}
	clean[used] = '\0';
	o = json_object_new_string(clean);
	free(clean);
	return o;
}

/* Doubles printed with a fixed precision rather than json-c's 17 significant digits. */
static json_object *jseconds(double v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%.6f", v);
	return json_object_new_double_s(v, buf);
}

static json_object *jcounters(const struct thread_counters *c)
{
	json_object *o = json_object_new_object();

#define X(name) json_object_object_add(o, #name, jint(c->name));
	SPINSCOPE_COUNTERS(X)
#undef X
	return o;
}

/* The writers of SPINSCOPE_INTERVAL_FIELDS' kinds. */
static json_object *jfield_seconds(const double *v)
{
	return jseconds(*v);
}

static json_object *jfield_count(const __u64 *v)
{
	return jint(*v);
}

static json_object *jfield_counters(const struct thread_counters *c)
{
	return jcounters(c);
}

static json_object *jfield_drops(const struct drop_counts *d)
{
	json_object *o = json_object_new_object();

#define X(name) json_object_object_add(o, #name, jint(d->name));
	SPINSCOPE_DROPS(X)
#undef X
	return o;
}

static json_object *jinterval(const struct interval *it)
{
	json_object *o = json_object_new_object();

#define X(name, kind) json_object_object_add(o, #name, jfield_##kind(&it->name));
	SPINSCOPE_INTERVAL_FIELDS(X)
#undef X
	return o;
}

/* A log2 histogram as a list of counts, trailing empty buckets left out. */
static json_object *jhist(const __u64 *buckets, size_t n)
{
	json_object *a = json_object_new_array();

	while (n > 0 && buckets[n - 1] == 0)
		n--;
	for (size_t i = 0; i < n; i++)
		json_object_array_add(a, jint(buckets[i]));
	return a;
}

static double since_start(const struct capture_meta *meta, __u64 ns)
{
	return ns > meta->start_mono_ns ? (ns - meta->start_mono_ns) / 1e9 : 0.0;
}

static json_object *jthread(const struct capture_meta *meta, __u32 tid, const struct thread_stats *s)
{
	bool alive = !(s->flags & THREAD_EXITED);
	json_object *o = json_object_new_object();
	char comm[SPINSCOPE_COMM_LEN + 1] = { 0 };

	memcpy(comm, s->comm, SPINSCOPE_COMM_LEN);
	/* A live thread may have renamed itself since the probe first saw it: ask /proc. */
	if (alive)
		proc_thread_comm((int)s->pid, (int)tid, comm, sizeof(comm));

	json_object_object_add(o, "tid", jint(tid));
	json_object_object_add(o, "pid", jint(s->pid));
	json_object_object_add(o, "comm", jtext(comm));
	json_object_object_add(o, "alive", json_object_new_boolean(alive));
	json_object_object_add(o, "first_seen_s", jseconds(since_start(meta, s->first_seen_ns)));
	json_object_object_add(o, "exit_s", alive ? NULL : jseconds(since_start(meta, s->exit_ns)));
#define X(name) json_object_object_add(o, #name, jint(s->c.name));
	SPINSCOPE_COUNTERS(X)
#undef X
	json_object_object_add(o, "poll_events_hist", jhist(s->poll_hist, POLL_HIST_BUCKETS));
	return o;
}

/* The kernel memory a BPF map holds, from its fdinfo's memlock line (0 if unreadable). */
static __u64 map_memlock(int fd)
{
	char path[64], line[128];
	unsigned long long bytes = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "memlock: %llu", &bytes) == 1)
			break;
	fclose(f);
	return bytes;
}

/* What the collector itself used so far: its CPU time, its peak resident memory, and the kernel memory
 * its maps hold (a long capture's costs, in the capture). */
static void jself_usage(json_object *tool, const struct capture_meta *meta)
{
	struct rusage ru = { 0 };
	__u64 maps = 0;

	getrusage(RUSAGE_SELF, &ru);
	for (size_t i = 0; i < meta->nmaps; i++)
		maps += map_memlock(meta->map_fds[i]);
	json_object_object_add(tool, "cpu_s", jseconds(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
						       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6));
	json_object_object_add(tool, "max_rss_bytes", jint((__u64)ru.ru_maxrss * 1024));
	json_object_object_add(tool, "map_bytes", jint(maps));
}

static json_object *jfolded(const struct capture_meta *meta, const struct folded_group *g)
{
	json_object *o = json_object_new_object();
	char comm[SPINSCOPE_COMM_LEN + 1] = { 0 };

	memcpy(comm, g->comm, SPINSCOPE_COMM_LEN);
	json_object_object_add(o, "pid", jint(g->pid));
	json_object_object_add(o, "comm", jtext(comm));
	json_object_object_add(o, "threads", jint(g->threads));
	json_object_object_add(o, "first_seen_s", jseconds(since_start(meta, g->sum.first_seen_ns)));
	json_object_object_add(o, "last_exit_s", jseconds(since_start(meta, g->sum.exit_ns)));
#define X(name) json_object_object_add(o, #name, jint(g->sum.c.name));
	SPINSCOPE_COUNTERS(X)
#undef X
	json_object_object_add(o, "poll_events_hist", jhist(g->sum.poll_hist, POLL_HIST_BUCKETS));
	return o;
}

/*
 * The threads that are gone: a row each for those kept, and the folded groups. A kept thread whose tid a
 * live thread has taken since is folded here too (on a copy of the groups), so a tid names one row.
 */
static void jretired(const struct capture_meta *meta, const struct snapshot *snap, json_object *threads,
		     json_object *folded)
{
	const struct retired *r = snap->retired;
	struct folded_group *groups;
	size_t ngroups;
	bool *taken;

	if (!r)
		return;
	groups = malloc(MAX_FOLDED_GROUPS * sizeof(*groups));
	taken = calloc(r->n + 1, sizeof(*taken));
	if (!groups || !taken) {
		free(groups);
		free(taken);
		return;
	}
	memcpy(groups, r->groups, r->ngroups * sizeof(*groups));
	ngroups = r->ngroups;
	for (size_t i = 0; i < snap->nthreads; i++) {
		__u32 row = *index_slot(r, snap->tids[i]);

		if (row && !taken[row - 1]) {
			taken[row - 1] = true;
			fold_thread(groups, &ngroups, &r->threads[row - 1]);
		}
	}
	for (size_t i = 0; i < r->n; i++)
		if (!taken[i])
			json_object_array_add(threads, jthread(meta, r->keys[i].tid, &r->threads[i]));
	for (size_t i = 0; i < ngroups; i++)
		json_object_array_add(folded, jfolded(meta, &groups[i]));
	free(groups);
	free(taken);
}

static int compare_u32(const void *a, const void *b)
{
	__u32 x = *(const __u32 *)a, y = *(const __u32 *)b;

	return (x > y) - (x < y);
}

/* The rows jretired and the live threads make of `threads` (a gone thread whose tid a live one took is
 * folded, not a row) and the distinct processes among them: what the report counts. */
int capture_rows(const struct snapshot *snap, size_t *threads, size_t *processes)
{
	const struct retired *r = snap->retired;
	size_t nretired = r ? r->n : 0, n = 0;
	__u32 *pids = malloc((snap->nthreads + nretired + 1) * sizeof(*pids));
	bool *taken = calloc(nretired + 1, sizeof(*taken));

	if (!pids || !taken) {
		free(pids);
		free(taken);
		return -ENOMEM;
	}
	for (size_t i = 0; i < snap->nthreads; i++) {
		__u32 row = r ? *index_slot(r, snap->tids[i]) : 0;

		if (row)
			taken[row - 1] = true;
		pids[n++] = snap->threads[i].pid;
	}
	for (size_t i = 0; i < nretired; i++)
		if (!taken[i])
			pids[n++] = r->threads[i].pid;
	*threads = n;
	qsort(pids, n, sizeof(*pids), compare_u32);
	*processes = 0;
	for (size_t i = 0; i < n; i++)
		*processes += i == 0 || pids[i] != pids[i - 1];
	free(pids);
	free(taken);
	return 0;
}

static const char *wake_mechanism_name(__u32 mechanism)
{
	static const char *const names[WAKE_MECHANISMS] = {
		[WAKE_OTHER] = "other", [WAKE_FUTEX] = "futex", [WAKE_IO] = "io",
		[WAKE_MM] = "mm",       [WAKE_EXIT] = "exit",
	};

	return mechanism < WAKE_MECHANISMS ? names[mechanism] : "other";
}

static void jrequest_sums(json_object *o, const struct response_class *c)
{
#define X(name) json_object_object_add(o, #name, jint(c->name));
	SPINSCOPE_REQUEST_SUMS(X)
#undef X
}

static json_object *jrequests(const struct snapshot *snap)
{
	const struct request_stats *r = &snap->requests;
	json_object *o = json_object_new_object();
	json_object *hist = json_object_new_object();
	json_object *by_size = json_object_new_array();

	jrequest_sums(o, &r->sum);
	json_object_object_add(o, "unattributed_writes", jint(r->unattributed_writes));
	json_object_object_add(o, "open_at_end", jint(snap->open_requests));
#define X(name) json_object_object_add(hist, #name, jhist(r->hist_##name, REQ_HIST_BUCKETS));
	SPINSCOPE_REQUEST_HISTS(X)
#undef X
	json_object_object_add(o, "hist", hist);
	for (size_t b = 0; b < REQ_HIST_BUCKETS; b++) {
		const struct response_class *c = &r->by_size[b];
		json_object *row;

		if (!c->count)
			continue;
		row = json_object_new_object();
		json_object_object_add(row, "bytes_min", jint(b ? 1ULL << (b - 1) : 0));
		json_object_object_add(row, "bytes_max",
				       jint(b ? (b < 64 ? (1ULL << b) - 1 : ~0ULL) : 0));
		jrequest_sums(row, c);
		json_object_array_add(by_size, row);
	}
	json_object_object_add(o, "by_size", by_size);
	return o;
}

/* The processes that exec'd while traced: from `t_s` on, `pid` ran `filename` as `comm`. */
static json_object *jexecs(const struct capture_meta *meta, const struct snapshot *snap)
{
	json_object *list = json_object_new_array();

	for (size_t i = 0; i < snap->nexecs; i++) {
		const struct exec_record *e = &snap->execs[i];
		json_object *o = json_object_new_object();
		char comm[SPINSCOPE_COMM_LEN + 1] = { 0 }, filename[EXEC_FILENAME_LEN + 1] = { 0 };

		memcpy(comm, e->comm, SPINSCOPE_COMM_LEN);
		memcpy(filename, e->filename, EXEC_FILENAME_LEN);
		json_object_object_add(o, "pid", jint(snap->exec_pids[i]));
		json_object_object_add(o, "t_s", jseconds(since_start(meta, e->last_ns)));
		json_object_object_add(o, "count", jint(e->count));
		json_object_object_add(o, "comm", jtext(comm));
		json_object_object_add(o, "filename", jtext(filename));
		json_object_array_add(list, o);
	}
	return list;
}

static const char *family_name(__u32 family, char *buf, size_t size)
{
	switch (family) {
	case AF_INET:
		return "inet";
	case AF_INET6:
		return "inet6";
	case AF_UNIX:
		return "unix";
	}
	snprintf(buf, size, "af%u", family);
	return buf;
}

/* The listening sockets the target called accept on (schema 5). */
static json_object *jlisteners(const struct snapshot *snap)
{
	json_object *list = json_object_new_array();

	for (size_t i = 0; i < snap->nlisteners; i++) {
		const struct listener_stats *l = &snap->listeners[i];
		json_object *o = json_object_new_object();
		char family[16];

		json_object_object_add(o, "inode", jint(snap->listener_keys[i].ino));
		json_object_object_add(o, "family", jtext(family_name(l->family, family, sizeof(family))));
		json_object_object_add(o, "port", jint(l->port));
		json_object_object_add(o, "accept_calls", jint(l->accept_calls));
		json_object_object_add(o, "accept_ok", jint(l->accept_ok));
		json_object_object_add(o, "accept_eagain", jint(l->accept_eagain));
		json_object_object_add(o, "processes", jint(snap->listener_pids[i]));
		json_object_array_add(list, o);
	}
	return list;
}

/* The target's arguments: their values only when asked (--cmdline), for they may hold secrets. A cgroup has
 * none (argc 0, cmdline null). */
static void jcmdline(json_object *target, const struct capture_meta *meta)
{
	json_object *argv = meta->keep_cmdline && !meta->cgroup ? json_object_new_array() : NULL;
	size_t argc = 0;

	for (size_t off = 0; meta->cmdline && off < meta->cmdline_len; off += strlen(meta->cmdline + off) + 1) {
		argc++;
		if (argv)
			json_object_array_add(argv, jtext(meta->cmdline + off));
	}
	json_object_object_add(target, "argc", jint(argc));
	json_object_object_add(target, "cmdline", argv);
}

static json_object *jtarget(const struct capture_meta *meta, const struct snapshot *snap)
{
	json_object *o = json_object_new_object();
	json_object *pids = json_object_new_array();
	const struct retired *r = snap->retired;
	size_t nretired = r ? r->n : 0, ngroups = r ? r->ngroups : 0, npids = 0;
	size_t total = snap->nthreads + nretired + ngroups;
	__u32 *seen = calloc(total + 1, sizeof(*seen));

	/* Every process that had a thread traced, the target first (in PID mode); threads gone included. */
	if (meta->pid)
		json_object_array_add(pids, jint(meta->pid));
	for (size_t i = 0; seen && i < total; i++) {
		__u32 pid = i < snap->nthreads ? snap->threads[i].pid
			    : i < snap->nthreads + nretired ? r->threads[i - snap->nthreads].pid
							     : r->groups[i - snap->nthreads - nretired].pid;
		bool dup = !pid || (meta->pid && pid == (__u32)meta->pid);

		for (size_t j = 0; j < npids && !dup; j++)
			dup = seen[j] == pid;
		if (!dup) {
			seen[npids++] = pid;
			json_object_array_add(pids, jint(pid));
		}
	}
	free(seen);
	json_object_object_add(o, "pid", jint(meta->pid));
	if (meta->cgroup) {
		json_object *cgroup = json_object_new_object();

		json_object_object_add(cgroup, "path", jtext(meta->cgroup->path));
		json_object_object_add(cgroup, "id", jint(meta->cgroup->id));
		json_object_object_add(o, "cgroup", cgroup);
	} else {
		json_object_object_add(o, "cgroup", NULL);
	}
	json_object_object_add(o, "comm", jtext(meta->comm));
	json_object_object_add(o, "exe", meta->exe[0] ? jtext(meta->exe) : NULL);
	jcmdline(o, meta);
	json_object_object_add(o, "follow_children", json_object_new_boolean(meta->follow_children));
	json_object_object_add(o, "pids", pids);
	json_object_object_add(o, "execs", jexecs(meta, snap));
	return o;
}

/* Where it was recorded; the host's name only when asked (--hostname). */
static json_object *jhost(const struct capture_meta *meta)
{
	json_object *o = json_object_new_object();
	struct utsname u;

	if (uname(&u) == 0) {
		json_object_object_add(o, "kernel", jtext(u.release));
		json_object_object_add(o, "hostname", meta->keep_hostname ? jtext(u.nodename) : NULL);
	}
	json_object_object_add(o, "ncpus", jint(sysconf(_SC_NPROCESSORS_ONLN)));
	return o;
}

/* The capture document (json_object_put() it). */
static json_object *capture_doc(const struct capture_meta *meta, const struct snapshot *snap,
				const struct intervals *intervals)
{
	json_object *doc = json_object_new_object();
	json_object *tool = json_object_new_object();
	json_object *settings = json_object_new_object();
	json_object *threads = json_object_new_array();
	json_object *edges = json_object_new_array();
	json_object *ivs = json_object_new_array();
	json_object *drops = json_object_new_object();
	json_object *folded = json_object_new_array();
	const struct retired *r = snap->retired;
	json_object *totals;
	struct thread_counters sum;
	__u64 exited = 0;

	json_object_object_add(doc, "schema", jint(CAPTURE_SCHEMA));
	json_object_object_add(doc, "format", json_object_new_string("spinscope-capture"));
	json_object_object_add(tool, "name", json_object_new_string("spinscope-collector"));
	json_object_object_add(tool, "version", json_object_new_string(SPINSCOPE_VERSION));
	jself_usage(tool, meta);
	json_object_object_add(doc, "tool", tool);
	json_object_object_add(doc, "target", jtarget(meta, snap));
	json_object_object_add(doc, "host", jhost(meta));
	json_object_object_add(doc, "start_time", json_object_new_string(meta->start_time));
	json_object_object_add(doc, "duration_s", jseconds(meta->duration_s));
	json_object_object_add(doc, "end_reason", json_object_new_string(meta->end_reason));
	json_object_object_add(settings, "interval_s", jseconds(meta->interval_s));
	json_object_object_add(settings, "checkpoint_s", jseconds(meta->checkpoint_s));
	json_object_object_add(settings, "max_threads", jint(meta->max_threads));
	json_object_object_add(settings, "max_sockets", jint(meta->max_sockets));
	json_object_object_add(settings, "time_sample", jint(meta->time_sample));
	json_object_object_add(settings, "exited_rows", jint(meta->exited_rows));
	json_object_object_add(doc, "settings", settings);
	json_object_object_add(doc, "histogram_buckets", json_object_new_string("log2"));

	for (size_t i = 0; i < snap->nthreads; i++) {
		json_object_array_add(threads, jthread(meta, snap->tids[i], &snap->threads[i]));
		exited += !!(snap->threads[i].flags & THREAD_EXITED);
	}
	jretired(meta, snap, threads, folded);
	json_object_object_add(doc, "threads", threads);
	json_object_object_add(doc, "threads_folded", folded);

	snapshot_totals(snap, &sum);
	totals = jcounters(&sum);
	json_object_object_add(totals, "threads_seen", jint(snap->nthreads + (r ? r->count : 0)));
	json_object_object_add(totals, "threads_exited", jint(exited + (r ? r->count : 0)));
	json_object_object_add(totals, "processes_created", jint(snap->globals.processes_created));
	json_object_object_add(doc, "totals", totals);

	for (size_t i = 0; i < snap->nedges + (r ? r->nedges : 0); i++) {
		bool live = i < snap->nedges; /* then the edges of threads gone */
		const struct wakeup_edge *edge = live ? &snap->edges[i] : &r->edges[i - snap->nedges];
		json_object *e = json_object_new_object();

		json_object_object_add(e, "waker_tid", jint(edge->waker_tid));
		json_object_object_add(e, "wakee_tid", jint(edge->wakee_tid));
		json_object_object_add(e, "mechanism", json_object_new_string(wake_mechanism_name(edge->mechanism)));
		json_object_object_add(e, "count", jint(live ? snap->edge_counts[i] : r->edge_counts[i - snap->nedges]));
		json_object_array_add(edges, e);
	}
	json_object_object_add(doc, "wakeups", edges);
	json_object_object_add(doc, "requests", jrequests(snap));
	json_object_object_add(doc, "listeners", jlisteners(snap));

	for (size_t i = 0; i < intervals->n; i++)
		json_object_array_add(ivs, jinterval(&intervals->items[i]));
	json_object_object_add(doc, "intervals", ivs);

#define X(name) json_object_object_add(drops, #name, jint(snap->globals.drops_##name));
	SPINSCOPE_DROPS(X)
#undef X
	json_object_object_add(doc, "drops", drops);
	return doc;
}

int capture_write(int fd, const struct capture_meta *meta, const struct snapshot *snap,
		  const struct intervals *intervals)
{
	json_object *doc = capture_doc(meta, snap, intervals);
	int err = 0;

	if (json_object_to_fd(fd, doc, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
					       JSON_C_TO_STRING_NOSLASHESCAPE) < 0)
		err = errno ? -errno : -EIO;
	json_object_put(doc);
	return err;
}

/* All of text to fd, through short writes and signals. 0 or -errno. */
static int write_all(int fd, const char *text, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(fd, text + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += n;
	}
	return 0;
}

/* o as one line of JSON on fd (json-c escapes newlines inside strings: the line's is the only one), in
 * one write: a line is whole or, the writer killed mid-way, cut short. Puts o. 0 or -errno. */
static int write_json_line(int fd, json_object *o)
{
	size_t len = 0;
	const char *text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN |
							      JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	char *line = text ? malloc(len + 1) : NULL;
	int err = line ? 0 : -ENOMEM;

	if (line) {
		memcpy(line, text, len);
		line[len] = '\n';
		err = write_all(fd, line, len + 1);
		free(line);
	}
	json_object_put(o);
	return err;
}

int capture_interval_line(int fd, const struct interval *it)
{
	return write_json_line(fd, jinterval(it));
}

int capture_write_line(int fd, const struct capture_meta *meta, const struct snapshot *snap,
		       const struct intervals *intervals)
{
	return write_json_line(fd, capture_doc(meta, snap, intervals));
}
