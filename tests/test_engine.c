/*
 * test_engine.c - the engine on hand-made plans: every test on every
 * backend (io_uring, libaio, pread) and with one and several workers, byte
 * for byte against an independent in-memory slice of the files; direct and
 * bounce reads, strided copies, unaligned offsets and partial last blocks,
 * buffered and tmpfs files, the byte limiter, faults on the nth read (in
 * whichever worker draws it), cancellation, bad plans, worker counts 1..8,
 * and an unprivileged user under an 8 MiB RLIMIT_MEMLOCK.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdatomic.h>
#include <stddef.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../engine/eng_int.h"
#include "../engine/sizing.h"
#include "engine_util.h"
#include "harness.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static const int backends[] = { ENG_IO_URING, ENG_LIBAIO, ENG_PREAD };
/* one worker (the calling thread alone) and several */
static const unsigned worker_counts[] = { 1, 3 };
static int cur_backend = ENG_IO_URING;
static unsigned cur_workers = 1;

/*
 * The invariant every run and batch keeps, checked after each of them
 * here (eng_run and eng_session_run below are these wrappers): the byte
 * limiter is back at 0, whether reads came back whole, short, retried or
 * failed; a leak would stall a later batch under a small bound.
 */
static void limiter_back_at_0(const struct eng_stats *st, int line)
{
	if (st->limiter_left)
		th_fail(__FILE__, line, "the byte limiter holds %llu bytes after the run",
			(unsigned long long)st->limiter_left);
}

static int checked_run(struct eng *eng, const struct eng_job *job, struct eng_stats *st,
		       struct cm_err *e, int line)
{
	int ret = (eng_run)(eng, job, st, e);

	limiter_back_at_0(st, line);
	return ret;
}

static int checked_batch(struct eng_session *s, const struct eng_job *job,
			 struct eng_stats *st, struct cm_err *e, int line)
{
	int ret = (eng_session_run)(s, job, st, e);

	limiter_back_at_0(st, line);
	return ret;
}

#define eng_run(eng, job, st, e) checked_run(eng, job, st, e, __LINE__)
#define eng_session_run(s, job, st, e) checked_batch(s, job, st, e, __LINE__)

/* The engine's test hooks a run applies (zero: none). */
struct hooks {
	int fault_kind, fault_backend, fault_errno;
	uint64_t nth;
	int setup_err;
	uint32_t submit_eagain, aio_refuse;
};

/* Default options on the current backend and worker count. */
static void opts_cur(struct eng_opts *o)
{
	eng_opts_default(o);
	o->backend = cur_backend;
	o->workers = cur_workers;
}

/* Runs job with o and hooks h (may be NULL); returns eng_run's code. */
static int run_with(const struct eng_opts *o, const struct hooks *h,
		    const struct eng_job *job, struct eng_stats *st, struct cm_err *e)
{
	struct eng *eng;
	int ret = eng_create(o, &eng, e);

	if (ret < 0)
		return ret;
	if (h && h->fault_kind)
		eng_set_fault(eng, h->fault_backend, h->fault_kind, h->nth);
	if (h && h->fault_errno)
		eng_set_fault_errno(eng, h->fault_errno);
	if (h && h->setup_err)
		eng_set_uring_setup_err(eng, h->setup_err);
	if (h && h->submit_eagain)
		eng_set_uring_submit_eagain(eng, h->submit_eagain);
	if (h && h->aio_refuse)
		eng_set_aio_refuse(eng, h->aio_refuse);
	ret = eng_run(eng, job, st, e);
	eng_destroy(eng);
	return ret;
}

/* Runs p (or jobx) with o (NULL: opts_cur). */
static int run_plan(struct tu_plan *p, struct eng_opts *o, struct eng_stats *st,
		    struct cm_err *e, struct eng_job *jobx)
{
	struct eng_opts def;
	struct eng_job job;

	if (!o) {
		opts_cur(&def);
		o = &def;
	}
	if (jobx)
		job = *jobx;
	else
		tu_job(p, &job);
	return run_with(o, NULL, &job, st, e);
}

static int backend_missing(int ret)
{
	return ret == RL_E_BACKEND;
}

#define CHECK_SAME(p) \
	do { \
		uint64_t at_ = 0; \
		int d_ = tu_compare(p, &at_); \
		CHECKF(d_ == 0, "device %d differs at byte %llu", d_ - 1, \
		       (unsigned long long)at_); \
	} while (0)

/* A run's return code ret: skips the test (freeing p) when the backend is
 * missing, else must be 0 and p's staging must equal the files' bytes. */
#define CHECK_RUN_SAME(p, ret, e) \
	do { \
		if (backend_missing(ret)) { \
			tu_free(p); \
			SKIP((e)->msg); \
		} \
		CHECKF((ret) == 0, "%d %s", (ret), (e)->msg); \
		CHECK_SAME(p); \
	} while (0)

/* Adds the file name of size bytes (seed) and one item reading all of it. */
static void whole_item(struct tu_plan *p, const char *name, uint64_t size, uint64_t seed)
{
	tu_add_file(p, tu_path(th_tmpdir(), name), size, seed);
	tu_add_item(p, 0, 0, (uint32_t)size, 1, 0, 0, 0);
}

/* A whole file of odd size read in chunks: direct middles, a partial last
 * block through a bounce buffer, on O_DIRECT. */
static void whole_file_direct(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
	struct eng_stats st;
	struct cm_err e = { 0 };
	uint64_t size = (1 << 20) + 12345;
	int ret;

	whole_item(&p, "whole.bin", size, 1);
	CHECK(tu_build(&p) == 0);
	ret = run_plan(&p, NULL, &st, &e, NULL);
	CHECK_RUN_SAME(&p, ret, &e);
	CHECK_EQ(st.backend, cur_backend);
	CHECK(st.bytes_direct >= (1 << 20));
	CHECK_EQ(st.bytes_read, size);
	CHECK(st.direct_io == 1);
	CHECK(st.workers >= 1 && st.workers <= cur_workers);
	tu_free(&p);
}

/* ------------------------------------------------------------------ */
/* Sessions: one set-up, several batches */

/* A session over one file read whole into staging that is registered
 * as fixed memory, and its job. */
struct sess {
	struct tu_plan p;
	struct eng_fixed fixed;
	struct eng *eng;
	struct eng_session *s;
	struct eng_job job;
	struct cm_err e;
};

/* Begins t's session on file name (size bytes, seed) with the engine's
 * buffer registration on or off and, fault_nth >= 0, the nth read
 * submission of the session failing with EIO. Returns begin's code. */
