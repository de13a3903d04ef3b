/*
 * cuda.c - the CUDA sink (cuda.h): engine/sink.h's table on the driver
 * API. Each piece is one cuMemcpyHtoDAsync (a strided box one
 * cuMemcpy2DAsync) on its GPU's stream; a fence is an event recorded on
 * every stream the worker copied on since its last fence, and wait
 * synchronizes those events, after which the source memory may be
 * reused. The caller's primary context is used (cuDevicePrimaryCtxRetain),
 * so device pointers of PyTorch or JAX are valid destinations.
 *
 * Threads. copy/fence/wait of one worker touch its own state and the
 * driver (thread-safe); the fence queue's sequence numbers, the event
 * pool, pending shards and the first error are under `lock`.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "cuda.h"
#include "cuda_drv.h"

struct cu_gpu {
	int ordinal;
	rlcu_device dev;
	rlcu_ctx ctx;           /* primary context, retained */
	rlcu_stream stream;
	rlcu_event *free_ev;    /* event pool: room for every event made */
	size_t nfree, cap_free, nev;
};

struct cu_slot {
	unsigned gpu;
	uint64_t base, cap;
	rlcu_dptr alloc;        /* library allocation, or 0 */
};

/* One fence: an event per GPU copied on since the worker's last fence. */
struct cu_fence {
	uint64_t ticket, seq;
	rlcu_event *ev;         /* [ngpus], NULL where none */
};

struct cu_worker {
	uint8_t *used;          /* [ngpus]: copies since the last fence */
	struct cu_fence *q;     /* fences not yet waited for, oldest first */
	size_t head, n, cap;
	uint64_t ticket;
};

struct cu_pending { size_t shard; uint64_t seq; };

struct cusink {
	const struct rlcu_api *cu;
	struct cu_gpu *gpu;
	unsigned ngpus;
	struct cu_slot *slot;
	uint32_t nslots;
	struct cu_worker *w;
	unsigned nworkers;

	pthread_mutex_t lock;   /* seq, pending, event pools, err */
	uint64_t seq;           /* fences made so far (all workers) */
	struct cu_pending *pending;
	size_t npending, cap_pending;
	void (*on_shard)(void *user, size_t shard);
	void *user;
	void *pin_base;         /* cuMemHostRegister'ed, or NULL */
	size_t pin_len;
	struct cm_err err;      /* the first asynchronous error */
};

/* ------------------------------------------------------------------ */
/* Driver calls in a GPU's context */

static int cu_fail(struct cusink *k, struct cm_err *e, int code, rlcu_result r, const char *what,
		   int ordinal)
{
	char name[96];

	return cm_err_set(e, code, "CUDA device %d: %s failed: %s", ordinal, what,
			  rlcu_name(k->cu, r, name, sizeof(name)));
}

static void cu_push(struct cusink *k, unsigned g)
{
	k->cu->CtxPushCurrent(k->gpu[g].ctx);
}

static void cu_pop(struct cusink *k)
{
	rlcu_ctx c;

	k->cu->CtxPopCurrent(&c);
}

/* An event of GPU g, from its pool or new. Under k->lock. */
static rlcu_result cu_event_get(struct cusink *k, unsigned g, rlcu_event *ev)
{
	struct cu_gpu *gp = k->gpu + g;
	rlcu_result r;

	if (gp->nfree) {
		*ev = gp->free_ev[--gp->nfree];
		return RLCU_SUCCESS;
	}
	if (cm_grow((void **)&gp->free_ev, &gp->cap_free, gp->nev + 1, sizeof(*gp->free_ev)) < 0)
		return RLCU_ERROR_OUT_OF_MEMORY;
	cu_push(k, g);
	r = k->cu->EventCreate(ev, RLCU_EVENT_DISABLE_TIMING);
	cu_pop(k);
	if (r == RLCU_SUCCESS)
		gp->nev++;
	return r;
}

