// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * spinscope's kernel side: count what one process's threads really do with sockets, poll calls,
 * futexes and the scheduler, aggregated in maps (no event per syscall reaches user space).
 *
 * Attach points are tracepoints only (this kernel has no kprobes and refuses fentry):
 *   - tp_btf/sys_enter, tp_btf/sys_exit   (raw_syscalls) the write, read, poll and futex families
 *   - tp_btf/sched_*                       switch, waking, process_fork, process_exit
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

#define EAGAIN 11
/* Kernel-internal returns of a syscall interrupted by a signal (or a ptrace attach): the kernel
 * re-executes it, or continues it through restart_syscall; user space never sees these. */
#define ERESTARTSYS 512
#define ERESTART_RESTARTBLOCK 516
#define S_IFMT 00170000
#define S_IFSOCK 0140000
#define TASK_RUNNING 0
#define TASK_DEAD 0x80
#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10

/* futex(2) commands (uapi/linux/futex.h); the private/clock flags are masked off. */
#define FUTEX_CMD_MASK 0x7f
#define FUTEX_WAIT 0
#define FUTEX_WAKE 1
#define FUTEX_REQUEUE 3
#define FUTEX_CMP_REQUEUE 4
#define FUTEX_WAKE_OP 5
#define FUTEX_LOCK_PI 6
#define FUTEX_UNLOCK_PI 7
#define FUTEX_WAIT_BITSET 9
#define FUTEX_WAKE_BITSET 10
#define FUTEX_WAIT_REQUEUE_PI 11
#define FUTEX_LOCK_PI2 13

#define MAX_IOV 16 /* iovecs / mmsghdrs summed per call; more are rare and left out of `asked` */

/* Settings, fixed by the collector before load. */
const volatile __u32 targ_tgid = 0; /* the process (TARGET_NO_PID with TARGET_CGROUP) */
const volatile __u32 targ_more = 0;        /* TARGET_* (spinscope.h) */
const volatile __u64 targ_cgroup_id = 0;   /* TARGET_CGROUP: the cgroup's kernfs id (its inode number) */
const volatile __u32 targ_cgroup_level = 0; /* ...and its depth in the hierarchy (0: the root) */
const volatile __u32 collector_tgid = 0;   /* TARGET_CGROUP: the collector itself is never traced */
const volatile __u64 kernel_stack_size = 16384; /* THREAD_SIZE: x86-64, doubled under KASAN */
const volatile __u8 syscall_class[SYSCALL_TABLE_SIZE] = {}; /* enum syscall_class by number */
const volatile __u8 wake_mechanism[SYSCALL_TABLE_SIZE] = {}; /* enum wake_mechanism by number */
const volatile __u32 time_sample = 1; /* a power of two: 1 call in time_sample is timed (--time-sample) */
const volatile __u8 read_buffer[SYSCALL_TABLE_SIZE] = {}; /* enum read_buffer by number */

/* Syscall arguments and number in a task's saved user registers. */
#if defined(__TARGET_ARCH_x86)
#define SC_ARG(regs, n)                                                                            \
	((n) == 0 ? (regs)->di : (n) == 1 ? (regs)->si : (n) == 2 ? (regs)->dx : (n) == 3 ? (regs)->r10 \
										 : (regs)->r8)
#define SC_NR(regs) ((regs)->orig_ax)
#elif defined(__TARGET_ARCH_arm64)
#define SC_ARG(regs, n) ((n) == 0 ? (regs)->orig_x0 : (regs)->regs[n])
#define SC_NR(regs) ((regs)->syscallno)
#else
#error "spinscope: syscall argument registers not defined for this architecture"
#endif

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
 * at least 4096: ~0.3 MiB).
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

static const struct thread_stats zero_thread;

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

/* ---------------------------------------------------------------------------------------- */
/* Helpers                                                                                    */

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
 * thread costs one compare of its thread group with a constant in PID mode. targ_more is a constant the
 * verifier resolves: with a PID alone, the code below its test is gone (xlated: no lookup, no cgroup
 * load), and the PID mode's foreign thread costs what it did before the cgroup mode existed.
 */
static __always_inline bool is_target(struct task_struct *task)
{
	__u32 tgid = task->tgid;

	if (tgid == targ_tgid)
		return true;
	if (!targ_more)
		return false;
	if (targ_more & TARGET_CGROUP)
		return in_target_cgroup(task) && tgid != collector_tgid;
	return bpf_map_lookup_elem(&child_pids, &tgid) != NULL;
}

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
static __noinline bool thread_retire(__u32 tid, struct thread_stats *t)
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
	/* The entry of a gone thread whose tid is reused: retire it (or, the exited map full, lose it and
	 * say so), and start afresh. */
	if (t && !thread_retire(tid, t)) {
		bpf_map_delete_elem(&threads, &tid);
		__sync_fetch_and_add(&globals.drops_exited, 1);
	}
	return thread_create(tid, task->tgid, task);
}

/*
 * The struct socket behind fd in the current process, or 0 if fd is not a socket. The walk uses
 * direct (fault-safe) loads through BTF-typed pointers: one helper call instead of one per field.
 */
static __always_inline struct file *fd_file(__u64 fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fdtable *fdt = task->files->fdt;
	struct file *file = NULL;

	if (!fdt || fd >= fdt->max_fds)
		return NULL;
	bpf_probe_read_kernel(&file, sizeof(file), &fdt->fd[fd]);
	if (!file)
		return NULL;
	return bpf_rdonly_cast(file, bpf_core_type_id_kernel(struct file));
}

static __always_inline __u64 file_socket(struct file *file)
{
	if (!file || (file->f_inode->i_mode & S_IFMT) != S_IFSOCK)
		return 0;
	return (__u64)file->private_data;
}

