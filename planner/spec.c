/*
 * spec.c - sharding specs: the mesh (shape, axis names, device ids, device
 * to process map), ordered regex rules with partition specs, and the
 * optional targets and tensors sections (targets.c parses targets).
 *
 * Every error names the field, the rule (index and pattern) and, where one
 * is involved, the axis.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pl_private.h"
#include "sjson.h"
#include "avail.h"

static void rule_clear(struct pl_rule *r)
{
	cm_free(r->pattern);
	regfree(&r->re);
	for (unsigned i = 0; i < r->nnames; i++)
		cm_free(r->names[i]);
	cm_free(r->names);
}

/* Frees t's mesh (axes, ids, processes). */
static void mesh_clear(struct pl_spec *t)
{
	for (unsigned i = 0; i < t->ndim; i++)
		cm_free(t->axes[i]);
	cm_free(t->devices);
	cm_free(t->proc);
}

static void spec_clear(struct pl_spec *s)
{
	mesh_clear(s);
	for (size_t i = 0; i < s->nrules; i++)
		rule_clear(&s->rules[i]);
	cm_free(s->rules);
	cm_free(s->ptab);
	for (size_t i = 0; i < s->ntargets; i++)
		pl_target_clear(&s->targets[i]);
	cm_free(s->targets);
	for (size_t i = 0; i < s->ntensors; i++)
		cm_free(s->tensors[i]);
	cm_free(s->tensors);
	pl_avail_free(s->avail);
	memset(s, 0, sizeof(*s));
}

/* One device, id 0, process 0, no axes: every tensor whole. */
static int spec_init(struct pl_spec *s)
{
	memset(s, 0, sizeof(*s));
	s->devices = cm_calloc(1, sizeof(uint32_t));
	s->proc = cm_calloc(1, sizeof(uint32_t));
	if (!s->devices || !s->proc) {
		cm_free(s->devices);
		cm_free(s->proc);
		return -ENOMEM;
	}
	s->ndev = 1;
	s->nprocs = 1;
	return 0;
}

struct pl_spec *pl_spec_new(void)
{
	struct pl_spec *s = cm_malloc(sizeof(*s));

	if (s && spec_init(s)) {
		cm_free(s);
		return NULL;
	}
	return s;
}

void pl_spec_free(struct pl_spec *s)
{
	if (!s)
		return;
	spec_clear(s);
	cm_free(s);
}

static int axis_index(const struct pl_spec *s, const char *name)
{
	for (unsigned i = 0; i < s->ndim; i++)
		if (!strcmp(s->axes[i], name))
			return (int)i;
	return -1;
}

/* Resolves a rule's axis names against the mesh. */
static int rule_resolve(const struct pl_spec *s, struct pl_rule *r, size_t idx,
			struct cm_err *e)
{
	unsigned n = 0;
	uint32_t used = 0;

	for (unsigned d = 0; d < r->ndims; d++) {
		for (unsigned a = 0; a < r->dims[d].naxes; a++, n++) {
			int ax = axis_index(s, r->names[n]);

			if (ax < 0)
				return cm_err_set(e, RL_E_SPEC_AXIS,
						  "rule %zu (\"%s\"): unknown axis \"%s\" in dimension %u",
						  idx, r->pattern, r->names[n], d);
			if (used & (1u << ax))
				return cm_err_set(e, RL_E_SPEC_AXIS,
						  "rule %zu (\"%s\"): axis \"%s\" used twice",
						  idx, r->pattern, r->names[n]);
			used |= 1u << ax;
			r->dims[d].axes[a] = (uint8_t)ax;
		}
	}
	return 0;
}

/* Axis sizes and names: positive, named, distinct, at most
 * pl_limit(PL_LIMIT_DEVICES) devices in all (*ndev). */
