/*
 * integrity.h - the loader's side of file integrity (api/integrity.c):
 * expected SHA-256 values (given, or named by the Hugging Face cache
 * layout), which files of a run can be hashed (those it reads whole),
 * and the comparison after the run.
 */
#ifndef API_INTEGRITY_H
#define API_INTEGRITY_H

#include "ringload.h"
#include "../engine/engine.h"
#include "../planner/planner.h"

struct ld_expect {
	char *name;             /* as given: a path, or a name relative to the checkpoint */
	uint8_t sha[32];
};

/* What one run decided and found for each of its files. */
struct ld_hashrun {
	size_t nfiles;
	uint8_t *hash;          /* 1 = hash file f */
	uint8_t (*want)[32];    /* expected digest of each hashed file */
	uint8_t (*got)[32];     /* computed from the bytes read (exec/hash.c) */
	int *state;             /* RL_SHA256_* per file */
	unsigned unchecked;     /* files with an expected value read only in part */
};

/* Parses 64 hex digits into sha; 0 or -1. */
int ld_parse_sha256(const char *hex, uint8_t sha[32]);
/* sha as 64 lowercase hex digits and a NUL. */
void ld_sha256_hex(const uint8_t sha[32], char out[65]);

/*
 * Before a load of ex: expected values from exp[0..nexp) and, with hf
 * set, from the Hugging Face cache layout; hr->hash[f] 1 for the files
 * read whole (to hash: exec/run.h's checksum pass); a file with a given
 * expected value read only in part is RL_E_CHECKSUM (naming it). Returns
 * 0 or a negative code with e set; hr is freed by ld_hashrun_free either
 * way.
 */
int ld_hash_prepare(struct ld_hashrun *hr, const struct ld_expect *exp, size_t nexp, int hf,
		    const struct pl_exec *ex, struct cm_err *e);
/* After a successful run: RL_E_CHECKSUM naming the first file whose
 * digest differs, with both values; else 0. */
int ld_hash_check(struct ld_hashrun *hr, const struct pl_exec *ex, struct cm_err *e);
/* What is expected of the file at path (ex: the run's files, for names
 * that could mean two of them): 2 given, 1 from the cache layout, 0
 * nothing (sha set when not 0); RL_E_INVALID_ARG with e set when what was
 * given is ambiguous. */
int ld_hash_expected(const struct ld_expect *exp, size_t nexp, int hf, const struct pl_exec *ex,
		     const char *path, uint8_t sha[32], struct cm_err *e);
void ld_hashrun_free(struct ld_hashrun *hr);

#endif /* API_INTEGRITY_H */
