// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Attaching the probes: the BPF object opened, configured for the target and loaded, the target's live
 * threads (and children) seeded, the programs attached.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "cgroup.h"
#include "checks.h"
#include "probes.h"
#include "procfs.h"
#include "session.h"
#include "stacks.h"
#include "timeline.h"
#include "spinscope.skel.h"

/* Threads alive at attach get an entry now, so idle ones appear in the capture too. */
struct seed_ctx {
	int map_fd;
	int pid;      /* the process whose threads are being seeded (PID mode) */
	int skip_pid; /* cgroup mode: the process not to seed, the collector itself */
	__u64 now;
	int children_fd;
};

static void seed_process_thread(int pid, int tid, struct seed_ctx *ctx)
{
	struct thread_stats s = { .pid = pid, .first_seen_ns = ctx->now };
	__u32 key = tid;

	proc_thread_comm(pid, tid, s.comm, sizeof(s.comm));
	bpf_map_update_elem(ctx->map_fd, &key, &s, BPF_NOEXIST);
}

static void seed_thread(int tid, void *arg)
{
	struct seed_ctx *ctx = arg;

	seed_process_thread(ctx->pid, tid, ctx);
}

/* cgroup mode: every thread in the cgroup and its descendants, but the collector's own (ctx->skip_pid). */
static void seed_cgroup_thread(int pid, int tid, void *arg)
{
	struct seed_ctx *ctx = arg;

	if (pid != ctx->skip_pid)
		seed_process_thread(pid, tid, ctx);
}

static void adopt_child(int pid, void *arg)
{
	struct seed_ctx child = *(struct seed_ctx *)arg;
	__u32 key = pid;
	__u8 one = 1;

	if (bpf_map_update_elem(child.children_fd, &key, &one, BPF_ANY))
		return;
	child.pid = pid;
	proc_for_each_thread(pid, seed_thread, &child);
}

/* --stacks' rate: 0 when this kernel cannot run the sampler (session_attach). */
static unsigned stacks_rate(const struct session *s, const struct options *o)
{
	return s->meta.stacks_left_out ? 0 : o->stacks_hz;
}

/* Open the BPF object and set its constants and map sizes for o, loads through untrusted memory on or off. */
static int probes_open(struct session *s, const struct options *o, bool untrusted_loads)
{
	s->skel = spinscope_bpf__open();
	if (!s->skel)
		return fail(s, -errno, "cannot open the BPF object: %s", strerror(errno));
	s->skel->rodata->targ_tgid = o->pid;
	s->skel->rodata->targ_flags = o->follow_children ? TARGET_CHILDREN : 0;
	if (o->cgroup_arg) {
		s->skel->rodata->targ_tgid = TARGET_NO_PID;
		s->skel->rodata->targ_flags = TARGET_CGROUP;
		s->skel->rodata->targ_cgroup_id = o->cgroup.id;
		s->skel->rodata->targ_cgroup_level = o->cgroup.level;
		s->skel->rodata->collector_tgid = getpid();
	}
	s->skel->rodata->time_sample = o->time_sample;
	s->skel->rodata->untrusted_loads = untrusted_loads;
	probes_configure(s->skel);
	if (kernel_config_enabled("CONFIG_KASAN") == 1)
		s->skel->rodata->kernel_stack_size *= 2;
	bpf_map__set_max_entries(s->skel->maps.threads, o->max_threads);
	bpf_map__set_max_entries(s->skel->maps.sockets, o->max_sockets);
	/* Waker -> wakee pairs grow with threads, up to the square of a pool's: its workers are woken by the
	 * threads that hand them work, and wake each other on the queue's lock (a 200-thread pool made
	 * 11,000 to 19,000 pairs in 2 s: tests/fixtures/pool.c). A quarter of --max-threads, at least 16384
	 * (preallocated: ~1.4 MiB; every pair of a 128-thread pool); past it a wakeup is dropped, and said. */
	bpf_map__set_max_entries(s->skel->maps.wakeups, o->max_threads / 4 > 16384 ? o->max_threads / 4 : 16384);
	s->skel->rodata->h2_walk_on = s->meta.features.bpf_loop;
	bpf_map__set_max_entries(s->skel->maps.stack_samples,
				 stacks_ring_size(stacks_rate(s, o), o->stacks_budget, libbpf_num_possible_cpus()));
	s->skel->rodata->stack_hz = stacks_rate(s, o);
	s->skel->rodata->stack_budget = o->stacks_budget;
	bpf_map__set_max_entries(s->skel->maps.tag_changes, timeline_ring_size(stacks_rate(s, o) && o->tag_timeline));
	s->skel->rodata->tag_timeline = stacks_rate(s, o) && o->tag_timeline;
	/* Without --stacks the sampler is neither loaded nor verified. */
	bpf_program__set_autoload(s->skel->progs.on_cpu_sample, stacks_rate(s, o) > 0);
	return 0;
}

