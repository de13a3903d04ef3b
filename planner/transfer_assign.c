/*
 * transfer_assign.c - the cluster's transfers (RL_PLAN_READ_ONCE, files_of_process).
 *
 *   pieces     readonce.c says which bytes travel and who may read them;
 *   classes    the pieces one set of processes may read, in file order
 *              (across files, gaps allowed), are cut together, so that
 *              each reader reads one contiguous share of them and opens
 *              as few files as it can;
 *   readers    classes with one possible reader go to it first; large
 *              ones are cut into one contiguous share per reader by
 *              water-filling over the bytes each process already reads
 *              (own reads, then earlier shares; fewer possible readers
 *              first); the pieces of small ones (less than one alignment
 *              block per reader) go whole to one reader (pl_assign: least
 *              loaded, preferring a process that already opens the file);
 *   transfers  each share, cut at PL_XFER_MAX, becomes transfers; their
 *              receivers are the processes that need some of the bytes;
 *   batches    transfers are ordered so that every batch holds a part of
 *              every root's reads (roots read in parallel), and batched
 *              under batch_bytes (pl_batches);
 *   finish     the planned process keeps the transfers it takes part in,
 *              with its scatter list for each (payload -> its shards), and
 *              every process's statistics grow by its transfer reads.
 *
 * Every process computes the same list from the same inputs (the cut
 * alignment must agree: RL_PLAN_TRANSFER_ALIGN); a digest of it lets a
 * runtime check that they did.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "avail.h"
#include "readonce.h"
#include "transfer_assign.h"

/* Bitmaps beyond this are refused rather than allocated. */
#define SKIP_MAX_BYTES (256u << 20)
/* Per-process file maps (statistics, locality) are kept up to this many bits. */
#define FILE_MAP_MAX_BITS (1ull << 28)

struct xb {                     /* one assignment being built */
	struct pl_plan *p;
	const struct pl_ckpt *ck;
	const struct pl_opts *o;
	const struct pl_align *align;
	struct cm_err *e;
	struct pl_xwork *w;
	struct pl_ro *ro;
	uint32_t *stamp, cur;       /* per process: in the set being built */
	uint32_t *tmp;
};

/* Where transfers may be cut: the alignment, and a whole element of
 * every dtype a converting plan converts (tensors start on whole
 * elements, pl_convert_items): a copy converts whole elements. */
static uint64_t cut_align(const struct xb *b, uint32_t f)
{
	uint64_t a = b->o->transfer_align ? b->o->transfer_align : b->align[f].offset_align;

	a = a ? a : 1;
	return b->o->convert && a % 4 ? cm_align_up(a, 4) : a;
}

static int oom(struct xb *b)
{
	return cm_err_set(b->e, -ENOMEM, "plan: out of memory");
}

/* ---------------------------------------------------------------- */
/* Transfers of one share                                            */
/* ---------------------------------------------------------------- */

static int push_xfer(struct xb *b, uint32_t file, uint64_t off, uint64_t len, int32_t root,
		     uint32_t piece)
{
	struct pl_xwork *w = b->w;

	if (cm_grow((void **)&w->x, &w->capx, w->nx + 1, sizeof(*w->x)))
		return -ENOMEM;
	w->x[w->nx++] = (struct pl_xfer){ .off = off, .len = len, .file = file, .root = root,
					  .piece = piece };
	return 0;
}

/* Bytes [a, b) of file f, read by root: transfers of at most the
 * transfer size, cut at the alignment. */
static int emit_span(struct xb *b, uint32_t f, uint64_t a, uint64_t e, int32_t root,
		     uint32_t piece)
{
	uint64_t A = cut_align(b, f);
	uint64_t max = CM_MIN(b->o->batch_bytes, PL_XFER_MAX);

	max = CM_MAX(cm_align_down(max, A), A);
	while (a < e) {
		uint64_t end = a + max < e ? cm_align_down(a + max, A) : e;
		int ret;

		if (end <= a)
			end = CM_MIN(a + max, e);
		if ((ret = push_xfer(b, f, a, end - a, root, piece)))
			return ret;
		a = end;
	}
	return 0;
}

/* Positions [c0, c1) of the concatenation of pieces idx[0..n), read by
 * root: each run of contiguous bytes of one file becomes transfers. */
