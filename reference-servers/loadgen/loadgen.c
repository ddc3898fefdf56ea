/*
 * loadgen: HTTP/1.1 load generator for refserver (and any server with the same paths), and for
 * memcached (--protocol memcache).
 *
 * Closed loop (default): --concurrency C connections, each sends a request, waits for the
 *   response, optionally thinks --think-ms, and repeats.
 * Open loop (--rate R and/or --burst): requests are scheduled at fixed times regardless of
 *   responses and sent on an idle connection (up to --concurrency connections, default 256
 *   in this mode); latency is measured from the *scheduled* time, so queueing inside the
 *   load generator counts (no coordinated omission).
 *   --burst T:R:D[,T:R:D...]  from T seconds after the start of the run (warmup included),
 *   send at R requests/s for D seconds instead of --rate.  "2:500:1" = at t=2s, 500 rps for 1s.
 *
 * Stopping: --duration S of measurement after --warmup S (warmup responses are not counted),
 *   or --requests N: exactly N measured requests are issued and their outcomes awaited
 *   (requests + errors == N).  With --drain, --duration stops issuing requests but awaits those
 *   in flight, so every request the server saw is counted.  Every response is checked: status
 *   200 and, for /bytes/N and /null, the Content-Length; --verify also checks the body pattern
 *   (byte i = 'a' + i % 26).
 *   Connection failures, timeouts (--timeout-ms, default 10000) and bad responses are errors.
 * Mix: --mix W:PATH[,W:PATH...] picks each request's path by weight, from a PRNG seeded with
 *   --seed, so the sequence is reproducible (per thread with --threads T).
 * Templates: a path with a '*' (e.g. "/file/" then "*") has it replaced, per request, by a key in
 *   [0, --keys K) picked by the same PRNG (a file set served by refserver --docroot).
 * memcached (--protocol memcache): the "paths" are the commands get and set (--mix 9:get,1:set;
 *   default get), on keys key:0 .. key:<K-1> picked by the same PRNG (--keys K, default 1000).
 *   A set stores --value-bytes N (default 100) of the /bytes pattern and must answer STORED; a
 *   get answers END (a miss) or VALUE with N bytes (--verify checks them); both count as
 *   requests.  Keep-alive as in HTTP: --keepalive off closes the connection after each reply.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLASSES 32
#define MAX_BURSTS 32
#define MAX_HEADER 8192
#define READ_CHUNK 65536
#define MC_MAX_VALUE (1u << 20)        /* memcached's default item size limit */
#define MC_TRAILER "\r\nEND\r\n"       /* after a get's value */
#define MC_TRAILER_LEN 7
#define RETRY_DELAY_NS 10000000ull  /* after a failed connection, before the next attempt */
#define NS 1000000000ull

/* ---------------------------------------------------------------- latency histogram */

/* Log-linear buckets over nanoseconds: 64 sub-buckets per power of two, ~1.5% precision,
 * fixed size no matter how long the run. */
#define SUB_BITS 6
#define SUB (1u << SUB_BITS)
#define NBUCKETS ((64 - SUB_BITS + 1) * SUB)

struct hist {
	uint64_t count, sum_ns, max_ns;
	uint64_t b[NBUCKETS];
};

static unsigned bucket_of(uint64_t v)
{
	if (v < SUB)
		return (unsigned)v;
	unsigned msb = 63u - (unsigned)__builtin_clzll(v), shift = msb - SUB_BITS;
	return (shift + 1) * SUB + (unsigned)((v >> shift) & (SUB - 1));
}

/* Upper bound of a bucket's range. */
static uint64_t bucket_top(unsigned i)
{
	if (i < SUB)
		return i;
	unsigned shift = i / SUB - 1;
	return ((uint64_t)(SUB + i % SUB + 1) << shift) - 1;
}

static void hist_add(struct hist *h, uint64_t ns)
{
	h->count++;
	h->sum_ns += ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
	h->b[bucket_of(ns)]++;
}

static void hist_merge(struct hist *dst, const struct hist *src)
{
	dst->count += src->count;
	dst->sum_ns += src->sum_ns;
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
	for (unsigned i = 0; i < NBUCKETS; i++)
		dst->b[i] += src->b[i];
}

static double hist_pct_ms(const struct hist *h, double pct)
{
	if (!h->count)
		return 0;
	uint64_t rank = (uint64_t)ceil(pct / 100.0 * (double)h->count), seen = 0;
	if (rank == 0)
		rank = 1;
	for (unsigned i = 0; i < NBUCKETS; i++) {
		seen += h->b[i];
		if (seen >= rank) {
			uint64_t top = bucket_top(i);
			return (double)(top < h->max_ns ? top : h->max_ns) / 1e6;
		}
	}
	return (double)h->max_ns / 1e6;
}

/* ---------------------------------------------------------------- configuration */

