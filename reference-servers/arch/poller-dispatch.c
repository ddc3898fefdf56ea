/*
 * poller-dispatch: one poller thread that never reads a socket, and a worker pool (the
 * connector of a widely deployed Java server: a Poller thread, an Executor):
 *
 *   poller  epoll_wait ──> listen fd readable: accept until EAGAIN, register each (EPOLLIN)
 *                     ├──> connection readable: deregister it (epoll_ctl DEL) and queue it
 *                     │                         --(1)--> a worker (mutex/condvar queue)
 *                     └──> wake eventfd readable: read it (a worker re-registered something)
 *   worker  read the request, answer it, read once more (EAGAIN: nothing pipelined), then
 *           re-register the connection (epoll_ctl ADD) --(2)--> and wake the poller through
 *           its eventfd, but only when the poller sleeps (Java's Selector.wakeup() with its
 *           wakeup counter), so a busy poller is not charged a write per connection.
 *
 * So each keep-alive request costs the poller a wakeup whose ready connections it only hands
 * over: its work is the dispatch (issue 35: not "wakeups that found nothing").  Up to 2
 * handoffs per request: the queue's condvar wakes a worker only when one waits, the eventfd
 * the poller only when it sleeps.  Every request is read twice by a worker: once with its
 * data, once EAGAIN (unless the client's next request is already there: then it is served
 * in the same turn).  A connection is owned by exactly one thread at a time: the poller
 * while it is registered, a worker from the DEL to the ADD; a worker that re-registered it
 * never touches it again.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "net.h"
#include "queue.h"
#include "refserver.h"

#define MAX_EVENTS 256

struct dispatch {
	int epfd;
	int wake_fd;               /* eventfd in the poller's epoll set */
	int sleeping;              /* the poller is (about to be) in epoll_wait: a re-registration wakes it */
	struct rs_queue tasks;     /* readable connections, to the workers */
	pthread_mutex_t conns_lock; /* conns: put by the poller, removed by the worker that closes */
	struct rs_conn_table conns;
	enum rs_write_policy policy;
};

static char listen_token, signal_token, wake_token;

static void close_conn(struct dispatch *d, struct rs_conn *c)
{
	pthread_mutex_lock(&d->conns_lock);
	conn_table_del(&d->conns, c);
	pthread_mutex_unlock(&d->conns_lock);
	conn_free(c);
}

/* Worker: answer every complete buffered request; false means "close the connection". */
static bool answer(struct dispatch *d, struct rs_conn *c)
{
	while (conn_next_request(c) != RS_PARSE_INCOMPLETE) {
		while (conn_pending_output(c)) {
			enum rs_io io = conn_write(c);

			if (io == RS_IO_ERROR)
				return false;
			if (io == RS_IO_AGAIN && d->policy == RS_WRITE_EPOLLOUT)
				rs_wait_writable(c->fd);
		}
		if (!conn_response_done(c))
			return false;
	}
	return true;
}

/* Worker: read and answer until a read finds nothing (EAGAIN); false means "close". */
static bool serve(struct dispatch *d, struct rs_conn *c)
{
	for (;;) {
		ssize_t n = conn_read(c);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (n <= 0 || !answer(d, c))
			return false;
	}
}

/* Worker: give the connection back to the poller and wake it if it sleeps. */
static void reregister(struct dispatch *d, struct rs_conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	uint64_t one = 1;

	if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
		rs_log(true, "epoll_ctl ADD");
		close_conn(d, c);
		return;
	}
	/* c may be another worker's from here on: not touched again. */
	if (__atomic_exchange_n(&d->sleeping, 0, __ATOMIC_ACQ_REL) &&
	    write(d->wake_fd, &one, sizeof one) != sizeof one)
		rs_log(true, "eventfd write");
}

static void *worker_main(void *arg)
{
	struct dispatch *d = arg;
	struct rs_conn *c;

	while ((c = queue_pop(&d->tasks)) != NULL) {
		if (serve(d, c))
			reregister(d, c);
		else
			close_conn(d, c);
	}
	return NULL;
}

