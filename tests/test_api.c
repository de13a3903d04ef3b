/*
 * test_api.c - the promises of api/ringload.h: every public function,
 * called with every class of bad argument (NULL handle, NULL required
 * pointer, index or parameter out of range, wrong state), returns exactly
 * what its comment documents. A table lists the functions exercised; a test
 * checks it against api/ringload.map, so a new function needs its case.
 *
 * Also the boundary of caller staging: exactly staging_bytes is enough.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ringload.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Every function called below. */
static const char *const covered[] = {
	"rl_version_number", "rl_version_string", "rl_strerror", "rl_dtype_name",
	"rl_dtype_bits", "rl_dtype_from_name", "rl_backend_name", "rl_backend_at",
	"rl_backend_by_name", "rl_backend_caps",
	"rl_ckpt_create", "rl_ckpt_open", "rl_ckpt_errmsg", "rl_ckpt_destroy",
	"rl_ckpt_num_files", "rl_ckpt_file_path", "rl_ckpt_file_size",
	"rl_ckpt_num_tensors", "rl_ckpt_tensor", "rl_ckpt_find", "rl_ckpt_num_metadata",
	"rl_ckpt_metadata", "rl_ckpt_metadata_get",
	"rl_spec_create", "rl_spec_parse", "rl_spec_load", "rl_spec_set_mesh",
	"rl_spec_add_rule", "rl_spec_add_target_json", "rl_spec_errmsg", "rl_spec_destroy",
	"rl_plan_create", "rl_plan_set", "rl_plan_param_bounds", "rl_plan_build",
	"rl_plan_errmsg", "rl_plan_destroy", "rl_plan_num_processes", "rl_plan_get_stats",
	"rl_plan_num_devices", "rl_plan_device", "rl_plan_num_shards", "rl_plan_shard",
	"rl_plan_num_requests", "rl_plan_request", "rl_plan_copy",
	"rl_plan_num_broadcasts", "rl_plan_broadcast",
	"rl_ckpt_open_headers", "rl_spec_set_files_of_process", "rl_plan_get",
	"rl_dtype_convert", "rl_spec_set_dtype",
	"rl_plan_num_transfers", "rl_plan_transfer", "rl_plan_transfer_copy",
	"rl_plan_transfer_summary", "rl_plan_build_batch", "rl_plan_get_xstats",
	"rl_loader_create", "rl_loader_set", "rl_loader_param_bounds",
	"rl_loader_set_callbacks", "rl_loader_set_staging", "rl_loader_run",
	"rl_loader_load", "rl_loader_staging", "rl_loader_get_stats", "rl_loader_errmsg",
	"rl_loader_destroy", "rl_loader_num_files",
	"rl_loader_get_file_stats", "rl_loader_request_bytes", "rl_staging_alloc",
	"rl_staging_free", "rl_loader_expect_sha256",
	"rl_loader_set_piece_callback", "rl_loader_set_window_pool", "rl_loader_release",
	"rl_loader_start", "rl_loader_next_piece", "rl_loader_finish",
	"rl_loader_default_budget", "rl_copy_runs", "rl_loader_get",
	/* tests/test_cuda.c, with the fake driver */
	"rl_loader_set_cuda", "rl_loader_set_cuda_dest", "rl_loader_cuda_area",
	"rl_loader_cuda_read_back", "rl_loader_set_cuda_stream", "rl_loader_cuda_shard",
	/* tests/test_device_registry.c, with the test build's device kind */
	"rl_device_kind_at", "rl_loader_set_device", "rl_loader_set_device_dest",
	"rl_loader_device_area", "rl_loader_device_shard", "rl_loader_device_read_back",
	"rl_loader_set_device_stream", "rl_loader_device_kind",
	"rl_sha256_create", "rl_sha256_update", "rl_sha256_final", "rl_sha256_destroy",
	"rl_sha256_file", "rl_sha256_from_hex", "rl_sums_create", "rl_sums_open",
	"rl_sums_parse", "rl_sums_errmsg", "rl_sums_destroy", "rl_sums_count", "rl_sums_get",
	"rl_sums_find",
	"rl_file_cached_bytes",
	"rl_ckpt_tensors", "rl_plan_shards",
	/* tests/test_integrity.c */
	"rl_expect_create", "rl_expect_given", "rl_expect_sums", "rl_expect_errmsg",
	"rl_expect_warnings", "rl_expect_get", "rl_loader_expect", "rl_expect_destroy",
	"rl_hf_blob_sha256", "rl_loader_budget", "rl_name_get", "rl_error_name",
	/* tests/test_transport.c */
	"rl_loader_set_transport",
};

/* A small checkpoint: w (U8 [4, 16]) and b (F32 [4]), metadata k = v. */
static const char *checkpoint(void)
{
	static char path[4096];
	static const char hdr[] = "{\"__metadata__\":{\"k\":\"v\"},"
		"\"w\":{\"dtype\":\"U8\",\"shape\":[4,16],\"data_offsets\":[0,64]},"
		"\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[64,80]}}";
	uint64_t n = sizeof(hdr) - 1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/api.safetensors", th_tmpdir());
	f = fopen(path, "wb");
	if (!f)
		return NULL;
	fwrite(&n, 8, 1, f);   /* little-endian host */
	fwrite(hdr, 1, n, f);
	for (int i = 0; i < 80; i++)
		fputc(i, f);
	fclose(f);
	return path;
}

