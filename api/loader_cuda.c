/*
 * loader_cuda.c - streaming loads delivered to CUDA devices (rl_loader_set_cuda):
 * the loader's half of the CUDA sink (sink/cuda.c): the sink, its
 * destinations and the pinned window pool. The executor (exec/execute.c)
 * reads each window's range as for any streaming load; instead of handing
 * the pieces to a runtime, it copies each to its shard's place in the
 * sink (async), fences the window (an event per GPU) and reclaims it only
 * after its fence completed, while the next window is read.
 *
 * Destinations: the caller's device pointers per shard
 * (rl_loader_set_cuda_dest: torch or JAX tensors, no extra copy), or one
 * library allocation per plan device laid out as its staging area.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "../sink/cuda.h"
#include "loader_internal.h"

struct ld_dest { uint64_t ptr, bytes; };

struct ld_cuda {
	int32_t *map;           /* spec device id -> CUDA ordinal; NULL: identity */
	uint32_t nmap;
	int32_t one_gpu;        /* every spec device here (RL_CUDA_ONE_GPU), or -1 */
	struct ld_dest *dest;   /* by shard: the caller's pointers (ptr 0: none) */
	size_t ndest;
	struct eng_sink sink;   /* made at the first load, kept while its devices fit */
	int *ordinal;           /* the sink's slots' ordinals */
	uint32_t nslots;
	uint64_t *dst;          /* by shard: its first byte's place in the sink (this load) */
	size_t ndst, nshards;   /* room in dst; the shards of the last load */
	uint64_t *area;         /* by plan device: its library area's bytes (this load) */
	uint32_t *dev_of;       /* by shard: its plan device (this load) */
	int *s_ord;             /* the caller's streams: s_stream[i] on GPU s_ord[i] */
	void **s_stream;
	size_t nstreams;
};

static void cuda_free_sink(struct ld_cuda *c)
{
	cusink_destroy(&c->sink);
	cm_free(c->ordinal);
	c->ordinal = NULL;
	c->nslots = 0;
}

void ld_cuda_free(rl_loader *ld)
{
	struct ld_cuda *c = ld->deliver.cuda;

	if (!c)
		return;
	cuda_free_sink(c);
	cm_free(c->map);
	cm_free(c->dest);
	cm_free(c->dst);
	cm_free(c->area);
	cm_free(c->dev_of);
	cm_free(c->s_ord);
	cm_free(c->s_stream);
	cm_free(c);
	ld->deliver.cuda = NULL;
}

/* The first version of rl_cuda_opts ended at `flags`. */
#define CUDA_OPTS_V1 offsetof(rl_cuda_opts, flags)

/* RL_CUDA_ONE_GPU's ordinal in o, -1 when not set; -2 when the flags
 * are wrong. */
static int32_t cuda_one_gpu(const rl_cuda_opts *o)
{
	if (o->size < offsetof(rl_cuda_opts, reserved) || !o->flags)
		return -1;
	if ((o->flags & ~RL_CUDA_ONE_GPU) || o->ndevs)
		return -2;
	return o->gpu < 0 ? -3 : o->gpu;
}

int rl_loader_set_cuda(rl_loader *ld, const rl_cuda_opts *o)
{
	struct ld_cuda *c;
	int32_t one = -1;

	if (!ld)
		return -EINVAL;
	if (o && (o->size < CUDA_OPTS_V1 || (o->ndevs && !o->device_map)))
		return cm_err_set(&ld->err, RL_E_INVALID_ARG,
				  "rl_loader_set_cuda: size %u, ndevs %u: a device map needs its entries",
				  o->size, o->ndevs);
	if (o && (one = cuda_one_gpu(o)) < -1)
		return one == -3 ? cm_err_set(&ld->err, RL_E_CUDA_DEVICE,
					      "rl_loader_set_cuda: CUDA device %d", o->gpu) :
		       cm_err_set(&ld->err, RL_E_INVALID_ARG, "rl_loader_set_cuda: flags %#x "
				  "with %u map entries (RL_CUDA_ONE_GPU takes no map)",
				  o->flags, o->ndevs);
	for (uint32_t i = 0; o && i < o->ndevs; i++)
		if (o->device_map[i] < 0)
			return cm_err_set(&ld->err, RL_E_CUDA_DEVICE,
					  "device map: spec device %u -> CUDA device %d", i,
					  o->device_map[i]);
	ld_cuda_free(ld);
	if (!o)
		return 0;
	c = cm_calloc(1, sizeof(*c));
	if (!c || (o->ndevs && !(c->map = cm_calloc(o->ndevs, sizeof(*c->map))))) {
		cm_free(c);
		return cm_err_set(&ld->err, -ENOMEM, "out of memory");
	}
	if (o->ndevs)
		memcpy(c->map, o->device_map, o->ndevs * sizeof(*c->map));
	c->nmap = o->ndevs;
	c->one_gpu = one;
	ld->deliver.cuda = c;
	ld->opt.staging_mode = RL_STAGING_STREAM;
	cm_err_clear(&ld->err);
	return 0;
}

