/* engine_util.c - see engine_util.h. Test code: plain malloc is fine. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_util.h"
#include "harness.h"

uint8_t *tu_write_file(const char *path, uint64_t size, uint64_t seed)
{
	uint8_t *b = malloc(size ? size : 1);
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
	int fd;

	if (!b)
		return NULL;
	for (uint64_t i = 0; i < size; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (uint8_t)(x >> 24);
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || (size && write(fd, b, size) != (ssize_t)size)) {
		if (fd >= 0)
			close(fd);
		free(b);
		return NULL;
	}
	fsync(fd);
	close(fd);
	return b;
}

uint32_t tu_add_file(struct tu_plan *p, const char *path, uint64_t size, uint64_t seed)
{
	uint32_t i = (uint32_t)p->nfiles++;

	p->paths[i] = strdup(path);
	p->sizes[i] = size;
	p->content[i] = tu_write_file(path, size, seed);
	return i;
}

void tu_add_item(struct tu_plan *p, uint32_t file, uint64_t off, uint32_t len,
		 uint32_t count, uint32_t stride, uint32_t dev, uint32_t misalign)
{
	struct tu_item *it;

	p->items = realloc(p->items, (p->nitems + 1) * sizeof(*p->items));
	it = p->items + p->nitems++;
	it->file = file;
	it->off = off;
	it->len = len;
	it->count = count;
	it->stride = count > 1 ? stride : len;
	it->dev = dev;
	it->dst = cm_align_up(p->staging_bytes[dev], 4096) + misalign;
	p->staging_bytes[dev] = it->dst + (uint64_t)len * count + 4096;
	if (dev + 1 > p->ndevs)
		p->ndevs = dev + 1;
}

static struct cm_read *add_read(struct tu_plan *p, uint32_t file, uint64_t off, uint32_t len)
{
	struct cm_read *r;
	uint64_t end = CM_MIN(off + len, p->sizes[file]);

	if (p->nreads == p->cap_reads) {
		p->cap_reads = p->cap_reads ? 2 * p->cap_reads : 64;
		p->reads = realloc(p->reads, p->cap_reads * sizeof(*p->reads));
	}
	r = p->reads + p->nreads++;
	memset(r, 0, sizeof(*r));
	r->file = file;
	r->off = off;
	r->len = len;
	r->min_len = (uint32_t)(end - off);
	r->first_copy = p->ncopies;
	return r;
}

static void add_copy(struct tu_plan *p, struct cm_read *r, uint32_t src, uint32_t len,
		     uint32_t count, uint32_t stride, uint32_t dev, uint64_t dst, uint32_t shard)
{
	struct cm_copy *c;

	if (p->ncopies == p->cap_copies) {
		p->cap_copies = p->cap_copies ? 2 * p->cap_copies : 64;
		p->copies = realloc(p->copies, p->cap_copies * sizeof(*p->copies));
	}
	c = p->copies + p->ncopies++;
	*c = (struct cm_copy){ .src = src, .len = len, .count = count, .src_stride = stride,
			       .dev = dev, .dst = dst, .shard = shard };
	r->ncopies++;
}

/* One item: a single read with one strided copy when its aligned span fits
 * a chunk, else chunks with one copy per run piece; aligned contiguous
 * middles read straight into staging when asked. */
static void build_item(struct tu_plan *p, const struct tu_item *it, uint32_t shard)
{
	uint64_t a = p->align;
	uint64_t span_end = it->off + (uint64_t)(it->count - 1) * it->stride + it->len;
	uint64_t lo = cm_align_down(it->off, a), hi = cm_align_up(span_end, a);

	if (hi - lo <= p->chunk) {
		struct cm_read *r = add_read(p, it->file, lo, (uint32_t)(hi - lo));

		add_copy(p, r, (uint32_t)(it->off - lo), it->len, it->count, it->stride,
			 it->dev, it->dst, shard);
		if (p->use_direct && it->count == 1 && lo == it->off && hi == span_end &&
		    it->dst % a == 0)
			r->flags |= CM_READ_DIRECT;
		return;
	}
	for (uint64_t c0 = lo; c0 < hi; c0 += p->chunk) {
		uint64_t c1 = CM_MIN(c0 + p->chunk, hi);
		struct cm_read *r = add_read(p, it->file, c0, (uint32_t)(c1 - c0));

		for (uint32_t k = 0; k < it->count; k++) {
			uint64_t s = it->off + (uint64_t)k * it->stride, e = s + it->len;
			uint64_t from = CM_MAX(s, c0), to = CM_MIN(e, c1);

			if (from >= to)
				continue;
			add_copy(p, r, (uint32_t)(from - c0), (uint32_t)(to - from), 1,
				 (uint32_t)(to - from), it->dev,
				 it->dst + (uint64_t)k * it->len + (from - s), shard);
		}
		if (p->use_direct && it->count == 1 && r->ncopies == 1 &&
		    p->copies[r->first_copy].src == 0 &&
		    p->copies[r->first_copy].len == r->len &&
		    p->copies[r->first_copy].dst % a == 0)
			r->flags |= CM_READ_DIRECT;
		if (!r->ncopies)
			p->nreads--;
	}
}