static int sess_begin(struct sess *t, const char *name, uint64_t size, uint64_t seed,
		      int reg, int64_t fault_nth)
{
	struct eng_session_needs n = { 0 };
	struct eng_opts o;
	struct eng_stats st;
	int ret;

	memset(t, 0, sizeof(*t));
	t->p = (struct tu_plan){ .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
	whole_item(&t->p, name, size, seed);
	if (tu_build(&t->p) < 0)
		return -ENOMEM;
	tu_job(&t->p, &t->job);
	for (size_t i = 0; i < t->p.nreads; i++) {
		n.all_bytes += t->p.reads[i].len;
		n.max_read = CM_MAX(n.max_read, t->p.reads[i].len);
		n.bounce += !(t->p.reads[i].flags & CM_READ_DIRECT);
	}
	n.nreads = t->p.nreads;
	n.bounce_bytes = n.bounce * n.max_read;
	t->fixed.base = t->p.staging[0];
	t->fixed.len = t->p.staging_bytes[0];
	opts_cur(&o);
	o.register_buffers = reg;
	ret = eng_create(&o, &t->eng, &t->e);
	if (ret == 0 && fault_nth >= 0)
		eng_set_fault(t->eng, ENG_AUTO, ENG_FAULT_EIO, (uint64_t)fault_nth);
	if (ret == 0)
		ret = eng_session_begin(t->eng, &t->job, &n, &t->fixed, 1, &st, &t->s, &t->e);
	return ret;
}

static void sess_end(struct sess *t)
{
	eng_session_end(t->s);
	eng_destroy(t->eng);
	tu_free(&t->p);
}

/* Begins the session or skips (backend missing) or fails the test. */
#define SESS_BEGIN(t, ...) \
	do { \
		int r_ = sess_begin((t), __VA_ARGS__); \
		if (backend_missing(r_)) { \
			sess_end(t); \
			SKIP((t)->e.msg); \
		} \
		CHECKF(r_ == 0, "%d %s", r_, (t)->e.msg); \
	} while (0)

/* Batch b's statistics against the first's: the same workers, buffers,
 * queue depth and registrations (held across batches), the same counts
 * (each batch counts only its own), a read span within the batch's wall
 * time (wall_ns). */
static void same_batch_stats(const struct eng_stats *st, const struct eng_stats *first,
			     int b, uint64_t wall_ns)
{
	CHECKF(st->workers == first->workers && st->workers >= 1 &&
	       st->buffers == first->buffers && st->queue_depth == first->queue_depth &&
	       st->registered_buffers == first->registered_buffers &&
	       st->registered_files == first->registered_files,
	       "batch %d: workers %u buffers %u depth %u registered %u/%d, first %u %u %u %u/%d",
	       b, st->workers, st->buffers, st->queue_depth, st->registered_buffers,
	       st->registered_files, first->workers, first->buffers, first->queue_depth,
	       first->registered_buffers, first->registered_files);
	CHECKF(st->reads == first->reads && st->bytes_direct == first->bytes_direct,
	       "batch %d: %llu reads, %llu direct bytes; first %llu, %llu", b,
	       (unsigned long long)st->reads, (unsigned long long)st->bytes_direct,
	       (unsigned long long)first->reads, (unsigned long long)first->bytes_direct);
	CHECKF(st->read_seconds > 0 && st->read_seconds <= wall_ns / 1e9,
	       "batch %d: read %.6f s of a %.6f s batch", b, st->read_seconds, wall_ns / 1e9);
}

/* Three batches on one set-up, each byte-exact and counted on its own;
 * on io_uring the staging is registered and the direct reads into it are
 * READ_FIXED (none when registration is off, nor on the other backends,
 * which say why). */
static void session_batches(void)
{
	for (int reg = 1; reg >= 0; reg--) {
		static struct sess t;
		struct eng_stats st, first = { 0 };
		char why[64];
		int ret, registered;

		SESS_BEGIN(&t, "sess.bin", (2 << 20) + 4096, 7, reg, -1);
		for (int b = 0; b < 3; b++) {
			uint64_t t0;

			tu_clear(&t.p, b + 1);
			t0 = cm_now_ns();
			ret = eng_session_run(t.s, &t.job, &st, &t.e);
			CHECKF(ret == 0, "batch %d: %d %s", b, ret, t.e.msg);
			CHECK_SAME(&t.p);
			CHECK_EQ(st.bytes_read, t.p.sizes[0]);
			if (b == 0)
				first = st;
			same_batch_stats(&st, &first, b, cm_now_ns() - t0);
		}
		registered = eng_session_fixed(t.s, why, sizeof(why));
		CHECKF(registered == (reg && cur_backend == ENG_IO_URING), "%d: %s", registered, why);
		CHECKF(registered ? st.reads_fixed > 0 && st.reads_fixed <= st.reads :
		       st.reads_fixed == 0 && why[0], "%llu of %llu: %s",
		       (unsigned long long)st.reads_fixed, (unsigned long long)st.reads, why);
		sess_end(&t);
	}
}

/* A session begun with no read that needs a bounce buffer has none
 * (streaming sizes them by the program's reads, exec/program.c); a later
 * batch whose read does need one fails with a message saying so, never
 * waits for a buffer that cannot come, and the session ends cleanly. */
static void session_bounce_without_buffers(void)
{
	static struct sess t;
	struct eng_stats st;
	int ret;

	SESS_BEGIN(&t, "sessb.bin", 1 << 20, 9, 1, -1);
	for (size_t i = 0; i < t.p.nreads; i++)
		CHECKF(t.p.reads[i].flags & CM_READ_DIRECT, "read %zu not direct", i);
	t.p.reads[0].flags &= ~CM_READ_DIRECT;
	ret = eng_session_run(t.s, &t.job, &st, &t.e);
	CHECKF(ret == -EINVAL && strstr(t.e.msg, "no bounce buffer"), "%d %s", ret, t.e.msg);
	CHECK_EQ(st.buffers, 0);
	sess_end(&t);
}

/* A read failing in the second batch fails that batch, and every later
 * one with the same error, without reading; the session still ends
 * cleanly (nothing left in flight, nothing leaked). The fault hook counts
 * submissions from the session's start: the first of batch 2 fails. */
static void session_fault_in_a_later_batch(void)
{
	static struct sess t;
	struct eng_stats st;
	int ret;

	SESS_BEGIN(&t, "sessf.bin", 1 << 20, 8, 1, 16);
	CHECK_EQ(t.p.nreads, 16); /* 1 MiB in 64 KiB reads */
	ret = eng_session_run(t.s, &t.job, &st, &t.e);
	CHECKF(ret == 0, "%d %s", ret, t.e.msg);
	CHECK_SAME(&t.p);
	ret = eng_session_run(t.s, &t.job, &st, &t.e);
	CHECKF(ret < 0 && strstr(t.e.msg, "sessf.bin"), "%d %s", ret, t.e.msg);
	memset(&t.e, 0, sizeof(t.e));
	CHECK_EQ(eng_session_run(t.s, &t.job, &st, &t.e), ret);
	CHECKF(strstr(t.e.msg, "sessf.bin") && st.reads == 0, "%s", t.e.msg);
	sess_end(&t);
}

/* Enough direct bytes for every worker to pre-fault its share: correct,
 * the preparation time reported, and a failure early in the run stops
 * every worker cleanly. */
static void large_direct(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 1 << 20, .use_direct = 1 };
	struct hooks h = { .fault_kind = ENG_FAULT_EIO, .nth = 2 };
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct cm_err e = { 0 };
	int ret;

	tu_add_file(&p, tu_path(th_tmpdir(), "large.bin"), (24 << 20) + 4097, 14);
	tu_add_item(&p, 0, 0, (12 << 20) + 4096, 1, 0, 0, 0);
	tu_add_item(&p, 0, (12 << 20) + 4096, (12 << 20) + 1, 1, 0, 1, 0);
	CHECK(tu_build(&p) == 0);
	ret = run_plan(&p, NULL, &st, &e, NULL);
	CHECK_RUN_SAME(&p, ret, &e);
	CHECK(st.bytes_direct >= (24u << 20));
	CHECKF(st.prepare_seconds > 0 || strstr(st.fallbacks, "pre-faulted"),
	       "no preparation time: %s", st.fallbacks);

	tu_job(&p, &job);
	opts_cur(&o);
	ret = run_with(&o, &h, &job, &st, &e);
	CHECKF(ret == -EIO, "%d %s", ret, e.msg);
	tu_free(&p);
}

/* Strided inner-dimension runs, several devices, overlapping sources,
 * unaligned offsets, chunked and single reads, misaligned staging. */
static void strided_and_unaligned(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 16 << 10, .use_direct = 1 };
	struct eng_stats st;
	struct cm_err e = { 0 };
	int ret;

	tu_add_file(&p, tu_path(th_tmpdir(), "s1.bin"), 300000, 2);
	tu_add_file(&p, tu_path(th_tmpdir(), "s2.bin"), 4096 * 3, 3);
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
	CHECK_RUN_SAME(&p, ret, &e);
	CHECK(st.bytes_direct > 0);
	tu_free(&p);
}

/* A copy of count runs whose stride equals their length (contiguous runs
 * written as strided) through a bounce buffer: every run, not only the
 * first, lands. */
static void stride_equals_len(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 0 };
	struct eng_stats st;
	struct cm_err e = { 0 };
	int ret;

	tu_add_file(&p, tu_path(th_tmpdir(), "stride.bin"), 50000, 22);
	tu_add_item(&p, 0, 300, 100, 7, 100, 0, 0);
	tu_add_item(&p, 0, 9000, 1000, 3, 1000, 0, 3);
	CHECK(tu_build(&p) == 0);
	for (size_t i = 0; i < p.ncopies; i++)
		CHECK(p.copies[i].count > 1 && p.copies[i].src_stride == p.copies[i].len);
	tu_clear(&p, 0x5A);
	ret = run_plan(&p, NULL, &st, &e, NULL);
	CHECK_RUN_SAME(&p, ret, &e);
	CHECK_EQ(st.bytes_direct, 0);
	tu_free(&p);
}

/* Buffered reads at any offset and length (RL_OPT_DIRECT 0, or a file
 * system without O_DIRECT): align 1, nothing widened. */
static void buffered_unaligned(void)
{
	struct tu_plan p = { .align = 1, .chunk = 10000, .use_direct = 1 };
	struct eng_opts o;
	struct eng_stats st;
	struct cm_err e = { 0 };
	int ret;

	opts_cur(&o);
	o.direct = 0;
	tu_add_file(&p, tu_path(th_tmpdir(), "b.bin"), 77777, 4);
	tu_add_item(&p, 0, 3, 77774, 1, 0, 0, 0);
	tu_add_item(&p, 0, 11, 5, 300, 17, 1, 3);
	tu_add_item(&p, 0, 4096, 8000, 1, 0, 1, 0);
	CHECK(tu_build(&p) == 0);
	ret = run_plan(&p, &o, &st, &e, NULL);
	CHECK_RUN_SAME(&p, ret, &e);
	CHECK_EQ(st.direct_io, 0);
	tu_free(&p);
}

/* tmpfs (/dev/shm): O_DIRECT since Linux 6.6, buffered before; both ways. */
static void tmpfs_files(void)
{
	char dir[] = "/dev/shm/ringload-test-XXXXXX";
	struct eng_stats st;
	struct cm_err e = { 0 };
	int ret = 0;

	if (!mkdtemp(dir))
		SKIP("no /dev/shm");
	for (int direct = 0; direct < 2 && !th_failed(); direct++) {
		struct tu_plan p = { .align = 4096, .chunk = 32 << 10, .use_direct = 1 };
		struct eng_opts o;
		struct eng_align al;

		opts_cur(&o);
		o.direct = direct;
		tu_add_file(&p, tu_path(dir, "t.bin"), 200001, 5);
		if (eng_probe_align(p.paths[0], &al) != 0 || !al.direct)
			p.align = 1;
		tu_add_item(&p, 0, 0, 200001, 1, 0, 0, 0);
		tu_add_item(&p, 0, 5000, 100, 50, 300, 1, 0);
		CHECK(tu_build(&p) == 0);
		ret = run_plan(&p, &o, &st, &e, NULL);
		unlink(p.paths[0]);
		if (!backend_missing(ret) && ret == 0 && tu_compare(&p, &(uint64_t){ 0 }))
			ret = -EILSEQ;
		tu_free(&p);
		if (backend_missing(ret) || ret)
			break;
	}
	rmdir(dir);
	if (backend_missing(ret))
		SKIP(e.msg);
	CHECKF(ret == 0, "%d %s", ret, e.msg);
}

/* Runs p under RL_DIRECT_AUTO on the current backend; *fst: how its one
 * file was read. */
static int run_auto(struct tu_plan *p, struct eng_file_stat *fst, struct eng_stats *st,
		    struct cm_err *e)
{
	struct eng_opts o;
	struct eng_job job;

	opts_cur(&o);
	o.direct = ENG_DIRECT_AUTO;
	tu_job(p, &job);
	job.file_stats = fst;
	return run_plan(p, &o, st, e, &job);
}

/* eng_job_cached of p under RL_DIRECT_AUTO. */
static int auto_cached(struct tu_plan *p, struct cm_err *e)
{
	struct eng *eng = NULL;
	struct eng_opts o;
	struct eng_job job;
	int ret;

	opts_cur(&o);
	o.direct = ENG_DIRECT_AUTO;
	tu_job(p, &job);
	ret = eng_create(&o, &eng, e);
	if (ret == 0)
		ret = eng_job_cached(eng, &job, e);
	eng_destroy(eng);
	return ret;
}

