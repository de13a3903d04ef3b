/*
 * rlperf_job.c - rlperf's raw-read jobs: offsets from a generator, fed to
 * ringload's engine one read at a time through eng_job.next, completion
 * latencies recorded from eng_job.on_read. Each job is a thread with its own
 * engine, as each fio job is a process with its own ring.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>

#include "rlperf.h"

/* ---------------------------------------------------------------- */
/* Offsets                                                           */
/* ---------------------------------------------------------------- */

#define LCG_MUL 6364136223846793005ull  /* = 1 mod 4: full period mod 2^k */
#define MIX_MUL 0x9e3779b97f4a7c15ull   /* odd: a bijection mod 2^k */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static void gen_new_pass(struct rp_gen *g)
{
	g->i = 0;
	if (g->random)  /* an odd increment: a new order each pass */
		g->inc = (mix64(g->seed + g->pass) | 1) & g->mask;
	if (g->random && !g->inc)
		g->inc = 1;  /* mask 0 (one block) keeps x at 0 */
}

void rp_gen_init(struct rp_gen *g, uint64_t base, uint64_t bytes, uint64_t bs,
		 int random, uint64_t seed)
{
	unsigned k = 0;

	memset(g, 0, sizeof(*g));
	g->base = base;
	g->bs = bs;
	g->nblocks = bytes / bs;
	g->random = random;
	g->seed = seed;
	while (k < 64 && (1ull << k) < g->nblocks)
		k++;
	g->mask = k == 64 ? UINT64_MAX : (1ull << k) - 1;
	g->shift = (k + 1) / 2;
	g->x = mix64(seed) & g->mask;
	gen_new_pass(g);
}

/* A permutation of [0, 2^k): xorshift and odd multiply are bijections. */
static uint64_t scramble(const struct rp_gen *g, uint64_t y)
{
	if (!g->shift)
		return y;
	y ^= y >> g->shift;
	y = (y * MIX_MUL) & g->mask;
	return y ^ (y >> g->shift);
}

int rp_gen_next(struct rp_gen *g, uint64_t *off)
{
	uint64_t b;

	if (g->i == g->nblocks) {
		g->pass++;
		gen_new_pass(g);
		return 0;
	}
	if (!g->random) {
		b = g->i;
	} else {
		/* every state comes once in 2^k steps, so every block
		 * comes once a pass; fewer than half the states are skipped */
		do {
			g->x = (g->x * LCG_MUL + g->inc) & g->mask;
			b = scramble(g, g->x);
		} while (b >= g->nblocks);
	}
	g->i++;
	*off = g->base + b * g->bs;
	return 1;
}

/* ---------------------------------------------------------------- */
/* Jobs                                                              */
/* ---------------------------------------------------------------- */

/* Set from a signal handler, read by every job's generator. */
static volatile sig_atomic_t stop_requested;

void rp_stop(void)
{
	stop_requested = 1;
}

struct job {
	const struct rp_opts *o;
	const struct rp_engine_ops *ops;
	const char *paths[1];
	uint64_t sizes[1];
	struct rp_gen gen;

	/* engine.h runs next() and on_read() on the one thread that owns the
	 * backend, so none of this needs a lock */
	uint64_t start_ns, deadline_ns;
	uint64_t meas_ns;       /* measurement starts here (start + ramp) */
	uint64_t seen_ns;       /* the latest completion time seen */
	uint64_t planned;       /* reads of one pass */
	struct rp_hist *hist;
	uint64_t bytes, ios, all_bytes, last_ns;

