/*
 * engine.h - the engine layer: executes read requests (common/plan_io.h)
 * with io_uring, libaio or a pread pool on N workers, each with its own
 * ring and (registered, locked) bounce buffers, hands finished reads to
 * the job's sink (sink.h) on the worker that reaped them, and bounds the
 * bytes in flight of all workers together. Knows nothing of tensors nor
 * of where the bytes go; never includes planner/ nor a sink.
 */
#ifndef ENGINE_ENGINE_H
#define ENGINE_ENGINE_H

#include <stdint.h>
#include <stddef.h>

#include "common.h"
#include "plan_io.h"
#include "fileid.h"
#include "sink.h"

/* Workers of a run at most: a sink may keep that many workers' state. */
#define ENG_MAX_WORKERS 256

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

/*
 * The block device under a file (engine/devq.c), followed through
 * partitions, device-mapper/md (its slaves) and loop devices (their
 * backing file) to the queues that really split requests; the limits are
 * the smallest along that chain.
 */
struct eng_devq {
	uint32_t max_bytes;      /* max_sectors_kb * 1024: larger requests are split (0: unknown) */
	uint32_t max_segments;   /* memory segments per request (0: unknown) */
	uint32_t optimal_bytes;  /* optimal_io_size (0: none given) */
	uint32_t nr_requests;    /* requests the queue holds (0: unknown) */
	char name[64];           /* "vda", "nvme0n1p2 -> nvme0n1", "loop0 -> tmpfs", "" (none) */
};

/* Probes the device under the file system object dev (st_dev), with
 * sysfs at sysfs_root (normally "/sys"). Returns 1 when a block device was
 * found, 0 when none is (tmpfs, network file systems: q zeroed). */
int eng_devq_probe(const char *sysfs_root, uint64_t dev, struct eng_devq *q);
/* The same for the file at path. Returns 1, 0 or -errno (stat failed). */
int eng_devq_probe_path(const char *path, struct eng_devq *q);

/* ---------------------------------------------------------------- */
/* Engine (engine/engine.c and the backends)                         */
/* ---------------------------------------------------------------- */

enum eng_backend {
	ENG_AUTO = 0,        /* same values as rl_backend */
	ENG_IO_URING = 1,
	ENG_LIBAIO = 2,
	ENG_PREAD = 3,
};

/* eng_opts.direct */
enum eng_direct {
	ENG_DIRECT_OFF = 0,  /* buffered reads */
	ENG_DIRECT_ON = 1,   /* O_DIRECT where the file system allows */
	ENG_DIRECT_AUTO = 2, /* O_DIRECT, except files whose needed bytes are
			      * >= 90% in the page cache: read buffered */
};

struct eng_opts {
	int backend;            /* enum eng_backend */
	unsigned queue_depth;   /* reads in flight at most, all workers together
				 * (0: automatic), split evenly over the workers */
	uint64_t inflight_bytes;/* bound on bytes submitted and not yet scattered */
	unsigned buffers;       /* bounce buffers in total, split over the workers
				 * (0: derived from the bound and the plan) */
	uint32_t buffer_bytes;  /* size of each bounce buffer (>= largest read) */
	int register_buffers;   /* io_uring: register the pool */
	int register_files;     /* io_uring: register the files */
	int direct;             /* enum eng_direct */
	unsigned threads;       /* pread backend: reader threads in total, split
				 * over the workers (0: one per read in flight) */
	unsigned workers;       /* 0: automatic (CPUs of the caller, the plan) */
	int uring_iopoll;       /* io_uring: polled completions (IORING_SETUP_IOPOLL;
				 * the device needs poll queues, else reads fail) */
	int uring_sqpoll;       /* io_uring: a kernel thread submits (SQPOLL) */
	unsigned uring_flags_first; /* io_uring setup starts at this entry of its
				 * flag sets (0: SINGLE_ISSUER|DEFER_TASKRUN|
				 * COOP_TASKRUN|SUBMIT_ALL, 1: without
				 * DEFER_TASKRUN, 2: COOP_TASKRUN|SUBMIT_ALL,
				 * 3: none); benchmarks compare them */
};

void eng_opts_default(struct eng_opts *o);

