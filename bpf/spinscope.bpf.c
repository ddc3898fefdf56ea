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
 * +190 ns on the target's. A BTF raw tracepoint is a direct call; it fires for every syscall, but
 * a foreign thread costs one compare of its thread group with a constant in .rodata (bench/).
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
const volatile __u32 targ_tgid = 0;
const volatile bool follow_children = false;
const volatile __u64 kernel_stack_size = 16384; /* THREAD_SIZE: x86-64, doubled under KASAN */
const volatile __u8 syscall_class[SYSCALL_TABLE_SIZE] = {}; /* enum syscall_class by number */
const volatile __u8 wake_mechanism[SYSCALL_TABLE_SIZE] = {}; /* enum wake_mechanism by number */

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
 * The hash maps allocate their entries as they are created (BPF_F_NO_PREALLOC): memory follows the
 * target's threads, sockets and edges, not the maps' sizes. Preallocated, the threads map alone took
 * 12.6 MiB at the default --max-threads whatever the target; now a 1-thread target's maps take 1.6 MiB,
 * most of it the sockets map's buckets. Lookups cost the same; an insertion allocates (once per thread,
 * socket or edge).
 */

/* Thread stats, keyed by tid. Entries of exited threads stay until the capture is written. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384); /* --max-threads */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct thread_stats);
} threads SEC(".maps");

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

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
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

static const struct thread_stats zero_thread;

/* ---------------------------------------------------------------------------------------- */
/* Helpers                                                                                    */

static __always_inline bool is_target(__u32 tgid)
{
	if (tgid == targ_tgid)
		return true;
	if (!follow_children) /* constant: the verifier drops the lookup below */
		return false;
	return bpf_map_lookup_elem(&child_pids, &tgid) != NULL;
}

/* Stats of thread tid, created on first sight. task is NULL when tid is the current thread. */
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
	if (task)
		bpf_probe_read_kernel_str(t->comm, sizeof(t->comm), task->comm);
	else
		bpf_get_current_comm(t->comm, sizeof(t->comm));
	return t;
}

static __always_inline struct thread_stats *current_thread(__u32 tid)
{
	struct thread_stats *t = bpf_map_lookup_elem(&threads, &tid);

	if (t)
		return t;
	return thread_create(tid, bpf_get_current_pid_tgid() >> 32, NULL);
}

