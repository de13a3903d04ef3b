/*
 * integrity.c - expected SHA-256 values and whole-file coverage for the
 * loader (integrity.h). The engine hashes what it reads; a whole-file
 * digest needs every byte of the file, so a file whose tensor bytes the
 * plan reads in full gets reads (without copies) for what the plan skips:
 * the header, and any gap. A plan that skips tensor bytes of a file reads
 * it only in part: its whole-file digest cannot be computed without
 * reading what the load does not need, which is exactly the cost this
 * check exists to avoid (docs/validation.md).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "integrity.h"

int ld_parse_sha256(const char *hex, uint8_t sha[32])
{
	static const char digits[] = "0123456789abcdef";

	if (!hex || strlen(hex) != 64)
		return -1;
	for (int i = 0; i < 64; i++) {
		const char *d = strchr(digits, hex[i] >= 'A' && hex[i] <= 'F' ?
				       hex[i] - 'A' + 'a' : hex[i]);

		if (!hex[i] || !d)
			return -1;
		if (i % 2 == 0)
			sha[i / 2] = (uint8_t)((d - digits) << 4);
		else
			sha[i / 2] |= (uint8_t)(d - digits);
	}
	return 0;
}

void ld_sha256_hex(const uint8_t sha[32], char out[65])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < 32; i++) {
		out[2 * i] = digits[sha[i] >> 4];
		out[2 * i + 1] = digits[sha[i] & 15];
	}
	out[64] = '\0';
}

/* ------------------------------------------------------------------ */
/* Expected values */

/* How name names path: 2 equal, 1 its end after a '/', 0 not at all. */
static int names(const char *path, const char *name)
{
	size_t lp = strlen(path), ln = strlen(name);

	if (lp == ln)
		return strcmp(path, name) == 0 ? 2 : 0;
	return lp > ln && path[lp - ln - 1] == '/' && strcmp(path + lp - ln, name) == 0;
}

/*
 * The Hugging Face cache: snapshots/<rev>/<file> is a symlink to
 * ../../blobs/<etag>, and the etag of a file stored with git LFS (every
 * safetensors file on the Hub) is the SHA-256 of its contents. A small
 * file kept in git proper has its git blob SHA-1 (40 hex digits) there
 * instead: no SHA-256 to compare, so nothing is expected of it.
 */
static int hf_expected(const char *path, uint8_t sha[32])
{
	char link[4096], *base;
	ssize_t n = readlink(path, link, sizeof(link) - 1);

	if (n <= 0)
		return 0;
	link[n] = '\0';
	base = strrchr(link, '/');
	if (!base || base - link < 5 || strncmp(base - 5, "blobs", 5) != 0 ||
	    (base - link > 5 && base[-6] != '/'))
		return 0;
	return ld_parse_sha256(base + 1, sha) == 0;
}

/*
 * The value given for path: its own path's, else the one of a name it ends
 * with (the last given for a name wins: a later call replaces). Two names
 * that both end it are ambiguous (a.safetensors and sub/a.safetensors for
 * sub/a.safetensors: which one the caller meant is not ours to guess), and
 * so is a name that ends two files of the run: RL_E_INVALID_ARG with e
 * set. Else 0, *out NULL when nothing was given for path.
 */
static int given_for(const struct ld_expect *exp, size_t nexp, const struct pl_exec *ex,
		     const char *path, const struct ld_expect **out, struct rl_err *e)
{
	const struct ld_expect *end = NULL;

	*out = NULL;
	for (size_t i = nexp; i-- > 0;) /* the last given for a name wins */
		if (names(path, exp[i].name) == 2) {
			*out = exp + i;
			return 0;
		}
	for (size_t i = nexp; i-- > 0;) {
		int how = names(path, exp[i].name);

		if (how == 1 && !end)
			end = exp + i;
		else if (how == 1 && strcmp(end->name, exp[i].name))
			return rl_err_set(e, RL_E_INVALID_ARG, "%s: expected SHA-256 given for "
					  "both '%s' and '%s': give its path", path, exp[i].name,
					  end->name);
	}
	for (size_t f = 0; end && f < ex->nfiles; f++)
		if (strcmp(ex->paths[f], path) && names(ex->paths[f], end->name))
			return rl_err_set(e, RL_E_INVALID_ARG, "expected SHA-256 for '%s': it "
					  "names both %s and %s: give the path", end->name, path,
					  ex->paths[f]);
	*out = end;
	return 0;
}

/* What is expected of file f: 2 given, 1 from the cache layout, 0 nothing;
 * RL_E_INVALID_ARG with e set when what was given is ambiguous. */
