// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * spinscope-collector: attach spinscope's BPF programs to one process (and optionally its forked
 * children), let the kernel aggregate, and write one capture when the capture ends: at --duration,
 * on SIGINT/SIGTERM/SIGHUP, or when the target exits. Once the probes are attached, every way out
 * writes the capture.
 *
 * Exit status: 0 capture written (or --check passed), 1 capture could not be made, 2 usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "capture.h"
#include "probes.h"
#include "procfs.h"
#include "spinscope.skel.h"

#define PROG "spinscope-collector"

struct options {
	int pid;
	bool follow_children;
	double duration_s; /* 0: until a signal or the target exits */
	double interval_s; /* 0: no interval snapshots */
	const char *output;
	__u32 max_threads;
	__u32 max_sockets;
	bool check;
	bool verbose;
	bool quiet;
};

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": error: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: " PROG " --pid PID [options]\n"
		"       " PROG " --check\n"
		"\n"
		"Count what a process's threads do with sockets, poll calls, futexes and the scheduler,\n"
		"and write a spinscope capture (JSON, docs/capture-format.md).\n"
		"\n"
		"  -p, --pid PID          process to trace (all its threads, also those created later)\n"
		"  -c, --children         also trace its child processes, those running at attach and those\n"
		"                         forked later (pre-forked workers, process-per-connection, n-copy)\n"
		"  -d, --duration SEC     stop after SEC seconds (default: until Ctrl-C or the target exits)\n"
		"  -i, --interval SEC     record a snapshot of the counters every SEC seconds\n"
		"  -o, --output FILE      capture file (default: spinscope-PID.json)\n"
		"      --max-threads N    threads the maps can hold (default 16384)\n"
		"      --max-sockets N    sockets with a request in flight (default 65536)\n"
		"      --check            load and attach the probes to this process, then exit\n"
		"  -q, --quiet            only print errors\n"
		"  -v, --verbose          print libbpf's log (verifier output on load errors)\n"
		"  -h, --help             this help\n");
}

