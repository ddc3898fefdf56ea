// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * spinscope's kernel side: count what one process's threads really do with sockets, poll calls,
 * futexes and the scheduler, aggregated in maps (no event per syscall reaches user space).
 *
 * Attach points are tracepoints only (this kernel has no kprobes and refuses fentry):
 *   - tp_btf/sys_enter, tp_btf/sys_exit   (raw_syscalls) the write, read, poll and futex families
 *   - tp_btf/sched_*                       switch, waking, process_fork, process_exit
 *   - tp_btf/tcp_probe                     a segment arriving on a TCP socket: ends a hold by Nagle (nagle.bpf.h)
 *
 * Why the two raw syscall tracepoints rather than one syscalls/sys_enter_<name> tracepoint per
 * call: the per-call tracepoints go through perf's buffer machinery before BPF even runs, which
 * measured here +110 ns on every epoll_wait of every *other* process (the load generator too) and
 * +190 ns on the target's. A BTF raw tracepoint is a direct call; it fires for every syscall, and a
 * syscall we do not count costs a table load, a foreign thread's counted one a compare more.
 *
 * The hot path, as measured (bench/results/overhead.md; 2-core AMD VM with retpolines and the SRSO
 * safe-return mitigation, so every call and return is dear):
 *   - any syscall tracepoint puts every task on the syscall slow path: empty programs on both raw
 *     tracepoints add ~118 ns to every syscall of every process, one alone ~90 ns. That floor is the
 *     kernel's, not the programs'; syscount pays it too.
 *   - calls are counted at sys_exit, whose saved registers still hold the arguments: sys_enter does
 *     nothing for most calls (close, and the poll calls whose timeout is in user memory, excepted);
 *   - the clock (~30 ns) is read for 1 call in time_sample only (--time-sample, default 16) and where a
 *     request starts or is answered; the time a call spent switched out comes from sched_switch;
 *   - the remaining large cost is the thread lookup (~40 ns for the hash map). Task storage measured
 *     ~24 ns less, but a nested access (a wakeup from an interrupt during one of our programs) fails
 *     and would lose exact counts: not used.
 *   - poll calls read the clock at every exit, to measure their wakeup cycles exactly (poll_cycle_end):
 *     measured +71 to +94 ns per sys_exit run of a zero-timeout epoll_wait (bpf_stats, min of 5 or 7
 *     runs, two sessions; ~67 ns of it the clock read, a helper call, dear on this CPU).
 *
 * Two ways to choose the target, fixed before load: a PID (and its forked children with --children),
 * or a cgroup v2 (--cgroup: every thread whose cgroup is it or a descendant, whenever it entered). The
 * mode is a constant the verifier resolves: a PID-mode program holds no cgroup code at all.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "spinscope.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#include "kernel.bpf.h"
#include "maps.bpf.h"
#include "threads.bpf.h"

/* ---------------------------------------------------------------------------------------- */
/* Calls                                                                                      */

/*
 * A counted call at its sys_exit. Its arguments are still in the saved user registers, so only the 1
 * call in time_sample that is timed needs sys_enter (a clock stamp); the time the call spent switched
 * out comes from the scheduler (inflight.offcpu_ns), exactly, for every call.
 */
struct call {
	__u64 now;    /* the clock at sys_exit, read when first needed; 0 until then */
	__u64 oncpu;  /* on-CPU time inside the call times time_sample if it was timed, else 0 */
	__u64 wall;   /* its time switched out (exact) + oncpu: an estimate of its wall time */
	__u32 waits;  /* thread_waits() when the call began */
	bool timed;   /* stamped at sys_enter: 1 call in time_sample */
	bool decided; /* the socket's kind was decided in this call (its first read or write seen) */
	__u32 phase;  /* the socket's enum req_phase after this call, where its state was looked up */
	__u32 stack_events; /* --stacks: the pattern events this call is, a bit per enum stack_source */
	struct socket_state *state; /* a socket write's: the socket's state (NULL: none), for the HTTP/2 walk */
};

static __always_inline __u64 call_now(struct call *call)
{
	if (!call->now)
		call->now = bpf_ktime_get_ns();
	return call->now;
}

#include "sockets.bpf.h"
#include "polls.bpf.h"

/* ---------------------------------------------------------------------------------------- */
/* Futex: waits with their duration, and wakes                                               */

