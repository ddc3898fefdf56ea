// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * spinscope-collector: attach spinscope's BPF programs to one process (and optionally its forked
 * children) or to a cgroup v2 (every process in it, whenever it entered), let the kernel aggregate, and
 * write one capture when the capture ends: at --duration, on SIGINT/SIGTERM/SIGHUP, or when the target
 * exits (the process, or the cgroup is removed). Once the probes are attached, every way out
 * writes the capture; --ready-fd tells a parent the moment they are. With `-- COMMAND` the target is a
 * command the collector starts itself, held before its exec until the probes are live (command.c).
 *
 * main() is a session: start (host checks, target, output, load, attach), go, record, write, end; every
 * way out of it goes through session_end(), the one clean-up path. The options are options.c's table;
 * attaching is attach.c, the record loop and the final write record.c, where the capture goes output.c,
 * what a session holds session.c/session.h, and the command's part (started first, released at go,
 * ended after the capture) command.c.
 *
 * Exit status: 0 capture written (or --check passed, or --runtime printed), 1 capture could not be made (or
 * the runtime could not be read), 2 usage error. With a COMMAND, once it ran: its exit status (128+N if
 * signal N killed it), like time(1) and perf record; 1 if the capture could not be made; 127 and 126 if it
 * could not run (not found, not executable).
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "capture.h"
#include "cgroup.h"
#include "checks.h"
#include "command.h"
#include "options.h"
#include "procfs.h"
#include "session.h"

static bool verbose_libbpf;

/* Our own one-line errors say what failed; -v shows libbpf's detail (the verifier log on load). */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	(void)level;
	if (!verbose_libbpf)
		return 0;
	return vfprintf(stderr, fmt, args);
}

static void iso_now(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	char base[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%.20s.%03dZ", base, (int)(ts.tv_nsec / 1000000));
}

/* A name the target chose, fit for a terminal: every byte outside printable ASCII as '?' (it may hold
 * escape sequences). The capture keeps the name itself. */
static const char *printable(const char *name, char *buf, size_t len)
{
	size_t i;

	for (i = 0; name[i] && i + 1 < len; i++)
		buf[i] = name[i] >= 0x20 && name[i] < 0x7f ? name[i] : '?';
	buf[i] = '\0';
	return buf;
}

/* The target is a live user process (PID mode). 0, or fail(). */
static int check_target(struct session *s, const struct options *o)
{
	enum proc_kind kind;

	if (kill(o->pid, 0) != 0 && errno == ESRCH)
		return fail(s, -ESRCH, "no process with PID %d", o->pid);
	if (proc_kind(o->pid, &kind) != 0)
		kind = PROC_USER; /* it may have exited just now: watching it will say so */
	if (kind == PROC_KERNEL_THREAD)
		return fail(s, -EINVAL, "PID %d is a kernel thread: spinscope traces user processes", o->pid);
	if (kind == PROC_EXITED)
		return fail(s, -ESRCH, "PID %d has exited (a zombie, not yet reaped by its parent)", o->pid);
	return 0;
}

/* From here on SIGINT/SIGTERM/SIGHUP are read from a signalfd: they end the capture cleanly. 0, or fail(). */
static int catch_end_signals(struct session *s, const struct options *o)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	s->signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (s->signal_fd < 0)
		return fail(s, -errno, "signalfd: %s", strerror(errno));
	/* A parent killed outright (SIGKILL, OOM) cannot forward a signal: the kernel sends SIGHUP, which ends
	 * the capture like any other. If it died before this line, ours is now someone else's child. */
	if (o->exit_with_parent && (prctl(PR_SET_PDEATHSIG, SIGHUP) != 0 || getppid() != o->parent))
		return fail(s, -ESRCH, "the process that started the collector has exited");
	return 0;
}

/* What ends the capture with the target: its pidfd, or the cgroup's events file. 0, or fail(). */
static int watch_target(struct session *s, const struct options *o)
{
	if (o->cgroup_arg) {
		/* The capture ends when the cgroup is removed; an empty cgroup is not an end (processes may come). */
		s->target_fd = cgroup_watch(o->cgroup.dir);
		if (s->target_fd < 0)
			return fail(s, s->target_fd, "cannot watch cgroup %s: %s", o->cgroup.path,
				    s->target_fd == -ENOENT ? "it was removed before the probes were attached"
							    : strerror(-s->target_fd));
	} else {
		s->target_fd = proc_pidfd(o->pid);
		if (s->target_fd < 0)
			return fail(s, -errno, "cannot watch process %d: %s", o->pid,
				    errno == ESRCH ? "it exited before the probes were attached" : strerror(errno));
	}
	return 0;
}

