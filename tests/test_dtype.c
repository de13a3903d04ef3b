/*
 * test_dtype.c - dtype conversion on load (RL_PLAN_DTYPE): a checkpoint
 * of every convertible source (random bits: NaNs, infinities and
 * subnormals among them) plus integers that stay as stored, loaded to
 * F32, F16 and BF16 whole and column-sharded (strided runs, requests of
 * 8 KiB so that runs straddle them), into library staging and streamed
 * through 64 KiB windows, on every backend with 1 and 3 workers. Every
 * shard is compared with its box of the file, element by element
 * through sk_convert_one (test_convert.c checks it against a reference
 * and torch). And what is refused: F64, data off its element size, a
 * destination that is not F32, F16 or BF16, read once.
 */
#include <errno.h>
#include <stdlib.h>

#include "ckpt_util.h"
#include "harness.h"
#include "ringload.h"
#include "../sink/convert.h"
#include "common.h"

struct tt {
	const char *name;
	int dtype;
	unsigned ndim;
	uint64_t shape[2];
	uint64_t off;           /* in the data buffer */
};

static struct tt tensors[] = {
	{ "a.f32", RL_DTYPE_F32, 2, { 64, 300 }, 0 },
	{ "big.f32", RL_DTYPE_F32, 2, { 96, 1024 }, 0 },
	{ "b.f16", RL_DTYPE_F16, 2, { 33, 130 }, 0 },
	{ "c.bf16", RL_DTYPE_BF16, 2, { 17, 260 }, 0 },
	{ "f.i32", RL_DTYPE_I32, 2, { 10, 12 }, 0 },
	{ "d.e4", RL_DTYPE_F8_E4M3, 2, { 40, 98 }, 0 },
	{ "e.e5", RL_DTYPE_F8_E5M2, 2, { 21, 64 }, 0 },
	{ "g.u8", RL_DTYPE_U8, 1, { 7, 0 }, 0 },
};
#define NT (sizeof(tensors) / sizeof(tensors[0]))

static rl_backend cur = RL_BACKEND_IO_URING;
static unsigned cur_workers = 1;
static uint8_t *file_data;      /* the data buffer's bytes */
static char ckpt_path[4096];

static uint64_t nbytes_of(const struct tt *t)
{
	uint64_t n = rl_dtype_bits(t->dtype) / 8;

	for (unsigned d = 0; d < t->ndim; d++)
		n *= t->shape[d];
	return n;
}

/* Writes the checkpoint once: header padded to 8, tensors in order,
 * random bytes. */
static int write_ckpt(void)
{
	char hdr[4096], shape[64];
	size_t n = 1, hl;
	uint64_t off = 0, le;
	FILE *f;

	hdr[0] = '{';
	for (size_t i = 0; i < NT; i++) {
		struct tt *t = &tensors[i];

		t->off = off;
		if (t->ndim == 1)
			snprintf(shape, sizeof(shape), "%llu", (unsigned long long)t->shape[0]);
		else
			snprintf(shape, sizeof(shape), "%llu,%llu", (unsigned long long)t->shape[0],
				 (unsigned long long)t->shape[1]);
		n += (size_t)snprintf(hdr + n, sizeof(hdr) - n,
				      "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],"
				      "\"data_offsets\":[%llu,%llu]}", i ? "," : "", t->name,
				      rl_dtype_name(t->dtype), shape, (unsigned long long)off,
				      (unsigned long long)(off + nbytes_of(t)));
		off += nbytes_of(t);
	}
	hdr[n++] = '}';
	while (n % 8)
		hdr[n++] = ' ';
	hl = n;
	file_data = malloc(off);
	for (uint64_t i = 0; i < off; i += 8) {
		uint64_t r = th_rand();

		memcpy(file_data + i, &r, CM_MIN(8, off - i));
	}
	snprintf(ckpt_path, sizeof(ckpt_path), "%s/dtype.safetensors", th_tmpdir());
	f = fopen(ckpt_path, "wb");
	if (!f)
		return -1;
	le = hl;
	fwrite(&le, 8, 1, f);
	fwrite(hdr, 1, hl, f);
	fwrite(file_data, 1, off, f);
	return fclose(f);
}

