/*
 * load.c - rl_loader: a whole load is a program of one batch
 * (exec/program.h) run by the executor (exec/execute.h); this file only
 * owns the loader's options, the staging areas (library-allocated THP
 * memory or the caller's), the callbacks and the statistics.
 */
#include <errno.h>
#include <string.h>
#include <stdio.h>

#include "../engine/engine.h"
#include "../exec/execute.h"
#include "../planner/planner.h"
#include "../sink/host.h"
#include "integrity.h"
#include "plan_internal.h"
#include "loader_internal.h"

/*
 * Defaults. Request size: 8 MiB (rounded to the device's unsplit request
 * size, rl_loader_request_bytes); in-flight bound 128 MiB; workers and
 * queue depth automatic (engine/setup.c); O_DIRECT unless the page cache
 * holds the file. Chosen by measurement: docs/benchmarks.md ("defaults"),
 * perf/load_grid.sh on each medium. The bound only costs memory for reads
 * that need a bounce buffer.
 */
#define LD_REQUEST_BYTES (8ull << 20)
#define LD_INFLIGHT_BYTES (128ull << 20)
/* Streaming: a minute without a release while every window is held is a
 * runtime that forgot to release, not a slow copy. */
#define LD_RELEASE_TIMEOUT_MS 60000

_Static_assert(ENG_FALLBACK_BACKEND == RL_FALLBACK_BACKEND &&
	       ENG_FALLBACK_URING_FLAGS == RL_FALLBACK_URING_FLAGS &&
	       ENG_FALLBACK_FILES_UNREGISTERED == RL_FALLBACK_FILES_UNREGISTERED &&
	       ENG_FALLBACK_BUFFERS_UNREGISTERED == RL_FALLBACK_BUFFERS_UNREGISTERED &&
	       ENG_FALLBACK_BUFFERS_UNLOCKED == RL_FALLBACK_BUFFERS_UNLOCKED &&
	       ENG_FALLBACK_NOT_PREFAULTED == RL_FALLBACK_NOT_PREFAULTED &&
	       ENG_FALLBACK_FEWER_WORKERS == RL_FALLBACK_FEWER_WORKERS,
	       "the engine's fallback flags are the public ones");
_Static_assert(ENG_FILE_DIRECT == RL_FILE_DIRECT && ENG_FILE_CACHED == RL_FILE_CACHED &&
	       ENG_FILE_BUFFERED == RL_FILE_BUFFERED && ENG_FILE_UNUSED == RL_FILE_UNUSED &&
	       ENG_WHY_NONE == RL_WHY_NONE && ENG_WHY_ASKED == RL_WHY_ASKED &&
	       ENG_WHY_COLD == RL_WHY_COLD && ENG_WHY_HOT == RL_WHY_HOT &&
	       ENG_WHY_MEDIUM == RL_WHY_MEDIUM && ENG_WHY_REFUSED == RL_WHY_REFUSED,
	       "file modes: one set of values");
_Static_assert((int)ENG_AUTO == (int)RL_BACKEND_AUTO &&
	       (int)ENG_IO_URING == (int)RL_BACKEND_IO_URING &&
	       (int)ENG_LIBAIO == (int)RL_BACKEND_LIBAIO && (int)ENG_PREAD == (int)RL_BACKEND_PREAD,
	       "backend ids: one set of values");
_Static_assert((int)ENG_CAP_FIXED_BUFFERS == (int)RL_BACKEND_CAP_FIXED_BUFFERS &&
	       (int)ENG_CAP_FIXED_FILES == (int)RL_BACKEND_CAP_FIXED_FILES &&
	       (int)ENG_CAP_POLL == (int)RL_BACKEND_CAP_POLL &&
	       (int)ENG_CAP_SQ_THREAD == (int)RL_BACKEND_CAP_SQ_THREAD &&
	       (int)ENG_CAP_IOPRIO == (int)RL_BACKEND_CAP_IOPRIO &&
	       (int)ENG_CAP_KERNEL_QUEUE == (int)RL_BACKEND_CAP_KERNEL_QUEUE,
	       "backend capabilities: one set of values");
