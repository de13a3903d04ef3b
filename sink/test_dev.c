/*
 * test_dev.c - a device kind of the test build only (-DRL_TEST_HOOKS),
 * "testdev": device memory is host memory from the allocator, ordinals
 * 0 .. TD_DEVICES-1. Copies are asynchronous as a DMA device's are: copy
 * only queues them (the source is read later), wait and finish run them,
 * so a window reused before its fence completed loads wrong bytes. It
 * proves that a device is this one file and one line of registry.c:
 * tests/test_device_registry.c carries full loads onto it.
 *
 * Checks a real device would make, as errors: every copy comes from the
 * pinned pool, fits its destination, and is plain (conversions happen in
 * the window). RL_TESTDEV_FAIL_AT=n fails the n-th copy when it runs (an
 * asynchronous error, reported by the next wait or finish).
 */
#ifdef RL_TEST_HOOKS
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "dev.h"

#define TD_DEVICES 4
#define TD_ALIGN 256

struct td_job {
	const uint8_t *src;
	struct cm_copy c;
};

struct td_slot {
	uint64_t base, cap;
	uint8_t *alloc;
};

struct td {
	pthread_mutex_t lock;   /* everything below */
	struct td_slot *slot;
	uint32_t nslots;
	const uint8_t *pool;    /* pinned: copies come from here */
	size_t pool_len;
	struct td_job *q;       /* queued copies: q[head .. n) */
	size_t head, n, cap;
	uint64_t queued, done;  /* copies ever queued; run (or dropped) */
	struct { size_t shard; uint64_t seq; } *pend; /* shards waiting for copies */
	size_t npend, cap_pend;
	long fail_at, copies;   /* RL_TESTDEV_FAIL_AT; copies run */
	struct cm_err err;      /* the first asynchronous error */
	void (*on_shard)(void *user, size_t shard);
	void *user;
};

/* Runs one queued copy: the strided rule of struct cm_copy. */
static void td_run(struct td *t, const struct td_job *j)
{
	const struct td_slot *sl = t->slot + j->c.dev;
	uint8_t *dst = (uint8_t *)(uintptr_t)(sl->base + j->c.dst);
	uint32_t count = j->c.count ? j->c.count : 1;

	if (t->err.code)
		return;
	if (++t->copies == t->fail_at) {
		cm_err_set(&t->err, RL_E_INVALID_ARG, "testdev: copy %ld failed (RL_TESTDEV_FAIL_AT)",
			   t->copies);
		return;
	}
	for (uint32_t k = 0; k < count; k++)
		memcpy(dst + (size_t)k * j->c.len, j->src + (size_t)k * j->c.src_stride, j->c.len);
}

/* Runs the copies queued before seq `upto`, reports the shards they
 * finish. Under lock. */
static void td_drain(struct td *t, uint64_t upto)
{
	size_t keep = 0;

	for (; t->head < t->n && t->done < upto; t->head++, t->done++)
		td_run(t, t->q + t->head);
	if (t->head == t->n)
		t->head = t->n = 0;
	for (size_t i = 0; i < t->npend; i++) {
		if (t->pend[i].seq > t->done)
			t->pend[keep++] = t->pend[i];
		else if (!t->err.code && t->on_shard)
			t->on_shard(t->user, t->pend[i].shard);
	}
	t->npend = keep;
}

static int td_copy(void *sink, unsigned worker, const struct cm_copy *c, const uint8_t *src,
		   struct cm_err *e)
{
	struct td *t = sink;
	uint64_t span = (uint64_t)c->len * (c->count ? c->count : 1);
	const uint8_t *p = src + c->src;
	int ret = 0;

	(void)worker;
	if (c->dev >= t->nslots || c->op != CM_OP_PLAIN)
		return cm_err_set(e, RL_E_STATE, "testdev: copy to slot %u of %u, op %u", c->dev,
				  t->nslots, c->op);
	if (t->slot[c->dev].cap != UINT64_MAX &&
	    (c->dst > t->slot[c->dev].cap || span > t->slot[c->dev].cap - c->dst))
		return cm_err_set(e, RL_E_STAGING, "testdev: copy past device %u", c->dev);
	if (!c->len)
		return 0;
	if (p < t->pool || p + span > t->pool + t->pool_len)
		return cm_err_set(e, RL_E_STATE, "testdev: a copy from memory not pinned");
	pthread_mutex_lock(&t->lock);
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		struct td_job *q = cm_reallocarray(t->q, cap, sizeof(*q));

