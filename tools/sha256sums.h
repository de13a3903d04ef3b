/*
 * sha256sums.h - `ringload load`'s expected SHA-256 values: --sha256
 * FILE=HEX (repeatable) and --sha256-file SUMS (sha256sum's format), given
 * to the loader (rl_loader_expect_sha256), and what the load found.
 */
#ifndef TOOLS_SHA256SUMS_H
#define TOOLS_SHA256SUMS_H

#include "opts.h"
#include "ringload.h"

/* Every --sha256 value is FILE=HEX with 64 hex digits: OPTS_OK, or
 * OPTS_USAGE after one line naming the value. */
int sha256_args_check(const char *prog, const struct opt_list *given);

/*
 * Gives ld the expected values, each for the one file of ck it names
 * exactly (by identity: device and inode of the path as the file system
 * resolves it, so "./", ".." and symlinked directories spell one file):
 * each --sha256 FILE is a path, or a name relative to the checkpoint's
 * directory (ck_path, or its directory), and must name one file of ck;
 * each line of sums_file (NULL: none) is "<64 hex digits>  <name>" (or
 * " *<name>"; a leading '\\' escapes the name as sha256sum does), names
 * relative to the SUMS file's directory, lines naming no file of ck
 * skipped (with a warning line for a *.safetensors), two different values
 * for one file refused, a file of ck that plan (built) reads with no line
 * warned of. Prints one line naming the value, or the file and line, on
 * error. Returns 0 or -1.
 */
int sha256_expect(rl_loader *ld, const rl_ckpt *ck, const rl_plan *plan, const char *ck_path,
		  const struct opt_list *given, const char *sums_file, const char *prog);

/* The same values as an rl_expect (*out; NULL when none were given) for
 * the caller to hand on (--mpi: rl_mpi_expect). Returns 0 or -1. */
int sha256_values(rl_expect **out, const rl_ckpt *ck, const rl_plan *plan, const char *ck_path,
		  const struct opt_list *given, const char *sums_file, const char *prog);

/* After a successful load: a warning line naming each file of ck whose
 * expected value was not checked (read in part, or streamed), and unless
 * quiet one line saying what was checked. */
void sha256_report(const rl_loader *ld, const rl_ckpt *ck, int quiet, const char *prog);

#endif
