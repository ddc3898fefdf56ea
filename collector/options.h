/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The collector's command line: one table of options (options.c) from which getopt_long's table, the
 * defaults and the usage text are made.
 */
#ifndef SPINSCOPE_OPTIONS_H
#define SPINSCOPE_OPTIONS_H

#include <linux/types.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "cgroup.h"

#define PROG "spinscope-collector"

struct options {
	int pid;
	const char *cgroup_arg; /* --cgroup, as given */
	struct cgroup_target cgroup; /* resolved, when cgroup_arg */
	bool follow_children;
	double duration_s; /* 0: until a signal or the target exits */
	double interval_s; /* 0: no interval snapshots */
	double checkpoint_s; /* 0: the capture is written at the end only */
	const char *output;
	__u32 max_threads;
	__u32 time_sample; /* 1 call in N is timed */
	__u32 exited_rows; /* threads gone kept as rows (--exited-rows) */
	__u32 max_sockets;
	__u32 stacks_hz; /* --stacks: CPU samples per second and CPU (0: no stacks) */
	__u32 stacks_budget; /* --stacks-budget: event stacks a second, the whole target's (0: 4 x stacks_hz) */
	const char *tag_timeline; /* --tag-timeline FILE: the threads' tag changes (timeline.h), or NULL */
	bool exit_with_parent; /* --exit-with-parent */
	pid_t parent;          /* the process that started us */
	bool keep_cmdline;  /* --cmdline */
	bool keep_hostname; /* --hostname */
	bool check;
	bool json;    /* --check: the checks as JSON on stdout */
	bool runtime; /* --runtime: the target's runtime as JSON on stdout, no capture */
	int ready_fd; /* -1, or where to say "ready" once the probes are live */
	int stream_fd; /* -1, or where to write the capture so far as a line after each interval (--stream) */
	int log_fd;    /* -1, or where the collector's messages go instead of stderr (--log-fd) */
	char **command; /* `-- COMMAND [ARG...]`: run it and trace it (NULL-terminated), or NULL */
	const char *command_path; /* the command's executable, as found on $PATH (command.c) */
	bool verbose;
	bool quiet;
};

/* The options of argv, checked (and --cgroup resolved); on a usage error, the message and exit(2); on
 * --help, the usage on stdout and exit(0). */
void options_parse(int argc, char **argv, struct options *o);
/* The usage text, on out. */
void usage(FILE *out);

#endif
