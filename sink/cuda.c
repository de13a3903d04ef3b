/*
 * cuda.c - the CUDA sink (cuda.h): engine/sink.h's table on the driver
 * API. Each piece is one cuMemcpyHtoDAsync (a strided box one
 * cuMemcpy2DAsync) on its GPU's stream; a fence is an event recorded on
 * every stream the worker copied on since its last fence, and wait
 * synchronizes those events, after which the source memory may be
 * reused. The caller's primary context is used (cuDevicePrimaryCtxRetain),
 * so device pointers of PyTorch or JAX are valid destinations; a load
 * is ordered after the caller's stream and before its later work
 * (cusink_begin, finish). A pool the driver refuses to register is
 * copied through cuMemHostAlloc memory, or synchronously (cu_pin).
 *
 * Threads. copy/fence/wait of one worker touch its own state and the
 * driver (thread-safe); the fence queue's sequence numbers, the event
 * pool, pending shards and the first error are under `lock`.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda.h"
#include "cuda_drv.h"
#include "dev.h"

struct cu_gpu {
	int ordinal;
	rlcu_device dev;
	rlcu_ctx ctx;           /* primary context, retained */
	rlcu_stream stream;
	uint32_t max_pitch;     /* CU_DEVICE_ATTRIBUTE_MAX_PITCH (0: unknown) */
	rlcu_stream caller;     /* the caller's stream (torch's), if has_caller */
	int has_caller;
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
	/* Registration refused: copies from the pool go through bounce (the
	 * driver's page-locked memory, pool_len bytes) or, without it, are
	 * synchronous from pageable memory; note says so. */
	const uint8_t *pool_base;
	size_t pool_len;
	uint8_t *bounce;
	int fallback;           /* CUSINK_FALLBACK_* */
	char note[200];
	struct cm_err err;      /* the first asynchronous error */
};

/* ------------------------------------------------------------------ */
/* Driver calls in a GPU's context */

/* Codes after which a context is unusable: cuda.h says of each that the
 * process must be terminated and relaunched (ASSERT: the context must be
 * destroyed, which for a primary context shared with torch is the same):
 * CONTAINED (226), ILLEGAL_ADDRESS (700), LAUNCH_TIMEOUT (702), ASSERT
 * (710), HARDWARE_STACK_ERROR (714), ILLEGAL_INSTRUCTION,
 * MISALIGNED_ADDRESS, INVALID_ADDRESS_SPACE, INVALID_PC, LAUNCH_FAILED
 * (719), TENSOR_MEMORY_LEAK (721), MPS_CLIENT_TERMINATED (810),
 * EXTERNAL_DEVICE (911). */
static int cu_sticky(rlcu_result r)
{
	return r == 226 || r == 700 || r == 702 || r == 710 || (r >= 714 && r <= 719) ||
	       r == 721 || r == 810 || r == 911;
}

static int cu_fail(struct cusink *k, struct cm_err *e, int code, rlcu_result r, const char *what,
		   int ordinal)
{
	char name[96];

	rlcu_name(k->cu, r, name, sizeof(name));
	if (cu_sticky(r))
		return cm_err_set(e, RL_E_CUDA_STICKY, "CUDA device %d: %s failed: %s, a sticky "
				  "error: the GPU's context is unusable; the process must restart",
				  ordinal, what, name);
	return cm_err_set(e, code, "CUDA device %d: %s failed: %s", ordinal, what, name);
}

/* Pushes GPU g's context. When the push fails nothing is to be popped:
 * a pop would take the caller's context (torch's) off its thread. */
static rlcu_result cu_push(struct cusink *k, unsigned g)
{
	return k->cu->CtxPushCurrent(k->gpu[g].ctx);
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
	r = cu_push(k, g);
	if (r != RLCU_SUCCESS)
		return r;
	r = k->cu->EventCreate(ev, RLCU_EVENT_DISABLE_TIMING);
	cu_pop(k);
	if (r == RLCU_SUCCESS)
		gp->nev++;
	return r;
}

/* A failure of GPU g's queued work: a sticky one when the context says
 * so (cuCtxSynchronize), whatever code the stream or event reported. */
