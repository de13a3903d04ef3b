/*
 * digest.c - what the ranks must agree on about a checkpoint before they
 * plan: the files (names without their directory, which may differ from
 * node to node, and sizes) and everything their headers say (tensors:
 * name, dtype, shape, file, offset, length; metadata), as one SHA-256.
 */
#include <string.h>

#include "mx.h"

static void add(rl_sha256 *c, const void *p, size_t n)
{
	uint64_t len = n;

	rl_sha256_update(c, &len, sizeof(len));         /* length-prefixed: unambiguous */
	rl_sha256_update(c, p, n);
}

static void add_str(rl_sha256 *c, const char *s)
{
	add(c, s, strlen(s));
}

static void add_u64(rl_sha256 *c, uint64_t v)
{
	add(c, &v, sizeof(v));
}

static void add_tensor(rl_sha256 *c, const rl_tensor_info *t)
{
	add_str(c, t->name);
	add_u64(c, t->dtype);
	add(c, t->shape, t->ndim * sizeof(*t->shape));
	add_u64(c, t->file);
	add_u64(c, t->offset);
	add_u64(c, t->nbytes);
}

int mx_ckpt_digest(const rl_ckpt *ck, unsigned char out[32])
{
	rl_sha256 *c = rl_sha256_create();  /* the library's one SHA-256 */
	int ok;

	if (!c)
		return -1;
	add_u64(c, rl_ckpt_num_files(ck));
	for (size_t f = 0; f < rl_ckpt_num_files(ck); f++) {
		const char *p = rl_ckpt_file_path(ck, f), *b = strrchr(p, '/');

		add_str(c, b ? b + 1 : p);
		add_u64(c, rl_ckpt_file_size(ck, f));
	}
	add_u64(c, rl_ckpt_num_tensors(ck));
	for (size_t i = 0; i < rl_ckpt_num_tensors(ck); i++) {
		rl_tensor_info t;

		rl_ckpt_tensor(ck, i, &t);
		add_tensor(c, &t);
	}
	for (size_t i = 0; i < rl_ckpt_num_metadata(ck); i++) {
		const char *k, *v;

		rl_ckpt_metadata(ck, i, &k, &v);
		add_str(c, k);
		add_str(c, v);
	}
	ok = rl_sha256_final(c, out) == 0;
	rl_sha256_destroy(c);
	return ok ? 0 : -1;
}
