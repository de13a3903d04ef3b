/*
 * test_device_registry.c - the device registry (sink/registry.c) and its
 * test line, the "testdev" kind (sink/test_dev.c: device memory is host
 * memory, copies run only at the fence's wait, so a window reused before
 * its copies ran loads wrong bytes). A device is one file and one line:
 * full loads onto testdev (whole on one ordinal, sharded over 2, many
 * small windows, converted to F16, checked with SHA-256, the caller's
 * pointers, pulled with rl_loader_start) equal a whole host load of the
 * same plan byte for byte, on every backend with 1 and 3 workers; a copy
 * failing late, a digest mismatch and a canceled start free everything.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_util.h"
#include "harness.h"
#include "plan_fixture.h"
#include "common.h"
#include "ringload.h"

static rl_backend cur = RL_BACKEND_IO_URING;
static unsigned cur_workers = 1;

static void select_backend(rl_backend b, unsigned workers)
{
	cur = b;
	cur_workers = workers;
}

/* The ordinal of each spec device (up to a 3x3 mesh): over 2 ordinals. */
static const int32_t two[9] = { 0, 1, 0, 1, 0, 1, 0, 1, 0 };

/* A loader of the current backend and workers onto testdev: every spec
 * device on ordinal 0 (map NULL) or mapped. */
static rl_loader *dev_loader(uint64_t budget, const int32_t *map, uint32_t nmap)
{
	static const int32_t zero = 0;
	rl_loader *ld = rl_loader_create();
	int ret;

	if (!ld)
		return NULL;
	rl_loader_set(ld, RL_OPT_BACKEND, cur);
	rl_loader_set(ld, RL_OPT_WORKERS, cur_workers);
	rl_loader_set(ld, RL_OPT_STAGING_BUDGET, (int64_t)budget);
	ret = map ? rl_loader_set_device(ld, "testdev", map, nmap, 0) :
	      rl_loader_set_device(ld, "testdev", &zero, 1, RL_DEVICE_ONE);
	if (ret < 0) {
		printf("    set_device: %d %s\n", ret, rl_loader_errmsg(ld));
		rl_loader_destroy(ld);
		return NULL;
	}
	return ld;
}

/* 0 when every shard's device bytes equal the oracle's (the library's
 * areas: each shard 256-byte aligned in its area; or dest[shard]), read
 * in place and through read back; else the first shard that differs + 1. */
static size_t first_wrong(const struct fixture *f, rl_loader *ld, uint8_t *const *dest)
{
	for (size_t i = 0; i < f->nshards; i++) {
		rl_shard_info si;
		uint64_t ptr = 0, base = 0, bytes = 0;
		uint8_t *back;
		int same;

		if (rl_plan_shard(f->plan, i, &si) < 0 || rl_loader_device_shard(ld, i, &ptr) < 0)
			return i + 1;
		if (dest && ptr != (uint64_t)(uintptr_t)dest[i])
			return i + 1;
		if (!dest && (rl_loader_device_area(ld, si.device, &base, &bytes) < 0 ||
			      (si.nbytes && (ptr % 256 || ptr < base ||
					     ptr - base + si.nbytes > bytes))))
			return i + 1;
		if (!si.nbytes)
			continue;
		back = malloc(si.nbytes);
		same = back && !memcmp((const void *)(uintptr_t)ptr, f->ref[si.device] + si.offset,
				       si.nbytes) &&
		       rl_loader_device_read_back(ld, si.device, dest ? ptr : ptr - base, back,
						  si.nbytes) == 0 &&
		       !memcmp(back, f->ref[si.device] + si.offset, si.nbytes);
		free(back);
		if (!same)
			return i + 1;
	}
	return 0;
}

struct seen {
	unsigned *count;
	size_t n;
};

static void on_shard(void *user, size_t shard)
{
	struct seen *s = user;

	if (shard < s->n)
		s->count[shard]++;
}

/* Two loads of f by one loader onto testdev: bytes and shard reports. */
static void load_and_check(struct fixture *f, uint64_t budget, const int32_t *map, uint32_t nmap)
{
	struct seen s = { calloc(f->nshards + 1, sizeof(unsigned)), f->nshards };
	rl_loader *ld = dev_loader(budget, map, nmap);

	CHECK(ld && s.count);
	rl_loader_set_callbacks(ld, on_shard, NULL, &s);
	for (int round = 0; round < 2; round++) {
		int ret = rl_loader_run(ld, f->plan);
		size_t bad = ret == 0 ? first_wrong(f, ld, NULL) : 0;

		CHECKF(ret == 0, "round %d: %d %s", round, ret, rl_loader_errmsg(ld));
		CHECKF(!bad, "round %d: shard %zu differs on the device", round, bad - 1);
		for (size_t i = 0; i < f->nshards; i++)
			CHECKF(s.count[i] == (unsigned)round + 1, "shard %zu reported %u times", i,
			       s.count[i]);
	}
	rl_loader_destroy(ld);
	free(s.count);
}