static __always_inline bool futex_cmd_waits(__u32 cmd)
{
	return cmd == FUTEX_WAIT || cmd == FUTEX_WAIT_BITSET || cmd == FUTEX_LOCK_PI ||
	       cmd == FUTEX_LOCK_PI2 || cmd == FUTEX_WAIT_REQUEUE_PI;
}

static __always_inline bool futex_cmd_wakes(__u32 cmd)
{
	return cmd == FUTEX_WAKE || cmd == FUTEX_WAKE_BITSET || cmd == FUTEX_WAKE_OP ||
	       cmd == FUTEX_REQUEUE || cmd == FUTEX_CMP_REQUEUE || cmd == FUTEX_UNLOCK_PI;
}

static __always_inline void futex_exit(struct thread_stats *t, __u32 cls, struct pt_regs *regs,
				       struct call *call)
{
	__u32 cmd = SC_ARG(regs, 1) & FUTEX_CMD_MASK;

	if (cls == SC_FUTEX && futex_cmd_wakes(cmd)) {
		t->c.futex_oncpu_ns += call->oncpu;
		t->c.futex_wakes++;
		return;
	}
	if (cls == SC_FUTEX && !futex_cmd_waits(cmd))
		return;
	t->c.futex_oncpu_ns += call->oncpu;
	t->c.futex_waits++;
	t->c.futex_wait_ns += call->wall;
	if (t->in_request) {
		t->c.futex_waits_req++;
		t->c.futex_wait_req_ns += call->wall;
	}
}

/* ---------------------------------------------------------------------------------------- */
/* The two syscall tracepoints                                                                */

/* A clone or clone3 call: in the creator (ret the new task's id), its on-CPU time in clone_ns; the new
 * thread's own return from it (ret 0) is not a creation. */
static __always_inline void clone_exit(struct thread_stats *t, __u32 nr, long ret)
{
	__u64 wall;

	if (ret <= 0 || !t->inflight.enter_ns || t->inflight.enter_nr != nr)
		return;
	wall = bpf_ktime_get_ns() - t->inflight.enter_ns;
	t->c.clone_calls++;
	if (wall > t->inflight.offcpu_ns)
		t->c.clone_ns += wall - t->inflight.offcpu_ns;
}

static __always_inline __u32 syscall_class_of(__u64 nr)
{
	return nr < SYSCALL_TABLE_SIZE ? syscall_class[nr] : SC_IGNORED;
}

/* Classes counted at sys_exit. (close is handled at sys_enter, where its descriptor still is.) */
static __always_inline bool counted_at_exit(__u32 cls)
{
	return cls != SC_IGNORED && cls != SC_CLOSE;
}

/*
 * The syscall a task is inside, from its saved user registers; -1 when it is in none (in user mode, or
 * in an exception, whose frame's orig_ax holds an error code).
 */
static __always_inline long regs_syscall(struct pt_regs *regs)
{
#if defined(__TARGET_ARCH_x86)
	/* The syscall entry stores -ENOSYS in ax until the call returns; an exception frame holds the
	 * user's ax there. */
	if ((long)regs->ax != -38 /* -ENOSYS */)
		return -1;
#endif
	return (long)SC_NR(regs);
}

static __always_inline long task_syscall(struct task_struct *task)
{
	return regs_syscall((struct pt_regs *)bpf_task_pt_regs(task));
}

/* The class of the syscall a task is inside (SC_IGNORED: none). */
static __always_inline __u32 task_call_class(struct task_struct *task)
{
	long nr = task_syscall(task);

	return nr >= 0 ? syscall_class_of(nr) : SC_IGNORED;
}

static __always_inline bool in_counted_call(struct task_struct *task)
{
	return counted_at_exit(task_call_class(task));
}

static __always_inline bool poll_class(__u32 cls)
{
	return cls >= SC_POLL_MS2 && cls <= SC_POLL_TV4;
}

#include "stacks.bpf.h"

/*
 * Which calls are timed: a xorshift generator per CPU (sample_state), not bpf_get_prandom_u32() (measured
 * +27 ns per call against +10; a helper call is dear with this CPU's return-stack mitigations), and not a
 * plain counter, whose period would lock onto a server loop's period of calls (epoll, read, write, write:
 * a counter mod 16 would time only epolls).
 */
static __always_inline bool sample_this_call(void)
{
	__u32 zero = 0;
	__u64 *state, x;

	if (time_sample == 1)
		return true;
	state = bpf_map_lookup_elem(&sample_state, &zero);
	if (!state)
		return false;
	x = *state ? *state : 0x9E3779B97F4A7C15ULL; /* any non-zero seed */
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return !((x >> 32) & (time_sample - 1));
}

