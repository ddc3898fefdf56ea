/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Responses held by Nagle's algorithm (the nagle-stall finding, docs/labels.md): a response written in more
 * than one call on a TCP socket with Nagle on, whose later write left bytes unsent because a small segment
 * sent before it (the headers) is not acknowledged yet. The client delays its ACK (40 ms on Linux), so the
 * rest of the response waits for it while the server has nothing to do.
 *
 * At a socket write that is not a response's first (one that is cannot be held behind its own response's
 * segment) the socket's TCP state is read: the proof is Linux's own test (tcp_nagle_check, Minshall's
 * variant), no guess from a gap. The hold ends when the next segment from the client arrives (tcp_probe, at
 * the top of tcp_rcv_established, before the ACK is processed and the held bytes go out): its time is
 * counted into the request (nagle_holds, nagle_hold_ns). A later write of the same response ends the hold
 * uncounted (the server was not idle), as does the next request or a close before any segment came.
 * Included by sockets.bpf.h, whose socket_state it keeps in.
 */
#ifndef SPINSCOPE_NAGLE_BPF_H
#define SPINSCOPE_NAGLE_BPF_H

#define TCP_NAGLE_OFF 1  /* TCP_NODELAY */
#define TCP_NAGLE_CORK 2 /* TCP_CORK: held on purpose, until uncorked */

static __always_inline bool seq_after(__u32 a, __u32 b)
{
	return (__s32)(a - b) > 0;
}

/* The sock of a struct socket when it is TCP over IPv4 or IPv6 (a struct tcp_sock), else NULL. */
static __always_inline struct sock *socket_tcp_sk(__u64 sock)
{
	struct socket *s = bpf_rdonly_cast((void *)sock, bpf_core_type_id_kernel(struct socket));
	struct sock *sk = s->sk;

	if (!sk || sk->sk_protocol != IPPROTO_TCP ||
	    (sk->__sk_common.skc_family != AF_INET && sk->__sk_common.skc_family != AF_INET6))
		return NULL;
	return sk;
}

/*
 * Whether the socket holds unsent bytes for Nagle's algorithm right after a write: Nagle on (neither
 * TCP_NODELAY nor TCP_CORK), a partial segment unsent (fewer bytes than the MSS), segments in flight, and
 * among them a small one not acknowledged (snd_sml after snd_una): the kernel's own test. Not inlined: one
 * copy of these loads, called only at the later writes of a response.
 */
static __noinline bool nagle_holding(__u64 sock)
{
	struct sock *sk = socket_tcp_sk(sock);
	struct tcp_sock *tp;
	__u32 unsent;

	if (!sk)
		return false;
	tp = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
	if (BPF_CORE_READ_BITFIELD(tp, nonagle) & (TCP_NAGLE_OFF | TCP_NAGLE_CORK) || !tp->packets_out)
		return false;
	unsent = tp->write_seq - tp->snd_nxt;
	return unsent && unsent < tp->mss_cache && seq_after(tp->snd_sml, tp->snd_una) &&
	       !seq_after(tp->snd_sml, tp->snd_nxt);
}

/* A later write of a response on a serving socket (s) returned having moved bytes. */
static __always_inline void nagle_on_write(struct thread_stats *t, struct socket_state *s, __u64 sock,
					   struct call *call)
{
	s->held_ns = 0; /* a hold the server wrote after was not idle time: not counted */
	if (!nagle_holding(sock))
		return;
	s->held_ns = call_now(call);
	t->c.nagle_held++;
	call->stack_events |= 1 << STACK_NAGLE_WRITE;
}

/*
 * A segment from the peer arrived on an established TCP socket (any process's: the unsent test first, two
 * loads, and only a socket with bytes unsent is looked up). On a traced socket with a hold open, the hold
 * ends: the ACK that releases the held bytes is in this segment, or the client sent nothing before it.
 */
SEC("tp_btf/tcp_probe")
int BPF_PROG(on_tcp_probe, struct sock *sk, struct sk_buff *skb)
{
	struct tcp_sock *tp = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
	struct socket_state *s;
	__u64 sock, now;

	if (tp->write_seq == tp->snd_nxt)
		return 0;
	sock = (__u64)sk->sk_socket;
	if (!sock)
		return 0;
	s = bpf_map_lookup_elem(&sockets, &sock);
	if (!s || !s->held_ns)
		return 0;
	now = bpf_ktime_get_ns();
	if (now > s->held_ns) {
		s->nagle_holds++;
		s->nagle_hold_ns += now - s->held_ns;
	}
	s->held_ns = 0;
	return 0;
}

#endif /* SPINSCOPE_NAGLE_BPF_H */
