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

/* What the probes take as the target (their .rodata, fixed by the collector before load): the threads of
 * the process targ_tgid, and, by targ_flags: */
#define TARGET_CHILDREN 0x1 /* the processes it forks (--children), in the child_pids map */
#define TARGET_CGROUP 0x2   /* instead, every task under the cgroup targ_cgroup_id (--cgroup) */
#define TARGET_NO_PID 0xFFFFFFFFU /* targ_tgid with TARGET_CGROUP: no process has it (the idle tasks' is 0) */

/* log2 histograms: bucket 0 holds 0, bucket k >= 1 holds [2^(k-1), 2^k - 1]. */
#define POLL_HIST_BUCKETS 16 /* events per poll-family call; the last bucket is open-ended */
#define REQ_HIST_BUCKETS 64  /* per-request histograms and response-size classes */

/*
 * Per-thread counters, in capture order. X(name)
 *
 * Counts are exact. Times ending in _ns are nanoseconds; the ones documented as "on-CPU" are the time
 * the thread spent running inside those calls (wall time in the call minus the time it was switched
 * out), which is what a verdict's "share of CPU" is made of (docs/labels.md).
 *
 * Call times are sampled (settings.time_sample, 1 call in N): the on-CPU time of a call is measured on
 * one call in N, chosen at random at its sys_enter, and counted N times (an unbiased estimate; exact
 * with N = 1); the time a call spent switched out is taken from the scheduler on every call, exactly. So
 * a wall time (write_ns, poll_ns, futex_wait_ns...) is an exact off-CPU part plus an estimated on-CPU
 * part. The scheduler's own times (oncpu_ns, offcpu_ns, runq_ns, wakeup_wait_ns) are always exact.
 */
