/*
 * queue.c - completions handed from the engine's threads to the thread
 * that calls MPI: on_shard pushes a shard's index (any thread, serialized
 * by the engine or not), the MPI thread takes them all at its next look.
 * Capacity for every possible entry is reserved first, so that a push,
 * in a library callback, never allocates and never fails.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mx.h"

int mx_queue_init(struct mx_queue *q, size_t cap)
{
	memset(q, 0, sizeof(*q));
	q->v = malloc((cap ? cap : 1) * sizeof(*q->v));
	q->cap = cap;
	if (!q->v || pthread_mutex_init(&q->lock, NULL)) {
		free(q->v);
		q->v = NULL;
		return -ENOMEM;
	}
	return 0;
}

void mx_queue_free(struct mx_queue *q)
{
	if (!q->v)
		return;
	pthread_mutex_destroy(&q->lock);
	free(q->v);
	q->v = NULL;
}

void mx_queue_push(struct mx_queue *q, size_t i)
{
	/* A mutex, not atomics: pushes are one per shard, far from hot. */
	pthread_mutex_lock(&q->lock);
	if (q->n < q->cap)
		q->v[q->n++] = i;
	else
		q->oom = 1;     /* more completions than shards: reported by the taker */
	pthread_mutex_unlock(&q->lock);
}

size_t mx_queue_take(struct mx_queue *q, size_t *out, size_t cap)
{
	size_t n;

	pthread_mutex_lock(&q->lock);
	n = q->n < cap ? q->n : cap;
	memcpy(out, q->v, n * sizeof(*out));
	memmove(q->v, q->v + n, (q->n - n) * sizeof(*q->v));
	q->n -= n;
	pthread_mutex_unlock(&q->lock);
	return n;
}