		if (q) {
			t->q = q;
			t->cap = cap;
		}
	}
	if (t->n < t->cap) {
		t->q[t->n++] = (struct td_job){ p, *c };
		t->queued++;
	} else {
		ret = cm_err_set(e, -ENOMEM, "out of memory");
	}
	pthread_mutex_unlock(&t->lock);
	return ret;
}

static int td_pin(void *sink, void *base, size_t len, struct cm_err *e)
{
	struct td *t = sink;

	(void)e;
	t->pool = base;
	t->pool_len = len;
	return 0;
}

static void td_unpin(void *sink, void *base, size_t len)
{
	struct td *t = sink;

	(void)base;
	(void)len;
	t->pool = NULL;
	t->pool_len = 0;
}

static int td_fence(void *sink, unsigned worker, uint64_t *ticket, struct cm_err *e)
{
	struct td *t = sink;

	(void)worker;
	(void)e;
	pthread_mutex_lock(&t->lock);
	*ticket = t->queued;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

/* The first asynchronous error into e. Under lock. */
static int td_error(struct td *t, struct cm_err *e)
{
	if (!t->err.code)
		return 0;
	*e = t->err;
	return t->err.code;
}

static int td_wait(void *sink, unsigned worker, uint64_t ticket, struct cm_err *e)
{
	struct td *t = sink;
	int ret;

	(void)worker;
	pthread_mutex_lock(&t->lock);
	td_drain(t, ticket);
	ret = td_error(t, e);
	pthread_mutex_unlock(&t->lock);
	return ret;
}

static uint64_t td_capacity(void *sink, uint32_t dev)
{
	struct td *t = sink;

	return dev < t->nslots ? t->slot[dev].cap : 0;
}

static void td_shard_done(void *sink, size_t shard)
{
	struct td *t = sink;

	pthread_mutex_lock(&t->lock);
	if (t->npend == t->cap_pend) {
		size_t cap = t->cap_pend ? 2 * t->cap_pend : 64;
		void *p = cm_reallocarray(t->pend, cap, sizeof(*t->pend));

		if (!p && !t->err.code)
			cm_err_set(&t->err, -ENOMEM, "out of memory");
		if (p) {
			t->pend = p;
			t->cap_pend = cap;
		}
	}
	if (t->npend < t->cap_pend) {
		t->pend[t->npend].shard = shard;
		t->pend[t->npend++].seq = t->queued;
	}
	pthread_mutex_unlock(&t->lock);
}

static int td_finish(void *sink, int ok, struct cm_err *e)
{
	struct td *t = sink;
	int ret;

	pthread_mutex_lock(&t->lock);
	if (ok) {
		td_drain(t, UINT64_MAX);
	} else { /* abandoned: never run */
		t->done += t->n - t->head;
		t->head = t->n = 0;
	}
	ret = td_error(t, e);
	t->npend = 0;
	cm_err_clear(&t->err);
	pthread_mutex_unlock(&t->lock);
	return ret;
}

static const struct eng_sink_ops td_ops = {
	.version = ENG_SINK_V1,
	.size = sizeof(struct eng_sink_ops),
	.name = "testdev",
	.copy = td_copy,
	.pin = td_pin,
	.unpin = td_unpin,
	.fence = td_fence,
	.wait = td_wait,
	.capacity = td_capacity,
	.shard_done = td_shard_done,
	.finish = td_finish,
};

/* ------------------------------------------------------------------ */
/* The registry's ops */

static void td_free_allocs(struct eng_sink *s)
{
	struct td *t = s->state;

	for (uint32_t i = 0; i < t->nslots; i++) {
		if (!t->slot[i].alloc)
			continue;
		cm_free(t->slot[i].alloc);
		t->slot[i] = (struct td_slot){ 0 };
	}
}

static void td_destroy(struct eng_sink *s)
{
	struct td *t = s ? s->state : NULL;
	struct cm_err e;

	if (!t)
		return;
	td_finish(t, 0, &e);
	td_free_allocs(s);
	cm_free(t->q);
	cm_free(t->pend);
	cm_free(t->slot);
	pthread_mutex_destroy(&t->lock);
	cm_free(t);
	memset(s, 0, sizeof(*s));
}

static int td_create(const int *ordinal, uint32_t nslots, unsigned workers, struct eng_sink *out,
		     struct cm_err *e)
{
	struct td *t;
	const char *f = getenv("RL_TESTDEV_FAIL_AT");

	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < nslots; i++)
		if (ordinal[i] < 0 || ordinal[i] >= TD_DEVICES)
			return cm_err_set(e, RL_E_INVALID_ARG, "no testdev device %d (%d devices)",
					  ordinal[i], TD_DEVICES);
	if (!nslots || !workers)
		return cm_err_set(e, -EINVAL, "testdev: no devices or no workers");
	t = cm_calloc(1, sizeof(*t));
	if (!t || !(t->slot = cm_calloc(nslots, sizeof(*t->slot)))) {
		cm_free(t);
		return cm_err_set(e, -ENOMEM, "out of memory");
	}
	pthread_mutex_init(&t->lock, NULL);
	t->nslots = nslots;
	t->fail_at = f ? atol(f) : 0;
	out->ops = &td_ops;
	out->state = t;
	out->ndevs = nslots;
	return 0;
}

