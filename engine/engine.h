/*
 * engine.h - the engine layer: executes read requests (common/rl_io.h)
 * with io_uring, libaio or a pread pool, into a pool of (registered,
 * locked) buffers, scatters finished reads into staging areas on a
 * completion thread, and bounds the bytes in flight. Knows nothing of
 * tensors; never includes planner/.
 */
#ifndef RL_ENGINE_H
#define RL_ENGINE_H

#include <stdint.h>
#include <stddef.h>

#include "rl_common.h"
#include "rl_io.h"

/* ---------------------------------------------------------------- */
/* File probing (engine/probe.c)                                     */
/* ---------------------------------------------------------------- */

struct eng_align {
	uint32_t offset_align;  /* O_DIRECT file offset/length alignment */
	uint32_t mem_align;     /* O_DIRECT buffer address alignment */
	int direct;             /* 1 if the file can be opened with O_DIRECT */
};

/*
 * Probes path: statx(STATX_DIOALIGN) where the kernel reports it, else the
 * logical block size of the underlying device; direct is 0 (and both
 * alignments 1) where the file system refuses O_DIRECT (tmpfs before 6.6,
 * some network file systems). Returns 0 or -errno.
 */
int eng_probe_align(const char *path, struct eng_align *out);

/* ---------------------------------------------------------------- */
/* Engine (engine/engine.c and the backends)                         */
/* ---------------------------------------------------------------- */

enum eng_backend {
	ENG_AUTO = 0,        /* same values as rl_backend */
	ENG_IO_URING = 1,
	ENG_LIBAIO = 2,
	ENG_PREAD = 3,
};

struct eng_opts {
	int backend;            /* enum eng_backend */
	unsigned queue_depth;   /* reads in flight at most */
	uint64_t inflight_bytes;/* bound on bytes submitted and not yet scattered */
	unsigned buffers;       /* bounce buffers (0: derived from the bound) */
	uint32_t buffer_bytes;  /* size of each bounce buffer (>= largest read) */
	int register_buffers;   /* io_uring: register the pool */
	int register_files;     /* io_uring: register the files */
	int direct;             /* 1: O_DIRECT where the file system allows */
	unsigned threads;       /* pread pool size */
};

void eng_opts_default(struct eng_opts *o);

struct eng_job {
	/* files, indexed by rl_read.file */
	size_t nfiles;
	const char *const *paths;
	const uint64_t *file_sizes;

	/* the reads: an array (reads != NULL) or a generator */
	const struct rl_read *reads;
	size_t nreads;
	const struct rl_copy *copies;
	/* generator: fills *out and returns 1, or returns 0 when done */
	int (*next)(void *user, struct rl_read *out);

	size_t ncopies;         /* entries of copies (every copy index is checked) */
	/* destinations of the copies, indexed by rl_copy.dev */
	unsigned ndevs;
	uint8_t *const *staging;
	const uint64_t *staging_bytes; /* size of each area (NULL: unchecked) */
	/* bytes each shard expects, indexed by rl_copy.shard (may be NULL) */
	size_t nshards;
	const uint64_t *shard_bytes;

	/* callbacks, any may be NULL; user is passed to each */
	void (*on_shard)(void *user, size_t shard);       /* completion thread */
	int (*on_progress)(void *user, uint64_t done, uint64_t total);
	/* every finished read with its submit and completion times
	 * (CLOCK_MONOTONIC ns), on the thread that reaps: rlperf's latency */
	void (*on_read)(void *user, const struct rl_read *r, uint64_t submit_ns,
			uint64_t complete_ns);
	void *user;
	uint64_t total_bytes;   /* for on_progress (0: unknown) */
};

struct eng_stats {
	uint64_t bytes_read, bytes_direct, reads, retries, peak_inflight;
	double read_seconds, scatter_seconds;
	int backend;            /* the backend that ran */
	unsigned buffers, registered_buffers, queue_depth;
	int registered_files, direct_io;
	char fallbacks[256];
	/* requests a backend could not reap before its teardown returned (0
	 * unless its drain after a hard error failed too) */
	uint64_t abandoned;
};

