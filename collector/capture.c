// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <json-c/json.h>

#include "capture.h"
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

static int read_threads(int fd, struct snapshot *snap)
{
	__u64 now = monotonic_ns();
	size_t cap = 64;
	__u32 key, next;
	__u32 *prev = NULL;

	snap->threads = calloc(cap, sizeof(*snap->threads));
	if (!snap->threads)
		return -ENOMEM;
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		if (snap->nthreads == cap) {
			struct thread_row *grown = realloc(snap->threads, 2 * cap * sizeof(*grown));

			if (!grown)
				return -ENOMEM;
			snap->threads = grown;
			cap *= 2;
		}
		if (bpf_map_lookup_elem(fd, &next, &snap->threads[snap->nthreads].s) == 0) {
			close_open_slices(&snap->threads[snap->nthreads].s, now);
			snap->threads[snap->nthreads++].tid = next;
		}
		key = next;
		prev = &key;
	}
	return 0;
}

static int read_edges(int fd, struct snapshot *snap)
{
	size_t cap = 64;
	struct wakeup_edge key, next;
	struct wakeup_edge *prev = NULL;

	snap->edges = calloc(cap, sizeof(*snap->edges));
	if (!snap->edges)
		return -ENOMEM;
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		if (snap->nedges == cap) {
			struct edge_row *grown = realloc(snap->edges, 2 * cap * sizeof(*grown));

			if (!grown)
				return -ENOMEM;
			snap->edges = grown;
			cap *= 2;
		}
		if (bpf_map_lookup_elem(fd, &next, &snap->edges[snap->nedges].count) == 0)
			snap->edges[snap->nedges++].key = next;
		key = next;
		prev = &key;
	}
	return 0;
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

static int compare_u64(const void *a, const void *b)
{
	__u64 x = *(const __u64 *)a, y = *(const __u64 *)b;

	return x < y ? -1 : x > y;
}

/*
 * Requests still being answered at the final read. The probes may delete sockets meanwhile, and a walk
 * whose current key was deleted starts again from the first key: the keys are gathered first (at most
 * twice the map's size of steps), duplicates dropped, then each socket is read once.
 */
static int read_open_requests(int fd, __u32 max_entries, struct snapshot *snap)
{
	size_t cap = 2 * (size_t)max_entries, n = 0, unique = 0;
	__u64 *keys = calloc(cap, sizeof(*keys)), *prev = NULL;
	struct socket_state s;

	if (!keys)
		return -ENOMEM;
	while (n < cap && bpf_map_get_next_key(fd, prev, &keys[n]) == 0) {
		prev = &keys[n];
		n++;
	}
	qsort(keys, n, sizeof(*keys), compare_u64);
	for (size_t i = 0; i < n; i++) {
		if (i && keys[i] == keys[i - 1])
			continue;
		keys[unique++] = keys[i];
	}
	for (size_t i = 0; i < unique; i++) {
		if (bpf_map_lookup_elem(fd, &keys[i], &s) == 0 && s.phase == REQ_WRITING && s.write_calls) {
			request_stats_add(&snap->requests, &s);
			snap->open_requests++;
		}
	}
	free(keys);
	return 0;
}

int snapshot_read(struct spinscope_bpf *skel, struct snapshot *snap, bool final)
{
	int err;

	memset(snap, 0, sizeof(*snap));
	snap->globals = skel->bss->globals;
	err = read_threads(bpf_map__fd(skel->maps.threads), snap);
	if (!err)
		err = read_edges(bpf_map__fd(skel->maps.wakeups), snap);
	if (!err)
		err = read_requests(bpf_map__fd(skel->maps.requests), snap);
	if (!err && final)
		err = read_open_requests(bpf_map__fd(skel->maps.sockets), bpf_map__max_entries(skel->maps.sockets),
					 snap);
	return err;
}

void snapshot_free(struct snapshot *snap)
{
	free(snap->threads);
	free(snap->edges);
	snap->threads = NULL;
	snap->edges = NULL;
}

void snapshot_totals(const struct snapshot *snap, struct thread_counters *totals)
{
	memset(totals, 0, sizeof(*totals));
	for (size_t i = 0; i < snap->nthreads; i++) {
		const struct thread_counters *c = &snap->threads[i].s.c;
#define X(name) totals->name += c->name;
		SPINSCOPE_COUNTERS(X)
#undef X
	}
}

