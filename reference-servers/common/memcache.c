#include "memcache.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net.h"

#define IN_CHUNK 4096u

uint64_t mc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int mc_parse_shards(const char *spec, struct mc_shard **out)
{
	int n = 1, count = 0;
	struct mc_shard *s;

	*out = NULL;
	if (!spec || !*spec)
		return -1;
	for (const char *p = spec; *p; p++)
		n += *p == ',';
	s = calloc((size_t)n, sizeof *s);
	if (!s)
		return -1;
	for (const char *p = spec; count < n; count++) {
		const char *end = strchr(p, ','), *colon;
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char host[64], *tail;
		long port;

		if (len == 0 || len >= sizeof s[count].name)
			goto bad;
		memcpy(s[count].name, p, len);
		s[count].name[len] = '\0';
		colon = strrchr(s[count].name, ':');
		if (!colon || colon == s[count].name)
			goto bad;
		memcpy(host, s[count].name, (size_t)(colon - s[count].name));
		host[colon - s[count].name] = '\0';
		port = strtol(colon + 1, &tail, 10);
		if (*tail || port < 1 || port > 65535)
			goto bad;
		s[count].addr.sin_family = AF_INET;
		s[count].addr.sin_port = htons((uint16_t)port);
		if (!strcmp(host, "localhost"))
			strcpy(host, "127.0.0.1");
		if (inet_pton(AF_INET, host, &s[count].addr.sin_addr) != 1)
			goto bad;
		p += len + (end != NULL);
	}
	*out = s;
	return count;
bad:
	free(s);
	return -1;
}

bool mc_size_class(const char *s, size_t n, unsigned *size)
{
	static const struct { const char *name; unsigned size; } classes[] = {
		{ "100", 100 }, { "1000", 1000 }, { "20000", 20000 },
		{ "0.1k", 100 }, { "1k", 1000 }, { "20k", 20000 },
	};

	for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
		if (strlen(classes[i].name) == n && !memcmp(classes[i].name, s, n)) {
			*size = classes[i].size;
			return true;
		}
	return false;
}

int mc_key(char *buf, unsigned i, unsigned size)
{
	return snprintf(buf, MC_KEY_MAX, "user%u:%u", i, size);
}

int mc_connect(const struct mc_shard *s, int timeout_ms)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1, err = 0;
	socklen_t elen = sizeof err;

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(fd, (const struct sockaddr *)&s->addr, sizeof s->addr) == 0)
		return fd;
	if (errno != EINPROGRESS)
		goto fail;
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	int r;
	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		errno = ETIMEDOUT;
	if (r <= 0)
		goto fail;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
		goto fail;
	if (err) {
		errno = err;
		goto fail;
	}
	return fd;
fail:
	err = errno;
	close(fd);
	errno = err;
	return -1;
}

/* Length of the line at buf including CRLF, or 0 if incomplete. */
static size_t line_len(const char *buf, size_t len)
{
	const char *nl = memchr(buf, '\n', len);

	return nl ? (size_t)(nl - buf) + 1 : 0;
}

enum mc_result mc_parse_get(const char *buf, size_t len, const char **data, size_t *dlen,
			    size_t *consumed)
{
	size_t l = len ? line_len(buf, len) : 0;

	if (l == 0)
		return len > 512 ? MC_ERROR : MC_INCOMPLETE;
	if (l == 5 && !memcmp(buf, "END\r\n", 5)) {
		*consumed = 5;
		return MC_MISS;
	}
	if (l < 6 || memcmp(buf, "VALUE ", 6) != 0)
		return MC_ERROR;
	/* VALUE <key> <flags> <bytes>[ <cas>]\r\n */
	char line[256];
	if (l >= sizeof line)
		return MC_ERROR;
	memcpy(line, buf, l);
	line[l] = '\0';
	char key[251];
	unsigned flags;
	unsigned long bytes;
	if (sscanf(line, "VALUE %250s %u %lu", key, &flags, &bytes) != 3 || bytes > (64ul << 20))
		return MC_ERROR;
	size_t need = l + bytes + 2 + 5;
	if (len < need)
		return MC_INCOMPLETE;
	if (memcmp(buf + l + bytes, "\r\nEND\r\n", 7) != 0)
		return MC_ERROR;
	*data = buf + l;
	*dlen = bytes;
	*consumed = need;
	return MC_HIT;
}

struct mc_conn *mc_conn_open(const struct mc_shard *shards, int shard, int timeout_ms)
{
	int fd = mc_connect(&shards[shard], timeout_ms);
	struct mc_conn *m;

	if (fd < 0)
		return NULL;
	m = calloc(1, sizeof *m);
	if (!m) {
		close(fd);
		return NULL;
	}
	m->fd = fd;
	m->shard = shard;
	return m;
}

void mc_conn_close(struct mc_conn *m)
{
	if (!m)
		return;
	close(m->fd);
	free(m->in);
	free(m);
}

int mc_conn_send_get(struct mc_conn *m, unsigned index, unsigned size)
{
	char cmd[MC_KEY_MAX + 8], key[MC_KEY_MAX];
	int n;
	ssize_t w;

	mc_key(key, index, size);
	n = snprintf(cmd, sizeof cmd, "get %s\r\n", key);
	m->in_len = 0; /* one request at a time per connection: anything left over is stale */
	do
		w = send(m->fd, cmd, (size_t)n, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	if (w == n)
		return 0;
	if (w >= 0)
		errno = EAGAIN; /* a partial write of a tiny command: the socket is not usable */
	return -1;
}

ssize_t mc_conn_read(struct mc_conn *m)
{
	ssize_t n;

	/* Room for a 20 KB value and its framing in one read when the data is there. */
	if (m->in_cap - m->in_len < IN_CHUNK) {
		size_t cap = m->in_cap ? m->in_cap * 2 : 8 * IN_CHUNK;
		char *p = realloc(m->in, cap);
		if (!p) {
			errno = ENOMEM;
			return -1;
		}
		m->in = p;
		m->in_cap = cap;
	}
	do
		n = read(m->fd, m->in + m->in_len, m->in_cap - m->in_len);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		m->in_len += (size_t)n;
	return n;
}

enum mc_result mc_conn_take(struct mc_conn *m, char *dst, size_t want)
{
	const char *data;
	size_t dlen, used;
	enum mc_result r = mc_parse_get(m->in, m->in_len, &data, &dlen, &used);

	if (r == MC_INCOMPLETE || r == MC_ERROR)
		return r;
	if (r == MC_HIT) {
		if (dlen != want)
			return MC_ERROR;
		memcpy(dst, data, dlen);
	}
	m->in_len -= used;
	if (m->in_len)
		memmove(m->in, m->in + used, m->in_len);
	return r;
}

int mc_conn_get_blocking(struct mc_conn *m, unsigned index, unsigned size, char *dst)
{
	if (mc_conn_send_get(m, index, size) != 0)
		return -1;
	for (;;) {
		enum mc_result r = mc_conn_take(m, dst, size);
		if (r == MC_HIT)
			return 0;
		if (r != MC_INCOMPLETE)
			return -1;
		if (mc_conn_read(m) <= 0)
			return -1;
	}
}