/*
 * sys_enter: a syscall spinscope does not count costs a table load, a foreign thread's counted one a
 * compare more; for the target's counted calls, only close (its
 * descriptor is gone at sys_exit), the poll calls whose timeout is in user memory, and the 1 call in
 * time_sample that is timed do anything here.
 */
SEC("tp_btf/sys_enter")
int BPF_PROG(on_sys_enter, struct pt_regs *regs, long nr)
{
	struct task_struct *task;
	struct thread_stats *t;
	bool timed, nowait_arg;
	__u32 cls;

	/* The syscall first: a table load, where the task costs a helper call (dear on this CPU) that
	 * every syscall spinscope does not count, of any process, is spared. Then whether this call is
	 * timed, before the task too: of the calls counted at sys_exit, only the timed ones and the polls
	 * whose timeout is in user memory have anything to do here, so 15 in 16 of them (any process's)
	 * return without the helper call. (The generator draws for every process's counted calls on the
	 * CPU; the target's draws are as random as before.) */
	cls = syscall_class_of(nr);
	if (cls == SC_IGNORED)
		return 0;
	/* restart_syscall continues a call already stamped (or not) when it began */
	timed = cls == SC_CLONE || (cls != SC_RESTART && cls != SC_CLOSE && cls != SC_EPOLL_CTL && sample_this_call());
	nowait_arg = poll_timeout_in_memory(cls);
	if (!timed && !nowait_arg && cls != SC_CLOSE)
		return 0;
	task = bpf_get_current_task_btf();
	if (!is_target(task))
		return 0;
	if (cls == SC_CLOSE)
		return close_enter(task, SC_ARG(regs, 0));
	t = task_thread(task);
	if (!t)
		return 0;
	if (nowait_arg)
		t->inflight.flags = poll_enter_nowait(cls, regs) ? CALL_NOWAIT : 0;
	if (timed) {
		t->inflight.enter_nr = nr;
		t->inflight.enter_ns = bpf_ktime_get_ns();
	}
	return 0;
}

/*
 * Thread t runs from now on (tid: its id, 0 when it is the current thread): what its time switched out and
 * waiting to run was, and whether it was woken by a hand-off.
 */
