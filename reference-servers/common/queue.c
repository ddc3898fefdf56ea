#include "queue.h"

#include <errno.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "net.h"

void queue_init(struct rs_queue *q)
{
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->nonempty, NULL);
	q->head = q->tail = NULL;
	q->closed = false;
}

void queue_destroy(struct rs_queue *q)
{
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->nonempty);
}

void queue_push(struct rs_queue *q, struct rs_conn *c)
{
	c->next = NULL;
	pthread_mutex_lock(&q->lock);
	if (q->tail)
		q->tail->next = c;
	else
		q->head = c;
	q->tail = c;
	pthread_cond_signal(&q->nonempty);
	pthread_mutex_unlock(&q->lock);
}

struct rs_conn *queue_pop(struct rs_queue *q)
{
	struct rs_conn *c = NULL;

	pthread_mutex_lock(&q->lock);
	while (!q->head && !q->closed)
		pthread_cond_wait(&q->nonempty, &q->lock);
	if (!q->closed) {
		c = q->head;
		q->head = c->next;
		if (!q->head)
			q->tail = NULL;
		c->next = NULL;
	}
	pthread_mutex_unlock(&q->lock);
	return c;
}

void queue_close(struct rs_queue *q)
{
	pthread_mutex_lock(&q->lock);
	q->closed = true;
	pthread_cond_broadcast(&q->nonempty);
	pthread_mutex_unlock(&q->lock);
}

struct rs_conn *queue_take_all(struct rs_queue *q)
{
	pthread_mutex_lock(&q->lock);
	struct rs_conn *list = q->head;
	q->head = q->tail = NULL;
	pthread_mutex_unlock(&q->lock);
	return list;
}

int mailbox_init(struct rs_mailbox *m)
{
	pthread_mutex_init(&m->lock, NULL);
	m->head = m->tail = NULL;
	m->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (m->efd < 0)
		rs_log(true, "eventfd");
	return m->efd < 0 ? -1 : 0;
}

void mailbox_destroy(struct rs_mailbox *m)
{
	pthread_mutex_destroy(&m->lock);
	if (m->efd >= 0)
		close(m->efd);
}

void mailbox_kick(struct rs_mailbox *m)
{
	uint64_t one = 1;

	/* EAGAIN only if the counter would overflow, i.e. a wakeup is pending anyway. */
	while (write(m->efd, &one, sizeof one) < 0 && errno == EINTR)
		;
}

void mailbox_push(struct rs_mailbox *m, struct rs_conn *c)
{
	bool was_empty;

	c->next = NULL;
	pthread_mutex_lock(&m->lock);
	was_empty = m->head == NULL;
	if (m->tail)
		m->tail->next = c;
	else
		m->head = c;
	m->tail = c;
	pthread_mutex_unlock(&m->lock);
	if (was_empty)
		mailbox_kick(m);
}

struct rs_conn *mailbox_drain(struct rs_mailbox *m)
{
	uint64_t v;
	struct rs_conn *list;

	/* Read the counter before taking the list: a push that lands after the take
	 * re-arms the eventfd (it saw an empty list), so no wakeup is lost. */
	while (read(m->efd, &v, sizeof v) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&m->lock);
	list = m->head;
	m->head = m->tail = NULL;
	pthread_mutex_unlock(&m->lock);
	return list;
}
