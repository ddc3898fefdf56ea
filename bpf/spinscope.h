/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Layouts shared by the BPF programs (spinscope.bpf.c) and the collector (collector/).
 *
 * Everything the kernel side aggregates lives in the structs below; the collector reads them from
 * the maps and writes the capture (docs/capture-format.md). The counter list is an X-macro so the
 * struct, the JSON names and the summing code cannot drift apart.
 */
#ifndef SPINSCOPE_H
#define SPINSCOPE_H

#define SPINSCOPE_COMM_LEN 16

/* log2 histograms: bucket 0 holds 0, bucket k >= 1 holds [2^(k-1), 2^k - 1]. */
#define POLL_HIST_BUCKETS 16 /* events per poll-family call; the last bucket is open-ended */
#define REQ_HIST_BUCKETS 64  /* per-request histograms and response-size classes */

/* Per-thread counters, in capture order. X(name) */
#define SPINSCOPE_COUNTERS(X)                                                                      \
	X(write_calls)                                                                             \
	X(write_bytes)                                                                             \
	X(write_eagain)                                                                            \
	X(write_partial)                                                                           \
	X(write_errors)                                                                            \
	X(write_ns)                                                                                \
	X(read_calls)                                                                              \
	X(read_bytes)                                                                              \
	X(read_eagain)                                                                             \
	X(read_eof)                                                                                \
	X(read_errors)                                                                             \
	X(read_ns)                                                                                 \
	X(poll_calls)                                                                              \
	X(poll_zero)                                                                               \
	X(poll_events)                                                                             \
	X(poll_errors)                                                                             \
	X(poll_ns)                                                                                 \
	X(futex_waits)                                                                             \
	X(futex_wait_ns)                                                                           \
	X(futex_wakes)                                                                             \
	X(cs_voluntary)                                                                            \
	X(cs_involuntary)                                                                          \
	X(oncpu_ns)                                                                                \
	X(offcpu_ns)                                                                               \
	X(runq_ns)                                                                                 \
	X(wakeups_sent)                                                                            \
	X(wakeups_received)                                                                        \
	X(wakeups_external)                                                                        \
	X(wakeups_irq)                                                                             \
	X(threads_created)

struct thread_counters {
#define X(name) __u64 name;
	SPINSCOPE_COUNTERS(X)
#undef X
};

/*
 * What spinscope does with each syscall number: the collector fills a table indexed by this
 * architecture's syscall numbers (<sys/syscall.h>), so the BPF side needs no per-arch numbers.
 */
enum syscall_class {
	SC_IGNORED = 0,
	SC_WRITE,    /* write, sendto: (fd, buf, len, ...) */
	SC_WRITEV,   /* writev: (fd, iov, iovcnt) */
	SC_SENDMSG,  /* sendmsg: (fd, msg, flags) */
	SC_SENDMMSG, /* sendmmsg: (fd, msgvec, vlen, flags) */
	SC_SENDFILE, /* sendfile: (out_fd, in_fd, offset, count) */
	SC_READ,     /* read, readv, recvfrom, recvmsg: (fd, ...) */
	SC_RECVMMSG, /* recvmmsg: (fd, msgvec, vlen, flags, timeout) */
	SC_CLOSE,
	SC_POLL,     /* select, pselect6, poll, ppoll, epoll_wait, epoll_pwait, epoll_pwait2 */
	SC_FUTEX,
	SC_FUTEX_WAITV,
	SC_RESTART, /* restart_syscall: the continuation of an interrupted call already in flight */
};

#define SYSCALL_TABLE_SIZE 1024 /* syscall numbers at or above are ignored */

/* What the thread is doing between a sys_enter and its sys_exit. */
enum inflight_kind {
	INFLIGHT_NONE = 0,
	INFLIGHT_WRITE,
	INFLIGHT_READ,
	INFLIGHT_POLL,
	INFLIGHT_FUTEX_WAIT,
};

/* How a write/read call reports its byte count. */
enum io_shape {
	IO_BYTES = 0, /* ret is a byte count */
	IO_MMSG,      /* ret is a message count; bytes are the msg_len fields of the mmsghdr array */
};

#define THREAD_EXITED 0x1

struct thread_stats {
	struct thread_counters c;
	__u64 poll_hist[POLL_HIST_BUCKETS];
	__u32 pid; /* thread group id */
	__u32 flags;
	__u64 first_seen_ns; /* CLOCK_MONOTONIC */
	__u64 exit_ns;
	char comm[SPINSCOPE_COMM_LEN];

