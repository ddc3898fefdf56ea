#include "fanout.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "net.h"

#define MAX_EVENTS        256
#define SWEEP_NS          (50ull * 1000000)   /* deadline checks at most this often */
#define TIMER_MS          100                 /* epoll timeout while something is in flight */
#define LONG_RESPONSE     16384u              /* priority: "long" responses, written after short */
#define PRIORITY_INFLIGHT 16u                 /* priority: groups in flight per loop */

/* ------------------------------------------------------------------ groups */

struct fo_group *fo_group_new(struct rs_conn *client, uint64_t seq, int timeout_ms)
{
	unsigned f = (unsigned)client->req.arg;
	struct fo_group *g = calloc(1, sizeof *g + f * sizeof g->q[0]);

	if (!g)
		return NULL;
	g->body = malloc((size_t)f * client->req.size);
	if (!g->body) {
		free(g);
		return NULL;
	}
	g->client = client;
	g->fanout = f;
	g->size = client->req.size;
	g->pending = f;
	g->seq = seq;
	g->deadline_ns = mc_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (unsigned i = 0; i < f; i++) {
		g->q[i].g = g;
		g->q[i].index = i;
	}
	return g;
}

void fo_group_free(struct fo_group *g)
{
	if (g) {
		free(g->body);
		free(g);
	}
}

void fo_group_respond(struct fo_group *g)
{
	if (g->failed)
		conn_set_response(g->client, 502, "Bad Gateway", "shard unavailable\n", 18);
	else
		conn_set_response(g->client, 200, "OK", g->body, fo_group_bytes(g));
	g->client->owner = NULL;
	fo_group_free(g);
}

bool fo_shards_init(struct fo_shards *s, const struct rs_options *o)
{
	if (!o->shards) {
		rs_log(false, "%s needs --shards host:port[,host:port...]", o->arch);
		return false;
	}
	s->n = mc_parse_shards(o->shards, &s->shard);
	if (s->n <= 0) {
		rs_log(false, "bad --shards: %s", o->shards);
		return false;
	}
	return true;
}

/* ------------------------------------------------------------------ backend */

int fo_backend_init(struct fo_backend *be, int epfd, const struct fo_shards *shards,
		    const struct rs_options *o, void (*done)(void *, struct fo_group *), void *ctx)
{
	int n = shards->n;

	memset(be, 0, sizeof *be);
	be->epfd = epfd;
	be->shards = shards;
	be->max_conns = o->shard_conns;
	be->timeout_ms = o->shard_timeout_ms;
	be->done = done;
	be->ctx = ctx;
	be->idle = calloc((size_t)n, sizeof *be->idle);
	be->open = calloc((size_t)n, sizeof *be->open);
	be->wait_head = calloc((size_t)n, sizeof *be->wait_head);
	be->wait_tail = calloc((size_t)n, sizeof *be->wait_tail);
	if (!be->idle || !be->open || !be->wait_head || !be->wait_tail)
		return -1;
	return 0;
}

static void conn_bury(struct fo_backend *be, struct mc_conn *m)
{
	/* close() removes it from epoll; the struct lives until the end of the round. */
	close(m->fd);
	m->fd = -1;
	m->query = NULL;
	be->open[m->shard]--;
	m->next = be->graveyard;
	be->graveyard = m;
}

void fo_backend_reap(struct fo_backend *be)
{
	while (be->graveyard) {
		struct mc_conn *m = be->graveyard;
		be->graveyard = m->next;
		m->fd = -1;
		free(m->in);
		free(m);
	}
}

static void inflight_unlink(struct fo_backend *be, struct fo_group *g)
{
	if (g->prev)
		g->prev->next = g->next;
	else
		be->inflight = g->next;
	if (g->next)
		g->next->prev = g->prev;
	else
		be->inflight_tail = g->prev;
	g->next = g->prev = NULL;
}

static void finish(struct fo_backend *be, struct fo_group *g)
{
	inflight_unlink(be, g);
	be->done(be->ctx, g);
}

static void issue_waiting(struct fo_backend *be, int shard);

/* The group failed: abandon its other queries (closing the connections they are in flight on)
 * and report it at once. */
static void fail_group(struct fo_backend *be, struct fo_group *g)
{
	g->failed = true;
	for (unsigned i = 0; i < g->fanout; i++) {
		struct fo_query *q = &g->q[i];
		if (q->conn) {
			struct mc_conn *m = q->conn;
			q->conn = NULL;
			conn_bury(be, m);
		} else if (q->waiting) {
			int s = (int)(q->index % (unsigned)be->shards->n);
			struct fo_query **pp = &be->wait_head[s], *prev = NULL;
			while (*pp && *pp != q) {
				prev = *pp;
				pp = &(*pp)->next;
			}
			if (*pp) {
				*pp = q->next;
				if (be->wait_tail[s] == q)
					be->wait_tail[s] = prev;
			}
			q->waiting = false;
		}
	}
	finish(be, g);
	for (int s = 0; s < be->shards->n; s++)
		issue_waiting(be, s);
}