	int rc;
	struct eng_stats st;
	struct rl_err err;
	pthread_t tid;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int job_next(void *user, struct rl_read *out)
{
	struct job *j = user;
	uint64_t off;

	if (stop_requested)
		return 0;
	if (!j->start_ns) {
		/* the clock starts at the first submission: engine set-up
		 * (rings, buffer registration) is not the drive's time */
		j->start_ns = j->seen_ns = now_ns();
		j->meas_ns = j->start_ns + j->o->ramp_ns;
		if (j->o->runtime_ns)
			j->deadline_ns = j->start_ns + j->o->ramp_ns + j->o->runtime_ns;
	} else if (j->deadline_ns && j->seen_ns >= j->deadline_ns) {
		/* the engine's completion times tell the time for free: a
		 * clock read per read costs more than the rest of this path */
		return 0;
	}
	if (!rp_gen_next(&j->gen, &off)) {
		/* end of a pass: the job is done unless it loops on time */
		if (!j->o->time_based || !rp_gen_next(&j->gen, &off))
			return 0;
	}
	memset(out, 0, sizeof(*out));
	out->off = off;
	out->len = out->min_len = (uint32_t)j->o->bs;
	return 1;
}

static void job_on_read(void *user, const struct rl_read *r, uint64_t submit_ns,
			uint64_t complete_ns)
{
	struct job *j = user;

	j->seen_ns = complete_ns;
	j->all_bytes += r->len;
	if (complete_ns < j->meas_ns)
		return;  /* ramp_time: not measured */
	rp_hist_add(j->hist, complete_ns > submit_ns ? complete_ns - submit_ns : 0);
	j->bytes += r->len;
	j->ios++;
	if (complete_ns > j->last_ns)
		j->last_ns = complete_ns;
}

static void *job_main(void *arg)
{
	struct job *j = arg;
	const struct rp_opts *o = j->o;
	struct eng_opts eo;
	struct eng_job ej;
	struct eng *eng = NULL;

	j->ops->opts_default(&eo);
	eo.backend = o->engine;
	eo.queue_depth = o->iodepth;
	/* as fio: one buffer per read in flight. Raw reads have nothing to
	 * scatter, so the engine frees each buffer the moment it is reaped */
	eo.buffers = o->iodepth;
	eo.buffer_bytes = (uint32_t)o->bs;
	eo.inflight_bytes = (uint64_t)o->iodepth * o->bs;
	eo.register_buffers = o->fixedbufs;
	eo.register_files = o->registerfiles;
	eo.direct = o->direct;
	eo.threads = o->iodepth;  /* psync: a pool as deep as the queue */

	memset(&ej, 0, sizeof(ej));
	ej.nfiles = 1;
	ej.paths = j->paths;
	ej.file_sizes = j->sizes;
	ej.next = job_next;
	ej.on_read = job_on_read;
	ej.user = j;
	ej.total_bytes = o->time_based ? 0 : j->planned * o->bs;

	j->rc = j->ops->create(&eo, &eng, &j->err);
	if (j->rc >= 0)
		j->rc = j->ops->run(eng, &ej, &j->st, &j->err);
	j->ops->destroy(eng);
	if (j->rc >= 0 && !stop_requested && !o->time_based && !j->deadline_ns &&
	    j->all_bytes != j->planned * o->bs)
		j->rc = rl_err_set(&j->err, -EIO, "the engine finished with %llu of "
				   "%llu bytes read", (unsigned long long)j->all_bytes,
				   (unsigned long long)(j->planned * o->bs));
	return NULL;
}

static double tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	while (nanosleep(&ts, &ts) && errno == EINTR && !stop_requested)
		;
}

/* Checks the region against the file; fills *bytes with the bytes a pass
 * reads. Returns 0 or -1 with the message in r. */
static int check_region(const struct rp_opts *o, uint64_t file_size,
			uint64_t *bytes, struct rp_result *r)
{
	struct eng_align al;
	uint64_t size = o->size, end;
	int rc;

	if (!size) {
		if (o->offset >= file_size)
			goto beyond;
		size = file_size - o->offset;
	}
	if (rl_add64(o->offset, size, &end) || end > file_size)
		goto beyond;
	if (size < o->bs) {
		snprintf(r->errmsg, sizeof(r->errmsg), "rlperf: size %llu is smaller "
			 "than bs %llu", (unsigned long long)size,
			 (unsigned long long)o->bs);
		return -1;
	}
	if (o->direct) {
		rc = eng_probe_align(o->filename, &al);
		if (rc < 0) {
			snprintf(r->errmsg, sizeof(r->errmsg), "rlperf: %s: %s",
				 o->filename, rl_strerror(rc));
			return -1;
		}
		if (al.direct && (o->offset % al.offset_align || o->bs % al.offset_align)) {
			snprintf(r->errmsg, sizeof(r->errmsg), "rlperf: direct=1 needs "
				 "offset and bs in multiples of %u bytes on %s "
				 "(offset=%llu, bs=%llu)", al.offset_align, o->filename,
				 (unsigned long long)o->offset, (unsigned long long)o->bs);
			return -1;
		}
	}
	*bytes = size - size % o->bs;  /* as fio: whole blocks only */
	return 0;
beyond:
	snprintf(r->errmsg, sizeof(r->errmsg), "rlperf: offset %llu + size %llu "
		 "is past the end of %s (%llu bytes); rlperf never writes",
		 (unsigned long long)o->offset, (unsigned long long)o->size,
		 o->filename, (unsigned long long)file_size);
	return -1;
}

