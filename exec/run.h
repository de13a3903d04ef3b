/*
 * run.h - a load's batches on the engine (exec/run.c): the one place an
 * engine job is filled from a plan and a batch, and the checksum pass
 * (exec/cover.c, exec/hash.c) threaded through the batches of a load.
 *
 * A load (api/load.c: one batch, the whole plan; api/stream.c: one batch
 * per window) sets up an ex_run, passes each batch's reads through
 * ex_run_cover, builds its job with ex_run_job, runs it, and ends with
 * ex_run_end (digests) and ex_run_stats.
 */
#ifndef EXEC_RUN_H
#define EXEC_RUN_H

#include "../engine/engine.h"
#include "../planner/planner.h"
#include "cover.h"
#include "hash.h"

/* What one batch reads and where its copies land. */
struct ex_batch {
	const struct cm_read *reads;
	size_t nreads;
	const struct cm_copy *copies;
	size_t ncopies;
	const struct eng_sink *sink;    /* where the copies land (engine/sink.h) */
	size_t nshards;                 /* bytes each shard expects (NULL: none) */
	const uint64_t *shard_bytes;
};

struct ex_run {
	/* The caller's callbacks (any may be NULL), passed user. */
	void (*on_shard)(void *user, size_t shard);
	int (*on_progress)(void *user, uint64_t done, uint64_t total);
	void *user;
	/* The checksum pass (ex_run_sums); hash NULL: nothing hashed. */
	struct ex_cover cover;
	struct ex_hash *hash;
};

/*
 * The checksum pass of a load of ex: the files with which[f] 1 (read
 * whole by the plan: ex_cover_decide) are hashed, fillers of at most
 * chunk bytes, at most held_max bytes held out of order. Nothing to
 * hash: nothing set up. Returns 0 or a negative code with e set.
 */
int ex_run_sums(struct ex_run *r, const struct pl_exec *ex, const uint8_t *which, uint32_t chunk,
		uint64_t held_max, struct cm_err *e);
/* A batch's reads through the checksum cover (see ex_cover_batch); a
 * no-op when nothing is hashed. Returns 0 or -ENOMEM. */
int ex_run_cover(struct ex_run *r, struct cm_read **rd, size_t *n, size_t *cap, int last);
/* The engine job of batch b of a load of ex (files, identities, reads,
 * copies, staging, shards, callbacks; file_stats: out, may be NULL). */
void ex_run_job(struct ex_run *r, struct eng_job *job, const struct pl_exec *ex,
		const struct ex_batch *b, struct eng_file_stat *file_stats);
/* After the last batch: every hashed file's digest into digests (by
 * file of ex). Returns 0 or a negative code with e set. */
int ex_run_end(struct ex_run *r, const struct pl_exec *ex, uint8_t (*digests)[32],
	       struct cm_err *e);
/* The checksum pass's statistics into st. */
void ex_run_stats(const struct ex_run *r, struct eng_stats *st);
void ex_run_free(struct ex_run *r);

#endif /* EXEC_RUN_H */
