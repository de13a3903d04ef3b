/*
 * lanes.h - two engine sessions that fill a streaming load's windows
 * turn about (exec/lanes.c), so that the next window's reads are in
 * flight while the last one's drain.
 *
 * One session runs one batch at a time, and a batch ends when its last
 * read has landed: between two windows the device has nothing to do
 * while the last reads complete, the pieces are handed out and the next
 * run starts. On the virtio disk that cost about 1.7 ms a window (a cold
 * 1.3 GB file of 20,000 64 KiB tensors, busy machine: 40 windows of 32
 * MiB streamed 1.085x slower than the whole load, 10 windows of 128 MiB
 * 1.02x; on two lanes, 8 interleaved rounds: 0.903 s against one
 * session's 0.955 s and the whole load's 0.943 s). With
 * two lanes, batch i runs on lane i % 2 while batch i + 1 runs on the
 * other, each session on its own thread (begin, runs and end on one
 * thread, as the engine asks); the calling thread only gives out work,
 * waits for it in order, and reports progress, so that every callback
 * of the load still runs on it.
 */
#ifndef EXEC_LANES_H
#define EXEC_LANES_H
#include <pthread.h>
#include <stdatomic.h>

#include "../engine/engine.h"
#include "../planner/planner.h"
#include "program.h"
#include "run.h"
#include "window_pool.h"

#define EX_LANES 2

/* What every lane's session is set up with. */
struct ex_lanes_setup {
	const struct pl_exec *ex;
	const struct ex_program *prog;
	struct eng_opts eo;                 /* each lane's engine */
	const struct eng_fixed *fixed;      /* the windows, registered by each */
	unsigned nfixed;
	struct eng_file_stat *file_stats;   /* lane 0's; may be NULL */
	struct ex_wpool *pool;              /* its cancel stops the lanes */
};

/* One lane: a session on its own thread and the batch it was given. */
struct ex_lane {
	struct ex_lanes *L;
	pthread_t thread;
	int started;
	struct eng *eng;
	struct eng_session *sess;
	struct ex_run run;                  /* its jobs' callbacks (no hashing) */
	struct eng_file_stat *file_stats;
	/* Under L->lock: the batch to fill and where, whether it is done,
	 * its result, and its bytes read so far (progress). */
	const struct ex_batch *work;
	const struct eng_sink *sink;
	int done, ret;
	uint64_t completed, partial;
	struct cm_err err;
	/* The lane's thread only, read once it is joined. */
	struct eng_stats stats;
	int registered;
	char why[64];
};

struct ex_lanes {
	struct ex_lanes_setup s;
	pthread_mutex_t lock;
	pthread_cond_t cv;      /* a lane finished a batch, moved, or stop */
	int moved;              /* progress since the last report */
	atomic_int stop;        /* every lane: cancel the run, then end */
	struct ex_lane lane[EX_LANES];
};

/* Starts the lanes (their sessions begin on their threads). Returns 0
 * or a negative code with e set (nothing left running). */
int ex_lanes_start(struct ex_lanes *L, const struct ex_lanes_setup *s, struct cm_err *e);
/* Lane j fills batch b into sink (it holds no other batch). */
void ex_lanes_give(struct ex_lanes *L, unsigned j, const struct ex_batch *b,
		   const struct eng_sink *sink);
/* Waits for lane j's batch; meanwhile on_progress (may be NULL) gets
 * the bytes read so far of total, on this thread. Returns the run's
 * result (e set), or RL_E_CANCELED when on_progress returned non-zero. */
int ex_lanes_wait(struct ex_lanes *L, unsigned j,
		  int (*on_progress)(void *user, uint64_t done, uint64_t total), void *user,
		  uint64_t total, struct cm_err *e);
/* Stops and joins every lane (a run in flight is canceled), then adds
 * their statistics to st, their set-ups to *runs and whether every one
 * registered the windows (else why not). Workers, depth and buffers are
 * one session's (each lane's engine has the load's options, and the
 * windows hold the depth between them, as with one session); the read
 * time is the span from the first submission to the last completion. */
void ex_lanes_end(struct ex_lanes *L, struct eng_stats *st, unsigned *runs, int *registered,
		  char *why, size_t whylen);
#endif /* EXEC_LANES_H */
