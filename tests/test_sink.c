/*
 * test_sink.c - the engine with an asynchronous sink (sink_async.h: copies
 * run on another thread after a delay, sources poisoned after each wait),
 * on every backend, with one worker and several: bytes exact, no bounce
 * buffer reused before its copies ran, shards reported only once their
 * copies ran, copy errors (refused at once, or failing on the copier) fail
 * the run cleanly with nothing left in flight, and sessions of several
 * batches, a sink for each.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "harness.h"
#include "sink_async.h"

static const int backends[] = { ENG_IO_URING, ENG_LIBAIO, ENG_PREAD };
static int cur_backend = ENG_IO_URING;
static unsigned cur_workers = 1;

/* on_shard: every shard complete when reported, each once. */
struct shards {
	struct tu_plan *p;
	atomic_uint calls, incomplete, twice;
	atomic_uchar *seen;
};

static void on_shard(void *user, size_t s)
{
	struct shards *sh = user;

	if (!tu_shard_ok(sh->p, s))
		atomic_fetch_add(&sh->incomplete, 1);
	if (atomic_exchange(sh->seen + s, 1))
		atomic_fetch_add(&sh->twice, 1);
	atomic_fetch_add(&sh->calls, 1);
}

/* A plan of nitems items (strided and contiguous, three devices) over one
 * file: reads of at most chunk bytes, several copies each. */
static void make_plan(struct tu_plan *p, unsigned nitems, uint32_t chunk)
{
	uint64_t size = 1 << 20;

	memset(p, 0, sizeof(*p));
	p->align = 4096;
	p->chunk = chunk;
	tu_add_file(p, tu_path(th_tmpdir(), "sink.bin"), size, th_rand());
	for (unsigned i = 0; i < nitems; i++) {
		uint64_t off = th_rand() % (size - 64 * 1024);
		uint32_t len = 1 + (uint32_t)(th_rand() % 20000);

		if (i % 2)
			tu_add_item(p, 0, off, 1 + len % 500, 1 + (uint32_t)(th_rand() % 40),
				    1000, i % 3, 0);
		else
			tu_add_item(p, 0, off, len, 1, len, i % 3, (uint32_t)(th_rand() % 64));
	}
}

/* Runs p's job on the asynchronous sink a (delay_us per copy) with few
 * bounce buffers, so that each is reused many times. */
static int run_async(struct tu_plan *p, struct ts_async *a, struct shards *sh,
		     unsigned buffers, struct cm_err *e)
{
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct eng *eng;
	int ret;

	eng_opts_default(&o);
	o.backend = cur_backend;
	o.workers = cur_workers;
	o.buffers = buffers;
	o.buffer_bytes = p->chunk;
	tu_job(p, &job);
	job.sink = &a->sink;
	job.on_shard = on_shard;
	job.user = sh;
	ret = eng_create(&o, &eng, e);
	if (ret == 0)
		ret = eng_run(eng, &job, &st, e);
	eng_destroy(eng);
	return ret;
}

/* What every run must leave: one finish, nothing in flight, no op after
 * finish, no buffer reused early, no wait past what was handed over, and
 * every shard reported complete when it was reported. */
#define CHECK_CLEAN(a, sh, ok) \
	do { \
		CHECK_EQ((a)->finishes, 1); \
		CHECK_EQ((a)->finish_ok, (ok)); \
		CHECK_EQ((a)->in_flight, 0); \
		CHECK_EQ((a)->late_calls, 0); \
		CHECKF((a)->reused == 0, "%u copies from a buffer still read", (a)->reused); \
		CHECK_EQ((a)->bad_waits, 0); \
		CHECKF(atomic_load(&(sh)->incomplete) == 0, "%u shards reported early", \
		       atomic_load(&(sh)->incomplete)); \
		CHECK_EQ(atomic_load(&(sh)->twice), 0); \
	} while (0)

/* One test's plan, sink and shard record; a test that fails a check
 * returns at once, so the next start (or main) ends the last one. */
struct fixture {
	struct tu_plan p;
	struct ts_async a;
	struct shards sh;
	int live;
};

static struct fixture fx;

static void fixture_end(struct fixture *f)
{
	if (!f->live)
		return;
	ts_async_stop(&f->a);
	free(f->sh.seen);
	tu_free(&f->p);
	f->live = 0;
}

static int fixture_start(struct fixture *f, unsigned nitems, uint32_t chunk, unsigned delay_us)
{
	fixture_end(f);
	make_plan(&f->p, nitems, chunk);
	if (tu_build(&f->p) < 0)
		return -1;
	memset(&f->sh, 0, sizeof(f->sh));
	f->sh.p = &f->p;
	f->sh.seen = calloc(f->p.nitems + 1, sizeof(*f->sh.seen));
	if (!f->sh.seen)
		return -1;
	f->live = ts_async_start(&f->a, f->p.ndevs, f->p.staging, f->p.staging_bytes,
				 delay_us) == 0;
	return f->live ? 0 : -1;
}

/* Byte-exact through a slow copier with two buffers: each buffer is
 * waited for before its next read, sources poisoned after every wait. */