static int check_axes(unsigned ndim, const uint32_t *shape, const char *const *axes,
		      uint64_t *ndev, struct cm_err *e)
{
	if (ndim > PL_MAX_AXES)
		return cm_err_set(e, RL_E_SPEC_MESH, "mesh: %u axes (at most %d)",
				  ndim, PL_MAX_AXES);
	if (ndim && (!shape || !axes))
		return cm_err_set(e, RL_E_SPEC_MESH, "mesh: shape and axes are required");
	*ndev = 1;
	for (unsigned i = 0; i < ndim; i++) {
		if (!shape[i])
			return cm_err_set(e, RL_E_SPEC_MESH, "mesh: axis %u has size 0", i);
		if (cm_mul64(*ndev, shape[i], ndev) || *ndev > pl_limit(PL_LIMIT_DEVICES))
			return cm_err_set(e, RL_E_SPEC_MESH, "mesh: more than %" PRIu64 " devices",
					  pl_limit(PL_LIMIT_DEVICES));
		if (!axes[i] || !axes[i][0])
			return cm_err_set(e, RL_E_SPEC_AXIS, "mesh: axis %u has no name", i);
		for (unsigned j = 0; j < i; j++)
			if (!strcmp(axes[i], axes[j]))
				return cm_err_set(e, RL_E_SPEC_AXIS,
						  "mesh: axis \"%s\" named twice", axes[i]);
	}
	return 0;
}

/* t's axes, device ids and processes (NULL: 0..N-1, all 0), and the
 * highest process id. -ENOMEM or 0. */
static int fill_mesh(struct pl_spec *t, unsigned ndim, const uint32_t *shape,
		     const char *const *axes, uint32_t ndev, const uint32_t *devices,
		     const uint32_t *process_of_device, uint32_t *maxp)
{
	t->ndim = ndim;
	t->ndev = ndev;
	t->devices = cm_mallocarray(ndev, sizeof(uint32_t));
	t->proc = cm_mallocarray(ndev, sizeof(uint32_t));
	if (!t->devices || !t->proc)
		return -ENOMEM;
	for (unsigned i = 0; i < ndim; i++) {
		t->shape[i] = shape[i];
		if (!(t->axes[i] = cm_strdup(axes[i])))
			return -ENOMEM;
	}
	for (uint32_t i = 0; i < ndev; i++) {
		t->devices[i] = devices ? devices[i] : i;
		t->proc[i] = process_of_device ? process_of_device[i] : 0;
		*maxp = CM_MAX(*maxp, t->proc[i]);
	}
	return 0;
}

/*
 * Process ids are dense, 0..P-1, each owning a device: the plan sizes
 * per-process tables by P, which must not grow with an id's value. With N
 * devices, some id in 0..min(max, N) is missing unless dense.
 */
static int check_processes(const struct pl_spec *t, uint32_t maxp, struct cm_err *e)
{
	uint32_t n = maxp < t->ndev ? maxp + 1 : t->ndev + 1, miss = 0;
	uint8_t *seen = cm_calloc(n, 1);

	if (!seen)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->ndev; i++)
		if (t->proc[i] < n)
			seen[t->proc[i]] = 1;
	while (miss < n && seen[miss])
		miss++;
	cm_free(seen);
	if (miss < n)
		return cm_err_set(e, RL_E_SPEC_MESH, "mesh: process %u owns no device (process "
				  "ids must be 0..P-1 with no gap; highest is %u)", miss, maxp);
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* No device id twice: ids in ascending order (the default, and what specs
 * usually list) are checked as they are, others on a sorted copy. */
static int check_device_ids(const struct pl_spec *t, struct cm_err *e)
{
	uint32_t *ids, dup = 0;
	int found = 0;

	for (uint32_t i = 1; i < t->ndev && t->devices[i - 1] < t->devices[i]; i++)
		if (i + 1 == t->ndev)
			return 0;
	if (t->ndev < 2)
		return 0;
	ids = cm_mallocarray(t->ndev, sizeof(uint32_t));
	if (!ids)
		return -ENOMEM;
	memcpy(ids, t->devices, t->ndev * sizeof(uint32_t));
	qsort(ids, t->ndev, sizeof(uint32_t), cmp_u32);
	for (uint32_t i = 1; i < t->ndev && !found; i++)
		if (ids[i] == ids[i - 1])
			found = 1, dup = ids[i];
	cm_free(ids);
	if (found)
		return cm_err_set(e, RL_E_SPEC_MESH, "mesh: device id %u listed twice", dup);
	return 0;
}