static __always_inline __u64 fd_socket(__u64 fd)
{
	return file_socket(fd_file(fd));
}

/* Before 6.13 a file's references were an atomic_long_t f_count (1: one reference). */
struct file___pre613 {
	atomic_long_t f_count;
} __attribute__((preserve_access_index));

/* Is this the file's only reference? A socket inherited by a forked child, or dup()ed, has more:
 * closing one of them does not end the connection. */
static __always_inline bool file_last_reference(struct file *file)
{
	if (bpf_core_field_exists(file->f_ref))
		return BPF_CORE_READ(file, f_ref.refcnt.counter) == 0; /* FILE_REF_ONEREF */
	return BPF_CORE_READ((struct file___pre613 *)file, f_count.counter) <= 1;
}

/*
 * Does this socket serve requests, or is it the target's own outgoing connection (to a database, a
 * cache shard, a backend)? Only the first kind has requests in the sense of docs/capture-format.md.
 * A TCP socket made by accept() is cloned from its listener and keeps the listener's non-zero
 * sk_max_ack_backlog; one made by socket() + connect() has 0. Other families (AF_UNIX sets the
 * backlog on every socket) cannot be told apart this way (AF_UNIX is, otherwise: unix_socket_phase).
 */
static __always_inline bool socket_is_outgoing(__u64 sock)
{
	struct socket *s = bpf_rdonly_cast((void *)sock, bpf_core_type_id_kernel(struct socket));
	struct sock *sk = s->sk;

	if (!sk)
		return false;
	return (sk->__sk_common.skc_family == AF_INET || sk->__sk_common.skc_family == AF_INET6) &&
	       sk->sk_protocol == IPPROTO_TCP && sk->sk_max_ack_backlog == 0;
}

/*
 * What an AF_UNIX socket is, from kernel state at its first read or write seen (so connections made
 * before attach are told apart too). accept() on a listener, which must be bound to listen, gives the
 * new socket the listener's address (unix_stream_connect in net/unix/af_unix.c shares otheru->addr with
 * the embryo it queues); socketpair() gives neither end one, and connect() leaves the connecting end
 * without one (unless it bound, or autobound with SO_PASSCRED) while its peer, accepted, has the
 * listener's. So: an address of its own, a served client connection; none, but a peer that has one,
 * the target's own outgoing connection; neither, a channel (a socket pair: Node's cluster IPC,
 * a master and its workers). An unbound socket with no peer at all (a datagram socket sending with
 * sendto, to syslog say) can only address others: outgoing too.
 */
static __always_inline __u32 unix_socket_phase(struct sock *sk)
{
	struct unix_sock *u = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct unix_sock));
	struct unix_sock *peer;

	if (u->addr)
		return REQ_READING;
	if (!u->peer)
		return REQ_OUTGOING;
	peer = bpf_rdonly_cast(u->peer, bpf_core_type_id_kernel(struct unix_sock));
	return peer->addr ? REQ_OUTGOING : REQ_CHANNEL;
}

/* The phase a socket starts in, decided once, when it is first read (or, for a channel, written):
 * REQ_READING for a socket that serves clients, REQ_OUTGOING, or REQ_CHANNEL. AF_INET/AF_INET6 by
 * socket_is_outgoing; families other than these and AF_UNIX are all taken as serving, as before. */
static __always_inline __u32 socket_first_phase(__u64 sock)
{
	struct socket *s = bpf_rdonly_cast((void *)sock, bpf_core_type_id_kernel(struct socket));
	struct sock *sk = s->sk;

	if (sk && sk->__sk_common.skc_family == AF_UNIX)
		return unix_socket_phase(sk);
	return socket_is_outgoing(sock) ? REQ_OUTGOING : REQ_READING;
}

static __always_inline __u64 iov_total(const struct iovec *iov, __u64 n)
{
	__u64 total = 0;

	for (__u32 i = 0; i < MAX_IOV; i++) {
		struct iovec v;

		if (i >= n)
			break;
		if (bpf_probe_read_user(&v, sizeof(v), &iov[i]))
			break;
		total += v.iov_len;
	}
	return total;
}

/* Sum of msg_len over the first n entries of a user mmsghdr array (filled in by the kernel). */
static __always_inline __u64 mmsg_bytes(const struct mmsghdr *msgs, __u64 n)
{
	__u64 total = 0;

	for (__u32 i = 0; i < MAX_IOV; i++) {
		unsigned int len;

		if (i >= n)
			break;
		if (bpf_probe_read_user(&len, sizeof(len), &msgs[i].msg_len))
			break;
		total += len;
	}
	return total;
}

/* ---------------------------------------------------------------------------------------- */
/* Calls                                                                                      */

/*
 * A counted call at its sys_exit. Its arguments are still in the saved user registers, so only the 1
 * call in time_sample that is timed needs sys_enter (a clock stamp); the time the call spent switched
 * out comes from the scheduler (call_offcpu_ns), exactly, for every call.
 */
struct call {
	__u64 now;    /* the clock at sys_exit, read when first needed; 0 until then */
	__u64 oncpu;  /* on-CPU time inside the call times time_sample if it was timed, else 0 */
	__u64 wall;   /* its time switched out (exact) + oncpu: an estimate of its wall time */
	__u32 waits;  /* thread_waits() when the call began */
	bool timed;   /* stamped at sys_enter: 1 call in time_sample */
	bool decided; /* the socket's kind was decided in this call (its first read or write seen) */
	__u32 phase;  /* the socket's enum req_phase after this call, where its state was looked up */
};

static __always_inline __u64 call_now(struct call *call)
{
	if (!call->now)
		call->now = bpf_ktime_get_ns();
	return call->now;
}

/* ---------------------------------------------------------------------------------------- */
/* Requests                                                                                   */

