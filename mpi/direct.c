/*
 * direct.c - receiving a payload straight into the shards: the rank's
 * scatter list for it, expanded into blocks in payload order, becomes an
 * MPI datatype over absolute addresses, so that MPI lands each byte where
 * the copy would have put it. No receive buffer to fault in, no second
 * copy: on a machine whose fresh memory faults in at a few hundred MB/s,
 * touching a buffer costs more than the transfer. Only when the blocks
 * cover every payload byte exactly once (a rank that needs part of a
 * payload, or a scatter list of very many runs, uses a buffer).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mx.h"

/* More blocks than this: a buffer and copies cost less than the datatype. */
#define DIRECT_MAX_BLOCKS 65536

void mx_blocks_free(struct mx_blocks *b)
{
	free(b->v);
	memset(b, 0, sizeof(*b));
}

static int blk_cmp(const void *pa, const void *pb)
{
	const struct mx_blk *a = pa, *b = pb;

	return (a->src > b->src) - (a->src < b->src);
}

/* Blocks being listed: counted (v NULL), then filled. */
struct blk_list {
	struct mx_blocks *b;
	uint8_t *area;          /* the current copy's staging */
};

/* One run of a copy (rl_copy_runs) as a block; -1 past the limit. */
static int add_block(void *arg, uint64_t src, uint64_t dst, uint64_t len)
{
	struct blk_list *l = arg;

	if (l->b->n >= DIRECT_MAX_BLOCKS)
		return -1;
	if (l->b->v)
		l->b->v[l->b->n] = (struct mx_blk){ src, len, l->area + dst };
	l->b->n++;
	return 0;
}

/* Every run of every copy of transfer t, as blocks; -1 when too many. */
static int expand(const rl_plan *plan, size_t t, size_t ncopies, uint8_t *const *staging,
		  struct mx_blocks *b)
{
	struct blk_list l = { b, NULL };
	size_t n;

	for (int fill = 0; fill < 2; fill++) {
		for (size_t j = 0; j < ncopies; j++) {
			rl_copy_info c;

			rl_plan_transfer_copy(plan, t, j, &c);
			l.area = staging[c.device];
			if (rl_copy_runs(&c, add_block, &l))
				return -1;
		}
		if (fill)
			break;
		n = b->n;
		b->n = 0;
		if (!(b->v = malloc((n + 1) * sizeof(*b->v))))
			return -ENOMEM;
	}
	return 0;
}

int mx_direct_blocks(const rl_plan *plan, size_t t, const rl_transfer_info *ti,
		     uint8_t *const *staging, struct mx_blocks *b)
{
	uint64_t end = 0;
	size_t m = 0;
	int ret;

	memset(b, 0, sizeof(*b));
	if ((ret = expand(plan, t, ti->ncopies, staging, b)) || !b->n) {
		mx_blocks_free(b);
		return ret == -ENOMEM ? ret : 0;
	}
	qsort(b->v, b->n, sizeof(*b->v), blk_cmp);
	for (size_t i = 0; i < b->n; i++) {
		if (b->v[i].src != end) {       /* a gap or a byte twice: not direct */
			mx_blocks_free(b);
			return 0;
		}
		end += b->v[i].len;
		if (m && b->v[m - 1].dst + b->v[m - 1].len == b->v[i].dst)
			b->v[m - 1].len += b->v[i].len;         /* contiguous there too */
		else
			b->v[m++] = b->v[i];
	}
	b->n = m;
	if (end != ti->nbytes) {
		mx_blocks_free(b);
		return 0;
	}
	return 1;
}

uint8_t *mx_direct_run(const struct mx_blocks *b, uint64_t off, uint64_t len)
{
	uint64_t src = 0;

	for (size_t i = 0; i < b->n; src += b->v[i++].len)
		if (off >= src && off < src + b->v[i].len)
			return off + len <= src + b->v[i].len ? b->v[i].dst + (off - src) : NULL;
	return NULL;
}

int mx_direct_type(const struct mx_blocks *b, uint64_t off, uint64_t len, MPI_Datatype *type)
{
	int *lens = malloc((b->n + 1) * sizeof(*lens)), n = 0, ret = -ENOMEM;
	MPI_Aint *at = malloc((b->n + 1) * sizeof(*at));
	uint64_t src = 0;

	for (size_t i = 0; lens && at && i < b->n; src += b->v[i++].len) {
		uint64_t lo = MX_MAX(off, src), hi = MX_MIN(off + len, src + b->v[i].len);

		if (lo >= hi)
			continue;
		lens[n] = (int)(hi - lo);       /* a block is at most a payload: < INT_MAX */
		MPI_Get_address(b->v[i].dst + (lo - src), &at[n++]);
	}
	if (lens && at)
		ret = MPI_Type_create_hindexed(n, lens, at, MPI_BYTE, type) == MPI_SUCCESS &&
		      MPI_Type_commit(type) == MPI_SUCCESS ? 0 : RL_E_MPI;
	free(lens);
	free(at);
	return ret;
}
