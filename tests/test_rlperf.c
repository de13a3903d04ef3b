/*
 * test_rlperf.c - rlperf: option parsing and its errors, fio's number and
 * time syntax, the latency histogram and its percentiles, the offset
 * generator, the job runner (on a fake engine defined here, used only by this
 * test), and the normal and JSON output, whose shape python3's json module
 * checks. The built binary's errors and, where the engine is in the library,
 * a real run are checked end to end.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* rlperf's parts other than main(): compiled in, tested directly */
#include "../perf/rlperf_opts.c"
#include "../perf/rlperf_hist.c"
#include "../perf/rlperf_job.c"
#include "../perf/rlperf_out.c"

/* ---------------------------------------------------------------- */
/* Options                                                           */
/* ---------------------------------------------------------------- */

static int parse(struct rp_opts *o, char *err, size_t errlen, ...)
{
	char *argv[32] = { "rlperf" };
	int argc = 1;
	va_list ap;
	char *a;

	va_start(ap, errlen);
	while ((a = va_arg(ap, char *)) && argc < 31)
		argv[argc++] = a;
	va_end(ap);
	return rp_parse_args(argc, argv, o, err, errlen);
}

static void sizes_take_fio_suffixes(void)
{
	static const struct {
		const char *s;
		uint64_t v;
	} good[] = {
		{ "0", 0 }, { "4096", 4096 }, { "4k", 4096 }, { "4K", 4096 },
		{ "4KiB", 4096 }, { "4kb", 4096 }, { "1M", 1 << 20 }, { "1m", 1 << 20 },
		{ "1MiB", 1 << 20 }, { "2g", 2ull << 30 }, { "3t", 3ull << 40 },
		{ "1p", 1ull << 50 }, { "0x10", 16 }, { "0x1k", 1024 }, { "512b", 512 },
	};
	static const char *const bad[] = {
		"", "k", "4x", "4kk", "1e3", "-1", "1.5k", "0x", " 4k",
		"99999999999999999999", "16777216t", "4 k",
	};
	uint64_t v;

	for (size_t i = 0; i < RL_ARRAY_SIZE(good); i++) {
		CHECKF(rp_parse_size(good[i].s, &v) == 0, "size %s refused", good[i].s);
		CHECKF(v == good[i].v, "size %s = %llu", good[i].s, (unsigned long long)v);
	}
	for (size_t i = 0; i < RL_ARRAY_SIZE(bad); i++)
		CHECKF(rp_parse_size(bad[i], &v) == -1, "size '%s' accepted", bad[i]);
}

static void times_default_to_seconds(void)
{
	uint64_t ns;

	CHECK(rp_parse_time("30", &ns) == 0 && ns == 30000000000ull);
	CHECK(rp_parse_time("30s", &ns) == 0 && ns == 30000000000ull);
	CHECK(rp_parse_time("500ms", &ns) == 0 && ns == 500000000ull);
	CHECK(rp_parse_time("250us", &ns) == 0 && ns == 250000ull);
	CHECK(rp_parse_time("2m", &ns) == 0 && ns == 120000000000ull);
	CHECK(rp_parse_time("1h", &ns) == 0 && ns == 3600000000000ull);
	CHECK(rp_parse_time("", &ns) == -1);
	CHECK(rp_parse_time("5 s", &ns) == -1);
	CHECK(rp_parse_time("ms", &ns) == -1);
	CHECK(rp_parse_time("3x", &ns) == -1);
	CHECK(rp_parse_time("99999999999999d", &ns) == -1);
}

static void fio_command_line_parses(void)
{
	struct rp_opts o;
	char err[256];

	CHECK_EQ(parse(&o, err, sizeof(err), "--name=seq", "--filename=/dev/null",
		       "--rw=randread", "--bs=1M", "--iodepth", "16", "--direct=1",
		       "--ioengine=libaio", "--numjobs=4", "--runtime=10",
		       "--time_based", "--ramp_time=2s", "--output-format=json",
		       "--size", "1g", "--offset=4k", "--group_reporting",
		       "--randseed=7", NULL), 0);
	CHECK_STR(o.name, "seq");
	CHECK_STR(o.filename, "/dev/null");
	CHECK_EQ(o.rw, RP_RANDREAD);
	CHECK_EQ(o.bs, 1 << 20);
	CHECK_EQ(o.iodepth, 16);
	CHECK_EQ(o.direct, 1);
	CHECK_EQ(o.engine, ENG_LIBAIO);
	CHECK_EQ(o.numjobs, 4);
	CHECK_EQ(o.runtime_ns, 10000000000ll);
	CHECK_EQ(o.time_based, 1);
	CHECK_EQ(o.ramp_ns, 2000000000ll);
	CHECK_EQ(o.format, RP_FMT_JSON);
	CHECK_EQ(o.size, 1 << 30);
	CHECK_EQ(o.offset, 4096);
	CHECK_EQ(o.seed, 7);

	/* fio's defaults, and io_uring's flags */
	CHECK_EQ(parse(&o, err, sizeof(err), "--filename", "f", "--fixedbufs",
		       "--registerfiles=1", NULL), 0);
	CHECK_EQ(o.rw, RP_READ);
	CHECK_EQ(o.bs, 4096);
	CHECK_EQ(o.iodepth, 1);
	CHECK_EQ(o.direct, 0);
	CHECK_EQ(o.engine, ENG_IO_URING);
	CHECK_EQ(o.fixedbufs, 1);
	CHECK_EQ(o.registerfiles, 1);
	CHECK_EQ(o.format, RP_FMT_NORMAL);

	CHECK_EQ(parse(&o, err, sizeof(err), "--checkpoint=ck", "--sharding=s.json",
		       "--process=1", "--engine=psync", "--iodepth=8", NULL), 0);
	CHECK_STR(o.checkpoint, "ck");
	CHECK_STR(o.sharding, "s.json");
	CHECK_EQ(o.process, 1);
	CHECK(o.engine_set && o.iodepth_set && !o.bs_set && !o.direct_set);

	CHECK_EQ(parse(&o, err, sizeof(err), "--help", NULL), RP_PARSE_HELP);
	CHECK_EQ(parse(&o, err, sizeof(err), "--version", NULL), RP_PARSE_VERSION);
	CHECK_EQ(parse(&o, err, sizeof(err), "--bogus", "--help", NULL), RP_PARSE_ERROR);
}

