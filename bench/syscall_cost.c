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
 *                                  h2-read, h2-write (as serve-read and serve-write, on an HTTP/2
 *                                        connection: the client sends the preface and a SETTINGS frame,
 *                                        read under trace, first; then each call reads or writes one
 *                                        17-byte PING frame, walked by the probes' frame walk)
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
#include <stdbool.h>
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
#define H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define H2_GREETING 33 /* the preface (24) and an empty SETTINGS frame (9) */
#define H2_PING 17     /* a PING frame: header (9), payload (8) */
static const unsigned char h2_ping[H2_PING] = { 0, 0, 8, 6 };

static int serve_connection(int write_mode, int h2, long n, pid_t *client)
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

		if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)))
			_exit(3);
		if (h2) { /* the greeting, then PING frames back to back (64 KiB at a time: whole frames) */
			static const char greeting[H2_GREETING] = H2_PREFACE "\0\0\0\4";

			for (size_t i = 0; i + H2_PING <= sizeof(chunk); i += H2_PING)
				memcpy(chunk + i, h2_ping, H2_PING);
			if (write(fd, greeting, H2_GREETING) != H2_GREETING)
				_exit(3);
			n *= H2_PING;
		} else if (write(fd, "?", 1) != 1) {
			_exit(3);
		}
		if (write_mode) {
			setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat));
			while (read(fd, chunk, sizeof(chunk)) > 0)
				;
		} else {
			long size = h2 ? sizeof(chunk) / H2_PING * H2_PING : sizeof(chunk);

			for (long sent = h2 ? 0 : 1; sent < n;) { /* the request's byte was the first */
				long left = n - sent;
				ssize_t w = write(fd, chunk, left < size ? left : size);

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
	bool h2 = !strncmp(mode, "h2-", 3);

	if ((!strncmp(mode, "serve-", 6) || h2) &&
	    (conn = serve_connection(!strcmp(mode, "serve-write") || !strcmp(mode, "h2-write"), h2, n, &client)) < 0)
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
	} else if (h2) { /* the greeting (its first read decides the connection is HTTP/2), then a frame a call */
		if (recv(conn, buf, H2_GREETING, MSG_WAITALL) != H2_GREETING)
			return 3;
		for (long i = 0; i < n; i++)
			if (!strcmp(mode, "h2-write") ? write(conn, h2_ping, H2_PING) != H2_PING
						      : recv(conn, buf, H2_PING, MSG_WAITALL) != H2_PING)
				return 3;
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
