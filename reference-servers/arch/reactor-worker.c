/*
 * reactor-worker: one reactor thread owns the epoll set and every connection's lifetime;
 * when a connection becomes readable it is handed to one of --workers pool threads, which
 * reads, parses, computes and writes the whole response itself, then hands the connection
 * back (the common "event loop + worker pool" design):
 *
 *   reactor --(1: readable)-->  worker: read, parse, generate, write (all buffered requests)
 *   worker  --(2: "re-arm")-->  reactor: EPOLLIN again (or close)
 *
 * So 2 thread-to-thread handoffs per request (per batch of pipelined requests).  If write()
 * meets EAGAIN the worker keeps the connection: --write-policy spin retries at once,
 * epollout waits in poll() on that one socket.  Registration is EPOLLONESHOT, so a
 * connection is owned by exactly one thread at any time.
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

/* rs_conn.state when a worker hands a connection back. */
enum { WANT_READ, WANT_CLOSE };

struct reactor {
	int epfd;
	struct rs_queue tasks;     /* readable connections, to the workers */
	struct rs_mailbox back;    /* served connections, to the reactor */
	struct rs_conn_table conns;
	enum rs_write_policy policy;
};

static char listen_token, signal_token, mailbox_token;

/* Worker: read once, then answer every complete buffered request. */
static int serve(struct reactor *r, struct rs_conn *c)
{
	ssize_t n = conn_read(c);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
		return WANT_CLOSE;
	while (conn_next_request(c) != RS_PARSE_INCOMPLETE) {
		while (conn_pending_output(c)) {
			enum rs_io io = conn_write(c);

			if (io == RS_IO_ERROR)
				return WANT_CLOSE;
			if (io == RS_IO_AGAIN && r->policy == RS_WRITE_EPOLLOUT)
				rs_wait_writable(c->fd);
		}
		if (!conn_response_done(c))
			return WANT_CLOSE;
	}
	return WANT_READ;
}

static void *worker_main(void *arg)
{
	struct reactor *r = arg;
	struct rs_conn *c;

	while ((c = queue_pop(&r->tasks)) != NULL) {
		c->state = serve(r, c);
		mailbox_push(&r->back, c);
	}
	return NULL;
}

static void arm(struct reactor *r, struct rs_conn *c, int op)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT, .data.ptr = c };

	if (epoll_ctl(r->epfd, op, c->fd, &ev) != 0) {
		rs_log(true, "epoll_ctl");
		conn_table_del(&r->conns, c);
		conn_free(c);
	}
}

static void on_listen(struct reactor *r, int listen_fd)
{
	int fd;

	while ((fd = rs_accept(listen_fd, true)) >= 0) {
		struct rs_conn *c = conn_new(fd);
		if (!c)
			close(fd);
		else if (conn_table_put(&r->conns, c) != 0)
			conn_free(c);
		else
			arm(r, c, EPOLL_CTL_ADD);
	}
}

static void on_mailbox(struct reactor *r)
{
	for (struct rs_conn *c = mailbox_drain(&r->back), *next; c; c = next) {
		next = c->next;
		if (c->state == WANT_CLOSE) {
			conn_table_del(&r->conns, c);
			conn_free(c);
		} else {
			arm(r, c, EPOLL_CTL_MOD);
		}
	}
}

int arch_reactor_worker_run(struct rs_server *srv)
{
	struct reactor r = { .policy = srv->opt.write_policy };
	struct epoll_event ev[MAX_EVENTS];
	pthread_t *tids = calloc((size_t)srv->workers, sizeof *tids);
	int sfd = rs_signalfd_open(), started = 0, rc = 1;
	bool stop = false;

	queue_init(&r.tasks);
	int mrc = mailbox_init(&r.back);
	r.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!tids || sfd < 0 || r.epfd < 0 || mrc != 0)
		goto out;
	struct epoll_event lev = { .events = EPOLLIN, .data.ptr = &listen_token };
	struct epoll_event sev = { .events = EPOLLIN, .data.ptr = &signal_token };
	struct epoll_event mev = { .events = EPOLLIN, .data.ptr = &mailbox_token };
	if (epoll_ctl(r.epfd, EPOLL_CTL_ADD, srv->listen_fd, &lev) != 0 ||
	    epoll_ctl(r.epfd, EPOLL_CTL_ADD, sfd, &sev) != 0 ||
	    epoll_ctl(r.epfd, EPOLL_CTL_ADD, r.back.efd, &mev) != 0) {
		rs_log(true, "epoll_ctl");
		goto out;
	}
	for (; started < srv->workers; started++)
		if (pthread_create(&tids[started], NULL, worker_main, &r) != 0)
			goto out;

	while (!stop) {
		int n = epoll_wait(r.epfd, ev, MAX_EVENTS, -1);
		if (n < 0 && errno != EINTR) {
			rs_log(true, "epoll_wait");
			goto out;
		}
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;
			if (p == &listen_token)
				on_listen(&r, srv->listen_fd);
			else if (p == &signal_token)
				stop |= rs_signalfd_stop_requested(sfd);
			else if (p == &mailbox_token)
				on_mailbox(&r);
			else
				queue_push(&r.tasks, p);
		}
	}
	rc = 0;
out:
	queue_close(&r.tasks);
	/* A worker may be waiting for writability on a client that never reads: wake it. */
	for (int fd = 0; fd < r.conns.cap; fd++)
		if (r.conns.slot[fd])
			shutdown(fd, SHUT_RDWR);
	for (int i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	conn_table_free_all(&r.conns);
	mailbox_destroy(&r.back);
	queue_destroy(&r.tasks);
	if (r.epfd >= 0)
		close(r.epfd);
	if (sfd >= 0)
		close(sfd);
	free(tids);
	return rc;
}
