/*
 * xfer_pieces.h - a streaming loader's transfers handed to its piece
 * callback (api/xfer_pieces.c): the executor's destination sink when the
 * loader streams (RL_STAGING_STREAM) to a callback.
 */
#ifndef API_XFER_PIECES_H
#define API_XFER_PIECES_H

#include "../sink/host.h"

struct ld_xpieces {
	struct eng_sink sink;
	rl_loader *ld;              /* its piece callback */
	const struct pl_exec *ex;   /* the run's shards */
	uint64_t pack_len;          /* runs packed per piece: at most this many bytes */
	uint8_t *pack;              /* the packing buffer (grown for a long converted run) */
	uint64_t pack_cap;
	struct sink_host host;      /* packs (and converts) into it */
	int failed;                 /* the callback returned non-zero: no more calls */
};

/* The sink over ld's piece callback for the shards of ex (both outlive
 * it); ld_xpieces_free frees its packing buffer. */
const struct eng_sink *ld_xpieces_init(struct ld_xpieces *xp, rl_loader *ld,
				       const struct pl_exec *ex);
void ld_xpieces_free(struct ld_xpieces *xp);

#endif /* API_XFER_PIECES_H */