int pl_spec_set_mesh(struct pl_spec *s, unsigned ndim, const uint32_t *shape,
		     const char *const *axes, const uint32_t *devices,
		     const uint32_t *process_of_device, struct cm_err *e)
{
	struct pl_spec t;
	uint64_t ndev = 1;
	uint32_t maxp = 0;
	int ret;

	if ((ret = check_axes(ndim, shape, axes, &ndev, e)))
		return ret;
	memset(&t, 0, sizeof(t));
	/* The defaults (ids 0..N-1, all process 0) need no checking. */
	if ((ret = fill_mesh(&t, ndim, shape, axes, (uint32_t)ndev, devices, process_of_device,
			     &maxp)) ||
	    (process_of_device && (ret = check_processes(&t, maxp, e))) ||
	    (devices && (ret = check_device_ids(&t, e))))
		goto fail;
	t.nprocs = maxp + 1;    /* dense: below the device count */
	/* The rules must still name known axes. */
	for (size_t i = 0; i < s->nrules; i++)
		if ((ret = rule_resolve(&t, &s->rules[i], i, e)))
			goto fail;
	mesh_clear(s);
	s->ndim = t.ndim;
	memcpy(s->shape, t.shape, sizeof(t.shape));
	memcpy(s->axes, t.axes, sizeof(t.axes));
	s->ndev = t.ndev;
	s->devices = t.devices;
	s->proc = t.proc;
	s->nprocs = t.nprocs;
	return 0;
fail:
	if (ret == -ENOMEM)
		cm_err_set(e, ret, "mesh: out of memory");
	/* Rules resolved against t before the failure go back to s's mesh. */
	for (size_t i = 0; i < s->nrules; i++)
		rule_resolve(s, &s->rules[i], i, NULL);
	mesh_clear(&t);
	return ret;
}

/* The partition spec's shape: at most RL_MAX_DIMS dimensions of at most
 * PL_MAX_AXES axes each; *nnames gets the axis names in all. */
static int check_dims(const char *regex, unsigned ndims, const rl_dim_spec *dims,
		      size_t idx, unsigned *nnames, struct cm_err *e)
{
	if (ndims > RL_MAX_DIMS)
		return cm_err_set(e, RL_E_SPEC_RANK,
				  "rule %zu (\"%s\"): spec of %u dimensions (at most %d)",
				  idx, regex, ndims, RL_MAX_DIMS);
	*nnames = 0;
	for (unsigned d = 0; d < ndims; d++) {
		if (dims[d].naxes > PL_MAX_AXES || (dims[d].naxes && !dims[d].axes))
			return cm_err_set(e, RL_E_SPEC_AXIS,
					  "rule %zu (\"%s\"): dimension %u names %u axes",
					  idx, regex, d, dims[d].naxes);
		*nnames += dims[d].naxes;
	}
	return 0;
}

/*
 * Compiles regex into re for whole-name matches, anchored once here as
 * "^(regex)$". The pattern is compiled on its own first: wrapped, an
 * unbalanced one such as "a)|(b" would compile into "^(a)|(b)$", which
 * matches any name that starts with "a".
 */
static int rule_compile(regex_t *re, const char *regex, size_t idx, struct cm_err *e)
{
	size_t plen = strlen(regex);
	char *full = cm_malloc(plen + 5), why[128];
	int rc;

	if (!full)
		return cm_err_set(e, -ENOMEM, "rule %zu: out of memory", idx);
	memcpy(full, "^(", 2);
	memcpy(full + 2, regex, plen);
	memcpy(full + 2 + plen, ")$", 3);
	rc = regcomp(re, regex, REG_EXTENDED | REG_NOSUB);
	if (!rc) {
		regfree(re);
		rc = regcomp(re, full, REG_EXTENDED | REG_NOSUB);
	}
	cm_free(full);
	if (!rc)
		return 0;
	regerror(rc, re, why, sizeof(why));
	return cm_err_set(e, RL_E_SPEC_REGEX, "rule %zu: bad regex \"%s\": %s", idx, regex,
			  why);
}

