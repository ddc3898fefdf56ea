/*
 * Cost of a connection's first read under the collector (the read that decides what the socket is and
 * looks for the HTTP/2 preface), against a later read on the same connection.
 *   first_read_cost FAMILY N PAYLOAD   FAMILY: unix (a listener bound to a path) or tcp (127.0.0.1);
 *                                      PAYLOAD: h2 (the 24-byte HTTP/2 preface and a SETTINGS frame) or
 *                                      http1 (33 bytes of an HTTP/1.1 request)
 * For each of N connections: connect, accept, the client writes PAYLOAD, the server's first read is
 * timed; the client writes again, the server's second read is timed; both close. Prints "ready PID" and
 * waits for a line on stdin (so the collector can attach), then the median and 10th percentile of both
 * reads, in ns, as JSON.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char h2[33] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
static const char http1[33] = "GET / HTTP/1.1\r\nHost: bench\r\n\r\n";

static long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return (x > y) - (x < y);
}

/* One timed read of the n bytes the client just wrote (a whole message: loopback delivers it at once). */
static long timed_read(int fd, size_t n)
{
	char buf[64];
	long t0 = now_ns();
	ssize_t r = read(fd, buf, sizeof(buf));
	long t1 = now_ns();

	if (r != (ssize_t)n)
		exit(3);
	return t1 - t0;
}

int main(int argc, char **argv)
{
	int tcp = argc > 1 && strcmp(argv[1], "tcp") == 0;
	long n = argc > 2 ? atol(argv[2]) : 20000;
	const char *payload = argc > 3 && strcmp(argv[3], "http1") == 0 ? http1 : h2;
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr *addr = tcp ? (struct sockaddr *)&in : (struct sockaddr *)&un;
	socklen_t len = tcp ? sizeof(in) : sizeof(un);
	long *first = calloc(n, sizeof(long)), *later = calloc(n, sizeof(long));
	int listener = socket(tcp ? AF_INET : AF_UNIX, SOCK_STREAM, 0);
	char line[16];

	snprintf(un.sun_path, sizeof(un.sun_path), "/tmp/spinscope-firstread-%d.sock", getpid());
	if (!first || !later || listener < 0 || bind(listener, addr, len) || listen(listener, 16) ||
	    getsockname(listener, addr, &len))
		return 3;
	printf("ready %d\n", getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 3;
	for (long i = 0; i < n; i++) {
		int c = socket(tcp ? AF_INET : AF_UNIX, SOCK_STREAM, 0), s;

		if (c < 0 || connect(c, addr, len) || (s = accept(listener, NULL, NULL)) < 0)
			return 3;
		if (write(c, payload, 33) != 33)
			return 3;
		first[i] = timed_read(s, 33);
		if (write(c, payload, 33) != 33)
			return 3;
		later[i] = timed_read(s, 33);
		close(c);
		close(s);
	}
	unlink(un.sun_path);
	qsort(first, n, sizeof(long), cmp_long);
	qsort(later, n, sizeof(long), cmp_long);
	printf("{\"first_median_ns\": %ld, \"first_p10_ns\": %ld, \"later_median_ns\": %ld, \"later_p10_ns\": %ld}\n",
	       first[n / 2], first[n / 10], later[n / 2], later[n / 10]);
	return 0;
}
