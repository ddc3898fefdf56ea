// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * spinscope-collector: attach spinscope's BPF programs to one process (and optionally its forked
 * children) or to a cgroup v2 (every process in it, whenever it entered), let the kernel aggregate, and
 * write one capture when the capture ends: at --duration, on SIGINT/SIGTERM/SIGHUP, or when the target
 * exits (the process, or the cgroup is removed). Once the probes are attached, every way out
 * writes the capture; --ready-fd tells a parent the moment they are.
 *
 * main() is a session: start (host checks, target, output, load, attach), record, write, end; every
 * way out of it goes through session_end(), the one clean-up path.
 *
 * Exit status: 0 capture written (or --check passed), 1 capture could not be made, 2 usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "capture.h"
#include "cgroup.h"
#include "checks.h"
#include "probes.h"
#include "procfs.h"
#include "spinscope.skel.h"

#define PROG "spinscope-collector"
/* 1 call in 16 timed: the clock costs ~30 ns per read here, and a counted call read it twice (bench/) */
#define DEFAULT_TIME_SAMPLE 16
/* How often the exited threads are drained into the capture: at 1,000 exits a second, ~100 a time. */
#define DRAIN_EVERY_NS 100000000ULL

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
	bool exit_with_parent; /* --exit-with-parent */
	pid_t parent;          /* the process that started us */
	bool keep_cmdline;  /* --cmdline */
	bool keep_hostname; /* --hostname */
	bool check;
	bool json;    /* --check: the checks as JSON on stdout */
	int ready_fd; /* -1, or where to say "ready" once the probes are live */
	int stream_fd; /* -1, or where to write the capture so far as a line after each interval (--stream) */
	bool verbose;
	bool quiet;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: " PROG " --pid PID [options]\n"
		"       " PROG " --cgroup PATH [options]\n"
		"       " PROG " --check\n"
		"\n"
		"Count what a process's threads do with sockets, poll calls, futexes and the scheduler,\n"
		"and write a spinscope capture (JSON, docs/capture-format.md).\n"
		"\n"
		"  -p, --pid PID          process to trace (all its threads, also those created later)\n"
		"  -c, --children         also trace its child processes, those running at attach and those\n"
		"                         forked later (pre-forked workers, process-per-connection, n-copy)\n"
		"      --cgroup PATH      instead of --pid: every process in this cgroup v2 and its descendants,\n"
		"                         also those that enter it later (a systemd unit, a pod); PATH is a\n"
		"                         directory of the cgroup2 mount, absolute or below it. The capture ends\n"
		"                         when the cgroup is removed (an empty cgroup is not an end)\n"
		"  -d, --duration SEC     stop after SEC seconds (default: until Ctrl-C or the target exits)\n"
		"  -i, --interval SEC     record a snapshot of the counters every SEC seconds\n"
		"      --checkpoint SEC   rewrite the capture so far every SEC seconds (default 10; 0: only at\n"
		"                         the end), so a collector killed outright loses at most SEC seconds\n"
		"  -o, --output FILE      capture file (default: spinscope-PID.json, spinscope-cgroup-ID.json)\n"
		"      --cmdline          keep the target's argument values in the capture (they may hold\n"
		"                         secrets; by default only the executable and the argument count)\n"
		"      --hostname         keep this host's name in the capture (by default left out)\n"
		"      --exit-with-parent end the capture (and write it) if the process that started the\n"
		"                         collector dies, as when `spinscope record` is killed\n"
		"      --max-threads N    threads the maps can hold (default 16384)\n"
		"      --max-sockets N    sockets with a request in flight (default 65536)\n"
		"      --exited-rows N    threads gone kept as rows of their own (default 1024); the rest are\n"
		"                         folded by process and name (threads_folded)\n"
		"      --time-sample N    time 1 call in N (a power of two, default 16; 1: every call): counts\n"
		"                         stay exact, the on-CPU time of calls is an estimate (docs/labels.md)\n"
		"      --ready-fd N       once the probes are live, write one JSON line to file descriptor N\n"
		"                         ({\"ready\": true, ...}) and close it; closed without it on failure\n"
		"      --stream N         after each --interval snapshot, write the capture so far as one line\n"
		"                         of JSON to file descriptor N (the latest interval only); a reader that\n"
		"                         closes it ends the capture. Without --output no file is written\n"
		"      --check            check this host: privileges, BTF, tracefs, tracepoints, and load and\n"
		"                         attach the probes (to this process); exit 0 if all pass\n"
		"      --json             with --check: print the checks as JSON on stdout\n"
		"  -q, --quiet            only print errors\n"
		"  -v, --verbose          print libbpf's log (verifier output on load errors)\n"
		"  -h, --help             this help\n");
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

