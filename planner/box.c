/*
 * box.c - index boxes from the ceil-division rule, and their byte runs in
 * compact form (offset, run length, and a count and stride per outer
 * level) so that an inner-dimension shard of a huge tensor stays a few
 * numbers instead of millions of runs.
 */
#include <string.h>

#include "pl_private.h"

void pl_mesh_coords(const struct pl_spec *s, uint32_t di, uint32_t *coord)
{
	/* Row-major mesh coordinates of device di. */
	for (unsigned a = s->ndim; a-- > 0;) {
		coord[a] = di % s->shape[a];
		di /= s->shape[a];
	}
}

void pl_box_at(const struct pl_spec *s, const struct pl_rule *rule, unsigned ndim,
	       const uint64_t *shape, const uint32_t *coord, struct pl_box *b)
{
	unsigned nd = rule ? CM_MIN(rule->ndims, ndim) : 0;

	for (unsigned d = 0; d < ndim; d++) {
		b->start[d] = 0;
		b->stop[d] = shape[d];
	}
	for (unsigned d = 0; d < nd; d++) {
		uint64_t dim = shape[d], n = 1, idx = 0, chunk, lo;

		if (!rule->dims[d].naxes)
			continue;
		for (unsigned a = 0; a < rule->dims[d].naxes; a++) {
			unsigned ax = rule->dims[d].axes[a];

			idx = idx * s->shape[ax] + coord[ax];
			n *= s->shape[ax];   /* <= PL_MAX_DEVICES */
		}
		chunk = dim / n + (dim % n != 0);
		/*
		 * idx < n, so lo = idx * chunk = n * chunk - (n - idx) * chunk
		 * < dim + n - chunk: that is below dim when chunk >= n, and
		 * below n^2 <= 2^48 otherwise, so lo cannot wrap. lo + chunk
		 * can (dim near 2^64): compare with what is left instead.
		 */
		lo = idx * chunk;
		if (lo >= dim) {
			b->start[d] = b->stop[d] = dim;
		} else {
			b->start[d] = lo;
			b->stop[d] = chunk < dim - lo ? lo + chunk : dim;
		}
	}
}

void pl_box_of(const struct pl_spec *s, const struct pl_rule *rule,
	       unsigned ndim, const uint64_t *shape, uint32_t di,
	       struct pl_box *b)
{
	uint32_t coord[PL_MAX_AXES];

	pl_mesh_coords(s, di, coord);
	pl_box_at(s, rule, ndim, shape, coord, b);
}

int pl_box_runs(unsigned ndim, const uint64_t *shape, unsigned bits,
		uint64_t base, const struct pl_box *b, struct pl_runs *r)
{
	uint64_t estride[RL_MAX_DIMS], first = 0, run;
	int q = -1;

	/* Only the first nlev levels are ever read: no need to clear them. */
	r->off = base;
	r->len = 0;
	r->nruns = 0;
	r->nlev = 0;
	for (unsigned d = 0; d < ndim; d++)
		if (b->stop[d] <= b->start[d])
			return 0;               /* empty box: no runs */
	if (!bits)
		return 0;
	/* Element strides (the header was validated: no overflow). */
	for (unsigned d = ndim; d-- > 0;)
		estride[d] = d + 1 < ndim ? estride[d + 1] * shape[d + 1] : 1;
	for (unsigned d = 0; d < ndim; d++) {
		first += b->start[d] * estride[d];
		if (b->start[d] || b->stop[d] != shape[d])
			q = (int)d;
	}
	/* The run spans the innermost partial dimension and everything after. */
	if (q < 0)
		run = ndim ? shape[0] * estride[0] : 1;
	else
		run = (b->stop[q] - b->start[q]) * estride[q];
	/* Outer levels: dims before q with extent > 1; merge levels where the
	 * outer stride equals the inner level's whole span. */
	for (int d = 0; d < q; d++) {
		uint64_t ext = b->stop[d] - b->start[d];

		if (ext == 1)
			continue;
		if (r->nlev && r->stride[r->nlev - 1] == ext * estride[d]) {
			r->count[r->nlev - 1] *= ext;
			r->stride[r->nlev - 1] = estride[d];
			continue;
		}
		r->count[r->nlev] = ext;
		r->stride[r->nlev] = estride[d];
		r->nlev++;
	}
	/* Sub-byte dtypes: every run must start and end on a whole byte. */
	if (bits % 8) {
		if ((first * bits) % 8 || (run * bits) % 8)
			return RL_E_SUBBYTE_SPLIT;
		for (unsigned i = 0; i < r->nlev; i++)
			if ((r->stride[i] * bits) % 8)
				return RL_E_SUBBYTE_SPLIT;
	}
	r->off = base + first * bits / 8;
	r->len = run * bits / 8;
	r->nruns = 1;
	for (unsigned i = 0; i < r->nlev; i++) {
		r->stride[i] = r->stride[i] * bits / 8;
		r->nruns *= r->count[i];
	}
	return 0;
}

uint64_t pl_run_off(const struct pl_runs *r, uint64_t k)
{
	uint64_t off = r->off;

	for (unsigned i = r->nlev; i-- > 0;) {
		off += (k % r->count[i]) * r->stride[i];
		k /= r->count[i];
	}
	return off;
}