static __always_inline void request_finish(const struct socket_state *s)
{
	__u32 zero = 0;
	struct request_stats *r = bpf_map_lookup_elem(&requests, &zero);

	if (r && s->write_calls)
		request_stats_add(r, s);
}

/* A successful read of a serving socket, returning at start_ns (a request starts when its data is in:
 * a blocking server's wait for the next request is not part of it). Returns the socket's phase after
 * the read: REQ_READING when a request is being read (a new one started if the socket was idle or
 * answering), REQ_OUTGOING otherwise. */
static __always_inline __u32 request_on_read(__u64 sock, __u32 tid, struct call *call, bool *started)
{
	struct socket_state *s = bpf_map_lookup_elem(&sockets, &sock);

	*started = false;
	if (!s) {
		struct socket_state fresh = {
			.start_ns = call_now(call), .reader_tid = tid, .phase = REQ_READING,
		};
		/* Decided once per socket, when it is first read. */
		fresh.phase = socket_first_phase(sock);
		if (bpf_map_update_elem(&sockets, &sock, &fresh, BPF_ANY))
			__sync_fetch_and_add(&globals.drops_sockets, 1);
		else
			call->decided = true;
		*started = fresh.phase == REQ_READING;
		call->phase = fresh.phase;
		return fresh.phase;
	}
	call->phase = s->phase;
	if (s->phase == REQ_READING || s->phase == REQ_OUTGOING || s->phase == REQ_CHANNEL)
		return s->phase;
	if (s->phase == REQ_WRITING)
		request_finish(s);
	__builtin_memset(s, 0, sizeof(*s));
	s->start_ns = call_now(call);
	s->reader_tid = tid;
	s->phase = REQ_READING;
	*started = true;
	return REQ_READING;
}

/*
 * A write on a socket not read yet (no state): a channel's end that one process only writes (a
 * primary handing work to a worker) is never read, so it is decided here, and given a state so that
 * this is done once. Other sockets keep having no state until their first read (their writes are
 * unattributed, as before): what a write to them costs more is this decision (a few loads).
 */
static __always_inline struct socket_state *channel_first_write(__u64 sock, struct call *call)
{
	struct socket_state fresh = { .phase = REQ_CHANNEL }, *s;

	if (socket_first_phase(sock) != REQ_CHANNEL)
		return NULL;
	if (!bpf_map_update_elem(&sockets, &sock, &fresh, BPF_NOEXIST)) {
		call->decided = true;
		return bpf_map_lookup_elem(&sockets, &sock);
	}
	s = bpf_map_lookup_elem(&sockets, &sock); /* made meanwhile, by a read or write on another CPU */
	if (!s)
		__sync_fetch_and_add(&globals.drops_sockets, 1);
	return s;
}

/* What a socket write was, beyond its result: a retry after a stall, and whether it began a response. */
#define WRITE_SPIN 0x1     /* retried a stalled write on this socket without waiting */
#define WRITE_WAITED 0x2   /* retried a stalled write on this socket after waiting */
#define WRITE_RESPONSE 0x4 /* the first write of a response */
#define WRITE_AFTER_EAGAIN 0x8 /* the stalled write it retried returned EAGAIN */

/*
 * Request and stall bookkeeping of one socket write. A write that follows a stalled one (EAGAIN, or
 * fewer bytes than asked) on the same socket is a spin retry when the same thread has neither polled
 * nor slept since the stall (thread_waits unchanged), else a write after a wait. Sockets never read
 * (no state) are not followed: their writes are unattributed.
 */
static __always_inline __u32 request_on_write(struct thread_stats *t, __u32 tid, __u64 sock,
					      struct call *call, long ret, bool stalled, __u64 bytes)
{
	struct socket_state *s = bpf_map_lookup_elem(&sockets, &sock);
	__u32 what = 0;

	if (!s)
		s = channel_first_write(sock, call);
	if (s)
		call->phase = s->phase;
	if (s && s->stall_tid) {
		what = s->stall_tid == tid && s->stall_waits == call->waits ? WRITE_SPIN : WRITE_WAITED;
		what |= s->stall_eagain ? WRITE_AFTER_EAGAIN : 0;
	}
	if (s) {
		s->stall_tid = stalled ? tid : 0;
		s->stall_waits = thread_waits(t);
		s->stall_eagain = ret == -EAGAIN;
	}
	if (!s || s->phase == REQ_IDLE || s->phase == REQ_OUTGOING || s->phase == REQ_CHANNEL) {
		__u32 zero = 0;
		struct request_stats *r = bpf_map_lookup_elem(&requests, &zero);

		if (r)
			r->unattributed_writes++;
		return what;
	}
	if (s->phase == REQ_READING)
		what |= WRITE_RESPONSE;
	s->phase = REQ_WRITING;
	s->write_calls++;
	s->writer_tid = tid;
	s->end_ns = call_now(call);
	if (ret == -EAGAIN)
		s->write_eagain++;
	else if (stalled)
		s->write_partial++;
	if (what & WRITE_SPIN) {
		s->spin_retries++;
		s->spin_eagain += !!(what & WRITE_AFTER_EAGAIN);
	} else if (what & WRITE_WAITED)
		s->write_waited++;
	s->write_bytes += bytes;
	return what;
}

/* ---------------------------------------------------------------------------------------- */
/* Socket write and read families                                                            */

/*
 * On-CPU time of a retry's whole cycle: from the thread's previous socket write returning to this one
 * returning, less its time switched out. A retry made without waiting spends that time in its loop,
 * the syscall's entry and exit and the call itself; the time inside the call alone (between the two
 * tracepoints) misses most of it (measured: a third of the spinning reference loop's cost). Measured
 * when the previous write was timed (1 in time_sample, at random), so counted time_sample times.
 */
