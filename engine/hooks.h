/*
 * hooks.h - the engine's test hooks (engine/hooks.c): compiled only with
 * -DRL_TEST_HOOKS, into the test archive the test programs link; the
 * release library has none of them and its submit paths check nothing
 * (make check: hooks.py).
 */
#ifndef ENGINE_HOOKS_H
#define ENGINE_HOOKS_H

#include "engine_types.h"

#ifdef RL_TEST_HOOKS
/*
 * Test hook: wraps the backend of the next runs so that the nth read
 * submission of the run (0-based, all workers together, retries included)
 * fails with EIO (or the errno of eng_set_fault_errno), comes back short,
 * or fails with EAGAIN; ENG_FAULT_SETUP makes the wrapped backend's setup
 * fail with EPERM (as when io_uring is disabled), so auto falls back.
 * ENG_FAULT_HARD: the commit after the nth submission hands every queued
 * read to the kernel and then fails with ENOMEM, and so does every later
 * reap of that worker, so the run ends on a hard error with reads still in
 * the kernel. ENG_FAULT_NONE removes the wrapper. Applies to backend
 * `backend` only (ENG_AUTO: every backend).
 */
enum eng_fault {
	ENG_FAULT_NONE = 0,
	ENG_FAULT_EIO,
	ENG_FAULT_SHORT,
	ENG_FAULT_EAGAIN,
	ENG_FAULT_SETUP,
	ENG_FAULT_HARD,
	ENG_FAULT_EAGAIN_ALL,   /* the nth submission and every later one: EAGAIN */
	ENG_FAULT_SHORT_ODD,    /* the nth comes back short at an odd length */
};
void eng_set_fault(struct eng *eng, int backend, int kind, uint64_t nth);
/* Test hook: the errno ENG_FAULT_EIO fails the read with (default EIO). */
void eng_set_fault_errno(struct eng *eng, int err);

/*
 * Test hook: the next n io_uring_submit calls of the io_uring backend
 * (all workers together) return -EAGAIN without submitting, as when the
 * kernel is short of request memory.
 */
void eng_set_uring_submit_eagain(struct eng *eng, uint32_t n);

/* Test hook: 1 measures page-cache residency with mincore only, as on a
 * kernel without cachestat(2); 0 (default) tries cachestat first. */
void eng_set_cache_probe(struct eng *eng, int mincore_only);

/*
 * Test hook: io_uring setup behaves as if the kernel refused the ring with
 * errno err (ENOMEM: ring memory charged to RLIMIT_MEMLOCK before 5.12);
 * 0 removes it.
 */
void eng_set_uring_setup_err(struct eng *eng, int err);

/*
 * Test hook: the next n io_submit calls of the libaio backend are refused
 * with EAGAIN, as when the kernel's aio request limit is reached
 * (UINT32_MAX: every call).
 */
void eng_set_aio_refuse(struct eng *eng, uint32_t n);
#endif /* RL_TEST_HOOKS */

#endif /* ENGINE_HOOKS_H */
