/*
 * check.c - the plan is data: every read and copy is checked before a
 * worker touches memory for it (files, lengths, copies within the read's
 * minimum length, the sink's destination slots and their capacity, and
 * the shard table; direct reads tiled by their copies), and no shard may be
 * brought more bytes than it holds.
 */
#include "eng_int.h"

/* Bytes destination slot dev of sink holds (UINT64_MAX: unchecked). */
static uint64_t capacity(const struct eng_sink *sink, uint32_t dev)
{
	return sink->ops->capacity ? sink->ops->capacity(sink->state, dev) : UINT64_MAX;
}

int eng_check_read(struct eng_run *rc, const struct cm_read *r)
{
	const struct eng_job *job = rc->b.job;
	uint64_t end;

	if (r->file >= job->nfiles)
		return cm_err_set(rc->b.e, RL_E_INVALID_ARG, "read at offset %llu: file %u of %zu",
				  (unsigned long long)r->off, r->file, job->nfiles);
	if (r->len == 0 || r->min_len > r->len || cm_add64(r->off, r->len, &end))
		return cm_err_set(rc->b.e, RL_E_INVALID_ARG,
				  "%s: read at offset %llu: length %u, minimum %u",
				  job->paths[r->file], (unsigned long long)r->off, r->len,
				  r->min_len);
	if (r->len > rc->b.bound)
		return cm_err_set(rc->b.e, RL_E_INVALID_ARG,
				  "%s: read at offset %llu: length %u exceeds the in-flight bound %llu",
				  job->paths[r->file], (unsigned long long)r->off, r->len,
				  (unsigned long long)rc->b.bound);
	if (r->ncopies && (r->first_copy > job->ncopies ||
			   r->ncopies > job->ncopies - r->first_copy))
		return cm_err_set(rc->b.e, RL_E_INVALID_ARG,
				  "%s: read at offset %llu: copies %llu+%u of %zu",
				  job->paths[r->file], (unsigned long long)r->off,
				  (unsigned long long)r->first_copy, r->ncopies, job->ncopies);
	if (r->ncopies && !eng_sink_ok(job->sink))
		return cm_err_set(rc->b.e, RL_E_INVALID_ARG,
				  "%s: read at offset %llu: copies, but %s",
				  job->paths[r->file], (unsigned long long)r->off,
				  job->sink ? "the sink's ops table is not one this engine can call" :
				  "no sink to take them");
	for (uint32_t i = 0; i < r->ncopies; i++) {
		const struct cm_copy *c = job->copies + r->first_copy + i;
		uint64_t span = 0, bytes = 0, dend;

		/* Destination and shard are checked for every copy, empty
		 * ones too: the worker that reaps indexes both. */
		if (c->dev >= job->sink->ndevs ||
		    (c->count && (cm_mul64(c->count - 1, c->src_stride, &span) ||
				  cm_add64(span, (uint64_t)c->src + c->len, &span) ||
				  span > r->len)) ||
		    (c->count > 1 && c->src_stride < c->len) ||
		    (c->op != CM_OP_PLAIN && (!cm_op_ok(c->op) ||
					      c->len % cm_op_isize(c->op))) ||
		    cm_mul64(cm_copy_out(c, c->len), c->count, &bytes) ||
		    cm_add64(c->dst, bytes, &dend) ||
		    dend > capacity(job->sink, c->dev) ||
		    (job->shard_bytes && c->shard >= job->nshards))
			return cm_err_set(rc->b.e, RL_E_INVALID_ARG,
					  "%s: read at offset %llu: copy %u out of bounds",
					  job->paths[r->file], (unsigned long long)r->off, i);
		/* Bytes past min_len may never arrive (end of file, or a
		 * short read the engine accepts): no copy may take them. */
		if (c->count && span > r->min_len)
			return cm_err_set(rc->b.e, RL_E_INVALID_ARG,
					  "%s: read at offset %llu: copy %u takes bytes up to %llu past the minimum length %u",
					  job->paths[r->file], (unsigned long long)r->off, i,
					  (unsigned long long)span, r->min_len);
	}
	if ((r->flags & CM_READ_DIRECT) && !cm_read_tiles(r, job->copies + r->first_copy))
		return cm_err_set(rc->b.e, RL_E_INVALID_ARG,
				  "%s: direct read at offset %llu is not copies tiling bytes that must all arrive",
				  job->paths[r->file], (unsigned long long)r->off);
	return 0;
}

/* Adds a checked read's copies to the bytes planned for their shards:
 * more than a shard holds means the plan covers some bytes twice, and
 * on_shard would fire before every byte landed. */
int eng_plan_shards(struct eng_run *rc, const struct cm_read *r)
{
	const struct eng_job *job = rc->b.job;

	if (!job->shard_bytes)
		return 0;
	for (uint32_t i = 0; i < r->ncopies; i++) {
		const struct cm_copy *c = job->copies + r->first_copy + i;
		uint64_t *n = rc->b.shard_planned + c->shard;

		*n += cm_copy_bytes(c); /* checked: no overflow */
		if (*n > job->shard_bytes[c->shard])
			return cm_err_set(rc->b.e, RL_E_INVALID_ARG,
					  "%s: read at offset %llu: copy %u brings shard %u to %llu of %llu bytes (bytes covered twice)",
					  job->paths[r->file], (unsigned long long)r->off, i,
					  c->shard, (unsigned long long)*n,
					  (unsigned long long)job->shard_bytes[c->shard]);
	}
	return 0;
}

/* Where a direct read lands, or NULL when it needs a bounce buffer:
 * flagged, given by the sink, and either buffered or suitably aligned
 * for O_DIRECT. */
uint8_t *eng_direct_dst(const struct eng_run *rc, const struct cm_read *r)
{
	const struct eng_file *f = rc->cx.files + r->file;
	const struct eng_sink *sink = rc->b.job->sink;
	uint8_t *dst;

	if (!(r->flags & CM_READ_DIRECT) || !sink->ops->direct)
		return NULL;
	dst = sink->ops->direct(sink->state, rc->b.job->copies + r->first_copy, r->len);
	if (!dst)
		return NULL;
	if (f->dfd >= 0 && ((uintptr_t)dst % f->align || r->off % f->align ||
			    r->len % f->align))
		return NULL;
	return dst;
}
