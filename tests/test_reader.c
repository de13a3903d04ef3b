/*
 * test_reader.c - the checkpoint reader: dtypes, header validation against
 * the reference's verdicts, multi-file checkpoints, the rl_ckpt API and
 * `ringload inspect`.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "harness.h"
#include "rl_common.h"
#include "../planner/planner.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static cJSON *load_json(const char *path)
{
	char *s = th_slurp(path, NULL);
	cJSON *j = s ? cJSON_Parse(s) : NULL;

	free(s);
	return j;
}

static char *tpath(const char *name)
{
	static char buf[8][4096];
	static int k;
	char *p = buf[k++ & 7];

	snprintf(p, 4096, "%s/%s", th_tmpdir(), name);
	return p;
}

/* Writes an 8-byte length, the header (len hlen), then data_len bytes. */
static int write_raw(const char *path, const char *hdr, size_t hlen, uint64_t len_field,
		     size_t data_len)
{
	FILE *f = fopen(path, "wb");
	unsigned char l[8];
	int ok;

	if (!f)
		return -1;
	for (int i = 0; i < 8; i++)
		l[i] = (unsigned char)(len_field >> (8 * i));
	ok = fwrite(l, 1, 8, f) == 8 && fwrite(hdr, 1, hlen, f) == hlen;
	for (size_t i = 0; ok && i < data_len; i++)
		ok = fputc((int)(i * 7 + 3) & 0xff, f) != EOF;
	return fclose(f) == 0 && ok ? 0 : -1;
}

static int write_st(const char *path, const char *hdr, size_t data_len)
{
	return write_raw(path, hdr, strlen(hdr), strlen(hdr), data_len);
}

/* Opens path; returns the code, and the handle in *out (or destroys it). */
static int open_ck(const char *path, rl_ckpt **out, char *msg, size_t cap)
{
	rl_ckpt *ck = rl_ckpt_create();
	int r;

	if (!ck)
		return -ENOMEM;
	r = rl_ckpt_open(ck, path);
	if (msg)
		snprintf(msg, cap, "%s", rl_ckpt_errmsg(ck));
	if (out && r == 0)
		*out = ck;
	else
		rl_ckpt_destroy(ck);
	return r;
}

/* Code of a one-file header, via the whole open path. */
static int hdr_code(const char *hdr, size_t data_len, char *msg, size_t cap)
{
	char *p = tpath("h.safetensors");

	if (write_st(p, hdr, data_len))
		return -EIO;
	return open_ck(p, NULL, msg, cap);
}

static void sha256_hex(const unsigned char *d, size_t n, char out[65])
{
	unsigned char md[32];
	unsigned mdlen = 0;

	EVP_Digest(d, n, md, &mdlen, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
}

static const char *tdata(void)
{
	return th_testdata();
}

/*
 * A 3-file llama-like sample with its index, written by build/mkckpt once
 * (RL_BUILD), for tests that need some sharded checkpoint rather than the
 * reference's bytes. NULL if mkckpt fails.
 */
static const char *sample_dir(void)
{
	static char dir[4096];
	const char *b = getenv("RL_BUILD");
	char cmd[8192];

	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "%s/sample3", th_tmpdir());
		snprintf(cmd, sizeof(cmd), "%s/mkckpt %s --size 3M --files 3 --layers 2 >/dev/null",
			 b ? b : "build", dir);
		if (system(cmd) != 0)
			dir[0] = '\0';
	}
	return dir[0] ? dir : NULL;
}

/* ------------------------------------------------------------------ */
/* dtypes                                                              */
/* ------------------------------------------------------------------ */

static void dtype_table(void)
{
	static const struct {
		const char *name;
		unsigned bits;
	} want[RL_DTYPE_COUNT] = {
		{ "BOOL", 8 }, { "U8", 8 }, { "I8", 8 }, { "F8_E5M2", 8 }, { "F8_E4M3", 8 },
		{ "F8_E8M0", 8 }, { "I16", 16 }, { "U16", 16 }, { "F16", 16 }, { "BF16", 16 },
		{ "I32", 32 }, { "U32", 32 }, { "F32", 32 }, { "F64", 64 }, { "I64", 64 },
		{ "U64", 64 }, { "F4", 4 }, { "F6_E2M3", 6 }, { "F6_E3M2", 6 }, { "C64", 64 },
		{ "F8_E4M3FNUZ", 8 }, { "F8_E5M2FNUZ", 8 },
	};

	for (int i = 0; i < RL_DTYPE_COUNT; i++) {
		CHECK_STR(rl_dtype_name((rl_dtype)i), want[i].name);
		CHECK_EQ(rl_dtype_bits((rl_dtype)i), want[i].bits);
		CHECK_EQ(rl_dtype_from_name(want[i].name), i);
	}
	CHECK(rl_dtype_name(RL_DTYPE_COUNT) == NULL);
	CHECK(rl_dtype_name((rl_dtype)-1) == NULL);
	CHECK_EQ(rl_dtype_bits(RL_DTYPE_COUNT), 0);
	CHECK_EQ(rl_dtype_from_name("f32"), -1);
	CHECK_EQ(rl_dtype_from_name("F32 "), -1);
	CHECK_EQ(rl_dtype_from_name("F128"), -1);
	CHECK_EQ(rl_dtype_from_name(""), -1);
	CHECK_EQ(rl_dtype_from_name(NULL), -1);
}

/* ------------------------------------------------------------------ */
/* Fixtures written by the reference                                   */
/* ------------------------------------------------------------------ */

/* Checks every tensor of ck that the manifest lists for file key. */
static int check_manifest_file(const rl_ckpt *ck, cJSON *tensors, const char *key,
			       size_t *seen)
{
	cJSON *t;

	cJSON_ArrayForEach(t, tensors) {
		long i = rl_ckpt_find(ck, t->string);
		rl_tensor_info ti;
		cJSON *shape = cJSON_GetObjectItem(t, "shape"), *d;
		unsigned char *buf;
		char hex[65];
		int fd, k = 0;

		if (i < 0) {
			th_fail(__FILE__, __LINE__, "%s: tensor %s not found", key, t->string);
			return -1;
		}
		rl_ckpt_tensor(ck, (size_t)i, &ti);
		if (strcmp(rl_dtype_name(ti.dtype), cJSON_GetObjectItem(t, "dtype")->valuestring) ||
		    ti.nbytes != (uint64_t)cJSON_GetObjectItem(t, "nbytes")->valuedouble ||
		    ti.ndim != (unsigned)cJSON_GetArraySize(shape)) {
			th_fail(__FILE__, __LINE__, "%s: %s: dtype/nbytes/rank differ", key, t->string);
			return -1;
		}
		cJSON_ArrayForEach(d, shape) {
			if (ti.shape[k++] != (uint64_t)d->valuedouble) {
				th_fail(__FILE__, __LINE__, "%s: %s: shape differs", key, t->string);
				return -1;
			}
		}
		if (!strstr(rl_ckpt_file_path(ck, ti.file), key + (strchr(key, '/') ?
				 strchr(key, '/') - key + 1 : 0))) {
			th_fail(__FILE__, __LINE__, "%s: %s in file %s", key, t->string,
				rl_ckpt_file_path(ck, ti.file));
			return -1;
		}
		buf = malloc(ti.nbytes + 1);
		fd = open(rl_ckpt_file_path(ck, ti.file), O_RDONLY);
		if (!buf || fd < 0 ||
		    pread(fd, buf, ti.nbytes, (off_t)ti.offset) != (ssize_t)ti.nbytes) {
			th_fail(__FILE__, __LINE__, "%s: cannot read %s", key, t->string);
			free(buf);
			if (fd >= 0)
				close(fd);
			return -1;
		}
		close(fd);
		sha256_hex(buf, ti.nbytes, hex);
		free(buf);
		if (strcmp(hex, cJSON_GetObjectItem(t, "sha256")->valuestring)) {
			th_fail(__FILE__, __LINE__, "%s: %s: sha256 differs", key, t->string);
			return -1;
		}
		(*seen)++;
	}
	return 0;
}

static void reference_files(void)
{
	char path[4096];
	cJSON *m, *f;

	if (!tdata())
		SKIP(th_testdata_missing());
	snprintf(path, sizeof(path), "%s/reference/MANIFEST.json", tdata());
	m = load_json(path);
	CHECK(m);
	cJSON_ArrayForEach(f, m) {
		rl_ckpt *ck = NULL;
		size_t seen = 0;
		int r;

		snprintf(path, sizeof(path), "%s/reference/%s", tdata(), f->string);
		r = open_ck(path, &ck, NULL, 0);
		if (r) {
			cJSON_Delete(m);
			CHECKF(0, "%s: %d", path, r);
		}
		r = check_manifest_file(ck, f, f->string, &seen);
		if (!r && (rl_ckpt_num_tensors(ck) != seen || rl_ckpt_num_files(ck) != 1 ||
			   strcmp(rl_ckpt_metadata_get(ck, "format") ? rl_ckpt_metadata_get(ck, "format")
								     : "", "pt")))
			th_fail(__FILE__, __LINE__, "%s: %zu tensors, manifest %zu", path,
				rl_ckpt_num_tensors(ck), seen), r = -1;
		rl_ckpt_destroy(ck);
		if (r)
			break;
	}
	cJSON_Delete(m);
}

