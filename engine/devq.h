/*
 * devq.h - the device queue under a file (engine/devq.c; struct eng_devq in
 * engine_types.h).
 */
#ifndef ENGINE_DEVQ_H
#define ENGINE_DEVQ_H

#include "engine_types.h"

/* Probes the device under the file system object dev (st_dev), with
 * sysfs at sysfs_root (normally "/sys"). Returns 1 when a block device was
 * found, 0 when none is (tmpfs, network file systems: q zeroed). */
int eng_devq_probe(const char *sysfs_root, uint64_t dev, struct eng_devq *q);
/* The same for the file at path. Returns 1, 0 or -errno (stat failed). */
int eng_devq_probe_path(const char *path, struct eng_devq *q);

#endif /* ENGINE_DEVQ_H */
