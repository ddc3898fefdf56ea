/*
 * One client connection: bounded input buffer, the response being written, and the
 * USDT probes that mark a request's lifetime.  The same code runs in every architecture,
 * so request__start / request__done mean exactly the same thing everywhere:
 *
 *   request__start(fd)                          a request was parsed (not fired for a 400)
 *   request__done(fd, body_bytes, write_calls)  its response is fully written; write_calls
 *                                               counts every write() made for it, including
 *                                               ones that returned EAGAIN or were partial.
 */
#ifndef RS_CONN_H
#define RS_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "http.h"

enum rs_io {
	RS_IO_DONE,     /* the whole response is out */
	RS_IO_PARTIAL,  /* progress, more to write */
	RS_IO_AGAIN,    /* no progress: socket buffer full (EAGAIN) */
	RS_IO_ERROR,    /* peer gone (EPIPE, ECONNRESET...): close */
};

struct rs_conn {
	int fd;
	struct rs_request req;      /* the request whose response is in out[] */
	bool traced;                /* request__start fired, so request__done will too */
	bool close_after;           /* close once the current response is written */
	char *out;                  /* response: header + body, contiguous */
	size_t out_len, out_off, out_cap, body_len;
	unsigned write_calls;
	bool saw_eagain;            /* some write() for this response returned EAGAIN */
	int file_fd;                /* /file/NAME: the open file (-1: none); out[] holds the header only */
	off_t file_off, file_len;   /* its bytes sent so far (sendfile), its size */

	/* Owned by the architecture (queue links, registered epoll events, state machine). */
	struct rs_conn *next;
	uint32_t interest;
	int state;
	void *owner;

	size_t in_len;
	char in[RS_MAX_HEADER];     /* unparsed input; a full buffer without a request is a 400 */
};

struct rs_conn *conn_new(int fd);
/* Close the socket and free the connection. */
void conn_free(struct rs_conn *c);

/* One read() into the input buffer: >0 bytes, 0 at EOF, -1 with errno (EAGAIN...). */
ssize_t conn_read(struct rs_conn *c);

/*
 * Parse the next buffered request.  OK: c->req is set, request__start fired and the request
 * bytes consumed.  BAD: a 400 response is prepared and the connection will close after it.
 * Must only be called when no response is pending.
 */
enum rs_parse conn_parse(struct rs_conn *c);
/* Generate the response for c->req into c->out (the per-request work happens here). */
void conn_respond(struct rs_conn *c);
/* Set a response with the given status and body (copied), e.g. a fanout's assembled values. */
void conn_set_response(struct rs_conn *c, int status, const char *reason, const char *body,
		       size_t body_len);
/* conn_parse + conn_respond: the common case. */
enum rs_parse conn_next_request(struct rs_conn *c);

static inline bool conn_pending_output(const struct rs_conn *c)
{
	return c->out_off < c->out_len || c->file_off < c->file_len;
}

/* The directory /file/NAME is served from (--docroot); NULL: /file/ answers 404. */
extern const char *rs_docroot;
/* --split-writes: conn_write writes a response's header and its body in separate calls (as the JDK's HTTP
 * server and many frameworks do): with Nagle on, the body waits for the client's ACK of the header. */
extern bool rs_split_writes;

/* Exactly one write() of the unsent part of the response (retried only on EINTR); for a file
 * response, the header by write() and then the body by sendfile(2), one call each time. */
enum rs_io conn_write(struct rs_conn *c);

/* The response is fully written: fire request__done, reset for the next request.
 * Returns true if the connection stays open (keep-alive). */
bool conn_response_done(struct rs_conn *c);

/*
 * Serve a connection on a blocking socket until the peer closes, an error occurs or a
 * non-keep-alive response is done (the loop of the thread/process-per-connection and
 * thread-pool architectures).  Does not close the socket.
 */
void conn_serve_blocking(struct rs_conn *c);


/*
 * Connections indexed by fd, for the thread that owns connection lifetimes in an
 * event-driven architecture: lookups, and freeing whatever is still open at shutdown.
 */
struct rs_conn_table {
	struct rs_conn **slot;
	int cap;
};

int conn_table_put(struct rs_conn_table *t, struct rs_conn *c);
void conn_table_del(struct rs_conn_table *t, struct rs_conn *c);
/* conn_free() every connection still in the table, then release the table. */
void conn_table_free_all(struct rs_conn_table *t);

#endif