struct klass {
	char path[256];           /* HTTP: the target; memcache: "get" or "set" */
	unsigned weight;
	long long expect_len;     /* -1: not known in advance; memcache get: the value's length */
	bool pattern;             /* body follows the /bytes pattern */
	bool set;                 /* memcache: a set (else a get) */
	bool templ;               /* HTTP: path has a '*', replaced per request by a key in [0, --keys) */
	char req[2][512];         /* HTTP: [keepalive] request text */
	size_t req_len[2];
};

enum protocol { P_HTTP, P_MEMCACHE };

struct burst {
	double start, rate, dur;
};

static struct config {
	const char *host;
	int port;
	struct klass cls[MAX_CLASSES];
	int ncls;
	unsigned total_weight;
	enum protocol protocol;
	unsigned value_bytes, keys;  /* memcache */
	int concurrency, threads, rcvbuf, timeout_ms;
	double think_ms, rate, duration, warmup;
	struct burst bursts[MAX_BURSTS];
	int nbursts;
	uint64_t requests;        /* 0: run for --duration */
	uint64_t seed;
	bool keepalive, json, verify, open_loop, drain;
	struct sockaddr_storage addr;
	socklen_t addrlen;
} cfg = {
	.host = "127.0.0.1", .port = 0, .concurrency = 0, .threads = 1, .timeout_ms = 10000,
	.duration = 10, .seed = 1, .keepalive = true, .value_bytes = 100, .keys = 1000,
};

static char *mc_value;  /* memcache: a set's data block, value_bytes of the pattern and "\r\n" */

/* ---------------------------------------------------------------- per-thread state */

enum cstate {
	C_FREE,        /* no socket */
	C_CONNECTING,
	C_IDLE,        /* connected, no request in flight */
	C_SENDING,
	C_RECEIVING,
};

struct conn {
	int fd;
	enum cstate state;
	bool has_request;           /* assigned: connecting for it, sending or receiving */
	bool waiting;               /* closed loop: next request due at wake_at (think/backoff) */
	int cls;
	bool measured;
	uint64_t t_start;           /* latency reference: send time, or scheduled time (open loop) */
	uint64_t wake_at, deadline;
	const char *req;            /* the request being sent */
	size_t req_len, req_off;
	char *mc_req;               /* memcache: the request text (a set carries its value) */
	/* response parsing */
	char hdr[MAX_HEADER];
	size_t hdr_len;
	bool in_body, close_after;
	int status;
	long long content_len;
	uint64_t body_got;
};

struct pending {                    /* open loop: scheduled, not yet sent */
	uint64_t t;
	int cls;
	bool measured;
};

