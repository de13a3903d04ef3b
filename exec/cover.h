/*
 * cover.h - the checksum cover pass (exec/cover.c): a whole-file digest
 * needs every byte of the file, so the files to hash are read whole, in
 * offset order. Which files can be hashed is decided once, from the whole
 * plan (those whose tensor bytes it reads in full); then each batch of the
 * program, in program order, gets reads without copies ("fillers") for the
 * bytes of a hashed file that no earlier batch covered and that lie before
 * one of its own reads (the header, gaps, and for streaming the bytes a
 * later window brings), and the last batch for the rest of the file. So
 * every batch reads each hashed file on from where the batches before it
 * stopped, without a gap: what exec/hash.c needs to hash with a bounded
 * amount held out of order.
 */
#ifndef EXEC_COVER_H
#define EXEC_COVER_H

#include <stddef.h>
#include <stdint.h>

#include "../planner/planner.h"

/*
 * For each candidate file f of ex (cand[f] 1): whole[f] 1 when the plan's
 * reads bring every byte of it from its data start on (the header, before
 * the data, is read apart), else 0: the plan reads it only in part, and
 * its digest would need the bytes the load does not need. Returns 0 or
 * -ENOMEM.
 */
int ex_cover_decide(const struct pl_exec *ex, const uint8_t *cand, uint8_t *whole);

struct ex_cover {
	size_t nfiles;
	const uint64_t *sizes;
	const uint8_t *hash;    /* 1: file f is hashed */
	uint64_t *at;           /* bytes [0, at[f]) covered by the batches so far */
	uint32_t chunk;         /* a filler reads at most this many bytes */
	uint64_t fill_bytes;    /* bytes the fillers read, all batches */
	uint32_t max_fill;      /* the largest filler */
};

/* A cover of nfiles files (sizes, hash: kept, not copied); fillers of at
 * most chunk bytes. Returns 0 or -ENOMEM. */
int ex_cover_init(struct ex_cover *c, size_t nfiles, const uint64_t *sizes, const uint8_t *hash,
		  uint32_t chunk);
/*
 * The next batch of the program: its reads rd[0 .. *n) (an array of *cap
 * entries, grown as needed) get fillers and are sorted by (file, offset)
 * when a hashed file is read; last: the batch after which nothing is
 * read, so it reads the hashed files to their ends. Returns 0 or -ENOMEM.
 */
int ex_cover_batch(struct ex_cover *c, struct cm_read **rd, size_t *n, size_t *cap, int last);
void ex_cover_free(struct ex_cover *c);

#endif /* EXEC_COVER_H */