/* The capture's settings and its target's name, executable and arguments. 0, or fail(). */
static int describe_capture(struct session *s, const struct options *o)
{
	s->meta.pid = o->pid;
	s->meta.follow_children = o->follow_children;
	s->meta.started = o->command != NULL;
	s->meta.interval_s = o->interval_s;
	s->meta.checkpoint_s = o->checkpoint_s;
	s->meta.max_threads = o->max_threads;
	s->meta.exited_rows = o->exited_rows;
	if (exited_init(&s->exited, o->exited_rows))
		return fail(s, -ENOMEM, "out of memory");
	s->meta.time_sample = o->time_sample;
	s->meta.max_sockets = o->max_sockets;
	s->meta.keep_cmdline = o->keep_cmdline;
	s->meta.keep_hostname = o->keep_hostname;
	if (o->cgroup_arg) {
		/* No one process: named after the cgroup, no executable, no arguments. */
		s->meta.cgroup = &o->cgroup;
		snprintf(s->meta.comm, sizeof(s->meta.comm), "%s", o->cgroup.name);
	} else if (o->command) {
		/* Not yet exec'd: described as the exec will make it (the name the kernel gives it, the file it
		 * runs, the arguments it is given), which target.execs then shows it did. */
		const char *base = strrchr(o->command_path, '/');
		size_t len = 0;
		char *p;

		snprintf(s->meta.comm, 16, "%s", base ? base + 1 : o->command_path); /* comm: 15 bytes */
		if (!realpath(o->command_path, s->meta.exe))
			snprintf(s->meta.exe, sizeof(s->meta.exe), "%s", o->command_path);
		for (char **arg = o->command; *arg; arg++)
			len += strlen(*arg) + 1;
		s->meta.cmdline = p = malloc(len);
		if (!p)
			return fail(s, -ENOMEM, "out of memory");
		for (char **arg = o->command; *arg; arg++)
			p = stpcpy(p, *arg) + 1;
		s->meta.cmdline_len = len;
	} else {
		proc_comm(o->pid, s->meta.comm, sizeof(s->meta.comm));
		proc_exe(o->pid, s->meta.exe, sizeof(s->meta.exe));
		s->meta.cmdline = proc_cmdline(o->pid, &s->meta.cmdline_len);
		know_runtime(s);
	}
	return 0;
}

/* Everything up to live probes: the host, the target, the output file, the probes. 0, or fail(). */
static int session_start(struct session *s, const struct options *o)
{
	struct check checks[HOST_CHECKS];
	const struct check *failed = host_checks(checks);
	struct stat st;
	int ret;

	if (failed)
		return fail(s, -EPERM, "%s; %s", failed->detail, failed->remedy);
	if (!o->cgroup_arg && (ret = check_target(s, o)))
		return ret;
	if (o->output && stat(o->output, &st) == 0 && S_ISDIR(st.st_mode))
		return fail(s, -EISDIR, "cannot write %s: it is a directory (name a file)", o->output);
	if ((ret = catch_end_signals(s, o)) || (ret = watch_target(s, o)) || (ret = describe_capture(s, o)))
		return ret;
	if (o->output && (ret = try_output(s, o))) /* without: --stream alone, no file */
		return ret;
	return session_attach(s, o);
}

/* Say "ready" on --ready-fd: one JSON line, then the descriptor is closed. */
static void announce_ready(int fd, const struct session *s, double attach_s)
{
	char line[256];
	int len;

	if (fd < 0)
		return;
	len = snprintf(line, sizeof(line), "{\"ready\": true, \"pid\": %d, \"probes\": %zu, \"attach_s\": %.6f}\n",
		       s->meta.pid, s->nlinks, attach_s);
	if (write(fd, line, len) != len && errno != EPIPE)
		fprintf(stderr, PROG ": warning: --ready-fd %d: %s\n", fd, strerror(errno));
	close(fd);
}

/* `15 processes, 30 threads, ` as the report counts them (thread rows, gone ones included; the live
 * threads alone undercount forked children that exited), or "" if they cannot be counted. */
static const char *rows_phrase(const struct snapshot *snap, char *buf, size_t len)
{
	size_t threads, processes;

	if (capture_rows(snap, &threads, &processes) != 0)
		return "";
	snprintf(buf, len, "%zu process%s, %zu thread%s, ", processes, processes == 1 ? "" : "es", threads,
		 threads == 1 ? "" : "s");
	return buf;
}

/* How the command ended (however the capture did), or what ended the capture when the target did: the
 * cgroup removed, the process exited. */
