/*
 * readonce.h - which bytes travel by transfer (readonce.c): interned sets
 * of processes, the pieces that travel, and the state of one read-once
 * assignment while a plan is built, which readonce.c fills with pieces
 * and loads and the transfers (transfer_assign.c) then cut among readers. Private to
 * planner/; it needs nothing of the transfers, which build on it.
 */
#ifndef PLANNER_READONCE_H
#define PLANNER_READONCE_H

#include "pl_private.h"

/* ---------------------------------------------------------------- */
/* Sets of processes, interned                                       */
/* ---------------------------------------------------------------- */

struct pl_sets {
	uint32_t *pool;         /* members, ascending, set after set */
	size_t npool, cappool;
	struct pl_set_ent {
		uint64_t hash;
		size_t off;
		uint32_t n;
	} *ent;
	size_t nent, capent;
	uint32_t *table;        /* open addressing: entry index + 1 */
	size_t tcap;
};

/* Returns the id of the set v[0..n) (ascending), or UINT32_MAX (no memory). */
uint32_t pl_set_intern(struct pl_sets *ss, const uint32_t *v, uint32_t n);
static inline const uint32_t *pl_set(const struct pl_sets *ss, uint32_t id, uint32_t *n)
{
	*n = ss->ent[id].n;
	return ss->pool + ss->ent[id].off;
}
void pl_sets_free(struct pl_sets *ss);
/* The first run of r that ends past a (runs ascend in C order). */
uint64_t pl_runs_first_after(const struct pl_runs *r, uint64_t a);
/* qsort comparison of uint32_t. */
int pl_u32_cmp(const void *a, const void *b);

/* ---------------------------------------------------------------- */
/* Pieces and the assignment being built                             */
/* ---------------------------------------------------------------- */

/*
 * A piece: contiguous file bytes of one loaded tensor that travel by
 * transfer, needed by the processes of set needers and read by one of
 * readers. whole: the piece is the whole tensor, whose boxes differ in who
 * needs them (receivers are found box by box).
 */
struct pl_piece {
	uint64_t off, len;
	uint32_t file, item;
	uint32_t needers, readers;
	uint8_t whole;
};

struct pl_xwork {
	struct pl_sets sets;        /* process sets, interned */
	uint8_t *avail;             /* proc x file: may read (NULL: all) */
	uint8_t *own_files;         /* proc x file: own reads (NULL: too large) */
	uint64_t *load;             /* per process: bytes it reads */
	struct pl_piece *pc;        /* what travels, file and offset order */
	size_t npc, cappc;
	struct pl_xfer *x;          /* the cluster's transfers (transfer_assign.c) */
	size_t nx, capx;
	uint32_t *rcv;              /* their receivers */
	size_t nrcv, caprcv;
};

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
		  struct pl_xwork *w, uint8_t *skip, struct pl_ro **out, struct cm_err *e);
/* The processes that need some byte of [a, b) of whole-tensor piece pc. */
int pl_ro_range_needers(struct pl_ro *r, const struct pl_piece *pc, uint64_t a, uint64_t b,
			uint32_t *set);
void pl_ro_free(struct pl_ro *r);

#endif /* PLANNER_READONCE_H */