/* Checks ck (the tiny-moe model) against every tiny-moe manifest entry. */
static int check_tiny_moe(const rl_ckpt *ck)
{
	char path[4096];
	size_t seen = 0, n;
	cJSON *m, *f;
	int r = 0;

	snprintf(path, sizeof(path), "%s/reference/MANIFEST.json", tdata());
	m = load_json(path);
	if (!m)
		return -1;
	cJSON_ArrayForEach(f, m)
		if (!r && !strncmp(f->string, "tiny-moe/", 9))
			r = check_manifest_file(ck, f, f->string, &seen);
	cJSON_Delete(m);
	if (r)
		return r;
	if (seen != rl_ckpt_num_tensors(ck) || seen != 75 || rl_ckpt_num_files(ck) != 3) {
		th_fail(__FILE__, __LINE__, "tiny-moe: %zu tensors, %zu checked", rl_ckpt_num_tensors(ck), seen);
		return -1;
	}
	/* Ordered by file, then offset; files sorted by name. */
	n = rl_ckpt_num_tensors(ck);
	for (size_t i = 1; i < n; i++) {
		rl_tensor_info a, b;

		rl_ckpt_tensor(ck, i - 1, &a);
		rl_ckpt_tensor(ck, i, &b);
		if (a.file > b.file || (a.file == b.file && a.offset + a.nbytes != b.offset)) {
			th_fail(__FILE__, __LINE__, "tensor order at %zu", i);
			return -1;
		}
	}
	for (size_t i = 1; i < rl_ckpt_num_files(ck); i++)
		if (strcmp(rl_ckpt_file_path(ck, i - 1), rl_ckpt_file_path(ck, i)) >= 0) {
			th_fail(__FILE__, __LINE__, "file order");
			return -1;
		}
	return 0;
}

static void tiny_moe_index(void)
{
	char path[4096];
	rl_ckpt *ck = NULL;

	if (!tdata())
		SKIP(th_testdata_missing());
	snprintf(path, sizeof(path), "%s/reference/tiny-moe/model.safetensors.index.json", tdata());
	CHECK_EQ(open_ck(path, &ck, NULL, 0), 0);
	if (check_tiny_moe(ck)) {
		rl_ckpt_destroy(ck);
		return;
	}
	CHECK_EQ(rl_ckpt_find(ck, "no.such.tensor"), RL_E_MISSING_TENSOR);
	rl_ckpt_destroy(ck);
}

static void tiny_moe_directory(void)
{
	char path[4096];
	rl_ckpt *ck = NULL;

	if (!tdata())
		SKIP(th_testdata_missing());
	snprintf(path, sizeof(path), "%s/reference/tiny-moe", tdata());
	CHECK_EQ(open_ck(path, &ck, NULL, 0), 0);
	check_tiny_moe(ck);
	rl_ckpt_destroy(ck);
}

static int expected_code(const char *variant, const char *name)
{
	static const struct {
		const char *variant;
		int code;
	} map[] = {
		{ "HeaderTooSmall", RL_E_HEADER_TOO_SMALL },
		{ "HeaderTooLarge", RL_E_HEADER_TOO_LARGE },
		{ "InvalidHeaderLength", RL_E_HEADER_LENGTH },
		{ "InvalidHeader", RL_E_HEADER_UTF8 },
		{ "InvalidHeaderDeserialization", RL_E_HEADER_JSON },
		{ "InvalidOffset", RL_E_INVALID_OFFSET },
		{ "ValidationOverflow", RL_E_OVERFLOW },
		{ "MisalignedSlice", RL_E_MISALIGNED },
		{ "TensorInvalidInfo", RL_E_SIZE_MISMATCH },
	};

	if (!strcmp(variant, "MetadataIncompleteBuffer"))
		return strstr(name, "short") ? RL_E_TRUNCATED : RL_E_INCOMPLETE;
	for (size_t i = 0; i < RL_ARRAY_SIZE(map); i++)
		if (!strcmp(variant, map[i].variant))
			return map[i].code;
	return 1;
}

static void headers_expected(void)
{
	char path[4096], msg[RL_ERRMSG_MAX];
	int cases = 0;
	cJSON *m, *c;

	if (!tdata())
		SKIP(th_testdata_missing());
	snprintf(path, sizeof(path), "%s/headers/EXPECTED.json", tdata());
	m = load_json(path);
	CHECK(m);
	cJSON_ArrayForEach(c, m) {
		const char *v = c->valuestring;
		rl_ckpt *ck = NULL;
		int r;

		snprintf(path, sizeof(path), "%s/headers/%s.safetensors", tdata(), c->string);
		r = open_ck(path, &ck, msg, sizeof(msg));
		cases++;
		if (!strncmp(v, "ok ", 3)) {
			if (r != 0 || rl_ckpt_num_tensors(ck) != strtoul(v + 3, NULL, 10)) {
				th_fail(__FILE__, __LINE__, "%s: want %s, got %d (%s)", c->string, v, r, msg);
				rl_ckpt_destroy(ck);
				break;
			}
			rl_ckpt_destroy(ck);
		} else {
			int want = expected_code(v + 4, c->string);

			if (r != want || !strstr(msg, c->string) ||
			    (want == RL_E_TRUNCATED && !strstr(msg, "truncated"))) {
				th_fail(__FILE__, __LINE__, "%s: want %s (%d), got %d (%s)", c->string,
					v, want, r, msg);
				break;
			}
		}
	}
	cJSON_Delete(m);
	CHECK(cases >= 60);
}

/* ------------------------------------------------------------------ */
/* Header edge cases                                                   */
/* ------------------------------------------------------------------ */

static void header_length_limit(void)
{
	char *p = tpath("limit.safetensors"), msg[RL_ERRMSG_MAX];
	const size_t limit = 100000000;
	char *hdr = malloc(limit);
	rl_ckpt *ck = NULL;
	int fd;

	CHECK(hdr);
	memset(hdr, ' ', limit);
	{
		static const char h[] = "{\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]}}";

		memcpy(hdr, h, sizeof(h) - 1);
	}
	CHECK_EQ(write_raw(p, hdr, limit, limit, 3), 0);
	free(hdr);
	CHECK_EQ(open_ck(p, &ck, msg, sizeof(msg)), 0);
	CHECK_EQ(rl_ckpt_num_tensors(ck), 1);
	{
		rl_tensor_info t;

		rl_ckpt_tensor(ck, 0, &t);
		CHECK_EQ(t.offset, 8 + limit);
	}
	rl_ckpt_destroy(ck);
	/* One more is too large, whatever the file holds (a sparse file here). */
	CHECK_EQ(write_raw(p, "{}", 2, limit + 1, 0), 0);
	fd = open(p, O_WRONLY);
	CHECK(fd >= 0);
	CHECK_EQ(ftruncate(fd, (off_t)limit + 100), 0);
	close(fd);
	CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), RL_E_HEADER_TOO_LARGE);
	CHECK(strstr(msg, "100000001"));
	unlink(p);
}