static int emit_share(struct xb *b, const uint32_t *idx, size_t n, uint64_t c0, uint64_t c1,
		      int32_t root)
{
	const struct pl_piece *pc = b->w->pc;
	uint64_t pos = 0, ra = 0, re = 0;
	uint32_t rp = 0;
	int have = 0, ret;

	for (size_t i = 0; i < n && pos < c1; pos += pc[idx[i]].len, i++) {
		const struct pl_piece *a = &pc[idx[i]];
		uint64_t lo = CM_MAX(c0, pos), hi = CM_MIN(c1, pos + a->len);

		if (lo >= hi)
			continue;
		lo = a->off + (lo - pos);
		hi = a->off + (hi - pos);
		/* Adjacent pieces for the same processes: one payload. Pieces
		 * for others stay apart, so that a receiver gets only bytes it
		 * needs (and a tensor's pieces, which differ in that, never
		 * share a transfer). */
		if (have && lo == re && a->file == pc[rp].file && a->needers == pc[rp].needers) {
			re = hi;
			continue;
		}
		if (have && (ret = emit_span(b, pc[rp].file, ra, re, root, rp)))
			return ret;
		ra = lo;
		re = hi;
		rp = idx[i];
		have = 1;
	}
	return have ? emit_span(b, pc[rp].file, ra, re, root, rp) : 0;
}

/* ---------------------------------------------------------------- */
/* Reader classes                                                    */
/* ---------------------------------------------------------------- */

/* The pieces one set of processes may read, in file order: cut together,
 * so that a reader's share runs across files rather than taking a part
 * of each (fewer files opened). */
struct rclass {
	size_t i0, i1;              /* order[i0 .. i1) */
	uint64_t bytes;
	uint32_t nreaders;
};

static int piece_cmp(const void *pa, const void *pb)
{
	const struct pl_piece *a = pa, *b = pb;

	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	if (a->off != b->off)
		return a->off < b->off ? -1 : 1;
	return a->item < b->item ? -1 : a->item > b->item;
}

/* Piece indices by reader set, then file order (pieces are sorted). */
static int by_readers(const void *pa, const void *pb, void *arg)
{
	const struct pl_piece *pc = arg;
	uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;

	if (pc[a].readers != pc[b].readers)
		return pc[a].readers < pc[b].readers ? -1 : 1;
	return a < b ? -1 : a > b;
}

static int class_cmp(const void *pa, const void *pb, void *arg)
{
	const struct rclass *a = pa, *b = pb;
	const uint32_t *order = arg;

	if (a->nreaders != b->nreaders)
		return a->nreaders < b->nreaders ? -1 : 1;   /* fewer choices first */
	if (a->bytes != b->bytes)
		return a->bytes > b->bytes ? -1 : 1;         /* larger first */
	return order[a->i0] < order[b->i0] ? -1 : order[a->i0] > order[b->i0];
}

static struct rclass *make_classes(struct xb *b, uint32_t *order, size_t *n)
{
	struct pl_xwork *w = b->w;
	struct rclass *rc = cm_mallocarray(w->npc + 1, sizeof(*rc));
	size_t nc = 0;

	if (!rc)
		return NULL;
	for (size_t k = 0; k < w->npc; k++)
		order[k] = (uint32_t)k;
	qsort_r(order, w->npc, sizeof(*order), by_readers, w->pc);
	for (size_t k = 0; k < w->npc; k++) {
		const struct pl_piece *a = &w->pc[order[k]];

		if (!k || w->pc[order[k - 1]].readers != a->readers) {
			uint32_t nr;

			pl_set(&w->sets, a->readers, &nr);
			rc[nc++] = (struct rclass){ k, k, 0, nr };
		}
		rc[nc - 1].i1 = k + 1;
		rc[nc - 1].bytes += a->len;
	}
	qsort_r(rc, nc, sizeof(*rc), class_cmp, order);
	*n = nc;
	return rc;
}

