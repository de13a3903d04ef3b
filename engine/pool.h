/*
 * pool.h - staging memory (engine/pool.c; its bounce-buffer pools are
 * internal: eng_int.h).
 */
#ifndef ENGINE_POOL_H
#define ENGINE_POOL_H

#include <stddef.h>

#include "engine_types.h"

/*
 * Staging memory for len bytes: anonymous, page-aligned (2 MiB-aligned
 * from 2 MiB on), backed by transparent huge pages where the kernel has
 * them (so that touching many GiB is cheap), and placed on the NUMA node
 * of the caller's CPUs when the machine has several nodes and those CPUs
 * lie on one (eng_numa_node, preferred, not bound: a full node spills
 * over rather than fail). Not touched: the workers fault it in, each
 * the part it fills. Returns NULL on failure. eng_staging_free(NULL, 0) is
 * a no-op.
 */
void *eng_staging_alloc(size_t len);
void eng_staging_free(void *p, size_t len);
/*
 * The same without huge pages, for memory that no read lands in (a
 * transport's receive buffer): with THP defrag "madvise", every huge
 * page faulted in may compact memory first, which on a machine whose
 * memory is page cache cost read-once transfers 1-2 s of system time in
 * half the runs (mpi_bench, 2 ranks, 512 MiB). Freed by eng_staging_free.
 */
void *eng_buffer_alloc(size_t len);

#endif /* ENGINE_POOL_H */