/* r's pattern and axis names, copied. 0 or -ENOMEM. */
static int rule_names(struct pl_rule *r, const char *regex, unsigned ndims,
		      const rl_dim_spec *dims, unsigned nnames)
{
	unsigned n = 0;

	r->pattern = cm_strdup(regex);
	r->names = cm_calloc(nnames ? nnames : 1, sizeof(char *));
	if (!r->pattern || !r->names)
		return -ENOMEM;
	r->nnames = nnames;
	for (unsigned d = 0; d < ndims; d++) {
		r->dims[d].naxes = (uint8_t)dims[d].naxes;
		for (unsigned a = 0; a < dims[d].naxes; a++) {
			const char *name = dims[d].axes[a];

			if (!(r->names[n++] = cm_strdup(name ? name : "")))
				return -ENOMEM;
		}
	}
	return 0;
}

int pl_spec_add_rule(struct pl_spec *s, const char *regex, unsigned ndims,
		     const rl_dim_spec *dims, struct cm_err *e)
{
	size_t idx = s->nrules;
	struct pl_rule r, *nr;
	unsigned nnames = 0;
	int rc;

	if (!regex)
		return cm_err_set(e, RL_E_SPEC, "rule %zu: no pattern", idx);
	if (idx >= PL_MAX_RULES)
		return cm_err_set(e, RL_E_TOO_LARGE, "rule %zu: over the limit of %u rules", idx,
				  PL_MAX_RULES);
	if ((rc = check_dims(regex, ndims, dims, idx, &nnames, e)) ||
	    (rc = pl_regex_check(regex, idx, e)))
		return rc;
	memset(&r, 0, sizeof(r));
	r.ndims = ndims;
	if ((rc = rule_compile(&r.re, regex, idx, e)))
		return rc;
	if (rule_names(&r, regex, ndims, dims, nnames))
		goto oom;
	if ((rc = rule_resolve(s, &r, idx, e))) {
		rule_clear(&r);
		return rc;
	}
	nr = cm_reallocarray(s->rules, idx + 1, sizeof(*nr));
	if (!nr)
		goto oom;
	s->rules = nr;
	s->rules[s->nrules++] = r;
	if ((rc = pl_rule_index_add(s, e)))
		rule_clear(&s->rules[--s->nrules]);
	return rc;
oom:
	rule_clear(&r);
	return cm_err_set(e, -ENOMEM, "rule %zu: out of memory", idx);
}

/* ---------------------------------------------------------------- */
/* JSON                                                              */
/* ---------------------------------------------------------------- */