int rl_loader_set_cuda_dest(rl_loader *ld, size_t shard, uint64_t device_ptr, uint64_t bytes)
{
	struct ld_cuda *c;

	if (!ld)
		return -EINVAL;
	c = ld->deliver.cuda;
	if (!c)
		return cm_err_set(&ld->err, RL_E_STATE, "rl_loader_set_cuda_dest: call rl_loader_set_cuda first");
	if (shard >= c->ndest) {
		size_t n = CM_MAX(shard + 1, 2 * c->ndest);
		struct ld_dest *d = cm_reallocarray(c->dest, n, sizeof(*d));

		if (!d)
			return cm_err_set(&ld->err, -ENOMEM, "out of memory");
		memset(d + c->ndest, 0, (n - c->ndest) * sizeof(*d));
		c->dest = d;
		c->ndest = n;
	}
	c->dest[shard] = (struct ld_dest){ device_ptr, device_ptr ? bytes : 0 };
	return 0;
}

/* Index of ordinal's stream in c, or c->nstreams. */
static size_t cuda_stream_index(const struct ld_cuda *c, int ordinal)
{
	size_t i;

	for (i = 0; i < c->nstreams && c->s_ord[i] != ordinal; i++)
		;
	return i;
}

int rl_loader_set_cuda_stream(rl_loader *ld, int32_t ordinal, uint64_t stream)
{
	struct ld_cuda *c;
	size_t i;

	if (!ld)
		return -EINVAL;
	c = ld->deliver.cuda;
	if (!c)
		return cm_err_set(&ld->err, RL_E_STATE,
				  "rl_loader_set_cuda_stream: call rl_loader_set_cuda first");
	if (ordinal < 0)
		return cm_err_set(&ld->err, RL_E_CUDA_DEVICE,
				  "rl_loader_set_cuda_stream: CUDA device %d", ordinal);
	i = cuda_stream_index(c, ordinal);
	if (stream == RL_CUDA_NO_STREAM) {
		if (i < c->nstreams) { /* the last one takes its place */
			c->s_ord[i] = c->s_ord[--c->nstreams];
			c->s_stream[i] = c->s_stream[c->nstreams];
		}
		return 0;
	}
	if (i == c->nstreams) {
		int *o = cm_reallocarray(c->s_ord, i + 1, sizeof(*o));
		void **st = o ? cm_reallocarray(c->s_stream, i + 1, sizeof(*st)) : NULL;

		if (o)
			c->s_ord = o;
		if (!st)
			return cm_err_set(&ld->err, -ENOMEM, "out of memory");
		c->s_stream = st;
		c->s_ord[i] = ordinal;
		c->nstreams++;
	}
	c->s_stream[i] = (void *)(uintptr_t)stream;
	return 0;
}

int rl_loader_cuda_area(rl_loader *ld, uint32_t device, uint64_t *device_ptr, uint64_t *bytes)
{
	struct ld_cuda *c;

	if (!ld || !device_ptr || !bytes)
		return -EINVAL;
	c = ld->deliver.cuda;
	if (!c || !c->sink.ops || device >= c->nslots || !cusink_base(&c->sink, device))
		return cm_err_set(&ld->err, RL_E_STATE,
				  "no library device memory for device %u (no CUDA load, or the caller's pointers)",
				  device);
	*device_ptr = cusink_base(&c->sink, device);
	*bytes = c->sink.ops->capacity(c->sink.state, device);
	return 0;
}

int rl_loader_cuda_shard(rl_loader *ld, size_t shard, uint64_t *device_ptr)
{
	struct ld_cuda *c;
	uint64_t base;

	if (!ld || !device_ptr)
		return -EINVAL;
	c = ld->deliver.cuda;
	if (!c || !c->sink.ops || shard >= c->nshards)
		return cm_err_set(&ld->err, RL_E_STATE, "no CUDA load with a shard %zu", shard);
	base = cusink_base(&c->sink, c->dev_of[shard]);
	*device_ptr = base + c->dst[shard]; /* base 0: the caller's pointer */
	return 0;
}

int rl_loader_cuda_read_back(rl_loader *ld, uint32_t device, uint64_t offset, void *dst, size_t len)
{
	if (!ld || !dst)
		return -EINVAL;
	if (!ld->deliver.cuda || !ld->deliver.cuda->sink.ops || device >= ld->deliver.cuda->nslots)
		return cm_err_set(&ld->err, RL_E_STATE, "no CUDA load to read back from");
	return cusink_read_back(&ld->deliver.cuda->sink, device, offset, dst, len, &ld->err);
}

