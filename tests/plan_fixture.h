/*
 * plan_fixture.h - a checkpoint opened, planned under a spec, and loaded
 * whole once as the oracle that streaming and CUDA loads of the same plan
 * are compared with (test_stream.c, test_cuda.c).
 */
#ifndef TESTS_PLAN_FIXTURE_H
#define TESTS_PLAN_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "ringload.h"

struct fixture {
	rl_ckpt *ck;
	rl_spec *spec;
	rl_plan *plan;
	uint8_t **ref;          /* whole staging of each device (the oracle) */
	size_t *ref_len;
	unsigned ndev;
	size_t nshards;
};

/* The checkpoint at path under spec_json (sj bytes), planned with requests
 * of chunk bytes, and its whole-staging load (library staging, default
 * options). 0, or a negative code (printed); fixture_free either way. */
int fixture_build(struct fixture *f, const char *path, const char *spec_json, size_t sj,
		  uint64_t chunk);
/* A random checkpoint of n tensors (0: a random count up to 12), written
 * as name in this program's tmpdir, under spec_json (NULL: a random spec
 * over a mesh up to 3x3, one process): fixture_build of it. */
int fixture_random_ckpt(struct fixture *f, const char *name, unsigned n, const char *spec_json,
			uint64_t chunk);
void fixture_free(struct fixture *f);
/* fixture_build's plans convert to this dtype (RL_PLAN_DTYPE; -1, the
 * default: as stored). */
extern int fixture_dtype;

#endif