static double parse_seconds(const char *s, const char *what)
{
	char *end;
	double v = strtod(s, &end);

	if (*s == '\0' || *end != '\0' || v < 0 || v > 1e7) {
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

static void parse_options(int argc, char **argv, struct options *o)
{
	enum { OPT_MAX_THREADS = 256, OPT_MAX_SOCKETS, OPT_CHECK };
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "children", no_argument, NULL, 'c' },
		{ "duration", required_argument, NULL, 'd' },
		{ "interval", required_argument, NULL, 'i' },
		{ "output", required_argument, NULL, 'o' },
		{ "max-threads", required_argument, NULL, OPT_MAX_THREADS },
		{ "max-sockets", required_argument, NULL, OPT_MAX_SOCKETS },
		{ "check", no_argument, NULL, OPT_CHECK },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	*o = (struct options){ .max_threads = 16384, .max_sockets = 65536 };
	while ((c = getopt_long(argc, argv, "p:cd:i:o:qvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			o->pid = parse_count(optarg, "--pid", 1, INT_MAX);
			break;
		case 'c':
			o->follow_children = true;
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
	if (!o->pid && !o->check) {
		fprintf(stderr, PROG ": error: --pid PID is required (or --check)\n");
		usage(stderr);
		exit(2);
	}
	if (o->interval_s > 0 && o->interval_s < 0.01) {
		fprintf(stderr, PROG ": error: --interval must be at least 0.01 s\n");
		exit(2);
	}
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

/* Root, or the capabilities BPF tracing needs (CAP_BPF 39, CAP_PERFMON 38) or CAP_SYS_ADMIN. */
static bool privileged(void)
{
	unsigned long long eff = 0;
	char line[256];
	FILE *f;

	if (geteuid() == 0)
		return true;
	f = fopen("/proc/self/status", "r");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return (eff >> 21 & 1) || ((eff >> 38 & 1) && (eff >> 39 & 1));
}

static void check_host(void)
{
	const char *btf = getenv("SPINSCOPE_SYSFS_BTF"); /* tests: simulate a kernel without BTF */

	if (!btf)
		btf = "/sys/kernel/btf/vmlinux";
	if (!privileged())
		die("needs root, or CAP_BPF and CAP_PERFMON (try: sudo " PROG " ...)");
	if (access(btf, R_OK) != 0)
		die("this kernel has no BTF (%s is missing); spinscope needs a kernel built with "
		    "CONFIG_DEBUG_INFO_BTF=y", btf);
}

/* Threads alive at attach get an entry now, so idle ones appear in the capture too. */
struct seed_ctx {
	int map_fd;
	int pid; /* the process whose threads are being seeded */
	__u64 now;
	int children_fd;
};

static void seed_thread(int tid, void *arg)
{
	struct seed_ctx *ctx = arg;
	struct thread_stats s = { .pid = ctx->pid, .first_seen_ns = ctx->now };
	__u32 key = tid;

	proc_thread_comm(ctx->pid, tid, s.comm, sizeof(s.comm));
	bpf_map_update_elem(ctx->map_fd, &key, &s, BPF_NOEXIST);
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
	return fd;
}

struct intervals {
	struct interval *items;
	size_t n, cap;
	struct thread_counters prev;
	__u64 prev_requests, prev_wakeups;
	__u64 prev_ns;
};

static void intervals_add(struct intervals *iv, const struct snapshot *snap, __u64 now, __u64 start)
{
	struct thread_counters totals;
	__u64 wakeups = snapshot_wakeups(snap);
	struct interval *it;

	if (iv->n == iv->cap) {
		size_t cap = iv->cap ? iv->cap * 2 : 64;
		struct interval *grown = realloc(iv->items, cap * sizeof(*grown));

		if (!grown)
			return; /* keep what we have; the capture is still valid */
		iv->items = grown;
		iv->cap = cap;
	}
	snapshot_totals(snap, &totals);
	it = &iv->items[iv->n++];
	it->t_s = (now - start) / 1e9;
	it->duration_s = (now - iv->prev_ns) / 1e9;
#define X(name) it->delta.name = totals.name - iv->prev.name;
	SPINSCOPE_COUNTERS(X)
#undef X
	it->requests = snap->requests.sum.count - iv->prev_requests;
	it->wakeups = wakeups - iv->prev_wakeups;
	iv->prev = totals;
	iv->prev_requests = snap->requests.sum.count;
	iv->prev_wakeups = wakeups;
	iv->prev_ns = now;
}

int main(int argc, char **argv)
{
	__u64 launched = monotonic_ns(), start, deadline = 0, next_tick = 0, now;
	struct bpf_link **links = NULL;
	struct intervals iv = { 0 };
	struct capture_meta meta = { 0 };
	struct spinscope_bpf *skel;
	struct snapshot snap;
	struct options o;
	char default_out[64], tmp[PATH_MAX + 32], err[256];
	size_t nlinks = 0;
	int sfd, pidfd, outfd = -1, ret;
	sigset_t mask;

	parse_options(argc, argv, &o);
	verbose_libbpf = o.verbose;
	libbpf_set_print(libbpf_print);
	if (o.check)
		o.pid = getpid();

	check_host();
	if (kill(o.pid, 0) != 0 && errno == ESRCH)
		die("no process with PID %d", o.pid);

	/* From here on SIGINT/SIGTERM/SIGHUP are read from a signalfd: they end the capture cleanly. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	pidfd = pidfd_open(o.pid);
	if (sfd < 0)
		die("signalfd: %s", strerror(errno));
	if (pidfd < 0)
		die("cannot watch process %d: %s", o.pid,
		    errno == ESRCH ? "it exited before the probes were attached" : strerror(errno));

	meta.pid = o.pid;
	meta.follow_children = o.follow_children;
	meta.interval_s = o.interval_s;
	meta.max_threads = o.max_threads;
	meta.max_sockets = o.max_sockets;
	proc_comm(o.pid, meta.comm, sizeof(meta.comm));
	meta.cmdline = proc_cmdline(o.pid, &meta.cmdline_len);

	if (!o.check) {
		if (!o.output) {
			snprintf(default_out, sizeof(default_out), "spinscope-%d.json", o.pid);
			o.output = default_out;
		}
		outfd = open_temp_output(o.output, tmp, sizeof(tmp));
		if (outfd < 0)
			die("cannot write %s: %s", o.output, strerror(errno));
	}

	skel = spinscope_bpf__open();
	if (!skel) {
		int e = errno;

		if (outfd >= 0)
			unlink(tmp);
		die("cannot open the BPF object: %s", strerror(e));
	}
	skel->rodata->targ_tgid = o.pid;
	skel->rodata->follow_children = o.follow_children;
	probes_configure(skel);
	if (kernel_config_enabled("CONFIG_KASAN") == 1)
		skel->rodata->kernel_stack_size *= 2;
	bpf_map__set_max_entries(skel->maps.threads, o.max_threads);
	bpf_map__set_max_entries(skel->maps.sockets, o.max_sockets);
	ret = spinscope_bpf__load(skel);
	if (ret) {
		if (outfd >= 0)
			unlink(tmp);
		die("cannot load the BPF programs: %s (run with -v for libbpf's log)", strerror(-ret));
	}

	{
		struct seed_ctx seed = { bpf_map__fd(skel->maps.threads), o.pid, monotonic_ns(),
					 bpf_map__fd(skel->maps.child_pids) };

		proc_for_each_thread(o.pid, seed_thread, &seed);
		/* Children forked before we attached (pre-forked workers, n-copy loops) are followed
		 * too; those forked later are added by the fork probe. */
		if (o.follow_children)
			proc_for_each_descendant(o.pid, adopt_child, &seed);
	}

	links = calloc(probes_count(), sizeof(*links));
	ret = links ? probes_attach(skel, links, probes_count(), &nlinks, err, sizeof(err)) : -ENOMEM;
	if (ret) {
		probes_detach(links, nlinks);
		spinscope_bpf__destroy(skel);
		if (outfd >= 0)
			unlink(tmp);
		die("%s", links ? err : "out of memory");
	}
	start = monotonic_ns();
	meta.start_mono_ns = start;
	iso_now(meta.start_time, sizeof(meta.start_time));
	iv.prev_ns = start;
	if (!o.quiet)
		fprintf(stderr, PROG ": attached to PID %d (%s): %zu probes live in %.3f s\n", o.pid,
			meta.comm, nlinks, (start - launched) / 1e9);

	if (o.check) {
		probes_detach(links, nlinks);
		spinscope_bpf__destroy(skel);
		fprintf(stderr, PROG ": check passed: the probes load and attach on this kernel\n");
		return 0;
	}

	if (o.duration_s > 0)
		deadline = start + (__u64)(o.duration_s * 1e9);
	if (o.interval_s > 0)
		next_tick = start + (__u64)(o.interval_s * 1e9);
	meta.end_reason = "duration";
	for (;;) {
		struct pollfd fds[2] = { { sfd, POLLIN, 0 }, { pidfd, POLLIN, 0 } };
		__u64 wake = deadline;
		int timeout_ms = -1;

		now = monotonic_ns();
		if (deadline && now >= deadline)
			break;
		if (next_tick && now >= next_tick) {
			if (snapshot_read(skel, &snap, false) == 0)
				intervals_add(&iv, &snap, now, start);
			snapshot_free(&snap);
			next_tick += (__u64)(o.interval_s * 1e9);
			continue;
		}
		if (next_tick && (!wake || next_tick < wake))
			wake = next_tick;
		if (wake)
			timeout_ms = (wake - now + 999999) / 1000000;
		if (poll(fds, 2, timeout_ms) < 0 && errno != EINTR)
			break;
		if (fds[0].revents & POLLIN) {
			meta.end_reason = "signal";
			break;
		}
		if (fds[1].revents & POLLIN) {
			meta.end_reason = "target-exited";
			break;
		}
	}

	/*
	 * Read the maps while the probes are still attached and write the capture; detaching takes a
	 * grace period per tracepoint and is left for after the file is safe.
	 */
	now = monotonic_ns();
	meta.duration_s = (now - start) / 1e9;
	ret = snapshot_read(skel, &snap, true);
	if (ret) {
		unlink(tmp);
		die("cannot read the BPF maps: %s", strerror(-ret));
	}
	/* The last, shorter interval (at least one interval whenever --interval was given). */
	if (o.interval_s > 0 && (iv.n == 0 || now > iv.prev_ns + 1000000))
		intervals_add(&iv, &snap, now, start);

	ret = capture_write(outfd, &meta, &snap, iv.items, iv.n);
	if (ret == 0 && fsync(outfd) != 0)
		ret = -errno;
	close(outfd);
	if (ret == 0 && rename(tmp, o.output) != 0)
		ret = -errno;
	if (ret) {
		unlink(tmp);
		die("cannot write %s: %s", o.output, strerror(-ret));
	}
	if (!o.quiet) {
		if (!strcmp(meta.end_reason, "target-exited"))
			fprintf(stderr, PROG ": target PID %d exited after %.1f s\n", o.pid, meta.duration_s);
		if (snap.globals.drops_threads || snap.globals.drops_sockets ||
		    snap.globals.drops_wakeup_edges || snap.globals.drops_pids)
			fprintf(stderr, PROG ": warning: maps were full, counts are lower bounds (threads "
					"%llu, sockets %llu, wakeup edges %llu, pids %llu dropped)\n",
				snap.globals.drops_threads, snap.globals.drops_sockets,
				snap.globals.drops_wakeup_edges, snap.globals.drops_pids);
		fprintf(stderr, PROG ": wrote %s: %zu threads, %llu requests, %.1f s (%s)\n", o.output,
			snap.nthreads, (unsigned long long)snap.requests.sum.count, meta.duration_s,
			meta.end_reason);
	}
	probes_detach(links, nlinks);
	snapshot_free(&snap);
	free(iv.items);
	free(links);
	free(meta.cmdline);
	spinscope_bpf__destroy(skel);
	return 0;
}
