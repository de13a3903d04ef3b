/*
 * readonce.c - which bytes travel by transfer (RL_PLAN_READ_ONCE, or
 * files_of_process), tensor by tensor.
 *
 * The boxes of a tensor tile it, and two devices hold the same box or
 * disjoint ones; a box's id follows from the rule alone (the chunk index
 * of each split dimension), so every rule's boxes, the devices and the
 * processes holding each are computed once per rule, not per tensor.
 * Boxes needed by the same set of processes form a class. A class needed
 * by one process that may read the file stays that process's own read.
 * The others travel: a class whose boxes form one contiguous byte range
 * becomes a piece of its own; otherwise (strided boxes of different
 * classes interleave) the whole tensor is one piece, so that it is read
 * by contiguous ranges rather than box by box (which reads the gaps).
 * With read once, strided own classes of several processes travel too,
 * for the same reason. transfer_assign.c then cuts the pieces among their readers.
 *
 * Targets (tensors assembled from several sources) never travel: each
 * process reads its own, and every source file must be readable by the
 * processes that need it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "readonce.h"

struct ibox {
	uint64_t lo, hi, bytes;     /* first and past-last byte, bytes */
	uint32_t set, box;
};

struct iclass {
	uint64_t lo, hi, bytes;
	uint32_t set;
	uint8_t travels;
};

struct rcache;

struct pl_ro {
	struct pl_plan *p;
	const struct pl_ckpt *ck;
	const struct pl_opts *o;
	struct cm_err *e;
	struct pl_xwork *w;
	uint8_t *skip;
	uint32_t (*coords)[PL_MAX_AXES]; /* of every mesh device */
	uint32_t *dev_slot;         /* mesh device -> local slot, or UINT32_MAX */
	struct rcache *rc;          /* per rule, built on first use */
	struct ibox *ib;            /* boxes of the current tensor */
	struct iclass *cls;         /* and their classes */
	size_t ncls;
	uint32_t *slot;             /* per set: its class, or UINT32_MAX */
	size_t capslot;
	uint32_t *tmp;              /* a set being built */
	uint32_t *mark, stamp;      /* per process: seen in the set being built */
	uint64_t item_lo, item_hi;
	uint32_t all_set;           /* every process */
};


/* ---------------------------------------------------------------- */
/* Interned process sets                                             */
/* ---------------------------------------------------------------- */

static uint64_t set_hash(const uint32_t *v, uint32_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ n;

	for (uint32_t i = 0; i < n; i++)
		h = (h ^ v[i]) * 0x100000001b3ull;
	return h;
}

static int set_rehash(struct pl_sets *ss)
{
	size_t cap = ss->tcap ? ss->tcap * 2 : 64;
	uint32_t *t = cm_calloc(cap, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < ss->nent; i++) {
		size_t h = ss->ent[i].hash & (cap - 1);

		while (t[h])
			h = (h + 1) & (cap - 1);
		t[h] = (uint32_t)i + 1;
	}
	cm_free(ss->table);
	ss->table = t;
	ss->tcap = cap;
	return 0;
}

uint32_t pl_set_intern(struct pl_sets *ss, const uint32_t *v, uint32_t n)
{
	uint64_t hash = set_hash(v, n);
	size_t h;

	if ((ss->nent + 1) * 2 > ss->tcap && set_rehash(ss))
		return UINT32_MAX;
	for (h = hash & (ss->tcap - 1); ss->table[h]; h = (h + 1) & (ss->tcap - 1)) {
		const struct pl_set_ent *e = &ss->ent[ss->table[h] - 1];

		if (e->hash == hash && e->n == n &&
		    !memcmp(ss->pool + e->off, v, n * sizeof(*v)))
			return ss->table[h] - 1;
	}
	if (ss->nent >= UINT32_MAX - 1 ||
	    cm_grow((void **)&ss->ent, &ss->capent, ss->nent + 1, sizeof(*ss->ent)) ||
	    cm_grow((void **)&ss->pool, &ss->cappool, ss->npool + n, sizeof(*ss->pool)))
		return UINT32_MAX;
	memcpy(ss->pool + ss->npool, v, n * sizeof(*v));
	ss->ent[ss->nent] = (struct pl_set_ent){ hash, ss->npool, n };
	ss->npool += n;
	ss->table[h] = (uint32_t)++ss->nent;
	return (uint32_t)ss->nent - 1;
}

