/*
 * transfer_assign.h - transfers between processes, private to planner/: who reads
 * what once in the cluster (transfer_assign.c, on readonce.h's pieces, avail.h's
 * files_of_process and assign.c's cuts), the transfers, their batches and
 * their scatter lists (transfer_finish.c). It sits above readonce.h and
 * avail.h, which know nothing of it. Reading a batch is execution: the
 * transfers pass, exec/transfers.c, over planner.h's queries.
 *
 * A transfer moves the file bytes [off, off + len) of one file: its root
 * reads them and sends them to its receivers; every process that needs
 * some of them (root included) copies them into its shards with its own
 * scatter list. Shards that transfers fill get no bytes from the plan's
 * own reads (pl_plan.received).
 */
#ifndef PLANNER_TRANSFER_ASSIGN_H
#define PLANNER_TRANSFER_ASSIGN_H

#include "pl_private.h"

/* ---------------------------------------------------------------- */
/* Transfers (transfer_assign.c)                                    */
/* ---------------------------------------------------------------- */

/* The largest payload of one transfer: sends start per transfer, so that
 * they overlap the batch's reads. */
#define PL_XFER_MAX (64ull << 20)

struct pl_xfer {
	uint64_t off, len;
	uint64_t first_recv;    /* receivers: pl_xplan.recv[first_recv ..] */
	uint64_t first_copy;    /* the planned process's copies */
	uint64_t gidx;          /* index in the cluster's order */
	uint32_t file, batch, nrecv, ncopies;
	int32_t root;
	uint32_t piece;         /* first piece (pl_xwork) while building */
};

/* Per process: what transfers cost it. */
struct pl_xstat {
	uint64_t transfers;     /* transfers it roots */
	uint64_t payload;       /* payload bytes it reads for them */
	uint64_t read;          /* bytes its transfer reads read (aligned) */
	uint64_t requests;
	uint64_t sent, received;
	uint64_t files;         /* files opened for transfers and own reads */
	uint64_t needed;        /* payload bytes, counted at the root */
	uint64_t spans;         /* contiguous spans its transfer reads cover */
};

/* What the planner keeps of the assignment while building (readonce.h). */
struct pl_xwork;
void pl_xwork_free(struct pl_xwork *w);

struct pl_xplan {
	struct pl_xfer *x;      /* the planned process's transfers, cluster order */
	size_t nx;
	int32_t *recv;
	size_t nrecv;
	struct cm_copy *copies; /* src: offset in the payload */
	size_t ncopies;
	uint64_t ntotal;        /* transfers in the cluster */
	uint64_t nbatches;
	uint64_t digest;        /* of the cluster's transfer list */
	struct pl_xstat *st;    /* per process (statistics of every process) */
	uint8_t *have;          /* st[p] computed */
	struct pl_xstat total;
	uint64_t max_read, max_files;
	struct pl_align *align; /* per file, for the batch plans */
	uint64_t chunk;
	struct pl_xwork *w;     /* NULL once the plan is built */
};

void pl_xplan_free(struct pl_xplan *xp);

/*
 * Read once (or files_of_process): decides, for every byte some process
 * needs, the one process that reads it; sets *skip to a bitmap (item x
 * mesh device: 1 when that device's box arrives by transfer), marks the
 * planned process's received shards and keeps the assignment in p->xp.
 * avail: pl_avail_resolve()'s bitmap (may be NULL).
 */
int pl_read_once(struct pl_plan *p, const struct pl_ckpt *ck, const struct pl_spec *s,
		 const struct pl_align *align, const struct pl_opts *o, uint8_t **skip,
		 struct cm_err *e);

/*
 * After the layout and the statistics: the transfers of the cluster (with
 * receivers and batches), the planned process's list and scatter lists,
 * and every process's transfer statistics added to p->stats.
 */
int pl_xfer_finish(struct pl_plan *p, const struct pl_ckpt *ck, struct cm_err *e);

#endif /* PLANNER_TRANSFER_ASSIGN_H */