static __always_inline __u64 write_cycle_oncpu_ns(const struct thread_stats *t, struct call *call)
{
	__u64 wall, off;

	if (!t->last_write_ns)
		return 0;
	wall = call_now(call) - t->last_write_ns;
	off = t->c.offcpu_ns - t->last_write_offcpu;
	return off < wall ? (wall - off) * time_sample : 0;
}

/*
 * The copy rate: a socket write that moved all it was asked, and at least WRITE_COPY_MIN bytes, went into
 * room and copied at full rate. A response's first write (write_first_ns) may be a header of 83 bytes
 * whose fixed cost, spread over so few bytes, prices a byte ~40x too high; these writes cannot be.
 * Bytes are counted on every such write, the time on the timed ones (scaled, as every call time).
 */
static __always_inline void write_copy_count(struct thread_stats *t, long ret, bool partial, __u64 bytes,
					     const struct call *call)
{
	if (ret < 0 || partial || bytes < WRITE_COPY_MIN)
		return;
	t->c.write_copy_ns += call->oncpu;
	t->c.write_copy_bytes += bytes;
}

/*
 * What bound a stalled TCP write: the socket's send buffer and the bytes queued in it, the peer's
 * advertised window and the RTT, summed over the stalls (averages in the analyzer). A peer window smaller
 * than the send buffer means the clients read slowly (a larger buffer only queues more); a window as
 * large means the buffer is the bound. Read on stalls only, not on every write.
 */
static __noinline void stall_sample(struct thread_stats *t, __u64 sock)
{
	struct socket *s = bpf_rdonly_cast((void *)sock, bpf_core_type_id_kernel(struct socket));
	struct sock *sk = s->sk;
	struct tcp_sock *tp;

	if (!sk || sk->sk_protocol != IPPROTO_TCP ||
	    (sk->__sk_common.skc_family != AF_INET && sk->__sk_common.skc_family != AF_INET6))
		return;
	tp = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
	t->c.stalls_sampled++;
	t->c.stall_sndbuf_bytes += (__u32)sk->sk_sndbuf;
	t->c.stall_queued_bytes += (__u32)sk->sk_wmem_queued;
	t->c.stall_peer_window_bytes += tp->snd_wnd;
	t->c.stall_srtt_us += tp->srtt_us >> 3; /* srtt_us holds 8 times the smoothed RTT */
}

static __always_inline void write_exit(struct thread_stats *t, __u32 tid, __u64 sock, long ret, __u64 asked,
				       __u64 bytes, struct call *call)
{
	bool partial = ret >= 0 && (__u64)ret < asked;
	__u32 what;

	t->c.write_calls++;
	t->c.write_ns += call->wall;
	t->c.write_bytes += bytes;
	if (ret == -EAGAIN) {
		t->c.write_eagain++;
		t->c.write_eagain_ns += call->oncpu;
	} else if (ret < 0) {
		t->c.write_errors++;
	} else if (partial) {
		t->c.write_partial++;
		t->c.write_partial_ns += call->oncpu;
	}
	t->in_request = 0;
	if (ret > 0) /* it moved bytes: the wakeup cycle found work */
		t->cycle_productive = 1;
	if (sock && (ret == -EAGAIN || partial))
		stall_sample(t, sock);
	write_copy_count(t, ret, partial, bytes, call);
	what = request_on_write(t, tid, sock, call, ret, ret == -EAGAIN || partial, bytes);
	if (what & WRITE_SPIN) {
		__u64 cycle = write_cycle_oncpu_ns(t, call);

		t->c.write_spin_retries++;
		t->c.write_spin_ns += cycle;
		t->c.write_spin_bytes += bytes;
		if (ret == -EAGAIN) { /* a bare retry: its cycle is what each retry costs beyond its copying */
			t->c.write_spin_empty++;
			t->c.write_spin_empty_ns += cycle;
		}
		if (what & WRITE_AFTER_EAGAIN)
			t->c.write_spin_eagain++;
	} else if (what & WRITE_WAITED) {
		t->c.write_waited++;
	}
	/* The next write's cycle is measured from here if this call was timed. */
	t->last_write_ns = call->timed ? call_now(call) : 0;
	t->last_write_offcpu = t->c.offcpu_ns;
	if (what & WRITE_RESPONSE) {
		t->c.responses_written++;
		t->c.write_first_ns += call->oncpu;
		t->c.write_first_bytes += bytes;
	}
}

static __always_inline void read_exit(struct thread_stats *t, __u32 tid, __u64 sock, long ret, __u64 bytes,
				      struct call *call)
{
	bool started;

	t->c.read_calls++;
	t->c.read_ns += call->wall;
	t->c.read_bytes += bytes;
	if (ret >= 0) /* data or EOF: the wakeup cycle found work */
		t->cycle_productive = 1;
	if (ret == -EAGAIN) {
		t->c.read_eagain++;
		t->c.read_eagain_ns += call->oncpu;
	} else if (ret == 0) {
		t->c.read_eof++;
	} else if (ret < 0) {
		t->c.read_errors++;
	} else if (request_on_read(sock, tid, call, &started) == REQ_READING) {
		t->in_request = 1;
		if (started)
			t->c.requests_read++;
	}
}

/* Bytes a write-family call asked to write (messages, for sendmmsg), from its arguments: read from user
 * memory only for a socket's vectored writes that returned a count (writev to pipes and eventfds is
 * common in handoff code, and an EAGAIN needs no comparison). */
static __always_inline __u64 write_asked(__u32 cls, struct pt_regs *regs)
{
	struct user_msghdr msg;

	switch (cls) {
	case SC_WRITEV:
		return iov_total((void *)SC_ARG(regs, 1), SC_ARG(regs, 2));
	case SC_SENDMSG:
		if (bpf_probe_read_user(&msg, sizeof(msg), (void *)SC_ARG(regs, 1)))
			return 0;
		return iov_total(msg.msg_iov, msg.msg_iovlen);
	case SC_SENDFILE:
		return SC_ARG(regs, 3);
	default: /* SC_WRITE (write, sendto), SC_SENDMMSG (vlen) */
		return SC_ARG(regs, 2);
	}
}

