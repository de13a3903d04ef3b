/*
 * test_cuda.c - streaming loads delivered to CUDA devices, through the
 * fake driver (tests/fakecuda: device memory is host memory, copies run
 * late on a thread per stream, reading their source only then): random
 * checkpoints and shardings, every backend, one and three workers,
 * compared byte for byte with a whole-staging load; windows never reused
 * before their copies finished (many small windows, slow copies); several
 * spec devices on one GPU; the caller's device pointers; a strided box as
 * one 2D copy; cancellation; every injected fault (out of memory at the
 * Nth allocation, a failing copy, a context error, no such device, no
 * driver) fails the load cleanly and leaves nothing allocated, pinned or
 * in flight.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../api/loader_internal.h"
#include "../exec/execute.h"
#include "../sink/cuda.h"
#include "../sink/cuda_drv.h"
#include "ckpt_util.h"
#include "fakecuda/fakecuda.h"
#include "harness.h"
#include "plan_fixture.h"
#include "common.h"
#include "ringload.h"

static rl_backend cur = RL_BACKEND_IO_URING;
static unsigned cur_workers = 1;

static fakecuda_reset_fn fake_reset;
static fakecuda_stats_fn fake_stats;
static fakecuda_host_fn fake_host;
static fakecuda_log_fn fake_log;
static void *fake_h;
static char fake_path[PATH_MAX];

static void select_backend(rl_backend b, unsigned workers)
{
	cur = b;
	cur_workers = workers;
}

/* The fake driver beside this program (build/tests/fakecuda/). */
static int fake_open(void)
{
	void *h = fakecuda_open(fake_path, sizeof(fake_path));

	if (!h)
		return -1;
	fake_h = h;
	fake_log = (fakecuda_log_fn)(uintptr_t)dlsym(h, "fakecuda_log");
	fake_reset = (fakecuda_reset_fn)(uintptr_t)dlsym(h, "fakecuda_reset");
	fake_stats = (fakecuda_stats_fn)(uintptr_t)dlsym(h, "fakecuda_stats");
	fake_host = (fakecuda_host_fn)(uintptr_t)dlsym(h, "fakecuda_host");
	return fake_reset && fake_stats && fake_host ? 0 : -1;
}

/* The fault environment of one test: names=values, then a reset. */
static void fake_env(const char *devices, const char *oom_at, const char *fail_copy_at,
		     const char *ctx_fail, const char *delay_us)
{
	setenv("FAKECUDA_DEVICES", devices, 1);
	setenv("FAKECUDA_OOM_AT", oom_at, 1);
	setenv("FAKECUDA_FAIL_COPY_AT", fail_copy_at, 1);
	setenv("FAKECUDA_CTX_FAIL", ctx_fail, 1);
	setenv("FAKECUDA_DELAY_US", delay_us, 1);
	static const char *const more[] = {
		"FAKECUDA_FAIL_RECORD_AT", "FAKECUDA_NO_DATA", "FAKECUDA_FAIL_COPY_ERR",
		"FAKECUDA_PUSH_FAIL_AT", "FAKECUDA_MAX_PITCH", "FAKECUDA_REGISTER_FAIL",
		"FAKECUDA_HOSTALLOC_FAIL", "FAKECUDA_MEM_FREE",
	};

	for (size_t i = 0; i < CM_ARRAY_SIZE(more); i++)
		unsetenv(more[i]);
	fake_reset();
}

/* One more fault of the fake driver (after fake_env): name=value. */
static void fake_also(const char *name, const char *value)
{
	setenv(name, value, 1);
	fake_reset();
}

/* A random checkpoint under a random spec over a mesh up to 3x3. */
static int fixture_random(struct fixture *f)
{
	return fixture_random_ckpt(f, "c.safetensors", 0, NULL, 64 << 10);
}

/* 16 tensors of 256 KiB split over 2 devices: many windows at 256 KiB. */
static int fixture_big(struct fixture *f)
{
	static const char spec[] = "{\"mesh\":{\"shape\":[2],\"axes\":[\"d\"]},"
				   "\"rules\":[{\"match\":\".*\",\"spec\":[\"d\"]}]}";
	char *path = tmp_path("big.safetensors"), hex[65];

	if (write_hashed_ckpt(path, 16, 256 << 10, hex) < 0)
		return -EIO;
	return fixture_build(f, path, spec, strlen(spec), 64 << 10);
}

/* ------------------------------------------------------------------ */
/* Loading */

struct seen {
	unsigned *count;        /* per shard: shard callbacks */
	size_t n;
};

static void on_shard(void *user, size_t shard)
{
	struct seen *s = user;

	if (shard < s->n)
		s->count[shard]++;
}

static rl_loader *cuda_loader(uint64_t budget, const int32_t *map, uint32_t nmap)
{
	rl_cuda_opts o = { .size = sizeof(o), .ndevs = nmap, .device_map = map };
	rl_loader *ld = rl_loader_create();

	if (!ld)
		return NULL;
	rl_loader_set(ld, RL_OPT_BACKEND, cur);
	rl_loader_set(ld, RL_OPT_WORKERS, cur_workers);
	rl_loader_set(ld, RL_OPT_STAGING_BUDGET, (int64_t)budget);
	if (rl_loader_set_cuda(ld, &o) < 0) {
		rl_loader_destroy(ld);
		return NULL;
	}
	return ld;
}

/* 0 when every shard's device bytes (the library's areas) equal the
 * oracle's; else the first shard that differs + 1. */
static size_t first_wrong(const struct fixture *f, rl_loader *ld, const unsigned long long *dest)
{
	for (size_t i = 0; i < f->nshards; i++) {
		rl_shard_info si;
		uint64_t ptr = 0, bytes = 0;

		if (rl_plan_shard(f->plan, i, &si) < 0)
			return i + 1;
		if (dest)
			ptr = dest[i];
		else if (rl_loader_cuda_area(ld, si.device, &ptr, &bytes) < 0 ||
			 rl_loader_cuda_shard(ld, i, &ptr) < 0 || (si.nbytes && ptr % 256))
			return i + 1; /* each in the area, 256-byte aligned */
		if (si.nbytes && (!ptr || memcmp(fake_host(ptr), f->ref[si.device] + si.offset,
						  si.nbytes)))
			return i + 1;
	}
	return 0;
}

/* Nothing allocated, pinned, retained or in flight (after destroy). */
static int fake_clean(char *why, size_t cap)
{
	struct fakecuda_stats st;

	fake_stats(&st);
	snprintf(why, cap, "allocs %ld streams %ld events %ld ctx %ld pinned %ld host %ld "
		 "inflight %ld", st.allocs, st.streams, st.events, st.ctx_refs, st.registered,
		 st.host_allocs, st.inflight);
	return !st.allocs && !st.streams && !st.events && !st.ctx_refs && !st.registered &&
	       !st.host_allocs && !st.inflight;
}

/* Loads f to the fake GPUs twice on one loader, checks bytes, shard
 * callbacks, pinning and bounds, and that destroy frees everything. */
static void load_and_check(struct fixture *f, uint64_t budget, const int32_t *map, uint32_t nmap)
{
	struct seen s = { calloc(f->nshards + 1, sizeof(unsigned)), f->nshards };
	rl_loader *ld = cuda_loader(budget, map, nmap);
	struct fakecuda_stats st;
	char why[160];
	size_t bad;

	CHECK(ld && s.count);
	rl_loader_set_callbacks(ld, on_shard, NULL, &s);
	for (int round = 0; round < 2; round++) {
		int ret = rl_loader_run(ld, f->plan);

		CHECKF(ret == 0, "round %d: %d %s", round, ret, rl_loader_errmsg(ld));
		bad = first_wrong(f, ld, NULL);
		CHECKF(!bad, "round %d: shard %zu differs on the device", round, bad - 1);
		for (size_t i = 0; i < f->nshards; i++)
			CHECKF(s.count[i] == (unsigned)round + 1, "shard %zu reported %u times", i,
			       s.count[i]);
		fake_stats(&st);
		CHECK_EQ(st.inflight, 0);
		CHECK_EQ(st.out_of_bounds, 0);
		CHECK_EQ(st.unpinned, 0);      /* every copy from the registered pool */
		CHECK_EQ(st.no_context, 0);
		CHECK_EQ(st.registered, 1);    /* pinned once, kept across loads */
	}
	rl_loader_destroy(ld);
	free(s.count);
	CHECKF(fake_clean(why, sizeof(why)), "after destroy: %s", why);
}

/* One load of f by ld (budget: its budget, 0 the default): at most want
 * bytes pinned, as the stats' windows say. */
static void pinned_at_most(struct fixture *f, rl_loader *ld, uint64_t budget, uint64_t want)
{
	struct fakecuda_stats st;
	rl_load_stats ls = { .size = sizeof(ls) };
	int ret = ld ? rl_loader_run(ld, f->plan) : -ENOMEM;
	size_t bad = ret == 0 ? first_wrong(f, ld, NULL) : 0;

	CHECKF(ret == 0, "budget %" PRIu64 ": %d %s", budget, ret, rl_loader_errmsg(ld));
	CHECKF(!bad, "budget %" PRIu64 ": shard %zu differs", budget, bad - 1);
	fake_stats(&st);
	CHECK_EQ(st.registered, 1);
	CHECKF(st.pinned_bytes > 0 && st.pinned_bytes <= want,
	       "budget %" PRIu64 ": %llu bytes pinned, at most %" PRIu64 " wanted", budget,
	       st.pinned_bytes, want);
	CHECK(rl_loader_get_stats(ld, &ls) == 0);
	CHECK_EQ(ls.stream_windows * ls.stream_window_bytes, st.pinned_bytes);
}

/* Loads f with the default budget (up to 1 GiB) and with a budget below
 * the plan: the pool pinned is at most the plan's staging rounded up to
 * pages (at least the 64 KiB of the smallest pool), or the budget. Before,
 * every load pinned its whole budget. */
static void pins_at_most_the_plan_of(struct fixture *f)
{
	uint64_t plan = 0;

	for (unsigned d = 0; d < f->ndev; d++)
		plan += cm_align_up(f->ref_len[d], 4096);
	plan = CM_MAX(plan, 64u << 10);
	for (int small = 0; small < 2 && !th_failed(); small++) {
		uint64_t budget = small ? CM_MAX(cm_align_down(plan / 2, 4096), 64u << 10) : 0;
		rl_loader *ld = cuda_loader(budget, NULL, 0);

		pinned_at_most(f, ld, budget, small ? budget : plan);
		rl_loader_destroy(ld);
	}
}

static void pins_at_most_the_plan(void)
{
	struct fixture f;
	int ret;

	fake_env("9", "", "", "", "50");
	for (int it = 0; it < 3 && !th_failed(); it++) {
		ret = fixture_random(&f);
		CHECKF(ret == 0, "fixture: %d", ret);
		pins_at_most_the_plan_of(&f);
		fixture_free(&f);
	}
	ret = fixture_big(&f); /* 4 MiB: two windows */
	CHECKF(ret == 0, "fixture: %d", ret);
	pins_at_most_the_plan_of(&f);
	fixture_free(&f);
}

