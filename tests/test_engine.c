/*
 * test_engine.c - the engine on hand-made plans: every test on every
 * backend (io_uring, libaio, pread), byte for byte against an independent
 * in-memory slice of the files; direct and bounce reads, strided copies,
 * unaligned offsets and partial last blocks, buffered and tmpfs files, the
 * byte limiter, faults on the nth read, cancellation, bad plans, and an
 * unprivileged user under an 8 MiB RLIMIT_MEMLOCK.
 */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdatomic.h>
#include <stddef.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../engine/eng_int.h"
#include "engine_util.h"
#include "harness.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static const int backends[] = { ENG_IO_URING, ENG_LIBAIO, ENG_PREAD };
static int cur_backend = ENG_IO_URING;

static char *path_in(const char *dir, const char *name)
{
	static char buf[4][512];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, name);
	return buf[i];
}

/* Runs p on the current backend with opts tweaks; returns eng_run's code. */
static int run_plan(struct tu_plan *p, struct eng_opts *o, struct eng_stats *st,
		    struct rl_err *e, struct eng_job *jobx)
{
	struct eng_opts def;
	struct eng_job job;
	struct eng *eng;
	int ret;

	if (!o) {
		eng_opts_default(&def);
		o = &def;
	}
	o->backend = cur_backend;
	ret = eng_create(o, &eng, e);
	if (ret < 0)
		return ret;
	if (jobx) {
		job = *jobx;
	} else {
		tu_job(p, &job);
	}
	ret = eng_run(eng, &job, st, e);
	eng_destroy(eng);
	return ret;
}

static int backend_missing(int ret, const struct rl_err *e)
{
	return ret == RL_E_BACKEND;
}

#define RUN_OR_SKIP(ret, e) \
	do { \
		if (backend_missing(ret, e)) \
			SKIP((e)->msg); \
	} while (0)

#define CHECK_SAME(p) \
	do { \
		uint64_t at_ = 0; \
		int d_ = tu_compare(p, &at_); \
		CHECKF(d_ == 0, "device %d differs at byte %llu", d_ - 1, \
		       (unsigned long long)at_); \
	} while (0)

/* A whole file of odd size read in chunks: direct middles, a partial last
 * block through a bounce buffer, on O_DIRECT. */
static void whole_file_direct(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
	struct eng_stats st;
	struct rl_err e = { 0 };
	uint64_t size = (1 << 20) + 12345;
	int ret;

	tu_add_file(&p, path_in(th_tmpdir(), "whole.bin"), size, 1);
	tu_add_item(&p, 0, 0, (uint32_t)size, 1, 0, 0, 0);
	CHECK(tu_build(&p) == 0);
	ret = run_plan(&p, NULL, &st, &e, NULL);
	if (backend_missing(ret, &e)) {
		tu_free(&p);
		SKIP(e.msg);
	}
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	CHECK_SAME(&p);
	CHECK_EQ(st.backend, cur_backend);
	CHECK(st.bytes_direct >= (1 << 20));
	CHECK_EQ(st.bytes_read, size);
	CHECK(st.direct_io == 1);
	tu_free(&p);
}

/* Enough direct bytes for the prefault helper: correct with it, and a
 * failure early in the run stops it cleanly. */
static void large_direct(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 1 << 20, .use_direct = 1 };
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct rl_err e = { 0 };
	struct eng *eng;
	int ret;

	tu_add_file(&p, path_in(th_tmpdir(), "large.bin"), (24 << 20) + 4097, 14);
	tu_add_item(&p, 0, 0, (12 << 20) + 4096, 1, 0, 0, 0);
	tu_add_item(&p, 0, (12 << 20) + 4096, (12 << 20) + 1, 1, 0, 1, 0);
	CHECK(tu_build(&p) == 0);
	ret = run_plan(&p, NULL, &st, &e, NULL);
	if (backend_missing(ret, &e)) {
		tu_free(&p);
		SKIP(e.msg);
	}
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	CHECK_SAME(&p);
	CHECK(st.bytes_direct >= (24u << 20));

	tu_job(&p, &job);
	eng_opts_default(&o);
	o.backend = cur_backend;
	CHECK(eng_create(&o, &eng, &e) == 0);
	eng_set_fault(eng, ENG_AUTO, ENG_FAULT_EIO, 2);
	ret = eng_run(eng, &job, &st, &e);
	eng_destroy(eng);
	CHECKF(ret == -EIO, "%d %s", ret, e.msg);
	tu_free(&p);
}

/* Strided inner-dimension runs, several devices, overlapping sources,
 * unaligned offsets, chunked and single reads, misaligned staging. */
static void strided_and_unaligned(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 16 << 10, .use_direct = 1 };
	struct eng_stats st;
	struct rl_err e = { 0 };
	int ret;

	tu_add_file(&p, path_in(th_tmpdir(), "s1.bin"), 300000, 2);
	tu_add_file(&p, path_in(th_tmpdir(), "s2.bin"), 4096 * 3, 3);
	tu_add_item(&p, 0, 100, 24, 64, 96, 0, 0);        /* columns of a (64, 24) view */
	tu_add_item(&p, 0, 124, 72, 64, 96, 1, 0);        /* the other columns */
	tu_add_item(&p, 0, 7, 1, 1000, 3, 1, 5);          /* 1-byte runs, odd staging */
	tu_add_item(&p, 0, 8192, 65536, 1, 0, 0, 0);      /* aligned: direct */
	tu_add_item(&p, 0, 8192, 65536, 1, 0, 1, 100);    /* same bytes, misaligned dst */
	tu_add_item(&p, 0, 299990, 10, 1, 0, 0, 0);       /* last bytes of the file */
	tu_add_item(&p, 1, 0, 4096 * 3, 1, 0, 2, 0);      /* a whole aligned file */
	tu_add_item(&p, 1, 4000, 200, 2, 4096, 2, 0);     /* straddles blocks */
	CHECK(tu_build(&p) == 0);
	ret = run_plan(&p, NULL, &st, &e, NULL);
	if (backend_missing(ret, &e)) {
		tu_free(&p);
		SKIP(e.msg);
	}
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	CHECK_SAME(&p);
	CHECK(st.bytes_direct > 0);
	tu_free(&p);
}

/* Buffered reads at any offset and length (RL_OPT_DIRECT 0, or a file
 * system without O_DIRECT): align 1, nothing widened. */
