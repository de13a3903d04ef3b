/* pl_check.c - see pl_check.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_check.h"
#include "pl_fake.h"

struct exec {
	const struct pl_plan *p;
	const struct pl_ckpt *ck;
	const struct pl_align *align;
	uint8_t **stg;          /* per device: staging bytes */
	uint8_t **cnt;          /* per device: times each byte was written */
	char why[256];
};

/* Source bit (from the start of its file) of the element at coordinates c
 * of item it. Sub-byte dtypes (F4, F6) are compared bit by bit: the planner
 * places them on whole bytes, copied byte by byte. */
static uint64_t ref_src_bit(const struct pl_plan *p, const struct pl_ckpt *ck,
			    const struct pl_item *it, const uint64_t *c, unsigned *file)
{
	const struct pl_part *pt = NULL;
	const struct pl_tensor *t;
	uint64_t flat = 0;
	unsigned nlead = 0;

	if (it->nparts) {
		uint64_t lead = 0;

		pt = &p->parts[it->first_part];
		nlead = pt->nlead;
		for (unsigned j = 0; j < nlead; j++)
			lead = lead * it->shape[j] + c[j];
		pt += lead;
	}
	t = &ck->tensors[pt ? pt->src : it->src];
	for (unsigned d = 0; d < t->ndim; d++)
		flat = flat * t->shape[d] + c[nlead + d] + (pt ? pt->slice[d] : 0);
	*file = t->file;
	return t->offset * 8 + flat * it->bits;
}

static int bit_of(uint8_t byte, uint64_t bit)
{
	return byte >> (bit % 8) & 1;
}

static int fail(struct exec *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct exec *x, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(x->why, sizeof(x->why), fmt, ap);
	va_end(ap);
	return -1;
}

/* Read q: aligned, within its chunk and the file, after the previous one. */
static int check_read(struct exec *x, size_t q, uint64_t chunk)
{
	const struct cm_read *r = &x->p->reads[q], *prev = q ? r - 1 : NULL;
	uint64_t size = x->ck->files[r->file].size;
	uint32_t a = x->align[r->file].offset_align;

	if (r->off % a || r->len % a)
		return fail(x, "read %zu not aligned", q);
	if (r->len > chunk || r->min_len > r->len || r->off + r->min_len > size || !r->min_len)
		return fail(x, "read %zu: len %u min %u off %llu size %llu", q, r->len,
			    r->min_len, (unsigned long long)r->off, (unsigned long long)size);
	if (prev && prev->file == r->file && prev->off + prev->len > r->off)
		return fail(x, "reads %zu and %zu overlap", q - 1, q);
	return 0;
}

/* Copy j of read q: inside the read's bytes and its shard; a direct read's
 * one copy covers it whole at an aligned staging offset. */
static int check_copy(struct exec *x, size_t q, uint64_t j, const struct cm_copy *c)
{
	const struct cm_read *r = &x->p->reads[q];
	const struct pl_shard *sh = &x->p->shards[c->shard];
	uint64_t span = (uint64_t)(c->count - 1) * c->src_stride + c->len;

	if (c->shard >= x->p->nshards || !c->count || !c->len || c->src + span > r->min_len ||
	    (c->count > 1 && c->src_stride < c->len) || sh->dev != c->dev ||
	    c->dst < sh->offset || c->dst + (uint64_t)c->count * c->len > sh->offset + sh->nbytes)
		return fail(x, "read %zu copy %llu out of bounds", q, (unsigned long long)j);
	if ((r->flags & CM_READ_DIRECT) &&
	    (!cm_read_tiles(r, x->p->copies + r->first_copy) ||
	     x->p->copies[r->first_copy].dst % x->align[r->file].offset_align))
		return fail(x, "read %zu: bad direct read", q);
	return 0;
}

/* Every read with its copies, applied to staging. */
static int run_reads(struct exec *x, uint64_t chunk)
{
	for (size_t q = 0; q < x->p->nreads; q++) {
		const struct cm_read *r = &x->p->reads[q];
		uint64_t size = x->ck->files[r->file].size;
		uint8_t *buf;
		int ret = check_read(x, q, chunk);

		if (ret)
			return ret;
		buf = malloc(r->len + 1);
		for (uint32_t i = 0; i < r->len; i++)
			buf[i] = r->off + i < size ? fk_byte(r->file, r->off + i) : 0;
		for (uint64_t j = 0; j < r->ncopies && !ret; j++) {
			const struct cm_copy *c = &x->p->copies[r->first_copy + j];

			if ((ret = check_copy(x, q, j, c)))
				break;
			for (uint32_t k = 0; k < c->count; k++)
				for (uint32_t i = 0; i < c->len; i++) {
					uint64_t d = c->dst + (uint64_t)k * c->len + i;

					x->stg[c->dev][d] = buf[c->src + (uint64_t)k * c->src_stride + i];
					x->cnt[c->dev][d]++;
				}
		}
		free(buf);
		if (ret)
			return ret;
	}
	return 0;
}