static void bad_options_get_clear_errors(void)
{
	static const struct {
		const char *a, *b;
		const char *msg;
	} cases[] = {
		{ "--bogus=1", NULL, "rlperf: unrecognized option '--bogus'" },
		{ "--rw=write", NULL, "rlperf: failed parsing rw=write: rlperf only reads (read, randread)" },
		{ "--rw=sideways", NULL, "rlperf: failed parsing rw=sideways: expected read or randread" },
		{ "--bs=abc", NULL, "rlperf: failed parsing bs=abc: not a number (examples: 4096, 4k, 1M, 2g)" },
		{ "--bs=0", NULL, "rlperf: failed parsing bs=0: out of range [1, 268435456]" },
		{ "--iodepth=0", NULL, "rlperf: failed parsing iodepth=0: out of range [1, 65536]" },
		{ "--iodepth=65537", NULL, "rlperf: failed parsing iodepth=65537: out of range [1, 65536]" },
		{ "--numjobs=0", NULL, "rlperf: failed parsing numjobs=0: out of range [1, 1024]" },
		{ "--direct=2", NULL, "rlperf: failed parsing direct=2: expected 0 or 1" },
		{ "--engine=spdk", NULL, "rlperf: engine spdk not loadable (rlperf has io_uring, libaio, psync)" },
		{ "--output-format=terse", NULL, "rlperf: failed parsing output-format=terse: expected normal or json" },
		{ "--runtime=soon", NULL, "rlperf: failed parsing runtime=soon: not a time (examples: 30, 500ms, 2m)" },
		{ "--name=", NULL, "rlperf: failed parsing name=: empty value" },
		{ "--group_reporting=1", NULL, "rlperf: option --group_reporting takes no value" },
		{ "--time_based", NULL, "rlperf: --time_based needs --runtime" },
		{ "--fixedbufs", "--engine=libaio", "rlperf: --fixedbufs and --registerfiles need --engine=io_uring" },
		{ "--sharding=s.json", NULL, "rlperf: --sharding and --process need --checkpoint" },
		{ "--checkpoint=ck", NULL, "rlperf: --filename and --checkpoint exclude each other" },
		{ "stray", NULL, "rlperf: unexpected argument 'stray' (options are spelled --name=value)" },
		{ "--size", NULL, "rlperf: option --size needs a value" },
	};
	struct rp_opts o;
	char err[256];

	for (size_t i = 0; i < RL_ARRAY_SIZE(cases); i++) {
		/* every case also names a file, so that only its own fault shows */
		CHECKF(parse(&o, err, sizeof(err), "--filename=f", cases[i].a, cases[i].b,
			     NULL) == RP_PARSE_ERROR, "%s accepted", cases[i].a);
		CHECK_STR(err, cases[i].msg);
	}
	CHECK_EQ(parse(&o, err, sizeof(err), NULL), RP_PARSE_ERROR);
	CHECK_STR(err, "rlperf: no --filename given (or --checkpoint); see rlperf --help");
	CHECK_EQ(parse(&o, err, sizeof(err), "--checkpoint=ck", "--rw=randread", NULL),
		 RP_PARSE_ERROR);
	CHECK_STR(err, "rlperf: --rw applies to raw reads (--filename), not to --checkpoint");
	/* a tiny buffer truncates, never overflows */
	CHECK_EQ(parse(&o, err, 12, "--bogus", NULL), RP_PARSE_ERROR);
	CHECK_EQ(strlen(err), 11);
}

/* ---------------------------------------------------------------- */
/* Histogram                                                         */
/* ---------------------------------------------------------------- */

