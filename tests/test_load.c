/*
 * test_load.c - the public loading API end to end (checkpoint -> plan ->
 * engine -> staging) on every backend: the reference fixtures byte-exact
 * against MANIFEST.json's sha256, random checkpoints under random
 * shardings compared with an independent slicing of the file's bytes,
 * zero-size tensors, an empty checkpoint, shard and progress callbacks,
 * caller staging (aligned, misaligned, too small), parameters, stats, a
 * file truncated after planning, and tmpfs. The CLI's tests are in
 * test_cli.c.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckpt_util.h"
#include "harness.h"
#include "ringload.h"

static const rl_backend backends[] = { RL_BACKEND_IO_URING, RL_BACKEND_LIBAIO,
				       RL_BACKEND_PREAD };
static rl_backend cur = RL_BACKEND_IO_URING;

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
	rl_loader *ld = rl_loader_create();
	int ret;

	*ldp = ld;
	*planp = NULL;
	if (!ld)
		return -ENOMEM;
	ret = rl_loader_set(ld, RL_OPT_BACKEND, cur);
	if (ret == 0)
		ret = rl_loader_load(ld, ck, spec, process, planp);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Reference fixtures against MANIFEST.json */

static void check_fixture(const char *rel, cJSON *entry)
{
	char path[1024], hex[65];
	rl_ckpt *ck = rl_ckpt_create();
	rl_loader *ld;
	rl_plan *plan;
	size_t nsh, checked = 0;
	int ret;

	snprintf(path, sizeof(path), "%s/reference/%s", th_testdata(), rel);
	CHECK(ck);
	CHECKF(rl_ckpt_open(ck, path) == 0, "%s", rl_ckpt_errmsg(ck));
	ret = load(ck, NULL, 0, &ld, &plan);
	if (ret == RL_E_BACKEND) {
		rl_loader_destroy(ld);
		rl_ckpt_destroy(ck);
		SKIP("backend unavailable");
	}
	CHECKF(ret == 0, "%s: %s", rel, rl_loader_errmsg(ld));
	nsh = rl_plan_num_shards(plan);
	for (size_t s = 0; s < nsh; s++) {
		rl_shard_info si;
		cJSON *t, *sha;
		uint8_t *base;

		CHECK(rl_plan_shard(plan, s, &si) == 0);
		t = cJSON_GetObjectItemCaseSensitive(entry, si.name);
		CHECKF(t, "%s: no manifest entry for %s", rel, si.name);
		sha = cJSON_GetObjectItemCaseSensitive(t, "sha256");
		base = rl_loader_staging(ld, si.device, NULL);
		CHECK(si.nbytes == 0 || base);
		sha256_hex(si.nbytes ? base + si.offset : (const void *)"", si.nbytes, hex);
		CHECKF(cJSON_IsString(sha) && !strcmp(hex, sha->valuestring), "%s: %s differs",
		       rel, si.name);
		checked++;
	}
	CHECK_EQ(checked, cJSON_GetArraySize(entry));
	rl_plan_destroy(plan);
	rl_loader_destroy(ld);
	rl_ckpt_destroy(ck);
}

static void reference_fixtures(void)
{
	char path[1024];
	size_t n;
	char *text;
	cJSON *m, *entry;

	if (!th_testdata())
		SKIP(th_testdata_missing());
	snprintf(path, sizeof(path), "%s/reference/MANIFEST.json", th_testdata());
	text = slurp(path, &n);
	CHECK(text);
	m = cJSON_Parse(text);
	free(text);
	CHECK(m);
	cJSON_ArrayForEach(entry, m) {
		check_fixture(entry->string, entry);
		if (th_failed())
			break;
	}
	/* The 3-file checkpoint through its index: every tensor of every
	 * file, each file's entries merged into one. */
	if (!th_failed()) {
		cJSON *all = cJSON_CreateObject(), *t;

		cJSON_ArrayForEach(entry, m)
			if (!strncmp(entry->string, "tiny-moe/", 9))
				cJSON_ArrayForEach(t, entry)
					cJSON_AddItemReferenceToObject(all, t->string, t);
		CHECK(cJSON_GetArraySize(all) > 0);
		check_fixture("tiny-moe/model.safetensors.index.json", all);
		cJSON_Delete(all);
	}
	cJSON_Delete(m);
}

