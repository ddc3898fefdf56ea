/*
 * netty: an acceptor thread plus --workers event loops (Netty's boss/worker groups).  Each
 * accepted connection is handed once to a loop, round robin, and stays pinned to it; all its
 * requests are read, computed and written on that loop's thread.
 *
 *   acceptor --(once per connection: mailbox)--> loop: epoll ─ read ─ parse ─ generate ─ flush
 *
 * Flushing follows Netty's writeSpinCount = 16: at most 16 write() calls per flush attempt.
 *   - a write that makes no progress (EAGAIN): wait for EPOLLOUT, then flush again;
 *   - 16 writes that all made progress but did not finish: yield, i.e. queue the connection
 *     behind the other ready connections and resume it after the next (non-blocking) poll.
 * No handoffs per request; one per connection.  Pipelined requests are answered in order.
 *
 * hybrid (arch/hybrid.c) reuses this engine with a policy that may write a response inline.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "net.h"
#include "queue.h"
#include "refserver.h"

#define MAX_EVENTS 256
#define WRITE_SPIN_COUNT 16
#define INLINE_STOP_CHECK 4096  /* EAGAINs between stop-flag checks on the inline path */

/* rs_conn.state */
enum {
	READING,         /* interest EPOLLIN */
	WAIT_WRITABLE,   /* interest EPOLLOUT: the last write made no progress */
	YIELDED,         /* on the loop's flush list, interest none */
};

struct loop {
	pthread_t tid;
	int epfd;
	struct rs_mailbox inbox;          /* new connections from the acceptor */
	struct rs_conn_table conns;
	struct rs_conn *yield_head, *yield_tail;
	atomic_bool stop;
	const struct netty_policy *policy;
	void *policy_state;
};

static char inbox_token;

static void set_interest(struct loop *l, struct rs_conn *c, uint32_t events)
{
	if (c->interest == events)
		return;
	struct epoll_event ev = { .events = events, .data.ptr = c };
	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
		c->interest = events;
}

static void close_conn(struct loop *l, struct rs_conn *c)
{
	conn_table_del(&l->conns, c);
	conn_free(c); /* close() also removes it from the epoll set */
}

enum flush_result { FLUSH_DONE, FLUSH_WAIT, FLUSH_YIELD, FLUSH_ERROR };

/* Netty's bounded flush: up to WRITE_SPIN_COUNT write() calls. */
static enum flush_result flush_bounded(struct rs_conn *c)
{
	for (int i = 0; i < WRITE_SPIN_COUNT; i++) {
		switch (conn_write(c)) {
		case RS_IO_DONE: return FLUSH_DONE;
		case RS_IO_AGAIN: return FLUSH_WAIT;
		case RS_IO_ERROR: return FLUSH_ERROR;
		case RS_IO_PARTIAL: break;
		}
	}
	return FLUSH_YIELD;
}

/* The single-threaded path (hybrid only): write until done, spinning through EAGAIN. */
static enum flush_result flush_inline(struct loop *l, struct rs_conn *c)
{
	for (;;) {
		switch (conn_write(c)) {
		case RS_IO_DONE: return FLUSH_DONE;
		case RS_IO_ERROR: return FLUSH_ERROR;
		case RS_IO_AGAIN:
			/* A client that stopped reading must not keep shutdown waiting. */
			if (c->write_calls % INLINE_STOP_CHECK == 0 && atomic_load(&l->stop))
				return FLUSH_ERROR;
			break;
		case RS_IO_PARTIAL: break;
		}
	}
}

/*
 * Make progress on c: finish the pending response, then answer every buffered request.
 * Sets the connection's interest/state for whatever it waits for next.
 */
static void progress(struct loop *l, struct rs_conn *c)
{
	for (;;) {
		if (conn_pending_output(c)) {
			bool inl = c->state == READING && l->policy &&
				   l->policy->write_inline(l->policy_state, c);
			enum flush_result r = inl ? flush_inline(l, c) : flush_bounded(c);

			if (r == FLUSH_ERROR) {
				close_conn(l, c);
				return;
			}
			if (r == FLUSH_WAIT) {
				c->state = WAIT_WRITABLE;
				set_interest(l, c, EPOLLOUT);
				return;
			}
			if (r == FLUSH_YIELD) {
				c->state = YIELDED;
				set_interest(l, c, 0);
				c->next = NULL;
				if (l->yield_tail)
					l->yield_tail->next = c;
				else
					l->yield_head = c;
				l->yield_tail = c;
				return;
			}
			if (l->policy)
				l->policy->learn(l->policy_state, c);
			c->state = READING;
			if (!conn_response_done(c)) {
				close_conn(l, c);
				return;
			}
		}
		if (conn_next_request(c) == RS_PARSE_INCOMPLETE)
			break;
	}
	c->state = READING;
	set_interest(l, c, EPOLLIN);
}

