/*
 * fuzz_plan.c - the planner on random spec + header pairs.
 *
 * The input is split at each line "--" into parts: the first is a sharding
 * spec, the next one or two are safetensors headers (JSON text) of files 0
 * and 1, whose data is as long as their largest data_offsets say. The
 * plan's options (process, gap, ratio, chunk, alignment, congruent
 * placement, read once) come from a hash of the input. Whatever the bytes:
 *   - a refused spec, header or plan is a negative code with a message;
 *   - an accepted plan, when small enough to execute here, is executed
 *     against synthetic file bytes and every shard compared element by
 *     element with the reference (tests/pl_check.c);
 *   - nothing takes long: meshes are limited to 65,536 devices and plans to
 *     4 MiB of estimated memory (the limits of the library, lowered so that
 *     thousands of inputs run a second; a larger mesh is refused by the
 *     same comparisons).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common.h"
#include "pl_check.h"

const char *fuzz_target_name = "plan";

#define MAX_FILES 2

struct input {
	const uint8_t *part[1 + MAX_FILES];
	size_t len[1 + MAX_FILES];
	unsigned nparts;
	uint64_t hash;
};

static void split(const uint8_t *data, size_t size, struct input *in)
{
	const uint8_t *p = data, *end = data + size;

	in->hash = 1469598103934665603ull;
	for (size_t i = 0; i < size; i++)
		in->hash = (in->hash ^ data[i]) * 1099511628211ull;
	in->nparts = 0;
	while (in->nparts < 1 + MAX_FILES) {
		const uint8_t *sep = memmem(p, (size_t)(end - p), "\n--\n", 4);

		in->part[in->nparts] = p;
		in->len[in->nparts++] = (size_t)((sep ? sep : end) - p);
		if (!sep)
			break;
		p = sep + 4;
	}
}

/* The data length a header text declares: its largest data_offsets end. */
static uint64_t data_length(const uint8_t *text, size_t len)
{
	cJSON *root = cJSON_ParseWithLength((const char *)text, len), *t;
	uint64_t end = 0;

	cJSON_ArrayForEach(t, root) {
		cJSON *off = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
		cJSON *b = cJSON_GetArrayItem(off, 1);

		if (cJSON_IsNumber(b) && b->valuedouble > (double)end && b->valuedouble < 1e12)
			end = (uint64_t)b->valuedouble;
	}
	cJSON_Delete(root);
	return end;
}

struct ckpt {
	struct pl_ckpt ck;
	struct pl_file files[MAX_FILES];
	struct pl_header h[MAX_FILES];
	char paths[MAX_FILES][16];
};

static int name_cmp(const void *a, const void *b, void *arg)
{
	const struct pl_tensor *t = arg;

	return strcmp(t[*(const uint32_t *)a].name, t[*(const uint32_t *)b].name);
}

/* The headers as one checkpoint (tensor arrays borrowed from h[]).
 * Returns 0, or -1 when a header is refused or a name repeats. */
static int make_ckpt(const struct input *in, struct ckpt *c)
{
	struct cm_err e;
	size_t n = 0;

	memset(c, 0, sizeof(*c));
	c->ck.files = c->files;
	for (unsigned f = 0; f + 1 < in->nparts; f++) {
		uint64_t hlen = in->len[f + 1], size = 8 + hlen + data_length(in->part[f + 1], hlen);

		if (hlen > PL_MAX_HEADER ||
		    pl_header_parse((const char *)in->part[f + 1], hlen, size, f, &c->h[f], &e))
			return -1;
		snprintf(c->paths[f], sizeof(c->paths[f]), "f%u", f);
		c->files[f] = (struct pl_file){ .path = c->paths[f], .size = size,
						.data_start = 8 + hlen };
		c->ck.nfiles = f + 1;
		n += c->h[f].ntensors;
	}
	c->ck.tensors = calloc(n + 1, sizeof(*c->ck.tensors));
	c->ck.by_name = calloc(n + 1, sizeof(*c->ck.by_name));
	for (unsigned f = 0; f < c->ck.nfiles; f++)
		for (size_t i = 0; i < c->h[f].ntensors; i++) {
			c->ck.by_name[c->ck.ntensors] = (uint32_t)c->ck.ntensors;
			c->ck.tensors[c->ck.ntensors++] = c->h[f].tensors[i];
		}
	qsort_r(c->ck.by_name, n, sizeof(uint32_t), name_cmp, c->ck.tensors);
	for (size_t i = 1; i < n; i++)
		if (!strcmp(c->ck.tensors[c->ck.by_name[i - 1]].name,
			    c->ck.tensors[c->ck.by_name[i]].name))
			return -1;
	return 0;
}