_Static_assert(ENG_DIRECT_AUTO == RL_DIRECT_AUTO && ENG_DIRECT_ON == RL_DIRECT_ON,
	       "direct modes: one set of values");

static const struct {
	int64_t lo, hi;
} bounds[] = {
	[RL_OPT_BACKEND] = { RL_BACKEND_AUTO, 0 },   /* hi: the table's (below) */
	[RL_OPT_QUEUE_DEPTH] = { 1, 4096 },
	[RL_OPT_REQUEST_BYTES] = { 4096, 1 << 30 },
	[RL_OPT_INFLIGHT_BYTES] = { 4096, 1ll << 40 },
	[RL_OPT_BUFFERS] = { 0, 65536 },
	[RL_OPT_REGISTER] = { 0, 1 },
	[RL_OPT_DIRECT] = { RL_DIRECT_OFF, RL_DIRECT_AUTO },
	[RL_OPT_STAGING] = { RL_STAGING_LIBRARY, RL_STAGING_STREAM },
	[RL_OPT_THREADS] = { 0, 1024 },
	[RL_OPT_WORKERS] = { 0, 256 },
	[RL_OPT_SHA256_HF] = { 0, 1 },
	[RL_OPT_STAGING_BUDGET] = { 0, 1ll << 50 },
	[RL_OPT_RELEASE_TIMEOUT_MS] = { 0, INT32_MAX },
};

const char *rl_backend_name(rl_backend b)
{
	return eng_backend_name((int)b);
}

int rl_backend_at(size_t i)
{
	return eng_backend_id_at(i);
}

int rl_backend_by_name(const char *name)
{
	for (size_t i = 0; name && eng_backend_id_at(i) >= 0; i++)
		if (!strcmp(name, eng_backend_name(eng_backend_id_at(i))))
			return eng_backend_id_at(i);
	return name && !strcmp(name, "auto") ? RL_BACKEND_AUTO : RL_E_INVALID_ARG;
}

unsigned rl_backend_caps(rl_backend b)
{
	return eng_backend_caps((int)b);
}

rl_loader *rl_loader_create(void)
{
	rl_loader *ld = cm_calloc(1, sizeof(*ld));

	if (!ld)
		return NULL;
	eng_opts_default(&ld->opt.eo);
	ld->opt.eo.queue_depth = 0;         /* automatic */
	ld->opt.eo.inflight_bytes = LD_INFLIGHT_BYTES;
	ld->opt.eo.direct = ENG_DIRECT_AUTO;
	ld->opt.release_timeout_ms = LD_RELEASE_TIMEOUT_MS;
	ld->opt.sha256_hf = 1;
	return ld;
}

int rl_loader_param_bounds(rl_loader_param param, int64_t *lo, int64_t *hi)
{
	if (param < RL_OPT_BACKEND || param > RL_OPT_RELEASE_TIMEOUT_MS)
		return -EINVAL;
	if (lo)
		*lo = bounds[param].lo;
	if (hi)
		*hi = param == RL_OPT_BACKEND ? eng_backend_max_id() : bounds[param].hi;
	return 0;
}