static void buffered_unaligned(void)
{
	struct tu_plan p = { .align = 1, .chunk = 10000, .use_direct = 1 };
	struct eng_opts o;
	struct eng_stats st;
	struct rl_err e = { 0 };
	int ret;

	eng_opts_default(&o);
	o.direct = 0;
	tu_add_file(&p, path_in(th_tmpdir(), "b.bin"), 77777, 4);
	tu_add_item(&p, 0, 3, 77774, 1, 0, 0, 0);
	tu_add_item(&p, 0, 11, 5, 300, 17, 1, 3);
	tu_add_item(&p, 0, 4096, 8000, 1, 0, 1, 0);
	CHECK(tu_build(&p) == 0);
	ret = run_plan(&p, &o, &st, &e, NULL);
	if (backend_missing(ret, &e)) {
		tu_free(&p);
		SKIP(e.msg);
	}
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	CHECK_SAME(&p);
	CHECK_EQ(st.direct_io, 0);
	tu_free(&p);
}

/* tmpfs (/dev/shm): O_DIRECT since Linux 6.6, buffered before; both ways. */
static void tmpfs_files(void)
{
	char dir[] = "/dev/shm/ringload-test-XXXXXX";
	struct eng_stats st;
	struct rl_err e = { 0 };
	int ret;

	if (!mkdtemp(dir))
		SKIP("no /dev/shm");
	for (int direct = 0; direct < 2; direct++) {
		struct tu_plan p = { .align = 4096, .chunk = 32 << 10, .use_direct = 1 };
		struct eng_opts o;
		struct eng_align al;

		eng_opts_default(&o);
		o.direct = direct;
		tu_add_file(&p, path_in(dir, "t.bin"), 200001, 5);
		CHECK(eng_probe_align(p.paths[0], &al) == 0);
		if (!al.direct)
			p.align = 1;
		tu_add_item(&p, 0, 0, 200001, 1, 0, 0, 0);
		tu_add_item(&p, 0, 5000, 100, 50, 300, 1, 0);
		CHECK(tu_build(&p) == 0);
		ret = run_plan(&p, &o, &st, &e, NULL);
		unlink(p.paths[0]);
		if (backend_missing(ret, &e)) {
			tu_free(&p);
			rmdir(dir);
			SKIP(e.msg);
		}
		CHECKF(ret == 0, "%d %s", ret, e.msg);
		CHECK_SAME(&p);
		tu_free(&p);
	}
	rmdir(dir);
}

/* Random files, random items (contiguous and strided), random chunk,
 * queue depth, buffers and bound: every byte compared. */
static void random_plans(void)
{
	for (int round = 0; round < 6; round++) {
		struct tu_plan p = { 0 };
		struct eng_opts o;
		struct eng_stats st;
		struct rl_err e = { 0 };
		uint64_t size = 1 + th_rand() % (3 << 20);
		unsigned nitems = 1 + th_rand() % 12;
		int ret;

		p.align = th_rand() % 4 ? 4096 : 1;
		p.chunk = (uint32_t)(4096u << (th_rand() % 8));
		p.use_direct = (int)(th_rand() % 2);
		eng_opts_default(&o);
		o.direct = p.align > 1;
		o.queue_depth = 1 + th_rand() % 32;
		o.buffers = (unsigned)(th_rand() % 5);
		o.inflight_bytes = p.chunk * (1 + th_rand() % 8);
		o.register_buffers = (int)(th_rand() % 2);
		o.register_files = (int)(th_rand() % 2);
		tu_add_file(&p, path_in(th_tmpdir(), "r.bin"), size, th_rand());
		for (unsigned i = 0; i < nitems; i++) {
			/* RL_MIN evaluates its arguments twice: no th_rand() in it */
			uint64_t off = th_rand() % size, r = th_rand();
			uint32_t len = 1 + (uint32_t)(r % RL_MIN(size - off, 100000));
			uint32_t count = 1, stride = len, most;

			if (th_rand() % 2 && len < 2000) {
				stride = len + (uint32_t)(th_rand() % 3000);
				count = 1 + (uint32_t)((size - off - len) / stride);
				most = 1 + (uint32_t)(th_rand() % 200);
				count = RL_MIN(count, most);
			}
			tu_add_item(&p, 0, off, len, count, stride, (uint32_t)(th_rand() % 3),
				    (uint32_t)(th_rand() % 2 ? 0 : th_rand() % 4096));
		}
		CHECK(tu_build(&p) == 0);
		ret = run_plan(&p, &o, &st, &e, NULL);
		if (backend_missing(ret, &e)) {
			tu_free(&p);
			SKIP(e.msg);
		}
		CHECKF(ret == 0, "round %d: %d %s", round, ret, e.msg);
		CHECK_SAME(&p);
		CHECKF(st.peak_inflight <= o.inflight_bytes, "peak %llu > bound %llu",
		       (unsigned long long)st.peak_inflight,
		       (unsigned long long)o.inflight_bytes);
		tu_free(&p);
	}
}

/* A slow completion thread (on_shard sleeps): reads pile up to the bound
 * and never past it. ACCEPTANCE D4: 9 bytes of 4-byte reads -> 2 in
 * flight; 5 -> 1. */
struct slow {
	struct tu_plan *p;
	int bad;
	unsigned calls;
};

static void slow_shard(void *user, size_t shard)
{
	struct slow *s = user;

	if (!tu_shard_ok(s->p, shard))
		s->bad = 1;
	s->calls++;
	usleep(300);
}

static void limiter_bound(void)
{
	static const uint64_t bounds[] = { 9, 5, 4096, 3 * 4096 };

	for (size_t b = 0; b < RL_ARRAY_SIZE(bounds); b++) {
		struct tu_plan p = { .align = 1, .chunk = 4 };
		struct slow sl = { &p, 0, 0 };
		struct eng_opts o;
		struct eng_stats st;
		struct eng_job job;
		struct rl_err e = { 0 };
		uint64_t expect;
		int ret;

		eng_opts_default(&o);
		o.direct = 0;
		o.inflight_bytes = bounds[b];
		o.buffers = 64;
		tu_add_file(&p, path_in(th_tmpdir(), "l.bin"), 4096 * 8, 6);
		if (bounds[b] < 100) {
			for (unsigned i = 0; i < 64; i++)
				tu_add_item(&p, 0, 4 * i, 4, 1, 0, 0, 0);
			expect = bounds[b] / 4 * 4;
		} else {
			p.chunk = 4096;
			for (unsigned i = 0; i < 8; i++)
				tu_add_item(&p, 0, 4096 * i, 4096, 1, 0, 0, 0);
			expect = bounds[b];
		}
		CHECK(tu_build(&p) == 0);
		tu_job(&p, &job);
		job.on_shard = slow_shard;
		job.user = &sl;
		ret = run_plan(&p, &o, &st, &e, &job);
		if (backend_missing(ret, &e)) {
			tu_free(&p);
			SKIP(e.msg);
		}
		CHECKF(ret == 0, "%d %s", ret, e.msg);
		CHECK_SAME(&p);
		CHECK(!sl.bad);
		CHECK_EQ(sl.calls, p.nitems);
		CHECKF(st.peak_inflight == expect, "bound %llu: peak %llu, expected %llu",
		       (unsigned long long)bounds[b], (unsigned long long)st.peak_inflight,
		       (unsigned long long)expect);
		tu_free(&p);
	}
}