/* Put query q on a connection and send it; false if that failed (the caller fails the group). */
static bool issue(struct fo_backend *be, struct fo_query *q)
{
	int s = (int)(q->index % (unsigned)be->shards->n);
	struct mc_conn *m = be->idle[s];

	if (m) {
		be->idle[s] = m->next;
	} else if (be->open[s] < be->max_conns) {
		m = mc_conn_open(be->shards->shard, s, be->timeout_ms < 200 ? be->timeout_ms : 200);
		if (!m)
			return false;
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = fo_tag(m) };
		if (epoll_ctl(be->epfd, EPOLL_CTL_ADD, m->fd, &ev) != 0) {
			mc_conn_close(m);
			return false;
		}
		be->open[s]++;
	} else {
		q->waiting = true;
		q->next = NULL;
		if (be->wait_tail[s])
			be->wait_tail[s]->next = q;
		else
			be->wait_head[s] = q;
		be->wait_tail[s] = q;
		return true;
	}
	m->next = NULL;
	m->query = q;
	q->conn = m;
	if (mc_conn_send_get(m, q->index, q->g->size) != 0) {
		q->conn = NULL;
		conn_bury(be, m);
		return false;
	}
	return true;
}

/* Connections freed up or closed on shard s: start queries that were waiting for one. */
static void issue_waiting(struct fo_backend *be, int s)
{
	while (be->wait_head[s] && (be->idle[s] || be->open[s] < be->max_conns)) {
		struct fo_query *q = be->wait_head[s];
		be->wait_head[s] = q->next;
		if (!be->wait_head[s])
			be->wait_tail[s] = NULL;
		q->waiting = false;
		if (!issue(be, q))
			fail_group(be, q->g);
	}
}

void fo_backend_submit(struct fo_backend *be, struct fo_group *g)
{
	g->prev = be->inflight_tail;
	g->next = NULL;
	if (be->inflight_tail)
		be->inflight_tail->next = g;
	else
		be->inflight = g;
	be->inflight_tail = g;
	for (unsigned i = 0; i < g->fanout; i++)
		if (!issue(be, &g->q[i])) {
			fail_group(be, g);
			return;
		}
}

void fo_backend_event(struct fo_backend *be, struct mc_conn *m, uint32_t events)
{
	struct fo_query *q = m->query;
	int s = m->shard;
	ssize_t n;

	(void)events;
	if (m->fd < 0)
		return; /* closed earlier in this round */
	if (!q) {
		/* An idle connection became readable: the shard closed it (or sent junk). */
		struct mc_conn **pp = &be->idle[s];
		while (*pp && *pp != m)
			pp = &(*pp)->next;
		if (*pp)
			*pp = m->next;
		conn_bury(be, m);
		issue_waiting(be, s);
		return;
	}
	n = mc_conn_read(m);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	enum mc_result r = n > 0 ? mc_conn_take(m, q->g->body + (size_t)q->index * q->g->size,
						q->g->size)
				 : MC_ERROR;
	if (r == MC_INCOMPLETE)
		return;
	struct fo_group *g = q->g;
	q->conn = NULL;
	if (r != MC_HIT) {
		conn_bury(be, m); /* EOF, reset, miss or protocol error: the shard is not usable */
		fail_group(be, g);
		return;
	}
	m->query = NULL;
	m->next = be->idle[s];
	be->idle[s] = m;
	issue_waiting(be, s);
	if (--g->pending == 0)
		finish(be, g);
}

int fo_backend_timeout(struct fo_backend *be)
{
	if (!be->inflight)
		return -1;
	uint64_t now = mc_now_ns();
	if (now - be->last_sweep >= SWEEP_NS) {
		be->last_sweep = now;
		while (be->inflight && be->inflight->deadline_ns <= now)
			fail_group(be, be->inflight); /* oldest first: deadlines are in order */
	}
	return be->inflight ? TIMER_MS : -1;
}

void fo_backend_destroy(struct fo_backend *be)
{
	while (be->inflight) {
		struct fo_group *g = be->inflight;
		for (unsigned i = 0; i < g->fanout; i++)
			if (g->q[i].conn)
				conn_bury(be, g->q[i].conn);
		inflight_unlink(be, g);
		if (g->client)
			g->client->owner = NULL;
		fo_group_free(g);
	}
	for (int s = 0; be->idle && s < be->shards->n; s++)
		while (be->idle[s]) {
			struct mc_conn *m = be->idle[s];
			be->idle[s] = m->next;
			conn_bury(be, m);
		}
	fo_backend_reap(be);
	free(be->idle);
	free(be->open);
	free(be->wait_head);
	free(be->wait_tail);
}

