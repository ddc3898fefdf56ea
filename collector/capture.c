// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The capture document as JSON (docs/capture-format.md): built from a snapshot, its exited rows and
 * processes (snapshot.c, exited.c) and the intervals, and written to a file or as one line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <json-c/json.h>

#include "capture.h"
#include "cgroup.h"
#include "procfs.h"
#include "stacks.h"
#include "text.h"

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
	json_object_object_add(o, "comm", text_json(comm));
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
 * its maps hold (a long capture's costs, in the capture). The peak is its own address space's (VmHWM):
 * getrusage's ru_maxrss keeps, across exec, the peak of the process it was forked from (a test runner's
 * 120 MiB read as the collector's). */
static void jself_usage(json_object *tool, const struct capture_meta *meta)
{
	long long peak_kb = proc_status_value(getpid(), "VmHWM");
	struct rusage ru = { 0 };
	__u64 maps = 0;

	getrusage(RUSAGE_SELF, &ru);
	for (size_t i = 0; i < meta->nmaps; i++)
		maps += map_memlock(meta->map_fds[i]);
	json_object_object_add(tool, "cpu_s", jseconds(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
						       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6));
	json_object_object_add(tool, "max_rss_bytes", jint((__u64)(peak_kb >= 0 ? peak_kb : ru.ru_maxrss) * 1024));
	json_object_object_add(tool, "map_bytes", jint(maps));
}

static json_object *jfolded(const struct capture_meta *meta, const struct folded_group *g)
{
	json_object *o = json_object_new_object();
	char comm[SPINSCOPE_COMM_LEN + 1] = { 0 };

	memcpy(comm, g->comm, SPINSCOPE_COMM_LEN);
	json_object_object_add(o, "pid", jint(g->pid));
	json_object_object_add(o, "comm", text_json(comm));
	json_object_object_add(o, "threads", jint(g->threads));
	json_object_object_add(o, "first_seen_s", jseconds(since_start(meta, g->sum.first_seen_ns)));
	json_object_object_add(o, "last_exit_s", jseconds(since_start(meta, g->sum.exit_ns)));
#define X(name) json_object_object_add(o, #name, jint(g->sum.c.name));
	SPINSCOPE_COUNTERS(X)
#undef X
	json_object_object_add(o, "poll_events_hist", jhist(g->sum.poll_hist, POLL_HIST_BUCKETS));
	return o;
}

/* The threads that are gone: a row each for those kept (exited_rows_of), and the folded groups. */
static void jexited(const struct capture_meta *meta, const struct snapshot *snap, json_object *threads,
		     json_object *folded)
{
	const struct exited_threads *r = snap->exited;
	struct exited_rows rows;

	if (!r || exited_rows_of(r, snap->tids, snap->nthreads, &rows))
		return;
	for (size_t i = 0; i < r->n; i++)
		if (!rows.folded[i])
			json_object_array_add(threads, jthread(meta, r->keys[i].tid, &r->threads[i]));
	for (size_t i = 0; i < rows.ngroups; i++)
		json_object_array_add(folded, jfolded(meta, &rows.groups[i]));
	exited_rows_free(&rows);
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

/* The processes that exec'd while traced: from `t_s` on, `pid` ran `filename` as `comm`, after
 * `calls_before` counted calls of the program before (0: a wrapper that exec'd before doing any). */
static json_object *jexecs(const struct capture_meta *meta, const struct snapshot *snap)
{
	json_object *list = json_object_new_array();

	for (size_t i = 0; i < snap->nexecs; i++) {
		const struct exec_record *e = &snap->execs[i];
		/* With -- COMMAND the command's own exec is its start (the process before it was ours, held,
		 * and did nothing spinscope counts), not a program it replaced: not listed. */
		__u64 count = e->count - (meta->started && snap->exec_pids[i] == (__u32)meta->pid);
		char comm[SPINSCOPE_COMM_LEN + 1] = { 0 }, filename[EXEC_FILENAME_LEN + 1] = { 0 };
		json_object *o;

		if (!count)
			continue;
		o = json_object_new_object();
		memcpy(comm, e->comm, SPINSCOPE_COMM_LEN);
		memcpy(filename, e->filename, EXEC_FILENAME_LEN);
		json_object_object_add(o, "pid", jint(snap->exec_pids[i]));
		json_object_object_add(o, "t_s", jseconds(since_start(meta, e->last_ns)));
		json_object_object_add(o, "count", jint(count));
		json_object_object_add(o, "calls_before", jint(e->calls_before));
		json_object_object_add(o, "comm", text_json(comm));
		json_object_object_add(o, "filename", text_json(filename));
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
		json_object_object_add(o, "family", text_json(family_name(l->family, family, sizeof(family))));
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
			json_object_array_add(argv, text_json(meta->cmdline + off));
	}
	json_object_object_add(target, "argc", jint(argc));
	json_object_object_add(target, "cmdline", argv);
}

/* target.runtime: {name, version, from}, null when it was never read (a cgroup, a target gone first). */
json_object *capture_runtime(const struct target_runtime *rt)
{
	json_object *o;

	if (!rt->name[0])
		return NULL;
	o = json_object_new_object();
	json_object_object_add(o, "name", json_object_new_string(rt->name));
	json_object_object_add(o, "version", rt->version[0] ? text_json(rt->version) : NULL);
	json_object_object_add(o, "from", rt->from[0] ? text_json(rt->from) : NULL);
	return o;
}

static json_object *jtarget(const struct capture_meta *meta, const struct snapshot *snap)
{
	json_object *o = json_object_new_object();
	json_object *pids = json_object_new_array();
	size_t npids;
	__u32 *pid = snapshot_pids(snap, meta->pid, &npids);

	/* Every process that had a thread traced, the target first (in PID mode); threads gone included. */
	for (size_t i = 0; i < npids; i++)
		json_object_array_add(pids, jint(pid[i]));
	if (!pid && meta->pid) /* out of memory: the target alone */
		json_object_array_add(pids, jint(meta->pid));
	free(pid);
	json_object_object_add(o, "pid", jint(meta->pid));
	if (meta->cgroup) {
		json_object *cgroup = json_object_new_object();

		json_object_object_add(cgroup, "path", text_json(meta->cgroup->path));
		json_object_object_add(cgroup, "id", jint(meta->cgroup->id));
		json_object_object_add(o, "cgroup", cgroup);
	} else {
		json_object_object_add(o, "cgroup", NULL);
	}
	json_object_object_add(o, "comm", text_json(meta->comm));
	json_object_object_add(o, "exe", meta->exe[0] ? text_json(meta->exe) : NULL);
	jcmdline(o, meta);
	json_object_object_add(o, "runtime", capture_runtime(&meta->runtime));
	json_object_object_add(o, "follow_children", json_object_new_boolean(meta->follow_children));
	json_object_object_add(o, "pids", pids);
	json_object_object_add(o, "execs", jexecs(meta, snap));
	return o;
}

/* Where it was recorded; the host's name only when asked (--hostname). */
static json_object *jhost(const struct capture_meta *meta)
{
	json_object *o = json_object_new_object(), *features = json_object_new_object();
	struct utsname u;

	if (uname(&u) == 0) {
		json_object_object_add(o, "kernel", text_json(u.release));
		json_object_object_add(o, "hostname", meta->keep_hostname ? text_json(u.nodename) : NULL);
	}
	json_object_object_add(o, "ncpus", jint(sysconf(_SC_NPROCESSORS_ONLN)));
	json_object_object_add(o, "features", features);
	json_object_object_add(features, "bpf_loop", json_object_new_boolean(meta->features.bpf_loop));
	json_object_object_add(features, "perf_event_maps", json_object_new_boolean(meta->features.perf_event_maps));
	return o;
}

/* Who wrote the capture, and what it cost so far. */
static json_object *jtool(const struct capture_meta *meta)
{
	json_object *tool = json_object_new_object();

	json_object_object_add(tool, "name", json_object_new_string("spinscope-collector"));
	json_object_object_add(tool, "version", json_object_new_string(SPINSCOPE_VERSION));
	jself_usage(tool, meta);
	return tool;
}

/* The options the capture was made with. */
static json_object *jsettings(const struct capture_meta *meta)
{
	json_object *settings = json_object_new_object(), *left_out = json_object_new_array();

	json_object_object_add(settings, "interval_s", jseconds(meta->interval_s));
	json_object_object_add(settings, "checkpoint_s", jseconds(meta->checkpoint_s));
	json_object_object_add(settings, "max_threads", jint(meta->max_threads));
	json_object_object_add(settings, "max_sockets", jint(meta->max_sockets));
	json_object_object_add(settings, "time_sample", jint(meta->time_sample));
	json_object_object_add(settings, "exited_rows", jint(meta->exited_rows));
	json_object_object_add(settings, "left_out", left_out);
	if (!meta->features.bpf_loop)
		json_object_array_add(left_out, json_object_new_string("http2_streams"));
	if (meta->stacks_left_out)
		json_object_array_add(left_out, json_object_new_string("stacks"));
	return settings;
}

/* Every thread's counters summed, live and gone, with the thread and process counts. */
static json_object *jtotals(const struct snapshot *snap)
{
	const struct exited_threads *r = snap->exited;
	struct thread_counters sum;
	json_object *totals;

	snapshot_totals(snap, &sum);
	totals = jcounters(&sum);
	json_object_object_add(totals, "threads_seen", jint(snap->nthreads + (r ? r->count : 0)));
	json_object_object_add(totals, "threads_exited", jint(snapshot_threads_exited(snap)));
	json_object_object_add(totals, "processes_created", jint(snap->globals.processes_created));
	return totals;
}

/* The wakeup edges: the live threads', then those of threads gone. */
static json_object *jwakeups(const struct snapshot *snap)
{
	const struct exited_threads *r = snap->exited;
	json_object *edges = json_object_new_array();

	for (size_t i = 0; i < snap->nedges + (r ? r->nedges : 0); i++) {
		bool live = i < snap->nedges;
		const struct wakeup_edge *edge = live ? &snap->edges[i] : &r->edges[i - snap->nedges];
		json_object *e = json_object_new_object();

		json_object_object_add(e, "waker_tid", jint(edge->waker_tid));
		json_object_object_add(e, "wakee_tid", jint(edge->wakee_tid));
		json_object_object_add(e, "mechanism", json_object_new_string(wake_mechanism_name(edge->mechanism)));
		json_object_object_add(e, "count", jint(live ? snap->edge_counts[i] : r->edge_counts[i - snap->nedges]));
		json_object_array_add(edges, e);
	}
	return edges;
}

static json_object *jintervals(const struct intervals *intervals)
{
	json_object *ivs = json_object_new_array();

	for (size_t i = 0; i < intervals->n; i++)
		json_object_array_add(ivs, jinterval(&intervals->items[i]));
	return ivs;
}

static json_object *jdrops(const struct snapshot *snap)
{
	json_object *drops = json_object_new_object();

#define X(name) json_object_object_add(drops, #name, jint(snap->globals.drops_##name));
	SPINSCOPE_DROPS(X)
#undef X
	return drops;
}

/* The capture document (json_object_put() it): its blocks in the order docs/capture-format.md gives. */
static json_object *capture_doc(const struct capture_meta *meta, const struct snapshot *snap,
				const struct intervals *intervals)
{
	json_object *doc = json_object_new_object();
	json_object *threads = json_object_new_array();
	json_object *folded = json_object_new_array();

	json_object_object_add(doc, "schema", jint(CAPTURE_SCHEMA));
	json_object_object_add(doc, "format", json_object_new_string("spinscope-capture"));
	json_object_object_add(doc, "tool", jtool(meta));
	json_object_object_add(doc, "target", jtarget(meta, snap));
	json_object_object_add(doc, "host", jhost(meta));
	json_object_object_add(doc, "start_time", json_object_new_string(meta->start_time));
	json_object_object_add(doc, "duration_s", jseconds(meta->duration_s));
	json_object_object_add(doc, "end_reason", json_object_new_string(meta->end_reason));
	json_object_object_add(doc, "settings", jsettings(meta));
	json_object_object_add(doc, "histogram_buckets", json_object_new_string("log2"));
	for (size_t i = 0; i < snap->nthreads; i++)
		json_object_array_add(threads, jthread(meta, snap->tids[i], &snap->threads[i]));
	jexited(meta, snap, threads, folded);
	json_object_object_add(doc, "threads", threads);
	json_object_object_add(doc, "threads_folded", folded);
	json_object_object_add(doc, "totals", jtotals(snap));
	json_object_object_add(doc, "wakeups", jwakeups(snap));
	json_object_object_add(doc, "requests", jrequests(snap));
	json_object_object_add(doc, "listeners", jlisteners(snap));
	json_object_object_add(doc, "intervals", jintervals(intervals));
	json_object_object_add(doc, "drops", jdrops(snap));
	if (meta->stacks) /* --stacks */
		json_object_object_add(doc, "stacks", stacks_json(meta->stacks, snap->globals.stack_samples_lost));
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
