/*
 * delayline: a packet-level delay line between two TUN devices, for kernels without sch_netem.
 *
 *   delayline --outer IFACE --inner IFACE [--inner-netns NAME|PATH] --rtt-ms R
 *             [--limit-packets N] [--limit-bytes B] [--fifo PRIO] [--die-with-parent]
 *
 * Two existing TUN devices (created by `ip tuntap add mode tun`, which spinscope's lab/netcond.py
 * does): IFACE --outer in the namespace delayline starts in, IFACE --inner in the network namespace
 * --inner-netns (a name under /run/netns, or a path; we setns() there before opening /dev/net/tun,
 * because a TUN fd attaches to the device of that name in the namespace current at open time).
 * Every IP packet the kernel routes out of one device is read here, held R/2 ms, and written into
 * the other device, where the kernel receives it as if it had arrived on a wire. So --rtt-ms is the
 * round-trip time the line adds (the sweeps' `delay_ms`, the papers' "+5 ms"): R/2 on the way to the
 * inner side, R/2 on the way back.
 *
 * Why a packet forwarder and not a TCP proxy: a proxy would terminate TCP, and the server would write
 * into a local socket whose peer is the proxy, with the proxy's receive window and no delay in its ACKs.
 * Here the server's TCP talks to the client's TCP; only time is added. Segments, ACKs and window
 * updates pass untouched, so the server's send buffer drains at the pace of ACKs that take RTT to come
 * back, and the client's receive window limits what is in flight, as over a real link.
 *
 * Packets are MTU-sized: the TUN devices are opened without IFF_VNET_HDR and no TUNSETOFFLOAD, so the
 * kernel segments GSO packets and fills in checksums before they reach us (a TUN device only advertises
 * TSO/checksum offload to the stack once userspace enables it).
 *
 * A constant delay per direction means each direction is a FIFO: a packet's due time is the time it was
 * read plus the delay, so due times are in order and only the queue's head needs a timer. The loop is
 * ppoll() on both fds with a timeout until the earliest head is due (nanosecond timespec, CLOCK_MONOTONIC
 * throughout; the timer slack is lowered to 1 us so a 0.5 ms hold is not rounded up by 50 us).
 * A timed wake-up still comes late, by tens of microseconds on a busy virtual machine, which is 10% of a
 * 0.5 ms hold: the loop keeps a running mean of that lateness (the "lead") and asks to be woken that
 * much early, releasing whatever is due within the lead, so packets leave on time on average rather than
 * always late. The same wake-up latency hides at the other end: a packet that arrives while we sleep
 * waits for us to wake before we can stamp it. The lateness of our timed wake-ups is our best estimate of
 * that wait too (the same process woken on the same CPUs), so the first packet read after a sleep is
 * stamped that much earlier (never before the previous packet of its direction). Packets read while
 * the line is awake waited for nothing and are stamped as read.
 *
 * Bounded memory: at most --limit-packets (default 8192) and --limit-bytes (default 16 MiB) are held per
 * direction; a packet beyond either is dropped and counted (a tail drop, as a full router queue does).
 * Rate limiting is not done here: shape with tbf on the TUN devices (netcond.py does), which puts the
 * serialization before the propagation delay, as on a link.
 *
 * Output (stdout, one JSON object per line): {"event":"ready",...} once both devices are open;
 * {"event":"stats",...} on SIGUSR1; {"event":"exit",...} on SIGTERM/SIGINT (clean shutdown: the held
 * packets are discarded, counted as "discarded_at_exit") or when a device goes away (exit status 1).
 * The counters: packets and bytes forwarded, dropped (queue full), write errors, the deepest queue seen,
 * and how late packets left against their due time (mean and max, microseconds; negative: early, within
 * the lead), plus the lead itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define MAX_PACKET 65536  /* larger than any MTU a TUN device accepts; read() never truncates */
#define READ_BATCH 256    /* packets read from one fd before looking at the other and the timers */

/* ---------------------------------------------------------------- a FIFO per direction */

struct packet {
	uint64_t due_ns;
	uint32_t len;
	unsigned char *data;
};

struct direction {
	const char *name;  /* "to_inner" (requests to the server) or "to_outer" (responses) */
	int in_fd, out_fd;
	struct packet *ring;  /* capacity slots; head..head+count-1 are held, in due order */
	uint32_t capacity, head, count;
	uint64_t held_bytes;
	uint64_t last_read_ns;  /* the stamp of the last packet read (stamps never go backwards) */
	/* counters */
	uint64_t packets, bytes, dropped, dropped_bytes, write_errors, max_queue, max_queue_bytes;
	int64_t late_ns_sum, late_ns_max;  /* release time - due time (negative: early, within the lead) */
};

