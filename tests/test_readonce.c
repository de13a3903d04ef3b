/*
 * test_readonce.c - reading once in the cluster and files_of_process
 * (ACCEPTANCE R, F.2 under read once): every process's plan is executed
 * against synthetic file bytes, its transfers' payloads applied with its
 * scatter lists, and every shard compared byte by byte with the
 * reference; the cluster's reads are counted against the unique bytes;
 * roots and receivers must agree on every transfer; the batch plans read
 * exactly the payloads.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "pl_fake.h"
#include "../planner/transfer_assign.h"
#include "../exec/transfers.h"

#define MAXP 8

/* ---------------------------------------------------------------- */
/* Executing a process's plan and transfers on synthetic bytes       */
/* ---------------------------------------------------------------- */

struct sim {
	uint8_t *stg[64], *cnt[64];
	char why[256];
};

static void fake_bytes(const struct fake *f, uint32_t file, uint64_t off, uint64_t len,
		       uint8_t *out)
{
	for (uint64_t i = 0; i < len; i++)
		out[i] = off + i < f->files[file].size ? fk_byte(file, off + i) : 0;
}

/* Applies copy c of a buffer of avail bytes; 0, or -1 with m->why set. */
static int apply_copy(struct sim *m, const struct pl_plan *p, const uint8_t *buf,
		      uint64_t avail, const struct cm_copy *c)
{
	const struct pl_shard *sh = &p->shards[c->shard];
	uint64_t span = (uint64_t)(c->count - 1) * c->src_stride + c->len;

	if (!c->count || !c->len || c->src + span > avail || sh->dev != c->dev ||
	    c->dst < sh->offset || c->dst + (uint64_t)c->count * c->len > sh->offset + sh->nbytes) {
		snprintf(m->why, sizeof(m->why), "copy out of bounds (shard %u)", c->shard);
		return -1;
	}
	for (uint32_t k = 0; k < c->count; k++)
		for (uint32_t i = 0; i < c->len; i++) {
			uint64_t d = c->dst + (uint64_t)k * c->len + i;

			m->stg[c->dev][d] = buf[c->src + (uint64_t)k * c->src_stride + i];
			m->cnt[c->dev][d]++;
		}
	return 0;
}

/* The plan's own reads, then every transfer's payload it takes part in. */
static int run_plan(struct sim *m, const struct pl_plan *p, const struct fake *f)
{
	const struct pl_xplan *xp = p->xp;
	int ret = 0;

	for (unsigned s = 0; s < p->nslots; s++) {
		m->stg[s] = calloc(p->staging[s] + 1, 1);
		m->cnt[s] = calloc(p->staging[s] + 1, 1);
	}
	for (size_t q = 0; q < p->nreads && !ret; q++) {
		const struct cm_read *r = &p->reads[q];
		uint8_t *buf = malloc(r->len);

		fake_bytes(f, r->file, r->off, r->len, buf);
		for (uint32_t j = 0; j < r->ncopies && !ret; j++)
			ret = apply_copy(m, p, buf, r->min_len, &p->copies[r->first_copy + j]);
		free(buf);
	}
	for (size_t k = 0; xp && k < xp->nx && !ret; k++) {
		const struct pl_xfer *x = &xp->x[k];
		uint8_t *buf = malloc(x->len);

		fake_bytes(f, x->file, x->off, x->len, buf);
		for (uint32_t j = 0; j < x->ncopies && !ret; j++)
			ret = apply_copy(m, p, buf, x->len, &xp->copies[x->first_copy + j]);
		free(buf);
	}
	return ret;
}

/* Every byte of every shard of plain tensor shards: written once, right. */
static int check_shards(struct sim *m, const struct pl_plan *p, const struct pl_ckpt *ck)
{
	for (size_t i = 0; i < p->nshards; i++) {
		const struct pl_shard *sh = &p->shards[i];
		const struct pl_item *it = &p->items[sh->tensor];
		const struct pl_tensor *t = &ck->tensors[it->src];
		uint64_t c[RL_MAX_DIMS], isz = it->bits / 8, n = 1;
		struct pl_box b;

		pl_item_box(p->spec, it, p->slot_dev[sh->dev], &b);
		for (unsigned d = 0; d < it->ndim; d++) {
			c[d] = b.start[d];
			n *= b.stop[d] - b.start[d];
		}
		for (uint64_t e = 0; e < n; e++) {
			uint64_t flat = 0;

			for (unsigned d = 0; d < it->ndim; d++)
				flat = flat * it->shape[d] + c[d];
			for (uint64_t k = 0; k < isz; k++) {
				uint64_t d = sh->offset + e * isz + k;

				if (m->cnt[sh->dev][d] != 1 ||
				    m->stg[sh->dev][d] != fk_byte(t->file, t->offset + flat * isz + k)) {
					snprintf(m->why, sizeof(m->why),
						 "%s on slot %u: element %llu written %u times", it->name,
						 sh->dev, (unsigned long long)e, m->cnt[sh->dev][d]);
					return -1;
				}
			}
			for (unsigned d = it->ndim; d-- > 0;) {
				if (++c[d] < b.stop[d])
					break;
				c[d] = b.start[d];
			}
		}
	}
	return 0;
}

static void sim_free(struct sim *m, const struct pl_plan *p)
{
	for (unsigned s = 0; s < p->nslots; s++) {
		free(m->stg[s]);
		free(m->cnt[s]);
	}
}

/* NULL when process p's plan and transfers fill its shards exactly. */
static const char *simulate(const struct pl_plan *p, const struct fake *f)
{
	static struct sim m;
	int ret;

	memset(&m, 0, sizeof(m));
	ret = run_plan(&m, p, f);
	if (!ret)
		ret = check_shards(&m, p, &f->ck);
	sim_free(&m, p);
	return ret ? m.why : NULL;
}

