/*
 * lanes.c - two engine sessions filling windows turn about (lanes.h).
 *
 * Each lane's thread creates its engine, begins its session, then runs
 * the batches it is given one at a time until told to stop, and ends the
 * session: everything of a session on one thread. The calling thread and
 * the lanes meet under one mutex: a lane posts each batch's result and
 * its progress; the calling thread gives batches and waits for them.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lanes.h"

/* The engine's progress of the lane's batch (on the lane's thread): kept
 * for the calling thread to report; non-zero cancels the run. */
static int lane_progress(void *user, uint64_t done, uint64_t total)
{
	struct ex_lane *l = user;
	struct ex_lanes *L = l->L;

	(void)total;
	pthread_mutex_lock(&L->lock);
	l->partial = done;
	L->moved = 1;
	pthread_cond_broadcast(&L->cv);
	pthread_mutex_unlock(&L->lock);
	return atomic_load(&L->stop) || ex_wpool_canceled(L->s.pool);
}

/* The lane's engine and session, over every read of the plan (what the
 * page-cache probe measures). */
static int lane_begin(struct ex_lane *l)
{
	const struct ex_lanes_setup *s = &l->L->s;
	struct ex_batch all;
	struct eng_stats es;
	struct eng_job job;
	int ret;

	ret = eng_create(&s->eo, &l->eng, &l->err);
	if (ret < 0)
		return ret;
	ex_run_files_job(&l->run, &job, &all, s->ex, l->file_stats);
	ret = eng_session_begin(l->eng, &job, &s->prog->needs, s->fixed, s->nfixed, &es,
				&l->sess, &l->err);
	eng_stats_merge(&l->stats, &es, ENG_MERGE_BATCHES); /* set-up time, notes */
	if (ret == 0)
		l->registered = eng_session_fixed(l->sess, l->why, sizeof(l->why));
	return ret;
}

/* Lane l's batch: run it (or fail it with the set-up's error). */
static int lane_run(struct ex_lane *l, const struct ex_batch *b, const struct eng_sink *sink,
		    int ret)
{
	struct eng_stats es;
	struct eng_job job;

	if (ret < 0)
		return ret;
	ex_run_job(&l->run, &job, l->L->s.ex, b, sink, 0, NULL, l->file_stats);
	ret = eng_session_run(l->sess, &job, &es, &l->err);
	eng_stats_merge(&l->stats, &es, ENG_MERGE_BATCHES);
	return ret;
}

static void *lane_main(void *arg)
{
	struct ex_lane *l = arg;
	struct ex_lanes *L = l->L;
	int ret = lane_begin(l);

	pthread_mutex_lock(&L->lock);
	for (;;) {
		const struct ex_batch *b;
		int r;

		while (!l->work && !atomic_load(&L->stop))
			pthread_cond_wait(&L->cv, &L->lock);
		if (!l->work)
			break;
		b = l->work;
		pthread_mutex_unlock(&L->lock);
		r = lane_run(l, b, l->sink, ret);
		pthread_mutex_lock(&L->lock);
		l->work = NULL;
		l->done = 1;
		l->ret = r;
		l->completed += b->read_bytes;
		l->partial = 0;
		L->moved = 1;
		pthread_cond_broadcast(&L->cv);
		if (r < 0) /* the session is done for: no other batch */
			ret = r;
	}
	pthread_mutex_unlock(&L->lock);
	eng_session_end(l->sess);
	eng_destroy(l->eng);
	return NULL;
}

int ex_lanes_start(struct ex_lanes *L, const struct ex_lanes_setup *s, struct cm_err *e)
{
	memset(L, 0, sizeof(*L));
	L->s = *s;
	pthread_mutex_init(&L->lock, NULL);
	pthread_cond_init(&L->cv, NULL);
	atomic_init(&L->stop, 0);
	for (unsigned j = 0; j < EX_LANES; j++) {
		struct ex_lane *l = L->lane + j;
		int ret;

		l->L = L;
		l->run.on_progress = lane_progress;
		l->run.user = l;
		l->file_stats = j == 0 ? s->file_stats : NULL; /* one writer */
		cm_err_clear(&l->err);
		ret = pthread_create(&l->thread, NULL, lane_main, l);
		if (ret) {
			ex_lanes_end(L, NULL, NULL, NULL, NULL, 0);
			return cm_err_set(e, -ret, "streaming: cannot start a reading thread: %s",
					  strerror(ret));
		}
		l->started = 1;
	}
	return 0;
}

void ex_lanes_give(struct ex_lanes *L, unsigned j, const struct ex_batch *b,
		   const struct eng_sink *sink)
{
	struct ex_lane *l = L->lane + j;

	pthread_mutex_lock(&L->lock);
	l->work = b;
	l->sink = sink;
	l->done = 0;
	pthread_cond_broadcast(&L->cv);
	pthread_mutex_unlock(&L->lock);
}

/* The bytes read so far, every lane's (under L->lock). */
static uint64_t lanes_done(const struct ex_lanes *L)
{
	uint64_t n = 0;

	for (unsigned j = 0; j < EX_LANES; j++)
		n += L->lane[j].completed + L->lane[j].partial;
	return n;
}

int ex_lanes_wait(struct ex_lanes *L, unsigned j,
		  int (*on_progress)(void *user, uint64_t done, uint64_t total), void *user,
		  uint64_t total, struct cm_err *e)
{
	struct ex_lane *l = L->lane + j;
	int ret;

	pthread_mutex_lock(&L->lock);
	for (;;) {
		if (L->moved && on_progress) {
			uint64_t done = CM_MIN(lanes_done(L), total);

			L->moved = 0;
			pthread_mutex_unlock(&L->lock);
			ret = on_progress(user, done, total);
			if (ret)
				return cm_err_set(e, RL_E_CANCELED,
						  "load canceled by the progress callback at %" PRIu64
						  " of %" PRIu64 " bytes", done, total);
			pthread_mutex_lock(&L->lock);
			continue;
		}
		if (l->done)
			break;
		pthread_cond_wait(&L->cv, &L->lock);
	}
	l->done = 0;
	ret = l->ret;
	if (ret < 0)
		*e = l->err;
	pthread_mutex_unlock(&L->lock);
	return ret;
}

void ex_lanes_end(struct ex_lanes *L, struct eng_stats *st, unsigned *runs, int *registered,
		  char *why, size_t whylen)
{
	pthread_mutex_lock(&L->lock);
	atomic_store(&L->stop, 1);
	pthread_cond_broadcast(&L->cv);
	pthread_mutex_unlock(&L->lock);
	if (registered)
		*registered = 1;
	for (unsigned j = 0; j < EX_LANES; j++) {
		struct ex_lane *l = L->lane + j;

		if (!l->started)
			continue;
		pthread_join(l->thread, NULL);
		if (st)
			eng_stats_merge(st, &l->stats, ENG_MERGE_BATCHES);
		if (runs)
			(*runs)++;
		if (registered && !l->registered && *registered) {
			*registered = 0;
			snprintf(why, whylen, "%s", l->why);
		}
	}
	/* The lanes read at once: their time is the span from the first
	 * submission to the last completion, not the sum of their runs. */
	if (st && st->read_first_ns && st->read_last_ns > st->read_first_ns)
		st->read_seconds = (double)(st->read_last_ns - st->read_first_ns) / 1e9;
	pthread_cond_destroy(&L->cv);
	pthread_mutex_destroy(&L->lock);
}
