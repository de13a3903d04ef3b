/*
 * mx.h - libringload_mpi's insides: the handle, and one collective call's
 * communication state (mx.c): a private duplicate of the caller's
 * communicator, failure notes, agreements, waits with a deadline.
 */
#ifndef MPI_MX_H
#define MPI_MX_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "ringload_mpi.h"

#define MX_MSG 400              /* bytes of a failure message that travel */
#define MX_MIN(a, b) ((a) < (b) ? (a) : (b))
#define MX_MAX(a, b) ((a) > (b) ? (a) : (b))

struct rl_mpi {
	int64_t timeout_ms;
	int64_t max_msg;
	char (*want)[65];           /* rl_mpi_expect: each file's hex digest ("" none) */
	size_t nwant;
	rl_loader *tld;             /* rl_mpi_transfer_loader: unused, kept for the ABI */
	rl_shard_fn on_shard;
	void *user;
	rl_piece_fn on_piece;       /* a streaming loader's pieces */
	void *piece_user;
	rl_mpi_abort_fn abort_fn;
	void *abort_user;
	char err[MX_MSG + 64];
	int failed_rank;
	rl_mpi_stats *stats;        /* per rank, after a successful load */
	int nstats;
};

/* A failure note: sent to every other rank when this one fails. */
struct mx_note {
	int32_t rank;
	int32_t code;
	char msg[MX_MSG];
};

/* What each rank contributes to an agreement. */
struct mx_vote {
	int32_t failed;             /* 1: this rank failed */
	int32_t code;
	int32_t notes;              /* 1: it sent failure notes */
	int32_t value;              /* the caller's (e.g. the mesh's processes) */
};

struct mx {
	struct rl_mpi *m;
	MPI_Comm comm;              /* private: our tags never meet the caller's */
	int rank, size;
	int tag_ub;
	/* failure notes */
	MPI_Request note_req;       /* a receive of any rank's note, always posted */
	struct mx_note note_in;
	MPI_Request *note_out;      /* this rank's notes to the others */
	struct mx_note note_mine;
	int notes_sent, notes_seen, notes_due;
	/* what is known of failures */
	int failed;                 /* this rank failed: code and msg */
	int code;
	char msg[MX_MSG];
	int peer_failed;            /* a note arrived */
	double last_progress;
};

/* Seconds on a monotonic clock. */
double mx_now(void);

/* Sets m->err (printf-style) and returns code. */
int mx_err(struct rl_mpi *m, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Starts a collective call on a duplicate of comm (checks that MPI runs
 * with at least MPI_THREAD_FUNNELED on this thread). Returns 0 or a code
 * with m->err set; on failure nothing needs mx_end.
 */
int mx_begin(struct mx *x, struct rl_mpi *m, MPI_Comm comm);

/*
 * This rank failed (the first failure is kept): remembers it and tells
 * every other rank at once (a note), so that they stop waiting. Returns
 * code.
 */
int mx_fail(struct mx *x, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Looks for a note from a failed rank; 1 when any failure is known. */
int mx_poll(struct mx *x);

/*
 * Waits until reqs[0..n) complete, polling notes; done (may be NULL) is
 * called for each as it completes, with its index and status. A wait
 * without progress for the timeout calls the abort handler. Returns 0 or
 * RL_E_MPI (this rank failed).
 */
typedef void (*mx_done_fn)(struct mx *x, void *arg, int i, const MPI_Status *st);
int mx_wait(struct mx *x, MPI_Request *reqs, int n, const char *what, mx_done_fn done,
	    void *arg);

/* Tests reqs[0..n) once (for progress between other work), calling done. */
int mx_test(struct mx *x, MPI_Request *reqs, int n, mx_done_fn done, void *arg);

/*
 * Every rank votes: whether it failed, and value. Returns 0 when none
 * failed (values[r] gets rank r's value when values is not NULL), else
 * the error every rank returns, with m->err naming the first failed rank
 * and its reason.
 */
int mx_agree(struct mx *x, int value, int *values);

/* Ends the call: collects notes still in flight, frees the communicator. */
void mx_end(struct mx *x);

/* Calls the abort handler with msg (the timeout's last resort). */
void mx_abort(struct mx *x, const char *msg);

/* Message tags: failure notes, agreements' broadcasts and data. */
#define MX_TAG_NOTE 1
#define MX_TAG_DATA 16

/* ---------------------------------------------------------------- */
/* The load's parts                                                  */
/* ---------------------------------------------------------------- */

/* After a load: every file with an expected SHA-256 hashed whole by one
 * rank, then agreed (verify.c): 0 or the agreed error. */
int mx_verify(struct mx *x, const rl_ckpt *ck);

/* A SHA-256 of what the ranks must agree on about ck (digest.c). */
int mx_ckpt_digest(const rl_ckpt *ck, unsigned char out[32]);

/* Per-load state of rl_mpi_load (cluster_load.c, transport_mpi.c). */
struct mx_load {
	struct mx *x;
	const rl_ckpt *ck;
	rl_loader *ld;
	rl_plan *plan;
	rl_mpi_stats st;
	int stream;                 /* ld streams: transfers land as pieces */
};

/*
 * Before planning, on every rank (cluster_load.c): whether L->ld streams
 * to the piece callback, and the least budget of the ranks that stream
 * as the plan's batch bytes. Returns 0 or this rank's error (the others
 * learn it at the agreement).
 */
int mx_stream_begin(struct mx_load *L);

/* A load's own reads and transfers, run by the library's read-once
 * executor over the MPI transport (transport_mpi.c): 0, or the agreed
 * error (m->err set alike on every rank). */
int mx_transport_load(struct mx_load *L);

#endif /* MPI_MX_H */
