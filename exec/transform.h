/*
 * transform.h - the transform pass (exec/transform.c): gives the copies
 * of a plan their operation (struct cm_copy.op, common/plan_io.h). The
 * first operation is dtype conversion on load: the planner sized and
 * laid out a converted shard in its destination dtype and lists, per
 * shard, the file's dtype and staging's (pl_exec.convert); every copy
 * into such a shard gets that conversion (cm_op_convert). It runs first, over the whole
 * plan, so that the windows pass clips copies that know their sizes.
 */
#ifndef EXEC_TRANSFORM_H
#define EXEC_TRANSFORM_H

#include "../planner/planner.h"

/*
 * The plan's copies with their operations: NULL in *out when no copy
 * changes (the plan's own copies serve), else a new array of
 * ex->ncopies (cm_free) in *out. Returns 0, -ENOMEM, or RL_E_DTYPE when
 * a copy of a converted shard does not take whole elements (e->msg).
 */
int ex_transform_copies(const struct pl_exec *ex, struct cm_copy **out, struct cm_err *e);

#endif /* EXEC_TRANSFORM_H */
