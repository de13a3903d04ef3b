/*
 * registry.h - the device sinks by kind (sink/registry.c): a table of
 * struct sink_dev_ops (sink/dev.h), one line per kind.
 */
#ifndef SINK_REGISTRY_H
#define SINK_REGISTRY_H

#include <stddef.h>

#include "dev.h"

/* The kind named kind (case-sensitive), or NULL. */
const struct sink_dev_ops *sink_dev_find(const char *kind);
/* The i-th kind of the registry (0 ..), NULL past the last. */
const struct sink_dev_ops *sink_dev_at(size_t i);

#endif /* SINK_REGISTRY_H */
