/*
 * pl_fake.h - planner tests: checkpoints built in memory (no files), and a
 * checker that executes a plan against synthetic file bytes and compares
 * every shard with an element-by-element reference.
 */
#ifndef TESTS_PL_FAKE_H
#define TESTS_PL_FAKE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../planner/pl_private.h"

#define FK_MAX_T 256
#define FK_MAX_F 4

struct fake {
	struct pl_ckpt ck;
	struct pl_file files[FK_MAX_F];
	struct pl_tensor t[FK_MAX_T];
	uint64_t shapes[FK_MAX_T][RL_MAX_DIMS];
	char names[FK_MAX_T][32];
	char paths[FK_MAX_F][32];
	uint32_t by_name[FK_MAX_T];
	uint64_t end[FK_MAX_F];
	struct pl_align align[FK_MAX_F];
};

static inline void fk_init(struct fake *f, unsigned nfiles, uint64_t data_start)
{
	memset(f, 0, sizeof(*f));
	f->ck.files = f->files;
	f->ck.nfiles = nfiles;
	f->ck.tensors = f->t;
	f->ck.by_name = f->by_name;
	for (unsigned i = 0; i < nfiles; i++) {
		snprintf(f->paths[i], sizeof(f->paths[i]), "fake%u.safetensors", i);
		f->files[i].path = f->paths[i];
		f->files[i].data_start = data_start;
		f->files[i].size = data_start;
		f->end[i] = data_start;
		f->align[i] = (struct pl_align){ 1, 1 };
	}
}

static int fk_name_cmp(const void *a, const void *b, void *arg)
{
	const struct fake *f = arg;

	return strcmp(f->t[*(const uint32_t *)a].name, f->t[*(const uint32_t *)b].name);
}

/* Appends a tensor to file (tensors must be added in file order). */
static inline size_t fk_add(struct fake *f, unsigned file, const char *name, int dtype,
			    unsigned ndim, const uint64_t *shape)
{
	size_t i = f->ck.ntensors++;
	struct pl_tensor *t = &f->t[i];
	uint64_t n = pl_dtype_bits(dtype);

	snprintf(f->names[i], sizeof(f->names[i]), "%s", name);
	t->name = f->names[i];
	t->shape = ndim ? f->shapes[i] : NULL;
	for (unsigned d = 0; d < ndim; d++) {
		f->shapes[i][d] = shape[d];
		n *= shape[d];
	}
	t->ndim = (uint8_t)ndim;
	t->dtype = (uint8_t)dtype;
	t->file = file;
	t->offset = f->end[file];
	t->nbytes = n / 8;
	f->end[file] += t->nbytes;
	f->files[file].size = f->end[file];
	for (size_t k = 0; k < f->ck.ntensors; k++)
		f->by_name[k] = (uint32_t)k;
	qsort_r(f->by_name, f->ck.ntensors, sizeof(uint32_t), fk_name_cmp, f);
	return i;
}

/* The synthetic content of byte off of file. */
static inline uint8_t fk_byte(unsigned file, uint64_t off)
{
	uint64_t x = (off + 1) * 0x9E3779B97F4A7C15ull + file * 0xD1B54A32D192ED03ull;

	return (uint8_t)(x >> 56);
}

/* A spec parsed from JSON, or NULL (the error printed). */
static inline struct pl_spec *fk_spec(const char *json)
{
	struct pl_spec *s = pl_spec_new();
	struct cm_err e;

	cm_err_clear(&e);
	if (s && pl_spec_parse(s, json, strlen(json), &e)) {
		fprintf(stderr, "spec: %s\n", e.msg);
		pl_spec_free(s);
		return NULL;
	}
	return s;
}

#endif /* TESTS_PL_FAKE_H */
