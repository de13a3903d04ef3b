/*
 * spec_internal.h - what api/ keeps behind an rl_spec handle, for the glue
 * that plans (api/plan_handle.c) and loads.
 */
#ifndef API_SPEC_INTERNAL_H
#define API_SPEC_INTERNAL_H

#include "ringload.h"
#include "../planner/planner.h"

struct rl_spec {
	struct pl_spec *pl;
	struct cm_err err;
};

#endif /* API_SPEC_INTERNAL_H */
