/*
 * host.h - the host sink (sink/host.c): destinations are host memory
 * (library or caller staging, a streaming window), one area per slot.
 * Copies are plain memcpy of the strided rule, destinations are
 * pre-faulted by the workers, and reads may land straight in them.
 * Synchronous: no fence, no wait.
 */
#ifndef SINK_HOST_H
#define SINK_HOST_H

#include <stdatomic.h>

#include "../engine/engine.h"

/* A worker's destinations waiting for MADV_POPULATE_WRITE. */
struct sink_host_pf {
	uintptr_t lo, hi;
};

struct sink_host {
	struct eng_sink sink;           /* what a job points at */
	uint8_t *const *areas;          /* slot d's first byte (NULL: none) */
	const uint64_t *bytes;          /* slot d's size (NULL: unchecked) */
	atomic_int prefault_off;        /* MADV_POPULATE_WRITE refused: stop */
	int prefault_errno;             /* and why (read after the run) */
	struct sink_host_pf pf[ENG_MAX_WORKERS];
};

/*
 * Sets h up over ndevs areas (areas[d], bytes[d] bytes each; bytes NULL:
 * unchecked) and returns its sink, valid while h and the arrays live.
 * Nothing to free.
 */
const struct eng_sink *sink_host_init(struct sink_host *h, unsigned ndevs,
				      uint8_t *const *areas, const uint64_t *bytes);

/* After a run: when pre-faulting stopped, sets ENG_FALLBACK_NOT_PREFAULTED
 * in st and appends why to st->fallbacks ("; "-separated, as the engine's
 * notes). */
void sink_host_note(const struct sink_host *h, struct eng_stats *st);

#endif /* SINK_HOST_H */