void pl_sets_free(struct pl_sets *ss)
{
	cm_free(ss->pool);
	cm_free(ss->ent);
	cm_free(ss->table);
	memset(ss, 0, sizeof(*ss));
}

int pl_u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Sorts v[0..n) and drops repeats; returns the new count. */
static uint32_t sort_unique(uint32_t *v, uint32_t n)
{
	uint32_t m = 0;
	int sorted = 1;

	for (uint32_t i = 1; i < n && sorted; i++)
		sorted = v[i - 1] <= v[i];
	if (!sorted)
		qsort(v, n, sizeof(*v), pl_u32_cmp);
	for (uint32_t i = 0; i < n; i++)
		if (!m || v[m - 1] != v[i])
			v[m++] = v[i];
	return m;
}

/* ---------------------------------------------------------------- */
/* Boxes of a rule                                                   */
/* ---------------------------------------------------------------- */

/* The box of every mesh device under one rule (and effective rank). */
struct rcache {
	int32_t rule;
	uint32_t nd;
	uint32_t nboxes;
	uint32_t *dev_box;          /* per mesh device */
	uint32_t *box_first;        /* devices of box b: devs[box_first[b] .. [b + 1]) */
	uint32_t *devs;
	uint32_t *box_set;          /* processes holding box b */
	struct rcache *next;
};

static void rcache_free(struct rcache *c)
{
	while (c) {
		struct rcache *n = c->next;

		cm_free(c->dev_box);
		cm_free(c->box_first);
		cm_free(c->devs);
		cm_free(c->box_set);
		cm_free(c);
		c = n;
	}
}

/* Box id of the device at coord: the chunk indices of the split dims. */
static uint32_t box_id(const struct pl_spec *s, const struct pl_rule *rule, unsigned nd,
		       const uint32_t *coord, uint32_t *nboxes)
{
	uint64_t id = 0, n = 1;

	for (unsigned d = 0; rule && d < nd; d++) {
		const struct pl_dimspec *ds = &rule->dims[d];
		uint64_t idx = 0, m = 1;

		for (unsigned a = 0; a < ds->naxes; a++) {
			idx = idx * s->shape[ds->axes[a]] + coord[ds->axes[a]];
			m *= s->shape[ds->axes[a]];
		}
		id = id * m + idx;
		n *= m;     /* distinct axes: at most the device count */
	}
	*nboxes = (uint32_t)n;
	return (uint32_t)id;
}

/* Devices bucketed by box (counting sort, mesh order kept), and each
 * box's process set. */
static int rcache_sets(struct pl_ro *r, struct rcache *c, uint32_t *tmp)
{
	const struct pl_spec *s = r->p->spec;

	for (uint32_t d = 0; d < s->ndev; d++)
		c->box_first[c->dev_box[d] + 1]++;
	for (uint32_t b = 0; b < c->nboxes; b++)
		c->box_first[b + 1] += c->box_first[b];
	memcpy(tmp, c->box_first, c->nboxes * sizeof(*tmp));
	for (uint32_t d = 0; d < s->ndev; d++)
		c->devs[tmp[c->dev_box[d]]++] = d;
	for (uint32_t b = 0; b < c->nboxes; b++) {
		uint32_t n = 0;

		for (uint32_t k = c->box_first[b]; k < c->box_first[b + 1]; k++)
			tmp[n++] = s->proc[c->devs[k]];
		c->box_set[b] = pl_set_intern(&r->w->sets, tmp, sort_unique(tmp, n));
		if (c->box_set[b] == UINT32_MAX)
			return -ENOMEM;
	}
	return 0;
}

/* The cache of item it's rule, built on first use; NULL when out of memory. */
static struct rcache *rule_cache(struct pl_ro *r, const struct pl_item *it)
{
	const struct pl_spec *s = r->p->spec;
	const struct pl_rule *rule = it->rule >= 0 ? &s->rules[it->rule] : NULL;
	uint32_t nd = rule ? CM_MIN(rule->ndims, it->ndim) : 0, *tmp;
	struct rcache *c;