/*
 * Open and load the probes: first with loads through untrusted memory (the socket path's fd -> file
 * step without a helper call), and, if this kernel's verifier refuses those (before Linux 6.17), again
 * without them. Anything else that fails, fails the same way twice, and is reported once.
 */
static int probes_load(struct session *s, const struct options *o)
{
	int ret = probes_open(s, o, true);

	if (!ret && (ret = spinscope_bpf__load(s->skel))) {
		spinscope_bpf__destroy(s->skel);
		s->skel = NULL;
		if (!(ret = probes_open(s, o, false)))
			ret = spinscope_bpf__load(s->skel);
		if (ret)
			return fail(s, ret, "cannot load the BPF programs: %s (run with -v for libbpf's log)",
				    strerror(-ret));
	}
	return ret;
}

/*
 * Open, load and attach the probes to o->pid, with its live threads (and children) seeded.
 * Detaching is left to session_end().
 */
int session_attach(struct session *s, const struct options *o)
{
	struct seed_ctx seed;
	struct bpf_map *map;
	char err[256];
	int ret;

	kernel_features_probe(&s->meta.features);
	s->meta.stacks_left_out = o->stacks_hz && !s->meta.features.perf_event_maps;
	ret = probes_load(s, o);
	if (ret)
		return ret;
	bpf_object__for_each_map(map, s->skel->obj) /* their memory goes in the capture (tool.map_bytes) */
		if (s->meta.nmaps < sizeof(s->meta.map_fds) / sizeof(s->meta.map_fds[0]))
			s->meta.map_fds[s->meta.nmaps++] = bpf_map__fd(map);

	seed = (struct seed_ctx){ .map_fd = bpf_map__fd(s->skel->maps.threads), .pid = o->pid,
				  .skip_pid = getpid(), .now = monotonic_ns(),
				  .children_fd = bpf_map__fd(s->skel->maps.child_pids) };
	if (o->cgroup_arg) {
		/* Every thread in the cgroup now; those that enter it later are added at their first event. */
		cgroup_for_each_thread(o->cgroup.dir, seed_cgroup_thread, &seed);
	} else {
		proc_for_each_thread(o->pid, seed_thread, &seed);
	}
	/* Children forked before we attached (pre-forked workers, n-copy loops) are followed too; those
	 * forked later are added by the fork probe. */
	if (o->follow_children)
		proc_for_each_descendant(o->pid, adopt_child, &seed);

	s->links = calloc(probes_count(), sizeof(*s->links));
	if (!s->links)
		return fail(s, -ENOMEM, "out of memory");
	ret = probes_attach(s->skel, s->links, probes_count(), &s->nlinks, err, sizeof(err));
	if (ret)
		return fail(s, ret, "%s", err);
	if (stacks_rate(s, o)) {
		s->stacks = stacks_start(s->skel->progs.on_cpu_sample, s->skel->maps.stack_samples, stacks_rate(s, o),
					 o->stacks_budget, &s->skel->bss->stack_share, &ret, err, sizeof(err));
		if (!s->stacks)
			return fail(s, ret, "%s", err);
		s->meta.stacks = s->stacks;
		if (o->tag_timeline) {
			s->timeline = timeline_start(stacks_ring(s->stacks), s->skel->maps.tag_changes, o->tag_timeline,
						     &ret, err, sizeof(err));
			if (!s->timeline)
				return fail(s, ret, "%s", err);
			stacks_after_drain(s->stacks, timeline_flush, s->timeline);
		}
		if ((ret = stacks_run(s->stacks)))
			return fail(s, ret, "--stacks: cannot start the unwinder's thread: %s", strerror(-ret));
	}
	return 0;
}