/* ------------------------------------------------------------------ */
/* A load (api/stream.c calls these) */

/* The CUDA ordinal of plan device slot i. */
static int cuda_ordinal(const struct ld_cuda *c, const struct pl_exec *ex, unsigned i,
			struct cm_err *e)
{
	uint32_t id = ex->dev_ids ? ex->dev_ids[i] : i;

	if (c->one_gpu >= 0)
		return c->one_gpu;
	if (!c->map && id > INT32_MAX) /* not a code: an error */
		return cm_err_set(e, RL_E_CUDA_DEVICE, "no CUDA device %" PRIu32 " (spec device %"
				  PRIu32 " under the identity map: CUDA ordinals are below 2^31; "
				  "map it)", id, id);
	if (!c->map)
		return (int)id;
	if (id >= c->nmap)
		return cm_err_set(e, RL_E_CUDA_DEVICE,
				  "device map: spec device %u has no CUDA device (%u mapped)", id,
				  c->nmap);
	return c->map[id];
}

/* The sink for ex's devices: kept from the last load when they match. */
static int cuda_sink_for(rl_loader *ld, struct ld_cuda *c, const struct pl_exec *ex)
{
	int *ord = cm_calloc(ex->ndevs ? ex->ndevs : 1, sizeof(*ord));
	int ret = 0;

	if (!ord)
		return cm_err_set(&ld->err, -ENOMEM, "out of memory");
	for (unsigned i = 0; i < ex->ndevs && ret == 0; i++) {
		ret = cuda_ordinal(c, ex, i, &ld->err);
		ord[i] = ret;
		ret = CM_MIN(ret, 0);
	}
	if (ret == 0 && c->sink.ops && c->nslots == ex->ndevs &&
	    !memcmp(ord, c->ordinal, ex->ndevs * sizeof(*ord))) {
		cm_free(ord);
		cusink_free_allocs(&c->sink); /* the last load's results */
		return 0;
	}
	cuda_free_sink(c);
	if (ret == 0)
		ret = cusink_create(ord, ex->ndevs, 1, &c->sink, &ld->err);
	if (ret < 0) {
		cm_free(ord);
		return ret;
	}
	c->ordinal = ord;
	c->nslots = ex->ndevs;
	return 0;
}

/*
 * Where each shard goes in its device's library area: in shard order,
 * each at a multiple of CUDA_ALIGN (cuMemAlloc's own alignment is 256,
 * and kernels and libraries expect as much of every tensor), rather than
 * at its host staging offset (8-aligned where placed congruent to its
 * file offset for direct reads). c->dst, c->dev_of, c->area are sized.
 */
#define CUDA_ALIGN 256
static int cuda_layout(rl_loader *ld, struct ld_cuda *c, const struct pl_exec *ex)
{
	memset(c->area, 0, ex->ndevs * sizeof(*c->area));
	for (size_t i = 0; i < ex->nshards; i++) {
		const struct pl_shard *sh = ex->shards + i;
		uint64_t *cur = c->area + sh->dev;
		uint64_t off = cm_align_up(*cur, CUDA_ALIGN);

		if (off < *cur || (sh->nbytes && cm_add64(off, sh->nbytes, cur)))
			return cm_err_set(&ld->err, RL_E_TOO_LARGE, "CUDA load: device %u's area "
					  "overflows", ex->dev_ids ? ex->dev_ids[sh->dev] : sh->dev);
		/* an empty shard: an aligned place within the area, no room */
		c->dst[i] = sh->nbytes ? off : cm_align_down(*cur, CUDA_ALIGN);
		c->dev_of[i] = sh->dev;
	}
	return 0;
}

/* Room for ex's shards and devices in c's per-load arrays. */
static int cuda_room(rl_loader *ld, struct ld_cuda *c, const struct pl_exec *ex)
{
	if (c->ndst < ex->nshards || !c->dst) {
		cm_free(c->dst);
		cm_free(c->dev_of);
		c->dst = cm_calloc(ex->nshards ? ex->nshards : 1, sizeof(*c->dst));
		c->dev_of = cm_calloc(ex->nshards ? ex->nshards : 1, sizeof(*c->dev_of));
		c->ndst = c->dst && c->dev_of ? ex->nshards : 0;
		if (!c->dst || !c->dev_of)
			return cm_err_set(&ld->err, -ENOMEM, "out of memory");
	}
	cm_free(c->area);
	c->area = cm_calloc(ex->ndevs ? ex->ndevs : 1, sizeof(*c->area));
	if (!c->area)
		return cm_err_set(&ld->err, -ENOMEM, "out of memory");
	c->nshards = ex->nshards;
	return 0;
}

