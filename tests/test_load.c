/*
 * test_load.c - the public loading API end to end (checkpoint -> plan ->
 * engine -> staging) on every backend, with one worker and with several
 * (random shardings: 1 to 8): the reference fixtures byte-exact
 * against MANIFEST.json's sha256, random checkpoints under random
 * shardings compared with an independent slicing of the file's bytes,
 * zero-size tensors, an empty checkpoint, shard and progress callbacks,
 * caller staging (aligned, misaligned, too small), parameters, stats, a
 * file truncated after planning, tmpfs, the page cache read buffered when
 * it holds the file (and O_DIRECT when not, or when forced), the
 * size-tagged statistics, rl_staging_alloc and the request size. The CLI's
 * tests are in test_cli.c.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckpt_util.h"
#include "engine_util.h"
#include "harness.h"
#include "ringload.h"

/* one worker (the calling thread alone) and several */
static const unsigned worker_counts[] = { 1, 3 };
static rl_backend cur = RL_BACKEND_IO_URING;
static unsigned cur_workers = 1;

/* A loader on the current backend and worker count (NULL when out of
 * memory or refused). */
static rl_loader *new_loader(void)
{
	rl_loader *ld = rl_loader_create();

	if (ld && (rl_loader_set(ld, RL_OPT_BACKEND, cur) < 0 ||
		   rl_loader_set(ld, RL_OPT_WORKERS, cur_workers) < 0)) {
		rl_loader_destroy(ld);
		return NULL;
	}
	return ld;
}

