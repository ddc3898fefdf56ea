/*
 * pipeline: staged threads joined by queues (SEDA / WatPipe).  Each stage is its own thread
 * (writers: --workers threads) and a connection moves from stage to stage:
 *
 *   accept ──> read stage ──(1)──> write-readiness stage ──(2)──> writer ──(3)──> read stage
 *              epoll EPOLLIN       epoll EPOLLOUT                 write()         (re-arm)
 *              read, parse,        "is it writable yet?"          until done
 *              generate
 *
 * 3 thread-to-thread handoffs per request (a write that meets EAGAIN goes back to the
 * write-readiness stage: 2 more per retry).  Stages that sleep in epoll receive through
 * mailboxes (eventfd in their epoll set); writers through a condvar queue.  The read stage
 * owns connection lifetimes: closing is a message to it.  Registrations are EPOLLONESHOT,
 * so at any time exactly one stage owns a connection.
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

/* rs_conn.state: why a connection was sent to the read stage. */
enum { NEW, WANT_READ, WANT_CLOSE };

/* rs_conn.interest, owned by the write-readiness stage: added to its epoll set yet? */
#define IN_WRITE_SET 1u

struct pipeline {
	struct rs_mailbox to_read, to_ready;
	struct rs_queue to_writer;
	int read_epfd, ready_epfd;
	struct rs_conn_table conns;   /* read stage */
	atomic_bool stop;
	enum rs_write_policy policy;
};

static char mailbox_token;

static void arm(int epfd, struct rs_conn *c, int op, uint32_t events)
{
	struct epoll_event ev = { .events = events | EPOLLONESHOT, .data.ptr = c };

	if (epoll_ctl(epfd, op, c->fd, &ev) != 0)
		rs_log(true, "epoll_ctl"); /* the connection stalls until shutdown; never seen */
}

static void to_read_stage(struct pipeline *p, struct rs_conn *c, int why)
{
	c->state = why;
	mailbox_push(&p->to_read, c);
}

/* ---- read stage: owns the connections; reads, parses, generates responses */

static void read_stage_mail(struct pipeline *p)
{
	for (struct rs_conn *c = mailbox_drain(&p->to_read), *next; c; c = next) {
		next = c->next;
		if (c->state == WANT_CLOSE) {
			conn_table_del(&p->conns, c);
			conn_free(c);
		} else if (c->state == NEW) {
			if (conn_table_put(&p->conns, c) != 0)
				conn_free(c);
			else
				arm(p->read_epfd, c, EPOLL_CTL_ADD, EPOLLIN);
		} else {
			arm(p->read_epfd, c, EPOLL_CTL_MOD, EPOLLIN);
		}
	}
}

static void read_stage_readable(struct pipeline *p, struct rs_conn *c)
{
	ssize_t n = conn_read(c);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
		conn_table_del(&p->conns, c);
		conn_free(c);
	} else if (conn_next_request(c) == RS_PARSE_INCOMPLETE) {
		arm(p->read_epfd, c, EPOLL_CTL_MOD, EPOLLIN);
	} else {
		mailbox_push(&p->to_ready, c);                      /* handoff 1 */
	}
}

static void *read_stage(void *arg)
{
	struct pipeline *p = arg;
	struct epoll_event ev[MAX_EVENTS];

	while (!atomic_load(&p->stop)) {
		int n = epoll_wait(p->read_epfd, ev, MAX_EVENTS, -1);
		for (int i = 0; i < n; i++) {
			if (ev[i].data.ptr == &mailbox_token)
				read_stage_mail(p);
			else
				read_stage_readable(p, ev[i].data.ptr);
		}
	}
	/* Wake writers that may be spinning on (or blocked by) a client that stopped reading. */
	for (int fd = 0; fd < p->conns.cap; fd++)
		if (p->conns.slot[fd])
			shutdown(fd, SHUT_RDWR);
	return NULL;
}

/* ---- write-readiness stage: waits until a connection with a response can be written */

