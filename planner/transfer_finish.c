/*
 * transfer_finish.c - the last step of a read-once plan, once the staging layout
 * and the plain statistics are known: the planned process keeps the
 * transfers it takes part in (as root or receiver) with its scatter list
 * for each (payload bytes -> its received shards), and the statistics of
 * every process grow by what transfers cost it (reads, bytes sent and
 * received, files opened).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "readonce.h"
#include "transfer_assign.h"

/* ---------------------------------------------------------------- */
/* Scatter lists                                                     */
/* ---------------------------------------------------------------- */

struct lc {
	struct pl_plan *p;
	const struct pl_ckpt *ck;
	struct pl_xplan *xp;
	size_t capcopies;
};

static int push_copy(struct lc *l, uint64_t src, uint64_t len, uint64_t count,
		     uint64_t stride, size_t shard, uint64_t dst)
{
	struct pl_xplan *xp = l->xp;

	if (cm_grow((void **)&xp->copies, &l->capcopies, xp->ncopies + 1, sizeof(*xp->copies)))
		return -ENOMEM;
	xp->copies[xp->ncopies++] = (struct cm_copy){
		.src = (uint32_t)src, .len = (uint32_t)len, .count = (uint32_t)count,
		.src_stride = (uint32_t)stride, .dst = dst,
		.dev = (uint32_t)(shard / l->p->nitems),     /* shards are device-major */
		.shard = (uint32_t)shard };
	return 0;
}

/*
 * Copies of the bytes of runs r (landing at dst + k * len for run k) that
 * lie in payload [a, b): whole runs of one innermost row in one strided
 * copy, cut runs alone. A converted item's shard holds its elements in
 * sz[1] bytes each, not the file's sz[0]: positions in it scale (the
 * transfers are cut on whole elements; the copy's op converts, as
 * scatter.c's for the reads).
 */
static int range_copies(struct lc *l, const struct pl_runs *r, uint64_t a, uint64_t b,
			size_t shard, uint64_t dst, const unsigned sz[2])
{
	uint64_t row = r->nlev ? r->count[r->nlev - 1] : 1;
	uint64_t stride = r->nlev ? r->stride[r->nlev - 1] : r->len;
	int ret = 0;

	for (uint64_t k = pl_runs_first_after(r, a); k < r->nruns && !ret;) {
		uint64_t o = pl_run_off(r, k), lo = CM_MAX(o, a), hi = CM_MIN(o + r->len, b), m = 1;

		if (o >= b)
			break;
		if (lo == o && hi == o + r->len) {
			/* Whole runs to the end of the row or of the payload. */
			while (m < row - k % row && o + m * stride + r->len <= b)
				m++;
		}
		uint64_t in = k * r->len + (lo - o);

		ret = push_copy(l, lo - a, m > 1 ? r->len : hi - lo, m, m > 1 ? stride : hi - lo,
				shard, dst + (sz[0] != sz[1] ? in / sz[0] * sz[1] : in));
		k += m;
	}
	return ret;
}

/* The planned process's copies of transfer x: every received shard of
 * the tensors of its pieces. */
static int xfer_copies(struct lc *l, const struct pl_xwork *w, struct pl_xfer *x)
{
	const struct pl_plan *p = l->p;
	int ret = 0;

	x->first_copy = l->xp->ncopies;
	for (size_t k = x->piece; k < w->npc && w->pc[k].file == x->file &&
	     w->pc[k].off < x->off + x->len && !ret; k++) {
		const struct pl_item *it = &p->items[w->pc[k].item];
		const struct pl_tensor *t = &l->ck->tensors[it->src];
		const unsigned sz[2] = { it->bits / 8, it->to_bits / 8 };

		for (unsigned s = 0; s < p->nslots && !ret; s++) {
			size_t sh = pl_shard_index(p, w->pc[k].item, s);
			uint32_t coord[PL_MAX_AXES];
			struct pl_box box;
			struct pl_runs runs;

			if (!p->received[sh])
				continue;
			pl_mesh_coords(p->spec, p->slot_dev[s], coord);
			pl_item_box_at(p->spec, it, coord, &box);
			if (pl_box_runs(t->ndim, t->shape, it->bits, t->offset, &box, &runs))
				continue;   /* the plan refused such boxes already */
			ret = range_copies(l, &runs, x->off, x->off + x->len, sh,
					   p->shards[sh].offset, sz);
		}
	}
	x->ncopies = (uint32_t)(l->xp->ncopies - x->first_copy);
	return ret;
}