/* ---------------------------------------------------------------- */
/* The cluster                                                       */
/* ---------------------------------------------------------------- */

struct cluster {
	struct pl_plan *p[MAXP];
	unsigned np;
	uint64_t read, unique;
};

static void cluster_free(struct cluster *c)
{
	for (unsigned q = 0; q < c->np; q++)
		pl_plan_free(c->p[q]);
	memset(c, 0, sizeof(*c));
}

/* Every process's plan of spec s: 0, or the first error (e set). */
static int plan_all(struct fake *f, const struct pl_spec *s, struct pl_opts *o,
		    struct cluster *c, struct cm_err *e)
{
	memset(c, 0, sizeof(*c));
	c->np = s->nprocs;
	for (unsigned q = 0; q < c->np; q++) {
		int ret;

		o->process = (int)q;
		cm_err_clear(e);
		if ((ret = pl_plan_build(&f->ck, s, f->align, o, &c->p[q], e)))
			return ret;
		c->read += c->p[q]->stats[q].read_bytes;
	}
	return 0;
}

/* Transfer x of one process is listed alike by its root. */
static int root_lists(const struct cluster *c, const struct pl_xplan *xp, const struct pl_xfer *x)
{
	const struct pl_xplan *rx = c->p[x->root]->xp;

	for (size_t k = 0; rx && k < rx->nx; k++) {
		const struct pl_xfer *y = &rx->x[k];

		if (y->gidx == x->gidx)
			return y->off == x->off && y->len == x->len && y->file == x->file &&
			       y->batch == x->batch && y->nrecv == x->nrecv &&
			       !memcmp(rx->recv + y->first_recv, xp->recv + x->first_recv,
				       x->nrecv * sizeof(int32_t));
	}
	return 0;
}

/* The cluster's transfers (each in its root's list): numbered 0..n-1,
 * batches in order, each batch's payloads within the bound or alone. */
static const char *check_batches(const struct cluster *c, uint64_t bound)
{
	uint64_t n = c->p[0]->xp ? c->p[0]->xp->ntotal : 0, sum = 0, count = 0;
	const struct pl_xfer **all = calloc(n + 1, sizeof(*all));
	const char *bad = NULL;

	for (unsigned q = 0; q < c->np; q++)
		for (size_t k = 0; c->p[q]->xp && k < c->p[q]->xp->nx; k++) {
			const struct pl_xfer *x = &c->p[q]->xp->x[k];

			if (x->root == (int32_t)q && x->gidx < n)
				all[x->gidx] = x;
		}
	for (uint64_t g = 0; g < n && !bad; g++) {
		if (!all[g]) {
			bad = "a transfer no root lists";
			break;
		}
		if (g && all[g]->batch != all[g - 1]->batch) {
			if (all[g]->batch != all[g - 1]->batch + 1)
				bad = "batches out of order";
			sum = count = 0;
		}
		sum += all[g]->len;
		count++;
		if (sum > bound && count > 1)
			bad = "a batch over its bound";
	}
	free(all);
	return bad;
}

/* Every plan correct; plans agree on the transfers; batches bounded. */
static const char *check_cluster(const struct cluster *c, const struct fake *f,
				 uint64_t batch_bytes)
{
	static char why[300];

	for (unsigned q = 0; q < c->np; q++) {
		const struct pl_xplan *xp = c->p[q]->xp;
		const char *bad = simulate(c->p[q], f);

		if (bad) {
			snprintf(why, sizeof(why), "process %u: %s", q, bad);
			return why;
		}
		if (!xp)
			continue;
		if (xp->digest != c->p[0]->xp->digest || xp->ntotal != c->p[0]->xp->ntotal)
			return "processes disagree on the transfer list";
		for (size_t k = 0; k < xp->nx; k++) {
			const struct pl_xfer *x = &xp->x[k];

			if (!root_lists(c, xp, x))
				return "a transfer is not listed alike by its root";
		}
	}
	return check_batches(c, batch_bytes);
}

/* Bytes of the plain tensors: what the cluster needs, once. */
static uint64_t unique_bytes(const struct cluster *c, const struct fake *f)
{
	uint64_t n = 0;

	for (size_t i = 0; i < c->p[0]->nitems; i++)
		n += f->t[c->p[0]->items[i].src].nbytes;
	return n;
}

static struct pl_opts ro_opts(void)
{
	struct pl_opts o;

	pl_opts_default(&o);
	o.read_once = 1;
	return o;
}

