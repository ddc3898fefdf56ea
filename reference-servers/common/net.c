#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

static int sndbuf_request; /* --sndbuf, applied to every accepted socket; 0 = leave alone */
static bool nagle;         /* --nagle: accepted sockets keep Nagle's algorithm (no TCP_NODELAY) */

void rs_log(bool with_errno, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	fputs("refserver: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (with_errno)
		fprintf(stderr, ": %s", strerror(saved));
	fputc('\n', stderr);
	errno = saved;
}

void rs_raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			rs_log(true, "setrlimit(RLIMIT_NOFILE)");
	}
}

static void shutdown_sigset(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGCHLD);
}

void rs_signals_init(void)
{
	sigset_t set;

	signal(SIGPIPE, SIG_IGN);
	shutdown_sigset(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int rs_signalfd_open(void)
{
	sigset_t set;
	int fd;

	shutdown_sigset(&set);
	fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		rs_log(true, "signalfd");
	return fd;
}

bool rs_signalfd_stop_requested(int signal_fd)
{
	struct signalfd_siginfo si;
	bool stop = false;
	ssize_t n;

	while ((n = read(signal_fd, &si, sizeof si)) == (ssize_t)sizeof si)
		if (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM)
			stop = true;
	return stop;
}

void rs_signals_default(void)
{
	sigset_t set;

	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	shutdown_sigset(&set);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

int rs_set_nonblocking(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -1;
	return fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

int rs_listen(const struct rs_options *opt, int *bound_port, int *effective_sndbuf)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *ai;
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	char port[16];
	int fd, one = 1, rc;

	snprintf(port, sizeof port, "%d", opt->port);
	rc = getaddrinfo(opt->host, port, &hints, &ai);
	if (rc != 0) {
		rs_log(false, "cannot resolve %s: %s", opt->host, gai_strerror(rc));
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rs_log(true, "socket");
		goto fail;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	/* Set on the listener too: accepted sockets inherit it, and it lets us report the
	 * effective (kernel-doubled) value before any connection exists. */
	if (opt->sndbuf > 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &opt->sndbuf, sizeof opt->sndbuf) != 0)
		rs_log(true, "setsockopt(SO_SNDBUF)");
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		rs_log(true, "bind %s:%d", opt->host, opt->port);
		goto fail;
	}
	if (listen(fd, opt->backlog) != 0) {
		rs_log(true, "listen");
		goto fail;
	}
	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
		rs_log(true, "getsockname");
		goto fail;
	}
	*bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						    : ((struct sockaddr_in *)&ss)->sin_port);
	*effective_sndbuf = 0;
	nagle = opt->nagle;
	if (opt->sndbuf > 0) {
		len = sizeof *effective_sndbuf;
		getsockopt(fd, SOL_SOCKET, SO_SNDBUF, effective_sndbuf, &len);
		sndbuf_request = opt->sndbuf;
	}
	freeaddrinfo(ai);
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return -1;
}

int rs_accept(int listen_fd, bool nonblock)
{
	int one = 1, fd;

	do
		fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0));
	while (fd < 0 && (errno == EINTR || errno == ECONNABORTED));
	if (fd < 0)
		return -1;
	/* Responses go out in one write when they fit; Nagle would only add latency to the
	 * tail of a partial write on a keep-alive connection (--nagle shows how much). */
	if (!nagle)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (sndbuf_request > 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf_request, sizeof sndbuf_request);
	return fd;
}

int rs_accept_or_stop(int listen_fd, int signal_fd, bool nonblock)
{
	for (;;) {
		struct pollfd pfd[2] = { { .fd = listen_fd, .events = POLLIN },
					 { .fd = signal_fd, .events = POLLIN } };
		int fd = rs_accept(listen_fd, nonblock);

		if (fd >= 0)
			return fd;
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			/* Out of descriptors/memory: the pending connection stays in the backlog and
			 * would make poll() spin, so back off briefly (still waking for shutdown). */
			rs_log(true, "accept");
			pfd[0].fd = -1;
			if (poll(pfd, 2, 10) > 0 && rs_signalfd_stop_requested(signal_fd))
				return -1;
			continue;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			rs_log(true, "accept");
			return -1;
		}
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			return -1;
		if ((pfd[1].revents & POLLIN) && rs_signalfd_stop_requested(signal_fd))
			return -1;
	}
}

void rs_wait_writable(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };

	while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
		;
}

int rs_ncpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int)n : 1;
}