int rl_loader_set(rl_loader *ld, rl_loader_param param, int64_t value)
{
	int64_t lo, hi;

	if (!ld)
		return -EINVAL;
	if (rl_loader_param_bounds(param, &lo, &hi) < 0)
		return cm_err_set(&ld->err, RL_E_INVALID_ARG, "unknown loader parameter %d",
				  (int)param);
	if (value < lo || value > hi)
		return cm_err_set(&ld->err, RL_E_INVALID_ARG,
				  "loader parameter %d: %lld not in [%lld, %lld]", (int)param,
				  (long long)value, (long long)lo, (long long)hi);
	if (param == RL_OPT_BACKEND && !strcmp(rl_backend_name((rl_backend)value), "?"))
		return cm_err_set(&ld->err, RL_E_INVALID_ARG, "backend %lld: no such backend",
				  (long long)value);
	switch (param) {
	case RL_OPT_BACKEND: ld->opt.eo.backend = (int)value; break;
	case RL_OPT_QUEUE_DEPTH: ld->opt.eo.queue_depth = (unsigned)value; break;
	case RL_OPT_REQUEST_BYTES: ld->opt.request_bytes = (uint64_t)value; break;
	case RL_OPT_INFLIGHT_BYTES: ld->opt.eo.inflight_bytes = (uint64_t)value; break;
	case RL_OPT_BUFFERS: ld->opt.eo.buffers = (unsigned)value; break;
	case RL_OPT_REGISTER:
		ld->opt.eo.register_buffers = ld->opt.eo.register_files = (int)value;
		break;
	case RL_OPT_DIRECT: ld->opt.eo.direct = (int)value; break;
	case RL_OPT_STAGING: ld->opt.staging_mode = (int)value; break;
	case RL_OPT_THREADS: ld->opt.eo.threads = (unsigned)value; break;
	case RL_OPT_WORKERS: ld->opt.eo.workers = (unsigned)value; break;
	case RL_OPT_SHA256_HF: ld->opt.sha256_hf = (int)value; break;
	case RL_OPT_STAGING_BUDGET: ld->opt.budget = (uint64_t)value; break;
	case RL_OPT_RELEASE_TIMEOUT_MS: ld->opt.release_timeout_ms = (uint32_t)value; break;
	}
	cm_err_clear(&ld->err);
	return 0;
}

int rl_loader_get(const rl_loader *ld, rl_loader_param param, int64_t *value)
{
	if (!ld || !value || rl_loader_param_bounds(param, NULL, NULL) < 0)
		return -EINVAL;
	switch (param) {
	case RL_OPT_BACKEND: *value = ld->opt.eo.backend; break;
	case RL_OPT_QUEUE_DEPTH: *value = ld->opt.eo.queue_depth; break;
	case RL_OPT_REQUEST_BYTES: *value = (int64_t)ld->opt.request_bytes; break;
	case RL_OPT_INFLIGHT_BYTES: *value = (int64_t)ld->opt.eo.inflight_bytes; break;
	case RL_OPT_BUFFERS: *value = ld->opt.eo.buffers; break;
	case RL_OPT_REGISTER: *value = ld->opt.eo.register_buffers; break;
	case RL_OPT_DIRECT: *value = ld->opt.eo.direct; break;
	case RL_OPT_STAGING: *value = ld->opt.staging_mode; break;
	case RL_OPT_THREADS: *value = ld->opt.eo.threads; break;
	case RL_OPT_WORKERS: *value = ld->opt.eo.workers; break;
	case RL_OPT_SHA256_HF: *value = ld->opt.sha256_hf; break;
	case RL_OPT_STAGING_BUDGET: *value = (int64_t)ld->opt.budget; break;
	case RL_OPT_RELEASE_TIMEOUT_MS: *value = ld->opt.release_timeout_ms; break;
	}
	return 0;
}

int rl_loader_set_callbacks(rl_loader *ld, rl_shard_fn on_shard,
			    rl_progress_fn on_progress, void *user)
{
	if (!ld)
		return -EINVAL;
	ld->opt.on_shard = on_shard;
	ld->opt.on_progress = on_progress;
	ld->opt.user = user;
	return 0;
}

int rl_loader_set_staging(rl_loader *ld, unsigned dev, void *ptr, size_t len)
{
	if (!ld)
		return -EINVAL;
	if (!ptr)
		return cm_err_set(&ld->err, RL_E_STAGING, "device %u: NULL staging", dev);
	if (dev >= ld->opt.ncaller) {
		struct ld_area *a;

		if (dev >= 1u << 20)
			return cm_err_set(&ld->err, RL_E_STAGING, "device %u: out of range", dev);
		a = cm_reallocarray(ld->opt.caller, dev + 1, sizeof(*a));
		if (!a)
			return cm_err_set(&ld->err, -ENOMEM, "out of memory");
		memset(a + ld->opt.ncaller, 0, (dev + 1 - ld->opt.ncaller) * sizeof(*a));
		ld->opt.caller = a;
		ld->opt.ncaller = dev + 1;
	}
	ld->opt.caller[dev].ptr = ptr;
	ld->opt.caller[dev].len = len;
	cm_err_clear(&ld->err);
	return 0;
}