/* ------------------------------------------------------------------ */
/* Random checkpoints and shardings against independent slicing */

static const char *random_dim_spec(void)
{
	static const char *const specs[] = { "null", "\"x\"", "\"y\"", "[\"x\",\"y\"]",
					     "[\"y\",\"x\"]" };

	return specs[th_rand() % 5];
}

static void random_shardings(void)
{
	size_t verified = 0;

	for (int round = 0; round < 8; round++) {
		struct rt t[12];
		unsigned n = 1 + (unsigned)(th_rand() % 12);
		uint64_t data_start, fsize;
		char *spec_json = malloc(16384);
		size_t sj = 0;
		uint8_t *file = write_random_ckpt(tmp_path("rand.safetensors"), t, n, &data_start,
						  &fsize);
		rl_ckpt *ck = rl_ckpt_create();
		rl_spec *spec = rl_spec_create();
		unsigned mx = 1 + (unsigned)(th_rand() % 3), my = 1 + (unsigned)(th_rand() % 3);
		unsigned nproc = (unsigned)(th_rand() % 2) + 1;

		CHECK(file && ck && spec && spec_json);
		CHECKF(rl_ckpt_open(ck, tmp_path("rand.safetensors")) == 0, "%s", rl_ckpt_errmsg(ck));
		/* mesh (mx, my); devices split over nproc processes (ids are
		 * dense: one device means one process) */
		sj += (size_t)snprintf(spec_json + sj, 16384 - sj,
				       "{\"mesh\":{\"shape\":[%u,%u],\"axes\":[\"x\",\"y\"],"
				       "\"process_of_device\":[", mx, my);
		for (unsigned d = 0; d < mx * my; d++)
			sj += (size_t)snprintf(spec_json + sj, 16384 - sj, "%s%u", d ? "," : "",
					       nproc == 2 && mx * my >= 2 && d >= mx * my / 2 ? 1 : 0);
		sj += (size_t)snprintf(spec_json + sj, 16384 - sj, "]},\"rules\":[");
		for (unsigned i = 0; i < n; i++) {
			const char *d0 = random_dim_spec(), *d1 = "null";

			if (t[i].ndim >= 2) {
				/* the other dimension gets what the first left */
				if (!strchr(d0, 'x'))
					d1 = th_rand() % 2 ? "\"x\"" : "null";
				else if (!strchr(d0, 'y'))
					d1 = th_rand() % 2 ? "\"y\"" : "null";
			}
			if (t[i].ndim == 0)
				continue;
			sj += (size_t)snprintf(spec_json + sj, 16384 - sj,
					       "%s{\"match\":\"%s\",\"spec\":[%s%s%s]}",
					       sj && spec_json[sj - 1] == '}' ? "," : "", t[i].name, d0,
					       t[i].ndim >= 2 ? "," : "", t[i].ndim >= 2 ? d1 : "");
		}
		sj += (size_t)snprintf(spec_json + sj, 16384 - sj, "]}");
		CHECKF(rl_spec_parse(spec, spec_json, sj) == 0, "%s: %s", spec_json,
		       rl_spec_errmsg(spec));

		for (unsigned p = 0; p < (mx * my >= 2 ? nproc : 1); p++) {
			rl_loader *ld;
			rl_plan *plan;
			int ret = load(ck, spec, (int)p, &ld, &plan);

			if (ret == RL_E_BACKEND) {
				rl_loader_destroy(ld);
				break;
			}
			CHECKF(ret == 0, "round %d: %s (spec %s)", round, rl_loader_errmsg(ld),
			       spec_json);
			for (size_t s = 0; s < rl_plan_num_shards(plan); s++) {
				rl_shard_info si;
				long ti;
				uint8_t *base;

				CHECK(rl_plan_shard(plan, s, &si) == 0);
				ti = rl_ckpt_find(ck, si.name);
				CHECK(ti >= 0);
				base = rl_loader_staging(ld, si.device, NULL);
				CHECK(si.nbytes == 0 || base);
				verified++;
				for (unsigned i = 0; i < n; i++)
					if (!strcmp(t[i].name, si.name))
						CHECKF(slice_equal(file + data_start + t[i].off, t + i,
								   &si, base ? base + si.offset : NULL),
						       "round %d: shard %zu (%s on device %u) differs; spec %s",
						       round, s, si.name, si.device, spec_json);
			}
			rl_plan_destroy(plan);
			rl_loader_destroy(ld);
		}
		rl_spec_destroy(spec);
		rl_ckpt_destroy(ck);
		free(file);
		free(spec_json);
	}
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
		rl_load_stats st;
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
};

