/*
 * targets.c - the spec's "targets" section (tensors assembled from
 * sources: stacked along one or more new leading axes, a slice of a fused
 * source, or an alias of a tied weight) and the list of loaded items a
 * plan is made of: checkpoint tensors not consumed as sources, then the
 * targets, optionally narrowed by the spec's "tensors" selection.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pl_private.h"

void pl_target_clear(struct pl_target *t)
{
	rl_free(t->name);
	for (size_t i = 0; i < t->nsources; i++)
		rl_free(t->sources[i]);
	rl_free(t->sources);
	rl_free(t->dtype);
	memset(t, 0, sizeof(*t));
}

static int json_u64(const cJSON *j, uint64_t *out)
{
	double v;

	if (!cJSON_IsNumber(j))
		return -1;
	v = j->valuedouble;
	if (!(v >= 0) || v != floor(v) || v > 9007199254740992.0)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

/* Measures a nested list of strings: depth and lengths, uniform. */
static int stack_shape(const cJSON *j, unsigned depth, struct pl_target *t,
		       size_t idx, struct rl_err *e)
{
	const cJSON *v;
	uint64_t n = (uint64_t)cJSON_GetArraySize(j);

	if (!n)
		return rl_err_set(e, RL_E_SPEC_TARGET,
				  "target %zu (\"%s\"): empty \"stack\" list", idx, t->name);
	if (depth == t->nstack) {
		if (depth == PL_MAX_STACK)
			return rl_err_set(e, RL_E_SPEC_TARGET,
					  "target %zu (\"%s\"): \"stack\" nested deeper than %d",
					  idx, t->name, PL_MAX_STACK);
		t->stack_shape[t->nstack++] = n;
	} else if (t->stack_shape[depth] != n) {
		return rl_err_set(e, RL_E_SPEC_TARGET,
				  "target %zu (\"%s\"): \"stack\" lists of unequal lengths",
				  idx, t->name);
	}
	cJSON_ArrayForEach(v, j) {
		int ret;

		if (cJSON_IsArray(v)) {
			if ((ret = stack_shape(v, depth + 1, t, idx, e)))
				return ret;
		} else if (!cJSON_IsString(v)) {
			return rl_err_set(e, RL_E_SPEC_TARGET,
					  "target %zu (\"%s\"): \"stack\" holds a non-string",
					  idx, t->name);
		}
	}
	return 0;
}

/* Flattens the leaves in row-major order, checking uniform depth. */
static int stack_leaves(const cJSON *j, unsigned depth, struct pl_target *t,
			size_t idx, struct rl_err *e)
{
	const cJSON *v;

	cJSON_ArrayForEach(v, j) {
		int ret;

		if (cJSON_IsArray(v) != (depth + 1 < t->nstack))
			return rl_err_set(e, RL_E_SPEC_TARGET,
					  "target %zu (\"%s\"): \"stack\" nesting is not uniform",
					  idx, t->name);
		if (cJSON_IsArray(v)) {
			if ((ret = stack_leaves(v, depth + 1, t, idx, e)))
				return ret;
			continue;
		}
		t->sources[t->nsources] = rl_strdup(v->valuestring);
		if (!t->sources[t->nsources++])
			return rl_err_set(e, -ENOMEM, "target %zu: out of memory", idx);
	}
	return 0;
}

static int parse_target(struct pl_target *t, const cJSON *j, size_t idx,
			struct rl_err *e)
{
	const cJSON *name, *stack, *source, *slice, *shape, *dtype, *v;