/*
 * RL_DIRECT_AUTO's choice: a tmpfs file (its pages are its medium, always
 * resident) is not probed and is read with O_DIRECT where tmpfs allows it;
 * a disk file the page cache holds is read buffered, an evicted one with
 * O_DIRECT. eng_job_cached says so beforehand (1 for the hot file
 * alone), and fails on a file that is gone.
 */
static void auto_choice(void)
{
	static const char *const what[] = { "tmpfs", "disk, hot", "disk, cold" };
	char dir[] = "/dev/shm/ringload-test-XXXXXX";
	int ret = 0;

	if (!mkdtemp(dir))
		SKIP("no /dev/shm");
	for (int c = 0; c < 3 && !th_failed(); c++) {
		struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
		struct eng_file_stat fst;
		struct eng_stats st;
		struct eng_align al;
		struct cm_err e = { 0 };
		long drops = th_cache_drops();
		int want, why, cached, gone;

		tu_add_file(&p, tu_path(c ? th_tmpdir() : dir, "auto.bin"), (1 << 20) + 5, 6);
		tu_add_item(&p, 0, 0, (1 << 20) + 5, 1, 0, 0, 0);
		CHECK(tu_build(&p) == 0);
		CHECK(c == 2 ? tu_evict(p.paths[0]) == 0 : tu_warm(p.paths[0]) == 0);
		CHECK(eng_probe_align(p.paths[0], &al) == 0);
		want = c == 1 ? ENG_FILE_CACHED : al.direct ? ENG_FILE_DIRECT : ENG_FILE_BUFFERED;
		/* and why: tmpfs not probed, hot, cold; or O_DIRECT refused */
		why = c == 1 ? ENG_WHY_HOT : !al.direct ? ENG_WHY_REFUSED :
		      c == 0 ? ENG_WHY_MEDIUM : ENG_WHY_COLD;
		cached = auto_cached(&p, &e);
		ret = run_auto(&p, &fst, &st, &e);
		unlink(p.paths[0]);
		if (ret == 0)
			CHECK_SAME(&p);
		gone = auto_cached(&p, &e);
		CHECKF(gone == -ENOENT && strstr(e.msg, "auto.bin: open:"), "gone: %d %s", gone,
		       e.msg);
		tu_free(&p);
		if (backend_missing(ret))
			break;
		CHECKF(ret == 0, "%s: %d %s", what[c], ret, e.msg);
		if (c == 1 && (fst.mode != want || cached != 1) && th_cache_dropped_since(drops)) {
			rmdir(dir);
			SKIP(TH_CACHE_DROPPED);
		}
		CHECKF(fst.mode == want && fst.why == why && fst.probed == (c > 0), "%s: mode %d "
		       "(want %d), why %d (want %d), probed %d, %llu of %llu resident", what[c],
		       fst.mode, want, fst.why, why, fst.probed, (unsigned long long)fst.resident,
		       (unsigned long long)fst.needed);
		CHECK_EQ(st.direct_io, want == ENG_FILE_DIRECT);
		CHECKF(cached == (c == 1), "%s: eng_job_cached %d", what[c], cached);
	}
	rmdir(dir);
	if (backend_missing(ret))
		SKIP("backend missing");
}

/*
 * The probe of a long range asks about samples, not every page: a 96 MiB
 * file whose first half the page cache holds (and what readahead added)
 * is measured at 16 MiB of pieces, and the resident bytes they scale to
 * are within 4 MiB of what a whole-file measure finds.
 */
static void probe_samples_long_ranges(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 1 << 20, .use_direct = 1 };
	uint64_t size = 96ull << 20;
	int64_t whole;
	struct eng_file_stat fst;
	struct eng_stats st;
	struct cm_err e = { 0 };
	long drops = th_cache_drops();
	char buf[65536];
	int fd, ret, used_mincore = 0;

	tu_add_file(&p, tu_path(th_tmpdir(), "sampled.bin"), size, 8);
	tu_add_item(&p, 0, 0, size, 1, 0, 0, 0);
	CHECK(tu_build(&p) == 0);
	CHECK(tu_evict(p.paths[0]) == 0);
	fd = open(p.paths[0], O_RDONLY);
	CHECK(fd >= 0);
	for (uint64_t at = 0; at < size / 2; at += sizeof(buf))
		CHECK(pread(fd, buf, sizeof(buf), (off_t)at) == (ssize_t)sizeof(buf));
	whole = eng_cached_bytes(fd, 0, size, 0, &used_mincore);
	close(fd);
	ret = run_auto(&p, &fst, &st, &e);
	unlink(p.paths[0]);
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	CHECK_SAME(&p);
	tu_free(&p);
	if (th_cache_dropped_since(drops))
		SKIP(TH_CACHE_DROPPED);
	CHECKF(fst.probed && fst.probed_bytes == 16 << 20 && fst.needed == size,
	       "probed %d: %llu bytes asked of %llu", fst.probed,
	       (unsigned long long)fst.probed_bytes, (unsigned long long)fst.needed);
	CHECKF(whole >= (int64_t)size / 2 && fst.resident + (4 << 20) >= (uint64_t)whole &&
	       fst.resident <= (uint64_t)whole + (4 << 20), "%llu resident by samples, %lld whole",
	       (unsigned long long)fst.resident, (long long)whole);
	CHECK_EQ(fst.mode, ENG_FILE_DIRECT);
}

/* One random plan: random files, items (contiguous and strided), chunk,
 * queue depth, buffers, bound and worker count (0: the table's). */
static void random_plan(unsigned workers, int round)
{
	struct tu_plan p = { 0 };
	struct eng_opts o;
	struct eng_stats st;
	struct cm_err e = { 0 };
	uint64_t size = 1 + th_rand() % (3 << 20);
	unsigned nitems = 1 + th_rand() % 12;
	int ret;

	p.align = th_rand() % 4 ? 4096 : 1;
	p.chunk = (uint32_t)(4096u << (th_rand() % 8));
	p.use_direct = (int)(th_rand() % 2);
	opts_cur(&o);
	if (workers)
		o.workers = workers;
	o.direct = p.align > 1;
	o.queue_depth = 1 + th_rand() % 32;
	o.buffers = (unsigned)(th_rand() % 5);
	o.inflight_bytes = p.chunk * (1 + th_rand() % 8);
	o.register_buffers = (int)(th_rand() % 2);
	o.register_files = (int)(th_rand() % 2);
	tu_add_file(&p, tu_path(th_tmpdir(), "r.bin"), size, th_rand());
	for (unsigned i = 0; i < nitems; i++) {
		/* CM_MIN evaluates its arguments twice: no th_rand() in it */
		uint64_t off = th_rand() % size, r = th_rand();
		uint32_t len = 1 + (uint32_t)(r % CM_MIN(size - off, 100000));
		uint32_t count = 1, stride = len, most;

		if (th_rand() % 2 && len < 2000) {
			stride = len + (uint32_t)(th_rand() % 3000);
			count = 1 + (uint32_t)((size - off - len) / stride);
			most = 1 + (uint32_t)(th_rand() % 200);
			count = CM_MIN(count, most);
		}
		tu_add_item(&p, 0, off, len, count, stride, (uint32_t)(th_rand() % 3),
			    (uint32_t)(th_rand() % 2 ? 0 : th_rand() % 4096));
	}
	CHECK(tu_build(&p) == 0);
	ret = run_plan(&p, &o, &st, &e, NULL);
	if (backend_missing(ret)) {
		tu_free(&p);
		SKIP(e.msg);
	}
	CHECKF(ret == 0, "round %d, %u workers: %d %s", round, o.workers, ret, e.msg);
	CHECK_SAME(&p);
	CHECKF(st.peak_inflight <= o.inflight_bytes, "peak %llu > bound %llu",
	       (unsigned long long)st.peak_inflight, (unsigned long long)o.inflight_bytes);
	CHECKF(st.workers >= 1 && st.workers <= o.workers, "%u workers of %u", st.workers,
	       o.workers);
	tu_free(&p);
}

static void random_plans(void)
{
	for (int round = 0; round < 6 && !th_failed(); round++)
		random_plan(0, round);
}

/* Worker counts 1..8 on random plans, byte-exact. */
static void worker_counts_1_to_8(void)
{
	for (unsigned w = 1; w <= 8 && !th_failed(); w++)
		random_plan(w, (int)w);
}

/* A slow shard callback: reads pile up to the bound and never past it.
 * ACCEPTANCE D4: 9 bytes of 4-byte reads -> 2 in flight; 5 -> 1. With
 * several workers the bound holds for all of them together. */
struct slow {
	struct tu_plan *p;
	atomic_int bad;
	atomic_uint calls;
	atomic_int inside;      /* on_shard calls running now */
};

static void slow_shard(void *user, size_t shard)
{
	struct slow *s = user;

	/* serialized: never two calls at once */
	if (atomic_fetch_add(&s->inside, 1) != 0 || !tu_shard_ok(s->p, shard))
		atomic_store(&s->bad, 1);
	atomic_fetch_add(&s->calls, 1);
	usleep(300);
	atomic_fetch_sub(&s->inside, 1);
}

static void limiter_bound(void)
{
	static const uint64_t bounds[] = { 9, 5, 4096, 3 * 4096 };

	for (size_t b = 0; b < CM_ARRAY_SIZE(bounds); b++) {
		struct tu_plan p = { .align = 1, .chunk = 4 };
		struct slow sl = { .p = &p };
		struct eng_opts o;
		struct eng_stats st;
		struct eng_job job;
		struct cm_err e = { 0 };
		uint64_t expect;
		int ret;

		opts_cur(&o);
		o.direct = 0;
		o.inflight_bytes = bounds[b];
		o.buffers = 64;
		tu_add_file(&p, tu_path(th_tmpdir(), "l.bin"), 4096 * 8, 6);
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
		CHECK_RUN_SAME(&p, ret, &e);
		CHECK(!atomic_load(&sl.bad));
		CHECK_EQ(atomic_load(&sl.calls), p.nitems);
		CHECKF(st.peak_inflight <= bounds[b], "bound %llu: peak %llu",
		       (unsigned long long)bounds[b], (unsigned long long)st.peak_inflight);
		/* one worker fills the bound exactly while the callback sleeps */
		CHECKF(cur_workers > 1 || st.peak_inflight == expect,
		       "bound %llu: peak %llu, expected %llu", (unsigned long long)bounds[b],
		       (unsigned long long)st.peak_inflight, (unsigned long long)expect);
		tu_free(&p);
	}
}

