/*
 * loader_dev.c - streaming loads delivered to devices (rl_loader_set_device):
 * the loader's half of a device sink of the registry (sink/registry.h):
 * the sink, its destinations and the pinned window pool. The executor
 * (exec/execute.c) reads each window's range as for any streaming load;
 * instead of handing the pieces to a runtime as they are, it copies each
 * to its shard's place in the sink (async), fences the window and
 * reclaims it only after its fence completed, while the next window is
 * read. Nothing here knows a device kind: every device call is an op of
 * the kind's table (the CUDA-named functions are wrappers: loader_cuda.c).
 *
 * Destinations: the caller's device pointers per shard
 * (rl_loader_set_device_dest: torch or JAX tensors, no extra copy), or
 * one library allocation per plan device laid out as its staging area.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "../sink/registry.h"
#include "loader_internal.h"

struct ld_dest { uint64_t ptr, bytes; };

struct ld_dev {
	const struct sink_dev_ops *ops; /* the kind's */
	int32_t *map;           /* spec device id -> ordinal; NULL: identity */
	uint32_t nmap;
	int32_t one;            /* every spec device here (RL_DEVICE_ONE), or -1 */
	struct ld_dest *dest;   /* by shard: the caller's pointers (ptr 0: none) */
	size_t ndest;
	struct eng_sink sink;   /* made at the first load, kept while its devices fit */
	int *ordinal;           /* the sink's slots' ordinals */
	uint32_t nslots;
	uint64_t *dst;          /* by shard: its first byte's place in the sink (this load) */
	size_t ndst, nshards;   /* room in dst; the shards of the last load */
	uint64_t *area;         /* by plan device: its library area's bytes (this load) */
	uint32_t *dev_of;       /* by shard: its plan device (this load) */
	int *s_ord;             /* the caller's streams: s_stream[i] on s_ord[i] */
	void **s_stream;
	size_t nstreams;
};

static void dev_free_sink(struct ld_dev *c)
{
	c->ops->destroy(&c->sink);
	cm_free(c->ordinal);
	c->ordinal = NULL;
	c->nslots = 0;
}

void ld_dev_free(rl_loader *ld)
{
	struct ld_dev *c = ld->deliver.dev;

	if (!c)
		return;
	dev_free_sink(c);
	cm_free(c->map);
	cm_free(c->dest);
	cm_free(c->dst);
	cm_free(c->area);
	cm_free(c->dev_of);
	cm_free(c->s_ord);
	cm_free(c->s_stream);
	cm_free(c);
	ld->deliver.dev = NULL;
}

const char *rl_device_kind_at(size_t i)
{
	const struct sink_dev_ops *o = sink_dev_at(i);

	return o ? o->kind : NULL;
}

/* The kind's ops for rl_loader_set_device, or NULL with ld->err set. */
static const struct sink_dev_ops *dev_kind(rl_loader *ld, const char *kind)
{
	const struct sink_dev_ops *o = sink_dev_find(kind);
	char known[128] = "";

	for (size_t i = 0, n = 0; !o && sink_dev_at(i) && n < sizeof(known); i++)
		n += (size_t)snprintf(known + n, sizeof(known) - n, "%s%s", i ? ", " : "",
				      sink_dev_at(i)->kind);
	if (!o)
		cm_err_set(&ld->err, RL_E_INVALID_ARG,
			   "rl_loader_set_device: no device kind '%s' (this library has: %s)",
			   kind, known);
	return o;
}

/* The arguments of rl_loader_set_device checked: 0 or a code, ld->err set. */
static int dev_check(rl_loader *ld, const struct sink_dev_ops *o, const int32_t *ordinals,
		     uint32_t n, uint32_t flags)
{
	if ((n && !ordinals) || (flags & ~RL_DEVICE_ONE) || ((flags & RL_DEVICE_ONE) && n != 1))
		return cm_err_set(&ld->err, RL_E_INVALID_ARG, "rl_loader_set_device: %u "
				  "ordinals%s, flags %#x (RL_DEVICE_ONE takes exactly one)",
				  n, n && !ordinals ? " without entries" : "", flags);
	for (uint32_t i = 0; i < n; i++)
		if (ordinals[i] < 0)
			return flags & RL_DEVICE_ONE ?
			       cm_err_set(&ld->err, o->err_device, "rl_loader_set_device: %s %d",
					  o->what, ordinals[i]) :
			       cm_err_set(&ld->err, o->err_device,
					  "device map: spec device %u -> %s %d", i, o->what,
					  ordinals[i]);
	return 0;
}