struct worker {
	int epfd, nconns;
	struct conn *conns;
	int *idle;                  /* open loop: stack of C_IDLE connections */
	int nidle;
	struct pending *pend;       /* open loop: FIFO ring of scheduled requests */
	size_t pend_cap, pend_head, pend_len;
	uint64_t rng;
	uint64_t next_send;         /* open loop: time of the next scheduled request */
	uint64_t quota, issued;     /* --requests: measured requests to issue / issued */
	uint64_t outstanding;       /* measured requests issued and not finished */
	uint64_t t_begin, t_measure, t_end, next_timer_scan;
	/* results */
	uint64_t ok, errors, bytes;
	struct hist all;
	struct hist cls[MAX_CLASSES];
	pthread_t tid;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_next(uint64_t *s)
{
	/* splitmix64: tiny and identical everywhere, so --seed reproduces the mix */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int pick_class(struct worker *w)
{
	uint64_t r;

	if (cfg.ncls == 1)
		return 0;
	r = rng_next(&w->rng) % cfg.total_weight;
	for (int i = 0; i < cfg.ncls; i++) {
		if (r < cfg.cls[i].weight)
			return i;
		r -= cfg.cls[i].weight;
	}
	return cfg.ncls - 1;
}

static uint64_t deadline_from(uint64_t t)
{
	return t + (uint64_t)cfg.timeout_ms * 1000000ull;
}

/*
 * The point where a request is issued.  Warmup requests are unlimited and not counted;
 * measured ones are limited by --requests and tracked until they finish.
 */
static bool issue(struct worker *w, uint64_t t, bool *measured)
{
	*measured = t >= w->t_measure;
	if (!*measured)
		return t < w->t_end;
	if (cfg.requests ? w->issued == w->quota : t >= w->t_end)
		return false;
	w->issued++;
	w->outstanding++;
	return true;
}

/* ---------------------------------------------------------------- connections */

static void watch(struct worker *w, struct conn *c, int op, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.u32 = (uint32_t)(c - w->conns) };

	if (epoll_ctl(w->epfd, op, c->fd, &ev) != 0)
		perror("loadgen: epoll_ctl");
}

static void conn_close(struct worker *w, struct conn *c)
{
	if (c->state == C_IDLE && cfg.open_loop)
		for (int j = 0; j < w->nidle; j++)
			if (w->idle[j] == c - w->conns) {
				w->idle[j] = w->idle[--w->nidle];
				break;
			}
	if (c->fd >= 0)
		close(c->fd); /* also leaves the epoll set */
	c->fd = -1;
	c->state = C_FREE;
}

static bool conn_open(struct worker *w, struct conn *c)
{
	int one = 1, fd = socket(cfg.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return false;
	/* Before connect(), so the window scale is negotiated for it. */
	if (cfg.rcvbuf > 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &cfg.rcvbuf, sizeof cfg.rcvbuf);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(fd, (struct sockaddr *)&cfg.addr, cfg.addrlen) != 0 && errno != EINPROGRESS) {
		close(fd);
		return false;
	}
	c->fd = fd;
	c->state = C_CONNECTING;
	c->deadline = deadline_from(now_ns());
	watch(w, c, EPOLL_CTL_ADD, EPOLLOUT);
	return true;
}

/* memcache: "get KEY\r\n" or "set KEY 0 0 N\r\n<value>\r\n" into c->mc_req. */
static size_t mc_request(struct worker *w, struct conn *c, const struct klass *k)
{
	unsigned key = (unsigned)(rng_next(&w->rng) % cfg.keys);

	if (!k->set)
		return (size_t)sprintf(c->mc_req, "get key:%u\r\n", key);
	int n = sprintf(c->mc_req, "set key:%u 0 0 %u\r\n", key, cfg.value_bytes);
	memcpy(c->mc_req + n, mc_value, cfg.value_bytes + 2);
	return (size_t)n + cfg.value_bytes + 2;
}

static void assign(struct worker *w, struct conn *c, int cls, bool measured, uint64_t t_start)
{
	const struct klass *k = &cfg.cls[cls];

	if (cfg.protocol == P_MEMCACHE) {
		c->req = c->mc_req;
		c->req_len = mc_request(w, c, k);
	} else if (k->templ) {       /* the star becomes the key: /file/<key> */
		const char *star = strchr(k->path, '*');
		unsigned key = (unsigned)(rng_next(&w->rng) % cfg.keys);
		c->req = c->mc_req;
		c->req_len = (size_t)snprintf(c->mc_req, 600, "GET %.*s%u%s HTTP/1.1\r\nHost: %s\r\n%s\r\n",
					      (int)(star - k->path), k->path, key, star + 1, cfg.host,
					      cfg.keepalive ? "" : "Connection: close\r\n");
	} else {
		c->req = k->req[cfg.keepalive];
		c->req_len = k->req_len[cfg.keepalive];
	}
	c->has_request = true;
	c->cls = cls;
	c->measured = measured;
	c->t_start = t_start;
	c->req_off = 0;
	c->hdr_len = 0;
	c->in_body = false;
	c->close_after = false;
	c->body_got = 0;
	c->deadline = deadline_from(now_ns());
}

static void record(struct worker *w, struct conn *c, bool ok, uint64_t t)
{
	if (c->measured) {
		w->outstanding--;
		if (ok) {
			uint64_t lat = t > c->t_start ? t - c->t_start : 0;
			w->ok++;
			hist_add(&w->all, lat);
			hist_add(&w->cls[c->cls], lat);
		} else {
			w->errors++;
		}
	}
	c->has_request = false;
}

static void closed_loop_next(struct worker *w, struct conn *c, uint64_t at);
static void dispatch(struct worker *w);

/* The request on c is over (ok or not): record it and move the connection on. */
static void request_done(struct worker *w, struct conn *c, bool ok, uint64_t t)
{
	record(w, c, ok, t);
	if (!ok || c->close_after || !cfg.keepalive || c->state != C_RECEIVING)
		conn_close(w, c);
	else
		c->state = C_IDLE;
	if (cfg.open_loop) {
		if (c->state == C_IDLE)
			w->idle[w->nidle++] = (int)(c - w->conns);
		dispatch(w);
	} else {
		closed_loop_next(w, c, ok ? t + (uint64_t)(cfg.think_ms * 1e6) : t + RETRY_DELAY_NS);
	}
}

static void conn_send(struct worker *w, struct conn *c)
{
	while (c->req_off < c->req_len) {
		ssize_t n = write(c->fd, c->req + c->req_off, c->req_len - c->req_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (c->state != C_SENDING)
				watch(w, c, EPOLL_CTL_MOD, EPOLLOUT);
			c->state = C_SENDING;
			return;
		}
		if (n < 0) {
			request_done(w, c, false, now_ns());
			return;
		}
		c->req_off += (size_t)n;
	}
	if (c->state != C_RECEIVING)
		watch(w, c, EPOLL_CTL_MOD, EPOLLIN);
	c->state = C_RECEIVING;
}

/* Parse the response header block; false if malformed. */
static bool parse_header(struct conn *c)
{
	char *p = c->hdr, *end = c->hdr + c->hdr_len;

	if (c->hdr_len < 12 || memcmp(p, "HTTP/1.", 7) != 0)
		return false;
	c->status = atoi(p + 9);
	c->content_len = -1;
	while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL && ++p < end) {
		char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!strncasecmp(p, "Content-Length:", 15))
			c->content_len = strtoll(p + 15, NULL, 10);
		else if (!strncasecmp(p, "Connection:", 11) && eol && memmem(p, (size_t)(eol - p), "close", 5))
			c->close_after = true;
	}
	return c->content_len >= 0;
}