static void histogram_matches_fio_buckets(void)
{
	/* fio's plat_val_to_idx / plat_idx_to_val on known points */
	CHECK_EQ(rp_hist_index(0), 0);
	CHECK_EQ(rp_hist_index(127), 127);
	CHECK_EQ(rp_hist_index(128), 128);
	CHECK_EQ(rp_hist_index(129), 128);
	CHECK_EQ(rp_hist_index(1000), 317);
	CHECK_EQ(rp_hist_value(317), 1004);
	CHECK_EQ(rp_hist_value(128), 129);
	CHECK_EQ(rp_hist_index(UINT64_MAX), RP_PLAT_NR - 1);
	for (unsigned i = 0; i < RP_PLAT_NR; i++) {
		uint64_t v = rp_hist_value(i);

		CHECKF(rp_hist_index(v) == i, "bucket %u: value %llu maps to %u", i,
		       (unsigned long long)v, rp_hist_index(v));
		if (i)
			CHECK(v > rp_hist_value(i - 1));
	}
	/* a bucket is never wider than 1/64 of its values */
	for (int k = 0; k < 100000; k++) {
		uint64_t v = th_rand() >> (th_rand() % 40 + 24);
		unsigned i = rp_hist_index(v);
		double rel = v ? ((double)rp_hist_value(i) - (double)v) / (double)v : 0;

		if (i == RP_PLAT_NR - 1)
			continue;
		CHECKF(rel < 1.0 / 64 && rel > -1.0 / 64, "v=%llu rel=%f",
		       (unsigned long long)v, rel);
	}
}

static void percentiles_follow_fio(void)
{
	struct rp_hist *h = rl_malloc(sizeof(*h)), *g = rl_malloc(sizeof(*g));
	uint64_t v[RP_NPCT], w[RP_NPCT];
	int ok = 0;

	CHECK(h && g);
	rp_hist_init(h);
	rp_hist_percentiles(h, rp_pct_list, RP_NPCT, v);
	for (unsigned i = 0; i < RP_NPCT; i++)
		if (v[i])
			goto out;
	/* 100 reads of 10 ns, 100 of 20: p50 is the first bucket where the
	 * running count reaches half (fio's >=), so 10; p60 on is 20 */
	for (int i = 0; i < 100; i++) {
		rp_hist_add(h, 10);
		rp_hist_add(h, 20);
	}
	rp_hist_percentiles(h, rp_pct_list, RP_NPCT, v);
	for (unsigned i = 0; i < RP_NPCT; i++)
		if (v[i] != (rp_pct_list[i] <= 50.0 ? 10u : 20u))
			goto out;
	if (h->min != 10 || h->max != 20 || rp_hist_mean(h) != 15.0)
		goto out;

	/* uniform 1..100000 us: p-th percentile within a bucket of p% */
	rp_hist_init(h);
	rp_hist_init(g);
	for (uint64_t x = 1; x <= 100000; x++)
		rp_hist_add(x & 1 ? h : g, x * 1000);
	rp_hist_merge(h, g);
	if (h->n != 100000 || h->min != 1000 || h->max != 100000000)
		goto out;
	rp_hist_percentiles(h, rp_pct_list, RP_NPCT, v);
	for (unsigned i = 0; i < RP_NPCT; i++) {
		double want = rp_pct_list[i] * 1000.0 * 1000.0;

		if ((double)v[i] < want * (1 - 1.0 / 64) || (double)v[i] > want * (1 + 1.0 / 64))
			goto out;
	}
	/* merging halves equals adding all */
	rp_hist_init(g);
	for (uint64_t x = 1; x <= 100000; x++)
		rp_hist_add(g, x * 1000);
	rp_hist_percentiles(g, rp_pct_list, RP_NPCT, w);
	if (memcmp(v, w, sizeof(v)) || g->sumsq != h->sumsq)
		goto out;
	ok = 1;
out:
	rl_free(h);
	rl_free(g);
	CHECK(ok);
}

static void stddev_is_exact(void)
{
	static const uint64_t xs[] = { 2, 4, 4, 4, 5, 5, 7, 9 };
	struct rp_hist *h = rl_malloc(sizeof(*h));
	double sd;

	CHECK(h);
	rp_hist_init(h);
	CHECK(rp_hist_stddev(h) == 0.0);
	for (size_t i = 0; i < RL_ARRAY_SIZE(xs); i++)
		rp_hist_add(h, xs[i] + 1000000000000ull);  /* large mean, small spread */
	sd = rp_hist_stddev(h);
	rl_free(h);
	CHECKF(sd > 2.13808 && sd < 2.13809, "stddev %.6f", sd);
}

/* ---------------------------------------------------------------- */
/* Generator                                                         */
/* ---------------------------------------------------------------- */

static void sequential_offsets_cover_the_region(void)
{
	struct rp_gen g;
	uint64_t off, n = 0;

	rp_gen_init(&g, 8192, 10 * 4096 + 100, 4096, 0, 1);
	CHECK_EQ(g.nblocks, 10);
	while (rp_gen_next(&g, &off)) {
		CHECK_EQ(off, 8192 + n * 4096);
		n++;
	}
	CHECK_EQ(n, 10);
	/* the next pass starts over */
	CHECK(rp_gen_next(&g, &off) && off == 8192);
}

