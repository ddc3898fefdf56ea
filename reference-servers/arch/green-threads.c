/*
 * green-threads: user-level threads (ucontext) over one epoll scheduler, all on one kernel
 * thread.  Each connection is a coroutine written like a blocking server's loop; when a
 * read or write would block (EAGAIN) it records what it waits for and switches back to the
 * scheduler, which resumes it when epoll reports the socket ready (Go/Erlang/gevent style).
 *
 *   scheduler: epoll_wait ─> listen: accept, create coroutine, run it until it blocks
 *                         └> conn:   swapcontext into its coroutine until it blocks again
 *   coroutine: read ─ parse ─ generate ─ write ─ repeat   ("blocking" = yield)
 *
 * No kernel-level handoffs at all: every switch is a user-space swapcontext.  With
 * --write-policy spin a coroutine keeps calling write() on EAGAIN instead of yielding.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "conn.h"
#include "net.h"
#include "refserver.h"

#define MAX_EVENTS 256
#define STACK_SIZE (256u << 10)   /* plenty for this code, also under ASan */
#define SPIN_SIGNAL_CHECK 4096

struct green {
	ucontext_t ctx;
	struct rs_conn *conn;
	char *stack;              /* mmap'd, lowest page a guard */
	uint32_t waiting_for;     /* epoll events this coroutine is blocked on */
	uint32_t registered;      /* what epoll currently watches for it */
	bool finished;
};

static struct {
	ucontext_t ctx;
	int epfd, signal_fd;
	enum rs_write_policy policy;
	bool stop;
	struct green *current;
} sched;

/* Block the current coroutine until its socket reports `events`. */
static void wait_for(uint32_t events)
{
	struct green *g = sched.current;

	g->waiting_for = events;
	swapcontext(&g->ctx, &sched.ctx);
}

static ssize_t green_read(struct rs_conn *c)
{
	for (;;) {
		ssize_t n = conn_read(c);
		if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
			return n;
		wait_for(EPOLLIN);
	}
}

static bool green_write_all(struct rs_conn *c)
{
	while (conn_pending_output(c)) {
		enum rs_io io = conn_write(c);
		if (io == RS_IO_ERROR)
			return false;
		if (io != RS_IO_AGAIN)
			continue;
		if (sched.policy == RS_WRITE_EPOLLOUT) {
			wait_for(EPOLLOUT);
		} else if (c->write_calls % SPIN_SIGNAL_CHECK == 0 &&
			   rs_signalfd_stop_requested(sched.signal_fd)) {
			sched.stop = true; /* spinning never returns to the scheduler otherwise */
			return false;
		}
	}
	return true;
}

/* The body of every coroutine: the blocking server loop, verbatim. */
static void green_main(void)
{
	struct green *g = sched.current;
	struct rs_conn *c = g->conn;

	for (;;) {
		if (conn_next_request(c) == RS_PARSE_INCOMPLETE) {
			if (green_read(c) <= 0)
				break;
			continue;
		}
		if (!green_write_all(c) || !conn_response_done(c))
			break;
	}
	g->finished = true;
	/* Returning resumes uc_link, the scheduler. */
}

static void green_free(struct green *g)
{
	conn_free(g->conn);
	munmap(g->stack, STACK_SIZE);
	free(g);
}

static void prepare_context(struct green *g)
{
	/* getcontext() "returns twice" as far as the compiler knows (it never does here: the
	 * context is only entered through makecontext), hence the volatile copy. */
	struct green *volatile self = g;

	getcontext(&self->ctx);
	self->ctx.uc_stack.ss_sp = self->stack;
	self->ctx.uc_stack.ss_size = STACK_SIZE;
	self->ctx.uc_link = &sched.ctx;
	makecontext(&self->ctx, green_main, 0);
}

static struct green *green_new(int fd)
{
	struct green *g = calloc(1, sizeof *g);

	if (!g || !(g->conn = conn_new(fd))) {
		free(g);
		return NULL;
	}
	g->stack = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (g->stack == MAP_FAILED) {
		conn_free(g->conn);
		free(g);
		return NULL;
	}
	mprotect(g->stack, 4096, PROT_NONE); /* overflow faults instead of corrupting */
	prepare_context(g);
	return g;
}

/* Run g until it blocks or finishes, then make epoll watch what it waits for. */
static void resume(struct rs_conn_table *all, struct green *g)
{
	sched.current = g;
	swapcontext(&sched.ctx, &g->ctx);
	sched.current = NULL;
	if (g->finished) {
		conn_table_del(all, g->conn);
		green_free(g);
		return;
	}
	if (g->registered != g->waiting_for) {
		struct epoll_event ev = { .events = g->waiting_for, .data.ptr = g };
		int op = g->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
		if (epoll_ctl(sched.epfd, op, g->conn->fd, &ev) != 0) {
			rs_log(true, "epoll_ctl");
			conn_table_del(all, g->conn);
			green_free(g);
			return;
		}
		g->registered = g->waiting_for;
	}
}

static char listen_token, signal_token;

int arch_green_threads_run(struct rs_server *srv)
{
	/* The table maps fd -> connection; the coroutine is found through conn->owner. */
	struct rs_conn_table all = { 0 };
	struct epoll_event ev[MAX_EVENTS];
	struct epoll_event lev = { .events = EPOLLIN, .data.ptr = &listen_token };
	struct epoll_event sev = { .events = EPOLLIN, .data.ptr = &signal_token };

	sched.policy = srv->opt.write_policy;
	sched.signal_fd = rs_signalfd_open();
	sched.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (sched.signal_fd < 0 || sched.epfd < 0 ||
	    epoll_ctl(sched.epfd, EPOLL_CTL_ADD, srv->listen_fd, &lev) != 0 ||
	    epoll_ctl(sched.epfd, EPOLL_CTL_ADD, sched.signal_fd, &sev) != 0) {
		rs_log(true, "scheduler setup");
		return 1;
	}
	while (!sched.stop) {
		int n = epoll_wait(sched.epfd, ev, MAX_EVENTS, -1);
		if (n < 0 && errno != EINTR) {
			rs_log(true, "epoll_wait");
			break;
		}
		for (int i = 0; i < n && !sched.stop; i++) {
			void *p = ev[i].data.ptr;
			int fd;
			if (p == &signal_token) {
				sched.stop = rs_signalfd_stop_requested(sched.signal_fd);
			} else if (p == &listen_token) {
				while ((fd = rs_accept(srv->listen_fd, true)) >= 0) {
					struct green *g = green_new(fd);
					if (!g) {
						close(fd);
						continue;
					}
					g->conn->owner = g;
					if (conn_table_put(&all, g->conn) != 0) {
						green_free(g);
						continue;
					}
					resume(&all, g);
				}
			} else {
				resume(&all, p);
			}
		}
	}
	/* Parked coroutines are simply discarded: they hold nothing but their conn and stack. */
	for (int fd = 0; fd < all.cap; fd++)
		if (all.slot[fd]) {
			struct green *g = all.slot[fd]->owner;
			all.slot[fd] = NULL;
			green_free(g);
		}
	conn_table_free_all(&all);
	close(sched.epfd);
	close(sched.signal_fd);
	return sched.stop ? 0 : 1;
}