/*
 * memcache: the reply's first line is STORED (set), END (get, a miss) or "VALUE KEY FLAGS BYTES"
 * (get, a hit: the value and "\r\nEND\r\n" follow, taken as the body).  False for anything else.
 */
static bool parse_mc_line(struct conn *c, const struct klass *k)
{
	char line[256];
	unsigned long long n;
	int used = -1;

	if (c->hdr_len >= sizeof line)
		return false;
	memcpy(line, c->hdr, c->hdr_len);
	line[c->hdr_len] = '\0';
	c->content_len = 0;
	if (k->set)
		return !strcmp(line, "STORED\r\n");
	if (!strcmp(line, "END\r\n"))
		return true;
	if (sscanf(line, "VALUE %*s %*u %llu\r\n%n", &n, &used) != 1 || used != (int)c->hdr_len ||
	    (long long)n != k->expect_len)
		return false;
	c->content_len = (long long)n + MC_TRAILER_LEN;
	return true;
}

/* The response head (HTTP headers, memcache's first line) is complete: parse and check it. */
static bool head_ok(struct conn *c, const struct klass *k)
{
	if (cfg.protocol == P_MEMCACHE)
		return parse_mc_line(c, k);
	return parse_header(c) && c->status == 200 &&
	       (k->expect_len < 0 || c->content_len == k->expect_len);
}

/* Body bytes b[0..n) at offset off: the /bytes pattern, and memcache's trailer after a value. */
static bool body_ok(const struct conn *c, const char *b, size_t n, uint64_t off)
{
	uint64_t data = (uint64_t)c->content_len - (cfg.protocol == P_MEMCACHE ? MC_TRAILER_LEN : 0);

	for (size_t i = 0; i < n; i++, off++)
		if (b[i] != (off < data ? (char)('a' + off % 26) : MC_TRAILER[off - data]))
			return false;
	return true;
}

