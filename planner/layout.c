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

int pl_layout(struct pl_plan *p, const struct pl_opts *o, struct rl_err *e)
{
	for (unsigned s = 0; s < p->nslots; s++) {
		uint64_t cur = 0;

		for (size_t i = 0; i < p->nitems; i++) {
			struct pl_shard *sh = &p->shards[pl_shard_index(p, i, s)];
			uint64_t off;

			if (sh->offset & PL_CONGRUENT_MARK) {
				uint64_t want = sh->offset & ~PL_CONGRUENT_MARK;

				off = rl_align_down(cur, PL_CONGRUENT_ALIGN) + want;
				if (off < cur)
					off += PL_CONGRUENT_ALIGN;
			} else {
				off = rl_align_up(cur, o->shard_align);
			}
			if (off < cur || rl_add64(off, sh->nbytes, &cur))
				return rl_err_set(e, RL_E_TOO_LARGE, "staging of device %u overflows",
						  p->dev_ids[s]);
			sh->tensor = (uint32_t)i;
			sh->dev = s;
			sh->offset = off;
		}
		p->staging[s] = cur;
	}
	return 0;
}