/* Shard callbacks: each one must see its shard's bytes complete, once. */
struct watch {
	struct tu_plan *p;
	atomic_int bad;
	atomic_uint calls;
	atomic_uint seen[64];
};

static void watch_shard(void *user, size_t shard)
{
	struct watch *w = user;

	if (shard >= w->p->nitems || shard >= 64 || !tu_shard_ok(w->p, shard) ||
	    atomic_fetch_add(&w->seen[shard], 1))
		atomic_store(&w->bad, 1);
	atomic_fetch_add(&w->calls, 1);
}

static void fault_plan(struct tu_plan *p)
{
	p->align = 4096;
	p->chunk = 16 << 10;
	p->use_direct = 1;
	tu_add_file(p, tu_path(th_tmpdir(), "f.bin"), 100000, 7);
	tu_add_item(p, 0, 0, 40960, 1, 0, 0, 0);          /* direct chunks */
	tu_add_item(p, 0, 50000, 30, 40, 1000, 1, 0);     /* strided, bounce */
	tu_add_item(p, 0, 99000, 1000, 1, 0, 1, 0);       /* partial last block */
}

/* Runs p with hooks h and a shard watch; returns eng_run's code. */
static int run_watched(struct tu_plan *p, struct eng_opts *o, const struct hooks *h,
		       struct watch *w, struct eng_stats *st, struct cm_err *e)
{
	struct eng_job job;

	memset(w, 0, sizeof(*w));
	w->p = p;
	tu_clear(p, 0xAA);
	tu_job(p, &job);
	job.on_shard = watch_shard;
	job.user = w;
	return run_with(o, h, &job, st, e);
}

/* EIO (and other errnos), a short read and EAGAIN on the nth submission,
 * n over every read, whichever worker draws it: a failure ends the whole
 * run cleanly with the read's own errno (code, file, offset, length,
 * errno text; no shard reported that is not complete; nothing leaked);
 * short reads and EAGAIN recover with the same bytes. */
static void faults_nth_read(void)
{
	static const struct {
		int kind, err;
	} faults[] = {
		{ ENG_FAULT_EIO, EIO }, { ENG_FAULT_EIO, ENODATA }, { ENG_FAULT_SHORT, 0 },
		{ ENG_FAULT_EAGAIN, 0 },
	};
	struct tu_plan p = { 0 };
	struct eng_stats st;
	struct cm_err e = { 0 };
	uint64_t nreads;
	int ret;

	fault_plan(&p);
	CHECK(tu_build(&p) == 0);
	ret = run_plan(&p, NULL, &st, &e, NULL);
	CHECK_RUN_SAME(&p, ret, &e);
	nreads = st.reads;
	CHECK(nreads >= 4);
	for (size_t k = 0; k < CM_ARRAY_SIZE(faults); k++) {
		for (uint64_t n = 0; n <= nreads; n++) {
			struct hooks h = { .fault_kind = faults[k].kind, .nth = n,
					   .fault_errno = faults[k].err };
			struct watch w;
			struct eng_opts o;

			opts_cur(&o);
			o.queue_depth = CM_MAX(1 + (unsigned)(n % 4), cur_workers);
			ret = run_watched(&p, &o, &h, &w, &st, &e);
			CHECKF(!atomic_load(&w.bad), "kind %d n %llu: a shard reported incomplete or twice",
			       faults[k].kind, (unsigned long long)n);
			if (faults[k].kind == ENG_FAULT_EIO && n < nreads) {
				CHECKF(ret == -faults[k].err, "n %llu: %d %s", (unsigned long long)n,
				       ret, e.msg);
				CHECKF(strstr(e.msg, "f.bin") && strstr(e.msg, "offset") &&
				       strstr(e.msg, "length") &&
				       strstr(e.msg, strerror(faults[k].err)), "message: %s", e.msg);
				CHECK(atomic_load(&w.calls) < p.nitems);
				continue;
			}
			CHECKF(ret == 0, "kind %d n %llu: %d %s", faults[k].kind,
			       (unsigned long long)n, ret, e.msg);
			CHECK_SAME(&p);
			CHECK_EQ(atomic_load(&w.calls), p.nitems);
			if (n < nreads && faults[k].kind == ENG_FAULT_EAGAIN)
				CHECK(st.retries >= 1);
		}
	}
	tu_free(&p);
}

/* Issue 32's mutant (a short read's request giving back only what its
 * last resubmission asked for): short reads under an in-flight bound of
 * two reads recover with the same bytes, stay within the bound, and leave
 * the limiter at 0 (checked after every run, see limiter_back_at_0). */
static void short_reads_small_bound(void)
{
	struct tu_plan p = { 0 };
	struct eng_stats st;
	struct cm_err e = { 0 };
	uint64_t nreads, bound;
	int ret;

	fault_plan(&p);
	CHECK(tu_build(&p) == 0);
	ret = run_plan(&p, NULL, &st, &e, NULL);
	CHECK_RUN_SAME(&p, ret, &e);
	nreads = st.reads;
	bound = 2 * (uint64_t)st.max_read;
	for (uint64_t n = 0; n < nreads; n++) {
		struct hooks h = { .fault_kind = n % 2 ? ENG_FAULT_SHORT_ODD : ENG_FAULT_SHORT,
				   .nth = n };
		struct eng_opts o;
		struct eng_job job;

		opts_cur(&o);
		o.inflight_bytes = bound;
		tu_clear(&p, (int)n + 1);
		tu_job(&p, &job);
		ret = run_with(&o, &h, &job, &st, &e);
		CHECKF(ret == 0, "n %llu: %d %s", (unsigned long long)n, ret, e.msg);
		CHECK_SAME(&p);
		CHECKF(st.peak_inflight <= bound, "n %llu: peak %llu, bound %llu",
		       (unsigned long long)n, (unsigned long long)st.peak_inflight,
		       (unsigned long long)bound);
	}
	tu_free(&p);
}

/*
 * A fault in one of 8 workers, in the middle of a larger run: the whole
 * load fails with that read's error, every other worker stops and drains,
 * only complete shards were reported (each once), nothing is left in the
 * kernel, and it ends (a hang fails the suite by its timeout).
 */