static void shape_overflow_order(void)
{
	char msg[RL_ERRMSG_MAX];

	/* try_fold(1, checked_mul): an overflow before a 0 still overflows. */
	CHECK_EQ(hdr_code("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,0],"
			  "\"data_offsets\":[0,0]}}", 0, msg, sizeof(msg)), RL_E_OVERFLOW);
	CHECK(strstr(msg, "'a'"));
	CHECK_EQ(hdr_code("{\"a\":{\"dtype\":\"U8\",\"shape\":[0,4294967296,4294967296],"
			  "\"data_offsets\":[0,0]}}", 0, NULL, 0), 0);
	/* Element count fits, bit count does not. */
	CHECK_EQ(hdr_code("{\"a\":{\"dtype\":\"F4\",\"shape\":[4611686018427387904],"
			  "\"data_offsets\":[0,0]}}", 0, NULL, 0), RL_E_OVERFLOW);
	/* Offsets are checked before sizes, tensor by tensor in offset order. */
	CHECK_EQ(hdr_code("{\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]},"
			  "\"a\":{\"dtype\":\"U8\",\"shape\":[5],\"data_offsets\":[0,2]}}", 3,
			  msg, sizeof(msg)), RL_E_SIZE_MISMATCH);
	CHECK(strstr(msg, "'a'"));
	CHECK_EQ(hdr_code("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],"
			  "\"data_offsets\":[0,2]},\"b\":{\"dtype\":\"U8\",\"shape\":[1],"
			  "\"data_offsets\":[3,4]}}", 4, NULL, 0), RL_E_OVERFLOW);
	/* Zero-length tensors may share an offset. */
	CHECK_EQ(hdr_code("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},"
			  "\"b\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,0]},"
			  "\"c\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2, NULL, 0), 0);
}

/* k nested arrays inside an ignored field: depth 2 + k (serde_json: <= 127). */
static int nesting(int k)
{
	char *h = malloc(256 + 2 * (size_t)k);
	size_t o;
	int r;

	o = (size_t)sprintf(h, "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":");
	for (int i = 0; i < k; i++)
		h[o++] = '[';
	for (int i = 0; i < k; i++)
		h[o++] = ']';
	strcpy(h + o, "}}");
	r = hdr_code(h, 1, NULL, 0);
	free(h);
	return r;
}

static void deep_nesting(void)
{
	char h[2048];
	size_t o;

	CHECK_EQ(nesting(125), 0);
	CHECK_EQ(nesting(126), RL_E_HEADER_JSON);
	CHECK_EQ(nesting(5000), RL_E_HEADER_JSON);
	/* Objects count the same as arrays. */
	for (int k = 125; k <= 126; k++) {
		o = (size_t)sprintf(h, "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":");
		for (int i = 0; i < k; i++)
			o += (size_t)sprintf(h + o, "{\"y\":");
		h[o++] = '1';
		for (int i = 0; i < k; i++)
			h[o++] = '}';
		strcpy(h + o, "}}");
		CHECK_EQ(hdr_code(h, 1, NULL, 0), k == 125 ? 0 : RL_E_HEADER_JSON);
	}
	/* Form feed is not JSON whitespace. */
	CHECK_EQ(hdr_code("{}\f", 0, NULL, 0), RL_E_HEADER_JSON);
}

static void names_and_strings(void)
{
	rl_ckpt *ck = NULL;
	rl_tensor_info t;
	char msg[RL_ERRMSG_MAX];
	char *p = tpath("names.safetensors");

	/* Escaped control characters, '/' (plain and escaped), a surrogate pair. */
	CHECK_EQ(write_st(p, "{\"a\\u0001\\tb\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
			  "\"x/y\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]},"
			  "\"p\\/q\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]},"
			  "\"\\ud83d\\ude00\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[3,4]}}", 4), 0);
	CHECK_EQ(open_ck(p, &ck, msg, sizeof(msg)), 0);
	CHECK_EQ(rl_ckpt_num_tensors(ck), 4);
	rl_ckpt_tensor(ck, 0, &t);
	CHECK_STR(t.name, "a\001\tb");
	rl_ckpt_tensor(ck, 1, &t);
	CHECK_STR(t.name, "x/y");
	rl_ckpt_tensor(ck, 2, &t);
	CHECK_STR(t.name, "p/q");
	rl_ckpt_tensor(ck, 3, &t);
	CHECK_STR(t.name, "\xf0\x9f\x98\x80");
	CHECK(rl_ckpt_find(ck, "x/y") == 1);
	rl_ckpt_destroy(ck);

	/* Raw control characters, bad escapes, unpaired surrogates: not JSON. */
	CHECK_EQ(hdr_code("{\"a\001\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
			  NULL, 0), RL_E_HEADER_JSON);
	CHECK_EQ(hdr_code("{\"a\\x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
			  NULL, 0), RL_E_HEADER_JSON);
	CHECK_EQ(hdr_code("{\"\\udc00\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
			  NULL, 0), RL_E_HEADER_JSON);
	CHECK_EQ(hdr_code("{\"\\ud800\\u0041\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
			  1, NULL, 0), RL_E_HEADER_JSON);
	/* ... anywhere, also in an ignored field. */
	CHECK_EQ(hdr_code("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
			  "\"x\":\"\\ud800\"}}", 1, NULL, 0), RL_E_HEADER_JSON);
	/* Overlong UTF-8 and encoded surrogates are not UTF-8. */
	CHECK_EQ(hdr_code("{\"\xc0\xaf\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
			  NULL, 0), RL_E_HEADER_UTF8);
	CHECK_EQ(hdr_code("{\"\xed\xa0\x80\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
			  NULL, 0), RL_E_HEADER_UTF8);
	/* U+0000 is valid JSON but not a C string: refused, after validation. */
	CHECK_EQ(hdr_code("{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
			  msg, sizeof(msg)), RL_E_HEADER_JSON);
	CHECK(strstr(msg, "U+0000"));
	CHECK_EQ(hdr_code("{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 2,
			  NULL, 0), RL_E_INCOMPLETE);
}

static void exact_integers(void)
{
	char msg[RL_ERRMSG_MAX];
	rl_ckpt *ck = NULL;
	rl_tensor_info t;
	char *p = tpath("big.safetensors");

	CHECK_EQ(write_st(p, "{\"a\":{\"dtype\":\"U8\",\"shape\":[9007199254740993,0,"
			  "18446744073709551615],\"data_offsets\":[0,0]}}", 0), 0);
	CHECK_EQ(open_ck(p, &ck, NULL, 0), 0);
	rl_ckpt_tensor(ck, 0, &t);
	CHECK_EQ(t.ndim, 3);
	CHECK(t.shape[0] == 9007199254740993ull);
	CHECK(t.shape[2] == UINT64_MAX);
	rl_ckpt_destroy(ck);
	/* 2^64 does not fit; neither do signs, fractions, exponents, zeros. */
	CHECK_EQ(hdr_code("{\"a\":{\"dtype\":\"U8\",\"shape\":[18446744073709551616,0],"
			  "\"data_offsets\":[0,0]}}", 0, NULL, 0), RL_E_HEADER_JSON);
	CHECK_EQ(hdr_code("{\"a\":{\"dtype\":\"U8\",\"shape\":[-0],\"data_offsets\":[0,0]}}", 0,
			  NULL, 0), RL_E_HEADER_JSON);
	CHECK_EQ(hdr_code("{\"a\":{\"dtype\":\"U8\",\"shape\":[1E0],\"data_offsets\":[0,1]}}", 1,
			  NULL, 0), RL_E_HEADER_JSON);
	CHECK_EQ(hdr_code("{\"a\":{\"dtype\":\"U8\",\"shape\":[00],\"data_offsets\":[0,0]}}", 0,
			  msg, sizeof(msg)), RL_E_HEADER_JSON);
	CHECKF(strstr(msg, "invalid number (leading zero) at byte 29"), "%s", msg);
	/* Ignored fields take any JSON number a double can hold. */
	CHECK_EQ(hdr_code("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
			  "\"x\":[-0.0,1e308,1e-400,0e999999,-12.5E+3]}}", 1, NULL, 0), 0);
	CHECK_EQ(hdr_code("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
			  "\"x\":1e309}}", 1, NULL, 0), RL_E_HEADER_JSON);
	CHECK_EQ(hdr_code("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
			  "\"x\":-1.8e308}}", 1, NULL, 0), RL_E_HEADER_JSON);
	CHECK_EQ(hdr_code("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
			  "\"x\":1.}}", 1, NULL, 0), RL_E_HEADER_JSON);
	/* The edge of a double, as serde_json rounds it (checked against serde). */
	CHECK_EQ(hdr_code("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
			  "\"x\":1.7976931348623157e308}}", 1, NULL, 0), 0);
	CHECK_EQ(hdr_code("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
			  "\"x\":1.7976931348623159e308}}", 1, NULL, 0), RL_E_HEADER_JSON);
	{
		char h[1024];
		size_t o = (size_t)sprintf(h, "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
					   "\"data_offsets\":[0,1],\"x\":");

		memset(h + o, '9', 300);
		strcpy(h + o + 300, "}}");
		CHECK_EQ(hdr_code(h, 1, NULL, 0), 0);       /* 1e300: a double */
		memset(h + o, '9', 400);
		strcpy(h + o + 400, "}}");
		CHECK_EQ(hdr_code(h, 1, NULL, 0), RL_E_HEADER_JSON); /* 1e400: out of range */
	}
}

static void serde_forms(void)
{
	rl_ckpt *ck = NULL;
	rl_tensor_info t;
	char *p = tpath("forms.safetensors");

	/* serde derive also reads a struct from an array, an enum from {"V": null}. */
	CHECK_EQ(write_st(p, "{\"a\":[\"F32\",[2],[0,8]],\"b\":{\"dtype\":{\"BF16\":null},"
			  "\"shape\":[1],\"data_offsets\":[8,10]}}", 10), 0);
	CHECK_EQ(open_ck(p, &ck, NULL, 0), 0);
	rl_ckpt_tensor(ck, 0, &t);
	CHECK_EQ(t.dtype, RL_DTYPE_F32);
	rl_ckpt_tensor(ck, 1, &t);
	CHECK_EQ(t.dtype, RL_DTYPE_BF16);
	rl_ckpt_destroy(ck);
	CHECK_EQ(hdr_code("{\"a\":[\"F32\",[2]]}", 0, NULL, 0), RL_E_HEADER_JSON);
	CHECK_EQ(hdr_code("{\"a\":[\"F32\",[2],[0,8],1]}", 8, NULL, 0), RL_E_HEADER_JSON);
	CHECK_EQ(hdr_code("{\"a\":{\"dtype\":{\"BF16\":1},\"shape\":[1],\"data_offsets\":[0,2]}}", 2,
			  NULL, 0), RL_E_HEADER_JSON);
	/* A repeated field of TensorInfo, a repeated __metadata__: errors. */
	CHECK_EQ(hdr_code("{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],"
			  "\"data_offsets\":[0,1]}}", 1, NULL, 0), RL_E_HEADER_JSON);
	CHECK_EQ(hdr_code("{\"__metadata__\":{},\"__metadata__\":{}}", 0, NULL, 0), RL_E_HEADER_JSON);
	/* A repeated tensor keeps the last entry, which is the one validated. */
	CHECK_EQ(write_st(p, "{\"a\":{\"dtype\":\"U8\",\"shape\":[9],\"data_offsets\":[0,9]},"
			  "\"a\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4), 0);
	CHECK_EQ(open_ck(p, &ck, NULL, 0), 0);
	CHECK_EQ(rl_ckpt_num_tensors(ck), 1);
	rl_ckpt_tensor(ck, 0, &t);
	CHECK_EQ(t.dtype, RL_DTYPE_I16);
	rl_ckpt_destroy(ck);
}

/* A header of one U8 tensor of rank rank (every dimension 1). */
static int rank_code(unsigned rank, rl_ckpt **ck)
{
	char h[2048], *p = tpath("rank.safetensors");
	size_t o = (size_t)sprintf(h, "{\"a\":{\"dtype\":\"U8\",\"shape\":[");

	for (unsigned i = 0; i < rank; i++)
		o += (size_t)sprintf(h + o, "%s1", i ? "," : "");
	sprintf(h + o, "],\"data_offsets\":[0,1]}}");
	if (write_st(p, h, 1))
		return -EIO;
	return open_ck(p, ck, NULL, 0);
}

/*
 * Rank: a header may hold 255 dimensions (above is valid safetensors but
 * beyond ringload), a plan 16 (RL_MAX_DIMS).
 */
static void rank_limits(void)
{
	rl_ckpt *ck = NULL;

	CHECK_EQ(rank_code(256, NULL), RL_E_TOO_LARGE);
	CHECK_EQ(rank_code(300, NULL), RL_E_TOO_LARGE);
	for (unsigned rank = 16; rank <= 255; rank += rank == 16 ? 1 : 238) {
		rl_plan *plan = rl_plan_create();
		int ret;

		CHECK_EQ(rank_code(rank, &ck), 0);
		ret = rl_plan_build(plan, ck, NULL);
		CHECKF(rank == 16 ? ret == 0 : ret == RL_E_TOO_LARGE, "rank %u: %d %s", rank, ret,
		       rl_plan_errmsg(plan));
		CHECK(rank == 16 || strstr(rl_plan_errmsg(plan), "dimensions (at most 16)"));
		rl_plan_destroy(plan);
		rl_ckpt_destroy(ck);
		ck = NULL;
	}
}

/* pl_header_parse on its own: metadata sorted and deduplicated even with no
 * tensors (regression: found by fuzz_header). */
static void header_parse_metadata_only(void)
{
	static const char h[] = "{\"__metadata__\":{\"x\":\"1\",\"mat\":\"a\",\"x\":\"2\",\"b\":\"\"}}";
	struct rl_err e = { 0 };
	struct pl_header ph;

	CHECK_EQ(pl_header_parse(h, sizeof(h) - 1, 8 + sizeof(h) - 1, 0, &ph, &e), 0);
	CHECK_EQ(ph.ntensors, 0);
	CHECK_EQ(ph.nmeta, 3);
	CHECK_STR(ph.meta[0].key, "b");
	CHECK_STR(ph.meta[1].key, "mat");
	CHECK_STR(ph.meta[2].key, "x");
	CHECK_STR(ph.meta[2].value, "2");
	pl_header_free(&ph);
	/* An empty header buffer is not JSON. */
	CHECK_EQ(pl_header_parse("", 0, 8, 0, &ph, &e), RL_E_HEADER_JSON);
}

static void many_tensors(void)
{
	const int n = 100000;
	char *h = malloc((size_t)n * 80 + 16), name[32];
	char *p = tpath("many.safetensors");
	rl_ckpt *ck = NULL;
	size_t o = 0;

	CHECK(h);
	h[o++] = '{';
	for (int i = 0; i < n; i++)
		o += (size_t)sprintf(h + o, "%s\"layer.%d.w\":{\"dtype\":\"U8\",\"shape\":[1],"
				     "\"data_offsets\":[%d,%d]}", i ? "," : "", (i * 7919) % n,
				     i, i + 1);
	strcpy(h + o, "}");
	CHECK_EQ(write_st(p, h, (size_t)n), 0);
	free(h);
	CHECK_EQ(open_ck(p, &ck, NULL, 0), 0);
	CHECK_EQ(rl_ckpt_num_tensors(ck), n);
	for (int i = 0; i < n; i++) {
		long k;

		snprintf(name, sizeof(name), "layer.%d.w", i);
		k = rl_ckpt_find(ck, name);
		if (k < 0) {
			rl_ckpt_destroy(ck);
			CHECKF(0, "%s not found", name);
		}
	}
	rl_ckpt_destroy(ck);
	unlink(p);
}

/* ------------------------------------------------------------------ */
/* Checkpoints of several files                                        */
/* ------------------------------------------------------------------ */

static const char *mkdir_t(const char *name)
{
	char *p = tpath(name);

	mkdir(p, 0755);
	return p;
}

static void write_in(const char *dir, const char *name, const char *hdr, size_t data)
{
	char p[4096];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	write_st(p, hdr, data);
}

/* Writes len bytes (NULs included) as dir/name. */
static void write_bytes(const char *dir, const char *name, const char *b, size_t len)
{
	char p[4096];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "wb");
	if (f) {
		fwrite(b, 1, len, f);
		fclose(f);
	}
}

static void write_text(const char *dir, const char *name, const char *text)
{
	write_bytes(dir, name, text, strlen(text));
}

#define T1(n, s, e) "\"" n "\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[" #s "," #e "]}"

static void empty_checkpoints(void)
{
	const char *d = mkdir_t("empty");
	char p[4096], msg[RL_ERRMSG_MAX];
	rl_ckpt *ck = NULL;

	CHECK_EQ(open_ck(d, NULL, msg, sizeof(msg)), -ENOENT);
	CHECK(strstr(msg, "no *.safetensors"));
	write_text(d, "notes.txt", "x");
	write_in(d, ".hidden.safetensors", "garbage", 0);
	CHECK_EQ(open_ck(d, NULL, NULL, 0), -ENOENT);
	/* A file with no tensors is a valid, empty checkpoint. */
	write_in(d, "e.safetensors", "{}", 0);
	CHECK_EQ(open_ck(d, &ck, NULL, 0), 0);
	CHECK_EQ(rl_ckpt_num_tensors(ck), 0);
	CHECK_EQ(rl_ckpt_num_files(ck), 1);
	CHECK(rl_ckpt_tensor(ck, 0, &(rl_tensor_info){ 0 }) == -EINVAL);
	rl_ckpt_destroy(ck);
	snprintf(p, sizeof(p), "%s/missing.safetensors", d);
	CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), -ENOENT);
	CHECK(strstr(msg, "missing.safetensors"));
}

/* A FIFO is refused at once, not waited on (regression: open blocked). */
static void special_files(void)
{
	char *f = tpath("fifo.safetensors"), *j = tpath("fifo.json");
	char msg[RL_ERRMSG_MAX];

	CHECK_EQ(mkfifo(f, 0600), 0);
	CHECK_EQ(mkfifo(j, 0600), 0);
	alarm(10);
	CHECK_EQ(open_ck(f, NULL, msg, sizeof(msg)), -EINVAL);
	CHECK(strstr(msg, "not a regular file"));
	CHECK_EQ(open_ck(j, NULL, NULL, 0), RL_E_BAD_INDEX);
	alarm(0);
	unlink(f);
	unlink(j);
}

static void duplicates_across_files(void)
{
	const char *d = mkdir_t("dup");
	char msg[RL_ERRMSG_MAX];

	write_in(d, "a.safetensors", "{" T1("x", 0, 2) "," T1("y", 2, 4) "}", 4);
	write_in(d, "b.safetensors", "{" T1("z", 0, 2) "," T1("y", 2, 4) "}", 4);
	CHECK_EQ(open_ck(d, NULL, msg, sizeof(msg)), RL_E_DUPLICATE_TENSOR);
	CHECK(strstr(msg, "'y'") && strstr(msg, "a.safetensors") && strstr(msg, "b.safetensors"));
}

static void metadata_merge(void)
{
	const char *d = mkdir_t("meta");
	rl_ckpt *ck = NULL;
	const char *k, *v;

	write_in(d, "1.safetensors", "{\"__metadata__\":{\"b\":\"x\",\"a\":\"1\",\"a\":\"0\"},"
		 T1("t1", 0, 2) "}", 2);
	write_in(d, "2.safetensors", "{\"__metadata__\":{\"c\":\"y\",\"a\":\"2\"}," T1("t2", 0, 2) "}", 2);
	write_in(d, "3.safetensors", "{\"__metadata__\":null," T1("t3", 0, 2) "}", 2);
	CHECK_EQ(open_ck(d, &ck, NULL, 0), 0);
	CHECK_EQ(rl_ckpt_num_metadata(ck), 3);
	CHECK_EQ(rl_ckpt_metadata(ck, 0, &k, &v), 0);
	CHECK_STR(k, "a");
	CHECK_STR(v, "2");
	rl_ckpt_metadata(ck, 1, &k, &v);
	CHECK_STR(k, "b");
	CHECK_STR(v, "x");
	rl_ckpt_metadata(ck, 2, &k, &v);
	CHECK_STR(k, "c");
	CHECK_STR(rl_ckpt_metadata_get(ck, "c"), "y");
	CHECK(rl_ckpt_metadata_get(ck, "d") == NULL);
	CHECK_EQ(rl_ckpt_metadata(ck, 3, &k, &v), -EINVAL);
	rl_ckpt_destroy(ck);
}

static void index_cases(void)
{
	const char *d = mkdir_t("idx");
	char p[4096], msg[RL_ERRMSG_MAX];
	rl_ckpt *ck = NULL;
	rl_tensor_info t;

	snprintf(p, sizeof(p), "%s/model.safetensors.index.json", d);
	write_in(d, "s1.safetensors", "{" T1("a", 0, 2) "," T1("extra", 2, 4) "}", 4);
	write_in(d, "s2.safetensors", "{" T1("b", 0, 2) "," T1("a", 2, 4) "}", 4);
	/* The map decides: a from s1, b from s2; extra and s2's a ignored. */
	write_text(d, "model.safetensors.index.json",
		   "{\"metadata\":{\"total_size\":4},\"weight_map\":{\"b\":\"s2.safetensors\","
		   "\"a\":\"s1.safetensors\"}}");
	CHECK_EQ(open_ck(p, &ck, msg, sizeof(msg)), 0);
	CHECK_EQ(rl_ckpt_num_tensors(ck), 2);
	CHECK_EQ(rl_ckpt_num_files(ck), 2);
	rl_ckpt_tensor(ck, (size_t)rl_ckpt_find(ck, "a"), &t);
	CHECK(strstr(rl_ckpt_file_path(ck, t.file), "s1.safetensors"));
	CHECK_EQ(t.offset, rl_ckpt_file_size(ck, t.file) - 4);
	CHECK_EQ(rl_ckpt_find(ck, "extra"), RL_E_MISSING_TENSOR);
	rl_ckpt_destroy(ck);

	/* A repeated key keeps the last value. */
	write_text(d, "model.safetensors.index.json",
		   "{\"weight_map\":{\"a\":\"s1.safetensors\",\"a\":\"s2.safetensors\"}}");
	CHECK_EQ(open_ck(p, &ck, msg, sizeof(msg)), 0);
	rl_ckpt_tensor(ck, 0, &t);
	CHECK(strstr(rl_ckpt_file_path(ck, t.file), "s2.safetensors"));
	rl_ckpt_destroy(ck);

	/* A tensor in the map, not in its file. */
	write_text(d, "model.safetensors.index.json",
		   "{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s1.safetensors\"}}");
	CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), RL_E_MISSING_TENSOR);
	CHECK(strstr(msg, "'b'") && strstr(msg, "s1.safetensors"));

	/* A file referenced but missing. */
	write_text(d, "model.safetensors.index.json",
		   "{\"weight_map\":{\"a\":\"s1.safetensors\",\"q\":\"gone.safetensors\"}}");
	CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), -ENOENT);
	CHECK(strstr(msg, "gone.safetensors"));

	/* Malformed indexes. */
	write_text(d, "model.safetensors.index.json", "{\"weight_map\":{\"a\":\"s1.safetensors\"");
	CHECK_EQ(open_ck(p, NULL, NULL, 0), RL_E_BAD_INDEX);
	write_text(d, "model.safetensors.index.json", "{\"weight_map\":[\"s1.safetensors\"]}");
	CHECK_EQ(open_ck(p, NULL, NULL, 0), RL_E_BAD_INDEX);
	write_text(d, "model.safetensors.index.json", "{\"weight_map\":{\"a\":1}}");
	CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), RL_E_BAD_INDEX);
	CHECK(strstr(msg, "'a'"));
	write_text(d, "model.safetensors.index.json", "[]");
	CHECK_EQ(open_ck(p, NULL, NULL, 0), RL_E_BAD_INDEX);
	/* An empty map is an empty checkpoint. */
	write_text(d, "model.safetensors.index.json", "{\"weight_map\":{}}");
	CHECK_EQ(open_ck(p, &ck, NULL, 0), 0);
	CHECK_EQ(rl_ckpt_num_tensors(ck), 0);
	rl_ckpt_destroy(ck);
}