/* The HTTP/2 client connection preface (RFC 9113, 3.4): what a client speaking HTTP/2 over cleartext with
 * prior knowledge (h2c) sends first on a connection. */
#define H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define H2_PREFACE_LEN 24

/* Where a read put its first bytes (NULL: not looked at): the buffer of read and recvfrom, the first
 * iovec of readv and recvmsg if it holds at least the preface's length (the kernel fills it first). */
static __always_inline const void *read_first_bytes(struct pt_regs *regs)
{
	__u64 nr = SC_NR(regs);
	struct user_msghdr msg;
	const struct iovec *iov;
	struct iovec v;

	switch (nr < SYSCALL_TABLE_SIZE ? read_buffer[nr] : RB_NONE) {
	case RB_BUF:
		return (const void *)SC_ARG(regs, 1);
	case RB_IOV:
		iov = (const struct iovec *)SC_ARG(regs, 1);
		break;
	case RB_MSG:
		if (bpf_probe_read_user(&msg, sizeof(msg), (void *)SC_ARG(regs, 1)) || !msg.msg_iovlen)
			return NULL;
		iov = msg.msg_iov;
		break;
	default:
		return NULL;
	}
	if (bpf_probe_read_user(&v, sizeof(v), iov) || v.iov_len < H2_PREFACE_LEN)
		return NULL;
	return v.iov_base;
}

/* Did this read (ret bytes) begin with the HTTP/2 preface? The 24 bytes are copied to the stack,
 * compared and dropped: no payload is kept. */
static __always_inline bool read_is_h2_preface(struct pt_regs *regs, long ret)
{
	static const char preface[H2_PREFACE_LEN] = H2_PREFACE;
	const void *buf;
	char got[H2_PREFACE_LEN];

	if (ret < H2_PREFACE_LEN)
		return false;
	buf = read_first_bytes(regs);
	if (!buf || bpf_probe_read_user(got, sizeof(got), buf))
		return false;
	for (int i = 0; i < H2_PREFACE_LEN; i++)
		if (got[i] != preface[i])
			return false;
	return true;
}

/*
 * What the socket's kind says about this read or write: on a channel it is counted apart (it stays in
 * read_calls / write_calls); a serving socket's first read seen is looked at for the HTTP/2 preface,
 * the only read that pays for it.
 */
static __always_inline void socket_kind_count(struct thread_stats *t, __u32 cls, struct pt_regs *regs, long ret,
					      const struct call *call)
{
	bool read = cls == SC_READ || cls == SC_RECVMMSG;

	if (call->phase == REQ_CHANNEL) {
		if (read)
			t->c.channel_reads++;
		else
			t->c.channel_writes++;
		t->c.channel_sockets += call->decided;
		return;
	}
	if (call->decided && call->phase == REQ_READING && cls == SC_READ && read_is_h2_preface(regs, ret))
		t->c.h2_connections++;
}

/* A read- or write-family call returned: counted if its fd is a socket. (Pipes, eventfds and files are
 * timed for handoffs only, by the caller.) */
static __always_inline void io_exit(struct thread_stats *t, __u32 tid, __u32 cls, struct pt_regs *regs,
				    long ret, struct call *call)
{
	__u64 sock = fd_socket(SC_ARG(regs, 0)), bytes = 0;
	bool mmsg = cls == SC_SENDMMSG || cls == SC_RECVMMSG;

	if (ret > 0 && (cls == SC_READ || cls == SC_RECVMMSG)) /* data from any fd (an eventfd's count, a */
		t->cycle_productive = 1;                       /* pipe's work item): the wakeup found work */
	if (!sock)
		return;
	if (sock != t->last_socket) {
		t->c.socket_switches++;
		t->last_socket = sock;
	}
	if (ret > 0)
		bytes = mmsg ? mmsg_bytes((void *)SC_ARG(regs, 1), ret) : ret;
	if (cls == SC_READ || cls == SC_RECVMMSG)
		read_exit(t, tid, sock, ret, bytes, call);
	else
		write_exit(t, tid, sock, ret, ret >= 0 ? write_asked(cls, regs) : 0, bytes, call);
	socket_kind_count(t, cls, regs, ret, call);
}

/* The last close of a socket ends its request (a response is complete when the server closes). A
 * close of one of several references (a pre-forking parent closing its copy of an accepted socket)
 * does not. At sys_enter: at sys_exit the descriptor is gone. */