static void on_readable(struct loop *l, struct rs_conn *c)
{
	ssize_t n = conn_read(c);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
		close_conn(l, c);
	else
		progress(l, c);
}

static void adopt_new_connections(struct loop *l)
{
	for (struct rs_conn *c = mailbox_drain(&l->inbox), *next; c; c = next) {
		next = c->next;
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
		c->state = READING;
		c->interest = EPOLLIN;
		if (conn_table_put(&l->conns, c) != 0 ||
		    epoll_ctl(l->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
			rs_log(true, "registering a connection");
			close_conn(l, c);
		}
	}
}

/* Resume the connections that yielded; ones that yield again go to the back. */
static void run_yielded(struct loop *l)
{
	struct rs_conn *c = l->yield_head;

	l->yield_head = l->yield_tail = NULL;
	while (c) {
		struct rs_conn *next = c->next;
		progress(l, c);
		c = next;
	}
}

static void *loop_main(void *arg)
{
	struct loop *l = arg;
	struct epoll_event ev[MAX_EVENTS];

	while (!atomic_load(&l->stop)) {
		/* Don't sleep while yielded connections still have data to send. */
		int n = epoll_wait(l->epfd, ev, MAX_EVENTS, l->yield_head ? 0 : -1);
		if (n < 0 && errno != EINTR) {
			rs_log(true, "epoll_wait");
			break;
		}
		for (int i = 0; i < n; i++) {
			struct rs_conn *c = ev[i].data.ptr;
			if (ev[i].data.ptr == &inbox_token)
				adopt_new_connections(l);
			else if (c->state == WAIT_WRITABLE)
				progress(l, c);
			else if (c->state == READING)
				on_readable(l, c);
			/* YIELDED: only ERR/HUP can be reported; the next flush sees the error. */
		}
		run_yielded(l);
	}
	adopt_new_connections(l); /* anything handed over just before the stop */
	return NULL;
}

int netty_serve(struct rs_server *srv, const struct netty_policy *policy)
{
	int n = srv->workers, started = 0, sfd = rs_signalfd_open(), fd;
	struct loop *loops = calloc((size_t)n, sizeof *loops);
	unsigned next_loop = 0;

	if (!loops || sfd < 0)
		goto out;
	for (; started < n; started++) {
		struct loop *l = &loops[started];
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &inbox_token };
		int mrc = mailbox_init(&l->inbox);
		l->policy = policy;
		l->policy_state = policy ? policy->create() : NULL;
		l->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (mrc != 0 || (policy && !l->policy_state) || l->epfd < 0 ||
		    epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->inbox.efd, &ev) != 0 ||
		    pthread_create(&l->tid, NULL, loop_main, l) != 0) {
			rs_log(true, "starting event loop %d", started);
			if (l->epfd >= 0)
				close(l->epfd);
			if (policy)
				policy->destroy(l->policy_state);
			mailbox_destroy(&l->inbox);
			break;
		}
	}

	/* The acceptor: the only thing this thread does until shutdown. */
	while (started == n && (fd = rs_accept_or_stop(srv->listen_fd, sfd, true)) >= 0) {
		struct rs_conn *c = conn_new(fd);
		if (!c) {
			close(fd);
			continue;
		}
		mailbox_push(&loops[next_loop++ % (unsigned)n].inbox, c);
	}

out:
	for (int i = 0; i < started; i++) {
		atomic_store(&loops[i].stop, true);
		mailbox_kick(&loops[i].inbox);
	}
	for (int i = 0; i < started; i++) {
		struct loop *l = &loops[i];
		pthread_join(l->tid, NULL);
		conn_table_free_all(&l->conns);
		mailbox_destroy(&l->inbox);
		close(l->epfd);
		if (policy)
			policy->destroy(l->policy_state);
	}
	free(loops);
	if (sfd >= 0)
		close(sfd);
	return started == n ? 0 : 1;
}

int arch_netty_run(struct rs_server *srv)
{
	return netty_serve(srv, NULL);
}
