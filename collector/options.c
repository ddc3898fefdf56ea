// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The collector's options as one table of rows (libbpf-tools' argp rows are the model): each row its long
 * and short name, argument, parser, field, default and help. getopt_long's table, the defaults and the
 * usage text are made from it; the rules between options (options_check) follow the table.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "options.h"

/* How a row's argument is read, and the type of its field. */
enum parser {
	FLAG,         /* bool, set by the option */
	TEXT,         /* const char *, the argument as given */
	SECONDS,      /* double, a number of seconds >= 0 */
	COUNT,        /* int or __u32, an integer in [min, max] */
	POWER_OF_TWO, /* __u32, a COUNT that is a power of two */
	PID,          /* int, a process id (> 0) */
	FD,           /* int, an open file descriptor */
	HELP,         /* no field: print the usage and exit 0 */
};

struct option_row {
	const char *name;  /* --name */
	char short_name;   /* -x, or 0 for none */
	const char *arg;   /* the argument's name in the usage, or NULL: the option takes none */
	enum parser parser;
	size_t field;      /* offsetof(struct options, the field) */
	double def;        /* the default (SECONDS, COUNT, POWER_OF_TWO, FD); the help's %g shows it */
	long min, max;     /* COUNT and POWER_OF_TWO: the range */
	const char *help;  /* one line each \n, aligned under the first in the usage */
};

#define FIELD(name) offsetof(struct options, name)

/* Every option, in the usage's order: the one place an option and its default are written. */
static const struct option_row rows[] = {
	{ "pid", 'p', "PID", PID, FIELD(pid), 0, 1, INT_MAX,
	  "process to trace (all its threads, also those created later)" },
	{ "children", 'c', NULL, FLAG, FIELD(follow_children), 0, 0, 0,
	  "also trace its child processes, those running at attach and those\n"
	  "forked later (pre-forked workers, process-per-connection, n-copy)" },
	{ "cgroup", 0, "PATH", TEXT, FIELD(cgroup_arg), 0, 0, 0,
	  "instead of --pid: every process in this cgroup v2 and its descendants,\n"
	  "also those that enter it later (a systemd unit, a pod); PATH is a\n"
	  "directory of the cgroup2 mount, absolute or below it. The capture ends\n"
	  "when the cgroup is removed (an empty cgroup is not an end)" },
	{ "duration", 'd', "SEC", SECONDS, FIELD(duration_s), 0, 0, 0,
	  "stop after SEC seconds (default: until Ctrl-C or the target exits)" },
	{ "interval", 'i', "SEC", SECONDS, FIELD(interval_s), 0, 0, 0,
	  "record a snapshot of the counters every SEC seconds" },
	{ "checkpoint", 0, "SEC", SECONDS, FIELD(checkpoint_s), 10, 0, 0,
	  "rewrite the capture so far every SEC seconds (default %g; 0: only at\n"
	  "the end), so a collector killed outright loses at most SEC seconds" },
	{ "output", 'o', "FILE", TEXT, FIELD(output), 0, 0, 0,
	  "capture file (default: spinscope-PID.json, spinscope-cgroup-ID.json)" },
	{ "cmdline", 0, NULL, FLAG, FIELD(keep_cmdline), 0, 0, 0,
	  "keep the target's argument values in the capture (they may hold\n"
	  "secrets; by default only the executable and the argument count)" },
	{ "hostname", 0, NULL, FLAG, FIELD(keep_hostname), 0, 0, 0,
	  "keep this host's name in the capture (by default left out)" },
	{ "exit-with-parent", 0, NULL, FLAG, FIELD(exit_with_parent), 0, 0, 0,
	  "end the capture (and write it) if the process that started the\n"
	  "collector dies, as when `spinscope record` is killed" },
	{ "max-threads", 0, "N", COUNT, FIELD(max_threads), 16384, 16, 1 << 22,
	  "threads the maps can hold (default %g)" },
	{ "max-sockets", 0, "N", COUNT, FIELD(max_sockets), 65536, 16, 1 << 24,
	  "sockets with a request in flight (default %g)" },
	{ "exited-rows", 0, "N", COUNT, FIELD(exited_rows), 1024, 0, 1 << 22,
	  "threads gone kept as rows of their own (default %g); the rest are\n"
	  "folded by process and name (threads_folded)" },
	/* 1 call in 16 timed by default: the clock costs ~30 ns per read here, and a counted call read it
	 * twice (bench/) */
	{ "time-sample", 0, "N", POWER_OF_TWO, FIELD(time_sample), 16, 1, 1 << 16,
	  "time 1 call in N (a power of two, default %g; 1: every call): counts\n"
	  "stay exact, the on-CPU time of calls is an estimate (docs/labels.md)" },
	{ "stacks", 0, "HZ", COUNT, FIELD(stacks_hz), 0, 0, 1000,
	  "also sample the target's user stacks (with the kernel's, in syscalls):\n"
	  "HZ cpu-clock samples a second on each CPU, each tagged with what the\n"
	  "probes know of its thread, and the call sites of the patterns' own\n"
	  "events (within --stacks-budget); unwound with DWARF CFI (elfutils\n"
	  "libdw), no frame pointers needed (0: off, the default)" },
	{ "stacks-budget", 0, "N", COUNT, FIELD(stacks_budget), 0, 1, 1000000,
	  "with --stacks: event stacks a second for the whole target, shared by\n"
	  "its threads (default: 4 x HZ); the events due a stack past it go to\n"
	  "their thread's next stack, and the capture says how many" },
	{ "tag-timeline", 0, "FILE", TEXT, FIELD(tag_timeline), 0, 0, 0,
	  "with --stacks: write every change of a target thread's tags to FILE\n"
	  "(binary, for `spinscope record` to tag a runtime helper's samples;\n"
	  "a FIFO is written as the changes come: top and the exporter read one)" },
	{ "ready-fd", 0, "N", FD, FIELD(ready_fd), -1, 0, 0,
	  "once the probes are live, write one JSON line to file descriptor N\n"
	  "({\"ready\": true, ...}) and close it; closed without it on failure" },
	{ "stream", 0, "N", FD, FIELD(stream_fd), -1, 0, 0,
	  "after each --interval snapshot, write the capture so far as one line\n"
	  "of JSON to file descriptor N (the latest interval only); a reader that\n"
	  "closes it ends the capture. Without --output no file is written" },
	{ "log-fd", 0, "N", FD, FIELD(log_fd), -1, 0, 0,
	  "write the collector's messages to file descriptor N instead of stderr\n"
	  "(with a COMMAND, its stderr stays this one's)" },
	{ "check", 0, NULL, FLAG, FIELD(check), 0, 0, 0,
	  "check this host: privileges, BTF, tracefs, tracepoints, and load and\n"
	  "attach the probes (to this process); exit 0 if all pass" },
	{ "json", 0, NULL, FLAG, FIELD(json), 0, 0, 0,
	  "with --check: print the checks as JSON on stdout" },
	{ "runtime", 0, NULL, FLAG, FIELD(runtime), 0, 0, 0,
	  "with --pid: print the runtime PID runs on as JSON (the capture's\n"
	  "target.runtime) and exit, attaching nothing" },
	{ "quiet", 'q', NULL, FLAG, FIELD(quiet), 0, 0, 0,
	  "only print errors" },
	{ "verbose", 'v', NULL, FLAG, FIELD(verbose), 0, 0, 0,
	  "print libbpf's log (verifier output on load errors)" },
	{ "help", 'h', NULL, HELP, 0, 0, 0, 0,
	  "this help" },
};