/* Only JSON whitespace may follow the index's value; the message gives the byte. */
static void index_trailing(void)
{
	const char *d = mkdir_t("idxtail");
	char p[4096], msg[RL_ERRMSG_MAX];
	rl_ckpt *ck = NULL;

	snprintf(p, sizeof(p), "%s/model.safetensors.index.json", d);
	write_in(d, "a.safetensors", "{" T1("t1", 0, 2) "}", 2);
	write_text(d, "model.safetensors.index.json",
		   "{\"weight_map\":{\"t1\":\"a.safetensors\"}} garbage{{{");
	CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), RL_E_BAD_INDEX);
	CHECK(strstr(msg, "model.safetensors.index.json") && strstr(msg, "byte 38"));
	write_text(d, "model.safetensors.index.json",
		   "{\"weight_map\":{\"t1\":\"a.safetensors\"}}{}");
	CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), RL_E_BAD_INDEX);
	CHECK(strstr(msg, "byte 37"));
	/* A parse error gives its byte too. */
	write_text(d, "model.safetensors.index.json", "{\"weight_map\":{\"t1\" \"a\"}}");
	CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), RL_E_BAD_INDEX);
	CHECKF(strstr(msg, "invalid JSON: expected") && strstr(msg, "at byte 20"), "%s", msg);
	/* A NUL byte after the value is not whitespace either. */
	write_bytes(d, "model.safetensors.index.json", "{\"weight_map\":{}}\n\0", 19);
	CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), RL_E_BAD_INDEX);
	CHECK(strstr(msg, "byte 18"));
	/* Whitespace (space, tab, CR, LF) is fine. */
	write_text(d, "model.safetensors.index.json",
		   " \t{\"weight_map\":{\"t1\":\"a.safetensors\"}} \r\n\t\n");
	CHECK_EQ(open_ck(p, &ck, msg, sizeof(msg)), 0);
	CHECK_EQ(rl_ckpt_num_tensors(ck), 1);
	rl_ckpt_destroy(ck);
}

