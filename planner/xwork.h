/*
 * xwork.h - the state of one read-once assignment while a plan is built,
 * shared by readonce.c (which bytes travel: pieces) and xfer.c (who reads
 * them: transfers). Private to planner/.
 */
#ifndef RL_XWORK_H
#define RL_XWORK_H

#include "xfer.h"

struct pl_xwork {
	struct pl_sets sets;        /* process sets, interned */
	uint8_t *avail;             /* proc x file: may read (NULL: all) */
	uint8_t *own_files;         /* proc x file: own reads (NULL: too large) */
	uint64_t *load;             /* per process: bytes it reads */
	struct pl_piece *pc;        /* what travels, file and offset order */
	size_t npc, cappc;
	struct pl_xfer *x;          /* the cluster's transfers */
	size_t nx, capx;
	uint32_t *rcv;              /* their receivers */
	size_t nrcv, caprcv;
};

void pl_xwork_free(struct pl_xwork *w);

/* The per-tensor analysis (readonce.c). */
struct pl_ro;

/*
 * Decides for every loaded tensor which of its bytes travel: appends the
 * pieces to w->pc, sets the skip bits of the devices that receive them,
 * marks the planned process's received shards, and adds every process's
 * own reads to w->load (and w->own_files). *out receives the analysis
 * (free with pl_ro_free, also on failure).
 */
int pl_ro_analyze(struct pl_plan *p, const struct pl_ckpt *ck, const struct pl_opts *o,
		  struct pl_xwork *w, uint8_t *skip, struct pl_ro **out, struct rl_err *e);
/* The processes that need some byte of [a, b) of whole-tensor piece pc. */
int pl_ro_range_needers(struct pl_ro *r, const struct pl_piece *pc, uint64_t a, uint64_t b,
			uint32_t *set);
void pl_ro_free(struct pl_ro *r);

#endif /* RL_XWORK_H */