/* The rules spinscope's verbs check too (analyzer targets.py), in the same words. */
static int parse_pid(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno || v < 1 || v > INT_MAX) {
		fprintf(stderr, PROG ": error: --pid must be a positive process id, not '%s'\n", s);
		exit(2);
	}
	return v;
}

/* 1 call in N timed: a power of two (the probes test a mask), at most 65536. */
static __u32 parse_time_sample(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno || v < 1 || v > 1 << 16 || (v & (v - 1))) {
		fprintf(stderr, PROG ": error: --time-sample must be a power of two from 1 to 65536, not '%s'\n", s);
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

static void parse_options(int argc, char **argv, struct options *o)
{
	enum { OPT_MAX_THREADS = 256, OPT_MAX_SOCKETS, OPT_CHECK, OPT_JSON, OPT_READY_FD, OPT_CMDLINE,
	       OPT_HOSTNAME, OPT_EXIT_WITH_PARENT, OPT_CHECKPOINT, OPT_TIME_SAMPLE, OPT_CGROUP, OPT_STREAM,
	       OPT_EXITED_ROWS };
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "children", no_argument, NULL, 'c' },
		{ "cgroup", required_argument, NULL, OPT_CGROUP },
		{ "duration", required_argument, NULL, 'd' },
		{ "interval", required_argument, NULL, 'i' },
		{ "output", required_argument, NULL, 'o' },
		{ "max-threads", required_argument, NULL, OPT_MAX_THREADS },
		{ "max-sockets", required_argument, NULL, OPT_MAX_SOCKETS },
		{ "cmdline", no_argument, NULL, OPT_CMDLINE },
		{ "hostname", no_argument, NULL, OPT_HOSTNAME },
		{ "exit-with-parent", no_argument, NULL, OPT_EXIT_WITH_PARENT },
		{ "checkpoint", required_argument, NULL, OPT_CHECKPOINT },
		{ "time-sample", required_argument, NULL, OPT_TIME_SAMPLE },
		{ "exited-rows", required_argument, NULL, OPT_EXITED_ROWS },
		{ "check", no_argument, NULL, OPT_CHECK },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "ready-fd", required_argument, NULL, OPT_READY_FD },
		{ "stream", required_argument, NULL, OPT_STREAM },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	*o = (struct options){ .max_threads = 16384, .max_sockets = 65536, .ready_fd = -1, .stream_fd = -1,
			       .checkpoint_s = 10, .time_sample = DEFAULT_TIME_SAMPLE, .exited_rows = 1024 };
	while ((c = getopt_long(argc, argv, "p:cd:i:o:qvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			o->pid = parse_pid(optarg);
			break;
		case 'c':
			o->follow_children = true;
			break;
		case OPT_CGROUP:
			o->cgroup_arg = optarg;
			break;
		case 'd':
			o->duration_s = parse_seconds(optarg, "--duration");
			break;
		case 'i':
			o->interval_s = parse_seconds(optarg, "--interval");
			break;
		case 'o':
			o->output = optarg;
			break;
		case OPT_MAX_THREADS:
			o->max_threads = parse_count(optarg, "--max-threads", 16, 1 << 22);
			break;
		case OPT_MAX_SOCKETS:
			o->max_sockets = parse_count(optarg, "--max-sockets", 16, 1 << 24);
			break;
		case OPT_CHECK:
			o->check = true;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_CMDLINE:
			o->keep_cmdline = true;
			break;
		case OPT_HOSTNAME:
			o->keep_hostname = true;
			break;
		case OPT_EXIT_WITH_PARENT:
			o->exit_with_parent = true;
			break;
		case OPT_CHECKPOINT:
			o->checkpoint_s = parse_seconds(optarg, "--checkpoint");
			break;
		case OPT_EXITED_ROWS:
			o->exited_rows = parse_count(optarg, "--exited-rows", 0, 1 << 22);
			break;
		case OPT_TIME_SAMPLE:
			o->time_sample = parse_time_sample(optarg);
			break;
		case OPT_READY_FD:
			o->ready_fd = parse_fd(optarg, "--ready-fd");
			break;
		case OPT_STREAM:
			o->stream_fd = parse_fd(optarg, "--stream");
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": error: unexpected argument '%s'\n", argv[optind]);
		exit(2);
	}
	o->parent = getppid();
	if (o->json && !o->check) {
		fprintf(stderr, PROG ": error: --json goes with --check\n");
		exit(2);
	}
	if (o->cgroup_arg && o->check) {
		fprintf(stderr, PROG ": error: --check checks this host and takes no --cgroup\n");
		exit(2);
	}
	if (o->cgroup_arg && (o->pid || o->follow_children)) {
		/* A cgroup's processes' children start in it (and a PID's cgroup may hold others): one target. */
		fprintf(stderr, PROG ": error: --cgroup goes without %s: it traces every process in the cgroup, "
			"children included\n", o->pid ? "--pid" : "--children");
		exit(2);
	}
	if (!o->pid && !o->cgroup_arg && !o->check) {
		fprintf(stderr, PROG ": error: --pid PID or --cgroup PATH is required (or --check)\n");
		usage(stderr);
		exit(2);
	}
	if (o->cgroup_arg) {
		char err[PATH_MAX + 256];

		if (cgroup_resolve(o->cgroup_arg, &o->cgroup, err, sizeof(err)) != 0) {
			fprintf(stderr, PROG ": error: %s\n", err);
			exit(2);
		}
	}
	if (o->output && !*o->output) {
		fprintf(stderr, PROG ": error: --output must name a file, not ''\n");
		exit(2);
	}
	if (o->checkpoint_s > 0 && o->checkpoint_s < 0.1) {
		fprintf(stderr, PROG ": error: --checkpoint must be at least 0.1 s (or 0)\n");
		exit(2);
	}
	if (o->interval_s > 0 && o->interval_s < 0.01) {
		fprintf(stderr, PROG ": error: --interval must be at least 0.01 s\n");
		exit(2);
	}
	if (o->stream_fd >= 0 && o->interval_s <= 0) {
		fprintf(stderr, PROG ": error: --stream needs --interval SEC (a line per interval)\n");
		exit(2);
	}
	if (o->stream_fd >= 0 && !o->output)
		o->checkpoint_s = 0; /* the stream is the only output: no file to checkpoint */
}

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