static int is_receiver(const struct pl_xwork *w, const struct pl_xfer *x, int32_t q)
{
	for (uint32_t j = 0; j < x->nrecv; j++)
		if ((int32_t)w->rcv[x->first_recv + j] == q)
			return 1;
	return 0;
}

/* The transfers the planned process takes part in, in cluster order. */
static int local_list(struct lc *l)
{
	struct pl_xplan *xp = l->xp;
	const struct pl_xwork *w = xp->w;
	int32_t me = l->p->process;
	size_t n = 0, nr = 0;

	for (size_t k = 0; k < w->nx; k++)
		if (w->x[k].root == me || is_receiver(w, &w->x[k], me)) {
			n++;
			nr += w->x[k].nrecv;
		}
	xp->x = cm_mallocarray(n + 1, sizeof(*xp->x));
	xp->recv = cm_mallocarray(nr + 1, sizeof(*xp->recv));
	if (!xp->x || !xp->recv)
		return -ENOMEM;
	for (size_t k = 0; k < w->nx; k++) {
		struct pl_xfer *x = &xp->x[xp->nx];
		int ret;

		if (w->x[k].root != me && !is_receiver(w, &w->x[k], me))
			continue;
		*x = w->x[k];
		x->first_recv = xp->nrecv;
		for (uint32_t j = 0; j < x->nrecv; j++)
			xp->recv[xp->nrecv++] = (int32_t)w->rcv[w->x[k].first_recv + j];
		if ((ret = xfer_copies(l, w, x)))
			return ret;
		xp->nx++;
	}
	return 0;
}

/* ---------------------------------------------------------------- */
/* Statistics                                                        */
/* ---------------------------------------------------------------- */

static int by_root_batch(const void *pa, const void *pb)
{
	const struct pl_xfer *a = *(const struct pl_xfer *const *)pa;
	const struct pl_xfer *b = *(const struct pl_xfer *const *)pb;

	if (a->root != b->root)
		return a->root < b->root ? -1 : 1;
	if (a->batch != b->batch)
		return a->batch < b->batch ? -1 : 1;
	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	return a->off < b->off ? -1 : a->off > b->off;
}

/* Reads of each root's transfers, batch by batch, as its batch plans
 * will read them (exec/transfers.c). */
static int read_costs(struct lc *l, uint8_t *files)
{
	const struct pl_xwork *w = l->xp->w;
	const struct pl_xfer **v = cm_mallocarray(w->nx + 1, sizeof(*v));
	struct pl_xread *sp = cm_mallocarray(w->nx + 1, sizeof(*sp));
	size_t nf = l->ck->nfiles;

	if (!v || !sp) {
		cm_free(v);
		cm_free(sp);
		return -ENOMEM;
	}
	for (size_t k = 0; k < w->nx; k++)
		v[k] = &w->x[k];
	qsort(v, w->nx, sizeof(*v), by_root_batch);
	for (size_t a = 0, b; a < w->nx; a = b) {
		struct pl_xstat *st = &l->xp->st[v[a]->root];
		size_t ns = 0;

		for (b = a; b < w->nx && v[b]->root == v[a]->root && v[b]->batch == v[a]->batch; b++)
			pl_xread_add(sp, &ns, v[b]->file, v[b]->off, v[b]->len, l->xp->align);
		for (size_t s = 0; s < ns; s++) {
			uint64_t bytes, reqs;

			pl_xread_cost(&sp[s], &l->xp->align[sp[s].file],
				      l->ck->files[sp[s].file].size, l->xp->chunk, &bytes, &reqs);
			st->read += bytes;
			st->requests += reqs;
			st->spans++;
			if (files)
				pl_set_bit(files, (size_t)v[a]->root * nf + sp[s].file);
		}
	}
	cm_free(v);
	cm_free(sp);
	return 0;
}

