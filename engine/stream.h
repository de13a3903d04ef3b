/*
 * stream.h - windows of staging for streaming loads (engine/stream.c):
 * the reads and copies of a plan that land in one range of one device's
 * staging, rebased into a window, as a job of its own. The loader
 * (api/stream.c) runs such a job per window; the engine proper never sees
 * a window.
 */
#ifndef RL_ENG_STREAM_H
#define RL_ENG_STREAM_H

#include <stdint.h>
#include <stddef.h>

#include "rl_io.h"

/* Bytes [lo, hi) of device dev's staging, held in a window whose first
 * byte is staging offset base (base <= lo, hi - base <= the window). */
struct eng_range {
	unsigned dev;
	uint64_t lo, hi, base;
};

/* The reads (in plan order) and copies of one range, on device 0. */
struct eng_wjob {
	struct rl_read *reads;
	size_t nreads, cap_reads;
	struct rl_copy *copies;
	size_t ncopies, cap_copies;
	uint64_t read_bytes;    /* what its reads read */
};

/*
 * Fills j (its arrays are reused and grown) with every read of the plan
 * that brings bytes to range w, each with its copies clipped to [lo, hi)
 * (a strided copy becomes at most three: a partial first run, the whole
 * runs, a partial last run) and rebased to base. A direct read stays
 * direct only when its whole copy lies in the range; others go through a
 * bounce buffer. Shard indices are kept. Returns 0 or -ENOMEM.
 */
int eng_window_job(const struct rl_read *reads, size_t nreads, const struct rl_copy *copies,
		   const struct eng_range *w, struct eng_wjob *j);
void eng_wjob_free(struct eng_wjob *j);

#endif /* RL_ENG_STREAM_H */