/* Shard callbacks: each one must see its shard's bytes complete. */
struct watch {
	struct tu_plan *p;
	int bad;
	unsigned calls;
	unsigned *seen;
};

static void watch_shard(void *user, size_t shard)
{
	struct watch *w = user;

	if (shard >= w->p->nitems || !tu_shard_ok(w->p, shard) || w->seen[shard]++)
		w->bad = 1;
	w->calls++;
}

static void fault_plan(struct tu_plan *p)
{
	p->align = 4096;
	p->chunk = 16 << 10;
	p->use_direct = 1;
	tu_add_file(p, path_in(th_tmpdir(), "f.bin"), 100000, 7);
	tu_add_item(p, 0, 0, 40960, 1, 0, 0, 0);          /* direct chunks */
	tu_add_item(p, 0, 50000, 30, 40, 1000, 1, 0);     /* strided, bounce */
	tu_add_item(p, 0, 99000, 1000, 1, 0, 1, 0);       /* partial last block */
}

/* EIO, a short read and EAGAIN on the nth submission, n over every read:
 * EIO fails cleanly (code, file, offset, length, errno text; no shard
 * reported that is not complete; nothing leaked); short reads and EAGAIN
 * recover with the same bytes. */
static void faults_nth_read(void)
{
	static const int kinds[] = { ENG_FAULT_EIO, ENG_FAULT_SHORT, ENG_FAULT_EAGAIN };
	struct tu_plan p = { 0 };
	struct eng_stats st;
	struct rl_err e = { 0 };
	uint64_t nreads;
	int ret;

	fault_plan(&p);
	CHECK(tu_build(&p) == 0);
	ret = run_plan(&p, NULL, &st, &e, NULL);
	if (backend_missing(ret, &e)) {
		tu_free(&p);
		SKIP(e.msg);
	}
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	nreads = st.reads;
	CHECK(nreads >= 4);
	for (size_t k = 0; k < RL_ARRAY_SIZE(kinds); k++) {
		for (uint64_t n = 0; n <= nreads; n++) {
			unsigned seen[8] = { 0 };
			struct watch w = { &p, 0, 0, seen };
			struct eng_opts o;
			struct eng_job job;
			struct eng *eng;

			tu_clear(&p, 0xAA);
			eng_opts_default(&o);
			o.backend = cur_backend;
			o.queue_depth = 1 + (unsigned)(n % 4);
			CHECK(eng_create(&o, &eng, &e) == 0);
			eng_set_fault(eng, ENG_AUTO, kinds[k], n);
			tu_job(&p, &job);
			job.on_shard = watch_shard;
			job.user = &w;
			ret = eng_run(eng, &job, &st, &e);
			eng_destroy(eng);
			CHECKF(!w.bad, "kind %d n %llu: a shard reported incomplete or twice",
			       kinds[k], (unsigned long long)n);
			if (kinds[k] == ENG_FAULT_EIO && n < nreads) {
				CHECKF(ret == -EIO, "n %llu: %d %s", (unsigned long long)n, ret, e.msg);
				CHECKF(strstr(e.msg, "f.bin") && strstr(e.msg, "offset") &&
				       strstr(e.msg, "length") &&
				       strstr(e.msg, "Input/output error"), "message: %s", e.msg);
				CHECK(w.calls < p.nitems);
				continue;
			}
			CHECKF(ret == 0, "kind %d n %llu: %d %s", kinds[k], (unsigned long long)n,
			       ret, e.msg);
			CHECK_SAME(&p);
			CHECK_EQ(w.calls, p.nitems);
			if (n < nreads && kinds[k] == ENG_FAULT_EAGAIN)
				CHECK(st.retries >= 1);
		}
	}
	tu_free(&p);
}

/*
 * A hard submit error (not EAGAIN/EBUSY/EINTR) with reads in the kernel,
 * and reaping failing after it: the run fails with that error, and no
 * request is left in the kernel when eng_run() returns (the backend drained
 * it before freeing buffers and staging), at every point of the run.
 */
static void hard_submit_error(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
	struct rl_err e = { 0 };
	struct eng_stats st;
	uint64_t nreads;
	int ret;

	tu_add_file(&p, path_in(th_tmpdir(), "hard.bin"), (2 << 20) + 333, 21);
	tu_add_item(&p, 0, 0, 1 << 20, 1, 0, 0, 0);             /* direct */
	tu_add_item(&p, 0, 1 << 20, (1 << 20) + 333, 1, 0, 1, 0); /* + partial block */
	CHECK(tu_build(&p) == 0);
	ret = run_plan(&p, NULL, &st, &e, NULL);
	if (backend_missing(ret, &e)) {
		tu_free(&p);
		SKIP(e.msg);
	}
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	nreads = st.reads;
	CHECK(nreads >= 8);
	for (uint64_t n = 0; n < nreads; n += 3) {
		struct eng_opts o;
		struct eng_job job;
		struct eng *eng;

		eng_opts_default(&o);
		o.backend = cur_backend;
		o.queue_depth = 8;
		CHECK(eng_create(&o, &eng, &e) == 0);
		eng_set_fault(eng, ENG_AUTO, ENG_FAULT_HARD, n);
		tu_job(&p, &job);
		ret = eng_run(eng, &job, &st, &e);
		eng_destroy(eng);
		CHECKF(ret == -ENOMEM, "n %llu: %d %s", (unsigned long long)n, ret, e.msg);
		CHECKF(strstr(e.msg, "Cannot allocate memory"), "n %llu: %s",
		       (unsigned long long)n, e.msg);
		CHECKF(st.abandoned == 0, "n %llu: %llu requests left in the kernel",
		       (unsigned long long)n, (unsigned long long)st.abandoned);
	}
	tu_free(&p);
}

/*
 * libaio's blocking reap sleeps until a completion or a wake-up: with
 * nothing in flight it does not come back on its own (it used to poll
 * io_getevents every 1 ms), and wake() from another thread ends the wait.
 */
struct aio_waiter {
	struct be *be;
	atomic_int returned;
	int ret;
};

