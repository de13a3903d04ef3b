/*
 * targets.c - the spec's "targets" section: tensors assembled from
 * sources, stacked along one or more new leading axes, a slice of a fused
 * source, or an alias of a tied weight. items.c resolves them against a
 * checkpoint.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pl_private.h"

void pl_target_clear(struct pl_target *t)
{
	cm_free(t->name);
	for (size_t i = 0; i < t->nsources; i++)
		cm_free(t->sources[i]);
	cm_free(t->sources);
	cm_free(t->dtype);
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
		       size_t idx, struct cm_err *e)
{
	const cJSON *v;
	uint64_t n = (uint64_t)cJSON_GetArraySize(j);

	if (!n)
		return cm_err_set(e, RL_E_SPEC_TARGET,
				  "target %zu (\"%s\"): empty \"stack\" list", idx, t->name);
	if (depth == t->nstack) {
		if (depth == PL_MAX_STACK)
			return cm_err_set(e, RL_E_SPEC_TARGET,
					  "target %zu (\"%s\"): \"stack\" nested deeper than %d",
					  idx, t->name, PL_MAX_STACK);
		t->stack_shape[t->nstack++] = n;
	} else if (t->stack_shape[depth] != n) {
		return cm_err_set(e, RL_E_SPEC_TARGET,
				  "target %zu (\"%s\"): \"stack\" lists of unequal lengths",
				  idx, t->name);
	}
	cJSON_ArrayForEach(v, j) {
		int ret;

		if (cJSON_IsArray(v)) {
			if ((ret = stack_shape(v, depth + 1, t, idx, e)))
				return ret;
		} else if (!cJSON_IsString(v)) {
			return cm_err_set(e, RL_E_SPEC_TARGET,
					  "target %zu (\"%s\"): \"stack\" holds a non-string",
					  idx, t->name);
		}
	}
	return 0;
}

/* Flattens the leaves in row-major order, checking uniform depth. */
static int stack_leaves(const cJSON *j, unsigned depth, struct pl_target *t,
			size_t idx, struct cm_err *e)
{
	const cJSON *v;

	cJSON_ArrayForEach(v, j) {
		int ret;

		if (cJSON_IsArray(v) != (depth + 1 < t->nstack))
			return cm_err_set(e, RL_E_SPEC_TARGET,
					  "target %zu (\"%s\"): \"stack\" nesting is not uniform",
					  idx, t->name);
		if (cJSON_IsArray(v)) {
			if ((ret = stack_leaves(v, depth + 1, t, idx, e)))
				return ret;
			continue;
		}
		t->sources[t->nsources] = cm_strdup(v->valuestring);
		if (!t->sources[t->nsources++])
			return cm_err_set(e, -ENOMEM, "target %zu: out of memory", idx);
	}
	return 0;
}

/* Only the known fields, and a non-empty "name" (kept in t->name). */
static int target_name(struct pl_target *t, const cJSON *j, size_t idx, struct cm_err *e)
{
	static const char *const known[] = { "name", "stack", "source", "slice", "shape",
					     "dtype" };
	const cJSON *name, *v;

	if (!cJSON_IsObject(j))
		return cm_err_set(e, RL_E_SPEC_TARGET, "target %zu: not an object", idx);
	cJSON_ArrayForEach(v, j) {
		size_t k;

		for (k = 0; k < CM_ARRAY_SIZE(known); k++)
			if (!strcmp(v->string, known[k]))
				break;
		if (k == CM_ARRAY_SIZE(known))
			return cm_err_set(e, RL_E_SPEC_TARGET, "target %zu: unknown field \"%s\"",
					  idx, v->string);
	}
	name = cJSON_GetObjectItemCaseSensitive(j, "name");
	if (!cJSON_IsString(name))
		return cm_err_set(e, RL_E_SPEC_TARGET, "target %zu: \"name\" must be a string",
				  idx);
	if (!name->valuestring[0])
		return cm_err_set(e, RL_E_SPEC_TARGET, "target %zu: \"name\" must not be empty",
				  idx);
	t->name = cm_strdup(name->valuestring);
	if (!t->name)
		return cm_err_set(e, -ENOMEM, "target %zu: out of memory", idx);
	return 0;
}

