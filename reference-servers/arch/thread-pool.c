/*
 * thread-pool: the main thread accepts and queues connections; a fixed pool of --workers
 * threads (default 32) each takes a connection and serves it with blocking I/O until the
 * peer closes, then takes the next (Apache worker MPM without the event listener).
 *
 *   acceptor ──queue──> worker: read ─ parse ─ generate ─ write ─ repeat until close
 *
 * Per request: no handoffs; per connection: one (acceptor -> worker).  A worker is held
 * for the whole life of a keep-alive connection, so with more open connections than
 * workers the extra connections wait in the queue until a connection closes.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "conn.h"
#include "live.h"
#include "net.h"
#include "queue.h"
#include "refserver.h"

static struct rs_queue accepted;
static struct rs_live live;

static void *worker_main(void *arg)
{
	struct rs_conn *c;

	(void)arg;
	while ((c = queue_pop(&accepted)) != NULL) {
		if (!live_add(&live, c->fd)) { /* stopping */
			conn_free(c);
			continue;
		}
		conn_serve_blocking(c);
		live_close(&live, c);
	}
	return NULL;
}

int arch_thread_pool_run(struct rs_server *srv)
{
	int sfd = rs_signalfd_open(), fd, started = 0;
	pthread_t *tids = calloc((size_t)srv->workers, sizeof *tids);

	if (sfd < 0 || !tids) {
		if (sfd >= 0)
			close(sfd);
		free(tids);
		return 1;
	}
	queue_init(&accepted);
	live_init(&live);
	for (; started < srv->workers; started++)
		if (pthread_create(&tids[started], NULL, worker_main, NULL) != 0) {
			rs_log(false, "pthread_create failed");
			break;
		}

	while (started > 0 && (fd = rs_accept_or_stop(srv->listen_fd, sfd, false)) >= 0) {
		struct rs_conn *c = conn_new(fd);
		if (c)
			queue_push(&accepted, c);
		else
			close(fd);
	}

	queue_close(&accepted);
	live_stop(&live);
	for (int i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	for (struct rs_conn *c = queue_take_all(&accepted), *next; c; c = next) {
		next = c->next;
		conn_free(c);
	}
	queue_destroy(&accepted);
	live_destroy(&live);
	free(tids);
	close(sfd);
	return started > 0 ? 0 : 1;
}
