/*
 * n-copy: --workers N copies of the single-threaded event loop, as processes forked after
 * listen() so they all accept from the same listening socket (nginx's worker model
 * without accept_mutex/EPOLLEXCLUSIVE).
 *
 *   parent: listen, fork N children, then only wait: on SIGTERM/SIGINT forward SIGTERM to
 *           the children and reap them; a child that dies early is reported and not replaced.
 *   child:  event_loop_serve() (arch/event-loop.c), unchanged.
 *
 * Each request is handled entirely inside one process: no handoffs.  Every new connection
 * wakes all N pollers (the listening socket is level-triggered in each), and all but one
 * find nothing to accept: spurious wakeups that spinscope should attribute to accept.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net.h"
#include "refserver.h"

static int run_child(struct rs_server *srv)
{
	/* A signalfd only reports signals of the process that created it, so each child
	 * needs its own (the blocked signal mask is inherited across fork). */
	int sfd = rs_signalfd_open();

	if (sfd < 0)
		return 1;
	int rc = event_loop_serve(srv, sfd);
	close(sfd);
	return rc;
}

int arch_n_copy_run(struct rs_server *srv)
{
	int n = srv->workers, live = 0, rc = 0;
	pid_t *pids = calloc((size_t)n, sizeof *pids);
	int sfd = rs_signalfd_open();

	if (!pids || sfd < 0) {
		free(pids);
		if (sfd >= 0)
			close(sfd);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			close(sfd);
			free(pids);
			int crc = run_child(srv);
			close(srv->listen_fd);
			exit(crc);
		}
		if (pid < 0) {
			rs_log(true, "fork");
			rc = 1;
			break;
		}
		pids[i] = pid;
		live++;
	}

	/* SIGCHLD is part of the signalfd mask, so child exits wake this loop too. */
	bool stop = rc != 0, forwarded = false;
	while (live > 0) {
		if (stop && !forwarded) {
			for (int i = 0; i < n; i++)
				if (pids[i] > 0)
					kill(pids[i], SIGTERM);
			forwarded = true;
		}
		struct pollfd pfd = { .fd = sfd, .events = POLLIN };
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			break;
		stop |= rs_signalfd_stop_requested(sfd);
		int status;
		pid_t pid;
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
			for (int i = 0; i < n; i++)
				if (pids[i] == pid)
					pids[i] = 0;
			live--;
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
				rs_log(false, "worker %d exited abnormally (status %d)", (int)pid, status);
				rc = 1;
			}
		}
	}
	free(pids);
	close(sfd);
	return rc;
}
