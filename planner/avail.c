/*
 * avail.c - which files each process may read ("files_of_process"), for
 * checkpoints whose files live on node-local drives: entry p of the list
 * names the files process p can open (names or fnmatch(3) patterns,
 * matched against the file's name, or against its whole path when the
 * pattern holds a '/'); null, or no entry, means every file.
 */
#include <errno.h>
#include <fnmatch.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "avail.h"

static void proc_clear(struct pl_avail_proc *pp)
{
	for (size_t i = 0; i < pp->npat; i++)
		cm_free(pp->pat[i]);
	cm_free(pp->pat);
	pp->pat = NULL;
	pp->npat = 0;
	pp->any = 1;
}

void pl_avail_free(struct pl_avail *a)
{
	if (!a)
		return;
	for (uint32_t p = 0; p < a->n; p++)
		proc_clear(&a->proc[p]);
	cm_free(a->proc);
	cm_free(a);
}

/* Entry process of s->avail, created (every file) if absent. */
static struct pl_avail_proc *avail_entry(struct pl_spec *s, uint32_t process)
{
	struct pl_avail *a = s->avail;

	if (!a && !(a = s->avail = cm_calloc(1, sizeof(*a))))
		return NULL;
	if (process >= a->n) {
		struct pl_avail_proc *np = cm_reallocarray(a->proc, (size_t)process + 1,
							   sizeof(*np));

		if (!np)
			return NULL;
		for (uint32_t q = a->n; q <= process; q++)
			np[q] = (struct pl_avail_proc){ 1, NULL, 0 };
		a->proc = np;
		a->n = process + 1;
	}
	return &a->proc[process];
}

int pl_avail_set(struct pl_spec *s, uint32_t process, size_t n, const char *const *pat,
		 struct cm_err *e)
{
	struct pl_avail_proc *pp;

	if (process >= PL_MAX_DEVICES)
		return cm_err_set(e, RL_E_INVALID_ARG, "files_of_process: process %u out of range",
				  process);
	if (pat)
		for (size_t i = 0; i < n; i++)
			if (!pat[i])
				return cm_err_set(e, RL_E_INVALID_ARG,
						  "files_of_process: process %u: file %zu is NULL",
						  process, i);
	if (!(pp = avail_entry(s, process)))
		return cm_err_set(e, -ENOMEM, "spec: out of memory");
	proc_clear(pp);
	if (!pat)
		return 0;
	pp->any = 0;
	pp->pat = cm_calloc(n + 1, sizeof(char *));
	if (!pp->pat)
		return cm_err_set(e, -ENOMEM, "spec: out of memory");
	for (size_t i = 0; i < n; i++) {
		if (!(pp->pat[i] = cm_strdup(pat[i])))
			return cm_err_set(e, -ENOMEM, "spec: out of memory");
		pp->npat = i + 1;
	}
	return 0;
}

/* One entry of the JSON list: null (every file) or a list of strings. */
static int parse_entry(struct pl_spec *s, uint32_t p, const cJSON *v, struct cm_err *e)
{
	const char **names;
	const cJSON *f;
	size_t n = 0;
	int ret;

	if (cJSON_IsNull(v))
		return pl_avail_set(s, p, 0, NULL, e);
	if (!cJSON_IsArray(v))
		return cm_err_set(e, RL_E_SPEC,
				  "spec: files_of_process[%u] must be null or a list of file names", p);
	names = cm_calloc((size_t)cJSON_GetArraySize(v) + 1, sizeof(*names));
	if (!names)
		return cm_err_set(e, -ENOMEM, "spec: out of memory");
	cJSON_ArrayForEach(f, v) {
		if (!cJSON_IsString(f) || !*f->valuestring) {
			cm_free(names);
			return cm_err_set(e, RL_E_SPEC,
					  "spec: files_of_process[%u][%zu] is not a file name", p, n);
		}
		names[n++] = f->valuestring;
	}
	ret = pl_avail_set(s, p, n, names, e);
	cm_free(names);
	return ret;
}

int pl_avail_parse(struct pl_spec *s, const cJSON *j, struct cm_err *e)
{
	const cJSON *v;
	uint32_t p = 0;
	int ret;

	if (!cJSON_IsArray(j))
		return cm_err_set(e, RL_E_SPEC,
				  "spec: \"files_of_process\" must be a list (one entry per process)");
	cJSON_ArrayForEach(v, j) {
		if ((ret = parse_entry(s, p, v, e)))
			return ret;
		p++;
	}
	return 0;
}

static int matches(const struct pl_avail_proc *pp, const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	if (pp->any)
		return 1;
	for (size_t i = 0; i < pp->npat; i++) {
		const char *pat = pp->pat[i];

		if (strchr(pat, '/') ? !fnmatch(pat, path, FNM_PATHNAME) : !fnmatch(pat, base, 0))
			return 1;
	}
	return 0;
}

int pl_avail_may_read(const struct pl_spec *s, const struct pl_ckpt *ck, uint32_t process,
		      uint32_t f)
{
	const struct pl_avail *a = s ? s->avail : NULL;

	if (!a || process >= a->n)
		return 1;
	return matches(&a->proc[process], ck->files[f].path);
}

int pl_avail_resolve(const struct pl_spec *s, const struct pl_ckpt *ck, uint8_t **out,
		     struct cm_err *e)
{
	const struct pl_avail *a = s->avail;
	uint8_t *map;
	size_t bits;
	int all = 1;

	*out = NULL;
	if (!a)
		return 0;
	if (a->n > s->nprocs)
		return cm_err_set(e, RL_E_SPEC_MESH,
				  "spec: files_of_process has %u entries but the mesh has %u processes",
				  a->n, s->nprocs);
	for (uint32_t p = 0; p < a->n; p++)
		all &= a->proc[p].any;
	if (all)
		return 0;
	if (ck->nfiles && s->nprocs > SIZE_MAX / 8 / ck->nfiles)
		return cm_err_set(e, RL_E_TOO_LARGE, "files_of_process: too many processes x files");
	bits = (size_t)s->nprocs * ck->nfiles;
	if (!(map = cm_calloc(bits / 8 + 1, 1)))
		return cm_err_set(e, -ENOMEM, "plan: out of memory");
	for (uint32_t p = 0; p < s->nprocs; p++)
		for (uint32_t f = 0; f < ck->nfiles; f++)
			if (p >= a->n || matches(&a->proc[p], ck->files[f].path))
				pl_set_bit(map, (size_t)p * ck->nfiles + f);
	*out = map;
	return 0;
}