static void *aio_wait_main(void *arg)
{
	struct aio_waiter *w = arg;
	struct eng_req *out[4];

	w->ret = w->be->ops->reap(w->be, out, 4, 1);
	atomic_store(&w->returned, 1);
	return NULL;
}

static void aio_reap_sleeps_until_woken(void)
{
	struct eng_run rc;
	struct eng_stats st;
	struct be be;
	struct aio_waiter w;
	pthread_t th;
	int ret;

	memset(&rc, 0, sizeof(rc));
	memset(&st, 0, sizeof(st));
	memset(&be, 0, sizeof(be));
	rc.st = &st;
	rc.qd = 4;
	rc.nreqs = 4;
	be.ops = &eng_aio_ops;
	be.run = &rc;
	ret = be.ops->setup(&be);
	if (ret < 0)
		SKIP("libaio unavailable");
	memset(&w, 0, sizeof(w));
	w.be = &be;
	CHECK(pthread_create(&th, NULL, aio_wait_main, &w) == 0);
	usleep(50 * 1000);
	ret = atomic_load(&w.returned);
	be.ops->wake(&be);
	for (int i = 0; i < 2000 && !atomic_load(&w.returned); i++)
		usleep(1000);
	CHECK(atomic_load(&w.returned)); /* else the join below hangs */
	pthread_join(th, NULL);
	be.ops->teardown(&be);
	CHECKF(ret == 0, "the reap returned with nothing in flight and no wake-up");
	CHECK_EQ(w.ret, 0);
}

/* The file is shorter than the plan believes: a clear "truncated" error. */
static void truncated_file(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
	struct eng_stats st;
	struct rl_err e = { 0 };
	int ret;

	tu_add_file(&p, path_in(th_tmpdir(), "tr.bin"), 100000, 8);
	tu_add_item(&p, 0, 0, 100000, 1, 0, 0, 0);
	CHECK(tu_build(&p) == 0);
	CHECK(truncate(p.paths[0], 99992) == 0);
	ret = run_plan(&p, NULL, &st, &e, NULL);
	if (backend_missing(ret, &e)) {
		tu_free(&p);
		SKIP(e.msg);
	}
	CHECKF(ret == RL_E_TRUNCATED, "%d %s", ret, e.msg);
	CHECKF(strstr(e.msg, "truncated") && strstr(e.msg, "tr.bin"), "%s", e.msg);
	tu_free(&p);
}

/* A missing file, a read past the bound, a copy out of bounds, a direct
 * read with two copies: refused with a message, nothing read. */
static void bad_jobs(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct rl_err e = { 0 };
	char *saved;
	int ret;

	tu_add_file(&p, path_in(th_tmpdir(), "bad.bin"), 50000, 9);
	tu_add_item(&p, 0, 0, 50000, 1, 0, 0, 0);
	CHECK(tu_build(&p) == 0);

	saved = p.paths[0];
	p.paths[0] = path_in(th_tmpdir(), "nope.bin");
	ret = run_plan(&p, NULL, &st, &e, NULL);
	p.paths[0] = saved;
	CHECKF(ret == -ENOENT && strstr(e.msg, "nope.bin"), "%d %s", ret, e.msg);

	eng_opts_default(&o);
	o.inflight_bytes = 4096;
	ret = run_plan(&p, &o, &st, &e, NULL);
	CHECKF(ret == RL_E_INVALID_ARG && strstr(e.msg, "bound"), "%d %s", ret, e.msg);

	p.copies[0].dst = p.staging_bytes[0];
	ret = run_plan(&p, NULL, &st, &e, NULL);
	CHECKF(ret == RL_E_INVALID_ARG && strstr(e.msg, "out of bounds"), "%d %s", ret, e.msg);
	p.copies[0].dst = 0;

	tu_job(&p, &job);
	job.ncopies = 0;
	ret = run_plan(&p, NULL, &st, &e, &job);
	CHECKF(ret == RL_E_INVALID_ARG, "%d %s", ret, e.msg);

	p.reads[0].min_len = p.reads[0].len + 1;
	ret = run_plan(&p, NULL, &st, &e, NULL);
	CHECKF(ret == RL_E_INVALID_ARG, "%d %s", ret, e.msg);
	tu_free(&p);
}

/* A hand-made job: one file of fsize bytes, reads and copies as given,
 * one 64 KiB staging area, shards as given; run on backend with bound. */
struct hand {
	const char *paths[1];
	uint64_t sizes[1];
	uint8_t *staging[1];
	uint64_t staging_bytes[1];
	struct eng_job job;
};

static void hand_job(struct hand *h, const char *name, uint64_t fsize,
		     const struct rl_read *reads, size_t nreads,
		     const struct rl_copy *copies, size_t ncopies,
		     const uint64_t *shard_bytes, size_t nshards)
{
	uint8_t *content;

	memset(h, 0, sizeof(*h));
	h->paths[0] = path_in(th_tmpdir(), name);
	content = tu_write_file(h->paths[0], fsize, 21);
	free(content);
	h->sizes[0] = fsize;
	h->staging_bytes[0] = 64 << 10;
	h->staging[0] = calloc(1, 64 << 10);
	h->job.nfiles = 1;
	h->job.paths = h->paths;
	h->job.file_sizes = h->sizes;
	h->job.reads = reads;
	h->job.nreads = nreads;
	h->job.copies = copies;
	h->job.ncopies = ncopies;
	h->job.ndevs = 1;
	h->job.staging = h->staging;
	h->job.staging_bytes = h->staging_bytes;
	h->job.shard_bytes = shard_bytes;
	h->job.nshards = nshards;
}

static int hand_run(struct hand *h, int backend, uint64_t bound, struct eng_stats *st,
		    struct rl_err *e)
{
	struct eng_opts o;
	struct eng *eng;
	int ret;

	eng_opts_default(&o);
	o.backend = backend;
	if (bound)
		o.inflight_bytes = bound;
	ret = eng_create(&o, &eng, e);
	if (ret < 0)
		return ret;
	ret = eng_run(eng, &h->job, st, e);
	eng_destroy(eng);
	return ret;
}

/* A bounce read just under 4 GiB: its buffer size must not wrap to 0
 * (a one-page buffer the kernel would read 4 GiB into); refused. */