static int cu_fail_work(struct cusink *k, struct cm_err *e, rlcu_result r, const char *what,
			unsigned g)
{
	rlcu_result rs = r;

	if (!cu_sticky(r) && cu_push(k, g) == RLCU_SUCCESS) {
		rs = k->cu->CtxSynchronize();
		cu_pop(k);
	}
	return cu_fail(k, e, RL_E_CUDA, cu_sticky(rs) ? rs : r, what, k->gpu[g].ordinal);
}

/* A strided box as rows, one copy each: its pitch is over the GPU's
 * CU_DEVICE_ATTRIBUTE_MAX_PITCH, which cuMemcpy2DAsync refuses. */
static rlcu_result cu_copy_rows(struct cusink *k, const struct cm_copy *c, rlcu_dptr dst,
				const uint8_t *src, rlcu_stream s)
{
	rlcu_result r = RLCU_SUCCESS;

	for (uint32_t i = 0; i < c->count && r == RLCU_SUCCESS; i++)
		r = k->cu->MemcpyHtoDAsync(dst + (uint64_t)i * c->len,
					   src + (size_t)i * c->src_stride, c->len, s);
	return r;
}

/* ------------------------------------------------------------------ */
/* The ops */

/* Where a copy of the pool's bytes at p (span bytes from p) reads from:
 * p, or its twin in the bounce memory, filled now. The twin of a window
 * is free when the window is: the window is refilled only after the
 * fence behind its copies completed. */
static const uint8_t *cu_source(struct cusink *k, const struct cm_copy *c, const uint8_t *p,
				uint64_t span)
{
	size_t off;

	if (!k->bounce || p < k->pool_base || (size_t)(p - k->pool_base) >= k->pool_len)
		return p;
	off = (size_t)(p - k->pool_base);
	if (c->count > 1) /* the rows and the gaps between them */
		span = (uint64_t)(c->count - 1) * c->src_stride + c->len;
	memcpy(k->bounce + off, p, (size_t)CM_MIN(span, k->pool_len - off));
	return k->bounce + off;
}

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
	src = cu_source(k, c, src + c->src, span);
	r = cu_push(k, sl->gpu);
	if (r != RLCU_SUCCESS)
		return cu_fail(k, e, RL_E_CUDA, r, "cuCtxPushCurrent", k->gpu[sl->gpu].ordinal);
	if (c->count <= 1) {
		r = k->cu->MemcpyHtoDAsync(sl->base + c->dst, src, c->len, k->gpu[sl->gpu].stream);
	} else {
		struct rlcu_memcpy2d m = { .srcMemoryType = RLCU_MEMORYTYPE_HOST,
					   .srcHost = src, .srcPitch = c->src_stride,
					   .dstMemoryType = RLCU_MEMORYTYPE_DEVICE,
					   .dstDevice = sl->base + c->dst, .dstPitch = c->len,
					   .WidthInBytes = c->len, .Height = c->count };

		if (c->src_stride > k->gpu[sl->gpu].max_pitch)
			r = cu_copy_rows(k, c, m.dstDevice, src, k->gpu[sl->gpu].stream);
		else
			r = k->cu->Memcpy2DAsync(&m, k->gpu[sl->gpu].stream);
	}
	if (r == RLCU_SUCCESS && k->fallback == CUSINK_FALLBACK_PAGEABLE) /* the source is */
		r = k->cu->StreamSynchronize(k->gpu[sl->gpu].stream);  /* reused at return */
	cu_pop(k);
	if (r != RLCU_SUCCESS)
		return cu_fail_work(k, e, r, "an asynchronous copy to the device", sl->gpu);
	k->w[worker].used[sl->gpu] = 1;
	return 0;
}

