#include "conn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sdt.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net.h"

/* A connection keeps its response buffer between requests, except a very large one:
 * idle keep-alive connections should not pin megabytes each. */
#define OUT_KEEP_MAX (1u << 20)

struct rs_conn *conn_new(int fd)
{
	struct rs_conn *c = calloc(1, sizeof *c);

	if (!c) {
		rs_log(false, "out of memory (connection)");
		return NULL;
	}
	c->fd = fd;
	c->file_fd = -1;
	return c;
}

const char *rs_docroot;
bool rs_split_writes;

static void file_close(struct rs_conn *c)
{
	if (c->file_fd >= 0)
		close(c->file_fd);
	c->file_fd = -1;
	c->file_off = c->file_len = 0;
}

void conn_free(struct rs_conn *c)
{
	if (!c)
		return;
	close(c->fd);
	file_close(c);
	free(c->out);
	free(c);
}

ssize_t conn_read(struct rs_conn *c)
{
	ssize_t n;

	do
		n = read(c->fd, c->in + c->in_len, sizeof c->in - c->in_len);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		c->in_len += (size_t)n;
	return n;
}

static bool out_reserve(struct rs_conn *c, size_t n)
{
	if (n <= c->out_cap)
		return true;
	char *p = malloc(n); /* contents are rewritten entirely: no need to realloc/copy */
	if (!p)
		return false;
	free(c->out);
	c->out = p;
	c->out_cap = n;
	return true;
}

static void set_response(struct rs_conn *c, int status, const char *reason, const char *small_body,
			 size_t body_len)
{
	char head[256];
	const char *connection = c->close_after ? "Connection: close\r\n"
				 : c->req.http10 ? "Connection: keep-alive\r\n" : "";
	int hlen = snprintf(head, sizeof head,
			    "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n",
			    status, reason,
			    c->req.kind == RS_REQ_BYTES || c->req.kind == RS_REQ_FANOUT || c->req.kind == RS_REQ_FILE
				    ? "application/octet-stream" : "text/plain",
			    body_len, connection);

	if (!out_reserve(c, (size_t)hlen + body_len)) {
		/* Cannot allocate the body: degrade to a 503 that certainly fits. */
		rs_log(false, "out of memory for a %zu-byte response", body_len);
		c->close_after = true;
		body_len = 0;
		hlen = snprintf(head, sizeof head,
				"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
				"Connection: close\r\n\r\n");
		if (!out_reserve(c, (size_t)hlen)) {
			c->out_len = c->out_off = 0;
			return; /* nothing to send; the caller will close */
		}
	}
	memcpy(c->out, head, (size_t)hlen);
	if (small_body)
		memcpy(c->out + hlen, small_body, body_len);
	else
		http_fill_body(c->out + hlen, body_len);
	c->out_len = (size_t)hlen + body_len;
	c->out_off = 0;
	c->body_len = body_len;
	c->write_calls = 0;
	c->saw_eagain = false;
}

static void consume_input(struct rs_conn *c, size_t n)
{
	c->in_len -= n;
	if (c->in_len > 0)
		memmove(c->in, c->in + n, c->in_len);
}

enum rs_parse conn_parse(struct rs_conn *c)
{
	size_t used = 0;
	enum rs_parse r = http_parse(c->in, c->in_len, &c->req, &used);

	if (r == RS_PARSE_OK) {
		consume_input(c, used);
		c->close_after = !c->req.keep_alive;
		c->traced = true;
		DTRACE_PROBE1(refserver, request__start, c->fd);
	} else if (r == RS_PARSE_BAD) {
		/* Whatever follows a malformed request cannot be framed: drop it and close. */
		c->in_len = 0;
		c->req = (struct rs_request){ .kind = RS_REQ_BAD };
		c->close_after = true;
		c->traced = false;
		conn_respond(c);
	}
	return r;
}

/* /file/NAME: open the file, the header into out[], the body left to sendfile (conn_write). */
static void file_response(struct rs_conn *c)
{
	char path[4096];
	struct stat st;
	int fd = -1;

	file_close(c);
	if (rs_docroot && snprintf(path, sizeof path, "%s/%s", rs_docroot, c->req.name) < (int)sizeof path)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		set_response(c, 404, "Not Found", "not found\n", 10);
		return;
	}
	set_response(c, 200, "OK", "", 0);          /* header only, with Content-Length 0 ... */
	char head[256];
	const char *connection = c->close_after ? "Connection: close\r\n"
				 : c->req.http10 ? "Connection: keep-alive\r\n" : "";
	int hlen = snprintf(head, sizeof head,     /* ... rewritten with the file's length */
			    "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
			    "Content-Length: %lld\r\n%s\r\n", (long long)st.st_size, connection);
	if (c->out_len == 0 || !out_reserve(c, (size_t)hlen)) { /* the 503 path of set_response */
		close(fd);
		return;
	}
	memcpy(c->out, head, (size_t)hlen);
	c->out_len = (size_t)hlen;
	c->body_len = (size_t)st.st_size;
	c->file_fd = fd;
	c->file_off = 0;
	c->file_len = st.st_size;
}