/* Staging for every device of the plan: ours (THP) or the caller's. */
static int setup_areas(rl_loader *ld, const struct pl_exec *ex)
{
	ld->last.areas = cm_calloc(ex->ndevs ? ex->ndevs : 1, sizeof(*ld->last.areas));
	if (!ld->last.areas)
		return cm_err_set(&ld->err, -ENOMEM, "out of memory");
	ld->last.nareas = ex->ndevs;
	for (unsigned d = 0; d < ex->ndevs; d++) {
		struct ld_area *a = ld->last.areas + d;
		uint64_t need = ex->staging_bytes[d];

		if (ld->opt.staging_mode == RL_STAGING_CALLER) {
			if (d >= ld->opt.ncaller || !ld->opt.caller[d].ptr)
				return cm_err_set(&ld->err, RL_E_STAGING,
						  "device %u (id %u): no staging supplied", d,
						  ex->dev_ids[d]);
			if (ld->opt.caller[d].len < need)
				return cm_err_set(&ld->err, RL_E_STAGING,
						  "device %u (id %u): staging of %llu bytes, %llu needed",
						  d, ex->dev_ids[d],
						  (unsigned long long)ld->opt.caller[d].len,
						  (unsigned long long)need);
			*a = ld->opt.caller[d];
			a->ours = 0;
			continue;
		}
		if (!need)
			continue;
		if (need > SIZE_MAX)
			return cm_err_set(&ld->err, -ENOMEM, "staging of %llu bytes",
					  (unsigned long long)need);
		a->ptr = eng_staging_alloc((size_t)need);
		if (!a->ptr)
			return cm_err_set(&ld->err, -ENOMEM,
					  "device %u (id %u): cannot map %llu bytes of staging", d,
					  ex->dev_ids[d], (unsigned long long)need);
		a->len = need;
		a->ours = 1;
	}
	return 0;
}

static void cb_shard(void *user, size_t shard)
{
	rl_loader *ld = user;

	/* A received shard is complete only after the runtime's broadcast:
	 * the engine saw its 0 expected bytes, which says nothing. */
	if (ld->deliver.received && ld->deliver.received[shard])
		return;
	ld->opt.on_shard(ld->opt.user, shard);
}

static int cb_progress(void *user, uint64_t done, uint64_t total)
{
	rl_loader *ld = user;

	return ld->opt.on_progress(ld->opt.user, done, total);
}

/* Reads added to complete hashed files (their headers): as large as the
 * plan's, at least 1 MiB, never past the in-flight bound. */
static uint32_t filler_bytes(const rl_loader *ld, const struct pl_exec *ex)
{
	return (uint32_t)CM_MIN(CM_MAX(ex->max_read, 1u << 20),
				CM_MIN(ld->opt.eo.inflight_bytes, 1u << 30));
}

/* The load of ex as a program of one batch: staging, the expected
 * digests, the program, then the executor over a host sink of the
 * staging areas. */
