/*
 * prefault.c - a batch's destinations faulted in beside the copies.
 *
 * The payloads a rank receives and those it copies out of its own reads
 * land in staging that nothing has touched yet: the first write of every
 * page allocates and zeroes it, and on this kind of VM that is most of a
 * load's CPU (docs/benchmarks.md). Independent loads fault their staging
 * in on every engine worker while reads are in flight; here the copies
 * (Open MPI's process_vm_readv, or memcpy) run on the one MPI thread, which
 * would zero every page itself, one after the other. So a helper thread
 * walks the batch's destinations in transfer order with
 * MADV_POPULATE_WRITE, which never changes page contents (safe while a
 * copy lands in the same pages), ahead of or beside the copies. Where the
 * kernel lacks it (before 5.14) the helper stops and the copies fault.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "mx.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define PF_PAGE 4096u
#define PF_STEP (16u << 20)     /* one madvise per this many bytes: stops promptly */

static void *walk(void *arg)
{
	struct mx_prefault *pf = arg;

	for (size_t i = 0; i < pf->n; i++)
		for (uintptr_t lo = pf->v[i].lo; lo < pf->v[i].hi; lo += PF_STEP) {
			uintptr_t hi = MX_MIN(lo + PF_STEP, pf->v[i].hi);

			/* Relaxed: a hint to stop early; nothing is published by it. */
			if (atomic_load_explicit(&pf->stop, memory_order_relaxed))
				return NULL;
			if (madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) < 0 && errno != EINTR &&
			    errno != EAGAIN)
				return NULL;
		}
	return NULL;
}

/* Appends [lo, hi), widened to pages, merging with the last range. */
static void add(struct mx_prefault *pf, uintptr_t lo, uintptr_t hi)
{
	lo &= ~(uintptr_t)(PF_PAGE - 1);
	hi = (hi + PF_PAGE - 1) & ~(uintptr_t)(PF_PAGE - 1);
	if (pf->n && lo >= pf->v[pf->n - 1].lo && lo <= pf->v[pf->n - 1].hi) {
		pf->v[pf->n - 1].hi = MX_MAX(pf->v[pf->n - 1].hi, hi);
		return;
	}
	pf->v[pf->n++] = (struct mx_pf_range){ lo, hi };
}

void mx_prefault_start(struct mx_prefault *pf, const struct mx_load *L, const size_t *t,
		       const rl_transfer_info *ti, size_t n)
{
	size_t cap = 0;

	memset(pf, 0, sizeof(*pf));
	atomic_init(&pf->stop, 0);
	for (size_t k = 0; k < n; k++)
		cap += ti[k].ncopies;
	if (!cap || !(pf->v = malloc(cap * sizeof(*pf->v))))
		return;         /* nothing to touch, or no memory: the copies fault */
	for (size_t k = 0; k < n; k++)
		for (size_t j = 0; j < ti[k].ncopies; j++) {
			rl_copy_info c;
			uintptr_t dst;

			if (rl_plan_transfer_copy(L->plan, t[k], j, &c))
				continue;       /* cannot happen (j < ncopies): touch nothing */
			dst = (uintptr_t)(L->staging[c.device] + c.dst);
			add(pf, dst, dst + c.count * c.len);
		}
	pf->started = !pthread_create(&pf->th, NULL, walk, pf);
}

void mx_prefault_stop(struct mx_prefault *pf)
{
	atomic_store_explicit(&pf->stop, 1, memory_order_relaxed);
	if (pf->started)
		pthread_join(pf->th, NULL);
	free(pf->v);
	memset(pf, 0, sizeof(*pf));
}