/* The exported names (api/ringload.map) are exactly the table's. */
static void every_public_function_is_covered(void)
{
	const char *src = getenv("RL_SRCDIR");
	char path[4096], *map, *p;
	size_t found = 0;

	snprintf(path, sizeof(path), "%s/api/ringload.map", src ? src : ".");
	map = th_slurp(path, NULL);
	CHECKF(map, "cannot read %s (RL_SRCDIR)", path);
	for (p = strstr(map, "rl_"); p; p = strstr(p + 1, "rl_")) {
		size_t len = strcspn(p, ";");
		int known = 0;

		if (p > map && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z')))
			continue;   /* inside another word */
		for (size_t i = 0; i < ARRAY_SIZE(covered) && !known; i++)
			known = strlen(covered[i]) == len && !strncmp(covered[i], p, len);
		CHECKF(known, "%.*s is exported but not in test_api.c's table", (int)len, p);
		found++;
	}
	free(map);
	CHECK_EQ(found, ARRAY_SIZE(covered));
}

static void library_wide_functions(void)
{
	CHECK_EQ(rl_version_number(), RINGLOAD_VERSION_NUMBER);
	CHECK_STR(rl_version_string(), RINGLOAD_VERSION_STRING);
	CHECK_STR(rl_strerror(123456), "unknown error");
	CHECK_STR(rl_strerror(-4095), "unknown error");
	CHECK(rl_strerror(-EINVAL)[0]);
	CHECK(rl_dtype_name((rl_dtype)RL_DTYPE_COUNT) == NULL);
	CHECK(rl_dtype_name((rl_dtype)-1) == NULL);
	CHECK_EQ(rl_dtype_bits((rl_dtype)RL_DTYPE_COUNT), 0);
	CHECK_EQ(rl_dtype_from_name(NULL), -1);
	CHECK_EQ(rl_dtype_from_name("f32"), -1);
	CHECK_EQ(rl_dtype_from_name("F32"), RL_DTYPE_F32);
	CHECK_EQ(rl_dtype_convert(RL_DTYPE_F32, RL_DTYPE_F16, NULL, NULL, 0), 0);
	CHECK_EQ(rl_dtype_convert(RL_DTYPE_F32, RL_DTYPE_F16, NULL, NULL, 1), -EINVAL);
	CHECK_EQ(rl_dtype_convert(RL_DTYPE_F64, RL_DTYPE_F16, NULL, NULL, 0), RL_E_DTYPE);
	CHECK_EQ(rl_dtype_convert(RL_DTYPE_F16, RL_DTYPE_F16, NULL, NULL, 0), RL_E_DTYPE);
	CHECK_EQ(rl_dtype_convert((rl_dtype)-1, RL_DTYPE_F16, NULL, NULL, 0), RL_E_DTYPE);
	CHECK_STR(rl_backend_name((rl_backend)9), "?");
}

/* SHA-256 of "abc" (FIPS 180-2, appendix B.1). */
static const char abc_hex[] =
	"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

static void sha256_functions(void)
{
	rl_sha256 *h = rl_sha256_create();
	uint8_t got[32], want[32];

	CHECK(h);
	CHECK_EQ(rl_sha256_from_hex(abc_hex, want), 0);
	CHECK_EQ(rl_sha256_from_hex(NULL, want), -EINVAL);
	CHECK_EQ(rl_sha256_from_hex(abc_hex, NULL), -EINVAL);
	CHECK_EQ(rl_sha256_from_hex("ab", got), RL_E_INVALID_ARG);
	CHECK_EQ(rl_sha256_from_hex("zz7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
				    got), RL_E_INVALID_ARG);
	CHECK_EQ(rl_sha256_update(NULL, "a", 1), -EINVAL);
	CHECK_EQ(rl_sha256_update(h, NULL, 1), -EINVAL);
	CHECK_EQ(rl_sha256_update(h, NULL, 0), 0);
	CHECK_EQ(rl_sha256_final(NULL, got), -EINVAL);
	CHECK_EQ(rl_sha256_final(h, NULL), -EINVAL);
	/* Twice: final starts the context afresh. */
	for (int round = 0; round < 2; round++) {
		CHECK_EQ(rl_sha256_update(h, "a", 1), 0);
		CHECK_EQ(rl_sha256_update(h, "bc", 2), 0);
		CHECK_EQ(rl_sha256_final(h, got), 0);
		CHECK(!memcmp(got, want, 32));
	}
	rl_sha256_destroy(h);
	rl_sha256_destroy(NULL);
	CHECK_EQ(rl_sha256_file(NULL, got), -EINVAL);
	CHECK_EQ(rl_sha256_file("/nonexistent/x", got), -ENOENT);
	CHECK_EQ(rl_sha256_file(th_tmpdir(), got), -EISDIR);
	CHECK_EQ(rl_sha256_file(checkpoint(), NULL), -EINVAL);
}

static void sums_functions(void)
{
	char text[200], path[4096];
	rl_sums *s = rl_sums_create();
	rl_sums_entry en = { .size = sizeof(en) };

	CHECK(s);
	snprintf(text, sizeof(text), "%s  a.safetensors\n", abc_hex);
	CHECK_EQ(rl_sums_open(NULL, "x"), -EINVAL);
	CHECK_EQ(rl_sums_open(s, NULL), -EINVAL);
	CHECK_EQ(rl_sums_parse(NULL, "x", text, 1), -EINVAL);
	CHECK_EQ(rl_sums_parse(s, NULL, text, 1), -EINVAL);
	CHECK_EQ(rl_sums_parse(s, "x", NULL, 1), -EINVAL);
	CHECK_STR(rl_sums_errmsg(NULL), "");
	CHECK_EQ(rl_sums_count(NULL), 0);
	CHECK_EQ(rl_sums_count(s), 0);
	CHECK_EQ(rl_sums_get(NULL, 0, &en), -EINVAL);
	CHECK_EQ(rl_sums_get(s, 0, NULL), -EINVAL);
	CHECK_EQ(rl_sums_get(s, 0, &en), -EINVAL);
	CHECK_EQ(rl_sums_find(NULL, "a"), -EINVAL);
	CHECK_EQ(rl_sums_find(s, NULL), -EINVAL);
	CHECK_EQ(rl_sums_find(s, "a.safetensors"), -ENOENT);
	snprintf(path, sizeof(path), "%s/absent", th_tmpdir());
	CHECK_EQ(rl_sums_open(s, path), -ENOENT);
	CHECK(strstr(rl_sums_errmsg(s), "absent: No such file"));
	CHECK_EQ(rl_sums_open(s, th_tmpdir()), RL_E_INVALID_ARG);
	CHECK(strstr(rl_sums_errmsg(s), ": not a regular file of at most 16 MiB"));
	/* Past 16 MiB: refused before a byte is read (text is not touched). */
	CHECK_EQ(rl_sums_parse(s, "big", text, (16u << 20) + 1), RL_E_INVALID_ARG);
	CHECK(strstr(rl_sums_errmsg(s), "big: more than 16 MiB: not a sums file"));
	/* A failed call changes nothing; a parsed handle refuses a second. */
	CHECK_EQ(rl_sums_parse(s, "S", text, strlen(text)), 1);
	CHECK_EQ(rl_sums_parse(s, "S", text, strlen(text)), RL_E_STATE);
	CHECK_EQ(rl_sums_count(s), 1);
	CHECK_EQ(rl_sums_get(s, 1, &en), -EINVAL);
	en.size = sizeof(size_t) - 1;
	CHECK_EQ(rl_sums_get(s, 0, &en), -EINVAL);
	en.size = sizeof(size_t) + sizeof(const char *); /* an older, smaller caller */
	CHECK_EQ(rl_sums_get(s, 0, &en), 0);
	CHECK_EQ(en.size, sizeof(size_t) + sizeof(const char *));
	CHECK_STR(en.name, "a.safetensors");
	en.size = sizeof(en) + 8;
	CHECK_EQ(rl_sums_get(s, 0, &en), 0);
	CHECK_EQ(en.size, sizeof(en));
	CHECK_STR(en.hex, abc_hex);
	CHECK_EQ(en.line, 1);
	CHECK_EQ(rl_sums_find(s, "a.safetensors"), 0);
	rl_sums_destroy(s);
	rl_sums_destroy(NULL);
}

/* The page-cache probe: a file just written is in the cache. */
static void cache_probe_function(void)
{
	const char *path = checkpoint();
	char missing[4096];

	CHECK(path);
	snprintf(missing, sizeof(missing), "%s/none.safetensors", th_tmpdir());
	CHECK_EQ(rl_file_cached_bytes(NULL, 0, 1), -EINVAL);
	CHECK_EQ(rl_file_cached_bytes(path, 2, UINT64_MAX), -EINVAL);
	CHECK_EQ(rl_file_cached_bytes(missing, 0, 1), -ENOENT);
	CHECK_EQ(rl_file_cached_bytes(path, 0, 0), 0);
	/* whole pages are counted, but never more than the range */
	CHECK_EQ(rl_file_cached_bytes(path, 8, 5), 5);
}

static void checkpoint_functions(void)
{
	const char *path = checkpoint();
	rl_ckpt *ck = rl_ckpt_create();
	rl_tensor_info t;
	const char *k, *v;

	CHECK(path && ck);
	/* NULL handle. */
	CHECK_EQ(rl_ckpt_open(NULL, path), -EINVAL);
	CHECK_STR(rl_ckpt_errmsg(NULL), "");
	CHECK_EQ(rl_ckpt_num_files(NULL), 0);
	CHECK(rl_ckpt_file_path(NULL, 0) == NULL);
	CHECK_EQ(rl_ckpt_file_size(NULL, 0), 0);
	CHECK_EQ(rl_ckpt_num_tensors(NULL), 0);
	CHECK_EQ(rl_ckpt_tensor(NULL, 0, &t), -EINVAL);
	CHECK_EQ(rl_ckpt_find(NULL, "w"), -EINVAL);
	CHECK_EQ(rl_ckpt_num_metadata(NULL), 0);
	CHECK_EQ(rl_ckpt_metadata(NULL, 0, &k, &v), -EINVAL);
	CHECK(rl_ckpt_metadata_get(NULL, "k") == NULL);
	rl_ckpt_destroy(NULL);
	/* Not open yet. */
	CHECK_EQ(rl_ckpt_num_tensors(ck), 0);
	CHECK_EQ(rl_ckpt_tensor(ck, 0, &t), -EINVAL);
	CHECK_EQ(rl_ckpt_find(ck, "w"), RL_E_MISSING_TENSOR);
	CHECK_EQ(rl_ckpt_metadata(ck, 0, &k, &v), -EINVAL);
	CHECK(rl_ckpt_metadata_get(ck, "k") == NULL);
	/* NULL and empty paths; a failed open leaves the handle openable. */
	CHECK_EQ(rl_ckpt_open(ck, NULL), -EINVAL);
	CHECK(strstr(rl_ckpt_errmsg(ck), "NULL"));
	CHECK_EQ(rl_ckpt_open(ck, ""), RL_E_INVALID_ARG);
	CHECK_EQ(rl_ckpt_open(ck, path), 0);
	CHECK_STR(rl_ckpt_errmsg(ck), "");
	CHECK_EQ(rl_ckpt_open(ck, path), RL_E_STATE);
	CHECK_EQ(rl_ckpt_open(ck, NULL), -EINVAL);
	/* Open: NULL pointers and indices out of range. */
	CHECK_EQ(rl_ckpt_num_files(ck), 1);
	CHECK(rl_ckpt_file_path(ck, 1) == NULL);
	CHECK_EQ(rl_ckpt_file_size(ck, 1), 0);
	CHECK_EQ(rl_ckpt_tensor(ck, 0, NULL), -EINVAL);
	CHECK_EQ(rl_ckpt_tensor(ck, 2, &t), -EINVAL);
	CHECK_EQ(rl_ckpt_tensor(ck, 1, &t), 0);
	CHECK_STR(t.name, "b");
	CHECK_EQ(rl_ckpt_find(ck, NULL), -EINVAL);
	CHECK_EQ(rl_ckpt_find(ck, "nope"), RL_E_MISSING_TENSOR);
	CHECK_EQ(rl_ckpt_find(ck, "b"), 1);
	CHECK_EQ(rl_ckpt_metadata(ck, 1, &k, &v), -EINVAL);
	CHECK_EQ(rl_ckpt_metadata(ck, 0, NULL, NULL), 0);
	CHECK_EQ(rl_ckpt_metadata(ck, 0, &k, NULL), 0);
	CHECK_STR(k, "k");
	CHECK(rl_ckpt_metadata_get(ck, NULL) == NULL);
	CHECK_STR(rl_ckpt_metadata_get(ck, "k"), "v");
	rl_ckpt_destroy(ck);
}

static int same_tensor(const rl_tensor_info *a, const rl_tensor_info *b)
{
	return !strcmp(a->name, b->name) && a->dtype == b->dtype &&
	       a->ndim == b->ndim && a->shape == b->shape && a->file == b->file &&
	       a->offset == b->offset && a->nbytes == b->nbytes;
}

/* rl_ckpt_tensors: every window equal to rl_ckpt_tensor's entries, entries
 * size bytes apart with the bytes past each left alone, and its bounds. */
static void checkpoint_bulk_query(void)
{
	struct wide { rl_tensor_info ti; uint64_t guard; } w[4];
	rl_ckpt *ck = rl_ckpt_create();
	rl_tensor_info one, t[2];

	CHECK(ck);
	CHECK_EQ(rl_ckpt_tensors(NULL, 0, 1, t, sizeof(*t)), -EINVAL);
	CHECK_EQ(rl_ckpt_tensors(ck, 0, 1, t, sizeof(*t)), -EINVAL); /* not open */
	CHECK_EQ(rl_ckpt_open(ck, checkpoint()), 0);
	for (size_t first = 0; first <= 2; first++) {
		for (size_t n = 0; n <= 4; n++) {
			long got;

			memset(w, 0xa5, sizeof(w));
			got = rl_ckpt_tensors(ck, first, n, &w[0].ti, sizeof(w[0]));
			CHECK_EQ(got, (long)(n < 2 - first ? n : 2 - first));
			for (long k = 0; k < 4; k++) {
				CHECK_EQ(w[k].guard, 0xa5a5a5a5a5a5a5a5ull);
				if (k >= got)
					continue;
				CHECK_EQ(rl_ckpt_tensor(ck, first + k, &one), 0);
				CHECK(same_tensor(&w[k].ti, &one));
			}
		}
	}
	CHECK_EQ(rl_ckpt_tensors(ck, 3, 1, t, sizeof(*t)), -EINVAL);
	CHECK_EQ(rl_ckpt_tensors(ck, SIZE_MAX, 1, t, sizeof(*t)), -EINVAL);
	CHECK_EQ(rl_ckpt_tensors(ck, 0, 1, NULL, sizeof(*t)), -EINVAL);
	CHECK_EQ(rl_ckpt_tensors(ck, 0, 0, NULL, sizeof(*t)), 0);
	CHECK_EQ(rl_ckpt_tensors(ck, 0, 1, t, sizeof(*t) - 1), -EINVAL);
	CHECK_EQ(rl_ckpt_tensors(ck, 0, 1, t, 0), -EINVAL);
	CHECK_EQ(rl_ckpt_tensors(ck, 0, 2, t, SIZE_MAX / 2 + 1), -EINVAL);
	CHECK_EQ(rl_ckpt_tensors(ck, 0, SIZE_MAX, t, sizeof(*t)), 2);
	CHECK_STR(t[1].name, "b");
	rl_ckpt_destroy(ck);
}

static void spec_functions(void)
{
	static const char *const axes[] = { "x" }, *const x[] = { "x" };
	const rl_dim_spec dims[] = { { 1, x } };
	const uint32_t shape[] = { 2 };
	const char *tj = "{\"name\":\"t\",\"source\":\"b\"}";
	rl_spec *spec = rl_spec_create();

	CHECK(spec);
	CHECK_EQ(rl_spec_parse(NULL, "{}", 2), -EINVAL);
	CHECK_EQ(rl_spec_load(NULL, "/dev/null"), -EINVAL);
	CHECK_EQ(rl_spec_set_mesh(NULL, 1, shape, axes, NULL, NULL), -EINVAL);
	CHECK_EQ(rl_spec_add_rule(NULL, "w", 1, dims), -EINVAL);
	CHECK_EQ(rl_spec_add_target_json(NULL, "{}", 2), -EINVAL);
	CHECK_STR(rl_spec_errmsg(NULL), "");
	rl_spec_destroy(NULL);
	CHECK_EQ(rl_spec_parse(spec, NULL, 2), -EINVAL);
	CHECK(strstr(rl_spec_errmsg(spec), "NULL"));
	CHECK_EQ(rl_spec_parse(spec, "{\"x\":1}", 7), RL_E_SPEC);
	CHECK_EQ(rl_spec_load(spec, NULL), -EINVAL);
	CHECK_EQ(rl_spec_load(spec, "/nonexistent/spec.json"), -ENOENT);
	CHECK_EQ(rl_spec_set_mesh(spec, 1, NULL, axes, NULL, NULL), -EINVAL);
	CHECK_EQ(rl_spec_set_mesh(spec, 1, shape, NULL, NULL, NULL), -EINVAL);
	CHECK_EQ(rl_spec_set_mesh(spec, 17, shape, axes, NULL, NULL), RL_E_SPEC_MESH);
	CHECK_EQ(rl_spec_set_mesh(spec, 1, (uint32_t[]){ 0 }, axes, NULL, NULL), RL_E_SPEC_MESH);
	CHECK_EQ(rl_spec_set_mesh(spec, 1, shape, (const char *[]){ "" }, NULL, NULL),
		 RL_E_SPEC_AXIS);
	CHECK_EQ(rl_spec_set_mesh(spec, 0, NULL, NULL, NULL, NULL), 0);
	CHECK_EQ(rl_spec_set_mesh(spec, 1, shape, axes, NULL, NULL), 0);
	CHECK_EQ(rl_spec_add_rule(spec, NULL, 0, NULL), -EINVAL);
	CHECK_EQ(rl_spec_add_rule(spec, "w", 1, NULL), -EINVAL);
	CHECK_EQ(rl_spec_add_rule(spec, "w", 17, dims), RL_E_SPEC_RANK);
	CHECK_EQ(rl_spec_add_rule(spec, "(", 0, NULL), RL_E_SPEC_REGEX);
	CHECK_EQ(rl_spec_add_rule(spec, "w**", 0, NULL), RL_E_SPEC_REGEX);
	CHECK_EQ(rl_spec_add_rule(spec, "w", 1, (rl_dim_spec[]){ { 1, (const char *[]){ "y" } } }),
		 RL_E_SPEC_AXIS);
	CHECK_EQ(rl_spec_add_rule(spec, "w", 1, dims), 0);
	CHECK_EQ(rl_spec_add_target_json(spec, NULL, 2), -EINVAL);
	CHECK_EQ(rl_spec_add_target_json(spec, "[]", 2), RL_E_SPEC_TARGET);
	CHECK_EQ(rl_spec_add_target_json(spec, tj, strlen(tj)), 0);
	rl_spec_destroy(spec);
}

/* A plan of the test checkpoint under "w split by rows over 2 devices". */
static rl_plan *built_plan(rl_ckpt **ckp)
{
	static const char *const axes[] = { "x" }, *const x[] = { "x" };
	const rl_dim_spec dims[] = { { 1, x } };
	rl_ckpt *ck = rl_ckpt_create();
	rl_spec *spec = rl_spec_create();
	rl_plan *plan = rl_plan_create();

	if (rl_ckpt_open(ck, checkpoint()) ||
	    rl_spec_set_mesh(spec, 1, (uint32_t[]){ 2 }, axes, NULL, NULL) ||
	    rl_spec_add_rule(spec, "w", 1, dims) || rl_plan_build(plan, ck, spec)) {
		rl_plan_destroy(plan);
		plan = NULL;
	}
	rl_spec_destroy(spec);
	*ckp = ck;
	return plan;
}

static void plan_functions(void)
{
	rl_plan *plan = rl_plan_create(), *built;
	rl_ckpt *ck, *closed = rl_ckpt_create();
	rl_plan_stats st;
	rl_device_info di;
	rl_shard_info si;
	rl_request_info ri;
	rl_copy_info ci;
	rl_broadcast_info bi;
	int64_t lo, hi;

	CHECK(plan && closed);
	/* NULL handle. */
	CHECK_EQ(rl_plan_set(NULL, RL_PLAN_PROCESS, 0), -EINVAL);
	CHECK_EQ(rl_plan_build(NULL, closed, NULL), -EINVAL);
	CHECK_STR(rl_plan_errmsg(NULL), "");
	CHECK_EQ(rl_plan_num_processes(NULL), 0);
	CHECK_EQ(rl_plan_get_stats(NULL, 0, &st), -EINVAL);
	CHECK_EQ(rl_plan_num_devices(NULL), 0);
	CHECK_EQ(rl_plan_device(NULL, 0, &di), -EINVAL);
	CHECK_EQ(rl_plan_num_shards(NULL), 0);
	CHECK_EQ(rl_plan_shard(NULL, 0, &si), -EINVAL);
	CHECK_EQ(rl_plan_num_requests(NULL), 0);
	CHECK_EQ(rl_plan_request(NULL, 0, &ri), -EINVAL);
	CHECK_EQ(rl_plan_copy(NULL, 0, 0, &ci), -EINVAL);
	CHECK_EQ(rl_plan_num_broadcasts(NULL), 0);
	CHECK_EQ(rl_plan_broadcast(NULL, 0, &bi), -EINVAL);
	rl_plan_destroy(NULL);
	/* Parameters. */
	CHECK_EQ(rl_plan_param_bounds((rl_plan_param)0, &lo, &hi), -EINVAL);
	CHECK_EQ(rl_plan_param_bounds((rl_plan_param)14, &lo, &hi), -EINVAL);
	CHECK_EQ(rl_plan_param_bounds(RL_PLAN_DTYPE, &lo, &hi), 0);
	CHECK(lo == -1 && hi == RL_DTYPE_COUNT - 1);
	CHECK_EQ(rl_plan_param_bounds(RL_PLAN_MAX_MEMORY, NULL, NULL), 0);
	CHECK_EQ(rl_plan_param_bounds(RL_PLAN_MAX_MEMORY, &lo, &hi), 0);
	CHECK_EQ(lo, 0);
	CHECK_EQ(rl_plan_set(plan, (rl_plan_param)14, 0), RL_E_INVALID_ARG);
	CHECK_EQ(rl_plan_set(plan, RL_PLAN_CHUNK_BYTES, 0), RL_E_INVALID_ARG);
	CHECK_EQ(rl_plan_set(plan, RL_PLAN_MAX_MEMORY, -1), RL_E_INVALID_ARG);
	CHECK_EQ(rl_plan_set(plan, RL_PLAN_CONGRUENT, 2), RL_E_INVALID_ARG);
	CHECK_EQ(rl_plan_set(plan, RL_PLAN_CONGRUENT, 1), 0);
	CHECK_EQ(rl_plan_set(plan, RL_PLAN_MAX_MEMORY, 1ll << 30), 0);
	/* Not built: queries say so. */
	CHECK_EQ(rl_plan_num_processes(plan), 0);
	CHECK_EQ(rl_plan_get_stats(plan, 0, &st), RL_E_STATE);
	CHECK_EQ(rl_plan_get_stats(plan, 0, NULL), -EINVAL);
	CHECK_EQ(rl_plan_get_stats(plan, -2, &st), -EINVAL);
	CHECK_EQ(rl_plan_device(plan, 0, &di), RL_E_STATE);
	CHECK_EQ(rl_plan_shard(plan, 0, &si), RL_E_STATE);
	CHECK_EQ(rl_plan_request(plan, 0, &ri), RL_E_STATE);
	CHECK_EQ(rl_plan_copy(plan, 0, 0, &ci), RL_E_STATE);
	CHECK_EQ(rl_plan_broadcast(plan, 0, &bi), RL_E_STATE);
	CHECK_EQ(rl_plan_device(plan, 0, NULL), -EINVAL);
	/* Building: NULL checkpoint, one not open. */
	CHECK_EQ(rl_plan_build(plan, NULL, NULL), -EINVAL);
	CHECK(strstr(rl_plan_errmsg(plan), "NULL"));
	CHECK_EQ(rl_plan_build(plan, closed, NULL), RL_E_STATE);
	rl_plan_destroy(plan);
	rl_ckpt_destroy(closed);
	/* Built: out of range and NULL out; built again; set after build. */
	built = built_plan(&ck);
	CHECK(built);
	CHECK_EQ(rl_plan_build(built, ck, NULL), RL_E_STATE);
	CHECK_EQ(rl_plan_set(built, RL_PLAN_PROCESS, 0), RL_E_STATE);
	CHECK_EQ(rl_plan_num_processes(built), 1);
	CHECK_EQ(rl_plan_get_stats(built, 1, &st), -EINVAL);
	CHECK_EQ(rl_plan_get_stats(built, RL_TOTAL, &st), 0);
	CHECK_EQ(rl_plan_num_devices(built), 2);
	CHECK_EQ(rl_plan_device(built, 2, &di), -EINVAL);
	CHECK_EQ(rl_plan_device(built, 1, NULL), -EINVAL);
	CHECK_EQ(rl_plan_num_shards(built), 4);
	CHECK_EQ(rl_plan_shard(built, 4, &si), -EINVAL);
	CHECK_EQ(rl_plan_shard(built, 3, NULL), -EINVAL);
	CHECK(rl_plan_num_requests(built) >= 1);
	CHECK_EQ(rl_plan_request(built, rl_plan_num_requests(built), &ri), -EINVAL);
	CHECK_EQ(rl_plan_request(built, 0, NULL), -EINVAL);
	CHECK_EQ(rl_plan_request(built, 0, &ri), 0);
	CHECK_EQ(rl_plan_copy(built, 0, ri.ncopies, &ci), -EINVAL);
	CHECK_EQ(rl_plan_copy(built, rl_plan_num_requests(built), 0, &ci), -EINVAL);
	CHECK_EQ(rl_plan_copy(built, 0, 0, NULL), -EINVAL);
	CHECK_EQ(rl_plan_num_broadcasts(built), 0);
	CHECK_EQ(rl_plan_broadcast(built, 0, &bi), RL_E_STATE); /* deprecated */
	rl_plan_destroy(built);
	rl_ckpt_destroy(ck);
}

/* rl_plan_shards: every window equal to rl_plan_shard's entries, entries
 * size bytes apart with the bytes past each left alone, and its bounds. */
static void plan_bulk_query(void)
{
	struct wide { rl_shard_info si; uint64_t guard; } w[6];
	rl_plan *plan = rl_plan_create(), *built;
	rl_shard_info one, s[4];
	rl_ckpt *ck;

	CHECK(plan);
	CHECK_EQ(rl_plan_shards(NULL, 0, 1, s, sizeof(*s)), -EINVAL);
	CHECK_EQ(rl_plan_shards(plan, 0, 1, s, sizeof(*s)), RL_E_STATE);
	CHECK_EQ(rl_plan_shards(plan, 0, 1, NULL, sizeof(*s)), -EINVAL);
	rl_plan_destroy(plan);
	built = built_plan(&ck);
	CHECK(built);
	CHECK_EQ(rl_plan_num_shards(built), 4);
	for (size_t first = 0; first <= 4; first++) {
		for (size_t n = 0; n <= 6; n++) {
			long got;

			memset(w, 0xa5, sizeof(w));
			got = rl_plan_shards(built, first, n, &w[0].si, sizeof(w[0]));
			CHECK_EQ(got, (long)(n < 4 - first ? n : 4 - first));
			for (long k = 0; k < 6; k++) {
				CHECK_EQ(w[k].guard, 0xa5a5a5a5a5a5a5a5ull);
				if (k >= got)
					continue;
				CHECK_EQ(rl_plan_shard(built, first + k, &one), 0);
				CHECK(!memcmp(&w[k].si, &one, sizeof(one)));
			}
		}
	}
	CHECK_EQ(rl_plan_shards(built, 5, 1, s, sizeof(*s)), -EINVAL);
	CHECK_EQ(rl_plan_shards(built, 0, 1, NULL, sizeof(*s)), -EINVAL);
	CHECK_EQ(rl_plan_shards(built, 0, 0, NULL, sizeof(*s)), 0);
	CHECK_EQ(rl_plan_shards(built, 0, 1, s, sizeof(*s) - 1), -EINVAL);
	CHECK_EQ(rl_plan_shards(built, 0, 2, s, SIZE_MAX / 2 + 1), -EINVAL);
	CHECK_EQ(rl_plan_shards(built, 0, SIZE_MAX, s, sizeof(*s)), 4);
	CHECK_EQ(rl_plan_shard(built, 3, &one), 0);
	CHECK(!memcmp(&s[3], &one, sizeof(one)));
	rl_plan_destroy(built);
	rl_ckpt_destroy(ck);
}

/* RL_PLAN_STATS_ONLY: the statistics of a full build, no requests or
 * shards, and no load of it, whole or streaming. */
static void stats_only_plans(void)
{
	static const char *const axes[] = { "x" }, *const x[] = { "x" };
	const rl_dim_spec dims[] = { { 1, x } };
	rl_ckpt *ck = rl_ckpt_create();
	rl_spec *spec = rl_spec_create();
	rl_plan *full = rl_plan_create(), *so = rl_plan_create();
	rl_loader *ld = rl_loader_create();
	rl_plan_stats a, b;
	int64_t v = -1;

	CHECK(ck && spec && full && so && ld);
	CHECK_EQ(rl_ckpt_open(ck, checkpoint()), 0);
	CHECK_EQ(rl_spec_set_mesh(spec, 1, (uint32_t[]){ 2 }, axes, NULL, NULL), 0);
	CHECK_EQ(rl_spec_add_rule(spec, "w", 1, dims), 0);
	CHECK_EQ(rl_plan_set(so, RL_PLAN_STATS_ONLY, 2), RL_E_INVALID_ARG);
	CHECK_EQ(rl_plan_get(so, RL_PLAN_STATS_ONLY, &v), 0);
	CHECK_EQ(v, 0);
	CHECK_EQ(rl_plan_set(so, RL_PLAN_STATS_ONLY, 1), 0);
	CHECK_EQ(rl_plan_get(so, RL_PLAN_STATS_ONLY, &v), 0);
	CHECK_EQ(v, 1);
	CHECK_EQ(rl_plan_build(full, ck, spec), 0);
	CHECK_EQ(rl_plan_build(so, ck, spec), 0);
	CHECK_EQ(rl_plan_get_stats(full, 0, &a), 0);
	CHECK_EQ(rl_plan_get_stats(so, 0, &b), 0);
	CHECK(!memcmp(&a, &b, sizeof(a)) && a.requests > 0);
	CHECK_EQ(rl_plan_num_requests(so), 0);
	CHECK_EQ(rl_plan_num_shards(so), 0);
	CHECK_EQ(rl_plan_num_devices(so), 2);
	CHECK_EQ(rl_loader_run(ld, so), RL_E_STATE);
	CHECK(strstr(rl_loader_errmsg(ld), "statistics only"));
	CHECK_EQ(rl_loader_set(ld, RL_OPT_STAGING, RL_STAGING_STREAM), 0);
	CHECK_EQ(rl_loader_start(ld, so), RL_E_STATE);
	CHECK(strstr(rl_loader_errmsg(ld), "statistics only"));
	rl_loader_destroy(ld);
	rl_plan_destroy(so);
	rl_plan_destroy(full);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
}

/* Transfers, files_of_process, checkpoints from headers, plan getters. */
static void cluster_functions(void)
{
	rl_ckpt *ck = rl_ckpt_create(), *built_ck;
	rl_spec *spec = rl_spec_create();
	rl_plan *plan = rl_plan_create(), *built, *batch = rl_plan_create();
	const char *const none[] = { NULL };
	rl_transfer_info ti;
	rl_copy_info ci;
	rl_plan_xstats xs;
	uint64_t n;
	int64_t v;

	CHECK(ck && spec && plan && batch);
	CHECK_EQ(rl_ckpt_open_headers(NULL, 0, NULL), -EINVAL);
	CHECK_EQ(rl_ckpt_open_headers(ck, 1, NULL), -EINVAL);
	CHECK_EQ(rl_spec_set_files_of_process(NULL, 0, 0, NULL), -EINVAL);
	CHECK_EQ(rl_spec_set_files_of_process(spec, 0, 1, none), RL_E_INVALID_ARG);
	CHECK_EQ(rl_spec_set_files_of_process(spec, 1u << 30, 0, NULL), RL_E_INVALID_ARG);
	CHECK_EQ(rl_spec_set_files_of_process(spec, 0, 0, NULL), 0);
	CHECK_EQ(rl_plan_get(NULL, RL_PLAN_PROCESS, &v), -EINVAL);
	CHECK_EQ(rl_plan_get(plan, RL_PLAN_PROCESS, NULL), -EINVAL);
	CHECK_EQ(rl_plan_get(plan, (rl_plan_param)14, &v), -EINVAL);
	CHECK_EQ(rl_spec_set_dtype(NULL, RL_DTYPE_F16), -EINVAL);
	CHECK_EQ(rl_plan_get(plan, RL_PLAN_MAX_MEMORY, &v), 0);
	CHECK_EQ(v, 4ll << 30);
	/* Not built. */
	CHECK_EQ(rl_plan_num_transfers(NULL), 0);
	CHECK_EQ(rl_plan_num_transfers(plan), 0);
	CHECK_EQ(rl_plan_transfer(NULL, 0, &ti), -EINVAL);
	CHECK_EQ(rl_plan_transfer(plan, 0, NULL), -EINVAL);
	CHECK_EQ(rl_plan_transfer(plan, 0, &ti), RL_E_STATE);
	CHECK_EQ(rl_plan_transfer_copy(NULL, 0, 0, &ci), -EINVAL);
	CHECK_EQ(rl_plan_transfer_copy(plan, 0, 0, &ci), RL_E_STATE);
	CHECK_EQ(rl_plan_transfer_summary(NULL, &n, NULL, NULL), -EINVAL);
	CHECK_EQ(rl_plan_transfer_summary(plan, &n, NULL, NULL), RL_E_STATE);
	xs.size = sizeof(xs);
	CHECK_EQ(rl_plan_get_xstats(NULL, 0, &xs), -EINVAL);
	CHECK_EQ(rl_plan_get_xstats(plan, 0, NULL), -EINVAL);
	CHECK_EQ(rl_plan_get_xstats(plan, -2, &xs), -EINVAL);
	CHECK_EQ(rl_plan_get_xstats(plan, 0, &xs), RL_E_STATE);
	CHECK_EQ(rl_plan_build_batch(NULL, plan, 0), -EINVAL);
	CHECK_EQ(rl_plan_build_batch(batch, NULL, 0), -EINVAL);
	CHECK_EQ(rl_plan_build_batch(batch, plan, 0), RL_E_STATE);
	/* Built (no transfers on one process): out of range. */
	built = built_plan(&built_ck);
	CHECK(built);
	CHECK_EQ(rl_plan_num_transfers(built), 0);
	CHECK_EQ(rl_plan_transfer(built, 0, &ti), -EINVAL);
	CHECK_EQ(rl_plan_transfer_copy(built, 0, 0, &ci), -EINVAL);
	CHECK_EQ(rl_plan_transfer_summary(built, &n, NULL, NULL), 0);
	CHECK_EQ(n, 0);
	CHECK_EQ(rl_plan_get_xstats(built, 0, &xs), 0);
	CHECK_EQ(xs.size, sizeof(xs));
	xs.size = sizeof(size_t);   /* holds its size only */
	CHECK_EQ(rl_plan_get_xstats(built, 0, &xs), 0);
	CHECK_EQ(xs.size, sizeof(size_t));
	xs.size = 0;                /* cannot hold its size */
	CHECK_EQ(rl_plan_get_xstats(built, 0, &xs), -EINVAL);
	CHECK_EQ(rl_plan_build_batch(batch, built, 0), 0);
	CHECK_EQ(rl_plan_num_shards(batch), 0);
	CHECK_EQ(rl_plan_build_batch(batch, built, 0), RL_E_STATE);
	CHECK_EQ(rl_ckpt_open_headers(built_ck, 0, NULL), RL_E_STATE);
	rl_plan_destroy(built);
	rl_ckpt_destroy(built_ck);
	rl_plan_destroy(batch);
	rl_plan_destroy(plan);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
}

/* The size-tagged statistics, the request size and staging memory with
 * bad arguments (their good uses: test_load.c). */
static void loader_stats_functions(rl_loader *ld)
{
	rl_load_stats x = { .size = sizeof(x) };
	rl_file_stats fs = { .size = sizeof(fs) };

	CHECK_EQ(rl_loader_get_stats(NULL, &x), -EINVAL);
	CHECK_EQ(rl_loader_get_stats(ld, NULL), -EINVAL);
	x.size = 0;
	CHECK_EQ(rl_loader_get_stats(ld, &x), -EINVAL);
	x.size = sizeof(x);
	CHECK_EQ(rl_loader_get_stats(ld, &x), RL_E_STATE);
	CHECK_EQ(rl_loader_num_files(NULL), 0);
	CHECK_EQ(rl_loader_num_files(ld), 0);
	CHECK_EQ(rl_loader_get_file_stats(NULL, 0, &fs), -EINVAL);
	CHECK_EQ(rl_loader_get_file_stats(ld, 0, NULL), -EINVAL);
	CHECK_EQ(rl_loader_get_file_stats(ld, 0, &fs), RL_E_STATE);
	CHECK_EQ(rl_loader_request_bytes(NULL, NULL), -EINVAL);
	CHECK_EQ(rl_loader_request_bytes(ld, NULL), -EINVAL);
	CHECK(rl_staging_alloc(0) == NULL);
	rl_staging_free(NULL, 4096);
	CHECK_EQ(rl_loader_expect_sha256(NULL, "a", NULL), -EINVAL);
	CHECK_EQ(rl_loader_expect_sha256(ld, "a", NULL), RL_E_INVALID_ARG);
	CHECK_EQ(rl_loader_expect_sha256(ld, NULL, "00"), RL_E_INVALID_ARG);
	CHECK_EQ(rl_loader_expect_sha256(ld, "", "00"), RL_E_INVALID_ARG);
	CHECK_EQ(rl_loader_expect_sha256(ld, "a", "abc"), RL_E_INVALID_ARG);
	CHECK_EQ(rl_loader_expect_sha256(ld, "a", "0123456789abcdef0123456789abcdef"
					 "0123456789abcdef0123456789abcdeg"), RL_E_INVALID_ARG);
	CHECK_EQ(rl_loader_expect_sha256(ld, "a", "0123456789ABCDEF0123456789abcdef"
					 "0123456789abcdef0123456789abcdef"), 0);
	CHECK_EQ(rl_loader_expect_sha256(ld, NULL, NULL), 0);
}

/* rl_loader_get() gives back every parameter as set, at both bounds. */
static void loader_get_returns_what_was_set(void)
{
	rl_loader *ld = rl_loader_create();
	int64_t v = -1, lo, hi;

	CHECK(ld);
	CHECK_EQ(rl_loader_get(ld, RL_OPT_STAGING_BUDGET, &v), 0);
	CHECK_EQ(v, 0);         /* the default: rl_loader_default_budget() */
	CHECK_EQ(rl_loader_get(NULL, RL_OPT_QUEUE_DEPTH, &v), -EINVAL);
	CHECK_EQ(rl_loader_get(ld, (rl_loader_param)99, &v), -EINVAL);
	CHECK_EQ(rl_loader_get(ld, RL_OPT_STAGING, NULL), -EINVAL);
	for (int p = RL_OPT_BACKEND; p <= RL_OPT_RELEASE_TIMEOUT_MS; p++) {
		CHECK_EQ(rl_loader_param_bounds((rl_loader_param)p, &lo, &hi), 0);
		for (int end = 0; end < 2; end++) {
			CHECK_EQ(rl_loader_set(ld, (rl_loader_param)p, end ? hi : lo), 0);
			CHECK_EQ(rl_loader_get(ld, (rl_loader_param)p, &v), 0);
			CHECKF(v == (end ? hi : lo), "parameter %d: set %lld, got %lld", p,
			       (long long)(end ? hi : lo), (long long)v);
		}
	}
	rl_loader_destroy(ld);
}

static void loader_functions(void)
{
	rl_loader *ld = rl_loader_create();
	rl_plan *plan = rl_plan_create(), *got = (rl_plan *)1;
	rl_load_stats st = { .size = sizeof(st) };
	int64_t lo, hi;
	size_t len = 1;
	char buf[64];

	CHECK(ld && plan);
	CHECK_EQ(rl_loader_set(NULL, RL_OPT_QUEUE_DEPTH, 8), -EINVAL);
	CHECK_EQ(rl_loader_set_callbacks(NULL, NULL, NULL, NULL), -EINVAL);
	CHECK_EQ(rl_loader_set_staging(NULL, 0, buf, sizeof(buf)), -EINVAL);
	CHECK_EQ(rl_loader_run(NULL, plan), -EINVAL);
	CHECK_EQ(rl_loader_load(NULL, NULL, NULL, 0, &got), -EINVAL);
	CHECK(got == NULL);
	CHECK(rl_loader_staging(NULL, 0, &len) == NULL && len == 0);
	CHECK_EQ(rl_loader_get_stats(NULL, &st), -EINVAL);
	CHECK_STR(rl_loader_errmsg(NULL), "");
	rl_loader_destroy(NULL);
	CHECK_EQ(rl_loader_param_bounds((rl_loader_param)0, &lo, &hi), -EINVAL);
	CHECK_EQ(rl_loader_param_bounds(RL_OPT_QUEUE_DEPTH, NULL, NULL), 0);
	CHECK_EQ(rl_loader_set(ld, (rl_loader_param)99, 1), RL_E_INVALID_ARG);
	CHECK_EQ(rl_loader_set(ld, RL_OPT_QUEUE_DEPTH, 0), RL_E_INVALID_ARG);
	CHECK_EQ(rl_loader_set_callbacks(ld, NULL, NULL, NULL), 0);
	CHECK_EQ(rl_loader_set_staging(ld, 0, NULL, 8), RL_E_STAGING);
	CHECK_EQ(rl_loader_set_staging(ld, 1u << 20, buf, sizeof(buf)), RL_E_STAGING);
	CHECK_EQ(rl_loader_run(ld, NULL), -EINVAL);
	CHECK_EQ(rl_loader_run(ld, plan), RL_E_STATE);
	CHECK_EQ(rl_loader_load(ld, NULL, NULL, 0, NULL), -EINVAL);
	got = (rl_plan *)1;
	CHECK_EQ(rl_loader_load(ld, NULL, NULL, 0, &got), -EINVAL);
	CHECK(got == NULL);
	CHECK_EQ(rl_loader_get_stats(ld, NULL), -EINVAL);
	CHECK_EQ(rl_loader_get_stats(ld, &st), RL_E_STATE);
	CHECK(rl_loader_staging(ld, 0, &len) == NULL && len == 0);
	loader_stats_functions(ld);
	rl_plan_destroy(plan);
	rl_loader_destroy(ld);
}

/*
 * Caller staging of exactly a device's staging_bytes is enough, one byte
 * less is refused (a mutant that refused the exact size went unnoticed).
 */
static void caller_staging_of_exactly_staging_bytes(void)
{
	rl_ckpt *ck;
	rl_plan *plan = built_plan(&ck);
	rl_loader *ld = rl_loader_create();
	void *area[2] = { NULL, NULL };
	rl_device_info di[2];
	rl_shard_info si;

	CHECK(plan && ld);
	CHECK_EQ(rl_loader_set(ld, RL_OPT_STAGING, RL_STAGING_CALLER), 0);
	CHECK_EQ(rl_loader_set(ld, RL_OPT_BACKEND, RL_BACKEND_PREAD), 0);
	for (unsigned d = 0; d < 2; d++) {
		CHECK_EQ(rl_plan_device(plan, d, &di[d]), 0);
		area[d] = aligned_alloc(4096, (di[d].staging_bytes + 4095) / 4096 * 4096);
		CHECK(area[d]);
		CHECK_EQ(rl_loader_set_staging(ld, d, area[d], di[d].staging_bytes - 1), 0);
	}
	CHECK_EQ(rl_loader_run(ld, plan), RL_E_STAGING);
	CHECK(strstr(rl_loader_errmsg(ld), "needed"));
	for (unsigned d = 0; d < 2; d++)
		CHECK_EQ(rl_loader_set_staging(ld, d, area[d], di[d].staging_bytes), 0);
	CHECKF(rl_loader_run(ld, plan) == 0, "%s", rl_loader_errmsg(ld));
	/* Device 1 holds rows 2..3 of w: file bytes 32..63 of the data. */
	for (size_t i = 0; i < rl_plan_num_shards(plan); i++) {
		CHECK_EQ(rl_plan_shard(plan, i, &si), 0);
		if (si.device == 1 && !strcmp(si.name, "w"))
			CHECK_EQ(((unsigned char *)area[1])[si.offset], 32);
	}
	rl_loader_destroy(ld);
	free(area[0]);
	free(area[1]);
	rl_plan_destroy(plan);
	rl_ckpt_destroy(ck);
}

/* The streaming functions with NULL and out-of-state arguments (the
 * loads themselves: test_stream.c). */
static void streaming_functions(void)
{
	rl_loader *ld = rl_loader_create();
	rl_plan *plan = rl_plan_create();
	rl_piece p = { 0 };
	char small[4096];

	CHECK(ld && plan);
	CHECK_EQ(rl_loader_set_piece_callback(NULL, NULL, NULL), -EINVAL);
	CHECK_EQ(rl_loader_set_piece_callback(ld, NULL, NULL), 0);
	CHECK_EQ(rl_loader_set_window_pool(NULL, NULL, 0), -EINVAL);
	CHECK_EQ(rl_loader_set_window_pool(ld, small, sizeof(small)), RL_E_STAGING);
	CHECK_EQ(rl_loader_set_window_pool(ld, NULL, 0), 0);
	CHECK_EQ(rl_loader_release(NULL, &p), -EINVAL);
	CHECK_EQ(rl_loader_release(ld, NULL), -EINVAL);
	CHECK_EQ(rl_loader_release(ld, &p), 0);
	p.token = 1ull << 56;
	CHECK_EQ(rl_loader_release(ld, &p), RL_E_PIECE);
	CHECK_EQ(rl_loader_start(NULL, plan), -EINVAL);
	CHECK_EQ(rl_loader_start(ld, NULL), -EINVAL);
	CHECK_EQ(rl_loader_start(ld, plan), RL_E_STATE);  /* not built */
	CHECK_EQ(rl_loader_next_piece(NULL, &p, 0), -EINVAL);
	CHECK_EQ(rl_loader_next_piece(ld, &p, 0), RL_E_STATE);
	CHECK_EQ(rl_loader_finish(NULL), -EINVAL);
	CHECK_EQ(rl_loader_finish(ld), RL_E_STATE);
	CHECK(rl_loader_default_budget() >= (64 << 10));
	CHECK_EQ(rl_loader_budget(NULL), -EINVAL);
	{
		const char *name = NULL;
		int64_t v = 0;

		CHECK_EQ(rl_name_get(0, NULL, &v), -EINVAL);
		CHECK_EQ(rl_name_get(100000, &name, &v), 0);
		CHECK_EQ(rl_name_get(0, &name, &v), 1);
		CHECK_STR(rl_error_name(RL_E_CHECKSUM), "RL_E_CHECKSUM");
		CHECK(!rl_error_name(-ENOENT) && !rl_error_name(RL_PLAN_PROCESS));
	}
	rl_plan_destroy(plan);
	rl_loader_destroy(ld);
}

/* Runs seen by rl_copy_runs: (src, dst, len) triples; stops after stop. */
struct runs_seen {
	uint64_t v[16][3];
	int n, stop;
};

static int see_run(void *arg, uint64_t src, uint64_t dst, uint64_t len)
{
	struct runs_seen *s = arg;

	if (s->n < 16) {
		s->v[s->n][0] = src;
		s->v[s->n][1] = dst;
		s->v[s->n][2] = len;
	}
	return ++s->n == s->stop ? 7 : 0;
}

/* The one copy rule: strided runs at their offsets, contiguous ones
 * joined, the callback's nonzero ends it, bad arguments refused. */
static void copy_runs_function(void)
{
	rl_copy_info c = { .src = 100, .len = 8, .count = 3, .src_stride = 32, .dst = 1000 };
	struct runs_seen s = { .n = 0, .stop = 0 };

	CHECK_EQ(rl_copy_runs(NULL, see_run, &s), -EINVAL);
	CHECK_EQ(rl_copy_runs(&c, NULL, &s), -EINVAL);
	CHECK_EQ(rl_copy_runs(&c, see_run, &s), 0);
	CHECK_EQ(s.n, 3);
	for (int k = 0; k < 3; k++) {
		CHECK_EQ(s.v[k][0], 100 + 32 * k);
		CHECK_EQ(s.v[k][1], 1000 + 8 * k);
		CHECK_EQ(s.v[k][2], 8);
	}
	s.n = 0;
	s.stop = 2;
	CHECK_EQ(rl_copy_runs(&c, see_run, &s), 7);
	CHECK_EQ(s.n, 2);
	c.src_stride = c.len;
	s.n = s.stop = 0;
	CHECK_EQ(rl_copy_runs(&c, see_run, &s), 0);
	CHECK_EQ(s.n, 1);
	CHECK_EQ(s.v[0][0], 100);
	CHECK_EQ(s.v[0][1], 1000);
	CHECK_EQ(s.v[0][2], 24);
	c.count = 0;
	s.n = 0;
	CHECK_EQ(rl_copy_runs(&c, see_run, &s), 0);
	CHECK_EQ(s.n, 0);
}

int main(void)
{
	RUN(every_public_function_is_covered);
	RUN(library_wide_functions);
	RUN(sha256_functions);
	RUN(sums_functions);
	RUN(cache_probe_function);
	RUN(checkpoint_functions);
	RUN(checkpoint_bulk_query);
	RUN(spec_functions);
	RUN(plan_functions);
	RUN(plan_bulk_query);
	RUN(stats_only_plans);
	RUN(cluster_functions);
	RUN(loader_functions);
	RUN(loader_get_returns_what_was_set);
	RUN(caller_staging_of_exactly_staging_bytes);
	RUN(streaming_functions);
	RUN(copy_runs_function);
	return th_done();
}