static void conn_receive(struct worker *w, struct conn *c)
{
	static __thread char buf[READ_CHUNK];
	const struct klass *k = &cfg.cls[c->cls];
	/* end of the response head: HTTP's blank line, memcache's first line */
	const char *eoh = cfg.protocol == P_MEMCACHE ? "\r\n" : "\r\n\r\n";
	size_t eoh_len = strlen(eoh);

	for (;;) {
		ssize_t n = read(c->fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		uint64_t t = now_ns();
		if (n <= 0) { /* EOF or reset before the response was complete */
			request_done(w, c, false, t);
			return;
		}
		w->bytes += (uint64_t)n;
		char *p = buf;
		size_t len = (size_t)n;
		if (!c->in_body) {
			size_t room = sizeof c->hdr - c->hdr_len, take = len < room ? len : room;
			size_t scan = c->hdr_len >= eoh_len ? c->hdr_len - (eoh_len - 1) : 0;
			memcpy(c->hdr + c->hdr_len, p, take);
			c->hdr_len += take;
			char *e = memmem(c->hdr + scan, c->hdr_len - scan, eoh, eoh_len);
			if (!e) {
				if (c->hdr_len == sizeof c->hdr) {
					request_done(w, c, false, t);
					return;
				}
				continue;
			}
			size_t hlen = (size_t)(e + eoh_len - c->hdr), used = hlen - (c->hdr_len - take);
			c->hdr_len = hlen;
			if (!head_ok(c, k)) {
				request_done(w, c, false, t);
				return;
			}
			c->in_body = true;
			p += used;
			len -= used;
		}
		if (c->body_got + len > (uint64_t)c->content_len ||
		    (cfg.verify && k->pattern && !body_ok(c, p, len, c->body_got))) {
			request_done(w, c, false, t); /* bytes beyond the body, or wrong content */
			return;
		}
		c->body_got += len;
		if (c->body_got == (uint64_t)c->content_len) {
			request_done(w, c, true, t);
			return;
		}
	}
}

/* Send the assigned request, connecting first if needed. */
static void start(struct worker *w, struct conn *c)
{
	if (c->state != C_FREE) {
		conn_send(w, c);
	} else if (!conn_open(w, c)) {
		uint64_t t = now_ns();
		record(w, c, false, t);
		if (!cfg.open_loop)
			closed_loop_next(w, c, t + RETRY_DELAY_NS);
	}
}

static void on_connected(struct worker *w, struct conn *c)
{
	int err = 0;
	socklen_t len = sizeof err;

	getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
	if (err) {
		uint64_t t = now_ns();
		conn_close(w, c);
		if (c->has_request) {
			record(w, c, false, t);
			if (!cfg.open_loop)
				closed_loop_next(w, c, t + RETRY_DELAY_NS);
		}
		return;
	}
	c->state = C_IDLE;
	if (c->has_request) {
		conn_send(w, c);
	} else if (cfg.open_loop) {
		watch(w, c, EPOLL_CTL_MOD, EPOLLIN); /* only to notice the server closing it */
		w->idle[w->nidle++] = (int)(c - w->conns);
		dispatch(w);
	}
}

/* ---------------------------------------------------------------- closed loop */

/* Issue c's next request at time 'at' (now if at <= now). */
static void closed_loop_next(struct worker *w, struct conn *c, uint64_t at)
{
	uint64_t t = now_ns();
	bool measured;

	if (at > t) {
		c->waiting = true;
		c->wake_at = at;
		if (at < w->next_timer_scan)
			w->next_timer_scan = at;
		return;
	}
	c->waiting = false;
	if (!issue(w, t, &measured))
		return;
	assign(w, c, pick_class(w), measured, t);
	start(w, c);
}

/* ---------------------------------------------------------------- open loop */

static double rate_at(double t_rel)
{
	for (int i = 0; i < cfg.nbursts; i++)
		if (t_rel >= cfg.bursts[i].start && t_rel < cfg.bursts[i].start + cfg.bursts[i].dur)
			return cfg.bursts[i].rate / cfg.threads;
	return cfg.rate / cfg.threads;
}

/* Advance the schedule by one request; with no base rate, jump to the next burst. */
static void schedule_next(struct worker *w)
{
	double rel = (double)(w->next_send - w->t_begin) / 1e9, r = rate_at(rel), best = INFINITY;

	if (r > 0) {
		w->next_send += (uint64_t)(1e9 / r);
		return;
	}
	for (int i = 0; i < cfg.nbursts; i++)
		if (cfg.bursts[i].start > rel && cfg.bursts[i].start < best)
			best = cfg.bursts[i].start;
	w->next_send = isinf(best) ? UINT64_MAX : w->t_begin + (uint64_t)(best * 1e9);
}

static bool pend_push(struct worker *w, struct pending p)
{
	if (w->pend_len == w->pend_cap) {
		size_t cap = w->pend_cap ? 2 * w->pend_cap : 1024;
		struct pending *n = malloc(cap * sizeof *n);
		if (!n)
			return false;
		for (size_t i = 0; i < w->pend_len; i++)
			n[i] = w->pend[(w->pend_head + i) % w->pend_cap];
		free(w->pend);
		w->pend = n;
		w->pend_cap = cap;
		w->pend_head = 0;
	}
	w->pend[(w->pend_head + w->pend_len++) % w->pend_cap] = p;
	return true;
}

/* Give scheduled requests to idle connections, opening new ones up to --concurrency. */
static void dispatch(struct worker *w)
{
	while (w->pend_len > 0) {
		struct conn *c = NULL;
		if (w->nidle > 0)
			c = &w->conns[w->idle[--w->nidle]];
		for (int i = 0; !c && i < w->nconns; i++)
			if (w->conns[i].state == C_FREE)
				c = &w->conns[i];
		if (!c)
			return; /* all busy: the request waits, and its latency grows */
		struct pending p = w->pend[w->pend_head];
		w->pend_head = (w->pend_head + 1) % w->pend_cap;
		w->pend_len--;
		assign(w, c, p.cls, p.measured, p.t);
		start(w, c);
	}
}

static void open_loop_tick(struct worker *w, uint64_t t)
{
	while (w->next_send <= t) {
		uint64_t at = w->next_send;
		bool measured;

		schedule_next(w);
		if (!issue(w, at, &measured))
			continue;
		struct pending p = { .t = at, .cls = pick_class(w), .measured = measured };
		if (!pend_push(w, p) && measured) {
			w->outstanding--;
			w->errors++;
		}
	}
	dispatch(w);
}

/* ---------------------------------------------------------------- timers, main loop */

/* Think/backoff timers and request timeouts: an O(connections) scan, run only when the
 * earliest timer is due, and every 100 ms for timeouts. */
static void timer_scan(struct worker *w, uint64_t t)
{
	w->next_timer_scan = t + 100000000ull;
	for (int i = 0; i < w->nconns; i++) {
		struct conn *c = &w->conns[i];
		if (c->waiting && c->wake_at <= t) {
			closed_loop_next(w, c, t);
		} else if (c->waiting) {
			if (c->wake_at < w->next_timer_scan)
				w->next_timer_scan = c->wake_at;
		} else if ((c->has_request || c->state == C_CONNECTING) && c->deadline <= t) {
			if (c->has_request)
				request_done(w, c, false, t);
			else
				conn_close(w, c);
		}
	}
}

static bool finished(const struct worker *w, uint64_t t)
{
	if (cfg.requests)
		return w->issued == w->quota && w->outstanding == 0;
	return t >= w->t_end && (!cfg.drain || w->outstanding == 0);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event ev[256];

	w->t_begin = now_ns();
	w->t_measure = w->t_begin + (uint64_t)(cfg.warmup * 1e9);
	w->t_end = cfg.requests ? UINT64_MAX : w->t_measure + (uint64_t)(cfg.duration * 1e9);
	w->next_timer_scan = w->t_begin + 100000000ull;
	if (cfg.open_loop) {
		w->next_send = w->t_begin;
		if (rate_at(0) <= 0)
			schedule_next(w);
	} else {
		for (int i = 0; i < w->nconns; i++)
			closed_loop_next(w, &w->conns[i], 0);
	}

	for (;;) {
		uint64_t t = now_ns();
		if (finished(w, t))
			break;
		if (cfg.open_loop)
			open_loop_tick(w, t);
		if (t >= w->next_timer_scan)
			timer_scan(w, t);
		uint64_t wake = w->next_timer_scan;
		if (cfg.open_loop && w->next_send < wake)
			wake = w->next_send;
		if (t < w->t_end && w->t_end < wake)
			wake = w->t_end;
		/* epoll_pwait2: nanosecond timeout, so open-loop sends are not rounded to 1 ms. */
		t = now_ns();
		uint64_t d = wake <= t ? 0 : wake - t;
		struct timespec ts = { .tv_sec = (time_t)(d / NS), .tv_nsec = (long)(d % NS) };
		int n = epoll_pwait2(w->epfd, ev, 256, &ts, NULL);
		for (int i = 0; i < n; i++) {
			struct conn *c = &w->conns[ev[i].data.u32];
			if (c->state == C_CONNECTING)
				on_connected(w, c);
			else if (c->state == C_SENDING)
				conn_send(w, c);
			else if (c->state == C_RECEIVING)
				conn_receive(w, c);
			else if (c->state == C_IDLE)
				conn_close(w, c); /* the server closed an idle keep-alive connection */
		}
	}
	w->t_end = now_ns();
	for (int i = 0; i < w->nconns; i++)
		if (w->conns[i].fd >= 0)
			close(w->conns[i].fd);
	return NULL;
}

/* ---------------------------------------------------------------- options, output */

static void usage(FILE *f)
{
	fputs("usage: loadgen --port P [--host H] [--path /bytes/100 | --mix W:PATH,...] [--seed S]\n"
	      "               [--concurrency C] [--think-ms MS] [--rate R] [--burst T:R:D,...]\n"
	      "               [--duration S [--drain]] [--warmup S] [--requests N] [--threads T]\n"
	      "               [--rcvbuf BYTES] [--keepalive on|off] [--timeout-ms MS]\n"
	      "               [--protocol http|memcache] [--value-bytes N] [--keys K]\n"
	      "               [--verify] [--json]\n", f);
}

static bool add_class(const char *path, unsigned weight)
{
	struct klass *k;
	unsigned long long n;
	char *end;

	if (cfg.ncls == MAX_CLASSES || strlen(path) >= sizeof k->path || weight == 0 ||
	    (cfg.protocol == P_MEMCACHE ? strcmp(path, "get") && strcmp(path, "set") : path[0] != '/'))
		return false;
	k = &cfg.cls[cfg.ncls++];
	snprintf(k->path, sizeof k->path, "%s", path);
	k->weight = weight;
	k->expect_len = -1;
	cfg.total_weight += weight;
	if (cfg.protocol == P_MEMCACHE) {
		k->set = !strcmp(path, "set");
		k->expect_len = cfg.value_bytes; /* of a get's value: every set stores that many */
		k->pattern = !k->set;
		return true;
	}
	if (!strncmp(path, "/bytes/", 7) && (n = strtoull(path + 7, &end, 10), *end == '\0' && path[7])) {
		k->expect_len = (long long)n;
		k->pattern = true;
	} else if (!strcmp(path, "/null")) {
		k->expect_len = 0;
	} else if (strchr(path, '*')) {
		k->templ = true;
	}
	for (int ka = 0; ka < 2; ka++)
		k->req_len[ka] = (size_t)snprintf(k->req[ka], sizeof k->req[ka],
						  "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", path,
						  cfg.host, ka ? "" : "Connection: close\r\n");
	return true;
}

static bool parse_mix(char *s)
{
	for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
		char *colon = strchr(tok, ':');
		if (!colon)
			return false;
		*colon = '\0';
		if (!add_class(colon + 1, (unsigned)strtoul(tok, NULL, 10)))
			return false;
	}
	return cfg.ncls > 0;
}