static int run_whole(rl_loader *ld, const struct pl_exec *ex, struct eng_stats *es)
{
	struct ex_exec x = { .ex = ex, .eo = ld->opt.eo, .file_stats = ld->last.files, .user = ld,
			     .on_shard = ld->opt.on_shard ? cb_shard : NULL,
			     .on_progress = ld->opt.on_progress ? cb_progress : NULL };
	struct ex_program prog = { 0 };
	struct ex_program_opts o = { 0 };
	struct sink_host host;
	uint8_t **staging = NULL;
	int ret = setup_areas(ld, ex);

	if (ret == 0)
		ret = ld_hash_prepare(&ld->last.hash, ld->opt.expect, ld->opt.nexpect, ld->opt.sha256_hf, ex,
				      &ld->err);
	o.hash = ld->last.hash.hash;
	o.chunk = filler_bytes(ld, ex);
	if (ret == 0 && (ret = ex_program_build(&prog, ex, &o)) < 0) /* RL_E_DTYPE, or memory */
		cm_err_set(&ld->err, ret, "building the load's program: %s", rl_strerror(ret));
	if (ret == 0 && !(staging = cm_calloc(ex->ndevs + 1, sizeof(*staging))))
		ret = cm_err_set(&ld->err, -ENOMEM, "out of memory");
	if (ret == 0) {
		for (unsigned d = 0; d < ex->ndevs; d++)
			staging[d] = ld->last.areas[d].ptr;
		x.prog = &prog;
		x.digests = ld->last.hash.got; /* ld_hash_prepare made them */
		x.sink = sink_host_init(&host, ex->ndevs, staging, ex->staging_bytes);
		ld->deliver.received = ex->received;
		ret = ex_execute(&x, &ld->err);
		sink_host_note(&host, &x.stats);
		ld->deliver.received = NULL;
		*es = x.stats;
	}
	ex_program_free(&prog);
	cm_free(staging);
	return ret;
}

static int run_exec(rl_loader *ld, const struct pl_exec *ex, double plan_s, const char *why)
{
	double t0 = cm_now_s();
	struct eng_stats es;
	int ret;

	if (ld->opt.staging_mode == RL_STAGING_STREAM)
		return ld_stream_exec(ld, ex, plan_s, why);
	ld_free_areas(ld);
	ld_hashrun_free(&ld->last.hash);
	memset(&es, 0, sizeof(es));
	ret = ld_reset_files(ld, ex) < 0 ? cm_err_set(&ld->err, -ENOMEM, "out of memory") : 0;
	if (ret == 0)
		ret = run_whole(ld, ex, &es);
	if (ret == 0)
		ret = ld_hash_check(&ld->last.hash, ex, &ld->err);
	ld_fill_stats(ld, ex, &es, plan_s, cm_now_s() - t0 + plan_s);
	ld_fill_stats_ex(ld, &es, why);
	/* Never hand out a partial result; but the areas stay mapped until
	 * the next run or destroy, since a runtime may still be copying the
	 * shards on_shard reported before the failure. */
	ld->last.failed = ret < 0;
	if (ret == 0)
		cm_err_clear(&ld->err);
	return ret;
}

/* The smallest unsplit request of the devices under ck's files (0: none
 * known), and the first device that has it. */
static uint32_t device_limit(const rl_ckpt *ck, char *dev, size_t devlen)
{
	uint32_t lim = 0;

	dev[0] = '\0';
	for (size_t i = 0; i < rl_ckpt_num_files(ck); i++) {
		struct eng_devq q;

		if (eng_devq_probe_path(rl_ckpt_file_path(ck, i), &q) <= 0 || !q.max_bytes)
			continue;
		if (!lim || q.max_bytes < lim) {
			lim = q.max_bytes;
			snprintf(dev, devlen, "%s", q.name);
		}
	}
	return lim;
}

/* rl_loader_request_bytes with the reason in why. */
static uint64_t request_bytes(const rl_loader *ld, const rl_ckpt *ck, char *why, size_t n)
{
	uint64_t req = ld->opt.request_bytes, lim;
	char dev[64];

	if (req) {
		snprintf(why, n, "requests %llu KiB (as set)", (unsigned long long)(req >> 10));
	} else {
		req = LD_REQUEST_BYTES;
		lim = device_limit(ck, dev, sizeof(dev));
		if (lim && lim < req)
			req = req / lim * lim;
		if (lim)
			snprintf(why, n, "requests %llu KiB (8 MiB in whole %u KiB requests of %s)",
				 (unsigned long long)(req >> 10), (unsigned)(lim >> 10), dev);
		else
			snprintf(why, n, "requests %llu KiB (8 MiB: no device limit known)",
				 (unsigned long long)(req >> 10));
	}
	if (ld->opt.staging_mode == RL_STAGING_STREAM)
		req = CM_MIN(req, ld_stream_request_cap(ld));
	/* A read never exceeds the in-flight bound. */
	return CM_MIN(req, ld->opt.eo.inflight_bytes);
}