/* Reads of 64 KiB from 32 MiB under the default budget (up to 1 GiB):
 * the pool pinned is what keeps the medium busy (two windows of the
 * engine's depth of reads, a few per worker, or 8 MiB), as the stats say,
 * not the 32 MiB of the load. Before, it was the load's staging. */
static void pins_the_medium(void)
{
	static const char spec[] = "{\"mesh\":{\"shape\":[2],\"axes\":[\"d\"]},"
				   "\"rules\":[{\"match\":\".*\",\"spec\":[\"d\"]}]}";
	char *path = tmp_path("medium.safetensors"), hex[65];
	struct fixture f;
	rl_load_stats ls = { .size = sizeof(ls) };
	rl_loader *ld;
	uint64_t bound;
	int ret = write_hashed_ckpt(path, 16, 2u << 20, hex) < 0 ? -EIO :
		  fixture_build(&f, path, spec, strlen(spec), 64u << 10);

	fake_env("9", "", "", "", "50");
	CHECKF(ret == 0, "fixture: %d", ret);
	ld = cuda_loader(0, NULL, 0);
	pinned_at_most(&f, ld, 0, 32u << 20);
	CHECK(ld && rl_loader_get_stats(ld, &ls) == 0);
	bound = 2 * CM_MAX(CM_MAX(4u, 2 * ls.workers), ls.queue_depth) *
		cm_align_up(ls.request_bytes, 4096);
	bound = CM_MAX(bound, 16u << 20);
	CHECKF(ls.stream_pool_limit == RL_POOL_BY_MEDIUM && ls.stream_windows == 2 &&
	       ls.stream_pool_bytes == ls.stream_pool_medium && ls.stream_pool_bytes <= bound &&
	       ls.stream_pool_bytes < (32u << 20),
	       "pool %llu by %u, medium %llu, at most %llu: %s",
	       (unsigned long long)ls.stream_pool_bytes, ls.stream_pool_limit,
	       (unsigned long long)ls.stream_pool_medium, (unsigned long long)bound, ls.shape);
	rl_loader_destroy(ld);
	fixture_free(&f);
}

static void random_plans(void)
{
	for (int it = 0; it < 4; it++) {
		struct fixture f;
		int ret = fixture_random(&f);
		static const uint64_t budgets[] = { 64 << 10, 256 << 10, 4 << 20 };

		fake_env("9", "", "", "", "50");
		CHECKF(ret == 0, "fixture: %d", ret);
		load_and_check(&f, budgets[th_rand() % 3], NULL, 0);
		fixture_free(&f);
		if (th_failed())
			return;
	}
}

/* Slow copies, windows of 128 KiB: a window refilled before its copies
 * ran would put the next window's bytes on the device. */
static void windows_wait_for_copies(void)
{
	struct fixture f;
	int ret = fixture_big(&f);

	fake_env("2", "", "", "", "2000");
	CHECKF(ret == 0, "fixture: %d", ret);
	load_and_check(&f, 256 << 10, NULL, 0);
	fixture_free(&f);
}