static long index_cjson_blocks;

static void *index_cjson_malloc(size_t n)
{
	index_cjson_blocks++;
	return malloc(n);
}

/* Text the strict walk refuses and cJSON takes (a control byte as
 * whitespace, 1e999) fails with the walk's message, and cJSON builds no
 * tree of it: the bounds hold only for text the walk accepted. */
static void index_strict_refusal_builds_no_tree(void)
{
	static const char *const bad[][2] = {
		{ "{\x01\"weight_map\":{\"t1\":\"a.safetensors\"}}", "at byte 1" },
		{ "{\"metadata\":{\"n\":1e999},\"weight_map\":{\"t1\":\"a.safetensors\"}}",
		  "number out of range" },
	};
	const char *d = mkdir_t("idxstrict");
	char p[4096], msg[RL_ERRMSG_MAX];
	cJSON_Hooks h = { index_cjson_malloc, free };

	snprintf(p, sizeof(p), "%s/model.safetensors.index.json", d);
	write_in(d, "a.safetensors", "{" T1("t1", 0, 2) "}", 2);
	for (size_t i = 0; i < RL_ARRAY_SIZE(bad); i++) {
		write_text(d, "model.safetensors.index.json", bad[i][0]);
		index_cjson_blocks = 0;
		cJSON_InitHooks(&h);
		CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), RL_E_BAD_INDEX);
		cJSON_InitHooks(NULL);
		CHECKF(strstr(msg, "invalid JSON") && strstr(msg, bad[i][1]), "%s", msg);
		CHECKF(index_cjson_blocks == 0, "case %zu: cJSON allocated %ld blocks", i,
		       index_cjson_blocks);
	}
}

/* cJSON strings end at a NUL: "a\u0000x" must not become "a". */
static void index_embedded_nul(void)
{
	const char *d = mkdir_t("idxnul");
	char p[4096], msg[RL_ERRMSG_MAX];
	rl_ckpt *ck = NULL;

	snprintf(p, sizeof(p), "%s/model.safetensors.index.json", d);
	write_in(d, "a.safetensors", "{" T1("t1", 0, 2) "}", 2);
	write_text(d, "model.safetensors.index.json",
		   "{\"weight_map\":{\"t1\":\"a.safetensors\\u0000x\"}}");
	CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), RL_E_BAD_INDEX);
	CHECK(strstr(msg, "'t1'") && strstr(msg, "NUL"));
	write_text(d, "model.safetensors.index.json",
		   "{\"weight_map\":{\"t1\\u0000zz\":\"a.safetensors\"}}");
	CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), RL_E_BAD_INDEX);
	CHECK(strstr(msg, "NUL") && strstr(msg, "t1"));
	/* cJSON lets raw control characters (a raw NUL too) into strings. */
	write_bytes(d, "model.safetensors.index.json",
		    "{\"weight_map\":{\"t1\":\"a.safetensors\0x\"}}", 39);
	CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), RL_E_BAD_INDEX);
	CHECK(strstr(msg, "control character 0x00") && strstr(msg, "byte 34"));
	/* Other escapes in names and values decode as usual. */
	write_text(d, "model.safetensors.index.json",
		   "{\"weight_map\":{\"\\u0074\\u0031\":\"a.safe\\u0074ensors\"},"
		   "\"metadata\":{\"x\":\"\\u0000\"}}");
	CHECK_EQ(open_ck(p, &ck, msg, sizeof(msg)), 0);
	CHECK_EQ(rl_ckpt_find(ck, "t1"), 0);
	rl_ckpt_destroy(ck);
}

/* Shards live next to the index: no absolute path, no ".." component. */
static void index_file_names(void)
{
	static const char *const bad[] = { "/etc/passwd", "../idxpath/a.safetensors", "..",
					   "sub/../a.safetensors", "sub/..", "./../a.safetensors" };
	const char *d = mkdir_t("idxpath");
	char p[4096], text[512], msg[RL_ERRMSG_MAX];
	rl_ckpt *ck = NULL;
	rl_tensor_info t;

	snprintf(p, sizeof(p), "%s/model.safetensors.index.json", d);
	mkdir_t("idxpath/sub");
	write_in(d, "a.safetensors", "{" T1("t1", 0, 2) "}", 2);
	write_in(d, "sub/b.safetensors", "{" T1("t2", 0, 2) "}", 2);
	for (size_t i = 0; i < RL_ARRAY_SIZE(bad); i++) {
		snprintf(text, sizeof(text), "{\"weight_map\":{\"t1\":\"a.safetensors\","
			 "\"t9\":\"%s\"}}", bad[i]);
		write_text(d, "model.safetensors.index.json", text);
		CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), RL_E_BAD_INDEX);
		CHECK(strstr(msg, "'t9'") && strstr(msg, bad[i]));
		CHECK(!strstr(msg, "header"));
	}
	/* A relative subdirectory, "." components and names with dots are fine. */
	write_text(d, "model.safetensors.index.json",
		   "{\"weight_map\":{\"t1\":\"./a.safetensors\",\"t2\":\"sub/b.safetensors\"}}");
	CHECK_EQ(open_ck(p, &ck, msg, sizeof(msg)), 0);
	CHECK_EQ(rl_ckpt_num_files(ck), 2);
	rl_ckpt_tensor(ck, (size_t)rl_ckpt_find(ck, "t2"), &t);
	CHECK(strstr(rl_ckpt_file_path(ck, t.file), "idxpath/sub/b.safetensors"));
	rl_ckpt_destroy(ck);
	write_in(d, "..a.safetensors", "{" T1("t1", 0, 2) "}", 2);
	write_text(d, "model.safetensors.index.json", "{\"weight_map\":{\"t1\":\"..a.safetensors\"}}");
	CHECK_EQ(open_ck(p, &ck, msg, sizeof(msg)), 0);
	rl_ckpt_destroy(ck);
}

