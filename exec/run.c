/*
 * run.c - a program's batches on the engine (run.h). The engine job is
 * filled here and nowhere else; the job's callbacks come back here and go
 * on to the caller's (shards, progress) and to the checksum pass (data).
 */
#include <errno.h>
#include <string.h>

#include "run.h"

static void run_shard(void *user, size_t shard)
{
	struct ex_run *r = user;

	r->on_shard(r->user, shard);
}

static int run_progress(void *user, uint64_t done, uint64_t total)
{
	struct ex_run *r = user;

	return r->on_progress(r->user, done, total);
}

static void run_data(void *user, const struct cm_read *rd, const uint8_t *bytes)
{
	struct ex_run *r = user;

	ex_hash_data(r->hash, rd, bytes);
}

static int run_data_full(void *user)
{
	struct ex_run *r = user;

	return ex_hash_full(r->hash);
}

int ex_run_hash(struct ex_run *r, const struct pl_exec *ex, const uint8_t *hashed,
		uint64_t held_max, struct cm_err *e)
{
	if (!hashed)
		return 0;
	return ex_hash_new(ex->nfiles, ex->file_sizes, hashed, held_max, &r->hash, e);
}

void ex_run_job(struct ex_run *r, struct eng_job *job, const struct pl_exec *ex,
		const struct ex_batch *b, const struct eng_sink *sink, size_t nshards,
		const uint64_t *shard_bytes, struct eng_file_stat *file_stats)
{
	memset(job, 0, sizeof(*job));
	job->nfiles = ex->nfiles;
	job->paths = ex->paths;
	job->file_sizes = ex->file_sizes;
	job->file_ids = ex->file_ids;
	job->file_stats = file_stats;
	job->reads = b->reads;
	job->nreads = b->nreads;
	job->copies = b->copies;
	job->ncopies = b->ncopies;
	job->sink = sink;
	job->nshards = nshards;
	job->shard_bytes = shard_bytes;
	job->total_bytes = b->read_bytes;
	job->user = r;
	job->on_shard = r->on_shard ? run_shard : NULL;
	job->on_progress = r->on_progress ? run_progress : NULL;
	job->on_data = r->hash ? run_data : NULL;
	job->on_data_full = r->hash ? run_data_full : NULL;
}

void ex_run_files_job(struct ex_run *r, struct eng_job *job, struct ex_batch *all,
		      const struct pl_exec *ex, struct eng_file_stat *file_stats)
{
	memset(all, 0, sizeof(*all));
	all->reads = ex->reads;
	all->nreads = ex->nreads;
	for (size_t i = 0; i < ex->nreads; i++)
		all->read_bytes += ex->reads[i].len;
	ex_run_job(r, job, ex, all, NULL, 0, NULL, file_stats);
}

int ex_run_end(struct ex_run *r, const struct pl_exec *ex, uint8_t (*digests)[32],
	       struct cm_err *e)
{
	return r->hash ? ex_hash_end(r->hash, ex->paths, digests, e) : 0;
}

void ex_run_stats(const struct ex_run *r, struct eng_stats *st)
{
	if (r->hash)
		ex_hash_stats(r->hash, &st->hashed_bytes, &st->hash_seconds, &st->hash_held_peak);
}

void ex_run_free(struct ex_run *r)
{
	ex_hash_free(r->hash);
	r->hash = NULL;
}