static void sha256_hex(const void *p, size_t n, char out[65])
{
	unsigned char md[32];
	unsigned int len = 0;

	EVP_Digest(p, n, md, &len, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
}

/* Loads ck under spec (NULL: whole) with the current backend. */
static int load(const rl_ckpt *ck, const rl_spec *spec, int process, rl_loader **ldp,
		rl_plan **planp)
{
	rl_loader *ld = new_loader();

	*ldp = ld;
	*planp = NULL;
	if (!ld)
		return -ENOMEM;
	return rl_loader_load(ld, ck, spec, process, planp);
}

/* ------------------------------------------------------------------ */
/* Reference fixtures against MANIFEST.json */

static void check_fixture(const char *dir, const char *rel, cJSON *entry)
{
	char path[1024], hex[65];
	rl_ckpt *ck = rl_ckpt_create();
	rl_loader *ld;
	rl_plan *plan;
	size_t nsh, checked = 0;
	int ret;

	snprintf(path, sizeof(path), "%s/reference/%s", dir, rel);
	CHECK(ck);
	CHECKF(rl_ckpt_open(ck, path) == 0, "%s", rl_ckpt_errmsg(ck));
	ret = load(ck, NULL, 0, &ld, &plan);
	if (ret == RL_E_BACKEND) {
		rl_loader_destroy(ld);
		rl_ckpt_destroy(ck);
		SKIP("backend unavailable");
	}
	CHECKF(ret == 0, "%s: %s", path, rl_loader_errmsg(ld));
	nsh = rl_plan_num_shards(plan);
	for (size_t s = 0; s < nsh; s++) {
		rl_shard_info si;
		cJSON *t, *sha;
		uint8_t *base;

		CHECK(rl_plan_shard(plan, s, &si) == 0);
		t = cJSON_GetObjectItemCaseSensitive(entry, si.name);
		CHECKF(t, "%s: no manifest entry for %s", path, si.name);
		sha = cJSON_GetObjectItemCaseSensitive(t, "sha256");
		base = rl_loader_staging(ld, si.device, NULL);
		CHECK(si.nbytes == 0 || base);
		sha256_hex(si.nbytes ? base + si.offset : (const void *)"", si.nbytes, hex);
		CHECKF(cJSON_IsString(sha) && !strcmp(hex, sha->valuestring), "%s: %s differs",
		       path, si.name);
		checked++;
	}
	CHECK_EQ(checked, cJSON_GetArraySize(entry));
	rl_plan_destroy(plan);
	rl_loader_destroy(ld);
	rl_ckpt_destroy(ck);
}

/* Every file of a fixture set, then the 3-file checkpoint through its
 * index (every tensor of every file, each file's entries merged into one). */
static void reference_fixtures_in(const char *dir)
{
	char path[1024];
	size_t n;
	char *text;
	cJSON *m, *entry;

	snprintf(path, sizeof(path), "%s/reference/MANIFEST.json", dir);
	text = slurp(path, &n);
	CHECK(text);
	m = cJSON_Parse(text);
	free(text);
	CHECK(m);
	cJSON_ArrayForEach(entry, m) {
		check_fixture(dir, entry->string, entry);
		if (th_failed())
			break;
	}
	if (!th_failed()) {
		cJSON *all = cJSON_CreateObject(), *t;

		cJSON_ArrayForEach(entry, m)
			if (!strncmp(entry->string, "tiny-moe/", 9))
				cJSON_ArrayForEach(t, entry)
					cJSON_AddItemReferenceToObject(all, t->string, t);
		CHECK(cJSON_GetArraySize(all) > 0);
		check_fixture(dir, "tiny-moe/model.safetensors.index.json", all);
		cJSON_Delete(all);
	}
	cJSON_Delete(m);
}

static void reference_fixtures(void)
{
	th_on_fixture_sets(reference_fixtures_in);
}

/* ------------------------------------------------------------------ */
/* Random checkpoints and shardings against independent slicing */

/* Loads process p of ck under spec; every shard against an independent
 * slice of the file's bytes. Returns the shards checked, or -1 (failed,
 * or the backend is missing: *skip). */
static long check_process(const rl_ckpt *ck, const rl_spec *spec, unsigned p, const uint8_t *file,
			  uint64_t data_start, const struct rt *t, unsigned n, int *skip)
{
	rl_loader *ld;
	rl_plan *plan;
	long verified = 0;
	int ret = load(ck, spec, (int)p, &ld, &plan);

	*skip = ret == RL_E_BACKEND;
	if (ret < 0) {
		if (!*skip)
			printf("    process %u: %s\n", p, rl_loader_errmsg(ld));
		rl_loader_destroy(ld);
		return -1;
	}
	for (size_t s = 0; s < rl_plan_num_shards(plan) && verified >= 0; s++) {
		rl_shard_info si;
		uint8_t *base;

		rl_plan_shard(plan, s, &si);
		base = rl_loader_staging(ld, si.device, NULL);
		verified++;
		for (unsigned i = 0; i < n; i++)
			if (!strcmp(t[i].name, si.name) && ((si.nbytes && !base) ||
			    !slice_equal(file + data_start + t[i].off, t + i, &si,
					 base ? base + si.offset : NULL))) {
				printf("    shard %zu (%s on device %u) differs\n", s, si.name,
				       si.device);
				verified = -1;
			}
	}
	rl_plan_destroy(plan);
	rl_loader_destroy(ld);
	return verified;
}

static void random_shardings(void)
{
	unsigned workers = cur_workers;
	size_t verified = 0;

	for (int round = 0; round < 8 && !th_failed(); round++) {
		struct rt t[12];
		unsigned n = 1 + (unsigned)(th_rand() % 12);
		uint64_t data_start, fsize;
		char *spec_json = malloc(16384);
		uint8_t *file = write_random_ckpt(tmp_path("rand.safetensors"), t, n, &data_start,
						  &fsize);
		rl_ckpt *ck = rl_ckpt_create();
		rl_spec *spec = rl_spec_create();
		unsigned mx = 1 + (unsigned)(th_rand() % 3), my = 1 + (unsigned)(th_rand() % 3);
		unsigned nproc = (unsigned)(th_rand() % 2) + 1;
		size_t sj;
		int skip = 0;

		/* several workers: each count from 1 to 8 once */
		cur_workers = workers > 1 ? 1 + (unsigned)round : 1;
		CHECK(file && ck && spec && spec_json);
		CHECKF(rl_ckpt_open(ck, tmp_path("rand.safetensors")) == 0, "%s", rl_ckpt_errmsg(ck));
		sj = random_spec(t, n, mx, my, nproc, spec_json, 16384);
		CHECKF(rl_spec_parse(spec, spec_json, sj) == 0, "%s: %s", spec_json,
		       rl_spec_errmsg(spec));
		for (unsigned p = 0; p < (mx * my >= 2 ? nproc : 1) && !skip; p++) {
			long v = check_process(ck, spec, p, file, data_start, t, n, &skip);

			CHECKF(v >= 0 || skip, "round %d, %u workers: spec %s", round, cur_workers,
			       spec_json);
			verified += v > 0 ? (size_t)v : 0;
		}
		rl_spec_destroy(spec);
		rl_ckpt_destroy(ck);
		free(file);
		free(spec_json);
	}
	cur_workers = workers;
	CHECK(verified > 0);
}

/* ------------------------------------------------------------------ */

static void empty_and_zero_size(void)
{
	static const char *const headers[2] = {
		"{}",
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
		"\"b\":{\"dtype\":\"U8\",\"shape\":[0,5],\"data_offsets\":[0,0]}}",
	};
	const char *files[2] = { tmp_path("empty.safetensors"), tmp_path("zero.safetensors") };

	for (int i = 0; i < 2; i++) {
		char buf[256];
		uint64_t hlen = strlen(headers[i]);

		memcpy(buf, &hlen, 8);
		memcpy(buf + 8, headers[i], hlen);
		CHECK(write_bytes(files[i], buf, 8 + hlen) == 0);
	}
	for (int i = 0; i < 2; i++) {
		rl_ckpt *ck = rl_ckpt_create();
		rl_loader *ld;
		rl_plan *plan;
		rl_load_stats st = { .size = sizeof(st) };
		int ret;

		CHECKF(rl_ckpt_open(ck, files[i]) == 0, "%s", rl_ckpt_errmsg(ck));
		ret = load(ck, NULL, 0, &ld, &plan);
		if (ret == RL_E_BACKEND) {
			rl_loader_destroy(ld);
			rl_ckpt_destroy(ck);
			SKIP("backend unavailable");
		}
		CHECKF(ret == 0, "%s: %s", files[i], rl_loader_errmsg(ld));
		CHECK(rl_loader_get_stats(ld, &st) == 0);
		CHECK_EQ(st.bytes_read, 0);
		CHECK_EQ(rl_plan_num_shards(plan), i ? 2 : 0);
		rl_plan_destroy(plan);
		rl_loader_destroy(ld);
		rl_ckpt_destroy(ck);
	}
}

/*
 * Many tiny tensors: staging holds them packed (each aligned to its size
 * rounded up to a power of two, at most 16) rather than each padded to
 * 4096, so its size is within twice the data plus a page per large shard,
 * the plan's staging_bytes are what the loader maps, and every shard
 * arrives byte-exact. Tensor i is "t<i>"; one large tensor split over two
 * devices sits among them.
 */
#define TINY_N 6000

static uint8_t *write_tiny_ckpt(const char *path, struct rt *t, uint64_t *data_start)
{
	static const struct { const char *dtype; unsigned itemsize; uint64_t count; } kinds[] = {
		{ "U8", 1, 1 }, { "BF16", 2, 1 }, { "F32", 4, 3 }, { "F64", 8, 1 },
		{ "U8", 1, 17 }, { "BF16", 2, 40 },
	};
	size_t cap = 96 * (size_t)TINY_N + 64, hlen = 1;
	char *hdr = malloc(cap);
	uint64_t off = 0;
	uint8_t *file = NULL;

	if (!hdr)
		return NULL;
	hdr[0] = '{';
	for (unsigned i = 0; i < TINY_N; i++) {
		unsigned k = i % CM_ARRAY_SIZE(kinds);
		uint64_t count = i == TINY_N / 2 ? 70000 : kinds[k].count;

		snprintf(t[i].name, sizeof(t[i].name), "t%u", i);
		t[i].dtype = kinds[k].dtype;
		t[i].itemsize = kinds[k].itemsize;
		t[i].ndim = 1;
		t[i].shape[0] = count;
		t[i].off = off;
		t[i].nbytes = count * kinds[k].itemsize;
		hlen += (size_t)snprintf(hdr + hlen, cap - hlen,
					 "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%" PRIu64 "],"
					 "\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", i ? "," : "",
					 t[i].name, t[i].dtype, count, off, off + t[i].nbytes);
		off += t[i].nbytes;
	}
	hdr[hlen++] = '}';
	*data_start = 8 + hlen;
	file = malloc(*data_start + off);
	if (file) {
		memcpy(file, &(uint64_t){ hlen }, 8);
		memcpy(file + 8, hdr, hlen);
		for (uint64_t b = 0; b < off; b++)
			file[*data_start + b] = (uint8_t)th_rand();
		if (write_bytes(path, file, *data_start + off)) {
			free(file);
			file = NULL;
		}
	}
	free(hdr);
	return file;
}

/* Checks the loaded shards of plan against file; the staging bytes in *staging. */
static void check_tiny_shards(const rl_plan *plan, rl_loader *ld, const uint8_t *tensors,
			      const struct rt *t, uint64_t *staging)
{
	*staging = 0;
	for (unsigned d = 0; d < rl_plan_num_devices(plan); d++) {
		rl_device_info di;
		size_t len = 0;

		CHECK(rl_plan_device(plan, d, &di) == 0);
		CHECK(rl_loader_staging(ld, d, &len) != NULL);
		CHECK_EQ(len, di.staging_bytes);
		*staging += len;
	}
	for (size_t s = 0; s < rl_plan_num_shards(plan); s++) {
		rl_shard_info si;
		unsigned i;
		const uint8_t *base;

		CHECK(rl_plan_shard(plan, s, &si) == 0);
		i = (unsigned)strtoul(si.name + 1, NULL, 10);
		base = rl_loader_staging(ld, si.device, NULL);
		CHECKF(si.offset % t[i].itemsize == 0, "%s at %" PRIu64, si.name, si.offset);
		CHECKF(slice_equal(tensors + t[i].off, t + i, &si, base + si.offset),
		       "shard %zu (%s on device %u) differs", s, si.name, si.device);
	}
}

static void tiny_tensors_packed(void)
{
	static const char spec_json[] =
		"{\"mesh\":{\"shape\":[2],\"axes\":[\"d\"]},"
		"\"rules\":[{\"match\":\"t3000\",\"spec\":[\"d\"]}]}";
	struct rt *t = calloc(TINY_N, sizeof(*t));
	uint64_t data_start, data = 0;
	uint8_t *file = t ? write_tiny_ckpt(tmp_path("tiny.safetensors"), t, &data_start) : NULL;
	rl_ckpt *ck = rl_ckpt_create();
	rl_spec *spec = rl_spec_create();

	CHECK(file && ck && spec);
	for (unsigned i = 0; i < TINY_N; i++)
		data += t[i].nbytes;
	CHECKF(rl_ckpt_open(ck, tmp_path("tiny.safetensors")) == 0, "%s", rl_ckpt_errmsg(ck));
	CHECKF(rl_spec_parse(spec, spec_json, strlen(spec_json)) == 0, "%s", rl_spec_errmsg(spec));
	for (int split = 0; split < 2 && !th_failed(); split++) {
		rl_loader *ld;
		rl_plan *plan;
		int ret = load(ck, split ? spec : NULL, 0, &ld, &plan);
		uint64_t staging;
		rl_load_stats st = { .size = sizeof(st) };

		if (ret == RL_E_BACKEND) {
			rl_loader_destroy(ld);
			break;
		}
		CHECKF(ret == 0, "%s", rl_loader_errmsg(ld));
		check_tiny_shards(plan, ld, file + data_start, t, &staging);
		/* each device: the tiny ones packed, the large shard padded by a page */
		CHECKF(staging <= (split ? 2 : 1) * (2 * data + 4096), "%" PRIu64 " bytes of "
		       "staging for %" PRIu64 " bytes of data", staging, data);
		/* the large whole shard (70,000 bytes) is still planned to be
		 * read straight into staging where the file takes O_DIRECT, and
		 * a load that used O_DIRECT did so */
		CHECK(rl_loader_get_stats(ld, &st) == 0);
		if (!split) {
			uint64_t direct = 0;
			int fd = open(tmp_path("tiny.safetensors"), O_RDONLY | O_DIRECT);

			for (size_t r = 0; r < rl_plan_num_requests(plan); r++) {
				rl_request_info ri;

				CHECK(rl_plan_request(plan, r, &ri) == 0);
				direct += ri.direct ? ri.length : 0;
			}
			CHECKF(fd < 0 || direct >= 65536, "%" PRIu64 " bytes of direct requests",
			       direct);
			CHECKF(!st.direct_io || !direct || st.bytes_direct > 0, "%" PRIu64
			       " bytes of direct requests, none read direct", direct);
			if (fd >= 0)
				close(fd);
		}
		rl_plan_destroy(plan);
		rl_loader_destroy(ld);
	}
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
	free(file);
	free(t);
}

/*
 * Short tensors that follow each other in the file (20,000 x 64 KiB
 * checkpoints) are read straight into staging, many to a read, with no
 * bounce copy: where the load reads O_DIRECT, all but the unaligned ends
 * count as bytes_direct, and every shard is byte-exact. Before, these
 * loads read every byte through bounce buffers (bytes_direct 0) and
 * copied each tensor out: 0.80x cat's speed on the 20,000-tensor file.
 * The data starts 8-aligned (as safetensors' writer pads its header),
 * not page-aligned.
 */
static void short_neighbours_read_straight(void)
{
	enum { NT = 48, TB = 65536 };
	const char *path = tmp_path("neighbours.safetensors");
	char hex[65];
	uint8_t *file = NULL;
	size_t n = 0;
	rl_ckpt *ck = rl_ckpt_create();
	rl_loader *ld = NULL;
	rl_plan *plan = NULL;
	rl_load_stats st = { .size = sizeof(st) };
	int ret;

	CHECK(ck && write_hashed_ckpt_at(path, NT, TB, 3984, hex) == 0);
	CHECK((file = (uint8_t *)slurp(path, &n)) != NULL && n > (size_t)NT * TB);
	CHECKF(rl_ckpt_open(ck, path) == 0, "%s", rl_ckpt_errmsg(ck));
	/* O_DIRECT although the file was just written (auto would read it
	 * from the page cache) */
	ld = new_loader();
	CHECK(ld && rl_loader_set(ld, RL_OPT_DIRECT, RL_DIRECT_ON) == 0);
	ret = rl_loader_load(ld, ck, NULL, 0, &plan);
	if (ret == RL_E_BACKEND) {
		rl_loader_destroy(ld);
		rl_ckpt_destroy(ck);
		free(file);
		SKIP("backend unavailable");
	}
	CHECKF(ret == 0, "%s", rl_loader_errmsg(ld));
	for (size_t s = 0; s < rl_plan_num_shards(plan) && !th_failed(); s++) {
		rl_shard_info si;
		const uint8_t *base = rl_loader_staging(ld, 0, NULL);

		CHECK(rl_plan_shard(plan, s, &si) == 0);
		CHECKF(si.nbytes == TB && !memcmp(base + si.offset, file + n - (size_t)(NT - s) * TB, TB),
		       "shard %zu (%s) differs", s, si.name);
	}
	CHECK(rl_loader_get_stats(ld, &st) == 0);
	CHECKF(!st.direct_io || st.bytes_direct + 2 * 4096 >= (uint64_t)NT * TB,
	       "%" PRIu64 " of %u bytes read straight", st.bytes_direct, NT * TB);
	rl_plan_destroy(plan);
	rl_loader_destroy(ld);
	rl_ckpt_destroy(ck);
	free(file);
}

/* A caller who sets RL_PLAN_SHARD_ALIGN (SIMD, DMA) gets it for every
 * shard, small ones included (packing had given them 16 at most), and the
 * load is byte-exact. */
static void shard_align_set_aligns_every_shard(void)
{
	struct rt *t = calloc(TINY_N, sizeof(*t));
	uint64_t data_start, staging;
	uint8_t *file = t ? write_tiny_ckpt(tmp_path("align.safetensors"), t, &data_start) : NULL;
	rl_ckpt *ck = rl_ckpt_create();
	rl_plan *plan = rl_plan_create();
	rl_loader *ld = new_loader();
	int ret;

	CHECK(file && ck && plan && ld);
	CHECKF(rl_ckpt_open(ck, tmp_path("align.safetensors")) == 0, "%s", rl_ckpt_errmsg(ck));
	CHECK(rl_plan_set(plan, RL_PLAN_SHARD_ALIGN, 256) == 0);
	CHECK(rl_plan_set(plan, RL_PLAN_CONGRUENT, 0) == 0);
	CHECKF(rl_plan_build(plan, ck, NULL) == 0, "%s", rl_plan_errmsg(plan));
	for (size_t s = 0; s < rl_plan_num_shards(plan) && !th_failed(); s++) {
		rl_shard_info si;

		CHECK(rl_plan_shard(plan, s, &si) == 0);
		CHECKF(si.offset % 256 == 0, "%s (%" PRIu64 " bytes) at %" PRIu64, si.name,
		       si.nbytes, si.offset);
	}
	ret = rl_loader_run(ld, plan);
	if (ret != RL_E_BACKEND) {
		CHECKF(ret == 0, "%s", rl_loader_errmsg(ld));
		check_tiny_shards(plan, ld, file + data_start, t, &staging);
	}
	rl_loader_destroy(ld);
	rl_plan_destroy(plan);
	rl_ckpt_destroy(ck);
	free(file);
	free(t);
}

/* Callbacks: every shard exactly once, complete when reported; progress
 * reaches the total; a progress callback that says stop cancels. */
struct cb_state {
	rl_loader *ld;
	const rl_plan *plan;
	const uint8_t *file;
	uint64_t data_start;
	struct rt *t;
	unsigned n;
	unsigned *calls;
	int bad;
	uint64_t last_done, total;
	int cancel;
	atomic_int inside;      /* on_shard calls running now */
	atomic_int overlapped;  /* two ran at once */
};

/* Serialized by the loader: the plain counters need no lock, and two
 * calls never overlap (checked). */
static void on_shard_cb(void *user, size_t s)
{
	struct cb_state *cs = user;

	if (atomic_fetch_add(&cs->inside, 1))
		atomic_store(&cs->overlapped, 1);
	cs->calls[s]++;
	usleep(50);
	atomic_fetch_sub(&cs->inside, 1);
}

static int on_progress_cb(void *user, uint64_t done, uint64_t total)
{
	struct cb_state *cs = user;

	if (done < cs->last_done || done > total)
		cs->bad = 1;
	cs->last_done = done;
	cs->total = total;
	return cs->cancel && done * 4 >= total;
}

static void callbacks(void)
{
	struct rt t[6];
	uint64_t data_start, fsize;
	uint8_t *file;
	rl_ckpt *ck = rl_ckpt_create();
	rl_plan *plan = rl_plan_create();
	rl_loader *ld = new_loader();
	unsigned calls[64] = { 0 };
	struct cb_state cs;
	size_t nsh;
	int ret;

	file = write_random_ckpt(tmp_path("cb.safetensors"), t, 6, &data_start, &fsize);
	CHECK(file && ck && plan && ld);
	CHECK(rl_ckpt_open(ck, tmp_path("cb.safetensors")) == 0);
	CHECK(rl_plan_set(plan, RL_PLAN_CHUNK_BYTES, 4096) == 0);
	CHECK(rl_plan_build(plan, ck, NULL) == 0);
	nsh = rl_plan_num_shards(plan);
	CHECK(nsh <= 64);
	memset(&cs, 0, sizeof(cs));
	cs.calls = calls;
	CHECK(rl_loader_set_callbacks(ld, on_shard_cb, on_progress_cb, &cs) == 0);
	ret = rl_loader_run(ld, plan);
	if (ret == RL_E_BACKEND)
		goto skip;
	CHECKF(ret == 0, "%s", rl_loader_errmsg(ld));
	for (size_t s = 0; s < nsh; s++)
		CHECKF(calls[s] == 1, "shard %zu reported %u times", s, calls[s]);
	CHECK(!cs.bad);
	CHECK(!atomic_load(&cs.overlapped));
	CHECK(cs.last_done == cs.total);

	/* cancel at a quarter: an error, no staging handed out */
	memset(calls, 0, sizeof(calls));
	cs.cancel = 1;
	cs.last_done = 0;
	ret = rl_loader_run(ld, plan);
	if (fsize > 4 * 4096) {
		CHECKF(ret == RL_E_CANCELED, "%d %s", ret, rl_loader_errmsg(ld));
		CHECK(rl_loader_staging(ld, 0, NULL) == NULL);
	}
skip:
	rl_loader_destroy(ld);
	rl_plan_destroy(plan);
	rl_ckpt_destroy(ck);
	free(file);
	if (ret == RL_E_BACKEND)
		SKIP("backend unavailable");
}

/*
 * Read once across 2 processes of 2 devices each: replicated tensors are
 * read once in the cluster, by contiguous ranges, and travel. Here the
 * whole cluster runs in one program: every root reads its payloads with
 * its batch plans (rl_plan_build_batch) on the backend under test, each
 * process runs its own plan and applies its transfers' scatter lists, and
 * every shard must equal the file's bytes. Shards the reads fill are
 * reported once; shards transfers fill are not reported.
 */
struct ro_state {
	unsigned calls[128];
};

static void ro_on_shard(void *user, size_t s)
{
	struct ro_state *rs = user;

	if (s < 128)
		rs->calls[s]++;
}

static const char ro_spec[] =
	"{\"mesh\":{\"shape\":[4],\"axes\":[\"m\"],\"process_of_device\":[0,0,1,1]},"
	"\"rules\":[{\"match\":\"t[4-7]\",\"spec\":[\"m\"]}]}";

static rl_plan *ro_plan(rl_ckpt *ck, rl_spec *spec, int p)
{
	rl_plan *plan = rl_plan_create();

	if (!plan || rl_plan_set(plan, RL_PLAN_PROCESS, p) ||
	    rl_plan_set(plan, RL_PLAN_READ_ONCE, 1) || rl_plan_set(plan, RL_PLAN_CHUNK_BYTES, 4096) ||
	    rl_plan_set(plan, RL_PLAN_BATCH_BYTES, 5000) || rl_plan_build(plan, ck, spec)) {
		rl_plan_destroy(plan);
		return NULL;
	}
	return plan;
}

/* Root p's payloads, batch by batch, into payload[transfer index]. */
static int ro_read_payloads(const rl_plan *plan, int p, uint8_t **payload)
{
	uint64_t nb = 0;
	int ret = 0;

	rl_plan_transfer_summary(plan, NULL, &nb, NULL);
	for (uint64_t b = 0; b < nb && !ret; b++) {
		rl_plan *bp = rl_plan_create();
		rl_loader *ld = rl_loader_create();
		size_t k = 0;

		rl_plan_set(bp, RL_PLAN_CHUNK_BYTES, 8192);
		if (rl_plan_build_batch(bp, plan, b) || rl_loader_set(ld, RL_OPT_BACKEND, cur))
			ret = -1;
		if (!ret)
			ret = rl_loader_run(ld, bp);
		for (size_t i = 0; !ret && i < rl_plan_num_transfers(plan); i++) {
			rl_transfer_info x;
			rl_shard_info si;

			rl_plan_transfer(plan, i, &x);
			if (x.root != p || x.batch != b)
				continue;
			rl_plan_shard(bp, k++, &si);
			payload[x.index] = malloc(x.nbytes);
			memcpy(payload[x.index], (uint8_t *)rl_loader_staging(ld, 0, NULL) + si.offset,
			       x.nbytes);
		}
		rl_loader_destroy(ld);
		rl_plan_destroy(bp);
	}
	return ret;
}

/* Process p's transfers into its staging; marks the shards they fill. */
static void ro_apply(const rl_plan *plan, rl_loader *ld, uint8_t *const *payload, uint8_t *recv)
{
	for (size_t i = 0; i < rl_plan_num_transfers(plan); i++) {
		rl_transfer_info x;

		rl_plan_transfer(plan, i, &x);
		for (size_t j = 0; j < x.ncopies; j++) {
			rl_copy_info c;
			uint8_t *dst;

			rl_plan_transfer_copy(plan, i, j, &c);
			dst = (uint8_t *)rl_loader_staging(ld, c.device, NULL) + c.dst;
			for (uint64_t k = 0; k < c.count; k++)
				memcpy(dst + k * c.len, payload[x.index] + c.src + k * c.src_stride, c.len);
			recv[c.shard] = 1;
		}
	}
}

static void read_once(void)
{
	struct rt t[8];
	uint64_t data_start, fsize, ntotal = 0;
	uint8_t *file = NULL, *payload[256] = { 0 };
	rl_ckpt *ck = rl_ckpt_create();
	rl_spec *spec = rl_spec_create();
	rl_plan *plan[2] = { NULL, NULL };
	size_t received = 0, reported = 0, travel = 0;
	int ret = 0;

	/* Drawn again (rarely: t0-t3 all empty, 1 in 4,600) until a
	 * replicated tensor has bytes: otherwise nothing travels. */
	force_rank = 2;
	for (int tries = 0; tries < 16; tries++) {
		free(file);
		file = write_random_ckpt(tmp_path("ro.safetensors"), t, 8, &data_start, &fsize);
		if (!file || t[0].nbytes + t[1].nbytes + t[2].nbytes + t[3].nbytes)
			break;
	}
	force_rank = 0;
	CHECK(file && ck && spec);
	CHECK(t[0].nbytes + t[1].nbytes + t[2].nbytes + t[3].nbytes > 0);
	CHECK(rl_ckpt_open(ck, tmp_path("ro.safetensors")) == 0);
	CHECKF(rl_spec_parse(spec, ro_spec, strlen(ro_spec)) == 0, "%s", rl_spec_errmsg(spec));
	for (int p = 0; p < 2; p++) {
		plan[p] = ro_plan(ck, spec, p);
		CHECK(plan[p]);
	}
	rl_plan_transfer_summary(plan[0], &ntotal, NULL, NULL);
	CHECK(ntotal > 0 && ntotal <= 256);
	for (int p = 0; p < 2 && !ret; p++)
		ret = ro_read_payloads(plan[p], p, payload);
	for (int p = 0; p < 2 && !ret; p++) {
		rl_loader *ld = new_loader();
		struct ro_state rs;
		uint8_t recv[128] = { 0 };
		size_t nsh = rl_plan_num_shards(plan[p]);

		memset(&rs, 0, sizeof(rs));
		CHECK(nsh <= 128);
		CHECK(rl_loader_set_callbacks(ld, ro_on_shard, NULL, &rs) == 0);
		ret = rl_loader_run(ld, plan[p]);
		CHECKF(ret == 0 || ret == RL_E_BACKEND, "process %d: %s", p, rl_loader_errmsg(ld));
		if (!ret)
			ro_apply(plan[p], ld, payload, recv);
		for (size_t s = 0; !ret && s < nsh; s++) {
			rl_shard_info si;
			unsigned i;

			CHECK(rl_plan_shard(plan[p], s, &si) == 0);
			CHECKF(rs.calls[s] == !recv[s], "process %d: shard %zu (%s) reported %u times",
			       p, s, si.name, rs.calls[s]);
			received += recv[s];
			reported += rs.calls[s];
			i = (unsigned)atoi(si.name + 1);
			CHECK(i < 8);
			CHECKF(slice_equal(file + data_start + t[i].off, t + i, &si,
					   si.nbytes ? (uint8_t *)rl_loader_staging(ld, si.device, NULL) +
					   si.offset : NULL),
			       "process %d: shard %zu (%s) differs", p, s, si.name);
		}
		rl_loader_destroy(ld);
	}
	for (uint64_t g = 0; g < 256; g++)
		free(payload[g]);
	rl_plan_destroy(plan[0]);
	rl_plan_destroy(plan[1]);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
	free(file);
	if (ret == RL_E_BACKEND)
		SKIP("backend unavailable");
	/* t0-t3 are replicated over both processes: each that has bytes is
	 * received on both devices of (at least) the process that does not
	 * read all of it; an empty one (a zero dimension, now and then) has
	 * nothing to send */
	for (int i = 0; i < 4; i++)
		travel += t[i].nbytes > 0 ? 2 : 0;
	CHECKF(received >= travel && reported > 0, "%zu received, %zu reported, %zu expected",
	       received, reported, travel);
}

/* The first whole-tensor shard of plan (tensors t[0..n) of file) whose
 * bytes differ in staging (base: device 0's area; NULL: ld's areas), or
 * NULL when all are equal. */
static const char *differs(const rl_plan *plan, const rl_loader *ld, const uint8_t *base,
			   const uint8_t *file, uint64_t data_start, const struct rt *t, unsigned n)
{
	for (size_t s = 0; s < rl_plan_num_shards(plan); s++) {
		rl_shard_info si;
		const uint8_t *area;

		rl_plan_shard(plan, s, &si);
		area = base ? base : rl_loader_staging(ld, si.device, NULL);
		for (unsigned i = 0; i < n; i++)
			if (!strcmp(t[i].name, si.name) && si.nbytes &&
			    (!area || memcmp(file + data_start + t[i].off, area + si.offset, si.nbytes)))
				return t[i].name;
	}
	return NULL;
}

/* Caller staging: aligned (direct reads), misaligned by one byte (bounce
 * fallback), too small or missing (RL_E_STAGING). */
static void caller_staging(void)
{
	struct rt t[8];
	uint64_t data_start, fsize;
	uint8_t *file = write_random_ckpt(tmp_path("cs.safetensors"), t, 8, &data_start, &fsize);
	rl_ckpt *ck = rl_ckpt_create();
	rl_plan *plan = rl_plan_create();
	rl_loader *ld = new_loader();
	rl_device_info di;
	rl_load_stats st = { .size = sizeof(st) };
	uint8_t *mem;
	size_t len;
	int ret = 0;

	CHECK(file && ck && plan && ld);
	CHECK(rl_ckpt_open(ck, tmp_path("cs.safetensors")) == 0);
	CHECK(rl_plan_build(plan, ck, NULL) == 0);
	CHECK(rl_plan_device(plan, 0, &di) == 0);
	len = di.staging_bytes + 8192;
	mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(mem != MAP_FAILED);
	CHECK(rl_loader_set(ld, RL_OPT_STAGING, RL_STAGING_CALLER) == 0);
	/* O_DIRECT even when the page cache holds the file: the misaligned
	 * area must go through bounce buffers */
	CHECK(rl_loader_set(ld, RL_OPT_DIRECT, RL_DIRECT_ON) == 0);
	ret = rl_loader_run(ld, plan);
	CHECKF(ret == RL_E_STAGING, "%d %s", ret, rl_loader_errmsg(ld));
	CHECK(rl_loader_set_staging(ld, 0, mem, di.staging_bytes ? di.staging_bytes - 1 : 0) == 0 ||
	      di.staging_bytes <= 1);
	if (di.staging_bytes > 1) {
		ret = rl_loader_run(ld, plan);
		CHECKF(ret == RL_E_STAGING && strstr(rl_loader_errmsg(ld), "needed"), "%d %s", ret,
		       rl_loader_errmsg(ld));
	}
	for (int mis = 0; mis < 2; mis++) {
		uint8_t *base = mem + mis;

		memset(mem, 0xEE, len);
		CHECK(rl_loader_set_staging(ld, 0, base, di.staging_bytes + 1) == 0);
		ret = rl_loader_run(ld, plan);
		if (ret == RL_E_BACKEND)
			break;
		CHECKF(ret == 0, "misaligned %d: %s", mis, rl_loader_errmsg(ld));
		CHECK(rl_loader_staging(ld, 0, NULL) == base);
		CHECKF(!differs(plan, ld, base, file, data_start, t, 8), "misaligned %d: %s differs",
		       mis, differs(plan, ld, base, file, data_start, t, 8));
		CHECK(rl_loader_get_stats(ld, &st) == 0);
		if (mis)
			CHECK_EQ(st.bytes_direct, 0);
	}
	munmap(mem, len);
	rl_loader_destroy(ld);
	rl_plan_destroy(plan);
	rl_ckpt_destroy(ck);
	free(file);
	if (ret == RL_E_BACKEND)
		SKIP("backend unavailable");
}

/* The file shrinks between planning and loading: its size differs from
 * the one recorded when the checkpoint was opened, so the load refuses it
 * as changed before reading (RL_E_FILE_CHANGED; truncation during the
 * load is RL_E_TRUNCATED: test_engine.c). */
static void truncated_after_plan(void)
{
	struct rt t[4];
	uint64_t data_start, fsize;
	uint8_t *file = write_random_ckpt(tmp_path("tr.safetensors"), t, 4, &data_start, &fsize);
	rl_ckpt *ck = rl_ckpt_create();
	rl_plan *plan = rl_plan_create();
	rl_loader *ld = new_loader();
	int ret;

	CHECK(file && ck && plan && ld);
	free(file);
	CHECK(rl_ckpt_open(ck, tmp_path("tr.safetensors")) == 0);
	CHECK(rl_plan_build(plan, ck, NULL) == 0);
	if (fsize - data_start < 16) {
		rl_loader_destroy(ld);
		rl_plan_destroy(plan);
		rl_ckpt_destroy(ck);
		return;
	}
	CHECK(truncate(tmp_path("tr.safetensors"), (off_t)(fsize - 8)) == 0);
	ret = rl_loader_run(ld, plan);
	rl_loader_destroy(ld);
	rl_plan_destroy(plan);
	rl_ckpt_destroy(ck);
	if (ret == RL_E_BACKEND)
		SKIP("backend unavailable");
	CHECKF(ret == RL_E_FILE_CHANGED, "%d", ret);
}

/* Runs a shell command quietly; returns its exit status (-1: no shell). */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int sh(const char *fmt, ...)
{
	char cmd[2048], out[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return th_capture(cmd, out, sizeof(out));
}

/* A load of a checkpoint on an ext4 file system over a loop device, then
 * its unmount at once: a load leaves no reference to the checkpoint's
 * files behind it. (io_uring's registered files used to stay with the
 * kernel's deferred ring teardown, after the load had returned, so that
 * an operator's umount right after a load found the file system busy.) */
static int load_on_mount(const char *dir)
{
	struct rt t[4];
	uint64_t data_start, fsize;
	char path[PATH_MAX + 32];
	uint8_t *file;
	rl_ckpt *ck = rl_ckpt_create();
	rl_loader *ld = new_loader();
	rl_plan *plan = NULL;
	int ret = ck && ld ? 0 : -ENOMEM;

	snprintf(path, sizeof(path), "%s/m.safetensors", dir);
	file = ret == 0 ? write_random_ckpt(path, t, 4, &data_start, &fsize) : NULL;
	if (ret == 0 && !file)
		ret = -EIO;
	if (ret == 0)
		ret = rl_ckpt_open(ck, path);
	if (ret == 0)
		ret = rl_loader_load(ld, ck, NULL, 0, &plan);
	if (ret == 0 && differs(plan, ld, NULL, file, data_start, t, 4))
		ret = -EILSEQ;
	free(file);
	rl_plan_destroy(plan);
	rl_loader_destroy(ld);
	rl_ckpt_destroy(ck);
	return ret;
}

static void unmount_after_load(void)
{
	char img[PATH_MAX], dir[PATH_MAX], dev[64] = "";
	FILE *f;
	int ret, um = -1, err = 0;

	if (geteuid() != 0)
		SKIP("needs root (losetup, mount)");
	if (sh("command -v losetup && command -v mkfs.ext4") != 0)
		SKIP("losetup or mkfs.ext4 missing");
	snprintf(img, sizeof(img), "%s", tmp_path("fs.img"));
	snprintf(dir, sizeof(dir), "%s", tmp_path("mnt"));
	mkdir(dir, 0700);
	if (sh("truncate -s 64M %s && losetup -f --show %s > %s.dev", img, img, img) != 0)
		SKIP("losetup failed (no loop devices here?)");
	f = fopen(tmp_path("fs.img.dev"), "r");
	if (f && !fgets(dev, sizeof(dev), f))
		dev[0] = '\0';
	if (f)
		fclose(f);
	dev[strcspn(dev, "\n")] = '\0';
	ret = dev[0] && sh("mkfs.ext4 -q -F %s && mount %s %s", dev, dev, dir) == 0 ? 0 : -1;
	if (ret == 0) {
		ret = load_on_mount(dir);
		um = umount(dir);
		err = errno;
		if (um < 0) /* clean up however long the references stay */
			sh("for i in 1 2 3 4 5 6 7 8 9 10; do umount %s && break; sleep 0.2; done", dir);
	}
	if (dev[0])
		sh("losetup -d %s", dev);
	unlink(img);
	rmdir(dir);
	if (ret == RL_E_BACKEND)
		SKIP("backend unavailable");
	CHECKF(dev[0] && ret != -1, "loop device %s: mkfs.ext4 or mount failed", dev);
	CHECKF(ret == 0, "load: %d", ret);
	CHECKF(um == 0, "umount right after the load: %s", strerror(err));
}

/* ------------------------------------------------------------------ */
/* The page cache: buffered when the file is there, O_DIRECT when not */

/* Loads ck whole with RL_OPT_DIRECT = direct, expecting hex (the file's
 * SHA-256); checks the bytes against file and returns file 0's
 * statistics in *fs (0, or the load's code). */
static int load_direct_mode(const rl_ckpt *ck, int direct, const char *hex, const uint8_t *file,
			    uint64_t data_start, const struct rt *t, unsigned n, rl_file_stats *fs,
			    rl_load_stats *x)
{
	rl_loader *ld = new_loader();
	rl_plan *plan = NULL;
	int ret = ld ? rl_loader_set(ld, RL_OPT_DIRECT, direct) : -ENOMEM;

	if (ret == 0)
		ret = rl_loader_expect_sha256(ld, "hot.safetensors", hex);
	if (ret == 0)
		ret = rl_loader_load(ld, ck, NULL, 0, &plan);
	if (ret == 0 && differs(plan, ld, NULL, file, data_start, t, n))
		ret = -EILSEQ;
	fs->size = sizeof(*fs);
	x->size = sizeof(*x);
	if (ret == 0 && (rl_loader_get_file_stats(ld, 0, fs) || rl_loader_get_stats(ld, x)))
		ret = -EINVAL;
	rl_plan_destroy(plan);
	rl_loader_destroy(ld);
	return ret;
}

/*
 * RL_DIRECT_AUTO reads a file the page cache holds (just read, as by
 * `cat`) buffered, and one evicted from it with O_DIRECT, byte-exact both
 * ways and saying so per file, and why (rl_file_stats.why); RL_DIRECT_ON
 * and RL_DIRECT_OFF (the CLI's --read-mode direct and buffered) force
 * either way whatever the cache holds, cold and hot, and say they were
 * asked. Every load checks the file's SHA-256 as it reads: a buffered
 * read at any alignment still hashes the whole file in order.
 */
static void hot_cache_choice(void)
{
	static const struct {
		int hot, direct, mode, why;
	} cases[] = {
		{ 1, RL_DIRECT_AUTO, RL_FILE_CACHED, RL_WHY_HOT },
		{ 0, RL_DIRECT_AUTO, RL_FILE_DIRECT, RL_WHY_COLD },
		{ 1, RL_DIRECT_ON, RL_FILE_DIRECT, RL_WHY_ASKED },
		{ 0, RL_DIRECT_ON, RL_FILE_DIRECT, RL_WHY_ASKED },
		{ 0, RL_DIRECT_OFF, RL_FILE_BUFFERED, RL_WHY_ASKED },
		{ 1, RL_DIRECT_OFF, RL_FILE_BUFFERED, RL_WHY_ASKED },
	};
	struct rt t[10];
	uint64_t data_start, fsize;
	const char *path = tmp_path("hot.safetensors");
	uint8_t *file;
	char hex[65];
	rl_ckpt *ck = rl_ckpt_create();
	int ret = 0, dropped = 0;

	force_rank = 2;
	file = write_random_ckpt(path, t, 10, &data_start, &fsize);
	force_rank = 0;
	CHECK(file && ck);
	CHECK(rl_ckpt_open(ck, path) == 0);
	sha256_hex(file, fsize, hex);
	for (size_t c = 0; c < CM_ARRAY_SIZE(cases) && !th_failed(); c++) {
		long drops = th_cache_drops();
		rl_file_stats fs;
		rl_load_stats x;

		CHECK(cases[c].hot ? tu_warm(path) == 0 : tu_evict(path) == 0);
		ret = load_direct_mode(ck, cases[c].direct, hex, file, data_start, t, 10, &fs, &x);
		if (ret == RL_E_BACKEND)
			break;
		CHECKF(ret == 0, "case %zu: %d", c, ret);
		dropped = cases[c].hot && fs.mode != cases[c].mode &&
			  th_cache_dropped_since(drops);
		if (dropped)
			break;
		CHECKF(fs.mode == cases[c].mode && fs.why == cases[c].why,
		       "case %zu: mode %d why %d, resident %llu of %llu", c, fs.mode, fs.why,
		       (unsigned long long)fs.bytes_resident, (unsigned long long)fs.bytes_needed);
		CHECKF(fs.sha256_state == RL_SHA256_MATCHED && !strcmp(fs.sha256, hex) &&
		       x.files_hashed == 1 && x.bytes_hashed == fsize, "case %zu: sha256 %d %s", c,
		       fs.sha256_state, fs.sha256);
		CHECK(fs.bytes_needed >= fsize - data_start);
		if (cases[c].direct == RL_DIRECT_AUTO && cases[c].hot)
			CHECK(fs.bytes_resident * 10 >= fs.bytes_needed * 9 && x.files_cached == 1 &&
			      x.bytes_buffered > 0);
		if (cases[c].direct == RL_DIRECT_AUTO && !cases[c].hot)
			CHECK(fs.bytes_resident * 10 < fs.bytes_needed * 9 && x.files_cached == 0);
		if (cases[c].direct == RL_DIRECT_OFF)
			CHECK(x.bytes_buffered >= fsize - data_start && !x.direct_io);
	}
	rl_ckpt_destroy(ck);
	free(file);
	if (ret == RL_E_BACKEND)
		SKIP("backend unavailable");
	if (dropped)
		SKIP(TH_CACHE_DROPPED);
}

/* Writes a random checkpoint of n tensors as name and opens it; *file
 * (may be NULL: freed) receives its bytes. Returns the handle or NULL. */
static rl_ckpt *random_ckpt(const char *name, struct rt *t, unsigned n, uint8_t **file,
			    uint64_t *data_start)
{
	uint64_t fsize;
	uint8_t *bytes = write_random_ckpt(tmp_path(name), t, n, data_start, &fsize);
	rl_ckpt *ck = bytes ? rl_ckpt_create() : NULL;

	if (ck && rl_ckpt_open(ck, tmp_path(name)) < 0) {
		rl_ckpt_destroy(ck);
		ck = NULL;
	}
	if (file && ck)
		*file = bytes;
	else
		free(bytes);
	return ck;
}

/* The size-tagged statistics: an older (smaller) struct gets its own
 * bytes and no more, a size that cannot hold itself is refused, and the
 * fields say what ran. */
static void stats_sizes(void)
{
	struct rt t[4];
	uint64_t data_start;
	rl_ckpt *ck = NULL;
	rl_loader *ld = new_loader();
	rl_plan *plan = NULL;
	rl_load_stats x;
	rl_file_stats fs;
	unsigned char raw[sizeof(rl_load_stats) + 16];
	size_t old = offsetof(rl_load_stats, queue_depth); /* workers: before it */
	int ret;

	/* Drawn again (rarely: all 4 empty, 1 in 15,000) until a tensor has
	 * bytes: a load that reads nothing uses no file. */
	for (int tries = 0; tries < 16; tries++) {
		rl_ckpt_destroy(ck);
		ck = random_ckpt("sx.safetensors", t, 4, NULL, &data_start);
		if (!ck || t[0].nbytes + t[1].nbytes + t[2].nbytes + t[3].nbytes)
			break;
	}
	CHECK(ck && ld);
	CHECK(t[0].nbytes + t[1].nbytes + t[2].nbytes + t[3].nbytes > 0);
	x.size = sizeof(x);
	CHECK_EQ(rl_loader_get_stats(ld, &x), RL_E_STATE);
	CHECK_EQ(rl_loader_num_files(ld), 0);
	ret = rl_loader_load(ld, ck, NULL, 0, &plan);
	if (ret == RL_E_BACKEND) {
		rl_loader_destroy(ld);
		rl_ckpt_destroy(ck);
		SKIP("backend unavailable");
	}
	CHECKF(ret == 0, "%s", rl_loader_errmsg(ld));
	CHECK(rl_loader_get_stats(ld, &x) == 0 && x.size == sizeof(x));
	CHECK(x.workers >= 1 && x.workers <= cur_workers && x.queue_depth >= x.workers);
	CHECKF(strstr(x.shape, "workers") && strstr(x.shape, "requests"), "%s", x.shape);
	CHECKF(!x.fallback_flags == !x.fallbacks[0], "0x%x '%s'", x.fallback_flags, x.fallbacks);
	memset(raw, 0xEE, sizeof(raw));
	((rl_load_stats *)raw)->size = old;
	CHECK(rl_loader_get_stats(ld, (rl_load_stats *)raw) == 0);
	CHECK_EQ(((rl_load_stats *)raw)->size, old);
	CHECK(((rl_load_stats *)raw)->workers == x.workers && raw[old] == 0xEE);
	((rl_load_stats *)raw)->size = sizeof(size_t) - 1;
	CHECK_EQ(rl_loader_get_stats(ld, (rl_load_stats *)raw), -EINVAL);
	CHECK_EQ(rl_loader_get_stats(ld, NULL), -EINVAL);
	CHECK_EQ(rl_loader_num_files(ld), 1);
	fs.size = sizeof(fs);
	CHECK(rl_loader_get_file_stats(ld, 0, &fs) == 0 && fs.size == sizeof(fs));
	CHECK(fs.mode != RL_FILE_UNUSED && fs.bytes_needed > 0 && fs.file == 0);
	CHECK_EQ(rl_loader_get_file_stats(ld, 1, &fs), -EINVAL);
	CHECK_EQ(rl_loader_get_file_stats(NULL, 0, &fs), -EINVAL);
	rl_plan_destroy(plan);
	rl_loader_destroy(ld);
	rl_ckpt_destroy(ck);
}

/* rl_staging_alloc: huge-page aligned memory that caller staging loads
 * into byte-exact; rl_staging_free(NULL, n) does nothing. */
static void staging_alloc(void)
{
	struct rt t[6];
	uint64_t data_start;
	uint8_t *file = NULL;
	rl_ckpt *ck = random_ckpt("sa.safetensors", t, 6, &file, &data_start);
	rl_plan *plan = rl_plan_create();
	rl_loader *ld = new_loader();
	rl_device_info di;
	size_t len;
	uint8_t *mem;
	int ret;

	CHECK(file && ck && plan && ld);
	CHECK(rl_staging_alloc(0) == NULL);
	rl_staging_free(NULL, 123);
	mem = rl_staging_alloc(3 << 20);
	CHECK(mem && (uintptr_t)mem % (2 << 20) == 0);
	rl_staging_free(mem, 3 << 20);
	CHECK(rl_plan_build(plan, ck, NULL) == 0);
	CHECK(rl_plan_device(plan, 0, &di) == 0);
	len = di.staging_bytes ? di.staging_bytes : 1;
	mem = rl_staging_alloc(len);
	CHECK(mem && (uintptr_t)mem % 4096 == 0);
	CHECK(rl_loader_set(ld, RL_OPT_STAGING, RL_STAGING_CALLER) == 0);
	CHECK(rl_loader_set_staging(ld, 0, mem, len) == 0);
	ret = rl_loader_run(ld, plan);
	CHECKF(ret != 0 || !differs(plan, ld, mem, file, data_start, t, 6), "%s differs",
	       differs(plan, ld, mem, file, data_start, t, 6));
	CHECKF(ret == 0 || ret == RL_E_BACKEND, "%s", rl_loader_errmsg(ld));
	rl_loader_destroy(ld);
	rl_staging_free(mem, len);
	rl_plan_destroy(plan);
	rl_ckpt_destroy(ck);
	free(file);
}

/* rl_loader_request_bytes: as set; else 8 MiB in whole requests of the
 * device under the file; never above the in-flight bound. */
static void request_bytes_auto(void)
{
	struct rt t[2];
	uint64_t data_start;
	rl_ckpt *ck = NULL;
	rl_loader *ld = rl_loader_create();
	rl_plan *plan = NULL;
	rl_file_stats fs;
	int64_t req;

	/* a byte to read: both random tensors can be empty (a zero dimension
	 * now and then), and a run that reads nothing has no file statistics */
	for (int i = 0; i < 100 && (!ck || t[0].nbytes + t[1].nbytes == 0); i++) {
		rl_ckpt_destroy(ck);
		ck = random_ckpt("rq.safetensors", t, 2, NULL, &data_start);
	}
	CHECK(ck && ld);
	CHECK_EQ(rl_loader_request_bytes(NULL, ck), -EINVAL);
	CHECK_EQ(rl_loader_request_bytes(ld, NULL), -EINVAL);
	req = rl_loader_request_bytes(ld, ck);
	CHECK(req > 0 && req <= 8 << 20);
	CHECK(rl_loader_load(ld, ck, NULL, 0, &plan) == 0);
	fs.size = sizeof(fs);
	CHECK(rl_loader_get_file_stats(ld, 0, &fs) == 0);
	CHECKF(!fs.max_request_bytes || req % fs.max_request_bytes == 0 ||
	       fs.max_request_bytes > req, "%lld, device %s takes %u", (long long)req, fs.device,
	       fs.max_request_bytes);
	CHECK(rl_loader_set(ld, RL_OPT_REQUEST_BYTES, 1 << 20) == 0);
	CHECK_EQ(rl_loader_request_bytes(ld, ck), 1 << 20);
	CHECK(rl_loader_set(ld, RL_OPT_INFLIGHT_BYTES, 256 << 10) == 0);
	CHECK_EQ(rl_loader_request_bytes(ld, ck), 256 << 10);
	rl_plan_destroy(plan);
	rl_loader_destroy(ld);
	rl_ckpt_destroy(ck);
}

static void params_and_stats(void)
{
	rl_loader *ld = rl_loader_create();
	rl_load_stats st = { .size = sizeof(st) };
	int64_t lo, hi;

	CHECK(ld);
	CHECK(rl_loader_get_stats(ld, &st) == RL_E_STATE);
	CHECK(rl_loader_param_bounds(RL_OPT_QUEUE_DEPTH, &lo, &hi) == 0 && lo == 1);
	CHECK(rl_loader_param_bounds((rl_loader_param)99, &lo, &hi) == -EINVAL);
	CHECK(rl_loader_set(ld, RL_OPT_QUEUE_DEPTH, 0) == RL_E_INVALID_ARG);
	CHECK(strstr(rl_loader_errmsg(ld), "not in"));
	CHECK(rl_loader_set(ld, RL_OPT_BACKEND, 4) == RL_E_INVALID_ARG);
	CHECK(rl_loader_set(ld, RL_OPT_INFLIGHT_BYTES, 1 << 20) == 0);
	CHECK(rl_loader_staging(ld, 0, NULL) == NULL);
	CHECK_STR(rl_backend_name(RL_BACKEND_LIBAIO), "libaio");
	CHECK_STR(rl_backend_name((rl_backend)9), "?");
	rl_loader_destroy(ld);
	rl_loader_destroy(NULL);
}

/* Every loader entry point takes NULL handles and pointers like the
 * checkpoint, spec and plan ones: -EINVAL (or NULL, ""), never a crash. */
static void null_safety(void)
{
	rl_loader *ld = rl_loader_create();
	rl_plan *plan = rl_plan_create(), *got = (rl_plan *)1;
	rl_load_stats st = { .size = sizeof(st) };
	int64_t lo = -1;
	size_t len = 1;

	CHECK(ld && plan);
	CHECK_STR(rl_loader_errmsg(NULL), "");
	CHECK_EQ(rl_loader_run(NULL, plan), -EINVAL);
	CHECK_EQ(rl_loader_run(ld, NULL), -EINVAL);
	CHECK(strstr(rl_loader_errmsg(ld), "plan"));
	CHECK_EQ(rl_loader_run(ld, plan), RL_E_STATE); /* not built */
	CHECK_EQ(rl_loader_load(NULL, NULL, NULL, 0, &got), -EINVAL);
	CHECK(got == NULL);
	CHECK_EQ(rl_loader_load(ld, NULL, NULL, 0, NULL), -EINVAL);
	got = (rl_plan *)1;
	CHECK(rl_loader_load(ld, NULL, NULL, 0, &got) < 0);
	CHECK(got == NULL);
	CHECK_EQ(rl_loader_set(NULL, RL_OPT_QUEUE_DEPTH, 8), -EINVAL);
	CHECK_EQ(rl_loader_set_callbacks(NULL, NULL, NULL, NULL), -EINVAL);
	CHECK_EQ(rl_loader_set_staging(NULL, 0, &lo, sizeof(lo)), -EINVAL);
	CHECK(rl_loader_staging(NULL, 0, &len) == NULL && len == 0);
	CHECK_EQ(rl_loader_get_stats(NULL, &st), -EINVAL);
	CHECK_EQ(rl_loader_get_stats(ld, NULL), -EINVAL);
	CHECK_EQ(rl_loader_param_bounds(RL_OPT_QUEUE_DEPTH, NULL, NULL), 0);
	CHECK_EQ(rl_loader_param_bounds(RL_OPT_QUEUE_DEPTH, &lo, NULL), 0);
	CHECK_EQ(lo, 1);
	CHECK_EQ(rl_loader_param_bounds((rl_loader_param)99, NULL, NULL), -EINVAL);
	rl_plan_destroy(plan);
	rl_loader_destroy(ld);
}

/* The library's one table of backends gives the order, names, ids, the
 * bound of RL_OPT_BACKEND and the capabilities. */
static void backend_table(void)
{
	static const char *const release[] = { "io_uring", "libaio", "pread" };
	rl_loader *ld = rl_loader_create();
	int64_t lo, hi;
	size_t n = 0;

	CHECK(ld && rl_loader_param_bounds(RL_OPT_BACKEND, &lo, &hi) == 0);
	for (int id; (id = rl_backend_at(n)) >= 0; n++) {
		CHECK_EQ(rl_backend_by_name(rl_backend_name((rl_backend)id)), id);
		CHECK(id > lo && id <= hi);
		if (n < CM_ARRAY_SIZE(release))
			CHECK_STR(rl_backend_name((rl_backend)id), release[n]);
	}
	/* the release's three, then the test build's own (engine/be_test.c) */
	CHECK_EQ(n, 4);
	CHECK_STR(rl_backend_name((rl_backend)rl_backend_at(3)), "test");
	CHECK_EQ(rl_backend_by_name("auto"), RL_BACKEND_AUTO);
	CHECK_EQ(rl_backend_by_name("nvme"), RL_E_INVALID_ARG);
	CHECK_EQ(rl_backend_by_name(NULL), RL_E_INVALID_ARG);
	CHECK(rl_backend_caps(RL_BACKEND_IO_URING) & RL_BACKEND_CAP_FIXED_BUFFERS);
	CHECK(rl_backend_caps(RL_BACKEND_LIBAIO) & RL_BACKEND_CAP_KERNEL_QUEUE);
	CHECK(!(rl_backend_caps(RL_BACKEND_PREAD) & RL_BACKEND_CAP_KERNEL_QUEUE));
	CHECK_EQ(rl_backend_caps(RL_BACKEND_AUTO), 0);
	/* within the bounds but no backend of that id */
	CHECK_EQ(rl_loader_set(ld, RL_OPT_BACKEND, 4), RL_E_INVALID_ARG);
	CHECK(strstr(rl_loader_errmsg(ld), "no such backend"));
	rl_loader_destroy(ld);
}

static void select_backend(rl_backend b, unsigned workers)
{
	cur = b;
	cur_workers = workers;
}

int main(void)
{
	static const struct th_case tests[] = {
		{ "reference_fixtures", reference_fixtures },
		{ "random_shardings", random_shardings },
		{ "empty_and_zero_size", empty_and_zero_size },
		{ "tiny_tensors_packed", tiny_tensors_packed },
		{ "short_neighbours_read_straight", short_neighbours_read_straight },
		{ "shard_align_set_aligns_every_shard", shard_align_set_aligns_every_shard },
		{ "callbacks", callbacks },
		{ "caller_staging", caller_staging },
		{ "truncated_after_plan", truncated_after_plan },
		{ "read_once", read_once },
		{ "hot_cache_choice", hot_cache_choice },
		{ "stats_sizes", stats_sizes },
		{ "staging_alloc", staging_alloc },
		{ "unmount_after_load", unmount_after_load },
	};

	th_seed();
	run_on_every_backend(tests, CM_ARRAY_SIZE(tests), worker_counts,
			     CM_ARRAY_SIZE(worker_counts), select_backend);
	cur = RL_BACKEND_IO_URING;
	cur_workers = 1;
	RUN(request_bytes_auto);
	RUN(params_and_stats);
	RUN(backend_table);
	RUN(null_safety);
	return th_done();
}
