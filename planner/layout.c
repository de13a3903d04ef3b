/*
 * layout.c - staging layout: per device, every loaded item gets one shard
 * (possibly empty) in item order, at an offset aligned to shard_align.
 *
 * Small shards are packed unless the caller set shard_align (align_all):
 * one of fewer than shard_align bytes is aligned only to its size rounded
 * up to a power of two, at most 16 (enough for any dtype and for vector
 * copies). Padding every shard to 4096 made a file of 1,000,000 one-byte
 * tensors (1 MB) take 4.1 GB of staging; packed it takes 1 MB. An empty
 * shard takes no room: its offset is the current end rounded down to 16
 * (a valid pointer of any dtype), and the next shard starts where it
 * would have without it. So packed staging never exceeds twice the
 * shards' bytes plus shard_align per large shard. A caller who set
 * shard_align (SIMD, DMA) gets it for every shard.
 *
 * Congruent placement: a shard that is one contiguous run of one source
 * file, long enough to have an aligned middle, is instead placed so that
 * its staging offset is congruent to its first file byte modulo 4096. The
 * engine can then read the middle straight into staging (CM_READ_DIRECT);
 * such a shard is aligned like its file offset rather than to shard_align.
 * A shorter one is placed so where that keeps it aligned to 8 (any dtype's
 * element) and pads at most an eighth of it: 20,000 tensors of 64 KiB that
 * follow each other in the file then follow each other in staging and are
 * read straight, many to a request (bounce copies were most of their
 * load's CPU); staging grows by at most an eighth of such shards.
 */
#include <errno.h>

#include "pl_private.h"

#define PL_SMALL_ALIGN 16

/* The alignment of a shard of nbytes that is not placed congruently. */
static uint64_t shard_align(uint64_t nbytes, const struct pl_opts *o)
{
	uint64_t a = 1, large = o->shard_align;

	if (nbytes >= large || o->align_all)
		return large;
	while (a < nbytes && a < PL_SMALL_ALIGN)
		a <<= 1;
	return CM_MIN(a, large);
}

/* The offset of a shard placed at cur (its end is then off + nbytes). */
static uint64_t place(const struct pl_shard *sh, uint64_t cur, const struct pl_opts *o)
{
	uint64_t want = sh->offset & (PL_CONGRUENT_ALIGN - 1), off, packed;

	if (!sh->nbytes)        /* takes no room; a valid pointer of any dtype */
		return cm_align_down(cur, o->align_all ? o->shard_align : PL_SMALL_ALIGN);
	off = cm_align_down(cur, PL_CONGRUENT_ALIGN) + want;
	if (off < cur)
		off += PL_CONGRUENT_ALIGN;
	if (sh->offset & PL_CONGRUENT_MARK)
		return off;
	packed = cm_align_up(cur, shard_align(sh->nbytes, o));
	/* A short shard goes congruent where that keeps it aligned for any
	 * dtype (pl_soft_ok) and costs at most an eighth of itself:
	 * neighbours in the file then follow at no cost and are read
	 * straight, as one. */
	if ((sh->offset & PL_CONGRUENT_SOFT) && pl_soft_ok(o, want, sh->nbytes) &&
	    off - cur <= sh->nbytes / 8)
		return off;
	return packed;
}

int pl_layout(struct pl_plan *p, const struct pl_opts *o, struct cm_err *e)
{
	for (unsigned s = 0; s < p->nslots; s++) {
		uint64_t cur = 0;

		for (size_t i = 0; i < p->nitems; i++) {
			struct pl_shard *sh = &p->shards[pl_shard_index(p, i, s)];
			uint64_t off = place(sh, cur, o);

			if (sh->nbytes && (off < cur || cm_add64(off, sh->nbytes, &cur)))
				return cm_err_set(e, RL_E_TOO_LARGE, "staging of device %u overflows",
						  p->dev_ids[s]);
			sh->tensor = (uint32_t)i;
			sh->dev = s;
			sh->offset = off;
		}
		p->staging[s] = cur;
	}
	return 0;
}
