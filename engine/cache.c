/*
 * cache.c - how much of a file's byte ranges the page cache already holds.
 *
 * A checkpoint that was just written, copied or read (by `cat`, by another
 * process of the same job) is in the page cache; O_DIRECT would read it
 * again from the device, at the device's speed, while a buffered read
 * copies it at memory speed on every worker. cachestat(2) (Linux 6.5)
 * answers for a whole range in one call; glibc and Debian 12's headers do
 * not know it yet, hence syscall() and local structures. Older kernels
 * answer ENOSYS: then mincore(2) over a read-only mapping of the range,
 * a window at a time (the mapping is never touched, so nothing is read).
 * overlayfs, the root of every container, keeps a file's pages on the
 * file below it: cachestat of the overlay file says 0 however hot it is
 * (0 against mincore's 3145728 bytes on a warm 3 MiB file, Linux 6.18),
 * while a mapping is the lower file's, so mincore sees them.
 */
#include <errno.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "eng_int.h"

#ifndef __NR_cachestat
#define __NR_cachestat 451 /* the same number on every architecture */
#endif

#define CACHE_PAGE 4096u
#define MINCORE_WINDOW (1ull << 30) /* bytes mapped at a time */
#define OVERLAYFS_MAGIC 0x794c7630    /* linux/magic.h's OVERLAYFS_SUPER_MAGIC */
#define TMPFS_MAGIC 0x01021994        /* linux/magic.h's TMPFS_MAGIC */

struct eng_cachestat_range {
	uint64_t off;
	uint64_t len;
};

struct eng_cachestat {
	uint64_t nr_cache;
	uint64_t nr_dirty;
	uint64_t nr_writeback;
	uint64_t nr_evicted;
	uint64_t nr_recently_evicted;
};

/* Pages of [off, off + len) in the cache by cachestat; -errno. */
static int64_t by_cachestat(int fd, uint64_t off, uint64_t len)
{
	struct eng_cachestat_range r = { off, len };
	struct eng_cachestat cs = { 0, 0, 0, 0, 0 };

	if (syscall(__NR_cachestat, fd, &r, &cs, 0) < 0)
		return -errno;
	return (int64_t)cs.nr_cache;
}

/* Pages of [off, off + len) in the cache by mincore; -errno. */
static int64_t by_mincore(int fd, uint64_t off, uint64_t len)
{
	uint64_t lo = cm_align_down(off, CACHE_PAGE), hi = cm_align_up(off + len, CACHE_PAGE);
	unsigned char *vec = cm_malloc(MINCORE_WINDOW / CACHE_PAGE);
	int64_t pages = 0;

	if (!vec)
		return -ENOMEM;
	for (uint64_t at = lo; at < hi; at += MINCORE_WINDOW) {
		size_t n = (size_t)CM_MIN(hi - at, MINCORE_WINDOW);
		void *p = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, (off_t)at);
		int ret;

		if (p == MAP_FAILED) {
			pages = -errno;
			break;
		}
		ret = mincore(p, n, vec);
		if (ret == 0)
			for (size_t i = 0; i < n / CACHE_PAGE; i++)
				pages += vec[i] & 1;
		else
			pages = -errno;
		munmap(p, n);
		if (pages < 0)
			break;
	}
	cm_free(vec);
	return pages;
}

/* cachestat cannot see this file's pages: they belong to another inode. */
static int cache_elsewhere(int fd)
{
	struct statfs sf;

	return fstatfs(fd, &sf) == 0 && sf.f_type == OVERLAYFS_MAGIC;
}

/* The page cache is this file's medium (tmpfs): every page the probe asks
 * about is resident, and a buffered read is a page lookup per page where
 * O_DIRECT (Linux 6.6) copies out of the same pages without it. */
int eng_cache_is_medium(int fd)
{
	struct statfs sf;

	return fstatfs(fd, &sf) == 0 && sf.f_type == TMPFS_MAGIC;
}

/*
 * Bytes of [off, off + len) of fd that the page cache holds, in whole
 * pages (the first and last page count whole); *mincore is set when
 * mincore answered: the kernel lacks cachestat, the file is on overlayfs,
 * or mincore_only asked for it. -errno when neither call works (then the
 * file is read as if cold).
 */
int64_t eng_cached_bytes(int fd, uint64_t off, uint64_t len, int mincore_only, int *mincore)
{
	int64_t pages = -ENOSYS;

	if (!len)
		return 0;
	if (!mincore_only)
		pages = by_cachestat(fd, off, len);
	/* EPERM: a seccomp filter that does not know the call */
	if (pages == -ENOSYS || pages == -EPERM || (pages == 0 && cache_elsewhere(fd))) {
		*mincore = 1;
		pages = by_mincore(fd, off, len);
	}
	return pages < 0 ? pages : pages * (int64_t)CACHE_PAGE;
}