static void random_offsets_are_a_permutation(void)
{
	static const uint64_t sizes[] = { 1, 2, 3, 7, 64, 1000, 4097, 65536 };
	uint8_t *seen = rl_malloc(65536);
	uint64_t first[2] = { 0, 0 };
	int ok = 1;

	CHECK(seen);
	for (size_t s = 0; s < RL_ARRAY_SIZE(sizes) && ok; s++) {
		uint64_t nb = sizes[s], seed = th_rand();
		struct rp_gen g;

		rp_gen_init(&g, 4096, nb * 512, 512, 1, seed);
		for (int pass = 0; pass < 3 && ok; pass++) {
			uint64_t off, n = 0, same = 0;

			memset(seen, 0, nb);
			while (rp_gen_next(&g, &off)) {
				uint64_t b = (off - 4096) / 512;

				if (off < 4096 || (off - 4096) % 512 || b >= nb || seen[b]) {
					ok = 0;
					break;
				}
				seen[b] = 1;
				same += b == n;
				if (n < 2 && nb == 65536)
					first[n] = b;
				n++;
			}
			if (n != nb)
				ok = 0;
			/* not sequential in disguise */
			if (nb >= 1000 && same > nb / 10)
				ok = 0;
		}
	}
	rl_free(seen);
	CHECKF(ok, "not a permutation (seed %llu)", (unsigned long long)th_seed());
	CHECK(first[0] + 1 != first[1]);
}

/* ---------------------------------------------------------------- */
/* The runner on a fake engine                                       */
/* ---------------------------------------------------------------- */

struct fake_eng {
	struct eng_opts o;
};

static struct {
	pthread_mutex_t lock;
	int fail_rc;            /* eng_run returns this after fail_after reads */
	uint64_t fail_after;
	int drop_last;          /* report success one read short */
	uint64_t reads, bad, max_inflight;
	unsigned runs;
	uint64_t block_counts_bad;
} fake = { PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0, 0, 0, 0 };

static void fake_opts_default(struct eng_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->backend = ENG_AUTO;
	o->queue_depth = 32;
	o->direct = 1;
}

static int fake_create(const struct eng_opts *o, struct eng **out, struct rl_err *e)
{
	struct fake_eng *f = rl_calloc(1, sizeof(*f));

	if (!f)
		return rl_err_set(e, -ENOMEM, "fake engine: out of memory");
	f->o = *o;
	*out = (struct eng *)f;
	return 0;
}

static void fake_destroy(struct eng *eng)
{
	rl_free(eng);
}

/* Keeps up to queue_depth reads "in flight", completes the oldest. */
static int fake_run(struct eng *eng, const struct eng_job *job, struct eng_stats *st,
		    struct rl_err *e)
{
	struct fake_eng *f = (struct fake_eng *)eng;
	unsigned qd = f->o.queue_depth, head = 0, n = 0;
	struct {
		struct rl_read r;
		uint64_t t;
	} *q = rl_calloc(qd, sizeof(*q));
	uint64_t reads = 0, bad = 0, nb = job->file_sizes[0] / f->o.buffer_bytes;
	uint32_t *counts = rl_calloc(nb ? nb : 1, sizeof(*counts));
	struct rl_read r;
	int more = 1, rc = 0;

	if (!q || !counts) {
		rl_free(q);
		rl_free(counts);
		return rl_err_set(e, -ENOMEM, "fake engine: out of memory");
	}
	memset(st, 0, sizeof(*st));
	while (more || n) {
		if (more && n < qd && (more = job->next(job->user, &r))) {
			if (r.len != f->o.buffer_bytes || r.min_len != r.len || r.ncopies ||
			    r.file || r.off % r.len || r.off + r.len > job->file_sizes[0])
				bad++;
			else
				counts[r.off / r.len]++;
			q[(head + n) % qd].r = r;
			q[(head + n) % qd].t = now_ns();
			n++;
			continue;
		}
		if (!n)
			break;
		if (fake.fail_rc && reads == fake.fail_after) {
			rc = rl_err_set(e, fake.fail_rc, "fake: read of %u bytes at offset "
					"%llu failed", q[head].r.len,
					(unsigned long long)q[head].r.off);
			break;
		}
		if (!(fake.drop_last && !more && n == 1))
			job->on_read(job->user, &q[head].r, q[head].t, now_ns());
		head = (head + 1) % qd;
		n--;
		reads++;
	}
	st->bytes_read = reads * f->o.buffer_bytes;
	st->reads = reads;
	st->backend = ENG_IO_URING;
	st->queue_depth = qd;
	st->buffers = f->o.buffers;
	st->registered_buffers = f->o.register_buffers ? f->o.buffers : 0;
	st->registered_files = f->o.register_files;
	st->direct_io = f->o.direct;
	pthread_mutex_lock(&fake.lock);
	fake.reads += reads;
	fake.bad += bad;
	fake.runs++;
	if (qd > fake.max_inflight)
		fake.max_inflight = qd;
	/* every block read equally often, give or take the pass in progress */
	if (!rc) {
		uint32_t lo = UINT32_MAX, hi = 0;

		for (uint64_t b = 0; b < nb; b++) {
			lo = counts[b] < lo ? counts[b] : lo;
			hi = counts[b] > hi ? counts[b] : hi;
		}
		if (nb && hi > lo + 1)
			fake.block_counts_bad++;
	}
	pthread_mutex_unlock(&fake.lock);
	rl_free(q);
	rl_free(counts);
	return rc;
}

static const struct rp_engine_ops fake_ops = {
	fake_opts_default, fake_create, fake_run, fake_destroy,
};

static void fake_reset(void)
{
	pthread_mutex_lock(&fake.lock);
	fake.fail_rc = 0;
	fake.fail_after = 0;
	fake.drop_last = 0;
	fake.reads = fake.bad = fake.max_inflight = fake.block_counts_bad = 0;
	fake.runs = 0;
	pthread_mutex_unlock(&fake.lock);
}