int64_t rl_loader_request_bytes(rl_loader *ld, const rl_ckpt *ck)
{
	char why[192];

	if (!ld || !ck)
		return -EINVAL;
	return (int64_t)request_bytes(ld, ck, why, sizeof(why));
}

int rl_loader_run(rl_loader *ld, const rl_plan *plan)
{
	const struct pl_plan *pp;
	struct pl_exec ex;
	int ret;

	if (!ld)
		return -EINVAL;
	if (!plan)
		return cm_err_set(&ld->err, -EINVAL, "no plan");
	pp = plan->pl;
	if (!pp)
		return cm_err_set(&ld->err, RL_E_STATE, "plan not built");
	if (pl_plan_stats_only(pp))
		return cm_err_set(&ld->err, RL_E_STATE,
				  "plan built for statistics only (RL_PLAN_STATS_ONLY)");
	pl_plan_exec(pp, &ex);
	ret = run_exec(ld, &ex, 0, "");
	return ld_transport_run(ld, pp, plan->o.chunk, ret);
}

int rl_loader_load(rl_loader *ld, const rl_ckpt *ck, const rl_spec *spec,
		   int process, rl_plan **planp)
{
	double t0 = cm_now_s();
	char why[192];
	const struct pl_plan *pp;
	struct pl_exec ex;
	rl_plan *plan;
	int ret;

	if (planp)
		*planp = NULL;
	if (!ld)
		return -EINVAL;
	if (!planp)
		return cm_err_set(&ld->err, -EINVAL, "planp is NULL");
	plan = rl_plan_create();
	if (!plan)
		return cm_err_set(&ld->err, -ENOMEM, "out of memory");
	ret = rl_plan_set(plan, RL_PLAN_PROCESS, process);
	if (ret == 0 && ck)
		ret = rl_plan_set(plan, RL_PLAN_CHUNK_BYTES,
				  (int64_t)request_bytes(ld, ck, why, sizeof(why)));
	if (ret == 0)
		ret = rl_plan_build(plan, ck, spec);
	if (ret < 0) {
		cm_err_set(&ld->err, ret, "%s", rl_plan_errmsg(plan));
		rl_plan_destroy(plan);
		return ld_transport_run(ld, NULL, 0, ret); /* the others learn it */
	}
	pp = plan->pl;
	pl_plan_exec(pp, &ex);
	ret = run_exec(ld, &ex, cm_now_s() - t0, why);
	ret = ld_transport_run(ld, pp, plan->o.chunk, ret);
	if (ret < 0) {
		rl_plan_destroy(plan);
		return ret;
	}
	*planp = plan;
	return 0;
}

void *rl_loader_staging(const rl_loader *ld, unsigned dev, size_t *len)
{
	if (!ld || ld->last.failed || dev >= ld->last.nareas || !ld->last.areas[dev].ptr) {
		if (len)
			*len = 0;
		return NULL;
	}
	if (len)
		*len = (size_t)ld->last.areas[dev].len;
	return ld->last.areas[dev].ptr;
}

/* A size-tagged struct (its first member: size_t size): the first
 * min(*out's size, len) bytes of src go to out, and its size says how many. */
static void copy_tagged(void *out, const void *src, size_t len)
{
	size_t n = CM_MIN(*(size_t *)out, len);

	memcpy((char *)out + sizeof(size_t), (const char *)src + sizeof(size_t),
	       n - sizeof(size_t));
	*(size_t *)out = n;
}

