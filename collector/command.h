/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `spinscope-collector [options] -- COMMAND [ARG...]`: the collector starts the command itself, held
 * before its exec until the probes are live, so the command's first syscall is counted (command.c).
 */
#ifndef SPINSCOPE_COMMAND_H
#define SPINSCOPE_COMMAND_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A shell's exit statuses for a command that cannot run: not found, found but not executable. */
#define EXIT_NOT_FOUND 127
#define EXIT_NOT_EXECUTABLE 126

struct command {
	char **argv;        /* the command and its arguments, as given */
	char path[PATH_MAX]; /* argv[0] found as execvp finds it (a name without '/' on $PATH) */
	pid_t pid;          /* its process, held before the exec until released (0: not started) */
	int go_fd;          /* written once to release it; closed without a byte: it exits unrun */
	int exec_fd;        /* its exec's errno, or EOF once the exec succeeded (close-on-exec) */
	bool released;
	int status;         /* its wait status, once reaped (-1 until then) */
};

/* c->path from c->argv[0]. 0, or -ENOENT (not found), -EACCES (not executable), -EISDIR. */
int command_find(struct command *c);

/*
 * Start the command's process, held before its exec: a fork that waits for command_release(). It keeps
 * this process's environment, working directory, signal mask and dispositions and standard streams;
 * the descriptors in close_fds (those given to the collector, ended by -1) are closed in it. 0 or -errno.
 */
int command_start(struct command *c, const int *close_fds);

/* Let it exec. 0 once the exec succeeded (its first syscall comes after), or -errno of the exec. */
int command_release(struct command *c);

/* A command not yet released exits without running (127, unseen); either way it is reaped. */
void command_abandon(struct command *c);

/* Its exit status as a shell says it: its code, or 128+N if signal N killed it. */
int command_exit_status(const struct command *c);

/* Wait for it to exit, and reap it. */
void command_wait(struct command *c);

/* Reap it if it has exited (true), without waiting. */
bool command_reaped(struct command *c);

#endif
