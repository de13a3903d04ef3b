/*
 * common.h - the base layer under planner/, engine/ and api/: the one
 * allocation wrapper, overflow-checked size arithmetic and the per-handle
 * error record. Error codes and dtypes come from ringload_types.h, which
 * the public header re-exports: nothing below api/ includes ringload.h.
 */
#ifndef COMMON_COMMON_H
#define COMMON_COMMON_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "ringload_types.h"

/*
 * All allocation goes through these: jemalloc's mallocx/dallocx when the
 * host process has jemalloc (looked up at run time, never linked: the
 * library must stay dlopen-safe), libc malloc otherwise and in sanitizer
 * builds (so that ASan and LSan see every block). The host program's malloc
 * is never replaced. cm_free(NULL) is a no-op. cm_malloc(0) returns a
 * unique non-NULL pointer.
 */
void *cm_malloc(size_t n);
void *cm_calloc(size_t nmemb, size_t size);   /* checks nmemb*size overflow */
void *cm_realloc(void *p, size_t n);
void *cm_mallocarray(size_t nmemb, size_t size); /* NULL on overflow */
void *cm_reallocarray(void *p, size_t nmemb, size_t size);
char *cm_strdup(const char *s);

/*
 * Makes room for need elements of size bytes in the array *arr of capacity
 * *cap: by half again for appends (amortized O(1) without doubling the
 * largest arrays), or exactly need when that is more (a reservation).
 * Returns 0, or -ENOMEM with *arr and *cap unchanged.
 */
int cm_grow(void **arr, size_t *cap, size_t need, size_t size);
/*
 * cm_grow for arrays that may grow large (a plan's copies: 100+ MiB). From
 * 1 MiB on, the array lives in its own mapping grown with mremap: its pages
 * move instead of being copied into fresh ones (which the kernel must zero)
 * while the old ones are still resident. *cap may end above need (the
 * mapping's last page). Free only with cm_free_big(arr, cap, size), cap
 * being the array's capacity: it tells a mapping from a heap block.
 * Elements are 1 to 4096 bytes (-EINVAL otherwise). Sanitizer builds keep
 * every array on the heap.
 */
int cm_grow_big(void **arr, size_t *cap, size_t need, size_t size);
void cm_free_big(void *arr, size_t cap, size_t size);
char *cm_strndup(const char *s, size_t n);
void cm_free(void *p);

/*
 * Test hooks: the number of live blocks (allocated, not yet freed), and
 * fault injection: after cm_alloc_fail_after(n), the n-th following
 * allocation (0-based) and every later one fail until
 * cm_alloc_fail_after(-1). Counting is process-wide and thread-safe.
 */
long cm_alloc_live(void);
/* Bytes in live blocks (as the allocator rounds them), and their peak since
 * cm_alloc_peak_reset() (which sets it to the bytes live now). */
long cm_alloc_live_bytes(void);
long cm_alloc_peak_bytes(void);
void cm_alloc_peak_reset(void);
/* 1 when blocks come from the host's jemalloc, 0 for libc malloc. */
int cm_alloc_uses_jemalloc(void);
void cm_alloc_fail_after(long n);

/* Overflow-checked arithmetic: return 0 and store, or -1 on overflow. */
static inline int cm_mul64(uint64_t a, uint64_t b, uint64_t *out)
{
	return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

static inline int cm_add64(uint64_t a, uint64_t b, uint64_t *out)
{
	return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

/* Round x up/down to a multiple of a (a a power of two). */
static inline uint64_t cm_align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) & ~(a - 1);
}

static inline uint64_t cm_align_down(uint64_t x, uint64_t a)
{
	return x & ~(a - 1);
}

/* A parameter's valid range, in a table indexed by the parameter. */
struct cm_bounds {
	int64_t lo, hi;
};

/* Fills *lo and *hi (either may be NULL) from table[param] when first <=
 * param <= last. Returns 0, or -EINVAL for another param. */
static inline int cm_bounds_get(const struct cm_bounds *table, int first, int last,
				int param, int64_t *lo, int64_t *hi)
{
	if (param < first || param > last)
		return -EINVAL;
	if (lo)
		*lo = table[param].lo;
	if (hi)
		*hi = table[param].hi;
	return 0;
}

/* A handle's last error: a code and a one-line message, long enough for
 * two paths of PATH_MAX (4096) and the words around them; a longer one
 * ends with "..." where it was cut. */
#define CM_ERRMSG_MAX (2 * 4096 + 512)
struct cm_err {
	int code;
	char msg[CM_ERRMSG_MAX];
};

/* Records code and a printf-formatted message; returns code. */
int cm_err_set(struct cm_err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int cm_err_vset(struct cm_err *e, int code, const char *fmt, va_list ap);
/* Clears e (code 0, empty message). */
void cm_err_clear(struct cm_err *e);

/* CLOCK_MONOTONIC now, in nanoseconds and in seconds: the library's one
 * clock for durations. */
uint64_t cm_now_ns(void);
double cm_now_s(void);
/* ts: ms milliseconds from now on CLOCK_MONOTONIC (a condition variable
 * set to that clock waits until it). */
struct timespec;
void cm_deadline_ms(struct timespec *ts, uint32_t ms);

#define CM_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define CM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define CM_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif /* COMMON_COMMON_H */