/* ------------------------------------------------------------------ frontend */

static uint64_t listen_token, signal_token, mailbox_token; /* aligned: bit 0 is the shard tag */

int fo_frontend_init(struct fo_frontend *fe, struct rs_server *srv, int sfd, bool mailbox)
{
	memset(fe, 0, sizeof *fe);
	fe->srv = srv;
	fe->sfd = sfd;
	fe->back.efd = -1;
	fe->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (fe->epfd < 0)
		return -1;
	if (mailbox) {
		if (mailbox_init(&fe->back) != 0)
			return -1;
		fe->mailbox = true;
	}
	return 0;
}

static void client_close(struct fo_frontend *fe, struct rs_conn *c)
{
	conn_table_del(&fe->conns, c);
	conn_free(c); /* close() also leaves the epoll set */
}

static bool set_interest(struct fo_frontend *fe, struct rs_conn *c, uint32_t events)
{
	if (c->interest == events)
		return true;
	struct epoll_event ev = { .events = events, .data.ptr = c };
	int op = c->interest == 0 ? EPOLL_CTL_ADD : events == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
	if (epoll_ctl(fe->epfd, op, c->fd, &ev) != 0) {
		rs_log(true, "epoll_ctl (client)");
		return false;
	}
	c->interest = events;
	return true;
}

static void list_append(struct fo_group **head, struct fo_group **tail, struct fo_group *g)
{
	g->next = NULL;
	if (*tail)
		(*tail)->next = g;
	else
		*head = g;
	*tail = g;
}

static void dispatch(struct fo_frontend *fe, struct fo_group *g)
{
	fe->inflight++;
	if (fe->be)
		fo_backend_submit(fe->be, g);
	else
		fe->dispatch(fe->ctx, g);
}

/*
 * Move a client connection forward: write what is pending, answer buffered requests (inline,
 * or hand a fanout on and stop listening to the client until it is answered), then wait for
 * input or writability.
 */
static void client_advance(struct fo_frontend *fe, struct rs_conn *c)
{
	for (;;) {
		while (conn_pending_output(c)) {
			enum rs_io io = conn_write(c);
			if (io == RS_IO_ERROR) {
				client_close(fe, c);
				return;
			}
			if (io == RS_IO_AGAIN) {
				if (!set_interest(fe, c, EPOLLOUT))
					client_close(fe, c);
				return;
			}
			if (io == RS_IO_DONE && !conn_response_done(c)) {
				client_close(fe, c);
				return;
			}
		}
		enum rs_parse r = conn_parse(c);
		if (r == RS_PARSE_INCOMPLETE) {
			if (!set_interest(fe, c, EPOLLIN))
				client_close(fe, c);
			return;
		}
		if (r == RS_PARSE_OK && c->req.kind == RS_REQ_FANOUT) {
			struct fo_group *g = fo_group_new(c, fe->seq++, fe->srv->opt.shard_timeout_ms);
			if (!g) {
				conn_set_response(c, 503, "Service Unavailable", "", 0);
				continue;
			}
			if (!set_interest(fe, c, 0)) {
				fo_group_free(g);
				client_close(fe, c);
				return;
			}
			c->owner = g;
			if (fe->priority)
				list_append(&fe->pending, &fe->pending_tail, g);
			else
				dispatch(fe, g);
			return;
		}
		if (r == RS_PARSE_OK)
			conn_respond(c);
		/* RS_PARSE_BAD: the 400 is ready */
	}
}

static void complete(struct fo_frontend *fe, struct fo_group *g)
{
	struct rs_conn *c = g->client;

	fe->inflight--;
	fo_group_respond(g);
	client_advance(fe, c);
}

void fo_frontend_done_local(void *arg, struct fo_group *g)
{
	struct fo_frontend *fe = arg;

	if (fe->priority && fo_group_bytes(g) > LONG_RESPONSE)
		list_append(&fe->done_long, &fe->done_long_tail, g);
	else
		list_append(&fe->done_short, &fe->done_short_tail, g);
}

void fo_frontend_done_remote(void *arg, struct fo_group *g)
{
	struct fo_frontend *fe = arg;

	mailbox_push(&fe->back, g->client);
}

