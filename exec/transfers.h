/*
 * transfers.h - the transfers pass (exec/transfers.c): the read half of a
 * batch of read-once transfers. The planner decides who reads which bytes
 * once in the cluster, who receives them and in which batch
 * (planner/transfers.c, queried through planner.h); this pass turns the
 * payloads one process roots in one batch into a plan its loader runs: one
 * device (the batch buffer) whose shards are those payloads. The MPI
 * executor (mpi/, over rl_plan_build_batch) runs it, sends the payloads
 * and copies them with the transfers' scatter lists.
 */
#ifndef EXEC_TRANSFERS_H
#define EXEC_TRANSFERS_H

#include <stdint.h>

#include "../planner/planner.h"

/*
 * The plan that reads the payloads of the transfers p's process roots in
 * batch `batch`, in requests of at most chunk bytes: shard k is the k-th
 * such transfer in p's order (pl_plan_xfer), a U8 tensor named
 * "transfer <cluster index>", placed in the buffer congruently with its
 * file offset (modulo 4096) so that its aligned middle is read straight
 * into the buffer. Payloads of a file that touch after alignment are read
 * as one span (pl_xread_add, the rule the planner's statistics count by).
 * No payloads (none rooted there, no transfers): a plan of no reads.
 * Returns 0 and *out, or -ENOMEM with e set.
 */
int ex_xfer_batch_plan(const struct pl_plan *p, uint64_t batch, uint64_t chunk,
		       struct pl_plan **out, struct cm_err *e);

#endif /* EXEC_TRANSFERS_H */