static int open_in_child(void *path, char *msg, size_t cap)
{
	return open_ck(path, NULL, msg, cap);
}

/* Opens path in a child given at most secs seconds (-ETIMEDOUT if not). */
static int open_ck_within(const char *path, int secs, char *msg, size_t cap)
{
	return th_within(secs, open_in_child, (void *)path, msg, cap);
}

/*
 * Regression: a NUL byte in an index's metadata made the NUL check spin
 * forever (the value skipper matched the NUL with strchr's terminator and
 * never advanced). The four reported indexes, and a NUL between tokens,
 * which strict JSON refuses (as the header parser does), all end at once.
 */
static void index_nul_bytes_refused_at_once(void)
{
#define NUL_CASE(s) { s, sizeof(s) - 1 }
	static const struct { const char *text; size_t len; } cases[] = {
		NUL_CASE("{\"metadata\": {\"x\": \0 1}, \"weight_map\": {}}"),
		NUL_CASE("{\"metadata\": [\0 1], \"weight_map\": {}}"),
		NUL_CASE("{\"weight_map\": {\"a\": [\0]}}"),
		NUL_CASE("{\"metadata\": {\"x\": [[[\0]]]}, \"weight_map\": {}}"),
		NUL_CASE("{\"a\": 1 \0, \"weight_map\": {}}"),
		NUL_CASE("{\0\"weight_map\": {}}"),
		NUL_CASE("{\"weight_map\": {\"t1\":\0\"a.safetensors\"}}"),
		NUL_CASE("{\"weight_map\"\0: {}}"),
		NUL_CASE("{\"metadata\": {\"x\": \"\\u0000\"}, \"y\": \1 2, \"weight_map\": {}}"),
	};
#undef NUL_CASE
	const char *d = mkdir_t("idxnulbytes");
	char p[4096], msg[RL_ERRMSG_MAX];

	snprintf(p, sizeof(p), "%s/model.safetensors.index.json", d);
	for (size_t i = 0; i < RL_ARRAY_SIZE(cases); i++) {
		write_bytes(d, "model.safetensors.index.json", cases[i].text, cases[i].len);
		CHECKF(open_ck_within(p, 5, msg, sizeof(msg)) == RL_E_BAD_INDEX,
		       "case %zu: %s", i, msg);
		CHECKF(strstr(msg, "model.safetensors.index.json") && strstr(msg, "byte"),
		       "case %zu: %s", i, msg);
		/* The directory resolves to the same index. */
		CHECKF(open_ck_within(d, 5, NULL, 0) == RL_E_BAD_INDEX, "case %zu", i);
	}
	/* Deep nesting that cJSON accepts is accepted by the strict walk too. */
	{
		char text[4096];
		int n = 0;

		n += snprintf(text + n, sizeof(text) - n, "{\"metadata\":");
		for (int k = 0; k < 500; k++)
			text[n++] = '[';
		for (int k = 0; k < 500; k++)
			text[n++] = ']';
		snprintf(text + n, sizeof(text) - n, ",\"weight_map\":{}}");
		write_text(d, "model.safetensors.index.json", text);
		CHECK_EQ(open_ck_within(p, 5, msg, sizeof(msg)), 0);
	}
}

/*
 * A directory resolves as transformers does: model.safetensors if present,
 * else model.safetensors.index.json, and only when neither exists every
 * *.safetensors (regression: an index beside consolidated.safetensors, as
 * in real HF repos, was ignored and the tensors came out duplicated).
 */
static void directory_resolves_like_transformers(void)
{
	const char *d = mkdir_t("resolve");
	char msg[RL_ERRMSG_MAX];
	rl_ckpt *ck = NULL;
	rl_tensor_info t;

	write_in(d, "model-00001-of-00002.safetensors", "{" T1("a", 0, 2) "}", 2);
	write_in(d, "model-00002-of-00002.safetensors", "{" T1("b", 0, 2) "}", 2);
	write_in(d, "consolidated.safetensors", "{" T1("a", 0, 2) "," T1("b", 2, 4) "}", 4);
	/* Neither: every *.safetensors, so a and b twice. */
	CHECK_EQ(open_ck(d, NULL, msg, sizeof(msg)), RL_E_DUPLICATE_TENSOR);
	write_text(d, "model.safetensors.index.json",
		   "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
		   "\"b\":\"model-00002-of-00002.safetensors\"}}");
	CHECK_EQ(open_ck(d, &ck, msg, sizeof(msg)), 0);
	CHECK_EQ(rl_ckpt_num_files(ck), 2);
	CHECK_EQ(rl_ckpt_num_tensors(ck), 2);
	CHECK_EQ(rl_ckpt_tensor(ck, (size_t)rl_ckpt_find(ck, "b"), &t), 0);
	CHECK(strstr(rl_ckpt_file_path(ck, t.file), "model-00002-of-00002.safetensors"));
	rl_ckpt_destroy(ck);
	/* model.safetensors wins over the index; a directory of that name does not. */
	mkdir_t("resolve/model.safetensors");
	CHECK_EQ(open_ck(d, &ck, msg, sizeof(msg)), 0);
	CHECK_EQ(rl_ckpt_num_files(ck), 2);
	rl_ckpt_destroy(ck);
	CHECK_EQ(rmdir(tpath("resolve/model.safetensors")), 0);
	write_in(d, "model.safetensors", "{" T1("only", 0, 2) "}", 2);
	CHECK_EQ(open_ck(d, &ck, msg, sizeof(msg)), 0);
	CHECK_EQ(rl_ckpt_num_files(ck), 1);
	CHECK_EQ(rl_ckpt_find(ck, "only"), 0);
	rl_ckpt_destroy(ck);
}

/* A text file is not a safetensors file: said so, not as a 19-digit length. */
static void text_file_is_not_safetensors(void)
{
	const char *d = mkdir_t("text");
	char p[4096], msg[RL_ERRMSG_MAX];

	write_text(d, "notes.safetensors", "This is a text file, not a checkpoint.\n");
	snprintf(p, sizeof(p), "%s/notes.safetensors", d);
	CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), RL_E_HEADER_TOO_LARGE);
	CHECKF(strstr(msg, "notes.safetensors: not a safetensors file"), "%s", msg);
	{
		size_t digits = 0, longest = 0;

		for (const char *c = msg; *c; c++) {
			digits = *c >= '0' && *c <= '9' ? digits + 1 : 0;
			longest = RL_MAX(longest, digits);
		}
		CHECKF(longest < 10, "a long number in: %s", msg);
	}
}

/* Files and tensors of a checkpoint: at the limit fine, one more refused. */
static void count_limits(void)
{
	const char *d = mkdir_t("limits");
	char msg[RL_ERRMSG_MAX];

	write_in(d, "a.safetensors", "{" T1("a", 0, 2) "," T1("b", 2, 4) "}", 4);
	write_in(d, "b.safetensors", "{" T1("c", 0, 2) "}", 2);
	pl_limit_set_for_tests(PL_LIMIT_FILES, 2);
	CHECK_EQ(open_ck(d, NULL, msg, sizeof(msg)), 0);
	pl_limit_set_for_tests(PL_LIMIT_FILES, 1);
	CHECK_EQ(open_ck(d, NULL, msg, sizeof(msg)), RL_E_TOO_LARGE);
	pl_limit_set_for_tests(PL_LIMIT_FILES, 0);
	CHECKF(strstr(msg, "2 files (at most 1)"), "%s", msg);
	pl_limit_set_for_tests(PL_LIMIT_TENSORS, 3);
	CHECK_EQ(open_ck(d, NULL, msg, sizeof(msg)), 0);
	pl_limit_set_for_tests(PL_LIMIT_TENSORS, 2);
	CHECK_EQ(open_ck(d, NULL, msg, sizeof(msg)), RL_E_TOO_LARGE);
	pl_limit_set_for_tests(PL_LIMIT_TENSORS, 0);
	CHECKF(strstr(msg, "3 tensors (at most 2)"), "%s", msg);
	CHECK_EQ(pl_limit(PL_LIMIT_FILES), PL_MAX_FILES);
	CHECK_EQ(pl_limit(PL_LIMIT_TENSORS), PL_MAX_TENSORS);
}

/*
 * An index is walked for its bounds before cJSON builds a tree: at most
 * 65,536 JSON values outside weight_map's file names (a metadata list of
 * 65,536 values is read, of 65,537 refused), weight_map at most the tensor
 * limit.
 */