/* ------------------------------------------------------------------ */
/* The ops */

static int cu_copy(void *sink, unsigned worker, const struct cm_copy *c, const uint8_t *src,
		   struct cm_err *e)
{
	struct cusink *k = sink;
	const struct cu_slot *sl;
	uint64_t span;
	rlcu_result r;

	if (c->dev >= k->nslots)
		return cm_err_set(e, RL_E_CUDA_DEVICE, "CUDA sink: copy to slot %u of %u", c->dev,
				  k->nslots);
	if (c->op != CM_OP_PLAIN) /* converted in the host window before the copy */
		return cm_err_set(e, RL_E_DTYPE, "CUDA sink: a copy with an operation (op %u): "
				  "only plain copies go to the device", c->op);
	sl = k->slot + c->dev;
	span = (uint64_t)c->len * (c->count ? c->count : 1);
	if (!sl->base && sl->cap != UINT64_MAX)
		return cm_err_set(e, RL_E_STATE, "CUDA sink: device %u has no destination", c->dev);
	if (sl->cap != UINT64_MAX && (c->dst > sl->cap || span > sl->cap - c->dst))
		return cm_err_set(e, RL_E_CUDA_MEMORY,
				  "CUDA sink: copy of %llu bytes at %llu past device %u's %llu bytes",
				  (unsigned long long)span, (unsigned long long)c->dst, c->dev,
				  (unsigned long long)sl->cap);
	if (!c->len)
		return 0;
	cu_push(k, sl->gpu);
	if (c->count <= 1) {
		r = k->cu->MemcpyHtoDAsync(sl->base + c->dst, src + c->src, c->len,
					   k->gpu[sl->gpu].stream);
	} else {
		struct rlcu_memcpy2d m = { .srcMemoryType = RLCU_MEMORYTYPE_HOST,
					   .srcHost = src + c->src, .srcPitch = c->src_stride,
					   .dstMemoryType = RLCU_MEMORYTYPE_DEVICE,
					   .dstDevice = sl->base + c->dst, .dstPitch = c->len,
					   .WidthInBytes = c->len, .Height = c->count };

		r = k->cu->Memcpy2DAsync(&m, k->gpu[sl->gpu].stream);
	}
	cu_pop(k);
	if (r != RLCU_SUCCESS)
		return cu_fail(k, e, RL_E_CUDA, r, "an asynchronous copy to the device",
			       k->gpu[sl->gpu].ordinal);
	k->w[worker].used[sl->gpu] = 1;
	return 0;
}

static void cu_unpin(void *sink, void *base, size_t len)
{
	struct cusink *k = sink;

	if (!k->pin_base || (base && k->pin_base != base))
		return; /* base NULL: whatever is pinned */
	cu_push(k, 0);
	k->cu->MemHostUnregister(k->pin_base);
	cu_pop(k);
	k->pin_base = NULL;
	k->pin_len = 0;
}

