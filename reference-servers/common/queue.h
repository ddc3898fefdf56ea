/*
 * Thread-to-thread handoff of connections.  Both queues are intrusive (linked through
 * rs_conn.next: a connection is in at most one queue at a time), so a handoff never
 * allocates.  Every handoff to a sleeping thread is a real wakeup:
 *
 *   rs_queue    for threads that sleep on a condition variable (worker pools);
 *   rs_mailbox  for threads that sleep in epoll_wait: the push writes an eventfd the
 *               receiver has registered, but only when the mailbox goes from empty to
 *               non-empty (like Java's Selector.wakeup()), so a busy receiver is not
 *               charged one syscall per item.
 */
#ifndef RS_QUEUE_H
#define RS_QUEUE_H

#include <pthread.h>
#include <stdbool.h>

#include "conn.h"

struct rs_queue {
	pthread_mutex_t lock;
	pthread_cond_t nonempty;
	struct rs_conn *head, *tail;
	bool closed;
};

void queue_init(struct rs_queue *q);
void queue_destroy(struct rs_queue *q);
void queue_push(struct rs_queue *q, struct rs_conn *c);
/* Block until a connection is available (FIFO) or the queue is closed (returns NULL). */
struct rs_conn *queue_pop(struct rs_queue *q);
/* Wake all waiters and make pop return NULL; queued connections stay for queue_take_all. */
void queue_close(struct rs_queue *q);
/* Remove and return everything queued (as a list through ->next), e.g. to free at shutdown. */
struct rs_conn *queue_take_all(struct rs_queue *q);

struct rs_mailbox {
	pthread_mutex_t lock;
	struct rs_conn *head, *tail;
	int efd;                    /* register for EPOLLIN in the receiver's epoll set */
};

int mailbox_init(struct rs_mailbox *m);
void mailbox_destroy(struct rs_mailbox *m);
void mailbox_push(struct rs_mailbox *m, struct rs_conn *c);
/* Consume the wakeup and take everything queued, in FIFO order, as a list through ->next. */
struct rs_conn *mailbox_drain(struct rs_mailbox *m);
/* Wake the receiver without sending anything (e.g. to make it notice a stop flag). */
void mailbox_kick(struct rs_mailbox *m);

#endif