/* Occurrences of needle in hay. */
static int count_of(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/*
 * cuMemHostRegister refused (CUDA_ERROR_NOT_SUPPORTED, as on some
 * virtualised GPUs): copies go through cuMemHostAlloc memory; with that
 * refused too, synchronous copies from pageable memory. Each step loads
 * every byte right twice (slow copies through small windows), says why
 * in the statistics once, and leaves nothing after destroy. The load
 * failed with "cuMemHostRegister of the window pool failed" before.
 */
static void registration_refused(void)
{
	static const char *const says[] = {
		"CUDA: cuMemHostRegister refused (CUDA_ERROR_NOT_SUPPORTED (801)): copies through "
		"cuMemHostAlloc memory",
		"CUDA: cuMemHostRegister refused (CUDA_ERROR_NOT_SUPPORTED (801)), cuMemHostAlloc "
		"too (CUDA_ERROR_OUT_OF_MEMORY (2)): synchronous copies from pageable memory",
	};
	struct fixture f;
	int ret = fixture_big(&f);
	char why[200];

	CHECKF(ret == 0, "fixture: %d", ret);
	for (int step = 0; step < 2; step++) {
		rl_load_stats st = { .size = sizeof(st) };
		struct fakecuda_stats fs;
		rl_loader *ld;

		fake_env("2", "", "", "", "1000");
		fake_also("FAKECUDA_REGISTER_FAIL", "801");
		if (step)
			fake_also("FAKECUDA_HOSTALLOC_FAIL", "1");
		ld = cuda_loader(256 << 10, NULL, 0);
		CHECK(ld);
		for (int round = 0; round < 2; round++) {
			size_t bad;

			ret = rl_loader_run(ld, f.plan);
			CHECKF(ret == 0, "step %d: %d %s", step, ret, rl_loader_errmsg(ld));
			bad = first_wrong(&f, ld, NULL);
			CHECKF(!bad, "step %d: shard %zu differs on the device", step, bad - 1);
			CHECK(rl_loader_get_stats(ld, &st) == 0);
			CHECKF(st.fallback_flags & (step ? RL_FALLBACK_CUDA_PAGEABLE :
						    RL_FALLBACK_CUDA_HOST_ALLOC), "flags %#x",
			       st.fallback_flags);
			CHECKF(strstr(st.fallbacks, says[step]) && count_of(st.fallbacks, "CUDA:") == 1,
			       "%s", st.fallbacks);
			fake_stats(&fs);
			CHECK_EQ(fs.registered, 0);
			CHECK_EQ(fs.host_allocs, step ? 0 : 1);
			CHECKF(step ? fs.unpinned > 0 : fs.unpinned == 0, "step %d: %ld unpinned copies",
			       step, fs.unpinned);
		}
		rl_loader_destroy(ld);
		CHECKF(fake_clean(why, sizeof(why)), "step %d, after destroy: %s", step, why);
	}
	fixture_free(&f);
}

/* F32 and F16 tensors of random bits (NaNs among them) converted to
 * BF16 (RL_PLAN_DTYPE) on their way to two fake GPUs: the host sink
 * converts into the pinned windows, whose pieces are copied as they
 * are. The device bytes equal a whole host load of the plan, which
 * equals the file's elements through rl_dtype_convert. */
static void converted_dtype(void)
{
	static const char spec[] = "{\"mesh\":{\"shape\":[2],\"axes\":[\"d\"]},"
				   "\"rules\":[{\"match\":\".*\",\"spec\":[\"d\"]}]}";
	static const char hdr[] = "{\"a\":{\"dtype\":\"F32\",\"shape\":[256,300],"
				  "\"data_offsets\":[0,307200]},\"b\":{\"dtype\":\"F16\","
				  "\"shape\":[130,250],\"data_offsets\":[307200,372200]}}";
	size_t hl = (sizeof(hdr) - 1 + 7) / 8 * 8, n = 8 + hl + 372200;
	uint8_t *file = calloc(1, n), *conv = malloc(153600);
	char *path = tmp_path("dtype.safetensors");
	struct fixture f;
	rl_shard_info si;
	int ret;

	memcpy(file, &(uint64_t){ hl }, 8);
	memset(file + 8, ' ', hl);
	memcpy(file + 8, hdr, sizeof(hdr) - 1);
	for (size_t i = 8 + hl; i < n; i++)
		file[i] = (uint8_t)th_rand();
	CHECK(write_bytes(path, file, n) == 0);
	fixture_dtype = RL_DTYPE_BF16;
	ret = fixture_build(&f, path, spec, strlen(spec), 64 << 10);
	fixture_dtype = -1;
	CHECKF(ret == 0, "fixture: %d", ret);
	/* shard 0: rows 0-127 of "a", the first 153600 bytes of the file's
	 * data, on device 0 as 76800 BF16 */
	CHECK(rl_plan_shard(f.plan, 0, &si) == 0);
	CHECK(si.dtype == RL_DTYPE_BF16 && si.nbytes == 76800 && !strcmp(si.name, "a"));
	CHECK(rl_dtype_convert(RL_DTYPE_F32, RL_DTYPE_BF16, conv, file + 8 + hl, 38400) == 0);
	CHECK(!memcmp(f.ref[si.device] + si.offset, conv, si.nbytes));
	fake_env("2", "", "", "", "50");
	load_and_check(&f, 64 << 10, NULL, 0);
	fixture_free(&f);
	free(file);
	free(conv);
}

/* Both spec devices on GPU 0 (one stream, one context). */
static void shared_gpu(void)
{
	static const int32_t map[] = { 0, 0 };
	struct fixture f;
	int ret = fixture_big(&f);

	fake_env("1", "", "", "", "100");
	CHECKF(ret == 0, "fixture: %d", ret);
	load_and_check(&f, 1 << 20, map, 2);
	fixture_free(&f);
}

/* ------------------------------------------------------------------ */
/* The caller's device pointers (as torch's tensors) */

typedef int (*cu_alloc_fn)(unsigned long long *p, size_t n);
typedef int (*cu_free_fn)(unsigned long long p);
typedef int (*cu_retain_fn)(void **ctx, int dev);
typedef int (*cu_release_fn)(int dev);
typedef int (*cu_push_fn)(void *ctx);
typedef int (*cu_pop_fn)(void **ctx);

/* The fake driver's entry points a runtime would call itself. */
struct runtime {
	cu_alloc_fn alloc;
	cu_free_fn free;
	cu_retain_fn retain;
	cu_release_fn release;
	cu_push_fn push;
	cu_pop_fn pop;
};

static int runtime_get(struct runtime *r)
{
	void *h = dlopen(fake_path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);

	if (!h)
		return -1;
	r->alloc = (cu_alloc_fn)(uintptr_t)dlsym(h, "cuMemAlloc_v2");
	r->free = (cu_free_fn)(uintptr_t)dlsym(h, "cuMemFree_v2");
	r->retain = (cu_retain_fn)(uintptr_t)dlsym(h, "cuDevicePrimaryCtxRetain");
	r->release = (cu_release_fn)(uintptr_t)dlsym(h, "cuDevicePrimaryCtxRelease_v2");
	r->push = (cu_push_fn)(uintptr_t)dlsym(h, "cuCtxPushCurrent_v2");
	r->pop = (cu_pop_fn)(uintptr_t)dlsym(h, "cuCtxPopCurrent_v2");
	dlclose(h);
	return r->alloc && r->free && r->retain && r->release && r->push && r->pop ? 0 : -1;
}

/* One device allocation per shard on GPU 0 (the runtime's tensors). */
static void caller_pointers(void)
{
	struct fixture f;
	struct runtime rt;
	unsigned long long *p = NULL;
	void *ctx = NULL, *old;
	rl_loader *ld = NULL;
	char why[160];
	int ret = fixture_big(&f);
	size_t bad;

	fake_env("1", "", "", "", "100");
	CHECKF(ret == 0, "fixture: %d", ret);
	CHECK(runtime_get(&rt) == 0 && rt.retain(&ctx, 0) == 0 && rt.push(ctx) == 0);
	p = calloc(f.nshards, sizeof(*p));
	for (size_t i = 0; p && i < f.nshards; i++) {
		rl_shard_info si;

		rl_plan_shard(f.plan, i, &si);
		CHECK(rt.alloc(&p[i], si.nbytes ? si.nbytes : 1) == 0);
	}
	ld = cuda_loader(512 << 10, (const int32_t[]){ 0, 0 }, 2);
	CHECK(ld);
	/* a shard without a pointer, then one too small: clear errors */
	CHECK(rl_loader_set_cuda_dest(ld, 0, p[0], 1 << 20) == 0);
	ret = rl_loader_run(ld, f.plan);
	CHECKF(ret == RL_E_STAGING && strstr(rl_loader_errmsg(ld), "shard 1 has no device pointer"),
	       "%d %s", ret, rl_loader_errmsg(ld));
	for (size_t i = 0; i < f.nshards; i++)
		rl_loader_set_cuda_dest(ld, i, p[i], i == 3 ? 5 : 1 << 20);
	ret = rl_loader_run(ld, f.plan);
	CHECKF(ret == RL_E_CUDA_MEMORY && strstr(rl_loader_errmsg(ld), "shard 3 needs"), "%d %s",
	       ret, rl_loader_errmsg(ld));
	rl_loader_set_cuda_dest(ld, 3, p[3], 1 << 20);
	ret = rl_loader_run(ld, f.plan);
	CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
	bad = first_wrong(&f, ld, p);
	CHECKF(!bad, "shard %zu differs on the device", bad - 1);
	rl_loader_destroy(ld);
	for (size_t i = 0; i < f.nshards; i++)
		rt.free(p[i]);
	rt.pop(&old);
	rt.release(0);
	free(p);
	fixture_free(&f);
	CHECKF(fake_clean(why, sizeof(why)), "after destroy: %s", why);
}

/* What shard_reported_after_its_bytes checks in on_shard. */
struct landed {
	const struct fixture *f;
	const unsigned long long *dest;
	unsigned *count;
	unsigned early;         /* shards reported before their bytes landed */
};

static void on_shard_landed(void *user, size_t shard)
{
	struct landed *l = user;
	rl_shard_info si;

	if (shard >= l->f->nshards || rl_plan_shard(l->f->plan, shard, &si) < 0)
		return;
	l->count[shard]++;
	if (si.nbytes && memcmp(fake_host(l->dest[shard]), l->f->ref[si.device] + si.offset,
				si.nbytes))
		l->early++;
}

/*
 * Issue 32's mutant (cu_report's seq < done made <=: a shard reported
 * while the fence after its last copy is outstanding): shards of 2 MiB
 * through two windows of 1 MiB (a 2 MiB budget: one window's copies in
 * flight while the other is read and waited for), copies landing 2 ms
 * late; when on_shard fires, the shard's device bytes (the caller's
 * pointers) are all there.
 */
static void shard_reported_after_its_bytes(void)
{
	static const char spec[] = "{\"mesh\":{\"shape\":[2],\"axes\":[\"d\"]},"
				   "\"rules\":[{\"match\":\".*\",\"spec\":[\"d\"]}]}";
	char *path = tmp_path("landed.safetensors"), hex[65];
	struct fixture f;
	struct runtime rt;
	struct landed l = { &f, NULL, NULL, 0 };
	unsigned long long *p = NULL;
	void *ctx = NULL, *old;
	rl_loader *ld = NULL;
	int ret = write_hashed_ckpt(path, 8, 4 << 20, hex) < 0 ? -EIO :
		  fixture_build(&f, path, spec, strlen(spec), 64 << 10);

	fake_env("1", "", "", "", "2000");
	CHECKF(ret == 0, "fixture: %d", ret);
	CHECK(runtime_get(&rt) == 0 && rt.retain(&ctx, 0) == 0 && rt.push(ctx) == 0);
	p = calloc(f.nshards, sizeof(*p));
	l.count = calloc(f.nshards, sizeof(*l.count));
	l.dest = p;
	CHECK(p && l.count);
	ld = cuda_loader(2 << 20, (const int32_t[]){ 0, 0 }, 2);
	CHECK(ld);
	for (size_t i = 0; i < f.nshards; i++) {
		rl_shard_info si;

		rl_plan_shard(f.plan, i, &si);
		CHECK(rt.alloc(&p[i], si.nbytes ? si.nbytes : 1) == 0);
		memset(fake_host(p[i]), 0xa5, si.nbytes);
		rl_loader_set_cuda_dest(ld, i, p[i], si.nbytes ? si.nbytes : 1);
	}
	rl_loader_set_callbacks(ld, on_shard_landed, NULL, &l);
	ret = rl_loader_run(ld, f.plan);
	CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
	CHECKF(l.early == 0, "%u of %zu shards reported before their bytes landed", l.early,
	       f.nshards);
	for (size_t i = 0; i < f.nshards; i++)
		CHECKF(l.count[i] == 1, "shard %zu reported %u times", i, l.count[i]);
	rl_loader_destroy(ld);
	for (size_t i = 0; i < f.nshards; i++)
		rt.free(p[i]);
	rt.pop(&old);
	rt.release(0);
	free(p);
	free(l.count);
	fixture_free(&f);
}

/* ------------------------------------------------------------------ */
/* Faults: each fails the load with its code and leaves nothing behind */

/* Loads f once expecting code (0: success); then checks the loader
 * holds no device memory and nothing is in flight, and destroys it. */
static int load_expect_sha(struct fixture *f, int code, const char *msg_part,
			   const int32_t *map, uint32_t nmap, const char *file, const char *hex)
{
	rl_loader *ld = cuda_loader(256 << 10, map, nmap);
	struct fakecuda_stats st;
	char why[160];
	int ret;

	if (!ld)
		return -1;
	if (hex && rl_loader_expect_sha256(ld, file, hex) < 0) {
		printf("    rl_loader_expect_sha256: %s\n", rl_loader_errmsg(ld));
		rl_loader_destroy(ld);
		return -1;
	}
	ret = rl_loader_run(ld, f->plan);
	fake_stats(&st);
	if (ret != code || (msg_part && !strstr(rl_loader_errmsg(ld), msg_part)) ||
	    (code && st.allocs) || st.inflight) {
		printf("    expected %d (%s), got %d: %s; allocs %ld inflight %ld\n", code,
		       msg_part ? msg_part : "", ret, rl_loader_errmsg(ld), st.allocs, st.inflight);
		rl_loader_destroy(ld);
		return -1;
	}
	rl_loader_destroy(ld);
	if (!fake_clean(why, sizeof(why))) {
		printf("    after destroy: %s\n", why);
		return -1;
	}
	return 0;
}

static int load_expect(struct fixture *f, int code, const char *msg_part, const int32_t *map,
		       uint32_t nmap)
{
	return load_expect_sha(f, code, msg_part, map, nmap, NULL, NULL);
}

/* Out of memory at the 1st, 2nd, ... allocation until the load fits. */
static void out_of_memory_at_n(void)
{
	struct fixture f;
	int ret = fixture_big(&f);
	char n[16];

	CHECKF(ret == 0, "fixture: %d", ret);
	for (int i = 1; i <= 3; i++) {
		snprintf(n, sizeof(n), "%d", i);
		fake_env("2", i <= 2 ? n : "", "", "", "0");
		CHECKF(load_expect(&f, i <= 2 ? RL_E_CUDA_MEMORY : 0,
				   i <= 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : NULL, NULL, 0) == 0,
		       "allocation %d", i);
	}
	fixture_free(&f);
}

/*
 * The Nth copy fails on its stream: its window's event reports it. A
 * launch failure is sticky, as on a real driver: the load says the
 * process must restart (RL_E_CUDA_STICKY), and so does the next load,
 * rather than a plain driver error (RL_E_CUDA before).
 */
static void failing_copy(void)
{
	static const char restart[] = "CUDA_ERROR_LAUNCH_FAILED (719), a sticky error: the GPU's "
				      "context is unusable; the process must restart";
	static const char *const at[] = { "1", "7", "40" };
	struct fixture f;
	int ret = fixture_big(&f);

	CHECKF(ret == 0, "fixture: %d", ret);
	for (size_t i = 0; i < CM_ARRAY_SIZE(at); i++) {
		fake_env("2", "", at[i], "", "20");
		CHECKF(load_expect(&f, RL_E_CUDA_STICKY, restart, NULL, 0) == 0, "copy %s", at[i]);
		CHECKF(load_expect(&f, RL_E_CUDA_STICKY, restart, NULL, 0) == 0,
		       "after copy %s: the next load", at[i]);
	}
	fake_env("2", "", "", "", "0"); /* a new process */
	CHECK(load_expect(&f, 0, NULL, NULL, 0) == 0);
	fixture_free(&f);
}

static void context_error(void)
{
	struct fixture f;
	int ret = fixture_big(&f);

	CHECKF(ret == 0, "fixture: %d", ret);
	fake_env("2", "", "", "1", "0");
	CHECK(load_expect(&f, RL_E_CUDA, "cuDevicePrimaryCtxRetain failed", NULL, 0) == 0);
	fixture_free(&f);
}

/* Two spec devices on one GPU's machine: identity names device 1. */
static void no_such_device(void)
{
	static const int32_t short_map[] = { 0 };
	struct fixture f;
	int ret = fixture_big(&f);

	CHECKF(ret == 0, "fixture: %d", ret);
	fake_env("1", "", "", "", "0");
	CHECK(load_expect(&f, RL_E_CUDA_DEVICE, "no CUDA device 1 (1 device)", NULL, 0) == 0);
	CHECK(load_expect(&f, RL_E_CUDA_DEVICE, "spec device 1 has no CUDA device", short_map,
			  1) == 0);
	fixture_free(&f);
}

static int cancel_at_first(void *user, uint64_t done, uint64_t total)
{
	(void)user;
	return done > 0 && done < total;
}

static void cancel(void)
{
	struct fixture f;
	rl_loader *ld;
	char why[160];
	struct fakecuda_stats st;
	int ret = fixture_big(&f);

	CHECKF(ret == 0, "fixture: %d", ret);
	fake_env("2", "", "", "", "500");
	ld = cuda_loader(256 << 10, NULL, 0);
	CHECK(ld);
	rl_loader_set_callbacks(ld, NULL, cancel_at_first, NULL);
	ret = rl_loader_run(ld, f.plan);
	fake_stats(&st);
	CHECKF(ret == RL_E_CANCELED, "%d %s", ret, rl_loader_errmsg(ld));
	CHECK_EQ(st.inflight, 0);
	CHECK_EQ(st.allocs, 0);
	rl_loader_set_callbacks(ld, NULL, NULL, NULL);
	ret = rl_loader_run(ld, f.plan); /* the loader is whole again */
	CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
	CHECK(!first_wrong(&f, ld, NULL));
	rl_loader_destroy(ld);
	fixture_free(&f);
	CHECKF(fake_clean(why, sizeof(why)), "after destroy: %s", why);
}

/* ------------------------------------------------------------------ */
/* The review fixes of 2ece2ad, each with the fault it fixed */

struct cancel_at {
	uint64_t at;            /* cancel once done reaches it */
};

static int cancel_past(void *user, uint64_t done, uint64_t total)
{
	const struct cancel_at *c = user;

	return done >= c->at && done < total;
}

/*
 * A load canceled in any window, then the same loader loads again. With
 * two windows (budgets from 2 MiB), a failure while window 0 was read
 * again, window 1 still holding the last range's copies, left window 1
 * held for good: every later load was refused ("pieces of the last
 * streaming load not released").
 */
static void loads_after_a_failed_one(void)
{
	struct fixture f;
	struct cancel_at c;
	rl_loader *ld;
	char why[160];
	int ret = fixture_big(&f);

	CHECKF(ret == 0, "fixture: %d", ret);
	fake_env("2", "", "", "", "100");
	ld = cuda_loader(2 << 20, NULL, 0); /* two windows of 1 MiB, four ranges */
	CHECK(ld);
	for (unsigned j = 1; j < 16 && !th_failed(); j++) {
		c.at = (4ull << 20) * j / 16;
		rl_loader_set_callbacks(ld, NULL, cancel_past, &c);
		ret = rl_loader_run(ld, f.plan);
		if (ret != RL_E_CANCELED) {
			th_fail(__FILE__, __LINE__, "cancel at %llu: %d %s",
				(unsigned long long)c.at, ret, rl_loader_errmsg(ld));
			break;
		}
		rl_loader_set_callbacks(ld, NULL, NULL, NULL);
		ret = rl_loader_run(ld, f.plan);
		if (ret != 0 || first_wrong(&f, ld, NULL))
			th_fail(__FILE__, __LINE__, "after a cancel at %llu: %d %s",
				(unsigned long long)c.at, ret, rl_loader_errmsg(ld));
	}
	rl_loader_destroy(ld); /* failed or not: the later tests count what is alive */
	fixture_free(&f);
	CHECKF(fake_clean(why, sizeof(why)), "after destroy: %s", why);
}

/*
 * A load whose set-up fails after its device memory was allocated (here
 * the file changed since the checkpoint was opened: the engine's session
 * refuses it) frees that memory at once, not at the next load.
 */
static void setup_failure_frees_device_memory(void)
{
	struct fixture f;
	struct timespec ts[2] = { { 1000000000, 0 }, { 1000000000, 0 } };
	int ret = fixture_big(&f);

	CHECKF(ret == 0, "fixture: %d", ret);
	fake_env("2", "", "", "", "0");
	CHECK(utimensat(AT_FDCWD, tmp_path("big.safetensors"), ts, 0) == 0);
	CHECK(load_expect(&f, RL_E_FILE_CHANGED, "file changed since the checkpoint was opened",
			  NULL, 0) == 0);
	fixture_free(&f);
}

/*
 * A streaming load to the GPU whose file's SHA-256 differs (an expected
 * value wrong in its last digit) fails with RL_E_CHECKSUM and keeps no
 * device memory: the check comes before the load's allocations are kept
 * (they were, until the loader was destroyed).
 */
static void sha256_mismatch_frees_device_memory(void)
{
	struct fixture f;
	const char *path = tmp_path("big.safetensors");
	uint8_t d[32];
	char hex[65];
	int ret = fixture_big(&f);

	CHECKF(ret == 0, "fixture: %d", ret);
	CHECK(rl_sha256_file(path, d) == 0);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	fake_env("2", "", "", "", "0");
	CHECK(load_expect_sha(&f, 0, NULL, NULL, 0, path, hex) == 0);
	hex[63] = hex[63] == '0' ? '1' : '0';
	CHECK(load_expect_sha(&f, RL_E_CHECKSUM, "SHA-256", NULL, 0, path, hex) == 0);
	fixture_free(&f);
}

/*
 * cuEventRecord failing on the second GPU of a fence (the sink on its
 * own: a load's windows each hold one device's range, so its fences
 * record on one GPU): the event already recorded on the first goes back
 * to its pool and is destroyed with the sink. It leaked (1 event alive
 * after destroy).
 */
static void failed_record_keeps_no_event(void)
{
	static const int ord[] = { 0, 1 };
	struct cm_copy c0 = { .len = 100, .count = 1 },
		       c1 = { .len = 100, .count = 1, .dst = 8, .dev = 1, .shard = 1 };
	struct eng_sink s;
	struct cm_err e = { 0 };
	uint8_t src[4096] = { 7 };
	uint64_t t = 0;
	char why[160];
	int ret;

	fake_env("2", "", "", "", "100");
	fake_also("FAKECUDA_FAIL_RECORD_AT", "2");
	ret = cusink_create(ord, 2, 1, &s, &e);
	if (ret == 0)
		ret = cusink_alloc(&s, 0, 4096, &e);
	if (ret == 0)
		ret = cusink_alloc(&s, 1, 4096, &e);
	if (ret == 0)
		ret = s.ops->pin(s.state, src, sizeof(src), &e);
	if (ret == 0)
		ret = s.ops->copy(s.state, 0, &c0, src, &e);
	if (ret == 0)
		ret = s.ops->copy(s.state, 0, &c1, src, &e);
	if (ret == 0)
		ret = s.ops->fence(s.state, 0, &t, &e);
	unsetenv("FAKECUDA_FAIL_RECORD_AT"); /* the CLI's tests inherit the environment */
	CHECKF(ret == RL_E_CUDA && strstr(e.msg, "cuEventRecord failed"), "%d %s", ret, e.msg);
	s.ops->finish(s.state, 0, &e);
	cusink_destroy(&s);
	CHECKF(fake_clean(why, sizeof(why)), "after destroy: %s", why);
}

/*
 * A piece longer than 4 GiB (a window of a budget past 8 GiB) reaches
 * the GPU whole: every byte of it is copied, in copies of at most 1 GiB.
 * Its length was cut to 32 bits (4 KiB of 5 GiB + 4 KiB copied, and the
 * shard reported whole). The fake driver reserves the device memory and
 * counts the bytes without moving them; the window is never touched.
 */
static void piece_over_4gib(void)
{
	static const int ord[] = { 0 };
	const uint64_t len = (5ull << 30) + 4096, dst = 0;
	struct pl_shard sh = { 0, 0, 0, len };
	struct pl_exec ex = { .nshards = 1, .shards = &sh };
	struct ex_piece pc = { 0, 0, 0, len, 0 };
	void *pool = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	struct fakecuda_stats st;
	struct eng_sink s;
	struct cm_err e = { 0 };
	uint64_t t = 0;
	char why[160];
	int ret;

	CHECK(pool != MAP_FAILED);
	fake_env("1", "", "", "", "0");
	fake_also("FAKECUDA_NO_DATA", "1");
	ret = cusink_create(ord, 1, 1, &s, &e);
	if (ret == 0)
		ret = cusink_alloc(&s, 0, len, &e);
	if (ret == 0)
		ret = s.ops->pin(s.state, pool, len, &e);
	if (ret == 0)
		ret = ex_device_copy(&s, &ex, &dst, &pc, pool, &e);
	if (ret == 0)
		ret = s.ops->fence(s.state, 0, &t, &e);
	if (ret == 0)
		ret = s.ops->wait(s.state, 0, t, &e);
	if (s.ops) {
		s.ops->finish(s.state, ret == 0, &e);
		fake_stats(&st);
		s.ops->unpin(s.state, NULL, 0);
		cusink_destroy(&s);
	}
	unsetenv("FAKECUDA_NO_DATA"); /* the CLI's tests inherit the environment */
	munmap(pool, len);
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	CHECKF(st.bytes_copied == len && st.copies == 6 && !st.out_of_bounds,
	       "%llu of %llu bytes copied, %ld copies, %ld out of bounds", st.bytes_copied,
	       (unsigned long long)len, st.copies, st.out_of_bounds);
	CHECKF(fake_clean(why, sizeof(why)), "after destroy: %s", why);
}

/* ------------------------------------------------------------------ */
/* The sink on its own: a strided box is one cuMemcpy2DAsync */

static void strided_box_2d(void)
{
	static const int ord[] = { 1 };
	struct eng_sink s;
	struct cm_err e = { 0 };
	uint8_t src[4096], *dev;
	struct cm_copy c = { .src = 16, .len = 100, .count = 7, .src_stride = 300, .dst = 64 };
	struct fakecuda_stats st;
	uint64_t t;
	char why[160];

	fake_env("2", "", "", "", "100");
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 31 + 7);
	CHECKF(cusink_create(ord, 1, 2, &s, &e) == 0, "%s", e.msg);
	CHECKF(cusink_alloc(&s, 0, 1024, &e) == 0, "%s", e.msg);
	CHECK(s.ops->pin(s.state, src, sizeof(src), &e) == 0);
	CHECKF(s.ops->copy(s.state, 1, &c, src, &e) == 0, "%s", e.msg);
	c.dst = 1000; /* 700 bytes at 1000 of 1024: refused before any byte moves */
	CHECK(s.ops->copy(s.state, 1, &c, src, &e) == RL_E_CUDA_MEMORY);
	CHECK(s.ops->fence(s.state, 1, &t, &e) == 0 && t == 1);
	CHECK(s.ops->wait(s.state, 1, t, &e) == 0);
	dev = fake_host(cusink_base(&s, 0));
	for (unsigned k = 0; k < 7; k++)
		CHECKF(!memcmp(dev + 64 + k * 100, src + 16 + k * 300, 100), "row %u", k);
	fake_stats(&st);
	CHECK_EQ(st.copies_2d, 1);
	CHECK_EQ(st.out_of_bounds, 0);
	CHECK(s.ops->finish(s.state, 1, &e) == 0);
	cusink_destroy(&s);
	cusink_destroy(&s); /* twice: a no-op */
	CHECKF(fake_clean(why, sizeof(why)), "after destroy: %s", why);
}

