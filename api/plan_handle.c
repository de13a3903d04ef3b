/*
 * plan_handle.c - rl_plan_* of ringload.h: parameters, building a plan (file
 * alignment probed with the engine), and queries of its statistics,
 * devices, shards, requests and copies.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "ckpt_internal.h"
#include "plan_internal.h"
#include "spec_internal.h"
#include "../engine/engine.h"

static const struct cm_bounds bounds[] = {
	[RL_PLAN_PROCESS] = { 0, (1 << 24) - 1 },
	[RL_PLAN_MIN_GAP] = { 0, 1ll << 40 },
	[RL_PLAN_RATIO_MILLI] = { 0, 1000000000000ll },
	[RL_PLAN_CHUNK_BYTES] = { 1, 1ll << 30 },
	[RL_PLAN_SHARD_ALIGN] = { 64, 1ll << 30 },
	[RL_PLAN_CONGRUENT] = { 0, 1 },
	[RL_PLAN_ALL_STATS] = { 0, 1 },
	[RL_PLAN_READ_ONCE] = { 0, 1 },
	[RL_PLAN_BATCH_BYTES] = { 1, 1ll << 50 },
	[RL_PLAN_TRANSFER_ALIGN] = { 0, 1ll << 20 },
	[RL_PLAN_MAX_MEMORY] = { 0, 1ll << 62 },
	[RL_PLAN_DTYPE] = { -1, RL_DTYPE_COUNT - 1 },
	[RL_PLAN_STATS_ONLY] = { 0, 1 },
};

#define LAST_PARAM RL_PLAN_STATS_ONLY

rl_plan *rl_plan_create(void)
{
	rl_plan *p = cm_calloc(1, sizeof(*p));

	if (p)
		pl_opts_default(&p->o);
	return p;
}

void rl_plan_destroy(rl_plan *plan)
{
	if (!plan)
		return;
	pl_plan_free(plan->pl);
	cm_free(plan);
}

const char *rl_plan_errmsg(const rl_plan *plan)
{
	return plan ? plan->err.msg : "";
}

int rl_plan_param_bounds(rl_plan_param param, int64_t *lo, int64_t *hi)
{
	return cm_bounds_get(bounds, RL_PLAN_PROCESS, LAST_PARAM, (int)param, lo, hi);
}

int rl_plan_set(rl_plan *plan, rl_plan_param param, int64_t v)
{
	if (!plan)
		return -EINVAL;
	cm_err_clear(&plan->err);
	if (plan->pl)
		return cm_err_set(&plan->err, RL_E_STATE, "plan already built");
	if (param < RL_PLAN_PROCESS || param > LAST_PARAM)
		return cm_err_set(&plan->err, RL_E_INVALID_ARG, "unknown plan parameter %d",
				  (int)param);
	if (v < bounds[param].lo || v > bounds[param].hi)
		return cm_err_set(&plan->err, RL_E_INVALID_ARG,
				  "plan parameter %d: %lld outside [%lld, %lld]", (int)param,
				  (long long)v, (long long)bounds[param].lo,
				  (long long)bounds[param].hi);
	switch (param) {
	case RL_PLAN_PROCESS:
		plan->o.process = (int)v;
		break;
	case RL_PLAN_MIN_GAP:
		plan->o.min_gap = (uint64_t)v;
		break;
	case RL_PLAN_RATIO_MILLI:
		if (v && v < 1000)
			return cm_err_set(&plan->err, RL_E_INVALID_ARG,
					  "ratio %.3f must be >= 1 (or 0: automatic)", v / 1000.0);
		plan->o.ratio = v / 1000.0;
		break;
	case RL_PLAN_CHUNK_BYTES:
		plan->o.chunk = (uint64_t)v;
		break;
	case RL_PLAN_SHARD_ALIGN:
		if (v & (v - 1))
			return cm_err_set(&plan->err, RL_E_INVALID_ARG,
					  "shard alignment %lld is not a power of two", (long long)v);
		plan->o.shard_align = (uint64_t)v;
		plan->o.align_all = 1;
		break;
	case RL_PLAN_CONGRUENT:
		plan->o.congruent = (int)v;
		break;
	case RL_PLAN_ALL_STATS:
		plan->o.all_stats = (int)v;
		break;
	case RL_PLAN_READ_ONCE:
		plan->o.read_once = (int)v;
		break;
	case RL_PLAN_BATCH_BYTES:
		plan->o.batch_bytes = (uint64_t)v;
		break;
	case RL_PLAN_TRANSFER_ALIGN:
		if (v & (v - 1))
			return cm_err_set(&plan->err, RL_E_INVALID_ARG,
					  "transfer alignment %lld is not a power of two", (long long)v);
		plan->o.transfer_align = (uint64_t)v;
		break;
	case RL_PLAN_MAX_MEMORY:
		plan->o.max_memory = (uint64_t)v;
		break;
	case RL_PLAN_DTYPE:
		if (v >= 0 && !cm_convert_ok(RL_DTYPE_F32, (int)v) &&
		    !cm_convert_ok(RL_DTYPE_F16, (int)v))
			return cm_err_set(&plan->err, RL_E_DTYPE,
					  "plan: dtype %s: conversions go to F32, F16 or BF16",
					  pl_dtype_name((int)v));
		plan->o.convert = (int)v + 1;
		break;
	case RL_PLAN_STATS_ONLY:
		plan->o.stats_only = (int)v;
		break;
	}
	return 0;
}

int rl_plan_get(const rl_plan *plan, rl_plan_param param, int64_t *value)
{
	const struct pl_opts *o = plan ? &plan->o : NULL;

	if (!o || !value || param < RL_PLAN_PROCESS || param > LAST_PARAM)
		return -EINVAL;
	switch (param) {
	case RL_PLAN_PROCESS: *value = o->process; break;
	case RL_PLAN_MIN_GAP: *value = (int64_t)o->min_gap; break;
	case RL_PLAN_RATIO_MILLI: *value = (int64_t)(o->ratio * 1000 + 0.5); break;
	case RL_PLAN_CHUNK_BYTES: *value = (int64_t)o->chunk; break;
	case RL_PLAN_SHARD_ALIGN: *value = (int64_t)o->shard_align; break;
	case RL_PLAN_CONGRUENT: *value = o->congruent; break;
	case RL_PLAN_ALL_STATS: *value = o->all_stats; break;
	case RL_PLAN_READ_ONCE: *value = o->read_once; break;
	case RL_PLAN_BATCH_BYTES: *value = (int64_t)o->batch_bytes; break;
	case RL_PLAN_TRANSFER_ALIGN: *value = (int64_t)o->transfer_align; break;
	case RL_PLAN_MAX_MEMORY: *value = (int64_t)o->max_memory; break;
	case RL_PLAN_DTYPE: *value = o->convert - 1; break;
	case RL_PLAN_STATS_ONLY: *value = o->stats_only; break;
	}
	return 0;
}

int api_plan_build(rl_plan *plan, const struct pl_ckpt *ck, const struct pl_spec *spec)
{
	struct pl_align *al;
	struct pl_spec *dflt = NULL;
	int ret = 0;

	al = cm_calloc(ck->nfiles + 1, sizeof(*al));
	if (!al)
		return cm_err_set(&plan->err, -ENOMEM, "plan: out of memory");
	for (size_t f = 0; f < ck->nfiles; f++) {
		struct eng_align ea;

		/* A file this process may not read is never opened here: its
		 * alignment only shapes other processes' statistics. */
		if (!pl_avail_may_read(spec, ck, (uint32_t)plan->o.process, (uint32_t)f)) {
			al[f] = (struct pl_align){ 4096, 4096 };
			continue;
		}
		ret = eng_probe_align(ck->files[f].path, &ea);
		if (ret) {
			cm_err_set(&plan->err, ret, "%s: %s", ck->files[f].path, rl_strerror(ret));
			goto out;
		}
		al[f].offset_align = ea.direct ? ea.offset_align : 1;
		al[f].mem_align = ea.direct ? ea.mem_align : 1;
	}
	if (!spec && !(spec = dflt = pl_spec_new())) {
		ret = cm_err_set(&plan->err, -ENOMEM, "plan: out of memory");
		goto out;
	}
	ret = pl_plan_build(ck, spec, al, &plan->o, &plan->pl, &plan->err);
