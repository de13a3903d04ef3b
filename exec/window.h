/*
 * window.h - the windows pass of streaming loads (exec/window.c): every
 * device's staging space cut into ranges of at most a window, each with
 * the pieces of shards it holds, in the order they are read (the
 * program of a streaming load: one batch per range); and the batch of one
 * range: the reads and copies of the plan that land in it, rebased into
 * the window. The program builder (exec/program.c) makes one batch per
 * window; the engine never sees a window.
 */
#ifndef EXEC_WINDOW_H
#define EXEC_WINDOW_H

#include <stdint.h>
#include <stddef.h>

#include "plan_io.h"
#include "../engine/engine.h"
#include "../planner/planner.h"

/* Bytes [lo, hi) of device dev's staging, held in a window whose first
 * byte is staging offset base (base <= lo, hi - base <= the window). */
struct ex_range {
	unsigned dev;
	uint64_t lo, hi, base;
};

/* Bytes [offset, offset + len) of shard (on dev), at pos in its range's
 * window: what the loader hands out as one rl_piece. */
struct ex_piece {
	size_t shard;
	unsigned dev;
	uint64_t offset, len, pos;
};

/* One range and its pieces[first .. first + n). */
struct ex_window {
	struct ex_range r;
	size_t first, n;
};

/* The windows of a plan, in the order they are read (device, offset),
 * and the shards of no bytes (handed out after them). Immutable once
 * cut. */
struct ex_windows {
	struct ex_window *w;
	size_t n;
	struct ex_piece *pieces;
	size_t npieces;
	size_t *zero;
	size_t nzero;
};

/*
 * Cuts every device's staging of ex into ranges of at most window bytes
 * (window a multiple of page): each starts at the first byte not yet
 * covered, its window at the page below (so that a byte's place in the
 * window is aligned as in staging: direct reads stay direct). Returns 0
 * or -ENOMEM (ws freed by ex_windows_free either way).
 */
int ex_windows_cut(struct ex_windows *ws, const struct pl_exec *ex, uint64_t window,
		   uint64_t page);
void ex_windows_free(struct ex_windows *ws);

/*
 * Copy c clipped to [lo, hi) of its device, rebased to base: up to three
 * copies in out (on device 0), returns how many. Positions are the
 * destination's (a converting copy's runs are out = cm_copy_out(c, len)
 * bytes there, its elements osize each: ranges and shards start on
 * whole elements). The windows' batches and the read-once executor's
 * device staging (exec/xfer_dev.c) clip by it.
 */
unsigned ex_clip_copy(const struct cm_copy *c, const struct ex_range *w, struct cm_copy out[3]);

/* The reads (in plan order) and copies of one range, on device 0. */
#define EX_EDGE_ALIGN 4096u  /* the coarsest O_DIRECT unit a cut keeps */
struct ex_wjob {
	struct cm_read *reads;
	size_t nreads, cap_reads;
	struct cm_copy *copies;
	size_t ncopies, cap_copies;
	uint64_t read_bytes;    /* what its reads read */
	/* By file (nunit): the O_DIRECT unit its direct reads keep, at most
	 * EX_EDGE_ALIGN: the lowest bit of their offsets (the planner aligns
	 * them to the file's offset alignment, so this is no finer). */
	uint32_t *unit;
	size_t nunit;
};
/* The unit of file f (EX_EDGE_ALIGN when j knows none). */
static inline uint32_t ex_wjob_unit(const struct ex_wjob *j, uint32_t f)
{
	return f < j->nunit ? j->unit[f] : EX_EDGE_ALIGN;
}

/*
 * Fills j (its arrays are reused and grown) with every read of the plan
 * that brings bytes to range w, each with its copies clipped to [lo, hi)
 * (a strided copy becomes at most three: a partial first run, the whole
 * runs, a partial last run) and rebased to base. A direct read stays
 * direct only when its whole copy lies in the range; others go through a
 * bounce buffer. With clip, a read whose clipped copies use only part of
 * it reads only that part (widened to EX_CLIP_UNIT, or less where its
 * offset is less aligned, so O_DIRECT alignment holds; a direct read cut
 * where the file is EX_EDGE_ALIGN-aligned, not widened, and still
 * direct): a read at a
 * window's edge is read for each window, and so costs a part, not its
 * whole length, each time. Without clip (a checksum cover hashes every
 * read's bytes in file order), reads stay whole. Shard indices are kept.
 * Returns 0 or -ENOMEM.
 */
#define EX_CLIP_UNIT (64u << 10)
int ex_window_job(const struct cm_read *reads, size_t nreads, const struct cm_copy *copies,
		   const struct ex_range *w, int clip, struct ex_wjob *j);
void ex_wjob_free(struct ex_wjob *j);

#endif /* EXEC_WINDOW_H */
