// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Who is traced and their state: whether a task is the target's (a PID, its followed children, or a
 * cgroup), and a thread's stats, found or created, and moved to the exited map when the thread is gone
 * (a reused tid starts afresh). Included by spinscope.bpf.c after maps.bpf.h.
 */
#ifndef SPINSCOPE_THREADS_BPF_H
#define SPINSCOPE_THREADS_BPF_H

/* ---------------------------------------------------------------------------------------- */
/* Targets                                                                                    */

/*
 * Is the task in the target cgroup or one of its descendants? As bpf_task_under_cgroup() decides, but
 * with direct BTF loads, no helper call: the task's cgroup on the default hierarchy (cgroup v2), and its
 * ancestor at the target's level (a cgroup is its own ancestor at its level), compared by kernfs id. A
 * task moved into the cgroup is in from that moment; one moved out, out.
 */
static __always_inline bool in_target_cgroup(struct task_struct *task)
{
	struct css_set *cset = task->cgroups;
	struct cgroup *cgrp, *ancestor, **slot;

	if (!cset)
		return false;
	cgrp = cset->dfl_cgrp;
	if (!cgrp || cgrp->level < (int)targ_cgroup_level)
		return false;
	/* ancestors[] is a flexible array of pointers, which the verifier's BTF walk does not type: the slot
	 * is read as untrusted memory and the pointer in it typed again (bpf_rdonly_cast is inlined to a
	 * move, no call; the loads are fault-safe). */
	slot = bpf_rdonly_cast(&cgrp->ancestors[targ_cgroup_level], 0);
	if (!*slot)
		return false;
	ancestor = bpf_rdonly_cast(*slot, bpf_core_type_id_kernel(struct cgroup));
	return ancestor->kn->id == targ_cgroup_id;
}

/*
 * Is the task one of the target's? Run for every syscall of every thread on the machine: a foreign
 * thread costs one compare of its thread group with a constant in PID mode. targ_flags is a constant the
 * verifier resolves: with a PID alone, the code below its test is gone (xlated: no lookup, no cgroup
 * load), and the PID mode's foreign thread costs what it did before the cgroup mode existed. Once the
 * capture is over (capture_over) no task is counted (is_target): a target's thread pays one load more.
 */
static __always_inline bool in_target(struct task_struct *task)
{
	__u32 tgid = task->tgid;

	if (tgid == targ_tgid)
		return true;
	if (!targ_flags)
		return false;
	if (targ_flags & TARGET_CGROUP)
		return in_target_cgroup(task) && tgid != collector_tgid;
	return bpf_map_lookup_elem(&child_pids, &tgid) != NULL;
}

/* ...and counted: not once the capture is over. */
static __always_inline bool is_target(struct task_struct *task)
{
	return in_target(task) && !capture_over;
}

/* ---------------------------------------------------------------------------------------- */
/* Threads                                                                                    */

/* Stats of thread tid (task), created. */
static __noinline struct thread_stats *thread_create(__u32 tid, __u32 tgid, struct task_struct *task)
{
	struct thread_stats *t;
	long err;

	err = bpf_map_update_elem(&threads, &tid, &zero_thread, BPF_NOEXIST);
	if (err && err != -17 /* EEXIST: created concurrently */) {
		__sync_fetch_and_add(&globals.drops_threads, 1);
		return NULL;
	}
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t || err)
		return t;
	t->pid = tgid;
	t->first_seen_ns = bpf_ktime_get_ns();
	t->start_ns = task->start_time;
	bpf_probe_read_kernel_str(t->comm, sizeof(t->comm), task->comm);
	return t;
}

/*
 * A thread that has run its last: its entry moves to the exited map, keyed by tid and start time. If
 * that map is full the entry stays (marked exited) for the collector to find at its next read, unless
 * the tid is reused first (see task_thread): then its counts are lost, and said (drops.exited).
 */
static __noinline bool thread_move_to_exited(__u32 tid, struct thread_stats *t)
{
	struct thread_key key = { .tid = tid, .start_ns = t->start_ns };

	t->flags |= THREAD_EXITED;
	if (bpf_map_update_elem(&exited, &key, t, BPF_NOEXIST))
		return false;
	bpf_map_delete_elem(&threads, &tid);
	return true;
}

/* Stats of a task (the current one or another), created on first sight. */
static __always_inline struct thread_stats *task_thread(struct task_struct *task)
{
	__u32 tid = task->pid;
	struct thread_stats *t = bpf_map_lookup_elem(&threads, &tid);

	if (t && t->start_ns == task->start_time)
		return t;
	if (t && !t->start_ns) { /* seeded by the collector at attach */
		t->start_ns = task->start_time;
		return t;
	}
	/* The entry of a gone thread whose tid is reused: move it to the exited map (or, that map full, lose
	 * it and say so), and start afresh. */
	if (t && !thread_move_to_exited(tid, t)) {
		bpf_map_delete_elem(&threads, &tid);
		__sync_fetch_and_add(&globals.drops_exited, 1);
	}
	return thread_create(tid, task->tgid, task);
}

#endif /* SPINSCOPE_THREADS_BPF_H */