/* Threads alive at attach get an entry now, so idle ones appear in the capture too. */
struct seed_ctx {
	int map_fd;
	int pid; /* the process whose threads are being seeded */
	__u64 now;
	int children_fd;
};

static void seed_process_thread(int pid, int tid, struct seed_ctx *ctx)
{
	struct thread_stats s = { .pid = pid, .first_seen_ns = ctx->now };
	__u32 key = tid;

	proc_thread_comm(pid, tid, s.comm, sizeof(s.comm));
	bpf_map_update_elem(ctx->map_fd, &key, &s, BPF_NOEXIST);
}

static void seed_thread(int tid, void *arg)
{
	struct seed_ctx *ctx = arg;

	seed_process_thread(ctx->pid, tid, ctx);
}

/* cgroup mode: every thread in the cgroup and its descendants, but the collector's own (ctx->pid). */
static void seed_cgroup_thread(int pid, int tid, void *arg)
{
	struct seed_ctx *ctx = arg;

	if (pid != ctx->pid)
		seed_process_thread(pid, tid, ctx);
}

static void adopt_child(int pid, void *arg)
{
	struct seed_ctx child = *(struct seed_ctx *)arg;
	__u32 key = pid;
	__u8 one = 1;

	if (bpf_map_update_elem(child.children_fd, &key, &one, BPF_ANY))
		return;
	child.pid = pid;
	proc_for_each_thread(pid, seed_thread, &child);
}

static int pidfd_open(int pid)
{
	return syscall(SYS_pidfd_open, pid, 0);
}

/* A temporary file beside the output, renamed over it once the capture is complete. */
static int open_temp_output(const char *output, char *tmp, size_t len)
{
	char copy[PATH_MAX];
	int fd;

	snprintf(copy, sizeof(copy), "%s", output);
	snprintf(tmp, len, "%s/.%s.XXXXXX", dirname(copy), basename((char *)output));
	fd = mkstemp(tmp);
	if (fd >= 0)
		fchmod(fd, 0644);
	else
		tmp[0] = '\0'; /* nothing made, nothing to remove */
	return fd;
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

/*
 * One run of the collector: everything it holds that must be given back, whichever way it ends.
 * session_end() is the only clean-up path.
 */
struct session {
	struct spinscope_bpf *skel;
	struct bpf_link **links;
	size_t nlinks;
	int signal_fd, target_fd; /* the signals that end a capture; the target's pidfd */
	int out_fd;               /* the temporary output, until it is renamed over the output */
	char tmp[PATH_MAX + 32];
	int journal_fd;           /* the intervals since the last checkpoint, a line each (-1: none) */
	bool checkpointed;        /* a checkpoint is on disk: the journal continues it */
	char journal[PATH_MAX + 32];
	struct capture_meta meta;
	struct intervals intervals;
	struct retired retired; /* the threads gone, drained from the exited map */
	struct snapshot final;
	char error[512]; /* why the session failed, one line */
};

static int fail(struct session *s, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct session *s, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->error, sizeof(s->error), fmt, ap);
	va_end(ap);
	return err ? err : -1;
}

