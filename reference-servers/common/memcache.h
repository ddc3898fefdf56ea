/*
 * memcached client side for the fanout architectures: the shard list, the records the
 * shards hold, the text protocol (get) and one non-blocking or blocking connection.
 *
 * Records (loaded by reference-servers/shards/shards.py): for i in [0, MC_RECORDS) and each
 * size class S in {100, 1000, 20000} bytes, key "user<i>:<S>" lives on shard i % N and its
 * value is S bytes, byte j = 'A' + (i + j) % 26.  A request for fanout F reads user0..user<F-1>.
 *
 * Protocol: "get KEY\r\n" -> "VALUE KEY FLAGS BYTES\r\n<data>\r\nEND\r\n" (hit) or "END\r\n"
 * (miss); "ERROR", "CLIENT_ERROR ..." and "SERVER_ERROR ..." are protocol errors.
 */
#ifndef RS_MEMCACHE_H
#define RS_MEMCACHE_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MC_RECORDS     64u      /* records per size class; also the largest fanout */
#define MC_MAX_FANOUT  MC_RECORDS
#define MC_KEY_MAX     32

struct mc_shard {
	struct sockaddr_in addr;
	char name[64];             /* host:port as given */
};

/* Parse "host:port,host:port,..." (IPv4 literals or "localhost").  Returns the count, -1 if bad. */
int mc_parse_shards(const char *spec, struct mc_shard **out);

/* Size class from the request target: 100|1000|20000 or 0.1k|1k|20k.  False if not one. */
bool mc_size_class(const char *s, size_t n, unsigned *size);

/* "user<i>:<size>" into buf (MC_KEY_MAX bytes); returns the length. */
int mc_key(char *buf, unsigned i, unsigned size);

/* Connect to a shard with a timeout.  Returns a non-blocking, TCP_NODELAY fd or -1/errno. */
int mc_connect(const struct mc_shard *s, int timeout_ms);

enum mc_result {
	MC_INCOMPLETE,   /* need more bytes */
	MC_HIT,          /* data and dlen point into buf at the value */
	MC_MISS,         /* END without a value */
	MC_ERROR,        /* protocol error or a response we did not ask for */
};

/* Parse one complete get response at the start of buf; *consumed is its length. */
enum mc_result mc_parse_get(const char *buf, size_t len, const char **data, size_t *dlen,
			    size_t *consumed);

/* One shard connection with its input buffer.  The fields after `in` belong to the architecture. */
struct mc_conn {
	int fd;
	int shard;
	char *in;
	size_t in_len, in_cap;

	struct mc_conn *next;       /* idle list */
	void *query;                /* the query in flight on it, or NULL */
	uint32_t armed;             /* events registered / epoll state */
	int state;
	uint64_t deadline_ns;
	struct mc_conn *link_prev, *link_next;   /* list of every open connection */
};

struct mc_conn *mc_conn_open(const struct mc_shard *shards, int shard, int timeout_ms);
void mc_conn_close(struct mc_conn *m);
/* Write "get KEY\r\n" in full (a few dozen bytes into an idle socket).  0, or -1 on error. */
int mc_conn_send_get(struct mc_conn *m, unsigned index, unsigned size);
/* One read() into the input buffer: >0, 0 at EOF, -1/errno. */
ssize_t mc_conn_read(struct mc_conn *m);
/*
 * Take the response at the head of the input buffer, if complete.  On MC_HIT the value is
 * copied to dst when its length is exactly want (otherwise the result is MC_ERROR).
 */
enum mc_result mc_conn_take(struct mc_conn *m, char *dst, size_t want);

/*
 * Blocking round trip on a blocking socket (fanout-sync): send the get, read until the
 * response is complete (SO_RCVTIMEO bounds each read), copy the value.  0 or -1.
 */
int mc_conn_get_blocking(struct mc_conn *m, unsigned index, unsigned size, char *dst);

uint64_t mc_now_ns(void);

#endif