static void on_listen(struct dispatch *d, int listen_fd)
{
	int fd;

	while ((fd = rs_accept(listen_fd, true)) >= 0) {
		struct rs_conn *c = conn_new(fd);
		struct epoll_event ev = { .events = EPOLLIN };
		int put;

		if (!c) {
			close(fd);
			continue;
		}
		pthread_mutex_lock(&d->conns_lock);
		put = conn_table_put(&d->conns, c);
		pthread_mutex_unlock(&d->conns_lock);
		ev.data.ptr = c;
		if (put != 0) {
			conn_free(c);
		} else if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
			rs_log(true, "epoll_ctl ADD");
			close_conn(d, c);
		}
	}
}

/* Poller: a ready connection is deregistered and queued to the workers; the poller never reads it. */
static void dispatch_conn(struct dispatch *d, struct rs_conn *c)
{
	if (epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL) != 0) {
		rs_log(true, "epoll_ctl DEL");
		return;
	}
	queue_push(&d->tasks, c);
}

int arch_poller_dispatch_run(struct rs_server *srv)
{
	struct dispatch d = { .policy = srv->opt.write_policy, .epfd = -1 };
	struct epoll_event ev[MAX_EVENTS];
	pthread_t *tids = calloc((size_t)srv->workers, sizeof *tids);
	int sfd = rs_signalfd_open(), started = 0, rc = 1;
	bool stop = false;

	queue_init(&d.tasks);
	pthread_mutex_init(&d.conns_lock, NULL);
	d.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	d.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!tids || sfd < 0 || d.epfd < 0 || d.wake_fd < 0)
		goto out;
	struct epoll_event lev = { .events = EPOLLIN, .data.ptr = &listen_token };
	struct epoll_event sev = { .events = EPOLLIN, .data.ptr = &signal_token };
	struct epoll_event wev = { .events = EPOLLIN, .data.ptr = &wake_token };
	if (epoll_ctl(d.epfd, EPOLL_CTL_ADD, srv->listen_fd, &lev) != 0 ||
	    epoll_ctl(d.epfd, EPOLL_CTL_ADD, sfd, &sev) != 0 ||
	    epoll_ctl(d.epfd, EPOLL_CTL_ADD, d.wake_fd, &wev) != 0) {
		rs_log(true, "epoll_ctl");
		goto out;
	}
	for (; started < srv->workers; started++)
		if (pthread_create(&tids[started], NULL, worker_main, &d) != 0)
			goto out;

	while (!stop) {
		__atomic_store_n(&d.sleeping, 1, __ATOMIC_RELEASE);
		int n = epoll_wait(d.epfd, ev, MAX_EVENTS, -1);
		__atomic_store_n(&d.sleeping, 0, __ATOMIC_RELEASE);
		if (n < 0 && errno != EINTR) {
			rs_log(true, "epoll_wait");
			goto out;
		}
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;
			uint64_t count;

			if (p == &listen_token)
				on_listen(&d, srv->listen_fd);
			else if (p == &signal_token)
				stop |= rs_signalfd_stop_requested(sfd);
			else if (p == &wake_token)
				(void)!read(d.wake_fd, &count, sizeof count);
			else
				dispatch_conn(&d, p);
		}
	}
	rc = 0;
out:
	queue_close(&d.tasks);
	/* A worker may be waiting for writability on a client that never reads: wake it. */
	pthread_mutex_lock(&d.conns_lock);
	for (int fd = 0; fd < d.conns.cap; fd++)
		if (d.conns.slot[fd])
			shutdown(fd, SHUT_RDWR);
	pthread_mutex_unlock(&d.conns_lock);
	for (int i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	conn_table_free_all(&d.conns); /* queued connections too: every open one is in the table */
	queue_destroy(&d.tasks);
	pthread_mutex_destroy(&d.conns_lock);
	if (d.epfd >= 0)
		close(d.epfd);
	if (d.wake_fd >= 0)
		close(d.wake_fd);
	if (sfd >= 0)
		close(sfd);
	free(tids);
	return rc;
}
