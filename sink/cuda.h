/*
 * cuda.h - the CUDA sink: copies pieces of host memory (a streaming
 * window's) to device memory through the driver API (cuda_drv.h), on
 * one stream per GPU, asynchronously; fences are events.
 *
 * Destination slots (cm_copy.dev) are the plan's devices; each maps to a
 * CUDA ordinal (several slots may share one GPU) and has a base device
 * address: a library allocation (cusink_alloc), or 0 when copies carry
 * absolute device addresses in cm_copy.dst (the caller's tensors).
 */
#ifndef SINK_CUDA_H
#define SINK_CUDA_H

#include "../engine/sink.h"

/*
 * A sink for nslots destination slots, slot i on CUDA device ordinal[i],
 * driven by `workers` threads (worker indexes 0 .. workers-1). Loads the
 * driver, checks every ordinal, retains each GPU's primary context and
 * creates its stream. 0, or RL_E_CUDA_DRIVER / RL_E_CUDA_DEVICE /
 * RL_E_CUDA / -ENOMEM with e set and nothing held.
 */
int cusink_create(const int *ordinal, uint32_t nslots, unsigned workers, struct eng_sink *out,
		  struct cm_err *e);
/* RL_E_CUDA_DRIVER with e set in a child forked after the driver was
 * initialized (nothing there may call it), else 0. */
int cusink_forked(struct cm_err *e);
/* Frees everything: waits for copies in flight, frees library
 * allocations, unpins, destroys streams and events, releases the
 * contexts. Accepts a sink never created (ops NULL). */
void cusink_destroy(struct eng_sink *s);

/* Slot's destination: device address base (0: absolute addresses) and
 * its capacity in bytes (UINT64_MAX: unchecked). */
void cusink_set_dest(struct eng_sink *s, uint32_t slot, uint64_t base, uint64_t cap);
/* A library allocation of bytes on slot's GPU, made its destination;
 * RL_E_CUDA_MEMORY when the driver has no room. */
int cusink_alloc(struct eng_sink *s, uint32_t slot, uint64_t bytes, struct cm_err *e);
/* The slot's destination base (0 when none). */
uint64_t cusink_base(const struct eng_sink *s, uint32_t slot);
/* Frees every library allocation (destinations back to none). */
void cusink_free_allocs(struct eng_sink *s);

/*
 * The caller's streams (CUstream values; NULL is the legacy default
 * stream), stream[i] on CUDA device ordinal[i]; every other GPU has
 * none. At cusink_begin each GPU's stream waits for what its caller's
 * stream has queued; at finish the caller's stream waits for the copies.
 */
void cusink_caller_streams(struct eng_sink *s, const int *ordinal, void *const *stream, size_t n);
/* Before a load's first copy: each GPU's stream waits for its caller's
 * stream (an event recorded there, cuStreamWaitEvent). 0 or RL_E_CUDA. */
int cusink_begin(struct eng_sink *s, struct cm_err *e);

/* What the sink does when cuMemHostRegister refuses the pool (cu_pin):
 * copies through cuMemHostAlloc memory, or synchronous from pageable. */
enum { CUSINK_FALLBACK_NONE, CUSINK_FALLBACK_HOST_ALLOC, CUSINK_FALLBACK_PAGEABLE };
/* CUSINK_FALLBACK_* of the pool pinned now, *why its one line ("" when
 * none). */
int cusink_fallback(const struct eng_sink *s, const char **why);

/* fn(user, shard) once each shard's copies have finished. */
void cusink_on_shard(struct eng_sink *s, void (*fn)(void *user, size_t shard), void *user);

/* Copies len bytes at device address base(slot) + off back to host dst
 * (synchronously, after the slot's stream drained): --verify. */
int cusink_read_back(struct eng_sink *s, uint32_t slot, uint64_t off, void *dst, size_t len,
		     struct cm_err *e);

#endif /* SINK_CUDA_H */
