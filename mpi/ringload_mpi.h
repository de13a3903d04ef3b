/*
 * ringload_mpi.h - loading across the processes of an MPI job
 * (libringload_mpi, built where Open MPI's headers are installed; the core
 * library stays MPI-free).
 *
 * Each rank of a communicator is one process of the sharding spec's mesh
 * (rank in the communicator = process index). rl_mpi_load() plans the
 * rank's process, reads its own part with the engine, and moves the
 * plan's transfers (RL_PLAN_READ_ONCE, files_of_process; see
 * rl_plan_transfer in ringload.h) between the ranks with nonblocking
 * point-to-point MPI, batch by batch: memory for bytes in transit (the
 * payloads a rank reads for others and those it receives) never exceeds
 * RL_PLAN_BATCH_BYTES. A root's sends start as soon as each payload is
 * read. Every rank returns only when all its shards are complete, or
 * every rank returns an error naming the rank that failed and why.
 *
 * Threads: MPI is called only from the thread that calls these functions,
 * which must be the thread that initialized MPI with at least
 * MPI_THREAD_FUNNELED. The library's read-once executor (ringload.h,
 * rl_loader_set_transport) reads on its own threads and makes every MPI
 * call of the transfers on this one. Conventions as in ringload.h: >= 0 or a negative code,
 * a message in rl_mpi_errmsg(), destroy accepts NULL.
 *
 * A hang is the one failure an MPI job cannot report: a rank that waits
 * on the others for RL_MPI_TIMEOUT_MS without any progress calls the abort
 * handler, by default one line on stderr and MPI_Abort() (the only place
 * this library prints or aborts; rl_mpi_set_abort() replaces it).
 */
#ifndef RINGLOAD_MPI_H
#define RINGLOAD_MPI_H

#include <mpi.h>

#include "ringload.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_mpi rl_mpi;

/* Returns a handle with default parameters, or NULL when out of memory. */
rl_mpi *rl_mpi_create(void);

/* Frees m and its transfer loader. NULL is a no-op. */
void rl_mpi_destroy(rl_mpi *m);

typedef enum rl_mpi_param {
	RL_MPI_TIMEOUT_MS = 1,     /* no progress this long while waiting: abort (default 600000) */
	RL_MPI_MESSAGE_BYTES = 2,  /* largest message; larger payloads are split (default INT_MAX) */
	RL_MPI_EXECUTOR = 3,       /* 1, the default and the only value: every load's
				    * transfers run in the library's read-once executor over
				    * an MPI rl_transport_ops (rl_loader_set_transport), read by
				    * the loader given to rl_mpi_load(). 0 (this library's own
				    * batch loop, removed in 0.2.0) is RL_E_INVALID_ARG. */
} rl_mpi_param;

/* Sets a parameter. Returns 0, or RL_E_INVALID_ARG naming the bound. */
int rl_mpi_set(rl_mpi *m, rl_mpi_param param, int64_t value);

/*
 * A loader owned by m, kept for the ABI: it read the payloads this rank
 * sends in the batch loop removed in 0.2.0. Nothing uses it now: the
 * payloads are read with the options of the loader given to
 * rl_mpi_load(), and what is set on this one has no effect. Never NULL
 * for a valid m.
 */
rl_loader *rl_mpi_transfer_loader(rl_mpi *m);

/*
 * The callback for every completed shard of the rank (the loader's own
 * callbacks are replaced during rl_mpi_load() and cleared after it):
 * shards the rank reads itself are reported from the engine's threads
 * while it reads, shards transfers fill from the calling thread as their
 * last bytes arrive; never two calls at once. Returns 0 (-EINVAL: m NULL).
 */
int rl_mpi_set_callbacks(rl_mpi *m, rl_shard_fn on_shard, void *user);

/*
 * The piece callback of a load into a streaming loader (RL_OPT_STAGING =
 * RL_STAGING_STREAM; required there): every byte of every shard of the
 * rank arrives in exactly one piece, on the calling thread, never two
 * calls at once. Pieces of the rank's own reads come from its loader's
 * windows (release them with rl_loader_release(ld, piece), as for
 * rl_loader_run()); pieces of transfers have token 0 and their data is
 * valid only until the callback returns (the batch's buffer is reused;
 * strided runs are packed, at most 1 MiB per piece).
 * A non-zero return fails the load on every rank. The ranks agree on the
 * least budget of the ranks that stream and plan batches of at most that
 * many payload bytes, so budgets may differ (docs/cluster.md). Returns 0
 * (-EINVAL: m NULL).
 */
int rl_mpi_set_piece_callback(rl_mpi *m, rl_piece_fn on_piece, void *user);

/* Called with a one-line message when a wait runs past RL_MPI_TIMEOUT_MS;
 * it should not return (the default prints msg and calls MPI_Abort). */
