/*
 * fanout-pool: an event-loop frontend plus an asynchronous datastore driver that hides an
 * on-demand worker pool (the AIO driver's cached thread pool in the DoubleFace study).
 *
 *   frontend (main): read, parse GET /fanout/F/SIZE, then for each of the F queries take a
 *       pooled shard connection (or open one), write the get and arm it, EPOLLIN|EPOLLONESHOT,
 *       in the driver's epoll set
 *   port thread: epoll_wait on the shard connections --(1 per readiness: task)--> pool
 *   pool worker: read, parse, copy the value into place (re-arm if incomplete); the worker
 *       that answers the last query --(mailbox, eventfd)--> frontend: 200 / 502, next request
 *
 * The pool grows on demand: a task that finds no idle worker starts a new thread (up to
 * --pool-max, default 64; beyond that tasks queue); an idle worker waits --pool-idle-ms
 * (default 50 ms) for work and then exits.  Idle workers are handed work last-in first-out
 * (like Java's SynchronousQueue), so under a fluctuating load the threads at the bottom of the
 * stack time out and exit while bursts create new ones: thread churn.
 *
 * Handoffs: about F + 2 per request (frontend -> port via the socket, port -> worker per
 * shard response, worker -> frontend), more when a large response takes several reads.
 * Deadlines: the port thread wakes every 100 ms and fails queries past --shard-timeout-ms.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "fanout.h"
#include "net.h"

#define MAX_EVENTS 256
#define PORT_TICK_MS 100

enum { IDLE, ARMED, DISPATCHED, TIMEDOUT };

struct worker {
	pthread_cond_t cv;
	struct mc_conn *task;
	struct worker *next;
};

/* Static: detached workers may still be leaving pthread code when the server returns. */
static struct {
	struct fo_frontend fe;
	struct fo_shards shards;
	int port_epfd, port_efd, timeout_ms;
	volatile bool port_stop;

	pthread_mutex_t conn_lock;             /* idle lists and the list of every connection */
	struct mc_conn **idle;
	struct mc_conn *all;

	pthread_mutex_t lock;                  /* the worker pool */
	pthread_cond_t exited;
	struct mc_conn *tasks, *tasks_tail;
	struct worker *idle_workers;           /* stack: most recently idle on top */
	int threads, max_threads, idle_ms;
	bool stopping;
} P = { .conn_lock = PTHREAD_MUTEX_INITIALIZER, .lock = PTHREAD_MUTEX_INITIALIZER,
	.exited = PTHREAD_COND_INITIALIZER, .port_epfd = -1, .port_efd = -1 };

static void *worker_main(void *arg);

/* ------------------------------------------------------------------ shard connections */

static struct mc_conn *conn_take(int s)
{
	pthread_mutex_lock(&P.conn_lock);
	struct mc_conn *m = P.idle[s];
	if (m)
		P.idle[s] = m->next;
	pthread_mutex_unlock(&P.conn_lock);
	if (m)
		return m;
	m = mc_conn_open(P.shards.shard, s, P.timeout_ms < 200 ? P.timeout_ms : 200);
	if (!m)
		return NULL;
	pthread_mutex_lock(&P.conn_lock);
	m->link_next = P.all;
	if (P.all)
		P.all->link_prev = m;
	P.all = m;
	pthread_mutex_unlock(&P.conn_lock);
	return m;
}

static void conn_release(struct mc_conn *m)
{
	m->query = NULL;
	__atomic_store_n(&m->state, IDLE, __ATOMIC_RELEASE);
	pthread_mutex_lock(&P.conn_lock);
	m->next = P.idle[m->shard];
	P.idle[m->shard] = m;
	pthread_mutex_unlock(&P.conn_lock);
}

static void conn_destroy(struct mc_conn *m)
{
	pthread_mutex_lock(&P.conn_lock);
	if (m->link_prev)
		m->link_prev->link_next = m->link_next;
	else
		P.all = m->link_next;
	if (m->link_next)
		m->link_next->link_prev = m->link_prev;
	pthread_mutex_unlock(&P.conn_lock);
	mc_conn_close(m); /* leaves the port's epoll set */
}

static bool conn_arm(struct mc_conn *m)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT, .data.ptr = m };
	int op = m->armed ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;

	m->armed = 1;
	__atomic_store_n(&m->state, ARMED, __ATOMIC_RELEASE);
	return epoll_ctl(P.port_epfd, op, m->fd, &ev) == 0;
}

