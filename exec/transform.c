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
		unsigned isize;

		if (cv->from == cv->to)
			continue;
		c[i].op = cm_op_convert(cv->from, cv->to) & 0xffu;
		isize = c[i].op ? cm_op_isize(c[i].op) : 1;
		if (!c[i].op || c[i].len % isize || (c[i].count > 1 && c[i].src_stride % isize)) {
			cm_free(c);
			return cm_err_set(e, RL_E_DTYPE, "shard %u: a copy of %u bytes is not whole %s "
					  "elements", c[i].shard, c[i].len, pl_dtype_name(cv->from));
		}
	}
	*out = c;
	return 0;
}
