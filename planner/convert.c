/*
 * convert.c - dtype conversion on load, the planner's half: which items
 * convert (every floating tensor, to the dtype the options name), and
 * what that does to sizes. A converted item's shards are sized and laid
 * out in the destination dtype; its runs are still the file's bytes, so
 * its regions carry both element sizes and scatter.c writes staging
 * offsets in destination bytes. The operation itself is the copies':
 * the transform pass (exec/transform.c) sets it from pl_exec.convert,
 * and the sinks carry it out (sink/convert.c).
 */
#include <errno.h>

#include "pl_private.h"

/* Floating element types: those a conversion to a floating dtype
 * concerns (integers and BOOL keep theirs). */
static int floating(int dt)
{
	switch (dt) {
	case RL_DTYPE_F8_E5M2: case RL_DTYPE_F8_E4M3: case RL_DTYPE_F8_E8M0:
	case RL_DTYPE_F16: case RL_DTYPE_BF16: case RL_DTYPE_F32: case RL_DTYPE_F64:
	case RL_DTYPE_F4: case RL_DTYPE_F6_E2M3: case RL_DTYPE_F6_E3M2: case RL_DTYPE_C64:
	case RL_DTYPE_F8_E4M3FNUZ: case RL_DTYPE_F8_E5M2FNUZ:
		return 1;
	default:
		return 0;
	}
}

int pl_spec_set_dtype(struct pl_spec *s, int dtype, struct cm_err *e)
{
	if (dtype >= 0 && !cm_convert_ok(RL_DTYPE_F32, dtype) &&
	    !cm_convert_ok(RL_DTYPE_F16, dtype))
		return cm_err_set(e, RL_E_DTYPE, "spec: dtype %s: conversions go to F32, F16 or "
				  "BF16", pl_dtype_name(dtype) ? pl_dtype_name(dtype) : "?");
	s->convert = dtype < 0 ? 0 : dtype + 1;
	return 0;
}

int pl_convert_check(const struct pl_opts *o, const struct pl_spec *s, struct cm_err *e)
{
	int to = o->convert - 1;

	if (!o->convert)
		return 0;
	if (!cm_convert_ok(RL_DTYPE_F32, to) && !cm_convert_ok(RL_DTYPE_F16, to))
		return cm_err_set(e, RL_E_DTYPE, "plan: dtype %d: conversions go to F32, F16 or "
				  "BF16", to);
	(void)s; /* read once: the transfers move the file's bytes, their copies convert */
	return 0;
}

int pl_convert_items(struct pl_plan *p, const struct pl_ckpt *ck, const struct pl_opts *o,
		     struct cm_err *e)
{
	int to = o->convert - 1;

	for (size_t i = 0; i < p->nitems; i++) {
		struct pl_item *it = &p->items[i];
		const struct pl_tensor *t = NULL;
		unsigned isize = it->bits / 8;

		it->to = it->dtype;
		it->to_bits = it->bits;
		if (!o->convert || !floating(it->dtype) || it->dtype == to)
			continue;
		if (!cm_convert_ok(it->dtype, to))
			return cm_err_set(e, RL_E_DTYPE, "tensor \"%s\": %s to %s: ringload converts "
					  "F32, F16, BF16, F8_E4M3 and F8_E5M2 to F32, F16 or BF16",
					  it->name, pl_dtype_name(it->dtype), pl_dtype_name(to));
		/* Elements must not straddle reads: each source's data starts
		 * on a whole element (reads are cut on multiples of 4). */
		for (uint32_t k = 0; k < (it->nparts ? it->nparts : 1); k++) {
			t = &ck->tensors[it->nparts ? p->parts[it->first_part + k].src : it->src];
			if (t->offset % isize)
				return cm_err_set(e, RL_E_DTYPE, "tensor \"%s\": its data at file offset "
						  "%llu is not on a whole %s element: cannot convert",
						  t->name, (unsigned long long)t->offset,
						  pl_dtype_name(it->dtype));
		}
		it->to = (uint8_t)to;
		it->to_bits = (uint16_t)pl_dtype_bits(to);
		p->converts = 1;
	}
	return 0;
}

int pl_convert_shards(struct pl_plan *p)
{
	if (!p->converts)
		return 0;
	p->convert = cm_calloc(p->nshards + 1, sizeof(*p->convert));
	if (!p->convert)
		return -ENOMEM;
	for (size_t i = 0; i < p->nshards; i++) {
		const struct pl_item *it = &p->items[p->shards[i].tensor];

		p->convert[i] = (struct pl_convert){ it->dtype, it->to };
	}
	return 0;
}