/* ------------------------------------------------------------------ queries */

static void query_done(struct fo_group *g, bool failed)
{
	if (failed)
		__atomic_store_n(&g->failed, true, __ATOMIC_RELAXED);
	if (__atomic_sub_fetch(&g->pending, 1, __ATOMIC_ACQ_REL) == 0)
		mailbox_push(&P.fe.back, g->client);
}

/* Frontend: send every query of the request; responses arrive on the port thread. */
static void pool_dispatch(void *ctx, struct fo_group *g)
{
	unsigned f = g->fanout;

	(void)ctx;
	for (unsigned i = 0; i < f; i++) {
		struct fo_query *q = &g->q[i];
		struct mc_conn *m = conn_take((int)(i % (unsigned)P.shards.n));
		if (!m) {
			query_done(g, true);
			continue;
		}
		m->query = q;
		m->deadline_ns = g->deadline_ns;
		if (mc_conn_send_get(m, i, g->size) != 0 || !conn_arm(m)) {
			m->query = NULL;
			conn_destroy(m);
			query_done(g, true);
		}
	}
}

/* Worker: one readiness (or deadline) of one shard connection. */
static void process(struct mc_conn *m)
{
	struct fo_query *q = m->query;
	struct fo_group *g = q->g;
	enum mc_result r = MC_ERROR;

	if (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) != TIMEDOUT) {
		ssize_t n = mc_conn_read(m);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			r = MC_INCOMPLETE;
		else if (n > 0)
			r = mc_conn_take(m, g->body + (size_t)q->index * g->size, g->size);
	}
	if (r == MC_INCOMPLETE) {
		if (conn_arm(m))
			return;
		r = MC_ERROR;
	}
	m->query = NULL;
	if (r == MC_HIT)
		conn_release(m);
	else
		conn_destroy(m);
	query_done(g, r != MC_HIT);
}

/* ------------------------------------------------------------------ the on-demand pool */

static void submit(struct mc_conn *m)
{
	pthread_mutex_lock(&P.lock);
	struct worker *w = P.idle_workers;
	if (w) {
		P.idle_workers = w->next;
		w->task = m;
		pthread_cond_signal(&w->cv);
	} else {
		m->next = NULL;
		if (P.tasks_tail)
			P.tasks_tail->next = m;
		else
			P.tasks = m;
		P.tasks_tail = m;
		if (P.threads < P.max_threads && !P.stopping) {
			pthread_t tid;
			pthread_attr_t attr;
			pthread_attr_init(&attr);
			pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
			pthread_attr_setstacksize(&attr, 256u << 10);
			if (pthread_create(&tid, &attr, worker_main, NULL) == 0)
				P.threads++;
			pthread_attr_destroy(&attr);
		}
	}
	pthread_mutex_unlock(&P.lock);
}

static void *worker_main(void *arg)
{
	struct worker w = { .task = NULL };

	(void)arg;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w.cv, &ca);
	pthread_condattr_destroy(&ca);

	pthread_mutex_lock(&P.lock);
	for (;;) {
		struct mc_conn *m = P.tasks;
		if (m) {
			P.tasks = m->next;
			if (!P.tasks)
				P.tasks_tail = NULL;
		} else {
			if (P.stopping)
				break;
			struct timespec until;
			clock_gettime(CLOCK_MONOTONIC, &until);
			until.tv_nsec += (long)(P.idle_ms % 1000) * 1000000L;
			until.tv_sec += P.idle_ms / 1000 + until.tv_nsec / 1000000000L;
			until.tv_nsec %= 1000000000L;
			w.task = NULL;
			w.next = P.idle_workers;
			P.idle_workers = &w;
			int rc = 0;
			while (!w.task && !P.stopping && rc != ETIMEDOUT)
				rc = pthread_cond_timedwait(&w.cv, &P.lock, &until);
			if (!w.task) {
				/* Timed out (or stopping): leave the idle stack and exit. */
				struct worker **pp = &P.idle_workers;
				while (*pp && *pp != &w)
					pp = &(*pp)->next;
				if (*pp)
					*pp = w.next;
				break;
			}
			m = w.task;
		}
		pthread_mutex_unlock(&P.lock);
		process(m);
		pthread_mutex_lock(&P.lock);
	}
	pthread_cond_destroy(&w.cv);
	if (--P.threads == 0)
		pthread_cond_broadcast(&P.exited);
	pthread_mutex_unlock(&P.lock);
	return NULL;
}