/* What the engine decided about one file (eng_job.file_stats). */
enum eng_file_mode {
	ENG_FILE_UNUSED = 0,    /* no reads */
	ENG_FILE_DIRECT = 1,    /* O_DIRECT from the device */
	ENG_FILE_CACHED = 2,    /* buffered: its needed bytes were in the page cache */
	ENG_FILE_BUFFERED = 3,  /* buffered: O_DIRECT off or refused by the file system */
};

/* eng_stats.fallback_flags: the same values as RL_FALLBACK_* (api/load.c
 * checks), so that the engine needs no public header. */
enum {
	ENG_FALLBACK_BACKEND = 1u << 0,
	ENG_FALLBACK_URING_FLAGS = 1u << 1,
	ENG_FALLBACK_FILES_UNREGISTERED = 1u << 2,
	ENG_FALLBACK_BUFFERS_UNREGISTERED = 1u << 3,
	ENG_FALLBACK_BUFFERS_UNLOCKED = 1u << 4,
	ENG_FALLBACK_NOT_PREFAULTED = 1u << 5,
	ENG_FALLBACK_FEWER_WORKERS = 1u << 6,
};

struct eng_file_stat {
	int mode;               /* enum eng_file_mode */
	uint64_t needed;        /* bytes the reads take from the file (their spans) */
	uint64_t resident;      /* of which in the page cache before the run */
	int probed;             /* resident was measured (direct AUTO only) */
	int probe_mincore;      /* measured with mincore (no cachestat, or overlayfs) */
	struct eng_devq q;      /* the device under the file */
};

struct eng_job {
	/* files, indexed by cm_read.file */
	size_t nfiles;
	const char *const *paths;
	const uint64_t *file_sizes;

	/* the reads: an array (reads != NULL) or a generator */
	const struct cm_read *reads;
	size_t nreads;
	const struct cm_copy *copies;
	/* generator: fills *out and returns 1, or returns 0 when done; a job
	 * with a generator runs on one worker, the calling thread */
	int (*next)(void *user, struct cm_read *out);

	size_t ncopies;         /* entries of copies (every copy index is checked) */
	/* where the copies go (cm_copy.dev indexes its slots); required when
	 * a read has copies; the same sink serves the whole job */
	const struct eng_sink *sink;
	/* bytes each shard expects, indexed by cm_copy.shard (may be NULL) */
	size_t nshards;
	const uint64_t *shard_bytes;

	/* callbacks, any may be NULL; user is passed to each */
	/* a worker thread or the calling thread, never two at once */
	void (*on_shard)(void *user, size_t shard);
	int (*on_progress)(void *user, uint64_t done, uint64_t total);
	/* every finished read with its submit and completion times
	 * (CLOCK_MONOTONIC ns), on the worker that reaped it (several
	 * workers: concurrently): rlperf's latency */
	void (*on_read)(void *user, const struct cm_read *r, uint64_t submit_ns,
			uint64_t complete_ns);
	/* every read whose bytes all arrived, on the worker that reaped it,
	 * before its buffer is reused and before its copies count towards
	 * their shards: bytes points at the read's first byte (bounce buffer
	 * or the sink's direct destination), r->min_len of them valid. Several workers call it
	 * concurrently (reads of one file in any order). For checksums. */
	void (*on_data)(void *user, const struct cm_read *r, const uint8_t *bytes);
	void *user;
	uint64_t total_bytes;   /* for on_progress (0: unknown) */

	/* out: what was decided for each file (nfiles entries; may be NULL) */
	struct eng_file_stat *file_stats;

	/* 1 while on_data's consumer holds more than it should (bytes that
	 * arrived ahead of what it can use): the workers claim no new reads
	 * until it returns 0 (claimed ones go on). Any worker. May be NULL. */
	int (*on_data_full)(void *user);

	/* Identity (engine/file_checks.c): the identity each file had when its
	 * checkpoint was opened (nfiles entries, NULL: none); a file that
	 * differs when the engine opens it, or whose open descriptor differs
	 * after the last read, fails the run with RL_E_FILE_CHANGED. */
	const struct cm_file_id *file_ids;
};

