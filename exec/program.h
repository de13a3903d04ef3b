/*
 * program.h - the program of a load (exec/program.c): the passes run in
 * order over the whole plan before the first read (the transform,
 * exec/transform.c: the copies' operations; windows under the staging
 * budget, exec/window.c; then the checksum cover over every batch,
 * exec/cover.c), giving one immutable list of batches. The
 * executor (exec/execute.c) runs the batches in order; nothing in a
 * program changes once it is built.
 *
 * A whole load is a program of one batch: the plan's reads (with the
 * cover's fillers when a file is hashed) and the plan's copies, not
 * duplicated unless the transform pass gave them operations. A streaming load has one batch per window range, its
 * reads and copies clipped to the range and rebased into a window
 * (stored once, in the program), and after the last range, when the
 * plan has no byte of staging but files to hash, one batch of fillers.
 */
#ifndef EXEC_PROGRAM_H
#define EXEC_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "../engine/engine.h"
#include "../planner/planner.h"
#include "window.h"

/* ex_batch.window of a batch that fills no window. */
#define EX_NO_WINDOW SIZE_MAX

/* One batch: what one engine run reads, and where its copies land. */
struct ex_batch {
	const struct cm_read *reads;    /* sorted by (file, offset) when a file is hashed */
	size_t nreads;
	const struct cm_copy *copies;   /* reads[i].first_copy indexes these */
	size_t ncopies;
	size_t window;                  /* its range: program win.w[window], or EX_NO_WINDOW */
	const size_t *done;             /* the shards whose last bytes arrive in it */
	size_t ndone;
	uint64_t read_bytes;            /* what its reads read */
};

struct ex_program {
	const struct ex_batch *batches;
	size_t nbatches;
	/* Streaming: the ranges, their pieces and the shards of no bytes
	 * (exec/window.h); a whole load: none. */
	struct ex_windows win;
	/* A whole load: bytes each shard expects from the reads (a shard
	 * that read once's transfers fill: 0); streaming: NULL. */
	size_t nshards;
	const uint64_t *shard_bytes;
	/* The checksum cover: by file, 1 when read whole for its digest
	 * (NULL: nothing hashed); its fillers' size, largest and bytes. */
	const uint8_t *hashed;
	uint32_t fill_chunk, max_fill;
	uint64_t fill_bytes;
	uint64_t total_bytes;           /* what every batch reads, together */
	/* Streaming: what the batches need of one engine session. */
	struct eng_session_needs needs;

	/* Owned storage the pointers above point into. */
	struct ex_batch *own_batches;
	struct cm_read *own_reads;      /* streaming (cm_grow_big, of cap_reads) */
	struct cm_copy *own_copies;     /* streaming (cm_grow_big, of cap_copies) */
	size_t cap_reads, cap_copies;
	struct cm_read *own_fill_reads; /* a whole load's reads with fillers */
	size_t nfill_reads;
	struct cm_copy *own_op_copies;  /* the plan's copies with operations (transform) */
	size_t *own_done;
	uint64_t *own_shard_bytes;
	uint8_t *own_hashed;
};

struct ex_program_opts {
	uint64_t window;        /* streaming: bytes of a window (a multiple of page);
				 * 0: a whole load, one batch */
	uint64_t page;          /* windows start at a multiple of it */
	const uint8_t *hash;    /* by file: 1 to read it whole (ex_cover_decide); NULL: none */
	uint32_t chunk;         /* a filler reads at most this many bytes (>= 4096 used) */
};

/*
 * Builds the program of ex: every pass, every batch. p refers to ex's
 * arrays (they must outlive it) and copies o->hash. Returns 0, -ENOMEM,
 * or RL_E_DTYPE (a converted shard's copy not of whole elements: the
 * planner makes none); p freed either way on failure
 * (ex_program_free is safe).
 */
int ex_program_build(struct ex_program *p, const struct pl_exec *ex,
		     const struct ex_program_opts *o);
void ex_program_free(struct ex_program *p);

#endif /* EXEC_PROGRAM_H */