int tu_build(struct tu_plan *p)
{
	p->shard_bytes = calloc(p->nitems + 1, sizeof(uint64_t));
	for (unsigned d = 0; d < p->ndevs; d++) {
		p->staging[d] = eng_staging_alloc(p->staging_bytes[d]);
		p->expect[d] = calloc(1, p->staging_bytes[d] + 1);
		if (!p->staging[d] || !p->expect[d])
			return -1;
		memset(p->staging[d], 0, p->staging_bytes[d]);
	}
	for (size_t i = 0; i < p->nitems; i++) {
		const struct tu_item *it = p->items + i;

		build_item(p, it, (uint32_t)i);
		p->shard_bytes[i] = (uint64_t)it->len * it->count;
		for (uint32_t k = 0; k < it->count; k++)
			memcpy(p->expect[it->dev] + it->dst + (uint64_t)k * it->len,
			       p->content[it->file] + it->off + (uint64_t)k * it->stride, it->len);
	}
	return 0;
}

void tu_job(struct tu_plan *p, struct eng_job *job)
{
	memset(job, 0, sizeof(*job));
	job->nfiles = p->nfiles;
	job->paths = (const char *const *)p->paths;
	job->file_sizes = p->sizes;
	job->reads = p->reads;
	job->nreads = p->nreads;
	job->copies = p->copies;
	job->ncopies = p->ncopies;
	job->sink = sink_host_init(&p->host, p->ndevs, p->staging, p->staging_bytes);
	job->nshards = p->nitems;
	job->shard_bytes = p->shard_bytes;
}

int tu_compare(const struct tu_plan *p, uint64_t *at)
{
	for (unsigned d = 0; d < p->ndevs; d++) {
		for (size_t i = 0; i < p->nitems; i++) {
			const struct tu_item *it = p->items + i;
			uint64_t n = (uint64_t)it->len * it->count;

			if (it->dev != d || !memcmp(p->staging[d] + it->dst, p->expect[d] + it->dst, n))
				continue;
			for (uint64_t j = 0; j < n; j++)
				if (p->staging[d][it->dst + j] != p->expect[d][it->dst + j]) {
					*at = it->dst + j;
					break;
				}
			return 1 + (int)d;
		}
	}
	return 0;
}

int tu_shard_ok(const struct tu_plan *p, size_t s)
{
	const struct tu_item *it = p->items + s;

	return !memcmp(p->staging[it->dev] + it->dst, p->expect[it->dev] + it->dst,
		       (uint64_t)it->len * it->count);
}

void tu_clear(struct tu_plan *p, int fill)
{
	for (unsigned d = 0; d < p->ndevs; d++)
		memset(p->staging[d], fill, p->staging_bytes[d]);
}

void tu_free(struct tu_plan *p)
{
	for (size_t i = 0; i < p->nfiles; i++) {
		free(p->paths[i]);
		free(p->content[i]);
	}
	for (unsigned d = 0; d < p->ndevs; d++) {
		eng_staging_free(p->staging[d], p->staging_bytes[d]);
		free(p->expect[d]);
	}
	free(p->items);
	free(p->reads);
	free(p->copies);
	free(p->shard_bytes);
	memset(p, 0, sizeof(*p));
}

char *tu_path(const char *dir, const char *name)
{
	static char buf[4][512];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, name);
	return buf[i];
}

int tu_evict(const char *path)
{
	int fd = open(path, O_RDONLY);
	int ret;

	if (fd < 0)
		return -1;
	ret = fsync(fd) || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) ? -1 : 0;
	close(fd);
	return ret;
}

int tu_warm(const char *path)
{
	char buf[65536];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		;
	close(fd);
	return n < 0 ? -1 : 0;
}

void tu_run_workers(const struct tu_test *each, size_t n, int backend, unsigned *workers)
{
	static const unsigned counts[] = { 1, 3 };
	char name[128];

	for (size_t w = 0; w < CM_ARRAY_SIZE(counts); w++) {
		*workers = counts[w];
		for (size_t t = 0; t < n; t++) {
			snprintf(name, sizeof(name), "%s/%uw/%s", eng_backend_name(backend),
				 *workers, each[t].name);
			th_run(name, each[t].fn);
		}
	}
}
