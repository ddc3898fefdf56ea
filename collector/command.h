/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `spinscope-collector [options] -- COMMAND [ARG...]`: the collector starts the command itself, held
 * before its exec until the probes are live, so the command's first syscall is counted (command.c).
 * First the command's process (find, start, release, wait); then its part in a session, the steps main()
 * takes: begin, go, reap once it has ended the capture, say how it ended, end it, its exit status.
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
	int exec_err;       /* once released: its exec's -errno (0: the exec succeeded) */
	int status;         /* its wait status, once reaped (-1 until then) */
};

/* A command not started: main()'s, when there is no `-- COMMAND`. */
#define COMMAND_INIT { .go_fd = -1, .exec_fd = -1, .status = -1 }

/* c->path from c->argv[0]. 0, or -ENOENT (not found), -EACCES (not executable), -EISDIR. */
int command_find(struct command *c);

/*
 * Start the command's process, held before its exec: a fork that waits for command_release(). It keeps
 * this process's environment, working directory, signal mask and dispositions and standard streams;
 * the descriptors in close_fds (those given to the collector, ended by -1) are closed in it. 0 or -errno.
 */
int command_start(struct command *c, const int *close_fds);

/* Let it exec. 0 once the exec succeeded (its first syscall comes after), or -errno of the exec (kept in
 * c->exec_err). */
int command_release(struct command *c);

/* A command not yet released exits without running (127, unseen); either way it is reaped. */
void command_abandon(struct command *c);

/* Its exit status as a shell says it: its code, or 128+N if signal N killed it. */
int command_exit_status(const struct command *c);

/* Wait for it to exit, and reap it. */
void command_wait(struct command *c);

/* Reap it if it has exited (true), without waiting. */
bool command_reaped(struct command *c);

/* The command in a session. */
struct options;
struct session;

/*
 * Found and started, held before its exec, the collector's descriptors (--ready-fd, --stream, --log-fd)
 * closed in it; on success it is the target (o->pid, o->command_path). Called first, so that it gets this
 * process's signal dispositions, mask and stderr before ours change. 0, or -errno (command_failed says it).
 */
int command_begin(struct command *c, struct options *o);

/* Say why the command could not start (to stderr); the exit status that says so: a shell's when it was not
 * found or is not executable, 1 when starting it failed (pipe2, fork). */
int command_failed(const struct command *c, int err);

/* The probes are live: let it exec. 0, or fail() when the exec failed. */
int command_go(struct command *c, struct session *s);

/* After the record loop: the command's exit ended the capture, so reap it (its status, for the report). */
void command_ended_capture(struct command *c, const struct session *s);

/* Say how the command ended, killed or exited, its status, and after how long (however the capture ended;
 * nothing if it was not reaped). */
void command_say_exit(const struct command *c, double after_s);

/*
 * The capture is written (or failed): a command that outlived it is asked to end, waited for and reaped,
 * with the probes detached first; one never released exits without running. The session stays to be ended.
 */
void command_finish(struct command *c, struct session *s, const struct options *o);

/* The collector's exit status with a command: a shell's if it could not run, its own once it ran and the
 * capture was written, else 1 (ret, the session's: 0 or -errno). */
int command_session_status(const struct command *c, int ret);

#endif
