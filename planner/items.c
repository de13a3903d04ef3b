/*
 * items.c - the loaded items a plan is made of: checkpoint tensors not
 * consumed as sources of targets, then the targets (resolved against the
 * checkpoint: sources found, shapes and dtypes checked), optionally
 * narrowed by the spec's "tensors" selection; each with the first rule
 * matching its name.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pl_private.h"

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
