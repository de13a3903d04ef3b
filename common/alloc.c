/*
 * alloc.c - the allocation wrapper.
 *
 * jemalloc's non-standard entry points (mallocx/rallocx/dallocx) keep our
 * blocks in jemalloc without interposing malloc for the host program: the
 * library never calls the standard names, so whichever malloc the program
 * uses stays its own. Sanitizer builds define RL_LIBC_MALLOC so ASan and
 * LSan track every block.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "rl_common.h"

#ifndef RL_LIBC_MALLOC
#include <jemalloc/jemalloc.h>
#endif

/* Relaxed: plain counters read by tests after the threads joined. */
static atomic_long live_blocks;
static atomic_long fail_countdown = -1;

static int should_fail(void)
{
	long n = atomic_load_explicit(&fail_countdown, memory_order_relaxed);

	if (n < 0)
		return 0;
	if (n == 0)
		return 1;
	/* Several threads may race here; the countdown only has to be
	 * deterministic in single-threaded fault tests. */
	atomic_fetch_sub_explicit(&fail_countdown, 1, memory_order_relaxed);
	return 0;
}

void rl_alloc_fail_after(long n)
{
	atomic_store_explicit(&fail_countdown, n, memory_order_relaxed);
}

long rl_alloc_live(void)
{
	return atomic_load_explicit(&live_blocks, memory_order_relaxed);
}

static void *raw_alloc(size_t n)
{
	if (n == 0)
		n = 1;
#ifdef RL_LIBC_MALLOC
	return malloc(n);
#else
	return mallocx(n, 0);
#endif
}

void *rl_malloc(size_t n)
{
	void *p;

	if (should_fail())
		return NULL;
	p = raw_alloc(n);
	if (p)
		atomic_fetch_add_explicit(&live_blocks, 1, memory_order_relaxed);
	return p;
}

void *rl_calloc(size_t nmemb, size_t size)
{
	size_t n;
	void *p;

	if (__builtin_mul_overflow(nmemb, size, &n))
		return NULL;
	p = rl_malloc(n);
	if (p)
		memset(p, 0, n);
	return p;
}

void *rl_mallocarray(size_t nmemb, size_t size)
{
	size_t n;

	if (__builtin_mul_overflow(nmemb, size, &n))
		return NULL;
	return rl_malloc(n);
}

void *rl_realloc(void *p, size_t n)
{
	void *q;

	if (!p)
		return rl_malloc(n);
	if (should_fail())
		return NULL;
	if (n == 0)
		n = 1;
#ifdef RL_LIBC_MALLOC
	q = realloc(p, n);
#else
	q = rallocx(p, n, 0);
#endif
	return q;
}

void *rl_reallocarray(void *p, size_t nmemb, size_t size)
{
	size_t n;

	if (__builtin_mul_overflow(nmemb, size, &n))
		return NULL;
	return rl_realloc(p, n);
}

int rl_grow(void **arr, size_t *cap, size_t need, size_t size)
{
	size_t n;
	void *p;

	if (need <= *cap)
		return 0;
	/* By half again for appends (amortized O(1)); exactly need for a
	 * reservation, so the largest arrays are not overshot by half. */
	n = *cap > SIZE_MAX / 3 ? need : *cap + *cap / 2;
	if (n < need)
		n = need;
	if (n < 4)
		n = 4;
	p = rl_reallocarray(*arr, n, size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = n;
	return 0;
}

char *rl_strndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *d = rl_malloc(len + 1);

	if (d) {
		memcpy(d, s, len);
		d[len] = '\0';
	}
	return d;
}

char *rl_strdup(const char *s)
{
	return rl_strndup(s, strlen(s));
}

void rl_free(void *p)
{
	if (!p)
		return;
	atomic_fetch_sub_explicit(&live_blocks, 1, memory_order_relaxed);
#ifdef RL_LIBC_MALLOC
	free(p);
#else
	dallocx(p, 0);
#endif
}
