/*
 * fuzz_spec.c - the sharding spec parser on arbitrary bytes, and the
 * planner on whatever it accepts.
 *
 * An accepted spec must be consistent (mesh product = devices, distinct
 * device ids, rules resolved to known axes used once). Its plan for a
 * small in-memory checkpoint, when it builds, must have reads inside
 * their files and copies inside their reads and shards; a plan error must
 * be a ringload error with a message.
 */
#include <stdint.h>
#include <string.h>

#include "common.h"
#include "pl_fake.h"

const char *fuzz_target_name = "spec";

static void check_spec(const struct pl_spec *s)
{
	uint64_t n = 1;

	for (unsigned a = 0; a < s->ndim; a++)
		n *= s->shape[a];
	if (n != s->ndev || !s->nprocs)
		__builtin_trap();
	for (uint32_t i = 0; i < s->ndev; i++) {
		if (s->proc[i] >= s->nprocs)
			__builtin_trap();
		for (uint32_t j = i + 1; j < s->ndev && j < i + 64; j++)
			if (s->devices[i] == s->devices[j])
				__builtin_trap();
	}
	for (size_t r = 0; r < s->nrules; r++) {
		uint32_t used = 0;

		for (unsigned d = 0; d < s->rules[r].ndims; d++)
			for (unsigned k = 0; k < s->rules[r].dims[d].naxes; k++) {
				unsigned ax = s->rules[r].dims[d].axes[k];

				if (ax >= s->ndim || (used & (1u << ax)))
					__builtin_trap();
				used |= 1u << ax;
			}
	}
}

static void check_plan(const struct pl_plan *p, const struct pl_ckpt *ck)
{
	for (size_t q = 0; q < p->nreads; q++) {
		const struct cm_read *r = &p->reads[q];

		if (r->min_len > r->len || r->off + r->min_len > ck->files[r->file].size)
			__builtin_trap();
		for (uint32_t j = 0; j < r->ncopies; j++) {
			const struct cm_copy *c = &p->copies[r->first_copy + j];
			const struct pl_shard *sh = &p->shards[c->shard];

			if (c->src + (uint64_t)(c->count - 1) * c->src_stride + c->len > r->min_len ||
			    c->dst < sh->offset ||
			    c->dst + (uint64_t)c->count * c->len > sh->offset + sh->nbytes ||
			    sh->offset + sh->nbytes > p->staging[sh->dev])
				__builtin_trap();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pl_spec *s = pl_spec_new();
	struct cm_err e;
	static struct fake f;
	struct pl_opts o;
	struct pl_plan *p = NULL;
	int ret;

	if (!s)
		return 0;
	/* Meshes up to 65,536 devices (the library's limit lowered: larger
	 * ones cost seconds each and are refused by the same comparison). */
	pl_limit_set_for_tests(PL_LIMIT_DEVICES, 1u << 16);
	cm_err_clear(&e);
	ret = pl_spec_parse(s, (const char *)data, size, &e);
	if (ret) {
		if (ret >= 0 || !e.msg[0])
			__builtin_trap();
		pl_spec_free(s);
		return 0;
	}
	check_spec(s);
	if (s->ndev > 4096) {
		pl_spec_free(s);
		return 0;
	}
	fk_init(&f, 2, 24);
	fk_add(&f, 0, "a", RL_DTYPE_F32, 2, (uint64_t[]){ 17, 9 });
	fk_add(&f, 0, "b.weight", RL_DTYPE_BF16, 1, (uint64_t[]){ 33 });
	fk_add(&f, 0, "s", RL_DTYPE_F32, 0, NULL);
	fk_add(&f, 1, "c", RL_DTYPE_U8, 3, (uint64_t[]){ 3, 5, 7 });
	fk_add(&f, 1, "f4", RL_DTYPE_F4, 2, (uint64_t[]){ 4, 8 });
	f.align[1] = (struct pl_align){ 512, 512 };
	pl_opts_default(&o);
	o.chunk = 256;
	o.all_stats = s->nprocs <= 16;
	o.read_once = size % 2 && s->nprocs <= 16;
	ret = pl_plan_build(&f.ck, s, f.align, &o, &p, &e);
	if (ret) {
		if (ret >= 0 || !e.msg[0])
			__builtin_trap();
	} else {
		check_plan(p, &f.ck);
		pl_plan_free(p);
	}
	pl_spec_free(s);
	return 0;
}