/*
 * Open, load and attach the probes to o->pid, with its live threads (and children) seeded.
 * Detaching is left to session_end().
 */
static int session_attach(struct session *s, const struct options *o)
{
	struct seed_ctx seed;
	struct bpf_map *map;
	char err[256];
	int ret;

	s->skel = spinscope_bpf__open();
	if (!s->skel)
		return fail(s, -errno, "cannot open the BPF object: %s", strerror(errno));
	s->skel->rodata->targ_tgid = o->pid;
	s->skel->rodata->targ_more = o->follow_children ? TARGET_CHILDREN : 0;
	if (o->cgroup_arg) {
		s->skel->rodata->targ_tgid = TARGET_NO_PID;
		s->skel->rodata->targ_more = TARGET_CGROUP;
		s->skel->rodata->targ_cgroup_id = o->cgroup.id;
		s->skel->rodata->targ_cgroup_level = o->cgroup.level;
		s->skel->rodata->collector_tgid = getpid();
	}
	s->skel->rodata->time_sample = o->time_sample;
	probes_configure(s->skel);
	if (kernel_config_enabled("CONFIG_KASAN") == 1)
		s->skel->rodata->kernel_stack_size *= 2;
	bpf_map__set_max_entries(s->skel->maps.threads, o->max_threads);
	bpf_map__set_max_entries(s->skel->maps.sockets, o->max_sockets);
	/* Waker -> wakee pairs grow with threads (a pool's workers are each woken by one or two): a quarter
	 * of --max-threads, at least 4096 (preallocated: ~0.3 MiB). */
	bpf_map__set_max_entries(s->skel->maps.wakeups, o->max_threads / 4 > 4096 ? o->max_threads / 4 : 4096);
	ret = spinscope_bpf__load(s->skel);
	if (ret)
		return fail(s, ret, "cannot load the BPF programs: %s (run with -v for libbpf's log)",
			    strerror(-ret));
	bpf_object__for_each_map(map, s->skel->obj) /* their memory goes in the capture (tool.map_bytes) */
		if (s->meta.nmaps < sizeof(s->meta.map_fds) / sizeof(s->meta.map_fds[0]))
			s->meta.map_fds[s->meta.nmaps++] = bpf_map__fd(map);

	seed = (struct seed_ctx){ bpf_map__fd(s->skel->maps.threads), o->pid, monotonic_ns(),
				  bpf_map__fd(s->skel->maps.child_pids) };
	if (o->cgroup_arg) {
		/* Every thread in the cgroup now; those that enter it later are added at their first event. */
		seed.pid = getpid();
		cgroup_for_each_thread(o->cgroup.dir, seed_cgroup_thread, &seed);
	} else {
		proc_for_each_thread(o->pid, seed_thread, &seed);
	}
	/* Children forked before we attached (pre-forked workers, n-copy loops) are followed too; those
	 * forked later are added by the fork probe. */
	if (o->follow_children)
		proc_for_each_descendant(o->pid, adopt_child, &seed);

	s->links = calloc(probes_count(), sizeof(*s->links));
	if (!s->links)
		return fail(s, -ENOMEM, "out of memory");
	ret = probes_attach(s->skel, s->links, probes_count(), &s->nlinks, err, sizeof(err));
	if (ret)
		return fail(s, ret, "%s", err);
	return 0;
}