static void fault_in_one_worker(void)
{
	static const int kinds[] = { ENG_FAULT_EIO, ENG_FAULT_HARD };
	struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
	struct eng_stats st;
	struct cm_err e = { 0 };
	int ret;

	tu_add_file(&p, tu_path(th_tmpdir(), "one.bin"), 4 << 20, 23);
	for (unsigned i = 0; i < 32; i++) /* direct and bounce shards */
		tu_add_item(&p, 0, (uint64_t)i << 17, i % 2 ? 100000 : 1 << 17, 1, 0, i % 3,
			    i % 2 ? 7 : 0);
	CHECK(tu_build(&p) == 0);
	for (size_t k = 0; k < CM_ARRAY_SIZE(kinds); k++) {
		for (uint64_t n = 3; n < p.nreads; n += 17) {
			struct hooks h = { .fault_kind = kinds[k], .nth = n };
			struct watch w;
			struct eng_opts o;

			opts_cur(&o);
			o.workers = 8;
			ret = run_watched(&p, &o, &h, &w, &st, &e);
			if (backend_missing(ret)) {
				tu_free(&p);
				SKIP(e.msg);
			}
			CHECKF(ret == (kinds[k] == ENG_FAULT_EIO ? -EIO : -ENOMEM),
			       "kind %d n %llu: %d %s", kinds[k], (unsigned long long)n, ret, e.msg);
			CHECKF(!atomic_load(&w.bad), "kind %d n %llu: a shard reported incomplete or twice",
			       kinds[k], (unsigned long long)n);
			CHECK(atomic_load(&w.calls) < p.nitems);
			CHECK_EQ(st.abandoned, 0);
			CHECK(st.workers > 1);
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
	struct cm_err e = { 0 };
	struct eng_stats st;
	uint64_t nreads;
	int ret;

	tu_add_file(&p, tu_path(th_tmpdir(), "hard.bin"), (2 << 20) + 333, 21);
	tu_add_item(&p, 0, 0, 1 << 20, 1, 0, 0, 0);             /* direct */
	tu_add_item(&p, 0, 1 << 20, (1 << 20) + 333, 1, 0, 1, 0); /* + partial block */
	CHECK(tu_build(&p) == 0);
	ret = run_plan(&p, NULL, &st, &e, NULL);
	CHECK_RUN_SAME(&p, ret, &e);
	nreads = st.reads;
	CHECK(nreads >= 8);
	for (uint64_t n = 0; n < nreads; n += 3) {
		struct hooks h = { .fault_kind = ENG_FAULT_HARD, .nth = n };
		struct eng_opts o;
		struct eng_job job;

		opts_cur(&o);
		o.queue_depth = 8;
		tu_job(&p, &job);
		ret = run_with(&o, &h, &job, &st, &e);
		CHECKF(ret == -ENOMEM, "n %llu: %d %s", (unsigned long long)n, ret, e.msg);
		CHECKF(strstr(e.msg, "Cannot allocate memory"), "n %llu: %s",
		       (unsigned long long)n, e.msg);
		CHECKF(st.abandoned == 0, "n %llu: %llu requests left in the kernel",
		       (unsigned long long)n, (unsigned long long)st.abandoned);
	}
	tu_free(&p);
}

/* io_uring_submit answering -EAGAIN (the kernel short of request memory)
 * is not a failure: the reads stay in the ring and go with the next
 * submission; the bytes are right. */
static void uring_submit_eagain(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 16 << 10, .use_direct = 1 };
	struct hooks h = { .submit_eagain = 5 };
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct cm_err e = { 0 };
	int ret;

	whole_item(&p, "sub_eagain.bin", 200000, 24);
	CHECK(tu_build(&p) == 0);
	for (size_t i = 0; i < CM_ARRAY_SIZE(worker_counts); i++) {
		opts_cur(&o);
		o.backend = ENG_IO_URING;
		o.workers = worker_counts[i];
		tu_job(&p, &job);
		tu_clear(&p, 0x11);
		ret = run_with(&o, &h, &job, &st, &e);
		CHECK_RUN_SAME(&p, ret, &e);
	}
	tu_free(&p);
}

/* The per-read data hook: called once for every read, on the worker that
 * reaped it, with the read's bytes in place (checksums are built on it). */
struct data_seen {
	struct tu_plan *p;
	atomic_uint calls;
	atomic_int bad;
};

static void on_data_check(void *user, const struct cm_read *r, const uint8_t *bytes)
{
	struct data_seen *d = user;

	if (memcmp(bytes, d->p->content[r->file] + r->off, r->min_len))
		atomic_store(&d->bad, 1);
	atomic_fetch_add(&d->calls, 1);
}

static void on_data_hook(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 32 << 10, .use_direct = 1 };
	struct data_seen d = { .p = &p };
	struct eng_stats st;
	struct eng_job job;
	struct cm_err e = { 0 };
	int ret;

	tu_add_file(&p, tu_path(th_tmpdir(), "data.bin"), 300001, 25);
	tu_add_item(&p, 0, 0, 300001, 1, 0, 0, 0);
	tu_add_item(&p, 0, 1000, 50, 30, 700, 1, 0);
	CHECK(tu_build(&p) == 0);
	tu_job(&p, &job);
	job.on_data = on_data_check;
	job.user = &d;
	ret = run_plan(&p, NULL, &st, &e, &job);
	CHECK_RUN_SAME(&p, ret, &e);
	CHECK(!atomic_load(&d.bad));
	CHECK_EQ(atomic_load(&d.calls), p.nreads);
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
	struct eng_worker wk;
	struct eng_stats st;
	struct be be;
	struct aio_waiter w;
	pthread_t th;
	int ret;

	memset(&rc, 0, sizeof(rc));
	memset(&wk, 0, sizeof(wk));
	memset(&st, 0, sizeof(st));
	memset(&be, 0, sizeof(be));
	rc.b.st = &st;
	wk.run = &rc;
	wk.qd = 4;
	wk.nreqs = 4;
	be.ops = &eng_aio_ops;
	be.run = &rc;
	be.w = &wk;
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
	struct cm_err e = { 0 };
	int ret;

	whole_item(&p, "tr.bin", 100000, 8);
	CHECK(tu_build(&p) == 0);
	CHECK(truncate(p.paths[0], 99992) == 0);
	ret = run_plan(&p, NULL, &st, &e, NULL);
	if (backend_missing(ret)) {
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
	struct cm_err e = { 0 };
	char *saved;
	int ret;

	whole_item(&p, "bad.bin", 50000, 9);
	CHECK(tu_build(&p) == 0);

	saved = p.paths[0];
	p.paths[0] = tu_path(th_tmpdir(), "nope.bin");
	ret = run_plan(&p, NULL, &st, &e, NULL);
	p.paths[0] = saved;
	CHECKF(ret == -ENOENT && strstr(e.msg, "nope.bin"), "%d %s", ret, e.msg);

	opts_cur(&o);
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

/* A read the kernel keeps refusing with EAGAIN is retried with a growing
 * back-off (not 1000 times in a few microseconds), then fails clearly. */
static void eagain_backs_off(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
	struct hooks h = { .fault_kind = ENG_FAULT_EAGAIN_ALL, .nth = 0 };
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct cm_err e = { 0 };
	uint64_t t0, ns;
	int ret;

	whole_item(&p, "eagain.bin", 60000, 18);
	CHECK(tu_build(&p) == 0);
	tu_job(&p, &job);
	eng_opts_default(&o);
	o.backend = ENG_PREAD;
	t0 = cm_now_ns();
	ret = run_with(&o, &h, &job, &st, &e);
	ns = cm_now_ns() - t0;
	tu_free(&p);
	CHECKF(ret == -EIO && strstr(e.msg, "EAGAIN"), "%d %s", ret, e.msg);
	CHECKF(ns > 100000000ull, "1000 EAGAIN retries took only %llu us",
	       (unsigned long long)(ns / 1000));
}

/* A direct read coming back short off the alignment is resubmitted from
 * the aligned position before, still with O_DIRECT: the re-read prefix
 * counts once in bytes_read, and the bytes are right. */
static void short_odd_counts_once(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
	struct hooks h = { .fault_kind = ENG_FAULT_SHORT_ODD, .nth = 1 };
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct cm_err e = { 0 };
	int ret;

	whole_item(&p, "odd.bin", 256 << 10, 19);
	CHECK(tu_build(&p) == 0);
	tu_job(&p, &job);
	tu_clear(&p, 0xCD);
	opts_cur(&o);
	ret = run_with(&o, &h, &job, &st, &e);
	CHECK_RUN_SAME(&p, ret, &e);
	CHECK(st.retries >= 1);
	CHECKF(st.bytes_read == 256 << 10, "bytes_read %llu", (unsigned long long)st.bytes_read);
	CHECKF(st.direct_io == 1, "the rest went through the page cache (%llu bytes)",
	       (unsigned long long)st.bytes_buffered);
	tu_free(&p);
}

/* No reads at all; zero-byte shards are reported once, at the end. */
static atomic_uint zero_calls;
static void count_shard(void *user, size_t shard)
{
	(void)user;
	(void)shard;
	atomic_fetch_add(&zero_calls, 1);
}

static void empty_job(void)
{
	uint64_t shard_bytes[3] = { 0, 0, 0 };
	struct eng_job job;
	struct eng_opts o;
	struct eng_stats st;
	struct cm_err e = { 0 };
	int ret;

	memset(&job, 0, sizeof(job));
	job.nshards = 3;
	job.shard_bytes = shard_bytes;
	job.on_shard = count_shard;
	atomic_store(&zero_calls, 0);
	opts_cur(&o);
	ret = run_with(&o, NULL, &job, &st, &e);
	if (backend_missing(ret))
		SKIP(e.msg);
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	CHECK_EQ(atomic_load(&zero_calls), 3);
	CHECK_EQ(st.bytes_read, 0);
	CHECK_EQ(st.reads, 0);
}

/* A progress callback that says stop cancels the run cleanly; progress
 * runs on the calling thread, never on another worker. */
static pthread_t progress_thread;
static atomic_int progress_elsewhere;

static int stop_at_half(void *user, uint64_t done, uint64_t total)
{
	(void)user;
	if (!pthread_equal(pthread_self(), progress_thread))
		atomic_store(&progress_elsewhere, 1);
	return done * 2 >= total;
}

/* p: a whole 8 MiB file; job: its reads, reporting progress to fn(user)
 * on this thread. 0 or -1. */
static int progress_job(struct tu_plan *p, const char *name, uint64_t seed,
			int (*fn)(void *, uint64_t, uint64_t), void *user, struct eng_job *job)
{
	whole_item(p, name, 8 << 20, seed);
	if (tu_build(p))
		return -1;
	tu_job(p, job);
	job->on_progress = fn;
	job->user = user;
	job->total_bytes = 8 << 20;
	progress_thread = pthread_self();
	return 0;
}

static void progress_cancels(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
	struct eng_stats st;
	struct eng_job job;
	struct cm_err e = { 0 };
	int ret;

	CHECK(progress_job(&p, "pc.bin", 10, stop_at_half, NULL, &job) == 0);
	atomic_store(&progress_elsewhere, 0);
	ret = run_plan(&p, NULL, &st, &e, &job);
	if (backend_missing(ret)) {
		tu_free(&p);
		SKIP(e.msg);
	}
	CHECKF(ret == RL_E_CANCELED, "%d %s", ret, e.msg);
	CHECK(!atomic_load(&progress_elsewhere));
	tu_free(&p);
}

/* Progress is reported on the calling thread, in order, at every step
 * (1 MiB here) whichever worker crossed it, and ends at the total. */
struct prog {
	uint64_t last, calls;
	int bad;
};

static int count_progress(void *user, uint64_t done, uint64_t total)
{
	struct prog *pg = user;

	if (!pthread_equal(pthread_self(), progress_thread) || done <= pg->last || done > total)
		pg->bad = 1;
	pg->last = done;
	pg->calls++;
	return 0;
}

static void progress_in_order(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 256 << 10, .use_direct = 1 };
	struct prog pg = { 0, 0, 0 };
	struct eng_stats st;
	struct eng_job job;
	struct cm_err e = { 0 };
	int ret;

	CHECK(progress_job(&p, "po.bin", 26, count_progress, &pg, &job) == 0);
	ret = run_plan(&p, NULL, &st, &e, &job);
	CHECK_RUN_SAME(&p, ret, &e);
	CHECK(!pg.bad);
	CHECKF(pg.calls >= 8, "%llu calls", (unsigned long long)pg.calls);
	CHECK_EQ(pg.last, 8 << 20);
	tu_free(&p);
}

/*
 * Bytes given back wake every waiter of the limiter's condition variable:
 * three workers waiting for bytes and the calling thread waiting for them
 * (eng_progress_wait) all sleep on it, so a give that woke only one would
 * leave the others asleep (a load that never ends). Waiting for the three
 * is bounded, so that such a bug fails the test instead of hanging it.
 */
struct lim_waiters {
	struct eng_run rc;
	atomic_int back;
};

static void *lim_waiter(void *arg)
{
	struct lim_waiters *l = arg;

	eng_lim_wait(&l->rc, 4096);
	atomic_fetch_add(&l->back, 1);
	return NULL;
}

static void *progress_waiter(void *arg)
{
	eng_progress_wait(&((struct lim_waiters *)arg)->rc.b);
	return NULL;
}

static void limiter_give_wakes_every_waiter(void)
{
	static struct lim_waiters l;
	pthread_t t[4];
	int n = 0;

	memset(&l, 0, sizeof(l));
	pthread_mutex_init(&l.rc.b.lock, NULL);
	pthread_cond_init(&l.rc.b.cond, NULL);
	l.rc.b.bound = 4096;
	atomic_store(&l.rc.b.inflight, 4096);
	l.rc.b.running = 1;
	n += pthread_create(&t[0], NULL, progress_waiter, &l) == 0;
	for (int i = 1; i < 4; i++)
		n += pthread_create(&t[i], NULL, lim_waiter, &l) == 0;
	for (int i = 0; i < 10000 && atomic_load(&l.rc.b.waiters) < 3; i++)
		usleep(1000);
	eng_lim_give(&l.rc, 4096);
	for (int i = 0; i < 10000 * TH_SLOW && atomic_load(&l.back) < 3; i++)
		usleep(1000);
	CHECKF(atomic_load(&l.back) == 3 && n == 4, "%d of 3 waiters woke", atomic_load(&l.back));
	pthread_mutex_lock(&l.rc.b.lock); /* let everyone go */
	l.rc.b.running = 0;
	atomic_store(&l.rc.b.failed, 1);
	pthread_cond_broadcast(&l.rc.b.cond);
	pthread_mutex_unlock(&l.rc.b.lock);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	pthread_cond_destroy(&l.rc.b.cond);
	pthread_mutex_destroy(&l.rc.b.lock);
}

/* One read at a time, a small one first, then steps of 1 MiB: every read
 * is reported, the small first one too (as with one ring owner; a rule
 * that reported only step boundaries crossed lost it). */
static void progress_every_read(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 1 << 20, .use_direct = 1 };
	struct prog pg = { 0, 0, 0 };
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct cm_err e = { 0 };
	int ret;

	tu_add_file(&p, tu_path(th_tmpdir(), "pe.bin"), (8 << 20) + 4096, 27);
	tu_add_item(&p, 0, 0, 4096, 1, 0, 0, 0);
	tu_add_item(&p, 0, 4096, 8 << 20, 1, 0, 0, 0);
	CHECK(tu_build(&p) == 0);
	tu_job(&p, &job);
	job.on_progress = count_progress;
	job.user = &pg;
	job.total_bytes = (8 << 20) + 4096;
	progress_thread = pthread_self();
	eng_opts_default(&o);
	o.workers = 1;
	o.queue_depth = 1;
	ret = run_with(&o, NULL, &job, &st, &e);
	CHECK_RUN_SAME(&p, ret, &e);
	CHECK(!pg.bad);
	CHECKF(pg.calls == p.nreads, "%llu calls for %zu reads", (unsigned long long)pg.calls,
	       p.nreads);
	tu_free(&p);
}