/* "stack": nested lists of source names, flattened row-major. */
static int target_stack(struct pl_target *t, const cJSON *stack, size_t idx,
			struct cm_err *e)
{
	uint64_t n = 1;
	int ret;

	if (!cJSON_IsArray(stack))
		return cm_err_set(e, RL_E_SPEC_TARGET,
				  "target %zu (\"%s\"): \"stack\" is not a list", idx, t->name);
	t->kind = PL_T_STACK;
	if ((ret = stack_shape(stack, 0, t, idx, e)))
		return ret;
	for (unsigned i = 0; i < t->nstack; i++)
		if (cm_mul64(n, t->stack_shape[i], &n) || n > UINT32_MAX)
			return cm_err_set(e, RL_E_SPEC_TARGET,
					  "target %zu (\"%s\"): too many sources", idx, t->name);
	t->sources = cm_calloc(n, sizeof(char *));
	if (!t->sources)
		return cm_err_set(e, -ENOMEM, "target %zu: out of memory", idx);
	return stack_leaves(stack, 0, t, idx, e);
}

/* Exactly one of "stack" and "source" (an alias, or a slice with "slice"). */
static int target_sources(struct pl_target *t, const cJSON *j, size_t idx,
			  struct cm_err *e)
{
	const cJSON *stack = cJSON_GetObjectItemCaseSensitive(j, "stack");
	const cJSON *source = cJSON_GetObjectItemCaseSensitive(j, "source");
	const cJSON *slice = cJSON_GetObjectItemCaseSensitive(j, "slice");

	if (!!stack == !!source)
		return cm_err_set(e, RL_E_SPEC_TARGET,
				  "target %zu (\"%s\"): give exactly one of \"stack\" and \"source\"",
				  idx, t->name);
	if (stack && slice)
		return cm_err_set(e, RL_E_SPEC_TARGET,
				  "target %zu (\"%s\"): \"slice\" needs \"source\"", idx, t->name);
	if (stack)
		return target_stack(t, stack, idx, e);
	if (!cJSON_IsString(source))
		return cm_err_set(e, RL_E_SPEC_TARGET,
				  "target %zu (\"%s\"): \"source\" must be a string", idx, t->name);
	t->kind = slice ? PL_T_SLICE : PL_T_ALIAS;
	t->sources = cm_calloc(1, sizeof(char *));
	if (!t->sources || !(t->sources[0] = cm_strdup(source->valuestring)))
		return cm_err_set(e, -ENOMEM, "target %zu: out of memory", idx);
	t->nsources = 1;
	return 0;
}

/* "slice": per leading source dimension, null or [start, stop]. */
static int target_slice(struct pl_target *t, const cJSON *slice, size_t idx,
			struct cm_err *e)
{
	const cJSON *v;

	if (!cJSON_IsArray(slice) || cJSON_GetArraySize(slice) > RL_MAX_DIMS)
		return cm_err_set(e, RL_E_SPEC_TARGET,
				  "target %zu (\"%s\"): \"slice\" must be a list of at most %d entries",
				  idx, t->name, RL_MAX_DIMS);
	cJSON_ArrayForEach(v, slice) {
		unsigned d = t->nslice++;

		t->slice_start[d] = 0;
		t->slice_stop[d] = UINT64_MAX;
		if (cJSON_IsNull(v))
			continue;
		if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2)
			return cm_err_set(e, RL_E_SPEC_TARGET,
					  "target %zu (\"%s\"): slice[%u] must be null or [start, stop]",
					  idx, t->name, d);
		/* JSON numbers are exact integers only up to 2^53. */
		if (json_u64(cJSON_GetArrayItem(v, 0), &t->slice_start[d]) ||
		    json_u64(cJSON_GetArrayItem(v, 1), &t->slice_stop[d]))
			return cm_err_set(e, RL_E_SPEC_TARGET,
					  "target %zu (\"%s\"): slice[%u]: bounds must be integers in [0, 2^53]",
					  idx, t->name, d);
		if (t->slice_start[d] > t->slice_stop[d])
			return cm_err_set(e, RL_E_SPEC_TARGET,
					  "target %zu (\"%s\"): slice[%u]: start %llu after stop %llu",
					  idx, t->name, d, (unsigned long long)t->slice_start[d],
					  (unsigned long long)t->slice_stop[d]);
	}
	return 0;
}