/* A large class: one contiguous share per reader. */
static int cut_class(struct xb *b, const uint32_t *idx, size_t n)
{
	const struct pl_piece *pc = b->w->pc;
	uint32_t nr;
	const uint32_t *rd = pl_set(&b->w->sets, pc[idx[0]].readers, &nr);
	struct pl_seg *seg = cm_mallocarray(n, sizeof(*seg));
	uint64_t *cut = cm_mallocarray(nr + 1, sizeof(*cut));
	int ret = -ENOMEM;

	if (seg && cut) {
		for (size_t k = 0; k < n; k++)
			seg[k] = (struct pl_seg){ pc[idx[k]].off, pc[idx[k]].len,
						  cut_align(b, pc[idx[k]].file) };
		ret = pl_waterfill(seg, n, rd, nr, b->w->load, cut);
		for (uint32_t i = 0; i < nr && !ret; i++)
			if (cut[i + 1] > cut[i])
				ret = emit_share(b, idx, n, cut[i], cut[i + 1], (int32_t)rd[i]);
	}
	cm_free(seg);
	cm_free(cut);
	return ret;
}

/* Files each process opens so far (own reads, earlier shares): locality
 * for pl_assign. */
static uint8_t *reads_map(struct xb *b)
{
	const struct pl_xwork *w = b->w;
	size_t nf = b->ck->nfiles, n = (size_t)b->p->spec->nprocs * nf;
	uint8_t *m;

	if (!w->own_files || !(m = cm_calloc(n + 1, 1)))
		return NULL;    /* no locality: still a valid, balanced choice */
	for (size_t i = 0; i < n; i++)
		m[i] = (uint8_t)pl_bit(w->own_files, i);
	for (size_t k = 0; k < w->nx; k++)
		m[(size_t)w->x[k].root * nf + w->x[k].file] = 1;
	return m;
}

/* Small classes: each of their pieces whole to one reader. */
static int assign_small(struct xb *b, const uint32_t *idx, size_t n)
{
	struct pl_assign_item *ai = cm_mallocarray(n + 1, sizeof(*ai));
	int32_t *owner = cm_mallocarray(n + 1, sizeof(*owner));
	uint8_t *reads = reads_map(b);
	int ret = -ENOMEM;

	if (ai && owner) {
		for (size_t k = 0; k < n; k++) {
			const struct pl_piece *a = &b->w->pc[idx[k]];
			uint32_t nr;
			const uint32_t *rd = pl_set(&b->w->sets, a->readers, &nr);

			ai[k] = (struct pl_assign_item){ a->len, a->file, -1, rd, nr };
		}
		ret = pl_assign(ai, n, b->p->spec->nprocs, reads, (uint32_t)b->ck->nfiles, owner,
				b->w->load);
		for (size_t k = 0; k < n && !ret; k++)
			ret = emit_share(b, idx + k, 1, 0, b->w->pc[idx[k]].len, owner[k]);
	}
	cm_free(ai);
	cm_free(owner);
	cm_free(reads);
	return ret;
}

/* One class: forced (one reader), cut (large) or set aside (small). */
static int assign_class(struct xb *b, const struct rclass *c, const uint32_t *order,
			uint32_t *small, size_t *nsmall)
{
	const struct pl_piece *pc = b->w->pc;
	uint32_t n;
	const uint32_t *rd = pl_set(&b->w->sets, pc[order[c->i0]].readers, &n);
	uint64_t A = 1;

	for (size_t k = c->i0; k < c->i1; k++)
		A = CM_MAX(A, cut_align(b, pc[order[k]].file));
	if (n == 1) {   /* forced: first, so that the others balance around it */
		b->w->load[rd[0]] += c->bytes;
		return emit_share(b, order + c->i0, c->i1 - c->i0, 0, c->bytes, (int32_t)rd[0]);
	}
	if (c->bytes / n >= A)
		return cut_class(b, order + c->i0, c->i1 - c->i0);
	for (size_t k = c->i0; k < c->i1; k++)
		small[(*nsmall)++] = order[k];
	return 0;
}

static int assign_readers(struct xb *b)
{
	struct pl_xwork *w = b->w;
	uint32_t *order = cm_mallocarray(w->npc + 1, sizeof(*order));
	uint32_t *small = cm_mallocarray(w->npc + 1, sizeof(*small));
	struct rclass *rc = NULL;
	size_t nc = 0, nsmall = 0;
	int ret = -ENOMEM;

	if (w->npc)     /* no pieces: pc may be NULL, which qsort must not get */
		qsort(w->pc, w->npc, sizeof(*w->pc), piece_cmp);
	if (order && small && (rc = make_classes(b, order, &nc))) {
		ret = 0;
		for (size_t k = 0; k < nc && !ret; k++)
			ret = assign_class(b, &rc[k], order, small, &nsmall);
		if (!ret && nsmall)
			ret = assign_small(b, small, nsmall);
	}
	cm_free(order);
	cm_free(small);
	cm_free(rc);
	return ret;
}

