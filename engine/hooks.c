/*
 * hooks.c - the engine's test hooks: what a test asks of the next runs
 * (a fault injected by be_fault.c, refusals from the kernel, the
 * page-cache probe's method) and the checks the backends make for them.
 * Compiled only with -DRL_TEST_HOOKS, into the test archive (Makefile);
 * the release library has none of it (liburing keeps its test seams
 * under test/ the same way).
 */
#include <errno.h>

#include "eng_int.h"
#include "hooks.h"

void eng_set_fault(struct eng *eng, int backend, int kind, uint64_t nth)
{
	eng->hooks.fault_backend = backend;
	eng->hooks.fault_kind = kind;
	eng->hooks.fault_nth = nth;
}

void eng_set_fault_errno(struct eng *eng, int err)
{
	eng->hooks.fault_errno = err > 0 ? err : EIO;
}

void eng_set_aio_refuse(struct eng *eng, uint32_t n)
{
	eng->hooks.aio_refuse = n;
}

void eng_set_uring_submit_eagain(struct eng *eng, uint32_t n)
{
	eng->hooks.uring_eagain = n;
}

void eng_set_uring_setup_err(struct eng *eng, int err)
{
	eng->hooks.uring_setup_err = err;
}

void eng_set_cache_probe(struct eng *eng, int mincore_only)
{
	eng->hooks.mincore_only = mincore_only != 0;
}

void eng_hooks_start(struct eng_run *rc, const struct eng *eng)
{
	struct eng_run_hooks *h = &rc->cx.hooks;

	h->set = eng->hooks;
	if (!h->set.fault_errno)
		h->set.fault_errno = EIO;
	atomic_init(&h->fault_seq, 0);
	atomic_init(&h->aio_refuse, eng->hooks.aio_refuse);
	atomic_init(&h->uring_eagain, eng->hooks.uring_eagain);
}

const struct be_ops *eng_hook_fault_ops(const struct eng_run *rc, int b)
{
	const struct eng_hooks *h = &rc->cx.hooks.set;

	if (h->fault_kind == ENG_FAULT_NONE)
		return NULL;
	return h->fault_backend == ENG_AUTO || h->fault_backend == b ? &eng_fault_ops : NULL;
}

/* Takes one refusal from count; 1 when there was one (UINT32_MAX never
 * runs out). */
static int take(atomic_uint *count)
{
	/* Relaxed: a count to hand out, guarding nothing else. */
	unsigned n = atomic_load_explicit(count, memory_order_relaxed);

	while (n && n != UINT32_MAX &&
	       !atomic_compare_exchange_weak_explicit(count, &n, n - 1, memory_order_relaxed,
						      memory_order_relaxed))
		;
	return n != 0;
}

int eng_hook_uring_eagain(struct eng_run *rc)
{
	return take(&rc->cx.hooks.uring_eagain);
}

int eng_hook_aio_refuse(struct eng_run *rc)
{
	return take(&rc->cx.hooks.aio_refuse);
}

int eng_hook_uring_setup_err(const struct eng_run *rc)
{
	return rc->cx.hooks.set.uring_setup_err;
}

int eng_hook_mincore_only(const struct eng_run *rc)
{
	return rc->cx.hooks.set.mincore_only;
}
