/*
 * process-graph: request processing as a graph of nodes with input queues, run by a few
 * executor threads (--workers, default 2) that visit the nodes in turn, taking a batch from
 * each non-empty queue (dataflow / actor-scheduler style).  A reactor thread owns the
 * sockets and feeds the graph:
 *
 *   reactor --(readable)--> [parse] --> [compute] --> [respond] --(re-arm / close)--> reactor
 *                            read,        generate      write
 *                            parse        response
 *
 * Handoffs per request: reactor -> executor and executor -> reactor (2 thread wakeups), plus
 * 0-2 between executors, depending on which executor picks up the next node's queue.  A write
 * that meets EAGAIN goes to the reactor to wait for EPOLLOUT (--write-policy epollout) or is
 * retried at once (spin).  EPOLLONESHOT: one thread owns a connection at any time.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "net.h"
#include "queue.h"
#include "refserver.h"

#define MAX_EVENTS 256
#define BATCH 16

enum node_id { PARSE, COMPUTE, RESPOND, NNODES };

/* rs_conn.state: for the parse node, whether to read first; for the reactor, what to do. */
enum { READ_FIRST, BUFFERED, WANT_READ, WANT_WRITE, WANT_CLOSE };

struct node {
	struct rs_conn *head, *tail;
};

struct graph {
	pthread_mutex_t lock;          /* one lock for all node queues */
	pthread_cond_t work;           /* some queue became non-empty */
	struct node node[NNODES];
	bool stop;
	struct rs_mailbox to_reactor;
	enum rs_write_policy policy;
};

static void graph_push(struct graph *g, enum node_id n, struct rs_conn *c)
{
	struct node *q = &g->node[n];

	c->next = NULL;
	pthread_mutex_lock(&g->lock);
	if (q->tail)
		q->tail->next = c;
	else
		q->head = c;
	q->tail = c;
	pthread_cond_signal(&g->work);
	pthread_mutex_unlock(&g->lock);
}

static void to_reactor(struct graph *g, struct rs_conn *c, int what)
{
	c->state = what;
	mailbox_push(&g->to_reactor, c);
}

/* ---- the nodes: each takes one connection and passes it on */

static void parse_node(struct graph *g, struct rs_conn *c)
{
	if (c->state == READ_FIRST) {
		ssize_t n = conn_read(c);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
			to_reactor(g, c, WANT_CLOSE);
			return;
		}
	}
	switch (conn_parse(c)) {
	case RS_PARSE_INCOMPLETE: to_reactor(g, c, WANT_READ); break;
	case RS_PARSE_OK: graph_push(g, COMPUTE, c); break;
	case RS_PARSE_BAD: graph_push(g, RESPOND, c); break; /* the 400 is already prepared */
	}
}

static void compute_node(struct graph *g, struct rs_conn *c)
{
	conn_respond(c);
	graph_push(g, RESPOND, c);
}

static void respond_node(struct graph *g, struct rs_conn *c)
{
	enum rs_io io;

	do
		io = conn_write(c);
	while (io == RS_IO_PARTIAL || (io == RS_IO_AGAIN && g->policy == RS_WRITE_SPIN));
	if (io == RS_IO_AGAIN) {
		to_reactor(g, c, WANT_WRITE);
	} else if (io == RS_IO_ERROR || !conn_response_done(c)) {
		to_reactor(g, c, WANT_CLOSE);
	} else if (c->in_len > 0) {
		c->state = BUFFERED;                 /* maybe a pipelined request: parse it first */
		graph_push(g, PARSE, c);
	} else {
		to_reactor(g, c, WANT_READ);
	}
}

static void (*const node_fn[NNODES])(struct graph *, struct rs_conn *) = {
	[PARSE] = parse_node, [COMPUTE] = compute_node, [RESPOND] = respond_node,
};