static void cu_unpin(void *sink, void *base, size_t len)
{
	struct cusink *k = sink;
	struct cm_err e;

	if (rlcu_forked(&e) < 0) /* a forked child: the parent's to unpin */
		return;

	if (k->pool_base && (!base || (const uint8_t *)base == k->pool_base)) {
		if (k->bounce && cu_push(k, 0) == RLCU_SUCCESS) {
			k->cu->MemFreeHost(k->bounce);
			cu_pop(k);
		}
		k->bounce = NULL;
		k->pool_base = NULL;
		k->pool_len = 0;
		k->fallback = CUSINK_FALLBACK_NONE;
		k->note[0] = '\0';
	}
	if (!k->pin_base || (base && k->pin_base != base))
		return; /* base NULL: whatever is pinned */
	if (cu_push(k, 0) == RLCU_SUCCESS) {
		k->cu->MemHostUnregister(k->pin_base);
		cu_pop(k);
	}
	k->pin_base = NULL;
	k->pin_len = 0;
}

/*
 * Registration refused (some virtualised and confidential-computing GPUs
 * refuse it): copies go through the driver's page-locked memory, one
 * more host copy each; when that is refused too, they are synchronous
 * from pageable memory. Either way the load goes on, and says why.
 */
static void cu_pin_fallback(struct cusink *k, void *base, size_t len, rlcu_result why)
{
	char n1[96], n2[96];
	void *b = NULL;
	rlcu_result r = cu_push(k, 0);

	if (r == RLCU_SUCCESS) {
		r = k->cu->MemHostAlloc(&b, len, RLCU_MEMHOSTALLOC_PORTABLE);
		cu_pop(k);
	}
	k->pool_base = base;
	k->pool_len = len;
	rlcu_name(k->cu, why, n1, sizeof(n1));
	if (r == RLCU_SUCCESS) {
		k->bounce = b;
		k->fallback = CUSINK_FALLBACK_HOST_ALLOC;
		snprintf(k->note, sizeof(k->note), "CUDA: cuMemHostRegister refused (%s): "
			 "copies through cuMemHostAlloc memory", n1);
		return;
	}
	k->fallback = CUSINK_FALLBACK_PAGEABLE;
	snprintf(k->note, sizeof(k->note), "CUDA: cuMemHostRegister refused (%s), cuMemHostAlloc "
		 "too (%s): synchronous copies from pageable memory", n1,
		 rlcu_name(k->cu, r, n2, sizeof(n2)));
}