static uint64_t delay_ns;
/* How early to ask for a timed wake-up: a running mean of how late they came (see the top comment),
 * at most LEAD_MAX_NS and a quarter of the hold. */
static uint64_t lead_ns;
#define LEAD_MAX_NS 200000ull
static uint64_t limit_bytes = 16u << 20;
static volatile sig_atomic_t stop_signal, stats_requested;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int dir_init(struct direction *d, const char *name, int in_fd, int out_fd, uint32_t capacity)
{
	memset(d, 0, sizeof *d);
	d->name = name;
	d->in_fd = in_fd;
	d->out_fd = out_fd;
	d->capacity = capacity;
	d->ring = calloc(capacity, sizeof *d->ring);
	return d->ring ? 0 : -1;
}

/* Hold a copy of the packet until read time + delay; drop it when the queue is at a limit. */
static void enqueue(struct direction *d, const unsigned char *buf, uint32_t len, uint64_t read_ns)
{
	if (d->count == d->capacity || d->held_bytes + len > limit_bytes) {
		d->dropped++;
		d->dropped_bytes += len;
		return;
	}
	unsigned char *copy = malloc(len);
	if (!copy) {  /* out of memory counts as a drop, not a crash */
		d->dropped++;
		d->dropped_bytes += len;
		return;
	}
	memcpy(copy, buf, len);
	struct packet *p = &d->ring[(d->head + d->count) % d->capacity];
	p->due_ns = read_ns + delay_ns;
	p->len = len;
	p->data = copy;
	d->count++;
	d->held_bytes += len;
	if (d->count > d->max_queue)
		d->max_queue = d->count;
	if (d->held_bytes > d->max_queue_bytes)
		d->max_queue_bytes = d->held_bytes;
}

static void pop(struct direction *d)
{
	struct packet *p = &d->ring[d->head];
	d->held_bytes -= p->len;
	free(p->data);
	p->data = NULL;
	d->head = (d->head + 1) % d->capacity;
	d->count--;
}

/* Write every packet whose time has come into the other device. */
static void release(struct direction *d, uint64_t now)
{
	while (d->count && d->ring[d->head].due_ns <= now + lead_ns) {
		struct packet *p = &d->ring[d->head];
		/* A TUN write injects the packet into the stack synchronously and does not block; it fails
		 * only when the device is down or the packet is malformed: count it, the packet is lost. */
		if (write(d->out_fd, p->data, p->len) == (ssize_t)p->len) {
			int64_t late = (int64_t)(now - p->due_ns);
			d->packets++;
			d->bytes += p->len;
			d->late_ns_sum += late;
			if (late > d->late_ns_max)
				d->late_ns_max = late;
		} else {
			d->write_errors++;
		}
		pop(d);
	}
}

/* Read what the device has (up to READ_BATCH packets). `woken`: the line slept until this device had a
 * packet, so the first one waited about one wake-up (lead_ns) before it could be read. Returns -1 if the
 * device is gone. */
static int drain(struct direction *d, unsigned char *buf, bool woken)
{
	for (int i = 0; i < READ_BATCH; i++) {
		ssize_t n = read(d->in_fd, buf, MAX_PACKET);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			fprintf(stderr, "delayline: read (%s): %s\n", d->name, strerror(errno));
			return -1;
		}
		if (n == 0)
			return 0;
		/* Stamped per packet: the hold is measured from when this packet left the kernel's queue, or,
		 * for the packet that woke us, from about when it entered it. */
		uint64_t stamp = now_ns();
		if (woken && i == 0)
			stamp -= stamp - d->last_read_ns > lead_ns ? lead_ns : stamp - d->last_read_ns;
		d->last_read_ns = stamp;
		enqueue(d, buf, (uint32_t)n, stamp);
	}
	return 0;
}

static void print_event(const char *event, struct direction dirs[2], uint64_t discarded)
{
	printf("{\"event\":\"%s\",\"rtt_ms\":%.3f,\"lead_us\":%.1f", event, 2 * delay_ns / 1e6, lead_ns / 1e3);
	for (int i = 0; i < 2; i++) {
		struct direction *d = &dirs[i];
		printf(",\"%s\":{\"packets\":%llu,\"bytes\":%llu,\"dropped\":%llu,\"dropped_bytes\":%llu,"
		       "\"write_errors\":%llu,\"queued\":%u,\"max_queue\":%llu,\"max_queue_bytes\":%llu,"
		       "\"late_us_mean\":%.1f,\"late_us_max\":%.1f}",
		       d->name, (unsigned long long)d->packets, (unsigned long long)d->bytes,
		       (unsigned long long)d->dropped, (unsigned long long)d->dropped_bytes,
		       (unsigned long long)d->write_errors, d->count, (unsigned long long)d->max_queue,
		       (unsigned long long)d->max_queue_bytes,
		       d->packets ? d->late_ns_sum / 1e3 / (double)d->packets : 0.0, d->late_ns_max / 1e3);
	}
	if (discarded != UINT64_MAX)
		printf(",\"discarded_at_exit\":%llu", (unsigned long long)discarded);
	printf("}\n");
	fflush(stdout);
}