/* An executor: visit the nodes round robin, run a batch from each non-empty queue. */
static void *executor(void *arg)
{
	struct graph *g = arg;
	unsigned turn = 0;

	pthread_mutex_lock(&g->lock);
	while (!g->stop) {
		int n = -1;
		for (unsigned k = 0; k < NNODES && n < 0; k++)
			if (g->node[(turn + k) % NNODES].head)
				n = (int)((turn + k) % NNODES);
		if (n < 0) {
			pthread_cond_wait(&g->work, &g->lock);
			continue;
		}
		turn = (unsigned)n + 1;
		struct rs_conn *batch = g->node[n].head, *last = batch;
		for (int i = 1; i < BATCH && last->next; i++)
			last = last->next;
		g->node[n].head = last->next;
		if (!g->node[n].head)
			g->node[n].tail = NULL;
		last->next = NULL;
		pthread_mutex_unlock(&g->lock);
		while (batch) {
			struct rs_conn *c = batch;
			batch = c->next;
			node_fn[n](g, c);
		}
		pthread_mutex_lock(&g->lock);
	}
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

/* ---- the reactor (this thread) */

static char listen_token, signal_token, mailbox_token;

static void arm(int epfd, struct rs_conn_table *t, struct rs_conn *c, int op, uint32_t events)
{
	struct epoll_event ev = { .events = events | EPOLLONESHOT, .data.ptr = c };

	if (epoll_ctl(epfd, op, c->fd, &ev) != 0) {
		rs_log(true, "epoll_ctl");
		conn_table_del(t, c);
		conn_free(c);
	}
}

int arch_process_graph_run(struct rs_server *srv)
{
	struct graph g = { .policy = srv->opt.write_policy };
	struct rs_conn_table conns = { 0 };
	struct epoll_event ev[MAX_EVENTS];
	pthread_t *tids = calloc((size_t)srv->workers, sizeof *tids);
	int sfd = rs_signalfd_open(), epfd = epoll_create1(EPOLL_CLOEXEC), started = 0, rc = 1;
	bool stop = false;

	pthread_mutex_init(&g.lock, NULL);
	pthread_cond_init(&g.work, NULL);
	int mrc = mailbox_init(&g.to_reactor);
	struct epoll_event lev = { .events = EPOLLIN, .data.ptr = &listen_token };
	struct epoll_event sev = { .events = EPOLLIN, .data.ptr = &signal_token };
	struct epoll_event mev = { .events = EPOLLIN, .data.ptr = &mailbox_token };
	if (!tids || sfd < 0 || epfd < 0 || mrc != 0 ||
	    epoll_ctl(epfd, EPOLL_CTL_ADD, srv->listen_fd, &lev) != 0 ||
	    epoll_ctl(epfd, EPOLL_CTL_ADD, sfd, &sev) != 0 ||
	    epoll_ctl(epfd, EPOLL_CTL_ADD, g.to_reactor.efd, &mev) != 0)
		goto out;
	for (; started < srv->workers; started++)
		if (pthread_create(&tids[started], NULL, executor, &g) != 0)
			goto out;

	while (!stop) {
		int n = epoll_wait(epfd, ev, MAX_EVENTS, -1), fd;
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;
			if (p == &signal_token) {
				stop |= rs_signalfd_stop_requested(sfd);
			} else if (p == &listen_token) {
				while ((fd = rs_accept(srv->listen_fd, true)) >= 0) {
					struct rs_conn *c = conn_new(fd);
					if (!c)
						close(fd);
					else if (conn_table_put(&conns, c) != 0)
						conn_free(c);
					else
						arm(epfd, &conns, c, EPOLL_CTL_ADD, EPOLLIN);
				}
			} else if (p == &mailbox_token) {
				for (struct rs_conn *c = mailbox_drain(&g.to_reactor), *next; c; c = next) {
					next = c->next;
					if (c->state == WANT_CLOSE) {
						conn_table_del(&conns, c);
						conn_free(c);
					} else {
						arm(epfd, &conns, c, EPOLL_CTL_MOD,
						    c->state == WANT_READ ? EPOLLIN : EPOLLOUT);
					}
				}
			} else {
				struct rs_conn *c = p;
				if (ev[i].events & EPOLLOUT) {
					graph_push(&g, RESPOND, c);
				} else {
					c->state = READ_FIRST;
					graph_push(&g, PARSE, c);
				}
			}
		}
	}
	rc = 0;
out:
	pthread_mutex_lock(&g.lock);
	g.stop = true;
	pthread_cond_broadcast(&g.work);
	pthread_mutex_unlock(&g.lock);
	/* An executor spinning on (--write-policy spin) a client that stopped reading. */
	for (int fd = 0; fd < conns.cap; fd++)
		if (conns.slot[fd])
			shutdown(fd, SHUT_RDWR);
	for (int i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	conn_table_free_all(&conns); /* wherever they were queued, all are in the table */
	mailbox_destroy(&g.to_reactor);
	pthread_cond_destroy(&g.work);
	pthread_mutex_destroy(&g.lock);
	if (epfd >= 0)
		close(epfd);
	if (sfd >= 0)
		close(sfd);
	free(tids);
	return rc;
}
