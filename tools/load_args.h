/*
 * load_args.h - `ringload load`'s options, shared by the command
 * (cmd_load.c) and the MPI rank program --mpi runs (mpi/load_mpi.c).
 */
#ifndef TOOLS_LOAD_ARGS_H
#define TOOLS_LOAD_ARGS_H

#include <stdint.h>

#include "opts.h"
#include "ringload.h"

/* Backends the CLI lists at most (the library's table has 3 today). */
#define LOAD_MAX_BACKENDS 16

struct load_args {
	const char *path, *sharding, *out;
	int64_t process, queue_depth, request_bytes, inflight_bytes, workers;
	int64_t staging_budget; /* --staging-budget (streaming); -1: whole staging */
	int backend, staging;  /* backend: its id; staging: index in the choices;
				* -1 when not given */
	int verify, quiet, json, buffered, force;
	int mpi, read_once;    /* --mpi, --read-once */
	const char *local_files;
	int64_t mpi_timeout;   /* seconds; 0: the library's default */
	struct opt_list sha256;  /* --sha256 FILE=HEX, as given */
	const char *sha256_file; /* --sha256-file SUMS */
	int no_hf_sha256;        /* --no-hf-sha256 */
	const char *device;      /* --device cuda[:N] (load_cuda.c); NULL: host memory */
	const char *device_map;  /* --device-map ORD,ORD,...: spec device id -> CUDA ordinal */
	int dtype;               /* --dtype: index in load_dtype_names, -1: as stored */
	int read_mode;           /* --read-mode: RL_DIRECT_*, -1: not given */
};

/* --dtype's choices, safetensors dtype names (NULL-terminated). */
extern const char *const load_dtype_names[];

/* Parses argv (argv[0]: "load"). Returns an opts.h status (OPTS_OK, or
 * what opts_exit_status() turns into the exit status). */
int load_parse_args(int argc, char **argv, struct load_args *a);

/* Sets the loader parameters a gives on ld; one error line naming the
 * parameter on failure. Returns 0 or -1. */
int load_configure(rl_loader *ld, const struct load_args *a, const char *prog);

/* The plan's request size: --request-bytes (else the loader's default),
 * at most --inflight-bytes. */
int64_t load_chunk(const struct load_args *a);

/*
 * --mpi: runs the load as one rank of an MPI job, through ringload-mpi.so
 * (beside this program, or in ../lib/ringload), which links Open MPI, so
 * that ringload itself needs no MPI. Returns the exit status.
 */
int load_mpi(const struct load_args *a);

#endif
