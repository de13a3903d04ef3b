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
#include <time.h>
#include <unistd.h>

#include "../api/loader_internal.h"
#include "../exec/execute.h"
#include "../sink/cuda.h"
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
static char fake_path[PATH_MAX];

static void select_backend(rl_backend b, unsigned workers)
{
	cur = b;
	cur_workers = workers;
}

/* The fake driver beside this program (build/tests/fakecuda/). */
static int fake_open(void)
{
	ssize_t n = readlink("/proc/self/exe", fake_path, sizeof(fake_path) - 32);
	void *h;

	if (n <= 0)
		return -1;
	fake_path[n] = '\0';
	strcpy(strrchr(fake_path, '/') + 1, "fakecuda/libcuda.so.1");
	h = dlopen(fake_path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return -1;
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
	unsetenv("FAKECUDA_FAIL_RECORD_AT");
	unsetenv("FAKECUDA_NO_DATA");
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
		else if (rl_loader_cuda_area(ld, si.device, &ptr, &bytes) == 0)
			ptr += si.offset;
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
	snprintf(why, cap, "allocs %ld streams %ld events %ld ctx %ld pinned %ld inflight %ld",
		 st.allocs, st.streams, st.events, st.ctx_refs, st.registered, st.inflight);
	return !st.allocs && !st.streams && !st.events && !st.ctx_refs && !st.registered &&
	       !st.inflight;
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

/* The Nth copy fails on its stream: its window's event reports it. */
static void failing_copy(void)
{
	struct fixture f;
	int ret = fixture_big(&f);
	static const char *const at[] = { "1", "7", "40" };

	CHECKF(ret == 0, "fixture: %d", ret);
	for (size_t i = 0; i < CM_ARRAY_SIZE(at); i++) {
		fake_env("2", "", at[i], "", "20");
		CHECKF(load_expect(&f, RL_E_CUDA, "CUDA_ERROR_LAUNCH_FAILED", NULL, 0) == 0,
		       "copy %s", at[i]);
	}
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
	struct cm_copy c0 = { 0, 100, 1, 0, 0, 0, 0 }, c1 = { 0, 100, 1, 0, 8, 1, 1 };
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
	struct cm_copy c = { 16, 100, 7, 300, 64, 0, 0 };
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
	o.ndevs = 0;
	CHECK_EQ(rl_loader_set_cuda(ld, &o), 0);
	CHECK_EQ(rl_loader_set_cuda_dest(ld, 5, 4096, 1), 0);
	CHECK_EQ(rl_loader_cuda_area(ld, 0, &p, &b), RL_E_STATE); /* no load yet */
	CHECK_EQ(rl_loader_set_cuda(ld, NULL), 0);
	rl_loader_destroy(ld);
}

/* rl_loader_start has no pieces to hand out for a CUDA load. */
static void start_refused(void)
{
	struct fixture f;
	rl_loader *ld;
	int ret = fixture_big(&f);

	CHECKF(ret == 0, "fixture: %d", ret);
	ld = cuda_loader(256 << 10, NULL, 0);
	CHECK(ld);
	CHECK_EQ(rl_loader_start(ld, f.plan), RL_E_STATE);
	CHECK(strstr(rl_loader_errmsg(ld), "use rl_loader_run()"));
	rl_loader_destroy(ld);
	fixture_free(&f);
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
		{ "--device gpu", "--device gpu: expected cuda or cuda:N" },
		{ "--device cuda:x", "--device cuda:x: expected cuda or cuda:N" },
		{ "--device-map 0,1", "--device-map needs --device cuda" },
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
		{ "shared_gpu", shared_gpu },
		{ "caller_pointers", caller_pointers },
		{ "out_of_memory_at_n", out_of_memory_at_n },
		{ "failing_copy", failing_copy },
		{ "cancel", cancel },
		{ "loads_after_a_failed_one", loads_after_a_failed_one },
		{ "pins_at_most_the_plan", pins_at_most_the_plan },
		{ "pins_the_medium", pins_the_medium },
	};
	static const unsigned workers[] = { 1, 3 };

	th_seed();
	if (fake_open() < 0) {
		printf("cannot load the fake CUDA driver beside this program: %s\n", dlerror());
		return 1;
	}
	th_run("no_driver", no_driver); /* first: nothing loaded the driver yet */
	setenv("RL_LIBCUDA", fake_path, 1);
	run_on_every_backend(tests, CM_ARRAY_SIZE(tests), workers, CM_ARRAY_SIZE(workers),
			     select_backend);
	cur = RL_BACKEND_IO_URING;
	cur_workers = 1;
	th_run("context_error", context_error);
	th_run("no_such_device", no_such_device);
	th_run("strided_box_2d", strided_box_2d);
	th_run("start_refused", start_refused);
	th_run("setup_failure_frees_device_memory", setup_failure_frees_device_memory);
	th_run("sha256_mismatch_frees_device_memory", sha256_mismatch_frees_device_memory);
	th_run("piece_over_4gib", piece_over_4gib);
	th_run("failed_record_keeps_no_event", failed_record_keeps_no_event);
	th_run("arguments", arguments);
	th_run("cli_device", cli_device);
	th_run("cli_device_sha256", cli_device_sha256);
	th_run("cli_no_driver", cli_no_driver);
	th_run("cli_arguments", cli_arguments);
	return th_done();
}