#define SPINSCOPE_COUNTERS(X)                                                                      \
	X(write_calls)                                                                             \
	X(write_bytes)                                                                             \
	X(write_eagain)                                                                            \
	X(write_partial)                                                                           \
	X(write_errors)                                                                            \
	X(write_ns)            /* wall time inside socket writes */                                \
	X(write_eagain_ns)     /* on-CPU inside writes that returned EAGAIN */                     \
	X(write_partial_ns)    /* on-CPU inside partial writes */                                  \
	X(write_spin_retries)  /* writes after a stalled write on that socket, with no wait between */ \
	X(write_spin_ns)       /* on-CPU of those retries' cycles (see write_cycle_oncpu_ns) */    \
	X(write_spin_eagain)   /* ...of which retried an EAGAIN (not a partial write): the spin */ \
	X(write_spin_bytes)    /* bytes the spin retries moved */                                  \
	X(write_first_ns)      /* on-CPU inside the first write of each response */                \
	X(write_first_bytes)   /* ...and the bytes those moved: the rate of a write not spinning */ \
	X(write_waited)        /* writes after a stalled write on that socket, after a wait */     \
	X(read_calls)                                                                              \
	X(read_bytes)                                                                              \
	X(read_eagain)                                                                             \
	X(read_eof)                                                                                \
	X(read_errors)                                                                             \
	X(read_ns)                                                                                 \
	X(read_eagain_ns)      /* on-CPU inside reads that returned EAGAIN */                      \
	X(requests_read)       /* requests whose first read this thread made */                    \
	X(socket_switches)     /* socket reads/writes on another socket than the thread's previous one */ \
	X(responses_written)   /* requests whose first response write this thread made */          \
	X(poll_calls)                                                                              \
	X(poll_zero)                                                                               \
	X(poll_events)                                                                             \
	X(poll_errors)                                                                             \
	X(poll_ns)             /* wall time inside poll calls, sleeping included */                \
	X(poll_oncpu_ns)       /* on-CPU inside poll calls */                                      \
	X(poll_nowait)         /* poll calls with a zero timeout */                                \
	X(poll_zero_nowait)    /* ...of which returned no event */                                 \
	X(poll_zero_nowait_ns) /* on-CPU inside those */                                           \
	X(poll_zero_wait_ns)   /* on-CPU inside empty polls that could block (timeout not zero) */ \
	X(futex_waits)                                                                             \
	X(futex_wait_ns)       /* wall time inside futex waits */                                  \
	X(futex_waits_req)     /* futex waits made while the thread had a request in flight */    \
	X(futex_wait_req_ns)   /* wall time inside those */                                        \
	X(futex_wakes)                                                                             \
	X(futex_oncpu_ns)      /* on-CPU inside futex calls, waits and wakes */                    \
	X(handoff_oncpu_ns)    /* on-CPU inside calls that made or received a handoff */          \
	X(cs_voluntary)                                                                            \
	X(cs_involuntary)                                                                          \
	X(oncpu_ns)                                                                                \
	X(offcpu_ns)                                                                               \
	X(runq_ns)                                                                                 \
	X(wakeups_sent)        /* wakeups of the target's own threads, by any mechanism */         \
	X(wakeups_sent_futex)  /* ...made inside a futex call */                                   \
	X(wakeups_sent_io)     /* ...inside a write-family call or close (pipe, eventfd, socket) */ \
	X(wakeups_sent_mm)     /* ...inside mmap, munmap, mprotect, madvise, mremap, brk: mm locks */ \
	X(wakeups_sent_exit)   /* ...by exiting (a joiner woken) */                                \
	X(wakeups_received)                                                                        \
	X(wakeup_wait_ns)      /* wake-to-run latency of handoffs received from the target's threads */ \
	X(wakeups_external)                                                                        \
	X(wakeups_irq)                                                                             \
	X(threads_created)                                                                         \
	X(calls_timed)         /* calls stamped for timing (1 in settings.time_sample, at random) */ \
	X(channel_reads)       /* reads that returned data on channels (REQ_CHANNEL): no requests */ \
	X(channel_writes)      /* socket writes on channels (any result): in no request */        \
	X(channel_sockets)     /* channel sockets this thread was the first to read or write */   \
	X(h2_connections)      /* serving sockets whose first read began with the HTTP/2 preface */ \
	X(accept_calls)        /* accept and accept4 calls, on any fd */                           \
	X(accept_eagain)       /* ...of which returned EAGAIN: another thread or process won the connection */ \
	X(poll_futile)         /* poll calls that returned ready fds, then an unproductive cycle (see poll_cycle_end) */ \
	X(poll_futile_cycle_ns) /* on-CPU of those cycles: poll exit to next poll exit, user space included */ \
	X(poll_zero_cycle_ns)  /* on-CPU of the unproductive cycles that began with an empty poll that could block */ \
	X(write_copy_ns)       /* on-CPU inside complete socket writes of >= WRITE_COPY_MIN bytes */ \
	X(write_copy_bytes)    /* ...and the bytes those moved: the copy rate a small header cannot distort */ \
	X(poll_check_cycle_ns) /* on-CPU of the unproductive cycles that began with an empty zero-timeout poll */ \
	X(poll_rewaits)        /* times a poll call was woken and went back to sleep inside the kernel */ \
	X(poll_rewait_ns)      /* on-CPU of those wakeups: switch-in to the next sleep in the same call */ \
	X(stalls_sampled)      /* stalled TCP writes (EAGAIN, partial) whose socket state was read: */ \
	X(stall_sndbuf_bytes)  /* ...the sum of their send buffers (sk_sndbuf), */              \
	X(stall_queued_bytes)  /* ...of the bytes queued in them (sk_wmem_queued), */          \
	X(stall_peer_window_bytes) /* ...of the peer's advertised windows (snd_wnd), */        \
	X(stall_srtt_us)       /* ...and of the smoothed RTTs, microseconds */                     \
	X(write_spin_empty)    /* spin retries that returned EAGAIN: moved nothing */              \
	X(write_spin_empty_ns) /* ...and their cycles' on-CPU (of write_spin_ns) */ \
	X(poll_dispatch)       /* ready fds, then a cycle that only handed sockets over (epoll_ctl DEL, MOD) */ \
	X(poll_dispatch_cycle_ns) /* on-CPU of those cycles: poll exit to next poll exit, user space included */ \
	X(clone_calls)         /* clone and clone3 calls that created a thread or process */     \
	X(clone_ns)            /* ...on-CPU inside them (the creator's side of a creation) */     \
	X(thread_starts)       /* 1 on the row of a thread created while traced, at its first run */ \
	X(thread_start_wait_ns) /* ...its wait from its creation to that first run */             \
	X(exit_oncpu_ns)       /* on-CPU from the start of the thread's exit (sched_process_exit) to its last switch-out */ \
	X(h2_streams)          /* HTTP/2 streams a client HEADERS frame this thread read opened (each a requests_read) */ \
	X(h2_frames)           /* HTTP/2 frame headers walked in this thread's reads and writes */ \
	X(h2_lost)             /* times the frame walk lost its place on a connection (that direction is not followed after) */ \
	X(h2_lost_calls)       /* reads and writes on HTTP/2 connections not walked: the one that lost its place and all after */ \
	X(h2_lost_bytes)       /* ...the bytes of those calls not walked */                       \
	X(h2_streams_unfollowed) /* streams opened whose end was not waited for (a stream 64 ids on took its slot, or the connection closed) */ \
	X(tls_connections)     /* serving sockets whose first read began with a TLS ClientHello: counted by exchange */ \
	X(h2_bad_frames)       /* HTTP/2 frame headers no conforming peer sends (length, type, stream): the walk lost its place there */ \
	X(nagle_held)          /* a response's later socket writes that left bytes held by Nagle's algorithm (nagle.bpf.h) */ \
	X(switch_ins_unseen)   /* switches in no program ran for, found at the thread's next counted syscall's exit */

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
	/* The poll family, by where its timeout is: a zero timeout is a check, not a wait. */
	SC_POLL_MS2, /* poll: int milliseconds, argument 2 */
	SC_POLL_MS3, /* epoll_wait, epoll_pwait: int milliseconds, argument 3 */
	SC_POLL_TS2, /* ppoll: struct timespec *, argument 2 (NULL: no timeout) */
	SC_POLL_TS3, /* epoll_pwait2: struct timespec *, argument 3 */
	SC_POLL_TV4, /* select: struct timeval *, argument 4; pselect6: struct timespec *, argument 4 */
	SC_FUTEX,
	SC_FUTEX_WAITV,
	SC_RESTART, /* restart_syscall: the continuation of an interrupted call already in flight */
	SC_ACCEPT,  /* accept, accept4: (fd, ...) */
	SC_EPOLL_CTL, /* epoll_ctl: (epfd, op, fd, event), never timed */
	SC_CLONE,   /* clone, clone3: always timed (rare), for clone_ns */
};

