/*
 * mx.h - libringload_mpi's insides: the handle, and one collective call's
 * communication state (mx.c): a private duplicate of the caller's
 * communicator, failure notes, agreements, waits with a deadline.
 */
#ifndef MPI_MX_H
#define MPI_MX_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ringload_mpi.h"

#define MX_MSG 400              /* bytes of a failure message that travel */
#define MX_MIN(a, b) ((a) < (b) ? (a) : (b))
#define MX_MAX(a, b) ((a) > (b) ? (a) : (b))

struct rl_mpi {
	int64_t timeout_ms;
	int64_t max_msg;
	int executor;               /* RL_MPI_EXECUTOR */
	char (*want)[65];           /* rl_mpi_expect: each file's hex digest ("" none) */
	size_t nwant;
	rl_loader *tld;             /* reads the payloads this rank sends */
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
/* Completions handed from the engine's threads (queue.c)            */
/* ---------------------------------------------------------------- */

struct mx_queue {
	pthread_mutex_t lock;       /* engine threads push, the MPI thread pops */
	size_t *v;
	size_t n, cap;
	int oom;
};

int mx_queue_init(struct mx_queue *q, size_t cap);
void mx_queue_free(struct mx_queue *q);
/* From any thread: appends i (capacity is reserved: never allocates). */
void mx_queue_push(struct mx_queue *q, size_t i);
/* On the MPI thread: moves every entry to out (cap entries); returns count. */
size_t mx_queue_take(struct mx_queue *q, size_t *out, size_t cap);

/* ---------------------------------------------------------------- */
/* The load's parts                                                  */
/* ---------------------------------------------------------------- */

/* After a load: every file with an expected SHA-256 hashed whole by one
 * rank, then agreed (verify.c): 0 or the agreed error. */
int mx_verify(struct mx *x, const rl_ckpt *ck);

/* A SHA-256 of what the ranks must agree on about ck (digest.c). */
int mx_ckpt_digest(const rl_ckpt *ck, unsigned char out[32]);

/* Per-load state shared by load.c and batch.c. */
struct mx_load {
	struct mx *x;
	const rl_ckpt *ck;
	rl_loader *ld;
	rl_plan *plan;
	uint8_t **staging;          /* ld's areas, by device */
	uint64_t *shard_have;       /* bytes transfers brought each shard */
	uint64_t *shard_want;       /* bytes transfers bring it (0: not received) */
	struct mx_queue q;          /* completed shards (own reads, payloads) */
	uint8_t *buf;               /* the batch's payloads read here */
	size_t buf_len;
	rl_mpi_stats st;
	int stream;                 /* ld streams: transfers land as pieces */
	uint8_t *pack;              /* strided runs packed into one piece */
	size_t pack_len;
};

/* Payload bytes [src, src + len) land at dst (direct.c). */
struct mx_blk {
	uint64_t src, len;
	uint8_t *dst;
};

struct mx_blocks {
	struct mx_blk *v;       /* payload order, adjacent ones merged */
	size_t n;
};

/*
 * The blocks where transfer t's copies put its payload (ti: its info,
 * staging: the rank's areas). Returns 1 when they cover every payload
 * byte exactly once (a receive can land there directly), 0 when not (a
 * buffer and copies), -ENOMEM.
 */
int mx_direct_blocks(const rl_plan *plan, size_t t, const rl_transfer_info *ti,
		     uint8_t *const *staging, struct mx_blocks *b);
/* A committed datatype for payload bytes [off, off + len) of b, over
 * absolute addresses (receive with MPI_BOTTOM). Returns 0 or a code. */
int mx_direct_type(const struct mx_blocks *b, uint64_t off, uint64_t len, MPI_Datatype *type);
void mx_blocks_free(struct mx_blocks *b);
/* Where payload bytes [off, off + len) land when that is one run of b;
 * NULL when they span several. */
uint8_t *mx_direct_run(const struct mx_blocks *b, uint64_t off, uint64_t len);

/* Tensors under this many bytes share messages with their neighbours. */
#define MX_PIECE_MIN (64u << 10)
/*
 * The offsets in transfer ti's payload where its messages begin, in
 * order, into out (NULL: only counted), cut alike on every rank from the
 * checkpoint's tensors and max (cuts.c). Returns how many.
 */
size_t mx_cuts(const rl_ckpt *ck, const rl_transfer_info *ti, uint64_t max, uint64_t *out);

/* A batch's destinations faulted in by a helper thread (prefault.c). */
struct mx_pf_range {
	uintptr_t lo, hi;
};

struct mx_prefault {
	pthread_t th;
	int started;
	struct mx_pf_range *v;
	size_t n;
	atomic_int stop;
};

/* Starts faulting in where the copies of transfers t[0..n) (infos ti)
 * land, in that order; without memory or a thread, does nothing. */
void mx_prefault_start(struct mx_prefault *pf, const struct mx_load *L, const size_t *t,
		       const rl_transfer_info *ti, size_t n);
/* Stops the helper (where it is) and frees it. */
void mx_prefault_stop(struct mx_prefault *pf);

/*
 * Streaming loaders (pieces.c). Before planning, on every rank: whether
 * L->ld streams, and the ranks' least budget as the plan's batch bytes.
 * Returns 0 or this rank's error (the others learn it at the agreement).
 */
int mx_stream_begin(struct mx_load *L);
/* Copy c of a payload at src handed out as pieces (token 0). */
void mx_piece_copy(struct mx_load *L, const rl_copy_info *c, const uint8_t *src);

/* A whole load's own reads and transfers, run by the library's read-once
 * executor over the MPI transport (transport_mpi.c): 0, or the agreed
 * error (m->err set alike on every rank). */
int mx_transport_load(struct mx_load *L);

/* Runs transfer batch b (batch.c): 0, or the agreed error. */
int mx_batch(struct mx_load *L, uint64_t b);
/* The user's callback for a shard that transfers completed (batch.c). */
void mx_report(struct mx_load *L, size_t shard);

#endif /* MPI_MX_H */
