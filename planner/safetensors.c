/*
 * safetensors.c - one safetensors header: a strict JSON reader shaped like
 * the reference's serde types, then the reference's validation.
 *
 * The reference (safetensors/src/tensor.rs, read_metadata) does, in order:
 *   1. serde_json::from_str into { "__metadata__": Option<HashMap<String,
 *      String>>, #[flatten] HashMap<String, TensorInfo> }: any JSON or type
 *      error is InvalidHeaderDeserialization (RL_E_HEADER_JSON);
 *   2. sorts the tensors by (start, end) and checks each in turn: offsets
 *      contiguous from 0 (InvalidOffset), element count and bit count
 *      without overflow (ValidationOverflow), whole bytes (MisalignedSlice),
 *      byte count == end - start (TensorInvalidInfo);
 *   3. checks that the data ends exactly at the end of the file
 *      (MetadataIncompleteBuffer: RL_E_INCOMPLETE when bytes are left over,
 *      RL_E_TRUNCATED when the file is shorter).
 * The checks on the 8-byte length and UTF-8 come before, in checkpoint.c
 * (length) and here (UTF-8).
 *
 * Why not cJSON: serde_json is stricter than cJSON in ways that decide
 * verdicts (integers above 2^53, "1.0", "1e0", leading zeros, raw control
 * characters, lone surrogates, recursion limit, trailing bytes), and the
 * serde derive accepts forms cJSON knows nothing about (a struct given as
 * an array, an enum given as {"F32": null}). A reader that mirrors the
 * serde types directly decides every case in one pass, takes integers
 * exactly from their text, and allocates only what it keeps. Its verdicts
 * are checked file by file against a serde stand-in (tests/oracle/run.sh).
 *
 * Where ringload deliberately differs: names and metadata containing U+0000
 * (valid JSON, but not representable as C strings) and tensors of rank
 * above 255 are refused after the reference's own checks pass.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "sjson.h"

struct st_ent {
	char *name;
	size_t name_len;
	uint64_t *shape;
	size_t rank, shape_cap;
	uint64_t start, end;
	uint64_t nelem;      /* checked fold of shape, as the reference does */
	int elem_overflow;
	int dtype;
	size_t seq;          /* document order, for last-wins on duplicates */
};

struct st_kv {
	char *key, *val;
	size_t key_len, val_len;
	size_t seq;
};

struct jp {
	struct sj s;
	struct st_ent *ents;
	size_t nents, ents_cap;
	struct st_kv *kvs;
	size_t nkvs, kvs_cap;
	int seen_meta;
};