static __always_inline int close_enter(__u64 fd)
{
	struct socket_state *s;
	struct file *file = fd_file(fd);
	__u64 sock = file_socket(file);

	if (!sock || !file_last_reference(file))
		return 0;
	s = bpf_map_lookup_elem(&sockets, &sock);
	if (!s)
		return 0;
	if (s->phase == REQ_WRITING)
		request_finish(s);
	bpf_map_delete_elem(&sockets, &sock);
	return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Poll family: select, pselect6, poll, ppoll, epoll_wait, epoll_pwait, epoll_pwait2          */

/* A struct timespec or timeval in user memory (two longs on 64-bit) that is zero: a check, no wait.
 * NULL means no timeout at all. */
static __always_inline bool user_time_zero(__u64 uptr)
{
	long v[2];

	if (!uptr || bpf_probe_read_user(v, sizeof(v), (void *)uptr))
		return false;
	return !v[0] && !v[1];
}

/* Poll calls whose timeout is a struct in user memory: the kernel writes the time left back into it
 * (zero once the timeout expired), so it is read at sys_enter, on every call. */
static __always_inline bool poll_timeout_in_memory(__u32 cls)
{
	return cls == SC_POLL_TS2 || cls == SC_POLL_TS3 || cls == SC_POLL_TV4;
}

static __always_inline bool poll_enter_nowait(__u32 cls, struct pt_regs *regs)
{
	switch (cls) {
	case SC_POLL_TS2:
		return user_time_zero(SC_ARG(regs, 2));
	case SC_POLL_TS3:
		return user_time_zero(SC_ARG(regs, 3));
	default: /* SC_POLL_TV4 */
		return user_time_zero(SC_ARG(regs, 4));
	}
}

/*
 * Poll wakeup cycles, on every poll call: the cycle that began at the thread's previous poll exit ends at
 * this one. Its on-CPU time is its wall time less the thread's time switched out meanwhile (as
 * write_cycle_oncpu_ns, but exact: the clock is read at every poll exit, no sys_enter work): the whole
 * loop iteration around the poll, user space, the other syscalls and the next poll call included. A
 * voluntary sleep outside a poll call (a futex wait, nanosleep) does not end the cycle; its time is off
 * CPU and not in the cycle's.
 *
 * A cycle is productive when the thread found work in it: a read that returned data (from any fd: a
 * socket, or the pipe or eventfd another thread passes work through) or a socket read that returned EOF,
 * a socket write that moved bytes, an accept that returned a connection, or a handoff it made (a wakeup
 * of another of the target's threads from a futex or write-family call: work passed on). An unproductive
 * cycle that began with an empty poll is counted in poll_zero_cycle_ns (a busy-polling loop's iteration);
 * one that began with ready fds is a futile wakeup (poll_futile, poll_futile_cycle_ns): the fds gave
 * nothing (an accept or read that returned EAGAIN: another thread took it, a thundering herd). A cycle
 * that began with a failed poll (EINTR) is not counted, nor is the one still open when the thread exits
 * or the capture ends.
 */
static __always_inline void poll_cycle_end(struct thread_stats *t, long ret, bool nowait, struct call *call)
{
	__u64 now = call_now(call), offcpu = *(volatile __u64 *)&t->c.offcpu_ns;

	/* The syscall tracepoints' programs can be preempted: a switch out and back in between the clock read
	 * and offcpu's would put that time switched out in offcpu and not in now (measured: a cycle counted
	 * 60% more than the thread ran, under two CPU hogs). Then read both again. */
	if (*(volatile __u64 *)&t->switch_in_ns > now) {
		now = bpf_ktime_get_ns();
		offcpu = *(volatile __u64 *)&t->c.offcpu_ns;
	}
	if (t->cycle_kind != CYCLE_NONE && !t->cycle_productive) {
		__u64 wall = now - t->cycle_start_ns, off = offcpu - t->cycle_start_offcpu;
		__u64 oncpu = off < wall ? wall - off : 0;

		if (t->cycle_kind == CYCLE_ZERO) {
			t->c.poll_zero_cycle_ns += oncpu;
		} else if (t->cycle_kind == CYCLE_CHECK) {
			t->c.poll_check_cycle_ns += oncpu;
		} else {
			t->c.poll_futile++;
			t->c.poll_futile_cycle_ns += oncpu;
		}
	}
	if (ret > 0)
		t->cycle_kind = CYCLE_READY;
	else if (ret == 0)
		t->cycle_kind = nowait ? CYCLE_CHECK : CYCLE_ZERO;
	else
		t->cycle_kind = CYCLE_NONE;
	t->cycle_productive = 0;
	t->cycle_start_ns = now;
	t->cycle_start_offcpu = offcpu;
}

static __always_inline void poll_exit(struct thread_stats *t, __u32 cls, struct pt_regs *regs, long ret,
				      struct call *call)
{
	bool nowait;

	if (cls == SC_POLL_MS2)
		nowait = (int)SC_ARG(regs, 2) == 0;
	else if (cls == SC_POLL_MS3)
		nowait = (int)SC_ARG(regs, 3) == 0;
	else
		nowait = t->call_flags & CALL_NOWAIT;
	t->in_request = 0; /* it went back to its loop */
	t->c.poll_calls++;
	t->c.poll_ns += call->wall;
	t->c.poll_oncpu_ns += call->oncpu;
	t->c.poll_nowait += nowait;
	poll_cycle_end(t, ret, nowait, call);
	if (ret < 0) {
		t->c.poll_errors++;
		return;
	}
	if (ret == 0) {
		t->c.poll_zero++;
		if (nowait) {
			t->c.poll_zero_nowait++;
			t->c.poll_zero_nowait_ns += call->oncpu;
		} else {
			t->c.poll_zero_wait_ns += call->oncpu;
		}
	}
	t->c.poll_events += ret;
	t->poll_hist[log2_bucket(ret, POLL_HIST_BUCKETS)]++;
}

/* ---------------------------------------------------------------------------------------- */
/* Accept: counted on any fd, and per listening socket                                        */

/* A listener's family and local port (0 for families without one), read from its sock once, when its
 * entry is made. */
static __always_inline void listener_address(__u64 sock, struct listener_stats *l)
{
	struct socket *s = bpf_rdonly_cast((void *)sock, bpf_core_type_id_kernel(struct socket));
	struct sock *sk = s->sk;

	if (!sk)
		return;
	l->family = sk->__sk_common.skc_family;
	if (l->family == AF_INET || l->family == AF_INET6)
		l->port = sk->__sk_common.skc_num;
}

/* The listener's entry, made on its first accept; NULL (and counted as a drop) when the map is full. */
static __always_inline struct listener_stats *listener_entry(const struct listener_key *key)
{
	struct listener_stats *l = bpf_map_lookup_elem(&listeners, key);
	struct listener_stats fresh = {};

	if (l)
		return l;
	listener_address(key->sock, &fresh);
	bpf_map_update_elem(&listeners, key, &fresh, BPF_NOEXIST); /* EEXIST: made meanwhile, fine */
	l = bpf_map_lookup_elem(&listeners, key);
	if (!l)
		__sync_fetch_and_add(&globals.drops_listeners, 1);
	return l;
}

/* Remember that process tgid called accept on the listener (once per pair: a lookup after the first). */
static __always_inline void listener_note_pid(const struct listener_key *key, __u32 tgid)
{
	struct listener_pid pk = { .listener = *key, .tgid = tgid };
	__u8 one = 1;
	long err;

	if (bpf_map_lookup_elem(&listener_pids, &pk))
		return;
	err = bpf_map_update_elem(&listener_pids, &pk, &one, BPF_NOEXIST);
	if (err && err != -17 /* EEXIST: made meanwhile */)
		__sync_fetch_and_add(&globals.drops_listeners, 1);
}

/* An accept call on a listening socket, counted in its entry (atomically: the processes of a pre-forked
 * server accept on one listener from every CPU at once). */
static __noinline void listener_accept(__u64 fd, long ret, __u32 tgid)
{
	struct file *file = fd_file(fd);
	struct listener_key key = {};
	struct listener_stats *l;

	key.sock = file_socket(file);
	if (!key.sock || ret == -22 /* EINVAL: the socket is not listening */)
		return;
	key.ino = file->f_inode->i_ino;
	l = listener_entry(&key);
	if (!l)
		return;
	__sync_fetch_and_add(&l->accept_calls, 1);
	if (ret >= 0)
		__sync_fetch_and_add(&l->accept_ok, 1);
	else if (ret == -EAGAIN)
		__sync_fetch_and_add(&l->accept_eagain, 1);
	listener_note_pid(&key, tgid);
}

static __always_inline void accept_exit(struct thread_stats *t, struct pt_regs *regs, long ret)
{
	t->c.accept_calls++;
	if (ret >= 0) /* a connection: the wakeup cycle found work */
		t->cycle_productive = 1;
	else if (ret == -EAGAIN)
		t->c.accept_eagain++;
	listener_accept(SC_ARG(regs, 0), ret, t->pid);
}

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
static __always_inline long task_syscall(struct task_struct *task)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);