/* Destinations: the caller's pointer of every shard, or library memory. */
static int cuda_dests(rl_loader *ld, struct ld_cuda *c, const struct pl_exec *ex)
{
	int caller = 0;

	for (size_t i = 0; i < c->ndest && i < ex->nshards; i++)
		caller |= c->dest[i].ptr != 0;
	for (unsigned d = 0; d < ex->ndevs; d++) {
		int ret;

		if (caller) {
			cusink_set_dest(&c->sink, d, 0, UINT64_MAX);
			continue;
		}
		ret = cusink_alloc(&c->sink, d, c->area[d], &ld->err);
		if (ret < 0)
			return ret;
	}
	for (size_t i = 0; caller && i < ex->nshards; i++) {
		const struct ld_dest *dd = i < c->ndest ? c->dest + i : NULL;

		if (!ex->shards[i].nbytes)
			continue;
		if (!dd || !dd->ptr)
			return cm_err_set(&ld->err, RL_E_STAGING,
					  "CUDA load: shard %zu has no device pointer (rl_loader_set_cuda_dest)", i);
		if (dd->bytes < ex->shards[i].nbytes)
			return cm_err_set(&ld->err, RL_E_CUDA_MEMORY,
					  "CUDA load: shard %zu needs %" PRIu64 " bytes; its device pointer has %" PRIu64,
					  i, ex->shards[i].nbytes, dd->bytes);
	}
	return 0;
}

static void cuda_on_shard(void *user, size_t shard)
{
	rl_loader *ld = user;

	if (ld->opt.on_shard)
		ld->opt.on_shard(ld->opt.user, shard);
}

int ld_cuda_begin(rl_loader *ld, const struct pl_exec *ex, void *pool, size_t pool_len)
{
	struct ld_cuda *c = ld->deliver.cuda;
	int ret = cusink_forked(&ld->err);

	if (ret < 0) /* before the kept sink's driver calls */
		return ret;
	ret = cuda_sink_for(ld, c, ex);
	if (ret == 0)
		ret = cuda_room(ld, c, ex);
	if (ret == 0)
		ret = cuda_layout(ld, c, ex);
	if (ret == 0)
		ret = cuda_dests(ld, c, ex);
	if (ret == 0)
		ret = c->sink.ops->pin(c->sink.state, pool, pool_len, &ld->err);
	if (ret == 0) { /* before any copy: after the caller's queued work */
		cusink_caller_streams(&c->sink, c->s_ord, c->s_stream, c->nstreams);
		ret = cusink_begin(&c->sink, &ld->err);
	}
	if (ret < 0) {
		c->nshards = 0;
		if (c->sink.ops)
			cusink_free_allocs(&c->sink);
		return ret;
	}
	for (size_t i = 0; i < ex->nshards; i++)
		if (i < c->ndest && c->dest[i].ptr)
			c->dst[i] = c->dest[i].ptr;
	cusink_on_shard(&c->sink, cuda_on_shard, ld);
	return 0;
}

void ld_cuda_device(rl_loader *ld, const struct eng_sink **sink, const uint64_t **dst)
{
	*sink = &ld->deliver.cuda->sink;
	*dst = ld->deliver.cuda->dst;
}

/* The sink's fallback, if any, in the run's statistics (the one warning
 * a caller sees: rl_load_stats.fallbacks, the CLI's summary). */
static void cuda_note(const struct ld_cuda *c, struct eng_stats *st)
{
	const char *why;
	int fb = c->sink.ops ? cusink_fallback(&c->sink, &why) : CUSINK_FALLBACK_NONE;
	size_t n = strlen(st->fallbacks);

	if (fb == CUSINK_FALLBACK_NONE)
		return;
	st->fallback_flags |= fb == CUSINK_FALLBACK_HOST_ALLOC ? RL_FALLBACK_CUDA_HOST_ALLOC :
			      RL_FALLBACK_CUDA_PAGEABLE;
	if (n + 1 < sizeof(st->fallbacks))
		snprintf(st->fallbacks + n, sizeof(st->fallbacks) - n, "%s%s", n ? "; " : "", why);
}

void ld_cuda_done(rl_loader *ld, int ok, struct eng_stats *st)
{
	struct ld_cuda *c = ld->deliver.cuda;

	cuda_note(c, st);
	if (!ok && c->sink.ops)
		cusink_free_allocs(&c->sink); /* a failed load leaves nothing */
}

void ld_cuda_unpin(rl_loader *ld)
{
	struct ld_cuda *c = ld->deliver.cuda;

	if (c && c->sink.ops)
		c->sink.ops->unpin(c->sink.state, NULL, 0);
}