#define NROWS (sizeof(rows) / sizeof(rows[0]))
/* getopt_long's value for a row without a short name: past every character. */
#define LONG_ONLY 256
/* The usage's help column: "  -p, --pid PID" padded to it. */
#define HELP_COLUMN 25

/* One row in the usage: its names, then its help, continuation lines aligned under the first. */
static void usage_row(FILE *out, const struct option_row *row)
{
	char names[64], help[1024];
	const char *line = help;

	snprintf(names, sizeof(names), "%c%c%c --%s%s%s", row->short_name ? '-' : ' ',
		 row->short_name ? row->short_name : ' ', row->short_name ? ',' : ' ', row->name,
		 row->arg ? " " : "", row->arg ? row->arg : "");
	snprintf(help, sizeof(help), row->help, row->def); /* a %g in the help is the default */
	fprintf(out, "  %-*s ", HELP_COLUMN - 3, names);
	for (const char *nl; (nl = strchr(line, '\n')); line = nl + 1)
		fprintf(out, "%.*s\n%*s", (int)(nl - line), line, HELP_COLUMN, "");
	fprintf(out, "%s\n", line);
}

void usage(FILE *out)
{
	fprintf(out,
		"usage: " PROG " --pid PID [options]\n"
		"       " PROG " --cgroup PATH [options]\n"
		"       " PROG " [options] -- COMMAND [ARG...]\n"
		"       " PROG " --check\n"
		"\n"
		"Count what a process's threads do with sockets, poll calls, futexes and the scheduler,\n"
		"and write a spinscope capture (JSON, docs/capture-format.md).\n"
		"\n"
		"With -- COMMAND the collector runs the command (on $PATH, in this environment and\n"
		"directory, with these standard streams) and traces it and its children from its first\n"
		"syscall on. Its exit ends the capture; a capture that ends first (--duration, SIGTERM)\n"
		"sends it SIGTERM (SIGINT and SIGHUP from the terminal reach it by themselves) and waits\n"
		"for it. The exit status is then the command's (128+N if signal N killed it); 127: not\n"
		"found, 126: not executable.\n"
		"\n");
	for (size_t i = 0; i < NROWS; i++)
		usage_row(out, &rows[i]);
}

