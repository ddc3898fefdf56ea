/*
 * refserver: one binary, many server architectures, identical request semantics.
 *
 * Everything that is *not* the architecture lives under common/: option parsing,
 * the listening socket, HTTP/1.1 parsing and response generation, the per-connection
 * buffers and the USDT probes.  Each arch/NAME.c owns only the flow of a request
 * through its threads/processes, so a reader can follow one architecture in one file.
 */
#ifndef REFSERVER_H
#define REFSERVER_H

#include <stdbool.h>

enum rs_poller_kind { RS_POLLER_EPOLL, RS_POLLER_POLL, RS_POLLER_SELECT };

/*
 * What an event-driven server does when write() returns EAGAIN before the response is out:
 *  SPIN      keep calling write() until it is (busy spin; the paper's SingleT-Async);
 *  EPOLLOUT  stop, wait for writability, resume (what production servers do).
 */
enum rs_write_policy { RS_WRITE_EPOLLOUT, RS_WRITE_SPIN };

struct rs_options {
	const char *arch;
	const char *host;
	int port;                  /* 0: ephemeral */
	int workers;               /* 0: architecture default */
	int sndbuf;                /* 0: kernel default */
	int backlog;
	enum rs_poller_kind poller;
	enum rs_write_policy write_policy;
	bool nagle;                /* --nagle: leave Nagle's algorithm on (no TCP_NODELAY on accepted sockets) */
	bool split_writes;         /* --split-writes: a response's header and body in two write calls */

	/* fanout-* architectures (docs/architectures.md, "Fanout tier") */
	const char *shards;        /* --shards host:port,... */
	int pool_max;              /* fanout-pool: most worker threads */
	int pool_idle_ms;          /* fanout-pool: an idle worker exits after this */
	int backend_loops;         /* fanout-split: backend reactor threads */
	int shard_conns;           /* most connections per shard per backend loop */
	int shard_timeout_ms;      /* a fanout not answered by then gets a 502 */
	bool priority_fanout;      /* fanout-shared: --priority fanout */
};

struct rs_server {
	struct rs_options opt;
	int listen_fd;             /* bound + listening; blocking unless the arch changes it */
	int workers;               /* resolved worker count (printed on the listening line) */
};

/* An architecture: run() serves until SIGINT/SIGTERM, then cleans up and returns the exit code. */
struct rs_arch {
	const char *name;
	int (*run)(struct rs_server *srv);
	/* Workers when --workers is not given: >0 literal, -1 = number of CPUs, 0 = not applicable. */
	int default_workers;
};

#define RS_ARCH_RUN(name) int name(struct rs_server *srv)
RS_ARCH_RUN(arch_thread_per_conn_run);
RS_ARCH_RUN(arch_process_per_conn_run);
RS_ARCH_RUN(arch_thread_pool_run);
RS_ARCH_RUN(arch_event_loop_run);
RS_ARCH_RUN(arch_n_copy_run);
RS_ARCH_RUN(arch_reactor_split_run);
RS_ARCH_RUN(arch_reactor_worker_run);
RS_ARCH_RUN(arch_poller_dispatch_run);
RS_ARCH_RUN(arch_netty_run);
RS_ARCH_RUN(arch_hybrid_run);
RS_ARCH_RUN(arch_pipeline_run);
RS_ARCH_RUN(arch_green_threads_run);
RS_ARCH_RUN(arch_process_graph_run);
RS_ARCH_RUN(arch_fanout_sync_run);
RS_ARCH_RUN(arch_fanout_pool_run);
RS_ARCH_RUN(arch_fanout_split_run);
RS_ARCH_RUN(arch_fanout_shared_run);

/* The single-threaded event loop, reused verbatim by n-copy (each copy runs one). */
int event_loop_serve(struct rs_server *srv, int signal_fd);

/*
 * The netty-style engine (arch/netty.c), shared with hybrid: an acceptor plus --workers
 * event loops.  With a policy, each response may be written "inline" (until done, spinning
 * on EAGAIN, like a single-threaded server) instead of on netty's bounded 16-write path;
 * learn() is told how each response went.
 */
struct rs_conn;
struct netty_policy {
	void *(*create)(void);                          /* per-loop state */
	void (*destroy)(void *state);
	bool (*write_inline)(void *state, const struct rs_conn *c);
	void (*learn)(void *state, const struct rs_conn *c);
};
int netty_serve(struct rs_server *srv, const struct netty_policy *policy);

/* Print a diagnostic prefixed with "refserver: " (and strerror(errno) when with_errno). */
void rs_log(bool with_errno, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