	for (c = r->rc; c; c = c->next)
		if (c->rule == it->rule && c->nd == nd)
			return c;
	if (!(c = cm_calloc(1, sizeof(*c))))
		return NULL;
	c->rule = it->rule;
	c->nd = nd;
	c->next = r->rc;
	r->rc = c;
	c->dev_box = cm_mallocarray(s->ndev, sizeof(uint32_t));
	c->devs = cm_mallocarray(s->ndev, sizeof(uint32_t));
	tmp = cm_mallocarray(s->ndev + 1, sizeof(uint32_t));
	if (!c->dev_box || !c->devs || !tmp)
		goto oom;
	for (uint32_t d = 0; d < s->ndev; d++)
		c->dev_box[d] = box_id(s, rule, nd, r->coords[d], &c->nboxes);
	c->box_first = cm_calloc((size_t)c->nboxes + 1, sizeof(uint32_t));
	c->box_set = cm_mallocarray(c->nboxes, sizeof(uint32_t));
	if (!c->box_first || !c->box_set || rcache_sets(r, c, tmp))
		goto oom;
	cm_free(tmp);
	return c;
oom:
	cm_free(tmp);
	return NULL;
}

/* ---------------------------------------------------------------- */
/* One tensor: boxes, classes, decision                              */
/* ---------------------------------------------------------------- */

/*
 * The non-empty boxes of plain item it into r->ib: byte span, bytes and
 * process set. Returns their count, or -1 when a box's runs cannot be
 * computed (a sub-byte split: the plan reports it).
 */
static long item_boxes(struct pl_ro *r, const struct pl_item *it, const struct rcache *c)
{
	const struct pl_tensor *t = &r->ck->tensors[it->src];
	long n = 0;

	for (uint32_t b = 0; b < c->nboxes; b++) {
		struct pl_box box;
		struct pl_runs runs;

		pl_item_box_at(r->p->spec, it, r->coords[c->devs[c->box_first[b]]], &box);
		if (pl_box_runs(t->ndim, t->shape, it->bits, t->offset, &box, &runs))
			return -1;
		if (!runs.nruns)
			continue;
		r->ib[n++] = (struct ibox){
			.lo = runs.off,
			.hi = pl_run_off(&runs, runs.nruns - 1) + runs.len,
			.bytes = runs.nruns * runs.len,
			.set = c->box_set[b],
			.box = b,
		};
	}
	return n;
}

/* Groups the boxes by process set: r->cls[0..ncls) with span and bytes. */
static int item_classes(struct pl_ro *r, long nb)
{
	size_t nsets = r->w->sets.nent;

	if (nsets > r->capslot) {
		uint32_t *ns = cm_reallocarray(r->slot, nsets, sizeof(*ns));

		if (!ns)
			return -ENOMEM;
		memset(ns + r->capslot, 0xff, (nsets - r->capslot) * sizeof(*ns));
		r->slot = ns;
		r->capslot = nsets;
	}
	r->ncls = 0;
	for (long k = 0; k < nb; k++) {
		const struct ibox *b = &r->ib[k];
		uint32_t c = r->slot[b->set];

		if (c == UINT32_MAX) {
			c = r->slot[b->set] = (uint32_t)r->ncls++;
			r->cls[c] = (struct iclass){ b->lo, b->hi, 0, b->set, 0 };
		}
		r->cls[c].lo = CM_MIN(r->cls[c].lo, b->lo);
		r->cls[c].hi = CM_MAX(r->cls[c].hi, b->hi);
		r->cls[c].bytes += b->bytes;
	}
	for (size_t c = 0; c < r->ncls; c++)
		r->slot[r->cls[c].set] = UINT32_MAX;   /* ready for the next item */
	return 0;
}