out:
	pl_spec_free(dflt);
	cm_free(al);
	return ret;
}

int rl_plan_build(rl_plan *plan, const rl_ckpt *ck, const rl_spec *spec)
{
	if (!plan)
		return -EINVAL;
	cm_err_clear(&plan->err);
	if (!ck)
		return cm_err_set(&plan->err, -EINVAL, "checkpoint is NULL");
	if (plan->pl)
		return cm_err_set(&plan->err, RL_E_STATE, "plan already built");
	if (!ck->pl)
		return cm_err_set(&plan->err, RL_E_STATE, "checkpoint not open");
	return api_plan_build(plan, ck->pl, spec ? spec->pl : NULL);
}

/* A query's arguments: -EINVAL for a NULL plan or out, RL_E_STATE before
 * the plan is built, else 0. */
static int queryable(const rl_plan *plan, const void *out)
{
	if (!plan || !out)
		return -EINVAL;
	return plan->pl ? 0 : RL_E_STATE;
}

unsigned rl_plan_num_processes(const rl_plan *plan)
{
	return plan && plan->pl ? pl_plan_nprocs(plan->pl) : 0;
}

int rl_plan_get_stats(const rl_plan *plan, int p, rl_plan_stats *out)
{
	struct pl_stats st;
	int ret;

	if (!plan || !out || p < RL_TOTAL)
		return -EINVAL;
	if (!plan->pl)
		return RL_E_STATE;
	ret = pl_plan_stats(plan->pl, p, &st);
	if (ret)
		return ret;
	out->devices = st.devices;
	out->needed_bytes = st.needed_bytes;
	out->read_bytes = st.read_bytes;
	out->blocks = st.blocks;
	out->requests = st.requests;
	out->files_opened = st.files_opened;
	return 0;
}