#if defined(__TARGET_ARCH_x86)
	/* The syscall entry stores -ENOSYS in ax until the call returns; an exception frame holds the
	 * user's ax there. */
	if ((long)regs->ax != -38 /* -ENOSYS */)
		return -1;
#endif
	return (long)SC_NR(regs);
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

/*
 * Which calls are timed: a xorshift generator per CPU, not bpf_get_prandom_u32() (measured +27 ns per
 * call against +10; a helper call is dear with this CPU's return-stack mitigations), and not a plain
 * counter, whose period would lock onto a server loop's period of calls (epoll, read, write, write: a
 * counter mod 16 would time only epolls).
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sample_state SEC(".maps");

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
	 * every syscall spinscope does not count, of any process, is spared. */
	cls = syscall_class_of(nr);
	if (cls == SC_IGNORED)
		return 0;
	task = bpf_get_current_task_btf();
	if (!is_target(task))
		return 0;
	if (cls == SC_CLOSE)
		return close_enter(SC_ARG(regs, 0));
	/* restart_syscall continues a call already stamped (or not) when it began */
	timed = cls != SC_RESTART && sample_this_call();
	nowait_arg = poll_timeout_in_memory(cls);
	if (!timed && !nowait_arg)
		return 0;
	t = task_thread(task);
	if (!t)
		return 0;
	if (nowait_arg)
		t->call_flags = poll_enter_nowait(cls, regs) ? CALL_NOWAIT : 0;
	if (timed) {
		t->call_enter_nr = nr;
		t->call_enter_ns = bpf_ktime_get_ns();
	}
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *task;
	struct call call = {};
	struct thread_stats *t;
	__u32 tid, nr = SC_NR(regs), cls = syscall_class_of(nr);

	if (!counted_at_exit(cls)) /* the syscall first, as at sys_enter */
		return 0;
	task = bpf_get_current_task_btf();
	if (!is_target(task))
		return 0;
	tid = task->pid;
	t = task_thread(task);
	if (!t)
		return 0;
	/* Interrupted, to be restarted: one call for user space, so count it once, when it ends (its
	 * time switched out and its flags carry over). */
	if (ret <= -ERESTARTSYS && ret >= -ERESTART_RESTARTBLOCK) {
		if (cls != SC_RESTART)
			t->restart_nr = nr;
		return 0;
	}
	if (cls == SC_RESTART) {
		nr = t->restart_nr;
		cls = syscall_class_of(nr);
		if (!counted_at_exit(cls) || cls == SC_RESTART)
			goto done;
	}

	if (t->call_enter_ns && t->call_enter_nr == nr) {
		__u64 wall = call_now(&call) - t->call_enter_ns;

		call.timed = true;
		t->c.calls_timed++;
		if (wall > t->call_offcpu_ns)
			call.oncpu = (wall - t->call_offcpu_ns) * time_sample;
	}
	call.wall = t->call_offcpu_ns + call.oncpu;
	call.waits = thread_waits(t) - t->call_waits;

	switch (cls) {
	case SC_WRITE:
	case SC_WRITEV:
	case SC_SENDMSG:
	case SC_SENDMMSG:
	case SC_SENDFILE:
	case SC_READ:
	case SC_RECVMMSG:
		io_exit(t, tid, cls, regs, ret, &call);
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
	}
	if (t->call_flags & CALL_HANDOFF)
		t->c.handoff_oncpu_ns += call.oncpu;
done:
	t->call_enter_ns = 0;
	t->call_offcpu_ns = 0;
	t->call_waits = 0;
	t->call_flags = 0;
	return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Scheduler                                                                                  */

