/*
 * index.c - a Hugging Face model.safetensors.index.json: which file holds
 * which tensor.
 *
 * Decisions:
 *  - The index is strict JSON. cJSON builds the tree, but it takes NUL and
 *    other control bytes for whitespace and lets them raw into strings, and
 *    its strings end at a NUL, so "a.safetensors\u0000x" would silently read
 *    as "a.safetensors". The text is therefore also walked by the strict
 *    reader (sjson.c, the header parser's), first, which refuses all of
 *    these and counts values before any tree is built (INDEX_MAX_VALUES), and
 *    a weight_map name or file name holding U+0000 is refused by name. The
 *    walk uses cJSON's own nesting limit, so it refuses nothing for depth
 *    that cJSON accepted.
 *  - A repeated key in weight_map keeps its last value, as Python's json
 *    does.
 *  - File names are relative to the index's directory: an absolute name or
 *    one with a ".." component is refused (RL_E_BAD_INDEX), so a hostile
 *    index cannot make us open, or describe in errors, files elsewhere.
 *    Subdirectories ("sub/x.safetensors") are allowed; symbolic links are
 *    the directory owner's choice.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ckpt_io.h"
#include "sjson.h"

/* An index larger than this is not an index (HF's are a few MB). */
#define INDEX_MAX_BYTES (256u << 20)
/* cJSON's CJSON_NESTING_LIMIT: the strict walk refuses no deeper text. */
#define INDEX_MAX_DEPTH 1000
/*
 * JSON values outside weight_map's file names (metadata and the like): a
 * few in any real index. The strict walk counts them before cJSON builds
 * its tree (~64 bytes a value): a 126 MiB index whose metadata was one
 * array took 4.4 GB and 20.8 s. weight_map's entries are bounded by the
 * tensor limit.
 */
#define INDEX_MAX_VALUES 65536

struct ent {
	const char *name, *fname;   /* owned by the cJSON tree */
	size_t seq;                 /* document order */
};

/* ---------------------------------------------------------------- */
/* The strict walk                                                   */
/* ---------------------------------------------------------------- */

/* A weight_map file name must not hold U+0000 (name_q: its entry). */
static int file_name(struct sj *j, const char *path, const char *name_q)
{
	int r;

	if ((r = sj_string(j)))
		return r;
	if (!memchr(j->sb, 0, j->sb_len))
		return 0;
	return cm_err_set(j->e, RL_E_BAD_INDEX, "%s: weight_map entry '%s': file name "
			  "contains a NUL character", path, name_q);
}

/* The strict walk's state: the index's path, weight_map entries seen. */
struct walk {
	const char *path;
	uint64_t entries;
};

/* One weight_map entry: a name, and a file name (other values are
 * skipped here and refused later). */
static int map_member(struct sj *j, void *arg)
{
	struct walk *w = arg;
	const char *path = w->path;
	char q[128];

	if (++w->entries > pl_limit(PL_LIMIT_TENSORS)) {
		j->limit = 1;
		return cm_err_set(j->e, RL_E_TOO_LARGE, "%s: weight_map of more than %llu "
				  "tensors, the limit", path,
				  (unsigned long long)pl_limit(PL_LIMIT_TENSORS));
	}
	pl_quote(q, sizeof(q), j->sb, j->sb_len);
	if (memchr(j->sb, 0, j->sb_len))
		return cm_err_set(j->e, RL_E_BAD_INDEX, "%s: weight_map name '%s' contains a "
				  "NUL character", path, q);
	sj_ws(j);
	if (j->p >= j->end || *j->p != '"')
		return sj_skip_value(j);
	return file_name(j, path, q);
}

/* A member of the root: weight_map's entries are checked, others skipped. */
static int root_member(struct sj *j, void *w)
{
	int wm = j->sb_len == 10 && !memcmp(j->sb, "weight_map", 10);

	sj_ws(j);
	if (wm && j->p < j->end && *j->p == '{')
		return sj_object(j, map_member, w);
	return sj_skip_value(j);
}

/* The root object, every value validated, weight_map's strings checked. */
static int walk_root(struct sj *j, const char *path)
{
	struct walk w = { path, 0 };
	int r;

	sj_ws(j);
	if (j->p >= j->end || *j->p != '{')
		return sj_jerr(j, "expected an object");
	if ((r = sj_object(j, root_member, &w)))
		return r;
	sj_ws(j);
	if (j->p < j->end)
		return sj_jerr(j, "unexpected data after the JSON value");
	return 0;
}

/* The strict walk: its bounds and grammar (no tree built). */
static int check_strict(const char *text, size_t len, const char *path, struct cm_err *e)
{
	char lead[CM_ERRMSG_MAX];
	struct sj j = { .buf = text, .p = text, .end = text + len, .e = e,
			.code = RL_E_BAD_INDEX, .lead = lead, .max_depth = INDEX_MAX_DEPTH,
			.max_values = INDEX_MAX_VALUES, .what = path };
	int r;

	snprintf(lead, sizeof(lead), "%s: invalid JSON", path);
	r = walk_root(&j, path);
	cm_free(j.sb);
	return r;
}

/* ---------------------------------------------------------------- */
/* Reading                                                           */
/* ---------------------------------------------------------------- */

/* Parses the text into ix->tree: a JSON object and nothing after it. The
 * strict walk decides first: text it refuses (over a bound, or not strict
 * JSON) fails with its message and cJSON never builds a tree of it. */
static int parse_text(const char *text, size_t len, const char *path, struct pl_index *ix,
		      struct cm_err *e)
{
	const char *end = NULL;  /* where cJSON stopped */
	int strict = check_strict(text, len, path, e);