static void free_ckpt(struct ckpt *c)
{
	for (unsigned f = 0; f < MAX_FILES; f++)
		pl_header_free(&c->h[f]);
	free(c->ck.tensors);
	free(c->ck.by_name);
}

/* Takes a choice among n from the hash. */
static unsigned pick(uint64_t *h, unsigned n)
{
	unsigned v = (unsigned)(*h % n);

	*h /= n;
	return v;
}

/* Options and per-file alignment from the hash. */
static void options(const struct input *in, const struct pl_spec *s, struct pl_opts *o,
		    struct pl_align *al, uint64_t *chunk_max)
{
	static const uint64_t gaps[] = { 0, 1, 7, 4096 }, chunks[] = { 64, 256, 4096, 4 << 20 };
	static const uint32_t aligns[] = { 1, 512, 4096 };
	uint64_t h = in->hash;

	pl_opts_default(o);
	o->process = (int)pick(&h, s->nprocs);
	o->min_gap = gaps[pick(&h, 4)];
	o->ratio = pick(&h, 3) ? 0 : 1 + pick(&h, 7);
	o->chunk = chunks[pick(&h, 4)];
	o->congruent = (int)pick(&h, 2);
	o->read_once = pick(&h, 2) && s->nprocs > 1 && s->nprocs <= 16;
	o->all_stats = s->nprocs <= 16;
	o->max_memory = 4u << 20;
	*chunk_max = o->chunk;
	for (unsigned f = 0; f < MAX_FILES; f++) {
		uint32_t a = aligns[pick(&h, 3)];

		al[f] = (struct pl_align){ a, a };
		*chunk_max = CM_MAX(*chunk_max, a);
	}
}

/* Whether executing p here stays cheap (1 MiB of staging at most). */
static int small_enough(const struct pl_plan *p, const struct pl_ckpt *ck)
{
	uint64_t staging = 0, data = 0;

	for (unsigned s = 0; s < p->nslots; s++)
		staging += p->staging[s];
	for (size_t f = 0; f < ck->nfiles; f++)
		data += ck->files[f].size;
	return staging <= (1u << 20) && data <= (1u << 20);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pl_spec *s = pl_spec_new();
	struct pl_plan *p = NULL;
	struct pl_align al[MAX_FILES];
	struct pl_opts o;
	struct cm_err e;
	struct input in;
	struct ckpt c;
	uint64_t chunk_max;
	int ret;

	if (!s)
		return 0;
	pl_limit_set_for_tests(PL_LIMIT_DEVICES, 1u << 16);
	split(data, size, &in);
	cm_err_clear(&e);
	if ((ret = pl_spec_parse(s, (const char *)in.part[0], in.len[0], &e))) {
		if (ret >= 0 || !e.msg[0])
			__builtin_trap();
		pl_spec_free(s);
		return 0;
	}
	if (!make_ckpt(&in, &c)) {
		options(&in, s, &o, al, &chunk_max);
		ret = pl_plan_build(&c.ck, s, al, &o, &p, &e);
		if (ret && (ret >= 0 || !e.msg[0]))
			__builtin_trap();
		if (!ret && small_enough(p, &c.ck)) {
			const char *bad = pl_check_plan(p, &c.ck, al, chunk_max, p->received);

			if (bad) {
				fprintf(stderr, "fuzz_plan: %s\n", bad);
				__builtin_trap();
			}
		}
		pl_plan_free(p);
	}
	free_ckpt(&c);
	pl_spec_free(s);
	return 0;
}