/*
 * Checks the fake's call log: the caller's stream `cs` gets an event
 * recorded that the library's stream waits for before its first copy,
 * and after its last copy the library's stream gets an event recorded
 * that cs waits for. NULL when so, else what is wrong.
 */
static const char *stream_order(char *log, const char *cs)
{
	char ours[32] = "", ev[32] = "", ev2[32] = "", a[32], b[32], c[32];
	int waited = 0, copied = 0, after = 0;

	for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
		int n = sscanf(line, "%31s %31s %31s", a, b, c);

		if (n == 3 && !strcmp(a, "record") && !strcmp(c, cs) && !*ours)
			snprintf(ev, sizeof(ev), "%s", b);
		else if (n == 3 && !strcmp(a, "wait") && strcmp(b, cs) && *ev && !strcmp(c, ev) &&
			 !*ours) {
			snprintf(ours, sizeof(ours), "%s", b);
			waited = 1;
		} else if (n == 2 && !strcmp(a, "copy") && strcmp(b, cs)) {
			if (!waited || strcmp(b, ours))
				return "a copy before the library's stream waited for the caller's";
			copied = 1;
			after = 0;
		} else if (n == 3 && !strcmp(a, "record") && copied && !strcmp(c, ours)) {
			snprintf(ev2, sizeof(ev2), "%s", b);
		} else if (n == 3 && !strcmp(a, "wait") && !strcmp(b, cs) && *ev2 && !strcmp(c, ev2)) {
			after = 1;
		}
	}
	if (!copied)
		return "no copy";
	return after ? NULL : "the caller's stream does not wait for the last copies";
}