static void index_bounds(void)
{
	const char *d = mkdir_t("idxbounds");
	size_t cap = 2 * 65537 + 128, len;
	char p[4096], msg[RL_ERRMSG_MAX], *text = malloc(cap);
	rl_ckpt *ck = NULL;

	CHECK(text);
	snprintf(p, sizeof(p), "%s/model.safetensors.index.json", d);
	write_in(d, "a.safetensors", "{" T1("a", 0, 2) "," T1("b", 2, 4) "}", 4);
	for (unsigned n = 65536; n <= 65537; n++) {
		/* the list itself is one value */
		len = (size_t)snprintf(text, cap, "{\"metadata\":[");
		for (unsigned i = 0; i + 1 < n; i++)
			len += (size_t)snprintf(text + len, cap - len, "%s0", i ? "," : "");
		snprintf(text + len, cap - len, "],\"weight_map\":{\"a\":\"a.safetensors\"}}");
		write_text(d, "model.safetensors.index.json", text);
		if (n == 65536) {
			CHECKF(open_ck(p, &ck, msg, sizeof(msg)) == 0, "%s", msg);
			rl_ckpt_destroy(ck);
			continue;
		}
		CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), RL_E_TOO_LARGE);
		CHECKF(strstr(msg, "model.safetensors.index.json: more than 65536 JSON values, "
			      "the limit"), "%s", msg);
	}
	write_text(d, "model.safetensors.index.json",
		   "{\"weight_map\":{\"a\":\"a.safetensors\",\"b\":\"a.safetensors\"}}");
	pl_limit_set_for_tests(PL_LIMIT_TENSORS, 2);
	CHECKF(open_ck(p, &ck, msg, sizeof(msg)) == 0, "%s", msg);
	rl_ckpt_destroy(ck);
	pl_limit_set_for_tests(PL_LIMIT_TENSORS, 1);
	CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), RL_E_TOO_LARGE);
	pl_limit_set_for_tests(PL_LIMIT_TENSORS, 0);
	CHECKF(strstr(msg, "index.json: weight_map of more than 1 tensors, the limit"), "%s", msg);
	free(text);
}

/* An index of 256 MiB is read (sparse: holes after a small object, refused
 * as text after the value); one byte more is refused by its size. */
static void index_size_limit(void)
{
	const char *d = mkdir_t("idxsize");
	char p[4096], msg[RL_ERRMSG_MAX];

	snprintf(p, sizeof(p), "%s/model.safetensors.index.json", d);
	write_text(d, "model.safetensors.index.json", "{\"weight_map\":{}}");
	CHECK_EQ(truncate(p, 256 << 20), 0);
	CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), RL_E_BAD_INDEX);
	CHECKF(strstr(msg, "unexpected data after the JSON value at byte 17"), "%s", msg);
	CHECK_EQ(truncate(p, (256 << 20) + 1), 0);
	CHECK_EQ(open_ck(p, NULL, msg, sizeof(msg)), RL_E_BAD_INDEX);
	CHECKF(strstr(msg, "268435457 bytes is larger than 268435456"), "%s", msg);
	unlink(p);
}

static int copy_truncated(const char *src, const char *dst, size_t cut)
{
	size_t n;
	char *b = th_slurp(src, &n);
	FILE *f;
	int ok;

	if (!b || n < cut)
		return -1;
	f = fopen(dst, "wb");
	ok = f && fwrite(b, 1, n - cut, f) == n - cut;
	if (f)
		fclose(f);
	free(b);
	return ok ? 0 : -1;
}

static void truncated_files(void)
{
	const char *d = mkdir_t("trunc");
	char src[4096], dst[4096], msg[RL_ERRMSG_MAX];
	static const char *const names[3] = { "model-00001-of-00003.safetensors",
		"model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors" };
	static const size_t cuts[] = { 1, 8, 4096 };
	const char *sample = sample_dir();

	CHECKF(sample, "build/mkckpt failed");
	for (size_t c = 0; c < RL_ARRAY_SIZE(cuts); c++) {
		for (int i = 0; i < 3; i++) {
			snprintf(src, sizeof(src), "%s/%s", sample, names[i]);
			snprintf(dst, sizeof(dst), "%s/%s", d, names[i]);
			CHECK_EQ(copy_truncated(src, dst, i == 1 ? cuts[c] : 0), 0);
		}
		snprintf(src, sizeof(src), "%s/model.safetensors.index.json", sample);
		snprintf(dst, sizeof(dst), "%s/model.safetensors.index.json", d);
		CHECK_EQ(copy_truncated(src, dst, 0), 0);
		CHECK_EQ(open_ck(dst, NULL, msg, sizeof(msg)), RL_E_TRUNCATED);
		CHECK(strstr(msg, "truncated") && strstr(msg, names[1]));
		CHECK_EQ(open_ck(d, NULL, msg, sizeof(msg)), RL_E_TRUNCATED);
	}
}

static void handle_contract(void)
{
	rl_ckpt *ck = rl_ckpt_create();
	char p[4096];

	CHECK(ck);
	CHECK_STR(rl_ckpt_errmsg(ck), "");
	CHECK_EQ(rl_ckpt_num_tensors(ck), 0);
	CHECK(rl_ckpt_file_path(ck, 0) == NULL);
	CHECK_EQ(rl_ckpt_open(ck, NULL), -EINVAL);
	/* A failed open leaves the handle as it was: it may be opened again. */
	CHECK_EQ(rl_ckpt_open(ck, tpath("no-such.safetensors")), -ENOENT);
	CHECK(strstr(rl_ckpt_errmsg(ck), "no-such.safetensors"));
	CHECK_EQ(rl_ckpt_num_tensors(ck), 0);
	snprintf(p, sizeof(p), "%s", tpath("bad.safetensors"));
	write_st(p, "{\"w\":1}", 0);
	CHECK(rl_ckpt_open(ck, p) < 0);
	snprintf(p, sizeof(p), "%s", tpath("ok.safetensors"));
	write_st(p, "{" T1("w", 0, 2) "}", 2);
	CHECK_EQ(rl_ckpt_open(ck, p), 0);
	CHECK_STR(rl_ckpt_errmsg(ck), "");
	CHECK_EQ(rl_ckpt_open(ck, p), RL_E_STATE);
	CHECK(strlen(rl_ckpt_errmsg(ck)) > 0);
	CHECK_EQ(rl_ckpt_num_tensors(ck), 1);
	CHECK_EQ(rl_ckpt_file_size(ck, 0), 8 + strlen("{" T1("w", 0, 2) "}") + 2);
	CHECK_EQ(rl_ckpt_tensor(ck, 1, &(rl_tensor_info){ 0 }), -EINVAL);
	rl_ckpt_destroy(ck);
	rl_ckpt_destroy(NULL);
	CHECK_STR(rl_ckpt_errmsg(NULL), "");
}

/* Every allocation failing in turn: a clean -ENOMEM, nothing leaked. */
static void allocation_failures(void)
{
	static const char *const paths[] = { "model.safetensors.index.json", "",
					     "model-00002-of-00003.safetensors" };
	const char *sample = sample_dir();
	char p[4096];

	CHECKF(sample, "build/mkckpt failed");
	for (size_t k = 0; k < RL_ARRAY_SIZE(paths); k++) {
		int r = -ENOMEM, n;

		snprintf(p, sizeof(p), "%s/%s", sample, paths[k]);
		for (n = 0; n < 100000 && r == -ENOMEM; n++) {
			long live = rl_alloc_live();
			rl_ckpt *ck = NULL;

			rl_alloc_fail_after(n);
			r = open_ck(p, &ck, NULL, 0);
			rl_alloc_fail_after(-1);
			rl_ckpt_destroy(ck);
			CHECKF(rl_alloc_live() == live, "%s: leak after failing allocation %d",
			       paths[k], n);
			CHECKF(r == 0 || r == -ENOMEM, "%s: allocation %d: code %d", paths[k], n, r);
		}
		CHECK_EQ(r, 0);
		CHECK(n > 10);
	}
}

/* ------------------------------------------------------------------ */
/* ringload inspect                                                    */
/* ------------------------------------------------------------------ */

/* Runs build/ringload with args; captures stdout and stderr into files. */
static int run_cli(const char *const *args, char **out, char **err)
{
	const char *b = getenv("RL_BUILD");
	char bin[4096], *o = tpath("cli.out"), *e = tpath("cli.err");
	const char *argv[16];
	int st, n = 0;
	pid_t pid;

	snprintf(bin, sizeof(bin), "%s/ringload", b ? b : "build");
	argv[n++] = bin;
	while (*args && n < 15)
		argv[n++] = *args++;
	argv[n] = NULL;
	pid = fork();
	if (pid == 0) {
		if (!freopen(o, "w", stdout) || !freopen(e, "w", stderr))
			_exit(127);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	*out = th_slurp(o, NULL);
	*err = th_slurp(e, NULL);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; s && *s; s++)
		n += *s == '\n';
	return n;
}

/* ringload inspect on a generated sharded sample: the table, --json, odd
 * names, an invalid file (one line naming it), usage errors. */