	if (!cJSON_IsObject(j))
		return rl_err_set(e, RL_E_SPEC_TARGET, "target %zu: not an object", idx);
	cJSON_ArrayForEach(v, j) {
		static const char *const known[] = { "name", "stack", "source", "slice",
						     "shape", "dtype" };
		size_t k;

		for (k = 0; k < RL_ARRAY_SIZE(known); k++)
			if (!strcmp(v->string, known[k]))
				break;
		if (k == RL_ARRAY_SIZE(known))
			return rl_err_set(e, RL_E_SPEC_TARGET, "target %zu: unknown field \"%s\"",
					  idx, v->string);
	}
	name = cJSON_GetObjectItemCaseSensitive(j, "name");
	if (!cJSON_IsString(name))
		return rl_err_set(e, RL_E_SPEC_TARGET, "target %zu: \"name\" must be a string",
				  idx);
	if (!name->valuestring[0])
		return rl_err_set(e, RL_E_SPEC_TARGET, "target %zu: \"name\" must not be empty",
				  idx);
	t->name = rl_strdup(name->valuestring);
	if (!t->name)
		return rl_err_set(e, -ENOMEM, "target %zu: out of memory", idx);
	stack = cJSON_GetObjectItemCaseSensitive(j, "stack");
	source = cJSON_GetObjectItemCaseSensitive(j, "source");
	slice = cJSON_GetObjectItemCaseSensitive(j, "slice");
	if (!!stack == !!source)
		return rl_err_set(e, RL_E_SPEC_TARGET,
				  "target %zu (\"%s\"): give exactly one of \"stack\" and \"source\"",
				  idx, t->name);
	if (stack) {
		int ret;
		uint64_t n = 1;

		if (slice)
			return rl_err_set(e, RL_E_SPEC_TARGET,
					  "target %zu (\"%s\"): \"slice\" needs \"source\"", idx, t->name);
		if (!cJSON_IsArray(stack))
			return rl_err_set(e, RL_E_SPEC_TARGET,
					  "target %zu (\"%s\"): \"stack\" is not a list", idx, t->name);
		t->kind = PL_T_STACK;
		if ((ret = stack_shape(stack, 0, t, idx, e)))
			return ret;
		for (unsigned i = 0; i < t->nstack; i++)
			if (rl_mul64(n, t->stack_shape[i], &n) || n > UINT32_MAX)
				return rl_err_set(e, RL_E_SPEC_TARGET,
						  "target %zu (\"%s\"): too many sources", idx, t->name);
		t->sources = rl_calloc(n, sizeof(char *));
		if (!t->sources)
			return rl_err_set(e, -ENOMEM, "target %zu: out of memory", idx);
		if ((ret = stack_leaves(stack, 0, t, idx, e)))
			return ret;
	} else {
		if (!cJSON_IsString(source))
			return rl_err_set(e, RL_E_SPEC_TARGET,
					  "target %zu (\"%s\"): \"source\" must be a string",
					  idx, t->name);
		t->kind = slice ? PL_T_SLICE : PL_T_ALIAS;
		t->sources = rl_calloc(1, sizeof(char *));
		if (!t->sources || !(t->sources[0] = rl_strdup(source->valuestring)))
			return rl_err_set(e, -ENOMEM, "target %zu: out of memory", idx);
		t->nsources = 1;
	}
	if (slice) {
		if (!cJSON_IsArray(slice) || cJSON_GetArraySize(slice) > RL_MAX_DIMS)
			return rl_err_set(e, RL_E_SPEC_TARGET,
					  "target %zu (\"%s\"): \"slice\" must be a list of at most %d entries",
					  idx, t->name, RL_MAX_DIMS);
		cJSON_ArrayForEach(v, slice) {
			unsigned d = t->nslice++;

			t->slice_start[d] = 0;
			t->slice_stop[d] = UINT64_MAX;
			if (cJSON_IsNull(v))
				continue;
			if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2)
				return rl_err_set(e, RL_E_SPEC_TARGET,
						  "target %zu (\"%s\"): slice[%u] must be null or [start, stop]",
						  idx, t->name, d);
			/* JSON numbers are exact integers only up to 2^53. */
			if (json_u64(cJSON_GetArrayItem(v, 0), &t->slice_start[d]) ||
			    json_u64(cJSON_GetArrayItem(v, 1), &t->slice_stop[d]))
				return rl_err_set(e, RL_E_SPEC_TARGET,
						  "target %zu (\"%s\"): slice[%u]: bounds must be integers in [0, 2^53]",
						  idx, t->name, d);
			if (t->slice_start[d] > t->slice_stop[d])
				return rl_err_set(e, RL_E_SPEC_TARGET,
						  "target %zu (\"%s\"): slice[%u]: start %llu after stop %llu",
						  idx, t->name, d,
						  (unsigned long long)t->slice_start[d],
						  (unsigned long long)t->slice_stop[d]);
		}
	}
	shape = cJSON_GetObjectItemCaseSensitive(j, "shape");
	if (shape) {
		if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > RL_MAX_DIMS)
			return rl_err_set(e, RL_E_SPEC_TARGET,
					  "target %zu (\"%s\"): \"shape\" must be a list of at most %d sizes",
					  idx, t->name, RL_MAX_DIMS);
		t->has_shape = 1;
		cJSON_ArrayForEach(v, shape) {
			if (json_u64(v, &t->shape[t->shape_ndim++]))
				return rl_err_set(e, RL_E_SPEC_TARGET,
						  "target %zu (\"%s\"): shape[%u] is not a non-negative integer",
						  idx, t->name, t->shape_ndim - 1);
		}
	}
	dtype = cJSON_GetObjectItemCaseSensitive(j, "dtype");
	if (dtype) {
		if (!cJSON_IsString(dtype))
			return rl_err_set(e, RL_E_SPEC_TARGET,
					  "target %zu (\"%s\"): \"dtype\" must be a string", idx, t->name);
		if (pl_dtype_lookup(dtype->valuestring, strlen(dtype->valuestring)) < 0)
			return rl_err_set(e, RL_E_SPEC_TARGET,
					  "target %zu (\"%s\"): unknown dtype \"%s\"", idx, t->name,
					  dtype->valuestring);
		t->dtype = rl_strdup(dtype->valuestring);
		if (!t->dtype)
			return rl_err_set(e, -ENOMEM, "target %zu: out of memory", idx);
	}
	return 0;
}