/* Shard i's bytes: each written once, each bit the reference's. */
static int check_shard(struct exec *x, size_t i, const uint8_t *recv)
{
	const struct pl_shard *sh = &x->p->shards[i];
	const struct pl_item *it = &x->p->items[sh->tensor];
	const uint8_t *stg = x->stg[sh->dev], *cnt = x->cnt[sh->dev];
	uint64_t c[RL_MAX_DIMS], n = 1;
	struct pl_box b;

	pl_item_box(x->p->spec, it, x->p->slot_dev[sh->dev], &b);
	for (unsigned d = 0; d < it->ndim; d++) {
		c[d] = b.start[d];
		n *= b.stop[d] - b.start[d];
	}
	/* packed small shards: aligned to their element, to 16 from 16 bytes or
	 * empty; or placed congruently with their first file byte, aligned to
	 * their element and to 8 (to their size below 8) */
	if (sh->nbytes < PL_DIRECT_MIN) {
		uint32_t el = pl_dtype_bits(it->dtype) / 8;
		uint32_t want = CM_MAX(el, sh->nbytes >= 16 || !sh->nbytes ? 16u : 1u);
		unsigned file;

		if (sh->offset % want &&
		    ((sh->offset - ref_src_bit(x->p, x->ck, it, c, &file) / 8) % PL_CONGRUENT_ALIGN ||
		     sh->offset % CM_MAX(el, 1u) || sh->offset % CM_MIN(want, 8u)))
			return fail(x, "shard %zu misaligned (offset %llu, %llu bytes, dtype %u)", i, (unsigned long long)sh->offset, (unsigned long long)sh->nbytes, it->dtype);
	}
	for (uint64_t k = 0; k < sh->nbytes; k++)
		if (cnt[sh->offset + k] != (recv && recv[i] ? 0 : 1))
			return fail(x, "%s shard %zu byte %llu written %u times%s", it->name, i,
				    (unsigned long long)k, cnt[sh->offset + k],
				    recv && recv[i] ? " (received by broadcast)" : "");
	if (recv && recv[i])
		return 0;
	if (n * it->bits != sh->nbytes * 8)
		return fail(x, "shard %zu of %s: %llu bytes, want %llu bits", i, it->name,
			    (unsigned long long)sh->nbytes, (unsigned long long)(n * it->bits));
	for (uint64_t e = 0; e < n; e++) {
		unsigned file;
		uint64_t src = ref_src_bit(x->p, x->ck, it, c, &file);
		uint64_t dst = sh->offset * 8 + e * it->bits;

		/* Whole bytes compare as bytes, sub-byte elements bit by bit. */
		for (unsigned k = 0; k < it->bits; k += it->bits % 8 ? 1 : 8) {
			uint64_t sb = src + k, db = dst + k;

			if (it->bits % 8 ? bit_of(stg[db / 8], db) != bit_of(fk_byte(file, sb / 8), sb)
					 : stg[db / 8] != fk_byte(file, sb / 8))
				return fail(x, "%s dev %u element %llu bit %u is wrong", it->name,
					    sh->dev, (unsigned long long)e, k);
		}
		for (unsigned d = it->ndim; d-- > 0;) {
			if (++c[d] < b.stop[d])
				break;
			c[d] = b.start[d];
		}
	}
	return 0;
}

const char *pl_check_plan(const struct pl_plan *p, const struct pl_ckpt *ck,
			  const struct pl_align *align, uint64_t chunk, const uint8_t *recv)
{
	static char why[256];
	struct exec x = { .p = p, .ck = ck, .align = align };
	int ret;

	x.stg = calloc(p->nslots + 1, sizeof(*x.stg));
	x.cnt = calloc(p->nslots + 1, sizeof(*x.cnt));
	for (unsigned s = 0; s < p->nslots; s++) {
		x.stg[s] = calloc(p->staging[s] + 1, 1);
		x.cnt[s] = calloc(p->staging[s] + 1, 1);
	}
	ret = run_reads(&x, chunk);
	for (size_t i = 0; i < p->nshards && !ret; i++)
		ret = check_shard(&x, i, recv);
	for (unsigned s = 0; s < p->nslots; s++) {
		free(x.stg[s]);
		free(x.cnt[s]);
	}
	free(x.stg);
	free(x.cnt);
	if (!ret)
		return NULL;
	snprintf(why, sizeof(why), "%s", x.why);
	return why;
}
