/*
 * items.c - the loaded items a plan is made of: checkpoint tensors not
 * consumed as sources of targets, then the targets (resolved against the
 * checkpoint: sources found, shapes and dtypes checked), optionally
 * narrowed by the spec's "tensors" selection; each with the first rule
 * matching its name.
 */
#include <errno.h>
#include <inttypes.h>
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

static int set_rule(const struct pl_spec *s, struct pl_item *it, uint64_t *tries,
		    struct cm_err *e)
{
	long r = pl_spec_match_tries(s, it->name, tries);

	if (r == PL_MATCH_OVER)
		return cm_err_set(e, RL_E_TOO_LARGE, "spec: matching its %zu rules took over the "
				  "limit of %" PRIu64 " regex attempts plus %u per tensor, at tensor "
				  "\"%s\" (many rules share one literal key; docs/sharding-spec.md)",
				  s->nrules, pl_limit(PL_LIMIT_MATCH_TRIES),
				  PL_MATCH_TRIES_PER_TENSOR, it->name);
	it->rule = (int32_t)r;
	if (r >= 0 && s->rules[r].ndims > it->ndim)
		return cm_err_set(e, RL_E_SPEC_RANK,
				  "rule %ld (\"%s\"): spec of %u dimensions for tensor \"%s\" of rank %u",
				  r, s->rules[r].pattern, s->rules[r].ndims, it->name,
				  (unsigned)it->ndim);
	return 0;
}

static int item_init(struct pl_item *it, const char *name, unsigned ndim,
		     const uint64_t *shape)
{
	it->name = cm_strdup(name);
	it->shape = cm_mallocarray(ndim ? ndim : 1, sizeof(uint64_t));
	if (!it->name || !it->shape)
		return -ENOMEM;
	if (ndim)
		memcpy(it->shape, shape, ndim * sizeof(uint64_t));
	it->ndim = (uint8_t)ndim;
	return 0;
}

/* Finds t's sources: parts[0 .. t->nsources) and *first, all of one dtype
 * and shape. */
static int target_sources(const struct pl_ckpt *ck, const struct pl_target *t,
			  struct pl_part *parts, const struct pl_tensor **first,
			  struct cm_err *e)
{
	*first = NULL;
	for (size_t i = 0; i < t->nsources; i++) {
		long k = find_tensor(ck, t->sources[i]);
		const struct pl_tensor *src, *f = *first;

		if (k < 0)
			return cm_err_set(e, RL_E_MISSING_TENSOR,
					  "target \"%s\": source tensor \"%s\" not found",
					  t->name, t->sources[i]);
		src = &ck->tensors[k];
		if (src->ndim > RL_MAX_DIMS - (t->kind == PL_T_STACK ? t->nstack : 0))
			return cm_err_set(e, RL_E_TOO_LARGE,
					  "target \"%s\": source \"%s\" has too many dimensions",
					  t->name, src->name);
		if (f && (src->dtype != f->dtype || src->ndim != f->ndim ||
			  (src->ndim && memcmp(src->shape, f->shape, src->ndim * sizeof(uint64_t)))))
			return cm_err_set(e, RL_E_SHAPE_MISMATCH,
					  "target \"%s\": shape mismatch: stacked sources \"%s\" and \"%s\" differ in dtype or shape",
					  t->name, f->name, src->name);
		*first = f ? f : src;
		memset(&parts[i], 0, sizeof(parts[i]));
		parts[i].src = (uint32_t)k;
		parts[i].nlead = t->kind == PL_T_STACK ? t->nstack : 0;
		parts[i].lead = i;
	}
	return 0;
}

/* t's shape: the stacked axes, then the source's (sliced) dimensions;
 * a slice's starts go into part 0. */
