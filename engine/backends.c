/*
 * backends.c - the engine's one table of backends, in fallback order: it
 * alone gives their ids, names, order, bounds and capabilities. A new
 * backend is a be_*.c that fills a struct be_ops and one line here.
 */
#include "eng_int.h"
#include "util.h"

static const struct be_ops *const backends[] = {
	&eng_uring_ops,
	&eng_aio_ops,
	&eng_pread_ops,
#ifdef RL_TEST_HOOKS
	&eng_test_ops,          /* the test build's own (be_test.c): never auto */
#endif
};

const struct be_ops *eng_backend_ops(int id)
{
	for (size_t i = 0; i < CM_ARRAY_SIZE(backends); i++)
		if (backends[i]->id == id)
			return backends[i];
	return NULL;
}

const struct be_ops *eng_backend_at(size_t i)
{
	return i < CM_ARRAY_SIZE(backends) ? backends[i] : NULL;
}

int eng_backend_id_at(size_t i)
{
	return i < CM_ARRAY_SIZE(backends) ? backends[i]->id : -1;
}

int eng_backend_max_id(void)
{
	int max = ENG_AUTO;

	for (size_t i = 0; i < CM_ARRAY_SIZE(backends); i++)
		max = CM_MAX(max, backends[i]->id);
	return max;
}

const char *eng_backend_name(int id)
{
	const struct be_ops *ops = eng_backend_ops(id);

	return id == ENG_AUTO ? "auto" : ops ? ops->name : "?";
}

unsigned eng_backend_caps(int id)
{
	const struct be_ops *ops = eng_backend_ops(id);

	return ops ? ops->caps : 0;
}