__u64 snapshot_wakeups(const struct snapshot *snap)
{
	__u64 sum = 0;

	for (size_t i = 0; i < snap->nedges; i++)
		sum += snap->edges[i].count;
	return sum;
}

/* ---------------------------------------------------------------------------------------- */
/* JSON                                                                                       */

static json_object *jint(__u64 v)
{
	return json_object_new_uint64(v);
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

static json_object *jthread(const struct capture_meta *meta, const struct thread_row *row)
{
	const struct thread_stats *s = &row->s;
	bool alive = !(s->flags & THREAD_EXITED);
	json_object *o = json_object_new_object();
	char comm[SPINSCOPE_COMM_LEN + 1] = { 0 };

	memcpy(comm, s->comm, SPINSCOPE_COMM_LEN);
	/* A live thread may have renamed itself since the probe first saw it: ask /proc. */
	if (alive)
		proc_thread_comm((int)s->pid, (int)row->tid, comm, sizeof(comm));

	json_object_object_add(o, "tid", jint(row->tid));
	json_object_object_add(o, "pid", jint(s->pid));
	json_object_object_add(o, "comm", json_object_new_string(comm));
	json_object_object_add(o, "alive", json_object_new_boolean(alive));
	json_object_object_add(o, "first_seen_s", jseconds(since_start(meta, s->first_seen_ns)));
	json_object_object_add(o, "exit_s", alive ? NULL : jseconds(since_start(meta, s->exit_ns)));
#define X(name) json_object_object_add(o, #name, jint(s->c.name));
	SPINSCOPE_COUNTERS(X)
#undef X
	json_object_object_add(o, "poll_events_hist", jhist(s->poll_hist, POLL_HIST_BUCKETS));
	return o;
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
	json_object_object_add(hist, "write_calls", jhist(r->hist_write_calls, REQ_HIST_BUCKETS));
	json_object_object_add(hist, "write_eagain", jhist(r->hist_write_eagain, REQ_HIST_BUCKETS));
	json_object_object_add(hist, "write_bytes", jhist(r->hist_write_bytes, REQ_HIST_BUCKETS));
	json_object_object_add(hist, "duration_ns", jhist(r->hist_duration_ns, REQ_HIST_BUCKETS));
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

static json_object *jtarget(const struct capture_meta *meta, const struct snapshot *snap)
{
	json_object *o = json_object_new_object();
	json_object *argv = json_object_new_array();
	json_object *pids = json_object_new_array();
	size_t npids = 0;
	__u32 *seen = calloc(snap->nthreads + 1, sizeof(*seen));

	for (size_t off = 0; meta->cmdline && off < meta->cmdline_len; off += strlen(meta->cmdline + off) + 1)
		json_object_array_add(argv, json_object_new_string(meta->cmdline + off));
	/* Every process that had a thread traced, target first. */
	json_object_array_add(pids, jint(meta->pid));
	for (size_t i = 0; seen && i < snap->nthreads; i++) {
		__u32 pid = snap->threads[i].s.pid;
		bool dup = pid == (__u32)meta->pid;

		for (size_t j = 0; j < npids && !dup; j++)
			dup = seen[j] == pid;
		if (!dup) {
			seen[npids++] = pid;
			json_object_array_add(pids, jint(pid));
		}
	}
	free(seen);
	json_object_object_add(o, "pid", jint(meta->pid));
	json_object_object_add(o, "comm", json_object_new_string(meta->comm));
	json_object_object_add(o, "cmdline", argv);
	json_object_object_add(o, "follow_children", json_object_new_boolean(meta->follow_children));
	json_object_object_add(o, "pids", pids);
	return o;
}

static json_object *jhost(void)
{
	json_object *o = json_object_new_object();
	struct utsname u;

	if (uname(&u) == 0) {
		json_object_object_add(o, "kernel", json_object_new_string(u.release));
		json_object_object_add(o, "hostname", json_object_new_string(u.nodename));
	}
	json_object_object_add(o, "ncpus", jint(sysconf(_SC_NPROCESSORS_ONLN)));
	return o;
}

int capture_write(int fd, const struct capture_meta *meta, const struct snapshot *snap,
		  const struct interval *intervals, size_t nintervals)
{
	json_object *doc = json_object_new_object();
	json_object *tool = json_object_new_object();
	json_object *settings = json_object_new_object();
	json_object *threads = json_object_new_array();
	json_object *edges = json_object_new_array();
	json_object *ivs = json_object_new_array();
	json_object *drops = json_object_new_object();
	json_object *totals;
	struct thread_counters sum;
	__u64 exited = 0;
	int err = 0;

	json_object_object_add(doc, "schema", jint(CAPTURE_SCHEMA));
	json_object_object_add(doc, "format", json_object_new_string("spinscope-capture"));
	json_object_object_add(tool, "name", json_object_new_string("spinscope-collector"));
	json_object_object_add(tool, "version", json_object_new_string(SPINSCOPE_VERSION));
	json_object_object_add(doc, "tool", tool);
	json_object_object_add(doc, "target", jtarget(meta, snap));
	json_object_object_add(doc, "host", jhost());
	json_object_object_add(doc, "start_time", json_object_new_string(meta->start_time));
	json_object_object_add(doc, "duration_s", jseconds(meta->duration_s));
	json_object_object_add(doc, "end_reason", json_object_new_string(meta->end_reason));
	json_object_object_add(settings, "interval_s", jseconds(meta->interval_s));
	json_object_object_add(settings, "max_threads", jint(meta->max_threads));
	json_object_object_add(settings, "max_sockets", jint(meta->max_sockets));
	json_object_object_add(doc, "settings", settings);
	json_object_object_add(doc, "histogram_buckets", json_object_new_string("log2"));

	for (size_t i = 0; i < snap->nthreads; i++) {
		json_object_array_add(threads, jthread(meta, &snap->threads[i]));
		exited += !!(snap->threads[i].s.flags & THREAD_EXITED);
	}
	json_object_object_add(doc, "threads", threads);

	snapshot_totals(snap, &sum);
	totals = jcounters(&sum);
	json_object_object_add(totals, "threads_seen", jint(snap->nthreads));
	json_object_object_add(totals, "threads_exited", jint(exited));
	json_object_object_add(totals, "processes_created", jint(snap->globals.processes_created));
	json_object_object_add(doc, "totals", totals);

	for (size_t i = 0; i < snap->nedges; i++) {
		json_object *e = json_object_new_object();

		json_object_object_add(e, "waker_tid", jint(snap->edges[i].key.waker_tid));
		json_object_object_add(e, "wakee_tid", jint(snap->edges[i].key.wakee_tid));
		json_object_object_add(e, "mechanism", json_object_new_string(
			wake_mechanism_name(snap->edges[i].key.mechanism)));
		json_object_object_add(e, "count", jint(snap->edges[i].count));
		json_object_array_add(edges, e);
	}
	json_object_object_add(doc, "wakeups", edges);
	json_object_object_add(doc, "requests", jrequests(snap));

	for (size_t i = 0; i < nintervals; i++) {
		json_object *iv = json_object_new_object();

		json_object_object_add(iv, "t_s", jseconds(intervals[i].t_s));
		json_object_object_add(iv, "duration_s", jseconds(intervals[i].duration_s));
		json_object_object_add(iv, "counters", jcounters(&intervals[i].delta));
		json_object_object_add(iv, "requests", jint(intervals[i].requests));
		json_object_object_add(iv, "wakeups_in_process", jint(intervals[i].wakeups));
		json_object_array_add(ivs, iv);
	}
	json_object_object_add(doc, "intervals", ivs);

	json_object_object_add(drops, "threads", jint(snap->globals.drops_threads));
	json_object_object_add(drops, "sockets", jint(snap->globals.drops_sockets));
	json_object_object_add(drops, "wakeup_edges", jint(snap->globals.drops_wakeup_edges));
	json_object_object_add(drops, "pids", jint(snap->globals.drops_pids));
	json_object_object_add(doc, "drops", drops);

	if (json_object_to_fd(fd, doc, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
					       JSON_C_TO_STRING_NOSLASHESCAPE) < 0)
		err = errno ? -errno : -EIO;
	json_object_put(doc);
	return err;
}
