/*
 * fanout-split: one frontend reactor for the HTTP clients and --backend-loops K reactor
 * threads for the shard connections (NettyBackend in the DoubleFace study).
 *
 *   frontend: read, parse GET /fanout/F/SIZE --(1: mailbox, eventfd)--> backend loop (round
 *   robin per request): F queries on F pooled shard connections, one get each, responses
 *   copied into place --(2: mailbox, eventfd)--> frontend: 200 with the values in order
 *   (502 on a shard error or timeout), next request.
 *
 * Handoffs: 2 per request.  The imbalance this design is known for: the frontend wakes for
 * about one event per epoll_wait (a request, or a completion) while a backend loop wakes for
 * a burst of F shard responses, so with small records the frontend spins through poll calls
 * that carry almost nothing (spurious select by loop imbalance).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "fanout.h"
#include "net.h"

#define MAX_EVENTS 256

struct backend_loop {
	pthread_t tid;
	bool started;
	int epfd;
	struct rs_mailbox in;
	struct fo_backend be;
	volatile bool stop;
};

struct split {
	struct fo_frontend fe;
	struct fo_shards shards;
	struct backend_loop *loops;
	int nloops, next;
};

static uint64_t mailbox_token; /* aligned: bit 0 is the shard tag */

static void *backend_main(void *arg)
{
	struct backend_loop *l = arg;
	struct epoll_event ev[MAX_EVENTS];

	while (!l->stop) {
		int n = epoll_wait(l->epfd, ev, MAX_EVENTS, fo_backend_timeout(&l->be));
		if (n < 0 && errno != EINTR) {
			rs_log(true, "epoll_wait (backend)");
			break;
		}
		for (int i = 0; i < n; i++) {
			if (fo_is_tagged(ev[i].data.u64)) {
				fo_backend_event(&l->be, fo_untag(ev[i].data.u64), ev[i].events);
			} else if (ev[i].data.ptr == &mailbox_token) {
				for (struct rs_conn *c = mailbox_drain(&l->in), *next; c; c = next) {
					next = c->next;
					fo_backend_submit(&l->be, c->owner);
				}
			}
		}
		fo_backend_reap(&l->be);
	}
	return NULL;
}

/* Frontend -> backend loop, round robin per request. */
static void split_dispatch(void *arg, struct fo_group *g)
{
	struct split *s = arg;
	struct backend_loop *l = &s->loops[s->next];

	s->next = (s->next + 1) % s->nloops;
	mailbox_push(&l->in, g->client);
}

int arch_fanout_split_run(struct rs_server *srv)
{
	struct split s = { .nloops = srv->opt.backend_loops };
	int sfd = rs_signalfd_open(), rc = 1;
	bool fe_ok = false;

	s.loops = calloc((size_t)s.nloops, sizeof *s.loops);
	if (sfd < 0 || !s.loops || !fo_shards_init(&s.shards, &srv->opt))
		goto out;
	for (int i = 0; i < s.nloops; i++)
		s.loops[i].epfd = -1;
	if (fo_frontend_init(&s.fe, srv, sfd, true) != 0)
		goto out;
	fe_ok = true;
	s.fe.dispatch = split_dispatch;
	s.fe.ctx = &s;
	for (int i = 0; i < s.nloops; i++) {
		struct backend_loop *l = &s.loops[i];
		l->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (l->epfd < 0 || mailbox_init(&l->in) != 0 ||
		    fo_backend_init(&l->be, l->epfd, &s.shards, &srv->opt, fo_frontend_done_remote,
				    &s.fe) != 0)
			goto out;
		struct epoll_event mev = { .events = EPOLLIN, .data.ptr = &mailbox_token };
		if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->in.efd, &mev) != 0)
			goto out;
		if (pthread_create(&l->tid, NULL, backend_main, l) != 0)
			goto out;
		l->started = true;
	}
	rc = fo_frontend_run(&s.fe);
out:
	for (int i = 0; s.loops && i < s.nloops; i++) {
		struct backend_loop *l = &s.loops[i];
		if (l->started) {
			l->stop = true;
			mailbox_kick(&l->in);
			pthread_join(l->tid, NULL);
		}
		if (l->epfd >= 0) {
			/* Requests handed over but never picked up. */
			for (struct rs_conn *c = mailbox_drain(&l->in), *next; c; c = next) {
				next = c->next;
				fo_group_free(c->owner);
				c->owner = NULL;
			}
			fo_backend_destroy(&l->be);
			mailbox_destroy(&l->in);
			close(l->epfd);
		}
	}
	if (fe_ok)
		fo_frontend_destroy(&s.fe);
	free(s.loops);
	free(s.shards.shard);
	if (sfd >= 0)
		close(sfd);
	return rc;
}