/* Everything up to live probes: the host, the target, the output file, the probes. 0, or fail(). */
static int session_start(struct session *s, const struct options *o)
{
	struct check checks[HOST_CHECKS];
	const struct check *failed = host_checks(checks);
	enum proc_kind kind;
	struct stat st;
	sigset_t mask;

	if (failed)
		return fail(s, -EPERM, "%s; %s", failed->detail, failed->remedy);
	if (!o->cgroup_arg) {
		if (kill(o->pid, 0) != 0 && errno == ESRCH)
			return fail(s, -ESRCH, "no process with PID %d", o->pid);
		if (proc_kind(o->pid, &kind) != 0)
			kind = PROC_USER; /* it may have exited just now: watching it will say so */
		if (kind == PROC_KERNEL_THREAD)
			return fail(s, -EINVAL, "PID %d is a kernel thread: spinscope traces user processes", o->pid);
		if (kind == PROC_EXITED)
			return fail(s, -ESRCH, "PID %d has exited (a zombie, not yet reaped by its parent)", o->pid);
	}
	if (o->output && stat(o->output, &st) == 0 && S_ISDIR(st.st_mode))
		return fail(s, -EISDIR, "cannot write %s: it is a directory (name a file)", o->output);

	/* From here on SIGINT/SIGTERM/SIGHUP are read from a signalfd: they end the capture cleanly. */
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
	if (o->cgroup_arg) {
		/* The capture ends when the cgroup is removed; an empty cgroup is not an end (processes may come). */
		s->target_fd = cgroup_watch(o->cgroup.dir);
		if (s->target_fd < 0)
			return fail(s, s->target_fd, "cannot watch cgroup %s: %s", o->cgroup.path,
				    s->target_fd == -ENOENT ? "it was removed before the probes were attached"
							    : strerror(-s->target_fd));
	} else {
		s->target_fd = pidfd_open(o->pid);
		if (s->target_fd < 0)
			return fail(s, -errno, "cannot watch process %d: %s", o->pid,
				    errno == ESRCH ? "it exited before the probes were attached" : strerror(errno));
	}

	s->meta.pid = o->pid;
	s->meta.follow_children = o->follow_children;
	s->meta.interval_s = o->interval_s;
	s->meta.checkpoint_s = o->checkpoint_s;
	s->meta.max_threads = o->max_threads;
	s->meta.exited_rows = o->exited_rows;
	if (retired_init(&s->retired, o->exited_rows))
		return fail(s, -ENOMEM, "out of memory");
	s->meta.time_sample = o->time_sample;
	s->meta.max_sockets = o->max_sockets;
	s->meta.keep_cmdline = o->keep_cmdline;
	s->meta.keep_hostname = o->keep_hostname;
	if (o->cgroup_arg) {
		/* No one process: named after the cgroup, no executable, no arguments. */
		s->meta.cgroup = &o->cgroup;
		snprintf(s->meta.comm, sizeof(s->meta.comm), "%s", o->cgroup.name);
	} else {
		proc_comm(o->pid, s->meta.comm, sizeof(s->meta.comm));
		proc_exe(o->pid, s->meta.exe, sizeof(s->meta.exe));
		s->meta.cmdline = proc_cmdline(o->pid, &s->meta.cmdline_len);
	}

	if (!o->output) /* --stream alone: no file */
		return session_attach(s, o);
	/* Whether the output can be written is known now, not after the capture: a temporary file is
	 * made and removed. The real one is made at the end, so a collector killed outright leaves none. */
	s->out_fd = open_temp_output(o->output, s->tmp, sizeof(s->tmp));
	if (s->out_fd < 0)
		return fail(s, -errno, "cannot write %s: %s", o->output, strerror(errno));
	close(s->out_fd);
	unlink(s->tmp);
	s->out_fd = -1;
	s->tmp[0] = '\0';
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

/* The capture of snap, written to a temporary file beside the output and renamed over it: a reader never
 * sees half a file. 0, or fail(). */
/*
 * The interval journal, OUTPUT.intervals.jsonl: each interval appended as a line when it is taken, emptied
 * at each checkpoint (the checkpoint holds them), removed with the final capture. A collector killed
 * outright leaves its last checkpoint and the intervals after it: `spinscope report` reads both, so at
 * most one interval is lost. (Written, not synced: the page cache outlives a killed process.)
 */
static void journal_append(struct session *s, const struct options *o)
{
	if (!o->output || s->intervals.n == 0 || !s->checkpointed) /* before it, a kill leaves no file */
		return;
	if (s->journal_fd < 0 && !s->journal[0]) {
		snprintf(s->journal, sizeof(s->journal), "%s.intervals.jsonl", o->output);
		s->journal_fd = open(s->journal, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
		if (s->journal_fd < 0)
			fprintf(stderr, PROG ": warning: cannot write %s: %s (a killed collector loses up to a "
				"checkpoint period)\n", s->journal, strerror(errno));
	}
	if (s->journal_fd >= 0 && capture_interval_line(s->journal_fd, &s->intervals.items[s->intervals.n - 1]))
		fprintf(stderr, PROG ": warning: interval not journaled: %s\n", strerror(errno));
}

static int write_atomically(struct session *s, const struct options *o, const struct snapshot *snap)
{
	int ret;

	s->out_fd = open_temp_output(o->output, s->tmp, sizeof(s->tmp));
	if (s->out_fd < 0)
		return fail(s, -errno, "cannot write %s: %s", o->output, strerror(errno));
	ret = capture_write(s->out_fd, &s->meta, snap, &s->intervals);
	if (ret == 0 && fsync(s->out_fd) != 0)
		ret = -errno;
	close(s->out_fd);
	s->out_fd = -1;
	if (ret == 0 && rename(s->tmp, o->output) != 0)
		ret = -errno;
	if (ret) {
		unlink(s->tmp);
		s->tmp[0] = '\0';
		return fail(s, ret, "cannot write %s: %s", o->output, strerror(-ret));
	}
	s->tmp[0] = '\0'; /* renamed: nothing to remove */
	return 0;
}

/* The capture so far, as a complete file marked end_reason "checkpoint": what a collector killed outright
 * (SIGKILL, OOM) leaves. The final capture replaces it. */
static void checkpoint(struct session *s, const struct options *o, __u64 now)
{
	struct snapshot snap;

	s->meta.duration_s = (now - s->meta.start_mono_ns) / 1e9;
	s->meta.end_reason = "checkpoint";
	if (snapshot_read(s->skel, &s->retired, &snap, true) != 0 || write_atomically(s, o, &snap) != 0)
		fprintf(stderr, PROG ": warning: checkpoint at %.1f s not written%s%s\n", s->meta.duration_s,
			s->error[0] ? ": " : "", s->error);
	else if (s->journal_fd >= 0 && ftruncate(s->journal_fd, 0) != 0) /* the checkpoint holds them */
		fprintf(stderr, PROG ": warning: cannot empty %s: %s\n", s->journal, strerror(errno));
	else
		s->checkpointed = true;
	snapshot_free(&snap);
	s->error[0] = '\0';
}

/*
 * --stream: snap as one line with only the latest interval. Without --output the series is not kept
 * (nothing will write it): the collector's memory stays flat however long it streams. A reader that has
 * gone (EPIPE) gives -EPIPE: the capture ends, and nothing more is written to the stream.
 */
static int stream_line(struct session *s, const struct options *o, const struct snapshot *snap)
{
	struct intervals latest = s->intervals;
	int ret;

	if (latest.n > 1) {
		latest.items += latest.n - 1;
		latest.n = 1;
	}
	ret = capture_write_line(o->stream_fd, &s->meta, snap, &latest);
	if (!o->output)
		s->intervals.n = 0;
	return ret;
}

/* Count until the duration ends, a signal comes or the target exits, with interval snapshots. */
static void session_record(struct session *s, const struct options *o)
{
	__u64 start = s->meta.start_mono_ns, deadline = 0, next_tick = 0, tick = o->interval_s * 1e9;
	__u64 next_checkpoint = 0, every = o->checkpoint_s * 1e9, next_drain = start + DRAIN_EVERY_NS;

	if (o->duration_s > 0)
		deadline = start + (__u64)(o->duration_s * 1e9);
	if (tick)
		next_tick = start + tick;
	if (every)
		next_checkpoint = start + every;
	for (;;) {
		/* The stream's write end reports POLLERR once its reader has closed it. */
		struct pollfd fds[3] = { { s->signal_fd, POLLIN, 0 },
					 { s->target_fd, o->cgroup_arg ? POLLPRI : POLLIN, 0 },
					 { o->stream_fd, 0, 0 } };
		__u64 now = monotonic_ns(), wake = deadline;
		int timeout_ms = -1;

		s->meta.end_reason = "duration";
		if (deadline && now >= deadline)
			return;
		if (now >= next_drain) { /* the threads gone since, and their edges: so no map fills */
			struct bpf_map *wakeups = s->skel->maps.wakeups;
			struct thread_key *gone = NULL;
			size_t ngone = 0;

			if (retired_drain(&s->retired, bpf_map__fd(s->skel->maps.exited), &gone, &ngone) ||
			    retired_edges(&s->retired, bpf_map__fd(wakeups), bpf_map__max_entries(wakeups), gone,
					  ngone))
				fprintf(stderr, PROG ": warning: out of memory folding exited threads\n");
			free(gone);
			next_drain = now + DRAIN_EVERY_NS;
		}
		if (next_checkpoint && now >= next_checkpoint && (!next_tick || now < next_tick)) {
			checkpoint(s, o, now);
			next_checkpoint += every;
			continue;
		}
		if (next_tick && now >= next_tick) {
			struct snapshot snap;

			int ret = snapshot_read(s->skel, &s->retired, &snap, false);

			if (ret == 0 && intervals_add(&s->intervals, &snap, now))
				fprintf(stderr, PROG ": warning: out of memory: interval at %.1f s not kept\n",
					(now - start) / 1e9);
			else if (ret == 0 && every)
				journal_append(s, o);
			if (ret == 0 && o->stream_fd >= 0) {
				s->meta.duration_s = (now - start) / 1e9;
				s->meta.end_reason = "live";
				ret = stream_line(s, o, &snap);
				s->meta.end_reason = "duration";
			}
			snapshot_free(&snap);
			if (ret == -EPIPE) {
				s->meta.end_reason = "stream-closed";
				return;
			}
			if (ret && o->stream_fd >= 0)
				fprintf(stderr, PROG ": warning: --stream: line at %.1f s not written: %s\n",
					(now - start) / 1e9, strerror(-ret));
			next_tick += tick;
			continue;
		}
		if (next_tick && (!wake || next_tick < wake))
			wake = next_tick;
		if (next_checkpoint && (!wake || next_checkpoint < wake))
			wake = next_checkpoint;
		if (!wake || next_drain < wake)
			wake = next_drain;
		if (wake)
			timeout_ms = (wake - now + 999999) / 1000000;
		if (poll(fds, o->stream_fd >= 0 ? 3 : 2, timeout_ms) < 0 && errno != EINTR)
			return;
		if (fds[0].revents & POLLIN) {
			s->meta.end_reason = "signal";
			return;
		}
		/* The process exited; or the cgroup changed (populated or emptied: go on) or was removed. */
		if (fds[1].revents && (!o->cgroup_arg || cgroup_removed(s->target_fd))) {
			s->meta.end_reason = "target-exited";
			return;
		}
		if (fds[2].revents & (POLLERR | POLLHUP | POLLNVAL)) {
			s->meta.end_reason = "stream-closed";
			return;
		}
	}
}

/*
 * The final read and the capture: the maps are read while the probes are still attached, and the file
 * is complete (written, synced, renamed) before anything is detached, which takes a grace period per
 * tracepoint.
 */
static int session_write(struct session *s, const struct options *o)
{
	__u64 now = monotonic_ns();
	int ret;

	s->meta.duration_s = (now - s->meta.start_mono_ns) / 1e9;
	ret = snapshot_read(s->skel, &s->retired, &s->final, true);
	if (ret)
		return fail(s, ret, "cannot read the BPF maps: %s", strerror(-ret));
	/* The last, shorter interval (at least one interval whenever --interval was given). */
	if (o->interval_s > 0 && (s->intervals.n == 0 || now > s->intervals.prev_ns + 1000000))
		intervals_add(&s->intervals, &s->final, now);
	/* The stream's last line is the final capture, unless its reader has gone. */
	if (o->stream_fd >= 0 && strcmp(s->meta.end_reason, "stream-closed") != 0 &&
	    stream_line(s, o, &s->final) != 0)
		fprintf(stderr, PROG ": warning: --stream: final line not written\n");
	if (!o->output)
		return 0;
	ret = write_atomically(s, o, &s->final);
	if (ret == 0 && s->journal[0]) /* the capture holds every interval: the journal has served */
		unlink(s->journal);
	return ret;
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

static void report_written(const struct session *s, const struct options *o)
{
	const struct global_stats *g = &s->final.globals;
	char path[256], rows[96];

	if (o->quiet)
		return;
	if (!strcmp(s->meta.end_reason, "target-exited") && o->cgroup_arg)
		fprintf(stderr, PROG ": target cgroup %s was removed after %.1f s\n",
			printable(o->cgroup.path, path, sizeof(path)), s->meta.duration_s);
	else if (!strcmp(s->meta.end_reason, "target-exited"))
		fprintf(stderr, PROG ": target PID %d exited after %.1f s\n", o->pid, s->meta.duration_s);
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
	fprintf(stderr, PROG ": %s%s: %s%llu requests, %.1f s (%s)\n", o->output ? "wrote " : "",
		o->output ? o->output : "streamed", rows_phrase(&s->final, rows, sizeof(rows)),
		(unsigned long long)s->final.requests.sum.count, s->meta.duration_s, s->meta.end_reason);
}

/* The one clean-up path: detach and free whatever the session got, remove an unfinished output. */
static void session_end(struct session *s)
{
	if (s->links)
		probes_detach(s->links, s->nlinks);
	spinscope_bpf__destroy(s->skel);
	if (s->out_fd >= 0)
		close(s->out_fd);
	if (s->tmp[0])
		unlink(s->tmp);
	if (s->journal_fd >= 0)
		close(s->journal_fd);
	if (s->signal_fd >= 0)
		close(s->signal_fd);
	if (s->target_fd >= 0)
		close(s->target_fd);
	snapshot_free(&s->final);
	intervals_free(&s->intervals);
	retired_free(&s->retired);
	free(s->links);
	free(s->meta.cmdline);
}

/* --check: the host checks, then loading and attaching the probes to this process. */
static int run_check(struct options *o)
{
	struct check checks[HOST_CHECKS + 2];
	struct check *load = &checks[HOST_CHECKS], *attach = &checks[HOST_CHECKS + 1];
	struct session s = { .signal_fd = -1, .target_fd = -1, .out_fd = -1, .journal_fd = -1 };
	const struct check *failed = host_checks(checks);
	size_t n = HOST_CHECKS + 2;
	__u64 begin = monotonic_ns();
	int ret;

	*load = (struct check){ .name = "probes load" };
	*attach = (struct check){ .name = "probes attach" };
	if (failed) {
		check_skip(load, "the host checks above failed");
		check_skip(attach, "the host checks above failed");
	} else {
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
	if (o->json) {
		checks_print_json(stdout, checks, n);
	} else {
		for (size_t i = 0; i < n; i++)
			fprintf(stderr, PROG ": check %s: %s: %s%s%s\n", checks[i].name,
				checks[i].ok ? "ok" : checks[i].skipped ? "skipped" : "FAILED", checks[i].detail,
				checks[i].remedy[0] && !checks[i].ok ? "; " : "",
				checks[i].ok ? "" : checks[i].remedy);
	}
	for (size_t i = 0; i < n; i++) {
		if (!checks[i].ok) {
			if (!o->json)
				fprintf(stderr, PROG ": error: check failed: %s\n", checks[i].detail);
			return 1;
		}
	}
	if (!o->json)
		fprintf(stderr, PROG ": check passed: the probes load and attach on this kernel\n");
	return 0;
}

int main(int argc, char **argv)
{
	__u64 launched = monotonic_ns();
	struct session s = { .signal_fd = -1, .target_fd = -1, .out_fd = -1, .journal_fd = -1 };
	char default_out[64], comm[256];
	struct options o;
	int ret;

	parse_options(argc, argv, &o);
	verbose_libbpf = o.verbose;
	libbpf_set_print(libbpf_print);
	if (o.check)
		return run_check(&o);
	if (o.stream_fd >= 0)
		signal(SIGPIPE, SIG_IGN); /* a reader gone is EPIPE, which ends the capture cleanly */
	if (!o.output && o.stream_fd < 0) { /* with --stream and no --output, no file is written */
		if (o.cgroup_arg)
			snprintf(default_out, sizeof(default_out), "spinscope-cgroup-%llu.json",
				 (unsigned long long)o.cgroup.id);
		else
			snprintf(default_out, sizeof(default_out), "spinscope-%d.json", o.pid);
		o.output = default_out;
	}

	ret = session_start(&s, &o);
	if (ret == 0) {
		s.meta.start_mono_ns = monotonic_ns();
		iso_now(s.meta.start_time, sizeof(s.meta.start_time));
		intervals_init(&s.intervals, s.meta.start_mono_ns);
		if (!o.quiet && o.cgroup_arg)
			fprintf(stderr, PROG ": attached to cgroup %s (id %llu): %zu probes live in %.3f s\n",
				printable(o.cgroup.path, comm, sizeof(comm)), (unsigned long long)o.cgroup.id,
				s.nlinks, (s.meta.start_mono_ns - launched) / 1e9);
		else if (!o.quiet)
			fprintf(stderr, PROG ": attached to PID %d (%s): %zu probes live in %.3f s\n", o.pid,
				printable(s.meta.comm, comm, sizeof(comm)), s.nlinks,
				(s.meta.start_mono_ns - launched) / 1e9);
		announce_ready(o.ready_fd, &s, (s.meta.start_mono_ns - launched) / 1e9);
		session_record(&s, &o);
		ret = session_write(&s, &o);
	}
	if (ret == 0)
		report_written(&s, &o);
	else
		fprintf(stderr, PROG ": error: %s\n", s.error);
	session_end(&s);
	return ret ? 1 : 0;
}