static void on_listen(struct fo_frontend *fe)
{
	int fd;

	while ((fd = rs_accept(fe->srv->listen_fd, true)) >= 0) {
		struct rs_conn *c = conn_new(fd);
		if (!c) {
			close(fd);
		} else if (conn_table_put(&fe->conns, c) != 0 || !set_interest(fe, c, EPOLLIN)) {
			conn_table_del(&fe->conns, c);
			conn_free(c);
		}
	}
}

static void on_client(struct fo_frontend *fe, struct rs_conn *c, uint32_t events)
{
	if (c->interest == EPOLLOUT) {
		client_advance(fe, c);
		return;
	}
	if (c->interest != EPOLLIN)
		return;
	(void)events;
	ssize_t n = conn_read(c);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
		client_close(fe, c);
		return;
	}
	if (n > 0 || c->in_len == sizeof c->in)
		client_advance(fe, c);
}

/* End of an epoll round: completed groups (short before long), then queued groups, oldest first. */
static void round_end(struct fo_frontend *fe)
{
	struct fo_group *g;

	while ((g = fe->done_short) != NULL) {
		fe->done_short = g->next;
		if (!fe->done_short)
			fe->done_short_tail = NULL;
		complete(fe, g);
	}
	while ((g = fe->done_long) != NULL) {
		fe->done_long = g->next;
		if (!fe->done_long)
			fe->done_long_tail = NULL;
		complete(fe, g);
	}
	while ((g = fe->pending) != NULL && fe->inflight < PRIORITY_INFLIGHT) {
		fe->pending = g->next;
		if (!fe->pending)
			fe->pending_tail = NULL;
		dispatch(fe, g);
	}
}

int fo_frontend_run(struct fo_frontend *fe)
{
	struct epoll_event ev[MAX_EVENTS];
	struct epoll_event lev = { .events = EPOLLIN | (fe->exclusive_listen ? EPOLLEXCLUSIVE : 0),
				   .data.ptr = &listen_token };
	struct epoll_event sev = { .events = EPOLLIN, .data.ptr = &signal_token };
	struct epoll_event mev = { .events = EPOLLIN, .data.ptr = &mailbox_token };
	bool stop = false;

	if (epoll_ctl(fe->epfd, EPOLL_CTL_ADD, fe->srv->listen_fd, &lev) != 0 ||
	    (fe->sfd >= 0 && epoll_ctl(fe->epfd, EPOLL_CTL_ADD, fe->sfd, &sev) != 0) ||
	    (fe->mailbox && epoll_ctl(fe->epfd, EPOLL_CTL_ADD, fe->back.efd, &mev) != 0)) {
		rs_log(true, "epoll_ctl");
		return 1;
	}
	int timeout = -1;
	while (!stop && !(fe->stop_flag && *fe->stop_flag)) {
		int n = epoll_wait(fe->epfd, ev, MAX_EVENTS, timeout);
		if (n < 0 && errno != EINTR) {
			rs_log(true, "epoll_wait");
			return 1;
		}
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;
			if (fo_is_tagged(ev[i].data.u64)) {
				fo_backend_event(fe->be, fo_untag(ev[i].data.u64), ev[i].events);
			} else if (p == &listen_token) {
				on_listen(fe);
			} else if (p == &signal_token) {
				if (rs_signalfd_stop_requested(fe->sfd)) {
					stop = true;
					if (fe->stop_flag)
						*fe->stop_flag = true;
				}
			} else if (p == &mailbox_token) {
				for (struct rs_conn *c = mailbox_drain(&fe->back), *next; c; c = next) {
					next = c->next;
					fo_frontend_done_local(fe, c->owner);
				}
			} else {
				on_client(fe, p, ev[i].events);
			}
		}
		if (fe->be) {
			fo_backend_reap(fe->be);
			fo_backend_timeout(fe->be); /* fail what is past its deadline ... */
		}
		round_end(fe);                      /* ... answer it, dispatch queued requests ... */
		timeout = fe->be && fe->be->inflight ? TIMER_MS : -1; /* ... then wait */
	}
	return 0;
}

static void free_list(struct fo_group *g)
{
	while (g) {
		struct fo_group *next = g->next;
		g->client->owner = NULL;
		fo_group_free(g);
		g = next;
	}
}

void fo_frontend_destroy(struct fo_frontend *fe)
{
	if (fe->mailbox) {
		for (struct rs_conn *c = mailbox_drain(&fe->back), *next; c; c = next) {
			next = c->next;
			fo_group_free(c->owner);
			c->owner = NULL;
		}
		mailbox_destroy(&fe->back);
	}
	free_list(fe->pending);
	free_list(fe->done_short);
	free_list(fe->done_long);
	conn_table_free_all(&fe->conns);
	if (fe->epfd >= 0)
		close(fe->epfd);
}
