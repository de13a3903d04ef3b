/* plan_fixture.c - a planned checkpoint and its whole load (plan_fixture.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_util.h"
#include "harness.h"
#include "plan_fixture.h"

/* The expected staging: the same plan loaded whole. */
static int load_reference(struct fixture *f)
{
	rl_loader *ld = rl_loader_create();
	int ret = ld ? rl_loader_run(ld, f->plan) : -ENOMEM;

	f->ndev = rl_plan_num_devices(f->plan);
	f->nshards = rl_plan_num_shards(f->plan);
	f->ref = calloc(f->ndev + 1, sizeof(*f->ref));
	f->ref_len = calloc(f->ndev + 1, sizeof(*f->ref_len));
	if (!f->ref || !f->ref_len)
		ret = -ENOMEM;
	for (unsigned d = 0; ret == 0 && d < f->ndev; d++) {
		size_t len = 0;
		void *p = rl_loader_staging(ld, d, &len);

		f->ref[d] = malloc(len + 1);
		f->ref_len[d] = len;
		if (!f->ref[d])
			ret = -ENOMEM;
		else if (len)
			memcpy(f->ref[d], p, len);
	}
	rl_loader_destroy(ld);
	return ret;
}

int fixture_dtype = -1;

int fixture_build(struct fixture *f, const char *path, const char *spec_json, size_t sj,
		  uint64_t chunk)
{
	int ret;

	memset(f, 0, sizeof(*f));
	f->ck = rl_ckpt_create();
	f->spec = rl_spec_create();
	f->plan = rl_plan_create();
	if (!f->ck || !f->spec || !f->plan)
		return -ENOMEM;
	ret = rl_ckpt_open(f->ck, path);
	if (ret == 0)
		ret = rl_spec_parse(f->spec, spec_json, sj);
	if (ret == 0)
		ret = rl_plan_set(f->plan, RL_PLAN_CHUNK_BYTES, (int64_t)chunk);
	if (ret == 0)
		ret = rl_plan_set(f->plan, RL_PLAN_DTYPE, fixture_dtype);
	if (ret == 0)
		ret = rl_plan_build(f->plan, f->ck, f->spec);
	if (ret == 0)
		ret = load_reference(f);
	if (ret < 0)
		printf("    fixture: %d %s | %s\n", ret, rl_ckpt_errmsg(f->ck), rl_plan_errmsg(f->plan));
	return ret;
}

int fixture_random_ckpt(struct fixture *f, const char *name, unsigned n, const char *spec_json,
			uint64_t chunk)
{
	struct rt t[12];
	uint64_t data_start, fsize;
	char *path = tmp_path(name), json[16384];
	uint8_t *file;
	size_t sj;

	memset(f, 0, sizeof(*f));
	n = n ? (n < 12 ? n : 12) : 1 + (unsigned)(th_rand() % 12);
	file = write_random_ckpt(path, t, n, &data_start, &fsize);
	if (!file)
		return -ENOMEM;
	free(file);
	if (spec_json) {
		sj = strlen(spec_json);
	} else {
		unsigned mx = 1 + (unsigned)(th_rand() % 3), my = 1 + (unsigned)(th_rand() % 3);

		sj = random_spec(t, n, mx, my, 1, json, sizeof(json));
		spec_json = json;
	}
	return fixture_build(f, path, spec_json, sj, chunk);
}

void fixture_free(struct fixture *f)
{
	for (unsigned d = 0; f->ref && d < f->ndev; d++)
		free(f->ref[d]);
	free(f->ref);
	free(f->ref_len);
	rl_plan_destroy(f->plan);
	rl_spec_destroy(f->spec);
	rl_ckpt_destroy(f->ck);
	memset(f, 0, sizeof(*f));
}