static void say_command_or_target_end(const struct session *s, const struct options *o, const struct command *c)
{
	char path[256];

	if (o->command) { /* however the capture ended: the command has been waited for (command_finish) */
		command_say_exit(c, !strcmp(s->meta.end_reason, "target-exited")
					    ? s->meta.duration_s : (monotonic_ns() - s->meta.start_mono_ns) / 1e9);
		return;
	}
	if (strcmp(s->meta.end_reason, "target-exited") != 0)
		return;
	if (o->cgroup_arg)
		fprintf(stderr, PROG ": target cgroup %s was removed after %.1f s\n",
			printable(o->cgroup.path, path, sizeof(path)), s->meta.duration_s);
	else
		fprintf(stderr, PROG ": target PID %d exited after %.1f s\n", o->pid, s->meta.duration_s);
}

/* A map that was full dropped what it could not hold: the counts are lower bounds, and by how much. */
static void warn_drops(const struct global_stats *g)
{
	if (0
#define X(name) || g->drops_##name
	    SPINSCOPE_DROPS(X)
#undef X
	) {
		fprintf(stderr, PROG ": warning: maps were full, counts are lower bounds; dropped:");
#define X(name) fprintf(stderr, " " #name " %llu", (unsigned long long)g->drops_##name);
		SPINSCOPE_DROPS(X)
#undef X
		fputc('\n', stderr);
	}
}

/* The capture is written: what ended it, what it dropped, and the closing line with its counts. */
static void report_written(const struct session *s, const struct options *o, const struct command *c)
{
	char rows[96];
	unsigned long long requests = s->final.requests.sum.count;

	if (o->quiet)
		return;
	say_command_or_target_end(s, o, c);
	warn_drops(&s->final.globals);
	fprintf(stderr, PROG ": %s%s: %s%llu request%s, %.1f s (%s)\n", o->output ? "wrote " : "",
		o->output ? o->output : "streamed", rows_phrase(&s->final, rows, sizeof(rows)), requests,
		requests == 1 ? "" : "s", s->meta.duration_s, s->meta.end_reason);
}

/* --check's last two checks: loading the probes, and attaching them to this process. */
static void check_probes(struct options *o, struct check *load, struct check *attach)
{
	struct session s = SESSION_INIT;
	__u64 begin = monotonic_ns();
	int ret;

	o->pid = getpid();
	s.meta.pid = o->pid;
	ret = session_attach(&s, o);
	if (!s.links) /* failed before attaching: opening or loading */
		check_fail(load, "run with -v for libbpf's log (the verifier's output)", "%s", s.error);
	else
		check_pass(load, "the BPF programs pass the verifier on this kernel");
	if (s.links && ret)
		check_fail(attach, "see the kernel's message above", "%s", s.error);
	else if (s.links)
		check_pass(attach, "%zu probes live in %.3f s", s.nlinks, (monotonic_ns() - begin) / 1e9);
	else
		check_skip(attach, "the programs did not load");
	session_end(&s);
}

/* --check: the host checks, then loading and attaching the probes to this process. 0 if all passed, or 1. */
static int run_check(struct options *o)
{
	struct check checks[HOST_CHECKS + 2];
	struct check *load = &checks[HOST_CHECKS], *attach = &checks[HOST_CHECKS + 1];
	const struct check *failed = NULL;
	size_t n = HOST_CHECKS + 2;

	*load = (struct check){ .name = "probes load" };
	*attach = (struct check){ .name = "probes attach" };
	if (host_checks(checks)) {
		check_skip(load, "the host checks above failed");
		check_skip(attach, "the host checks above failed");
	} else {
		check_probes(o, load, attach);
	}
	for (size_t i = 0; i < n && !failed; i++)
		if (!checks[i].ok && !checks[i].optional)
			failed = &checks[i];
	if (o->json) {
		checks_print_json(stdout, checks, n);
		return failed ? 1 : 0;
	}
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, PROG ": check %s: %s: %s%s%s\n", checks[i].name,
			checks[i].ok ? "ok" : checks[i].skipped ? "skipped" : checks[i].optional ? "off" : "FAILED",
			checks[i].detail,
			checks[i].remedy[0] && !checks[i].ok ? "; " : "", checks[i].ok ? "" : checks[i].remedy);
	if (failed)
		fprintf(stderr, PROG ": error: check failed: %s\n", failed->detail);
	else
		fprintf(stderr, PROG ": check passed: the probes load and attach on this kernel\n");
	return failed ? 1 : 0;
}

/* The collector's messages to --log-fd instead of stderr: the command started before keeps this stderr. */
static void log_to(int fd)
{
	if (fd < 0)
		return;
	fflush(stderr);
	if (dup2(fd, STDERR_FILENO) < 0)
		fprintf(stderr, PROG ": warning: --log-fd %d: %s\n", fd, strerror(errno));
	close(fd);
}