/* ---------------------------------------------------------------- set-up */

static int open_tun(const char *iface)
{
	int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "delayline: /dev/net/tun: %s\n", strerror(errno));
		return -1;
	}
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	/* IFF_NO_PI: bare IP packets; no IFF_VNET_HDR: the kernel hands us segmented, checksummed packets. */
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	if (strlen(iface) >= IFNAMSIZ) {
		fprintf(stderr, "delayline: interface name too long: %s\n", iface);
		close(fd);
		return -1;
	}
	strcpy(ifr.ifr_name, iface);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		fprintf(stderr, "delayline: TUNSETIFF %s: %s\n", iface, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static int enter_netns(const char *ns)
{
	char path[4096];
	if (strchr(ns, '/'))
		snprintf(path, sizeof path, "%s", ns);
	else
		snprintf(path, sizeof path, "/run/netns/%s", ns);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "delayline: %s: %s\n", path, strerror(errno));
		return -1;
	}
	int rc = setns(fd, CLONE_NEWNET);
	if (rc < 0)
		fprintf(stderr, "delayline: setns %s: %s\n", path, strerror(errno));
	close(fd);
	return rc;
}

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		stats_requested = 1;
	else
		stop_signal = sig;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: delayline --outer IFACE --inner IFACE [--inner-netns NAME|PATH] --rtt-ms R\n"
		"                 [--limit-packets N] [--limit-bytes B] [--fifo PRIO] [--die-with-parent]\n"
		"  --rtt-ms R         round-trip time added: each direction holds its packets R/2 ms\n"
		"  --limit-packets N  packets held per direction at most (default 8192); more are dropped\n"
		"  --limit-bytes B    bytes held per direction at most (default 16 MiB)\n"
		"  --fifo PRIO        run SCHED_FIFO at PRIO, so a busy machine does not stretch the delay\n"
		"  --die-with-parent  get SIGTERM when the parent exits\n");
}

