// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Sockets: from an fd to its struct socket and kind, a socket's request state (a request starts with its
 * first read and is answered by the writes that follow), the write and read families' counts and the
 * copy rate, and close. Included by spinscope.bpf.c after the thread helpers and struct call.
 */
#ifndef SPINSCOPE_SOCKETS_BPF_H
#define SPINSCOPE_SOCKETS_BPF_H

/* ---------------------------------------------------------------------------------------- */
/* From an fd to its socket                                                                   */

/*
 * The file behind fd in task's table (the current task: another's table may change under us), or
 * NULL. The walk uses direct (fault-safe) loads through BTF-typed pointers; the table's slot, a
 * variable index the verifier will not take on a typed pointer, is read as untrusted memory
 * (untrusted_loads) or, on kernels that refuse that, with one helper call.
 */
static __always_inline struct file *fd_file(struct task_struct *task, __u64 fd)
{
	struct fdtable *fdt = task->files->fdt;
	struct file *file = NULL;

	if (!fdt || fd >= fdt->max_fds)
		return NULL;
	if (untrusted_loads)
		file = *(struct file **)bpf_rdonly_cast((void *)((__u64)fdt->fd + fd * sizeof(file)), 0);
	else
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

/* The struct socket behind fd in task's table, or 0 if fd is not a socket. */
static __always_inline __u64 fd_socket(struct task_struct *task, __u64 fd)
{
	return file_socket(fd_file(task, fd));
}


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
	case RB_RECV:
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

#define FIRST_READ_OTHER 0
#define FIRST_READ_H2 1  /* the HTTP/2 preface */
#define FIRST_READ_TLS 2 /* a TLS handshake record holding a ClientHello: 0x16 0x03 ..., byte 5 is 1 */

/* What a serving socket's first read (ret bytes) began with: the HTTP/2 preface, a TLS ClientHello, or
 * other. The 24 bytes are copied to the stack, compared (as three words, one branch) and dropped: no
 * payload is kept. Not inlined: called once per serving socket, and inlined its branches multiplied the
 * paths the verifier walks through on_sys_exit (see channel_first_write). */
static __noinline __u32 first_read_kind(struct pt_regs *regs, long ret)
{
	static const union {
		char bytes[H2_PREFACE_LEN];
		__u64 words[H2_PREFACE_LEN / 8];
	} preface = { .bytes = H2_PREFACE };
	const void *buf;
	__u64 got[H2_PREFACE_LEN / 8];

	if (ret < H2_PREFACE_LEN)
		return FIRST_READ_OTHER;
	buf = read_first_bytes(regs);
	if (!buf || bpf_probe_read_user(got, sizeof(got), buf))
		return FIRST_READ_OTHER;
	if (!((got[0] ^ preface.words[0]) | (got[1] ^ preface.words[1]) | (got[2] ^ preface.words[2])))
		return FIRST_READ_H2;
	if ((got[0] & 0xFFFF) == 0x0316 && ((got[0] >> 40) & 0xFF) == 1)
		return FIRST_READ_TLS;
	return FIRST_READ_OTHER;
}

#include "h2.bpf.h"

#include "nagle.bpf.h"

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
 * answering), REQ_H2 on an HTTP/2 connection (its requests are streams: h2.bpf.h), else REQ_OUTGOING or
 * REQ_CHANNEL. */
static __always_inline __u32 request_on_read(struct thread_stats *t, __u64 sock, __u32 tid, struct call *call,
					     __u32 cls, struct pt_regs *regs, long ret, bool *started)
{
	struct socket_state *s = bpf_map_lookup_elem(&sockets, &sock);
	__u32 kind;

	*started = false;
	if (!s) {
		struct socket_state fresh = {
			.start_ns = call_now(call), .reader_tid = tid, .phase = REQ_READING,
		};
		/* Decided once per socket, when it is first read: a serving socket's first read is looked at
		 * for the HTTP/2 preface (its requests are then streams) and a TLS ClientHello, the only read
		 * that pays for it. */
		fresh.phase = socket_first_phase(sock);
		kind = fresh.phase == REQ_READING && cls == SC_READ ? first_read_kind(regs, ret) : FIRST_READ_OTHER;
		if (kind == FIRST_READ_H2 && h2_walk_on)
			fresh.phase = REQ_H2;
		if (bpf_map_update_elem(&sockets, &sock, &fresh, BPF_ANY)) {
			__sync_fetch_and_add(&globals.drops_sockets, 1);
		} else {
			call->decided = true;
			if (kind == FIRST_READ_TLS)
				t->c.tls_connections++;
			if (kind == FIRST_READ_H2) {
				t->c.h2_connections++;
				if (h2_walk_on)
					h2_begin(&sock);
			}
		}
		*started = fresh.phase == REQ_READING;
		call->phase = fresh.phase;
		return fresh.phase;
	}
	call->phase = s->phase;
	if (s->phase == REQ_READING || s->phase == REQ_OUTGOING || s->phase == REQ_CHANNEL || s->phase == REQ_H2)
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
 * unattributed, as before): what a write to them costs more is this decision (a few loads and a call).
 * It is a BPF-to-BPF call (made only for a socket with no state), not inlined: inlined, its branches
 * multiplied with the caller's, and the verifier walked 105,000 instructions of on_sys_exit where it now
 * walks 40,000 (attach 0.38 s -> 0.15 s, with read_is_h2_preface).
 */
