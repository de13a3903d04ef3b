/*
 * integrity.c - expected SHA-256 values for the loader (integrity.h):
 * given ones, and those the Hugging Face cache layout names; which files
 * a load hashes (those the plan reads whole: exec/cover.c decides, and
 * reads the rest of them), and the comparison after the load. A plan
 * that skips tensor bytes of a file reads it only in part: its whole-file
 * digest cannot be computed without reading what the load does not need,
 * which is exactly the cost this check exists to avoid
 * (docs/validation.md).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../exec/cover.h"
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
int rl_hf_blob_sha256(const char *path, uint8_t out[32])
{
	char link[4096], *base;
	ssize_t n;

	if (!path || !out)
		return -EINVAL;
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return 0;
	link[n] = '\0';
	base = strrchr(link, '/');
	if (!base || base - link < 5 || strncmp(base - 5, "blobs", 5) != 0 ||
	    (base - link > 5 && base[-6] != '/'))
		return 0;
	return ld_parse_sha256(base + 1, out) == 0;
}

/* 1 when name is the path of a file of the run: it names that file alone. */
static int run_path(const struct pl_exec *ex, const char *name)
{
	for (size_t f = 0; f < ex->nfiles; f++)
		if (!strcmp(ex->paths[f], name))
			return 1;
	return 0;
}

/*
 * The value given for path: its own path's, else the one of a name it ends
 * with (the last given for a name wins: a later call replaces) that is not
 * another file's path (ck/m.safetensors is that file's, not also
 * ck/sub/ck/m.safetensors'). Two names that both end it are ambiguous
 * (a.safetensors and sub/a.safetensors for sub/a.safetensors: which one the
 * caller meant is not ours to guess), and so is a name that ends two files
 * of the run: RL_E_INVALID_ARG with e set. Else 0, *out NULL when nothing
 * was given for path.
 */
static int given_for(const struct ld_expect *exp, size_t nexp, const struct pl_exec *ex,
		     const char *path, const struct ld_expect **out, struct cm_err *e)
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

		if (how == 1 && run_path(ex, exp[i].name))
			continue;
		if (how == 1 && !end)
			end = exp + i;
		else if (how == 1 && strcmp(end->name, exp[i].name))
			return cm_err_set(e, RL_E_INVALID_ARG, "%s: expected SHA-256 given for "
					  "both '%s' and '%s': give its path", path, exp[i].name,
					  end->name);
	}
	for (size_t f = 0; end && f < ex->nfiles; f++)
		if (strcmp(ex->paths[f], path) && names(ex->paths[f], end->name))
			return cm_err_set(e, RL_E_INVALID_ARG, "expected SHA-256 for '%s': it "
					  "names both %s and %s: give the path", end->name, path,
					  ex->paths[f]);
	*out = end;
	return 0;
}

int ld_hash_expected(const struct ld_expect *exp, size_t nexp, int hf, const struct pl_exec *ex,
		     const char *path, uint8_t sha[32], struct cm_err *e)
{
	const struct ld_expect *x = NULL;
	int r = given_for(exp, nexp, ex, path, &x, e);

	if (r < 0)
		return r;
	if (x) {
		memcpy(sha, x->sha, 32);
		return 2;
	}
	return hf && rl_hf_blob_sha256(path, sha) == 1 ? 1 : 0;
}

static int expected(const struct ld_expect *exp, size_t nexp, int hf, const struct pl_exec *ex,
		    size_t f, uint8_t sha[32], struct cm_err *e)
{
	return ld_hash_expected(exp, nexp, hf, ex, ex->paths[f], sha, e);
}

/* ------------------------------------------------------------------ */
/* A run */

static int alloc_run(struct ld_hashrun *hr, size_t nfiles)
{
	size_t n = nfiles ? nfiles : 1;

	memset(hr, 0, sizeof(*hr));
	hr->hash = cm_calloc(n, 1);
	hr->want = cm_calloc(n, 32);
	hr->got = cm_calloc(n, 32);
	hr->state = cm_calloc(n, sizeof(*hr->state));
	if (!hr->hash || !hr->want || !hr->got || !hr->state)
		return -ENOMEM;
	hr->nfiles = nfiles; /* only now: readers index the arrays by it */
	return 0;
}

/* Decides file f: hashed (whole: read whole by the plan), or not checked;
 * a given value that cannot be checked is an error naming the file. */
static int decide(struct ld_hashrun *hr, const struct pl_exec *ex, uint32_t f, int whole,
		  int given, struct cm_err *e)
{
	if (whole) {
		hr->hash[f] = 1;
		hr->state[f] = RL_SHA256_MATCHED; /* until ld_hash_check says otherwise */
		return 0;
	}
	hr->state[f] = RL_SHA256_PARTIAL;
	hr->unchecked++;
	if (given)
		return cm_err_set(e, RL_E_CHECKSUM,
				  "%s: whole-file SHA-256 cannot be checked: this load reads "
				  "only part of the file", ex->paths[f]);
	return 0;
}

int ld_hash_prepare(struct ld_hashrun *hr, const struct ld_expect *exp, size_t nexp, int hf,
		    const struct pl_exec *ex, struct cm_err *e)
{
	uint8_t *given = NULL, *whole = NULL;
	int ret = 0;

	if (alloc_run(hr, ex->nfiles) < 0 || !(given = cm_calloc(ex->nfiles + 1, 1)) ||
	    !(whole = cm_calloc(ex->nfiles + 1, 1)))
		ret = cm_err_set(e, -ENOMEM, "out of memory");
	for (size_t f = 0; ret == 0 && f < ex->nfiles; f++) {
		int how = expected(exp, nexp, hf, ex, f, hr->want[f], e);

		if (how < 0) {
			ret = how;
			break;
		}
		given[f] = how == 2;
		hr->hash[f] = how != 0; /* candidates, until decided */
	}
	if (ret == 0 && ex_cover_decide(ex, hr->hash, whole) < 0)
		ret = cm_err_set(e, -ENOMEM, "out of memory");
	for (uint32_t f = 0; ret == 0 && f < ex->nfiles; f++) {
		if (!hr->hash[f])
			continue;
		hr->hash[f] = 0;
		ret = decide(hr, ex, f, whole[f], given[f], e);
	}
	cm_free(given);
	cm_free(whole);
	return ret;
}

int ld_hash_check(struct ld_hashrun *hr, const struct pl_exec *ex, struct cm_err *e)
{
	char want[65], got[65];

	for (size_t f = 0; f < hr->nfiles; f++) {
		if (!hr->hash[f] || memcmp(hr->want[f], hr->got[f], 32) == 0)
			continue;
		hr->state[f] = RL_SHA256_MISMATCH;
		ld_sha256_hex(hr->want[f], want);
		ld_sha256_hex(hr->got[f], got);
		return cm_err_set(e, RL_E_CHECKSUM, "%s: SHA-256 mismatch: expected %s, got %s",
				  ex->paths[f], want, got);
	}
	return 0;
}

void ld_hashrun_free(struct ld_hashrun *hr)
{
	cm_free(hr->hash);
	cm_free(hr->want);
	cm_free(hr->got);
	cm_free(hr->state);
	memset(hr, 0, sizeof(*hr));
}