#define SYSCALL_TABLE_SIZE 1024 /* syscall numbers at or above are ignored */

/* What a thread was doing when it woke another of the target's threads: by the syscall it was in
 * (a second table filled by the collector). Deliberate handoffs (futex, a write to a pipe, eventfd
 * or socket) are told apart from contention on the process's memory map and from thread exit. */
enum wake_mechanism {
	WAKE_OTHER = 0, /* any other syscall, or a fault (whose error code cannot be told from a number) */
	WAKE_FUTEX,
	WAKE_IO,
	WAKE_MM,
	WAKE_EXIT,
	WAKE_MECHANISMS
};

/* Flags of the call in flight (thread_stats.inflight.flags). */
#define CALL_NOWAIT 0x1  /* a poll call with a zero timeout, for the classes whose timeout is in user memory */
#define CALL_HANDOFF 0x2 /* the call woke another of the target's threads, or was woken by one */
#define CALL_WOKE 0x4    /* ...it woke one (the waker's side of CALL_HANDOFF) */

/* How a write/read call reports its byte count. */
enum io_shape {
	IO_BYTES = 0, /* ret is a byte count */
	IO_MMSG,      /* ret is a message count; bytes are the msg_len fields of the mmsghdr array */
};

#define THREAD_EXITED 0x1

/* A thread that has run its last (its final switch-out), in the exited map until the collector drains
 * it: a tid is reused by the kernel, a tid with its start time names one thread. */
struct thread_key {
	__u32 tid;
	__u32 pad;
	__u64 start_ns; /* task->start_time: CLOCK_MONOTONIC at its creation */
};

/*
 * --stacks: user stacks, each a record in the stack_samples ring buffer, unwound and counted by the
 * collector (collector/stacks.c). A record is either a CPU sample (a cpu-clock perf event on a target
 * thread, STACK_CPU) or an event stack, taken at the sys_exit of one of a pattern's own events, 1 per
 * `stride` events of a thread and source (struct stack_event_budget), weighted by the events it stands for.
 */