void conn_respond(struct rs_conn *c)
{
	char tmp[32];
	int n;

	switch (c->req.kind) {
	case RS_REQ_FILE:
		file_response(c);
		break;
	case RS_REQ_BYTES:
		set_response(c, 200, "OK", NULL, c->req.arg);
		break;
	case RS_REQ_COMPUTE:
		n = snprintf(tmp, sizeof tmp, "%016llx\n",
			     (unsigned long long)http_compute(c->req.arg));
		set_response(c, 200, "OK", tmp, (size_t)n);
		break;
	case RS_REQ_NULL:
		set_response(c, 200, "OK", "", 0);
		break;
	case RS_REQ_FANOUT: /* only the fanout-* architectures have shards to ask */
	case RS_REQ_NOT_FOUND:
		set_response(c, 404, "Not Found", "not found\n", 10);
		break;
	case RS_REQ_BAD_METHOD:
		set_response(c, 405, "Method Not Allowed", "method not allowed\n", 19);
		break;
	case RS_REQ_BAD:
		set_response(c, 400, "Bad Request", "bad request\n", 12);
		break;
	}
}

void conn_set_response(struct rs_conn *c, int status, const char *reason, const char *body,
		       size_t body_len)
{
	set_response(c, status, reason, body ? body : "", body ? body_len : 0);
}

enum rs_parse conn_next_request(struct rs_conn *c)
{
	enum rs_parse r = conn_parse(c);

	if (r == RS_PARSE_OK)
		conn_respond(c);
	return r;
}

enum rs_io conn_write(struct rs_conn *c)
{
	ssize_t n;

	if (c->out_off == c->out_len && c->file_off < c->file_len) { /* a file's body */
		do {
			c->write_calls++;
			n = sendfile(c->fd, c->file_fd, &c->file_off, (size_t)(c->file_len - c->file_off));
		} while (n < 0 && errno == EINTR);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			c->saw_eagain = true;
			return RS_IO_AGAIN;
		}
		if (n <= 0) /* an error, or the file shrank under us: the response cannot be completed */
			return RS_IO_ERROR;
		return c->file_off == c->file_len ? RS_IO_DONE : RS_IO_PARTIAL;
	}
	size_t header_len = c->out_len - c->body_len, end = c->out_len;

	if (rs_split_writes && c->file_fd < 0 && c->out_off < header_len)
		end = header_len; /* the header alone first: the body in the next call */
	do {
		c->write_calls++;
		n = write(c->fd, c->out + c->out_off, end - c->out_off);
	} while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		c->saw_eagain = true;
		return RS_IO_AGAIN;
	}
	if (n < 0)
		return RS_IO_ERROR;
	c->out_off += (size_t)n;
	return !conn_pending_output(c) ? RS_IO_DONE : RS_IO_PARTIAL;
}

bool conn_response_done(struct rs_conn *c)
{
	if (c->traced)
		DTRACE_PROBE3(refserver, request__done, c->fd, c->body_len, c->write_calls);
	c->traced = false;
	c->out_len = c->out_off = 0;
	file_close(c);
	if (c->out_cap > OUT_KEEP_MAX) {
		free(c->out);
		c->out = NULL;
		c->out_cap = 0;
	}
	return !c->close_after;
}

void conn_serve_blocking(struct rs_conn *c)
{
	for (;;) {
		enum rs_parse r = conn_next_request(c);

		if (r == RS_PARSE_INCOMPLETE) {
			if (conn_read(c) <= 0)
				return; /* EOF or error (including shutdown(2) at server stop) */
			continue;
		}
		while (conn_pending_output(c)) {
			enum rs_io io = conn_write(c);

			if (io == RS_IO_ERROR)
				return;
			if (io == RS_IO_AGAIN) /* only with SO_SNDTIMEO or a non-blocking socket */
				rs_wait_writable(c->fd);
		}
		if (!conn_response_done(c))
			return;
	}
}

int conn_table_put(struct rs_conn_table *t, struct rs_conn *c)
{
	if (c->fd >= t->cap) {
		int n = t->cap ? t->cap : 1024;
		while (n <= c->fd)
			n *= 2;
		struct rs_conn **s = realloc(t->slot, (size_t)n * sizeof *s);
		if (!s)
			return -1;
		memset(s + t->cap, 0, (size_t)(n - t->cap) * sizeof *s);
		t->slot = s;
		t->cap = n;
	}
	t->slot[c->fd] = c;
	return 0;
}

void conn_table_del(struct rs_conn_table *t, struct rs_conn *c)
{
	if (c->fd < t->cap && t->slot[c->fd] == c)
		t->slot[c->fd] = NULL;
}

void conn_table_free_all(struct rs_conn_table *t)
{
	for (int i = 0; i < t->cap; i++)
		conn_free(t->slot[i]);
	free(t->slot);
	t->slot = NULL;
	t->cap = 0;
}