int pl_target_parse(struct pl_spec *s, const cJSON *j, size_t idx, struct rl_err *e)
{
	struct pl_target t, *nt;
	int ret;

	memset(&t, 0, sizeof(t));
	ret = parse_target(&t, j, idx, e);
	if (ret)
		goto fail;
	for (size_t i = 0; i < s->ntargets; i++)
		if (!strcmp(s->targets[i].name, t.name)) {
			ret = rl_err_set(e, RL_E_SPEC_TARGET, "target %zu: name \"%s\" used twice",
					 idx, t.name);
			goto fail;
		}
	nt = rl_reallocarray(s->targets, s->ntargets + 1, sizeof(*nt));
	if (!nt) {
		ret = rl_err_set(e, -ENOMEM, "target %zu: out of memory", idx);
		goto fail;
	}
	s->targets = nt;
	s->targets[s->ntargets++] = t;
	return 0;
fail:
	pl_target_clear(&t);
	return ret;
}

/* ---------------------------------------------------------------- */
/* Loaded items                                                      */
/* ---------------------------------------------------------------- */

static long find_tensor(const struct pl_ckpt *ck, const char *name)
{
	size_t lo = 0, hi = ck->ntensors;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(ck->tensors[ck->by_name[mid]].name, name);

		if (!c)
			return ck->by_name[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/*
 * Bits per element. The reader validated nbytes == elements x bits / 8,
 * so the table lookup and this agree; the table is authoritative.
 */
static unsigned tensor_bits(const struct pl_tensor *t)
{
	return pl_dtype_bits(t->dtype);
}

static int set_rule(const struct pl_spec *s, struct pl_item *it, struct rl_err *e)
{
	long r = pl_spec_match(s, it->name);

	it->rule = (int32_t)r;
	if (r >= 0 && s->rules[r].ndims > it->ndim)
		return rl_err_set(e, RL_E_SPEC_RANK,
				  "rule %ld (\"%s\"): spec of %u dimensions for tensor \"%s\" of rank %u",
				  r, s->rules[r].pattern, s->rules[r].ndims, it->name,
				  (unsigned)it->ndim);
	return 0;
}

static int item_init(struct pl_item *it, const char *name, unsigned ndim,
		     const uint64_t *shape)
{
	it->name = rl_strdup(name);
	it->shape = rl_mallocarray(ndim ? ndim : 1, sizeof(uint64_t));
	if (!it->name || !it->shape)
		return -ENOMEM;
	if (ndim)
		memcpy(it->shape, shape, ndim * sizeof(uint64_t));
	it->ndim = (uint8_t)ndim;
	return 0;
}

/* Resolves target t into item it and its parts (appended at *np). */
static int target_item(const struct pl_ckpt *ck, const struct pl_spec *s,
		       const struct pl_target *t, struct pl_item *it,
		       struct pl_part *parts, size_t *np, struct rl_err *e)
{
	const struct pl_tensor *first = NULL;
	uint64_t shape[RL_MAX_DIMS];
	unsigned ndim;

	for (size_t i = 0; i < t->nsources; i++) {
		long k = find_tensor(ck, t->sources[i]);
		const struct pl_tensor *src;
		struct pl_part *p = &parts[*np + i];

		if (k < 0)
			return rl_err_set(e, RL_E_MISSING_TENSOR,
					  "target \"%s\": source tensor \"%s\" not found",
					  t->name, t->sources[i]);
		src = &ck->tensors[k];
		if (src->ndim > RL_MAX_DIMS - (t->kind == PL_T_STACK ? t->nstack : 0))
			return rl_err_set(e, RL_E_TOO_LARGE,
					  "target \"%s\": source \"%s\" has too many dimensions",
					  t->name, src->name);
		if (!first) {
			first = src;
		} else if (src->dtype != first->dtype || src->ndim != first->ndim ||
			   (src->ndim && memcmp(src->shape, first->shape,
						src->ndim * sizeof(uint64_t)))) {
			return rl_err_set(e, RL_E_SHAPE_MISMATCH,
					  "target \"%s\": shape mismatch: stacked sources \"%s\" and \"%s\" differ in dtype or shape",
					  t->name, first->name, src->name);
		}
		memset(p, 0, sizeof(*p));
		p->src = (uint32_t)k;
		p->nlead = t->kind == PL_T_STACK ? t->nstack : 0;
		p->lead = i;
	}
	ndim = 0;
	if (t->kind == PL_T_STACK)
		for (unsigned i = 0; i < t->nstack; i++)
			shape[ndim++] = t->stack_shape[i];
	for (unsigned d = 0; d < first->ndim; d++) {
		uint64_t dim = first->shape[d];

		if (t->kind == PL_T_SLICE && d < t->nslice) {
			uint64_t a = t->slice_start[d], b = t->slice_stop[d];

			if (b == UINT64_MAX)
				b = dim;
			if (a > dim || b > dim || a > b)
				return rl_err_set(e, RL_E_SPEC_TARGET,
						  "target \"%s\": slice[%u] [%llu, %llu) outside dimension %llu of \"%s\"",
						  t->name, d, (unsigned long long)a,
						  (unsigned long long)b, (unsigned long long)dim,
						  first->name);
			parts[*np].slice[d] = a;
			dim = b - a;
		}
		shape[ndim++] = dim;
	}
	if (t->kind == PL_T_SLICE && t->nslice > first->ndim)
		return rl_err_set(e, RL_E_SPEC_TARGET,
				  "target \"%s\": slice of %u dimensions for source \"%s\" of rank %u",
				  t->name, t->nslice, first->name, (unsigned)first->ndim);
	if (t->has_shape && (t->shape_ndim != ndim ||
			     (ndim && memcmp(t->shape, shape, ndim * sizeof(uint64_t)))))
		return rl_err_set(e, RL_E_SHAPE_MISMATCH,
				  "target \"%s\": shape mismatch: declared shape differs from its sources'",
				  t->name);
	if (t->dtype) {
		const char *have = pl_dtype_name(first->dtype);

		if (!have || strcmp(have, t->dtype))
			return rl_err_set(e, RL_E_SHAPE_MISMATCH,
					  "target \"%s\": shape mismatch: declared dtype %s, source \"%s\" is %s",
					  t->name, t->dtype, first->name, have ? have : "?");
	}
	if (item_init(it, t->name, ndim, shape))
		return rl_err_set(e, -ENOMEM, "target \"%s\": out of memory", t->name);
	it->dtype = first->dtype;
	it->bits = (uint16_t)tensor_bits(first);
	it->src = parts[*np].src;
	it->first_part = (uint32_t)*np;
	it->nparts = (uint32_t)t->nsources;
	*np += t->nsources;
	return set_rule(s, it, e);
}

void pl_items_free(struct pl_item *items, size_t n, struct pl_part *parts)
{
	for (size_t i = 0; items && i < n; i++) {
		rl_free(items[i].name);
		rl_free(items[i].shape);
	}
	rl_free(items);
	rl_free(parts);
}

static int sel_cmp(const void *pa, const void *pb, void *arg)
{
	char *const *names = arg;

	return strcmp(names[*(const uint32_t *)pa], names[*(const uint32_t *)pb]);
}

/* Whether name is selected (always, without a selection); marks every
 * selection entry equal to it as found. sel: selection indices by name. */
static int selected(const struct pl_spec *s, const uint32_t *sel, const char *name,
		    uint8_t *hit)
{
	size_t lo = 0, hi = s->ntensors;

	if (!s->has_tensors)
		return 1;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(s->tensors[sel[mid]], name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == s->ntensors || strcmp(s->tensors[sel[lo]], name))
		return 0;
	for (; lo < s->ntensors && !strcmp(s->tensors[sel[lo]], name); lo++)
		hit[sel[lo]] = 1;
	return 1;
}

int pl_items_build(const struct pl_ckpt *ck, const struct pl_spec *s,
		   struct pl_item **itemsp, size_t *nitemsp,
		   struct pl_part **partsp, size_t *npartsp, struct rl_err *e)
{
	struct pl_item *items = NULL;
	struct pl_part *parts = NULL;
	uint8_t *consumed = NULL, *hit = NULL;
	uint32_t *sel = NULL;
	size_t nitems = 0, nparts = 0, maxparts = 0;
	int ret = -ENOMEM;

	for (size_t i = 0; i < s->ntargets; i++)
		maxparts += s->targets[i].nsources;
	if (ck->ntensors + s->ntargets > UINT32_MAX)
		return rl_err_set(e, RL_E_TOO_LARGE, "plan: too many tensors");
	items = rl_calloc(ck->ntensors + s->ntargets + 1, sizeof(*items));
	parts = rl_calloc(maxparts + 1, sizeof(*parts));
	consumed = rl_calloc(ck->ntensors + 1, 1);
	hit = rl_calloc(s->ntensors + 1, 1);
	sel = rl_mallocarray(s->ntensors + 1, sizeof(*sel));
	if (!items || !parts || !consumed || !hit || !sel) {
		rl_err_set(e, ret, "plan: out of memory");
		goto fail;
	}
	for (size_t i = 0; i < s->ntensors; i++)
		sel[i] = (uint32_t)i;
	qsort_r(sel, s->ntensors, sizeof(*sel), sel_cmp, s->tensors);
	for (size_t i = 0; i < s->ntargets; i++)
		for (size_t j = 0; j < s->targets[i].nsources; j++) {
			long k = find_tensor(ck, s->targets[i].sources[j]);

			if (k >= 0)
				consumed[k] = 1;
		}
	/* A target may take a checkpoint tensor's name only if that tensor is
	 * consumed (renamed or reshaped in place) or not selected. */
	for (size_t i = 0; i < s->ntargets; i++) {
		long k = find_tensor(ck, s->targets[i].name);

		if (k >= 0 && !consumed[k] && selected(s, sel, s->targets[i].name, hit)) {
			ret = rl_err_set(e, RL_E_SPEC_TARGET,
					 "target \"%s\": name of a checkpoint tensor that is loaded too",
					 s->targets[i].name);
			goto fail;
		}
	}
	for (size_t i = 0; i < ck->ntensors; i++) {
		const struct pl_tensor *t = &ck->tensors[i];
		struct pl_item *it = &items[nitems];

		if (consumed[i] || !selected(s, sel, t->name, hit))
			continue;
		if (t->ndim > RL_MAX_DIMS) {
			ret = rl_err_set(e, RL_E_TOO_LARGE,
					 "tensor \"%s\": %u dimensions (at most %d)",
					 t->name, (unsigned)t->ndim, RL_MAX_DIMS);
			goto fail;
		}
		nitems++;
		if (item_init(it, t->name, t->ndim, t->shape)) {
			ret = rl_err_set(e, -ENOMEM, "plan: out of memory");
			goto fail;
		}
		it->dtype = t->dtype;
		it->bits = (uint16_t)tensor_bits(t);
		it->src = (uint32_t)i;
		if ((ret = set_rule(s, it, e)))
			goto fail;
	}
	for (size_t i = 0; i < s->ntargets; i++) {
		if (!selected(s, sel, s->targets[i].name, hit))
			continue;
		nitems++;
		ret = target_item(ck, s, &s->targets[i], &items[nitems - 1], parts,
				  &nparts, e);
		if (ret)
			goto fail;
	}
	for (size_t i = 0; i < s->ntensors; i++)
		if (!hit[i]) {
			ret = rl_err_set(e, RL_E_MISSING_TENSOR,
					 "spec: selected tensor \"%s\" not found", s->tensors[i]);
			goto fail;
		}
	rl_free(consumed);
	rl_free(hit);
	rl_free(sel);
	*itemsp = items;
	*nitemsp = nitems;
	*partsp = parts;
	*npartsp = nparts;
	return 0;
fail:
	pl_items_free(items, nitems, parts);
	rl_free(consumed);
	rl_free(hit);
	rl_free(sel);
	return ret;
}
