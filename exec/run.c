/*
 * run.c - a load's batches on the engine (run.h). The engine job is
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

int ex_run_sums(struct ex_run *r, const struct pl_exec *ex, const uint8_t *which, uint32_t chunk,
		uint64_t held_max, struct cm_err *e)
{
	size_t n = 0;

	for (size_t f = 0; which && f < ex->nfiles; f++)
		n += which[f] != 0;
	if (!n)
		return 0;
	if (ex_cover_init(&r->cover, ex->nfiles, ex->file_sizes, which, chunk) < 0)
		return cm_err_set(e, -ENOMEM, "out of memory");
	return ex_hash_new(ex->nfiles, ex->file_sizes, which, held_max, &r->hash, e);
}

int ex_run_cover(struct ex_run *r, struct cm_read **rd, size_t *n, size_t *cap, int last)
{
	return r->hash ? ex_cover_batch(&r->cover, rd, n, cap, last) : 0;
}

void ex_run_job(struct ex_run *r, struct eng_job *job, const struct pl_exec *ex,
		const struct ex_batch *b, struct eng_file_stat *file_stats)
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
	job->sink = b->sink;
	job->nshards = b->nshards;
	job->shard_bytes = b->shard_bytes;
	for (size_t i = 0; i < b->nreads; i++)
		job->total_bytes += b->reads[i].len;
	job->user = r;
	job->on_shard = r->on_shard ? run_shard : NULL;
	job->on_progress = r->on_progress ? run_progress : NULL;
	job->on_data = r->hash ? run_data : NULL;
	job->on_data_full = r->hash ? run_data_full : NULL;
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
	ex_cover_free(&r->cover);
	r->hash = NULL;
}
