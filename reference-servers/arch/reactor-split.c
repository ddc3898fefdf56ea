/*
 * reactor-split: one reactor thread owns the epoll set and every connection's lifetime;
 * a pool of --workers threads does the I/O.  Reads and writes are separate tasks and
 * control returns to the reactor between them (Tomcat NIO style):
 *
 *   reactor  --(1: readable)-->        worker: read, parse, generate response
 *   worker   --(2: "want write")-->    reactor: arm EPOLLOUT
 *   reactor  --(3: writable)-->        worker: write
 *   worker   --(4: "want read")-->     reactor: re-arm EPOLLIN
 *
 * So 4 thread-to-thread handoffs per request (more if a write meets EAGAIN: each retry
 * goes through the reactor again).  reactor->worker is a condvar queue, worker->reactor a
 * mailbox whose eventfd sits in the reactor's epoll set.  Connections are registered
 * EPOLLONESHOT, so a connection is owned by exactly one thread at any time.
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

/* rs_conn.state: what the receiving thread should do with the connection. */
enum {
	TASK_READ,    /* reactor -> worker */
	TASK_WRITE,   /* reactor -> worker */
	WANT_READ,    /* worker -> reactor */
	WANT_WRITE,   /* worker -> reactor */
	WANT_CLOSE,   /* worker -> reactor */
};

struct reactor {
	int epfd;
	struct rs_queue tasks;     /* to the workers */
	struct rs_mailbox back;    /* to the reactor */
	struct rs_conn_table conns;
	enum rs_write_policy policy;
};

static char listen_token, signal_token, mailbox_token;

/* Worker, read task: read and parse; a complete request gets its response generated. */
static int do_read(struct rs_conn *c)
{
	ssize_t n = conn_read(c);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
		return WANT_CLOSE;
	return conn_next_request(c) == RS_PARSE_INCOMPLETE ? WANT_READ : WANT_WRITE;
}

/* Worker, write task: write what the socket takes; finish or ask to wait for writability. */
static int do_write(struct reactor *r, struct rs_conn *c)
{
	for (;;) {
		enum rs_io io = conn_write(c);

		if (io == RS_IO_ERROR)
			return WANT_CLOSE;
		if (io == RS_IO_AGAIN && r->policy == RS_WRITE_EPOLLOUT)
			return WANT_WRITE;
		if (io == RS_IO_DONE)
			break;
	}
	if (!conn_response_done(c))
		return WANT_CLOSE;
	/* A pipelined request already buffered is answered now, via another write round. */
	return conn_next_request(c) == RS_PARSE_INCOMPLETE ? WANT_READ : WANT_WRITE;
}

static void *worker_main(void *arg)
{
	struct reactor *r = arg;
	struct rs_conn *c;

	while ((c = queue_pop(&r->tasks)) != NULL) {
		c->state = c->state == TASK_READ ? do_read(c) : do_write(r, c);
		mailbox_push(&r->back, c);
	}
	return NULL;
}

static void arm(struct reactor *r, struct rs_conn *c, int op, uint32_t events)
{
	struct epoll_event ev = { .events = events | EPOLLONESHOT, .data.ptr = c };

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
		if (!c) {
			close(fd);
		} else if (conn_table_put(&r->conns, c) != 0) {
			conn_free(c);
		} else {
			arm(r, c, EPOLL_CTL_ADD, EPOLLIN);
		}
	}
}

/* Requests coming back from the workers. */
static void on_mailbox(struct reactor *r)
{
	for (struct rs_conn *c = mailbox_drain(&r->back), *next; c; c = next) {
		next = c->next;
		if (c->state == WANT_CLOSE) {
			conn_table_del(&r->conns, c);
			conn_free(c);
		} else {
			arm(r, c, EPOLL_CTL_MOD, c->state == WANT_READ ? EPOLLIN : EPOLLOUT);
		}
	}
}

int arch_reactor_split_run(struct rs_server *srv)
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
			if (p == &listen_token) {
				on_listen(&r, srv->listen_fd);
			} else if (p == &signal_token) {
				stop |= rs_signalfd_stop_requested(sfd);
			} else if (p == &mailbox_token) {
				on_mailbox(&r);
			} else {
				struct rs_conn *c = p;
				c->state = ev[i].events & EPOLLOUT ? TASK_WRITE : TASK_READ;
				queue_push(&r.tasks, c);
			}
		}
	}
	rc = 0;
out:
	queue_close(&r.tasks);
	/* With --write-policy spin a worker may be spinning on a client that never reads. */
	for (int fd = 0; fd < r.conns.cap; fd++)
		if (r.conns.slot[fd])
			shutdown(fd, SHUT_RDWR);
	for (int i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	/* Every connection, wherever it was (queue, mailbox, epoll), is in the table. */
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