unsigned rl_plan_num_devices(const rl_plan *plan)
{
	struct pl_exec x;

	if (!plan || !plan->pl)
		return 0;
	pl_plan_exec(plan->pl, &x);
	return x.ndevs;
}

int rl_plan_device(const rl_plan *plan, unsigned dev, rl_device_info *out)
{
	int ret;
	struct pl_exec x;

	if ((ret = queryable(plan, out)))
		return ret;
	pl_plan_exec(plan->pl, &x);
	if (dev >= x.ndevs)
		return -EINVAL;
	out->id = x.dev_ids[dev];
	out->staging_bytes = x.staging_bytes[dev];
	out->nshards = pl_plan_ntensors(plan->pl);
	return 0;
}

size_t rl_plan_num_shards(const rl_plan *plan)
{
	struct pl_exec x;

	if (!plan || !plan->pl)
		return 0;
	pl_plan_exec(plan->pl, &x);
	return x.nshards;
}

int rl_plan_shard(const rl_plan *plan, size_t shard, rl_shard_info *out)
{
	int ret;
	struct pl_exec x;
	const struct pl_shard *sh;
	const uint64_t *shape;
	int dtype;

	if ((ret = queryable(plan, out)))
		return ret;
	pl_plan_exec(plan->pl, &x);
	if (shard >= x.nshards)
		return -EINVAL;
	sh = &x.shards[shard];
	memset(out, 0, sizeof(*out));
	pl_plan_tensor(plan->pl, sh->tensor, &out->name, &dtype, &out->ndim, &shape);
	out->dtype = (rl_dtype)dtype;
	for (unsigned d = 0; d < out->ndim; d++)
		out->shape[d] = shape[d];
	pl_plan_shard_box(plan->pl, shard, out->start, out->stop);
	out->device = sh->dev;
	out->offset = sh->offset;
	out->nbytes = sh->nbytes;
	return 0;
}

/* Each entry as rl_plan_shard() fills it, size bytes apart (see
 * rl_ckpt_tensors). */
long rl_plan_shards(const rl_plan *plan, size_t first, size_t n,
		    rl_shard_info *out, size_t size)
{
	rl_shard_info si;
	struct pl_exec x;
	size_t count, k;
	int ret;

	if (!plan || (n && !out) || size < sizeof(si))
		return -EINVAL;
	if ((ret = queryable(plan, &si)))
		return ret;
	pl_plan_exec(plan->pl, &x);
	if (first > x.nshards)
		return -EINVAL;
	count = x.nshards - first < n ? x.nshards - first : n;
	if (count && size > SIZE_MAX / count)
		return -EINVAL;
	for (k = 0; k < count; k++) {
		if ((ret = rl_plan_shard(plan, first + k, &si)))
			return ret;
		memcpy((char *)out + k * size, &si, sizeof(si));
	}
	return (long)count;
}

size_t rl_plan_num_requests(const rl_plan *plan)
{
	struct pl_exec x;

	if (!plan || !plan->pl)
		return 0;
	pl_plan_exec(plan->pl, &x);
	return x.nreads;
}

int rl_plan_request(const rl_plan *plan, size_t req, rl_request_info *out)
{
	int ret;
	struct pl_exec x;
	const struct cm_read *r;

	if ((ret = queryable(plan, out)))
		return ret;
	pl_plan_exec(plan->pl, &x);
	if (req >= x.nreads)
		return -EINVAL;
	r = &x.reads[req];
	out->file = x.file_index ? x.file_index[r->file] : r->file;
	out->offset = r->off;
	out->length = r->len;
	out->min_length = r->min_len;
	out->ncopies = r->ncopies;
	out->direct = !!(r->flags & CM_READ_DIRECT);
	return 0;
}

int rl_plan_copy(const rl_plan *plan, size_t req, size_t j, rl_copy_info *out)
{
	int ret;
	struct pl_exec x;

	if ((ret = queryable(plan, out)))
		return ret;
	pl_plan_exec(plan->pl, &x);
	if (req >= x.nreads || j >= x.reads[req].ncopies)
		return -EINVAL;
	api_copy_info(&x.copies[x.reads[req].first_copy + j], out);
	return 0;
}