/* ------------------------------------------------------------------ port thread */

static char stop_token;

static void sweep(void)
{
	uint64_t now = mc_now_ns();
	struct mc_conn *expired = NULL;

	pthread_mutex_lock(&P.conn_lock);
	for (struct mc_conn *m = P.all; m; m = m->link_next) {
		int armed = ARMED;
		if (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) == ARMED && m->deadline_ns <= now &&
		    __atomic_compare_exchange_n(&m->state, &armed, TIMEDOUT, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			m->next = expired;
			expired = m;
		}
	}
	pthread_mutex_unlock(&P.conn_lock);
	while (expired) {
		struct mc_conn *m = expired;
		expired = m->next;
		submit(m);
	}
}

static void *port_main(void *arg)
{
	struct epoll_event ev[MAX_EVENTS];
	uint64_t last = mc_now_ns();

	(void)arg;
	while (!P.port_stop) {
		int n = epoll_wait(P.port_epfd, ev, MAX_EVENTS, PORT_TICK_MS);
		if (n < 0 && errno != EINTR) {
			rs_log(true, "epoll_wait (port)");
			break;
		}
		for (int i = 0; i < n; i++) {
			struct mc_conn *m = ev[i].data.ptr;
			int armed = ARMED;
			if (m == (void *)&stop_token)
				continue;
			if (__atomic_compare_exchange_n(&m->state, &armed, DISPATCHED, false,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
				submit(m);
		}
		if (mc_now_ns() - last >= PORT_TICK_MS * 1000000ull) {
			last = mc_now_ns();
			sweep();
		}
	}
	return NULL;
}

int arch_fanout_pool_run(struct rs_server *srv)
{
	int sfd = rs_signalfd_open(), rc = 1;
	bool fe_ok = false, port_started = false;
	pthread_t port_tid;

	P.timeout_ms = srv->opt.shard_timeout_ms;
	P.max_threads = srv->opt.pool_max;
	P.idle_ms = srv->opt.pool_idle_ms;
	if (sfd < 0 || !fo_shards_init(&P.shards, &srv->opt))
		goto out;
	P.idle = calloc((size_t)P.shards.n, sizeof *P.idle);
	if (!P.idle || fo_frontend_init(&P.fe, srv, sfd, true) != 0)
		goto out;
	fe_ok = true;
	P.fe.dispatch = pool_dispatch;
	P.port_epfd = epoll_create1(EPOLL_CLOEXEC);
	P.port_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (P.port_epfd < 0 || P.port_efd < 0)
		goto out;
	struct epoll_event sev = { .events = EPOLLIN, .data.ptr = &stop_token };
	if (epoll_ctl(P.port_epfd, EPOLL_CTL_ADD, P.port_efd, &sev) != 0 ||
	    pthread_create(&port_tid, NULL, port_main, NULL) != 0)
		goto out;
	port_started = true;
	rc = fo_frontend_run(&P.fe);
out:
	if (port_started) {
		uint64_t one = 1;
		P.port_stop = true;
		if (write(P.port_efd, &one, sizeof one) < 0)
			rs_log(true, "eventfd");
		pthread_join(port_tid, NULL);
	}
	pthread_mutex_lock(&P.lock);
	P.stopping = true;
	for (struct worker *w = P.idle_workers; w; w = w->next)
		pthread_cond_signal(&w->cv);
	while (P.threads > 0)
		pthread_cond_wait(&P.exited, &P.lock);
	pthread_mutex_unlock(&P.lock);
	/* Every worker is gone: free the shard connections and the requests still in flight. */
	while (P.all)
		conn_destroy(P.all);
	if (fe_ok) {
		for (int fd = 0; fd < P.fe.conns.cap; fd++) {
			struct rs_conn *c = P.fe.conns.slot[fd];
			if (c && c->owner) {
				fo_group_free(c->owner);
				c->owner = NULL;
			}
		}
		fo_frontend_destroy(&P.fe);
	}
	if (P.port_epfd >= 0)
		close(P.port_epfd);
	if (P.port_efd >= 0)
		close(P.port_efd);
	free(P.idle);
	free(P.shards.shard);
	if (sfd >= 0)
		close(sfd);
	return rc;
}