static void td_set_dest(struct eng_sink *s, uint32_t slot, uint64_t base, uint64_t cap)
{
	struct td *t = s->state;

	if (slot < t->nslots && !t->slot[slot].alloc)
		t->slot[slot] = (struct td_slot){ base, cap, NULL };
}

static int td_alloc(struct eng_sink *s, uint32_t slot, uint64_t bytes, struct cm_err *e)
{
	struct td *t = s->state;
	uint8_t *p;

	if (slot >= t->nslots || t->slot[slot].alloc)
		return cm_err_set(e, RL_E_STATE, "testdev: device %u allocated already", slot);
	/* 256-aligned as cuMemAlloc's, which the loader's layout assumes */
	if (bytes > SIZE_MAX - TD_ALIGN || !(p = cm_calloc(1, (size_t)bytes + TD_ALIGN)))
		return cm_err_set(e, RL_E_STAGING, "testdev: no %llu bytes",
				  (unsigned long long)bytes);
	t->slot[slot] = (struct td_slot){ cm_align_up((uint64_t)(uintptr_t)p, TD_ALIGN), bytes, p };
	return 0;
}

static uint64_t td_base(const struct eng_sink *s, uint32_t slot)
{
	const struct td *t = s->state;

	return slot < t->nslots ? t->slot[slot].base : 0;
}

static void td_on_shard(struct eng_sink *s, void (*fn)(void *user, size_t shard), void *user)
{
	struct td *t = s->state;

	t->on_shard = fn;
	t->user = user;
}

static int td_read_back(struct eng_sink *s, uint32_t slot, uint64_t off, void *dst, size_t len,
			struct cm_err *e)
{
	struct td *t = s->state;
	const struct td_slot *sl = t->slot + slot;

	if (slot >= t->nslots || (sl->cap != UINT64_MAX && (off > sl->cap || len > sl->cap - off)))
		return cm_err_set(e, -EINVAL, "testdev: read back past device %u", slot);
	pthread_mutex_lock(&t->lock);
	td_drain(t, UINT64_MAX);
	pthread_mutex_unlock(&t->lock);
	memcpy(dst, (const uint8_t *)(uintptr_t)(sl->base + off), len);
	return 0;
}

const struct sink_dev_ops sink_dev_test = {
	.version = SINK_DEV_V1,
	.size = sizeof(struct sink_dev_ops),
	.kind = "testdev",
	.what = "testdev device",
	.err_device = RL_E_INVALID_ARG,
	.err_memory = RL_E_STAGING,
	.create = td_create,
	.destroy = td_destroy,
	.set_dest = td_set_dest,
	.alloc = td_alloc,
	.base = td_base,
	.free_allocs = td_free_allocs,
	.on_shard = td_on_shard,
	.read_back = td_read_back,
};
#endif /* RL_TEST_HOOKS */
