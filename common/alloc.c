/*
 * alloc.c - the allocation wrapper.
 *
 * libringload.so must load with dlopen into any runtime (Python's ctypes,
 * PyTorch/JAX extensions, JNI). Debian's libjemalloc is built with
 * initial-exec TLS (DT_FLAGS STATIC_TLS): a library that needs it fails to
 * dlopen with "cannot allocate memory in static TLS block", and so does its
 * static _pic.a linked in. So the library does not link jemalloc at all.
 * When the host process already has jemalloc (our own CLI links it; so do
 * many servers), its non-standard mallocx/rallocx/dallocx are looked up
 * once, at the first allocation, and used: our blocks go to jemalloc
 * without touching the host's malloc. Otherwise libc's malloc serves.
 *
 * Either serves as well: the 100k-tensor x 256-device plan, the largest
 * allocation pattern of the library, peaks at 253 MiB and takes the same
 * time with both (perf/bench_plan; RINGLOAD_LIBC_MALLOC=1 forces libc),
 * and the hot path of a load allocates nothing. jemalloc is used when
 * present so that a host that chose it keeps every block in it.
 *
 * The choice is made once per process and never changes, so every block is
 * freed by the allocator that made it. Sanitizer builds define
 * RL_LIBC_MALLOC so ASan and LSan track every block.
 */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

/* jemalloc's non-standard API, resolved at run time (NULL: libc). */
#define MALLOCX_ZERO_FLAG 0x40      /* jemalloc.h's MALLOCX_ZERO (the header is not used) */
struct je_api {
	void *(*mallocx)(size_t size, int flags);
	void *(*rallocx)(void *p, size_t size, int flags);
	void (*dallocx)(void *p, int flags);
	size_t (*sallocx)(const void *p, int flags);
};
static struct je_api je;
static pthread_once_t je_once = PTHREAD_ONCE_INIT;

static void je_resolve(void)
{
#ifndef RL_LIBC_MALLOC
	struct je_api a;

	if (getenv("RINGLOAD_LIBC_MALLOC"))
		return;
	a.mallocx = (void *(*)(size_t, int))dlsym(RTLD_DEFAULT, "mallocx");
	a.rallocx = (void *(*)(void *, size_t, int))dlsym(RTLD_DEFAULT, "rallocx");
	a.dallocx = (void (*)(void *, int))dlsym(RTLD_DEFAULT, "dallocx");
	a.sallocx = (size_t (*)(const void *, int))dlsym(RTLD_DEFAULT, "sallocx");
	/* All four from one allocator, or none. */
	if (a.mallocx && a.rallocx && a.dallocx && a.sallocx)
		je = a;
#endif
}

static inline const struct je_api *je_api(void)
{
	pthread_once(&je_once, je_resolve);
	return &je;
}

int cm_alloc_uses_jemalloc(void)
{
	return je_api()->mallocx != NULL;
}

/* Relaxed: plain counters read by tests after the threads joined. */
static atomic_long live_blocks;
static atomic_long fail_countdown = -1;
/* Relaxed too: byte counts for tests and measurements; the peak may miss
 * a simultaneous rise of another thread, never one of its own thread. */
static atomic_long live_bytes, peak_bytes;

/* The usable size of block p, from the allocator that made it. */
static size_t block_size(void *p)
{
	return je.sallocx ? je.sallocx(p, 0) : malloc_usable_size(p);
}

static void count_bytes(long delta)
{
	long now = atomic_fetch_add_explicit(&live_bytes, delta, memory_order_relaxed) + delta;
	long peak = atomic_load_explicit(&peak_bytes, memory_order_relaxed);

	while (now > peak && !atomic_compare_exchange_weak_explicit(&peak_bytes, &peak, now,
								 memory_order_relaxed,
								 memory_order_relaxed))
		;
}

long cm_alloc_live_bytes(void)
{
	return atomic_load_explicit(&live_bytes, memory_order_relaxed);
}

long cm_alloc_peak_bytes(void)
{
	return atomic_load_explicit(&peak_bytes, memory_order_relaxed);
}

void cm_alloc_peak_reset(void)
{
	atomic_store_explicit(&peak_bytes, cm_alloc_live_bytes(), memory_order_relaxed);
}

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

void cm_alloc_fail_after(long n)
{
	atomic_store_explicit(&fail_countdown, n, memory_order_relaxed);
}

long cm_alloc_live(void)
{
	return atomic_load_explicit(&live_blocks, memory_order_relaxed);
}

static void *raw_alloc(size_t n)
{
	const struct je_api *a = je_api();

	if (n == 0)
		n = 1;
	return a->mallocx ? a->mallocx(n, 0) : malloc(n);
}

/* Counts a new block p (NULL: none). */
static void *track(void *p)
{
	if (p) {
		atomic_fetch_add_explicit(&live_blocks, 1, memory_order_relaxed);
		count_bytes((long)block_size(p));
	}
	return p;
}

void *cm_malloc(size_t n)
{
	if (should_fail())
		return NULL;
	return track(raw_alloc(n));
}