/* ---------------------------------------------------------------- */
/* Receivers, order, batches                                         */
/* ---------------------------------------------------------------- */

static void collect(struct xb *b, uint32_t set, uint32_t *n)
{
	uint32_t k;
	const uint32_t *v = pl_set(&b->w->sets, set, &k);

	for (uint32_t j = 0; j < k; j++)
		if (b->stamp[v[j]] != b->cur) {
			b->stamp[v[j]] = b->cur;
			b->tmp[(*n)++] = v[j];
		}
}

/* The processes that need some byte of transfer x, but its root. */
static int receivers(struct xb *b, struct pl_xfer *x)
{
	struct pl_xwork *w = b->w;
	uint32_t n = 0;
	int ret;

	b->cur++;
	for (size_t k = x->piece; k < w->npc && w->pc[k].file == x->file &&
	     w->pc[k].off < x->off + x->len; k++) {
		const struct pl_piece *pc = &w->pc[k];
		uint32_t set = pc->needers;

		if (pc->off + pc->len <= x->off)
			continue;
		if (pc->whole && (ret = pl_ro_range_needers(b->ro, pc, CM_MAX(x->off, pc->off),
							     CM_MIN(x->off + x->len,
								    pc->off + pc->len), &set)))
			return ret;
		collect(b, set, &n);
	}
	qsort(b->tmp, n, sizeof(*b->tmp), pl_u32_cmp);
	if (cm_grow((void **)&w->rcv, &w->caprcv, w->nrcv + n, sizeof(*w->rcv)))
		return -ENOMEM;
	x->first_recv = w->nrcv;
	x->nrecv = 0;
	for (uint32_t j = 0; j < n; j++)
		if ((int32_t)b->tmp[j] != x->root) {
			w->rcv[w->nrcv++] = b->tmp[j];
			x->nrecv++;
		}
	return 0;
}

/* Cluster order: the k-th transfer of every root, roots ascending, then
 * the (k+1)-th: so that each batch has a part of every root's reads. */
static int order_cmp(const void *pa, const void *pb)
{
	const struct pl_xfer *a = pa, *b = pb;

	if (a->gidx != b->gidx)                 /* the k of its root */
		return a->gidx < b->gidx ? -1 : 1;
	if (a->root != b->root)
		return a->root < b->root ? -1 : 1;
	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	return a->off < b->off ? -1 : a->off > b->off;
}

static int root_file_cmp(const void *pa, const void *pb)
{
	const struct pl_xfer *a = pa, *b = pb;

	if (a->root != b->root)
		return a->root < b->root ? -1 : 1;
	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	return a->off < b->off ? -1 : a->off > b->off;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		h = (h ^ (v & 0xff)) * 0x100000001b3ull;
	return h;
}

static int order_and_batch(struct xb *b)
{
	struct pl_xwork *w = b->w;
	struct pl_xplan *xp = b->p->xp;
	uint64_t *sizes = cm_mallocarray(w->nx + 1, sizeof(*sizes));
	uint32_t *batch = cm_mallocarray(w->nx + 1, sizeof(*batch));
	uint64_t h = 0xcbf29ce484222325ull;

	if (!sizes || !batch) {
		cm_free(sizes);
		cm_free(batch);
		return -ENOMEM;
	}
	if (w->nx) {    /* none: x may be NULL, which qsort must not get */
		qsort(w->x, w->nx, sizeof(*w->x), root_file_cmp);
		for (size_t k = 0; k < w->nx; k++)
			w->x[k].gidx = k && w->x[k - 1].root == w->x[k].root ? w->x[k - 1].gidx + 1
									     : 0;
		qsort(w->x, w->nx, sizeof(*w->x), order_cmp);
	}
	for (size_t k = 0; k < w->nx; k++)
		sizes[k] = w->x[k].len;
	xp->nbatches = pl_batches(sizes, w->nx, b->o->batch_bytes, batch);
	for (size_t k = 0; k < w->nx; k++) {
		struct pl_xfer *x = &w->x[k];

		x->gidx = k;
		x->batch = batch[k];
		h = mix(mix(mix(mix(h, x->file), x->off), x->len), ((uint64_t)x->batch << 32) |
			(uint32_t)x->root);
		for (uint32_t j = 0; j < x->nrecv; j++)
			h = mix(h, w->rcv[x->first_recv + j]);
	}
	xp->ntotal = w->nx;
	xp->digest = mix(h, w->nx);
	cm_free(sizes);
	cm_free(batch);
	return 0;
}

