/* Sockets, signals and process limits shared by every architecture. */
#ifndef RS_NET_H
#define RS_NET_H

#include <stdbool.h>
#include "refserver.h"

/* Raise the soft RLIMIT_NOFILE to the hard limit (1000+ connections need it). */
void rs_raise_nofile(void);

/*
 * Block SIGINT/SIGTERM/SIGCHLD in the calling thread (call before creating threads so every
 * thread inherits the mask) and ignore SIGPIPE, so a peer that goes away turns into EPIPE
 * from write() rather than killing the server.  Shutdown signals are then consumed
 * synchronously through a signalfd, which every architecture can wait on next to its sockets.
 */
void rs_signals_init(void);
int rs_signalfd_open(void);
/* Drain the signalfd; true if SIGINT or SIGTERM was among the signals (SIGCHLD is just consumed). */
bool rs_signalfd_stop_requested(int signal_fd);
/* In a forked child that should simply die on SIGTERM: default dispositions, nothing blocked. */
void rs_signals_default(void);

/* Create the listening socket from the options (non-blocking); returns fd or -1. */
int rs_listen(const struct rs_options *opt, int *bound_port, int *effective_sndbuf);

/*
 * Accept one connection from the (non-blocking) listening socket and apply the per-socket
 * options (TCP_NODELAY, --sndbuf).  The accepted socket is non-blocking iff nonblock.
 * Returns the fd, or -1 with errno (EAGAIN when the backlog is empty).
 */
int rs_accept(int listen_fd, bool nonblock);

/*
 * For threads that block in accept: wait until a connection can be accepted or a shutdown
 * signal arrives.  Returns the accepted fd (blocking socket unless nonblock), or -1 on shutdown.
 */
int rs_accept_or_stop(int listen_fd, int signal_fd, bool nonblock);

int rs_set_nonblocking(int fd, bool on);

/* Wait (poll) until fd is writable; used by blocking-style writers that met EAGAIN. */
void rs_wait_writable(int fd);

int rs_ncpus(void);

#endif