struct eng_stats {
	uint64_t bytes_read, bytes_direct, reads, retries, peak_inflight;
	double read_seconds;    /* first submission to last completion (wall) */
	double scatter_seconds; /* copying bounce reads, summed over workers */
	double prepare_seconds; /* pre-faulting staging, summed over workers */
	double setup_seconds;   /* files, probes, rings and buffers (wall) */
	int backend;            /* the backend that ran */
	unsigned workers;       /* workers that ran */
	unsigned buffers, registered_buffers, queue_depth; /* all workers together */
	int registered_files, direct_io;
	uint64_t bytes_buffered;/* bytes read through the page cache */
	unsigned files_cached;  /* files read buffered: the page cache held them */
	uint32_t max_read;      /* largest read */
	char fallbacks[256];
	uint32_t fallback_flags; /* ENG_FALLBACK_*, each also in fallbacks with its reason */
	char shape[256];        /* workers, queue depth, request size: chosen why */
	/* requests a backend could not reap before its teardown returned (0
	 * unless its drain after a hard error failed too) */
	uint64_t abandoned;
	/* hashing (filled by the execution layer, exec/hash.c, not the
	 * engine): bytes hashed, seconds spent hashing (summed over workers),
	 * most bytes held out of order waiting for their turn */
	uint64_t hashed_bytes, hash_held_peak;
	double hash_seconds;
	uint64_t reads_fixed;   /* reads straight into registered fixed regions */
};

/* How eng_stats_merge adds one part into a sum. */
enum eng_merge {
	ENG_MERGE_WORKERS = 0,  /* parts that ran at once: the workers of a batch */
	ENG_MERGE_BATCHES = 1,  /* parts that ran one after another on the same
				 * workers: the batches of a session */
};

/*
 * Adds part's statistics into sum (zeroed before the first part), every
 * field: the one place that does, for the engine's workers into a batch
 * and streaming's batches into a load. Counts (bytes, reads, retries,
 * reads_fixed, ...) and seconds summed over workers add up; peaks, the
 * largest read and files_cached are the greatest. Resources (workers,
 * buffers, queue depth) add up over workers and are the greatest over
 * batches; wall seconds (setup, read) the other way round (the engine
 * then sets a batch's read span from its workers' clocks). direct_io holds
 * when it holds for every part; registered_files is the first part's
 * (sum->workers still 0); backend and shape the first set; fallbacks gain
 * each "; "-separated note they lack.
 */
void eng_stats_merge(struct eng_stats *sum, const struct eng_stats *part, enum eng_merge how);

struct eng;

/* A region of memory that jobs' staging lies in (see eng_session_begin). */
struct eng_fixed {
	uint8_t *base;
	size_t len;
};

/*
 * A session: the set-up of a run (files opened and probed, workers sized,
 * started and given their rings, buffers and registrations) done once for
 * several jobs over the same files, run one after another on the same
 * workers: streaming's window ranges (api/stream.c).
 *
 * files_job gives the files (nfiles, paths, file_sizes, file_ids,
 * file_stats) and, in reads, every read any batch will make (the
 * page-cache probe measures them); its copies and staging are not used.
 * sz says what the batches' reads need together (bounce: reads that may
 * need a bounce buffer, of bounce_bytes; max_read bounds every read).
 * fixed (nfixed regions, NULL: none) is memory every batch's staging
 * lies in: on io_uring each worker registers it as fixed buffers when
 * its share of RLIMIT_MEMLOCK allows (eng_session_fixed says whether),
 * and reads straight into it use READ_FIXED.
 *
 * begin, every run and end must be called from one thread (worker 0's
 * ring is that thread's). A run returns as eng_run; after a failed run
 * the session only ends (later runs return the same error). Returns 0
 * or a negative code (in e); on failure *out is NULL and nothing leaks.
 */
struct eng_session;
struct eng_session_needs {
	uint64_t all_bytes, nreads, bounce, bounce_bytes;
	uint32_t max_read;
};
int eng_session_begin(struct eng *eng, const struct eng_job *files_job,
		      const struct eng_session_needs *sz, const struct eng_fixed *fixed,
		      unsigned nfixed, struct eng_stats *st, struct eng_session **out,
		      struct cm_err *e);
int eng_session_run(struct eng_session *s, const struct eng_job *job, struct eng_stats *st,
		    struct cm_err *e);
void eng_session_end(struct eng_session *s);
/* 1 when every worker's ring registered the fixed regions, else 0 with
 * why (at most len bytes) saying why not. */
int eng_session_fixed(const struct eng_session *s, char *why, size_t len);

