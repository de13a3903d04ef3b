/*
 * hash.h - SHA-256 of whole files from the bytes as the engine delivers
 * them (exec/hash.c): a consumer of the engine's on_data. Its state lives
 * as long as a load: a file's digest goes on across batches (streaming's
 * windows), so a file read over many windows is hashed once, whole.
 *
 * What it needs of the batches (the checksum cover, exec/cover.c, makes
 * it so): every hashed file is read whole over the load, and each batch
 * reads it on from where the batches before it stopped, in offset order,
 * without a gap. Reads of bytes already hashed (a read at a window's edge
 * is read for both windows) are skipped.
 */
#ifndef EXEC_HASH_H
#define EXEC_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "plan_io.h"

struct ex_hash;

/*
 * Hashes file f of nfiles (sizes[f] bytes) where which[f] is 1. held_max
 * bounds the bytes held out of order before ex_hash_full says so.
 * Returns 0 or a negative code with e set (*out NULL).
 */
int ex_hash_new(size_t nfiles, const uint64_t *sizes, const uint8_t *which, uint64_t held_max,
		struct ex_hash **out, struct cm_err *e);
/* The engine's on_data (any worker, several at once): min_len bytes of r
 * arrived at bytes: hashes them now or holds a copy until its file's
 * cursor reaches them. */
void ex_hash_data(struct ex_hash *h, const struct cm_read *r, const uint8_t *bytes);
/* 1 while more than held_max bytes are held: the engine claims no new
 * reads (the read the cursor waits for was claimed before them). */
int ex_hash_full(struct ex_hash *h);
/* After the last batch: each hashed file's digest into digests[f];
 * -EIO naming the file (paths) when one was not read whole, or the
 * first error met while hashing. */
int ex_hash_end(struct ex_hash *h, const char *const *paths, uint8_t (*digests)[32],
		struct cm_err *e);
/* Bytes hashed, seconds spent hashing (all workers), most bytes held. */
void ex_hash_stats(const struct ex_hash *h, uint64_t *hashed, double *seconds,
		   uint64_t *held_peak);
/* NULL-safe. */
void ex_hash_free(struct ex_hash *h);

#endif /* EXEC_HASH_H */