/* A file of size bytes in the test's directory; returns its path. */
static const char *make_file(const char *name, uint64_t size)
{
	static char path[4][512];
	static int k;
	char *p = path[k++ % 4];
	int fd;

	snprintf(p, 512, "%s/%s", th_tmpdir(), name);
	fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)size)) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	close(fd);
	return p;
}

static void raw_opts(struct rp_opts *o, const char *path)
{
	rp_opts_default(o);
	o->filename = path;
}

static void runner_reads_every_block_once_per_job(void)
{
	const char *path = make_file("one_pass", 1 << 20);
	struct rp_result *r = rl_malloc(sizeof(*r));
	struct rp_opts o;
	int rc;

	CHECK(path && r);
	fake_reset();
	raw_opts(&o, path);
	o.rw = RP_RANDREAD;
	o.iodepth = 8;
	o.numjobs = 3;
	o.fixedbufs = 1;
	rc = rp_run(&o, 1 << 20, &fake_ops, r);
	if (rc || r->ios != 3 * 256 || r->bytes != 3 << 20 || r->clat.n != r->ios ||
	    fake.reads != 3 * 256 || fake.bad || fake.block_counts_bad ||
	    fake.runs != 3 || fake.max_inflight != 8 || r->eng.registered_buffers != 8 ||
	    r->runtime_s <= 0 || r->numjobs != 3) {
		th_fail(__FILE__, __LINE__, "rc %d ios %llu bytes %llu reads %llu bad %llu "
			"uneven %llu: %s", rc, (unsigned long long)r->ios,
			(unsigned long long)r->bytes, (unsigned long long)fake.reads,
			(unsigned long long)fake.bad,
			(unsigned long long)fake.block_counts_bad, r->errmsg);
	}
	rl_free(r);
}

static void runner_loops_on_time_and_skips_ramp(void)
{
	const char *path = make_file("timed", 64 << 10);
	struct rp_result *r = rl_malloc(sizeof(*r));
	struct rp_opts o;
	int rc;

	CHECK(path && r);
	fake_reset();
	raw_opts(&o, path);
	o.bs = 4096;
	o.iodepth = 4;
	o.time_based = 1;
	o.runtime_ns = 60000000;  /* 60 ms */
	o.ramp_ns = 30000000;     /* 30 ms not measured */
	rc = rp_run(&o, 64 << 10, &fake_ops, r);
	if (rc || r->ios <= 16 || fake.reads <= r->ios || fake.bad ||
	    fake.block_counts_bad || r->runtime_s < 0.05 || r->runtime_s > 2.0 ||
	    r->elapsed_s < 0.09) {
		th_fail(__FILE__, __LINE__, "rc %d ios %llu of %llu runtime %.3f elapsed "
			"%.3f: %s", rc, (unsigned long long)r->ios,
			(unsigned long long)fake.reads, r->runtime_s, r->elapsed_s,
			r->errmsg);
	}
	rl_free(r);
}

static void runner_reports_engine_errors(void)
{
	const char *path = make_file("fails", 256 << 10);
	struct rp_result *r = rl_malloc(sizeof(*r));
	struct rp_opts o;
	long live = rl_alloc_live();
	int rc1, rc2;
	char m1[RL_ERRMSG_MAX];

	CHECK(path && r);
	fake_reset();
	fake.fail_rc = -EIO;
	fake.fail_after = 5;
	raw_opts(&o, path);
	o.iodepth = 4;
	rc1 = rp_run(&o, 256 << 10, &fake_ops, r);
	snprintf(m1, sizeof(m1), "%s", r->errmsg);
	/* an engine that says success with a read missing is caught too */
	fake_reset();
	fake.drop_last = 1;
	rc2 = rp_run(&o, 256 << 10, &fake_ops, r);
	fake_reset();
	CHECK_EQ(rc1, -EIO);
	CHECK_STR(m1, "rlperf: job 0: fake: read of 4096 bytes at offset 20480 failed");
	CHECK_EQ(rc2, -EIO);
	CHECK_STR(r->errmsg, "rlperf: job 0: the engine finished with 258048 of 262144 "
		  "bytes read");
	rl_free(r);
	CHECK_EQ(rl_alloc_live(), live - 1);
}

static void runner_checks_the_region(void)
{
	const char *path = make_file("small", 10000);
	struct rp_result *r = rl_malloc(sizeof(*r));
	struct rp_opts o;
	char want[600];
	int rc1, rc2, rc3;
	char m1[RL_ERRMSG_MAX], m2[RL_ERRMSG_MAX];

	CHECK(path && r);
	fake_reset();
	raw_opts(&o, path);
	o.offset = 8192;
	o.size = 4096;
	rc1 = rp_run(&o, 10000, &fake_ops, r);
	snprintf(m1, sizeof(m1), "%s", r->errmsg);
	o.offset = 0;
	o.size = 0;
	o.bs = 16384;
	rc2 = rp_run(&o, 10000, &fake_ops, r);
	snprintf(m2, sizeof(m2), "%s", r->errmsg);
	/* whole blocks only: 10000 bytes are two 4k reads */
	o.bs = 4096;
	rc3 = rp_run(&o, 10000, &fake_ops, r);
	CHECK_EQ(rc1, -EINVAL);
	snprintf(want, sizeof(want), "rlperf: offset 8192 + size 4096 is past the end "
		 "of %s (10000 bytes); rlperf never writes", path);
	CHECK_STR(m1, want);
	CHECK_EQ(rc2, -EINVAL);
	CHECK_STR(m2, "rlperf: size 10000 is smaller than bs 16384");
	CHECK_EQ(rc3, 0);
	CHECK_EQ(r->ios, 2);
	CHECK_EQ(fake.bad, 0);
	rl_free(r);
}

