/*
 * process-per-conn: the parent accepts and forks one child per connection; the child
 * serves it with blocking I/O and exits when the peer closes (classic inetd/CGI-era
 * forking server).
 *
 *   parent: poll(listen, signalfd) ─ accept ─ fork ─ close its copy of the socket
 *   child:  read ─ parse ─ generate ─ write ─ repeat, then _exit
 *
 * Per request: no handoffs.  Per connection: a fork, plus the parent's SIGCHLD wakeup.
 * On SIGTERM the parent kills its children (they die by the default action) and reaps them.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conn.h"
#include "net.h"
#include "refserver.h"

struct children {
	pid_t *pid;
	int n, cap;
};

static bool children_add(struct children *ch, pid_t pid)
{
	if (ch->n == ch->cap) {
		int cap = ch->cap ? 2 * ch->cap : 256;
		pid_t *p = realloc(ch->pid, (size_t)cap * sizeof *p);
		if (!p)
			return false;
		ch->pid = p;
		ch->cap = cap;
	}
	ch->pid[ch->n++] = pid;
	return true;
}

static void children_reap(struct children *ch, bool block)
{
	pid_t pid;

	while (ch->n > 0 && (pid = waitpid(-1, NULL, block ? 0 : WNOHANG)) > 0)
		for (int i = 0; i < ch->n; i++)
			if (ch->pid[i] == pid) {
				ch->pid[i] = ch->pid[--ch->n];
				break;
			}
}

static void __attribute__((noreturn)) serve_child(int fd, int listen_fd, int sfd)
{
	close(listen_fd);
	close(sfd);
	rs_signals_default();
	prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive a parent that was SIGKILLed */
	struct rs_conn *c = conn_new(fd);
	if (c) {
		conn_serve_blocking(c);
		conn_free(c);
	}
	_exit(0); /* not exit(): the parent's stdio/atexit state is not ours to flush */
}

int arch_process_per_conn_run(struct rs_server *srv)
{
	struct children ch = { 0 };
	int sfd = rs_signalfd_open();
	bool stop = false;

	if (sfd < 0)
		return 1;
	while (!stop) {
		struct pollfd pfd[2] = { { .fd = srv->listen_fd, .events = POLLIN },
					 { .fd = sfd, .events = POLLIN } };
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents & POLLIN) {
			stop = rs_signalfd_stop_requested(sfd); /* also consumes SIGCHLD */
			children_reap(&ch, false);
		}
		int fd;
		while (!stop && (fd = rs_accept(srv->listen_fd, false)) >= 0) {
			pid_t pid = fork();
			if (pid == 0)
				serve_child(fd, srv->listen_fd, sfd);
			if (pid < 0)
				rs_log(true, "fork");
			else if (!children_add(&ch, pid))
				kill(pid, SIGTERM); /* cannot track it: do not leak it either */
			close(fd);
		}
	}
	for (int i = 0; i < ch.n; i++)
		kill(ch.pid[i], SIGTERM);
	children_reap(&ch, true);
	free(ch.pid);
	close(sfd);
	return 0;
}