void *cm_calloc(size_t nmemb, size_t size)
{
	const struct je_api *a = je_api();
	size_t n;

	if (__builtin_mul_overflow(nmemb, size, &n) || should_fail())
		return NULL;
	/* The allocator zeroes: fresh pages come zeroed from the kernel and
	 * are not written again (a plan's 77 MiB of shards were memset). */
	return track(a->mallocx ? a->mallocx(n ? n : 1, MALLOCX_ZERO_FLAG) : calloc(n ? n : 1, 1));
}

void *cm_mallocarray(size_t nmemb, size_t size)
{
	size_t n;

	if (__builtin_mul_overflow(nmemb, size, &n))
		return NULL;
	return cm_malloc(n);
}

void *cm_realloc(void *p, size_t n)
{
	size_t old;
	void *q;

	if (!p)
		return cm_malloc(n);
	if (should_fail())
		return NULL;
	if (n == 0)
		n = 1;
	old = block_size(p);
	q = je_api()->rallocx ? je_api()->rallocx(p, n, 0) : realloc(p, n);
	if (q)
		count_bytes((long)block_size(q) - (long)old);
	return q;
}

void *cm_reallocarray(void *p, size_t nmemb, size_t size)
{
	size_t n;

	if (__builtin_mul_overflow(nmemb, size, &n))
		return NULL;
	return cm_realloc(p, n);
}

/* The capacity after growing from cap to hold need: by half again for
 * appends (amortized O(1)); exactly need for a reservation, so the largest
 * arrays are not overshot by half. */
static size_t grow_step(size_t cap, size_t need)
{
	size_t n = cap > SIZE_MAX / 3 ? need : cap + cap / 2;

	return CM_MAX(CM_MAX(n, need), (size_t)4);
}

int cm_grow(void **arr, size_t *cap, size_t need, size_t size)
{
	size_t n;
	void *p;

	if (need <= *cap)
		return 0;
	n = grow_step(*cap, need);
	p = cm_reallocarray(*arr, n, size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = n;
	return 0;
}

/*
 * Arrays of at least this many bytes grown by cm_grow_big() live in their own
 * anonymous mapping. Below it a mapping would waste most of its page.
 */
#define BIG_MIN ((size_t)1 << 20)

static int is_big(size_t bytes)
{
#ifdef RL_LIBC_MALLOC
	(void)bytes;
	return 0;       /* sanitizer builds: ordinary blocks, so ASan checks bounds */
#else
	return bytes >= BIG_MIN;
#endif
}

static size_t page_up(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return n > SIZE_MAX - pg ? 0 : (n + pg - 1) / pg * pg;
}

/* The array moves from a heap block of old bytes (or none) into a new
 * mapping of bytes; returns it or NULL. */
static void *big_map(void *arr, size_t old, size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	/* No MADV_HUGEPAGE: it cut the page faults of a 100k-tensor plan by a
	 * third but raised its peak by 5 MiB (2 MiB steps), saved no
	 * measurable time, and may compact memory on a fault
	 * (docs/benchmarks.md). */
	atomic_fetch_add_explicit(&live_blocks, 1, memory_order_relaxed);
	count_bytes((long)bytes);
	if (arr) {
		memcpy(p, arr, old);
		cm_free(arr);
	}
	return p;
}

int cm_grow_big(void **arr, size_t *cap, size_t need, size_t size)
{
	size_t n, bytes, old = *cap * size;
	void *p;

	/* elements of at most a page (Linux's least page size): then the
	 * mapping's length is page_up(cap * size), which cm_free_big and
	 * mremap rebuild from cap alone */
	if (!size || size > 4096)
		return -EINVAL;
	if (need <= *cap)
		return 0;
	n = grow_step(*cap, need);
	if (__builtin_mul_overflow(n, size, &bytes))
		return -ENOMEM;
	if (!is_big(bytes)) {
		if (!(p = cm_reallocarray(*arr, n, size)))
			return -ENOMEM;
		*arr = p;
		*cap = n;
		return 0;
	}
	if (!(bytes = page_up(bytes)) || should_fail())
		return -ENOMEM;
	if (!is_big(old)) {
		p = big_map(*arr, old, bytes);
	} else {
		/* The pages move with the mapping: never copied, never faulted
		 * again, and old and new never both resident. */
		p = mremap(*arr, page_up(old), bytes, MREMAP_MAYMOVE);
		if (p == MAP_FAILED)
			p = NULL;
		else
			count_bytes((long)(bytes - page_up(old)));
	}
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = bytes / size;    /* the whole mapping: cap * size stays big */
	return 0;
}

void cm_free_big(void *arr, size_t cap, size_t size)
{
	size_t bytes = cap * size;

	if (!arr)
		return;
	if (!is_big(bytes)) {
		cm_free(arr);
		return;
	}
	atomic_fetch_sub_explicit(&live_blocks, 1, memory_order_relaxed);
	count_bytes(-(long)page_up(bytes));
	munmap(arr, page_up(bytes));
}

char *cm_strndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *d = cm_malloc(len + 1);

	if (d) {
		memcpy(d, s, len);
		d[len] = '\0';
	}
	return d;
}

char *cm_strdup(const char *s)
{
	return cm_strndup(s, strlen(s));
}

void cm_free(void *p)
{
	if (!p)
		return;
	atomic_fetch_sub_explicit(&live_blocks, 1, memory_order_relaxed);
	count_bytes(-(long)block_size(p));
	if (je_api()->dallocx)
		je_api()->dallocx(p, 0);
	else
		free(p);
}
