/* refserver entry point: options, listening socket, then hand over to the architecture. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "net.h"
#include "refserver.h"

static const struct rs_arch archs[] = {
	{ "thread-per-conn",  arch_thread_per_conn_run,  0 },
	{ "process-per-conn", arch_process_per_conn_run, 0 },
	{ "thread-pool",      arch_thread_pool_run,      32 },
	{ "event-loop",       arch_event_loop_run,       1 },
	{ "n-copy",           arch_n_copy_run,           -1 },
	{ "reactor-split",    arch_reactor_split_run,    -1 },
	{ "reactor-worker",   arch_reactor_worker_run,   -1 },
	{ "poller-dispatch",  arch_poller_dispatch_run,  -1 },
	{ "netty",            arch_netty_run,            -1 },
	{ "hybrid",           arch_hybrid_run,           -1 },
	{ "pipeline",         arch_pipeline_run,         -1 },
	{ "green-threads",    arch_green_threads_run,    1 },
	{ "process-graph",    arch_process_graph_run,    2 },
	{ "fanout-sync",      arch_fanout_sync_run,      0 },
	{ "fanout-pool",      arch_fanout_pool_run,      1 },
	{ "fanout-split",     arch_fanout_split_run,     1 },
	{ "fanout-shared",    arch_fanout_shared_run,    1 },
};

static void usage(FILE *f)
{
	fputs("usage: refserver --arch NAME [--port P] [--host H] [--workers N] [--sndbuf BYTES]\n"
	      "                 [--write-policy spin|epollout] [--poller epoll|poll|select]\n"
	      "                 [--backlog N] [--docroot DIR]  (GET /file/NAME: DIR/NAME by sendfile)\n"
	      "                 [--split-writes] (header and body in two writes) [--nagle] (no TCP_NODELAY)\n"
	      "       fanout-*: --shards host:port,... [--pool-max N] [--pool-idle-ms MS]\n"
	      "                 [--backend-loops K] [--shard-conns N] [--shard-timeout-ms MS]\n"
	      "                 [--priority fifo|fanout]\n"
	      "architectures:", f);
	for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
		fprintf(f, " %s", archs[i].name);
	fputs("\n", f);
}

static bool parse_int(const char *s, int min, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < min || v > 1 << 30)
		return false;
	*out = (int)v;
	return true;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "arch", required_argument, NULL, 'a' },
		{ "port", required_argument, NULL, 'p' },
		{ "host", required_argument, NULL, 'H' },
		{ "workers", required_argument, NULL, 'w' },
		{ "sndbuf", required_argument, NULL, 's' },
		{ "write-policy", required_argument, NULL, 'W' },
		{ "poller", required_argument, NULL, 'P' },
		{ "backlog", required_argument, NULL, 'b' },
		{ "shards", required_argument, NULL, 'S' },
		{ "pool-max", required_argument, NULL, 'M' },
		{ "pool-idle-ms", required_argument, NULL, 'I' },
		{ "backend-loops", required_argument, NULL, 'K' },
		{ "shard-conns", required_argument, NULL, 'C' },
		{ "shard-timeout-ms", required_argument, NULL, 'T' },
		{ "priority", required_argument, NULL, 'R' },
		{ "docroot", required_argument, NULL, 'D' },
		{ "split-writes", no_argument, NULL, 'x' },
		{ "nagle", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct rs_server srv = { .opt = { .host = "127.0.0.1", .backlog = 4096, .pool_max = 64,
					  .pool_idle_ms = 50, .backend_loops = 1, .shard_conns = 64,
					  .shard_timeout_ms = 1000 } };
	struct rs_options *o = &srv.opt;
	const struct rs_arch *arch = NULL;
	int opt, port, sndbuf;
	bool ok = true;

	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'a': o->arch = optarg; break;
		case 'H': o->host = optarg; break;
		case 'p': ok = parse_int(optarg, 0, &o->port) && o->port <= 65535; break;
		case 'w': ok = parse_int(optarg, 1, &o->workers); break;
		case 's': ok = parse_int(optarg, 1, &o->sndbuf); break;
		case 'b': ok = parse_int(optarg, 1, &o->backlog); break;
		case 'S': o->shards = optarg; break;
		case 'M': ok = parse_int(optarg, 1, &o->pool_max); break;
		case 'I': ok = parse_int(optarg, 1, &o->pool_idle_ms); break;
		case 'K': ok = parse_int(optarg, 1, &o->backend_loops) && o->backend_loops <= 64; break;
		case 'C': ok = parse_int(optarg, 1, &o->shard_conns); break;
		case 'T': ok = parse_int(optarg, 1, &o->shard_timeout_ms); break;
		case 'D': rs_docroot = optarg; break;
		case 'x': o->split_writes = rs_split_writes = true; break;
		case 'n': o->nagle = true; break;
		case 'R':
			ok = !strcmp(optarg, "fifo") || !strcmp(optarg, "fanout");
			o->priority_fanout = !strcmp(optarg, "fanout");
			break;
		case 'W':
			ok = !strcmp(optarg, "spin") || !strcmp(optarg, "epollout");
			o->write_policy = !strcmp(optarg, "spin") ? RS_WRITE_SPIN : RS_WRITE_EPOLLOUT;
			break;
		case 'P':
			if (!strcmp(optarg, "epoll"))
				o->poller = RS_POLLER_EPOLL;
			else if (!strcmp(optarg, "poll"))
				o->poller = RS_POLLER_POLL;
			else if (!strcmp(optarg, "select"))
				o->poller = RS_POLLER_SELECT;
			else
				ok = false;
			break;
		case 'h': usage(stdout); return 0;
		default: ok = false;
		}
		if (!ok) {
			if (opt != '?')
				rs_log(false, "invalid value: %s", optarg);
			usage(stderr);
			return 2;
		}
	}
	for (size_t i = 0; o->arch && i < sizeof archs / sizeof archs[0]; i++)
		if (!strcmp(archs[i].name, o->arch))
			arch = &archs[i];
	if (!arch || optind != argc) {
		rs_log(false, o->arch ? "unknown architecture or extra arguments"
				      : "--arch is required");
		usage(stderr);
		return 2;
	}
	srv.workers = o->workers ? o->workers
		    : arch->default_workers < 0 ? rs_ncpus() : arch->default_workers;

	rs_raise_nofile();
	rs_signals_init();
	srv.listen_fd = rs_listen(o, &port, &sndbuf);
	if (srv.listen_fd < 0)
		return 1;
	if (sndbuf > 0)
		fprintf(stderr, "refserver: listening on %s:%d arch=%s workers=%d sndbuf=%d\n",
			o->host, port, arch->name, srv.workers, sndbuf);
	else
		fprintf(stderr, "refserver: listening on %s:%d arch=%s workers=%d sndbuf=default\n",
			o->host, port, arch->name, srv.workers);

	int rc = arch->run(&srv);
	close(srv.listen_fd);
	return rc;
}
