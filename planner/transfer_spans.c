/*
 * transfer_spans.c - how a root reads its payloads of one batch (planner.h,
 * struct pl_xread): spans of a file that touch after alignment merge, each
 * cut into requests of at most chunk bytes (as scatter.c cuts). The
 * statistics of every process count so (transfer_finish.c) and the batch
 * plans read so (exec/transfers.c): one rule, so that predicted and actual
 * bytes read agree.
 */
#include "planner.h"

void pl_xread_add(struct pl_xread *out, size_t *ns, uint32_t file, uint64_t off, uint64_t len,
		  const struct pl_align *align)
{
	uint64_t A = align[file].offset_align;
	uint64_t s = cm_align_down(off, A), e = cm_align_up(off + len, A);
	struct pl_xread *prev = *ns ? &out[*ns - 1] : NULL;

	if (prev && prev->file == file && s <= prev->end) {
		prev->end = CM_MAX(prev->end, e);
		prev->last = CM_MAX(prev->last, off + len);
		return;
	}
	out[(*ns)++] = (struct pl_xread){ file, s, e, off + len };
}

/* Largest request: chunk, on the file's alignment (as scatter.c cuts). */
uint64_t pl_xread_request_max(const struct pl_align *a, uint64_t chunk)
{
	uint64_t c = cm_align_down(CM_MIN(chunk, (uint64_t)UINT32_MAX), a->offset_align);

	return c < a->offset_align ? a->offset_align : c;
}

void pl_xread_cost(const struct pl_xread *r, const struct pl_align *a, uint64_t file_size,
		   uint64_t chunk, uint64_t *bytes, uint64_t *requests)
{
	uint64_t c = pl_xread_request_max(a, chunk);

	*requests = (r->end - r->start + c - 1) / c;
	*bytes = r->start < file_size ? CM_MIN(r->end, file_size) - r->start : 0;
}