int main(int argc, char **argv)
{
	const char *outer = NULL, *inner = NULL, *inner_ns = NULL;
	double rtt_ms = -1;
	long limit_packets = 8192, fifo = 0;
	bool die_with_parent = false;
	static const struct option opts[] = {
		{ "outer", required_argument, NULL, 'o' },  { "inner", required_argument, NULL, 'i' },
		{ "inner-netns", required_argument, NULL, 'n' }, { "rtt-ms", required_argument, NULL, 'r' },
		{ "limit-packets", required_argument, NULL, 'p' }, { "limit-bytes", required_argument, NULL, 'b' },
		{ "fifo", required_argument, NULL, 'f' }, { "die-with-parent", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' }, { 0 } };
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		char *end = NULL;
		switch (c) {
		case 'o': outer = optarg; break;
		case 'i': inner = optarg; break;
		case 'n': inner_ns = optarg; break;
		case 'r': rtt_ms = strtod(optarg, &end); break;
		case 'p': limit_packets = strtol(optarg, &end, 10); break;
		case 'b': limit_bytes = strtoull(optarg, &end, 10); break;
		case 'f': fifo = strtol(optarg, &end, 10); break;
		case 'd': die_with_parent = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
		if (end && *end) {
			fprintf(stderr, "delayline: not a number: %s\n", optarg);
			usage(stderr);
			return 2;
		}
	}
	if (!outer || !inner || rtt_ms < 0 || rtt_ms > 60000 || limit_packets < 1 || limit_packets > 1 << 24 ||
	    limit_bytes < MAX_PACKET || optind != argc) {
		usage(stderr);
		return 2;
	}
	delay_ns = (uint64_t)(rtt_ms * 1e6 / 2 + 0.5);

	if (die_with_parent && prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
		perror("delayline: PR_SET_PDEATHSIG");
	/* 1 us of timer slack instead of 50 us: the hold is sub-millisecond for small delays. */
	prctl(PR_SET_TIMERSLACK, 1000UL);
	if (fifo > 0) {
		struct sched_param sp = { .sched_priority = (int)fifo };
		if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
			perror("delayline: SCHED_FIFO (continuing without)");
	}

	/* Signals are blocked except inside ppoll(), so a SIGTERM cannot slip in between the check of the
	 * flag and the wait. */
	sigset_t blocked, waitmask;
	sigemptyset(&blocked);
	sigaddset(&blocked, SIGTERM);
	sigaddset(&blocked, SIGINT);
	sigaddset(&blocked, SIGUSR1);
	sigprocmask(SIG_BLOCK, &blocked, &waitmask);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sigdelset(&waitmask, SIGTERM);
	sigdelset(&waitmask, SIGINT);
	sigdelset(&waitmask, SIGUSR1);

	int outer_fd = open_tun(outer);
	if (outer_fd < 0)
		return 1;
	if (inner_ns && enter_netns(inner_ns) < 0)
		return 1;
	int inner_fd = open_tun(inner);
	if (inner_fd < 0)
		return 1;

	struct direction dirs[2];
	unsigned char *buf = malloc(MAX_PACKET);
	if (!buf || dir_init(&dirs[0], "to_inner", outer_fd, inner_fd, (uint32_t)limit_packets) < 0 ||
	    dir_init(&dirs[1], "to_outer", inner_fd, outer_fd, (uint32_t)limit_packets) < 0) {
		fprintf(stderr, "delayline: out of memory\n");
		return 1;
	}
	print_event("ready", dirs, UINT64_MAX);

	int status = 0;
	struct pollfd pfd[2] = { { .fd = outer_fd, .events = POLLIN }, { .fd = inner_fd, .events = POLLIN } };
	while (!stop_signal) {
		uint64_t now = now_ns();
		release(&dirs[0], now);
		release(&dirs[1], now);

		/* Sleep until a packet arrives or the earliest held packet is due. */
		uint64_t next = UINT64_MAX;
		for (int i = 0; i < 2; i++)
			if (dirs[i].count && dirs[i].ring[dirs[i].head].due_ns < next)
				next = dirs[i].ring[dirs[i].head].due_ns;
		struct timespec ts, *timeout = NULL;
		uint64_t wake = UINT64_MAX;  /* when the timeout should end, if one is set */
		bool sleeps = true;  /* ppoll may block: a packet that ends it waited for us to wake */
		if (next != UINT64_MAX) {
			wake = next - lead_ns;
			uint64_t wait = wake > now ? wake - now : 0;
			sleeps = wait > 0;
			ts.tv_sec = (time_t)(wait / 1000000000ull);
			ts.tv_nsec = (long)(wait % 1000000000ull);
			timeout = &ts;
		}
		int n = ppoll(pfd, 2, timeout, &waitmask);
		if (n == 0 && wake != UINT64_MAX) {
			/* A timed wake-up: learn how late it came (the plain mean of the first 8 samples, then
			 * 1/8 weight per sample, so the first packets of a cell are not all late). */
			static int64_t samples;
			uint64_t woke = now_ns();
			int64_t late = woke > wake ? (int64_t)(woke - wake) : 0;
			samples += samples < 8;
			int64_t lead = (int64_t)lead_ns + (late - (int64_t)lead_ns) / samples;
			uint64_t cap = delay_ns / 4 < LEAD_MAX_NS ? delay_ns / 4 : LEAD_MAX_NS;
			lead_ns = lead < 0 ? 0 : (uint64_t)lead > cap ? cap : (uint64_t)lead;
		}
		if (n < 0) {
			if (errno == EINTR) {
				if (stats_requested) {
					stats_requested = 0;
					print_event("stats", dirs, UINT64_MAX);
				}
				continue;
			}
			perror("delayline: ppoll");
			status = 1;
			break;
		}
		bool gone = false;
		for (int i = 0; i < 2; i++) {
			if (pfd[i].revents & (POLLERR | POLLHUP | POLLNVAL)) {
				fprintf(stderr, "delayline: %s: device gone (revents 0x%x)\n", i ? inner : outer,
					pfd[i].revents);
				gone = true;
			} else if ((pfd[i].revents & POLLIN) && drain(&dirs[i], buf, sleeps) < 0) {
				gone = true;
			}
		}
		if (gone) {
			status = 1;
			break;
		}
	}

	uint64_t discarded = dirs[0].count + dirs[1].count;
	print_event("exit", dirs, discarded);
	for (int i = 0; i < 2; i++) {
		fprintf(stderr, "delayline: %s: %llu packets forwarded, %llu dropped (queue full), %llu write errors, "
			"deepest queue %llu packets\n", dirs[i].name, (unsigned long long)dirs[i].packets,
			(unsigned long long)dirs[i].dropped, (unsigned long long)dirs[i].write_errors,
			(unsigned long long)dirs[i].max_queue);
		while (dirs[i].count)
			pop(&dirs[i]);
		free(dirs[i].ring);
	}
	free(buf);
	close(outer_fd);
	close(inner_fd);
	return status;
}
