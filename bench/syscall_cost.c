/*
 * Cost of a traced syscall: times a tight loop of cheap calls the collector counts.
 *   syscall_cost MODE N      MODE: epoll (zero-timeout epoll_wait on an idle fd, returns 0)
 *                                  write (1-byte write to a socket whose peer drains it)
 *                                  read (1-byte read from a stream socket holding data, refilled
 *                                        64 KiB at a time: one write per 65,536 reads)
 *                                  serve-write (1-byte writes answering a request on an accepted TCP
 *                                        connection: a server's response; the client, a forked child,
 *                                        reads 64 KiB at a time: SO_RCVLOWAT wakes it only then)
 *                                  serve-read (1-byte reads of a request on an accepted TCP connection,
 *                                        the client writing 64 KiB at a time)
 *                                  getppid (a syscall spinscope does not trace at all)
 *                                  pingpong (a byte to a forked child over a pipe and back: per round trip
 *                                        two wakeups, two switches on one CPU, four 1-byte calls)
 * The serve modes' client is another process: with --pid, its calls are a bystander's, so the traced
 * calls are the server's alone (a tracer's per-program runs and time divide by them).
 * Prints "ready PID" and waits for a line on stdin (so a tracer can attach), then prints the mean
 * nanoseconds per call as JSON, and exits at the end of stdin (a tracer that ends with its target is
 * still attached while its statistics are read).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/*
 * A loopback TCP connection, accepted (so the server's end is a serving socket, as a server's are), to a
 * client forked here. The client sends one byte (the request, which serve-write reads first, under trace,
 * so that its writes answer a request) and then, for serve-write, reads until EOF in 64 KiB steps; for
 * serve-read, writes n bytes more in 64 KiB steps. Returns the server's end, or -1.
 */
static int serve_connection(int write_mode, long n, pid_t *client)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(addr);
	int lfd = socket(AF_INET, SOCK_STREAM, 0), conn;
	static char chunk[65536];

	if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, len) || listen(lfd, 8) ||
	    getsockname(lfd, (struct sockaddr *)&addr, &len))
		return -1;
	*client = fork();
	if (*client == 0) {
		int fd = socket(AF_INET, SOCK_STREAM, 0), lowat = sizeof(chunk);

		if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) || write(fd, "?", 1) != 1)
			_exit(3);
		if (write_mode) {
			setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat));
			while (read(fd, chunk, sizeof(chunk)) > 0)
				;
		} else {
			for (long sent = 1; sent < n;) { /* the request's byte was the first */
				long left = n - sent;
				ssize_t w = write(fd, chunk, left < (long)sizeof(chunk) ? left : (long)sizeof(chunk));

				if (w <= 0)
					_exit(3);
				sent += w;
			}
		}
		_exit(0);
	}
	conn = accept(lfd, NULL, NULL);
	close(lfd);
	return conn;
}

/* A child that answers each byte on ping with one on pong, until ping's end; its pid, or -1. */
static pid_t pingpong_child(int ping[2], int pong[2])
{
	pid_t child;
	char b;

	if (pipe(ping) || pipe(pong) || (child = fork()) < 0)
		return -1;
	if (child == 0) {
		close(ping[1]);
		while (read(ping[0], &b, 1) == 1 && write(pong[1], &b, 1) == 1)
			;
		_exit(0);
	}
	close(ping[0]);
	close(pong[1]);
	return child;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "epoll";
	long n = argc > 2 ? atol(argv[2]) : 1000000;
	struct epoll_event ev = { .events = EPOLLIN }, out;
	int sv[2], ep = epoll_create1(0), drain[2];
	char line[16], buf[4096];
	double t0, t1;
	pid_t client = 0;
	int conn = -1, ping[2], pong[2];

	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) || ep < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, drain))
		return 3;
	epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev);
	if (!strncmp(mode, "serve-", 6) && (conn = serve_connection(!strcmp(mode, "serve-write"), n, &client)) < 0)
		return 3;
	if (!strcmp(mode, "pingpong") && (client = pingpong_child(ping, pong)) < 0)
		return 3;
	printf("ready %d\n", getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 3;
	t0 = now_ns();
	if (!strcmp(mode, "epoll")) {
		for (long i = 0; i < n; i++)
			epoll_wait(ep, &out, 1, 0);
	} else if (!strcmp(mode, "write")) {
		for (long i = 0; i < n; i++) {
			if (write(sv[1], "x", 1) != 1)
				return 3;
			if ((i & 63) == 63)
				while (recv(sv[0], buf, sizeof(buf), MSG_DONTWAIT) > 0)
					;
		}
	} else if (!strcmp(mode, "read")) {
		static char fill[65536];

		for (long i = 0; i < n; i++) {
			if ((i & 65535) == 0 && write(drain[1], fill, sizeof(fill)) != sizeof(fill))
				return 3;
			if (read(drain[0], buf, 1) != 1)
				return 3;
		}
	} else if (!strcmp(mode, "serve-write")) {
		if (read(conn, buf, 1) != 1)
			return 3;
		for (long i = 0; i < n; i++)
			if (write(conn, "x", 1) != 1)
				return 3;
	} else if (!strcmp(mode, "serve-read")) {
		for (long i = 0; i < n; i++)
			if (read(conn, buf, 1) != 1)
				return 3;
	} else if (!strcmp(mode, "pingpong")) {
		for (long i = 0; i < n; i++)
			if (write(ping[1], "x", 1) != 1 || read(pong[0], buf, 1) != 1)
				return 3;
		close(ping[1]); /* the child's read ends, and it exits */
	} else {
		for (long i = 0; i < n; i++)
			getppid();
	}
	t1 = now_ns();
	printf("{\"mode\": \"%s\", \"calls\": %ld, \"ns_per_call\": %.1f}\n", mode, n, (t1 - t0) / n);
	fflush(stdout);
	if (client > 0) {
		if (conn >= 0)
			close(conn);
		waitpid(client, NULL, 0);
	}
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}