typedef void (*rl_mpi_abort_fn)(void *user, MPI_Comm comm, const char *msg);
int rl_mpi_set_abort(rl_mpi *m, rl_mpi_abort_fn fn, void *user);

/*
 * Opens a checkpoint whose files are spread over the ranks' local drives:
 * path is a directory, a model.safetensors.index.json or one file, the
 * same name on every rank; a rank's local files are those of path it can
 * see that match local_files (an fnmatch(3) pattern on the file name;
 * NULL: every file it sees). Each rank reads the headers of its local
 * files only and the ranks exchange them (one allgather), so that every
 * rank builds the same checkpoint, with every file the others see: with an
 * index, the files it names; otherwise every *.safetensors any rank sees
 * in the directory. spec (may be NULL) then gets files_of_process: rank
 * r's local files. Collective over comm. Returns 0, or on every rank the
 * same error: a rank that could not read its headers (named), ranks that
 * see different bytes for one file (RL_E_CLUSTER_MISMATCH), a file of the
 * checkpoint no rank has (RL_E_FILE_UNAVAILABLE), or a header error.
 * With an index, tensors are taken from the headers (the weight_map only
 * names the files).
 */
int rl_mpi_ckpt_open(rl_mpi *m, rl_ckpt *ck, rl_spec *spec, const char *path,
		     const char *local_files, MPI_Comm comm);

/*
 * Loads the shards of this rank's process across comm (collective: every
 * rank calls it with the same checkpoint and spec and a plan created with
 * the same parameters). plan: created, not built; rl_mpi_load() sets
 * RL_PLAN_PROCESS to the rank (and RL_PLAN_TRANSFER_ALIGN to 4096 when it
 * is 0, so that ranks on different file systems cut alike), builds it, and
 * keeps it built for the caller's shard queries. Without RL_PLAN_READ_ONCE
 * and files_of_process, each rank reads its own shards (the plain load).
 * Before planning, the ranks check that they see the same checkpoint (a
 * digest of the file names, sizes and headers); after, that they built
 * the same transfers; a mesh whose process count differs from the size of
 * comm is RL_E_SPEC_MESH. Returns 0 on every rank when every shard of every
 * rank is complete (ld's staging holds them, rl_loader_staging()), or on
 * every rank an error: this rank's own, or RL_E_PEER naming the rank that
 * failed first and why (rl_mpi_errmsg, rl_mpi_failed_rank).
 */
int rl_mpi_load(rl_loader *ld, const rl_ckpt *ck, const rl_spec *spec, MPI_Comm comm,
		rl_plan *plan, rl_mpi *m);

/*
 * Expected SHA-256 values (x: rl_expect of ringload.h, built for the
 * checkpoint the next rl_mpi_load() loads; NULL: none; copied; every
 * rank gives the same values, since checking them is collective). After
 * that load, each file with a value is hashed whole by one rank that can
 * read it (the least loaded by bytes, in file order), and every rank
 * returns RL_E_CHECKSUM, naming the file and both values, if any differs;
 * a file no rank can read is RL_E_FILE_UNAVAILABLE. The hashing reads
 * each such file once more in the cluster (the load's own reads are
 * spread over the ranks, so none of them covers a whole file). Do not
 * give these values to the loaders too: each reads only part of a file
 * and would refuse them. Returns 0, -EINVAL (m NULL) or -ENOMEM.
 */
int rl_mpi_expect(rl_mpi *m, const rl_expect *x);

/* The last error message of m ("" if none). Never NULL. */
const char *rl_mpi_errmsg(const rl_mpi *m);

/* The rank that failed first in the last call (-1: none). */
int rl_mpi_failed_rank(const rl_mpi *m);

/* What the last successful rl_mpi_load() did, per rank or in total. */
typedef struct rl_mpi_stats {
	uint64_t bytes_read;          /* from files: own reads and payloads read for others */
	uint64_t bytes_predicted;     /* the plan's prediction of bytes_read */
	uint64_t bytes_sent;          /* payload bytes sent (payload x receivers) */
	uint64_t bytes_received;      /* payload bytes received */
	uint64_t transfers_rooted;    /* transfers this rank read and sent */
	uint64_t batches;
	double plan_seconds;          /* checks and planning */
	double read_seconds;          /* the rank's own reads */
	double transfer_seconds;      /* batches: payload reads, messages, copies */
	double total_seconds;
} rl_mpi_stats;

/*
 * Fills the first size bytes of *out (size: sizeof(rl_mpi_stats) as the
 * caller knows it) for rank (0..size-1), or the cluster with RL_TOTAL
 * (sums; seconds: the slowest rank). Returns 0, -EINVAL or RL_E_STATE
 * (no successful load yet).
 */
int rl_mpi_get_stats(const rl_mpi *m, int rank, rl_mpi_stats *out, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* RINGLOAD_MPI_H */