int rl_loader_set_device(rl_loader *ld, const char *kind, const int32_t *ordinals, uint32_t n,
			 uint32_t flags)
{
	const struct sink_dev_ops *o = NULL;
	struct ld_dev *c;
	int ret;

	if (!ld)
		return -EINVAL;
	if (kind && !(o = dev_kind(ld, kind)))
		return RL_E_INVALID_ARG;
	if (o && (ret = dev_check(ld, o, ordinals, n, flags)) < 0)
		return ret;
	ld_dev_free(ld);
	if (!o)
		return 0;
	c = cm_calloc(1, sizeof(*c));
	if (!c || (n && !(flags & RL_DEVICE_ONE) && !(c->map = cm_calloc(n, sizeof(*c->map))))) {
		cm_free(c);
		return cm_err_set(&ld->err, -ENOMEM, "out of memory");
	}
	c->ops = o;
	c->one = flags & RL_DEVICE_ONE ? ordinals[0] : -1;
	if (c->map)
		memcpy(c->map, ordinals, n * sizeof(*c->map));
	c->nmap = c->map ? n : 0;
	ld->deliver.dev = c;
	ld->opt.staging_mode = RL_STAGING_STREAM;
	cm_err_clear(&ld->err);
	return 0;
}

const char *rl_loader_device_kind(const rl_loader *ld)
{
	return ld && ld->deliver.dev ? ld->deliver.dev->ops->kind : NULL;
}

/* The loader's device state, or NULL with ld->err set naming fn. */
static struct ld_dev *dev_of(rl_loader *ld, const char *fn)
{
	if (!ld->deliver.dev)
		cm_err_set(&ld->err, RL_E_STATE, "%s: call rl_loader_set_device first", fn);
	return ld->deliver.dev;
}

