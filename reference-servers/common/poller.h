/*
 * epoll / poll / select behind one interface, for the event-loop architecture's --poller.
 * Interest is level-triggered.  select() cannot watch descriptors >= FD_SETSIZE (1024):
 * poller_set() then fails with EMFILE and the caller drops that connection.
 */
#ifndef RS_POLLER_H
#define RS_POLLER_H

#include <stdint.h>

#include "refserver.h"

#define RS_EV_READ  1u
#define RS_EV_WRITE 2u
#define RS_EV_ERROR 4u   /* reported only: hang-up or error */

struct rs_event {
	void *data;
	uint32_t events;
};

struct rs_poller;

struct rs_poller *poller_new(enum rs_poller_kind kind);
void poller_free(struct rs_poller *p);
/* Set the interest for fd (RS_EV_READ|RS_EV_WRITE); 0 removes it.  Returns 0 or -1/errno. */
int poller_set(struct rs_poller *p, int fd, uint32_t events, void *data);
/* Wait for events (timeout_ms < 0: forever).  Returns the number filled, or -1/errno. */
int poller_wait(struct rs_poller *p, struct rs_event *ev, int max, int timeout_ms);

#endif