static void *ready_stage(void *arg)
{
	struct pipeline *p = arg;
	struct epoll_event ev[MAX_EVENTS];

	while (!atomic_load(&p->stop)) {
		int n = epoll_wait(p->ready_epfd, ev, MAX_EVENTS, -1);
		for (int i = 0; i < n; i++) {
			if (ev[i].data.ptr != &mailbox_token) {
				queue_push(&p->to_writer, ev[i].data.ptr);  /* handoff 2 */
				continue;
			}
			for (struct rs_conn *c = mailbox_drain(&p->to_ready), *next; c; c = next) {
				next = c->next;
				arm(p->ready_epfd, c, c->interest & IN_WRITE_SET ? EPOLL_CTL_MOD : EPOLL_CTL_ADD,
				    EPOLLOUT);
				c->interest |= IN_WRITE_SET;
			}
		}
	}
	return NULL;
}

/* ---- writers */

static void *writer(void *arg)
{
	struct pipeline *p = arg;
	struct rs_conn *c;

	while ((c = queue_pop(&p->to_writer)) != NULL) {
		enum rs_io io;
		do
			io = conn_write(c);
		while (io == RS_IO_PARTIAL || (io == RS_IO_AGAIN && p->policy == RS_WRITE_SPIN));
		if (io == RS_IO_AGAIN) {
			mailbox_push(&p->to_ready, c);   /* wait for writability again */
		} else if (io == RS_IO_ERROR || !conn_response_done(c)) {
			to_read_stage(p, c, WANT_CLOSE);
		} else if (conn_next_request(c) != RS_PARSE_INCOMPLETE) {
			mailbox_push(&p->to_ready, c);   /* a pipelined request was already buffered */
		} else {
			to_read_stage(p, c, WANT_READ);  /* handoff 3 */
		}
	}
	return NULL;
}

/* ---- accept stage (this thread) and setup */

static int add_mailbox(int epfd, struct rs_mailbox *m)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &mailbox_token };
	return epoll_ctl(epfd, EPOLL_CTL_ADD, m->efd, &ev);
}

int arch_pipeline_run(struct rs_server *srv)
{
	struct pipeline p = { .policy = srv->opt.write_policy };
	pthread_t reader, ready, *writers = calloc((size_t)srv->workers, sizeof *writers);
	int sfd = rs_signalfd_open(), nwriters = 0, fd, rc = 1;
	bool reader_up = false, ready_up = false;

	queue_init(&p.to_writer);
	int m1 = mailbox_init(&p.to_read), m2 = mailbox_init(&p.to_ready);
	p.read_epfd = epoll_create1(EPOLL_CLOEXEC);
	p.ready_epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!writers || sfd < 0 || m1 || m2 || p.read_epfd < 0 || p.ready_epfd < 0 ||
	    add_mailbox(p.read_epfd, &p.to_read) || add_mailbox(p.ready_epfd, &p.to_ready))
		goto out;
	reader_up = pthread_create(&reader, NULL, read_stage, &p) == 0;
	ready_up = reader_up && pthread_create(&ready, NULL, ready_stage, &p) == 0;
	while (ready_up && nwriters < srv->workers &&
	       pthread_create(&writers[nwriters], NULL, writer, &p) == 0)
		nwriters++;
	if (nwriters < srv->workers)
		goto out;

	while ((fd = rs_accept_or_stop(srv->listen_fd, sfd, true)) >= 0) {
		struct rs_conn *c = conn_new(fd);
		if (c)
			to_read_stage(&p, c, NEW);
		else
			close(fd);
	}
	rc = 0;
out:
	atomic_store(&p.stop, true);
	if (reader_up) {
		mailbox_kick(&p.to_read);
		pthread_join(reader, NULL); /* it shuts the sockets down on its way out */
	}
	if (ready_up) {
		mailbox_kick(&p.to_ready);
		pthread_join(ready, NULL);
	}
	queue_close(&p.to_writer);
	for (int i = 0; i < nwriters; i++)
		pthread_join(writers[i], NULL);
	/* Connections the read stage never adopted are not in its table. */
	for (struct rs_conn *c = mailbox_drain(&p.to_read), *next; c; c = next) {
		next = c->next;
		if (c->state == NEW)
			conn_free(c);
	}
	conn_table_free_all(&p.conns);
	mailbox_destroy(&p.to_read);
	mailbox_destroy(&p.to_ready);
	queue_destroy(&p.to_writer);
	if (p.read_epfd >= 0)
		close(p.read_epfd);
	if (p.ready_epfd >= 0)
		close(p.ready_epfd);
	if (sfd >= 0)
		close(sfd);
	free(writers);
	return rc;
}