/* ---------------------------------------------------------------- */
/* Output                                                            */
/* ---------------------------------------------------------------- */

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = rl_malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		rl_free(buf);
		buf = NULL;
	}
	if (buf)
		buf[n] = '\0';
	fclose(f);
	return buf;
}

/* A result with known numbers: 1000 reads of 1 MiB in 2 s. */
static void known_result(struct rp_result *r)
{
	memset(r, 0, offsetof(struct rp_result, clat));
	rp_hist_init(&r->clat);
	memset(&r->eng, 0, sizeof(r->eng));
	r->ios = 1000;
	r->bytes = 1000ull << 20;
	r->runtime_s = 2.0;
	r->elapsed_s = 2.0;
	r->usr_s = 0.1;
	r->sys_s = 0.3;
	r->numjobs = 1;
	r->start_unix_ms = 1700000000000ull;
	r->eng.backend = ENG_IO_URING;
	r->eng.direct_io = 1;
	r->error = 0;
	r->errmsg[0] = '\0';
	for (uint64_t i = 1; i <= 1000; i++)
		rp_hist_add(&r->clat, i * 2000);  /* 2 us .. 2 ms */
}

static const char json_check[] =
	"import json,sys\n"
	"d=json.load(open(sys.argv[1]))\n"
	"j=d['jobs'][0]; rd=j['read']\n"
	"assert rd['bw_bytes']==524288000, rd['bw_bytes']\n"
	"assert rd['bw']==512000 and rd['io_bytes']==1048576000\n"
	"assert abs(rd['iops']-500.0)<1e-9 and rd['runtime']==2000\n"
	"p=rd['clat_ns']['percentile']\n"
	"keys=['1.000000','5.000000','10.000000','20.000000','30.000000','40.000000',"
	"'50.000000','60.000000','70.000000','80.000000','90.000000','95.000000',"
	"'99.000000','99.500000','99.900000','99.950000','99.990000']\n"
	"assert sorted(p,key=float)==keys, list(p)\n"
	"assert all(isinstance(p[k],int) for k in keys)\n"
	"assert abs(p['50.000000']-1000000)<=1000000/64, p['50.000000']\n"
	"assert abs(p['99.000000']-1980000)<=1980000/64\n"
	"c=rd['clat_ns']; assert c['min']==2000 and c['max']==2000000 and c['N']==1000\n"
	"assert abs(c['mean']-1001000)<1e-6\n"
	"assert abs(j['usr_cpu']-5.0)<1e-6 and abs(j['sys_cpu']-15.0)<1e-6\n"
	"assert d['jobs'][0]['write']['bw_bytes']==0 and 'trim' in j\n"
	"assert j['jobname']=='q\"uote' and j['job options']['rw']=='randread'\n"
	"assert j['job options']['fixedbufs']=='' and j['rlperf']['backend']=='io_uring'\n";

static void json_has_fios_shape(void)
{
	struct rp_result *r = rl_malloc(sizeof(*r));
	char path[512], script[512], cmd[1200];
	struct rp_opts o;
	FILE *f;
	int st;

	CHECK(r);
	known_result(r);
	raw_opts(&o, "/dev/null");
	o.name = "q\"uote";
	o.rw = RP_RANDREAD;
	o.fixedbufs = 1;
	snprintf(path, sizeof(path), "%s/out.json", th_tmpdir());
	snprintf(script, sizeof(script), "%s/check.py", th_tmpdir());
	f = fopen(path, "w");
	if (f) {
		rp_print_json(f, &o, r);
		fclose(f);
	}
	rl_free(r);
	CHECK(f);
	f = fopen(script, "w");
	CHECK(f);
	fputs(json_check, f);
	fclose(f);
	if (system("python3 -c '' >/dev/null 2>&1"))
		SKIP("python3 not installed");
	snprintf(cmd, sizeof(cmd), "python3 %s %s", script, path);
	st = system(cmd);
	CHECKF(st == 0, "python3 rejected %s", path);
}

static void normal_output_reads_like_fio(void)
{
	struct rp_result *r = rl_malloc(sizeof(*r));
	char path[512];
	struct rp_opts o;
	char *text = NULL;
	FILE *f;
	int ok;

	CHECK(r);
	known_result(r);
	raw_opts(&o, "/dev/null");
	o.bs = 1 << 20;
	o.iodepth = 16;
	snprintf(path, sizeof(path), "%s/out.txt", th_tmpdir());
	f = fopen(path, "w");
	if (f) {
		rp_print_normal(f, &o, r);
		fclose(f);
		text = slurp(path);
	}
	rl_free(r);
	CHECK(text);
	ok = strstr(text, "rlperf: (g=0): rw=read, bs=(R) 1024KiB-1024KiB, ioengine=io_uring, "
		    "iodepth=16\n") &&
	     strstr(text, "  read: IOPS=500, BW=500MiB/s (524MB/s)(1000MiB/2000msec)\n") &&
	     strstr(text, "    clat (usec): min=2, max=2000, avg=1001.00, stdev=") &&
	     strstr(text, "    clat percentiles (usec):\n     |  1.00th=[   20],") &&
	     strstr(text, "99.99th=[ 2007]\n") &&
	     strstr(text, "  cpu          : usr=5.00%, sys=15.00%,") &&
	     strstr(text, "   READ: bw=500MiB/s (524MB/s), io=1000MiB, run=2000-2000msec\n");
	if (!ok)
		fprintf(stderr, "%s", text);
	rl_free(text);
	CHECK(ok);
}