static void *field_of(struct options *o, const struct option_row *row)
{
	return (char *)o + row->field;
}

/* Every field its row's default; the fields no row sets, zero. */
static void options_defaults(struct options *o)
{
	*o = (struct options){ 0 };
	for (size_t i = 0; i < NROWS; i++) {
		const struct option_row *row = &rows[i];
		__u32 count = row->def;
		int fd = row->def;

		if (row->parser == SECONDS)
			*(double *)field_of(o, row) = row->def;
		else if (row->parser == COUNT || row->parser == POWER_OF_TWO || row->parser == PID)
			memcpy(field_of(o, row), &count, sizeof(count)); /* an int or a __u32: 4 bytes either way */
		else if (row->parser == FD)
			*(int *)field_of(o, row) = fd;
	}
}

static double parse_seconds(const char *s, const char *what)
{
	char *end;
	double v = strtod(s, &end);

	if (*s == '\0' || *end != '\0' || !isfinite(v) || v < 0 || v > 1e7) {
		fprintf(stderr, PROG ": error: %s must be a number of seconds >= 0, not '%s'\n", what, s);
		exit(2);
	}
	return v;
}

static long parse_count(const char *s, const char *what, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno || v < min || v > max) {
		fprintf(stderr, PROG ": error: %s must be an integer in [%ld, %ld], not '%s'\n", what,
			min, max, s);
		exit(2);
	}
	return v;
}

/* A file descriptor given by the process that started us: it must be open. */
static int parse_fd(const char *s, const char *what)
{
	int fd = parse_count(s, what, 0, INT_MAX);

	if (fcntl(fd, F_GETFD) < 0) {
		fprintf(stderr, PROG ": error: %s %d is not an open file descriptor\n", what, fd);
		exit(2);
	}
	return fd;
}

/*
 * A count in [min, max] that is a power of two, or NULL's error and exit(2). The rules spinscope's verbs
 * check too (analyzer targets.py), in the same words: --pid and --time-sample say what they want whole.
 */
static long parse_strict(const char *s, const char *what, long min, long max, bool power_of_two)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno || v < min || v > max || (power_of_two && (v & (v - 1)))) {
		if (power_of_two)
			fprintf(stderr, PROG ": error: %s must be a power of two from %ld to %ld, not '%s'\n", what, min,
				max, s);
		else
			fprintf(stderr, PROG ": error: %s must be a positive process id, not '%s'\n", what, s);
		exit(2);
	}
	return v;
}

/* The row's argument (optarg) into its field, or the error and exit(2). */
static void parse_row(const struct option_row *row, const char *arg, struct options *o)
{
	char what[32];
	__u32 count;

	snprintf(what, sizeof(what), "--%s", row->name);
	switch (row->parser) {
	case FLAG:
		*(bool *)field_of(o, row) = true;
		break;
	case TEXT:
		*(const char **)field_of(o, row) = arg;
		break;
	case SECONDS:
		*(double *)field_of(o, row) = parse_seconds(arg, what);
		break;
	case COUNT:
	case POWER_OF_TWO:
	case PID:
		count = row->parser == COUNT ? parse_count(arg, what, row->min, row->max)
					     : parse_strict(arg, what, row->min, row->max, row->parser == POWER_OF_TWO);
		memcpy(field_of(o, row), &count, sizeof(count)); /* an int or a __u32: 4 bytes either way */
		break;
	case FD:
		*(int *)field_of(o, row) = parse_fd(arg, what);
		break;
	case HELP:
		usage(stdout);
		exit(0);
	}
}

/* getopt_long's table and short options, made from the rows. */
static void getopt_tables(struct option *longopts, char *shortopts)
{
	for (size_t i = 0; i < NROWS; i++) {
		const struct option_row *row = &rows[i];

		longopts[i] = (struct option){ row->name, row->arg ? required_argument : no_argument, NULL,
					       row->short_name ? row->short_name : LONG_ONLY + (int)i };
		if (row->short_name) {
			*shortopts++ = row->short_name;
			if (row->arg)
				*shortopts++ = ':';
		}
	}
	longopts[NROWS] = (struct option){ 0 };
	*shortopts = '\0';
}

