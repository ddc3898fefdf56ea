/*
 * fanout-sync: thread per client connection with a blocking, thread-based datastore driver.
 * The main thread accepts; each connection thread owns one blocking connection per shard
 * (opened on first use, SO_RCVTIMEO/SO_SNDTIMEO = --shard-timeout-ms) and answers
 * GET /fanout/F/SIZE by asking for user0..user<F-1> one after the other (get, wait, next),
 * then writes the assembled values.  A shard error or timeout closes that shard connection
 * and answers 502; the next request reconnects.
 *
 * Handoffs: 0 per request (1 thread creation per connection).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "conn.h"
#include "fanout.h"
#include "live.h"
#include "net.h"

#define CONN_THREAD_STACK (256u << 10)

struct conn_thread {
	pthread_t tid;
	struct rs_conn *conn;
	struct conn_thread *next;
};

static struct rs_live live;
static struct fo_shards shards;
static int timeout_ms;
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static struct conn_thread *done_list;
static int running;

static struct mc_conn *shard_conn(struct mc_conn **mc, int s)
{
	if (mc[s])
		return mc[s];
	struct mc_conn *m = mc_conn_open(shards.shard, s, timeout_ms);
	if (!m)
		return NULL;
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	rs_set_nonblocking(m->fd, false);
	setsockopt(m->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(m->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	return mc[s] = m;
}

/* The blocking driver: F round trips, one after the other. */
static void fanout(struct rs_conn *c, struct mc_conn **mc)
{
	unsigned f = (unsigned)c->req.arg, size = c->req.size;
	char *body = malloc((size_t)f * size);
	bool ok = body != NULL;

	for (unsigned i = 0; ok && i < f; i++) {
		int s = (int)(i % (unsigned)shards.n);
		struct mc_conn *m = shard_conn(mc, s);
		ok = m && mc_conn_get_blocking(m, i, size, body + (size_t)i * size) == 0;
		if (!ok && m) {
			mc_conn_close(m);
			mc[s] = NULL;
		}
	}
	if (ok)
		conn_set_response(c, 200, "OK", body, (size_t)f * size);
	else
		conn_set_response(c, 502, "Bad Gateway", "shard unavailable\n", 18);
	free(body);
}

/* conn_serve_blocking, with fanout requests answered through the shards. */
static void serve(struct rs_conn *c, struct mc_conn **mc)
{
	for (;;) {
		enum rs_parse r = conn_parse(c);

		if (r == RS_PARSE_INCOMPLETE) {
			if (conn_read(c) <= 0)
				return;
			continue;
		}
		if (r == RS_PARSE_OK && c->req.kind == RS_REQ_FANOUT)
			fanout(c, mc);
		else if (r == RS_PARSE_OK)
			conn_respond(c);
		while (conn_pending_output(c)) {
			enum rs_io io = conn_write(c);
			if (io == RS_IO_ERROR)
				return;
			if (io == RS_IO_AGAIN)
				rs_wait_writable(c->fd);
		}
		if (!conn_response_done(c))
			return;
	}
}

static void *conn_main(void *arg)
{
	struct conn_thread *t = arg;
	struct mc_conn **mc = calloc((size_t)shards.n, sizeof *mc);

	if (mc)
		serve(t->conn, mc);
	for (int s = 0; mc && s < shards.n; s++)
		mc_conn_close(mc[s]);
	free(mc);
	live_close(&live, t->conn);
	pthread_mutex_lock(&done_lock);
	t->next = done_list;
	done_list = t;
	running--;
	pthread_cond_signal(&done_cond);
	pthread_mutex_unlock(&done_lock);
	return NULL;
}

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

int arch_fanout_sync_run(struct rs_server *srv)
{
	int sfd = rs_signalfd_open(), fd;
	pthread_attr_t attr;

	if (sfd < 0 || !fo_shards_init(&shards, &srv->opt)) {
		if (sfd >= 0)
			close(sfd);
		return 1;
	}
	timeout_ms = srv->opt.shard_timeout_ms;
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
	free(shards.shard);
	close(sfd);
	return 0;
}
