/*
 * bench_engine.c - picks the engine's defaults by measurement: reads a
 * file whole, cold cache, with the engine alone (no planner), for a grid
 * of queue depths and request sizes, straight into THP staging (as the
 * planner's congruent placement allows) or through bounce buffers, and
 * with each io_uring setup flag set, with one worker and with one per
 * CPU. Prints a markdown table of medians.
 *
 *   build/perf/bench_engine FILE [rounds]      (root: drops the page cache)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../engine/engine.h"
#include "../sink/host.h"
#include "perf_time.h"

static void drop_caches(void)
{
	int fd;

	sync();
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd >= 0) {
		if (write(fd, "3\n", 2) != 2)
			perror("drop_caches");
		close(fd);
	}
}

struct cfg {
	const char *name;
	int backend;
	unsigned qd;
	uint32_t req;
	int direct;        /* read straight into staging */
	unsigned uring_first;
	unsigned bound_x;  /* in-flight bound in queues' worth of reads (0: 1) */
	unsigned workers;  /* 0: automatic */
	double gbps[16];
};

/* One cold run: GB/s of bytes over the wall time including staging. */
static double run_once(const char *path, uint64_t size, const struct cfg *c)
{
	uint64_t nreads = (size + c->req - 1) / c->req;
	struct cm_read *reads = calloc(nreads, sizeof(*reads));
	struct cm_copy *copies = calloc(nreads, sizeof(*copies));
	uint64_t staging_len = (size + 4095) / 4096 * 4096;
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct sink_host host;
	struct cm_err e = { 0 };
	struct eng *eng;
	uint8_t *staging;
	double t0, t1;
	int ret;

	drop_caches();
	t0 = perf_now_s();
	staging = eng_staging_alloc(staging_len);
	for (uint64_t i = 0; i < nreads; i++) {
		uint64_t off = i * c->req, len = CM_MIN((uint64_t)c->req, staging_len - off);

		reads[i].off = off;
		reads[i].len = (uint32_t)len;
		reads[i].min_len = (uint32_t)CM_MIN(len, size - off);
		reads[i].file = 0;
		reads[i].first_copy = i;
		reads[i].ncopies = 1;
		/* direct only for whole blocks: the tail goes through a buffer */
		reads[i].flags = c->direct && off + len <= size ? CM_READ_DIRECT : 0;
		copies[i].src = 0;
		copies[i].len = reads[i].flags ? (uint32_t)len : reads[i].min_len;
		copies[i].count = 1;
		copies[i].src_stride = copies[i].len;
		copies[i].dst = off;
	}
	memset(&job, 0, sizeof(job));
	job.nfiles = 1;
	job.paths = &path;
	job.file_sizes = &size;
	job.reads = reads;
	job.nreads = nreads;
	job.copies = copies;
	job.ncopies = nreads;
	job.sink = sink_host_init(&host, 1, &staging, &staging_len);
	eng_opts_default(&o);
	o.backend = c->backend;
	o.queue_depth = c->qd;
	o.inflight_bytes = CM_MAX((uint64_t)c->qd * c->req * (c->bound_x ? c->bound_x : 1),
				  2ull * c->req);
	o.workers = c->workers;
	o.uring_flags_first = c->uring_first;
	ret = eng_create(&o, &eng, &e);
	if (ret == 0) {
		ret = eng_run(eng, &job, &st, &e);
		eng_destroy(eng);
	}
	t1 = perf_now_s();
	if (getenv("BENCH_VERBOSE"))
		fprintf(stderr, "%s: wall %.3f s, read %.3f s, prepare %.3f s, scatter %.3f s, "
			"%u workers, %u buffers, peak %llu\n", c->name, t1 - t0, st.read_seconds,
			st.prepare_seconds, st.scatter_seconds, st.workers, st.buffers,
			(unsigned long long)st.peak_inflight);
	eng_staging_free(staging, staging_len);
	free(reads);
	free(copies);
	if (ret < 0) {
		fprintf(stderr, "%s: %s\n", c->name, e.msg);
		return 0;
	}
	return size / (t1 - t0) / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static struct cfg cfgs[] = {
		{ "io_uring qd 8 1M direct", ENG_IO_URING, 8, 1 << 20, 1, 0, 0, 1, { 0 } },
		{ "io_uring qd 16 1M direct", ENG_IO_URING, 16, 1 << 20, 1, 0, 0, 1, { 0 } },
		{ "io_uring qd 32 1M direct", ENG_IO_URING, 32, 1 << 20, 1, 0, 0, 1, { 0 } },
		{ "io_uring qd 4 4M direct", ENG_IO_URING, 4, 4 << 20, 1, 0, 0, 1, { 0 } },
		{ "io_uring qd 8 4M direct", ENG_IO_URING, 8, 4 << 20, 1, 0, 0, 1, { 0 } },
		{ "io_uring qd 16 4M direct", ENG_IO_URING, 16, 4 << 20, 1, 0, 0, 1, { 0 } },
		{ "io_uring qd 32 4M direct", ENG_IO_URING, 32, 4 << 20, 1, 0, 0, 1, { 0 } },
		{ "io_uring qd 8 8M direct", ENG_IO_URING, 8, 8 << 20, 1, 0, 0, 1, { 0 } },
		{ "io_uring qd 16 8M direct", ENG_IO_URING, 16, 8 << 20, 1, 0, 0, 1, { 0 } },
		{ "io_uring qd 16 4M bounce", ENG_IO_URING, 16, 4 << 20, 0, 0, 0, 1, { 0 } },
		{ "io_uring qd 16 4M bounce, bound 2 queues", ENG_IO_URING, 16, 4 << 20, 0, 0, 2, 1, { 0 } },
		{ "io_uring qd 16 1M bounce, bound 2 queues", ENG_IO_URING, 16, 1 << 20, 0, 0, 2, 1, { 0 } },
		{ "io_uring qd 16 4M direct, no DEFER_TASKRUN", ENG_IO_URING, 16, 4 << 20, 1, 1, 0, 1, { 0 } },
		{ "io_uring qd 16 4M direct, no SINGLE_ISSUER", ENG_IO_URING, 16, 4 << 20, 1, 2, 0, 1, { 0 } },
		{ "libaio qd 16 4M direct", ENG_LIBAIO, 16, 4 << 20, 1, 0, 0, 1, { 0 } },
		{ "pread qd 16 4M direct", ENG_PREAD, 16, 4 << 20, 1, 0, 0, 1, { 0 } },
		{ "io_uring qd 16 4M direct, workers auto", ENG_IO_URING, 16, 4 << 20, 1, 0, 0, 0, { 0 } },
		{ "io_uring qd 16 8M direct, workers auto", ENG_IO_URING, 16, 8 << 20, 1, 0, 0, 0, { 0 } },
		{ "io_uring qd 16 4M bounce, workers auto", ENG_IO_URING, 16, 4 << 20, 0, 0, 0, 0, { 0 } },
		{ "pread qd 16 4M direct, workers auto", ENG_PREAD, 16, 4 << 20, 1, 0, 0, 0, { 0 } },
	};
	const char *only = getenv("BENCH_ONLY");
	int rounds = argc > 2 ? atoi(argv[2]) : 3;
	struct stat sb;

	if (argc < 2 || stat(argv[1], &sb) < 0) {
		fprintf(stderr, "usage: bench_engine FILE [rounds]\n");
		return 2;
	}
	if (rounds < 1 || rounds > 16)
		rounds = 3;
	/* Interleaved: every configuration once per round. */
	for (int r = 0; r < rounds; r++)
		for (size_t i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++)
			if (!only || strstr(cfgs[i].name, only))
				cfgs[i].gbps[r] = run_once(argv[1], (uint64_t)sb.st_size, cfgs + i);
	printf("| configuration | GB/s (median of %d, cold, wall incl. staging) |\n|---|---|\n",
	       rounds);
	for (size_t i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++) {
		if (only && !strstr(cfgs[i].name, only))
			continue;
		qsort(cfgs[i].gbps, (size_t)rounds, sizeof(double), cmp);
		printf("| %s | %.2f |\n", cfgs[i].name, cfgs[i].gbps[rounds / 2]);
	}
	return 0;
}
