/*
 * ckpt_internal.h - what api/ keeps behind an rl_ckpt handle, for the glue
 * that plans and loads (api/plan_handle.c, api/load.c).
 */
#ifndef API_CKPT_INTERNAL_H
#define API_CKPT_INTERNAL_H

#include "ringload.h"
#include "../planner/planner.h"

struct rl_ckpt {
	struct pl_ckpt *pl;   /* NULL until rl_ckpt_open() succeeds */
	int opened;           /* open succeeded (a handle opens once) */
	struct cm_err err;
};

#endif /* API_CKPT_INTERNAL_H */
