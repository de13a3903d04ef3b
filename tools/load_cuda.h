/*
 * load_cuda.h - `ringload load --device cuda[:N]` (load_cuda.c): the
 * option rules, the set-up and --verify of a load into GPU memory.
 */
#ifndef TOOLS_LOAD_CUDA_H
#define TOOLS_LOAD_CUDA_H

#include <stdint.h>

#include "ringload.h"
#include "load_args.h"
#include "verify.h"

/* --device's rules, after parsing (one error line; OPTS_OK or OPTS_USAGE). */
int load_cuda_rules(struct load_args *a, const char *prog);
/* Delivery to the GPUs of --device / --device-map for plan. */
int load_cuda_setup(rl_loader *ld, const rl_plan *plan, const struct load_args *a,
		    const char *prog);

/* --verify of a load into GPU memory: every shard read back and compared
 * with the file. 0 (the verdict in *c), RL_E_CANCELED, or -1 (a line
 * said why). */
int load_cuda_verify(const rl_ckpt *ck, const rl_plan *plan, rl_loader *ld,
		     struct verify_counts *c, int (*fn)(void *user, uint64_t done, uint64_t total),
		     void *user, const char *prog);

/* The process's peak resident memory (getrusage), in bytes. */
uint64_t load_peak_host_bytes(void);

#endif
