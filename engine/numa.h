/*
 * numa.h - the NUMA node of the caller and placing memory on it
 * (engine/numa.c).
 */
#ifndef ENGINE_NUMA_H
#define ENGINE_NUMA_H

#include "engine_types.h"

/*
 * The NUMA node the calling thread's allowed CPUs lie on, with sysfs at
 * sysfs_root: -1 when the machine has one node, or when those CPUs span
 * several (memory then follows first touch: each worker's own node).
 */
int eng_numa_node(const char *sysfs_root);

/* Prefers NUMA node `node` for [p, p + len) (before it is touched);
 * advisory: errors are ignored, node < 0 does nothing. */
void eng_numa_place(void *p, size_t len, int node);

#endif /* ENGINE_NUMA_H */
