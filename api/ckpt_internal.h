/*
 * ckpt_internal.h - what api/ keeps behind an rl_ckpt handle, for the glue
 * that plans and loads (api/plan_handle.c, api/loader.c).
 */
#ifndef RL_CKPT_INTERNAL_H
#define RL_CKPT_INTERNAL_H

#include "ringload.h"
#include "../planner/planner.h"

struct rl_ckpt {
	struct pl_ckpt *pl;   /* NULL until rl_ckpt_open() succeeds */
	int opened;           /* open succeeded (a handle opens once) */
	struct rl_err err;
};

#endif /* RL_CKPT_INTERNAL_H */