static void on_shard_cb(void *user, size_t s)
{
	struct cb_state *cs = user;

	cs->calls[s]++;
	(void)cs;
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
	rl_loader *ld = rl_loader_create();
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
	CHECK(rl_loader_set(ld, RL_OPT_BACKEND, cur) == 0);
	CHECK(rl_loader_set_callbacks(ld, on_shard_cb, on_progress_cb, &cs) == 0);
	ret = rl_loader_run(ld, plan);
	if (ret == RL_E_BACKEND)
		goto skip;
	CHECKF(ret == 0, "%s", rl_loader_errmsg(ld));
	for (size_t s = 0; s < nsh; s++)
		CHECKF(calls[s] == 1, "shard %zu reported %u times", s, calls[s]);
	CHECK(!cs.bad);
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
 * read by one process and broadcast. Each process's run succeeds; every
 * shard it reads itself is reported once and byte-exact; shards a
 * broadcast fills (all its shards of a tensor it receives) are not
 * reported.
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

static void read_once(void)
{
	static const char spec_json[] =
		"{\"mesh\":{\"shape\":[4],\"axes\":[\"m\"],\"process_of_device\":[0,0,1,1]},"
		"\"rules\":[{\"match\":\"t[4-7]\",\"spec\":[\"m\"]}]}";
	struct rt t[8];
	uint64_t data_start, fsize;
	uint8_t *file;
	rl_ckpt *ck = rl_ckpt_create();
	rl_spec *spec = rl_spec_create();
	size_t received = 0, reported = 0;
	int ret = 0;

	force_rank = 2;
	file = write_random_ckpt(tmp_path("ro.safetensors"), t, 8, &data_start, &fsize);
	force_rank = 0;
	CHECK(file && ck && spec);
	CHECK(rl_ckpt_open(ck, tmp_path("ro.safetensors")) == 0);
	CHECKF(rl_spec_parse(spec, spec_json, strlen(spec_json)) == 0, "%s",
	       rl_spec_errmsg(spec));
	for (int p = 0; p < 2; p++) {
		rl_plan *plan = rl_plan_create();
		rl_loader *ld = rl_loader_create();
		struct ro_state rs;
		size_t nsh;

		memset(&rs, 0, sizeof(rs));
		CHECK(plan && ld);
		CHECK(rl_plan_set(plan, RL_PLAN_PROCESS, p) == 0);
		CHECK(rl_plan_set(plan, RL_PLAN_READ_ONCE, 1) == 0);
		CHECK(rl_plan_set(plan, RL_PLAN_CHUNK_BYTES, 4096) == 0);
		CHECKF(rl_plan_build(plan, ck, spec) == 0, "%s", rl_plan_errmsg(plan));
		nsh = rl_plan_num_shards(plan);
		CHECK(nsh <= 128);
		CHECK(rl_loader_set(ld, RL_OPT_BACKEND, cur) == 0);
		CHECK(rl_loader_set_callbacks(ld, ro_on_shard, NULL, &rs) == 0);
		ret = rl_loader_run(ld, plan);
		if (ret == RL_E_BACKEND) {
			rl_loader_destroy(ld);
			rl_plan_destroy(plan);
			break;
		}
		CHECKF(ret == 0, "process %d: %s", p, rl_loader_errmsg(ld));
		for (size_t s = 0; s < nsh; s++) {
			rl_shard_info si;
			int recv = 0;
			unsigned i;
			uint8_t *base;

			CHECK(rl_plan_shard(plan, s, &si) == 0);
			for (size_t b = 0; b < rl_plan_num_broadcasts(plan); b++) {
				rl_broadcast_info bi;

				CHECK(rl_plan_broadcast(plan, b, &bi) == 0);
				recv |= !strcmp(bi.name, si.name) && bi.root != p;
			}
			if (recv) {
				CHECKF(rs.calls[s] == 0, "process %d: received shard %zu (%s) reported",
				       p, s, si.name);
				received++;
				continue;
			}
			CHECKF(rs.calls[s] == 1, "process %d: shard %zu (%s) reported %u times", p,
			       s, si.name, rs.calls[s]);
			i = (unsigned)atoi(si.name + 1);
			CHECK(i < 8);
			base = rl_loader_staging(ld, si.device, NULL);
			CHECK(base || !si.nbytes);
			CHECKF(slice_equal(file + data_start + t[i].off, t + i, &si,
					   base ? base + si.offset : NULL),
			       "process %d: shard %zu (%s) differs", p, s, si.name);
			reported++;
		}
		rl_loader_destroy(ld);
		rl_plan_destroy(plan);
	}
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
	free(file);
	if (ret == RL_E_BACKEND)
		SKIP("backend unavailable");
	/* t0-t3 are replicated over both processes: each is received by one */
	CHECKF(received >= 2 && reported > 0, "%zu received, %zu reported", received, reported);
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
	rl_loader *ld = rl_loader_create();
	rl_device_info di;
	rl_load_stats st;
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
	CHECK(rl_loader_set(ld, RL_OPT_BACKEND, cur) == 0);
	CHECK(rl_loader_set(ld, RL_OPT_STAGING, RL_STAGING_CALLER) == 0);
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
		for (size_t s = 0; s < rl_plan_num_shards(plan); s++) {
			rl_shard_info si;

			CHECK(rl_plan_shard(plan, s, &si) == 0);
			for (unsigned i = 0; i < 8; i++)
				if (!strcmp(t[i].name, si.name))
					CHECKF(!memcmp(file + data_start + t[i].off, base + si.offset,
						       si.nbytes),
					       "misaligned %d: %s differs", mis, si.name);
		}
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

/* The file shrinks between planning and loading: "truncated". */
static void truncated_after_plan(void)
{
	struct rt t[4];
	uint64_t data_start, fsize;
	uint8_t *file = write_random_ckpt(tmp_path("tr.safetensors"), t, 4, &data_start, &fsize);
	rl_ckpt *ck = rl_ckpt_create();
	rl_plan *plan = rl_plan_create();
	rl_loader *ld = rl_loader_create();
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
	CHECK(rl_loader_set(ld, RL_OPT_BACKEND, cur) == 0);
	ret = rl_loader_run(ld, plan);
	rl_loader_destroy(ld);
	rl_plan_destroy(plan);
	rl_ckpt_destroy(ck);
	if (ret == RL_E_BACKEND)
		SKIP("backend unavailable");
	CHECKF(ret == RL_E_TRUNCATED, "%d", ret);
}

/* `ringload load --out DIR --verify` writes every shard in the documented
 * layout; checked against independent slicing. Usage errors exit 2, bad
 * input 1. */
static void params_and_stats(void)
{
	rl_loader *ld = rl_loader_create();
	rl_load_stats st;
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
	rl_load_stats st;
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

int main(void)
{
	static const struct {
		const char *name;
		th_fn fn;
	} tests[] = {
		{ "reference_fixtures", reference_fixtures },
		{ "random_shardings", random_shardings },
		{ "empty_and_zero_size", empty_and_zero_size },
		{ "callbacks", callbacks },
		{ "caller_staging", caller_staging },
		{ "truncated_after_plan", truncated_after_plan },
		{ "read_once", read_once },
	};
	char name[128];

	th_seed();
	for (size_t b = 0; b < sizeof(backends) / sizeof(backends[0]); b++) {
		cur = backends[b];
		for (size_t t = 0; t < sizeof(tests) / sizeof(tests[0]); t++) {
			snprintf(name, sizeof(name), "%s/%s", rl_backend_name(cur), tests[t].name);
			th_run(name, tests[t].fn);
		}
	}
	RUN(params_and_stats);
	RUN(null_safety);
	return th_done();
}