static void block_sizes_print_as_fio(void)
{
	char b[32];

	rp_fmt_bytes_iec(b, sizeof(b), 4096);
	CHECK_STR(b, "4096B");
	rp_fmt_bytes_iec(b, sizeof(b), 1 << 20);
	CHECK_STR(b, "1024KiB");
	rp_fmt_bytes_iec(b, sizeof(b), 1 << 30);
	CHECK_STR(b, "1024MiB");
	rp_fmt_bytes_iec(b, sizeof(b), 1000);
	CHECK_STR(b, "1000B");
}

/* ---------------------------------------------------------------- */
/* The binary                                                        */
/* ---------------------------------------------------------------- */

/* Runs the built rlperf with args; stdout and stderr into out (NUL-ended). */
static int run_rlperf(const char *args, char *out, size_t len)
{
	const char *b = getenv("RL_BUILD");
	char cmd[1024];
	FILE *p;
	size_t n;
	int st;

	snprintf(cmd, sizeof(cmd), "%s/rlperf 2>&1 %s", b ? b : "build", args);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void binary_rejects_bad_options(void)
{
	char out[4096], exe[512];
	const char *b = getenv("RL_BUILD");

	snprintf(exe, sizeof(exe), "%s/rlperf", b ? b : "build");
	if (access(exe, X_OK))
		SKIP("build/rlperf not built");
	CHECK_EQ(run_rlperf("--bogus", out, sizeof(out)), 2);
	CHECK_STR(out, "rlperf: unrecognized option '--bogus'\n");
	CHECK_EQ(run_rlperf("--filename=/nonexistent/x", out, sizeof(out)), 1);
	CHECK_STR(out, "rlperf: /nonexistent/x: No such file or directory\n");
	CHECK_EQ(run_rlperf("--version", out, sizeof(out)), 0);
	CHECK_STR(out, RP_VERSION "\n");
	CHECK_EQ(run_rlperf("--help", out, sizeof(out)), 0);
	CHECK(strstr(out, "--iodepth=V"));
}

static const char real_check[] =
	"import json,sys\n"
	"d=json.load(open(sys.argv[1])); j=d['jobs'][0]; rd=j['read']\n"
	"assert j['error']==0 and rd['total_ios']==256 and rd['io_bytes']==1048576, rd\n"
	"assert rd['clat_ns']['N']==256 and rd['bw_bytes']>0\n"
	"assert len(rd['clat_ns']['percentile'])==17\n"
	"assert j['rlperf']['backend']==sys.argv[2], j['rlperf']\n"
	/* raw reads stay on the owner thread: a hand-off to the completion
	 * thread per read showed as 1.2-1.7 context switches per read. Only
	 * voluntary switches count: preemption by other load is not ours. */
	"v=j['rlperf']['voluntary_ctx']\n"
	"assert sys.argv[2]=='pread' or v<rd['total_ios']/4, v\n";

/* A real run on the engine, every backend, JSON checked by python3. */
static void binary_reads_a_file(void)
{
	static const char *const engines[] = { "io_uring", "libaio", "psync" };
	static const char *const names[] = { "io_uring", "libaio", "pread" };
	const char *path = make_file("real", 1 << 20);
	char out[16384], args[1024], json[512], script[512], cmd[1400], exe[512];
	const char *b = getenv("RL_BUILD");
	FILE *f;

	snprintf(exe, sizeof(exe), "%s/rlperf", b ? b : "build");
	if (access(exe, X_OK))
		SKIP("build/rlperf not built");
	if (system("python3 -c '' >/dev/null 2>&1"))
		SKIP("python3 not installed");
	CHECK(path);
	snprintf(script, sizeof(script), "%s/real.py", th_tmpdir());
	f = fopen(script, "w");
	CHECK(f);
	fputs(real_check, f);
	fclose(f);
	for (int direct = 0; direct < 2; direct++) {
		for (size_t i = 0; i < RL_ARRAY_SIZE(engines); i++) {
			int rc;

			snprintf(json, sizeof(json), "%s/real-%s-%d.json", th_tmpdir(),
				 engines[i], direct);
			snprintf(args, sizeof(args), "--filename=%s --rw=randread --bs=4k "
				 "--iodepth=8 --direct=%d --engine=%s --output-format=json "
				 "> %s", path, direct, engines[i], json);
			rc = run_rlperf(args, out, sizeof(out));
			if (rc == 1 && strstr(out, "has no engine"))
				SKIP("the library has no engine yet");
			if (rc == 1 && i > 0 && strstr(out, "unavailable"))
				continue;  /* a backend this machine lacks */
			CHECKF(rc == 0, "rlperf --engine=%s --direct=%d: exit %d: %s",
			       engines[i], direct, rc, out);
			snprintf(cmd, sizeof(cmd), "python3 %s %s %s", script, json, names[i]);
			CHECKF(system(cmd) == 0, "%s: bad JSON", json);
		}
	}
}

static const char ckpt_check[] =
	"import json,struct,sys\n"
	"c=json.load(open(sys.argv[1]))['checkpoint']\n"
	"f=open(sys.argv[2],'rb'); n=struct.unpack('<Q',f.read(8))[0]\n"
	"h=json.loads(f.read(n)); h.pop('__metadata__',None)\n"
	"data=max(v['data_offsets'][1] for v in h.values())\n"
	"assert c['files']==1 and c['tensors']==len(h), c\n"
	"assert c['devices']==int(sys.argv[3]) and c['processes']==1, c\n"
	"assert c['bytes_read']>=c['bytes_needed']>0 and c['requests']>0, c\n"
	"assert sys.argv[3]!='1' or c['bytes_needed']==data, (c, data)\n"
	"assert c['read_s']>0 and c['total_s']>=c['read_s'] and c['gbps']>0, c\n";

/* Checkpoint mode through the public API, whole and sharded. */
static void binary_loads_a_checkpoint(void)
{
	const char *b = getenv("RL_BUILD");
	char out[4096], ck[512], json[512], script[512], args[1200], cmd[1600];
	const char *spec = "tools/sample-sharding.json";
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s/mkckpt", b ? b : "build");
	if (access(cmd, X_OK))
		SKIP("build/mkckpt not built");
	if (system("python3 -c '' >/dev/null 2>&1"))
		SKIP("python3 not installed");
	snprintf(ck, sizeof(ck), "%s/ck.safetensors", th_tmpdir());
	snprintf(cmd, sizeof(cmd), "%s/mkckpt %s --size 6M --layers 2 >/dev/null 2>&1",
		 b ? b : "build", ck);
	CHECKF(system(cmd) == 0, "%s failed", cmd);
	snprintf(script, sizeof(script), "%s/ck.py", th_tmpdir());
	f = fopen(script, "w");
	CHECK(f);
	fputs(ckpt_check, f);
	fclose(f);
	snprintf(json, sizeof(json), "%s/ck.json", th_tmpdir());

	snprintf(args, sizeof(args), "--checkpoint=%s --iodepth=4 --bs=1M "
		 "--output-format=json > %s", ck, json);
	CHECK_EQ(run_rlperf(args, out, sizeof(out)), 0);
	snprintf(cmd, sizeof(cmd), "python3 %s %s %s 1", script, json, ck);
	CHECKF(system(cmd) == 0, "%s: bad checkpoint JSON", json);

	if (!access(spec, R_OK)) {
		snprintf(args, sizeof(args), "--checkpoint %s --sharding %s --process 0 "
			 "--engine=libaio --output-format=json > %s", ck, spec, json);
		CHECK_EQ(run_rlperf(args, out, sizeof(out)), 0);
		snprintf(cmd, sizeof(cmd), "python3 %s %s %s 2", script, json, ck);
		CHECKF(system(cmd) == 0, "%s: bad sharded checkpoint JSON", json);
	}

	/* the normal report names every phase */
	snprintf(args, sizeof(args), "--checkpoint=%s", ck);
	CHECK_EQ(run_rlperf(args, out, sizeof(out)), 0);
	CHECK(strstr(out, "plan       :") && strstr(out, "read       :") &&
	      strstr(out, "scatter    :") && strstr(out, "queue      : depth") &&
	      strstr(out, "speed      :"));

	/* errors: one line, exit 1 */
	CHECK_EQ(run_rlperf("--checkpoint=/nonexistent.safetensors", out, sizeof(out)), 1);
	CHECK(!strncmp(out, "rlperf: ", 8) && strchr(out, '\n') == out + strlen(out) - 1);
	snprintf(args, sizeof(args), "--checkpoint=%s --sharding=/nonexistent.json", ck);
	CHECK_EQ(run_rlperf(args, out, sizeof(out)), 1);
	CHECK(strstr(out, "/nonexistent.json"));
	snprintf(args, sizeof(args), "--checkpoint=%s --iodepth=100000", ck);
	CHECK_EQ(run_rlperf(args, out, sizeof(out)), 2);
}

int main(void)
{
	RUN(sizes_take_fio_suffixes);
	RUN(times_default_to_seconds);
	RUN(fio_command_line_parses);
	RUN(bad_options_get_clear_errors);
	RUN(histogram_matches_fio_buckets);
	RUN(percentiles_follow_fio);
	RUN(stddev_is_exact);
	RUN(sequential_offsets_cover_the_region);
	RUN(random_offsets_are_a_permutation);
	RUN(runner_reads_every_block_once_per_job);
	RUN(runner_loops_on_time_and_skips_ramp);
	RUN(runner_reports_engine_errors);
	RUN(runner_checks_the_region);
	RUN(json_has_fios_shape);
	RUN(normal_output_reads_like_fio);
	RUN(block_sizes_print_as_fio);
	RUN(binary_rejects_bad_options);
	RUN(binary_reads_a_file);
	RUN(binary_loads_a_checkpoint);
	return th_done();
}