/* ---------------------------------------------------------------- */
/* Driver                                                            */
/* ---------------------------------------------------------------- */

void pl_xwork_free(struct pl_xwork *w)
{
	if (!w)
		return;
	pl_sets_free(&w->sets);
	cm_free(w->avail);
	cm_free(w->own_files);
	cm_free(w->load);
	cm_free(w->pc);
	cm_free(w->x);
	cm_free(w->rcv);
	cm_free(w);
}

void pl_xplan_free(struct pl_xplan *xp)
{
	if (!xp)
		return;
	pl_xwork_free(xp->w);
	cm_free(xp->x);
	cm_free(xp->recv);
	cm_free(xp->copies);
	cm_free(xp->st);
	cm_free(xp->have);
	cm_free(xp->align);
	cm_free(xp);
}

static int xplan_alloc(struct xb *b, const struct pl_spec *s)
{
	struct pl_plan *p = b->p;
	struct pl_xplan *xp = p->xp = cm_calloc(1, sizeof(*xp));
	size_t fbits = (size_t)s->nprocs * b->ck->nfiles;
	int ret;

	if (!xp || !(xp->w = b->w = cm_calloc(1, sizeof(*b->w))))
		return oom(b);
	xp->chunk = b->o->chunk;
	xp->align = cm_mallocarray(b->ck->nfiles + 1, sizeof(*xp->align));
	b->w->load = cm_calloc(s->nprocs, sizeof(uint64_t));
	b->stamp = cm_calloc(s->nprocs, sizeof(uint32_t));
	b->tmp = cm_mallocarray(s->nprocs, sizeof(uint32_t));
	if (fbits <= FILE_MAP_MAX_BITS)
		b->w->own_files = cm_calloc(fbits / 8 + 1, 1);
	p->received = cm_calloc(p->nshards + 1, 1);
	if (!xp->align || !b->w->load || !b->stamp || !b->tmp || !p->received ||
	    (fbits <= FILE_MAP_MAX_BITS && !b->w->own_files))
		return oom(b);
	memcpy(xp->align, b->align, b->ck->nfiles * sizeof(*xp->align));
	if ((ret = pl_avail_resolve(s, b->ck, &b->w->avail, b->e)))
		return ret;
	return 0;
}

int pl_read_once(struct pl_plan *p, const struct pl_ckpt *ck, const struct pl_spec *s,
		 const struct pl_align *align, const struct pl_opts *o, uint8_t **skipp,
		 struct cm_err *e)
{
	struct xb b = { .p = p, .ck = ck, .o = o, .align = align, .e = e };
	size_t bits;
	int ret;

	*skipp = NULL;
	if ((s->nprocs < 2 && !s->avail) || !p->nitems)
		return 0;
	if (p->nitems > SIZE_MAX / s->ndev || (bits = p->nitems * s->ndev) / 8 > SKIP_MAX_BYTES)
		return cm_err_set(e, RL_E_TOO_LARGE,
				  "read once: %zu tensors x %u devices is too large a table",
				  p->nitems, s->ndev);
	if (!(*skipp = cm_calloc(bits / 8 + 1, 1)))
		return oom(&b);
	if ((ret = xplan_alloc(&b, s)) ||
	    (ret = pl_ro_analyze(p, ck, o, b.w, *skipp, &b.ro, e)))
		goto out;
	ret = assign_readers(&b);
	for (size_t k = 0; k < b.w->nx && !ret; k++)
		ret = receivers(&b, &b.w->x[k]);
	if (!ret)
		ret = order_and_batch(&b);
	if (ret == -ENOMEM)
		ret = oom(&b);
out:
	pl_ro_free(b.ro);
	cm_free(b.stamp);
	cm_free(b.tmp);
	return ret;
}
