/* pool.c - bounce-buffer pools and library-allocated staging memory. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "eng_int.h"
#include "numa.h"
#include "pool.h"

#define PAGE 4096u
#define HUGE (2u << 20)

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

int eng_pool_create(struct eng_pool *p, unsigned nbuf, uint32_t bytes, int lock, int small)
{
	uint64_t len, rounded;

	memset(p, 0, sizeof(*p));
	if (!nbuf)
		return 0;
	/* In 64 bits: a size just under 4 GiB must not wrap to 0. */
	rounded = cm_align_up((uint64_t)bytes, PAGE);
	if (rounded > UINT32_MAX)
		return -EINVAL;
	bytes = (uint32_t)rounded;
	if (cm_mul64(nbuf, bytes, &len) || len > SIZE_MAX)
		return -ENOMEM;
	/*
	 * Huge pages: a 4 MiB read into 4 KiB pages is 1024 segments, which
	 * the block layer splits into many device requests (measured: bounce
	 * reads at half the speed of reads into THP staging); 2 MiB pages
	 * keep requests large. Populated now, by the worker that uses the
	 * pool (its node): registration pins the pages anyway.
	 */
	p->base = eng_staging_alloc(len);
	if (!p->base)
		return -ENOMEM;
#ifdef MADV_NOHUGEPAGE
	if (small)
		madvise(p->base, len, MADV_NOHUGEPAGE); /* advisory, as fio's malloc */
#endif
	if (madvise(p->base, len, MADV_POPULATE_WRITE) < 0)
		memset(p->base, 0, len);
	p->map_len = len;
	p->nbuf = nbuf;
	p->bytes = bytes;
	/* Locked so the pages stay put between reads; the caller says
	 * whether its share of RLIMIT_MEMLOCK allows it. */
	if (lock && mlock(p->base, len) == 0)
		p->locked = 1;
	return 0;
}

void eng_pool_destroy(struct eng_pool *p)
{
	eng_staging_free(p->base, p->map_len); /* also unlocks */
	memset(p, 0, sizeof(*p));
}

/* Sizes of 2 MiB and more are rounded up to whole huge pages so that
 * khugepaged-free THP faults can back all of them. */
static size_t staging_map_len(size_t len)
{
	if (len >= HUGE)
		return (size_t)cm_align_up(len, HUGE);
	return (size_t)cm_align_up(len ? len : 1, PAGE);
}

void *eng_staging_alloc(size_t len)
{
	size_t map_len, extra;
	uint8_t *p, *q;

	if (len > SIZE_MAX - 2 * (size_t)HUGE)
		return NULL;
	map_len = staging_map_len(len);
	if (map_len < HUGE) {
		p = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	/* Over-map by one huge page and trim, so the area starts on a 2 MiB
	 * boundary and every page of it can be a huge page. */
	p = mmap(NULL, map_len + HUGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	q = (uint8_t *)cm_align_up((uintptr_t)p, HUGE);
	if (q > p)
		munmap(p, (size_t)(q - p));
	extra = (size_t)(p + HUGE - q);
	if (extra)
		munmap(q + map_len, extra);
#ifdef MADV_HUGEPAGE
	madvise(q, map_len, MADV_HUGEPAGE); /* advisory: no THP is fine */
#endif
	/* Before anything touches it: the node of the caller's CPUs. */
	eng_numa_place(q, map_len, eng_numa_node("/sys"));
	return q;
}

void *eng_buffer_alloc(size_t len)
{
	size_t map_len;
	void *p;

	if (len > SIZE_MAX - 2 * (size_t)HUGE)
		return NULL;
	map_len = staging_map_len(len);
	p = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	eng_numa_place(p, map_len, eng_numa_node("/sys"));
	return p;
}

void eng_staging_free(void *p, size_t len)
{
	if (p)
		munmap(p, staging_map_len(len));
}