/* Members of set that may read file f into out; returns their count. */
static uint32_t readable(const struct pl_ro *r, uint32_t set, uint32_t f, uint32_t *out)
{
	uint32_t n, m = 0;
	const uint32_t *v = pl_set(&r->w->sets, set, &n);

	for (uint32_t i = 0; i < n; i++)
		if (!r->w->avail || pl_bit(r->w->avail, (size_t)v[i] * r->ck->nfiles + f))
			out[m++] = v[i];
	return m;
}

/* Whether class c must travel rather than be read by its processes. */
static int class_travels(struct pl_ro *r, const struct iclass *c, uint32_t f)
{
	uint32_t n;

	pl_set(&r->w->sets, c->set, &n);
	if (readable(r, c->set, f, r->tmp) != n)
		return 1;       /* a process that needs it may not read the file */
	return r->o->read_once && n > 1;
}

enum item_mode { ITEM_OWN, ITEM_CLASSES, ITEM_WHOLE };

static enum item_mode item_decide(struct pl_ro *r, uint32_t f)
{
	int travels = 0, gapped = 0;

	for (size_t c = 0; c < r->ncls; c++) {
		r->cls[c].travels = (uint8_t)class_travels(r, &r->cls[c], f);
		travels |= r->cls[c].travels;
		gapped |= r->cls[c].hi - r->cls[c].lo != r->cls[c].bytes;
	}
	if (!travels)   /* read once: own reads of strided boxes read the gaps */
		return r->o->read_once && gapped ? ITEM_WHOLE : ITEM_OWN;
	return gapped ? ITEM_WHOLE : ITEM_CLASSES;
}

/* ---------------------------------------------------------------- */
/* Emitting pieces, skips and own reads                              */
/* ---------------------------------------------------------------- */

static void mark_own_file(struct pl_ro *r, uint32_t proc, uint32_t f)
{
	if (r->w->own_files)
		pl_set_bit(r->w->own_files, (size_t)proc * r->ck->nfiles + f);
}

/* Every device of box b of item i receives it. */
static void skip_box(struct pl_ro *r, size_t i, const struct rcache *c, uint32_t b)
{
	const struct pl_spec *s = r->p->spec;

	for (uint32_t k = c->box_first[b]; k < c->box_first[b + 1]; k++) {
		uint32_t d = c->devs[k];

		pl_set_bit(r->skip, i * s->ndev + d);
		if (r->dev_slot[d] != UINT32_MAX)
			r->p->received[pl_shard_index(r->p, i, r->dev_slot[d])] = 1;
	}
}

/* Readers of a piece needed by set in file f: those that may read it, else
 * any process that may read the file. Returns the set, or an error. */
static int piece_readers(struct pl_ro *r, const struct pl_item *it, uint32_t set, uint32_t f,
			 uint32_t *out)
{
	uint32_t n = readable(r, set, f, r->tmp);

	if (!n) {
		uint32_t nn;
		const uint32_t *need = pl_set(&r->w->sets, set, &nn);

		n = readable(r, r->all_set, f, r->tmp);
		if (!n)
			return cm_err_set(r->e, RL_E_FILE_UNAVAILABLE,
					  "file %s: tensor \"%s\" needed by process %u is in it, but no process may read it (files_of_process)",
					  r->ck->files[f].path, it->name, need[0]);
	}
	*out = pl_set_intern(&r->w->sets, r->tmp, n);
	return *out == UINT32_MAX ? -ENOMEM : 0;
}

static int push_piece(struct pl_ro *r, const struct pl_item *it, size_t i, uint64_t off,
		      uint64_t len, uint32_t needers, int whole)
{
	struct pl_xwork *w = r->w;
	uint32_t f = r->ck->tensors[it->src].file, readers = 0;
	int ret = piece_readers(r, it, needers, f, &readers);

	if (ret)
		return ret;
	if (cm_grow((void **)&w->pc, &w->cappc, w->npc + 1, sizeof(*w->pc)))
		return -ENOMEM;
	w->pc[w->npc++] = (struct pl_piece){ off, len, f, (uint32_t)i, needers, readers,
					     (uint8_t)whole };
	return 0;
}

