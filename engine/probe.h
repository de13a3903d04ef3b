/*
 * probe.h - a file's O_DIRECT alignment (engine/probe.c).
 */
#ifndef ENGINE_PROBE_H
#define ENGINE_PROBE_H

#include "engine_types.h"

/*
 * Probes path: statx(STATX_DIOALIGN) where the kernel reports it, else the
 * logical block size of the underlying device; direct is 0 (and both
 * alignments 1) where the file system refuses O_DIRECT (tmpfs before 6.6,
 * some network file systems). Returns 0 or -errno.
 */
int eng_probe_align(const char *path, struct eng_align *out);

#endif /* ENGINE_PROBE_H */