/*
 * The caller's stream (torch's current one): copies into its tensors
 * start after the work it queued (here: slow writes of junk to shard
 * 0's tensor, which would land over the loaded bytes) and it waits for
 * the copies. Both orders are checked in the fake's call log, for a
 * stream and for the NULL (legacy default) stream; the caller's context
 * stays current.
 */
static void caller_stream_order(void)
{
	typedef int (*stream_fn)(void **, unsigned);
	typedef int (*copy_fn)(unsigned long long, const void *, size_t, void *);
	stream_fn screate = (stream_fn)(uintptr_t)dlsym(fake_h, "cuStreamCreate");
	int (*sdestroy)(void *) = (int (*)(void *))(uintptr_t)dlsym(fake_h, "cuStreamDestroy_v2");
	copy_fn hcopy = (copy_fn)(uintptr_t)dlsym(fake_h, "cuMemcpyHtoDAsync_v2");
	int (*getctx)(void **) = (int (*)(void **))(uintptr_t)dlsym(fake_h, "cuCtxGetCurrent");
	static uint8_t junk[256 << 10];
	static char log[1 << 16];
	struct fixture f;
	struct runtime rt;
	unsigned long long p[32];
	void *ctx = NULL, *cur_ctx = NULL, *cs = NULL;
	rl_loader *ld;
	char csn[32];
	const char *why;
	int ret = fixture_big(&f);
	size_t bad;

	fake_env("1", "", "", "", "3000");
	CHECKF(ret == 0 && f.nshards <= 32, "fixture: %d, %zu shards", ret, f.nshards);
	CHECK(screate && sdestroy && hcopy && getctx && fake_log);
	CHECK(runtime_get(&rt) == 0 && rt.retain(&ctx, 0) == 0 && rt.push(ctx) == 0);
	CHECK(screate(&cs, 0) == 0);
	memset(junk, 0xee, sizeof(junk));
	ld = cuda_loader(512 << 10, (const int32_t[]){ 0, 0 }, 2);
	CHECK(ld);
	for (size_t i = 0; i < f.nshards; i++) {
		rl_shard_info si;

		rl_plan_shard(f.plan, i, &si);
		CHECK(si.nbytes <= sizeof(junk) && rt.alloc(&p[i], si.nbytes) == 0);
		rl_loader_set_cuda_dest(ld, i, p[i], si.nbytes);
	}
	for (int round = 0; round < 2; round++) {
		void *use = round ? NULL : cs; /* then the legacy default stream */

		fake_reset();
		for (int k = 0; k < 5; k++) /* the caller's work, still queued */
			CHECK(hcopy(p[0], junk, 128 << 10, use) == 0);
		CHECK_EQ(rl_loader_set_cuda_stream(ld, 0, (uint64_t)(uintptr_t)use), 0);
		ret = rl_loader_run(ld, f.plan);
		CHECKF(ret == 0, "round %d: %d %s", round, ret, rl_loader_errmsg(ld));
		bad = first_wrong(&f, ld, p);
		CHECKF(!bad, "round %d: shard %zu differs on the device", round, bad - 1);
		fake_log(log, sizeof(log));
		snprintf(csn, sizeof(csn), "%p", use);
		why = stream_order(log, csn);
		CHECKF(!why, "round %d: %s", round, why);
		CHECK(getctx(&cur_ctx) == 0 && cur_ctx == ctx); /* the caller's, still */
	}
	CHECK_EQ(rl_loader_set_cuda_stream(ld, -1, 0), RL_E_CUDA_DEVICE);
	CHECK_EQ(rl_loader_set_cuda_stream(ld, 0, RL_CUDA_NO_STREAM), 0);
	rl_loader_destroy(ld);
	for (size_t i = 0; i < f.nshards; i++)
		rt.free(p[i]);
	sdestroy(cs);
	rt.pop(&cur_ctx);
	rt.release(0);
	fixture_free(&f);
}

/* ------------------------------------------------------------------ */
/* The fake driver itself: where the real one differs from a naive fake */

/* The fake's entry point `name` (NULL when it has none). */
static void *fake_fn(const char *name)
{
	return dlsym(fake_h, name);
}

typedef int (*fn_ctx)(void **);
typedef int (*fn_push)(void *);
typedef int (*fn_ctx_dev)(void **, int);

/* Contexts: a stack per thread; a pop restores the one below (torch's);
 * an unbalanced pop is refused and counted. The old fake cleared the
 * context at every pop. */
static void fake_context_stack(void)
{
	fn_ctx_dev retain = (fn_ctx_dev)(uintptr_t)fake_fn("cuDevicePrimaryCtxRetain");
	fn_push push = (fn_push)(uintptr_t)fake_fn("cuCtxPushCurrent_v2");
	fn_ctx pop = (fn_ctx)(uintptr_t)fake_fn("cuCtxPopCurrent_v2");
	fn_ctx get = (fn_ctx)(uintptr_t)fake_fn("cuCtxGetCurrent");
	int (*release)(int) = (int (*)(int))(uintptr_t)fake_fn("cuDevicePrimaryCtxRelease_v2");
	void *c0 = NULL, *c1 = NULL, *c = NULL;
	struct fakecuda_stats st;

	fake_env("2", "", "", "", "0");
	CHECK(retain && push && pop && get && release);
	CHECK(retain(&c0, 0) == 0 && retain(&c1, 1) == 0);
	CHECK(push(c0) == 0 && push(c1) == 0);
	CHECK(pop(&c) == 0 && c == c1);
	CHECK(get(&c) == 0 && c == c0); /* the caller's again */
	CHECK(pop(&c) == 0 && c == c0);
	CHECK(get(&c) == 0 && c == NULL);
	CHECK_EQ(pop(&c), 201); /* CUDA_ERROR_INVALID_CONTEXT */
	fake_stats(&st);
	CHECK_EQ(st.unbalanced, 1);
	release(0);
	release(1);
}

typedef int (*fn_alloc)(unsigned long long *, size_t);

/* Pitches over CU_DEVICE_ATTRIBUTE_MAX_PITCH refused; registration and
 * cuMemHostAlloc refused on request. */
static void fake_refusals(void)
{
	fn_ctx_dev retain = (fn_ctx_dev)(uintptr_t)fake_fn("cuDevicePrimaryCtxRetain");
	fn_push push = (fn_push)(uintptr_t)fake_fn("cuCtxPushCurrent_v2");
	fn_ctx pop = (fn_ctx)(uintptr_t)fake_fn("cuCtxPopCurrent_v2");
	int (*attr)(int *, int, int) = (int (*)(int *, int, int))(uintptr_t)
		fake_fn("cuDeviceGetAttribute");
	int (*cp2d)(const struct rlcu_memcpy2d *, void *) =
		(int (*)(const struct rlcu_memcpy2d *, void *))(uintptr_t)fake_fn("cuMemcpy2DAsync_v2");
	int (*reg)(void *, size_t, unsigned) = (int (*)(void *, size_t, unsigned))(uintptr_t)
		fake_fn("cuMemHostRegister_v2");
	int (*halloc)(void **, size_t, unsigned) = (int (*)(void **, size_t, unsigned))(uintptr_t)
		fake_fn("cuMemHostAlloc");
	int (*hfree)(void *) = (int (*)(void *))(uintptr_t)fake_fn("cuMemFreeHost");
	fn_alloc alloc = (fn_alloc)(uintptr_t)fake_fn("cuMemAlloc_v2");
	int (*mfree)(unsigned long long) = (int (*)(unsigned long long))(uintptr_t)
		fake_fn("cuMemFree_v2");
	static uint8_t src[4096];
	unsigned long long d = 0;
	void *c = NULL, *h = NULL;
	int v = 0;

	fake_env("2", "", "", "", "0");
	fake_also("FAKECUDA_MAX_PITCH", "256");
	fake_also("FAKECUDA_REGISTER_FAIL", "801");
	fake_also("FAKECUDA_HOSTALLOC_FAIL", "1");
	CHECK(attr && cp2d && reg && halloc && hfree && alloc && mfree);
	CHECK(retain(&c, 0) == 0 && push(c) == 0);
	CHECK(attr(&v, 11, 0) == 0 && v == 256);
	CHECK(alloc(&d, 4096) == 0);
	{
		struct rlcu_memcpy2d m = { .srcMemoryType = RLCU_MEMORYTYPE_HOST, .srcHost = src,
					   .srcPitch = 300, .dstMemoryType = RLCU_MEMORYTYPE_DEVICE,
					   .dstDevice = d, .dstPitch = 100, .WidthInBytes = 100,
					   .Height = 3 };

		CHECK_EQ(cp2d(&m, NULL), RLCU_ERROR_INVALID_VALUE);
	}
	CHECK_EQ(reg(src, sizeof(src), 1), 801);
	CHECK_EQ(halloc(&h, 4096, 1), RLCU_ERROR_OUT_OF_MEMORY);
	fake_env("2", "", "", "", "0");
	v = halloc(&h, 4096, 1);
	CHECKF(v == 0 && h && hfree(h) == 0, "cuMemHostAlloc: %d", v);
	mfree(d);
	pop(&c);
	((int (*)(int))(uintptr_t)fake_fn("cuDevicePrimaryCtxRelease_v2"))(0);
}

/* A failed copy is sticky for its device's context: every later call
 * there reports it (a process must restart); the other device works. */
