/*
 * xfer_exec.h - the read-once executor (exec/xfer_exec.c): the transfers
 * of a plan, batch by batch, over a transport (an ops table the caller
 * gives: rl_transport_ops of ringload.h, mirrored here since nothing under
 * api/ includes ringload.h).
 *
 * For each batch of the cluster's list (the same on every process): every
 * process sets up its part and agrees that it could; the receivers post
 * their receives; the payloads this process roots are read by the engine
 * into one buffer (the transfers pass, exec/transfers.c, makes that
 * batch's plan; the executor runs it on a thread of its own), and each is
 * sent as soon as it is read, the transport's progress op (if any) called
 * meanwhile; a payload whose read failed is sent all the same (its
 * receivers' receives complete); the transport's wait completes
 * everything; each payload is copied into this process's shards through
 * the destination sink (its copy op: the rule of io_copy_runs; with the
 * operation of the shard's dtype conversion, if any); every process
 * agrees again, and only then is a shard whose last bytes came reported.
 * A failure anywhere is the same error on every process at the next
 * agreement, and nobody waits on a process that failed: what was posted
 * is answered, and nothing is posted after a failed agreement.
 */
#ifndef EXEC_XFER_EXEC_H
#define EXEC_XFER_EXEC_H

#include "../engine/engine.h"
#include "../planner/planner.h"

/* ringload.h's rl_transport_ops, less the version and size (checked by
 * the API), and its user pointer. */
struct ex_transport {
	int (*send)(void *user, int peer, uint64_t tag, const void *buf, size_t len);
	int (*recv)(void *user, int peer, uint64_t tag, void *buf, size_t len);
	int (*wait)(void *user);
	int (*agree)(void *user, int *status);
	int (*progress)(void *user);    /* may be NULL */
	void *user;
};

struct ex_xfer_exec {
	const struct pl_plan *p;        /* the process's plan, with transfers */
	const struct ex_transport *t;
	struct eng_opts eo;             /* how the batches are read */
	uint64_t chunk;                 /* the batches' requests: at most this */
	const struct eng_sink *dst;     /* the process's shards: received copies land
					 * (host staging, or a device through
					 * exec/xfer_dev.h: then asynchronous, its
					 * shard_done and finish used) */
	/* A host sink over a batch buffer of len bytes (one slot), valid
	 * until the next call or the end of the run. */
	const struct eng_sink *(*buffer_sink)(void *user, uint8_t *buf, uint64_t len);
	/* Each file a batch read for others: its path and checkpoint
	 * index (may be NULL); non-zero fails the batch (e set). */
	int (*on_file)(void *user, const char *path, uint32_t file, struct cm_err *e);
	void (*on_shard)(void *user, size_t shard);     /* may be NULL */
	void *user;
	/* Out: bytes the batches read, sent (once per receiver), received. */
	uint64_t read, sent, received;
};

/*
 * Every process's status agreed through t: returns 0 when every status is
 * 0, else the agreed code, with e naming this process's own failure (its
 * status, e already set) or saying another process failed.
 */
int ex_xfer_agree(const struct ex_transport *t, int status, const char *what,
		  struct cm_err *e);

/* Runs every batch of x->p (see above). Returns 0 or the agreed error (in e). */
int ex_xfer_execute(struct ex_xfer_exec *x, struct cm_err *e);

#endif /* EXEC_XFER_EXEC_H */
