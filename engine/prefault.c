/*
 * prefault.c - each worker faults in the staging its reads will fill,
 * just before it submits them.
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
#include <string.h>
#include <sys/mman.h>

#include "eng_int.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define PF_PAGE 4096u
#define PF_BATCH (16u << 20) /* one madvise per this many bytes, at most */

static void populate(struct eng_worker *w, uintptr_t lo, uintptr_t hi)
{
	struct eng_run *rc = w->run;
	uint64_t t0;

	/* Relaxed: a flag that only ever goes from 0 to 1, read as a hint. */
	if (atomic_load_explicit(&rc->prefault_off, memory_order_relaxed))
		return;
	t0 = rl_now_ns();
	if (madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) < 0 &&
	    errno != EINTR && errno != EAGAIN) {
		if (!atomic_exchange_explicit(&rc->prefault_off, 1, memory_order_relaxed))
			eng_note(rc, ENG_FALLBACK_NOT_PREFAULTED, "staging not pre-faulted (%s)", strerror(errno));
	}
	w->prepare_ns += rl_now_ns() - t0;
}

/* Adds [a, b) to the pending range, or populates the pending one first. */
static void add_range(struct eng_worker *w, uintptr_t a, uintptr_t b)
{
	struct eng_prefault *pf = &w->pf;

	a &= ~(uintptr_t)(PF_PAGE - 1);
	b = (b + PF_PAGE - 1) & ~(uintptr_t)(PF_PAGE - 1);
	/* Coalesce neighbours into one call of up to PF_BATCH. */
	if (pf->hi && a <= pf->hi && a >= pf->lo && b - pf->lo <= PF_BATCH) {
		pf->hi = RL_MAX(pf->hi, b);
		return;
	}
	eng_prefault_flush(w);
	pf->lo = a;
	pf->hi = b;
}

void eng_prefault_add(struct eng_worker *w, const struct rl_read *r)
{
	const struct eng_job *job = w->run->job;
	const struct rl_copy *c = job->copies + r->first_copy;

	/* Every destination: direct reads land there from the kernel,
	 * bounce copies from this worker. */
	for (uint32_t k = 0; k < r->ncopies; k++, c++) {
		uint64_t n = (r->flags & RL_READ_DIRECT) ? r->len : (uint64_t)c->len * c->count;
		uintptr_t a;

		if (!n)
			continue;
		a = (uintptr_t)(job->staging[c->dev] + c->dst);
		add_range(w, a, a + n);
	}
}

void eng_prefault_flush(struct eng_worker *w)
{
	if (w->pf.hi)
		populate(w, w->pf.lo, w->pf.hi);
	w->pf.lo = w->pf.hi = 0;
}
