/*
 * layout.c - staging layout: per device, every loaded item gets one shard
 * (possibly empty) in item order, at an offset aligned to shard_align.
 *
 * Congruent placement: a shard that is one contiguous run of one source
 * file, long enough to have an aligned middle, is instead placed so that
 * its staging offset is congruent to its first file byte modulo 4096. The
 * engine can then read the middle straight into staging (RL_READ_DIRECT);
 * such a shard is aligned like its file offset rather than to shard_align.
 */
#include <errno.h>

#include "pl_private.h"

int pl_item_single_run(const struct pl_plan *p, const struct pl_ckpt *ck,
		       const struct pl_item *it, const struct pl_box *box,
		       uint64_t *file, uint64_t *off, uint64_t *len)
{
	const struct pl_tensor *t = &ck->tensors[it->src];
	struct pl_box b = *box;
	struct pl_runs r;

	/* Only a plain tensor or a one-source alias/slice can be one run. */
	if (it->nparts > 1 || (it->nparts && p->parts[it->first_part].nlead))
		return 0;
	if (it->nparts == 1) {
		const struct pl_part *pt = &p->parts[it->first_part];

		for (unsigned d = 0; d < t->ndim; d++) {
			b.start[d] += pt->slice[d];
			b.stop[d] += pt->slice[d];
		}
	}
	if (pl_box_runs(t->ndim, t->shape, it->bits, t->offset, &b, &r) || r.nruns != 1)
		return 0;
	*file = t->file;
	*off = r.off;
	*len = r.len;
	return 1;
}

int pl_congruent_ok(const struct pl_opts *o, const struct pl_align *a, uint64_t len)
{
	uint32_t A = a->offset_align > a->mem_align ? a->offset_align : a->mem_align;

	return o->congruent && a->offset_align > 1 && A <= PL_CONGRUENT_ALIGN &&
	       len >= PL_DIRECT_MIN + 2 * (uint64_t)A;
}

int pl_layout(struct pl_plan *p, const struct pl_ckpt *ck,
	      const struct pl_align *align, const struct pl_opts *o,
	      struct rl_err *e)
{
	for (unsigned s = 0; s < p->nslots; s++) {
		uint32_t coord[PL_MAX_AXES];
		uint64_t cur = 0;

		pl_mesh_coords(p->spec, p->slot_dev[s], coord);
		for (size_t i = 0; i < p->nitems; i++) {
			const struct pl_item *it = &p->items[i];
			struct pl_shard *sh = &p->shards[pl_shard_index(p, i, s)];
			struct pl_box b;
			uint64_t elems = 1, bits, nbytes, off, file, foff, flen;

			pl_item_box_at(p->spec, it, coord, &b);
			for (unsigned d = 0; d < it->ndim; d++)
				if (rl_mul64(elems, b.stop[d] - b.start[d], &elems))
					goto too_large;
			if (rl_mul64(elems, it->bits, &bits))
				goto too_large;
			if (bits % 8)
				return rl_err_set(e, RL_E_SUBBYTE_SPLIT,
						  "tensor \"%s\": shard of device %u is not whole bytes",
						  it->name, p->dev_ids[s]);
			nbytes = bits / 8;
			/* Cheap test first: most shards are too small to matter. */
			if (nbytes >= PL_DIRECT_MIN &&
			    pl_item_single_run(p, ck, it, &b, &file, &foff, &flen) &&
			    pl_congruent_ok(o, &align[file], flen)) {
				uint64_t want = foff % PL_CONGRUENT_ALIGN;

				off = rl_align_down(cur, PL_CONGRUENT_ALIGN) + want;
				if (off < cur)
					off += PL_CONGRUENT_ALIGN;
			} else {
				off = rl_align_up(cur, o->shard_align);
			}
			if (off < cur || rl_add64(off, nbytes, &cur))
				goto too_large;
			sh->tensor = (uint32_t)i;
			sh->dev = s;
			sh->offset = off;
			sh->nbytes = nbytes;
		}
		p->staging[s] = cur;
		continue;
too_large:
		return rl_err_set(e, RL_E_TOO_LARGE, "staging of device %u overflows",
				  p->dev_ids[s]);
	}
	return 0;
}