static __always_inline void thread_switch_in(struct thread_stats *t, __u32 tid, __u64 now)
{
	if (t->switch_out_ns) {
		t->c.offcpu_ns += now - t->switch_out_ns;
		if (t->out_in_call)
			t->inflight.offcpu_ns += now - t->switch_out_ns;
	}
	if (t->runnable_since_ns) {
		t->c.runq_ns += now - t->runnable_since_ns;
		if (t->woken_in_process)
			t->c.wakeup_wait_ns += now - t->runnable_since_ns;
		if (t->first_run_pending) {
			t->c.thread_starts++;
			t->c.thread_start_wait_ns += now - t->runnable_since_ns;
		}
	}
	t->first_run_pending = 0;
	if (stack_hz && t->woken_in_process)
		t->handoff_window = 1;
	t->runnable_since_ns = 0;
	t->woken_in_process = 0;
	t->switch_out_ns = 0;
	t->switch_in_ns = now;
	tag_note(t, tid, now);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *task;
	struct call call = {};
	struct thread_stats *t;
	__u32 nr = SC_NR(regs), cls = syscall_class_of(nr);

	if (!counted_at_exit(cls)) /* the syscall first, as at sys_enter */
		return 0;
	task = bpf_get_current_task_btf();
	if (!is_target(task))
		return 0;
	t = task_thread(task);
	if (!t)
		return 0;
	/* Running, yet switched out at its last switch: the kernel ran no program for its switch in (a
	 * switch from a task no tracing program sees: on this machine every switch out of the sandbox's
	 * PID 1 is such). Its switch in is taken to be now, and counted. */
	if (t->switch_out_ns && !t->switch_in_ns) {
		t->c.switch_ins_unseen++;
		thread_switch_in(t, 0, bpf_ktime_get_ns());
	}
	/* Interrupted, to be restarted: one call for user space, so count it once, when it ends (its
	 * time switched out and its flags carry over). */
	if (ret <= -ERESTARTSYS && ret >= -ERESTART_RESTARTBLOCK) {
		if (cls != SC_RESTART)
			t->inflight.restart_nr = nr;
		return 0;
	}
	if (cls == SC_RESTART) {
		nr = t->inflight.restart_nr;
		cls = syscall_class_of(nr);
		if (!counted_at_exit(cls) || cls == SC_RESTART)
			goto done;
	}

	if (cls == SC_CLONE) { /* timed at every call, apart from the sampled calls' calls_timed */
		clone_exit(t, nr, ret);
		goto done;
	}
	if (t->inflight.enter_ns && t->inflight.enter_nr == nr) {
		__u64 wall = call_now(&call) - t->inflight.enter_ns;

		call.timed = true;
		t->c.calls_timed++;
		if (wall > t->inflight.offcpu_ns)
			call.oncpu = (wall - t->inflight.offcpu_ns) * time_sample;
	}
	call.wall = t->inflight.offcpu_ns + call.oncpu;
	call.waits = thread_waits(t) - t->inflight.waits;

	switch (cls) {
	case SC_WRITE:
	case SC_WRITEV:
	case SC_SENDMSG:
	case SC_SENDMMSG:
	case SC_SENDFILE:
	case SC_READ:
	case SC_RECVMMSG:
		io_exit(task, t, cls, regs, ret, &call);
		break;
	case SC_POLL_MS2:
	case SC_POLL_MS3:
	case SC_POLL_TS2:
	case SC_POLL_TS3:
	case SC_POLL_TV4:
		poll_exit(t, cls, regs, ret, &call);
		break;
	case SC_FUTEX:
	case SC_FUTEX_WAITV:
		futex_exit(t, cls, regs, &call);
		break;
	case SC_ACCEPT:
		accept_exit(t, regs, ret);
		break;
	case SC_EPOLL_CTL:
		epoll_ctl_exit(task, t, regs, ret);
		break;
	}
	if (t->inflight.flags & CALL_HANDOFF)
		t->c.handoff_oncpu_ns += call.oncpu;
	if (stack_hz) {
		if (t->inflight.flags & CALL_WOKE)
			call.stack_events |= 1 << STACK_HANDOFF;
		/* Each source apart: a poll that returned nothing can also end a futile cycle. */
		for (__u32 source = STACK_CPU + 1; source < STACK_SOURCES; source++)
			if (call.stack_events & (1 << source))
				stack_event(t, regs, source, call_now(&call));
	}
done:
	t->inflight.enter_ns = 0;
	t->inflight.offcpu_ns = 0;
	t->inflight.waits = 0;
	t->inflight.flags = 0;
	tag_note(t, 0, 0);
	return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Scheduler                                                                                  */

SEC("tp_btf/sched_switch")
int BPF_PROG(on_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	/* A thread's last switch out is taken even once the capture is over: a process has exited (its pidfd
	 * readable, ending the capture) before its last thread's final switch, which moves it to the exited. */
	bool prev_ours = prev_state & TASK_DEAD ? in_target(prev) : is_target(prev), next_ours = is_target(next);
	struct thread_stats *t;
	__u64 now;

	if (!prev_ours && !next_ours)
		return 0;
	now = bpf_ktime_get_ns();
	if (prev_ours && (t = task_thread(prev))) {
		/* Read once, at switch-out: a thread's syscall does not change while it is switched out. */
		__u32 cls = task_call_class(prev);

		t->out_in_call = counted_at_exit(cls);
		if (preempt || prev_state == TASK_RUNNING) {
			t->c.cs_involuntary++;
			t->runnable_since_ns = now;
		} else {
			t->c.cs_voluntary++;
			if (stack_hz)
				t->handoff_window = 0; /* blocked again: the hand-off's window is over */
			t->inflight.waits += t->out_in_call;
			/* Its first sleep in a poll call ends the wakeup cycle in flight (poll_cycle_end): what
			 * the thread runs after it inside the call is that call's rewaits and its return. */
			if (t->inflight.waits == 1 && poll_class(cls)) {
				t->cycle_end_ns = now;
				t->cycle_end_offcpu = t->c.offcpu_ns;
			}
			/* Asleep again inside the same poll call: it was woken, the kernel re-checked its
			 * descriptors, found nothing ready (another waiter took it: select/poll re-check before
			 * they return) and put it back to sleep. The slice it ran is a wakeup for nothing that
			 * never reached user space. */
			if (t->inflight.waits > 1 && poll_class(cls) && t->switch_in_ns) {
				t->c.poll_rewaits++;
				t->c.poll_rewait_ns += now - t->switch_in_ns;
			}
		}
		if (t->switch_in_ns)
			t->c.oncpu_ns += now - t->switch_in_ns;
		t->switch_in_ns = 0;
		t->switch_out_ns = now;
		if (prev_state & TASK_DEAD) { /* its last switch-out: nothing of it runs after this */
			if (t->exit_ns && now > t->exit_ns + (t->c.offcpu_ns - t->exit_offcpu_ns))
				t->c.exit_oncpu_ns += now - t->exit_ns - (t->c.offcpu_ns - t->exit_offcpu_ns);
			thread_move_to_exited(prev->pid, t);
		}
	}
	if (next_ours && (t = task_thread(next)))
		thread_switch_in(t, next->pid, now);
	return 0;
}

static __always_inline void edge_add(__u32 waker, __u32 wakee, __u32 mechanism)
{
	struct wakeup_edge key = { .waker_tid = waker, .wakee_tid = wakee, .mechanism = mechanism };
	__u64 zero = 0, *count = map_lookup_or_create(&wakeups, &key, &zero, &globals.drops_wakeup_edges);

	if (count)
		__sync_fetch_and_add(count, 1);
}

/*
 * Is this wakeup made from interrupt context? Then it came from a timer, a device or softirq
 * networking, not from whatever thread the interrupt landed on. The preempt count that would tell is
 * a per-CPU variable BPF cannot reach on this kernel (no data symbols in kallsyms), and a classic
 * tracepoint's header flags are filled only after BPF runs. Two facts of x86-64 tell instead:
 *  - an interrupt taken in kernel mode runs on the per-CPU IRQ stack (softirqs run from
 *    local_bh_enable too), and a BPF program's frame lives on the current kernel stack: if our frame
 *    is outside the task's stack, we are in an interrupt;
 *  - an interrupt taken in user mode stays on the task's stack, but then the task's saved user
 *    registers are an interrupt frame: orig_ax is negative (in a syscall it holds the syscall
 *    number, in an exception its error code).
 * (PREEMPT_RT runs softirqs in threads, whose wakeups then count as external.)
 * The frame's address (r10) is compared with the stack's bounds as it is: the verifier lets a program
 * loaded with CAP_PERFMON compare a stack pointer with a number, not subtract one (a copy of it through
 * bpf_probe_read_kernel() cost a helper call, ~90 ns, on every wakeup of a target thread). The saved user
 * registers, when read, are left in *user_regs for the caller (the waker's syscall is in them too).
 */
static __always_inline bool in_interrupt(struct task_struct *task, struct pt_regs **user_regs)
{
	__u64 stack = (__u64)task->stack, frame;

	asm volatile("%0 = r10" : "=r"(frame));
	if (frame < stack)
		return true;
	/* Two compares: folded into one subtraction (frame - stack >= size), the verifier would refuse it. */
	barrier_var(frame);
	if (frame >= stack + kernel_stack_size)
		return true;
	if (!task->mm) /* kernel thread: no user registers */
		return false;
	*user_regs = (struct pt_regs *)bpf_task_pt_regs(task);
	return (long)SC_NR(*user_regs) < 0;
}

/* What the (task-context) waker was doing, by the syscall it is in (nr: task_syscall()). */
static __always_inline __u32 waker_mechanism(long nr)
{
	return nr >= 0 && nr < SYSCALL_TABLE_SIZE ? wake_mechanism[nr] : WAKE_OTHER;
}

/*
 * sched_waking runs in the waker's context (sched_wakeup may run on the wakee's CPU), so the
 * current task is the waker, unless we are in an interrupt: then the wakeup came from a timer, a
 * device or softirq networking, and is counted apart.
 */
SEC("tp_btf/sched_waking")
int BPF_PROG(on_sched_waking, struct task_struct *p)
{
	struct thread_stats *wakee, *waker;
	struct pt_regs *user_regs = NULL;
	struct task_struct *current;
	__u32 mechanism;
	long waker_nr;

	/* Every wakeup on the host comes here: a foreign wakee costs a load and a compare. */
	if (!is_target(p))
		return 0;
	wakee = task_thread(p);
	if (!wakee)
		return 0;
	wakee->runnable_since_ns = bpf_ktime_get_ns();

	current = bpf_get_current_task_btf();
	if (in_interrupt(current, &user_regs)) {
		__sync_fetch_and_add(&wakee->c.wakeups_irq, 1);
		return 0;
	}
	if (!is_target(current)) {
		__sync_fetch_and_add(&wakee->c.wakeups_external, 1);
		return 0;
	}
	__sync_fetch_and_add(&wakee->c.wakeups_received, 1);
	/* read by in_interrupt() unless the waker has no mm any more (a thread past exit_mm) */
	waker_nr = regs_syscall(user_regs ? user_regs : (struct pt_regs *)bpf_task_pt_regs(current));
	mechanism = waker_mechanism(waker_nr);
	waker = task_thread(current);
	/* A handoff (not mm-lock contention, not a thread's exit): the wakee's wait to run is its
	 * latency, the waking call and the call the wakee slept in are its on-CPU cost (of the calls
	 * counted at sys_exit, which is where the flag is read and cleared). */
	if (mechanism != WAKE_MM && mechanism != WAKE_EXIT) {
		wakee->woken_in_process = 1;
		if (in_counted_call(p))
			wakee->inflight.flags |= CALL_HANDOFF;
		if (waker && waker_nr >= 0 && counted_at_exit(syscall_class_of(waker_nr)))
			waker->inflight.flags |= CALL_HANDOFF | CALL_WOKE;
	}
	if (waker) {
		waker->c.wakeups_sent++;
		switch (mechanism) {
		case WAKE_FUTEX:
			waker->c.wakeups_sent_futex++;
			waker->cycle_productive = 1; /* work passed on: see poll_cycle_end */
			break;
		case WAKE_IO:
			waker->c.wakeups_sent_io++;
			waker->cycle_productive = 1;
			break;
		case WAKE_MM:
			waker->c.wakeups_sent_mm++;
			break;
		case WAKE_EXIT:
			waker->c.wakeups_sent_exit++;
			break;
		}
		tag_note(waker, current->pid, 0);
	}
	edge_add(current->pid, p->pid, mechanism);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	struct thread_stats *t;
	__u32 child_tgid = child->tgid;
	__u8 one = 1;

	if (!is_target(parent))
		return 0;
	t = task_thread(bpf_get_current_task_btf());
	if (t)
		t->c.threads_created++;
	if (child_tgid == (__u32)parent->tgid) {
		/* A thread of the target: runnable from now (wake_up_new_task follows), its wait to its first
		 * run timed at that switch-in. */
		t = task_thread(child);
		if (t) {
			t->runnable_since_ns = bpf_ktime_get_ns();
			t->first_run_pending = 1;
		}
		return 0;
	}
	if (targ_flags & TARGET_CGROUP) { /* a child starts in its parent's cgroup: traced as the cgroup's */
		__sync_fetch_and_add(&globals.processes_created, 1);
		return 0;
	}
	if (!(targ_flags & TARGET_CHILDREN))
		return 0;
	__sync_fetch_and_add(&globals.processes_created, 1);
	if (bpf_map_update_elem(&child_pids, &child_tgid, &one, BPF_ANY))
		__sync_fetch_and_add(&globals.drops_pids, 1);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_sched_process_exit, struct task_struct *p)
{
	struct thread_stats *t;

	if (!is_target(p))
		return 0;
	t = task_thread(p);
	if (!t)
		return 0;
	t->flags |= THREAD_EXITED;
	t->exit_ns = bpf_ktime_get_ns();
	t->exit_offcpu_ns = t->c.offcpu_ns;
	bpf_probe_read_kernel_str(t->comm, sizeof(t->comm), p->comm); /* the final name */
	return 0;
}

/* A traced process replaced its program: say when, and what it runs now. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_sched_process_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	static const struct exec_record fresh;
	__u32 pid = p->tgid, tid = p->pid;
	struct thread_stats *t;
	struct exec_record *e;

	if (!is_target(p))
		return 0;
	e = map_lookup_or_create(&execs, &pid, &fresh, &globals.drops_execs);
	if (!e)
		return 0;
	e->count++;
	e->last_ns = bpf_ktime_get_ns();
	/* Looked up, not created: a thread without a row has made no counted call. */
	t = bpf_map_lookup_elem(&threads, &tid);
	e->calls_before = t && t->start_ns == p->start_time
		? t->c.write_calls + t->c.read_calls + t->c.poll_calls + t->c.futex_waits + t->c.accept_calls
		: 0;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), p->comm);
	bpf_probe_read_kernel_str(e->filename, sizeof(e->filename), bprm->filename);
	return 0;
}
