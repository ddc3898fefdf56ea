/*
 * fanout-shared: --workers N reactor threads (default 1), each serving its HTTP clients *and*
 * their shard connections from one epoll set (DoubleFaceNetty).  Every loop accepts from the
 * listening socket (EPOLLEXCLUSIVE) and owns its own pools of shard connections.
 *
 *   loop: read, parse GET /fanout/F/SIZE -> F gets on pooled shard connections (same epoll)
 *         -> responses copied into place -> 200 with the values in order (502 on error) -> next.
 *
 * With --priority fanout, each epoll round serves client events first, then writes completed
 * short responses (<= 16 KiB), then completed long ones, and only then sends the queries of
 * queued requests, oldest first, with at most 16 requests in flight per loop; the default
 * (fifo) sends queries as soon as a request is parsed and answers in completion order.
 *
 * Handoffs: 0 per request (everything happens in the thread that read the request).
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "fanout.h"
#include "net.h"

struct shared_loop {
	pthread_t tid;
	bool started;
	struct fo_frontend fe;
	struct fo_backend be;
	bool fe_ok, be_ok;
};

static volatile bool stopping;

static void *loop_main(void *arg)
{
	struct shared_loop *l = arg;

	fo_frontend_run(&l->fe);
	return NULL;
}

int arch_fanout_shared_run(struct rs_server *srv)
{
	int n = srv->workers, sfd = rs_signalfd_open(), rc = 1;
	struct shared_loop *loops = calloc((size_t)n, sizeof *loops);
	struct fo_shards shards = { 0 };

	if (sfd < 0 || !loops || !fo_shards_init(&shards, &srv->opt))
		goto out;
	for (int i = 0; i < n; i++) {
		struct shared_loop *l = &loops[i];
		/* Loop 0 runs on the main thread and watches the signalfd; the others are woken
		 * through their (otherwise unused) mailbox to notice `stopping`. */
		if (fo_frontend_init(&l->fe, srv, i == 0 ? sfd : -1, i > 0) != 0)
			goto out;
		l->fe_ok = true;
		if (fo_backend_init(&l->be, l->fe.epfd, &shards, &srv->opt, fo_frontend_done_local,
				    &l->fe) != 0)
			goto out;
		l->be_ok = true;
		l->fe.be = &l->be;
		l->fe.priority = srv->opt.priority_fanout;
		l->fe.exclusive_listen = n > 1;
		l->fe.stop_flag = &stopping;
	}
	for (int i = 1; i < n; i++) {
		if (pthread_create(&loops[i].tid, NULL, loop_main, &loops[i]) != 0)
			goto out;
		loops[i].started = true;
	}
	rc = fo_frontend_run(&loops[0].fe);
out:
	stopping = true;
	for (int i = 0; loops && i < n; i++) {
		if (loops[i].started) {
			mailbox_kick(&loops[i].fe.back);
			pthread_join(loops[i].tid, NULL);
		}
	}
	for (int i = 0; loops && i < n; i++) {
		if (loops[i].be_ok)
			fo_backend_destroy(&loops[i].be);
		if (loops[i].fe_ok)
			fo_frontend_destroy(&loops[i].fe);
	}
	free(loops);
	free(shards.shard);
	if (sfd >= 0)
		close(sfd);
	return rc;
}
