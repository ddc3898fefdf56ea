/*
 * thread-per-conn: the main thread accepts; every connection gets its own thread that
 * serves it with blocking read()/write() until the peer closes (Apache-style, or the
 * paper's thread-based servers).
 *
 *   acceptor ──(pthread_create)──> conn thread: read ─ parse ─ generate ─ write ─ repeat
 *
 * Per request: no handoffs.  Per connection: one thread creation (the acceptor's only
 * interaction with it).  Finished threads put themselves on a list the acceptor joins,
 * so nothing is detached and shutdown can wait for all of them.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "conn.h"
#include "live.h"
#include "net.h"
#include "refserver.h"

/* Blocking servers need little stack; 1000+ threads x 8 MiB default would be wasteful. */
#define CONN_THREAD_STACK (256u << 10)

struct conn_thread {
	pthread_t tid;
	struct rs_conn *conn;
	struct conn_thread *next;
};

static struct rs_live live;
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static struct conn_thread *done_list; /* finished, waiting to be joined */
static int running;                   /* started and not yet on done_list */

static void *conn_main(void *arg)
{
	struct conn_thread *t = arg;

	conn_serve_blocking(t->conn);
	live_close(&live, t->conn);
	pthread_mutex_lock(&done_lock);
	t->next = done_list;
	done_list = t;
	running--;
	pthread_cond_signal(&done_cond);
	pthread_mutex_unlock(&done_lock);
	return NULL;
}

/* Join finished threads; with wait_all, first wait until every thread has finished. */
static void reap(bool wait_all)
{
	pthread_mutex_lock(&done_lock);
	while (wait_all && running > 0)
		pthread_cond_wait(&done_cond, &done_lock);
	struct conn_thread *list = done_list;
	done_list = NULL;
	pthread_mutex_unlock(&done_lock);
	while (list) {
		struct conn_thread *next = list->next;
		pthread_join(list->tid, NULL);
		free(list);
		list = next;
	}
}

int arch_thread_per_conn_run(struct rs_server *srv)
{
	int sfd = rs_signalfd_open(), fd;
	pthread_attr_t attr;

	if (sfd < 0)
		return 1;
	live_init(&live);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, CONN_THREAD_STACK);

	while ((fd = rs_accept_or_stop(srv->listen_fd, sfd, false)) >= 0) {
		struct conn_thread *t = calloc(1, sizeof *t);
		reap(false);
		if (!t || !(t->conn = conn_new(fd)) || !live_add(&live, fd)) {
			if (t && t->conn)
				conn_free(t->conn);
			else
				close(fd);
			free(t);
			continue;
		}
		pthread_mutex_lock(&done_lock);
		running++;
		pthread_mutex_unlock(&done_lock);
		if (pthread_create(&t->tid, &attr, conn_main, t) != 0) {
			rs_log(false, "pthread_create failed; dropping connection");
			pthread_mutex_lock(&done_lock);
			running--;
			pthread_mutex_unlock(&done_lock);
			live_close(&live, t->conn);
			free(t);
		}
	}

	live_stop(&live);
	reap(true);
	pthread_attr_destroy(&attr);
	live_destroy(&live);
	close(sfd);
	return 0;
}