/* 16 tensors of 256 KiB split over 2 devices: many windows at 256 KiB. */
static int fixture_big(struct fixture *f, char hex[65])
{
	static const char spec[] = "{\"mesh\":{\"shape\":[2],\"axes\":[\"d\"]},"
				   "\"rules\":[{\"match\":\".*\",\"spec\":[\"d\"]}]}";
	char *path = tmp_path("big.safetensors");

	if (write_hashed_ckpt(path, 16, 256 << 10, hex) < 0)
		return -EIO;
	return fixture_build(f, path, spec, strlen(spec), 64 << 10);
}

/* ------------------------------------------------------------------ */
/* The tests run on every backend */

/* Random checkpoints and specs: whole on ordinal 0, and over 2. */
static void random_plans(void)
{
	static const uint64_t budgets[] = { 64 << 10, 256 << 10, 4 << 20 };

	for (int it = 0; it < 3 && !th_failed(); it++) {
		struct fixture f;
		int ret = fixture_random_ckpt(&f, "c.safetensors", 0, NULL, 64 << 10);

		CHECKF(ret == 0, "fixture: %d", ret);
		load_and_check(&f, budgets[th_rand() % 3], NULL, 0);
		load_and_check(&f, budgets[th_rand() % 3], two, 9);
		fixture_free(&f);
	}
}

/* 4 MiB through windows of 128 KiB: copies run only at the fence's
 * wait, so a window refilled before would put later bytes there. */
static void small_windows(void)
{
	struct fixture f;
	char hex[65];
	int ret = fixture_big(&f, hex);

	CHECKF(ret == 0, "fixture: %d", ret);
	load_and_check(&f, 256 << 10, two, 2);
	fixture_free(&f);
}

/* F32 and BF16 tensors of random bits (NaNs among them) converted to
 * F16 on the way (RL_PLAN_DTYPE: in the window, before the copy): the
 * oracle, a whole host load of the plan, is converted alike. */
static void converted_dtype(void)
{
	static const char spec[] = "{\"mesh\":{\"shape\":[2],\"axes\":[\"d\"]},"
				   "\"rules\":[{\"match\":\".*\",\"spec\":[\"d\"]}]}";
	static const char hdr[] = "{\"a\":{\"dtype\":\"F32\",\"shape\":[256,300],"
				  "\"data_offsets\":[0,307200]},\"b\":{\"dtype\":\"BF16\","
				  "\"shape\":[130,250],\"data_offsets\":[307200,372200]}}";
	size_t hl = (sizeof(hdr) - 1 + 7) / 8 * 8, n = 8 + hl + 372200;
	uint8_t *file = calloc(1, n);
	char *path = tmp_path("dtype.safetensors");
	struct fixture f;
	rl_shard_info si;
	int ret;

	CHECK(file);
	memcpy(file, &(uint64_t){ hl }, 8);
	memset(file + 8, ' ', hl);
	memcpy(file + 8, hdr, sizeof(hdr) - 1);
	for (size_t i = 8 + hl; i < n; i++)
		file[i] = (uint8_t)th_rand();
	ret = write_bytes(path, file, n);
	free(file);
	CHECK(ret == 0);
	fixture_dtype = RL_DTYPE_F16;
	ret = fixture_build(&f, path, spec, strlen(spec), 64 << 10);
	fixture_dtype = -1;
	CHECKF(ret == 0, "fixture: %d", ret);
	CHECK(rl_plan_shard(f.plan, 0, &si) == 0 && si.dtype == RL_DTYPE_F16);
	load_and_check(&f, 64 << 10, two, 2);
	fixture_free(&f);
}

/* The file's SHA-256 checked on the way; a wrong one fails the load and
 * leaves no device memory. */
static void sha256(void)
{
	struct fixture f;
	char hex[65];
	int ret = fixture_big(&f, hex);
	rl_loader *ld;
	uint64_t p, n;
	size_t bad;

	CHECKF(ret == 0, "fixture: %d", ret);
	ld = dev_loader(256 << 10, two, 2);
	CHECK(ld && rl_loader_expect_sha256(ld, tmp_path("big.safetensors"), hex) == 0);
	ret = rl_loader_run(ld, f.plan);
	bad = ret == 0 ? first_wrong(&f, ld, NULL) : 0;
	CHECKF(ret == 0 && !bad, "%d %s, shard %zu", ret, rl_loader_errmsg(ld), bad - 1);
	hex[0] = hex[0] == '0' ? '1' : '0';
	CHECK(rl_loader_expect_sha256(ld, tmp_path("big.safetensors"), hex) == 0);
	ret = rl_loader_run(ld, f.plan);
	CHECKF(ret == RL_E_CHECKSUM, "%d %s", ret, rl_loader_errmsg(ld));
	CHECK(rl_loader_device_area(ld, 0, &p, &n) == RL_E_STATE);
	rl_loader_destroy(ld);
	fixture_free(&f);
}

