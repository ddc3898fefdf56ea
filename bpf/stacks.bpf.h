// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --stacks: where in the target's code its time and its patterns' events are. Two kinds of record go to
 * the stack_samples ring buffer, each with the user registers and up to 8 KiB of the user stack (the
 * collector unwinds them with DWARF CFI: Debian's libc has no frame pointers, so a frame-pointer walk
 * loses exactly the caller of write(), the frame that names the spinning call site):
 *
 *   - CPU samples: a cpu-clock perf event on every CPU (there is no hardware PMU in the VMs this runs
 *     in) at stack_hz, kept for the target's threads only, each tagged with what the probes know of the
 *     thread at that moment (STACK_TAG_*: after a stalled write, in an empty or not yet productive
 *     wakeup cycle, in a hand-off, serving a request). They measure where the CPU goes.
 *   - Event stacks: at the sys_exit of a pattern's own event (a spin retry that returned EAGAIN, an empty
 *     poll, the poll that ends a futile wakeup, a call that woke another of the target's threads), 1 in
 *     every `stride` events of a thread and source, the stride adapted to keep the thread to its share of
 *     the target's budget (stack_budget stacks a second for all its threads), each weighted by the events
 *     it stands for: the call sites, weighted by count rather than time.
 *
 * Everything here is behind stack_hz, a constant: without --stacks the verifier drops it all, and the
 * counting probes' cost is what it was. Records are submitted without a wakeup (a wakeup is an
 * irq_work self-IPI, ~6 us per record in a VM); the collector drains the ring on a timer.
 * Included by spinscope.bpf.c after polls.bpf.h.
 */
#ifndef SPINSCOPE_STACKS_BPF_H
#define SPINSCOPE_STACKS_BPF_H

/* What the probes know of thread t right now, as STACK_TAG_* bits. */
static __always_inline __u32 stack_tags(const struct thread_stats *t)
{
	__u32 tags = 0;

	if (!t)
		return STACK_TAG_NO_THREAD;
	if (t->stall_open && t->stall_waits == thread_waits(t))
		tags |= STACK_TAG_WRITE_STALL;
	if (!t->cycle_productive && (t->cycle_kind == CYCLE_ZERO || t->cycle_kind == CYCLE_CHECK))
		tags |= STACK_TAG_EMPTY_CYCLE;
	if (!t->cycle_productive && !t->cycle_dispatch && t->cycle_kind == CYCLE_READY)
		tags |= STACK_TAG_READY_CYCLE;
	if (t->handoff_window || (t->inflight.flags & CALL_HANDOFF))
		tags |= STACK_TAG_HANDOFF;
	if (t->in_request)
		tags |= STACK_TAG_REQUEST;
	return tags;
}

/*
 * The tag timeline (tag_timeline, on when a runtime helper samples beside the collector): the thread's
 * tags, written to tag_changes when they differ from the last written. Called where the tags can change:
 * at a counted call's sys_exit, at a switch-in, and on the waker's side of a wakeup. The KERNEL bit is a
 * sample's, not the thread's: left out. tid and now are the current thread's and time when 0, read only
 * when a change is written (two helper calls on every counted sys_exit were +38 ns a run, measured).
 */