static void fake_sticky_error(void)
{
	fn_ctx_dev retain = (fn_ctx_dev)(uintptr_t)fake_fn("cuDevicePrimaryCtxRetain");
	fn_push push = (fn_push)(uintptr_t)fake_fn("cuCtxPushCurrent_v2");
	fn_ctx pop = (fn_ctx)(uintptr_t)fake_fn("cuCtxPopCurrent_v2");
	fn_alloc alloc = (fn_alloc)(uintptr_t)fake_fn("cuMemAlloc_v2");
	int (*mfree)(unsigned long long) = (int (*)(unsigned long long))(uintptr_t)
		fake_fn("cuMemFree_v2");
	int (*sync)(void) = (int (*)(void))(uintptr_t)fake_fn("cuCtxSynchronize");
	int (*cp)(unsigned long long, const void *, size_t, void *) =
		(int (*)(unsigned long long, const void *, size_t, void *))(uintptr_t)
		fake_fn("cuMemcpyHtoDAsync_v2");
	static uint8_t src[64];
	unsigned long long d = 0, d2 = 0;
	void *c0 = NULL, *c1 = NULL, *c;

	fake_env("2", "", "1", "", "0");
	fake_also("FAKECUDA_FAIL_COPY_ERR", "700");
	CHECK(sync && retain(&c0, 0) == 0 && retain(&c1, 1) == 0 && push(c0) == 0);
	CHECK(alloc(&d, 64) == 0);
	CHECK(cp(d, src, sizeof(src), NULL) == 0);
	CHECK_EQ(sync(), 700);            /* CUDA_ERROR_ILLEGAL_ADDRESS */
	CHECK_EQ(alloc(&d2, 64), 700);    /* and everything after it */
	CHECK_EQ(cp(d, src, sizeof(src), NULL), 700);
	CHECK(push(c1) == 0 && alloc(&d2, 64) == 0 && mfree(d2) == 0); /* device 1 works */
	pop(&c);
	mfree(d);
	pop(&c);
	fake_env("2", "", "", "", "0"); /* a new process, for the tests after */
	((int (*)(int))(uintptr_t)fake_fn("cuDevicePrimaryCtxRelease_v2"))(0);
	((int (*)(int))(uintptr_t)fake_fn("cuDevicePrimaryCtxRelease_v2"))(1);
}

/* Names of codes the driver's cuGetErrorName does not know (the fake
 * names few): from cuda.h's table; "CUDA error (N)" before. */
static void error_names(void)
{
	struct cm_err e = { 0 };
	const struct rlcu_api *cu = rlcu_load(&e);
	char buf[96];

	CHECKF(cu, "%s", e.msg);
	CHECK(!strcmp(rlcu_name(cu, 801, buf, sizeof(buf)), "CUDA_ERROR_NOT_SUPPORTED (801)"));
	CHECK(!strcmp(rlcu_name(cu, 34, buf, sizeof(buf)), "CUDA_ERROR_STUB_LIBRARY (34)"));
	CHECK(!strcmp(rlcu_name(cu, 999, buf, sizeof(buf)), "CUDA_ERROR_UNKNOWN (999)"));
	CHECK(!strcmp(rlcu_name(cu, 12345, buf, sizeof(buf)), "CUDA error (12345)"));
}

/*
 * The Nth cuCtxPushCurrent fails, for every N of a load: the load fails
 * (or not, where the push was not needed) and the caller's context
 * stays current, with no unbalanced pop. The sink popped after a failed
 * push, taking the caller's context (torch's) off the thread.
 */
static void push_failure_keeps_callers_context(void)
{
	int (*getctx)(void **) = (int (*)(void **))(uintptr_t)dlsym(fake_h, "cuCtxGetCurrent");
	struct fixture f;
	struct runtime rt;
	void *ctx = NULL, *cur_ctx = NULL;
	int ret = fixture_big(&f), failed = 0;
	char n[16];

	fake_env("1", "", "", "", "0");
	CHECKF(ret == 0, "fixture: %d", ret);
	CHECK(getctx && runtime_get(&rt) == 0 && rt.retain(&ctx, 0) == 0 && rt.push(ctx) == 0);
	for (int i = 1; i <= 40; i++) {
		struct fakecuda_stats st;
		rl_loader *ld = cuda_loader(256 << 10, (const int32_t[]){ 0, 0 }, 2);

		snprintf(n, sizeof(n), "%d", i);
		fake_also("FAKECUDA_PUSH_FAIL_AT", n);
		CHECK(ld);
		ret = rl_loader_run(ld, f.plan);
		CHECKF(ret == 0 || (ret == RL_E_CUDA && strstr(rl_loader_errmsg(ld), "failed: "
				     "CUDA_ERROR_INVALID_CONTEXT (201)")), "push %d: %d %s", i, ret,
		       rl_loader_errmsg(ld));
		failed += ret < 0;
		rl_loader_destroy(ld);
		fake_stats(&st);
		CHECKF(getctx(&cur_ctx) == 0 && cur_ctx == ctx, "push %d: the caller's context is "
		       "no longer current", i);
		CHECKF(st.unbalanced == 0, "push %d: %ld unbalanced pops", i, st.unbalanced);
	}
	CHECKF(failed > 5, "%d loads failed", failed);
	unsetenv("FAKECUDA_PUSH_FAIL_AT");
	rt.pop(&cur_ctx);
	rt.release(0);
	fixture_free(&f);
}

/* A strided box whose pitch is over CU_DEVICE_ATTRIBUTE_MAX_PITCH goes
 * as rows (cuMemcpy2DAsync refuses it: the load failed). */
static void strided_box_over_max_pitch(void)
{
	static const int ord[] = { 0 };
	struct eng_sink s;
	struct cm_err e = { 0 };
	uint8_t src[4096], *dev;
	struct cm_copy c = { .src = 16, .len = 100, .count = 7, .src_stride = 300, .dst = 64 };
	struct fakecuda_stats st;
	uint64_t t;
	char why[160];

	fake_env("1", "", "", "", "100");
	fake_also("FAKECUDA_MAX_PITCH", "256");
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 29 + 3);
	CHECKF(cusink_create(ord, 1, 1, &s, &e) == 0, "%s", e.msg);
	CHECKF(cusink_alloc(&s, 0, 1024, &e) == 0, "%s", e.msg);
	CHECK(s.ops->pin(s.state, src, sizeof(src), &e) == 0);
	CHECKF(s.ops->copy(s.state, 0, &c, src, &e) == 0, "%s", e.msg);
	CHECK(s.ops->fence(s.state, 0, &t, &e) == 0);
	CHECK(s.ops->wait(s.state, 0, t, &e) == 0);
	dev = fake_host(cusink_base(&s, 0));
	for (unsigned k = 0; k < 7; k++)
		CHECKF(!memcmp(dev + 64 + k * 100, src + 16 + k * 300, 100), "row %u", k);
	fake_stats(&st);
	CHECKF(st.copies == 7 && st.copies_2d == 0, "%ld copies, %ld 2D", st.copies, st.copies_2d);
	CHECK(s.ops->finish(s.state, 1, &e) == 0);
	cusink_destroy(&s);
	unsetenv("FAKECUDA_MAX_PITCH");
	CHECKF(fake_clean(why, sizeof(why)), "after destroy: %s", why);
}

/* Library device memory: the free memory is checked first, and both
 * messages give the size (cuMemAlloc's named no size). */
static void device_memory_sizes(void)
{
	struct fixture f;
	int ret = fixture_big(&f);

	CHECKF(ret == 0, "fixture: %d", ret);
	fake_env("2", "", "", "", "0");
	fake_also("FAKECUDA_MEM_FREE", "1048576");
	CHECK(load_expect(&f, RL_E_CUDA_MEMORY, "CUDA device 0: out of memory: the load needs ",
			  NULL, 0) == 0);
	CHECK(load_expect(&f, RL_E_CUDA_MEMORY, " bytes there, 1048576 of 1048576 are free", NULL,
			  0) == 0);
	fake_env("2", "1", "", "", "0");
	CHECK(load_expect(&f, RL_E_CUDA_MEMORY, "cuMemAlloc of ", NULL, 0) == 0);
	fake_env("2", "1", "", "", "0");
	CHECK(load_expect(&f, RL_E_CUDA_MEMORY, " bytes failed: CUDA_ERROR_OUT_OF_MEMORY (2)", NULL,
			  0) == 0);
	fake_env("2", "", "", "", "0");
	fixture_free(&f);
}

/*
 * After fork(), a child's CUDA load fails with one line naming the fork,
 * with a new loader and with one the parent loaded with (its sink kept:
 * the parent's streams have no thread in the child, so its copies never
 * ran: a hang), and destroying the parent's loader calls no driver. The
 * child reports by its exit status (alarm: a hang fails).
 */
static void forked_child(void)
{
	struct fixture f;
	rl_loader *kept;
	int ret = fixture_big(&f), st = 0;
	pid_t pid;

	CHECKF(ret == 0, "fixture: %d", ret);
	fake_env("2", "", "", "", "0");
	kept = cuda_loader(256 << 10, NULL, 0);
	CHECK(kept && rl_loader_run(kept, f.plan) == 0);
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		rl_loader *ld = cuda_loader(256 << 10, NULL, 0);
		int bad = 0;

		alarm(20);
		for (int i = 0; i < 2; i++) {
			rl_loader *l = i ? kept : ld;

			ret = l ? rl_loader_run(l, f.plan) : -1;
			if (ret != RL_E_CUDA_DRIVER || !strstr(rl_loader_errmsg(l),
			    "CUDA in a forked child (pid ") || strchr(rl_loader_errmsg(l), '\n')) {
				printf("    child, %s loader: %d %s\n", i ? "the parent's" : "a new",
				       ret, l ? rl_loader_errmsg(l) : "");
				bad = 1;
			}
		}
		rl_loader_destroy(ld);
		rl_loader_destroy(kept);
		fflush(stdout);
		_exit(bad);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
	CHECK(rl_loader_run(kept, f.plan) == 0); /* the parent's driver works on */
	rl_loader_destroy(kept);
	fixture_free(&f);
}

/* big.safetensors over two spec devices of large ids (2^32-1, 2^31). */
static const char ids_spec[] = "{\"mesh\":{\"shape\":[2],\"axes\":[\"d\"],"
			       "\"devices\":[4294967295,2147483648]},"
			       "\"rules\":[{\"match\":\".*\",\"spec\":[\"d\"]}]}";

/*
 * Spec device ids up to 2^32-1: under the identity map they fail with
 * RL_E_CUDA_DEVICE naming the device (ids of 2^31 and above came back as
 * negative "error codes": -1 is -EPERM); RL_CUDA_ONE_GPU puts them all
 * on one GPU; a short map names the device.
 */