static void async_bytes_exact(void)
{
	struct fixture *f = &fx;
	struct cm_err e = { 0 };
	int ret;

	CHECK(fixture_start(f, 24, 16384, 200) == 0);
	ret = run_async(&f->p, &f->a, &f->sh, 2, &e);
	if (ret == RL_E_BACKEND) {
		fixture_end(f);
		SKIP(e.msg);
	}
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	CHECK_CLEAN(&f->a, &f->sh, 1);
	CHECK_EQ(atomic_load(&f->sh.calls), f->p.nitems);
	CHECK(f->a.waits > 0 && f->a.poisoned == f->a.copies);
	{
		uint64_t at = 0;
		int d = tu_compare(&f->p, &at);

		CHECKF(d == 0, "device %d differs at byte %llu", d - 1, (unsigned long long)at);
	}
	fixture_end(f);
}

/* Many one-copy shards, a slower copier, one buffer per worker: every
 * shard is reported only after its bytes are in place. */
static void async_shards_after_copies(void)
{
	struct fixture *f = &fx;
	struct cm_err e = { 0 };
	int ret;

	CHECK(fixture_start(f, 40, 4096, 500) == 0);
	ret = run_async(&f->p, &f->a, &f->sh, cur_workers, &e);
	if (ret == RL_E_BACKEND) {
		fixture_end(f);
		SKIP(e.msg);
	}
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	CHECK_CLEAN(&f->a, &f->sh, 1);
	CHECK_EQ(atomic_load(&f->sh.calls), f->p.nitems);
	fixture_end(f);
}

/* A copy the sink refuses, or one that fails on the copier (reported by
 * the next wait): the run fails with the sink's message, finish(0) runs
 * once, nothing stays in flight, and only complete shards were reported. */
static void async_copy_errors(void)
{
	for (int kind = 0; kind < 2 && !th_failed(); kind++) {
		struct fixture *f = &fx;
		struct cm_err e = { 0 };
		int ret;

		CHECK(fixture_start(f, 24, 16384, 100) == 0);
		if (kind == 0)
			f->a.fail_copy_at = 5;
		else
			f->a.fail_async_at = 5;
		ret = run_async(&f->p, &f->a, &f->sh, 2, &e);
		if (ret == RL_E_BACKEND) {
			fixture_end(f);
			SKIP(e.msg);
		}
		CHECKF(ret == -EIO && strstr(e.msg, "async-test sink") &&
		       strstr(e.msg, kind ? "on the copier" : "refused"),
		       "kind %d: %d %s", kind, ret, e.msg);
		CHECK_CLEAN(&f->a, &f->sh, 0);
		CHECK(atomic_load(&f->sh.calls) < f->p.nitems);
		fixture_end(f);
	}
}

/* A session of several batches, a sink of its own for each (as streaming
 * windows have): the buffers one batch's copies held are all back for the
 * next, and each sink is finished once. */
static void async_session_batches(void)
{
	struct fixture *f = &fx;
	struct eng_session_needs n = { 0 };
	struct eng_session *s = NULL;
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct eng *eng = NULL;
	struct cm_err e = { 0 };
	uint64_t at = 0;
	int ret, d = 0;

	CHECK(fixture_start(f, 12, 16384, 100) == 0);
	eng_opts_default(&o);
	o.backend = cur_backend;
	o.workers = cur_workers;
	o.buffers = 2;
	tu_job(&f->p, &job);
	n.all_bytes = n.bounce_bytes = 1 << 20;
	n.nreads = n.bounce = f->p.nreads;
	n.max_read = f->p.chunk;
	ret = eng_create(&o, &eng, &e);
	if (ret == 0)
		ret = eng_session_begin(eng, &job, &n, NULL, 0, &st, &s, &e);
	for (int b = 0; b < 3 && ret == 0 && !d; b++) {
		ts_async_stop(&f->a);
		CHECK(ts_async_start(&f->a, f->p.ndevs, f->p.staging, f->p.staging_bytes,
				     100) == 0);
		job.sink = &f->a.sink;
		tu_clear(&f->p, 0);
		ret = eng_session_run(s, &job, &st, &e);
		d = ret == 0 ? tu_compare(&f->p, &at) : 0;
		CHECKF(f->a.finishes == 1 && f->a.in_flight == 0 && !f->a.reused,
		       "batch %d: %u finishes, %llu in flight, %u reused", b, f->a.finishes,
		       (unsigned long long)f->a.in_flight, f->a.reused);
	}
	eng_session_end(s);
	eng_destroy(eng);
	fixture_end(f);
	if (ret == RL_E_BACKEND)
		SKIP(e.msg);
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	CHECKF(d == 0, "device %d differs at byte %llu", d - 1, (unsigned long long)at);
}

#define T(fn) TU_TEST(fn)

int main(void)
{
	static const struct tu_test each[] = {
		T(async_bytes_exact), T(async_shards_after_copies), T(async_copy_errors),
		T(async_session_batches),
	};

	th_seed();
	for (size_t b = 0; b < CM_ARRAY_SIZE(backends); b++) {
		cur_backend = backends[b];
		tu_run_workers(each, CM_ARRAY_SIZE(each), cur_backend, &cur_workers);
	}
	fixture_end(&fx);
	return th_done();
}
