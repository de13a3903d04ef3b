/*
 * transfer_query.c - what a built plan tells api/ about its transfers: the ones
 * the planned process takes part in, the cluster's summary, the
 * transfer statistics of each process, and what exec/transfers.c needs
 * to read a batch of them (the process, the files' alignment).
 */
#include <errno.h>

#include "transfer_assign.h"

int pl_plan_process(const struct pl_plan *p)
{
	return p->process;
}

int pl_plan_stats_only(const struct pl_plan *p)
{
	return p->stats_only;
}

void pl_plan_xfiles(const struct pl_plan *p, struct pl_xfiles *out)
{
	out->nfiles = p->nfiles;
	out->sizes = p->file_sizes;
	out->align = p->xp ? p->xp->align : NULL;
}

size_t pl_plan_nxfers(const struct pl_plan *p)
{
	return p->xp ? p->xp->nx : 0;
}

void pl_plan_xfer(const struct pl_plan *p, size_t i, struct pl_xfer_info *out)
{
	const struct pl_xfer *x = &p->xp->x[i];

	out->file = x->file;
	out->offset = x->off;
	out->length = x->len;
	out->root = x->root;
	out->batch = x->batch;
	out->index = x->gidx;
	out->nreceivers = x->nrecv;
	out->receivers = p->xp->recv + x->first_recv;
	out->ncopies = x->ncopies;
	out->copies = p->xp->copies + x->first_copy;
}

void pl_plan_xsummary(const struct pl_plan *p, uint64_t *transfers, uint64_t *batches,
		      uint64_t *digest)
{
	*transfers = p->xp ? p->xp->ntotal : 0;
	*batches = p->xp ? p->xp->nbatches : 0;
	*digest = p->xp ? p->xp->digest : 0;
}

int pl_plan_xstats(const struct pl_plan *p, int proc, struct pl_xstats *out)
{
	const struct pl_xstat *x;
	struct pl_stats st;
	int ret = pl_plan_stats(p, proc, &st);

	*out = (struct pl_xstats){ 0 };
	if (ret)
		return ret;
	if (!p->xp) {   /* no transfers: the files and reads of own reads */
		out->files = st.files_opened;
		for (unsigned q = 0; proc < 0 && q < p->spec->nprocs; q++) {
			if (!p->have_stats[q])
				continue;
			out->max_read = CM_MAX(out->max_read, p->stats[q].read_bytes);
			out->max_files = CM_MAX(out->max_files, p->stats[q].files_opened);
		}
		return 0;
	}
	x = proc < 0 ? &p->xp->total : &p->xp->st[proc];
	out->transfers = x->transfers;
	out->payload = x->payload;
	out->read = x->read;
	out->sent = x->sent;
	out->received = x->received;
	out->files = x->files;
	if (proc < 0) {
		out->max_read = p->xp->max_read;
		out->max_files = p->xp->max_files;
	}
	return 0;
}