/* Builds every plan of json, checks them; returns the cluster (or np 0). */
static int cluster_of(struct fake *f, const char *json, struct pl_opts *o, struct cluster *c)
{
	struct pl_spec *s = fk_spec(json);
	struct cm_err e;
	const char *bad;
	int ret;

	memset(c, 0, sizeof(*c));
	if (!s)
		return -1;
	ret = plan_all(f, s, o, c, &e);
	pl_spec_free(s);
	if (ret) {
		fprintf(stderr, "    plan: %s\n", e.msg);
		cluster_free(c);
		return ret;
	}
	c->unique = unique_bytes(c, f);
	if ((bad = check_cluster(c, f, o->batch_bytes))) {
		fprintf(stderr, "    %s (%s)\n", bad, json);
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------- */
/* ACCEPTANCE R                                                      */
/* ---------------------------------------------------------------- */

/* R.1: (8,6) F32 replicated over 2 processes: p0 reads [0,96), p1
 * [96,192), each sends its half to the other. */
static void r1_replicated_tensor_read_in_halves(void)
{
	struct fake f;
	struct pl_opts o = ro_opts();
	struct cluster c;
	const struct pl_xfer *x;

	fk_init(&f, 1, 64);
	fk_add(&f, 0, "w", RL_DTYPE_F32, 2, (uint64_t[]){ 8, 6 });
	CHECK_EQ(cluster_of(&f, "{\"mesh\":{\"shape\":[2],\"axes\":[\"dp\"],"
			    "\"process_of_device\":[0,1]}}", &o, &c), 0);
	for (unsigned q = 0; q < 2; q++) {
		CHECK_EQ(c.p[q]->xp->nx, 2);
		x = &c.p[q]->xp->x[0];
		CHECK_EQ(x->root, 0);
		CHECK_EQ(x->off, 64);
		CHECK_EQ(x->len, 96);
		CHECK_EQ(x->nrecv, 1);
		x = &c.p[q]->xp->x[1];
		CHECK_EQ(x->root, 1);
		CHECK_EQ(x->off, 64 + 96);
		CHECK_EQ(x->len, 96);
		CHECK_EQ(c.p[q]->nreads, 0);        /* nothing read outside transfers */
		CHECK_EQ(c.p[q]->stats[q].read_bytes, 96);
	}
	CHECK_EQ(c.read, 192);
	cluster_free(&c);
}

/* R.2: (4,8) F32, columns split over tp inside each process, replicated
 * over dp: read by rows, 128 bytes in the cluster (1.00x), where reading
 * whole column boxes read 224. */
static void r2_column_shards_read_by_rows(void)
{
	struct fake f;
	struct pl_opts o = ro_opts();
	struct cluster c;
	static const char json[] = "{\"mesh\":{\"shape\":[2,2],\"axes\":[\"dp\",\"tp\"],"
				   "\"process_of_device\":[0,0,1,1]},"
				   "\"rules\":[{\"match\":\"w\",\"spec\":[null,\"tp\"]}]}";

	fk_init(&f, 1, 64);
	fk_add(&f, 0, "w", RL_DTYPE_F32, 2, (uint64_t[]){ 4, 8 });
	CHECK_EQ(cluster_of(&f, json, &o, &c), 0);
	CHECK_EQ(c.p[0]->xp->nx, 2);
	CHECK_EQ(c.p[0]->xp->x[0].off, 64);         /* rows 0-1 */
	CHECK_EQ(c.p[0]->xp->x[0].len, 64);
	CHECK_EQ(c.p[0]->xp->x[1].root, 1);         /* rows 2-3 */
	/* p0 scatters rows 0-1 into its two column shards: one strided copy each */
	CHECK_EQ(c.p[0]->xp->x[0].ncopies, 2);
	CHECK_EQ(c.p[0]->xp->copies[0].count, 2);
	CHECK_EQ(c.p[0]->xp->copies[0].src_stride, 32);
	CHECK_EQ(c.read, 128);
	cluster_free(&c);
	o.read_once = 0;
	CHECK_EQ(cluster_of(&f, json, &o, &c), 0);
	CHECK_EQ(c.read, 256);                      /* each process reads it all */
	cluster_free(&c);
}

/* R.3: a (6,) I8 tensor replicated over 3 processes, 4096-byte
 * alignment: one process reads its one block and sends it. */
static void r3_tiny_replicated_tensor_read_by_one(void)
{
	struct fake f;
	struct pl_opts o = ro_opts();
	struct cluster c;
	unsigned readers = 0;

	fk_init(&f, 1, 64);
	fk_add(&f, 0, "pad", RL_DTYPE_U8, 1, (uint64_t[]){ 10000 });
	fk_add(&f, 0, "x", RL_DTYPE_I8, 1, (uint64_t[]){ 6 });
	fk_add(&f, 0, "pad2", RL_DTYPE_U8, 1, (uint64_t[]){ 10000 });
	f.align[0] = (struct pl_align){ 4096, 4096 };
	CHECK_EQ(cluster_of(&f, "{\"mesh\":{\"shape\":[3],\"axes\":[\"dp\"],"
			    "\"process_of_device\":[0,1,2]},\"tensors\":[\"x\"]}", &o, &c), 0);
	CHECK_EQ(c.p[0]->xp->nx, 1);
	CHECK_EQ(c.p[0]->xp->x[0].len, 6);
	CHECK_EQ(c.p[0]->xp->x[0].nrecv, 2);
	for (unsigned q = 0; q < 3; q++)
		readers += c.p[q]->stats[q].read_bytes != 0;
	CHECK_EQ(readers, 1);
	CHECK_EQ(c.read, 4096);
	cluster_free(&c);
}

/* R.4: files_of_process. A tensor of a file only process 1 may read,
 * replicated on 0 and 1: process 1 reads it all and sends it. */
static void r4_file_readable_by_one_process(void)
{
	struct fake f;
	struct pl_opts o = ro_opts();
	struct cluster c;

	fk_init(&f, 2, 64);
	fk_add(&f, 0, "a", RL_DTYPE_F32, 2, (uint64_t[]){ 8, 8 });
	fk_add(&f, 1, "b", RL_DTYPE_F32, 2, (uint64_t[]){ 8, 8 });
	CHECK_EQ(cluster_of(&f, "{\"mesh\":{\"shape\":[2],\"axes\":[\"dp\"],"
			    "\"process_of_device\":[0,1]},"
			    "\"files_of_process\":[[\"fake0.safetensors\"],null]}", &o, &c), 0);
	for (size_t k = 0; k < c.p[0]->xp->nx; k++) {
		const struct pl_xfer *x = &c.p[0]->xp->x[k];

		if (x->file == 1)
			CHECK_EQ(x->root, 1);
	}
	/* b must come from 1: a goes to 0, so both read 256 */
	CHECK_EQ(c.p[0]->xp->st[1].payload, 256);
	CHECK_EQ(c.p[0]->xp->st[0].payload, 256);
	CHECK_EQ(c.p[0]->xp->st[0].files, 1);           /* p0 opens only fake0 */
	CHECK_EQ(c.read, 512);
	cluster_free(&c);
}

/* R.4: nobody that needs the file may read it: another process that may
 * reads and sends; read once or not. */
static void r4_file_read_for_others(void)
{
	static const char json[] =
		"{\"mesh\":{\"shape\":[3],\"axes\":[\"dp\"],\"process_of_device\":[0,1,2]},"
		"\"rules\":[{\"match\":\"b\",\"spec\":[\"dp\"]}],"
		"\"files_of_process\":[[\"fake0*\"],[\"fake0*\"],[\"*\"]]}";
	struct fake f;
	struct cluster c;

	fk_init(&f, 2, 64);
	fk_add(&f, 0, "a", RL_DTYPE_F32, 2, (uint64_t[]){ 6, 8 });
	fk_add(&f, 1, "b", RL_DTYPE_F32, 2, (uint64_t[]){ 6, 8 });
	for (int once = 0; once < 2; once++) {
		struct pl_opts o = ro_opts();

		o.read_once = once;
		CHECK_EQ(cluster_of(&f, json, &o, &c), 0);
		for (unsigned q = 0; q < 3; q++)
			for (size_t k = 0; k < c.p[q]->xp->nx; k++)
				if (c.p[q]->xp->x[k].file == 1)
					CHECK_EQ(c.p[q]->xp->x[k].root, 2);
		/* b's rows of 0 and 1 travel from 2, which keeps its own and,
		 * busy with b, reads none of a */
		CHECK_EQ(c.p[0]->xp->st[2].sent, 64 + 64);
		CHECK_EQ(c.p[0]->stats[0].files_opened, 1);
		CHECK_EQ(c.read, once ? 192 + 192 : 3 * 192 + 192);
		cluster_free(&c);
	}
}

/* R.4: no process may read a needed file: the plan fails naming it. */
static void r4_file_nobody_may_read_fails(void)
{
	struct fake f;
	struct pl_opts o = ro_opts();
	struct pl_spec *s;
	struct pl_plan *p = NULL;
	struct cm_err e;

	fk_init(&f, 2, 64);
	fk_add(&f, 0, "a", RL_DTYPE_F32, 1, (uint64_t[]){ 8 });
	fk_add(&f, 1, "b", RL_DTYPE_F32, 1, (uint64_t[]){ 8 });
	s = fk_spec("{\"mesh\":{\"shape\":[2],\"axes\":[\"dp\"],\"process_of_device\":[0,1]},"
		    "\"files_of_process\":[[\"fake0.safetensors\"],[\"fake0.safetensors\"]]}");
	CHECK(s);
	for (int once = 0; once < 2; once++) {
		o.read_once = once;
		cm_err_clear(&e);
		CHECK_EQ(pl_plan_build(&f.ck, s, f.align, &o, &p, &e), RL_E_FILE_UNAVAILABLE);
		CHECK(p == NULL);
		CHECKF(strstr(e.msg, "fake1.safetensors") && strstr(e.msg, "\"b\""), "%s", e.msg);
	}
	pl_spec_free(s);
}

/* ---------------------------------------------------------------- */
/* More shardings                                                    */
/* ---------------------------------------------------------------- */

#define MESH_4x2 "\"mesh\":{\"shape\":[4,2],\"axes\":[\"data\",\"model\"]," \
	"\"process_of_device\":[0,0,1,1,2,2,3,3]}"

/* F.2 under read once: (8,8) F32, columns over the local axis, every
 * process needs all of it: four row ranges of 64 bytes, 256 in the
 * cluster (reading whole column boxes read 480). */
static void f2_column_split_read_once_by_rows(void)
{
	struct fake f;
	struct pl_opts o = ro_opts();
	struct cluster c;

	fk_init(&f, 1, 64);
	fk_add(&f, 0, "w", RL_DTYPE_F32, 2, (uint64_t[]){ 8, 8 });
	CHECK_EQ(cluster_of(&f, "{" MESH_4x2 ",\"rules\":[{\"match\":\"w\","
			    "\"spec\":[null,\"model\"]}]}", &o, &c), 0);
	CHECK_EQ(c.p[0]->xp->ntotal, 4);
	for (unsigned q = 0; q < 4; q++) {
		CHECK_EQ(c.p[q]->xp->x[q].root, (int)q);
		CHECK_EQ(c.p[q]->xp->x[q].off, 64 + 64 * q);
		CHECK_EQ(c.p[q]->xp->x[q].nrecv, 3);
		CHECK_EQ(c.p[q]->stats[q].read_bytes, 64);
	}
	CHECK_EQ(c.read, 256);
	cluster_free(&c);
}

/*
 * Issue 32's mutant: a transfer cut exactly where a replicated tensor
 * ends and a column-split one begins. Process 0 alone reads the file
 * (files_of_process), so one run of its share covers a (replicated:
 * needed by both) and b (columns split: half of each 32-byte row for each
 * process); 16-byte transfers cut b at half rows. A process that needs
 * none of a transfer's bytes is no receiver of it: only 1, for b's second
 * halves and for a.
 */
static void transfer_cut_at_a_split_tensor(void)
{
	struct fake f;
	struct pl_opts o = ro_opts();
	struct cluster c;
	unsigned nb = 0;

	fk_init(&f, 1, 64);
	fk_add(&f, 0, "a", RL_DTYPE_F32, 2, (uint64_t[]){ 4, 8 });
	fk_add(&f, 0, "b", RL_DTYPE_F32, 2, (uint64_t[]){ 4, 8 });
	o.batch_bytes = 16;
	o.transfer_align = 16;
	CHECK_EQ(cluster_of(&f, "{\"mesh\":{\"shape\":[2],\"axes\":[\"tp\"],"
			    "\"process_of_device\":[0,1]},"
			    "\"files_of_process\":[[\"fake0.safetensors\"],[]],"
			    "\"rules\":[{\"match\":\"b\",\"spec\":[null,\"tp\"]}]}", &o, &c), 0);
	for (unsigned q = 0; q < 2; q++) {
		const struct pl_xplan *xp = c.p[q]->xp;

		for (size_t k = 0; xp && k < xp->nx; k++) {
			const struct pl_xfer *x = &xp->x[k];
			uint64_t b0 = f.t[1].offset;
			int in_b = x->off >= b0, half = in_b ? (int)((x->off - b0) % 32 / 16) : 1;

			CHECK_EQ(x->root, 0);
			CHECKF(x->len == 16 && (x->off - 64) % 16 == 0, "transfer at %llu, %llu bytes",
			       (unsigned long long)x->off, (unsigned long long)x->len);
			CHECKF(x->nrecv == (uint32_t)half &&
			       (!half || xp->recv[x->first_recv] == 1),
			       "process %u: transfer at %llu (%s) has %u receivers, first %d", q,
			       (unsigned long long)x->off, in_b ? "b" : "a", x->nrecv,
			       x->nrecv ? xp->recv[x->first_recv] : -1);
			nb += in_b && q == 1;
		}
	}
	CHECK_EQ(nb, 4); /* b's halves that 1 needs, one a row */
	cluster_free(&c);
}

/* Rows over processes, columns over local devices: partitioned, nothing
 * travels, each process reads its rows. Partly replicated (rows over
 * half the processes): each half's rows travel inside its half. */
static void partitioned_and_partly_replicated(void)
{
	struct fake f;
	struct pl_opts o = ro_opts();
	struct cluster c;

	fk_init(&f, 1, 64);
	fk_add(&f, 0, "w", RL_DTYPE_BF16, 2, (uint64_t[]){ 16, 12 });
	CHECK_EQ(cluster_of(&f, "{" MESH_4x2 ",\"rules\":[{\"match\":\"w\","
			    "\"spec\":[\"data\",\"model\"]}]}", &o, &c), 0);
	CHECK(c.p[0]->xp == NULL || c.p[0]->xp->ntotal == 0);
	CHECK_EQ(c.read, 384);
	cluster_free(&c);
	CHECK_EQ(cluster_of(&f, "{\"mesh\":{\"shape\":[2,2,2],\"axes\":[\"a\",\"b\",\"m\"],"
			    "\"process_of_device\":[0,0,1,1,2,2,3,3]},"
			    "\"rules\":[{\"match\":\"w\",\"spec\":[\"a\",\"m\"]}]}", &o, &c), 0);
	CHECK_EQ(c.read, 384);
	for (unsigned q = 0; q < 4; q++)
		for (size_t k = 0; k < c.p[q]->xp->nx; k++) {
			const struct pl_xfer *x = &c.p[q]->xp->x[k];

			CHECK_EQ(x->nrecv, 1);  /* only the other process of its half */
			CHECK_EQ(x->root / 2, c.p[q]->xp->recv[x->first_recv] / 2);
		}
	cluster_free(&c);
}

/* ,"files_of_process":[...] giving each process a random subset of the
 * three fake files, each file to at least one process. */
static int random_files_of_process(char *out, size_t cap, uint32_t np)
{
	unsigned mask[MAXP];
	int len = snprintf(out, cap, ",\"files_of_process\":[");

	for (uint32_t q = 0; q < np; q++)
		mask[q] = (unsigned)(th_rand() % 8);
	for (unsigned fl = 0; fl < 3; fl++)
		mask[th_rand() % np] |= 1u << fl;
	for (uint32_t q = 0; q < np; q++) {
		len += snprintf(out + len, cap - len, "%s[", q ? "," : "");
		for (unsigned fl = 0, n = 0; fl < 3; fl++)
			if (mask[q] >> fl & 1)
				len += snprintf(out + len, cap - len, "%s\"fake%u.safetensors\"",
						n++ ? "," : "", fl);
		len += snprintf(out + len, cap - len, "]");
	}
	return len + snprintf(out + len, cap - len, "]");
}

/* Random meshes, process maps, rules and files: every process's shards
 * exact, plans agree, batches bounded; without alignment or coalescing
 * the cluster reads each byte exactly once, and with 512-byte alignment
 * at most 1.01x plus two blocks per read span. */
static void read_once_random_exact_once(void)
{
	for (int iter = 0; iter < 150; iter++) {
		struct fake f;
		struct pl_opts o = ro_opts();
		struct cluster c;
		char json[2048];
		uint32_t ma = 1 + th_rand() % 4, mb = 1 + th_rand() % 3, ndev = ma * mb;
		uint32_t np = 1 + (uint32_t)(th_rand() % CM_MIN(ndev, MAXP));
		int len, nt = 1 + (int)(th_rand() % 8), aligned = iter % 3 == 2;
		uint64_t blocks = 0;

		fk_init(&f, 3, 8 + th_rand() % 100);
		for (int i = 0; i < nt; i++) {
			char name[8];

			snprintf(name, sizeof(name), "t%d", i);
			fk_add(&f, (unsigned)(i % 3), name, i % 2 ? RL_DTYPE_BF16 : RL_DTYPE_F32, 2,
			       (uint64_t[]){ 1 + th_rand() % 40, 1 + th_rand() % 40 });
		}
		len = snprintf(json, sizeof(json), "{\"mesh\":{\"shape\":[%u,%u],"
			       "\"axes\":[\"a\",\"b\"],\"process_of_device\":[", ma, mb);
		for (uint32_t d = 0; d < ndev; d++)
			len += snprintf(json + len, sizeof(json) - len, "%s%u", d ? "," : "",
					d < np ? d : (uint32_t)(th_rand() % np));
		len += snprintf(json + len, sizeof(json) - len, "]},\"rules\":["
				"{\"match\":\"t[03]\",\"spec\":[\"a\"]},"
				"{\"match\":\"t[14]\",\"spec\":[null,\"b\"]},"
				"{\"match\":\"t[25]\",\"spec\":[\"b\",\"a\"]},"
				"{\"match\":\"t6\",\"spec\":[[\"a\",\"b\"]]}]");
		if (iter % 2)   /* every file readable by someone, not by all */
			len += random_files_of_process(json + len, sizeof(json) - len, np);
		snprintf(json + len, sizeof(json) - len, "}");
		o.batch_bytes = 1 + th_rand() % 3000;
		o.min_gap = 0;
		o.ratio = 1.0;
		for (int fl = 0; aligned && fl < 3; fl++)
			f.align[fl] = (struct pl_align){ 512, 512 };
		if (cluster_of(&f, json, &o, &c)) {
			CHECKF(0, "iter %d: %s", iter, json);
		}
		for (unsigned q = 0; q < c.np; q++)
			blocks += c.p[q]->stats[q].blocks;
		if (!aligned)
			CHECKF(c.read == c.unique, "iter %d: read %llu, unique %llu (%s)", iter,
			       (unsigned long long)c.read, (unsigned long long)c.unique, json);
		else
			CHECKF(c.read <= c.unique + c.unique / 100 + 2 * 512 * blocks,
			       "iter %d: read %llu, unique %llu, %llu spans", iter,
			       (unsigned long long)c.read, (unsigned long long)c.unique,
			       (unsigned long long)blocks);
		cluster_free(&c);
	}
}

/* ---------------------------------------------------------------- */
/* Batch plans                                                       */
/* ---------------------------------------------------------------- */

/* Runs batch plan bq: shard k must hold payload k's file bytes. */
static const char *check_batch(const struct pl_plan *bq, const struct pl_plan *p,
			       uint64_t batch, const struct fake *f)
{
	static struct sim m;
	const char *bad = NULL;
	size_t k = 0;

	memset(&m, 0, sizeof(m));
	m.stg[0] = calloc(bq->staging[0] + 1, 1);
	m.cnt[0] = calloc(bq->staging[0] + 1, 1);
	for (size_t q = 0; q < bq->nreads && !bad; q++) {
		const struct cm_read *r = &bq->reads[q];
		uint8_t *buf = malloc(r->len);

		fake_bytes(f, r->file, r->off, r->len, buf);
		for (uint32_t j = 0; j < r->ncopies && !bad; j++)
			if (apply_copy(&m, bq, buf, r->min_len, &bq->copies[r->first_copy + j]))
				bad = m.why;
		free(buf);
	}
	for (size_t i = 0; i < p->xp->nx && !bad; i++) {
		const struct pl_xfer *x = &p->xp->x[i];
		const struct pl_shard *sh;

		if (x->root != p->process || x->batch != batch)
			continue;
		sh = &bq->shards[k++];
		if (sh->nbytes != x->len)
			bad = "payload size";
		for (uint64_t b = 0; b < x->len && !bad; b++)
			if (m.cnt[0][sh->offset + b] != 1 ||
			    m.stg[0][sh->offset + b] != fk_byte(x->file, x->off + b))
				bad = "payload byte";
	}
	if (!bad && k != bq->nshards)
		bad = "shard count";
	free(m.stg[0]);
	free(m.cnt[0]);
	return bad;
}

/* Every root's batch plans read exactly its payloads, as many bytes as
 * its statistics predict, opening only the files it reads. */
static void batch_plans_read_the_payloads(void)
{
	for (int iter = 0; iter < 20; iter++) {
		struct fake f;
		struct pl_opts o = ro_opts();
		struct cluster c;

		fk_init(&f, 2, 100);
		for (int i = 0; i < 6; i++) {
			char name[8];

			snprintf(name, sizeof(name), "t%d", i);
			fk_add(&f, (unsigned)(i % 2), name, RL_DTYPE_F32, 2,
			       (uint64_t[]){ 1 + th_rand() % 200, 1 + th_rand() % 200 });
		}
		f.align[0] = (struct pl_align){ 4096, 4096 };
		f.align[1] = (struct pl_align){ 512, 512 };
		o.batch_bytes = 4096 + th_rand() % 200000;
		o.chunk = 4096 * (1 + th_rand() % 16);
		CHECK_EQ(cluster_of(&f, "{\"mesh\":{\"shape\":[3,2],\"axes\":[\"dp\",\"tp\"],"
				    "\"process_of_device\":[0,0,1,1,2,2]},\"rules\":["
				    "{\"match\":\"t[024]\",\"spec\":[\"tp\"]},"
				    "{\"match\":\"t[135]\",\"spec\":[null,\"tp\"]}]}", &o, &c), 0);
		for (unsigned q = 0; q < c.np; q++) {
			uint64_t read = 0;

			for (uint64_t b = 0; b < c.p[q]->xp->nbatches; b++) {
				struct pl_plan *bq;
				struct pl_exec ex;
				struct cm_err e;
				const char *bad;

				CHECK_EQ(ex_xfer_batch_plan(c.p[q], b, o.chunk, &bq, &e), 0);
				bad = check_batch(bq, c.p[q], b, &f);
				read += bq->stats[0].read_bytes;
				pl_plan_exec(bq, &ex);
				/* min_len: what must arrive, up to the last payload
				 * byte and never past the end of the file (an aligned
				 * read may ask for more; the engine stops at EOF) */
				for (size_t r = 0; r < ex.nreads; r++) {
					const struct cm_read *rd = &ex.reads[r];

					CHECK(rd->file < ex.nfiles && rd->len <= o.chunk);
					CHECKF(rd->min_len && rd->min_len <= rd->len &&
					       rd->off + rd->min_len <= ex.file_sizes[rd->file],
					       "iter %d process %u batch %llu read %zu: %llu + %u (%u) "
					       "in a file of %llu", iter, q, (unsigned long long)b, r,
					       (unsigned long long)rd->off, rd->min_len, rd->len,
					       (unsigned long long)ex.file_sizes[rd->file]);
				}
				pl_plan_free(bq);
				CHECKF(!bad, "iter %d process %u batch %llu: %s", iter, q,
				       (unsigned long long)b, bad);
			}
			CHECK_EQ(read, c.p[q]->xp->st[q].read);
		}
		cluster_free(&c);
	}
}

/* ---------------------------------------------------------------- */
/* files_of_process, files opened, statistics                       */
/* ---------------------------------------------------------------- */

static void files_of_process_spec_errors(void)
{
	static const struct {
		const char *fop;
		int code;
	} cases[] = {
		{ "{}", RL_E_SPEC },
		{ "[[1]]", RL_E_SPEC },
		{ "[[\"\"]]", RL_E_SPEC },
		{ "[\"a\"]", RL_E_SPEC },
		{ "[null, [\"a\", \"b*\"]]", 0 },
		{ "[]", 0 },
	};

	for (size_t i = 0; i < CM_ARRAY_SIZE(cases); i++) {
		char json[256];
		struct pl_spec *s = pl_spec_new();
		struct cm_err e;

		snprintf(json, sizeof(json), "{\"mesh\":{\"shape\":[2],\"axes\":[\"x\"],"
			 "\"process_of_device\":[0,1]},\"files_of_process\":%s}", cases[i].fop);
		cm_err_clear(&e);
		CHECKF(pl_spec_parse(s, json, strlen(json), &e) == cases[i].code, "%s: %s",
		       cases[i].fop, e.msg);
		if (cases[i].code)
			CHECKF(strstr(e.msg, "files_of_process"), "%s", e.msg);
		pl_spec_free(s);
	}
}

/* More entries than processes: the plan refuses the spec. */
static void files_of_process_more_entries_than_processes(void)
{
	struct fake f;
	struct pl_opts o = ro_opts();
	struct pl_spec *s;
	struct pl_plan *p = NULL;
	struct cm_err e;

	fk_init(&f, 1, 64);
	fk_add(&f, 0, "a", RL_DTYPE_F32, 1, (uint64_t[]){ 8 });
	s = fk_spec("{\"mesh\":{\"shape\":[2],\"axes\":[\"x\"],\"process_of_device\":[0,1]},"
		    "\"files_of_process\":[null,null,null]}");
	CHECK(s);
	cm_err_clear(&e);
	CHECK_EQ(pl_plan_build(&f.ck, s, f.align, &o, &p, &e), RL_E_SPEC_MESH);
	CHECKF(strstr(e.msg, "files_of_process"), "%s", e.msg);
	pl_spec_free(s);
}

/* The engine is given only the files the process reads, renumbered;
 * the plan's own reads keep the checkpoint's numbers. */
static void engine_given_only_files_read(void)
{
	struct fake f;
	struct pl_opts o;
	struct pl_spec *s;
	struct pl_plan *p;
	struct pl_exec ex;
	struct cm_err e;

	fk_init(&f, 3, 64);
	fk_add(&f, 0, "a", RL_DTYPE_F32, 1, (uint64_t[]){ 8 });
	fk_add(&f, 1, "b", RL_DTYPE_F32, 1, (uint64_t[]){ 8 });
	fk_add(&f, 2, "c", RL_DTYPE_F32, 1, (uint64_t[]){ 8 });
	pl_opts_default(&o);
	s = fk_spec("{\"tensors\":[\"b\"]}");
	CHECK(s);
	CHECK_EQ(pl_plan_build(&f.ck, s, f.align, &o, &p, &e), 0);
	pl_plan_exec(p, &ex);
	CHECK_EQ(ex.nfiles, 1);
	CHECK_EQ(ex.file_index[0], 1);
	CHECK_STR(ex.paths[0], "fake1.safetensors");
	CHECK_EQ(ex.reads[0].file, 0);
	CHECK_EQ(p->reads[0].file, 1);
	pl_plan_free(p);
	pl_spec_free(s);
}

/* Transfer statistics add up: bytes sent = bytes received, payloads =
 * transfer bytes, files opened per process. */
static void transfer_statistics_add_up(void)
{
	struct fake f;
	struct pl_opts o = ro_opts();
	struct cluster c;
	struct pl_xstats t, x;
	uint64_t sent = 0, received = 0, payload = 0, maxread = 0;

	fk_init(&f, 2, 64);
	fk_add(&f, 0, "a", RL_DTYPE_F32, 2, (uint64_t[]){ 30, 10 });
	fk_add(&f, 1, "b", RL_DTYPE_F32, 2, (uint64_t[]){ 30, 10 });
	CHECK_EQ(cluster_of(&f, "{" MESH_4x2 ",\"rules\":[{\"match\":\"a\","
			    "\"spec\":[\"model\"]}]}", &o, &c), 0);
	for (unsigned q = 0; q < 4; q++) {
		CHECK_EQ(pl_plan_xstats(c.p[0], (int)q, &x), 0);
		sent += x.sent;
		received += x.received;
		payload += x.payload;
		maxread = CM_MAX(maxread, c.p[0]->stats[q].read_bytes);
		CHECK_EQ(x.files, c.p[0]->stats[q].files_opened);
		CHECK_EQ(x.received, c.unique - x.payload);     /* all of it, but its own */
	}
	CHECK_EQ(pl_plan_xstats(c.p[0], -1, &t), 0);
	CHECK_EQ(sent, received);
	CHECK_EQ(t.sent, sent);
	CHECK_EQ(payload, c.unique);
	CHECK_EQ(t.payload, c.unique);
	CHECK_EQ(t.max_read, maxread);
	CHECK_EQ(c.p[0]->total.read_bytes, c.read);
	cluster_free(&c);
}

/* The case in miniature: a llama-like checkpoint in 4 files on a
 * 2x4 mesh (q/k/v/gate/up/lm_head by rows over model, o/down/embed by
 * columns, replicated over data): each byte read once (1.00x), where
 * handing out whole boxes read 1.37x. */
static void llama_2x4_read_once(void)
{
	static const char *names[] = { "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
				       "up_proj", "down_proj" };
	static const uint64_t shapes[][2] = { { 64, 64 }, { 16, 64 }, { 16, 64 }, { 64, 64 },
					      { 176, 64 }, { 176, 64 }, { 64, 176 } };
	struct fake f;
	struct pl_opts o = ro_opts();
	struct cluster c;
	int n = 0;

	fk_init(&f, 4, 256);
	fk_add(&f, 0, "embed_tokens", RL_DTYPE_BF16, 2, (uint64_t[]){ 500, 64 });
	for (int l = 0; l < 4; l++)
		for (int k = 0; k < 7; k++) {
			char name[32];

			snprintf(name, sizeof(name), "layers.%d.%s", l, names[k]);
			fk_add(&f, (unsigned)(l * 4 + k) * 4 / 28, name, RL_DTYPE_BF16, 2, shapes[k]);
			n++;
		}
	fk_add(&f, 3, "lm_head", RL_DTYPE_BF16, 2, (uint64_t[]){ 500, 64 });
	for (int fl = 0; fl < 4; fl++)
		f.align[fl] = (struct pl_align){ 4096, 4096 };
	CHECK_EQ(cluster_of(&f, "{\"mesh\":{\"shape\":[2,4],\"axes\":[\"data\",\"model\"],"
			    "\"process_of_device\":[0,0,0,0,1,1,1,1]},\"rules\":["
			    "{\"match\":\".*(q|k|v|gate|up)_proj|lm_head\",\"spec\":[\"model\"]},"
			    "{\"match\":\".*(o|down)_proj|embed_tokens\",\"spec\":[null,\"model\"]}]}",
			    &o, &c), 0);
	CHECK(n == 28);
	CHECKF(c.read <= c.unique + c.unique / 100 + 4 * 2 * 4096,
	       "read %llu, unique %llu", (unsigned long long)c.read,
	       (unsigned long long)c.unique);
	cluster_free(&c);
}

/* Failing the n-th allocation of a read-once plan, for every n: a clean
 * -ENOMEM, no leak. */
static void read_once_alloc_failures(void)
{
	struct fake f;
	struct pl_opts o = ro_opts();
	struct pl_spec *s;
	long tries = 0;
	int done = 0;

	fk_init(&f, 2, 64);
	fk_add(&f, 0, "a", RL_DTYPE_F32, 2, (uint64_t[]){ 30, 10 });
	fk_add(&f, 1, "b", RL_DTYPE_F32, 2, (uint64_t[]){ 30, 10 });
	s = fk_spec("{" MESH_4x2 ",\"rules\":[{\"match\":\"a\",\"spec\":[null,\"model\"]}],"
		    "\"files_of_process\":[null,[\"fake1*\"]]}");
	CHECK(s);
	o.process = 1;
	for (long n = 0; !done && n < 100000; n++, tries++) {
		long live = cm_alloc_live();
		struct pl_plan *p = NULL, *bq = NULL;
		struct cm_err e;
		int ret;

		cm_err_clear(&e);
		cm_alloc_fail_after(n);
		ret = pl_plan_build(&f.ck, s, f.align, &o, &p, &e);
		if (!ret)
			ret = ex_xfer_batch_plan(p, 0, o.chunk, &bq, &e);
		cm_alloc_fail_after(-1);
		if (!ret) {
			const char *bad = simulate(p, &f);

			CHECKF(!bad, "%s", bad);
			done = 1;
		} else {
			CHECKF(ret == -ENOMEM, "n %ld: %d %s", n, ret, e.msg);
		}
		pl_plan_free(bq);
		pl_plan_free(p);
		CHECKF(cm_alloc_live() == live, "n %ld: leak", n);
	}
	pl_spec_free(s);
	CHECK(done);
	CHECKF(tries > 50, "only %ld allocations", tries);
}

int main(void)
{
	th_seed();
	RUN(r1_replicated_tensor_read_in_halves);
	RUN(r2_column_shards_read_by_rows);
	RUN(r3_tiny_replicated_tensor_read_by_one);
	RUN(r4_file_readable_by_one_process);
	RUN(r4_file_read_for_others);
	RUN(r4_file_nobody_may_read_fails);
	RUN(f2_column_split_read_once_by_rows);
	RUN(transfer_cut_at_a_split_tensor);
	RUN(partitioned_and_partly_replicated);
	RUN(read_once_random_exact_once);
	RUN(batch_plans_read_the_payloads);
	RUN(files_of_process_spec_errors);
	RUN(files_of_process_more_entries_than_processes);
	RUN(engine_given_only_files_read);
	RUN(transfer_statistics_add_up);
	RUN(llama_2x4_read_once);
	RUN(read_once_alloc_failures);
	return th_done();
}