/* A non-negative JSON integer up to max (cJSON keeps doubles: exact to 2^53). */
static int json_uint(const cJSON *j, uint64_t max, uint64_t *out)
{
	double v;

	if (!cJSON_IsNumber(j))
		return -1;
	v = j->valuedouble;
	if (!(v >= 0) || v != floor(v) || v > (double)max || v > 9007199254740992.0)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

static int parse_u32_list(const cJSON *arr, const char *what, uint32_t *out,
			  size_t n, struct cm_err *e)
{
	size_t i = 0;
	const cJSON *v;

	if (!cJSON_IsArray(arr))
		return cm_err_set(e, RL_E_SPEC, "mesh: \"%s\" is not a list", what);
	if ((size_t)cJSON_GetArraySize(arr) != n)
		return cm_err_set(e, RL_E_SPEC_MESH,
				  "mesh: \"%s\" has %d entries, the mesh has %zu devices",
				  what, cJSON_GetArraySize(arr), n);
	cJSON_ArrayForEach(v, arr) {
		uint64_t x;

		if (json_uint(v, UINT32_MAX, &x))
			return cm_err_set(e, RL_E_SPEC,
					  "mesh: \"%s\"[%zu] is not a non-negative integer",
					  what, i);
		out[i++] = (uint32_t)x;
	}
	return 0;
}

static int parse_mesh(struct pl_spec *s, const cJSON *m, struct cm_err *e)
{
	const cJSON *shape, *axes, *devs, *procs, *v;
	uint32_t sh[PL_MAX_AXES];
	const char *names[PL_MAX_AXES];
	uint32_t *dv = NULL, *pr = NULL;
	unsigned ndim = 0;
	uint64_t ndev = 1;
	const uint64_t max = pl_limit(PL_LIMIT_DEVICES);
	int ret;

	if (!cJSON_IsObject(m))
		return cm_err_set(e, RL_E_SPEC, "spec: \"mesh\" is not an object");
	cJSON_ArrayForEach(v, m) {
		if (strcmp(v->string, "shape") && strcmp(v->string, "axes") &&
		    strcmp(v->string, "devices") && strcmp(v->string, "process_of_device"))
			return cm_err_set(e, RL_E_SPEC, "mesh: unknown field \"%s\"",
					  v->string);
	}
	shape = cJSON_GetObjectItemCaseSensitive(m, "shape");
	axes = cJSON_GetObjectItemCaseSensitive(m, "axes");
	if (!cJSON_IsArray(shape) || !cJSON_IsArray(axes))
		return cm_err_set(e, RL_E_SPEC, "mesh: \"shape\" and \"axes\" must be lists");
	if (cJSON_GetArraySize(shape) != cJSON_GetArraySize(axes))
		return cm_err_set(e, RL_E_SPEC_MESH,
				  "mesh: %d sizes in \"shape\" but %d names in \"axes\"",
				  cJSON_GetArraySize(shape), cJSON_GetArraySize(axes));
	if (cJSON_GetArraySize(shape) > PL_MAX_AXES)
		return cm_err_set(e, RL_E_SPEC_MESH, "mesh: more than %d axes", PL_MAX_AXES);
	cJSON_ArrayForEach(v, shape) {
		uint64_t x;

		if (json_uint(v, max, &x) && cJSON_IsNumber(v) && v->valuedouble > max &&
		    v->valuedouble == floor(v->valuedouble))
			return cm_err_set(e, RL_E_SPEC_MESH, "mesh: shape[%u] = %.15g is too large "
					  "(a mesh has at most %" PRIu64 " devices)", ndim,
					  v->valuedouble, max);
		if (json_uint(v, max, &x) || !x)
			return cm_err_set(e, RL_E_SPEC_MESH,
					  "mesh: shape[%u] is not a positive integer", ndim);
		sh[ndim++] = (uint32_t)x;
		if (cm_mul64(ndev, x, &ndev) || ndev > max)
			return cm_err_set(e, RL_E_SPEC_MESH, "mesh: more than %" PRIu64 " devices",
					  max);
	}
	ndim = 0;
	cJSON_ArrayForEach(v, axes) {
		if (!cJSON_IsString(v))
			return cm_err_set(e, RL_E_SPEC, "mesh: axes[%u] is not a string", ndim);
		names[ndim++] = v->valuestring;
	}
	devs = cJSON_GetObjectItemCaseSensitive(m, "devices");
	procs = cJSON_GetObjectItemCaseSensitive(m, "process_of_device");
	if (devs && !cJSON_IsNull(devs)) {
		dv = cm_mallocarray(ndev, sizeof(uint32_t));
		if (!dv)
			return cm_err_set(e, -ENOMEM, "mesh: out of memory");
		ret = parse_u32_list(devs, "devices", dv, ndev, e);
		if (ret)
			goto out;
	}
	if (procs && !cJSON_IsNull(procs)) {
		pr = cm_mallocarray(ndev, sizeof(uint32_t));
		ret = -ENOMEM;
		if (!pr) {
			cm_err_set(e, ret, "mesh: out of memory");
			goto out;
		}
		ret = parse_u32_list(procs, "process_of_device", pr, ndev, e);
		if (ret)
			goto out;
	}
	ret = pl_spec_set_mesh(s, ndim, sh, names, dv, pr, e);
out:
	cm_free(dv);
	cm_free(pr);
	return ret;
}

static int parse_rule(struct pl_spec *s, const cJSON *r, size_t idx, struct cm_err *e)
{
	const cJSON *match, *spec, *v;
	rl_dim_spec dims[RL_MAX_DIMS];
	const char *names[RL_MAX_DIMS][PL_MAX_AXES];
	unsigned nd = 0;

	if (!cJSON_IsObject(r))
		return cm_err_set(e, RL_E_SPEC, "rule %zu: not an object", idx);
	cJSON_ArrayForEach(v, r) {
		if (strcmp(v->string, "match") && strcmp(v->string, "spec"))
			return cm_err_set(e, RL_E_SPEC, "rule %zu: unknown field \"%s\"",
					  idx, v->string);
	}
	match = cJSON_GetObjectItemCaseSensitive(r, "match");
	spec = cJSON_GetObjectItemCaseSensitive(r, "spec");
	if (!cJSON_IsString(match))
		return cm_err_set(e, RL_E_SPEC, "rule %zu: \"match\" must be a string", idx);
	if (spec && !cJSON_IsNull(spec) && !cJSON_IsArray(spec))
		return cm_err_set(e, RL_E_SPEC, "rule %zu (\"%s\"): \"spec\" must be a list",
				  idx, match->valuestring);
	if (cJSON_GetArraySize(spec) > RL_MAX_DIMS)
		return cm_err_set(e, RL_E_SPEC_RANK,
				  "rule %zu (\"%s\"): spec of %d dimensions (at most %d)",
				  idx, match->valuestring, cJSON_GetArraySize(spec), RL_MAX_DIMS);
	if (!cJSON_IsArray(spec))
		spec = NULL;
	cJSON_ArrayForEach(v, spec) {
		const cJSON *a;
		unsigned na = 0;

		if (cJSON_IsNull(v)) {
			;
		} else if (cJSON_IsString(v)) {
			names[nd][na++] = v->valuestring;
		} else if (cJSON_IsArray(v)) {
			cJSON_ArrayForEach(a, v) {
				if (!cJSON_IsString(a))
					return cm_err_set(e, RL_E_SPEC,
							  "rule %zu (\"%s\"): dimension %u: axis names must be strings",
							  idx, match->valuestring, nd);
				if (na == PL_MAX_AXES)
					return cm_err_set(e, RL_E_SPEC_AXIS,
							  "rule %zu (\"%s\"): dimension %u names too many axes",
							  idx, match->valuestring, nd);
				names[nd][na++] = a->valuestring;
			}
		} else {
			return cm_err_set(e, RL_E_SPEC,
					  "rule %zu (\"%s\"): dimension %u must be null, an axis name or a list of them",
					  idx, match->valuestring, nd);
		}
		dims[nd].naxes = na;
		dims[nd].axes = names[nd];
		nd++;
	}
	return pl_spec_add_rule(s, match->valuestring, nd, dims, e);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * Returns a name that occurs twice among names[0..n), NULL if none, or
 * names itself when out of memory (a sorted copy: objects may be large).
 */
static const char *find_dup(const char *const *names, size_t n)
{
	const char **v, *dup = NULL;

	if (n < 2)
		return NULL;
	v = cm_mallocarray(n, sizeof(*v));
	if (!v)
		return (const char *)names;
	memcpy(v, names, n * sizeof(*v));
	qsort(v, n, sizeof(*v), cmp_str);
	for (size_t i = 1; i < n && !dup; i++)
		if (!strcmp(v[i - 1], v[i]))
			dup = v[i];
	cm_free(v);
	return dup;
}

/*
 * Refuses a key given twice in any object of j: cJSON keeps both and
 * lookups silently take the first, a trap in a hand-written spec.
 */
static int check_dup_keys(const cJSON *j, const char *what, int code, struct cm_err *e)
{
	const cJSON *v;
	const char **names, *dup;
	size_t n = 0;
	int ret;

	if (!cJSON_IsObject(j) && !cJSON_IsArray(j))
		return 0;
	cJSON_ArrayForEach(v, j) {
		if ((ret = check_dup_keys(v, what, code, e)))
			return ret;
		n++;
	}
	if (!cJSON_IsObject(j) || n < 2)
		return 0;
	names = cm_mallocarray(n, sizeof(*names));
	if (!names)
		return cm_err_set(e, -ENOMEM, "%s: out of memory", what);
	n = 0;
	cJSON_ArrayForEach(v, j)
		names[n++] = v->string;
	dup = find_dup(names, n);
	if (dup == (const char *)names)
		ret = cm_err_set(e, -ENOMEM, "%s: out of memory", what);
	else if (dup && j->string)
		ret = cm_err_set(e, code, "%s: key \"%s\" given twice in \"%s\"", what,
				 dup, j->string);
	else if (dup)
		ret = cm_err_set(e, code, "%s: key \"%s\" given twice", what, dup);
	else
		ret = 0;
	cm_free(names);
	return ret;
}

/*
 * cJSON takes NUL and other control bytes for whitespace, lets them raw into
 * strings, and ends its strings at a U+0000 ("a\u0000b" reads as "a"): the
 * strict reader of the header parser refuses all of these. It runs first,
 * with the bounds of a spec (PL_SPEC_MAX_DEPTH, PL_SPEC_MAX_VALUES), so that
 * no tree is built of text over them: cJSON took 2.1 GB for a 62 MiB spec of
 * tiny values.
 */
static int check_strict(const char *json, size_t len, const char *what, int code,
			struct cm_err *e)
{
	char lead[64];
	struct sj j = { .buf = json, .p = json, .end = json + len, .e = e, .code = code,
			.lead = lead, .max_depth = PL_SPEC_MAX_DEPTH, .no_nul = 1,
			.max_values = PL_SPEC_MAX_VALUES, .what = what };
	int ret;

	snprintf(lead, sizeof(lead), "%s: invalid JSON", what);
	ret = sj_check_document(&j);
	cm_free(j.sb);
	return ret;
}

/*
 * Parses exactly one JSON value from json[0..len): only whitespace may
 * follow it, and no key may repeat. code is the error code for bad text.
 * The strict reader decides first: text it refuses (over a bound, or not
 * strict JSON: a control byte, "\u0000", 1e999) fails with its message,
 * byte offset and what, and cJSON never sees it, so no tree is built of
 * text the bounds were not checked on.
 */
static int parse_json(const char *json, size_t len, const char *what, int code,
		      cJSON **out, struct cm_err *e)
{
	const char *end = json;
	cJSON *root;
	int ret = check_strict(json, len, what, code, e);

	if (ret)
		return ret;
	root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
	if (!root) {
		size_t at = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;

		return cm_err_set(e, code, "%s: not valid JSON (near byte %zu)", what, at);
	}
	for (; end < json + len; end++)
		if (*end != ' ' && *end != '\t' && *end != '\n' && *end != '\r') {
			cJSON_Delete(root);
			return cm_err_set(e, code, "%s: text after the JSON value (byte %zu)",
					  what, (size_t)(end - json));
		}
	if ((ret = check_dup_keys(root, what, code, e))) {
		cJSON_Delete(root);
		return ret;
	}
	*out = root;
	return 0;
}

static int parse_tensors(struct pl_spec *s, const cJSON *t, struct cm_err *e)
{
	const cJSON *v;
	const char *dup;
	size_t n = 0;

	if (!cJSON_IsArray(t))
		return cm_err_set(e, RL_E_SPEC, "spec: \"tensors\" is not a list");
	s->tensors = cm_calloc((size_t)cJSON_GetArraySize(t) + 1, sizeof(char *));
	if (!s->tensors)
		return cm_err_set(e, -ENOMEM, "spec: out of memory");
	s->has_tensors = 1;
	cJSON_ArrayForEach(v, t) {
		if (!cJSON_IsString(v))
			return cm_err_set(e, RL_E_SPEC, "spec: tensors[%zu] is not a string", n);
		s->tensors[n] = cm_strdup(v->valuestring);
		if (!s->tensors[n])
			return cm_err_set(e, -ENOMEM, "spec: out of memory");
		s->ntensors = ++n;
	}
	dup = find_dup((const char *const *)s->tensors, n);
	if (dup == (const char *)s->tensors)
		return cm_err_set(e, -ENOMEM, "spec: out of memory");
	if (dup)
		return cm_err_set(e, RL_E_SPEC, "spec: \"%s\" listed twice in \"tensors\"", dup);
	return 0;
}

/* Every field of a spec's object is one it knows. */
static int known_fields(const cJSON *root, struct cm_err *e)
{
	static const char *const names[] = { "mesh", "rules", "targets", "tensors",
					     "files_of_process", "dtype" };
	const cJSON *v;

	cJSON_ArrayForEach(v, root) {
		size_t i = 0;

		while (i < CM_ARRAY_SIZE(names) && strcmp(v->string, names[i]))
			i++;
		if (i == CM_ARRAY_SIZE(names))
			return cm_err_set(e, RL_E_SPEC, "spec: unknown field \"%s\"", v->string);
	}
	return 0;
}

/* "dtype": "F32" | "F16" | "BF16": every floating tensor converted to it
 * (rl_spec_set_dtype); null: as stored. */
static int parse_dtype(struct pl_spec *t, const cJSON *v, struct cm_err *e)
{
	int dt;

	if (cJSON_IsNull(v))
		return pl_spec_set_dtype(t, -1, e);
	if (!cJSON_IsString(v))
		return cm_err_set(e, RL_E_SPEC, "spec: \"dtype\" is not a string");
	dt = pl_dtype_lookup(v->valuestring, strlen(v->valuestring));
	if (dt < 0)
		return cm_err_set(e, RL_E_DTYPE, "spec: \"dtype\": unknown dtype \"%s\"",
				  v->valuestring);
	return pl_spec_set_dtype(t, dt, e);
}

int pl_spec_parse(struct pl_spec *s, const char *json, size_t len, struct cm_err *e)
{
	struct pl_spec t;
	cJSON *root;
	const cJSON *v;
	size_t i;
	int ret;

	if (!json)
		return cm_err_set(e, RL_E_SPEC, "spec: no text");
	if ((ret = parse_json(json, len, "spec", RL_E_SPEC, &root, e)))
		return ret;
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return cm_err_set(e, RL_E_SPEC, "spec: not a JSON object");
	}
	if (spec_init(&t)) {
		cJSON_Delete(root);
		return cm_err_set(e, -ENOMEM, "spec: out of memory");
	}
	if ((ret = known_fields(root, e)))
		goto out;
	v = cJSON_GetObjectItemCaseSensitive(root, "dtype");
	if (v && (ret = parse_dtype(&t, v, e)))
		goto out;
	v = cJSON_GetObjectItemCaseSensitive(root, "mesh");
	if (v && (ret = parse_mesh(&t, v, e)))
		goto out;
	v = cJSON_GetObjectItemCaseSensitive(root, "rules");
	if (v && !cJSON_IsArray(v)) {
		ret = cm_err_set(e, RL_E_SPEC, "spec: \"rules\" is not a list");
		goto out;
	}
	if (v && (unsigned)cJSON_GetArraySize(v) > PL_MAX_RULES) {
		ret = cm_err_set(e, RL_E_TOO_LARGE, "spec: %d rules, over the limit of %u",
				 cJSON_GetArraySize(v), PL_MAX_RULES);
		goto out;
	}
	i = 0;
	if (v) {
		const cJSON *r;

		cJSON_ArrayForEach(r, v) {
			if ((ret = parse_rule(&t, r, i++, e)))
				goto out;
		}
	}
	v = cJSON_GetObjectItemCaseSensitive(root, "targets");
	if (v && !cJSON_IsArray(v)) {
		ret = cm_err_set(e, RL_E_SPEC_TARGET, "spec: \"targets\" is not a list");
		goto out;
	}
	i = 0;
	if (v) {
		const cJSON *r;

		cJSON_ArrayForEach(r, v) {
			if ((ret = pl_target_parse(&t, r, i++, e)))
				goto out;
		}
	}
	v = cJSON_GetObjectItemCaseSensitive(root, "tensors");
	if (v && (ret = parse_tensors(&t, v, e)))
		goto out;
	v = cJSON_GetObjectItemCaseSensitive(root, "files_of_process");
	if (v && (ret = pl_avail_parse(&t, v, e)))
		goto out;
	if (!cJSON_GetObjectItemCaseSensitive(root, "dtype"))
		t.convert = s->convert; /* rl_spec_set_dtype's, before the text */
	spec_clear(s);
	*s = t;
	cJSON_Delete(root);
	return 0;
out:
	spec_clear(&t);
	cJSON_Delete(root);
	return ret;
}

int pl_spec_add_target_json(struct pl_spec *s, const char *json, size_t len,
			    struct cm_err *e)
{
	char what[32];
	cJSON *root;
	int ret;

	if (!json)
		return cm_err_set(e, RL_E_SPEC_TARGET, "target: no text");
	snprintf(what, sizeof(what), "target %zu", s->ntargets);
	if ((ret = parse_json(json, len, what, RL_E_SPEC_TARGET, &root, e)))
		return ret;
	ret = pl_target_parse(s, root, s->ntargets, e);
	cJSON_Delete(root);
	return ret;
}
