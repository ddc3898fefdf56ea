// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * HTTP/2 connections (REQ_H2: the first read began with the client preface): requests are streams. The
 * reads and writes of such a connection are walked frame header by frame header (RFC 9113, 4.1: 24-bit
 * length, type, flags, 31-bit stream id), each direction carrying where its next header starts across
 * calls (struct h2_conn). A client HEADERS frame on a stream id above every one seen opens a stream (a
 * request starts: requests_read); the server's frame carrying END_STREAM on an open stream, or an
 * RST_STREAM on it either way, ends it (a request finishes). Only the 9 header bytes are read (to the
 * stack, or to h2_dir.hdr when split across calls); payloads are skipped by their length, never read.
 *
 * The walk is bpf_loop over H2_WALK_STEPS steps (a header, a payload skipped, an iovec opened): the
 * verifier sees one step. sendfile's bytes are skipped when they lie inside the current frame's payload
 * (nginx sends a DATA frame's header with writev, its payload from the file). A call the walk cannot follow
 * to its end (more steps, user memory it cannot read, a sendfile past the payload, the mmsg calls) loses the place in that direction for good: h2_lost, and every call
 * after it h2_lost_calls with its bytes in h2_lost_bytes. Only REQ_H2 sockets get here: HTTP/1 reads and
 * writes pay nothing but the phase test.
 * Included by sockets.bpf.h.
 */
#ifndef SPINSCOPE_H2_BPF_H
#define SPINSCOPE_H2_BPF_H

#define H2_DATA 0
#define H2_HEADERS 1
#define H2_RST_STREAM 3
#define H2_END_STREAM 0x1

/* One call's walk: the bpf_loop context. */
struct h2_walk {
	struct thread_stats *t;
	struct socket_state *s; /* the writes' sums a finished stream takes (NULL on reads) */
	struct h2_conn *c;
	const struct iovec *iov; /* the call's iovecs (NULL: one buffer, seg) */
	__u64 seg;               /* the current buffer's next byte */
	__u64 seg_len;           /* ...and what is left of it */
	__u64 left;              /* bytes of the call not walked yet */
	__u64 now;
	__u32 iovcnt, iov_next;
	__u32 tid;
	bool in;   /* a read (client to server) */
	bool lost; /* the walk could not follow this call to its end */
};

/* A new HTTP/2 connection, its first read beginning with the 24-byte preface: its walk starts after it.
 * (An entry the map has no room for: its calls are h2_lost_calls.) */
__attribute__((noinline)) int h2_begin(const __u64 *sock)
{
	static const struct h2_conn fresh = {};
	struct h2_conn *c;

	if (!sock || bpf_map_update_elem(&h2_conns, sock, &fresh, BPF_ANY))
		return 0;
	c = bpf_map_lookup_elem(&h2_conns, sock);
	if (c)
		c->in.skip = H2_PREFACE_LEN;
	return 0;
}

/* Not inlined: in the walk's callback the compiler lost the histogram bucket's bound (the verifier refused it). */
static __noinline void h2_request_add(const struct socket_state *r)
{
	__u32 zero = 0;
	struct request_stats *stats = bpf_map_lookup_elem(&requests, &zero);

	if (stats)
		request_stats_add(stats, r);
}

/* A frame header of a client stream, for h2_stream_event. */
struct h2_event {
	__u64 now;
	__u32 tid;
	__u32 id;
	__u32 type;
	__u32 flags;
};

/* A request (stream) finished: its sums into the request statistics. On a write (s), it takes the writes
 * the connection made since the previous stream ended (then zeroed: a write that ends several streams
 * counts in the first), so the sums over streams are the connection's writes. */
static __always_inline void h2_stream_end(struct h2_conn *c, struct thread_stats *t, struct socket_state *s,
					  const struct h2_event *e, __u32 index)
{
	struct socket_state r = {};
	__u32 slot = index & (H2_WINDOW - 1);

	r.start_ns = c->start_ns[slot];
	r.end_ns = e->now;
	r.reader_tid = c->reader_tid[slot];
	r.writer_tid = s ? e->tid : r.reader_tid;
	if (s) {
		r.write_calls = s->write_calls;
		r.write_eagain = s->write_eagain;
		r.write_partial = s->write_partial;
		r.spin_retries = s->spin_retries;
		r.spin_eagain = s->spin_eagain;
		r.write_waited = s->write_waited;
		r.write_bytes = s->write_bytes;
		s->write_calls = s->write_eagain = s->write_partial = 0;
		s->spin_retries = s->spin_eagain = s->write_waited = 0;
		s->write_bytes = 0;
		t->c.responses_written++;
	}
	h2_request_add(&r);
}

static __always_inline void h2_stream_open(struct h2_conn *c, struct thread_stats *t, const struct h2_event *e)
{
	__u32 index = e->id >> 1, slot = index & (H2_WINDOW - 1), shift;

	if (!c->open) {
		c->base = index;
	} else if (index - c->base >= H2_WINDOW) {
		shift = index - c->base - (H2_WINDOW - 1);
		if (shift >= H2_WINDOW) {
			t->c.h2_streams_unfollowed += __builtin_popcountll(c->open);
			c->open = 0;
			c->base = index;
		} else {
			t->c.h2_streams_unfollowed += __builtin_popcountll(c->open & ((1ULL << shift) - 1));
			c->open >>= shift;
			c->base += shift;
		}
	}
	c->open |= 1ULL << ((index - c->base) & (H2_WINDOW - 1));
	c->max_stream = e->id;
	c->start_ns[slot] = e->now;
	c->reader_tid[slot] = e->tid;
	t->c.requests_read++;
	t->c.h2_streams++;
	t->in_request = 1;
}

/*
 * A frame on a client stream (odd id): a read's (s NULL) HEADERS above every id seen opens a stream; the
 * server's DATA or HEADERS with END_STREAM, or an RST_STREAM either way, ends an open one. A global
 * function (verified once, not in every step of the walk's loop): its pointers are checked here.
 */
__attribute__((noinline)) int h2_stream_event(struct h2_conn *c, struct thread_stats *t, struct socket_state *s,
					      const struct h2_event *e)
{
	__u32 index, bit;

	if (!c || !t || !e)
		return 0;
	if (!s && e->type == H2_HEADERS && e->id > c->max_stream) {
		h2_stream_open(c, t, e);
		return 0;
	}
	if (e->type != H2_RST_STREAM && (!s || !(e->flags & H2_END_STREAM) ||
					 (e->type != H2_DATA && e->type != H2_HEADERS)))
		return 0;
	index = e->id >> 1;
	bit = index - c->base;
	if (index < c->base || bit >= H2_WINDOW || !(c->open & (1ULL << bit)))
		return 0;
	c->open &= ~(1ULL << bit);
	h2_stream_end(c, t, s, e, index);
	return 0;
}

/* A whole frame header: the payload to skip, and what it opens or ends. */
static __always_inline void h2_frame(struct h2_walk *w, struct h2_dir *d, const __u8 *h)
{
	struct h2_event e = { .now = w->now, .tid = w->tid, .type = h[3], .flags = h[4] };

	e.id = ((__u32)(h[5] & 0x7F) << 24) | ((__u32)h[6] << 16) | ((__u32)h[7] << 8) | h[8];
	d->skip = ((__u32)h[0] << 16) | ((__u32)h[1] << 8) | h[2];
	w->t->c.h2_frames++;
	if (e.id & 1) /* not the connection's frames (stream 0), nor streams the server opened (push) */
		h2_stream_event(w->c, w->t, w->in ? NULL : w->s, &e);
}

static __always_inline void h2_advance(struct h2_walk *w, __u64 n)
{
	w->seg += n;
	w->seg_len -= n;
	w->left -= n;
}

/* One step of the walk: open the next iovec, skip a payload, or read a frame header (whole in one
 * probe read where it can be, else byte by byte into hdr). 1 ends the walk. */
static long h2_step(__u32 i, struct h2_walk *w)
{
	struct h2_conn *c = w->c;
	struct h2_dir *d = w->in ? &c->in : &c->out;
	__u8 h[H2_FRAME_HEADER];
	__u64 n;

	if (!w->left)
		return 1;
	if (!w->seg_len) {
		struct iovec v;

		if (!w->iov || w->iov_next >= w->iovcnt || w->iov_next >= H2_MAX_IOV ||
		    bpf_probe_read_user(&v, sizeof(v), &w->iov[w->iov_next])) {
			w->lost = true;
			return 1;
		}
		w->iov_next++;
		w->seg = (__u64)v.iov_base;
		w->seg_len = v.iov_len < w->left ? v.iov_len : w->left;
		return 0;
	}
	if (d->skip) {
		n = d->skip < w->seg_len ? d->skip : w->seg_len;
		d->skip -= n;
		h2_advance(w, n);
		return 0;
	}
	if (!d->have && w->seg_len >= H2_FRAME_HEADER) {
		if (bpf_probe_read_user(h, sizeof(h), (void *)w->seg)) {
			w->lost = true;
			return 1;
		}
		h2_advance(w, H2_FRAME_HEADER);
		h2_frame(w, d, h);
		return 0;
	}
	/* A header split across calls or iovecs: a byte at a time. */
	n = d->have;
	if (n >= H2_FRAME_HEADER || bpf_probe_read_user(&d->hdr[n], 1, (void *)w->seg)) {
		w->lost = true;
		return 1;
	}
	h2_advance(w, 1);
	if (++d->have == H2_FRAME_HEADER) {
		d->have = 0;
		__builtin_memcpy(h, d->hdr, H2_FRAME_HEADER);
		h2_frame(w, d, h);
	}
	return 0;
}

#define H2_WALK_IN 0x100 /* with an enum read_buffer: how a walked call's bytes are laid out */
#define H2_WALK_FILE 0xFF /* ...or sendfile's: in a file */

/*
 * Walk a read or write of an HTTP/2 connection that moved `ret` bytes (> 0): how is its layout (enum
 * read_buffer: buf is the buffer, the iovec array with cnt entries, or the msghdr), | H2_WALK_IN for a
 * read. A global function, verified once on its own (static, it was verified again on every path of
 * on_sys_exit that reaches it: over the verifier's limit); so it looks up the thread, the socket and the
 * walk itself. Called on REQ_H2 sockets only.
 */
__attribute__((noinline)) int h2_walk_call(const __u64 *sock, __u64 buf, __u64 cnt, __u32 how, long ret)
{
	struct h2_walk w = { .now = bpf_ktime_get_ns(), .tid = (__u32)bpf_get_current_pid_tgid(),
			     .in = how & H2_WALK_IN, .left = ret };
	struct user_msghdr msg;
	struct h2_dir *d;

	if (!sock || ret <= 0)
		return 0;
	w.t = bpf_map_lookup_elem(&threads, &w.tid);
	if (!w.t)
		return 0;
	if (!w.in) {
		w.s = bpf_map_lookup_elem(&sockets, sock);
		if (!w.s)
			return 0;
	}
	w.c = bpf_map_lookup_elem(&h2_conns, sock);
	if (!w.c) { /* the h2_conns map had no room when the connection began: never followed */
		w.t->c.h2_lost_calls++;
		w.t->c.h2_lost_bytes += w.left;
		return 0;
	}
	d = w.in ? &w.c->in : &w.c->out;
	if (d->lost)
		goto lost;
	switch (how & 0xFF) {
	case RB_BUF:
		w.seg = buf;
		w.seg_len = ret;
		break;
	case RB_IOV:
		w.iov = (const struct iovec *)buf;
		w.iovcnt = cnt;
		break;
	case RB_MSG:
		if (bpf_probe_read_user(&msg, sizeof(msg), (void *)buf))
			goto lose;
		w.iov = msg.msg_iov;
		w.iovcnt = msg.msg_iovlen;
		break;
	case H2_WALK_FILE: /* sendfile: bytes from a file, not in memory: a payload's, skipped, or lost */
		if (d->have || d->skip < (__u64)ret)
			goto lose;
		d->skip -= ret;
		return 0;
	default: /* the mmsg calls: not walked */
		goto lose;
	}
	bpf_loop(H2_WALK_STEPS, h2_step, &w, 0);
	if (!w.lost && !w.left)
		return 0;
lose:
	w.t->c.h2_lost++;
	d->lost = 1;
lost:
	w.t->c.h2_lost_calls++;
	w.t->c.h2_lost_bytes += w.left;
	return 0;
}

/* The layout of a read's or write's bytes for h2_walk_call, from its syscall. */
static __always_inline void h2_walk(__u64 sock, struct pt_regs *regs, __u32 cls, long ret, bool in)
{
	__u64 nr = SC_NR(regs);
	__u32 how = RB_NONE;

	if (in)
		how = (nr < SYSCALL_TABLE_SIZE ? read_buffer[nr] : RB_NONE) | H2_WALK_IN;
	else if (cls == SC_WRITE)
		how = RB_BUF;
	else if (cls == SC_WRITEV)
		how = RB_IOV;
	else if (cls == SC_SENDMSG)
		how = RB_MSG;
	else if (cls == SC_SENDFILE)
		how = H2_WALK_FILE;
	h2_walk_call(&sock, SC_ARG(regs, 1), SC_ARG(regs, 2), how, ret);
}

/* The connection closes: streams still open are counted as not followed to their end. */
__attribute__((noinline)) int h2_close(const __u64 *sock)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct thread_stats *t;
	struct h2_conn *c;

	if (!sock)
		return 0;
	c = bpf_map_lookup_elem(&h2_conns, sock);
	if (!c)
		return 0;
	if (c->open) {
		t = bpf_map_lookup_elem(&threads, &tid);
		if (t)
			t->c.h2_streams_unfollowed += __builtin_popcountll(c->open);
	}
	bpf_map_delete_elem(&h2_conns, sock);
	return 0;
}

#endif /* SPINSCOPE_H2_BPF_H */
