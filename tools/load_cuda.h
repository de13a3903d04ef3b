/*
 * load_cuda.h - `ringload load --device cuda[:N]` (load_cuda.c); the
 * option rules and the set-up are declared in load_args.h.
 */
#ifndef RL_TOOLS_LOAD_CUDA_H
#define RL_TOOLS_LOAD_CUDA_H

#include <stdint.h>

#include "ringload.h"
#include "verify.h"

/* --verify of a load into GPU memory: every shard read back and compared
 * with the file. 0 (the verdict in *c), RL_E_CANCELED, or -1 (a line
 * said why). */
int load_cuda_verify(const rl_ckpt *ck, const rl_plan *plan, rl_loader *ld,
		     struct verify_counts *c, int (*fn)(void *user, uint64_t done, uint64_t total),
		     void *user, const char *prog);

/* The process's peak resident memory (getrusage), in bytes. */
uint64_t load_peak_host_bytes(void);

#endif