/* The optional declarations "shape" and "dtype", checked later. */
static int target_declared(struct pl_target *t, const cJSON *j, size_t idx,
			   struct cm_err *e)
{
	const cJSON *shape = cJSON_GetObjectItemCaseSensitive(j, "shape");
	const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(j, "dtype"), *v;

	if (shape) {
		if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > RL_MAX_DIMS)
			return cm_err_set(e, RL_E_SPEC_TARGET,
					  "target %zu (\"%s\"): \"shape\" must be a list of at most %d sizes",
					  idx, t->name, RL_MAX_DIMS);
		t->has_shape = 1;
		cJSON_ArrayForEach(v, shape) {
			if (json_u64(v, &t->shape[t->shape_ndim++]))
				return cm_err_set(e, RL_E_SPEC_TARGET,
						  "target %zu (\"%s\"): shape[%u] is not a non-negative integer",
						  idx, t->name, t->shape_ndim - 1);
		}
	}
	if (!dtype)
		return 0;
	if (!cJSON_IsString(dtype))
		return cm_err_set(e, RL_E_SPEC_TARGET,
				  "target %zu (\"%s\"): \"dtype\" must be a string", idx, t->name);
	if (pl_dtype_lookup(dtype->valuestring, strlen(dtype->valuestring)) < 0)
		return cm_err_set(e, RL_E_SPEC_TARGET, "target %zu (\"%s\"): unknown dtype \"%s\"",
				  idx, t->name, dtype->valuestring);
	t->dtype = cm_strdup(dtype->valuestring);
	if (!t->dtype)
		return cm_err_set(e, -ENOMEM, "target %zu: out of memory", idx);
	return 0;
}

static int parse_target(struct pl_target *t, const cJSON *j, size_t idx,
			struct cm_err *e)
{
	const cJSON *slice;
	int ret;

	if ((ret = target_name(t, j, idx, e)) || (ret = target_sources(t, j, idx, e)))
		return ret;
	slice = cJSON_GetObjectItemCaseSensitive(j, "slice");
	if (slice && (ret = target_slice(t, slice, idx, e)))
		return ret;
	return target_declared(t, j, idx, e);
}

int pl_target_parse(struct pl_spec *s, const cJSON *j, size_t idx, struct cm_err *e)
{
	struct pl_target t, *nt;
	int ret;

	memset(&t, 0, sizeof(t));
	ret = parse_target(&t, j, idx, e);
	if (ret)
		goto fail;
	for (size_t i = 0; i < s->ntargets; i++)
		if (!strcmp(s->targets[i].name, t.name)) {
			ret = cm_err_set(e, RL_E_SPEC_TARGET, "target %zu: name \"%s\" used twice",
					 idx, t.name);
			goto fail;
		}
	nt = cm_reallocarray(s->targets, s->ntargets + 1, sizeof(*nt));
	if (!nt) {
		ret = cm_err_set(e, -ENOMEM, "target %zu: out of memory", idx);
		goto fail;
	}
	s->targets = nt;
	s->targets[s->ntargets++] = t;
	return 0;
fail:
	pl_target_clear(&t);
	return ret;
}