static bool parse_bursts(char *s)
{
	for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
		struct burst *b = &cfg.bursts[cfg.nbursts];
		if (cfg.nbursts == MAX_BURSTS ||
		    sscanf(tok, "%lf:%lf:%lf", &b->start, &b->rate, &b->dur) != 3 ||
		    b->start < 0 || b->rate <= 0 || b->dur <= 0)
			return false;
		cfg.nbursts++;
	}
	return true;
}

static void print_lat_json(const struct hist *h)
{
	printf("{\"mean\": %.4f, \"p50\": %.4f, \"p90\": %.4f, \"p99\": %.4f, \"p99.9\": %.4f, "
	       "\"max\": %.4f}",
	       h->count ? (double)h->sum_ns / (double)h->count / 1e6 : 0.0, hist_pct_ms(h, 50),
	       hist_pct_ms(h, 90), hist_pct_ms(h, 99), hist_pct_ms(h, 99.9), (double)h->max_ns / 1e6);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "host", required_argument, NULL, 'H' },   { "port", required_argument, NULL, 'p' },
		{ "path", required_argument, NULL, 'P' },   { "mix", required_argument, NULL, 'm' },
		{ "seed", required_argument, NULL, 's' },   { "concurrency", required_argument, NULL, 'c' },
		{ "think-ms", required_argument, NULL, 'k' }, { "rate", required_argument, NULL, 'r' },
		{ "burst", required_argument, NULL, 'b' },  { "duration", required_argument, NULL, 'd' },
		{ "warmup", required_argument, NULL, 'w' }, { "requests", required_argument, NULL, 'n' },
		{ "threads", required_argument, NULL, 't' }, { "rcvbuf", required_argument, NULL, 'R' },
		{ "keepalive", required_argument, NULL, 'K' }, { "timeout-ms", required_argument, NULL, 'T' },
		{ "protocol", required_argument, NULL, 'o' }, { "value-bytes", required_argument, NULL, 'V' },
		{ "keys", required_argument, NULL, 'e' },    { "drain", no_argument, NULL, 'D' },
		{ "verify", no_argument, NULL, 'v' },       { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },         { 0 }
	};
	const char *path = NULL;
	char *mix = NULL;
	int opt;

	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'H':
			cfg.host = optarg;
			if (strlen(optarg) > 200) { /* the request texts are built in fixed buffers */
				fprintf(stderr, "loadgen: --host: at most 200 characters\n");
				return 2;
			}
			break;
		case 'p': cfg.port = atoi(optarg); break;
		case 'P': path = optarg; break;
		case 'm': mix = optarg; break;
		case 's': cfg.seed = strtoull(optarg, NULL, 10); break;
		case 'c': cfg.concurrency = atoi(optarg); break;
		case 'k': cfg.think_ms = atof(optarg); break;
		case 'r': cfg.rate = atof(optarg); break;
		case 'b':
			if (!parse_bursts(optarg)) {
				fprintf(stderr, "loadgen: bad --burst (want T:RATE:DUR[,...])\n");
				return 2;
			}
			break;
		case 'd': cfg.duration = atof(optarg); break;
		case 'w': cfg.warmup = atof(optarg); break;
		case 'n': cfg.requests = strtoull(optarg, NULL, 10); break;
		case 't': cfg.threads = atoi(optarg); break;
		case 'R': cfg.rcvbuf = atoi(optarg); break;
		case 'K': cfg.keepalive = strcmp(optarg, "off") != 0; break;
		case 'T': cfg.timeout_ms = atoi(optarg); break;
		case 'o':
			if (strcmp(optarg, "http") && strcmp(optarg, "memcache")) {
				fprintf(stderr, "loadgen: bad --protocol (want http or memcache)\n");
				return 2;
			}
			cfg.protocol = strcmp(optarg, "http") ? P_MEMCACHE : P_HTTP;
			break;
		case 'V': cfg.value_bytes = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'e': cfg.keys = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'D': cfg.drain = true; break;
		case 'v': cfg.verify = true; break;
		case 'j': cfg.json = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (cfg.port <= 0 || cfg.port > 65535 || optind != argc || cfg.threads < 1 ||
	    cfg.duration <= 0 || cfg.warmup < 0 || cfg.timeout_ms <= 0 || cfg.rate < 0 ||
	    cfg.value_bytes == 0 || cfg.value_bytes > MC_MAX_VALUE || cfg.keys == 0) {
		usage(stderr);
		return 2;
	}
	const char *default_path = cfg.protocol == P_MEMCACHE ? "get" : "/null";
	if (mix ? !parse_mix(mix) : !add_class(path ? path : default_path, 1)) {
		fprintf(stderr, cfg.protocol == P_MEMCACHE ? "loadgen: bad --path/--mix (want W:get|set[,...])\n"
							   : "loadgen: bad --path/--mix (want W:/PATH[,...])\n");
		return 2;
	}
	if (cfg.protocol == P_MEMCACHE) {
		if (!(mc_value = malloc(cfg.value_bytes + 2)))
			return 1;
		for (unsigned i = 0; i < cfg.value_bytes; i++)
			mc_value[i] = (char)('a' + i % 26);
		memcpy(mc_value + cfg.value_bytes, "\r\n", 2);
	}
	cfg.open_loop = cfg.rate > 0 || cfg.nbursts > 0;
	if (cfg.concurrency <= 0)
		cfg.concurrency = cfg.open_loop ? 256 : 10;
	if (cfg.threads > cfg.concurrency)
		cfg.threads = cfg.concurrency;

	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	char port[16];
	snprintf(port, sizeof port, "%d", cfg.port);
	int rc = getaddrinfo(cfg.host, port, &hints, &ai);
	if (rc != 0) {
		fprintf(stderr, "loadgen: %s: %s\n", cfg.host, gai_strerror(rc));
		return 1;
	}
	memcpy(&cfg.addr, ai->ai_addr, ai->ai_addrlen);
	cfg.addrlen = ai->ai_addrlen;
	freeaddrinfo(ai);

	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);

	struct worker *ws = calloc((size_t)cfg.threads, sizeof *ws);
	if (!ws)
		return 1;
	for (int i = 0; i < cfg.threads; i++) {
		struct worker *w = &ws[i];
		w->nconns = cfg.concurrency / cfg.threads + (i < cfg.concurrency % cfg.threads);
		w->quota = cfg.requests / (uint64_t)cfg.threads + ((uint64_t)i < cfg.requests % (uint64_t)cfg.threads);
		w->rng = cfg.seed * 0x100000001b3ull + (uint64_t)i;
		w->conns = calloc((size_t)w->nconns, sizeof *w->conns);
		w->idle = calloc((size_t)w->nconns, sizeof *w->idle);
		w->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (!w->conns || !w->idle || w->epfd < 0) {
			fprintf(stderr, "loadgen: out of resources\n");
			return 1;
		}
		for (int j = 0; j < w->nconns; j++) {
			w->conns[j].fd = -1;
			/* "set key:<u32> 0 0 <value-bytes>\r\n" + value + "\r\n" */
			if (!(w->conns[j].mc_req = malloc(cfg.value_bytes + 64 > 600 ? cfg.value_bytes + 64 : 600))) {
				fprintf(stderr, "loadgen: out of resources\n");
				return 1;
			}
		}
	}
	for (int i = 0; i < cfg.threads; i++)
		if (pthread_create(&ws[i].tid, NULL, worker_main, &ws[i]) != 0) {
			fprintf(stderr, "loadgen: pthread_create failed\n");
			return 1;
		}

	static struct hist all, cls[MAX_CLASSES];
	uint64_t ok = 0, errors = 0, bytes = 0, t0 = UINT64_MAX, t1 = 0;
	for (int i = 0; i < cfg.threads; i++) {
		struct worker *w = &ws[i];
		pthread_join(w->tid, NULL);
		ok += w->ok;
		errors += w->errors;
		bytes += w->bytes;
		hist_merge(&all, &w->all);
		for (int k = 0; k < cfg.ncls; k++)
			hist_merge(&cls[k], &w->cls[k]);
		if (w->t_measure < t0)
			t0 = w->t_measure;
		if (w->t_end > t1)
			t1 = w->t_end;
		close(w->epfd);
		for (int j = 0; j < w->nconns; j++)
			free(w->conns[j].mc_req);
		free(w->conns);
		free(w->idle);
		free(w->pend);
	}
	free(ws);
	free(mc_value);
	double dur = t1 > t0 ? (double)(t1 - t0) / 1e9 : 0;
	double tput = dur > 0 ? (double)ok / dur : 0;

	if (cfg.json) {
		printf("{\"requests\": %llu, \"throughput\": %.2f, \"errors\": %llu, \"duration_s\": %.4f, "
		       "\"bytes\": %llu, \"latency_ms\": ",
		       (unsigned long long)ok, tput, (unsigned long long)errors, dur,
		       (unsigned long long)bytes);
		print_lat_json(&all);
		printf(", \"classes\": {");
		for (int k = 0; k < cfg.ncls; k++) {
			printf("%s\"%s\": {\"requests\": %llu, \"latency_ms\": ", k ? ", " : "",
			       cfg.cls[k].path, (unsigned long long)cls[k].count);
			print_lat_json(&cls[k]);
			printf("}");
		}
		printf("}}\n");
	} else {
		printf("%llu requests, %llu errors in %.2f s: %.1f req/s, %.1f MB received\n",
		       (unsigned long long)ok, (unsigned long long)errors, dur, tput, (double)bytes / 1e6);
		printf("latency ms: mean %.3f  p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n",
		       all.count ? (double)all.sum_ns / (double)all.count / 1e6 : 0.0,
		       hist_pct_ms(&all, 50), hist_pct_ms(&all, 90), hist_pct_ms(&all, 99),
		       hist_pct_ms(&all, 99.9), (double)all.max_ns / 1e6);
		for (int k = 0; cfg.ncls > 1 && k < cfg.ncls; k++)
			printf("  %-24s %llu requests, p50 %.3f ms, p99 %.3f ms\n", cfg.cls[k].path,
			       (unsigned long long)cls[k].count, hist_pct_ms(&cls[k], 50),
			       hist_pct_ms(&cls[k], 99));
	}
	return 0;
}