	if (strict)
		return strict;
	ix->tree = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	/* cJSON points end at the error; cJSON_GetErrorPtr() is global. */
	if (!ix->tree)
		return cm_err_set(e, RL_E_BAD_INDEX, "%s: invalid JSON at byte %zu", path,
				  end ? (size_t)(end - text) : 0);
	if (!cJSON_IsObject(ix->tree))
		return cm_err_set(e, RL_E_BAD_INDEX, "%s: index is not a JSON object", path);
	while (end < text + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
		end++;
	if (end < text + len)
		return cm_err_set(e, RL_E_BAD_INDEX, "%s: unexpected data after the JSON value "
				  "at byte %zu", path, (size_t)(end - text));
	return 0;
}

/* Whether an index's file name stays in the index's directory. */
static int name_inside(const char *f)
{
	if (f[0] == '/')
		return 0;
	for (const char *c = f; *c; ) {
		size_t n = strcspn(c, "/");

		if (n == 2 && c[0] == '.' && c[1] == '.')
			return 0;
		c += n;
		if (*c == '/')
			c++;
	}
	return 1;
}

/* Checks weight_map entry it (a file name that stays inside). */
static int check_entry(const cJSON *it, const char *path, struct cm_err *e)
{
	const char *v = cJSON_GetStringValue(it);
	char q[128], qf[128];

	pl_quote(q, sizeof(q), it->string, strlen(it->string));
	if (!v || !*v)
		return cm_err_set(e, RL_E_BAD_INDEX, "%s: weight_map entry '%s' is not a "
				  "file name", path, q);
	if (name_inside(v))
		return 0;
	pl_quote(qf, sizeof(qf), v, strlen(v));
	return cm_err_set(e, RL_E_BAD_INDEX, "%s: weight_map entry '%s': file '%s' is "
			  "outside the index's directory (absolute or with a '..' "
			  "component)", path, q, qf);
}

static int cmp_ent(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* weight_map's entries, sorted by name; of a repeated name the last stays. */
static int collect_entries(const cJSON *wm, const char *path, struct ent **out, size_t *n,
			   struct cm_err *e)
{
	const cJSON *it;
	struct ent *v;
	size_t k = 0, o = 0;
	int r;

	for (it = wm->child; it; it = it->next)
		k++;
	v = cm_calloc(k ? k : 1, sizeof(*v));
	if (!v)
		return pl_ckpt_oom(e);
	*out = v;
	for (it = wm->child, k = 0; it; it = it->next, k++) {
		if ((r = check_entry(it, path, e)))
			return r;
		v[k] = (struct ent){ it->string, cJSON_GetStringValue(it), k };
	}
	qsort(v, k, sizeof(*v), cmp_ent);
	for (size_t i = 0; i < k; i++)
		if (i + 1 == k || strcmp(v[i].name, v[i + 1].name))
			v[o++] = v[i];
	*n = o;
	return 0;
}

/* The distinct file names of ents, sorted, as paths beside the index, and
 * each entry's file index. */
static int collect_files(const struct ent *ents, size_t n, const char *path,
			 struct pl_index *ix, struct cm_err *e)
{
	const char **names = cm_calloc(n ? n : 1, sizeof(*names));
	char *dir = pl_path_dir(path);
	size_t nu = 0;
	int r = 0;

	ix->map = cm_calloc(n ? n : 1, sizeof(*ix->map));
	ix->files = cm_calloc(n ? n : 1, sizeof(*ix->files));
	if (!names || !dir || !ix->map || !ix->files) {
		r = pl_ckpt_oom(e);
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		names[i] = ents[i].fname;
	qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++)
		if (!nu || strcmp(names[nu - 1], names[i]))
			names[nu++] = names[i];
	for (; ix->nfiles < nu; ix->nfiles++)
		if (!(ix->files[ix->nfiles] = pl_path_join(dir, names[ix->nfiles]))) {
			r = pl_ckpt_oom(e);
			goto out;
		}
	for (size_t i = 0; i < n; i++) {
		const char **hit = bsearch(&ents[i].fname, names, nu, sizeof(*names), cmp_str);

		ix->map[i] = (struct pl_index_ent){ ents[i].name, (uint32_t)(hit - names), 0 };
	}
	ix->nmap = n;
out:
	cm_free(names);
	cm_free(dir);
	return r;
}

int pl_index_load(const char *path, struct pl_index *ix, struct cm_err *e)
{
	struct ent *ents = NULL;
	const cJSON *wm;
	char *text = NULL;
	size_t len = 0, n = 0;
	int r;

	memset(ix, 0, sizeof(*ix));
	if ((r = pl_read_small_file(path, INDEX_MAX_BYTES, RL_E_BAD_INDEX, &text, &len, e)))
		return r;
	r = parse_text(text, len, path, ix, e);
	cm_free(text);
	if (r)
		return r;
	wm = cJSON_GetObjectItemCaseSensitive(ix->tree, "weight_map");
	if (!cJSON_IsObject(wm))
		return cm_err_set(e, RL_E_BAD_INDEX, "%s: index has no \"weight_map\" object",
				  path);
	if (!(r = collect_entries(wm, path, &ents, &n, e)))
		r = collect_files(ents, n, path, ix, e);
	cm_free(ents);
	return r;
}

void pl_index_free(struct pl_index *ix)
{
	for (size_t i = 0; i < ix->nfiles; i++)
		cm_free(ix->files[i]);
	cm_free(ix->files);
	cm_free(ix->map);
	cJSON_Delete(ix->tree);
	memset(ix, 0, sizeof(*ix));
}

struct pl_index_ent *pl_index_find(const struct pl_index *ix, const char *name)
{
	size_t lo = 0, hi = ix->nmap;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, ix->map[mid].name);

		if (!c)
			return &ix->map[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}