enum stack_source {
	STACK_CPU = 0,          /* a cpu-clock sample: weight 1 */
	STACK_SPIN_WRITE,       /* a socket write retried without waiting that returned EAGAIN */
	STACK_EMPTY_POLL,       /* a poll call that returned no event */
	STACK_FUTILE_WAKEUP,    /* the poll call that ended a futile wakeup cycle (ready fds that gave nothing) */
	STACK_HANDOFF,          /* a call that woke another of the target's threads (futex, pipe, eventfd...) */
	STACK_NAGLE_WRITE,      /* a response's later socket write that left bytes held by Nagle (nagle.bpf.h) */
	STACK_SOURCES,
};
#define STACK_EVENT_SOURCES (STACK_SOURCES - 1) /* the event sources: a source's index there is source - 1 */

/* What the probes knew of the thread when the stack was taken (stack_sample.tags), a bit each. */
#define STACK_TAG_WRITE_STALL 0x01  /* after a stalled socket write, before the thread's next wait */
#define STACK_TAG_EMPTY_CYCLE 0x02  /* in a wakeup cycle that began with an empty poll, no work found yet */
#define STACK_TAG_READY_CYCLE 0x04  /* in a cycle that began with ready fds, no work found yet */
#define STACK_TAG_HANDOFF 0x08      /* in a call that handed off, or woken by a hand-off and not blocked or polled since */
#define STACK_TAG_REQUEST 0x10      /* read a request, has not written or polled since */
#define STACK_TAG_KERNEL 0x20       /* the sample interrupted the kernel (a syscall): kstack holds its frames */
#define STACK_TAG_NO_THREAD 0x40    /* the thread had no entry (a full threads map): nothing else known */

#define STACK_COPY_CHUNK 1024
#define STACK_COPY_CHUNKS 8       /* at most 8 KiB of user stack, copied 1 KiB at a time up to the first fault */
#define STACK_KERNEL_DEPTH 32
/* The user registers that start the unwind, in DWARF's x86-64 numbering (rax, rdx, rcx, rbx, rsi, rdi,
 * rbp, rsp, r8-r15, then rip as the return address column 16). */
#define STACK_REGS 17

/* A thread's event stacks of one source: 1 stack per `stride` events, the stride doubled when the thread
 * has taken its share of the target's budget (stack_share) within a second, and again after each half as
 * many more (so at most twice its share a second), halved after a second with fewer than a quarter of it;
 * and none while the whole target has taken stack_budget this second (stack_event in stacks.bpf.h). */
struct stack_event_budget {
	__u64 window_ns; /* the current second began then */
	__u32 skipped;   /* events since the thread's latest stack of this source (its tail at the end) */
	__u32 stride;    /* events per stack (0: 1) */
	__u32 taken;     /* stacks in the current second */
	__u32 limit;     /* the stride doubles when taken reaches it (0: the share, at a second's start) */
	__u32 deferred;  /* events due a stack when the target's budget was spent (they went to the next) */
	__u32 pad;
};

/* --stacks with a runtime helper (stacks_helper.py): a thread's tags changed (STACK_TAG_*, all but
 * KERNEL) at time_ns (CLOCK_MONOTONIC, bpf_ktime_get_ns), one record in the tag_changes ring buffer. The
 * helper's samples, taken by another program on its own timer, get the tags their thread had then. */
struct tag_change {
	__u64 time_ns;
	__u32 tid;
	__u32 tags;
};
#define TAG_UNKNOWN 0xffffffffu /* noted_tags after a lost record: the next note writes whatever it is */

struct stack_sample {
	__u32 pid, tid;
	__u64 time_ns;   /* CLOCK_MONOTONIC */
	__u32 source;    /* enum stack_source */
	__u32 tags;      /* STACK_TAG_* */
	__u32 weight;    /* events this stack stands for (1 for a CPU sample) */
	__s32 syscall;   /* the syscall the thread was in, or -1 */
	__u32 kstack_bytes; /* of kstack */
	__u32 ustack_bytes; /* of ustack, copied from regs[7] (the user sp) up */
	__u64 process_start_ns; /* its process's start and program (execs): which address space the */
	__u64 exec_id;          /* addresses are of, as a pid alone cannot say (reused, or exec'd) */
	__u64 regs[STACK_REGS];
	__u64 kstack[STACK_KERNEL_DEPTH];
	__u8 ustack[STACK_COPY_CHUNK * STACK_COPY_CHUNKS];
};