/* Adds the members of set to the union being built in r->tmp[0..*n). */
static void union_add(struct pl_ro *r, uint32_t set, uint32_t *n)
{
	uint32_t k;
	const uint32_t *v = pl_set(&r->w->sets, set, &k);

	for (uint32_t j = 0; j < k; j++)
		if (r->mark[v[j]] != r->stamp) {
			r->mark[v[j]] = r->stamp;
			r->tmp[(*n)++] = v[j];
		}
}

/* The union built in r->tmp[0..n), interned into *out. */
static int union_end(struct pl_ro *r, uint32_t n, uint32_t *out)
{
	r->stamp++;
	*out = pl_set_intern(&r->w->sets, r->tmp, sort_unique(r->tmp, n));
	return *out == UINT32_MAX ? -ENOMEM : 0;
}

/* Union of the classes' process sets, interned into *out. */
static int union_set(struct pl_ro *r, uint32_t *out)
{
	uint32_t n = 0;

	for (size_t c = 0; c < r->ncls; c++)
		union_add(r, r->cls[c].set, &n);
	return union_end(r, n, out);
}

/* Own reads of class c: its processes read it themselves. */
static void own_class(struct pl_ro *r, const struct iclass *c, uint32_t f)
{
	uint32_t n;
	const uint32_t *v = pl_set(&r->w->sets, c->set, &n);

	for (uint32_t k = 0; k < n; k++) {
		mark_own_file(r, v[k], f);
		r->w->load[v[k]] += c->bytes;
	}
}

static int emit_item(struct pl_ro *r, size_t i, const struct rcache *c, long nb,
		     enum item_mode mode)
{
	const struct pl_item *it = &r->p->items[i];
	uint32_t f = r->ck->tensors[it->src].file, set;
	int ret;

	if (mode == ITEM_WHOLE) {
		for (long k = 0; k < nb; k++)
			skip_box(r, i, c, r->ib[k].box);
		if ((ret = union_set(r, &set)))
			return ret;
		return push_piece(r, it, i, r->item_lo, r->item_hi - r->item_lo, set, 1);
	}
	for (size_t k = 0; k < r->ncls; k++) {
		const struct iclass *cl = &r->cls[k];

		if (mode == ITEM_OWN || !cl->travels) {
			own_class(r, cl, f);
			continue;
		}
		for (long b = 0; b < nb; b++)
			if (r->ib[b].set == cl->set)
				skip_box(r, i, c, r->ib[b].box);
		if ((ret = push_piece(r, it, i, cl->lo, cl->bytes, cl->set, 0)))
			return ret;
	}
	return 0;
}

/*
 * A target: read by each process that needs it. Its source files must be
 * readable by every process holding a non-empty shard of it.
 */
static int check_target(struct pl_ro *r, const struct pl_item *it)
{
	for (uint32_t k = 0; k < it->nparts; k++) {
		uint32_t f = r->ck->tensors[r->p->parts[it->first_part + k].src].file;

		for (uint32_t q = 0; q < r->p->spec->nprocs; q++) {
			if (r->w->avail && !pl_bit(r->w->avail, (size_t)q * r->ck->nfiles + f))
				return cm_err_set(r->e, RL_E_FILE_UNAVAILABLE,
						  "file %s: target \"%s\" needs it on process %u, which may not read it (files_of_process; targets are read by each process)",
						  r->ck->files[f].path, it->name, q);
			mark_own_file(r, q, f);
		}
	}
	return 0;
}

static int analyze_item(struct pl_ro *r, size_t i)
{
	const struct pl_item *it = &r->p->items[i];
	const struct rcache *c;
	long nb;
	int ret;

	if (it->nparts)
		return check_target(r, it);
	if (!(c = rule_cache(r, it)))
		return -ENOMEM;
	nb = item_boxes(r, it, c);
	if (nb <= 0)
		return 0;       /* empty, or an error the plan reports */
	if ((ret = item_classes(r, nb)))
		return ret;
	r->item_lo = r->ck->tensors[it->src].offset;
	r->item_hi = r->item_lo + r->ck->tensors[it->src].nbytes;
	return emit_item(r, i, c, nb, item_decide(r, r->ck->tensors[it->src].file));
}

/* ---------------------------------------------------------------- */
/* Driver                                                            */
/* ---------------------------------------------------------------- */