static int target_shape(const struct pl_target *t, const struct pl_tensor *first,
			struct pl_part *part0, uint64_t *shape, unsigned *ndim,
			struct cm_err *e)
{
	*ndim = 0;
	if (t->kind == PL_T_STACK)
		for (unsigned i = 0; i < t->nstack; i++)
			shape[(*ndim)++] = t->stack_shape[i];
	if (t->kind == PL_T_SLICE && t->nslice > first->ndim)
		return cm_err_set(e, RL_E_SPEC_TARGET,
				  "target \"%s\": slice of %u dimensions for source \"%s\" of rank %u",
				  t->name, t->nslice, first->name, (unsigned)first->ndim);
	for (unsigned d = 0; d < first->ndim; d++) {
		uint64_t dim = first->shape[d];

		if (t->kind == PL_T_SLICE && d < t->nslice) {
			uint64_t a = t->slice_start[d], b = t->slice_stop[d];

			if (b == UINT64_MAX)
				b = dim;
			if (a > dim || b > dim || a > b)
				return cm_err_set(e, RL_E_SPEC_TARGET,
						  "target \"%s\": slice[%u] [%llu, %llu) outside dimension %llu of \"%s\"",
						  t->name, d, (unsigned long long)a,
						  (unsigned long long)b, (unsigned long long)dim,
						  first->name);
			part0->slice[d] = a;
			dim = b - a;
		}
		shape[(*ndim)++] = dim;
	}
	return 0;
}

/* t's declared shape and dtype, if any, against what its sources give. */
static int target_declared(const struct pl_target *t, const struct pl_tensor *first,
			   const uint64_t *shape, unsigned ndim, struct cm_err *e)
{
	const char *have = pl_dtype_name(first->dtype);

	if (t->has_shape && (t->shape_ndim != ndim ||
			     (ndim && memcmp(t->shape, shape, ndim * sizeof(uint64_t)))))
		return cm_err_set(e, RL_E_SHAPE_MISMATCH,
				  "target \"%s\": shape mismatch: declared shape differs from its sources'",
				  t->name);
	if (t->dtype && (!have || strcmp(have, t->dtype)))
		return cm_err_set(e, RL_E_SHAPE_MISMATCH,
				  "target \"%s\": shape mismatch: declared dtype %s, source \"%s\" is %s",
				  t->name, t->dtype, first->name, have ? have : "?");
	return 0;
}

/* Resolves target t into item it and its parts (appended at *np). */
static int target_item(const struct pl_ckpt *ck, const struct pl_spec *s,
		       const struct pl_target *t, struct pl_item *it,
		       struct pl_part *parts, size_t *np, uint64_t *tries, struct cm_err *e)
{
	const struct pl_tensor *first;
	uint64_t shape[RL_MAX_DIMS];
	unsigned ndim;
	int ret;

	if ((ret = target_sources(ck, t, parts + *np, &first, e)) ||
	    (ret = target_shape(t, first, parts + *np, shape, &ndim, e)) ||
	    (ret = target_declared(t, first, shape, ndim, e)))
		return ret;
	if (item_init(it, t->name, ndim, shape))
		return cm_err_set(e, -ENOMEM, "target \"%s\": out of memory", t->name);
	it->dtype = first->dtype;
	it->bits = (uint16_t)tensor_bits(first);
	it->src = parts[*np].src;
	it->first_part = (uint32_t)*np;
	it->nparts = (uint32_t)t->nsources;
	*np += t->nsources;
	return set_rule(s, it, tries, e);
}

