// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The collector's own command (`-- COMMAND [ARG...]`): found on $PATH as execvp would, started as a fork
 * that waits on a pipe before its exec, released once the probes are live. The probes follow its PID from
 * before the exec, so the first syscall of the program it runs is counted; the fork's own last call (its
 * read of the pipe) is not one spinscope counts. A second pipe, closed by a successful exec, carries the
 * exec's errno back when it fails.
 *
 * Then the command's part in a session (main.c): started first, released once the probes are live, the
 * capture's end when it exits, the signals that end the capture passed on to it, asked to end when it
 * outlives the capture, and its exit status the collector's.
 */
#define _GNU_SOURCE /* pipe2, strchrnul */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "command.h"
#include "options.h"
#include "procfs.h"
#include "session.h"

/* What execve would say of path: 0, -ENOENT, -EISDIR or -EACCES (a file we may not execute). */
static int runnable(const char *path)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return errno == ENOENT || errno == ENOTDIR ? -ENOENT : -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (!S_ISREG(st.st_mode) || access(path, X_OK) != 0)
		return -EACCES;
	return 0;
}

int command_find(struct command *c)
{
	const char *name = c->argv[0], *dirs = getenv("PATH");
	int err, seen = -ENOENT;

	if (!name || !*name)
		return -ENOENT;
	if (strchr(name, '/')) {
		if ((size_t)snprintf(c->path, sizeof(c->path), "%s", name) >= sizeof(c->path))
			return -ENAMETOOLONG;
		return runnable(c->path);
	}
	if (!dirs)
		dirs = "/bin:/usr/bin"; /* glibc's execvp without $PATH (confstr _CS_PATH) */
	for (const char *dir = dirs, *end; ; dir = end + 1) {
		end = strchrnul(dir, ':');
		/* an empty entry is the working directory, as for execvp */
		if ((size_t)snprintf(c->path, sizeof(c->path), "%.*s%s%s", (int)(end - dir), dir, end > dir ? "/" : "",
				     name) < sizeof(c->path)) {
			err = runnable(c->path);
			if (err == 0)
				return 0;
			if (err != -ENOENT) /* found, but not runnable: say so unless a later entry is */
				seen = -EACCES;
		}
		if (!*end)
			break;
	}
	return seen;
}

int command_start(struct command *c, const int *close_fds)
{
	int go[2], exec_status[2], err;
	char byte;

	c->status = -1;
	if (pipe2(go, O_CLOEXEC) != 0)
		return -errno;
	if (pipe2(exec_status, O_CLOEXEC) != 0) {
		err = -errno;
		close(go[0]);
		close(go[1]);
		return err;
	}
	c->pid = fork();
	if (c->pid < 0) {
		err = -errno;
		close(go[0]);
		close(go[1]);
		close(exec_status[0]);
		close(exec_status[1]);
		c->pid = 0;
		return err;
	}
	if (c->pid == 0) {
		/* Only async-signal-safe calls from here to the exec. */
		close(go[1]);
		close(exec_status[0]);
		for (const int *fd = close_fds; *fd >= 0; fd++)
			close(*fd);
		/* EOF without the byte: the collector failed or died before the probes were live. */
		for (ssize_t n; (n = read(go[0], &byte, 1)) != 1;)
			if (n == 0 || errno != EINTR)
				_exit(EXIT_NOT_FOUND);
		execv(c->path, c->argv);
		err = errno;
		if (write(exec_status[1], &err, sizeof(err)) < 0)
			_exit(EXIT_NOT_EXECUTABLE);
		_exit(err == ENOENT ? EXIT_NOT_FOUND : EXIT_NOT_EXECUTABLE);
	}
	close(go[0]);
	close(exec_status[1]);
	c->go_fd = go[1];
	c->exec_fd = exec_status[0];
	return 0;
}

void command_wait(struct command *c)
{
	while (c->status < 0 && waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR)
		;
}

int command_release(struct command *c)
{
	int err = 0;
	ssize_t n;

	c->released = true;
	if (write(c->go_fd, "g", 1) != 1)
		err = -errno;
	close(c->go_fd);
	c->go_fd = -1;
	if (err == 0) {
		do
			n = read(c->exec_fd, &err, sizeof(err));
		while (n < 0 && errno == EINTR);
		err = n == 0 ? 0 : n == sizeof(err) ? -err : -EIO;
	}
	close(c->exec_fd);
	c->exec_fd = -1;
	c->exec_err = err;
	if (err)
		command_wait(c); /* it exits at once */
	return err;
}

void command_abandon(struct command *c)
{
	if (!c->pid)
		return;
	if (c->go_fd >= 0)
		close(c->go_fd);
	if (c->exec_fd >= 0)
		close(c->exec_fd);
	c->go_fd = c->exec_fd = -1;
	command_wait(c);
}

bool command_reaped(struct command *c)
{
	int status;

	if (c->status >= 0)
		return true;
	if (waitpid(c->pid, &status, WNOHANG) != c->pid)
		return false;
	c->status = status;
	return true;
}

int command_exit_status(const struct command *c)
{
	if (WIFEXITED(c->status))
		return WEXITSTATUS(c->status);
	if (WIFSIGNALED(c->status))
		return 128 + WTERMSIG(c->status);
	return 1;
}