static void huge_bounce_read(void)
{
	struct rl_read r = { .off = 0, .len = 0xFFFFF001u, .min_len = 1 };
	struct rl_copy c = { .src = 0, .len = 1, .count = 1 };
	struct eng_stats st;
	struct eng_pool pool;
	struct eng_run rc;
	struct rl_err e = { 0 };
	struct hand h;
	int ret;

	hand_job(&h, "huge.bin", 8192, &r, 1, &c, 1, NULL, 0);
	r.ncopies = 1;
	ret = hand_run(&h, ENG_PREAD, 8ull << 30, &st, &e);
	free(h.staging[0]);
	CHECKF(ret == RL_E_INVALID_ARG && strstr(e.msg, "bounce buffer"), "%d %s", ret, e.msg);
	CHECK_EQ(st.reads, 0);

	memset(&rc, 0, sizeof(rc));
	rc.st = &st;
	ret = eng_pool_create(&pool, 1, 0xFFFFF001u, &rc);
	if (ret == 0)
		eng_pool_destroy(&pool);
	CHECKF(ret < 0, "pool of 0xFFFFF001 bytes: %d", ret);
}

/* Empty copies (count 0) are checked like any other: a device or shard
 * out of range is refused before the completion thread indexes it. */
static void empty_copy_bounds(void)
{
	struct rl_read r = { .off = 0, .len = 4096, .min_len = 4096, .ncopies = 2 };
	struct rl_copy c[2] = {
		{ .src = 0, .len = 4096, .count = 1, .dst = 0, .dev = 0, .shard = 0 },
		{ .src = 0, .len = 16, .count = 0, .dst = 8192, .dev = 0, .shard = 0 },
	};
	uint64_t shard_bytes[1] = { 4096 };
	struct eng_stats st;
	struct rl_err e = { 0 };
	struct hand h;
	int ret;

	hand_job(&h, "empty_copy.bin", 8192, &r, 1, c, 2, shard_bytes, 1);
	ret = hand_run(&h, ENG_PREAD, 0, &st, &e);
	CHECKF(ret == 0, "%d %s", ret, e.msg);

	c[1].dev = 99;
	ret = hand_run(&h, ENG_PREAD, 0, &st, &e);
	CHECKF(ret == RL_E_INVALID_ARG && strstr(e.msg, "copy 1"), "%d %s", ret, e.msg);
	c[1].dev = 0;
	c[1].shard = 1000000;
	ret = hand_run(&h, ENG_PREAD, 0, &st, &e);
	CHECKF(ret == RL_E_INVALID_ARG && strstr(e.msg, "copy 1"), "%d %s", ret, e.msg);
	c[1].shard = 0;
	h.job.nshards = SIZE_MAX; /* nshards + 1 entries must not wrap */
	ret = hand_run(&h, ENG_PREAD, 0, &st, &e);
	CHECKF(ret == RL_E_INVALID_ARG && strstr(e.msg, "shards"), "%d %s", ret, e.msg);
	h.job.nshards = 1;
	c[1].dst = (64 << 10) + 1;
	ret = hand_run(&h, ENG_PREAD, 0, &st, &e);
	free(h.staging[0]);
	CHECKF(ret == RL_E_INVALID_ARG && strstr(e.msg, "copy 1"), "%d %s", ret, e.msg);
}

/* on_shard fires exactly once per shard: a copy landing no bytes does not
 * re-report a full shard nor report a zero-byte one early; a plan covering
 * a shard's bytes twice is refused (it would report the shard half-done). */
static unsigned shard_calls[3];
static void count_shard_calls(void *user, size_t shard)
{
	(void)user;
	if (shard < 3)
		shard_calls[shard]++;
}

static void shard_reported_once(void)
{
	struct rl_read r[2] = {
		{ .off = 0, .len = 4096, .min_len = 4096, .first_copy = 0, .ncopies = 4 },
		{ .off = 0, .len = 4096, .min_len = 4096, .first_copy = 0, .ncopies = 1 },
	};
	struct rl_copy c[4] = {
		{ .src = 0, .len = 4096, .count = 1, .dst = 0, .shard = 0 },
		{ .src = 0, .len = 0, .count = 1, .dst = 4096, .shard = 1 },
		{ .src = 0, .len = 16, .count = 0, .dst = 4096, .shard = 0 },
		{ .src = 0, .len = 0, .count = 3, .dst = 4096, .shard = 2 },
	};
	uint64_t shard_bytes[3] = { 4096, 0, 0 };
	struct eng_stats st;
	struct rl_err e = { 0 };
	struct hand h;
	int ret;

	for (size_t b = 0; b < RL_ARRAY_SIZE(backends); b++) {
		hand_job(&h, "once.bin", 8192, r, 1, c, 4, shard_bytes, 3);
		h.job.on_shard = count_shard_calls;
		memset(shard_calls, 0, sizeof(shard_calls));
		ret = hand_run(&h, backends[b], 0, &st, &e);
		if (ret == RL_E_BACKEND) {
			free(h.staging[0]);
			continue;
		}
		CHECKF(ret == 0, "%s: %d %s", eng_backend_name(backends[b]), ret, e.msg);
		CHECKF(shard_calls[0] == 1 && shard_calls[1] == 1 && shard_calls[2] == 1,
		       "%s: on_shard calls %u %u %u", eng_backend_name(backends[b]),
		       shard_calls[0], shard_calls[1], shard_calls[2]);

		/* The same bytes twice for shard 0. */
		h.job.nreads = 2;
		memset(shard_calls, 0, sizeof(shard_calls));
		ret = hand_run(&h, backends[b], 0, &st, &e);
		free(h.staging[0]);
		CHECKF(ret == RL_E_INVALID_ARG && strstr(e.msg, "twice"), "%s: %d %s",
		       eng_backend_name(backends[b]), ret, e.msg);
		CHECK_EQ(shard_calls[0], 0);
	}
}

/* libaio's io_submit refusing with EAGAIN while nothing of ours is in the
 * kernel: a few refusals are retried after short sleeps (the owner used to
 * sleep forever in poll), persistent ones fail the run clearly. In a child
 * with an alarm, so a hang fails the test rather than the suite. */
static int aio_refuse_child(struct tu_plan *p, uint32_t n)
{
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct rl_err e = { 0 };
	struct eng *eng;
	uint64_t at;
	int ret;

	alarm(20);
	eng_opts_default(&o);
	o.backend = ENG_LIBAIO;
	o.queue_depth = 2;
	if (eng_create(&o, &eng, &e) < 0)
		return 1;
	eng_set_aio_refuse(eng, n);
	tu_job(p, &job);
	tu_clear(p, 0xAB);
	ret = eng_run(eng, &job, &st, &e);
	eng_destroy(eng);
	if (ret == RL_E_BACKEND)
		return 4;
	if (n == UINT32_MAX) {
		if (ret == -EAGAIN && strstr(e.msg, "libaio") && strstr(e.msg, "EAGAIN"))
			return 0;
	} else if (ret == 0 && tu_compare(p, &at) == 0) {
		return 0;
	}
	printf("    child (%u refusals): %d %s\n", n, ret, e.msg);
	return 1;
}