static int cu_pin(void *sink, void *base, size_t len, struct cm_err *e)
{
	struct cusink *k = sink;
	rlcu_result r;

	if (k->pin_base == base && k->pin_len == len)
		return 0; /* once per pool: a long-lived loader reuses it */
	if (k->pin_base) /* another pool now: the loader unpins before freeing */
		cu_unpin(k, k->pin_base, k->pin_len);
	cu_push(k, 0);
	r = k->cu->MemHostRegister(base, len, RLCU_MEMHOSTREGISTER_PORTABLE);
	cu_pop(k);
	if (r == RLCU_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
		return 0; /* the caller's pinned pool (torch's): theirs to unpin */
	if (r != RLCU_SUCCESS)
		return cu_fail(k, e, RL_E_CUDA, r, "cuMemHostRegister of the window pool",
			       k->gpu[0].ordinal);
	k->pin_base = base;
	k->pin_len = len;
	return 0;
}

/* The next fence of worker w, its events recorded. Under k->lock. */
static int cu_record(struct cusink *k, struct cu_worker *w, struct cu_fence *f, struct cm_err *e)
{
	for (unsigned g = 0; g < k->ngpus; g++) {
		rlcu_result r;

		f->ev[g] = NULL;
		if (!w->used[g])
			continue;
		r = cu_event_get(k, g, &f->ev[g]);
		if (r == RLCU_SUCCESS) {
			cu_push(k, g);
			r = k->cu->EventRecord(f->ev[g], k->gpu[g].stream);
			cu_pop(k);
		}
		if (r != RLCU_SUCCESS) {
			/* this GPU's event and those recorded before it go back
			 * to their pools (room for every event made) */
			for (unsigned i = 0; i <= g; i++)
				if (f->ev[i])
					k->gpu[i].free_ev[k->gpu[i].nfree++] = f->ev[i];
			f->ev[g] = NULL;
			return cu_fail(k, e, RL_E_CUDA, r, "cuEventRecord", k->gpu[g].ordinal);
		}
		w->used[g] = 0;
	}
	return 0;
}

static int cu_fence(void *sink, unsigned worker, uint64_t *ticket, struct cm_err *e)
{
	struct cusink *k = sink;
	struct cu_worker *w = k->w + worker;
	struct cu_fence *f;
	int ret;

	pthread_mutex_lock(&k->lock);
	if (w->head + w->n == w->cap && w->head) { /* slide down before growing */
		memmove(w->q, w->q + w->head, w->n * sizeof(*w->q));
		w->head = 0;
	}
	if (cm_grow((void **)&w->q, &w->cap, w->head + w->n + 1, sizeof(*w->q)) < 0) {
		pthread_mutex_unlock(&k->lock);
		return cm_err_set(e, -ENOMEM, "out of memory");
	}
	f = w->q + w->head + w->n;
	f->ev = cm_calloc(k->ngpus, sizeof(*f->ev));
	ret = f->ev ? cu_record(k, w, f, e) : cm_err_set(e, -ENOMEM, "out of memory");
	if (ret == 0) {
		f->ticket = ++w->ticket;
		f->seq = k->seq++;
		w->n++;
		*ticket = f->ticket;
	} else {
		cm_free(f->ev);
	}
	pthread_mutex_unlock(&k->lock);
	return ret;
}

/* Every fence with seq below this has completed. Under k->lock. */
static uint64_t cu_done_below(const struct cusink *k)
{
	uint64_t d = k->seq;

	for (unsigned i = 0; i < k->nworkers; i++)
		if (k->w[i].n)
			d = CM_MIN(d, k->w[i].q[k->w[i].head].seq);
	return d;
}

/* Reports the shards whose copies have all finished (outside the lock:
 * the callback is the caller's). */
static void cu_report(struct cusink *k, int all)
{
	for (;;) {
		size_t shard = 0;
		int found = 0;

		pthread_mutex_lock(&k->lock);
		if (k->npending && (all || k->pending[0].seq < cu_done_below(k))) {
			shard = k->pending[0].shard;
			memmove(k->pending, k->pending + 1, --k->npending * sizeof(*k->pending));
			found = 1;
		}
		pthread_mutex_unlock(&k->lock);
		if (!found)
			return;
		if (k->on_shard)
			k->on_shard(k->user, shard);
	}
}

/* Synchronizes and recycles the oldest fence of w; 0 or the error. */
static int cu_sync_oldest(struct cusink *k, struct cu_worker *w, struct cm_err *e)
{
	struct cu_fence f = w->q[w->head];
	int ret = 0;

	for (unsigned g = 0; g < k->ngpus; g++) {
		rlcu_result r;

		if (!f.ev[g])
			continue;
		cu_push(k, g);
		r = k->cu->EventSynchronize(f.ev[g]);
		cu_pop(k);
		if (r != RLCU_SUCCESS && ret == 0)
			ret = cu_fail(k, e, RL_E_CUDA, r, "a copy to the device",
				      k->gpu[g].ordinal);
	}
	pthread_mutex_lock(&k->lock);
	for (unsigned g = 0; g < k->ngpus; g++)
		if (f.ev[g]) /* room: the pool held it before */
			k->gpu[g].free_ev[k->gpu[g].nfree++] = f.ev[g];
	w->head++;
	w->n--;
	pthread_mutex_unlock(&k->lock);
	cm_free(f.ev);
	return ret;
}

static int cu_wait(void *sink, unsigned worker, uint64_t ticket, struct cm_err *e)
{
	struct cusink *k = sink;
	struct cu_worker *w = k->w + worker;
	int ret = 0;

	while (w->n && w->q[w->head].ticket <= ticket) {
		int r = cu_sync_oldest(k, w, e);

		if (r < 0 && ret == 0)
			ret = r;
	}
	if (ret == 0)
		cu_report(k, 0);
	return ret;
}

static uint64_t cu_capacity(void *sink, uint32_t dev)
{
	struct cusink *k = sink;

	return dev < k->nslots ? k->slot[dev].cap : 0;
}

static void cu_shard_done(void *sink, size_t shard)
{
	struct cusink *k = sink;

	pthread_mutex_lock(&k->lock);
	if (cm_grow((void **)&k->pending, &k->cap_pending, k->npending + 1, sizeof(*k->pending)) == 0)
		k->pending[k->npending++] = (struct cu_pending){ shard, k->seq };
	else
		cm_err_set(&k->err, -ENOMEM, "out of memory");
	pthread_mutex_unlock(&k->lock);
}

/* Every fence waited for, every stream drained; 0 or the first error. */
static int cu_drain(struct cusink *k, struct cm_err *e)
{
	int ret = 0;

	for (unsigned i = 0; i < k->nworkers; i++) {
		while (k->w[i].n) {
			int r = cu_sync_oldest(k, k->w + i, e);

			if (r < 0 && ret == 0)
				ret = r;
		}
		if (k->w[i].used) /* NULL in a sink whose set-up failed */
			memset(k->w[i].used, 0, k->ngpus);
	}
	for (unsigned g = 0; g < k->ngpus; g++) {
		rlcu_result r;

		cu_push(k, g);
		r = k->cu->StreamSynchronize(k->gpu[g].stream);
		cu_pop(k);
		if (r != RLCU_SUCCESS && ret == 0)
			ret = cu_fail(k, e, RL_E_CUDA, r, "a copy to the device", k->gpu[g].ordinal);
	}
	return ret;
}

static int cu_finish(void *sink, int ok, struct cm_err *e)
{
	struct cusink *k = sink;
	int ret = cu_drain(k, e);

	if (ret == 0 && k->err.code) {
		ret = k->err.code;
		*e = k->err;
	}
	if (ok && ret == 0)
		cu_report(k, 1);
	pthread_mutex_lock(&k->lock);
	k->npending = 0; /* a failed run reports no further shard */
	cm_err_clear(&k->err);
	pthread_mutex_unlock(&k->lock);
	return ret;
}

static const struct eng_sink_ops cusink_ops = {
	.version = ENG_SINK_V1,
	.size = sizeof(struct eng_sink_ops),
	.name = "cuda",
	.copy = cu_copy,
	.pin = cu_pin,
	.unpin = cu_unpin,
	.fence = cu_fence,
	.wait = cu_wait,
	.capacity = cu_capacity,
	.shard_done = cu_shard_done,
	.finish = cu_finish,
};

/* ------------------------------------------------------------------ */
/* Set-up and tear-down */

/* GPU index of ordinal, adding it (context and stream) when new. */
static int cu_gpu_of(struct cusink *k, int ordinal, int count, struct cm_err *e)
{
	struct cu_gpu *g;
	rlcu_result r;

	for (unsigned i = 0; i < k->ngpus; i++)
		if (k->gpu[i].ordinal == ordinal)
			return (int)i;
	if (ordinal < 0 || ordinal >= count)
		return cm_err_set(e, RL_E_CUDA_DEVICE, "no CUDA device %d (%d device%s)", ordinal,
				  count, count == 1 ? "" : "s");
	g = k->gpu + k->ngpus;
	memset(g, 0, sizeof(*g));
	g->ordinal = ordinal;
	r = k->cu->DeviceGet(&g->dev, ordinal);
	if (r != RLCU_SUCCESS)
		return cu_fail(k, e, RL_E_CUDA_DEVICE, r, "cuDeviceGet", ordinal);
	r = k->cu->DevicePrimaryCtxRetain(&g->ctx, g->dev);
	if (r != RLCU_SUCCESS)
		return cu_fail(k, e, RL_E_CUDA, r, "cuDevicePrimaryCtxRetain", ordinal);
	k->ngpus++; /* from here on destroy releases it */
	k->cu->CtxPushCurrent(g->ctx);
	r = k->cu->StreamCreate(&g->stream, RLCU_STREAM_NON_BLOCKING);
	cu_pop(k);
	if (r != RLCU_SUCCESS)
		return cu_fail(k, e, RL_E_CUDA, r, "cuStreamCreate", ordinal);
	return (int)(k->ngpus - 1);
}

static int cu_setup(struct cusink *k, const int *ordinal, uint32_t nslots, unsigned workers,
		    struct cm_err *e)
{
	int count = 0, g;
	rlcu_result r;

	k->cu = rlcu_load(e);
	if (!k->cu)
		return e->code;
	r = k->cu->DeviceGetCount(&count);
	if (r != RLCU_SUCCESS)
		return cu_fail(k, e, RL_E_CUDA_DEVICE, r, "cuDeviceGetCount", -1);
	k->gpu = cm_calloc(nslots, sizeof(*k->gpu));
	k->slot = cm_calloc(nslots, sizeof(*k->slot));
	k->w = cm_calloc(workers, sizeof(*k->w));
	if (!k->gpu || !k->slot || !k->w)
		return cm_err_set(e, -ENOMEM, "out of memory");
	k->nworkers = workers;
	k->nslots = nslots;
	for (uint32_t i = 0; i < nslots; i++) {
		g = cu_gpu_of(k, ordinal[i], count, e);
		if (g < 0)
			return g;
		k->slot[i].gpu = (unsigned)g;
	}
	for (unsigned i = 0; i < workers; i++)
		if (!(k->w[i].used = cm_calloc(k->ngpus, 1)))
			return cm_err_set(e, -ENOMEM, "out of memory");
	return 0;
}

int cusink_create(const int *ordinal, uint32_t nslots, unsigned workers, struct eng_sink *out,
		  struct cm_err *e)
{
	struct cusink *k;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!nslots || !workers)
		return cm_err_set(e, -EINVAL, "CUDA sink: no devices or no workers");
	k = cm_calloc(1, sizeof(*k));
	if (!k)
		return cm_err_set(e, -ENOMEM, "out of memory");
	pthread_mutex_init(&k->lock, NULL);
	out->ops = &cusink_ops;
	out->state = k;
	out->ndevs = nslots;
	ret = cu_setup(k, ordinal, nslots, workers, e);
	if (ret < 0)
		cusink_destroy(out);
	return ret;
}

