/*
 * run.h - a batch of a program on the engine (exec/run.c): the one place
 * an engine job is filled from a plan and a batch (exec/program.h), and
 * the hashing of the files the program reads whole (exec/hash.c), a
 * consumer of the engine's on_data across every batch of a load.
 *
 * The executor (exec/execute.c) sets up an ex_run, builds each batch's
 * job with ex_run_job, runs it, and ends with ex_run_end (digests) and
 * ex_run_stats.
 */
#ifndef EXEC_RUN_H
#define EXEC_RUN_H

#include "../engine/engine.h"
#include "../planner/planner.h"
#include "hash.h"
#include "program.h"

struct ex_run {
	/* The caller's callbacks (any may be NULL), passed user. */
	void (*on_shard)(void *user, size_t shard);
	int (*on_progress)(void *user, uint64_t done, uint64_t total);
	void *user;
	/* The digests (ex_run_hash); NULL: nothing hashed. */
	struct ex_hash *hash;
};

/*
 * Hashing of the files of ex the program reads whole (hashed[f] 1; NULL:
 * none), at most held_max bytes held out of order. Nothing to hash:
 * nothing set up. Returns 0 or a negative code with e set.
 */
int ex_run_hash(struct ex_run *r, const struct pl_exec *ex, const uint8_t *hashed,
		uint64_t held_max, struct cm_err *e);
/* The engine job of batch b of a load of ex: its copies land in sink,
 * shard_bytes (nshards, NULL: none) are what each shard expects;
 * file_stats: out, may be NULL. */
void ex_run_job(struct ex_run *r, struct eng_job *job, const struct pl_exec *ex,
		const struct ex_batch *b, const struct eng_sink *sink, size_t nshards,
		const uint64_t *shard_bytes, struct eng_file_stat *file_stats);
/* The job a session begins with (eng_session_begin's files_job): the
 * files and every read of the plan, which the page-cache probe measures;
 * all holds the batch of every read for as long as job is used. */
void ex_run_files_job(struct ex_run *r, struct eng_job *job, struct ex_batch *all,
		      const struct pl_exec *ex, struct eng_file_stat *file_stats);
/* After the last batch: every hashed file's digest into digests (by
 * file of ex). Returns 0 or a negative code with e set. */
int ex_run_end(struct ex_run *r, const struct pl_exec *ex, uint8_t (*digests)[32],
	       struct cm_err *e);
/* The checksum pass's statistics into st. */
void ex_run_stats(const struct ex_run *r, struct eng_stats *st);
void ex_run_free(struct ex_run *r);

#endif /* EXEC_RUN_H */