static const struct tt *find(const char *name)
{
	for (size_t i = 0; i < NT; i++)
		if (!strcmp(tensors[i].name, name))
			return &tensors[i];
	return NULL;
}

/* The bytes shard si must hold: its box of the file's tensor, C order,
 * each element converted to si->dtype (as stored when it is the same). */
static uint8_t *expected(const rl_shard_info *si)
{
	const struct tt *t = find(si->name);
	unsigned is = rl_dtype_bits(t->dtype) / 8, os = rl_dtype_bits(si->dtype) / 8;
	uint64_t cols = t->ndim > 1 ? t->shape[1] : 1;
	uint8_t *out = malloc(si->nbytes + 1), *o = out;
	uint64_t r0 = si->start[0], r1 = si->stop[0];
	uint64_t c0 = t->ndim > 1 ? si->start[1] : 0, c1 = t->ndim > 1 ? si->stop[1] : 1;

	for (uint64_t r = r0; r < r1; r++)
		for (uint64_t c = c0; c < c1; c++, o += os) {
			const uint8_t *src = file_data + t->off + (r * cols + c) * is;
			uint32_t v = 0;

			memcpy(&v, src, is);
			if (si->dtype != (rl_dtype)t->dtype)
				v = sk_convert_one(t->dtype, si->dtype, v);
			memcpy(o, &v, os);
		}
	return out;
}

/* The dtype a tensor of dtype dt has after conversion to `to`. */
static int after(int dt, int to)
{
	return sk_convert_ok(dt, to) ? to : dt;
}

/* One shard's bytes against expected(); names the first difference. */
static int shard_ok(const rl_plan *plan, size_t i, const uint8_t *got, int to)
{
	rl_shard_info si;
	uint8_t *want;
	int ok;

	if (rl_plan_shard(plan, i, &si))
		return 0;
	if ((int)si.dtype != after(find(si.name)->dtype, to)) {
		th_fail(__FILE__, __LINE__, "%s: dtype %s", si.name, rl_dtype_name(si.dtype));
		return 0;
	}
	want = expected(&si);
	ok = !si.nbytes || !memcmp(got, want, si.nbytes);
	for (uint64_t k = 0; !ok && k < si.nbytes; k++)
		if (got[k] != want[k]) {
			th_fail(__FILE__, __LINE__, "%s to %s: shard %zu byte %llu of %llu: 0x%02x, want 0x%02x",
				si.name, rl_dtype_name(to), i, (unsigned long long)k,
				(unsigned long long)si.nbytes, got[k], want[k]);
			break;
		}
	free(want);
	return ok;
}

/* A plan of the checkpoint to dtype `to`: whole (sharded 0) or every
 * 2-D tensor split by columns over 2 devices; requests of 8 KiB. */
static int plan_to(int to, int sharded, rl_ckpt **ckp, rl_plan **planp)
{
	static const char spec_json[] =
		"{\"mesh\":{\"shape\":[2],\"axes\":[\"m\"]},"
		"\"rules\":[{\"match\":\"[a-z]+\\\\.(f32|f16|bf16|i32|e4|e5)\","
		"\"spec\":[null,\"m\"]}]}";
	rl_spec *spec = sharded ? rl_spec_create() : NULL;
	int ret;

	*ckp = rl_ckpt_create();
	*planp = rl_plan_create();
	ret = rl_ckpt_open(*ckp, ckpt_path);
	if (ret == 0 && spec)
		ret = rl_spec_parse(spec, spec_json, strlen(spec_json));
	if (ret == 0)
		ret = rl_plan_set(*planp, RL_PLAN_DTYPE, to);
	if (ret == 0)
		ret = rl_plan_set(*planp, RL_PLAN_CHUNK_BYTES, 8192);
	if (ret == 0)
		ret = rl_plan_build(*planp, *ckp, spec);
	if (ret)
		th_fail(__FILE__, __LINE__, "plan: %d %s %s", ret, rl_plan_errmsg(*planp),
			spec ? rl_spec_errmsg(spec) : "");
	rl_spec_destroy(spec);
	return ret;
}

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

static const int dests[] = { RL_DTYPE_F32, RL_DTYPE_F16, RL_DTYPE_BF16 };