/* Copies n bytes that may contain NULs (cm_strndup stops at one). */
static char *memdup0(const char *s, size_t n)
{
	char *p = cm_malloc(n + 1);

	if (p) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

static int oom(struct cm_err *e)
{
	return cm_err_set(e, -ENOMEM, "out of memory reading header");
}

/* ------------------------------------------------------------------ */
/* The serde types                                                     */
/* ------------------------------------------------------------------ */

/* Dtype: a variant name, or (serde enum as a map) {"NAME": null}. */
static int dtype_value(struct sj *j, struct st_ent *t)
{
	int r;

	sj_ws(j);
	if (j->p < j->end && *j->p == '"') {
		if ((r = sj_string(j)))
			return r;
		t->dtype = pl_dtype_lookup(j->sb, j->sb_len);
		if (t->dtype < 0) {
			char q[128];

			pl_quote(q, sizeof(q), j->sb, j->sb_len);
			return sj_jerr(j, "unknown dtype \"%s\"", q);
		}
		return 0;
	}
	if (j->p < j->end && *j->p == '{') {
		if ((r = sj_enter(j)))
			return r;
		sj_ws(j);
		if (j->p >= j->end || *j->p != '"')
			return sj_jerr(j, "dtype: expected a map with a single key");
		if ((r = sj_string(j)))
			return r;
		t->dtype = pl_dtype_lookup(j->sb, j->sb_len);
		if (t->dtype < 0)
			return sj_jerr(j, "unknown dtype");
		if ((r = sj_expect(j, ':', "':'")))
			return r;
		sj_ws(j);
		if ((r = sj_literal(j, "null")))
			return r;
		if ((r = sj_expect(j, '}', "'}' (dtype map with a single key)")))
			return r;
		j->depth--;
		return 0;
	}
	return sj_jerr(j, "dtype: expected a string");
}

static int shape_value(struct sj *j, struct st_ent *t)
{
	int r;

	sj_ws(j);
	if (j->p >= j->end || *j->p != '[')
		return sj_jerr(j, "shape: expected an array");
	if ((r = sj_enter(j)))
		return r;
	t->nelem = 1;
	if (sj_empty(j, ']'))
		return 0;
	for (;;) {
		uint64_t d;

		if ((r = sj_u64_value(j, &d, "shape")))
			return r;
		if (cm_grow((void **)&t->shape, &t->shape_cap, t->rank + 1, sizeof(*t->shape)))
			return oom(j->e);
		t->shape[t->rank++] = d;
		/* try_fold(1, checked_mul): the first overflow sticks. */
		if (!t->elem_overflow && cm_mul64(t->nelem, d, &t->nelem))
			t->elem_overflow = 1;
		if ((r = sj_next(j, ']', "',' or ']' in shape")) <= 0)
			return r;
	}
}

/* data_offsets: a tuple (usize, usize), i.e. an array of exactly two. */
static int offsets_value(struct sj *j, struct st_ent *t)
{
	int r;

	sj_ws(j);
	if (j->p >= j->end || *j->p != '[')
		return sj_jerr(j, "data_offsets: expected an array of 2 integers");
	if ((r = sj_enter(j)))
		return r;
	sj_ws(j);
	if (j->p < j->end && *j->p == ']')
		return sj_jerr(j, "data_offsets: expected 2 integers, got 0");
	if ((r = sj_u64_value(j, &t->start, "data_offsets")))
		return r;
	sj_ws(j);
	if (j->p < j->end && *j->p == ']')
		return sj_jerr(j, "data_offsets: expected 2 integers, got 1");
	if ((r = sj_expect(j, ',', "',' in data_offsets")) ||
	    (r = sj_u64_value(j, &t->end, "data_offsets")))
		return r;
	sj_ws(j);
	if (j->p < j->end && *j->p == ',')
		return sj_jerr(j, "data_offsets: expected 2 integers, got more");
	if ((r = sj_expect(j, ']', "']' after data_offsets")))
		return r;
	j->depth--;
	return 0;
}

static const char *const tensor_fields[3] = { "dtype", "shape", "data_offsets" };

/* The fields of a TensorInfo object seen so far. */
struct fields {
	struct st_ent *t;
	int have[3];
};

/* One member of a TensorInfo object: a known field once, others skipped. */
static int tensor_field(struct sj *j, void *arg)
{
	struct fields *fs = arg;
	int f = -1, r;

	for (int i = 0; i < 3; i++)
		if (j->sb_len == strlen(tensor_fields[i]) && !memcmp(j->sb, tensor_fields[i], j->sb_len))
			f = i;
	if (f >= 0 && fs->have[f])
		return sj_jerr(j, "duplicate field `%s`", tensor_fields[f]);
	if (f == 0)
		r = dtype_value(j, fs->t);
	else if (f == 1)
		r = shape_value(j, fs->t);
	else if (f == 2)
		r = offsets_value(j, fs->t);
	else
		r = sj_skip_value(j);
	if (!r && f >= 0)
		fs->have[f] = 1;
	return r;
}

/*
 * TensorInfo { dtype, shape, data_offsets }: an object (unknown fields
 * ignored, a repeated field is an error) or, as serde derive also allows,
 * an array of exactly those three values in order.
 */
static int tensor_value(struct sj *j, struct st_ent *t)
{
	struct fields f = { t, { 0, 0, 0 } };
	int r;

	sj_ws(j);
	if (j->p < j->end && *j->p == '[') {
		if ((r = sj_enter(j)))
			return r;
		sj_ws(j);
		if (j->p < j->end && *j->p == ']')
			return sj_jerr(j, "tensor info: expected 3 elements, got 0");
		if ((r = dtype_value(j, t)))
			return r;
		sj_ws(j);
		if (j->p < j->end && *j->p == ']')
			return sj_jerr(j, "tensor info: expected 3 elements, got 1");
		if ((r = sj_expect(j, ',', "','")) || (r = shape_value(j, t)))
			return r;
		sj_ws(j);
		if (j->p < j->end && *j->p == ']')
			return sj_jerr(j, "tensor info: expected 3 elements, got 2");
		if ((r = sj_expect(j, ',', "','")) || (r = offsets_value(j, t)))
			return r;
		sj_ws(j);
		if (j->p < j->end && *j->p == ',')
			return sj_jerr(j, "tensor info: expected 3 elements, got more");
		if ((r = sj_expect(j, ']', "']'")))
			return r;
		j->depth--;
		return 0;
	}
	if (j->p >= j->end || *j->p != '{')
		return sj_jerr(j, "tensor info must be an object");
	if ((r = sj_object(j, tensor_field, &f)))
		return r;
	for (int i = 0; i < 3; i++)
		if (!f.have[i])
			return sj_jerr(j, "missing field `%s`", tensor_fields[i]);
	return 0;
}

/* One __metadata__ entry: a string value, kept with its key. */
static int meta_member(struct sj *j, void *arg)
{
	struct jp *P = arg;
	struct st_kv *kv;
	int r;

	if (cm_grow((void **)&P->kvs, &P->kvs_cap, P->nkvs + 1, sizeof(*P->kvs)))
		return oom(j->e);
	kv = &P->kvs[P->nkvs];
	memset(kv, 0, sizeof(*kv));
	kv->key = memdup0(j->sb, j->sb_len);
	if (!kv->key)
		return oom(j->e);
	kv->key_len = j->sb_len;
	kv->seq = P->nkvs++;
	sj_ws(j);
	if (j->p >= j->end || *j->p != '"')
		return sj_jerr(j, "__metadata__ values must be strings");
	if ((r = sj_string(j)))
		return r;
	kv->val = memdup0(j->sb, j->sb_len);
	if (!kv->val)
		return oom(j->e);
	kv->val_len = j->sb_len;
	return 0;
}

/* __metadata__: null, or an object whose values are all strings. */
static int metadata_value(struct jp *P)
{
	struct sj *j = &P->s;

	if (P->seen_meta)
		return sj_jerr(j, "duplicate field `__metadata__`");
	P->seen_meta = 1;
	sj_ws(j);
	if (j->p < j->end && *j->p == 'n')
		return sj_literal(j, "null");
	if (j->p >= j->end || *j->p != '{')
		return sj_jerr(j, "__metadata__ must be an object of strings or null");
	return sj_object(j, meta_member, P);
}

/* One member of the header: __metadata__ or a tensor. */
static int header_member(struct sj *j, void *arg)
{
	struct jp *P = arg;
	struct st_ent *t;

	if (j->sb_len == 12 && !memcmp(j->sb, "__metadata__", 12))
		return metadata_value(P);
	if (cm_grow((void **)&P->ents, &P->ents_cap, P->nents + 1, sizeof(*P->ents)))
		return oom(j->e);
	t = &P->ents[P->nents];
	memset(t, 0, sizeof(*t));
	t->name = memdup0(j->sb, j->sb_len);
	if (!t->name)
		return oom(j->e);
	t->name_len = j->sb_len;
	t->seq = P->nents++;
	return tensor_value(j, t);
}

static int document(struct jp *P)
{
	struct sj *j = &P->s;
	int r;

	sj_ws(j);
	if (j->p >= j->end)
		return sj_jerr(j, "empty header");
	if (*j->p != '{')
		return sj_jerr(j, "header must be a JSON object");
	if ((r = sj_object(j, header_member, P)))
		return r;
	sj_ws(j);
	if (j->p < j->end)
		return sj_jerr(j, "trailing characters after the JSON object");
	return 0;
}

/* ------------------------------------------------------------------ */
/* Validation                                                          */
/* ------------------------------------------------------------------ */

static int cmp_name_seq(const void *a, const void *b)
{
	const struct st_ent *x = *(const struct st_ent *const *)a;
	const struct st_ent *y = *(const struct st_ent *const *)b;
	int c = memcmp(x->name, y->name, CM_MIN(x->name_len, y->name_len));

	if (c)
		return c;
	if (x->name_len != y->name_len)
		return x->name_len < y->name_len ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The reference sorts by (start, end); equal pairs by name, deterministically. */
static int cmp_offsets(const void *a, const void *b)
{
	const struct st_ent *x = *(const struct st_ent *const *)a;
	const struct st_ent *y = *(const struct st_ent *const *)b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return cmp_name_seq(a, b);
}

static int cmp_kv(const void *a, const void *b)
{
	const struct st_kv *x = a, *y = b;
	int c = memcmp(x->key, y->key, CM_MIN(x->key_len, y->key_len));

	if (c)
		return c;
	if (x->key_len != y->key_len)
		return x->key_len < y->key_len ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void ent_free(struct st_ent *t)
{
	cm_free(t->name);
	cm_free(t->shape);
	t->name = NULL;
	t->shape = NULL;
}

/*
 * Sorts the entries through an array of pointers: they are ~100 bytes, and
 * moving pointers then each entry once beats qsort moving entries around.
 */
static int sort_ents(struct jp *j, int (*cmp)(const void *, const void *))
{
	const struct st_ent **ord;
	struct st_ent *sorted;

	if (j->nents < 2)
		return 0;
	ord = cm_mallocarray(j->nents, sizeof(*ord));
	sorted = cm_mallocarray(j->nents, sizeof(*sorted));
	if (!ord || !sorted) {
		cm_free(ord);
		cm_free(sorted);
		return -ENOMEM;
	}
	for (size_t i = 0; i < j->nents; i++)
		ord[i] = &j->ents[i];
	qsort(ord, j->nents, sizeof(*ord), cmp);
	for (size_t i = 0; i < j->nents; i++)
		sorted[i] = *ord[i];
	cm_free(ord);
	cm_free(j->ents);
	j->ents = sorted;
	j->ents_cap = j->nents;
	return 0;
}

/* HashMap semantics: of entries with one name, the last one stays. */
static int dedupe(struct jp *j)
{
	size_t o = 0;

	if (sort_ents(j, cmp_name_seq))
		return oom(j->s.e);
	for (size_t i = 0; i < j->nents; i++) {
		if (i + 1 < j->nents && j->ents[i].name_len == j->ents[i + 1].name_len &&
		    !memcmp(j->ents[i].name, j->ents[i + 1].name, j->ents[i].name_len)) {
			ent_free(&j->ents[i]);
			continue;
		}
		j->ents[o++] = j->ents[i];
	}
	j->nents = o;

	o = 0;
	if (j->nkvs)
		qsort(j->kvs, j->nkvs, sizeof(*j->kvs), cmp_kv);
	for (size_t i = 0; i < j->nkvs; i++) {
		if (i + 1 < j->nkvs && j->kvs[i].key_len == j->kvs[i + 1].key_len &&
		    !memcmp(j->kvs[i].key, j->kvs[i + 1].key, j->kvs[i].key_len)) {
			cm_free(j->kvs[i].key);
			cm_free(j->kvs[i].val);
			continue;
		}
		j->kvs[o++] = j->kvs[i];
	}
	j->nkvs = o;
	return 0;
}

/* The printable name of t, for a message (only on the way out). */
static const char *qname(char *q, const struct st_ent *t)
{
	pl_quote(q, 128, t->name, t->name_len);
	return q;
}

static int validate(struct jp *j, size_t hlen, uint64_t file_size, struct cm_err *e)
{
	uint64_t start = 0, total;
	char q[128];

	int r;

	if ((r = sort_ents(j, cmp_offsets)))
		return oom(e);
	for (size_t i = 0; i < j->nents; i++) {
		struct st_ent *t = &j->ents[i];
		unsigned bits = pl_dtype_bits(t->dtype);
		uint64_t nbits;

		if (t->start != start || t->end < t->start)
			return cm_err_set(e, RL_E_INVALID_OFFSET,
					  "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
					  "] do not start at %" PRIu64
					  " (offsets must be contiguous from 0)",
					  qname(q, t), t->start, t->end, start);
		start = t->end;
		if (t->elem_overflow)
			return cm_err_set(e, RL_E_OVERFLOW,
					  "tensor '%s': element count overflows 64 bits", qname(q, t));
		if (cm_mul64(t->nelem, bits, &nbits))
			return cm_err_set(e, RL_E_OVERFLOW,
					  "tensor '%s': bit count overflows 64 bits", qname(q, t));
		if (nbits % 8)
			return cm_err_set(e, RL_E_MISALIGNED,
					  "tensor '%s': %" PRIu64 " elements of %s (%u bits) "
					  "do not fill whole bytes",
					  qname(q, t), t->nelem, pl_dtype_name(t->dtype), bits);
		if (t->end - t->start != nbits / 8)
			return cm_err_set(e, RL_E_SIZE_MISMATCH,
					  "tensor '%s': data_offsets span %" PRIu64
					  " bytes, shape and %s need %" PRIu64,
					  qname(q, t), t->end - t->start, pl_dtype_name(t->dtype),
					  nbits / 8);
	}
	if (cm_add64(start, 8 + (uint64_t)hlen, &total) || total > file_size)
		return cm_err_set(e, RL_E_TRUNCATED,
				  "file truncated: header declares %" PRIu64
				  " data bytes after %zu header bytes, file has %" PRIu64
				  " bytes in all",
				  start, hlen + 8, file_size);
	if (total < file_size)
		return cm_err_set(e, RL_E_INCOMPLETE,
				  "%" PRIu64 " bytes after the last tensor's data "
				  "(data ends at %" PRIu64 ", file has %" PRIu64 ")",
				  file_size - total, total, file_size);

	/* ringload's own limits, once the reference would accept the file. */
	for (size_t i = 0; i < j->nents; i++) {
		struct st_ent *t = &j->ents[i];

		if (memchr(t->name, '\0', t->name_len))
			return cm_err_set(e, RL_E_HEADER_JSON,
					  "tensor '%s': name contains U+0000, which ringload "
					  "cannot represent", qname(q, t));
		if (t->rank > UINT8_MAX)
			return cm_err_set(e, RL_E_TOO_LARGE,
					  "tensor '%s': rank %zu above ringload's limit of 255",
					  qname(q, t), t->rank);
	}
	for (size_t i = 0; i < j->nkvs; i++) {
		if (memchr(j->kvs[i].key, '\0', j->kvs[i].key_len) ||
		    memchr(j->kvs[i].val, '\0', j->kvs[i].val_len)) {
			pl_quote(q, sizeof(q), j->kvs[i].key, j->kvs[i].key_len);
			return cm_err_set(e, RL_E_HEADER_JSON,
					  "__metadata__ '%s' contains U+0000, which ringload "
					  "cannot represent", q);
		}
	}
	return 0;
}

static void jp_free(struct jp *j)
{
	for (size_t i = 0; i < j->nents; i++)
		ent_free(&j->ents[i]);
	for (size_t i = 0; i < j->nkvs; i++) {
		cm_free(j->kvs[i].key);
		cm_free(j->kvs[i].val);
	}
	cm_free(j->ents);
	cm_free(j->kvs);
	cm_free(j->s.sb);
}

void pl_header_free(struct pl_header *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->ntensors; i++) {
		cm_free(h->tensors[i].name);
		cm_free(h->tensors[i].shape);
	}
	for (size_t i = 0; i < h->nmeta; i++) {
		cm_free(h->meta[i].key);
		cm_free(h->meta[i].value);
	}
	cm_free(h->tensors);
	cm_free(h->meta);
	memset(h, 0, sizeof(*h));
}

int pl_header_parse(const char *buf, size_t hlen, uint64_t file_size,
		    uint32_t file, struct pl_header *out, struct cm_err *e)
{
	struct jp j = { .s = { .buf = buf, .p = buf, .end = buf + hlen, .e = e } };
	size_t bad;
	int r;

	memset(out, 0, sizeof(*out));
	bad = sj_utf8_check((const unsigned char *)buf, hlen);
	if (bad != hlen)
		return cm_err_set(e, RL_E_HEADER_UTF8,
				  "header is not valid UTF-8 (byte %zu of the header)", bad);
	if ((r = document(&j)))
		goto out;
	if ((r = dedupe(&j)))
		goto out;
	if ((r = validate(&j, hlen, file_size, e)))
		goto out;

	out->tensors = cm_calloc(j.nents ? j.nents : 1, sizeof(*out->tensors));
	out->meta = cm_calloc(j.nkvs ? j.nkvs : 1, sizeof(*out->meta));
	if (!out->tensors || !out->meta) {
		r = oom(e);
		goto out;
	}
	for (size_t i = 0; i < j.nents; i++) {
		struct st_ent *t = &j.ents[i];
		struct pl_tensor *o = &out->tensors[i];

		o->name = t->name;
		o->shape = t->rank ? t->shape : NULL;
		if (!t->rank)
			cm_free(t->shape);
		o->ndim = (uint8_t)t->rank;
		o->dtype = (uint8_t)t->dtype;
		o->offset = 8 + (uint64_t)hlen + t->start;
		o->nbytes = t->end - t->start;
		o->file = file;
		t->name = NULL;
		t->shape = NULL;
	}
	out->ntensors = j.nents;
	for (size_t i = 0; i < j.nkvs; i++) {
		out->meta[i].key = j.kvs[i].key;
		out->meta[i].value = j.kvs[i].val;
		j.kvs[i].key = j.kvs[i].val = NULL;
	}
	out->nmeta = j.nkvs;
	j.nkvs = 0;
	r = 0;
out:
	jp_free(&j);
	if (r)
		pl_header_free(out);
	return r;
}