/* The caller's memory per shard (rl_loader_set_device_dest). */
static void caller_pointers(void)
{
	struct fixture f;
	char hex[65];
	int ret = fixture_big(&f, hex);
	uint8_t **dest = calloc(f.nshards + 1, sizeof(*dest));
	rl_loader *ld = dev_loader(256 << 10, two, 2);
	size_t bad;

	CHECKF(ret == 0 && dest && ld, "fixture: %d", ret);
	for (size_t i = 0; i < f.nshards; i++) {
		rl_shard_info si;

		rl_plan_shard(f.plan, i, &si);
		dest[i] = calloc(1, si.nbytes + 1);
		CHECK(dest[i] && rl_loader_set_device_dest(ld, i, (uint64_t)(uintptr_t)dest[i],
							   si.nbytes) == 0);
	}
	ret = rl_loader_run(ld, f.plan);
	bad = ret == 0 ? first_wrong(&f, ld, dest) : 0;
	CHECKF(ret == 0 && !bad, "%d %s, shard %zu", ret, rl_loader_errmsg(ld), bad - 1);
	rl_loader_destroy(ld);
	for (size_t i = 0; i < f.nshards; i++)
		free(dest[i]);
	free(dest);
	fixture_free(&f);
}

/* The 5th copy fails when it runs (at a wait, as a DMA error shows): the
 * load fails naming it, keeps no device memory, and the next load of
 * the same loader is right. */
static void failing_copy(void)
{
	struct fixture f;
	char hex[65];
	int ret = fixture_big(&f, hex);
	rl_loader *ld;
	uint64_t p, n;

	CHECKF(ret == 0, "fixture: %d", ret);
	setenv("RL_TESTDEV_FAIL_AT", "5", 1); /* read when the load opens the device */
	ld = dev_loader(256 << 10, two, 2);
	ret = ld ? rl_loader_run(ld, f.plan) : -ENOMEM;
	unsetenv("RL_TESTDEV_FAIL_AT");
	CHECKF(ret == RL_E_INVALID_ARG && strstr(rl_loader_errmsg(ld), "testdev: copy 5 failed"),
	       "%d %s", ret, rl_loader_errmsg(ld));
	CHECK(rl_loader_device_area(ld, 0, &p, &n) == RL_E_STATE);
	ret = rl_loader_run(ld, f.plan);
	CHECKF(ret == 0 && !first_wrong(&f, ld, NULL), "%d %s", ret, rl_loader_errmsg(ld));
	rl_loader_destroy(ld);
	fixture_free(&f);
}

/* rl_loader_start onto testdev, over 2 ordinals: every piece pulled is
 * in device memory (the shard's address + offset, no window held) with
 * its bytes there on arrival (copies run only at the fence's wait: a
 * piece handed out before would hold zeros); then the areas equal the
 * oracle. The consumer stopping early (finish) cancels the load and
 * keeps no device memory. */
static void pulled(void)
{
	struct fixture f;
	char hex[65];
	int ret = fixture_big(&f, hex);
	rl_loader *ld = dev_loader(256 << 10, two, 2);
	uint64_t ptr, n;
	rl_piece p;
	size_t got = 0;

	CHECKF(ret == 0 && ld, "fixture: %d", ret);
	CHECK(rl_loader_start(ld, f.plan) == 0);
	while ((ret = rl_loader_next_piece(ld, &p, -1)) == 1) {
		rl_shard_info si;

		CHECK(rl_plan_shard(f.plan, p.shard, &si) == 0 &&
		      rl_loader_device_shard(ld, p.shard, &ptr) == 0);
		CHECKF((uint64_t)(uintptr_t)p.data == ptr + p.offset && p.token == 0 &&
		       !memcmp(p.data, f.ref[si.device] + si.offset + p.offset, p.length),
		       "piece %zu: shard %zu at %llu not in place", got, p.shard,
		       (unsigned long long)p.offset);
		CHECK(rl_loader_release(ld, &p) == 0);
		got++;
	}
	CHECKF(ret == 0 && rl_loader_finish(ld) == 0, "%d %s", ret, rl_loader_errmsg(ld));
	CHECKF(got >= f.nshards && !first_wrong(&f, ld, NULL), "%zu pieces", got);
	CHECK(rl_loader_start(ld, f.plan) == 0 && rl_loader_next_piece(ld, &p, -1) == 1);
	ret = rl_loader_finish(ld);
	CHECKF(ret == RL_E_CANCELED, "%d %s", ret, rl_loader_errmsg(ld));
	CHECK(rl_loader_device_area(ld, 0, &ptr, &n) == RL_E_STATE);
	rl_loader_destroy(ld);
	fixture_free(&f);
}

