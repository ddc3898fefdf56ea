// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The collector's own command (`-- COMMAND [ARG...]`): found on $PATH as execvp would, started as a fork
 * that waits on a pipe before its exec, released once the probes are live. The probes follow its PID from
 * before the exec, so the first syscall of the program it runs is counted; the fork's own last call (its
 * read of the pipe) is not one spinscope counts. A second pipe, closed by a successful exec, carries the
 * exec's errno back when it fails.
 */
#define _GNU_SOURCE /* pipe2, strchrnul */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "command.h"

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