/* Creates an engine with opts (the backend is chosen at eng_run). */
int eng_create(const struct eng_opts *opts, struct eng **out, struct cm_err *e);
void eng_destroy(struct eng *eng);

/*
 * Runs job to completion: returns 0 when every read arrived and every copy
 * landed, else a negative code (file, offset, length, errno text in e)
 * after draining what is in flight. Nothing leaks either way.
 *
 * Threads: the calling thread is worker 0; workers 1..N-1 are started for
 * the run and joined before it returns. Each worker claims reads from a
 * shared cursor in the job's order, has the sink prepare their
 * destinations, reads them on its own backend and hands what it reaps to
 * the sink. After the join the sink's finish runs on the calling thread.
 *
 * Shards: on_shard(user, s) fires exactly once for every shard s whose
 * shard_bytes[s] bytes all landed (zero-byte shards fire at the end of a
 * successful run), on the worker whose copy completed it, never two calls
 * at once; for an asynchronous sink a copy has landed once the worker's
 * wait covering it returned. When the run fails, shards already reported
 * really were complete when reported; no other shard is reported, and the
 * contents of every other destination byte are undefined. on_progress runs on the calling
 * thread; a non-zero return cancels the run (RL_E_CANCELED).
 */
int eng_run(struct eng *eng, const struct eng_job *job, struct eng_stats *st,
	    struct cm_err *e);

/*
 * Test hooks (engine/hooks.c): compiled only with -DRL_TEST_HOOKS, into
 * the test archive the test programs link; the release library has none
 * of them and its submit paths check nothing (make check: hooks.py).
 */
#ifdef RL_TEST_HOOKS
/*
 * Test hook: wraps the backend of the next runs so that the nth read
 * submission of the run (0-based, all workers together, retries included)
 * fails with EIO (or the errno of eng_set_fault_errno), comes back short,
 * or fails with EAGAIN; ENG_FAULT_SETUP makes the wrapped backend's setup
 * fail with EPERM (as when io_uring is disabled), so auto falls back.
 * ENG_FAULT_HARD: the commit after the nth submission hands every queued
 * read to the kernel and then fails with ENOMEM, and so does every later
 * reap of that worker, so the run ends on a hard error with reads still in
 * the kernel. ENG_FAULT_NONE removes the wrapper. Applies to backend
 * `backend` only (ENG_AUTO: every backend).
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
/* Test hook: the errno ENG_FAULT_EIO fails the read with (default EIO). */
void eng_set_fault_errno(struct eng *eng, int err);

/*
 * Test hook: the next n io_uring_submit calls of the io_uring backend
 * (all workers together) return -EAGAIN without submitting, as when the
 * kernel is short of request memory.
 */
void eng_set_uring_submit_eagain(struct eng *eng, uint32_t n);

/* Test hook: 1 measures page-cache residency with mincore only, as on a
 * kernel without cachestat(2); 0 (default) tries cachestat first. */
void eng_set_cache_probe(struct eng *eng, int mincore_only);

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
#endif /* RL_TEST_HOOKS */

/*
 * Staging memory for len bytes: anonymous, page-aligned (2 MiB-aligned
 * from 2 MiB on), backed by transparent huge pages where the kernel has
 * them (so that touching many GiB is cheap), and placed on the NUMA node
 * of the caller's CPUs when the machine has several nodes and those CPUs
 * lie on one (eng_numa_node, preferred, not bound: a full node spills
 * over rather than fail). Not touched: the workers fault it in, each
 * the part it fills. Returns NULL on failure. eng_staging_free(NULL, 0) is
 * a no-op.
 */
void *eng_staging_alloc(size_t len);
void eng_staging_free(void *p, size_t len);

/*
 * The NUMA node the calling thread's allowed CPUs lie on, with sysfs at
 * sysfs_root: -1 when the machine has one node, or when those CPUs span
 * several (memory then follows first touch: each worker's own node).
 */
int eng_numa_node(const char *sysfs_root);

/* Prefers NUMA node `node` for [p, p + len) (before it is touched);
 * advisory: errors are ignored, node < 0 does nothing. */
void eng_numa_place(void *p, size_t len, int node);

/* Returns "auto", "io_uring", "libaio", "pread" or "?". */
const char *eng_backend_name(int backend);

#endif /* ENGINE_ENGINE_H */