int rl_loader_set_device_dest(rl_loader *ld, size_t shard, uint64_t device_ptr, uint64_t bytes)
{
	struct ld_dev *c;

	if (!ld)
		return -EINVAL;
	if (!(c = dev_of(ld, "rl_loader_set_device_dest")))
		return RL_E_STATE;
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
static size_t dev_stream_index(const struct ld_dev *c, int ordinal)
{
	size_t i;

	for (i = 0; i < c->nstreams && c->s_ord[i] != ordinal; i++)
		;
	return i;
}

int rl_loader_set_device_stream(rl_loader *ld, int32_t ordinal, uint64_t stream)
{
	struct ld_dev *c;
	size_t i;

	if (!ld)
		return -EINVAL;
	if (!(c = dev_of(ld, "rl_loader_set_device_stream")))
		return RL_E_STATE;
	if (ordinal < 0)
		return cm_err_set(&ld->err, c->ops->err_device,
				  "rl_loader_set_device_stream: %s %d", c->ops->what, ordinal);
	i = dev_stream_index(c, ordinal);
	if (stream == RL_DEVICE_NO_STREAM) {
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

int rl_loader_device_area(rl_loader *ld, uint32_t device, uint64_t *device_ptr, uint64_t *bytes)
{
	struct ld_dev *c;

	if (!ld || !device_ptr || !bytes)
		return -EINVAL;
	c = ld->deliver.dev;
	if (!c || !c->sink.ops || device >= c->nslots || !c->ops->base(&c->sink, device))
		return cm_err_set(&ld->err, RL_E_STATE,
				  "no library device memory for device %u (no device load, or the caller's pointers)",
				  device);
	*device_ptr = c->ops->base(&c->sink, device);
	*bytes = c->sink.ops->capacity(c->sink.state, device);
	return 0;
}

/* Shard's device address in the last load of c (which has the shard). */
static uint64_t dev_shard_ptr(const struct ld_dev *c, size_t shard)
{
	/* base 0: dst holds the caller's pointer */
	return c->ops->base(&c->sink, c->dev_of[shard]) + c->dst[shard];
}

int rl_loader_device_shard(rl_loader *ld, size_t shard, uint64_t *device_ptr)
{
	struct ld_dev *c;

	if (!ld || !device_ptr)
		return -EINVAL;
	c = ld->deliver.dev;
	if (!c || !c->sink.ops || shard >= c->nshards)
		return cm_err_set(&ld->err, RL_E_STATE, "no device load with a shard %zu", shard);
	*device_ptr = dev_shard_ptr(c, shard);
	return 0;
}

int rl_loader_device_read_back(rl_loader *ld, uint32_t device, uint64_t offset, void *dst,
			       size_t len)
{
	struct ld_dev *c;

	if (!ld || !dst)
		return -EINVAL;
	c = ld->deliver.dev;
	if (!c || !c->sink.ops || device >= c->nslots)
		return cm_err_set(&ld->err, RL_E_STATE, "no device load to read back from");
	return c->ops->read_back(&c->sink, device, offset, dst, len, &ld->err);
}

/* ------------------------------------------------------------------ */
/* A load (api/stream.c calls these) */

/* The ordinal of plan device slot i. */
static int dev_ordinal(const struct ld_dev *c, const struct pl_exec *ex, unsigned i,
		       struct cm_err *e)
{
	uint32_t id = ex->dev_ids ? ex->dev_ids[i] : i;
	const char *what = c->ops->what;

	if (c->one >= 0)
		return c->one;
	if (!c->map && id > INT32_MAX) /* not a code: an error */
		return cm_err_set(e, c->ops->err_device, "no %s %" PRIu32 " (spec device %"
				  PRIu32 " under the identity map: ordinals are below 2^31; "
				  "map it)", what, id, id);
	if (!c->map)
		return (int)id;
	if (id >= c->nmap)
		return cm_err_set(e, c->ops->err_device,
				  "device map: spec device %u has no %s (%u mapped)", id, what,
				  c->nmap);
	return c->map[id];
}

/* The sink for ex's devices: kept from the last load when they match. */
static int dev_sink_for(rl_loader *ld, struct ld_dev *c, const struct pl_exec *ex)
{
	int *ord = cm_calloc(ex->ndevs ? ex->ndevs : 1, sizeof(*ord));
	int ret = 0;

	if (!ord)
		return cm_err_set(&ld->err, -ENOMEM, "out of memory");
	for (unsigned i = 0; i < ex->ndevs && ret == 0; i++) {
		ret = dev_ordinal(c, ex, i, &ld->err);
		ord[i] = ret;
		ret = CM_MIN(ret, 0);
	}
	if (ret == 0 && c->sink.ops && c->nslots == ex->ndevs &&
	    !memcmp(ord, c->ordinal, ex->ndevs * sizeof(*ord))) {
		cm_free(ord);
		c->ops->free_allocs(&c->sink); /* the last load's results */
		return 0;
	}
	dev_free_sink(c);
	if (ret == 0)
		ret = c->ops->create(ord, ex->ndevs, 1, &c->sink, &ld->err);
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
 * each at a multiple of DEV_ALIGN (cuMemAlloc's own alignment is 256,
 * and kernels and libraries expect as much of every tensor), rather than
 * at its host staging offset (8-aligned where placed congruent to its
 * file offset for direct reads). c->dst, c->dev_of, c->area are sized.
 */
#define DEV_ALIGN 256
static int dev_layout(rl_loader *ld, struct ld_dev *c, const struct pl_exec *ex)
{
	memset(c->area, 0, ex->ndevs * sizeof(*c->area));
	for (size_t i = 0; i < ex->nshards; i++) {
		const struct pl_shard *sh = ex->shards + i;
		uint64_t *cur = c->area + sh->dev;
		uint64_t off = cm_align_up(*cur, DEV_ALIGN);

		if (off < *cur || (sh->nbytes && cm_add64(off, sh->nbytes, cur)))
			return cm_err_set(&ld->err, RL_E_TOO_LARGE, "device load: device %u's area "
					  "overflows", ex->dev_ids ? ex->dev_ids[sh->dev] : sh->dev);
		/* an empty shard: an aligned place within the area, no room */
		c->dst[i] = sh->nbytes ? off : cm_align_down(*cur, DEV_ALIGN);
		c->dev_of[i] = sh->dev;
	}
	return 0;
}

/* Room for ex's shards and devices in c's per-load arrays. */
static int dev_room(rl_loader *ld, struct ld_dev *c, const struct pl_exec *ex)
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
static int dev_dests(rl_loader *ld, struct ld_dev *c, const struct pl_exec *ex)
{
	int caller = 0;

	for (size_t i = 0; i < c->ndest && i < ex->nshards; i++)
		caller |= c->dest[i].ptr != 0;
	for (unsigned d = 0; d < ex->ndevs; d++) {
		int ret;

		if (caller) {
			c->ops->set_dest(&c->sink, d, 0, UINT64_MAX);
			continue;
		}
		ret = c->ops->alloc(&c->sink, d, c->area[d], &ld->err);
		if (ret < 0)
			return ret;
	}
	for (size_t i = 0; caller && i < ex->nshards; i++) {
		const struct ld_dest *dd = i < c->ndest ? c->dest + i : NULL;

		if (!ex->shards[i].nbytes)
			continue;
		if (!dd || !dd->ptr)
			return cm_err_set(&ld->err, RL_E_STAGING, "device load: shard %zu has no "
					  "device pointer (rl_loader_set_device_dest)", i);
		if (dd->bytes < ex->shards[i].nbytes)
			return cm_err_set(&ld->err, c->ops->err_memory, "device load: shard %zu "
					  "needs %" PRIu64 " bytes; its device pointer has %" PRIu64,
					  i, ex->shards[i].nbytes, dd->bytes);
	}
	return 0;
}

static void dev_on_shard(void *user, size_t shard)
{
	rl_loader *ld = user;

	if (ld->opt.on_shard)
		ld->opt.on_shard(ld->opt.user, shard);
}

/* The caller's streams, then the sink's begin: before any copy, after
 * the caller's queued work. */
static int dev_begin_streams(rl_loader *ld, struct ld_dev *c)
{
	if (c->ops->caller_streams)
		c->ops->caller_streams(&c->sink, c->s_ord, c->s_stream, c->nstreams);
	return c->ops->begin ? c->ops->begin(&c->sink, &ld->err) : 0;
}

int ld_dev_begin(rl_loader *ld, const struct pl_exec *ex, void *pool, size_t pool_len)
{
	struct ld_dev *c = ld->deliver.dev;
	int ret = c->ops->forked ? c->ops->forked(&ld->err) : 0;

	if (ret < 0) /* before the kept sink's device calls */
		return ret;
	ret = dev_sink_for(ld, c, ex);
	if (ret == 0)
		ret = dev_room(ld, c, ex);
	if (ret == 0)
		ret = dev_layout(ld, c, ex);
	if (ret == 0)
		ret = dev_dests(ld, c, ex);
	if (ret == 0 && c->sink.ops->pin)
		ret = c->sink.ops->pin(c->sink.state, pool, pool_len, &ld->err);
	if (ret == 0)
		ret = dev_begin_streams(ld, c);
	if (ret < 0) {
		c->nshards = 0;
		if (c->sink.ops)
			c->ops->free_allocs(&c->sink);
		return ret;
	}
	for (size_t i = 0; i < ex->nshards; i++)
		if (i < c->ndest && c->dest[i].ptr)
			c->dst[i] = c->dest[i].ptr;
	c->ops->on_shard(&c->sink, dev_on_shard, ld);
	return 0;
}

void ld_dev_device(rl_loader *ld, const struct eng_sink **sink, const uint64_t **dst)
{
	*sink = &ld->deliver.dev->sink;
	*dst = ld->deliver.dev->dst;
}

uint64_t ld_dev_piece_ptr(rl_loader *ld, size_t shard, uint64_t offset)
{
	return dev_shard_ptr(ld->deliver.dev, shard) + offset;
}

/* The sink's fallback, if any, in the run's statistics (the one warning
 * a caller sees: rl_load_stats.fallbacks, the CLI's summary). */
static void dev_note(const struct ld_dev *c, struct eng_stats *st)
{
	const char *why = "";
	unsigned fb = c->sink.ops && c->ops->fallback ? c->ops->fallback(&c->sink, &why) : 0;
	size_t n = strlen(st->fallbacks);

	if (!fb)
		return;
	st->fallback_flags |= fb;
	if (n + 1 < sizeof(st->fallbacks))
		snprintf(st->fallbacks + n, sizeof(st->fallbacks) - n, "%s%s", n ? "; " : "", why);
}

void ld_dev_done(rl_loader *ld, int ok, struct eng_stats *st)
{
	struct ld_dev *c = ld->deliver.dev;

	if (st)
		dev_note(c, st);
	if (!ok && c->sink.ops) {
		c->ops->free_allocs(&c->sink); /* a failed load leaves nothing */
		c->nshards = 0;
	}
}

void ld_dev_unpin(rl_loader *ld)
{
	struct ld_dev *c = ld->deliver.dev;

	if (c && c->sink.ops && c->sink.ops->unpin)
		c->sink.ops->unpin(c->sink.state, NULL, 0);
}
