/*
 * plan_cluster.c - the cluster summary of `ringload plan`: what the
 * processes read together (against the bytes they need), the transfers
 * that read once needs (count, batches, bytes sent over the network), how
 * evenly reading is shared (the largest process's share against the
 * mean), and how many files each process opens.
 */
#include <inttypes.h>
#include <stdio.h>

#include "plan_cluster.h"

struct summary {
	unsigned processes;
	uint64_t tensor_bytes;      /* one copy of every loaded tensor */
	rl_plan_stats total;
	rl_plan_xstats x;
	uint64_t transfers, batches;
	double mean_read, mean_files;
};

/* Bytes of one copy of every loaded tensor: each has a shard on the
 * first device, which gives its full shape. */
static uint64_t tensor_bytes(const rl_plan *plan)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < rl_plan_num_shards(plan); i++) {
		rl_shard_info si;
		uint64_t bits;

		if (rl_plan_shard(plan, i, &si) || si.device)
			continue;
		bits = rl_dtype_bits(si.dtype);
		for (unsigned d = 0; d < si.ndim; d++)
			bits *= si.shape[d];
		sum += bits / 8;
	}
	return sum;
}

static int summarize(const rl_plan *plan, struct summary *s)
{
	s->processes = rl_plan_num_processes(plan);
	if (!s->processes || rl_plan_get_stats(plan, RL_TOTAL, &s->total) ||
	    (s->x.size = sizeof(s->x), rl_plan_get_xstats(plan, RL_TOTAL, &s->x)) ||
	    rl_plan_transfer_summary(plan, &s->transfers, &s->batches, NULL))
		return -1;
	s->tensor_bytes = tensor_bytes(plan);
	s->mean_read = (double)s->total.read_bytes / s->processes;
	s->mean_files = (double)s->x.files_opened / s->processes;
	return 0;
}

void plan_cluster_text(const rl_plan *plan)
{
	struct summary s;

	if (summarize(plan, &s) || s.processes < 2)
		return;
	printf("cluster: %u processes read %" PRIu64 " bytes, %.4fx the %" PRIu64
	       " bytes of the loaded tensors; largest read share %" PRIu64 " bytes, %.3fx the mean\n",
	       s.processes, s.total.read_bytes,
	       s.tensor_bytes ? (double)s.total.read_bytes / s.tensor_bytes : 1.0,
	       s.tensor_bytes, s.x.max_read_bytes,
	       s.mean_read > 0 ? s.x.max_read_bytes / s.mean_read : 1.0);
	printf("cluster: %" PRIu64 " transfers in %" PRIu64 " batches, %" PRIu64
	       " payload bytes, %" PRIu64 " bytes sent; files opened per process: "
	       "max %" PRIu64 ", mean %.2f\n",
	       s.transfers, s.batches, s.x.payload_bytes, s.x.sent_bytes, s.x.max_files_opened,
	       s.mean_files);
}

void plan_cluster_json(const rl_plan *plan)
{
	struct summary s;

	if (summarize(plan, &s))
		return;
	printf(",\n\"cluster\":{\"processes\":%u,\"read_bytes\":%" PRIu64
	       ",\"tensor_bytes\":%" PRIu64 ",\"max_read_bytes\":%" PRIu64
	       ",\"read_share_max_over_mean\":%.6f,\"transfers\":%" PRIu64 ",\"batches\":%" PRIu64
	       ",\"payload_bytes\":%" PRIu64 ",\"broadcast_bytes\":%" PRIu64
	       ",\"max_files_opened\":%" PRIu64 ",\"mean_files_opened\":%.4f}",
	       s.processes, s.total.read_bytes, s.tensor_bytes, s.x.max_read_bytes,
	       s.mean_read > 0 ? s.x.max_read_bytes / s.mean_read : 1.0, s.transfers, s.batches,
	       s.x.payload_bytes, s.x.sent_bytes, s.x.max_files_opened, s.mean_files);
}