/* Whole loads into library staging. */
static void whole(void)
{
	for (int sharded = 0; sharded < 2; sharded++)
		for (size_t d = 0; d < 3; d++) {
			rl_ckpt *ck;
			rl_plan *plan;
			rl_loader *ld = new_loader();
			int ok = plan_to(dests[d], sharded, &ck, &plan) == 0 && ld &&
				 rl_loader_run(ld, plan) == 0;

			if (!ok && ld)
				th_fail(__FILE__, __LINE__, "load: %s", rl_loader_errmsg(ld));
			for (size_t i = 0; ok && i < rl_plan_num_shards(plan); i++) {
				rl_shard_info si;

				rl_plan_shard(plan, i, &si);
				ok = shard_ok(plan, i, (uint8_t *)rl_loader_staging(ld, si.device,
										 NULL) + si.offset,
					      dests[d]);
			}
			rl_loader_destroy(ld);
			rl_plan_destroy(plan);
			rl_ckpt_destroy(ck);
			if (!ok)
				return;
		}
}

/* Streaming: pieces assembled into each shard's buffer. */
struct asm_ {
	rl_loader *ld;
	uint8_t **buf;
};

static int on_piece(void *user, const rl_piece *p)
{
	struct asm_ *a = user;

	if (p->length)
		memcpy(a->buf[p->shard] + p->offset, p->data, p->length);
	if (p->token)
		rl_loader_release(a->ld, p);
	return 0;
}

static int stream_one(int to, int sharded)
{
	rl_ckpt *ck;
	rl_plan *plan;
	struct asm_ a = { new_loader(), NULL };
	size_t ns;
	int ok = plan_to(to, sharded, &ck, &plan) == 0 && a.ld;

	ns = ok ? rl_plan_num_shards(plan) : 0;
	a.buf = calloc(ns + 1, sizeof(*a.buf));
	for (size_t i = 0; i < ns; i++) {
		rl_shard_info si;

		rl_plan_shard(plan, i, &si);
		a.buf[i] = malloc(si.nbytes + 1);
	}
	ok = ok && rl_loader_set(a.ld, RL_OPT_STAGING, RL_STAGING_STREAM) == 0 &&
	     rl_loader_set(a.ld, RL_OPT_STAGING_BUDGET, 64 << 10) == 0 &&
	     rl_loader_set_piece_callback(a.ld, on_piece, &a) == 0;
	if (ok && rl_loader_run(a.ld, plan)) {
		th_fail(__FILE__, __LINE__, "stream: %s", rl_loader_errmsg(a.ld));
		ok = 0;
	}
	for (size_t i = 0; ok && i < ns; i++)
		ok = shard_ok(plan, i, a.buf[i], to);
	for (size_t i = 0; i < ns; i++)
		free(a.buf[i]);
	free(a.buf);
	rl_loader_destroy(a.ld);
	rl_plan_destroy(plan);
	rl_ckpt_destroy(ck);
	return ok;
}

static void streaming(void)
{
	for (int sharded = 0; sharded < 2; sharded++)
		for (size_t d = 0; d < 3; d++)
			if (!stream_one(dests[d], sharded))
				return;
}

/* Sizes: a converted shard's nbytes and the staging follow the
 * destination; integers keep theirs. */
static void sizes(void)
{
	rl_ckpt *ck;
	rl_plan *plan;

	if (plan_to(RL_DTYPE_F16, 1, &ck, &plan) == 0) {
		for (size_t i = 0; i < rl_plan_num_shards(plan); i++) {
			rl_shard_info si;
			uint64_t elems = 1;
			const struct tt *t;

			CHECK(rl_plan_shard(plan, i, &si) == 0);
			t = find(si.name);
			for (unsigned k = 0; k < si.ndim; k++)
				elems *= si.stop[k] - si.start[k];
			CHECK(si.nbytes == elems * rl_dtype_bits(after(t->dtype, RL_DTYPE_F16)) / 8);
		}
	}
	rl_plan_destroy(plan);
	rl_ckpt_destroy(ck);
}

