/*
 * The set of connections currently being served on blocking sockets, so that shutdown can
 * wake every thread blocked in read()/write(): live_stop() calls shutdown(2) on each, which
 * makes those calls return at once.  Registration and close happen under one lock, so
 * shutdown(2) never hits a descriptor number that has been closed and reused.
 */
#ifndef RS_LIVE_H
#define RS_LIVE_H

#include <pthread.h>
#include <stdbool.h>

#include "conn.h"

struct rs_live {
	pthread_mutex_t lock;
	unsigned char *open;  /* indexed by fd */
	int cap;
	bool stopping;
};

void live_init(struct rs_live *l);
void live_destroy(struct rs_live *l);
/* Register a connection's fd; false if the server is stopping (the caller closes it). */
bool live_add(struct rs_live *l, int fd);
/* Unregister and conn_free() (closes the socket). */
void live_close(struct rs_live *l, struct rs_conn *c);
/* Refuse new registrations and shut down every registered socket. */
void live_stop(struct rs_live *l);

#endif
