/*
 * engine_types.h - the engine's vocabulary, shared by every file of engine/
 * and by the layers above: options (eng_opts, the backends, direct I/O),
 * a job (eng_job: files, reads, the sink, callbacks), what a run reports
 * (eng_stats, eng_file_stat, the fallback flags), a file's alignment and
 * device queue (eng_align, eng_devq) and a session's inputs. Types only:
 * the functions live in the header of the file that defines them, and
 * engine.h (the engine's entry points) includes them all. Of the engine's
 * files only engine.c and raw.c (which nothing in the engine calls)
 * include engine.h: engine.c calls the workers, so a worker including it
 * would close a circle (tests/check/layers.py).
 */
#ifndef ENGINE_ENGINE_TYPES_H
#define ENGINE_ENGINE_TYPES_H

#include <stdint.h>
#include <stddef.h>

#include "common.h"
#include "plan_io.h"
#include "fileid.h"
#include "sink.h"

/* Workers of a run at most: a sink may keep that many workers' state. */
#define ENG_MAX_WORKERS 256

/* A file's O_DIRECT alignment (probe.h). */
struct eng_align {
	uint32_t offset_align;  /* O_DIRECT file offset/length alignment */
	uint32_t mem_align;     /* O_DIRECT buffer address alignment */
	int direct;             /* 1 if the file can be opened with O_DIRECT */
};

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

/* Backend ids: the public rl_backend values, fixed forever. Which the
 * engine has, their order, names and capabilities are engine/backends.c's
 * table alone. */
enum eng_backend {
	ENG_AUTO = 0,
	ENG_IO_URING = 1,
	ENG_LIBAIO = 2,
	ENG_PREAD = 3,
	ENG_TEST = 90,       /* the test build's be_test.c */
};

/* What a backend can do (struct be_ops.caps; the same values as the
 * public RL_BACKEND_CAP_*): the engine and its callers ask these, never
 * a backend's name or id. */
enum {
	ENG_CAP_FIXED_BUFFERS = 1u << 0,  /* reads into registered memory */
	ENG_CAP_FIXED_FILES = 1u << 1,    /* registered files */
	ENG_CAP_POLL = 1u << 2,           /* polled completions (IOPOLL) */
	ENG_CAP_SQ_THREAD = 1u << 3,      /* a kernel thread submits (SQPOLL) */
	ENG_CAP_IOPRIO = 1u << 4,         /* a priority per read */
	ENG_CAP_KERNEL_QUEUE = 1u << 5,   /* the kernel queues the reads (no threads of ours) */
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
	int buffer_small_pages; /* bounce buffers in 4 KiB pages, no THP (fio's
				 * iomem=malloc: the segments, so the device
				 * requests, fio's reads make) */
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
	/* fio's submission and completion batching, for rlperf's jobs (the
	 * same I/O at the device as fio's: one read per submission call
	 * under fio's defaults, where the engine's own batches let the
	 * block layer merge neighbours). 0 keeps the engine's own way:
	 * every read the slots allow in one commit, reaping what is there. */
	unsigned submit_batch;  /* commit after this many queued reads */
	unsigned reap_min;      /* queue full: wait for this many completions */
	unsigned reap_max;      /* reap at most this many at once */
	unsigned depth_low;     /* queue full: reap until the depth is this */
};

/* What the engine decided about one file (eng_job.file_stats). */
enum eng_file_mode {
	ENG_FILE_UNUSED = 0,    /* no reads */
	ENG_FILE_DIRECT = 1,    /* O_DIRECT from the device */
	ENG_FILE_CACHED = 2,    /* buffered: its needed bytes were in the page cache */
	ENG_FILE_BUFFERED = 3,  /* buffered: O_DIRECT off or refused by the file system */
};

/* Why a file was read as it was (eng_file_stat.why; the same values as
 * the public RL_WHY_*): the mode alone cannot tell "asked" from "chosen". */
enum eng_file_why {
	ENG_WHY_NONE = 0,       /* no reads */
	ENG_WHY_ASKED = 1,      /* ENG_DIRECT_ON or ENG_DIRECT_OFF said so */
	ENG_WHY_COLD = 2,       /* auto: under 90% of its needed bytes cached */
	ENG_WHY_HOT = 3,        /* auto: >= 90% of its needed bytes cached */
	ENG_WHY_MEDIUM = 4,     /* auto: the page cache is its medium (tmpfs), not probed */
	ENG_WHY_REFUSED = 5,    /* the file system refuses O_DIRECT */
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
	int why;                /* enum eng_file_why */
	uint64_t needed;        /* bytes the reads take from the file (their spans) */
	uint64_t resident;      /* of which in the page cache before the run */
	int probed;             /* resident was measured (direct AUTO only) */
	uint64_t probed_bytes;  /* of needed, the bytes the probe asked about
				 * (long ranges: samples; resident scales them) */
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
	/* each commit of nr reads that leaves depth in the kernel, and each
	 * reap of nr completions, on the worker: rlperf's fio depth maps */
	void (*on_commit)(void *user, unsigned nr, unsigned depth);
	void (*on_reap)(void *user, unsigned nr);
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
	/* bytes the byte limiter still held when the batch ended: 0, since
	 * every read gives back what it took (the tests check it) */
	uint64_t limiter_left;
	/* the read span's clocks (cm_now_ns): first submission and last
	 * completion of any worker; the engine sets read_seconds from them */
	uint64_t read_first_ns, read_last_ns;
};

/* How eng_stats_merge adds one part into a sum. */
enum eng_merge {
	ENG_MERGE_WORKERS = 0,  /* parts that ran at once: the workers of a batch */
	ENG_MERGE_BATCHES = 1,  /* parts that ran one after another on the same
				 * workers: the batches of a session */
};

/* An engine and a session (engine.h: eng_create, eng_session_begin). */
struct eng;
struct eng_session;

/* A region of memory that jobs' staging lies in (see eng_session_begin). */
struct eng_fixed {
	uint8_t *base;
	size_t len;
};

/* What a session's batches need together (eng_session_begin): bounce
 * counts the reads that may need a bounce buffer, max_bounce the longest
 * of them (0: max_read), the buffers' size. */
struct eng_session_needs {
	uint64_t all_bytes, nreads, bounce, bounce_bytes;
	uint32_t max_read, max_bounce;
};

#endif /* ENGINE_ENGINE_TYPES_H */
