/*
 * transform.c - the transform pass (transform.h). The plan's copies are
 * the planner's and read-only; a plan with conversions gets its copies
 * once more, each with its operation, which every later pass and every
 * batch then uses (a whole load's batch takes them as they are).
 */
#include <errno.h>
#include <string.h>

#include "common.h"
#include "transform.h"

/* The sizes of dtype dt's elements, in bytes (the converted dtypes
 * have whole bytes). */
static uint8_t elem_bytes(int dt)
{
	return (uint8_t)(pl_dtype_bits(dt) / 8);
}

int ex_transform_copies(const struct pl_exec *ex, struct cm_copy **out, struct cm_err *e)
{
	struct cm_copy *c;

	*out = NULL;
	if (!ex->convert || !ex->ncopies)
		return 0;
	c = cm_mallocarray(ex->ncopies, sizeof(*c));
	if (!c)
		return cm_err_set(e, -ENOMEM, "out of memory");
	memcpy(c, ex->copies, ex->ncopies * sizeof(*c));
	for (size_t i = 0; i < ex->ncopies; i++) {
		const struct pl_convert *cv = ex->convert + c[i].shard;

		if (cv->from == cv->to)
			continue;
		c[i].op = CM_OP_CONVERT;
		c[i].from = cv->from;
		c[i].to = cv->to;
		c[i].isize = elem_bytes(cv->from);
		c[i].osize = elem_bytes(cv->to);
		if (!cm_convert_ok(cv->from, cv->to) || c[i].len % c[i].isize ||
		    (c[i].count > 1 && c[i].src_stride % c[i].isize)) {
			cm_free(c);
			return cm_err_set(e, RL_E_DTYPE, "shard %u: a copy of %u bytes is not whole %s "
					  "elements", c[i].shard, c[i].len, pl_dtype_name(cv->from));
		}
	}
	*out = c;
	return 0;
}