void cusink_destroy(struct eng_sink *s)
{
	struct cusink *k = s ? s->state : NULL;
	struct cm_err e;

	if (!k)
		return;
	if (k->cu && k->ngpus) {
		cu_drain(k, &e);
		cusink_free_allocs(s);
		if (k->pin_base)
			cu_unpin(k, k->pin_base, k->pin_len);
	}
	for (unsigned g = 0; g < k->ngpus; g++) {
		cu_push(k, g);
		for (size_t i = 0; i < k->gpu[g].nfree; i++)
			k->cu->EventDestroy(k->gpu[g].free_ev[i]);
		if (k->gpu[g].stream)
			k->cu->StreamDestroy(k->gpu[g].stream);
		cu_pop(k);
		k->cu->DevicePrimaryCtxRelease(k->gpu[g].dev);
		cm_free(k->gpu[g].free_ev);
	}
	for (unsigned i = 0; k->w && i < k->nworkers; i++) {
		cm_free(k->w[i].used);
		cm_free(k->w[i].q);
	}
	cm_free(k->w);
	cm_free(k->gpu);
	cm_free(k->slot);
	cm_free(k->pending);
	pthread_mutex_destroy(&k->lock);
	cm_free(k);
	memset(s, 0, sizeof(*s));
}

void cusink_set_dest(struct eng_sink *s, uint32_t slot, uint64_t base, uint64_t cap)
{
	struct cusink *k = s->state;

	if (slot < k->nslots) {
		k->slot[slot].base = base;
		k->slot[slot].cap = cap;
	}
}