static int cu_pin(void *sink, void *base, size_t len, struct cm_err *e)
{
	struct cusink *k = sink;
	rlcu_result r;

	if ((k->pin_base == base && k->pin_len == len) ||
	    (k->pool_base == base && k->pool_len == len))
		return 0; /* once per pool: a long-lived loader reuses it */
	cu_unpin(k, NULL, 0); /* another pool now: the loader unpins before freeing */
	r = cu_push(k, 0);
	if (r != RLCU_SUCCESS)
		return cu_fail(k, e, RL_E_CUDA, r, "cuCtxPushCurrent", k->gpu[0].ordinal);
	r = k->cu->MemHostRegister(base, len, RLCU_MEMHOSTREGISTER_PORTABLE);
	cu_pop(k);
	if (r == RLCU_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
		return 0; /* the caller's pinned pool (torch's): theirs to unpin */
	if (r != RLCU_SUCCESS) {
		cu_pin_fallback(k, base, len, r);
		return 0;
	}
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
		if (r == RLCU_SUCCESS && (r = cu_push(k, g)) == RLCU_SUCCESS) {
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
		r = cu_push(k, g);
		if (r == RLCU_SUCCESS) {
			r = k->cu->EventSynchronize(f.ev[g]);
			cu_pop(k);
		}
		if (r != RLCU_SUCCESS && ret == 0)
			ret = cu_fail_work(k, e, r, "a copy to the device", g);
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

		if (!k->gpu[g].stream) /* a set-up failed at its cuStreamCreate */
			continue;
		r = cu_push(k, g);
		if (r == RLCU_SUCCESS) {
			r = k->cu->StreamSynchronize(k->gpu[g].stream);
			cu_pop(k);
		}
		if (r != RLCU_SUCCESS && ret == 0)
			ret = cu_fail_work(k, e, r, "a copy to the device", g);
	}
	return ret;
}

/* Makes stream `waiter` of GPU g wait for what is queued on `on` now:
 * an event recorded on `on`, waited for by `waiter` (cuStreamWaitEvent
 * takes the record as of the call, so the event goes back to the pool
 * at once). */
static int cu_order(struct cusink *k, unsigned g, rlcu_stream waiter, rlcu_stream on,
		    struct cm_err *e)
{
	rlcu_event ev = NULL;
	rlcu_result r;

	pthread_mutex_lock(&k->lock);
	r = cu_event_get(k, g, &ev);
	pthread_mutex_unlock(&k->lock);
	if (r != RLCU_SUCCESS)
		return cu_fail(k, e, RL_E_CUDA, r, "cuEventCreate", k->gpu[g].ordinal);
	r = cu_push(k, g);
	if (r == RLCU_SUCCESS) {
		r = k->cu->EventRecord(ev, on);
		if (r == RLCU_SUCCESS)
			r = k->cu->StreamWaitEvent(waiter, ev, 0);
		cu_pop(k);
	}
	pthread_mutex_lock(&k->lock);
	k->gpu[g].free_ev[k->gpu[g].nfree++] = ev; /* room: it came from there */
	pthread_mutex_unlock(&k->lock);
	if (r != RLCU_SUCCESS)
		return cu_fail(k, e, RL_E_CUDA, r, "ordering with the caller's stream",
			       k->gpu[g].ordinal);
	return 0;
}

int cusink_begin(struct eng_sink *s, struct cm_err *e)
{
	struct cusink *k = s->state;

	for (unsigned g = 0; g < k->ngpus; g++) {
		int ret = k->gpu[g].has_caller ?
			  cu_order(k, g, k->gpu[g].stream, k->gpu[g].caller, e) : 0;

		if (ret < 0)
			return ret;
	}
	return 0;
}

void cusink_caller_streams(struct eng_sink *s, const int *ordinal, void *const *stream, size_t n)
{
	struct cusink *k = s->state;

	for (unsigned g = 0; g < k->ngpus; g++) {
		k->gpu[g].has_caller = 0;
		for (size_t i = 0; i < n; i++)
			if (ordinal[i] == k->gpu[g].ordinal) {
				k->gpu[g].caller = stream[i];
				k->gpu[g].has_caller = 1;
			}
	}
}

/* The caller's streams wait for every copy of the load (after a failed
 * one too: its tensors may still be in use). */
static int cu_caller_waits(struct cusink *k, struct cm_err *e)
{
	int ret = 0;

	for (unsigned g = 0; g < k->ngpus; g++) {
		int r = k->gpu[g].has_caller ?
			cu_order(k, g, k->gpu[g].caller, k->gpu[g].stream, e) : 0;

		if (r < 0 && ret == 0)
			ret = r;
	}
	return ret;
}

static int cu_finish(void *sink, int ok, struct cm_err *e)
{
	struct cusink *k = sink;
	int ret = cu_drain(k, e);
	struct cm_err e2 = { 0 };
	int r2 = cu_caller_waits(k, ret < 0 ? &e2 : e);

	if (ret == 0)
		ret = r2;

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
	int pitch = 0;

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
	if (k->cu->DeviceGetAttribute(&pitch, RLCU_DEVICE_ATTRIBUTE_MAX_PITCH, g->dev) !=
	    RLCU_SUCCESS || pitch < 0)
		pitch = 0; /* unknown: strided boxes as rows */
	g->max_pitch = (uint32_t)pitch;
	r = cu_push(k, k->ngpus - 1);
	if (r != RLCU_SUCCESS)
		return cu_fail(k, e, RL_E_CUDA, r, "cuCtxPushCurrent", ordinal);
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

int cusink_forked(struct cm_err *e)
{
	return rlcu_forked(e);
}

void cusink_destroy(struct eng_sink *s)
{
	struct cusink *k = s ? s->state : NULL;
	struct cm_err e;

	if (!k)
		return;
	if (rlcu_forked(&e) < 0) /* the parent's driver state: not ours to touch */
		k->ngpus = 0;
	if (k->cu && k->ngpus) {
		cu_drain(k, &e);
		cusink_free_allocs(s);
		cu_unpin(k, NULL, 0);
	}
	for (unsigned g = 0; g < k->ngpus; g++) {
		if (cu_push(k, g) == RLCU_SUCCESS) {
			for (size_t i = 0; i < k->gpu[g].nfree; i++)
				k->cu->EventDestroy(k->gpu[g].free_ev[i]);
			if (k->gpu[g].stream)
				k->cu->StreamDestroy(k->gpu[g].stream);
			cu_pop(k);
		}
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
	size_t fr = 0, total = 0;
	char what[64];
	rlcu_result r;

	if (slot >= k->nslots || sl->alloc)
		return cm_err_set(e, RL_E_STATE, "CUDA sink: device %u allocated already", slot);
	r = cu_push(k, sl->gpu);
	if (r != RLCU_SUCCESS)
		return cu_fail(k, e, RL_E_CUDA, r, "cuCtxPushCurrent", k->gpu[sl->gpu].ordinal);
	/* the free memory first: a clear message rather than the driver's */
	if (k->cu->MemGetInfo(&fr, &total) == RLCU_SUCCESS && bytes > fr) {
		cu_pop(k);
		return cm_err_set(e, RL_E_CUDA_MEMORY, "CUDA device %d: out of memory: the load "
				  "needs %llu bytes there, %zu of %zu are free",
				  k->gpu[sl->gpu].ordinal, (unsigned long long)bytes, fr, total);
	}
	r = k->cu->MemAlloc(&sl->alloc, bytes ? bytes : 1);
	cu_pop(k);
	if (r != RLCU_SUCCESS) {
		sl->alloc = 0;
		snprintf(what, sizeof(what), "cuMemAlloc of %llu bytes", (unsigned long long)bytes);
		return cu_fail(k, e, r == RLCU_ERROR_OUT_OF_MEMORY ? RL_E_CUDA_MEMORY : RL_E_CUDA, r,
			       what, k->gpu[sl->gpu].ordinal);
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
	struct cm_err e;

	if (rlcu_forked(&e) < 0) /* a forked child: the parent's memory */
		return;

	for (uint32_t i = 0; i < k->nslots; i++) {
		struct cu_slot *sl = k->slot + i;

		if (!sl->alloc)
			continue;
		if (cu_push(k, sl->gpu) == RLCU_SUCCESS) {
			k->cu->MemFree(sl->alloc);
			cu_pop(k);
		}
		sl->alloc = sl->base = 0;
		sl->cap = 0;
	}
}

int cusink_fallback(const struct eng_sink *s, const char **why)
{
	const struct cusink *k = s->state;

	*why = k->note;
	return k->fallback;
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
	r = cu_push(k, sl->gpu);
	if (r == RLCU_SUCCESS) {
		r = k->cu->StreamSynchronize(k->gpu[sl->gpu].stream);
		if (r == RLCU_SUCCESS)
			r = k->cu->MemcpyDtoH(dst, sl->base + off, len);
		cu_pop(k);
	}
	if (r != RLCU_SUCCESS)
		return cu_fail(k, e, RL_E_CUDA, r, "cuMemcpyDtoH", k->gpu[sl->gpu].ordinal);
	return 0;
}

/* ------------------------------------------------------------------ */
/* The registry's line (sink/registry.c) */

static unsigned cu_dev_fallback(const struct eng_sink *s, const char **why)
{
	int fb = cusink_fallback(s, why);

	return fb == CUSINK_FALLBACK_HOST_ALLOC ? SINK_DEV_FALLBACK_HOST_ALLOC :
	       fb == CUSINK_FALLBACK_PAGEABLE ? SINK_DEV_FALLBACK_PAGEABLE : 0;
}

const struct sink_dev_ops sink_dev_cuda = {
	.version = SINK_DEV_V1,
	.size = sizeof(struct sink_dev_ops),
	.kind = "cuda",
	.what = "CUDA device",
	.err_device = RL_E_CUDA_DEVICE,
	.err_memory = RL_E_CUDA_MEMORY,
	.forked = cusink_forked,
	.create = cusink_create,
	.destroy = cusink_destroy,
	.set_dest = cusink_set_dest,
	.alloc = cusink_alloc,
	.base = cusink_base,
	.free_allocs = cusink_free_allocs,
	.on_shard = cusink_on_shard,
	.read_back = cusink_read_back,
	.caller_streams = cusink_caller_streams,
	.begin = cusink_begin,
	.fallback = cu_dev_fallback,
};