/* The row getopt_long's value c names, or NULL (an unknown option). */
static const struct option_row *row_of(int c)
{
	if (c >= LONG_ONLY && c < LONG_ONLY + (int)NROWS)
		return &rows[c - LONG_ONLY];
	for (size_t i = 0; i < NROWS; i++)
		if (rows[i].short_name && rows[i].short_name == c)
			return &rows[i];
	return NULL;
}

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* A usage error: its message, and exit(2). */
static void usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": error: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

/* The rules between options, once all are read, as a few steps; each says its first broken rule. */

/* --check and --json, --runtime: a check of this host, or of a process's runtime, not a capture. */
static void check_host_mode(const struct options *o)
{
	if (o->json && !o->check)
		usage_error("--json goes with --check");
	if (o->cgroup_arg && o->check)
		usage_error("--check checks this host and takes no --cgroup");
	if (o->runtime && (!o->pid || o->cgroup_arg || o->check || o->command))
		usage_error("--runtime goes with --pid alone");
}

/* -- COMMAND: a target of its own (what it forks is its work too, as with perf record -- COMMAND). */
static void check_command(struct options *o)
{
	if (!o->command)
		return;
	if (!o->command[0])
		usage_error("-- must be followed by the command to run");
	if (o->pid || o->cgroup_arg || o->check)
		usage_error("-- COMMAND goes without %s: the command is the target",
			    o->pid ? "--pid" : o->cgroup_arg ? "--cgroup" : "--check");
	o->follow_children = true;
}

/* Exactly one target: a PID (with or without its children), a cgroup, a command, or --check. */
static void check_target(const struct options *o)
{
	/* A cgroup's processes' children start in it (and a PID's cgroup may hold others): one target. */
	if (o->cgroup_arg && (o->pid || o->follow_children))
		usage_error("--cgroup goes without %s: it traces every process in the cgroup, children included",
			    o->pid ? "--pid" : "--children");
	if (!o->pid && !o->cgroup_arg && !o->check && !o->command) {
		fprintf(stderr, PROG ": error: --pid PID, --cgroup PATH or -- COMMAND is required (or --check)\n");
		usage(stderr);
		exit(2);
	}
}

static void resolve_cgroup(struct options *o)
{
	char err[PATH_MAX + 256];

	if (o->cgroup_arg && cgroup_resolve(o->cgroup_arg, &o->cgroup, err, sizeof(err)) != 0)
		usage_error("%s", err);
}

/* The values a row's parser cannot judge alone: a file name, the smallest periods, --stream's needs. */
static void check_outputs(struct options *o)
{
	if (o->output && !*o->output)
		usage_error("--output must name a file, not ''");
	if (o->checkpoint_s > 0 && o->checkpoint_s < 0.1)
		usage_error("--checkpoint must be at least 0.1 s (or 0)");
	if (o->interval_s > 0 && o->interval_s < 0.01)
		usage_error("--interval must be at least 0.01 s");
	if (o->tag_timeline && !*o->tag_timeline)
		usage_error("--tag-timeline must name a file, not ''");
	if (o->tag_timeline && !o->stacks_hz)
		usage_error("--tag-timeline needs --stacks HZ (it tags the stacks' threads)");
	if (o->stacks_budget && !o->stacks_hz)
		usage_error("--stacks-budget needs --stacks HZ");
	if (!o->stacks_budget)
		o->stacks_budget = 4 * o->stacks_hz;
	if (o->stream_fd >= 0 && o->interval_s <= 0)
		usage_error("--stream needs --interval SEC (a line per interval)");
	if (o->stream_fd >= 0 && !o->output)
		o->checkpoint_s = 0; /* the stream is the only output: no file to checkpoint */
}

static void options_check(struct options *o)
{
	check_host_mode(o);
	check_command(o);
	check_target(o);
	resolve_cgroup(o);
	check_outputs(o);
}

void options_parse(int argc, char **argv, struct options *o)
{
	struct option longopts[NROWS + 1];
	char shortopts[2 * NROWS + 2];
	const char *last_arg = NULL;
	int c;

	options_defaults(o);
	/* '+': options end at the first word that is not one (a COMMAND's own options are its own) */
	shortopts[0] = '+';
	getopt_tables(longopts, shortopts + 1);
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		const struct option_row *row = row_of(c);

		if (!row) { /* getopt_long has said what is wrong */
			usage(stderr);
			exit(2);
		}
		parse_row(row, optarg, o);
		last_arg = optarg;
	}
	/* What follows a `--` (not an option's argument, as in `-o --`) is the command. */
	if (optind > 1 && !strcmp(argv[optind - 1], "--") && argv[optind - 1] != last_arg)
		o->command = &argv[optind];
	else if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	o->parent = getppid();
	options_check(o);
}