int cusink_alloc(struct eng_sink *s, uint32_t slot, uint64_t bytes, struct cm_err *e)
{
	struct cusink *k = s->state;
	struct cu_slot *sl = k->slot + slot;
	rlcu_result r;

	if (slot >= k->nslots || sl->alloc)
		return cm_err_set(e, RL_E_STATE, "CUDA sink: device %u allocated already", slot);
	cu_push(k, sl->gpu);
	r = k->cu->MemAlloc(&sl->alloc, bytes ? bytes : 1);
	cu_pop(k);
	if (r != RLCU_SUCCESS) {
		sl->alloc = 0;
		return cu_fail(k, e, r == RLCU_ERROR_OUT_OF_MEMORY ? RL_E_CUDA_MEMORY : RL_E_CUDA, r,
			       "cuMemAlloc", k->gpu[sl->gpu].ordinal);
	}
	sl->base = sl->alloc;
	sl->cap = bytes;
	return 0;
}

uint64_t cusink_base(const struct eng_sink *s, uint32_t slot)
{
	const struct cusink *k = s->state;

	return slot < k->nslots ? k->slot[slot].base : 0;
}

void cusink_free_allocs(struct eng_sink *s)
{
	struct cusink *k = s->state;

	for (uint32_t i = 0; i < k->nslots; i++) {
		struct cu_slot *sl = k->slot + i;

		if (!sl->alloc)
			continue;
		cu_push(k, sl->gpu);
		k->cu->MemFree(sl->alloc);
		cu_pop(k);
		sl->alloc = sl->base = 0;
		sl->cap = 0;
	}
}

void cusink_on_shard(struct eng_sink *s, void (*fn)(void *user, size_t shard), void *user)
{
	struct cusink *k = s->state;

	k->on_shard = fn;
	k->user = user;
}

int cusink_read_back(struct eng_sink *s, uint32_t slot, uint64_t off, void *dst, size_t len,
		     struct cm_err *e)
{
	struct cusink *k = s->state;
	const struct cu_slot *sl = k->slot + slot;
	rlcu_result r;

	if (slot >= k->nslots || (sl->cap != UINT64_MAX && (off > sl->cap || len > sl->cap - off)))
		return cm_err_set(e, -EINVAL, "CUDA sink: read back past device %u", slot);
	cu_push(k, sl->gpu);
	r = k->cu->StreamSynchronize(k->gpu[sl->gpu].stream);
	if (r == RLCU_SUCCESS)
		r = k->cu->MemcpyDtoH(dst, sl->base + off, len);
	cu_pop(k);
	if (r != RLCU_SUCCESS)
		return cu_fail(k, e, RL_E_CUDA, r, "cuMemcpyDtoH", k->gpu[sl->gpu].ordinal);
	return 0;
}