int rp_run(const struct rp_opts *o, uint64_t file_size,
	   const struct rp_engine_ops *ops, struct rp_result *r)
{
	struct rusage ru0, ru1;
	struct timeval tv;
	struct job *jobs;
	uint64_t bytes, t_start = UINT64_MAX, t_end = 0, t0;
	unsigned started = 0;
	int rc = 0;

	memset(r, 0, offsetof(struct rp_result, clat));
	rp_hist_init(&r->clat);
	memset(&r->eng, 0, sizeof(r->eng));
	r->error = 0;
	r->errmsg[0] = '\0';
	r->numjobs = o->numjobs;
	if (check_region(o, file_size, &bytes, r))
		return r->error = -EINVAL;

	jobs = rl_calloc(o->numjobs, sizeof(*jobs));
	if (!jobs)
		goto nomem;
	for (unsigned i = 0; i < o->numjobs; i++) {
		struct job *j = &jobs[i];

		j->hist = rl_malloc(sizeof(*j->hist));
		if (!j->hist)
			goto nomem_jobs;
		rp_hist_init(j->hist);
		j->o = o;
		j->ops = ops;
		j->paths[0] = o->filename;
		j->sizes[0] = file_size;
		rp_gen_init(&j->gen, o->offset, bytes, o->bs, o->rw == RP_RANDREAD,
			    o->seed + i * 0x9e3779b97f4a7c15ull);
		j->planned = j->gen.nblocks;
	}

	stop_requested = 0;
	gettimeofday(&tv, NULL);
	r->start_unix_ms = (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
	t0 = now_ns();
	getrusage(RUSAGE_SELF, &ru0);
	for (; started < o->numjobs; started++) {
		rc = -pthread_create(&jobs[started].tid, NULL, job_main, &jobs[started]);
		if (rc) {
			snprintf(r->errmsg, sizeof(r->errmsg), "rlperf: starting job %u: %s",
				 started, rl_strerror(rc));
			rp_stop();
			break;
		}
	}
	if (o->ramp_ns && !rc) {
		/* CPU is counted from the end of the ramp, like the I/O */
		sleep_ns(o->ramp_ns);
		getrusage(RUSAGE_SELF, &ru0);
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(jobs[i].tid, NULL);
	getrusage(RUSAGE_SELF, &ru1);
	r->elapsed_s = (double)(now_ns() - t0) / 1e9;

	for (unsigned i = 0; i < started; i++) {
		struct job *j = &jobs[i];

		if (j->rc < 0 && !r->error) {
			r->error = j->rc;
			snprintf(r->errmsg, sizeof(r->errmsg), "rlperf: job %u: %s", i,
				 j->err.msg[0] ? j->err.msg : rl_strerror(j->rc));
		}
		rp_hist_merge(&r->clat, j->hist);
		r->bytes += j->bytes;
		r->ios += j->ios;
		if (j->ios && j->meas_ns < t_start)
			t_start = j->meas_ns;
		if (j->last_ns > t_end)
			t_end = j->last_ns;
	}
	if (rc && !r->error)
		r->error = rc;
	if (started)
		r->eng = jobs[0].st;
	r->runtime_s = t_end > t_start ? (double)(t_end - t_start) / 1e9 : 0.0;
	r->usr_s = tv_s(ru1.ru_utime) - tv_s(ru0.ru_utime);
	r->sys_s = tv_s(ru1.ru_stime) - tv_s(ru0.ru_stime);
	r->ctx = (uint64_t)(ru1.ru_nvcsw + ru1.ru_nivcsw - ru0.ru_nvcsw - ru0.ru_nivcsw);
	r->vctx = (uint64_t)(ru1.ru_nvcsw - ru0.ru_nvcsw);
	r->majf = (uint64_t)(ru1.ru_majflt - ru0.ru_majflt);
	r->minf = (uint64_t)(ru1.ru_minflt - ru0.ru_minflt);

	for (unsigned i = 0; i < o->numjobs; i++)
		rl_free(jobs[i].hist);
	rl_free(jobs);
	return r->error;

nomem_jobs:
	for (unsigned i = 0; i < o->numjobs; i++)
		rl_free(jobs[i].hist);
	rl_free(jobs);
nomem:
	snprintf(r->errmsg, sizeof(r->errmsg), "rlperf: out of memory");
	return r->error = -ENOMEM;
}