static void large_device_ids(void)
{
	rl_cuda_opts o = { .size = sizeof(o), .flags = RL_CUDA_ONE_GPU, .gpu = 1 };
	struct fixture f;
	rl_loader *ld;
	int ret = fixture_big(&f);
	size_t bad;

	CHECKF(ret == 0, "fixture: %d", ret);
	fixture_free(&f);
	ret = fixture_build(&f, tmp_path("big.safetensors"), ids_spec, strlen(ids_spec), 64 << 10);
	CHECKF(ret == 0, "fixture: %d", ret);
	fake_env("2", "", "", "", "0");
	CHECK(load_expect(&f, RL_E_CUDA_DEVICE, "no CUDA device 4294967295 (spec device 4294967295 "
			  "under the identity map", NULL, 0) == 0);
	CHECK(load_expect(&f, RL_E_CUDA_DEVICE, "spec device 4294967295 has no CUDA device (1 "
			  "mapped)", (const int32_t[]){ 0 }, 1) == 0);
	ld = cuda_loader(256 << 10, NULL, 0);
	CHECK(ld && rl_loader_set_cuda(ld, &o) == 0);
	ret = rl_loader_run(ld, f.plan);
	CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
	bad = first_wrong(&f, ld, NULL);
	CHECKF(!bad, "shard %zu differs on the device", bad - 1);
	o.ndevs = 1;
	o.device_map = (const int32_t[]){ 0 };
	CHECK_EQ(rl_loader_set_cuda(ld, &o), RL_E_INVALID_ARG); /* a map and one GPU */
	o.ndevs = 0;
	o.flags = 2;
	CHECK_EQ(rl_loader_set_cuda(ld, &o), RL_E_INVALID_ARG);
	o.flags = RL_CUDA_ONE_GPU;
	o.gpu = -1;
	CHECK_EQ(rl_loader_set_cuda(ld, &o), RL_E_CUDA_DEVICE);
	rl_loader_destroy(ld);
	fixture_free(&f);
}

/* ------------------------------------------------------------------ */
/* No driver; arguments */

