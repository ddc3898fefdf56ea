// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * HTTP/2 connections (REQ_H2: the first read began with the client preface): requests are streams. The
 * reads and writes of such a connection are walked frame header by frame header (RFC 9113, 4.1: 24-bit
 * length, type, flags, 31-bit stream id), each direction carrying where its next header starts across
 * calls (struct h2_conn). A client HEADERS frame on a stream id above every one seen opens a stream (a
 * request starts: requests_read); the server's frame carrying END_STREAM on an open stream, or an
 * RST_STREAM on it either way, ends it (a request finishes). Only the 9 header bytes are read (to the
 * stack, or to h2_dir.unit when split across calls), and a SETTINGS frame's parameters (for the largest
 * frame each side accepts); other payloads are skipped by their length, never read.
 *
 * Two threads may read and write one connection at once (Go's HTTP/2 server does): a direction's state is
 * written only by the thread making that direction's calls, and a stream's slot is taken with an atomic
 * exchange when a stream opens and released with a compare-and-exchange when it ends, so each stream is
 * counted once, ended by whichever thread saw its end first.
 *
 * Every header is checked as a receiver would (h2_header_ok): a length above what the other side accepts, a
 * type no registry names, a stream id or length its type forbids is no frame a conforming peer sends, so
 * the walk lost its place before it (or the peer is broken): h2_bad_frames, and the walk stops in that
 * direction. It does not resync: finding the next header would mean reading payload bytes and guessing (a
 * payload can hold bytes shaped as a header), and what it counted after a guess could be wrong unsaid.
 *
 * The walk is bpf_loop over H2_WALK_STEPS steps (a header, a parameter, a payload skipped, an iovec
 * opened): the verifier sees one step. Bytes that pass but are not in memory (sendfile's, from a file; a
 * read with MSG_TRUNC, which discards them) are skipped when they lie inside the current frame's payload
 * (nginx sends a DATA frame's header with writev, its payload from the file). A read with MSG_PEEK is not
 * walked: its bytes stay in the socket for the read that takes them. A call the walk cannot follow to its
 * end (more steps, user memory it cannot read, unseen bytes past the payload, the mmsg calls, a bad
 * header) loses the place in that direction for good: h2_lost, and every call after it h2_lost_calls with
 * its bytes in h2_lost_bytes. Only REQ_H2 sockets get here: HTTP/1 reads and writes pay nothing but the
 * phase test. Without bpf_loop (h2_walk_on off: the collector probed the kernel) no connection is REQ_H2
 * and none of this is verified.
 * Included by sockets.bpf.h.
 */
#ifndef SPINSCOPE_H2_BPF_H
#define SPINSCOPE_H2_BPF_H

#define H2_DATA 0
#define H2_HEADERS 1
#define H2_PRIORITY 2
#define H2_RST_STREAM 3
#define H2_SETTINGS 4
#define H2_PING 6
#define H2_GOAWAY 7
#define H2_WINDOW_UPDATE 8
#define H2_END_STREAM 0x1
#define H2_ACK 0x1
#define H2_SETTINGS_MAX_FRAME_SIZE 0x5

/* Frame types by bit: those registered (IANA's HTTP/2 Frame Type registry: RFC 9113's 0x0-0x9, ALTSVC 0xa,
 * ORIGIN 0xc, PRIORITY_UPDATE 0x10), those only on a stream (id not 0) and those only on the connection. */
#define H2_TYPES_KNOWN 0x117FFULL
#define H2_TYPES_ON_STREAM 0x22FULL /* DATA HEADERS PRIORITY RST_STREAM PUSH_PROMISE CONTINUATION */
#define H2_TYPES_ON_CONN 0x100D0ULL /* SETTINGS PING GOAWAY PRIORITY_UPDATE */

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
	bool bad;  /* ...because a header failed h2_header_ok */
};

/* A walked call, as its caller saw it (one argument: a global function takes five at most). */
struct h2_call {
	__u64 sock; /* the socket: the h2_conns key */
	__u64 buf;  /* where its bytes are (how): the buffer, the iovec array or the msghdr */
	__u64 cnt;  /* ...the iovecs' count */
	__u64 now;  /* the call's return */
	long ret;   /* bytes moved (> 0) */
	__u32 how;  /* enum read_buffer | H2_WALK_IN, or H2_WALK_UNSEEN */
	__u32 tid;
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
	if (c) {
		c->in.skip = H2_PREFACE_LEN;
		c->in.accepts = c->out.accepts = H2_MAX_FRAME;
	}
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

/* A request (stream) finished, opened at start_ns by reader: its sums into the request statistics. On a
 * write (s), it takes the writes the connection made since the previous stream ended (then zeroed: a
 * write that ends several streams counts in the first), so the sums over streams are the connection's
 * writes. */
static __always_inline void h2_stream_end(struct thread_stats *t, struct socket_state *s, const struct h2_event *e,
					  __u64 start_ns, __u32 reader)
{
	struct socket_state r = {};

	r.start_ns = start_ns;
	r.end_ns = e->now;
	r.reader_tid = reader;
	r.writer_tid = s ? e->tid : reader;
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

/* The reading thread opens a stream in its slot: a stream 64 ids older still there is given up (the
 * exchange: if the writing thread ends it at the same moment, exactly one of the two has it). The slot
 * holds the new id only once its start is written. */
static __always_inline void h2_stream_open(struct h2_conn *c, struct thread_stats *t, const struct h2_event *e,
					   __u32 slot)
{
	if (__sync_lock_test_and_set(&c->stream[slot], 0)) {
		t->c.h2_streams_unfollowed++;
		__sync_fetch_and_add(&c->settled, 1);
	}
	c->start_ns[slot] = e->now;
	c->reader_tid[slot] = e->tid;
	*(volatile __u64 *)&c->stream[slot] = e->id;
	c->opened++;
	c->max_stream = e->id;
	t->c.requests_read++;
	t->c.h2_streams++;
	t->in_request = 1;
}

/*
 * A frame on a client stream (odd id): a read's (s NULL) HEADERS above every id seen opens a stream; the
 * server's DATA or HEADERS with END_STREAM, or an RST_STREAM either way, ends an open one. Ending takes
 * the slot back with a compare-and-exchange: of two threads ending one stream (the server's END_STREAM
 * and the client's RST_STREAM at once) one counts it; its start, read before, is this stream's (a newer
 * stream's start is written only after the slot was taken from this one, which would fail the exchange).
 * A global function (verified once, not in every step of the walk's loop): its pointers are checked here.
 */
__attribute__((noinline)) int h2_stream_event(struct h2_conn *c, struct thread_stats *t, struct socket_state *s,
					      const struct h2_event *e)
{
	__u32 slot, reader;
	__u64 start;

	if (!c || !t || !e)
		return 0;
	slot = (e->id >> 1) & (H2_WINDOW - 1);
	if (!s && e->type == H2_HEADERS && e->id > c->max_stream) {
		h2_stream_open(c, t, e, slot);
		return 0;
	}
	if (e->type != H2_RST_STREAM && (!s || !(e->flags & H2_END_STREAM) ||
					 (e->type != H2_DATA && e->type != H2_HEADERS)))
		return 0;
	if (c->stream[slot] != e->id)
		return 0;
	start = c->start_ns[slot];
	reader = c->reader_tid[slot];
	if (__sync_val_compare_and_swap(&c->stream[slot], e->id, 0) != e->id)
		return 0;
	__sync_fetch_and_add(&c->settled, 1);
	h2_stream_end(t, s, e, start, reader);
	return 0;
}

/* Could a conforming peer send this header to a receiver that accepts frames up to max bytes? Not if the
 * receiver must refuse it as a connection error (RFC 9113, 4.2 and 6: FRAME_SIZE_ERROR, PROTOCOL_ERROR),
 * nor if no registry names its type. */
static __always_inline bool h2_header_ok(__u32 len, __u32 type, __u32 flags, __u32 id, __u32 max)
{
	if (len > max || type > 16 || !(H2_TYPES_KNOWN >> type & 1))
		return false;
	if (id ? H2_TYPES_ON_CONN >> type & 1 : H2_TYPES_ON_STREAM >> type & 1)
		return false;
	switch (type) {
	case H2_PRIORITY:
		return len == 5;
	case H2_RST_STREAM:
	case H2_WINDOW_UPDATE:
		return len == 4;
	case H2_SETTINGS:
		return flags & H2_ACK ? len == 0 : len % H2_SETTING == 0;
	case H2_PING:
		return len == 8;
	case H2_GOAWAY:
		return len >= 8;
	}
	return true;
}

/* A whole frame header: checked, the payload to skip (a SETTINGS frame's read parameter by parameter), and
 * what it opens or ends. False: no conforming peer sends it. */
static __always_inline bool h2_frame(struct h2_walk *w, struct h2_dir *d, const __u8 *h)
{
	struct h2_event e = { .now = w->now, .tid = w->tid, .type = h[3], .flags = h[4] };
	__u32 len = ((__u32)h[0] << 16) | ((__u32)h[1] << 8) | h[2];
	struct h2_dir *peer = w->in ? &w->c->out : &w->c->in;

	e.id = ((__u32)(h[5] & 0x7F) << 24) | ((__u32)h[6] << 16) | ((__u32)h[7] << 8) | h[8];
	if (!h2_header_ok(len, e.type, e.flags, e.id, peer->accepts))
		return false;
	d->skip = len;
	d->settings = e.type == H2_SETTINGS && len;
	w->t->c.h2_frames++;
	if (e.id & 1) /* not the connection's frames (stream 0), nor streams the server opened (push) */
		h2_stream_event(w->c, w->t, w->in ? NULL : w->s, &e);
	return true;
}

/* A whole SETTINGS parameter: SETTINGS_MAX_FRAME_SIZE is the largest frame this direction's sender
 * accepts (a value outside 2^14..2^24-1 is a peer's error, and ignored). */
static __always_inline void h2_setting(struct h2_dir *d, const __u8 *p)
{
	__u32 value = ((__u32)p[2] << 24) | ((__u32)p[3] << 16) | ((__u32)p[4] << 8) | p[5];

	if (((p[0] << 8) | p[1]) == H2_SETTINGS_MAX_FRAME_SIZE && value >= H2_MAX_FRAME && value <= H2_FRAME_CAP)
		d->accepts = value;
	d->skip = d->skip > H2_SETTING ? d->skip - H2_SETTING : 0;
	d->settings = d->skip != 0;
}

static __always_inline void h2_advance(struct h2_walk *w, __u64 n)
{
	w->seg += n;
	w->seg_len -= n;
	w->left -= n;
}

/* A header or parameter is whole (in u): 1 ends the walk (a bad header), else 0. */
static __always_inline long h2_unit(struct h2_walk *w, struct h2_dir *d, const __u8 *u)
{
	if (d->settings) {
		h2_setting(d, u);
		return 0;
	}
	if (h2_frame(w, d, u))
		return 0;
	w->lost = w->bad = true;
	return 1;
}

/* One step of the walk: open the next iovec, skip a payload, or read a frame header or SETTINGS parameter
 * (whole in one probe read where it can be, else byte by byte into unit). 1 ends the walk. */
static long h2_step(__u32 i, struct h2_walk *w)
{
	struct h2_conn *c = w->c;
	struct h2_dir *d = w->in ? &c->in : &c->out;
	__u8 u[H2_FRAME_HEADER];
	__u32 need;
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
	if (d->skip && !d->settings) {
		n = d->skip < w->seg_len ? d->skip : w->seg_len;
		d->skip -= n;
		h2_advance(w, n);
		return 0;
	}
	need = d->settings ? H2_SETTING : H2_FRAME_HEADER;
	if (!d->have && w->seg_len >= need) {
		if (bpf_probe_read_user(u, need, (void *)w->seg)) {
			w->lost = true;
			return 1;
		}
		h2_advance(w, need);
		return h2_unit(w, d, u);
	}
	/* A header or parameter split across calls or iovecs: a byte at a time. */
	n = d->have;
	if (n >= H2_FRAME_HEADER || n >= need || bpf_probe_read_user(&d->unit[n], 1, (void *)w->seg)) {
		w->lost = true;
		return 1;
	}
	h2_advance(w, 1);
	if (++d->have < need)
		return 0;
	d->have = 0;
	__builtin_memcpy(u, d->unit, H2_FRAME_HEADER);
	return h2_unit(w, d, u);
}

#define H2_WALK_IN 0x100    /* with an enum read_buffer: how a walked call's bytes are laid out */
#define H2_WALK_UNSEEN 0xFF /* ...or not in memory: sendfile's (from a file), a read's with MSG_TRUNC */

/*
 * Walk a read or write of an HTTP/2 connection of thread t that moved a->ret bytes (> 0), s the socket's
 * state on a write (NULL on a read). A global function, verified once on its own (static, it was verified
 * again on every path of on_sys_exit that reaches it: over the verifier's limit). Called on REQ_H2 sockets
 * only, so never without h2_walk_on; the test below prunes bpf_loop from a kernel that lacks it.
 */
__attribute__((noinline)) int h2_walk_call(struct thread_stats *t, struct socket_state *s, const struct h2_call *a)
{
	struct h2_walk w = { .t = t };
	struct user_msghdr msg;
	struct h2_dir *d;

	if (!h2_walk_on || !t || !a || a->ret <= 0)
		return 0;
	w.s = s;
	w.now = a->now;
	w.tid = a->tid;
	w.in = a->how & H2_WALK_IN;
	w.left = a->ret;
	if (!w.in && !s)
		return 0;
	w.c = bpf_map_lookup_elem(&h2_conns, &a->sock);
	if (!w.c) { /* the h2_conns map had no room when the connection began: never followed */
		t->c.h2_lost_calls++;
		t->c.h2_lost_bytes += w.left;
		return 0;
	}
	d = w.in ? &w.c->in : &w.c->out;
	if (d->lost)
		goto lost;
	switch (a->how & 0xFF) {
	case RB_BUF:
	case RB_RECV:
		w.seg = a->buf;
		w.seg_len = a->ret;
		break;
	case RB_IOV:
		w.iov = (const struct iovec *)a->buf;
		w.iovcnt = a->cnt;
		break;
	case RB_MSG:
		if (bpf_probe_read_user(&msg, sizeof(msg), (void *)a->buf))
			goto lose;
		w.iov = msg.msg_iov;
		w.iovcnt = msg.msg_iovlen;
		break;
	case H2_WALK_UNSEEN: /* bytes not in memory: a payload's, skipped, or the place is lost */
		if (d->have || d->settings || d->skip < (__u64)a->ret)
			goto lose;
		d->skip -= a->ret;
		return 0;
	default: /* the mmsg calls: not walked */
		goto lose;
	}
	bpf_loop(H2_WALK_STEPS, h2_step, &w, 0);
	if (!w.lost && !w.left)
		return 0;
	t->c.h2_bad_frames += w.bad;
lose:
	t->c.h2_lost++;
	d->lost = 1;
lost:
	t->c.h2_lost_calls++;
	t->c.h2_lost_bytes += w.left;
	return 0;
}

/* Where a read's or write's bytes are, from its syscall, for h2_walk_call; a read that only peeks is not
 * walked (MSG_PEEK: its bytes stay in the socket). s: the socket's state on a write, NULL on a read. */
static __always_inline void h2_walk(struct thread_stats *t, struct socket_state *s, __u64 sock, struct pt_regs *regs,
				    __u32 cls, long ret, struct call *call, bool in)
{
	struct h2_call a = { .sock = sock, .buf = SC_ARG(regs, 1), .cnt = SC_ARG(regs, 2), .ret = ret,
			     .tid = (__u32)bpf_get_current_pid_tgid(), .how = RB_NONE };
	__u64 nr = SC_NR(regs), flags = 0;

	if (in) {
		a.how = nr < SYSCALL_TABLE_SIZE ? read_buffer[nr] : RB_NONE;
		if (a.how == RB_RECV)
			flags = SC_ARG(regs, 3);
		else if (a.how == RB_MSG)
			flags = SC_ARG(regs, 2);
		if (flags & MSG_PEEK)
			return;
		a.how = (flags & MSG_TRUNC ? H2_WALK_UNSEEN : a.how) | H2_WALK_IN;
	} else if (cls == SC_WRITE) {
		a.how = RB_BUF;
	} else if (cls == SC_WRITEV) {
		a.how = RB_IOV;
	} else if (cls == SC_SENDMSG) {
		a.how = RB_MSG;
	} else if (cls == SC_SENDFILE) {
		a.how = H2_WALK_UNSEEN;
	}
	a.now = call_now(call);
	h2_walk_call(t, s, &a);
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
	if (c->opened != c->settled) {
		t = bpf_map_lookup_elem(&threads, &tid);
		if (t)
			t->c.h2_streams_unfollowed += c->opened - c->settled;
	}
	bpf_map_delete_elem(&h2_conns, sock);
	return 0;
}

#endif /* SPINSCOPE_H2_BPF_H */
