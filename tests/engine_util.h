/*
 * engine_util.h - hand-made plans for the engine tests: items (runs of a
 * file, contiguous or strided) become aligned, chunked reads with scatter
 * lists, and the expected staging bytes are computed independently by
 * slicing the file's bytes in memory.
 */
#ifndef TESTS_ENGINE_UTIL_H
#define TESTS_ENGINE_UTIL_H

#include <stdint.h>
#include <stddef.h>

#include "../engine/engine.h"
#include "../sink/host.h"

/* count runs of len bytes at off + k*stride of file, landing contiguously
 * at dst of device dev; one shard each. */
struct tu_item {
	uint32_t file;
	uint64_t off;
	uint32_t len, count, stride;
	uint32_t dev;
	uint64_t dst;
};

#define TU_MAX_FILES 4
#define TU_MAX_DEVS 4

struct tu_plan {
	/* inputs */
	size_t nfiles;
	char *paths[TU_MAX_FILES];
	uint64_t sizes[TU_MAX_FILES];
	uint8_t *content[TU_MAX_FILES];   /* the files' bytes, for expectations */
	uint32_t align;                   /* read alignment (1: unaligned reads) */
	uint32_t chunk;                   /* max read length, a multiple of align */
	int use_direct;                   /* mark eligible reads CM_READ_DIRECT */

	struct tu_item *items;
	size_t nitems;

	/* outputs */
	struct cm_read *reads;
	size_t nreads, cap_reads;
	struct cm_copy *copies;
	size_t ncopies, cap_copies;
	unsigned ndevs;
	uint64_t staging_bytes[TU_MAX_DEVS];
	uint8_t *staging[TU_MAX_DEVS];
	struct sink_host host;  /* the job's sink: staging[], staging_bytes[] */
	uint8_t *expect[TU_MAX_DEVS];
	uint64_t *shard_bytes;
};

/* Writes a file of size bytes of a seeded pattern; returns its bytes
 * (caller frees with free()) or NULL. */
uint8_t *tu_write_file(const char *path, uint64_t size, uint64_t seed);

/* Adds a file. Returns its index. */
uint32_t tu_add_file(struct tu_plan *p, const char *path, uint64_t size, uint64_t seed);

/* Adds an item; dst is chosen as the next free 4096-aligned offset of dev
 * (plus misalign bytes). */
void tu_add_item(struct tu_plan *p, uint32_t file, uint64_t off, uint32_t len,
		 uint32_t count, uint32_t stride, uint32_t dev, uint32_t misalign);

/* Builds reads/copies, allocates staging (zeroed) and expectations. */
int tu_build(struct tu_plan *p);

/* Fills an eng_job for p. */
void tu_job(struct tu_plan *p, struct eng_job *job);

/* 0 when every device's staging equals the expectation, else 1 + device,
 * and *at receives the first differing offset. */
int tu_compare(const struct tu_plan *p, uint64_t *at);

/* Shard s's bytes in staging equal the expectation. */
int tu_shard_ok(const struct tu_plan *p, size_t s);

/* Clears staging to a fill byte. */
void tu_clear(struct tu_plan *p, int fill);

void tu_free(struct tu_plan *p);

/* dir/name in one of a few rotating static buffers (valid for the next
 * three calls). */
char *tu_path(const char *dir, const char *name);

/* Drops path's pages from the page cache (after fsync: clean), or reads
 * it whole through the page cache as `cat` does. 0 or -1. */
int tu_evict(const char *path);
int tu_warm(const char *path);

/* A named test, and each of them run with one and with three workers on
 * backend (*workers set before each; names "BACKEND/Nw/NAME"). */
struct tu_test {
	const char *name;
	void (*fn)(void);
};
#define TU_TEST(fn) { #fn, fn }
void tu_run_workers(const struct tu_test *each, size_t n, int backend, unsigned *workers);

#endif
