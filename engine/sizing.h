/*
 * sizing.h - the automatic choices of a run (engine/setup.c), for a caller
 * that sizes memory by them before the run (a streaming load's window
 * pool, api/stream.c).
 */
#ifndef ENGINE_SIZING_H
#define ENGINE_SIZING_H

#include <stdint.h>

#include "engine_types.h"

/* When eng_opts workers and queue_depth are 0: workers for
 * all_bytes of reads (the CPUs this thread may use, one per 16 MiB);
 * queue depth of that many workers whose reads are at most max_read
 * bytes on the device queue q (NULL: none known). */
unsigned eng_auto_workers(uint64_t all_bytes);
unsigned eng_auto_depth(unsigned workers, uint32_t max_read, const struct eng_devq *q);

/* The bytes this process may lock (mlock, io_uring's registered
 * buffers): RLIMIT_MEMLOCK, or UINT64_MAX when it holds CAP_IPC_LOCK
 * (root, unless a container dropped it) or the limit is infinite. */
uint64_t eng_memlock_limit(void);

#endif /* ENGINE_SIZING_H */