static __always_inline struct thread_stats *task_thread(struct task_struct *task)
{
	__u32 tid = task->pid;
	struct thread_stats *t = bpf_map_lookup_elem(&threads, &tid);

	if (t)
		return t;
	return thread_create(tid, task->tgid, task);
}

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

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
 * backlog on every socket) cannot be told apart this way and are all taken as serving.
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
static __always_inline __u32 request_on_read(__u64 sock, __u32 tid, __u64 start_ns, bool *started)
{
	struct socket_state *s = bpf_map_lookup_elem(&sockets, &sock);

	*started = false;
	if (!s) {
		struct socket_state fresh = {
			.start_ns = start_ns, .reader_tid = tid, .phase = REQ_READING,
		};
		/* Decided once per socket, when it is first read. */
		if (socket_is_outgoing(sock))
			fresh.phase = REQ_OUTGOING;
		if (bpf_map_update_elem(&sockets, &sock, &fresh, BPF_ANY))
			__sync_fetch_and_add(&globals.drops_sockets, 1);
		*started = fresh.phase == REQ_READING;
		return fresh.phase;
	}
	if (s->phase == REQ_READING || s->phase == REQ_OUTGOING)
		return s->phase;
	if (s->phase == REQ_WRITING)
		request_finish(s);
	__builtin_memset(s, 0, sizeof(*s));
	s->start_ns = start_ns;
	s->reader_tid = tid;
	s->phase = REQ_READING;
	*started = true;
	return REQ_READING;
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
static __always_inline __u32 request_on_write(struct thread_stats *t, __u32 tid, __u64 now, long ret,
					      bool stalled, __u64 bytes)
{
	struct socket_state *s = bpf_map_lookup_elem(&sockets, &t->sys_socket);
	__u32 what = 0;

	if (s && s->stall_tid) {
		what = s->stall_tid == tid && s->stall_waits == t->sys_waits ? WRITE_SPIN : WRITE_WAITED;
		what |= s->stall_eagain ? WRITE_AFTER_EAGAIN : 0;
	}
	if (s) {
		s->stall_tid = stalled ? tid : 0;
		s->stall_waits = thread_waits(t);
		s->stall_eagain = ret == -EAGAIN;
	}
	if (!s || s->phase == REQ_IDLE || s->phase == REQ_OUTGOING) {
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
	s->end_ns = now;
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

/* Timing of the call in flight: on-CPU time inside it is its wall time less its time switched out. */
static __always_inline void call_begin(struct thread_stats *t)
{
	t->sys_enter_ns = bpf_ktime_get_ns();
	t->sys_offcpu_ns = t->c.offcpu_ns;
	t->sys_flags = 0;
}

static __always_inline __u64 call_oncpu_ns(const struct thread_stats *t, __u64 now)
{
	__u64 wall = now - t->sys_enter_ns, off = t->c.offcpu_ns - t->sys_offcpu_ns;

	return off < wall ? wall - off : 0;
}

/* Start counting a read/write-family call on fd. Returns the thread's stats if fd is a socket (the
 * call is in flight), NULL if it is not ours to count (pipe, eventfd, file). */
static __always_inline struct thread_stats *io_enter(__u32 tid, __u32 kind, __u64 fd, __u64 asked,
						     __u32 shape, __u64 uptr)
{
	struct thread_stats *t = current_thread(tid);
	__u64 sock;

	if (!t)
		return NULL;
	sock = fd_socket(fd);
	if (!sock) {
		/* Not counted as socket I/O; timed in case it hands work to another thread (a pipe or
		 * eventfd write) or waits for one (a pipe read). */
		t->sys_kind = INFLIGHT_OTHER;
		call_begin(t);
		return NULL;
	}
	t->sys_kind = kind;
	if (sock != t->last_socket) {
		t->c.socket_switches++;
		t->last_socket = sock;
	}
	t->sys_socket = sock;
	t->sys_asked = asked;
	t->sys_shape = shape;
	t->sys_uptr = uptr;
	t->sys_waits = thread_waits(t);
	call_begin(t);
	return t;
}

/*
 * On-CPU time of a retry's whole cycle: from the thread's previous socket write returning to this one
 * returning, less its time switched out. A retry made without waiting spends that time in its loop,
 * the syscall's entry and exit and the call itself; the time inside the call alone (between the two
 * tracepoints) misses most of it (measured: a third of the spinning reference loop's cost).
 */
static __always_inline __u64 write_cycle_oncpu_ns(const struct thread_stats *t, __u64 now)
{
	__u64 wall = now - t->last_write_ns, off = t->c.offcpu_ns - t->last_write_offcpu;

	return t->last_write_ns && off < wall ? wall - off : 0;
}

static __always_inline void write_exit(struct thread_stats *t, __u32 tid, long ret, __u64 now,
				       __u64 bytes)
{
	__u64 oncpu = call_oncpu_ns(t, now);
	bool partial = ret >= 0 && (__u64)ret < t->sys_asked;
	__u32 what;

	t->c.write_calls++;
	t->c.write_ns += now - t->sys_enter_ns;
	t->c.write_bytes += bytes;
	if (ret == -EAGAIN) {
		t->c.write_eagain++;
		t->c.write_eagain_ns += oncpu;
	} else if (ret < 0) {
		t->c.write_errors++;
	} else if (partial) {
		t->c.write_partial++;
		t->c.write_partial_ns += oncpu;
	}
	t->in_request = 0;
	what = request_on_write(t, tid, now, ret, ret == -EAGAIN || partial, bytes);
	if (what & WRITE_SPIN) {
		t->c.write_spin_retries++;
		t->c.write_spin_ns += write_cycle_oncpu_ns(t, now);
		t->c.write_spin_bytes += bytes;
		if (what & WRITE_AFTER_EAGAIN)
			t->c.write_spin_eagain++;
	} else if (what & WRITE_WAITED) {
		t->c.write_waited++;
	}
	t->last_write_ns = now;
	t->last_write_offcpu = t->c.offcpu_ns;
	if (what & WRITE_RESPONSE) {
		t->c.responses_written++;
		t->c.write_first_ns += oncpu;
		t->c.write_first_bytes += bytes;
	}
}

static __always_inline void read_exit(struct thread_stats *t, __u32 tid, long ret, __u64 now,
				      __u64 bytes)
{
	bool started;

	t->c.read_calls++;
	t->c.read_ns += now - t->sys_enter_ns;
	t->c.read_bytes += bytes;
	if (ret == -EAGAIN) {
		t->c.read_eagain++;
		t->c.read_eagain_ns += call_oncpu_ns(t, now);
	} else if (ret == 0) {
		t->c.read_eof++;
	} else if (ret < 0) {
		t->c.read_errors++;
	} else if (request_on_read(t->sys_socket, tid, now, &started) == REQ_READING) {
		t->in_request = 1;
		if (started)
			t->c.requests_read++;
	}
}

static __always_inline void io_exit(struct thread_stats *t, __u32 tid, long ret, __u64 now)
{
	__u64 bytes = 0;

	if (ret > 0)
		bytes = t->sys_shape == IO_MMSG ? mmsg_bytes((void *)t->sys_uptr, ret) : ret;
	if (t->sys_kind == INFLIGHT_WRITE)
		write_exit(t, tid, ret, now, bytes);
	else
		read_exit(t, tid, ret, now, bytes);
}

/* The last close of a socket ends its request (a response is complete when the server closes). A
 * close of one of several references (a pre-forking parent closing its copy of an accepted socket)
 * does not. */
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

static __always_inline bool poll_nowait(__u32 cls, struct pt_regs *regs)
{
	switch (cls) {
	case SC_POLL_MS2:
		return (int)SC_ARG(regs, 2) == 0;
	case SC_POLL_MS3:
		return (int)SC_ARG(regs, 3) == 0;
	case SC_POLL_TS2:
		return user_time_zero(SC_ARG(regs, 2));
	case SC_POLL_TS3:
		return user_time_zero(SC_ARG(regs, 3));
	default: /* SC_POLL_TV4 */
		return user_time_zero(SC_ARG(regs, 4));
	}
}

static __always_inline int poll_enter(__u32 tid, __u32 cls, struct pt_regs *regs)
{
	struct thread_stats *t = current_thread(tid);

	if (!t)
		return 0;
	t->sys_kind = INFLIGHT_POLL;
	t->in_request = 0; /* it went back to its loop */
	call_begin(t);
	t->sys_flags = poll_nowait(cls, regs) ? SYS_NOWAIT : 0;
	return 0;
}

static __always_inline void poll_exit(struct thread_stats *t, long ret, __u64 now)
{
	__u64 oncpu = call_oncpu_ns(t, now);
	bool nowait = t->sys_flags & SYS_NOWAIT;

	t->c.poll_calls++;
	t->c.poll_ns += now - t->sys_enter_ns;
	t->c.poll_oncpu_ns += oncpu;
	t->c.poll_nowait += nowait;
	if (ret < 0) {
		t->c.poll_errors++;
		return;
	}
	if (ret == 0) {
		t->c.poll_zero++;
		if (nowait) {
			t->c.poll_zero_nowait++;
			t->c.poll_zero_nowait_ns += oncpu;
		} else {
			t->c.poll_zero_wait_ns += oncpu;
		}
	}
	t->c.poll_events += ret;
	t->poll_hist[log2_bucket(ret, POLL_HIST_BUCKETS)]++;
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

static __always_inline int futex_begin(__u32 tid, __u32 kind)
{
	struct thread_stats *t = current_thread(tid);

	if (!t)
		return 0;
	t->sys_kind = kind;
	call_begin(t);
	t->sys_flags = t->in_request ? SYS_IN_REQUEST : 0;
	return 0;
}

static __always_inline int futex_enter(__u32 tid, __u64 op)
{
	__u32 cmd = op & FUTEX_CMD_MASK;

	if (futex_cmd_waits(cmd))
		return futex_begin(tid, INFLIGHT_FUTEX_WAIT);
	if (futex_cmd_wakes(cmd))
		return futex_begin(tid, INFLIGHT_FUTEX_WAKE);
	return 0;
}

static __always_inline void futex_exit(struct thread_stats *t, __u64 now)
{
	__u64 wall = now - t->sys_enter_ns;

	t->c.futex_oncpu_ns += call_oncpu_ns(t, now);
	if (t->sys_kind == INFLIGHT_FUTEX_WAKE) {
		t->c.futex_wakes++;
		return;
	}
	t->c.futex_waits++;
	t->c.futex_wait_ns += wall;
	if (t->sys_flags & SYS_IN_REQUEST) {
		t->c.futex_waits_req++;
		t->c.futex_wait_req_ns += wall;
	}
}

/* ---------------------------------------------------------------------------------------- */
/* The two syscall tracepoints: dispatch on the syscall's class                               */


static __always_inline __u32 syscall_class_of(__u64 nr)
{
	return nr < SYSCALL_TABLE_SIZE ? syscall_class[nr] : SC_IGNORED;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(on_sys_enter, struct pt_regs *regs, long nr)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct thread_stats *t;

	__u32 cls;

	if (!is_target(id >> 32))
		return 0;
	cls = syscall_class_of(nr);
	switch (cls) {
	/* The byte count a vectored write asks for is read from user memory only once the fd is
	 * known to be a socket: writev to pipes and eventfds is common in handoff code. */
	case SC_WRITE:
		io_enter(tid, INFLIGHT_WRITE, SC_ARG(regs, 0), SC_ARG(regs, 2), IO_BYTES, 0);
		return 0;
	case SC_WRITEV:
		if ((t = io_enter(tid, INFLIGHT_WRITE, SC_ARG(regs, 0), 0, IO_BYTES, 0)))
			t->sys_asked = iov_total((void *)SC_ARG(regs, 1), SC_ARG(regs, 2));
		return 0;
	case SC_SENDMSG: {
		struct user_msghdr msg;

		if ((t = io_enter(tid, INFLIGHT_WRITE, SC_ARG(regs, 0), 0, IO_BYTES, 0)) &&
		    !bpf_probe_read_user(&msg, sizeof(msg), (void *)SC_ARG(regs, 1)))
			t->sys_asked = iov_total(msg.msg_iov, msg.msg_iovlen);
		return 0;
	}
	case SC_SENDMMSG:
		io_enter(tid, INFLIGHT_WRITE, SC_ARG(regs, 0), SC_ARG(regs, 2), IO_MMSG, SC_ARG(regs, 1));
		return 0;
	case SC_SENDFILE:
		io_enter(tid, INFLIGHT_WRITE, SC_ARG(regs, 0), SC_ARG(regs, 3), IO_BYTES, 0);
		return 0;
	case SC_READ:
		io_enter(tid, INFLIGHT_READ, SC_ARG(regs, 0), 0, IO_BYTES, 0);
		return 0;
	case SC_RECVMMSG:
		io_enter(tid, INFLIGHT_READ, SC_ARG(regs, 0), SC_ARG(regs, 2), IO_MMSG, SC_ARG(regs, 1));
		return 0;
	case SC_CLOSE:
		return close_enter(SC_ARG(regs, 0));
	case SC_POLL_MS2:
	case SC_POLL_MS3:
	case SC_POLL_TS2:
	case SC_POLL_TS3:
	case SC_POLL_TV4:
		return poll_enter(tid, cls, regs);
	case SC_FUTEX:
		return futex_enter(tid, SC_ARG(regs, 1));
	case SC_FUTEX_WAITV:
		return futex_begin(tid, INFLIGHT_FUTEX_WAIT);
	default:
		return 0;
	}
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit, struct pt_regs *regs, long ret)
{
	__u64 id = bpf_get_current_pid_tgid(), now;
	__u32 tid = (__u32)id;
	struct thread_stats *t;

	if (!is_target(id >> 32) || syscall_class_of(SC_NR(regs)) == SC_IGNORED)
		return 0;
	/* Interrupted, to be restarted: one call for user space, so count it once, when it ends. */
	if (ret <= -ERESTARTSYS && ret >= -ERESTART_RESTARTBLOCK)
		return 0;
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t || t->sys_kind == INFLIGHT_NONE) /* a call that began before we attached */
		return 0;
	now = bpf_ktime_get_ns();
	switch (t->sys_kind) {
	case INFLIGHT_WRITE:
	case INFLIGHT_READ:
		io_exit(t, tid, ret, now);
		break;
	case INFLIGHT_POLL:
		poll_exit(t, ret, now);
		break;
	case INFLIGHT_FUTEX_WAIT:
	case INFLIGHT_FUTEX_WAKE:
		futex_exit(t, now);
		break;
	}
	if (t->sys_flags & SYS_HANDOFF)
		t->c.handoff_oncpu_ns += call_oncpu_ns(t, now);
	t->sys_kind = INFLIGHT_NONE;
	return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Scheduler                                                                                  */

SEC("tp_btf/sched_switch")
int BPF_PROG(on_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	bool prev_ours = is_target(prev->tgid), next_ours = is_target(next->tgid);
	struct thread_stats *t;
	__u64 now;

	if (!prev_ours && !next_ours)
		return 0;
	now = bpf_ktime_get_ns();
	if (prev_ours && (t = task_thread(prev))) {
		if (preempt || prev_state == TASK_RUNNING) {
			t->c.cs_involuntary++;
			t->runnable_since_ns = now;
		} else {
			t->c.cs_voluntary++;
		}
		if (t->switch_in_ns)
			t->c.oncpu_ns += now - t->switch_in_ns;
		t->switch_in_ns = 0;
		t->switch_out_ns = now;
	}
	if (next_ours && (t = task_thread(next))) {
		if (t->switch_out_ns)
			t->c.offcpu_ns += now - t->switch_out_ns;
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

/* What the (task-context) waker was doing: by the syscall in its saved user registers. */
static __always_inline __u32 waker_mechanism(struct task_struct *task)
{
	struct pt_regs *user_regs = (struct pt_regs *)bpf_task_pt_regs(task);
	__u64 nr = SC_NR(user_regs);

	return nr < SYSCALL_TABLE_SIZE ? wake_mechanism[nr] : WAKE_OTHER;
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
	__u32 mechanism;
	__u64 id;

	if (!is_target(p->tgid))
		return 0;
	wakee = task_thread(p);
	if (!wakee)
		return 0;
	wakee->runnable_since_ns = bpf_ktime_get_ns();

	if (in_interrupt(bpf_get_current_task_btf())) {
		__sync_fetch_and_add(&wakee->c.wakeups_irq, 1);
		return 0;
	}
	id = bpf_get_current_pid_tgid();
	if (!is_target(id >> 32)) {
		__sync_fetch_and_add(&wakee->c.wakeups_external, 1);
		return 0;
	}
	__sync_fetch_and_add(&wakee->c.wakeups_received, 1);
	mechanism = waker_mechanism(bpf_get_current_task_btf());
	waker = current_thread((__u32)id);
	/* A handoff (not mm-lock contention, not a thread's exit): the wakee's wait to run is its
	 * latency, the waking call and the call the wakee slept in are its on-CPU cost. */
	if (mechanism != WAKE_MM && mechanism != WAKE_EXIT) {
		wakee->woken_in_process = 1;
		wakee->sys_flags |= SYS_HANDOFF;
		if (waker)
			waker->sys_flags |= SYS_HANDOFF;
	}
	if (waker) {
		waker->c.wakeups_sent++;
		switch (mechanism) {
		case WAKE_FUTEX:
			waker->c.wakeups_sent_futex++;
			break;
		case WAKE_IO:
			waker->c.wakeups_sent_io++;
			break;
		case WAKE_MM:
			waker->c.wakeups_sent_mm++;
			break;
		case WAKE_EXIT:
			waker->c.wakeups_sent_exit++;
			break;
		}
	}
	edge_add((__u32)id, p->pid, mechanism);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	struct thread_stats *t;
	__u32 child_tgid = child->tgid;
	__u8 one = 1;

	if (!is_target(parent->tgid))
		return 0;
	t = current_thread(bpf_get_current_pid_tgid());
	if (t)
		t->c.threads_created++;
	if (child_tgid == (__u32)parent->tgid || !follow_children)
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

	if (!is_target(p->tgid))
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

	if (!is_target(pid))
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
