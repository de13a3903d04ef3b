/*
 * loader_internal.h - what api/load.c and api/stream.c share of an
 * rl_loader: its options (struct ld_opts), the last run's results (struct
 * ld_last) and the state that delivers a run's bytes (struct ld_deliver:
 * read-once bytes, a streaming load's windows, devices).
 */
#ifndef API_LOADER_INTERNAL_H
#define API_LOADER_INTERNAL_H

#include "ringload.h"
#include "../engine/engine.h"
#include "../planner/planner.h"
#include "integrity.h"
#include "../exec/xfer_exec.h"

struct ld_stream;

struct ld_area {
	uint8_t *ptr;
	uint64_t len;
	int ours;               /* allocated by the library */
};

/* What rl_loader_set*, rl_loader_set_staging and rl_loader_expect_sha256
 * set: read by every run, changed by no run. */
struct ld_opts {
	struct eng_opts eo;
	int staging_mode;
	uint64_t request_bytes;  /* 0: automatic */

	rl_shard_fn on_shard;
	rl_progress_fn on_progress;
	void *user;

	struct ld_area *caller;  /* RL_STAGING_CALLER areas, by device */
	unsigned ncaller;

	struct ld_expect *expect;    /* rl_loader_expect_sha256() */
	size_t nexpect;
	int sha256_hf;               /* RL_OPT_SHA256_HF */

	/* RL_STAGING_STREAM (api/stream.c) */
	uint64_t budget;         /* 0: rl_loader_default_budget() */
	uint32_t release_timeout_ms;
	rl_piece_fn on_piece;
	void *piece_user;

	/* rl_loader_set_transport (api/transport.c): runs move transfers */
	struct ex_transport tp;
	int has_transport;
};

/* The last run's results, what rl_loader_stats, rl_loader_file_stats,
 * rl_loader_staging and rl_loader_sha256 report: replaced by each run. */
struct ld_last {
	struct ld_area *areas;   /* staging of the last run */
	unsigned nareas;
	int failed;              /* the last run failed: areas not handed out */

	rl_load_stats stats;
	struct eng_file_stat *files; /* of the last run, by its plan's file */
	uint32_t *file_index;        /* the checkpoint's index of each */
	size_t nfiles;
	int have_stats;
	struct ld_hashrun hash;      /* of the last run */
};

/* Where a run's bytes go beyond whole staging: the read-once bytes the
 * running plan received, the streaming state (window pool, pieces held, a
 * started load) and the devices; the pool and the device sink are kept
 * for the next run when they fit it. */
struct ld_deliver {
	const uint8_t *received; /* of the running plan (read once), or NULL */
	struct ld_stream *stream; /* window pool, pieces held, a started load */
	/* rl_loader_set_device (api/loader_dev.c): streaming loads go to devices */
	struct ld_dev *dev;
};

struct rl_loader {
	struct ld_opts opt;
	struct ld_last last;
	struct ld_deliver deliver;
	struct cm_err err;       /* the last call's error (rl_loader_errmsg) */
};

/* load_common.c: frees library staging of the last run. */
void ld_free_areas(rl_loader *ld);
/* load_common.c: statistics of a run (es: the windows' summed); _ex, after
 * ld_fill_stats: workers, set-up, request size, hashing, the shape text. */
void ld_fill_stats(rl_loader *ld, const struct pl_exec *ex, const struct eng_stats *es,
		   double plan_s, double total_s);
void ld_fill_stats_ex(rl_loader *ld, const struct eng_stats *es, const char *why);
/* load_common.c: the last run's per-file statistics dropped, and arrays for the
 * next run's (ld->last.files, ld->last.file_index). */
int ld_reset_files(rl_loader *ld, const struct pl_exec *ex);

/* stream.c: a streaming run of ex with the piece callback on the calling
 * thread (rl_loader_run, rl_loader_load). */
int ld_stream_exec(rl_loader *ld, const struct pl_exec *ex, double plan_s, const char *why);
/* stream.c: whether a new load may start (no pieces held, none running):
 * 0 or RL_E_STATE with ld->err set. */
int ld_stream_idle(rl_loader *ld);
/* stream.c: the request size a streaming load plans with at most: a
 * read at a window's edge is read for both windows, so reads are kept
 * small against the window (a 32nd of the budget). */
uint64_t ld_stream_request_cap(const rl_loader *ld);
/* stream.c: the window pool of the last load (what a device load pinned:
 * from its first window on), or NULL and 0. */
void ld_stream_pinned(const rl_loader *ld, uint8_t **base, uint64_t *len);
/* stream.c: frees the window pool and the stream state (destroy). */
void ld_stream_free(rl_loader *ld);

/* loader_dev.c: a streaming load delivered to devices (ld->deliver.dev set).
 * begin: the sink, destinations and the pinned pool for ex; device: the
 * sink and each shard's place in it, for the executor; piece_ptr: the
 * device address of byte offset of shard (a started load's pieces);
 * done: after the executor (ok 0: the load failed or was canceled, its
 * device memory freed; st NULL: no statistics); unpin: before the window
 * pool is freed or replaced. */
int ld_dev_begin(rl_loader *ld, const struct pl_exec *ex, void *pool, size_t pool_len);
void ld_dev_device(rl_loader *ld, const struct eng_sink **sink, const uint64_t **dst);
uint64_t ld_dev_piece_ptr(rl_loader *ld, size_t shard, uint64_t offset);
void ld_dev_done(rl_loader *ld, int ok, struct eng_stats *st);
void ld_dev_unpin(rl_loader *ld);
/* loader_dev.c: frees the device state (destroy). */
void ld_dev_free(rl_loader *ld);

/* transport.c: with a transport set, every process agrees on ret (the
 * run's own reads; pp may be NULL when ret is not 0), then the transfers
 * of pp run over it, read in requests of at most chunk bytes (the plan's
 * RL_PLAN_CHUNK_BYTES, as rl_plan_build_batch); the run's result.
 * Without one, ret. */
int ld_transport_run(rl_loader *ld, const struct pl_plan *pp, uint64_t chunk, int ret);

#endif /* API_LOADER_INTERNAL_H */