/*
 * The counted syscall a thread is in (private to the BPF side). Calls are counted at sys_exit, from the
 * saved user registers (which still hold the arguments); sys_enter only stamps the 1 call in time_sample
 * that is timed. The scheduler adds to offcpu_ns and waits while the thread is in a counted call; all but
 * restart_nr are cleared when it ends.
 */
struct call_in_flight {
	__u64 enter_ns;   /* sys_enter of the timed call in flight; 0: the call is not timed */
	__u64 offcpu_ns;  /* switched out inside it */
	__u32 enter_nr;   /* the syscall that enter_ns stamped */
	__u32 waits;      /* voluntary switches inside it */
	__u32 flags;      /* CALL_* */
	__u32 restart_nr; /* a counted call interrupted, to be continued by restart_syscall */
};

struct thread_stats {
	struct thread_counters c;
	__u64 poll_hist[POLL_HIST_BUCKETS];
	__u32 pid; /* thread group id */
	__u32 flags;
	__u64 first_seen_ns; /* CLOCK_MONOTONIC */
	__u64 exit_ns;
	__u64 start_ns; /* task->start_time: with the tid, which thread this is (0: seeded, not yet seen) */
	char comm[SPINSCOPE_COMM_LEN];

	/* Private to the BPF side: scheduler bookkeeping... */
	__u64 switch_in_ns;
	__u64 switch_out_ns;
	__u64 runnable_since_ns;
	struct call_in_flight inflight; /* ...and the counted syscall in flight */
	__u64 last_socket;       /* socket of the thread's latest socket read or write */
	__u64 last_write_ns;     /* exit of the thread's latest socket write, if it was timed; else 0 */
	__u64 last_write_offcpu; /* c.offcpu_ns then */
	__u32 in_request; /* read a request, has not written or polled since */
	__u32 woken_in_process; /* the pending wakeup is a handoff from one of the target's threads */
	__u32 out_in_call; /* switched out inside a counted call (its off-CPU time goes to inflight.offcpu_ns) */
	__u32 first_run_pending; /* created while traced, not yet run: its wait is thread_start_wait_ns */
	/* The poll wakeup cycle in flight: from the thread's latest poll return (its last switch in, if it slept)
	 * to its next poll call's first sleep, or that call's exit if it never slept (poll_cycle_end). */
	__u64 cycle_start_ns;     /* that return; 0: none yet */
	__u64 cycle_start_offcpu; /* c.offcpu_ns then */
	__u32 cycle_kind;         /* CYCLE_*: what that poll returned */
	__u32 cycle_productive;   /* the thread found work since (see poll_cycle_end) */
	__u32 cycle_dispatch;     /* ...or deregistered or re-armed a socket in an epoll set since */
	__u64 cycle_end_ns;       /* the first sleep inside the poll call in flight: the cycle ends there */
	__u64 cycle_end_offcpu;   /* c.offcpu_ns then */
	/* --stacks (stacks.bpf.h): what a stack sample is tagged with, and the event stacks' budget. */
	__u32 handoff_window;     /* woken by another of the target's threads, not blocked or polled since */
	__u32 stall_open;         /* its latest socket write stalled, and it has not waited since... */
	__u32 stall_waits;        /* ...(thread_waits() right after that write) */
	struct stack_event_budget stack_events[STACK_EVENT_SOURCES]; /* per event source (stacks.bpf.h) */
	__u32 noted_tags;         /* --stacks with a tag timeline: the tags of its latest tag_change */
	__u32 pad_tags;
	__u64 exit_offcpu_ns; /* c.offcpu_ns at sched_process_exit (exit_oncpu_ns) */
};

/* What the poll call that began a wakeup cycle returned. */
#define CYCLE_NONE 0  /* no poll exit yet, or the poll failed (EINTR...): not counted */
#define CYCLE_ZERO 1  /* no event, from a call that could block: a wakeup for nothing */
#define CYCLE_READY 2 /* one or more ready fds */
#define CYCLE_CHECK 3 /* no event, from a zero-timeout check: a loop that had other work, or a busy poller */

/* A complete socket write of at least this many bytes copies at full rate (write_copy_ns, _bytes). */
#define WRITE_COPY_MIN 4096

