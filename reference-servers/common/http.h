/*
 * The HTTP/1.1 subset every architecture serves, with identical semantics:
 *
 *   GET /bytes/N    200, N-byte body, byte i = 'a' + (i % 26); N <= RS_MAX_BODY.
 *                   Generated per request (work proportional to N), never cached.
 *   GET /compute/U  200, U units of CPU work (1 unit = 1000 dependent xorshift rounds,
 *                   about 1 us), body = 16 hex digits of the result + "\n"; U <= RS_MAX_COMPUTE.
 *   GET /null       200, empty body.
 *   GET /fanout/F/SIZE  the fanout architectures' request (F shard records of SIZE bytes,
 *                   see memcache.h); 404 in the others.  F in [1, MC_MAX_FANOUT] and SIZE one of
 *                   100|1000|20000|0.1k|1k|20k, else 400.
 *   GET /file/NAME  200, the file NAME of the --docroot directory, its body sent with sendfile(2)
 *                   (a page-cache miss blocks the calling thread in the read of the file);
 *                   NAME is [A-Za-z0-9._-]{1,63} not starting with '.'; 404 when there is no docroot,
 *                   no such regular file, or another name.
 *   other targets   404 (keep-alive);  other methods: 405 and close.
 *   malformed, a header block over RS_MAX_HEADER bytes, a request body, or N/U over the cap:
 *                   400 and close.
 *
 * Keep-alive: HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with "Connection: keep-alive".
 * Pipelined requests are answered in order, one response at a time.
 */
#ifndef RS_HTTP_H
#define RS_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RS_MAX_HEADER  8192u
#define RS_MAX_BODY    (64u << 20)
#define RS_MAX_COMPUTE 1000000u

enum rs_req_kind {
	RS_REQ_BYTES,
	RS_REQ_COMPUTE,
	RS_REQ_NULL,
	RS_REQ_FANOUT,      /* arg = F, size = record size */
	RS_REQ_FILE,        /* name = the file under --docroot */
	RS_REQ_NOT_FOUND,
	RS_REQ_BAD_METHOD,
	RS_REQ_BAD,         /* the 400 response; never produced by a successful parse */
};

struct rs_request {
	enum rs_req_kind kind;
	uint64_t arg;           /* N or U (F for a fanout) */
	uint32_t size;          /* fanout: record size class in bytes */
	uint32_t class_hash;    /* FNV-1a of the target: the "request class" hybrid learns about */
	bool keep_alive;
	bool http10;
	char name[64];          /* /file/NAME: the name, NUL-terminated */
};

enum rs_parse { RS_PARSE_INCOMPLETE, RS_PARSE_OK, RS_PARSE_BAD };

/* Parse the request at the start of buf; on OK fills *req and the header length *consumed. */
enum rs_parse http_parse(const char *buf, size_t len, struct rs_request *req, size_t *consumed);

/* Fill dst with the documented body pattern. */
void http_fill_body(char *dst, size_t n);

/* The /compute work function; deterministic in units. */
uint64_t http_compute(uint64_t units);

#endif
