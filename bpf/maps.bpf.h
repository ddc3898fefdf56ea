// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The probes' settings (read-only data the collector fixes before load) and maps: what the collector
 * reads (bpf/spinscope.h holds the layouts that cross to user space). Included by spinscope.bpf.c only.
 */
#ifndef SPINSCOPE_MAPS_BPF_H
#define SPINSCOPE_MAPS_BPF_H

/* Settings, fixed by the collector before load. */
const volatile __u32 targ_tgid = 0; /* the process (TARGET_NO_PID with TARGET_CGROUP) */
const volatile __u32 targ_flags = 0;       /* TARGET_* (spinscope.h) */
const volatile __u64 targ_cgroup_id = 0;   /* TARGET_CGROUP: the cgroup's kernfs id (its inode number) */
const volatile __u32 targ_cgroup_level = 0; /* ...and its depth in the hierarchy (0: the root) */
const volatile __u32 collector_tgid = 0;   /* TARGET_CGROUP: the collector itself is never traced */
const volatile __u64 kernel_stack_size = 16384; /* THREAD_SIZE: x86-64, doubled under KASAN */
const volatile __u8 syscall_class[SYSCALL_TABLE_SIZE] = {}; /* enum syscall_class by number */
const volatile __u8 wake_mechanism[SYSCALL_TABLE_SIZE] = {}; /* enum wake_mechanism by number */
const volatile __u32 time_sample = 1; /* a power of two: 1 call in time_sample is timed (--time-sample) */
const volatile __u8 read_buffer[SYSCALL_TABLE_SIZE] = {}; /* enum read_buffer by number */
/* The verifier takes a load through bpf_rdonly_cast(ptr, 0) (Linux 6.17+): a fault-safe plain load
 * where bpf_probe_read_kernel() is a helper call (~90 ns here). The collector loads with it on and,
 * refused, loads again with it off (the branch not taken is pruned, never verified). */
const volatile bool untrusted_loads = false;
/* --stacks (stacks.bpf.h): the CPU samples' rate, and the event stacks' budget per thread and source
 * (0: stacks off, and all their code gone at load). */
const volatile __u32 stack_hz = 0;
/* --stacks: the event stacks the whole target may take in a second (--stacks-budget), and the share of
 * it a thread takes of one source before its stride doubles: the budget over the (thread, source) pairs
 * that took stacks in the previous second, written by the collector (0 until then: stack_hz). */
const volatile __u32 stack_budget = 0;
volatile __u32 stack_share = 0;
/* The target's event stacks this second: (second << 32) | stacks taken in it (stack_budget_take). */
__u64 stack_window = 0;
/* The kernel has bpf_loop (Linux 5.17; the collector probes it): HTTP/2 connections' streams are walked
 * (h2.bpf.h). Off, they are counted by exchange, and the walk is pruned at load, never verified. */
const volatile bool h2_walk_on = true;
/* --stacks beside a runtime helper: every change of a target thread's tags to the tag_changes ring. */
const volatile bool tag_timeline = false;
/* The capture has ended: set by the collector before its final read, so that the maps it reads one after
 * another hold one moment (is_target() is false from then on: only a thread's last switch out is taken). */
volatile bool capture_over = false;

struct global_stats globals = {};

/*
 * The hash maps allocate their entries as they are created (BPF_F_NO_PREALLOC), but the wakeup edges
 * (below): memory follows the target's threads and sockets, not the maps' sizes. Preallocated, the threads map alone took
 * 12.6 MiB at the default --max-threads whatever the target; now a 1-thread target's maps take 1.6 MiB,
 * most of it the sockets map's buckets. Lookups cost the same; an insertion allocates (once per thread,
 * socket or edge).
 */

/* Thread stats of live threads, keyed by tid (a thread that is gone moves to `exited`). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384); /* --max-threads */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct thread_stats);
} threads SEC(".maps");

/*
 * Threads that have run their last, moved here from `threads` at their final switch-out and drained by
 * the collector every 0.1 s (it folds their counts into the capture): `threads` holds live threads only,
 * so its size bounds the threads alive at once, not the threads ever seen, and a reused tid starts a new
 * entry instead of adding to a dead thread's.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct thread_key);
	__type(value, struct thread_stats);
} exited SEC(".maps");

/* Request state per socket, keyed by struct socket *; removed on close. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536); /* --max-sockets */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct socket_state);
} sockets SEC(".maps");

/* The frame walk of HTTP/2 connections (REQ_H2 sockets), keyed like sockets; removed on close. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct h2_conn);
} h2_conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct request_stats);
} requests SEC(".maps");

/*
 * Wakeup edges, preallocated: an edge is created inside sched_waking, with interrupts off, and a burst of
 * new edges (512 threads started at once) drained the allocator's per-CPU cache faster than it refills:
 * hundreds of edges dropped in 1 run of 4 without preallocation. Sized by the collector (--max-threads / 4,
 * at least 16384: ~1.4 MiB, all the pairs of a 128-thread pool; past that a wakeup of a new pair is dropped,
 * and counted in drops.wakeup_edges).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct wakeup_edge);
	__type(value, __u64);
} wakeups SEC(".maps");

/* Traced processes that exec'd, by pid. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct exec_record);
} execs SEC(".maps");

/* Forked children followed with --children (thread group ids). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, __u8);
} child_pids SEC(".maps");

/*
 * Listening sockets the target called accept on, and which processes called it (the capture's
 * `listeners`). Entries are never removed: listeners are few and live long, and the key's inode number
 * keeps a socket freed and another allocated at its address apart.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct listener_key);
	__type(value, struct listener_stats);
} listeners SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct listener_pid);
	__type(value, __u8);
} listener_pids SEC(".maps");

/* The timing sample's generator state, per CPU (sample_this_call). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sample_state SEC(".maps");

/* --stacks: CPU samples and event stacks for the collector to unwind (struct stack_sample). Sized by the
 * collector: one page when stacks are off. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} stack_samples SEC(".maps");

/* --stacks' tag timeline (struct tag_change), sized by the collector: one page when off. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} tag_changes SEC(".maps");

static const struct thread_stats zero_thread;

/*
 * The element of map at key, made from init if there is none (libbpf-tools' lookup-or-try-init): an
 * update refused because another CPU made it meanwhile is fine, the lookup after it finds that one; a
 * full map is counted in *drops (said in the capture) and gives NULL.
 */
static __always_inline void *map_lookup_or_create(void *map, const void *key, const void *init, __u64 *drops)
{
	void *value = bpf_map_lookup_elem(map, key);

	if (value)
		return value;
	bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	value = bpf_map_lookup_elem(map, key);
	if (!value)
		__sync_fetch_and_add(drops, 1);
	return value;
}

#endif /* SPINSCOPE_MAPS_BPF_H */