/* How many times the thread has waited (a poll call or a voluntary sleep): a write retried after a
 * stall with this unchanged did not wait for the socket to drain. */
static inline __u32 thread_waits(const struct thread_stats *t)
{
	return (__u32)(t->c.poll_calls + t->c.cs_voluntary);
}

/* Request state of one socket, keyed by its struct socket pointer. */
enum req_phase {
	REQ_IDLE = 0, /* no read seen yet */
	REQ_READING,  /* request being read: reads since the last response */
	REQ_WRITING,  /* response being written */
	REQ_OUTGOING, /* the target's own outgoing connection: it serves no requests */
	REQ_CHANNEL,  /* a socket pair or channel between the target's processes: no client, no requests */
	REQ_H2,       /* an HTTP/2 connection (its first read began with the preface): requests are its streams */
};

/*
 * An HTTP/2 connection's frame walk (struct h2_conn, the h2_conns map, keyed like sockets): per direction,
 * where the next 9-byte frame header starts, carried across calls. Only frame headers and the parameters of
 * SETTINGS frames (the connection's own settings, never request data) are read: `unit` holds the bytes of
 * a header or parameter split across calls (or iovecs) until it is whole.
 *
 * Two threads may share a connection (Go's HTTP/2 server reads on one and writes on another): each
 * direction is written by the thread that makes its calls only, and a stream's slot is claimed with an
 * atomic exchange, so a stream opens and ends once whichever threads see it (h2.bpf.h).
 */
#define H2_WINDOW 64       /* streams followed at once: a slot per client stream index (id >> 1) % 64 */
#define H2_WALK_STEPS 512  /* steps of one call's walk (a frame header, a payload skipped, an iovec) */
#define H2_MAX_IOV 1024    /* iovecs of one call walked (IOV_MAX) */
#define H2_FRAME_HEADER 9
#define H2_SETTING 6         /* a SETTINGS parameter: 16-bit id, 32-bit value */
#define H2_MAX_FRAME 16384   /* SETTINGS_MAX_FRAME_SIZE until a peer says more (RFC 9113, 6.5.2) */
#define H2_FRAME_CAP 0xFFFFFF /* ...which it may raise to 2^24-1 */

struct h2_dir {
	__u32 skip;     /* bytes of the current frame's payload still to come before the next header */
	__u32 accepts;  /* the largest frame this direction's sender accepts (its SETTINGS_MAX_FRAME_SIZE):
			 * the bound on the other direction's frame lengths */
	__u8 settings;  /* the payload being skipped is a SETTINGS frame's: read parameter by parameter */
	__u8 have;      /* bytes of the next header or parameter already seen (in unit) */
	__u8 lost;      /* the walk lost its place in this direction: not followed any more */
	__u8 unit[H2_FRAME_HEADER];
};

struct h2_conn {
	struct h2_dir in;  /* client to server: the reads (written by the reading thread only) */
	struct h2_dir out; /* server to client: the writes (written by the writing thread only) */
	__u32 max_stream;  /* the highest client stream id opened (the reading thread's) */
	__u32 opened;      /* streams opened (the reading thread's) */
	__u32 settled;     /* ...of which ended or given up (either thread, atomically) */
	__u32 pad;
	__u64 stream[H2_WINDOW];     /* by index % H2_WINDOW: the id of the open stream there, 0 if none */
	__u64 start_ns[H2_WINDOW];   /* ...the return of the read that opened it */
	__u32 reader_tid[H2_WINDOW]; /* ...and the thread that read it */
};

/*
 * Where a read-family call put its data, by syscall number (a table the collector fills, like
 * syscall_class): read at a connection's first read only, to recognise the HTTP/2 preface.
 */
enum read_buffer {
	RB_NONE = 0, /* not looked at (recvmmsg, and calls not in the table) */
	RB_BUF,      /* read: (fd, buf, len) */
	RB_RECV,     /* recvfrom: (fd, buf, len, flags, ...) */
	RB_IOV,      /* readv: (fd, iov, iovcnt): the first iovec */
	RB_MSG,      /* recvmsg: (fd, msg, flags): the first iovec of msg */
};