/* rlperf's shape: a generator of reads with no copies (one worker, the
 * calling thread, whatever the options say). */
struct gen {
	uint64_t next, end;
	uint32_t len;
	unsigned nread;
};

static int gen_next(void *user, struct cm_read *out)
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

static void on_read_count(void *user, const struct cm_read *r, uint64_t s, uint64_t c)
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
	struct cm_err e = { 0 };
	int ret;

	tu_add_file(&p, tu_path(th_tmpdir(), "g.bin"), 4 << 20, 11);
	paths[0] = p.paths[0];
	memset(&job, 0, sizeof(job));
	job.nfiles = 1;
	job.paths = paths;
	job.file_sizes = sizes;
	job.next = gen_next;
	job.on_read = on_read_count;
	job.user = &g;
	opts_cur(&o);
	o.buffer_bytes = 128 << 10;
	ret = run_plan(&p, &o, &st, &e, &job);
	if (backend_missing(ret)) {
		tu_free(&p);
		SKIP(e.msg);
	}
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	CHECK_EQ(st.bytes_read, 4 << 20);
	CHECK_EQ(g.nread, 32);
	CHECK_EQ(st.workers, 1);
	/* a buffer for every read in flight: the generator's reads all
	 * may need one */
	CHECK_EQ(st.buffers, o.queue_depth);
	if (cur_backend == ENG_IO_URING)
		CHECK(st.registered_buffers > 0 && st.registered_files);
	tu_free(&p);
}

/* io_uring refused (as with kernel.io_uring_disabled or a seccomp filter):
 * auto falls back to libaio and says why; forcing io_uring fails. */
static void setup_refused_falls_back(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
	struct hooks h = { .fault_kind = ENG_FAULT_SETUP, .fault_backend = ENG_IO_URING };
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct cm_err e = { 0 };
	int ret;

	whole_item(&p, "fb.bin", 70000, 12);
	CHECK(tu_build(&p) == 0);
	tu_job(&p, &job);
	opts_cur(&o);
	o.backend = ENG_AUTO;
	ret = run_with(&o, &h, &job, &st, &e);
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	CHECK_SAME(&p);
	CHECK(st.backend == ENG_LIBAIO || st.backend == ENG_PREAD);
	CHECKF(strstr(st.fallbacks, "io_uring unavailable: Operation not permitted") &&
	       (st.fallback_flags & ENG_FALLBACK_BACKEND), "%s (flags 0x%x)", st.fallbacks,
	       st.fallback_flags);

	o.backend = ENG_IO_URING;
	ret = run_with(&o, &h, &job, &st, &e);
	CHECKF(ret == RL_E_BACKEND && strstr(e.msg, "io_uring"), "%d %s", ret, e.msg);
	tu_free(&p);
}

/* The kernel refusing the ring's memory (ENOMEM) is a reason to fall
 * back, unlike our own allocations failing (alloc_failures); forcing
 * io_uring fails with the reason. The note's reason is true for the
 * running kernel: RLIMIT_MEMLOCK only before 5.12. */
static void uring_enomem_falls_back(void)
{
	struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
	struct hooks h = { .setup_err = ENOMEM };
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct cm_err e = { 0 };
	struct utsname u;
	int ret;

	whole_item(&p, "nomem.bin", 70000, 17);
	CHECK(tu_build(&p) == 0);
	tu_job(&p, &job);
	opts_cur(&o);
	o.backend = ENG_AUTO;
	ret = run_with(&o, &h, &job, &st, &e);
	CHECKF(ret == 0, "%d %s", ret, e.msg);
	CHECK_SAME(&p);
	CHECK(st.backend == ENG_LIBAIO || st.backend == ENG_PREAD);
	CHECKF(strstr(st.fallbacks, "io_uring unavailable: Cannot allocate memory") &&
	       st.fallback_flags == ENG_FALLBACK_BACKEND, "%s (flags 0x%x)", st.fallbacks,
	       st.fallback_flags);
	CHECK(uname(&u) == 0);
	CHECKF(!strstr(st.fallbacks, "before Linux 5.12") ==
	       !strstr(eng_ring_nomem_reason(u.release), "before"), "%s on %s", st.fallbacks,
	       u.release);
	CHECK(strstr(eng_ring_nomem_reason("5.10.0-28-amd64"), "RLIMIT_MEMLOCK before Linux 5.12"));
	CHECK(strstr(eng_ring_nomem_reason("4.19.0"), "RLIMIT_MEMLOCK"));
	CHECK(!strstr(eng_ring_nomem_reason("6.18.44-fc"), "RLIMIT_MEMLOCK"));
	CHECK(!strstr(eng_ring_nomem_reason("5.12.0"), "RLIMIT_MEMLOCK"));

	o.backend = ENG_IO_URING;
	ret = run_with(&o, &h, &job, &st, &e);
	CHECKF(ret == RL_E_BACKEND && strstr(e.msg, "io_uring"), "%d %s", ret, e.msg);
	tu_free(&p);
}

/* A real seccomp filter (x86_64) refusing system call nr with errno err
 * from here on, as container runtimes do. Returns 0, or -1 when filters
 * are unavailable. */
static int deny_syscall(unsigned nr, int err)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (uint32_t)err),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { CM_ARRAY_SIZE(f), f };

	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	       prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) ? -1 : 0;
}

/* io_uring_setup refused with errno err (as container runtimes do), in
 * a child: auto falls back to libaio and says why. */
static int seccomp_child(struct tu_plan *p, int err)
{
	struct eng_opts o;
	struct eng_stats st;
	struct cm_err e = { 0 };
	char want[128];
	uint64_t at;
	int ret;

	if (deny_syscall(__NR_io_uring_setup, err))
		return 4;
	eng_opts_default(&o);
	o.backend = ENG_AUTO;
	cur_backend = ENG_AUTO;
	ret = run_plan(p, &o, &st, &e, NULL);
	snprintf(want, sizeof(want), "io_uring unavailable: %s", strerror(err));
	if (ret || tu_compare(p, &at) || st.backend != ENG_LIBAIO || !strstr(st.fallbacks, want) ||
	    !(st.fallback_flags & ENG_FALLBACK_BACKEND)) {
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

	tu_add_file(&p, tu_path(th_tmpdir(), "sc.bin"), 90000, 15);
	tu_add_item(&p, 0, 0, 90000, 1, 0, 0, 0);
	tu_add_item(&p, 0, 100, 30, 50, 1000, 1, 0);
	CHECK(tu_build(&p) == 0);
	for (size_t i = 0; i < CM_ARRAY_SIZE(errs); i++) {
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

/* capget refused (a seccomp filter): the memlock limit falls back to the
 * user id, unlimited for root and RLIMIT_MEMLOCK for anyone else. Exit 0
 * when so, 4 when filters are unavailable. */
static int capget_denied_child(void)
{
	struct rlimit rl = { 8 << 20, 8 << 20 };
	uint64_t root, user;

	if (setrlimit(RLIMIT_MEMLOCK, &rl) || deny_syscall(__NR_capget, EPERM))
		return 4;
	root = eng_memlock_limit();
	if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
		return 3;
	user = eng_memlock_limit();
	if (root != UINT64_MAX || user != (8u << 20)) {
		printf("    child: root %llu, user %llu\n", (unsigned long long)root,
		       (unsigned long long)user);
		return 1;
	}
	return 0;
}

static void memlock_limit_without_capget(void)
{
#if defined(__x86_64__)
	int status = 0;
	pid_t pid;

	if (geteuid() != 0)
		SKIP("needs root to switch to an unprivileged user");
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		status = capget_denied_child();
		fflush(stdout);
		_exit(status);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 4)
		SKIP("seccomp filters unavailable");
	CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
#else
	SKIP("seccomp filter written for x86_64");
#endif
}

/* A hand-made job: one file of fsize bytes, reads and copies as given,
 * one 64 KiB staging area, shards as given; run on backend with bound. */
struct hand {
	const char *paths[1];
	uint64_t sizes[1];
	uint8_t *staging[1];
	uint64_t staging_bytes[1];
	struct sink_host host;
	struct eng_job job;
};

static void hand_job(struct hand *h, const char *name, uint64_t fsize,
		     const struct cm_read *reads, size_t nreads,
		     const struct cm_copy *copies, size_t ncopies,
		     const uint64_t *shard_bytes, size_t nshards)
{
	uint8_t *content;

	memset(h, 0, sizeof(*h));
	h->paths[0] = tu_path(th_tmpdir(), name);
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
	h->job.sink = sink_host_init(&h->host, 1, h->staging, h->staging_bytes);
	h->job.shard_bytes = shard_bytes;
	h->job.nshards = nshards;
}

static int hand_run(struct hand *h, int backend, uint64_t bound, struct eng_stats *st,
		    struct cm_err *e)
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
/* The VmFlags of the mapping that holds p (smaps), into out; 0 or -1. */
static int vm_flags(const void *p, char *out, size_t cap)
{
	char line[512];
	FILE *f = fopen("/proc/self/smaps", "r");
	int in = 0, ret = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char sp;

		if (sscanf(line, "%lx-%lx%c", &lo, &hi, &sp) == 3 && sp == ' ')
			in = lo <= (unsigned long)p && (unsigned long)p < hi;
		else if (in && !strncmp(line, "VmFlags:", 8)) {
			snprintf(out, cap, "%.200s", line + 8);
			ret = 0;
			break;
		}
	}
	fclose(f);
	return ret;
}

/*
 * eng_buffer_alloc: page-aligned, writable, and not advised for huge
 * pages (no "hg" in its VmFlags), where eng_staging_alloc's memory is
 * (on a kernel with transparent huge pages).
 */
static void buffer_alloc_small_pages(void)
{
	size_t len = 5u << 20;
	uint8_t *b = eng_buffer_alloc(len), *s = eng_staging_alloc(len);
	char fb[256] = "", fs[256] = "";

	CHECK(b && s);
	CHECK(((uintptr_t)b & 4095) == 0);
	memset(b, 0xa5, len);
	CHECK(b[len - 1] == 0xa5);
	CHECK(vm_flags(b, fb, sizeof(fb)) == 0 && vm_flags(s, fs, sizeof(fs)) == 0);
	CHECKF(!strstr(fb, " hg"), "eng_buffer_alloc's VmFlags:%s", fb);
	if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0)
		CHECKF(strstr(fs, " hg"), "eng_staging_alloc's VmFlags:%s", fs);
	eng_staging_free(b, len);
	eng_staging_free(s, len);
	eng_staging_free(NULL, 0);
}