/* Files each process opens (own reads and transfers), into st[].files. */
static void count_files(struct lc *l, const uint8_t *files)
{
	const struct pl_plan *p = l->p;
	size_t nf = l->ck->nfiles;

	for (uint32_t q = 0; q < p->spec->nprocs; q++) {
		uint64_t n = 0;

		if (!files) {   /* too many to map: own count plus transfer files */
			l->xp->st[q].files = p->stats[q].files_opened + (l->xp->st[q].payload != 0);
			continue;
		}
		for (size_t f = 0; f < nf; f++)
			n += pl_bit(files, (size_t)q * nf + f);
		l->xp->st[q].files = n;
	}
}

static void add_to_plan_stats(struct lc *l)
{
	struct pl_plan *p = l->p;
	struct pl_xplan *xp = l->xp;

	for (uint32_t q = 0; q < p->spec->nprocs; q++) {
		struct pl_stats *s = &p->stats[q];
		const struct pl_xstat *x = &xp->st[q];

		xp->total.transfers += x->transfers;
		xp->total.payload += x->payload;
		xp->total.read += x->read;
		xp->total.requests += x->requests;
		xp->total.sent += x->sent;
		xp->total.received += x->received;
		xp->total.files += x->files;
		xp->total.needed += x->needed;
		if (!p->have_stats[q])
			continue;
		s->needed_bytes += x->needed;
		s->read_bytes += x->read;
		s->requests += x->requests;
		s->blocks += x->spans;
		s->files_opened = x->files;
		if (p->all_stats) {
			p->total.needed_bytes += x->needed;
			p->total.read_bytes += x->read;
			p->total.requests += x->requests;
			p->total.blocks += x->spans;
			xp->max_read = CM_MAX(xp->max_read, s->read_bytes);
			xp->max_files = CM_MAX(xp->max_files, x->files);
		}
	}
	if (p->all_stats)
		p->total.files_opened = xp->total.files;
}

static int xfer_stats(struct lc *l)
{
	const struct pl_xwork *w = l->xp->w;
	uint32_t np = l->p->spec->nprocs;
	uint8_t *files = NULL;
	int ret;

	l->xp->st = cm_calloc(np, sizeof(*l->xp->st));
	if (!l->xp->st)
		return -ENOMEM;
	if (w->own_files) {
		size_t bytes = ((size_t)np * l->ck->nfiles) / 8 + 1;

		if (!(files = cm_malloc(bytes)))
			return -ENOMEM;
		memcpy(files, w->own_files, bytes);
	}
	for (size_t k = 0; k < w->nx; k++) {
		const struct pl_xfer *x = &w->x[k];
		struct pl_xstat *st = &l->xp->st[x->root];

		st->transfers++;
		st->payload += x->len;
		st->needed += x->len;
		st->sent += x->len * x->nrecv;
		for (uint32_t j = 0; j < x->nrecv; j++)
			l->xp->st[w->rcv[x->first_recv + j]].received += x->len;
	}
	ret = read_costs(l, files);
	if (!ret) {
		count_files(l, files);
		add_to_plan_stats(l);
	}
	cm_free(files);
	return ret;
}

int pl_xfer_finish(struct pl_plan *p, const struct pl_ckpt *ck, struct cm_err *e)
{
	struct lc l = { .p = p, .ck = ck, .xp = p->xp };
	struct pl_xwork *w;
	int ret;

	if (!l.xp || !(w = l.xp->w))
		return 0;
	ret = local_list(&l);
	if (!ret)
		ret = xfer_stats(&l);
	pl_xwork_free(w);
	l.xp->w = NULL;
	if (ret)
		return cm_err_set(e, -ENOMEM, "plan: out of memory");
	return 0;
}