struct eng;

/* Creates an engine with opts (the backend is chosen at eng_run). */
int eng_create(const struct eng_opts *opts, struct eng **out, struct rl_err *e);
void eng_destroy(struct eng *eng);

/*
 * Runs job to completion: returns 0 when every read arrived and every copy
 * landed, else a negative code (file, offset, length, errno text in e)
 * after draining what is in flight. Nothing leaks either way.
 *
 * Shards: on_shard(user, s) fires on the completion thread exactly once for
 * every shard s whose shard_bytes[s] bytes all landed (zero-byte shards
 * fire at the end of a successful run). When the run fails, shards already
 * reported really were complete when reported; no other shard is reported,
 * and the contents of every other staging byte are undefined.
 * on_progress runs on the calling thread; a non-zero return cancels the run
 * (RL_E_CANCELED). on_read runs on the calling thread (the ring's owner).
 */
int eng_run(struct eng *eng, const struct eng_job *job, struct eng_stats *st,
	    struct rl_err *e);

/*
 * Test hook: wraps the backend of the next runs so that the nth read
 * submission (0-based, retries included) fails with EIO, comes back short,
 * or fails with EAGAIN; ENG_FAULT_SETUP makes the wrapped backend's setup
 * fail with EPERM (as when io_uring is disabled), so auto falls back.
 * ENG_FAULT_HARD: the commit after the nth submission hands every queued
 * read to the kernel and then fails with ENOMEM, and so does every later
 * reap, so the run ends on a hard error with reads still in the kernel.
 * ENG_FAULT_NONE removes the wrapper. Applies to backend `backend` only
 * (ENG_AUTO: every backend).
 */
enum eng_fault {
	ENG_FAULT_NONE = 0,
	ENG_FAULT_EIO,
	ENG_FAULT_SHORT,
	ENG_FAULT_EAGAIN,
	ENG_FAULT_SETUP,
	ENG_FAULT_HARD,
	ENG_FAULT_EAGAIN_ALL,   /* the nth submission and every later one: EAGAIN */
	ENG_FAULT_SHORT_ODD,    /* the nth comes back short at an odd length */
};
void eng_set_fault(struct eng *eng, int backend, int kind, uint64_t nth);

/*
 * Benchmark hook: io_uring setup starts at entry `first` of its list of
 * flag sets (0: SINGLE_ISSUER|DEFER_TASKRUN|COOP_TASKRUN|SUBMIT_ALL,
 * 1: without DEFER_TASKRUN, 2: COOP_TASKRUN|SUBMIT_ALL, 3: none).
 */
void eng_set_uring_setup(struct eng *eng, unsigned first);

/*
 * Test hook: io_uring setup behaves as if the kernel refused the ring with
 * errno err (ENOMEM: ring memory charged to RLIMIT_MEMLOCK before 5.12);
 * 0 removes it.
 */
void eng_set_uring_setup_err(struct eng *eng, int err);

/*
 * Test hook: the next n io_submit calls of the libaio backend are refused
 * with EAGAIN, as when the kernel's aio request limit is reached
 * (UINT32_MAX: every call).
 */
void eng_set_aio_refuse(struct eng *eng, uint32_t n);

/*
 * Staging memory for len bytes: anonymous, page-aligned, backed by
 * transparent huge pages where the kernel has them (so that touching many
 * GiB is cheap). Returns NULL on failure. eng_staging_free(NULL, 0) is a no-op.
 */
void *eng_staging_alloc(size_t len);
void eng_staging_free(void *p, size_t len);

/* Returns "auto", "io_uring", "libaio", "pread" or "?". */
const char *eng_backend_name(int backend);

#endif /* RL_ENGINE_H */