static void no_driver(void)
{
	struct fixture f;
	rl_loader *ld;
	int ret = fixture_big(&f);

	CHECKF(ret == 0, "fixture: %d", ret);
	setenv("RL_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
	ld = cuda_loader(256 << 10, NULL, 0);
	CHECK(ld);
	ret = rl_loader_run(ld, f.plan);
	CHECKF(ret == RL_E_CUDA_DRIVER &&
	       strstr(rl_loader_errmsg(ld), "no CUDA driver: cannot load /nonexistent/libcuda.so.1"),
	       "%d %s", ret, rl_loader_errmsg(ld));
	CHECK(!strchr(rl_loader_errmsg(ld), '\n'));
	setenv("RL_LIBCUDA", fake_path, 1); /* the same loader, now with a driver */
	fake_env("2", "", "", "", "0");
	ret = rl_loader_run(ld, f.plan);
	CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
	rl_loader_destroy(ld);
	fixture_free(&f);
}

static void arguments(void)
{
	rl_loader *ld = rl_loader_create();
	rl_cuda_opts o = { .size = sizeof(o) };
	static const int32_t neg[] = { 0, -1 };
	uint64_t p, b;
	uint8_t x;

	CHECK(ld);
	CHECK_EQ(rl_loader_set_cuda(NULL, &o), -EINVAL);
	o.size = 4;
	CHECK_EQ(rl_loader_set_cuda(ld, &o), RL_E_INVALID_ARG);
	o.size = sizeof(o);
	o.ndevs = 2;
	CHECK_EQ(rl_loader_set_cuda(ld, &o), RL_E_INVALID_ARG);
	o.device_map = neg;
	CHECK_EQ(rl_loader_set_cuda(ld, &o), RL_E_CUDA_DEVICE);
	CHECK(strstr(rl_loader_errmsg(ld), "spec device 1 -> CUDA device -1"));
	CHECK_EQ(rl_loader_set_cuda_dest(ld, 0, 4096, 1), RL_E_STATE);
	CHECK_EQ(rl_loader_cuda_area(ld, 0, &p, &b), RL_E_STATE);
	CHECK_EQ(rl_loader_cuda_read_back(ld, 0, 0, &x, 1), RL_E_STATE);
	CHECK_EQ(rl_loader_cuda_area(ld, 0, NULL, &b), -EINVAL);
	CHECK_EQ(rl_loader_cuda_shard(ld, 0, NULL), -EINVAL);
	CHECK_EQ(rl_loader_cuda_shard(ld, 0, &p), RL_E_STATE);
	CHECK_EQ(rl_loader_budget(ld), rl_loader_default_budget());
	o.ndevs = 0;
	CHECK_EQ(rl_loader_set_cuda(ld, &o), 0);
	/* The one default budget: a CUDA loader's is at most 256 MiB (the
	 * CLI's --device asks it, not a number of its own), a set one wins. */
	CHECK_EQ(rl_loader_budget(ld), CM_MIN(rl_loader_default_budget(), 256ll << 20));
	CHECK_EQ(rl_loader_set(ld, RL_OPT_STAGING_BUDGET, 1 << 20), 0);
	CHECK_EQ(rl_loader_budget(ld), 1 << 20);
	CHECK_EQ(rl_loader_set(ld, RL_OPT_STAGING_BUDGET, 0), 0);
	CHECK_EQ(rl_loader_set_cuda_dest(ld, 5, 4096, 1), 0);
	CHECK_EQ(rl_loader_cuda_area(ld, 0, &p, &b), RL_E_STATE); /* no load yet */
	CHECK_EQ(rl_loader_set_cuda(ld, NULL), 0);
	rl_loader_destroy(ld);
}

/*
 * rl_loader_start on a CUDA loader: pulls every piece; each is in device
 * memory (its pointer the shard's device address + offset) with its
 * bytes there as it arrives (slow copies: a piece handed out before its
 * window's fence completed would not be), once each, releases accepted;
 * then the device areas equal the oracle. Two rounds on one loader.
 * Before, rl_loader_start refused a CUDA loader.
 */
static int pull_all(struct fixture *f, rl_loader *ld, size_t *pieces, char *why, size_t cap)
{
	rl_piece p;
	int ret;

	*pieces = 0;
	while ((ret = rl_loader_next_piece(ld, &p, -1)) == 1) {
		uint64_t ptr = 0;
		rl_shard_info si;

		if (rl_loader_cuda_shard(ld, p.shard, &ptr) < 0 || rl_plan_shard(f->plan, p.shard, &si) < 0 ||
		    (uint8_t *)(uintptr_t)(ptr + p.offset) != p.data || p.token != 0 ||
		    (p.length && memcmp(fake_host((uint64_t)(uintptr_t)p.data),
					f->ref[si.device] + si.offset + p.offset, p.length)) ||
		    rl_loader_release(ld, &p) != 0) {
			snprintf(why, cap, "piece %zu: shard %zu offset %llu: not in place", *pieces,
				 p.shard, (unsigned long long)p.offset);
			rl_loader_finish(ld);
			return -1;
		}
		(*pieces)++;
	}
	snprintf(why, cap, "next: %d %s", ret, rl_loader_errmsg(ld));
	return ret;
}

static void start_pulls_device_pieces(void)
{
	struct fixture f;
	struct fakecuda_stats st;
	char why[200];
	rl_loader *ld;
	size_t n;
	int ret = fixture_big(&f);

	CHECKF(ret == 0, "fixture: %d", ret);
	fake_env("2", "", "", "", "1000");
	ld = cuda_loader(256 << 10, NULL, 0);
	CHECK(ld);
	for (int round = 0; round < 2; round++) {
		CHECKF(rl_loader_start(ld, f.plan) == 0, "%s", rl_loader_errmsg(ld));
		ret = pull_all(&f, ld, &n, why, sizeof(why));
		CHECKF(ret == 0, "round %d: %s", round, why);
		CHECKF(n >= f.nshards, "%zu pieces of %zu shards", n, f.nshards);
		ret = rl_loader_finish(ld);
		CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
		CHECK(!first_wrong(&f, ld, NULL));
		fake_stats(&st);
		CHECK_EQ(st.inflight, 0);
		CHECK_EQ(st.unpinned, 0);
	}
	rl_loader_destroy(ld);
	fixture_free(&f);
	CHECKF(fake_clean(why, sizeof(why)), "after destroy: %s", why);
}

/* A copy failing mid-stream: the consumer gets the load's error, finish
 * returns it, and no device memory is left (nothing in flight). */
static void start_failing_copy(void)
{
	struct fixture f;
	struct fakecuda_stats st;
	char why[200];
	rl_loader *ld;
	size_t n;
	int ret = fixture_big(&f);

	CHECKF(ret == 0, "fixture: %d", ret);
	fake_env("2", "", "9", "", "100");
	fake_also("FAKECUDA_FAIL_COPY_ERR", "1"); /* CUDA_ERROR_INVALID_VALUE: not sticky */
	ld = cuda_loader(256 << 10, NULL, 0);
	CHECK(ld && rl_loader_start(ld, f.plan) == 0);
	ret = pull_all(&f, ld, &n, why, sizeof(why));
	CHECKF(ret == RL_E_CUDA, "%s", why);
	CHECKF(rl_loader_finish(ld) == ret, "%s", rl_loader_errmsg(ld));
	fake_stats(&st);
	CHECK_EQ(st.inflight, 0);
	CHECK_EQ(st.allocs, 0);
	rl_loader_destroy(ld);
	fixture_free(&f);
	CHECKF(fake_clean(why, sizeof(why)), "after destroy: %s", why);
}

/* The consumer stops after its first piece: finish cancels, returns
 * RL_E_CANCELED and keeps no device memory; the loader loads again. */
static void start_canceled(void)
{
	struct fixture f;
	struct fakecuda_stats st;
	char why[200];
	rl_loader *ld;
	rl_piece p;
	size_t n;
	int ret = fixture_big(&f);

	CHECKF(ret == 0, "fixture: %d", ret);
	fake_env("2", "", "", "", "500");
	ld = cuda_loader(256 << 10, NULL, 0);
	CHECK(ld && rl_loader_start(ld, f.plan) == 0);
	CHECK_EQ(rl_loader_next_piece(ld, &p, -1), 1);
	ret = rl_loader_finish(ld);
	CHECKF(ret == RL_E_CANCELED, "%d %s", ret, rl_loader_errmsg(ld));
	fake_stats(&st);
	CHECK_EQ(st.inflight, 0);
	CHECK_EQ(st.allocs, 0);
	CHECK(rl_loader_start(ld, f.plan) == 0);
	ret = pull_all(&f, ld, &n, why, sizeof(why));
	CHECKF(ret == 0 && rl_loader_finish(ld) == 0, "%s", why);
	CHECK(!first_wrong(&f, ld, NULL));
	rl_loader_destroy(ld);
	fixture_free(&f);
	CHECKF(fake_clean(why, sizeof(why)), "after destroy: %s", why);
}

/* ------------------------------------------------------------------ */
/* ringload load --device */

/* Runs build/ringload load with args on the big fixture's file; its exit
 * status, its output in out. */
static int cli(const char *env, const char *args, char *out, size_t cap)
{
	const char *b = getenv("RL_BUILD");
	char cmd[2048];

	snprintf(cmd, sizeof(cmd), "%s %s/ringload load %s %s", env, b && *b ? b : "build",
		 tmp_path("big.safetensors"), args);
	return th_capture(cmd, out, cap);
}

static void cli_device(void)
{
	struct fixture f;
	char out[8192], env[PATH_MAX + 64], args[PATH_MAX + 64];
	int ret = fixture_big(&f); /* writes big.safetensors */
	FILE *spec;

	CHECKF(ret == 0, "fixture: %d", ret);
	fixture_free(&f);
	snprintf(env, sizeof(env), "RL_LIBCUDA=%s FAKECUDA_DEVICES=2 FAKECUDA_DELAY_US=20", fake_path);
	ret = cli(env, "--device cuda:1 --verify --staging-budget 1M", out, sizeof(out));
	CHECKF(ret == 0 && strstr(out, "verify: 16 shards match the file, 0 differ") &&
	       strstr(out, "device: cuda:1, peak host memory "), "%d: %s", ret, out);
	spec = fopen(tmp_path("spec.json"), "w");
	CHECK(spec);
	fputs("{\"mesh\":{\"shape\":[2],\"axes\":[\"d\"]},"
	      "\"rules\":[{\"match\":\".*\",\"spec\":[\"d\"]}]}", spec);
	fclose(spec);
	snprintf(args, sizeof(args), "--sharding %s --device cuda --device-map 1,0 --verify --json",
		 tmp_path("spec.json"));
	ret = cli(env, args, out, sizeof(out));
	CHECKF(ret == 0 && strstr(out, "\"verify\":{\"match\":32,\"differ\":0") &&
	       strstr(out, "\"device\":\"cuda\",\"peak_host_bytes\":"), "%d: %s", ret, out);
	ret = cli(env, "--device cuda:7", out, sizeof(out));
	CHECKF(ret == 1 && !strcmp(out, "ringload load: no CUDA device 7 (2 devices)\n"), "%d: %s",
	       ret, out);
}

/* --device cuda:N puts every spec device on GPU N whatever its id
 * (ids above 1023 were left out: "no CUDA device 5000"); under the
 * identity map an id of 2^31 or more is one line naming it (the line
 * was empty). */
static void cli_device_ids(void)
{
	char out[8192], env[PATH_MAX + 64], args[PATH_MAX + 96];
	FILE *spec = fopen(tmp_path("ids.json"), "w");
	int ret;

	CHECK(spec);
	fputs(ids_spec, spec);
	fclose(spec);
	snprintf(env, sizeof(env), "RL_LIBCUDA=%s FAKECUDA_DEVICES=2 FAKECUDA_DELAY_US=20", fake_path);
	snprintf(args, sizeof(args), "--sharding %s --device cuda:1 --verify", tmp_path("ids.json"));
	ret = cli(env, args, out, sizeof(out));
	CHECKF(ret == 0 && strstr(out, "verify: 32 shards match the file, 0 differ"), "%d: %s", ret,
	       out);
	snprintf(args, sizeof(args), "--sharding %s --device cuda", tmp_path("ids.json"));
	ret = cli(env, args, out, sizeof(out));
	CHECKF(ret == 1 && strstr(out, "ringload load: no CUDA device 4294967295 (spec device "
				  "4294967295") && strchr(out, '\n') == out + strlen(out) - 1,
	       "%d: %s", ret, out);
}

/* What the fake driver says the CLI left at exit (FAKECUDA_REPORT). */
static int cli_left_nothing(const char *report)
{
	size_t n;
	char *text = slurp(report, &n);
	int ok = text && !strcmp(text, "allocs 0 streams 0 events 0 ctx 0 pinned 0 inflight 0\n");

	if (!ok)
		printf("    left at exit: %s", text ? text : "(no report)\n");
	free(text);
	unlink(report);
	return ok;
}

/*
 * --device with --sha256 / --sha256-file: each file is hashed as it is
 * read, whatever the sink. Good values exit 0; one flipped byte exits 1
 * naming the file, and the process left nothing on the device.
 */
static void cli_device_sha256(void)
{
	const char *path = tmp_path("big.safetensors");
	char hex[65], out[8192], env[2 * PATH_MAX + 96], args[PATH_MAX + 160];
	char report[PATH_MAX], sums[PATH_MAX];
	struct stat sb;
	uint8_t b;
	FILE *fp;
	int fd, ret;

	CHECK(write_hashed_ckpt(path, 16, 256 << 10, hex) == 0);
	snprintf(report, sizeof(report), "%s", tmp_path("fakecuda.report"));
	snprintf(sums, sizeof(sums), "%s", tmp_path("SHA256SUMS"));
	fp = fopen(sums, "w");
	CHECK(fp);
	fprintf(fp, "%s  big.safetensors\n", hex);
	fclose(fp);
	snprintf(env, sizeof(env), "RL_LIBCUDA=%s FAKECUDA_DEVICES=2 FAKECUDA_DELAY_US=20 "
		 "FAKECUDA_REPORT=%s", fake_path, report);
	for (int flipped = 0; flipped < 2; flipped++) {
		if (flipped) { /* one byte of the last tensor */
			CHECK(stat(path, &sb) == 0);
			fd = open(path, O_RDWR);
			CHECK(fd >= 0 && pread(fd, &b, 1, sb.st_size - 100) == 1);
			b ^= 0x5a;
			CHECK(pwrite(fd, &b, 1, sb.st_size - 100) == 1);
			close(fd);
		}
		snprintf(args, sizeof(args), "--device cuda:1 --staging-budget 1M --sha256 "
			 "big.safetensors=%s", hex);
		ret = cli(env, args, out, sizeof(out));
		CHECKF(flipped ? ret == 1 && strstr(out, "big.safetensors: SHA-256 mismatch") :
		       ret == 0 && strstr(out, "sha256: 1 file"), "--sha256, flipped %d: %d: %s",
		       flipped, ret, out);
		CHECK(cli_left_nothing(report));
		snprintf(args, sizeof(args), "--device cuda --sha256-file %s --verify", sums);
		ret = cli(env, args, out, sizeof(out));
		CHECKF(flipped ? ret == 1 && strstr(out, "big.safetensors: SHA-256 mismatch") :
		       ret == 0 && strstr(out, "sha256: 1 file") &&
		       strstr(out, "verify: 16 shards match"), "--sha256-file, flipped %d: %d: %s",
		       flipped, ret, out);
		CHECK(cli_left_nothing(report));
	}
}

/* No libcuda.so.1 to load, or a driver without devices: one line, exit 1. */
static void cli_no_driver(void)
{
	char out[4096], env[PATH_MAX + 64];
	int ret = cli("RL_LIBCUDA=/nonexistent/libcuda.so.1", "--device cuda", out, sizeof(out));

	CHECKF(ret == 1 && strstr(out, "ringload load: no CUDA driver: cannot load "
				     "/nonexistent/libcuda.so.1") && strchr(out, '\n') == out + strlen(out) - 1,
	       "%d: %s", ret, out);
	snprintf(env, sizeof(env), "RL_LIBCUDA=%s FAKECUDA_NO_DEVICE=1", fake_path);
	ret = cli(env, "--device cuda", out, sizeof(out));
	CHECKF(ret == 1 && strstr(out, "cuInit failed: CUDA_ERROR_NO_DEVICE (100)\n") &&
	       strchr(out, '\n') == out + strlen(out) - 1, "%d: %s", ret, out);
}

static void cli_arguments(void)
{
	static const struct { const char *args, *line; } bad[] = {
		{ "--device gpu", "--device gpu: expected KIND or KIND:N (N an ordinal; this "
				  "library's kinds: cuda)" },
		{ "--device cuda:x", "--device cuda:x: expected KIND or KIND:N" },
		{ "--device cudax", "--device cudax: expected KIND or KIND:N" },
		{ "--device-map 0,1", "--device-map needs --device KIND" },
		{ "--device cuda --device-map 0,,1", "--device-map 0,,1: expected GPU ordinals" },
		{ "--device cuda --device-map 0,", "--device-map 0,: expected GPU ordinals" },
		{ "--device cuda:0 --device-map 0", "puts every device on one GPU: not with --device-map" },
		{ "--device cuda --out /nonexistent", "--device loads into GPU memory: not with --out" },
		{ "--device cuda --staging caller", "not with --staging" },
	};
	char out[4096];

	for (size_t i = 0; i < CM_ARRAY_SIZE(bad); i++) {
		int ret = cli("", bad[i].args, out, sizeof(out));

		CHECKF(ret == 2 && strstr(out, bad[i].line), "%s: %d: %s", bad[i].args, ret, out);
	}
}

int main(void)
{
	static const struct th_case tests[] = {
		{ "random_plans", random_plans },
		{ "windows_wait_for_copies", windows_wait_for_copies },
		{ "converted_dtype", converted_dtype },
		{ "shared_gpu", shared_gpu },
		{ "caller_pointers", caller_pointers },
		{ "shard_reported_after_its_bytes", shard_reported_after_its_bytes },
		{ "out_of_memory_at_n", out_of_memory_at_n },
		{ "failing_copy", failing_copy },
		{ "cancel", cancel },
		{ "loads_after_a_failed_one", loads_after_a_failed_one },
		{ "pins_at_most_the_plan", pins_at_most_the_plan },
		{ "registration_refused", registration_refused },
		{ "pins_the_medium", pins_the_medium },
		{ "start_pulls_device_pieces", start_pulls_device_pieces },
		{ "start_failing_copy", start_failing_copy },
		{ "start_canceled", start_canceled },
	};
	static const unsigned workers[] = { 1, 3 };

	th_seed();
	if (fake_open() < 0) {
		printf("cannot load the fake CUDA driver beside this program: %s\n", dlerror());
		return 1;
	}
	th_run("no_driver", no_driver); /* first: nothing loaded the driver yet */
	th_run("fake_context_stack", fake_context_stack);
	th_run("fake_refusals", fake_refusals);
	th_run("fake_sticky_error", fake_sticky_error);
	setenv("RL_LIBCUDA", fake_path, 1);
	run_on_every_backend(tests, CM_ARRAY_SIZE(tests), workers, CM_ARRAY_SIZE(workers),
			     select_backend);
	cur = RL_BACKEND_IO_URING;
	cur_workers = 1;
	th_run("context_error", context_error);
	th_run("no_such_device", no_such_device);
	th_run("strided_box_2d", strided_box_2d);
	th_run("caller_stream_order", caller_stream_order);
	th_run("error_names", error_names);
	th_run("push_failure_keeps_callers_context", push_failure_keeps_callers_context);
	th_run("strided_box_over_max_pitch", strided_box_over_max_pitch);
	th_run("device_memory_sizes", device_memory_sizes);
	th_run("forked_child", forked_child);
	th_run("large_device_ids", large_device_ids);
	th_run("setup_failure_frees_device_memory", setup_failure_frees_device_memory);
	th_run("sha256_mismatch_frees_device_memory", sha256_mismatch_frees_device_memory);
	th_run("piece_over_4gib", piece_over_4gib);
	th_run("failed_record_keeps_no_event", failed_record_keeps_no_event);
	th_run("arguments", arguments);
	th_run("cli_device", cli_device);
	th_run("cli_device_sha256", cli_device_sha256);
	th_run("cli_device_ids", cli_device_ids);
	th_run("cli_no_driver", cli_no_driver);
	th_run("cli_arguments", cli_arguments);
	return th_done();
}