static int expected(const struct ld_expect *exp, size_t nexp, int hf, const struct pl_exec *ex,
		    size_t f, uint8_t sha[32], struct rl_err *e)
{
	const struct ld_expect *x = NULL;
	int r = given_for(exp, nexp, ex, ex->paths[f], &x, e);

	if (r < 0)
		return r;
	if (x) {
		memcpy(sha, x->sha, 32);
		return 2;
	}
	return hf && hf_expected(ex->paths[f], sha) ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* Coverage */

struct span {
	uint32_t file;
	uint64_t a, b;
};

static int by_file_off(const void *x, const void *y)
{
	const struct span *p = x, *q = y;

	if (p->file != q->file)
		return p->file < q->file ? -1 : 1;
	return p->a < q->a ? -1 : p->a > q->a;
}

static int read_order(const void *x, const void *y)
{
	const struct rl_read *p = x, *q = y;

	if (p->file != q->file)
		return p->file < q->file ? -1 : 1;
	return p->off < q->off ? -1 : p->off > q->off;
}

/* Appends copy-less reads of at most chunk bytes for [a, b) of file f. */
static int add_fillers(struct ld_hashrun *hr, size_t *cap, uint32_t f, uint64_t a, uint64_t b,
		       uint32_t chunk)
{
	while (a < b) {
		uint32_t n = (uint32_t)RL_MIN(b - a, chunk);

		if (hr->nreads == *cap) {
			struct rl_read *r = rl_reallocarray(hr->reads, *cap * 2 + 16,
							    sizeof(*r));

			if (!r)
				return -ENOMEM;
			hr->reads = r;
			*cap = *cap * 2 + 16;
		}
		memset(hr->reads + hr->nreads, 0, sizeof(*hr->reads));
		hr->reads[hr->nreads].off = a;
		hr->reads[hr->nreads].len = hr->reads[hr->nreads].min_len = n;
		hr->reads[hr->nreads++].file = f;
		hr->max_read = RL_MAX(hr->max_read, n);
		a += n;
	}
	return 0;
}

/* Sweeps file f's sorted spans sp[0..n): fillers for the gaps before the
 * data (the header); 1 when a gap lies in the data (read in part). */
static int sweep(struct ld_hashrun *hr, size_t *cap, const struct span *sp, size_t n,
		 uint32_t f, uint64_t size, uint64_t data_start, uint32_t chunk)
{
	uint64_t at = 0;

	for (size_t i = 0; i <= n && at < size; i++) {
		uint64_t a = i < n ? RL_MIN(sp[i].a, size) : size;

		if (a > at) {
			if (a > data_start)
				return 1;
			if (add_fillers(hr, cap, f, at, a, chunk) < 0)
				return -ENOMEM;
		}
		if (i < n)
			at = RL_MAX(at, sp[i].b);
	}
	return 0;
}

/* The spans the plan's reads bring of the files with an expected value. */
static struct span *collect(const struct pl_exec *ex, const uint8_t *cand, size_t *n)
{
	struct span *sp = rl_mallocarray(ex->nreads + 1, sizeof(*sp));

	*n = 0;
	if (!sp)
		return NULL;
	for (size_t i = 0; i < ex->nreads; i++) {
		const struct rl_read *r = ex->reads + i;

		if (r->file < ex->nfiles && cand[r->file]) {
			sp[*n].file = r->file;
			sp[*n].a = r->off;
			sp[(*n)++].b = r->off + r->min_len;
		}
	}
	qsort(sp, *n, sizeof(*sp), by_file_off);
	return sp;
}

/* ------------------------------------------------------------------ */
/* A run */

static int alloc_run(struct ld_hashrun *hr, size_t nfiles)
{
	size_t n = nfiles ? nfiles : 1;

	memset(hr, 0, sizeof(*hr));
	hr->hash = rl_calloc(n, 1);
	hr->want = rl_calloc(n, 32);
	hr->got = rl_calloc(n, 32);
	hr->state = rl_calloc(n, sizeof(*hr->state));
	if (!hr->hash || !hr->want || !hr->got || !hr->state)
		return -ENOMEM;
	hr->nfiles = nfiles; /* only now: readers index the arrays by it */
	return 0;
}

/* Decides file f from its spans: hashed (with fillers), or not checked. */
static int decide(struct ld_hashrun *hr, size_t *cap, const struct pl_exec *ex, uint32_t f,
		  const struct span *sp, size_t n, int given, uint32_t chunk, struct rl_err *e)
{
	int part = 1;

	if (ex->data_starts) {
		part = sweep(hr, cap, sp, n, f, ex->file_sizes[f], ex->data_starts[f], chunk);
		if (part < 0)
			return rl_err_set(e, -ENOMEM, "out of memory");
	}
	if (!part) {
		hr->hash[f] = 1;
		hr->state[f] = RL_SHA256_MATCHED; /* until ld_hash_check says otherwise */
		return 0;
	}
	hr->state[f] = RL_SHA256_PARTIAL;
	hr->unchecked++;
	if (given)
		return rl_err_set(e, RL_E_CHECKSUM,
				  "%s: whole-file SHA-256 cannot be checked: this load reads "
				  "only part of the file", ex->paths[f]);
	return 0;
}

/* The reads of the job: the plan's and the fillers, by (file, offset). */
static int merge_reads(struct ld_hashrun *hr, size_t *cap, const struct pl_exec *ex)
{
	size_t nfill = hr->nreads;
	struct rl_read *r = rl_reallocarray(hr->reads, nfill + ex->nreads + 1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	hr->reads = r;
	*cap = nfill + ex->nreads + 1;
	if (ex->nreads)
		memcpy(r + nfill, ex->reads, ex->nreads * sizeof(*r));
	hr->nreads = nfill + ex->nreads;
	qsort(r, hr->nreads, sizeof(*r), read_order);
	return 0;
}

int ld_hash_prepare(struct ld_hashrun *hr, const struct ld_expect *exp, size_t nexp, int hf,
		    const struct pl_exec *ex, struct eng_job *job, uint32_t chunk,
		    struct rl_err *e)
{
	uint8_t *given = NULL;
	struct span *sp = NULL;
	size_t nsp = 0, at = 0, cap = 0, nhash = 0;
	int ret = 0;

	job->file_ids = ex->file_ids;
	if (alloc_run(hr, ex->nfiles) < 0 || !(given = rl_calloc(ex->nfiles + 1, 1)))
		ret = rl_err_set(e, -ENOMEM, "out of memory");
	for (size_t f = 0; ret == 0 && f < ex->nfiles; f++) {
		int how = expected(exp, nexp, hf, ex, f, hr->want[f], e);

		if (how < 0) {
			ret = how;
			break;
		}
		given[f] = how == 2;
		hr->hash[f] = how != 0; /* candidates, until decided */
	}
	if (ret == 0 && !(sp = collect(ex, hr->hash, &nsp)))
		ret = rl_err_set(e, -ENOMEM, "out of memory");
	for (uint32_t f = 0; ret == 0 && f < ex->nfiles; f++) {
		size_t n = 0;

		while (at + n < nsp && sp[at + n].file == f)
			n++;
		if (hr->hash[f]) {
			hr->hash[f] = 0;
			ret = decide(hr, &cap, ex, f, sp + at, n, given[f], chunk, e);
			nhash += hr->hash[f];
		}
		at += n;
	}
	rl_free(sp);
	rl_free(given);
	if (ret < 0 || !nhash)
		return ret;
	if (merge_reads(hr, &cap, ex) < 0)
		return rl_err_set(e, -ENOMEM, "out of memory");
	job->reads = hr->reads;
	job->nreads = hr->nreads;
	job->total_bytes = 0;
	for (size_t i = 0; i < hr->nreads; i++)
		job->total_bytes += hr->reads[i].len;
	job->hash = hr->hash;
	job->digests = hr->got;
	return 0;
}

int ld_hash_streamed(struct ld_hashrun *hr, int hf, const struct pl_exec *ex)
{
	if (alloc_run(hr, ex->nfiles) < 0)
		return -ENOMEM;
	for (size_t f = 0; hf && f < ex->nfiles; f++)
		if (hf_expected(ex->paths[f], hr->want[f])) {
			hr->state[f] = RL_SHA256_STREAMED;
			hr->unchecked++;
		}
	return 0;
}

int ld_hash_check(struct ld_hashrun *hr, const struct pl_exec *ex, struct rl_err *e)
{
	char want[65], got[65];

	for (size_t f = 0; f < hr->nfiles; f++) {
		if (!hr->hash[f] || memcmp(hr->want[f], hr->got[f], 32) == 0)
			continue;
		hr->state[f] = RL_SHA256_MISMATCH;
		ld_sha256_hex(hr->want[f], want);
		ld_sha256_hex(hr->got[f], got);
		return rl_err_set(e, RL_E_CHECKSUM, "%s: SHA-256 mismatch: expected %s, got %s",
				  ex->paths[f], want, got);
	}
	return 0;
}

void ld_hashrun_free(struct ld_hashrun *hr)
{
	rl_free(hr->hash);
	rl_free(hr->want);
	rl_free(hr->got);
	rl_free(hr->state);
	rl_free(hr->reads);
	memset(hr, 0, sizeof(*hr));
}