static void huge_bounce_read(void)
{
	struct cm_read r = { .off = 0, .len = 0xFFFFF001u, .min_len = 1 };
	struct cm_copy c = { .src = 0, .len = 1, .count = 1 };
	struct eng_stats st;
	struct eng_pool pool;
	struct cm_err e = { 0 };
	struct hand h;
	int ret;

	hand_job(&h, "huge.bin", 8192, &r, 1, &c, 1, NULL, 0);
	r.ncopies = 1;
	ret = hand_run(&h, ENG_PREAD, 8ull << 30, &st, &e);
	free(h.staging[0]);
	CHECKF(ret == RL_E_INVALID_ARG && strstr(e.msg, "bounce buffer"), "%d %s", ret, e.msg);
	CHECK_EQ(st.reads, 0);

	ret = eng_pool_create(&pool, 1, 0xFFFFF001u, 0, 0);
	if (ret == 0)
		eng_pool_destroy(&pool);
	CHECKF(ret < 0, "pool of 0xFFFFF001 bytes: %d", ret);
}

/* Empty copies (count 0) are checked like any other: a device or shard
 * out of range is refused before the completion thread indexes it. */
static void empty_copy_bounds(void)
{
	struct cm_read r = { .off = 0, .len = 4096, .min_len = 4096, .ncopies = 2 };
	struct cm_copy c[2] = {
		{ .src = 0, .len = 4096, .count = 1, .dst = 0, .dev = 0, .shard = 0 },
		{ .src = 0, .len = 16, .count = 0, .dst = 8192, .dev = 0, .shard = 0 },
	};
	uint64_t shard_bytes[1] = { 4096 };
	struct eng_stats st;
	struct cm_err e = { 0 };
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
	struct cm_read r[2] = {
		{ .off = 0, .len = 4096, .min_len = 4096, .first_copy = 0, .ncopies = 4 },
		{ .off = 0, .len = 4096, .min_len = 4096, .first_copy = 0, .ncopies = 1 },
	};
	struct cm_copy c[4] = {
		{ .src = 0, .len = 4096, .count = 1, .dst = 0, .shard = 0 },
		{ .src = 0, .len = 0, .count = 1, .dst = 4096, .shard = 1 },
		{ .src = 0, .len = 16, .count = 0, .dst = 4096, .shard = 0 },
		{ .src = 0, .len = 0, .count = 3, .dst = 4096, .shard = 2 },
	};
	uint64_t shard_bytes[3] = { 4096, 0, 0 };
	struct eng_stats st;
	struct cm_err e = { 0 };
	struct hand h;
	int ret;

	for (size_t b = 0; b < CM_ARRAY_SIZE(backends); b++) {
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
static int aio_refuse_child(struct tu_plan *p, uint32_t n, unsigned workers)
{
	struct hooks h = { .aio_refuse = n };
	struct eng_opts o;
	struct eng_stats st;
	struct eng_job job;
	struct cm_err e = { 0 };
	uint64_t at;
	int ret;

	alarm(20);
	eng_opts_default(&o);
	o.backend = ENG_LIBAIO;
	o.queue_depth = 2;
	o.workers = workers;
	tu_job(p, &job);
	tu_clear(p, 0xAB);
	ret = run_with(&o, &h, &job, &st, &e);
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

	tu_add_file(&p, tu_path(th_tmpdir(), "refuse.bin"), 70000, 16);
	tu_add_item(&p, 0, 0, 70000, 1, 0, 0, 0);
	CHECK(tu_build(&p) == 0);
	for (size_t i = 0; i < 2 * CM_ARRAY_SIZE(refusals); i++) {
		int status = 0;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0)
			_exit(aio_refuse_child(&p, refusals[i / 2], i % 2 ? 2 : 1));
		CHECK(waitpid(pid, &status, 0) == pid);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 4) {
			tu_free(&p);
			SKIP("libaio unavailable");
		}
		CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		       "%u refusals: child status %d", refusals[i / 2], status);
	}
	tu_free(&p);
}

/* Bytes past min_len may not arrive (a short read stopping there is
 * accepted): a copy taking them, or a direct read crediting them, would
 * land stale bytes; refused. */
static void copies_within_min_len(void)
{
	struct cm_read r = { .off = 0, .len = 8192, .min_len = 4096, .ncopies = 1 };
	struct cm_copy c = { .src = 0, .len = 4096, .count = 1 };
	uint64_t shard_bytes[1] = { 4096 };
	struct eng_stats st;
	struct cm_err e = { 0 };
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
	r.flags = CM_READ_DIRECT;
	ret = hand_run(&h, ENG_PREAD, 0, &st, &e);
	free(h.staging[0]);
	CHECKF(ret == RL_E_INVALID_ARG, "%d %s", ret, e.msg);
}

/* Waits for an unprivileged test's child, then removes its file and
 * directory; returns the child's status (-1: not reaped). */
static int reap_child(pid_t pid, struct tu_plan *p, const char *dir)
{
	int status = -1;

	if (waitpid(pid, &status, 0) != pid)
		status = -1;
	unlink(p->paths[0]);
	rmdir(dir);
	tu_free(p);
	return status;
}

/* Drops CAP_IPC_LOCK from this process: root as in a container whose
 * capability set lacks it (Docker's default). */
static int drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	unsigned i = CAP_TO_INDEX(CAP_IPC_LOCK);

	if (syscall(SYS_capget, &h, d) < 0)
		return -1;
	d[i].effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	d[i].permitted &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	d[i].inheritable &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	return (int)syscall(SYS_capset, &h, d);
}

/* The child of memlock_limited: 0 when its load is byte-exact and the
 * stats say registration and locking shrank for the worker's share of
 * RLIMIT_MEMLOCK; 1 when not, 3 when it could not drop its rights, 4 when
 * the backend is unavailable. */
static int memlock_child(struct tu_plan *p, int as_root)
{
	struct rlimit rl = { 8 << 20, 8 << 20 };
	struct eng_opts o;
	struct eng_stats st;
	struct cm_err e = { 0 };
	uint64_t at;
	int ret;

	if (setrlimit(RLIMIT_MEMLOCK, &rl) ||
	    (as_root ? drop_ipc_lock() != 0 :
		       setgroups(0, NULL) || setgid(65534) || setuid(65534)))
		return 3;
	opts_cur(&o);
	o.buffers = 32;
	o.inflight_bytes = 64 << 20;
	ret = run_plan(p, &o, &st, &e, NULL);
	if (ret == RL_E_BACKEND)
		return 4;
	if (ret) {
		printf("    child: %d %s\n", ret, e.msg);
		return 1;
	}
	if (tu_compare(p, &at)) {
		printf("    child: bytes differ at %llu\n", (unsigned long long)at);
		return 1;
	}
	/* Sized by the share, not refused by the kernel after the attempt. */
	if (cur_backend == ENG_IO_URING &&
	    (st.registered_buffers >= st.buffers || !strstr(st.fallbacks, "share of RLIMIT_MEMLOCK") ||
	     !(st.fallback_flags & ENG_FALLBACK_BUFFERS_UNREGISTERED))) {
		printf("    child: registered %u of %u (%s)\n", st.registered_buffers, st.buffers,
		       st.fallbacks);
		return 1;
	}
	if (!strstr(st.fallbacks, "buffers skipped: over the worker's share") ||
	    !(st.fallback_flags & ENG_FALLBACK_BUFFERS_UNLOCKED)) {
		printf("    child: no mlock note (%s)\n", st.fallbacks);
		return 1;
	}
	return 0;
}

