/*
 * threads.c - a seam for thread creation in the test programs: they are
 * linked with -Wl,--wrap=pthread_create (Makefile), so every
 * pthread_create of the library and the tests comes here first. After
 * th_thread_fail_after(n), the n-th following creation (0-based) and
 * every later one fail with EAGAIN, as under a process or cgroup limit
 * on tasks (RLIMIT_NPROC, pids.max), until th_thread_fail_after(-1).
 * It returns how many were refused since the previous call. Counting is
 * process-wide and thread-safe.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "harness.h"

int __real_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
			  void *arg);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
			  void *arg);

static atomic_long fail_in = -1;        /* creations left before failing; -1: never */
static atomic_long refused;

long th_thread_fail_after(long n)
{
	atomic_store(&fail_in, n);
	return atomic_exchange(&refused, 0);
}

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
			  void *arg)
{
	long left = atomic_load(&fail_in);

	/* Counts down to 0 and stays there: every later creation fails. */
	while (left > 0 && !atomic_compare_exchange_weak(&fail_in, &left, left - 1))
		;
	if (left == 0) {
		atomic_fetch_add(&refused, 1);
		return EAGAIN;
	}
	return __real_pthread_create(t, attr, fn, arg);
}
