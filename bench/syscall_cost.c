/*
 * Cost of a traced syscall: times a tight loop of cheap calls the collector counts.
 *   syscall_cost MODE N      MODE: epoll (zero-timeout epoll_wait on an idle fd, returns 0)
 *                                  write (1-byte write to a socket whose peer drains it)
 *                                  read (1-byte read from a stream socket holding data, refilled
 *                                        64 KiB at a time: one write per 65,536 reads)
 *                                  getppid (a syscall spinscope does not trace at all)
 * Prints "ready PID" and waits for a line on stdin (so a tracer can attach), then prints the mean
 * nanoseconds per call as JSON.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "epoll";
	long n = argc > 2 ? atol(argv[2]) : 1000000;
	struct epoll_event ev = { .events = EPOLLIN }, out;
	int sv[2], ep = epoll_create1(0), drain[2];
	char line[16], buf[4096];
	double t0, t1;

	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) || ep < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, drain))
		return 3;
	epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev);
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
	} else {
		for (long i = 0; i < n; i++)
			getppid();
	}
	t1 = now_ns();
	printf("{\"mode\": \"%s\", \"calls\": %ld, \"ns_per_call\": %.1f}\n", mode, n, (t1 - t0) / n);
	return 0;
}
