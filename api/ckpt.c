/* ckpt.c - rl_ckpt_* and rl_dtype_* of ringload.h, over planner/checkpoint.c. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "ckpt_internal.h"
#include "../sink/convert.h"

const char *rl_dtype_name(rl_dtype dt)
{
	return pl_dtype_name((int)dt);
}

unsigned rl_dtype_bits(rl_dtype dt)
{
	return pl_dtype_bits((int)dt);
}

int rl_dtype_from_name(const char *name)
{
	return name ? pl_dtype_lookup(name, strlen(name)) : -1;
}

int rl_dtype_convert(rl_dtype from, rl_dtype to, void *dst, const void *src, size_t n)
{
	if (!sk_convert_ok((int)from, (int)to))
		return RL_E_DTYPE;
	if (n && (!dst || !src))
		return -EINVAL;
	sk_convert((int)from, (int)to, dst, src, n);
	return 0;
}

rl_ckpt *rl_ckpt_create(void)
{
	return cm_calloc(1, sizeof(struct rl_ckpt));
}

/* A handle that may be opened: 0, -EINVAL or RL_E_STATE (recorded). */
static int open_allowed(rl_ckpt *ck)
{
	if (!ck)
		return -EINVAL;
	cm_err_clear(&ck->err);
	if (ck->opened)
		return cm_err_set(&ck->err, RL_E_STATE, "checkpoint handle already opened");
	return 0;
}

int rl_ckpt_open(rl_ckpt *ck, const char *path)
{
	int r;

	if (!ck)
		return -EINVAL;
	if (!path)
		return cm_err_set(&ck->err, -EINVAL, "checkpoint path is NULL");
	if ((r = open_allowed(ck)))
		return r;
	r = pl_ckpt_open(path, &ck->pl, &ck->err);
	if (r < 0) {
		/* Nothing changed: the handle may be opened again, elsewhere. */
		if (!ck->err.msg[0])
			cm_err_set(&ck->err, r, "%s: %s", path, rl_strerror(r));
		return r;
	}
	ck->opened = 1;
	return 0;
}

int rl_ckpt_open_headers(rl_ckpt *ck, size_t nfiles, const rl_file_header *files)
{
	struct pl_file_header *fh;
	int r;

	if ((r = open_allowed(ck)))
		return r;
	if (nfiles && !files)
		return cm_err_set(&ck->err, -EINVAL, "files is NULL");
	if (!(fh = cm_calloc(nfiles + 1, sizeof(*fh))))
		return cm_err_set(&ck->err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < nfiles; i++) {
		if (!files[i].path || (files[i].header_len && !files[i].header)) {
			cm_free(fh);
			return cm_err_set(&ck->err, RL_E_INVALID_ARG, "file %zu: NULL path or header",
					  i);
		}
		fh[i] = (struct pl_file_header){ files[i].path, files[i].size, files[i].header,
						 files[i].header_len };
	}
	r = pl_ckpt_from_headers(fh, nfiles, &ck->pl, &ck->err);
	cm_free(fh);
	if (r < 0)
		return r;
	ck->opened = 1;
	return 0;
}

const char *rl_ckpt_errmsg(const rl_ckpt *ck)
{
	return ck ? ck->err.msg : "";
}

void rl_ckpt_destroy(rl_ckpt *ck)
{
	if (!ck)
		return;
	pl_ckpt_free(ck->pl);
	cm_free(ck);
}

size_t rl_ckpt_num_files(const rl_ckpt *ck)
{
	return ck && ck->pl ? ck->pl->nfiles : 0;
}

const char *rl_ckpt_file_path(const rl_ckpt *ck, size_t file)
{
	if (!ck || !ck->pl || file >= ck->pl->nfiles)
		return NULL;
	return ck->pl->files[file].path;
}

uint64_t rl_ckpt_file_size(const rl_ckpt *ck, size_t file)
{
	if (!ck || !ck->pl || file >= ck->pl->nfiles)
		return 0;
	return ck->pl->files[file].size;
}

size_t rl_ckpt_num_tensors(const rl_ckpt *ck)
{
	return ck && ck->pl ? ck->pl->ntensors : 0;
}

int rl_ckpt_tensor(const rl_ckpt *ck, size_t i, rl_tensor_info *out)
{
	const struct pl_tensor *t;

	if (!ck || !ck->pl || !out || i >= ck->pl->ntensors)
		return -EINVAL;
	t = &ck->pl->tensors[i];
	out->name = t->name;
	out->dtype = (rl_dtype)t->dtype;
	out->ndim = t->ndim;
	out->shape = t->shape;
	out->file = t->file;
	out->offset = t->offset;
	out->nbytes = t->nbytes;
	return 0;
}

/* Each entry as rl_ckpt_tensor() fills it, size bytes apart: a caller's
 * one call for a checkpoint of many tensors instead of one per tensor. */
long rl_ckpt_tensors(const rl_ckpt *ck, size_t first, size_t n,
		     rl_tensor_info *out, size_t size)
{
	rl_tensor_info ti;
	size_t count, k;

	if (!ck || !ck->pl || (n && !out) || size < sizeof(ti) ||
	    first > ck->pl->ntensors)
		return -EINVAL;
	count = ck->pl->ntensors - first < n ? ck->pl->ntensors - first : n;
	if (count && size > SIZE_MAX / count)
		return -EINVAL;
	for (k = 0; k < count; k++) {
		rl_ckpt_tensor(ck, first + k, &ti);
		memcpy((char *)out + k * size, &ti, sizeof(ti));
	}
	return (long)count;
}

long rl_ckpt_find(const rl_ckpt *ck, const char *name)
{
	long i;

	if (!ck || !name)
		return -EINVAL;
	if (!ck->pl)
		return RL_E_MISSING_TENSOR;   /* not open: holds no tensor */
	i = pl_ckpt_find(ck->pl, name);
	return i < 0 ? RL_E_MISSING_TENSOR : i;
}

size_t rl_ckpt_num_metadata(const rl_ckpt *ck)
{
	return ck && ck->pl ? ck->pl->nmeta : 0;
}

int rl_ckpt_metadata(const rl_ckpt *ck, size_t i, const char **key, const char **value)
{
	if (!ck || !ck->pl || i >= ck->pl->nmeta)
		return -EINVAL;
	if (key)
		*key = ck->pl->meta[i].key;
	if (value)
		*value = ck->pl->meta[i].value;
	return 0;
}

const char *rl_ckpt_metadata_get(const rl_ckpt *ck, const char *key)
{
	size_t lo = 0, hi;

	if (!ck || !ck->pl || !key)
		return NULL;
	hi = ck->pl->nmeta;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(key, ck->pl->meta[mid].key);

		if (!c)
			return ck->pl->meta[mid].value;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}
