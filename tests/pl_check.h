/*
 * pl_check.h - executes a plan against synthetic file bytes (fk_byte of
 * pl_fake.h) and compares every shard with an element-by-element reference,
 * checking on the way every read and copy against the contracts of
 * common/plan_io.h. Used by the planner tests and the planner fuzz target.
 */
#ifndef TESTS_PL_CHECK_H
#define TESTS_PL_CHECK_H

#include <stdint.h>

#include "../planner/pl_private.h"

/*
 * Runs every request of p (reads at most chunk bytes), applies its copies,
 * then compares every shard byte with the reference; shards with recv[i]
 * set (read once: filled by a broadcast) must get no bytes at all (recv may
 * be NULL). Returns NULL, or a static message saying what went wrong.
 */
const char *pl_check_plan(const struct pl_plan *p, const struct pl_ckpt *ck,
			  const struct pl_align *align, uint64_t chunk, const uint8_t *recv);

#endif /* TESTS_PL_CHECK_H */