struct socket_state {
	__u64 start_ns; /* return of the first read of the request */
	__u64 end_ns;   /* exit of the latest write */
	__u64 write_bytes;
	__u32 write_calls;
	__u32 write_eagain;
	__u32 write_partial;
	__u32 spin_retries;
	__u32 spin_eagain;
	__u32 write_waited;
	__u32 reader_tid;
	__u32 writer_tid;
	__u32 phase;     /* enum req_phase */
	__u32 stall_tid; /* the thread whose latest write here stalled (EAGAIN, partial); 0: none */
	__u32 stall_waits; /* that thread's thread_waits() right after it */
	__u32 stall_eagain; /* that write returned EAGAIN (else it was partial) */
	__u32 nagle_holds;  /* holds of this response by Nagle's algorithm that a segment from the peer ended */
	__u64 nagle_hold_ns; /* ...their time: from the write that left bytes held to that segment */
	__u64 held_ns;       /* the write that left bytes held, while no segment has come since; 0: none */
};

/* The per-request sums, in capture order (requests and each response-size class). X(name) */
#define SPINSCOPE_REQUEST_SUMS(X)                                                                  \
	X(count)                                                                                   \
	X(write_calls)                                                                             \
	X(write_eagain)                                                                            \
	X(write_partial)                                                                           \
	X(spin_retries)                                                                            \
	X(spin_eagain)                                                                             \
	X(write_waited)                                                                            \
	X(write_bytes)                                                                             \
	X(duration_ns)                                                                             \
	X(cross_thread)                                                                            \
	X(nagle_holds)   /* schema 9: holds by Nagle's algorithm ended by the client's next segment */ \
	X(nagle_hold_ns) /* schema 9: their time, after the request's last write (not in duration_ns) */

struct response_class {
#define X(name) __u64 name;
	SPINSCOPE_REQUEST_SUMS(X)
#undef X
};

/* The log2 histograms over finished requests (the capture's `requests.hist`), in capture order: each of
 * the request's value of the same name (duration_ns: first read to last write). X(name) */
#define SPINSCOPE_REQUEST_HISTS(X)                                                                 \
	X(write_calls)                                                                             \
	X(write_eagain)                                                                            \
	X(write_bytes)                                                                             \
	X(duration_ns)                                                                             \
	X(nagle_hold_ns) /* schema 9: 0 for the responses not held */

/* Finished requests, aggregated per CPU (one entry of a per-CPU array). */
struct request_stats {
	struct response_class sum; /* all requests */
	__u64 unattributed_writes;
#define X(name) __u64 hist_##name[REQ_HIST_BUCKETS];
	SPINSCOPE_REQUEST_HISTS(X)
#undef X
	struct response_class by_size[REQ_HIST_BUCKETS]; /* by log2 class of write_bytes */
};

struct wakeup_edge {
	__u32 waker_tid;
	__u32 wakee_tid;
	__u32 mechanism; /* enum wake_mechanism */
};

/* What a full map cost (the capture's `drops`), in capture order: events whose entry the probes could not
 * create, counted per event (a thread without an entry drops each of its events), so the counts of what
 * the entries would have held are lower bounds. X(name): field drops_<name>. */
#define SPINSCOPE_DROPS(X)                                                                         \
	X(threads)      /* events of threads the threads map had no room for */                    \
	X(sockets)      /* socket reads the sockets map had no room for: requests not followed */  \
	X(wakeup_edges) /* wakeups whose waker -> wakee pair had no room (wakeups map full) */     \
	X(pids)         /* forked children not followed (child_pids map full) */                   \
	X(exited)       /* exited threads whose counts were lost (exited map full, tid reused) */  \
	X(execs)        /* processes whose exec was not recorded (execs map full) */              \
	X(listeners)    /* accept calls the listeners (or listener_pids) map had no room for */

/* A traced process that replaced its program (execve), keyed by its pid: from the latest exec on, its
 * counts are the new program's. */
#define EXEC_FILENAME_LEN 128
struct exec_record {
	__u64 count;   /* execs of this process while traced */
	__u64 last_ns; /* the latest one (CLOCK_MONOTONIC) */
	__u64 calls_before; /* the calls spinscope counts as work (socket reads and writes, polls, futex
			     * waits, accepts) its exec'ing thread had made before the latest exec: 0 for a
			     * wrapper (`sh -c 'exec server'`) that execs before any */
	char comm[SPINSCOPE_COMM_LEN];        /* its name after it */
	char filename[EXEC_FILENAME_LEN];     /* the path it executed (truncated) */
};

