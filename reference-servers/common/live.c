#include "live.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

void live_init(struct rs_live *l)
{
	pthread_mutex_init(&l->lock, NULL);
	l->open = NULL;
	l->cap = 0;
	l->stopping = false;
}

void live_destroy(struct rs_live *l)
{
	pthread_mutex_destroy(&l->lock);
	free(l->open);
}

bool live_add(struct rs_live *l, int fd)
{
	bool ok = false;

	pthread_mutex_lock(&l->lock);
	if (!l->stopping && fd >= l->cap) {
		int n = l->cap ? l->cap : 1024;
		while (n <= fd)
			n *= 2;
		unsigned char *p = realloc(l->open, (size_t)n);
		if (p) {
			memset(p + l->cap, 0, (size_t)(n - l->cap));
			l->open = p;
			l->cap = n;
		}
	}
	if (!l->stopping && fd < l->cap) {
		l->open[fd] = 1;
		ok = true;
	}
	pthread_mutex_unlock(&l->lock);
	return ok;
}

void live_close(struct rs_live *l, struct rs_conn *c)
{
	pthread_mutex_lock(&l->lock);
	if (c->fd < l->cap)
		l->open[c->fd] = 0;
	conn_free(c);
	pthread_mutex_unlock(&l->lock);
}

void live_stop(struct rs_live *l)
{
	pthread_mutex_lock(&l->lock);
	l->stopping = true;
	for (int fd = 0; fd < l->cap; fd++)
		if (l->open[fd])
			shutdown(fd, SHUT_RDWR);
	pthread_mutex_unlock(&l->lock);
}