/* A one-file checkpoint of header json (padded to 8) and n data bytes. */
static const char *small_ckpt(const char *name, const char *json, size_t n)
{
	static char path[4096];
	size_t hl = (strlen(json) + 7) / 8 * 8;
	uint8_t *b = calloc(1, 8 + hl + n);
	uint64_t le = hl;

	memcpy(b, &le, 8);
	memset(b + 8, ' ', hl);
	memcpy(b + 8, json, strlen(json));
	snprintf(path, sizeof(path), "%s/%s", th_tmpdir(), name);
	write_bytes(path, b, 8 + hl + n);
	free(b);
	return path;
}

/* Builds a plan of path to dtype to (read once when asked); its code,
 * the message in msg. */
static int try_plan(const char *path, int to, int read_once, char *msg, size_t cap)
{
	rl_ckpt *ck = rl_ckpt_create();
	rl_plan *plan = rl_plan_create();
	int ret = rl_ckpt_open(ck, path);

	if (ret == 0)
		ret = rl_plan_set(plan, RL_PLAN_DTYPE, to);
	if (ret == 0 && read_once)
		ret = rl_plan_set(plan, RL_PLAN_READ_ONCE, 1);
	if (ret == 0)
		ret = rl_plan_build(plan, ck, NULL);
	snprintf(msg, cap, "%s", rl_plan_errmsg(plan));
	rl_plan_destroy(plan);
	rl_ckpt_destroy(ck);
	return ret;
}

static void refused(void)
{
	char msg[512];
	const char *p;
	rl_plan *plan = rl_plan_create();
	int64_t v = 0;

	CHECK(rl_plan_get(plan, RL_PLAN_DTYPE, &v) == 0 && v == -1);
	CHECK(rl_plan_set(plan, RL_PLAN_DTYPE, RL_DTYPE_I32) == RL_E_DTYPE);
	CHECK(rl_plan_set(plan, RL_PLAN_DTYPE, RL_DTYPE_F8_E4M3) == RL_E_DTYPE);
	CHECK(strstr(rl_plan_errmsg(plan), "F8_E4M3") != NULL);
	CHECK(rl_plan_set(plan, RL_PLAN_DTYPE, RL_DTYPE_COUNT) == RL_E_INVALID_ARG);
	CHECK(rl_plan_set(plan, RL_PLAN_DTYPE, RL_DTYPE_BF16) == 0);
	CHECK(rl_plan_get(plan, RL_PLAN_DTYPE, &v) == 0 && v == RL_DTYPE_BF16);
	rl_plan_destroy(plan);

	p = small_ckpt("f64.safetensors", "{\"w\":{\"dtype\":\"F64\",\"shape\":[2],"
		       "\"data_offsets\":[0,16]}}", 16);
	CHECK(try_plan(p, RL_DTYPE_F16, 0, msg, sizeof(msg)) == RL_E_DTYPE);
	CHECK(strstr(msg, "\"w\"") && strstr(msg, "F64"));
	CHECK(try_plan(p, RL_DTYPE_F64 > 0 ? -1 : 0, 0, msg, sizeof(msg)) == 0);
	/* an F16 tensor at an odd offset of the file: its elements would
	 * straddle reads */
	p = small_ckpt("odd.safetensors", "{\"u\":{\"dtype\":\"U8\",\"shape\":[1],"
		       "\"data_offsets\":[0,1]},\"h\":{\"dtype\":\"F16\",\"shape\":[4],"
		       "\"data_offsets\":[1,9]}}", 9);
	CHECK(try_plan(p, RL_DTYPE_F32, 0, msg, sizeof(msg)) == RL_E_DTYPE);
	CHECK(strstr(msg, "\"h\"") && strstr(msg, "whole"));
	CHECK(try_plan(p, RL_DTYPE_F16, 0, msg, sizeof(msg)) == 0); /* nothing converts */
	/* read once converts too (the transfers' copies: test_transport) */
	CHECK(try_plan(ckpt_path, RL_DTYPE_F16, 1, msg, sizeof(msg)) == 0);
}

/* The dtype of shard "a.f32" in a plan of ck under spec text json, or a
 * negative code. */
static int a_dtype(rl_ckpt *ck, rl_spec *spec, const char *json)
{
	rl_plan *plan = rl_plan_create();
	rl_shard_info si;
	int ret = json ? rl_spec_parse(spec, json, strlen(json)) : 0;

	if (ret == 0)
		ret = rl_plan_build(plan, ck, spec);
	if (ret == 0)
		ret = rl_plan_shard(plan, 0, &si);
	rl_plan_destroy(plan);
	return ret ? ret : (int)si.dtype;
}