int command_begin(struct command *c, struct options *o)
{
	int close_fds[4], n = 0, err;

	c->argv = o->command;
	/* the descriptors given to the collector are not the command's */
	for (int i = 0, given[] = { o->ready_fd, o->stream_fd, o->log_fd }; i < 3; i++)
		if (given[i] >= 0)
			close_fds[n++] = given[i];
	close_fds[n] = -1;
	err = command_find(c);
	if (!err)
		err = command_start(c, close_fds);
	if (err)
		return err;
	o->pid = c->pid;
	o->command_path = c->path;
	return 0;
}

int command_failed(const struct command *c, int err)
{
	if (err == -ENOENT || err == -EACCES || err == -EISDIR || err == -ENAMETOOLONG) {
		/* As a shell says it: a name looked up on $PATH is "not found", a path names a file */
		fprintf(stderr, PROG ": error: cannot run %s: %s\n", c->argv[0],
			err == -ENOENT && !strchr(c->argv[0], '/') ? "command not found" : strerror(-err));
		return err == -ENOENT ? EXIT_NOT_FOUND : EXIT_NOT_EXECUTABLE;
	}
	fprintf(stderr, PROG ": error: cannot start %s: %s\n", c->argv[0], strerror(-err));
	return 1;
}

int command_go(struct command *c, struct session *s)
{
	int err = command_release(c);

	return err ? fail(s, err, "cannot run %s: %s", c->path, strerror(-err)) : 0;
}

void command_ended_capture(struct command *c, const struct session *s)
{
	if (c->pid && !strcmp(s->meta.end_reason, "target-exited"))
		command_wait(c); /* it has exited */
}

void command_say_exit(const struct command *c, double after_s)
{
	if (c->status < 0) /* never released, or not reaped */
		return;
	if (WIFSIGNALED(c->status))
		fprintf(stderr, PROG ": the command (PID %d) was killed by signal %d (SIG%s) after %.1f s: status %d\n",
			c->pid, WTERMSIG(c->status), sigabbrev_np(WTERMSIG(c->status)) ?: "?", after_s,
			command_exit_status(c));
	else
		fprintf(stderr, PROG ": the command (PID %d) exited with status %d after %.1f s\n", c->pid,
			command_exit_status(c), after_s);
}

/* The signals that ended the capture or came since, passed on to the command: SIGTERM, which is sent to one
 * process. Not SIGINT and SIGHUP: the terminal sends them (Ctrl-C, a hangup) to its whole foreground group,
 * the command included, and a second SIGINT means "now, without cleaning up" to many servers. */
static void pass_signals_on(const struct session *s, const struct command *c)
{
	struct signalfd_siginfo si;

	while (read(s->signal_fd, &si, sizeof(si)) == sizeof(si))
		if (si.ssi_signo == SIGTERM)
			kill(c->pid, SIGTERM);
}

/*
 * Has the process that started us (--exit-with-parent) died? Its death's SIGHUP (PR_SET_PDEATHSIG) comes
 * when the thread that started us exits, and while its other threads are still exiting we are theirs:
 * getppid() still says the parent (1 run in 5 of a multi-threaded spinscope killed outright). So: a
 * parent still ours is gone when its pidfd says so within a second.
 */
static bool parent_gone(const struct options *o)
{
	struct pollfd fd = { -1, POLLIN, 0 };
	bool gone;

	if (!o->exit_with_parent)
		return false;
	if (getppid() != o->parent)
		return true;
	fd.fd = proc_pidfd(o->parent);
	if (fd.fd < 0)
		return errno == ESRCH;
	gone = poll(&fd, 1, 1000) == 1;
	close(fd.fd);
	return gone;
}

/*
 * The capture is written (or failed) and the probes detached: wait for the command. If it outlived the
 * capture, it is asked to end with SIGTERM, as perf record does: at --duration, when the stream's reader
 * has gone, when the process that started us died (--exit-with-parent), or on a SIGTERM (passed on).
 * After a SIGINT or a SIGHUP it is only waited for: it had its own (pass_signals_on).
 */
static void command_end(struct command *c, struct session *s, const struct options *o)
{
	bool said = false;

	if (command_reaped(c))
		return;
	if (strcmp(s->meta.end_reason, "signal") != 0 || parent_gone(o))
		kill(c->pid, SIGTERM);
	for (;;) {
		struct pollfd fds[2] = { { s->signal_fd, POLLIN, 0 }, { s->target_fd, POLLIN, 0 } };

		pass_signals_on(s, c);
		if (command_reaped(c))
			return;
		/* Said once it has taken a second: most commands end at once. */
		if (poll(fds, 2, said || o->quiet ? -1 : 1000) == 0) {
			fprintf(stderr, PROG ": the capture has ended; waiting for the command (PID %d) to exit\n",
				c->pid);
			said = true;
		}
	}
}

void command_finish(struct command *c, struct session *s, const struct options *o)
{
	if (c->released && c->status < 0) {
		session_detach(s);
		command_end(c, s, o);
	} else {
		command_abandon(c);
	}
}

int command_session_status(const struct command *c, int ret)
{
	if (c->exec_err)
		return c->exec_err == -ENOENT ? EXIT_NOT_FOUND : EXIT_NOT_EXECUTABLE;
	if (c->released && ret == 0)
		return command_exit_status(c);
	return ret ? 1 : 0;
}