void pl_items_free(struct pl_item *items, size_t n, struct pl_part *parts)
{
	for (size_t i = 0; items && i < n; i++) {
		cm_free(items[i].name);
		cm_free(items[i].shape);
	}
	cm_free(items);
	cm_free(parts);
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

/* Building the items: the inputs, the lists, and the selection's state. */
struct build {
	const struct pl_ckpt *ck;
	const struct pl_spec *s;
	struct cm_err *e;
	struct pl_item *items;
	size_t nitems;
	struct pl_part *parts;
	size_t nparts;
	uint8_t *consumed;          /* per checkpoint tensor: a target's source */
	uint8_t *hit;               /* per selection entry: found */
	uint32_t *sel;              /* selection entries sorted by name */
	uint64_t tries;             /* regex attempts left to rule matching */
};

static int build_alloc(struct build *b)
{
	const struct pl_spec *s = b->s;
	size_t maxparts = 0;

	for (size_t i = 0; i < s->ntargets; i++)
		maxparts += s->targets[i].nsources;
	if (b->ck->ntensors + s->ntargets > pl_limit(PL_LIMIT_TENSORS))
		return cm_err_set(b->e, RL_E_TOO_LARGE, "plan: %zu tensors and targets (at most %"
				  PRIu64 ")", b->ck->ntensors + s->ntargets,
				  pl_limit(PL_LIMIT_TENSORS));
	b->tries = pl_limit(PL_LIMIT_MATCH_TRIES) +
		   (uint64_t)PL_MATCH_TRIES_PER_TENSOR * (b->ck->ntensors + s->ntargets);
	b->items = cm_calloc(b->ck->ntensors + s->ntargets + 1, sizeof(*b->items));
	b->parts = cm_calloc(maxparts + 1, sizeof(*b->parts));
	b->consumed = cm_calloc(b->ck->ntensors + 1, 1);
	b->hit = cm_calloc(s->ntensors + 1, 1);
	b->sel = cm_mallocarray(s->ntensors + 1, sizeof(*b->sel));
	if (!b->items || !b->parts || !b->consumed || !b->hit || !b->sel)
		return cm_err_set(b->e, -ENOMEM, "plan: out of memory");
	for (size_t i = 0; i < s->ntensors; i++)
		b->sel[i] = (uint32_t)i;
	qsort_r(b->sel, s->ntensors, sizeof(*b->sel), sel_cmp, s->tensors);
	return 0;
}

/*
 * Marks the targets' sources; a target may take a checkpoint tensor's name
 * only if that tensor is consumed (renamed or reshaped in place) or not
 * selected.
 */
static int mark_sources(struct build *b)
{
	const struct pl_spec *s = b->s;

	for (size_t i = 0; i < s->ntargets; i++)
		for (size_t j = 0; j < s->targets[i].nsources; j++) {
			long k = find_tensor(b->ck, s->targets[i].sources[j]);

			if (k >= 0)
				b->consumed[k] = 1;
		}
	for (size_t i = 0; i < s->ntargets; i++) {
		long k = find_tensor(b->ck, s->targets[i].name);

		if (k >= 0 && !b->consumed[k] && selected(s, b->sel, s->targets[i].name, b->hit))
			return cm_err_set(b->e, RL_E_SPEC_TARGET,
					  "target \"%s\": name of a checkpoint tensor that is loaded too",
					  s->targets[i].name);
	}
	return 0;
}

/* The checkpoint's tensors that are loaded as they are. */
static int add_tensors(struct build *b)
{
	for (size_t i = 0; i < b->ck->ntensors; i++) {
		const struct pl_tensor *t = &b->ck->tensors[i];
		struct pl_item *it = &b->items[b->nitems];
		int ret;

		if (b->consumed[i] || !selected(b->s, b->sel, t->name, b->hit))
			continue;
		if (t->ndim > RL_MAX_DIMS)
			return cm_err_set(b->e, RL_E_TOO_LARGE,
					  "tensor \"%s\": %u dimensions (at most %d)",
					  t->name, (unsigned)t->ndim, RL_MAX_DIMS);
		b->nitems++;
		if (item_init(it, t->name, t->ndim, t->shape))
			return cm_err_set(b->e, -ENOMEM, "plan: out of memory");
		it->dtype = t->dtype;
		it->bits = (uint16_t)tensor_bits(t);
		it->src = (uint32_t)i;
		if ((ret = set_rule(b->s, it, &b->tries, b->e)))
			return ret;
	}
	return 0;
}

/* The selected targets, then every selected name must have been found. */
static int add_targets(struct build *b)
{
	const struct pl_spec *s = b->s;
	int ret;

	for (size_t i = 0; i < s->ntargets; i++) {
		if (!selected(s, b->sel, s->targets[i].name, b->hit))
			continue;
		b->nitems++;
		ret = target_item(b->ck, s, &s->targets[i], &b->items[b->nitems - 1], b->parts,
				  &b->nparts, &b->tries, b->e);
		if (ret)
			return ret;
	}
	for (size_t i = 0; i < s->ntensors; i++)
		if (!b->hit[i])
			return cm_err_set(b->e, RL_E_MISSING_TENSOR,
					  "spec: selected tensor \"%s\" not found", s->tensors[i]);
	return 0;
}

int pl_items_build(const struct pl_ckpt *ck, const struct pl_spec *s,
		   struct pl_item **itemsp, size_t *nitemsp,
		   struct pl_part **partsp, size_t *npartsp, struct cm_err *e)
{
	struct build b = { .ck = ck, .s = s, .e = e };
	int ret;

	if ((ret = build_alloc(&b)) || (ret = mark_sources(&b)) || (ret = add_tensors(&b)) ||
	    (ret = add_targets(&b))) {
		pl_items_free(b.items, b.nitems, b.parts);
	} else {
		*itemsp = b.items;
		*nitemsp = b.nitems;
		*partsp = b.parts;
		*npartsp = b.nparts;
	}
	cm_free(b.consumed);
	cm_free(b.hit);
	cm_free(b.sel);
	return ret;
}