/* A 32 MiB pool under an 8 MiB RLIMIT_MEMLOCK, without CAP_IPC_LOCK: an
 * unprivileged user, or root in a container that dropped it (as_root).
 * Registration and locking shrink or stop, sized by the limit, the load
 * succeeds with the same bytes and the stats say so. Root without the
 * capability was taken for unlimited: every buffer registered and locked
 * was tried, and refused by the kernel. */
static void memlock_limited(int as_root)
{
	char dir[] = "/tmp/ringload-memlock-XXXXXX";
	struct tu_plan p = { .align = 4096, .chunk = 1 << 20, .use_direct = 0 };
	int status = 0;
	pid_t pid;

	if (geteuid() != 0)
		SKIP("needs root to drop its rights");
	CHECK(mkdtemp(dir));
	CHECK(chmod(dir, 0755) == 0);
	tu_add_file(&p, tu_path(dir, "m.bin"), 48 << 20, 13);
	for (unsigned i = 0; i < 48; i++)
		tu_add_item(&p, 0, (uint64_t)i << 20, 1 << 20, 1, 0, i % 2, 0);
	CHECK(tu_build(&p) == 0);
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		status = memlock_child(&p, as_root);
		fflush(stdout);         /* _exit flushes nothing */
		_exit(status);
	}
	status = reap_child(pid, &p, dir);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 4)
		SKIP("backend unavailable without the rights");
	CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

static void unprivileged_memlock(void)
{
	memlock_limited(0);
}

static void root_without_ipc_lock(void)
{
	memlock_limited(1);
}

/* In a child running as nobody under an 8 MiB RLIMIT_MEMLOCK: a session
 * whose 16 MiB of fixed memory exceeds every worker's share reads it
 * unregistered, byte-exact, and says why. Exit 0 when so. */
static int session_memlock_child(struct tu_plan *p)
{
	struct eng_session_needs n = { p->sizes[0], p->nreads, 0, 0, 1 << 20, 0 };
	struct eng_fixed fixed = { p->staging[0], p->staging_bytes[0] };
	struct eng_session *s = NULL;
	struct eng *eng = NULL;
	struct eng_stats st;
	struct cm_err e = { 0 };
	struct eng_opts o;
	struct eng_job job;
	char why[64] = "";
	uint64_t at;
	int ret;

	opts_cur(&o);
	tu_job(p, &job);
	ret = eng_create(&o, &eng, &e);
	if (ret == 0)
		ret = eng_session_begin(eng, &job, &n, &fixed, 1, &st, &s, &e);
	if (ret == 0)
		ret = eng_session_run(s, &job, &st, &e);
	if (ret == RL_E_BACKEND)
		return 4;
	if (ret == 0 && (eng_session_fixed(s, why, sizeof(why)) || st.reads_fixed ||
			 tu_compare(p, &at)))
		ret = -EINVAL;
	if (ret)
		printf("    child: %d %s; registered: %s, %llu fixed reads\n", ret, e.msg, why,
		       (unsigned long long)st.reads_fixed);
	else if (cur_backend == ENG_IO_URING && !strstr(why, "RLIMIT_MEMLOCK"))
		ret = printf("    child: why not registered: %s\n", why);
	eng_session_end(s);
	eng_destroy(eng);
	return ret ? 1 : 0;
}

static void session_over_memlock_unregistered(void)
{
	char dir[] = "/tmp/ringload-sessmem-XXXXXX";
	struct tu_plan p = { .align = 4096, .chunk = 1 << 20, .use_direct = 1 };
	struct rlimit rl = { 8 << 20, 8 << 20 };
	int status = 0;
	pid_t pid;

	if (geteuid() != 0)
		SKIP("needs root to switch to an unprivileged user");
	CHECK(mkdtemp(dir) && chmod(dir, 0755) == 0); /* nobody reads the file */
	tu_add_file(&p, tu_path(dir, "s.bin"), 16 << 20, 21);
	tu_add_item(&p, 0, 0, 16 << 20, 1, 0, 0, 0);
	CHECK(tu_build(&p) == 0);
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(setrlimit(RLIMIT_MEMLOCK, &rl) || setgroups(0, NULL) || setgid(65534) ||
		      setuid(65534) ? 3 : session_memlock_child(&p));
	status = reap_child(pid, &p, dir);
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
	struct cm_err e = { 0 };
	int ret = -ENOMEM;
	long n;

	fault_plan(&p);
	CHECK(tu_build(&p) == 0);
	for (n = 0; n < 200 && ret == -ENOMEM; n++) {
		struct eng_opts o;
		struct eng_job job;
		struct eng *eng = NULL;

		opts_cur(&o);
		tu_job(&p, &job);
		cm_alloc_fail_after(n);
		ret = eng_create(&o, &eng, &e);
		if (ret == 0)
			ret = eng_run(eng, &job, &st, &e);
		cm_alloc_fail_after(-1);
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

#define T(fn) TU_TEST(fn)

/* eng_stats_merge's rules: counts add up either way; resources add up
 * over workers (at once) and are the greatest over batches (one after
 * another), wall seconds the other way round; the first part with workers
 * gives registered_files; direct_io needs every part; notes kept once;
 * the read span from the earliest first to the latest last clock. */
static void stats_merge_rules(void)
{
	struct eng_stats a = { 0 }, b = { 0 }, c = { 0 }, w = { 0 }, s = { 0 };

	a.workers = 2, a.buffers = 8, a.queue_depth = 16, a.reads = 10, a.reads_fixed = 4;
	a.bytes_read = 100, a.hashed_bytes = 7, a.read_seconds = 1, a.setup_seconds = 0.5;
	a.scatter_seconds = 0.25, a.peak_inflight = 64, a.registered_files = 1, a.direct_io = 1;
	a.backend = ENG_IO_URING, a.read_first_ns = 500, a.read_last_ns = 900;
	snprintf(a.fallbacks, sizeof(a.fallbacks), "x refused; y off");
	b = a;
	b.workers = 1, b.buffers = 4, b.queue_depth = 8, b.peak_inflight = 128;
	b.read_seconds = 2, b.registered_files = 0, b.direct_io = 0;
	b.read_first_ns = 300, b.read_last_ns = 800;
	snprintf(b.fallbacks, sizeof(b.fallbacks), "y off; z gone");
	eng_stats_merge(&w, &a, ENG_MERGE_WORKERS);
	eng_stats_merge(&w, &b, ENG_MERGE_WORKERS);
	eng_stats_merge(&s, &a, ENG_MERGE_BATCHES);
	eng_stats_merge(&s, &b, ENG_MERGE_BATCHES);
	/* a worker that never submitted: no clock, nothing counted */
	c.workers = 1;
	eng_stats_merge(&w, &c, ENG_MERGE_WORKERS);
	CHECKF(w.read_first_ns == 300 && w.read_last_ns == 900 && s.read_first_ns == 300,
	       "%llu %llu %llu", (unsigned long long)w.read_first_ns,
	       (unsigned long long)w.read_last_ns, (unsigned long long)s.read_first_ns);
	CHECK(w.workers == 4 && w.buffers == 12 && w.queue_depth == 24);
	CHECK(w.reads == 20 && s.reads == 20 && w.reads_fixed == 8 && s.reads_fixed == 8);
	CHECK(w.bytes_read == 200 && s.hashed_bytes == 14 && s.scatter_seconds == 0.5);
	CHECK(s.workers == 2 && s.buffers == 8 && s.queue_depth == 16);
	CHECK(w.read_seconds == 2 && w.setup_seconds == 0.5);
	CHECK(s.read_seconds == 3 && s.setup_seconds == 1);
	CHECK(w.peak_inflight == 128 && s.peak_inflight == 128);
	CHECK(w.registered_files == 1 && s.registered_files == 1);
	CHECK(w.direct_io == 0 && s.direct_io == 0 && s.backend == ENG_IO_URING);
	CHECKF(!strcmp(s.fallbacks, "x refused; y off; z gone"), "%s", s.fallbacks);
}

int main(void)
{
	/* every backend, with one worker and with several */
	static const struct tu_test each[] = {
		T(whole_file_direct), T(strided_and_unaligned), T(stride_equals_len),
		T(large_direct), T(buffered_unaligned), T(tmpfs_files), T(auto_choice), T(random_plans),
		T(limiter_bound), T(faults_nth_read), T(hard_submit_error), T(truncated_file),
		T(short_odd_counts_once), T(short_reads_small_bound), T(empty_job), T(progress_cancels), T(progress_in_order),
		T(generator_no_copies), T(on_data_hook), T(unprivileged_memlock), T(root_without_ipc_lock),
		T(alloc_failures), T(session_batches), T(session_fault_in_a_later_batch),
		T(session_bounce_without_buffers),
		T(session_over_memlock_unregistered),
	};
	/* every backend, worker counts chosen inside */
	static const struct tu_test per_backend[] = {
		T(worker_counts_1_to_8), T(fault_in_one_worker),
	};
	static const struct tu_test once[] = {
		T(bad_jobs), T(huge_bounce_read), T(empty_copy_bounds), T(shard_reported_once),
		T(aio_submit_refused), T(copies_within_min_len), T(eagain_backs_off),
		T(uring_submit_eagain), T(progress_every_read), T(aio_reap_sleeps_until_woken),
		T(setup_refused_falls_back), T(uring_enomem_falls_back), T(seccomp_falls_back),
		T(memlock_limit_without_capget),
		T(limiter_give_wakes_every_waiter), T(stats_merge_rules), T(probe_samples_long_ranges),
		T(buffer_alloc_small_pages),
	};
	char name[128];

	th_seed();
	for (size_t b = 0; b < CM_ARRAY_SIZE(backends); b++) {
		cur_backend = backends[b];
		tu_run_workers(each, CM_ARRAY_SIZE(each), cur_backend, &cur_workers);
		cur_workers = 1;
		for (size_t t = 0; t < CM_ARRAY_SIZE(per_backend); t++) {
			snprintf(name, sizeof(name), "%s/%s", eng_backend_name(cur_backend),
				 per_backend[t].name);
			th_run(name, per_backend[t].fn);
		}
	}
	cur_backend = ENG_IO_URING;
	for (size_t t = 0; t < CM_ARRAY_SIZE(once); t++)
		th_run(once[t].name, once[t].fn);
	return th_done();
}
