/*
 * limits.c - the planner's count limits (planner.h), and the test hook that
 * lowers one so that a test reaches it without building a checkpoint of
 * 16 million tensors (and the fuzz targets keep their meshes small enough
 * to try thousands of inputs a second).
 */
#include "planner.h"

/* Plain statics: only single-threaded tests ever change them. */
static uint64_t lowered[PL_LIMIT_KINDS];

static const uint64_t defaults[PL_LIMIT_KINDS] = {
	[PL_LIMIT_FILES] = PL_MAX_FILES,
	[PL_LIMIT_TENSORS] = PL_MAX_TENSORS,
	[PL_LIMIT_DEVICES] = PL_MAX_DEVICES,
	[PL_LIMIT_MATCH_TRIES] = PL_MAX_MATCH_TRIES,
};

uint64_t pl_limit(enum pl_limit_kind k)
{
	return lowered[k] ? lowered[k] : defaults[k];
}

void pl_limit_set_for_tests(enum pl_limit_kind k, uint64_t v)
{
	lowered[k] = v;
}
