#include "poller.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <unistd.h>

/* Per-descriptor registration, indexed by fd. */
struct slot {
	void *data;
	uint32_t events;  /* 0: not registered */
	int pos;          /* poll: index into pfds */
};

struct rs_poller {
	enum rs_poller_kind kind;
	struct slot *slots;
	int nslots;
	int epfd;                 /* epoll */
	struct epoll_event *eev;  /* epoll: result buffer */
	int eev_cap;
	struct pollfd *pfds;      /* poll: dense array of registered fds */
	int npfds;
	int maxfd;                /* select: highest registered fd (upper bound) */
	int cursor;               /* poll/select: rotates the scan start for fairness */
};

struct rs_poller *poller_new(enum rs_poller_kind kind)
{
	struct rs_poller *p = calloc(1, sizeof *p);

	if (!p)
		return NULL;
	p->kind = kind;
	p->epfd = -1;
	p->maxfd = -1;
	if (kind == RS_POLLER_EPOLL && (p->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
		free(p);
		return NULL;
	}
	return p;
}

void poller_free(struct rs_poller *p)
{
	if (!p)
		return;
	if (p->epfd >= 0)
		close(p->epfd);
	free(p->slots);
	free(p->eev);
	free(p->pfds);
	free(p);
}

static int grow_slots(struct rs_poller *p, int fd)
{
	if (fd < p->nslots)
		return 0;
	int n = p->nslots ? p->nslots : 64;
	while (n <= fd)
		n *= 2;
	struct slot *s = realloc(p->slots, (size_t)n * sizeof *s);
	if (!s)
		return -1;
	memset(s + p->nslots, 0, (size_t)(n - p->nslots) * sizeof *s);
	p->slots = s;
	p->nslots = n;
	if (p->kind == RS_POLLER_POLL) {
		struct pollfd *pf = realloc(p->pfds, (size_t)n * sizeof *pf);
		if (!pf)
			return -1;
		p->pfds = pf;
	}
	return 0;
}

static uint32_t to_epoll(uint32_t ev)
{
	return (ev & RS_EV_READ ? EPOLLIN : 0) | (ev & RS_EV_WRITE ? EPOLLOUT : 0);
}

static short to_poll(uint32_t ev)
{
	return (short)((ev & RS_EV_READ ? POLLIN : 0) | (ev & RS_EV_WRITE ? POLLOUT : 0));
}

int poller_set(struct rs_poller *p, int fd, uint32_t events, void *data)
{
	if (p->kind == RS_POLLER_SELECT && fd >= FD_SETSIZE) {
		errno = EMFILE;
		return -1;
	}
	if (grow_slots(p, fd) != 0)
		return -1;
	struct slot *s = &p->slots[fd];
	uint32_t old = s->events;

	if (p->kind == RS_POLLER_EPOLL) {
		struct epoll_event ee = { .events = to_epoll(events), .data.ptr = data };
		int op = !old ? EPOLL_CTL_ADD : events ? EPOLL_CTL_MOD : EPOLL_CTL_DEL;
		if (!old && !events)
			return 0;
		if (old == events && s->data == data)
			return 0; /* no syscall when nothing changes */
		if (epoll_ctl(p->epfd, op, fd, &ee) != 0)
			return -1;
	} else if (p->kind == RS_POLLER_POLL) {
		if (!old && events) {
			s->pos = p->npfds++;
			p->pfds[s->pos] = (struct pollfd){ .fd = fd };
		} else if (old && !events) {
			/* Keep the array dense: move the last entry into the hole. */
			struct pollfd last = p->pfds[--p->npfds];
			p->pfds[s->pos] = last;
			p->slots[last.fd].pos = s->pos;
		}
		if (events)
			p->pfds[s->pos].events = to_poll(events);
	} else if (events && fd > p->maxfd) {
		p->maxfd = fd;
	}
	s->events = events;
	s->data = data;
	return 0;
}

static int wait_epoll(struct rs_poller *p, struct rs_event *ev, int max, int timeout_ms)
{
	if (max > p->eev_cap) {
		struct epoll_event *e = realloc(p->eev, (size_t)max * sizeof *e);
		if (!e)
			return -1;
		p->eev = e;
		p->eev_cap = max;
	}
	int n = epoll_wait(p->epfd, p->eev, max, timeout_ms);
	for (int i = 0; i < n; i++) {
		uint32_t e = p->eev[i].events;
		ev[i].data = p->eev[i].data.ptr;
		ev[i].events = (e & EPOLLIN ? RS_EV_READ : 0) | (e & EPOLLOUT ? RS_EV_WRITE : 0) |
			       (e & (EPOLLERR | EPOLLHUP) ? RS_EV_ERROR : 0);
	}
	return n;
}

static int wait_poll(struct rs_poller *p, struct rs_event *ev, int max, int timeout_ms)
{
	int ready = poll(p->pfds, (nfds_t)p->npfds, timeout_ms), n = 0;

	if (ready <= 0)
		return ready;
	if (p->cursor >= p->npfds)
		p->cursor = 0;
	for (int k = 0; k < p->npfds && n < max && n < ready; k++) {
		struct pollfd *pf = &p->pfds[(p->cursor + k) % p->npfds];
		if (!pf->revents)
			continue;
		ev[n].data = p->slots[pf->fd].data;
		ev[n].events = (pf->revents & POLLIN ? RS_EV_READ : 0) |
			       (pf->revents & POLLOUT ? RS_EV_WRITE : 0) |
			       (pf->revents & (POLLERR | POLLHUP | POLLNVAL) ? RS_EV_ERROR : 0);
		n++;
	}
	p->cursor++;
	return n;
}

static int wait_select(struct rs_poller *p, struct rs_event *ev, int max, int timeout_ms)
{
	fd_set rd, wr;
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	int top = -1, n = 0;

	FD_ZERO(&rd);
	FD_ZERO(&wr);
	for (int fd = 0; fd <= p->maxfd; fd++) {
		uint32_t e = p->slots[fd].events;
		if (e & RS_EV_READ)
			FD_SET(fd, &rd);
		if (e & RS_EV_WRITE)
			FD_SET(fd, &wr);
		if (e)
			top = fd;
	}
	p->maxfd = top; /* shrink the scan range as high descriptors go away */
	int ready = select(top + 1, &rd, &wr, NULL, timeout_ms < 0 ? NULL : &tv);
	if (ready <= 0)
		return ready;
	for (int k = 0; k <= top && n < max; k++) {
		int fd = (p->cursor + k) % (top + 1);
		uint32_t e = (FD_ISSET(fd, &rd) ? RS_EV_READ : 0) | (FD_ISSET(fd, &wr) ? RS_EV_WRITE : 0);
		if (e) {
			ev[n].data = p->slots[fd].data;
			ev[n].events = e;
			n++;
		}
	}
	p->cursor++;
	return n;
}

int poller_wait(struct rs_poller *p, struct rs_event *ev, int max, int timeout_ms)
{
	switch (p->kind) {
	case RS_POLLER_EPOLL: return wait_epoll(p, ev, max, timeout_ms);
	case RS_POLLER_POLL: return wait_poll(p, ev, max, timeout_ms);
	default: return wait_select(p, ev, max, timeout_ms);
	}
}
