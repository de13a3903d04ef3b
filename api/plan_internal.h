/*
 * plan_internal.h - what api/ keeps behind an rl_plan handle, for the
 * loader glue (api/load.c), which executes plan->pl via pl_plan_exec().
 */
#ifndef API_PLAN_INTERNAL_H
#define API_PLAN_INTERNAL_H

#include "ringload.h"
#include "../planner/planner.h"

struct rl_plan {
	struct pl_opts o;
	struct pl_plan *pl;     /* NULL until rl_plan_build() succeeds */
	struct cm_err err;
};

/* Builds plan->pl from a planner checkpoint and spec (NULL: whole tensors
 * on one device), probing each file's O_DIRECT alignment. For
 * rl_plan_build() and the loader's rl_loader_load(). */
int api_plan_build(rl_plan *plan, const struct pl_ckpt *ck, const struct pl_spec *spec);

/* The public form of a plan's copy. */
static inline void api_copy_info(const struct cm_copy *c, rl_copy_info *out)
{
	out->src = c->src;
	out->len = c->len;
	out->count = c->count;
	out->src_stride = c->src_stride;
	out->device = c->dev;
	out->dst = c->dst;
	out->shard = c->shard;
}

#endif /* API_PLAN_INTERNAL_H */