void pl_ro_free(struct pl_ro *r)
{
	if (!r)
		return;
	rcache_free(r->rc);
	cm_free(r->coords);
	cm_free(r->dev_slot);
	cm_free(r->ib);
	cm_free(r->cls);
	cm_free(r->slot);
	cm_free(r->tmp);
	cm_free(r->mark);
	cm_free(r);
}

static int ro_alloc(struct pl_ro *r)
{
	const struct pl_spec *s = r->p->spec;
	uint32_t *all;

	r->coords = cm_mallocarray(s->ndev, sizeof(*r->coords));
	r->dev_slot = cm_mallocarray(s->ndev, sizeof(*r->dev_slot));
	r->ib = cm_mallocarray(s->ndev, sizeof(*r->ib));
	r->cls = cm_mallocarray(s->ndev, sizeof(*r->cls));
	r->tmp = cm_mallocarray((size_t)s->nprocs + s->ndev, sizeof(*r->tmp));
	r->mark = cm_calloc(s->nprocs, sizeof(*r->mark));
	if (!r->coords || !r->dev_slot || !r->ib || !r->cls || !r->tmp || !r->mark)
		return -ENOMEM;
	r->stamp = 1;
	for (uint32_t d = 0; d < s->ndev; d++) {
		pl_mesh_coords(s, d, r->coords[d]);
		r->dev_slot[d] = UINT32_MAX;
	}
	for (unsigned sl = 0; sl < r->p->nslots; sl++)
		r->dev_slot[r->p->slot_dev[sl]] = sl;
	/* Process ids are dense: every one of 0..nprocs-1 owns a device. */
	all = r->tmp;
	for (uint32_t q = 0; q < s->nprocs; q++)
		all[q] = q;
	r->all_set = pl_set_intern(&r->w->sets, all, s->nprocs);
	return r->all_set == UINT32_MAX ? -ENOMEM : 0;
}

int pl_ro_analyze(struct pl_plan *p, const struct pl_ckpt *ck, const struct pl_opts *o,
		  struct pl_xwork *w, uint8_t *skip, struct pl_ro **out, struct cm_err *e)
{
	struct pl_ro *r = cm_calloc(1, sizeof(*r));
	int ret = -ENOMEM;

	*out = r;
	if (!r)
		return cm_err_set(e, -ENOMEM, "plan: out of memory");
	*r = (struct pl_ro){ .p = p, .ck = ck, .o = o, .e = e, .w = w, .skip = skip };
	if (!ro_alloc(r)) {
		ret = 0;
		for (size_t i = 0; i < p->nitems && !ret; i++)
			ret = analyze_item(r, i);
	}
	if (ret == -ENOMEM)
		return cm_err_set(e, -ENOMEM, "plan: out of memory");
	return ret;
}

uint64_t pl_runs_first_after(const struct pl_runs *r, uint64_t a)
{
	uint64_t lo = 0, hi = r->nruns;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (pl_run_off(r, mid) + r->len <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether some run of r meets [a, b): the first run ending past a. */
static int runs_meet(const struct pl_runs *r, uint64_t a, uint64_t b)
{
	uint64_t k = pl_runs_first_after(r, a);

	return k < r->nruns && pl_run_off(r, k) < b;
}

int pl_ro_range_needers(struct pl_ro *r, const struct pl_piece *pc, uint64_t a, uint64_t b,
			uint32_t *set)
{
	const struct pl_item *it = &r->p->items[pc->item];
	const struct pl_tensor *t = &r->ck->tensors[it->src];
	const struct rcache *c = rule_cache(r, it);
	uint32_t n = 0;

	if (!c)
		return -ENOMEM;
	for (uint32_t bx = 0; bx < c->nboxes; bx++) {
		struct pl_box box;
		struct pl_runs runs;

		pl_item_box_at(r->p->spec, it, r->coords[c->devs[c->box_first[bx]]], &box);
		if (!pl_box_runs(t->ndim, t->shape, it->bits, t->offset, &box, &runs) &&
		    runs.nruns && runs_meet(&runs, a, b))
			union_add(r, c->box_set[bx], &n);
	}
	return union_end(r, n, set);
}