	/* Private to the BPF side: scheduler bookkeeping... */
	__u64 switch_in_ns;
	__u64 switch_out_ns;
	__u64 runnable_since_ns;
	/* ...and the syscall in flight. */
	__u64 sys_enter_ns;
	__u64 sys_socket; /* struct socket * of the fd, for the read/write families */
	__u64 sys_asked;  /* bytes (or messages for IO_MMSG) the call asked to write */
	__u64 sys_uptr;   /* user pointer to the mmsghdr array for IO_MMSG */
	__u32 sys_kind;   /* enum inflight_kind */
	__u32 sys_shape;  /* enum io_shape */
};

/* Request state of one socket, keyed by its struct socket pointer. */
enum req_phase {
	REQ_IDLE = 0, /* no read seen yet */
	REQ_READING,  /* request being read: reads since the last response */
	REQ_WRITING,  /* response being written */
	REQ_OUTGOING, /* the target's own outgoing connection: it serves no requests */
};

struct socket_state {
	__u64 start_ns; /* enter of the first read of the request */
	__u64 end_ns;   /* exit of the latest write */
	__u64 write_bytes;
	__u32 write_calls;
	__u32 write_eagain;
	__u32 write_partial;
	__u32 reader_tid;
	__u32 writer_tid;
	__u32 phase; /* enum req_phase */
};

struct response_class {
	__u64 count;
	__u64 write_calls;
	__u64 write_eagain;
	__u64 write_partial;
	__u64 write_bytes;
};

/* Finished requests, aggregated per CPU (one entry of a per-CPU array). */
struct request_stats {
	__u64 count;
	__u64 write_calls;
	__u64 write_eagain;
	__u64 write_partial;
	__u64 write_bytes;
	__u64 cross_thread;
	__u64 unattributed_writes;
	__u64 hist_write_calls[REQ_HIST_BUCKETS];
	__u64 hist_write_eagain[REQ_HIST_BUCKETS];
	__u64 hist_write_bytes[REQ_HIST_BUCKETS];
	__u64 hist_duration_ns[REQ_HIST_BUCKETS];
	struct response_class by_size[REQ_HIST_BUCKETS];
};

struct wakeup_edge {
	__u32 waker_tid;
	__u32 wakee_tid;
};

/* Global, rarely-updated counters (the BPF side's .bss). */
struct global_stats {
	__u64 processes_created;
	__u64 drops_threads;
	__u64 drops_sockets;
	__u64 drops_wakeup_edges;
	__u64 drops_pids;
};

/*
 * Bookkeeping shared by the BPF side (requests that end while traced) and the collector (requests
 * still open when the capture ends): plain C that both compilers take.
 */
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/* Bucket of v in a log2 histogram: 0 for 0, floor(log2(v)) + 1 otherwise, capped at max - 1.
 * (Shifts rather than a count-leading-zeros builtin, which the BPF target lacks.) */
static __always_inline __u32 log2_bucket(__u64 v, __u32 max)
{
	__u32 r, shift;

	if (!v)
		return 0;
	r = (v > 0xFFFFFFFFULL) << 5;
	v >>= r;
	shift = (v > 0xFFFF) << 4;
	v >>= shift;
	r |= shift;
	shift = (v > 0xFF) << 3;
	v >>= shift;
	r |= shift;
	shift = (v > 0xF) << 2;
	v >>= shift;
	r |= shift;
	shift = (v > 0x3) << 1;
	v >>= shift;
	r |= shift;
	r |= (__u32)(v >> 1);
	r += 1;
	return r < max ? r : max - 1;
}

/* Count one finished request (a socket's state) into the request statistics. */
static __always_inline void request_stats_add(struct request_stats *r, const struct socket_state *s)
{
	__u32 b = log2_bucket(s->write_bytes, REQ_HIST_BUCKETS);

	r->count++;
	r->write_calls += s->write_calls;
	r->write_eagain += s->write_eagain;
	r->write_partial += s->write_partial;
	r->write_bytes += s->write_bytes;
	if (s->reader_tid != s->writer_tid)
		r->cross_thread++;
	r->hist_write_calls[log2_bucket(s->write_calls, REQ_HIST_BUCKETS)]++;
	r->hist_write_eagain[log2_bucket(s->write_eagain, REQ_HIST_BUCKETS)]++;
	r->hist_duration_ns[log2_bucket(s->end_ns - s->start_ns, REQ_HIST_BUCKETS)]++;
	r->hist_write_bytes[b]++;
	r->by_size[b].count++;
	r->by_size[b].write_calls += s->write_calls;
	r->by_size[b].write_eagain += s->write_eagain;
	r->by_size[b].write_partial += s->write_partial;
	r->by_size[b].write_bytes += s->write_bytes;
}

#endif /* SPINSCOPE_H */
