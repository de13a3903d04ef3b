/*
 * registry.c - the one table of device sinks (registry.h): a new device
 * kind is its sink/NAME.c and one line here. The test build adds its own
 * (sink/test_dev.c), which proves it by carrying full loads.
 */
#include <string.h>

#include "common.h"
#include "registry.h"

/* The kinds, each defined in its own file. */
extern const struct sink_dev_ops sink_dev_cuda;
#ifdef RL_TEST_HOOKS
extern const struct sink_dev_ops sink_dev_test;
#endif

static const struct sink_dev_ops *const devices[] = {
	&sink_dev_cuda,
#ifdef RL_TEST_HOOKS
	&sink_dev_test,         /* the test build's own (test_dev.c): host memory */
#endif
};

/* 1 when ops is a table this loader can call. */
static int dev_ok(const struct sink_dev_ops *o)
{
	return o->version >= SINK_DEV_V1 && o->size >= sizeof(struct sink_dev_ops) &&
	       o->create && o->destroy && o->set_dest && o->alloc && o->base &&
	       o->free_allocs && o->on_shard && o->read_back;
}

const struct sink_dev_ops *sink_dev_at(size_t i)
{
	for (size_t k = 0; k < CM_ARRAY_SIZE(devices); k++)
		if (dev_ok(devices[k]) && i-- == 0)
			return devices[k];
	return NULL;
}

const struct sink_dev_ops *sink_dev_find(const char *kind)
{
	const struct sink_dev_ops *o;

	for (size_t i = 0; kind && (o = sink_dev_at(i)); i++)
		if (!strcmp(o->kind, kind))
			return o;
	return NULL;
}
