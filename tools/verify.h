/*
 * verify.h - `ringload load --verify`: every loaded shard against a plain
 * pread of its tensor's bytes in the file, sliced to the shard's box (an
 * independent path: no plan, no engine).
 */
#ifndef TOOLS_VERIFY_H
#define TOOLS_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include "ringload.h"

struct verify_counts {
	size_t match, differ, uncheckable;  /* uncheckable: assembled targets */
	size_t first_bad;                   /* shard index of the first that differs */
};

/*
 * Compares every shard of plan in ld's staging with the file. fn (may be
 * NULL) gets the shard bytes checked so far after each shard and stops the
 * check by returning non-zero. Returns 0 (see *c for the verdict) or
 * RL_E_CANCELED.
 */
int verify_all(const rl_ckpt *ck, const rl_plan *plan, const rl_loader *ld,
	       struct verify_counts *c, int (*fn)(void *user, uint64_t done, uint64_t total),
	       void *user);

/* The same for shards whose device areas area(area_user, device) gives
 * (NULL: none); shards come in device order, so one area at a time
 * suffices (ringload load --device reads each GPU's back in turn). */
typedef const uint8_t *(*verify_base_fn)(void *area_user, unsigned device);
int verify_areas(const rl_ckpt *ck, const rl_plan *plan, verify_base_fn area, void *area_user,
		 struct verify_counts *c, int (*fn)(void *user, uint64_t done, uint64_t total),
		 void *user);

#endif