/* ------------------------------------------------------------------ */
/* Once */

/* The registry's kinds, as the CLI and Python read them, the arguments
 * rl_loader_set_device refuses, and the kind a loader has. */
static void kinds(void)
{
	static const int32_t neg[] = { 0, -1 };
	rl_loader *ld = rl_loader_create();

	CHECK(ld);
	CHECK(!strcmp(rl_device_kind_at(0), "cuda"));
	CHECK(!strcmp(rl_device_kind_at(1), "testdev"));
	CHECK(rl_device_kind_at(2) == NULL);
	CHECK(rl_loader_device_kind(NULL) == NULL);
	CHECK(rl_loader_device_kind(ld) == NULL);
	CHECK(rl_loader_set_device(NULL, "cuda", NULL, 0, 0) == -EINVAL);
	CHECK(rl_loader_set_device(ld, "rocm", NULL, 0, 0) == RL_E_INVALID_ARG);
	CHECKF(strstr(rl_loader_errmsg(ld), "no device kind 'rocm' (this library has: cuda, "
		      "testdev)"), "%s", rl_loader_errmsg(ld));
	CHECK(rl_loader_set_device(ld, "testdev", NULL, 2, 0) == RL_E_INVALID_ARG);
	CHECK(rl_loader_set_device(ld, "testdev", neg, 2, RL_DEVICE_ONE) == RL_E_INVALID_ARG);
	CHECK(rl_loader_set_device(ld, "testdev", neg, 1, 2) == RL_E_INVALID_ARG);
	CHECK(rl_loader_set_device(ld, "cuda", neg, 2, 0) == RL_E_CUDA_DEVICE);
	CHECKF(strstr(rl_loader_errmsg(ld), "spec device 1 -> CUDA device -1"), "%s",
	       rl_loader_errmsg(ld));
	CHECK(rl_loader_set_device_dest(ld, 0, 1, 1) == RL_E_STATE);
	CHECK(rl_loader_set_device_stream(ld, 0, 0) == RL_E_STATE);
	CHECK(rl_loader_device_kind(ld) == NULL);
	CHECK(rl_loader_set_device(ld, "testdev", NULL, 0, 0) == 0);
	CHECK(rl_loader_device_kind(ld) && !strcmp(rl_loader_device_kind(ld), "testdev"));
	CHECK(rl_loader_set_device_dest(ld, 0, 4096, 1) == 0);
	CHECK(rl_loader_set_device_stream(ld, -1, 0) == RL_E_INVALID_ARG);
	CHECK(rl_loader_set_device_stream(ld, 1, 0) == 0);  /* testdev has no queues */
	CHECK(rl_loader_set_device_stream(ld, 1, RL_DEVICE_NO_STREAM) == 0);
	CHECK(rl_loader_set_device(ld, NULL, NULL, 0, 0) == 0); /* removed */
	CHECK(rl_loader_device_kind(ld) == NULL);
	CHECK(rl_loader_set_device_dest(ld, 0, 1, 1) == RL_E_STATE);
	rl_loader_destroy(ld);
}

/* An ordinal testdev has not: the load fails naming it. */
static void no_such_ordinal(void)
{
	static const int32_t map[] = { 0, 7 };
	struct fixture f;
	char hex[65];
	int ret = fixture_big(&f, hex);
	rl_loader *ld = dev_loader(256 << 10, map, 2);

	CHECKF(ret == 0 && ld, "fixture: %d", ret);
	ret = rl_loader_run(ld, f.plan);
	CHECKF(ret == RL_E_INVALID_ARG && strstr(rl_loader_errmsg(ld), "no testdev device 7"),
	       "%d %s", ret, rl_loader_errmsg(ld));
	rl_loader_destroy(ld);
	fixture_free(&f);
}

int main(void)
{
	static const struct th_case tests[] = {
		{ "random_plans", random_plans },
		{ "small_windows", small_windows },
		{ "converted_dtype", converted_dtype },
		{ "sha256", sha256 },
		{ "caller_pointers", caller_pointers },
		{ "failing_copy", failing_copy },
		{ "pulled", pulled },
	};
	static const unsigned workers[] = { 1, 3 };

	th_seed();
	th_run("kinds", kinds);
	th_run("no_such_ordinal", no_such_ordinal);
	run_on_every_backend(tests, CM_ARRAY_SIZE(tests), workers, CM_ARRAY_SIZE(workers),
			     select_backend);
	return th_done();
}