/* With --stream and no --output no file is written; without either, spinscope-PID.json (or -cgroup-ID). */
static void default_output(struct options *o, char *buf, size_t len)
{
	if (o->output || o->stream_fd >= 0)
		return;
	if (o->cgroup_arg)
		snprintf(buf, len, "spinscope-cgroup-%llu.json", (unsigned long long)o->cgroup.id);
	else
		snprintf(buf, len, "spinscope-%d.json", o->pid);
	o->output = buf;
}

/* The probes are live: what the target did before was not counted, what it does from now on is. */
static void say_live(const struct session *s, const struct options *o, __u64 launched)
{
	double attach_s = (s->meta.start_mono_ns - launched) / 1e9;
	char name[256];

	if (!o->quiet && o->cgroup_arg)
		fprintf(stderr, PROG ": attached to cgroup %s (id %llu): %zu probes live in %.3f s\n",
			printable(o->cgroup.path, name, sizeof(name)), (unsigned long long)o->cgroup.id, s->nlinks,
			attach_s);
	else if (!o->quiet)
		fprintf(stderr, PROG ": %s PID %d (%s): %zu probes live in %.3f s\n",
			o->command ? "started" : "attached to", o->pid, printable(s->meta.comm, name, sizeof(name)),
			s->nlinks, attach_s);
	/* What this kernel cannot do is said even with --quiet: the capture lacks it (and says so too). */
	if (!s->meta.features.bpf_loop)
		fprintf(stderr, PROG ": warning: this kernel lacks bpf_loop (Linux 5.17): HTTP/2 connections' requests "
				"are counted by exchange, not by stream\n");
	if (s->meta.stacks_left_out)
		fprintf(stderr, PROG ": warning: this kernel's perf-event programs cannot read a hash map that is not "
				"preallocated (Linux 6.1): recording without --stacks\n");
	announce_ready(o->ready_fd, s, attach_s);
}

/* The capture starts: its clock, the command let run (it execs now), and whoever waits for it told. 0, or
 * fail(). */
static int session_go(struct session *s, const struct options *o, struct command *c, __u64 launched)
{
	int ret;

	s->meta.start_mono_ns = monotonic_ns();
	iso_now(s->meta.start_time, sizeof(s->meta.start_time));
	intervals_init(&s->intervals, s->meta.start_mono_ns);
	if (o->command && (ret = command_go(c, s)))
		return ret;
	say_live(s, o, launched);
	return 0;
}

/* --runtime: the runtime PID runs on (runtime.c), as the capture's target.runtime says it, one JSON line on
 * stdout: the one reading of it, which the runtime stacks helper's caller takes too (tracing/stacks_helper.py).
 * 0, or 1 when the process's maps cannot be read. */
static int print_runtime(const struct options *o)
{
	struct target_runtime rt = { 0 };
	int ret = runtime_detect("/proc", o->pid, &rt);
	json_object *doc;

	if (ret) {
		fprintf(stderr, PROG ": error: cannot read the runtime of PID %d: %s\n", o->pid, strerror(-ret));
		return 1;
	}
	doc = capture_runtime(&rt);
	printf("%s\n", json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN));
	json_object_put(doc);
	return 0;
}

int main(int argc, char **argv)
{
	__u64 launched = monotonic_ns();
	struct session s = SESSION_INIT;
	struct command command = COMMAND_INIT;
	char default_out[64];
	struct options o;
	int ret = 0;

	options_parse(argc, argv, &o);
	verbose_libbpf = o.verbose;
	libbpf_set_print(libbpf_print);
	if (o.check)
		return run_check(&o);
	if (o.runtime)
		return print_runtime(&o);
	if (o.command) /* first, before this process's signal dispositions, mask and stderr change */
		ret = command_begin(&command, &o);
	log_to(o.log_fd);
	if (ret)
		return command_failed(&command, ret);
	/* A reader gone is EPIPE, not death: the stream's ends the capture cleanly; our messages' (the spinscope
	 * that started us killed outright) leaves the capture to be written and a command to be ended. */
	signal(SIGPIPE, SIG_IGN);
	default_output(&o, default_out, sizeof(default_out));

	ret = session_start(&s, &o);
	if (ret == 0)
		ret = session_go(&s, &o, &command, launched);
	if (ret == 0) {
		session_record(&s, &o);
		command_ended_capture(&command, &s);
		ret = session_write(&s, &o);
	}
	if (ret != 0)
		fprintf(stderr, PROG ": error: %s\n", s.error);
	/* A command still running is waited for first (said after a second): the closing line, "wrote",
	 * comes once there is nothing more to wait for, with how the command ended. */
	command_finish(&command, &s, &o);
	if (ret == 0)
		report_written(&s, &o, &command);
	session_end(&s);
	return o.command ? command_session_status(&command, ret) : ret ? 1 : 0;
}