/* The common checks of the size-tagged getters. */
static int tagged_ok(const rl_loader *ld, const void *out)
{
	if (!ld || !out || *(const size_t *)out < sizeof(size_t))
		return -EINVAL;
	return ld->last.have_stats ? 0 : RL_E_STATE;
}

int rl_loader_get_stats(const rl_loader *ld, rl_load_stats *out)
{
	int ret = tagged_ok(ld, out);

	if (ret == 0)
		copy_tagged(out, &ld->last.stats, sizeof(ld->last.stats));
	return ret;
}

size_t rl_loader_num_files(const rl_loader *ld)
{
	return ld && ld->last.have_stats ? ld->last.nfiles : 0;
}

int rl_loader_get_file_stats(const rl_loader *ld, size_t file, rl_file_stats *out)
{
	rl_file_stats fs;
	const struct eng_file_stat *f;
	int ret = tagged_ok(ld, out);

	if (ret < 0)
		return ret;
	if (file >= ld->last.nfiles || !ld->last.files)
		return -EINVAL;
	f = ld->last.files + file;
	memset(&fs, 0, sizeof(fs));
	fs.file = ld->last.file_index[file];
	fs.mode = f->mode; /* the same values: ENG_FILE_* == RL_FILE_* */
	fs.why = f->why;   /* and ENG_WHY_* == RL_WHY_* */
	fs.bytes_needed = f->needed;
	fs.bytes_resident = f->resident;
	snprintf(fs.device, sizeof(fs.device), "%s", f->q.name);
	fs.max_request_bytes = f->q.max_bytes;
	fs.max_segments = f->q.max_segments;
	fs.optimal_io_bytes = f->q.optimal_bytes;
	if (file < ld->last.hash.nfiles) {
		fs.sha256_state = ld->last.hash.state[file];
		if (ld->last.hash.hash[file])
			ld_sha256_hex(ld->last.hash.got[file], fs.sha256);
	}
	copy_tagged(out, &fs, sizeof(fs));
	return 0;
}

void *rl_staging_alloc(size_t len)
{
	return len ? eng_staging_alloc(len) : NULL;
}

void rl_staging_free(void *p, size_t len)
{
	eng_staging_free(p, len);
}

const char *rl_loader_errmsg(const rl_loader *ld)
{
	return ld ? ld->err.msg : "";
}

void rl_loader_destroy(rl_loader *ld)
{
	if (!ld)
		return;
	ld_free_areas(ld);
	ld_stream_free(ld);
	ld_dev_free(ld);
	cm_free(ld->opt.caller);
	cm_free(ld->last.files);
	cm_free(ld->last.file_index);
	rl_loader_expect_sha256(ld, NULL, NULL);
	ld_hashrun_free(&ld->last.hash);
	cm_free(ld);
}

int rl_loader_expect_sha256(rl_loader *ld, const char *file, const char *hex)
{
	struct ld_expect *x;
	uint8_t sha[32];

	if (!ld)
		return -EINVAL;
	if (!file && !hex) {
		for (size_t i = 0; i < ld->opt.nexpect; i++)
			cm_free(ld->opt.expect[i].name);
		cm_free(ld->opt.expect);
		ld->opt.expect = NULL;
		ld->opt.nexpect = 0;
		return 0;
	}
	if (!file || !file[0])
		return cm_err_set(&ld->err, RL_E_INVALID_ARG, "expected SHA-256: no file named");
	if (ld_parse_sha256(hex, sha) < 0)
		return cm_err_set(&ld->err, RL_E_INVALID_ARG,
				  "%s: expected SHA-256 is not 64 hex digits", file);
	x = cm_reallocarray(ld->opt.expect, ld->opt.nexpect + 1, sizeof(*x));
	if (!x)
		return cm_err_set(&ld->err, -ENOMEM, "out of memory");
	ld->opt.expect = x;
	x += ld->opt.nexpect;
	x->name = cm_strdup(file);
	if (!x->name)
		return cm_err_set(&ld->err, -ENOMEM, "out of memory");
	memcpy(x->sha, sha, 32);
	ld->opt.nexpect++;
	return 0;
}
