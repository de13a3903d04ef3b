/*
 * host.c - the host sink: copies land in host memory, and each worker
 * faults in the destinations its reads will fill, just before it submits
 * them.
 *
 * A read straight into fresh anonymous memory makes the kernel allocate
 * and zero its pages inside the submitting thread's io_uring_enter (or
 * io_submit, or pread): most of a whole-checkpoint load's CPU was
 * clear_page (docs/engine.md, "Why workers"). One helper thread took that
 * off the ring's owner, but then it was the ceiling: one core faults fresh
 * memory in only so fast. So every worker touches the destinations of the
 * reads it claims (MADV_POPULATE_WRITE, 2 MiB at a time on huge pages)
 * while its earlier reads are in flight: the zeroing scales with the
 * workers, and the reads and copies then find their pages present.
 * MADV_POPULATE_WRITE never changes page contents, so it is safe where a
 * neighbour's read lands in the same page; where the kernel lacks it
 * (before 5.14) or the memory refuses it (special mappings a caller
 * supplied), pre-faulting stops for the run and the reads fault as they go.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "convert.h"
#include "host.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define PF_PAGE 4096u
#define PF_BATCH (16u << 20) /* one madvise per this many bytes, at most */

static void populate(struct sink_host *h, uintptr_t lo, uintptr_t hi)
{
	/* Relaxed: a flag that only ever goes from 0 to 1, read as a hint. */
	if (atomic_load_explicit(&h->prefault_off, memory_order_relaxed))
		return;
	if (madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) < 0 &&
	    errno != EINTR && errno != EAGAIN) {
		if (!atomic_exchange_explicit(&h->prefault_off, 1, memory_order_relaxed))
			h->prefault_errno = errno;
	}
}

static void host_prepare_flush(void *state, unsigned worker)
{
	struct sink_host *h = state;
	struct sink_host_pf *pf;

	if (worker >= ENG_MAX_WORKERS)
		return;
	pf = h->pf + worker;
	if (pf->hi)
		populate(h, pf->lo, pf->hi);
	pf->lo = pf->hi = 0;
}

/* Adds the destination of c (bytes of it) to the worker's pending range,
 * or populates the pending one first. */
static void host_prepare(void *state, unsigned worker, const struct cm_copy *c, uint64_t bytes)
{
	struct sink_host *h = state;
	struct sink_host_pf *pf;
	uintptr_t a, b;

	if (worker >= ENG_MAX_WORKERS || !h->areas[c->dev])
		return;
	pf = h->pf + worker;
	a = (uintptr_t)(h->areas[c->dev] + c->dst);
	b = a + bytes;
	a &= ~(uintptr_t)(PF_PAGE - 1);
	b = (b + PF_PAGE - 1) & ~(uintptr_t)(PF_PAGE - 1);
	/* Coalesce neighbours into one call of up to PF_BATCH. */
	if (pf->hi && a <= pf->hi && a >= pf->lo && b - pf->lo <= PF_BATCH) {
		pf->hi = CM_MAX(pf->hi, b);
		return;
	}
	host_prepare_flush(state, worker);
	pf->lo = a;
	pf->hi = b;
}

static int memcpy_run(void *arg, uint64_t src, uint64_t dst, uint64_t len)
{
	const uint8_t *const *p = arg;

	memcpy((uint8_t *)p[1] + dst, p[0] + src, len);
	return 0;
}

/* A converting copy: run k's len / isize elements land converted at
 * k * out of the destination. Contiguous runs convert as one. */
static int convert_runs(const struct cm_copy *c, const uint8_t *src, uint8_t *dst)
{
	int from = cm_op_from(c->op), to = cm_op_to(c->op);
	uint64_t n = c->len / cm_op_isize(c->op), out = cm_copy_out(c, c->len);

	if (c->count == 1 || c->src_stride == c->len) {
		sk_convert(from, to, dst, src, n * c->count);
		return 0;
	}
	for (uint64_t k = 0; k < c->count; k++)
		sk_convert(from, to, dst + k * out, src + k * c->src_stride, n);
	return 0;
}

static int host_copy(void *state, unsigned worker, const struct cm_copy *c, const uint8_t *src,
		     struct cm_err *e)
{
	struct sink_host *h = state;
	const uint8_t *p[2] = { src + c->src, h->areas[c->dev] + c->dst };

	if (c->op != CM_OP_PLAIN) {
		if (!cm_op_ok(c->op) || c->len % cm_op_isize(c->op))
			return cm_err_set(e, RL_E_DTYPE, "host sink: no operation %u of %u-byte runs",
					  c->op, c->len);
		return convert_runs(c, p[0], h->areas[c->dev] + c->dst);
	}
	return io_copy_runs(c->len, c->count, c->src_stride, memcpy_run, p);
}

/* Host memory the kernel may read into: a read lands where its copy goes
 * (never one that converts: its bytes are not the read's). */
static uint8_t *host_direct(void *state, const struct cm_copy *c, uint64_t len)
{
	struct sink_host *h = state;

	if (c->op != CM_OP_PLAIN)
		return NULL;
	return h->areas[c->dev] + c->dst;
}

static uint64_t host_capacity(void *state, uint32_t dev)
{
	struct sink_host *h = state;

	if (!h->areas[dev])
		return 0;
	return h->bytes ? h->bytes[dev] : UINT64_MAX;
}

static const struct eng_sink_ops host_ops = {
	.version = ENG_SINK_V1,
	.size = sizeof(struct eng_sink_ops),
	.name = "host",
	.copy = host_copy,
	.prepare = host_prepare,
	.prepare_flush = host_prepare_flush,
	.direct = host_direct,
	.capacity = host_capacity,
};

const struct eng_sink *sink_host_init(struct sink_host *h, unsigned ndevs,
				      uint8_t *const *areas, const uint64_t *bytes)
{
	memset(h->pf, 0, sizeof(h->pf));
	h->areas = areas;
	h->bytes = bytes;
	h->prefault_errno = 0;
	atomic_init(&h->prefault_off, 0);
	h->sink.ops = &host_ops;
	h->sink.state = h;
	h->sink.ndevs = areas ? ndevs : 0;
	return &h->sink;
}

void sink_host_note(const struct sink_host *h, struct eng_stats *st)
{
	char *text = st->fallbacks;
	size_t len = sizeof(st->fallbacks), n = strlen(text);

	/* Relaxed: read after the run, whose join ordered the write. */
	if (!atomic_load_explicit(&h->prefault_off, memory_order_relaxed))
		return;
	st->fallback_flags |= ENG_FALLBACK_NOT_PREFAULTED;
	if (n + 1 >= len)
		return;
	snprintf(text + n, len - n, "%sstaging not pre-faulted (%s)", n ? "; " : "",
		 strerror(h->prefault_errno));
}
