/*
 * hybrid: netty's loops (arch/netty.c) with a per-request-class choice of write path, after
 * HybridNetty: a response that will fit in the socket send buffer is cheapest written inline,
 * in one go, like a single-threaded server; a large one is better on netty's bounded
 * 16-write path, which waits for EPOLLOUT instead of spinning and lets other connections run.
 *
 * The class is the request target (e.g. "/bytes/100").  Each loop remembers, per class, the
 * size of the last response and whether writing it met EAGAIN; the next response of that
 * class goes inline iff the last one was small (<= half the connection's send buffer) and
 * was written without EAGAIN.  Unknown classes start inline.  An inline write that does
 * meet EAGAIN spins until done (that is the single-threaded path's price) and sends the
 * class to the bounded path next time.
 *
 * Threads and handoffs are netty's: an acceptor, --workers loops, no handoffs per request.
 */
#include <stdlib.h>
#include <sys/socket.h>

#include "conn.h"
#include "refserver.h"

#define CLASS_SLOTS 256   /* per loop; a direct-mapped cache, collisions just overwrite */
#define SURELY_FITS 2048  /* Linux's minimum SO_SNDBUF is 4608 */

struct class_stats {
	uint32_t hash;
	bool known, last_eagain;
	size_t last_size;
};

struct hybrid_state {
	struct class_stats slot[CLASS_SLOTS];
};

static void *hybrid_create(void)
{
	return calloc(1, sizeof(struct hybrid_state));
}

static void hybrid_destroy(void *state)
{
	free(state);
}

/* Bytes the kernel takes without blocking, roughly: half of SO_SNDBUF (Linux doubles the
 * configured value to account for bookkeeping). */
static size_t inline_limit(const struct rs_conn *c)
{
	int v = 0;
	socklen_t len = sizeof v;

	if (getsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &v, &len) != 0 || v <= 0)
		return 0;
	return (size_t)v / 2;
}

static bool hybrid_write_inline(void *state, const struct rs_conn *c)
{
	struct hybrid_state *h = state;
	const struct class_stats *s = &h->slot[c->req.class_hash % CLASS_SLOTS];

	if (!s->known || s->hash != c->req.class_hash)
		return true;
	if (s->last_eagain)
		return false;
	/* Below the smallest possible send buffer no syscall is needed to decide. */
	return s->last_size <= SURELY_FITS || s->last_size <= inline_limit(c);
}

static void hybrid_learn(void *state, const struct rs_conn *c)
{
	struct hybrid_state *h = state;
	struct class_stats *s = &h->slot[c->req.class_hash % CLASS_SLOTS];

	*s = (struct class_stats){ .hash = c->req.class_hash, .known = true,
				   .last_eagain = c->saw_eagain, .last_size = c->out_len };
}

static const struct netty_policy hybrid_policy = {
	.create = hybrid_create,
	.destroy = hybrid_destroy,
	.write_inline = hybrid_write_inline,
	.learn = hybrid_learn,
};

int arch_hybrid_run(struct rs_server *srv)
{
	return netty_serve(srv, &hybrid_policy);
}
