/*
 * engine.h - the engine layer: executes read requests (common/plan_io.h)
 * with io_uring, libaio or a pread pool on N workers, each with its own
 * ring and (registered, locked) bounce buffers, hands finished reads to
 * the job's sink (sink.h) on the worker that reaped them, and bounds the
 * bytes in flight of all workers together. Knows nothing of tensors nor
 * of where the bytes go; never includes planner/ nor a sink.
 *
 * What the layers above include: the engine's types (engine_types.h), the
 * headers of the files that define the rest of its functions, and here
 * the entry points of engine.c. The engine's own files include
 * eng_int.h and those headers, not this one (docs/engine.md).
 */
#ifndef ENGINE_ENGINE_H
#define ENGINE_ENGINE_H

#include "engine_types.h"
#include "devq.h"
#include "hooks.h"
#include "numa.h"
#include "pool.h"
#include "probe.h"
#include "stats.h"
#include "util.h"

void eng_opts_default(struct eng_opts *o);

/*
 * A session: the set-up of a run (files opened and probed, workers sized,
 * started and given their rings, buffers and registrations) done once for
 * several jobs over the same files, run one after another on the same
 * workers: streaming's window ranges (exec/execute.c).
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

/* Whether a run of files_job's reads (as eng_session_begin's) would
 * take every byte from the page cache: 1 when the choice eng_run makes
 * per file (eng_opts.direct AUTO, HOT_PERMILLE) reads every file it uses
 * buffered because the cache holds it, 0 when any file is read from its
 * device (or nothing is read), or a negative code (in e) when a file
 * does not open. Opens, probes and closes the files; nothing is read. */
int eng_job_cached(const struct eng *eng, const struct eng_job *files_job, struct cm_err *e);

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


#endif /* ENGINE_ENGINE_H */
