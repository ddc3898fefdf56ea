/*
 * Pieces shared by the fanout-* architectures (docs/architectures.md, "Fanout tier").
 *
 *   fo_group     one GET /fanout/F/SIZE request: F queries (record i on shard i % N), the
 *                assembled body (value i at offset i * SIZE), a deadline, the outcome.
 *   fo_backend   a single-threaded datastore driver living in one event loop: per-shard pools
 *                of non-blocking memcached connections, one query in flight per connection
 *                (so F queries are F sockets becoming readable), queries waiting when a shard
 *                has --shard-conns connections busy, deadlines.  Used by fanout-split's backend
 *                reactors and by fanout-shared's combined reactor.
 *   fo_frontend  the HTTP event loop: accepts, parses, answers non-fanout requests inline and
 *                hands fanout requests on (dispatch hook, or the same-thread backend); results
 *                come back through a mailbox (another thread) or directly (same thread).
 *
 * epoll data: shard connections are registered with the pointer's low bit set (fo_tag), so a
 * loop that has both kinds of sockets in one epoll set can tell them apart.
 */
#ifndef RS_FANOUT_H
#define RS_FANOUT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "conn.h"
#include "memcache.h"
#include "queue.h"
#include "refserver.h"

struct fo_group;

struct fo_query {
	struct fo_group *g;
	unsigned index;
	struct mc_conn *conn;      /* connection it is in flight on */
	struct fo_query *next;     /* wait list */
	bool waiting;
};

struct fo_group {
	struct rs_conn *client;
	unsigned fanout, size;
	unsigned pending;          /* queries not answered yet (atomic in fanout-pool) */
	bool failed;
	uint64_t seq, deadline_ns;
	struct fo_group *next, *prev;
	char *body;                /* fanout * size bytes */
	struct fo_query q[];
};

struct fo_group *fo_group_new(struct rs_conn *client, uint64_t seq, int timeout_ms);
void fo_group_free(struct fo_group *g);
/* The client's response from the outcome: 200 with the values in order, or 502. Frees g. */
void fo_group_respond(struct fo_group *g);
static inline size_t fo_group_bytes(const struct fo_group *g)
{
	return (size_t)g->fanout * g->size;
}

/* Shard connection <-> epoll data. */
static inline uint64_t fo_tag(struct mc_conn *m) { return (uint64_t)(uintptr_t)m | 1u; }
static inline bool fo_is_tagged(uint64_t u64) { return u64 & 1u; }
static inline struct mc_conn *fo_untag(uint64_t u64) { return (struct mc_conn *)(uintptr_t)(u64 & ~1ull); }

struct fo_shards {
	struct mc_shard *shard;
	int n;
};
/* Parse --shards; logs and returns false if missing or malformed. */
bool fo_shards_init(struct fo_shards *s, const struct rs_options *o);

struct fo_backend {
	int epfd;
	const struct fo_shards *shards;
	int max_conns, timeout_ms;
	struct mc_conn **idle;                 /* per shard */
	int *open;                             /* per shard */
	struct fo_query **wait_head, **wait_tail;
	struct fo_group *inflight, *inflight_tail;
	struct mc_conn *graveyard;             /* closed this round, freed by fo_backend_reap */
	uint64_t last_sweep;
	void (*done)(void *ctx, struct fo_group *g);   /* must not re-enter the backend */
	void *ctx;
};

int fo_backend_init(struct fo_backend *be, int epfd, const struct fo_shards *shards,
		    const struct rs_options *o, void (*done)(void *, struct fo_group *), void *ctx);
/* Free connections and every group still in flight (not their clients). */
void fo_backend_destroy(struct fo_backend *be);
void fo_backend_submit(struct fo_backend *be, struct fo_group *g);
void fo_backend_event(struct fo_backend *be, struct mc_conn *m, uint32_t events);
/* Fail groups past their deadline; returns the epoll timeout to use (-1: nothing in flight). */
int fo_backend_timeout(struct fo_backend *be);
/* Free connections closed during this round (their epoll events may still be in the batch). */
void fo_backend_reap(struct fo_backend *be);

struct fo_frontend {
	struct rs_server *srv;
	int epfd, sfd;
	struct rs_conn_table conns;
	struct rs_mailbox back;                /* completions from other threads */
	bool mailbox;
	struct fo_backend *be;                 /* fanout-shared: backend on the same epoll */
	void (*dispatch)(void *ctx, struct fo_group *g);
	void *ctx;
	bool priority;                         /* --priority fanout */
	bool exclusive_listen;                 /* several loops share the listening socket */
	struct fo_group *pending, *pending_tail;       /* parsed, not dispatched (priority) */
	struct fo_group *done_short, *done_short_tail; /* completed this round */
	struct fo_group *done_long, *done_long_tail;
	unsigned inflight;
	uint64_t seq;
	volatile bool *stop_flag;              /* set when the loop sees SIGTERM (optional) */
};

int fo_frontend_init(struct fo_frontend *fe, struct rs_server *srv, int sfd, bool mailbox);
/* Serve until SIGINT/SIGTERM (on sfd) or *stop_flag. */
int fo_frontend_run(struct fo_frontend *fe);
/* Free groups left in the mailbox and every client connection. */
void fo_frontend_destroy(struct fo_frontend *fe);
/* Backend done hook for a same-thread backend (fanout-shared). */
void fo_frontend_done_local(void *fe, struct fo_group *g);
/* Backend done hook from another thread: push the group back through the mailbox. */
void fo_frontend_done_remote(void *fe, struct fo_group *g);

#endif