SEC("tp_btf/sched_switch")
int BPF_PROG(on_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	bool prev_ours = is_target(prev), next_ours = is_target(next);
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
			t->call_waits += t->out_in_call;
			/* Asleep again inside the same poll call: it was woken, the kernel re-checked its
			 * descriptors, found nothing ready (another waiter took it: select/poll re-check before
			 * they return) and put it back to sleep. The slice it ran is a wakeup for nothing that
			 * never reached user space. */
			if (t->call_waits > 1 && poll_class(cls) && t->switch_in_ns) {
				t->c.poll_rewaits++;
				t->c.poll_rewait_ns += now - t->switch_in_ns;
			}
		}
		if (t->switch_in_ns)
			t->c.oncpu_ns += now - t->switch_in_ns;
		t->switch_in_ns = 0;
		t->switch_out_ns = now;
		if (prev_state & TASK_DEAD) /* its last switch-out: nothing of it runs after this */
			thread_retire(prev->pid, t);
	}
	if (next_ours && (t = task_thread(next))) {
		if (t->switch_out_ns) {
			t->c.offcpu_ns += now - t->switch_out_ns;
			if (t->out_in_call)
				t->call_offcpu_ns += now - t->switch_out_ns;
		}
		if (t->runnable_since_ns) {
			t->c.runq_ns += now - t->runnable_since_ns;
			if (t->woken_in_process)
				t->c.wakeup_wait_ns += now - t->runnable_since_ns;
		}
		t->runnable_since_ns = 0;
		t->woken_in_process = 0;
		t->switch_out_ns = 0;
		t->switch_in_ns = now;
	}
	return 0;
}

static __always_inline void edge_add(__u32 waker, __u32 wakee, __u32 mechanism)
{
	struct wakeup_edge key = { .waker_tid = waker, .wakee_tid = wakee, .mechanism = mechanism };
	__u64 one = 1, *count;

	count = bpf_map_lookup_elem(&wakeups, &key);
	if (count) {
		__sync_fetch_and_add(count, 1);
		return;
	}
	if (!bpf_map_update_elem(&wakeups, &key, &one, BPF_NOEXIST))
		return;
	count = bpf_map_lookup_elem(&wakeups, &key); /* lost a race to create it */
	if (count)
		__sync_fetch_and_add(count, 1);
	else
		__sync_fetch_and_add(&globals.drops_wakeup_edges, 1);
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
 */
static __always_inline bool in_interrupt(struct task_struct *task)
{
	__u64 stack = (__u64)task->stack, here = 0;
	void *frame = &here;
	struct pt_regs *user_regs;

	/* Copy the frame address out as a number: the verifier does not let a stack pointer be
	 * compared with a scalar directly. */
	bpf_probe_read_kernel(&here, sizeof(here), &frame);
	if (here - stack >= kernel_stack_size)
		return true;
	if (!task->mm) /* kernel thread: no user registers */
		return false;
	user_regs = (struct pt_regs *)bpf_task_pt_regs(task);
	return (long)SC_NR(user_regs) < 0;
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
	struct task_struct *current = bpf_get_current_task_btf();
	struct thread_stats *wakee, *waker;
	__u32 mechanism;
	long waker_nr;

	if (!is_target(p))
		return 0;
	wakee = task_thread(p);
	if (!wakee)
		return 0;
	wakee->runnable_since_ns = bpf_ktime_get_ns();

	if (in_interrupt(current)) {
		__sync_fetch_and_add(&wakee->c.wakeups_irq, 1);
		return 0;
	}
	if (!is_target(current)) {
		__sync_fetch_and_add(&wakee->c.wakeups_external, 1);
		return 0;
	}
	__sync_fetch_and_add(&wakee->c.wakeups_received, 1);
	waker_nr = task_syscall(current);
	mechanism = waker_mechanism(waker_nr);
	waker = task_thread(current);
	/* A handoff (not mm-lock contention, not a thread's exit): the wakee's wait to run is its
	 * latency, the waking call and the call the wakee slept in are its on-CPU cost (of the calls
	 * counted at sys_exit, which is where the flag is read and cleared). */
	if (mechanism != WAKE_MM && mechanism != WAKE_EXIT) {
		wakee->woken_in_process = 1;
		if (in_counted_call(p))
			wakee->call_flags |= CALL_HANDOFF;
		if (waker && waker_nr >= 0 && counted_at_exit(syscall_class_of(waker_nr)))
			waker->call_flags |= CALL_HANDOFF;
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
	if (child_tgid == (__u32)parent->tgid)
		return 0;
	if (targ_more & TARGET_CGROUP) { /* a child starts in its parent's cgroup: traced as the cgroup's */
		__sync_fetch_and_add(&globals.processes_created, 1);
		return 0;
	}
	if (!(targ_more & TARGET_CHILDREN))
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
	bpf_probe_read_kernel_str(t->comm, sizeof(t->comm), p->comm); /* the final name */
	return 0;
}

/* A traced process replaced its program: say when, and what it runs now. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_sched_process_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	static const struct exec_record fresh;
	__u32 pid = p->tgid;
	struct exec_record *e;

	if (!is_target(p))
		return 0;
	e = bpf_map_lookup_elem(&execs, &pid);
	if (!e) {
		bpf_map_update_elem(&execs, &pid, &fresh, BPF_NOEXIST); /* EEXIST: made meanwhile, fine */
		e = bpf_map_lookup_elem(&execs, &pid);
	}
	if (!e) {
		__sync_fetch_and_add(&globals.drops_execs, 1);
		return 0;
	}
	e->count++;
	e->last_ns = bpf_ktime_get_ns();
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), p->comm);
	bpf_probe_read_kernel_str(e->filename, sizeof(e->filename), bprm->filename);
	return 0;
}
