/*
 * xfer.c - rl_plan_* of ringload.h for transfers (read once,
 * files_of_process): the ones the planned process takes part in and its
 * scatter lists, the cluster's summary and statistics, and the plans that
 * read a batch of payloads (the transfers pass, exec/transfers.c).
 */
#include <errno.h>
#include <string.h>

#include "plan_internal.h"
#include "../exec/transfers.h"

size_t rl_plan_num_transfers(const rl_plan *plan)
{
	return plan && plan->pl ? pl_plan_nxfers(plan->pl) : 0;
}

/* A built plan with transfer i: 0, -EINVAL or RL_E_STATE. */
static int xfer_queryable(const rl_plan *plan, size_t i, const void *out)
{
	if (!plan || !out)
		return -EINVAL;
	if (!plan->pl)
		return RL_E_STATE;
	return i < pl_plan_nxfers(plan->pl) ? 0 : -EINVAL;
}

int rl_plan_transfer(const rl_plan *plan, size_t i, rl_transfer_info *out)
{
	struct pl_xfer_info x;
	int ret;

	if ((ret = xfer_queryable(plan, i, out)))
		return ret;
	pl_plan_xfer(plan->pl, i, &x);
	out->file = x.file;
	out->offset = x.offset;
	out->nbytes = x.length;
	out->root = x.root;
	out->nreceivers = x.nreceivers;
	out->receivers = x.receivers;
	out->batch = x.batch;
	out->index = x.index;
	out->ncopies = x.ncopies;
	return 0;
}

struct runs_at {
	const rl_copy_info *c;
	rl_copy_run_fn run;
	void *arg;
};

static int run_at(void *arg, uint64_t src, uint64_t dst, uint64_t len)
{
	const struct runs_at *a = arg;

	return a->run(a->arg, a->c->src + src, a->c->dst + dst, len);
}

int rl_copy_runs(const rl_copy_info *c, rl_copy_run_fn run, void *arg)
{
	struct runs_at a = { c, run, arg };

	if (!c || !run)
		return -EINVAL;
	return io_copy_runs(c->len, c->count, c->src_stride, run_at, &a);
}

int rl_plan_transfer_copy(const rl_plan *plan, size_t i, size_t j, rl_copy_info *out)
{
	struct pl_xfer_info x;
	int ret;

	if ((ret = xfer_queryable(plan, i, out)))
		return ret;
	pl_plan_xfer(plan->pl, i, &x);
	if (j >= x.ncopies)
		return -EINVAL;
	api_copy_info(&x.copies[j], out);
	return 0;
}

int rl_plan_transfer_summary(const rl_plan *plan, uint64_t *transfers, uint64_t *batches,
			     uint64_t *digest)
{
	uint64_t t, b, d;

	if (!plan)
		return -EINVAL;
	if (!plan->pl)
		return RL_E_STATE;
	pl_plan_xsummary(plan->pl, &t, &b, &d);
	if (transfers)
		*transfers = t;
	if (batches)
		*batches = b;
	if (digest)
		*digest = d;
	return 0;
}

int rl_plan_get_xstats(const rl_plan *plan, int p, rl_plan_xstats *out)
{
	struct pl_xstats x;
	rl_plan_xstats v = { .size = sizeof(v) };
	size_t n;
	int ret;

	if (!plan || !out || out->size < sizeof(size_t) || p < RL_TOTAL)
		return -EINVAL;
	if (!plan->pl)
		return RL_E_STATE;
	if ((ret = pl_plan_xstats(plan->pl, p, &x)))
		return ret;
	v.transfers = x.transfers;
	v.payload_bytes = x.payload;
	v.transfer_read_bytes = x.read;
	v.sent_bytes = x.sent;
	v.received_bytes = x.received;
	v.files_opened = x.files;
	v.max_read_bytes = x.max_read;
	v.max_files_opened = x.max_files;
	n = CM_MIN(out->size, sizeof(v));
	memcpy((char *)out + sizeof(size_t), (const char *)&v + sizeof(size_t),
	       n - sizeof(size_t));
	out->size = n;
	return 0;
}

int rl_plan_build_batch(rl_plan *plan, const rl_plan *from, size_t batch)
{
	if (!plan)
		return -EINVAL;
	cm_err_clear(&plan->err);
	if (plan->pl)
		return cm_err_set(&plan->err, RL_E_STATE, "plan already built");
	if (!from)
		return cm_err_set(&plan->err, -EINVAL, "the plan to read from is NULL");
	if (!from->pl)
		return cm_err_set(&plan->err, RL_E_STATE, "the plan to read from is not built");
	return ex_xfer_batch_plan(from->pl, batch, plan->o.chunk, &plan->pl, &plan->err);
}

size_t rl_plan_num_broadcasts(const rl_plan *plan)
{
	return rl_plan_num_transfers(plan);
}

int rl_plan_broadcast(const rl_plan *plan, size_t i, rl_broadcast_info *out)
{
	(void)i;
	if (!plan || !out)
		return -EINVAL;
	return RL_E_STATE;      /* deprecated: see rl_plan_transfer() */
}