static void cli_inspect(void)
{
	char path[4096], bad[4096], total[32];
	const char *sample = sample_dir();
	char *out = NULL, *err = NULL;
	rl_ckpt *ck = NULL;
	uint64_t bytes = 0;
	cJSON *j, *ts, *t;
	size_t n;
	int rc;

	CHECKF(sample, "build/mkckpt failed");
	snprintf(path, sizeof(path), "%s", sample);
	CHECK_EQ(open_ck(path, &ck, NULL, 0), 0);
	n = rl_ckpt_num_tensors(ck);
	for (size_t i = 0; i < n; i++) {
		rl_tensor_info ti;

		rl_ckpt_tensor(ck, i, &ti);
		bytes += ti.nbytes;
	}
	rl_ckpt_destroy(ck);
	snprintf(total, sizeof(total), " %llu bytes", (unsigned long long)bytes);
	rc = run_cli((const char *[]){ "inspect", path, NULL }, &out, &err);
	CHECK_EQ(rc, 0);
	CHECK(strstr(out, "model.layers.1.self_attn.v_proj.weight") && strstr(out, "BF16"));
	CHECKF(strstr(out, total), "%s not in %s", total, out);
	/* The table shows base names, --json the full paths (docs/cli.md, inspect). */
	CHECK(strstr(out, " model-00001-of-00003.safetensors ") && !strstr(out, "sample3/model-"));
	free(out);
	free(err);

	rc = run_cli((const char *[]){ "inspect", "--json", path, NULL }, &out, &err);
	CHECK_EQ(rc, 0);
	j = cJSON_Parse(out);
	free(out);
	free(err);
	CHECK(j);
	ts = cJSON_GetObjectItem(j, "tensors");
	CHECK(cJSON_GetArraySize(ts) == (int)n);
	CHECK(cJSON_IsString(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "format")));
	t = cJSON_GetArrayItem(ts, 0);
	CHECK(cJSON_IsString(cJSON_GetObjectItem(t, "name")) &&
	      cJSON_IsString(cJSON_GetObjectItem(t, "dtype")) &&
	      cJSON_IsArray(cJSON_GetObjectItem(t, "shape")) &&
	      cJSON_IsString(cJSON_GetObjectItem(t, "file")) &&
	      cJSON_IsNumber(cJSON_GetObjectItem(t, "offset")) &&
	      cJSON_IsNumber(cJSON_GetObjectItem(t, "nbytes")));
	CHECK(t && cJSON_IsString(cJSON_GetObjectItem(t, "file")) &&
	      !strncmp(cJSON_GetObjectItem(t, "file")->valuestring, path, strlen(path)) &&
	      !strncmp(cJSON_GetObjectItem(t, "file")->valuestring + strlen(path), "/model-", 7));
	cJSON_Delete(j);

	/* Odd names survive the JSON output. */
	snprintf(path, sizeof(path), "%s", tpath("odd.safetensors"));
	write_st(path, "{\"q\\\"\\\\\\u0001/\\u00e9\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}", 1);
	rc = run_cli((const char *[]){ "inspect", path, "--json", NULL }, &out, &err);
	CHECK_EQ(rc, 0);
	j = cJSON_Parse(out);
	free(out);
	free(err);
	CHECK(j);
	t = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "tensors"), 0);
	rc = t && !strcmp(cJSON_GetObjectItem(t, "name")->valuestring, "q\"\\\001/\xc3\xa9") &&
	     cJSON_GetArraySize(cJSON_GetObjectItem(t, "shape")) == 0;
	cJSON_Delete(j);
	CHECK(rc);

	/* Invalid: exit 1, one stderr line naming the file. */
	snprintf(bad, sizeof(bad), "%s", tpath("offsets_gap.safetensors"));
	write_st(bad, "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
		 "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[6,10]}}", 10);
	rc = run_cli((const char *[]){ "inspect", bad, NULL }, &out, &err);
	CHECK_EQ(rc, 1);
	CHECK_EQ(count_lines(err), 1);
	CHECK(strstr(err, "offsets_gap.safetensors") && strstr(err, "'b'"));
	CHECK(out && !*out);
	free(out);
	free(err);
	rc = run_cli((const char *[]){ "inspect", tpath("nothing-here"), NULL }, &out, &err);
	CHECK_EQ(rc, 1);
	CHECK_EQ(count_lines(err), 1);
	free(out);
	free(err);

	/* Usage errors: exit 2. */
	rc = run_cli((const char *[]){ "inspect", NULL }, &out, &err);
	CHECK_EQ(rc, 2);
	free(out);
	free(err);
	rc = run_cli((const char *[]){ "inspect", path, "--bogus", NULL }, &out, &err);
	CHECK_EQ(rc, 2);
	free(out);
	free(err);
	rc = run_cli((const char *[]){ "inspect", path, path, NULL }, &out, &err);
	CHECK_EQ(rc, 2);
	free(out);
	free(err);
}

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* tools/mkckpt: a sharded sample the reader accepts, with the documented bytes. */
static void mkckpt_sample(void)
{
	const char *b = getenv("RL_BUILD");
	char cmd[8192], idx[4096];
	rl_ckpt *ck = NULL;
	size_t n;

	snprintf(cmd, sizeof(cmd), "%s/mkckpt %s --size 3M --files 3 --layers 2 --seed 5 >/dev/null",
		 b ? b : "build", tpath("mk"));
	CHECK_EQ(system(cmd), 0);
	snprintf(idx, sizeof(idx), "%s/model.safetensors.index.json", tpath("mk"));
	CHECK_EQ(open_ck(idx, &ck, NULL, 0), 0);
	n = rl_ckpt_num_tensors(ck);
	CHECK_EQ(n, 1 + 2 * 9 + 2);
	CHECK_EQ(rl_ckpt_num_files(ck), 3);
	for (size_t i = 0; i < n; i++) {
		rl_tensor_info t;
		unsigned char w[8];
		uint64_t x = 0, k;
		int fd;

		rl_ckpt_tensor(ck, i, &t);
		CHECK(t.dtype == RL_DTYPE_BF16 && t.offset % 8 == 0);
		k = t.file;
		fd = open(rl_ckpt_file_path(ck, t.file), O_RDONLY);
		CHECK(fd >= 0);
		CHECK(pread(fd, w, 8, (off_t)t.offset) == 8);
		close(fd);
		for (int j = 7; j >= 0; j--)
			x = x << 8 | w[j];
		if (x != splitmix64(5 + (k << 40) + t.offset / 8)) {
			rl_ckpt_destroy(ck);
			CHECKF(0, "%s: first word differs", t.name);
		}
	}
	CHECK(rl_ckpt_find(ck, "model.layers.1.mlp.down_proj.weight") >= 0);
	rl_ckpt_destroy(ck);
}

/* Exit status of build/mkckpt ARGS, its output thrown away. */
static int mkckpt_rc(const char *args)
{
	const char *b = getenv("RL_BUILD");
	char cmd[8192];
	int st;

	snprintf(cmd, sizeof(cmd), "%s/mkckpt %s >/dev/null 2>&1", b ? b : "build", args);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* mkckpt: bad numbers refused; usage errors exit 2, runtime failures 1. */
static void mkckpt_arguments(void)
{
	static const char *const bad[] = {
		"--seed -5", "--seed abc", "--seed 5x", "--seed ''", "--seed 18446744073709551616",
		"--seed ' 5'", "--layers -1", "--layers -4294967295", "--layers 2x", "--layers 0",
		"--layers 1001", "--files -3", "--files 1.5", "--files 100000", "--size nan",
		"--size -1M", "--size 0", "--size 3Q", "--size ' 3M'", "--size 0x3M",
		"--size 4K --layers 1000", "--bogus 1", "--size",
	};
	char args[8192], dir[4096];

	snprintf(dir, sizeof(dir), "%s", mkdir_t("mkargs"));
	for (size_t i = 0; i < RL_ARRAY_SIZE(bad); i++) {
		int rc;

		snprintf(args, sizeof(args), "%s/x.safetensors --size 1M %s", dir, bad[i]);
		rc = mkckpt_rc(args);
		CHECKF(rc == 2, "mkckpt ... %s: exit %d, not 2", bad[i], rc);
	}
	CHECK_EQ(mkckpt_rc(""), 2);
	CHECK_EQ(mkckpt_rc("a b --size 1M"), 2);
	CHECK_EQ(mkckpt_rc("--help"), 0);
	/* Runtime failure: a directory that cannot be created. */
	snprintf(args, sizeof(args), "%s/no/such/dir --size 1M --files 2", dir);
	CHECK_EQ(mkckpt_rc(args), 1);
	snprintf(args, sizeof(args), "/proc/nope.safetensors --size 1M");
	CHECK_EQ(mkckpt_rc(args), 1);
	/* Good numbers still work: hex seeds, the largest seed, size suffixes. */
	snprintf(args, sizeof(args), "%s/ok.safetensors --size 1.5MiB --layers 1 --files 1 "
		 "--seed 0xff", dir);
	CHECK_EQ(mkckpt_rc(args), 0);
	snprintf(args, sizeof(args), "%s/ok.safetensors --size 1M --seed 18446744073709551615",
		 dir);
	CHECK_EQ(mkckpt_rc(args), 0);
}

int main(void)
{
	RUN(dtype_table);
	RUN(reference_files);
	RUN(tiny_moe_index);
	RUN(tiny_moe_directory);
	RUN(headers_expected);
	RUN(header_length_limit);
	RUN(shape_overflow_order);
	RUN(deep_nesting);
	RUN(names_and_strings);
	RUN(exact_integers);
	RUN(serde_forms);
	RUN(rank_limits);
	RUN(header_parse_metadata_only);
	RUN(many_tensors);
	RUN(empty_checkpoints);
	RUN(special_files);
	RUN(duplicates_across_files);
	RUN(metadata_merge);
	RUN(index_cases);
	RUN(index_trailing);
	RUN(index_strict_refusal_builds_no_tree);
	RUN(index_embedded_nul);
	RUN(index_file_names);
	RUN(index_nul_bytes_refused_at_once);
	RUN(directory_resolves_like_transformers);
	RUN(text_file_is_not_safetensors);
	RUN(count_limits);
	RUN(index_size_limit);
	RUN(index_bounds);
	RUN(truncated_files);
	RUN(handle_contract);
	RUN(allocation_failures);
	RUN(cli_inspect);
	RUN(mkckpt_sample);
	RUN(mkckpt_arguments);
	return th_done();
}
