/*
 * event-loop: one thread, non-blocking sockets, one poller (--poller epoll|poll|select).
 *
 *   poller_wait ──> listen fd readable:  accept until EAGAIN, register each for READ
 *              ├──> connection readable: read once, then serve()
 *              └──> connection writable: serve() (resume the pending response)
 *
 * serve() answers every complete request already buffered, in order.  When write()
 * returns EAGAIN the --write-policy decides: "epollout" switches the interest to WRITE
 * and returns to the poller; "spin" calls write() again immediately (busy spin, the
 * SingleT-Async behaviour spinscope is meant to catch).
 * No thread handoffs at all: every step of every request runs on this thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "conn.h"
#include "net.h"
#include "poller.h"
#include "refserver.h"

#define MAX_EVENTS 256
#define ACCEPT_BATCH 64   /* bound the accepts per wakeup so existing connections get served */

enum { READING, RESPONDING };

/* With --write-policy spin, look for a shutdown signal every this many EAGAINs:
 * a client that stops reading would otherwise keep the only thread spinning forever. */
#define SPIN_SIGNAL_CHECK 4096

struct loop {
	struct rs_poller *poller;
	struct rs_conn_table conns;
	enum rs_write_policy policy;
	int signal_fd;
	bool stop;
};

/* Tokens for the two non-connection descriptors in the poller. */
static char listen_token, signal_token;

static void close_conn(struct loop *l, struct rs_conn *c)
{
	poller_set(l->poller, c->fd, 0, NULL);
	conn_table_del(&l->conns, c);
	conn_free(c);
}

static bool want(struct loop *l, struct rs_conn *c, uint32_t events)
{
	return poller_set(l->poller, c->fd, events, c) == 0;
}

/* Answer buffered requests until one is incomplete; false means "close the connection". */
static bool serve(struct loop *l, struct rs_conn *c)
{
	while (c->state == RESPONDING || conn_next_request(c) != RS_PARSE_INCOMPLETE) {
		c->state = RESPONDING;
		while (conn_pending_output(c)) {
			enum rs_io io = conn_write(c);

			if (io == RS_IO_ERROR)
				return false;
			if (io == RS_IO_AGAIN && l->policy == RS_WRITE_EPOLLOUT)
				return want(l, c, RS_EV_WRITE);
			if (io == RS_IO_AGAIN && c->write_calls % SPIN_SIGNAL_CHECK == 0 &&
			    rs_signalfd_stop_requested(l->signal_fd)) {
				l->stop = true;
				return false;
			}
		}
		c->state = READING;
		if (!conn_response_done(c))
			return false;
	}
	return want(l, c, RS_EV_READ);
}

static void on_connection(struct loop *l, struct rs_conn *c)
{
	if (c->state == READING) {
		ssize_t n = conn_read(c);

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
			close_conn(l, c);
			return;
		}
	}
	if (!serve(l, c))
		close_conn(l, c);
}

static void on_listen(struct loop *l, int listen_fd)
{
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		int fd = rs_accept(listen_fd, true);
		if (fd < 0)
			return; /* EAGAIN (or another process of n-copy won the race) */
		struct rs_conn *c = conn_new(fd);
		if (!c) {
			close(fd);
			continue;
		}
		/* select() cannot take fds >= FD_SETSIZE: such a connection is dropped here. */
		if (conn_table_put(&l->conns, c) != 0 || !want(l, c, RS_EV_READ)) {
			conn_table_del(&l->conns, c);
			conn_free(c);
		}
	}
}

int event_loop_serve(struct rs_server *srv, int signal_fd)
{
	struct loop l = { .policy = srv->opt.write_policy, .signal_fd = signal_fd };
	struct rs_event ev[MAX_EVENTS];

	l.poller = poller_new(srv->opt.poller);
	if (!l.poller || poller_set(l.poller, srv->listen_fd, RS_EV_READ, &listen_token) != 0 ||
	    poller_set(l.poller, signal_fd, RS_EV_READ, &signal_token) != 0) {
		rs_log(true, "poller setup");
		poller_free(l.poller);
		return 1;
	}
	while (!l.stop) {
		int n = poller_wait(l.poller, ev, MAX_EVENTS, -1);

		if (n < 0 && errno != EINTR) {
			rs_log(true, "poller wait");
			break;
		}
		for (int i = 0; i < n; i++) {
			if (ev[i].data == &listen_token)
				on_listen(&l, srv->listen_fd);
			else if (ev[i].data == &signal_token)
				l.stop |= rs_signalfd_stop_requested(signal_fd);
			else
				on_connection(&l, ev[i].data);
		}
	}
	conn_table_free_all(&l.conns);
	poller_free(l.poller);
	return l.stop ? 0 : 1;
}

int arch_event_loop_run(struct rs_server *srv)
{
	int sfd = rs_signalfd_open();

	if (sfd < 0)
		return 1;
	int rc = event_loop_serve(srv, sfd);
	close(sfd);
	return rc;
}