/* A listening socket the target called accept on (the capture's `listeners`): the struct socket pointer
 * and its inode number (a socket freed and another allocated at its address is another listener). */
struct listener_key {
	__u64 sock;
	__u64 ino;
};

struct listener_stats {
	__u64 accept_calls;
	__u64 accept_ok;
	__u64 accept_eagain;
	__u32 family; /* AF_INET, AF_INET6, AF_UNIX... */
	__u32 port;   /* local port (host order); 0 for families without one */
};

/* A process that called accept on a listener (the listener_pids map's key): the collector counts a
 * listener's processes from these. */
struct listener_pid {
	struct listener_key listener;
	__u32 tgid;
	__u32 pad;
};

/* The drops, one count per SPINSCOPE_DROPS name (the capture's `drops`, and each interval's). */
struct drop_counts {
#define X(name) __u64 name;
	SPINSCOPE_DROPS(X)
#undef X
};

/* Global, rarely-updated counters (the BPF side's .bss). */
struct global_stats {
	__u64 processes_created;
	__u64 stack_samples_lost; /* --stacks: samples and event stacks the ring buffer had no room for */
	__u64 tag_changes_lost;   /* --stacks' tag timeline: changes its ring buffer had no room for */
#define X(name) __u64 drops_##name;
	SPINSCOPE_DROPS(X)
#undef X
};

/*
 * One entry of the capture's `intervals` series (the collector's snapshots every --interval), in
 * capture order. X(name, kind): kind is how the collector writes the field: seconds (a double), count
 * (an integer), counters (an object of SPINSCOPE_COUNTERS, the deltas over the interval), drops (an
 * object of SPINSCOPE_DROPS, the drops during the interval: when a map filled up).
 */
#define SPINSCOPE_INTERVAL_FIELDS(X)                                                               \
	X(t_s, seconds)                   /* end of the interval, from the start of the capture */ \
	X(duration_s, seconds)                                                                     \
	X(requests, count)                /* requests finished in the interval */                  \
	X(request_ns, count)              /* schema 8: their times summed (first read, last write) */ \
	X(cross_thread, count)            /* schema 8: those of them answered by another thread */ \
	X(wakeups_in_process, count)      /* wakeups between the target's own threads */           \
	X(counters, counters)                                                                      \
	X(drops, drops)

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

/*
 * A finished request's value of each name in SPINSCOPE_REQUEST_SUMS and SPINSCOPE_REQUEST_HISTS, from its
 * socket's state: the sums and the histograms are generated from these (a name without one does not
 * compile).
 */
#define REQUEST_count(s)         1
#define REQUEST_write_calls(s)   ((s)->write_calls)
#define REQUEST_write_eagain(s)  ((s)->write_eagain)
#define REQUEST_write_partial(s) ((s)->write_partial)
#define REQUEST_spin_retries(s)  ((s)->spin_retries)
#define REQUEST_spin_eagain(s)   ((s)->spin_eagain)
#define REQUEST_write_waited(s)  ((s)->write_waited)
#define REQUEST_write_bytes(s)   ((s)->write_bytes)
#define REQUEST_duration_ns(s)   ((s)->end_ns - (s)->start_ns)
#define REQUEST_cross_thread(s)  ((s)->reader_tid != (s)->writer_tid)
#define REQUEST_nagle_holds(s)   ((s)->nagle_holds)
#define REQUEST_nagle_hold_ns(s) ((s)->nagle_hold_ns)

static __always_inline void response_class_add(struct response_class *r, const struct socket_state *s)
{
#define X(name) r->name += REQUEST_##name(s);
	SPINSCOPE_REQUEST_SUMS(X)
#undef X
}

/* Count one finished request (a socket's state) into the request statistics. */
static __always_inline void request_stats_add(struct request_stats *r, const struct socket_state *s)
{
	response_class_add(&r->sum, s);
	response_class_add(&r->by_size[log2_bucket(s->write_bytes, REQ_HIST_BUCKETS)], s);
#define X(name) r->hist_##name[log2_bucket(REQUEST_##name(s), REQ_HIST_BUCKETS)]++;
	SPINSCOPE_REQUEST_HISTS(X)
#undef X
}

#endif /* SPINSCOPE_H */