static void aio_submit_refused(void)
{
	static const uint32_t refusals[] = { 1, 2, 5, UINT32_MAX };
	struct tu_plan p = { .align = 4096, .chunk = 16 << 10, .use_direct = 1 };

	tu_add_file(&p, path_in(th_tmpdir(), "refuse.bin"), 70000, 16);
	tu_add_item(&p, 0, 0, 70000, 1, 0, 0, 0);
	CHECK(tu_build(&p) == 0);
	for (size_t i = 0; i < RL_ARRAY_SIZE(refusals); i++) {
		int status = 0;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0)
			_exit(aio_refuse_child(&p, refusals[i]));
		CHECK(waitpid(pid, &status, 0) == pid);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 4) {
			tu_free(&p);
			SKIP("libaio unavailable");
		}
		CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		       "%u refusals: child status %d", refusals[i], status);
	}
	tu_free(&p);
}

/* Bytes past min_len may not arrive (a short read stopping there is
 * accepted): a copy taking them, or a direct read crediting them, would
 * land stale bytes; refused. */
static void copies_within_min_len(void)
{
	struct rl_read r = { .off = 0, .len = 8192, .min_len = 4096, .ncopies = 1 };
	struct rl_copy c = { .src = 0, .len = 4096, .count = 1 };
	uint64_t shard_bytes[1] = { 4096 };
	struct eng_stats st;
	struct rl_err e = { 0 };
	struct hand h;
	int ret;

	hand_job(&h, "minlen.bin", 8192, &r, 1, &c, 1, shard_bytes, 1);
	ret = hand_run(&h, ENG_PREAD, 0, &st, &e);
	CHECKF(ret == 0, "%d %s", ret, e.msg);

	c.src = 1; /* one byte past min_len */
	ret = hand_run(&h, ENG_PREAD, 0, &st, &e);
	CHECKF(ret == RL_E_INVALID_ARG && strstr(e.msg, "minimum length"), "%d %s", ret,
	       e.msg);

	c.src = 0;
	c.len = 8192;
	shard_bytes[0] = 8192;
	r.flags = RL_READ_DIRECT;
	ret = hand_run(&h, ENG_PREAD, 0, &st, &e);
	free(h.staging[0]);
	CHECKF(ret == RL_E_INVALID_ARG, "%d %s", ret, e.msg);
}

/* A read the kernel keeps refusing with EAGAIN is retried with a growing
 * back-off (not 1000 times in a few microseconds), then fails clearly. */
static void eagain_backs_off(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct rl_err e = { 0 };
	struct eng *eng;
	uint64_t t0, ns;
	int ret;

	tu_add_file(&p, path_in(th_tmpdir(), "eagain.bin"), 60000, 18);
	tu_add_item(&p, 0, 0, 60000, 1, 0, 0, 0);
	CHECK(tu_build(&p) == 0);
	tu_job(&p, &job);
	eng_opts_default(&o);
	o.backend = ENG_PREAD;
	CHECK(eng_create(&o, &eng, &e) == 0);
	eng_set_fault(eng, ENG_AUTO, ENG_FAULT_EAGAIN_ALL, 0);
	t0 = eng_now_ns();
	ret = eng_run(eng, &job, &st, &e);
	ns = eng_now_ns() - t0;
	eng_destroy(eng);
	tu_free(&p);
	CHECKF(ret == -EIO && strstr(e.msg, "EAGAIN"), "%d %s", ret, e.msg);
	CHECKF(ns > 100000000ull, "1000 EAGAIN retries took only %llu us",
	       (unsigned long long)(ns / 1000));
}

/* A direct read coming back short off the alignment is resubmitted from
 * the aligned position before: the re-read prefix counts once in
 * bytes_read, and the bytes are right. */
static void short_odd_counts_once(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct rl_err e = { 0 };
	struct eng *eng;
	int ret;

	tu_add_file(&p, path_in(th_tmpdir(), "odd.bin"), 256 << 10, 19);
	tu_add_item(&p, 0, 0, 256 << 10, 1, 0, 0, 0);
	CHECK(tu_build(&p) == 0);
	for (size_t b = 0; b < RL_ARRAY_SIZE(backends); b++) {
		tu_job(&p, &job);
		tu_clear(&p, 0xCD);
		eng_opts_default(&o);
		o.backend = backends[b];
		CHECK(eng_create(&o, &eng, &e) == 0);
		eng_set_fault(eng, ENG_AUTO, ENG_FAULT_SHORT_ODD, 1);
		ret = eng_run(eng, &job, &st, &e);
		eng_destroy(eng);
		if (ret == RL_E_BACKEND)
			continue;
		CHECKF(ret == 0, "%s: %d %s", eng_backend_name(backends[b]), ret, e.msg);
		CHECK_SAME(&p);
		CHECK(st.retries >= 1);
		CHECKF(st.bytes_read == 256 << 10, "%s: bytes_read %llu",
		       eng_backend_name(backends[b]), (unsigned long long)st.bytes_read);
	}
	tu_free(&p);
}

/* No reads at all; zero-byte shards are reported once, at the end. */
static unsigned zero_calls;
static void count_shard(void *user, size_t shard)
{
	(void)user;
	(void)shard;
	zero_calls++;
}

static void empty_job(void)
{
	uint64_t shard_bytes[3] = { 0, 0, 0 };
	struct eng_job job;
	struct eng_opts o;
	struct eng_stats st;
	struct rl_err e = { 0 };
	struct eng *eng;
	int ret;

	memset(&job, 0, sizeof(job));
	job.nshards = 3;
	job.shard_bytes = shard_bytes;
	job.on_shard = count_shard;
	zero_calls = 0;
	eng_opts_default(&o);
	o.backend = cur_backend;
	CHECK(eng_create(&o, &eng, &e) == 0);
	ret = eng_run(eng, &job, &st, &e);
	eng_destroy(eng);
	if (backend_missing(ret, &e))
		SKIP(e.msg);
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	CHECK_EQ(zero_calls, 3);
	CHECK_EQ(st.bytes_read, 0);
	CHECK_EQ(st.reads, 0);
}

/* A progress callback that says stop cancels the run cleanly. */
static int stop_at_half(void *user, uint64_t done, uint64_t total)
{
	(void)user;
	return done * 2 >= total;
}