/* The spec's "dtype" field; without one, rl_spec_set_dtype's stays. */
static void spec_json(rl_ckpt *ck)
{
	rl_spec *spec = rl_spec_create();

	CHECK_EQ(a_dtype(ck, spec, "{\"dtype\":\"F16\"}"), RL_DTYPE_F16);
	CHECK_EQ(a_dtype(ck, spec, "{\"dtype\":null}"), RL_DTYPE_F32);
	CHECK_EQ(a_dtype(ck, spec, "{\"dtype\":\"F64\"}"), RL_E_DTYPE);
	CHECK(strstr(rl_spec_errmsg(spec), "F64") != NULL);
	CHECK_EQ(a_dtype(ck, spec, "{\"dtype\":\"f16\"}"), RL_E_DTYPE);
	CHECK_EQ(a_dtype(ck, spec, "{\"dtype\":16}"), RL_E_SPEC);
	CHECK_EQ(rl_spec_set_dtype(spec, RL_DTYPE_BF16), 0);
	CHECK_EQ(a_dtype(ck, spec, "{\"rules\":[]}"), RL_DTYPE_BF16);
	rl_spec_destroy(spec);
}

/* rl_spec_set_dtype: the plans rl_loader_load makes convert; a plan's
 * own RL_PLAN_DTYPE wins over the spec's. */
static void spec_dtype(void)
{
	rl_ckpt *ck = rl_ckpt_create();
	rl_spec *spec = rl_spec_create();
	rl_loader *ld = new_loader();
	rl_plan *plan = NULL, *own = rl_plan_create();
	rl_shard_info si;
	int ok = 1;

	CHECK(rl_ckpt_open(ck, ckpt_path) == 0);
	CHECK(rl_spec_set_dtype(spec, RL_DTYPE_I8) == RL_E_DTYPE);
	CHECK(strstr(rl_spec_errmsg(spec), "I8") != NULL);
	CHECK(rl_spec_set_dtype(spec, RL_DTYPE_BF16) == 0);
	CHECK(rl_loader_load(ld, ck, spec, 0, &plan) == 0);
	for (size_t i = 0; ok && i < rl_plan_num_shards(plan); i++) {
		CHECK(rl_plan_shard(plan, i, &si) == 0);
		ok = shard_ok(plan, i, (uint8_t *)rl_loader_staging(ld, si.device, NULL) + si.offset,
			      RL_DTYPE_BF16);
	}
	CHECK(rl_plan_set(own, RL_PLAN_DTYPE, RL_DTYPE_F32) == 0);
	CHECK(rl_plan_build(own, ck, spec) == 0);
	CHECK(rl_plan_shard(own, 0, &si) == 0);
	CHECK(si.dtype == RL_DTYPE_F32 && !strcmp(si.name, "a.f32"));
	for (size_t i = 0; i < rl_plan_num_shards(own); i++) {
		CHECK(rl_plan_shard(own, i, &si) == 0);
		CHECK((int)si.dtype == after(find(si.name)->dtype, RL_DTYPE_F32));
	}
	CHECK(rl_spec_set_dtype(spec, -1) == 0);
	rl_plan_destroy(plan);
	plan = NULL;
	spec_json(ck);
	rl_plan_destroy(own);
	rl_loader_destroy(ld);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
}

static void select_backend(rl_backend b, unsigned workers)
{
	cur = b;
	cur_workers = workers;
}

int main(void)
{
	static const struct th_case tests[] = {
		{ "whole", whole },
		{ "streaming", streaming },
	};
	static const unsigned workers[] = { 1, 3 };

	th_seed();
	if (write_ckpt()) {
		fprintf(stderr, "cannot write the checkpoint\n");
		return 1;
	}
	run_on_every_backend(tests, CM_ARRAY_SIZE(tests), workers, CM_ARRAY_SIZE(workers),
			     select_backend);
	RUN(sizes);
	RUN(refused);
	RUN(spec_dtype);
	free(file_data);
	return th_done();
}