static __always_inline void tag_note(struct thread_stats *t, __u32 tid, __u64 now)
{
	struct tag_change *r;
	__u32 tags;

	if (!stack_hz || !tag_timeline || !t)
		return;
	tags = stack_tags(t);
	if (tags == t->noted_tags)
		return;
	r = bpf_ringbuf_reserve(&tag_changes, sizeof(*r), 0);
	if (!r) {
		__sync_fetch_and_add(&globals.tag_changes_lost, 1);
		t->noted_tags = TAG_UNKNOWN; /* the next note writes the tags, whatever they are */
		return;
	}
	r->time_ns = now ? now : bpf_ktime_get_ns();
	r->tid = tid ? tid : (__u32)bpf_get_current_pid_tgid();
	r->tags = tags;
	t->noted_tags = tags;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

/* The user registers in DWARF order (see STACK_REGS) but ip (regs[16]), from a struct pt_regs (any
 * pointer kind). */
#define STACK_REGS_FROM(rec, from)                                                                 \
	do {                                                                                       \
		(rec)->regs[0] = (from)->ax;                                                             \
		(rec)->regs[1] = (from)->dx;                                                             \
		(rec)->regs[2] = (from)->cx;                                                             \
		(rec)->regs[3] = (from)->bx;                                                             \
		(rec)->regs[4] = (from)->si;                                                             \
		(rec)->regs[5] = (from)->di;                                                             \
		(rec)->regs[6] = (from)->bp;                                                             \
		(rec)->regs[7] = (from)->sp;                                                             \
		(rec)->regs[8] = (from)->r8;                                                             \
		(rec)->regs[9] = (from)->r9;                                                             \
		(rec)->regs[10] = (from)->r10;                                                           \
		(rec)->regs[11] = (from)->r11;                                                           \
		(rec)->regs[12] = (from)->r12;                                                           \
		(rec)->regs[13] = (from)->r13;                                                           \
		(rec)->regs[14] = (from)->r14;                                                           \
		(rec)->regs[15] = (from)->r15;                                                           \
	} while (0)

/*
 * The user stack from sp up, as much of STACK_COPY_CHUNKS KiB as can be read: the first chunk up to the
 * next KiB boundary, then whole aligned KiB, so the copy stops exactly at the end of the stack's mapping
 * (a fixed 8 KiB read from sp faults on every sample near the top of the main thread's stack).
 */
static __always_inline __u32 stack_copy_user(struct stack_sample *r, __u64 sp)
{
	__u32 first = STACK_COPY_CHUNK - (sp & (STACK_COPY_CHUNK - 1)), copied;

	if (first > STACK_COPY_CHUNK || bpf_probe_read_user(r->ustack, first, (void *)sp))
		return 0;
	copied = first;
	/* Unrolled, so each chunk's offset is first plus a constant, which the verifier bounds. */
#pragma unroll
	for (int i = 0; i < STACK_COPY_CHUNKS - 1; i++) {
		if (bpf_probe_read_user(r->ustack + first + i * STACK_COPY_CHUNK, STACK_COPY_CHUNK,
					(void *)(sp + first + i * STACK_COPY_CHUNK)))
			break;
		copied += STACK_COPY_CHUNK;
	}
	return copied;
}

/* A record for thread tid of process pid, its header filled; NULL (counted as lost) when the ring is full. */
static __always_inline struct stack_sample *stack_reserve(__u32 pid, __u32 tid, __u32 source, __u32 weight,
							  __u32 tags)
{
	struct stack_sample *r = bpf_ringbuf_reserve(&stack_samples, sizeof(*r), 0);
	struct task_struct *task;

	if (!r) {
		__sync_fetch_and_add(&globals.stack_samples_lost, 1);
		return NULL;
	}
	r->pid = pid;
	r->tid = tid;
	r->time_ns = bpf_ktime_get_ns();
	r->source = source;
	r->weight = weight;
	r->tags = tags;
	r->syscall = -1;
	r->kstack_bytes = 0;
	task = bpf_get_current_task_btf();
	r->exec_id = task->self_exec_id;
	r->process_start_ns = task->group_leader->start_time;
	return r;
}

SEC("perf_event")
int on_cpu_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct stack_sample *r;
	struct thread_stats *t;
	__u32 tid;
	__u64 ip;
	long kb;

	if (!stack_hz || !is_target(task))
		return 0;
	tid = task->pid;
	t = bpf_map_lookup_elem(&threads, &tid); /* looked up, never made: a sample is not an event */
	r = stack_reserve(task->tgid, tid, STACK_CPU, 1, stack_tags(t));
	if (!r)
		return 0;
	/* In user space, the interrupted registers are the user's. (The context is read a u64 at a time, so
	 * not by cs's privilege bits: a user address is below the kernel's half on x86-64.) */
	ip = ctx->regs.ip;
	if (ip < 0xffff800000000000ULL) {
		STACK_REGS_FROM(r, &ctx->regs);
		r->regs[16] = ip; /* read once: a load through the context cannot be merged with the other's */
	} else { /* in the kernel: its frames, and the user registers saved at its entry */
		struct pt_regs *user = (struct pt_regs *)bpf_task_pt_regs(task);

		r->tags |= STACK_TAG_KERNEL;
		r->syscall = task_syscall(task);
		kb = bpf_get_stack(ctx, r->kstack, sizeof(r->kstack), 0);
		r->kstack_bytes = kb > 0 ? kb : 0;
		STACK_REGS_FROM(r, user);
		r->regs[16] = user->ip;
	}
	r->ustack_bytes = stack_copy_user(r, r->regs[7]);
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

/* One event stack of the target's budget for this second, if it has room: exact, whatever the CPUs (a
 * compare-and-swap of the second and its count; a plain read first, so a spent budget costs no atomic). */
static __always_inline bool stack_budget_take(__u64 now)
{
	__u64 second = now / 1000000000ULL, w, next;

	for (int i = 0; i < 4; i++) {
		w = *(volatile __u64 *)&stack_window;
		if (w >> 32 == (second & 0xffffffffULL)) {
			if ((__u32)w >= stack_budget)
				return false;
			next = w + 1;
		} else {
			next = (second << 32) | 1;
		}
		if (__sync_val_compare_and_swap(&stack_window, w, next) == w)
			return true;
	}
	return false;
}

/*
 * An event of source (enum stack_source, not STACK_CPU) at the sys_exit of the call whose user registers
 * are regs. Systematic sampling with a stride: the event that completes `stride` events since the thread's
 * previous stack of this source gets a stack, weighted by those events, so the weights add up to the
 * events (but for the tail after the thread's last stack, which the collector reports) and a burst is
 * sampled across, not only at its first event. The stride starts at 1 (every event) and doubles each time
 * the thread takes its share (stack_share) of the source within a second: at most ~2 x its share a
 * second, per thread and source, however fast the events come. Over all threads, at most stack_budget a
 * second: a stack due when the budget is spent is deferred (its events go to the thread's next one).
 */
static __noinline void stack_event(struct thread_stats *t, struct pt_regs *regs, __u32 source, __u64 now)
{
	__u32 i = source - 1, weight, share = stack_share ? stack_share : stack_hz;
	struct stack_event_budget *b;
	struct stack_sample *r;

	if (i >= STACK_EVENT_SOURCES || !t)
		return;
	b = &t->stack_events[i];
	if (now - b->window_ns >= 1000000000ULL) { /* a new second: a quiet one lets the stride down again */
		if (b->taken < share / 4 && b->stride > 1)
			b->stride /= 2;
		b->window_ns = now;
		b->taken = 0;
		b->limit = 0;
	}
	b->skipped++;
	if (b->skipped < (b->stride ? b->stride : 1))
		return;
	if (!stack_budget_take(now)) {
		b->deferred++;
		return;
	}
	weight = b->skipped;
	r = stack_reserve(t->pid, (__u32)bpf_get_current_pid_tgid(), source, weight, stack_tags(t));
	if (!r)
		return; /* counted as lost; the events stay in skipped, for the next stack */
	b->skipped = 0;
	/* share stacks, then half the room left to 2 x share, and so on: fewer than 2 x share (and the 24
	 * doublings the stride has) a second. */
	if (++b->taken >= (b->limit ? b->limit : share) && b->stride < (1u << 24)) {
		__u32 room = b->taken < 2 * share ? (2 * share - b->taken) / 2 : 0;

		b->stride = b->stride ? 2 * b->stride : 2;
		b->limit = b->taken + (room ? room : 1);
	}
	r->syscall = (__s32)SC_NR(regs);
	STACK_REGS_FROM(r, regs);
	r->regs[16] = regs->ip;
	r->ustack_bytes = stack_copy_user(r, r->regs[7]);
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

#endif /* SPINSCOPE_STACKS_BPF_H */