static void progress_cancels(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
	struct eng_stats st;
	struct eng_job job;
	struct rl_err e = { 0 };
	int ret;

	tu_add_file(&p, path_in(th_tmpdir(), "pc.bin"), 8 << 20, 10);
	tu_add_item(&p, 0, 0, 8 << 20, 1, 0, 0, 0);
	CHECK(tu_build(&p) == 0);
	tu_job(&p, &job);
	job.on_progress = stop_at_half;
	job.total_bytes = 8 << 20;
	ret = run_plan(&p, NULL, &st, &e, &job);
	if (backend_missing(ret, &e)) {
		tu_free(&p);
		SKIP(e.msg);
	}
	CHECKF(ret == RL_E_CANCELED, "%d %s", ret, e.msg);
	tu_free(&p);
}

/* rlperf's shape: a generator of reads with no copies. */
struct gen {
	uint64_t next, end;
	uint32_t len;
	unsigned nread;
};

static int gen_next(void *user, struct rl_read *out)
{
	struct gen *g = user;

	if (g->next >= g->end)
		return 0;
	memset(out, 0, sizeof(*out));
	out->off = g->next;
	out->len = out->min_len = g->len;
	g->next += g->len;
	return 1;
}

static void on_read_count(void *user, const struct rl_read *r, uint64_t s, uint64_t c)
{
	struct gen *g = user;

	if (c >= s && r->len == g->len)
		g->nread++;
}

static void generator_no_copies(void)
{
	struct tu_plan p = { 0 };
	struct gen g = { 0, 4 << 20, 128 << 10, 0 };
	const char *paths[1];
	uint64_t sizes[1] = { 4 << 20 };
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct rl_err e = { 0 };
	int ret;

	tu_add_file(&p, path_in(th_tmpdir(), "g.bin"), 4 << 20, 11);
	paths[0] = p.paths[0];
	memset(&job, 0, sizeof(job));
	job.nfiles = 1;
	job.paths = paths;
	job.file_sizes = sizes;
	job.next = gen_next;
	job.on_read = on_read_count;
	job.user = &g;
	eng_opts_default(&o);
	o.buffer_bytes = 128 << 10;
	ret = run_plan(&p, &o, &st, &e, &job);
	if (backend_missing(ret, &e)) {
		tu_free(&p);
		SKIP(e.msg);
	}
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	CHECK_EQ(st.bytes_read, 4 << 20);
	CHECK_EQ(g.nread, 32);
	if (cur_backend == ENG_IO_URING)
		CHECK(st.registered_buffers > 0 && st.registered_files);
	tu_free(&p);
}

/* io_uring refused (as with kernel.io_uring_disabled or a seccomp filter):
 * auto falls back to libaio and says why; forcing io_uring fails. */
static void setup_refused_falls_back(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct rl_err e = { 0 };
	struct eng *eng;
	int ret;

	tu_add_file(&p, path_in(th_tmpdir(), "fb.bin"), 70000, 12);
	tu_add_item(&p, 0, 0, 70000, 1, 0, 0, 0);
	CHECK(tu_build(&p) == 0);
	tu_job(&p, &job);
	eng_opts_default(&o);
	CHECK(eng_create(&o, &eng, &e) == 0);
	eng_set_fault(eng, ENG_IO_URING, ENG_FAULT_SETUP, 0);
	ret = eng_run(eng, &job, &st, &e);
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	CHECK_SAME(&p);
	CHECK(st.backend == ENG_LIBAIO || st.backend == ENG_PREAD);
	CHECKF(strstr(st.fallbacks, "io_uring unavailable: Operation not permitted"), "%s",
	       st.fallbacks);
	eng_destroy(eng);

	o.backend = ENG_IO_URING;
	CHECK(eng_create(&o, &eng, &e) == 0);
	eng_set_fault(eng, ENG_IO_URING, ENG_FAULT_SETUP, 0);
	ret = eng_run(eng, &job, &st, &e);
	eng_destroy(eng);
	CHECKF(ret == RL_E_BACKEND && strstr(e.msg, "io_uring"), "%d %s", ret, e.msg);
	tu_free(&p);
}

/* The kernel refusing the ring's memory (ENOMEM: RLIMIT_MEMLOCK before
 * 5.12) is a reason to fall back, unlike our own allocations failing
 * (alloc_failures); forcing io_uring fails with the reason. */
static void uring_enomem_falls_back(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct rl_err e = { 0 };
	struct eng *eng;
	int ret;

	tu_add_file(&p, path_in(th_tmpdir(), "nomem.bin"), 70000, 17);
	tu_add_item(&p, 0, 0, 70000, 1, 0, 0, 0);
	CHECK(tu_build(&p) == 0);
	tu_job(&p, &job);
	eng_opts_default(&o);
	CHECK(eng_create(&o, &eng, &e) == 0);
	eng_set_uring_setup_err(eng, ENOMEM);
	ret = eng_run(eng, &job, &st, &e);
	eng_destroy(eng);
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	CHECK_SAME(&p);
	CHECK(st.backend == ENG_LIBAIO || st.backend == ENG_PREAD);
	CHECKF(strstr(st.fallbacks, "io_uring unavailable: Cannot allocate memory"), "%s",
	       st.fallbacks);

	o.backend = ENG_IO_URING;
	CHECK(eng_create(&o, &eng, &e) == 0);
	eng_set_uring_setup_err(eng, ENOMEM);
	ret = eng_run(eng, &job, &st, &e);
	eng_destroy(eng);
	CHECKF(ret == RL_E_BACKEND && strstr(e.msg, "io_uring"), "%d %s", ret, e.msg);
	tu_free(&p);
}

/* A real seccomp filter refusing io_uring_setup with errno err (as
 * container runtimes do), installed in a child: auto falls back to libaio
 * and says why. */
static int seccomp_child(struct tu_plan *p, int err)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (uint32_t)err),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { RL_ARRAY_SIZE(f), f };
	struct eng_opts o;
	struct eng_stats st;
	struct rl_err e = { 0 };
	char want[128];
	uint64_t at;
	int ret;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		return 4;
	eng_opts_default(&o);
	o.backend = ENG_AUTO;
	cur_backend = ENG_AUTO;
	ret = run_plan(p, &o, &st, &e, NULL);
	snprintf(want, sizeof(want), "io_uring unavailable: %s", strerror(err));
	if (ret || tu_compare(p, &at) || st.backend != ENG_LIBAIO || !strstr(st.fallbacks, want)) {
		printf("    child: %d %s; backend %d; fallbacks '%s'\n", ret, e.msg, st.backend,
		       st.fallbacks);
		return 1;
	}
	return 0;
}