static __noinline struct socket_state *channel_first_write(__u64 sock, struct call *call)
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
	call->state = s;
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
	if (s->phase != REQ_H2) /* an HTTP/2 connection's streams end in its frames (h2.bpf.h) */
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
	if (s->phase == REQ_WRITING && ret > 0 && !(what & WRITE_RESPONSE)) /* a response's later write */
		nagle_on_write(t, s, sock, call);
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
	struct sock *sk = socket_tcp_sk(sock);
	struct tcp_sock *tp;

	if (!sk)
		return;
	tp = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
	t->c.stalls_sampled++;
	t->c.stall_sndbuf_bytes += (__u32)sk->sk_sndbuf;
	t->c.stall_queued_bytes += (__u32)sk->sk_wmem_queued;
	t->c.stall_peer_window_bytes += tp->snd_wnd;
	t->c.stall_srtt_us += tp->srtt_us >> 3; /* srtt_us holds 8 times the smoothed RTT */
}

static __always_inline void write_exit(struct thread_stats *t, __u32 tid, __u64 sock, long ret, __u64 asked,
				       __u64 bytes, struct call *call, __u32 cls, struct pt_regs *regs)
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
	if (call->phase == REQ_H2 && ret > 0)
		h2_walk(t, call->state, sock, regs, cls, ret, call, false);
	if (stack_hz && sock) { /* --stacks: a stalled write opens a window that the next wait closes */
		t->stall_open = ret == -EAGAIN || partial;
		t->stall_waits = thread_waits(t);
	}
	if (what & WRITE_SPIN) {
		__u64 cycle = write_cycle_oncpu_ns(t, call);

		t->c.write_spin_retries++;
		t->c.write_spin_ns += cycle;
		t->c.write_spin_bytes += bytes;
		if (ret == -EAGAIN) { /* a bare retry: its cycle is what each retry costs beyond its copying */
			t->c.write_spin_empty++;
			t->c.write_spin_empty_ns += cycle;
			call->stack_events |= 1 << STACK_SPIN_WRITE;
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
				      struct call *call, __u32 cls, struct pt_regs *regs)
{
	bool started;
	__u32 phase;

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
	} else if ((phase = request_on_read(t, sock, tid, call, cls, regs, ret, &started)) == REQ_READING) {
		t->in_request = 1;
		if (started)
			t->c.requests_read++;
	} else if (phase == REQ_H2) {
		h2_walk(t, NULL, sock, regs, cls, ret, call, true);
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

/* What the socket's kind says about this read or write: on a channel it is counted apart (it stays in
 * read_calls / write_calls). */
static __always_inline void socket_kind_count(struct thread_stats *t, __u32 cls, const struct call *call)
{
	bool read = cls == SC_READ || cls == SC_RECVMMSG;

	if (call->phase == REQ_CHANNEL) {
		if (read)
			t->c.channel_reads++;
		else
			t->c.channel_writes++;
		t->c.channel_sockets += call->decided;
	}
}

/* A read- or write-family call returned: counted if its fd is a socket. (Pipes, eventfds and files are
 * timed for handoffs only, by the caller.) */
static __always_inline void io_exit(struct task_struct *task, struct thread_stats *t, __u32 cls,
				    struct pt_regs *regs, long ret, struct call *call)
{
	__u64 sock = fd_socket(task, SC_ARG(regs, 0)), bytes = 0;
	__u32 tid = task->pid;
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
		read_exit(t, tid, sock, ret, bytes, call, cls, regs);
	else
		write_exit(t, tid, sock, ret, ret >= 0 ? write_asked(cls, regs) : 0, bytes, call, cls, regs);
	socket_kind_count(t, cls, call);
}

/* The last close of a socket ends its request (a response is complete when the server closes). A
 * close of one of several references (a pre-forking parent closing its copy of an accepted socket)
 * does not. At sys_enter: at sys_exit the descriptor is gone. */
static __always_inline int close_enter(struct task_struct *task, __u64 fd)
{
	struct socket_state *s;
	struct file *file = fd_file(task, fd);
	__u64 sock = file_socket(file);

	if (!sock || !file_last_reference(file))
		return 0;
	s = bpf_map_lookup_elem(&sockets, &sock);
	if (!s)
		return 0;
	if (s->phase == REQ_WRITING)
		request_finish(s);
	if (s->phase == REQ_H2)
		h2_close(&sock);
	bpf_map_delete_elem(&sockets, &sock);
	return 0;
}

#endif /* SPINSCOPE_SOCKETS_BPF_H */