static void seccomp_falls_back(void)
{
	static const int errs[] = { ENOSYS, EPERM };
#if defined(__x86_64__)
	struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };

	tu_add_file(&p, path_in(th_tmpdir(), "sc.bin"), 90000, 15);
	tu_add_item(&p, 0, 0, 90000, 1, 0, 0, 0);
	tu_add_item(&p, 0, 100, 30, 50, 1000, 1, 0);
	CHECK(tu_build(&p) == 0);
	for (size_t i = 0; i < RL_ARRAY_SIZE(errs); i++) {
		int status = 0;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0)
			_exit(seccomp_child(&p, errs[i]));
		CHECK(waitpid(pid, &status, 0) == pid);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 4) {
			tu_free(&p);
			SKIP("seccomp filters unavailable");
		}
		CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: child status %d",
		       strerror(errs[i]), status);
	}
	tu_free(&p);
#else
	(void)errs;
	SKIP("seccomp filter written for x86_64");
#endif
}

/* An unprivileged user (no CAP_IPC_LOCK, RLIMIT_MEMLOCK 8 MiB) with a
 * 32 MiB pool: registration and locking shrink or stop, the load
 * succeeds with the same bytes and the stats say so. */
static void unprivileged_memlock(void)
{
	char dir[] = "/tmp/ringload-memlock-XXXXXX";
	struct tu_plan p = { .align = 4096, .chunk = 1 << 20, .use_direct = 0 };
	int status = 0;
	pid_t pid;

	if (geteuid() != 0)
		SKIP("needs root to switch to an unprivileged user");
	CHECK(mkdtemp(dir));
	CHECK(chmod(dir, 0755) == 0);
	tu_add_file(&p, path_in(dir, "m.bin"), 48 << 20, 13);
	for (unsigned i = 0; i < 48; i++)
		tu_add_item(&p, 0, (uint64_t)i << 20, 1 << 20, 1, 0, i % 2, 0);
	CHECK(tu_build(&p) == 0);
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = { 8 << 20, 8 << 20 };
		struct eng_opts o;
		struct eng_stats st;
		struct rl_err e = { 0 };
		uint64_t at;
		int ret;

		if (setrlimit(RLIMIT_MEMLOCK, &rl) || setgroups(0, NULL) ||
		    setgid(65534) || setuid(65534))
			_exit(3);
		eng_opts_default(&o);
		o.backend = cur_backend;
		o.buffers = 32;
		o.inflight_bytes = 64 << 20;
		ret = run_plan(&p, &o, &st, &e, NULL);
		if (ret == RL_E_BACKEND)
			_exit(4);
		if (ret) {
			printf("    child: %d %s\n", ret, e.msg);
			_exit(1);
		}
		if (tu_compare(&p, &at)) {
			printf("    child: bytes differ at %llu\n", (unsigned long long)at);
			_exit(1);
		}
		if (cur_backend == ENG_IO_URING &&
		    (st.registered_buffers >= st.buffers || !strstr(st.fallbacks, "registered"))) {
			printf("    child: registered %u of %u (%s)\n", st.registered_buffers,
			       st.buffers, st.fallbacks);
			_exit(1);
		}
		/* Sanitizers' mlock interceptors succeed without locking. */
		if (!SANITIZED && !strstr(st.fallbacks, "mlock")) {
			printf("    child: no mlock note (%s)\n", st.fallbacks);
			_exit(1);
		}
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	unlink(p.paths[0]);
	rmdir(dir);
	tu_free(&p);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 4)
		SKIP("backend unavailable to an unprivileged user");
	CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

/* The nth allocation fails, n upward until the run succeeds: every
 * failure is -ENOMEM with a message, nothing leaks (th_run checks). */
static void alloc_failures(void)
{
	struct tu_plan p = { 0 };
	struct eng_stats st;
	struct rl_err e = { 0 };
	int ret = -ENOMEM;
	long n;

	fault_plan(&p);
	CHECK(tu_build(&p) == 0);
	for (n = 0; n < 200 && ret == -ENOMEM; n++) {
		struct eng_opts o;
		struct eng_job job;
		struct eng *eng = NULL;

		eng_opts_default(&o);
		o.backend = cur_backend;
		tu_job(&p, &job);
		rl_alloc_fail_after(n);
		ret = eng_create(&o, &eng, &e);
		if (ret == 0)
			ret = eng_run(eng, &job, &st, &e);
		rl_alloc_fail_after(-1);
		eng_destroy(eng);
		if (ret == RL_E_BACKEND)
			break;
		CHECKF(ret == 0 || (ret == -ENOMEM && e.msg[0]), "n %ld: %d %s", n, ret, e.msg);
	}
	if (ret == RL_E_BACKEND) {
		tu_free(&p);
		SKIP(e.msg);
	}
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	CHECK(n > 1);
	CHECK_SAME(&p);
	tu_free(&p);
}

int main(void)
{
	static const struct {
		const char *name;
		th_fn fn;
	} tests[] = {
		{ "whole_file_direct", whole_file_direct },
		{ "strided_and_unaligned", strided_and_unaligned },
		{ "large_direct", large_direct },
		{ "buffered_unaligned", buffered_unaligned },
		{ "tmpfs_files", tmpfs_files },
		{ "random_plans", random_plans },
		{ "limiter_bound", limiter_bound },
		{ "faults_nth_read", faults_nth_read },
		{ "hard_submit_error", hard_submit_error },
		{ "truncated_file", truncated_file },
		{ "empty_job", empty_job },
		{ "progress_cancels", progress_cancels },
		{ "generator_no_copies", generator_no_copies },
		{ "unprivileged_memlock", unprivileged_memlock },
		{ "alloc_failures", alloc_failures },
	};
	char name[128];

	th_seed();
	for (size_t b = 0; b < RL_ARRAY_SIZE(backends); b++) {
		cur_backend = backends[b];
		for (size_t t = 0; t < RL_ARRAY_SIZE(tests); t++) {
			snprintf(name, sizeof(name), "%s/%s", eng_backend_name(cur_backend),
				 tests[t].name);
			th_run(name, tests[t].fn);
		}
	}
	RUN(bad_jobs);
	RUN(huge_bounce_read);
	RUN(empty_copy_bounds);
	RUN(shard_reported_once);
	RUN(aio_submit_refused);
	RUN(copies_within_min_len);
	RUN(eagain_backs_off);
	RUN(short_odd_counts_once);
	RUN(aio_reap_sleeps_until_woken);
	RUN(setup_refused_falls_back);
	RUN(uring_enomem_falls_back);
	RUN(seccomp_falls_back);
	return th_done();
}
