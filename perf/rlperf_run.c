/*
 * rlperf_run.c - rlperf's job clones: each a thread with its own engine
 * (engine/raw.h), as each fio job is a process with its own ring, fed
 * one read at a time by eng_raw_job.next from the offset generators of its
 * files (round robin over the files, fio's default file_service_type), and
 * timed by eng_raw_job.on_read, which the engine calls with each read's submit
 * and completion times on the thread that owns the ring: nothing on the
 * per-read path is locked or atomic, and the deadline check uses the
 * completion times instead of reading the clock.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "perf_time.h"
#include "rlperf.h"

/* fio's flow group: the reads of its clones and their weights. Shared by
 * clones on other threads: atomics, relaxed (a ratio, read approximately,
 * as fio's). */
struct flow {
	unsigned id;
	uint64_t reads, weight;
};

/* Set from a signal handler and read by the clones' threads: a lock-free
 * atomic (async-signal-safe), relaxed, as it only ends the run sooner. */
static int stop_flag;

static int stop_requested(void)
{
	return __atomic_load_n(&stop_flag, __ATOMIC_RELAXED);
}

void rp_stop(void)
{
	__atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
}

/* io_submit_mode=offload: a thread of the clone generates and paces the
 * reads into this queue, the ring's thread takes them (the engine holds
 * while it is empty), so that a pause never delays a completion. */
struct offload {
	struct cm_read *q;
	uint64_t cap;
	uint64_t head, tail;    /* atomics: reads taken (ring's thread), queued */
	int done;               /* atomic: the thread queues no more */
	int stop;               /* atomic: the ring's thread takes no more */
	pthread_t tid;
};

struct worker;
static int werr(struct worker *w, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

struct fstate {
	struct rp_gen gen;
	int done;               /* this pass read whole, no time_based loop */
	int fd;                 /* for invalidating again each pass, or -1 */
};

struct worker {
	const struct rp_task *t;
	rp_engine_fn engine;
	struct rp_task_res *res;
	const char **paths;
	uint64_t *sizes;
	struct fstate *fs;
	size_t cur;             /* the file after the last one read */
	int joined;             /* its thread was joined (stonewall) */
	uint64_t planned;       /* bytes of one pass over every file */

	/* raw.h runs next() and on_read() on the one thread that owns the
	 * backend, so none of this needs a lock */
	uint64_t start_ns, deadline_ns;
	uint64_t seen_ns;       /* the latest completion time seen */
	uint64_t all_bytes, submitted, completed;   /* reads in and out */
	int finished;           /* job_main returned: the ETA thread reads it */
	uint64_t win_ns, win_bytes, win_ios;   /* the sample in progress */

	/* generation: the clone's thread, or its offload thread, owns these */
	uint64_t gen_start, gen_sent;   /* pacing: its first read, reads made */
	uint64_t due_ns;        /* rate_process=poisson: when the next read goes */
	uint64_t prng;          /* its exponential gaps */
	uint64_t prio_rng;      /* cmdprio_percentage: which reads go high */
	uint64_t rate_ns, rate_bytes;   /* ratemin: the cycle in progress */
	uint64_t too_slow;      /* ratemin missed: the rate seen, + 1 */
	struct flow *flow;      /* fio's flow group, or NULL */
	uint64_t flow_reads;    /* this clone's reads counted in it */
	int ss_stop;            /* steady state reached: the checker sets it */
	uint64_t ss_bytes, ss_ios;   /* the checker's last look at the counts */

	/* latency_target: fio's queue-depth search (its latency_qd, _low,
	 * _high, _stable_count, _end_run, the cycle's start, reads, misses) */
	unsigned lat_qd, lat_low, lat_high, lat_stable;
	int lat_end, lat_done, lat_quiesce;
	uint64_t lat_ts, lat_ios, lat_failed;
	uint64_t lat_fatal;     /* a read over the target at depth 1: its ns + 1 */
	struct offload *off;    /* io_submit_mode=offload, else NULL */

	struct rp_logs logs;    /* write_*_log, written on the owner thread */
	int logging;

	/* status_interval: a copy of res asked for by rp_snapshot and made on
	 * the owner thread; all under prog_lock but the relaxed snap_want */
	int snap_want;          /* a copy is asked for */
	int running;            /* job_main writes res: only it may copy */
	struct rp_task_res snap;

	char err[RP_ERRMSG_MAX];  /* why it failed, for r->errmsg */
	pthread_t tid;
};

/* ---------------------------------------------------------------- */
/* Progress, for the ETA line and status_interval's reports         */
/* ---------------------------------------------------------------- */

/* The run under way: published by rp_run, read by rp_progress and
 * rp_snapshot from other threads; the lock keeps the workers alive while
 * they are read (taken once a second, never on the per-read path but for
 * a copy rp_snapshot asks for). */
static pthread_mutex_t prog_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t snap_cond = PTHREAD_COND_INITIALIZER;   /* a copy made */
static struct worker *prog_w;
static size_t prog_n;
static uint64_t prog_t0, prog_unix_ms;
static struct rusage prog_ru0;

static void progress_publish(struct worker *w, size_t n, uint64_t unix_ms)
{
	pthread_mutex_lock(&prog_lock);
	prog_w = w;
	prog_n = n;
	prog_t0 = perf_now_ns();
	prog_unix_ms = unix_ms;
	getrusage(RUSAGE_SELF, &prog_ru0);
	pthread_mutex_unlock(&prog_lock);
}

/* Under prog_lock: w's results as they are now into w->snap. */
static void snap_copy(struct worker *w)
{
	struct rp_hist *h = w->snap.clat;

	w->snap = *w->res;
	w->snap.clat = h;
	w->snap.ss = NULL;      /* steady state is judged at the end only */
	memset(w->snap.prio, 0, sizeof(w->snap.prio));   /* so are priorities */
	if (h)
		memcpy(h, w->res->clat, sizeof(*h));
}

static void snap_take(struct worker *w)
{
	pthread_mutex_lock(&prog_lock);
	snap_copy(w);
	__atomic_store_n(&w->snap_want, 0, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&snap_cond);
	pthread_mutex_unlock(&prog_lock);
}

/* A copy of the results asked for (status_interval): made here, on the
 * thread that writes them; a relaxed load per read while none is. */
static inline void snap_check(struct worker *w)
{
	if (__atomic_load_n(&w->snap_want, __ATOMIC_RELAXED))
		snap_take(w);
}

/* job_main starts (1) or ends (0) writing w->res: from then on only it
 * may copy them, until then (and after) rp_snapshot does. */
static void snap_running(struct worker *w, int on)
{
	pthread_mutex_lock(&prog_lock);
	w->running = on;
	pthread_cond_broadcast(&snap_cond);
	pthread_mutex_unlock(&prog_lock);
}

/* Under prog_lock: whether a running clone still owes its copy. */
static int snap_owed(void)
{
	for (size_t i = 0; i < prog_n; i++)
		if (prog_w[i].running && __atomic_load_n(&prog_w[i].snap_want, __ATOMIC_RELAXED))
			return 1;
	return 0;
}

/* Under prog_lock: asks every running clone for a copy and waits up to a
 * second for them (a clone blocked in a slow read keeps its last copy). */
static int snap_gather(void)
{
	struct timespec ts;

	for (size_t i = 0; i < prog_n; i++) {
		struct worker *w = &prog_w[i];

		if (!w->snap.clat && !(w->snap.clat = malloc(sizeof(*w->snap.clat))))
			return -ENOMEM;
		if (w->running)
			__atomic_store_n(&w->snap_want, 1, __ATOMIC_RELAXED);
		else
			snap_copy(w);
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec++;
	while (snap_owed())
		if (pthread_cond_timedwait(&snap_cond, &prog_lock, &ts) == ETIMEDOUT)
			break;
	return 0;
}

static void usage_delta(struct rp_result *r, const struct rusage *a, const struct rusage *b);

int rp_snapshot(struct rp_result *out)
{
	struct rusage ru;
	int rc = -EAGAIN;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&prog_lock);
	if (prog_w)
		rc = snap_gather();
	if (!rc && !(out->task = calloc(prog_n ? prog_n : 1, sizeof(*out->task))))
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < prog_n; i++) {
		out->task[i] = prog_w[i].snap;
		out->ntasks = i + 1;
		if (!(out->task[i].clat = malloc(sizeof(*out->task[i].clat))))
			rc = -ENOMEM;
		else
			memcpy(out->task[i].clat, prog_w[i].snap.clat, sizeof(*out->task[i].clat));
	}
	if (!rc) {
		getrusage(RUSAGE_SELF, &ru);
		usage_delta(out, &prog_ru0, &ru);
		out->elapsed_s = (double)(perf_now_ns() - prog_t0) / 1e9;
		out->start_unix_ms = prog_unix_ms;
	}
	pthread_mutex_unlock(&prog_lock);
	if (rc)
		rp_result_free(out);
	return rc;
}

size_t rp_progress(struct rp_progress *out, size_t max, uint64_t *t0_ns)
{
	size_t n;

	pthread_mutex_lock(&prog_lock);
	n = prog_n < max ? prog_n : max;
	*t0_ns = prog_t0;
	for (size_t i = 0; i < n; i++) {
		const struct worker *w = &prog_w[i];
		const struct rp_job *j = w->t->job;

		out[i] = (struct rp_progress){
			.rw = j->rw,
			.finished = __atomic_load_n(&w->finished, __ATOMIC_RELAXED),
			.nfiles = w->t->nfiles,
			.bytes = __atomic_load_n(&w->all_bytes, __ATOMIC_RELAXED),
			.ios = __atomic_load_n(&w->completed, __ATOMIC_RELAXED),
			.planned = j->time_based ? 0 : w->planned,
			.until_ns = j->runtime_ns ? j->ramp_ns + j->runtime_ns : 0,
		};
	}
	pthread_mutex_unlock(&prog_lock);
	return n;
}

/* A reason to hand out no more reads (the deadline aside). */
static int stopping(struct worker *w)
{
	/* relaxed: a flag the steady-state checker raises once; a read more
	 * or less after it does not matter */
	return stop_requested() || w->too_slow || __atomic_load_n(&w->ss_stop, __ATOMIC_RELAXED) ||
	       w->lat_done || w->lat_fatal;
}

/* ---------------------------------------------------------------- */
/* latency_target: fio's search for the deepest queue that meets it  */
/* ---------------------------------------------------------------- */

/* The engine asks before each read: latency_target holds while the queue
 * is as deep as the search allows, or while it drains after a step down
 * (fio's io_u_quiesce); offload while its queue is empty. */
static int job_hold(void *user)
{
	struct worker *w = user;
	uint64_t inflight = w->submitted - w->completed;
	struct offload *o = w->off;

	snap_check(w);   /* the ring's thread may wait here a while */
	if (o && o->head == __atomic_load_n(&o->tail, __ATOMIC_ACQUIRE) &&
	    !__atomic_load_n(&o->done, __ATOMIC_ACQUIRE) && !stopping(w) &&
	    !(w->deadline_ns && perf_now_ns() >= w->deadline_ns))
		return 1;   /* offload: nothing queued yet (but more to come) */
	if (!w->t->job->lat_target_ns)
		return 0;
	return w->lat_quiesce ? inflight > 0 : inflight >= w->lat_qd;
}

/* A new cycle: the window, its reads and misses count from now. */
static void lat_cycle(struct worker *w, uint64_t now)
{
	w->lat_ts = now;
	w->lat_ios = w->completed;
	w->lat_failed = 0;
}

/* fio's reset_all_stats before the final run at the depth found: the
 * report holds that depth's reads only, its runtime from now. */
static void lat_reset(struct worker *w, uint64_t now)
{
	struct rp_task_res *r = w->res;
	const struct rp_job *j = w->t->job;

	r->bytes = r->ios = 0;
	rp_hist_init(r->clat);
	memset(&r->bw, 0, sizeof(r->bw));
	memset(&r->iops, 0, sizeof(r->iops));
	memset(r->depth, 0, sizeof(r->depth));
	r->meas_ns = r->last_ns = w->win_ns = now;
	w->win_bytes = w->win_ios = 0;
	if (j->runtime_ns)
		w->deadline_ns = now + j->runtime_ns;
}

/* fio's __lat_target_failed: halfway down to the last depth that held;
 * 1 at depth 1, where there is nowhere to go. */
static int lat_down(struct worker *w)
{
	if (w->lat_qd == 1)
		return 1;
	w->lat_high = w->lat_qd;
	if (w->lat_qd == w->lat_low)
		w->lat_low--;
	w->lat_qd = (w->lat_qd + w->lat_low) / 2;
	w->lat_stable = 0;
	w->lat_quiesce = 1;   /* the new cycle starts once the queue is empty */
	return 0;
}

/* fio's lat_target_success: double (or halfway up to the depth that
 * failed); the same depth twice is the answer: one more window there,
 * measured afresh, and the job ends (unless latency_run). */
static void lat_up(struct worker *w, const struct rp_job *j, uint64_t now)
{
	unsigned qd = w->lat_qd;

	w->lat_low = qd;
	if (qd + 1 == w->lat_high && ++w->lat_stable >= 3) {
		w->lat_high++;   /* fio's nudge out of a stable depth */
		w->lat_stable = 0;
	}
	w->lat_qd = w->lat_high != j->iodepth ? (qd + w->lat_high) / 2 : qd * 2;
	if (w->lat_qd > j->iodepth)
		w->lat_qd = j->iodepth;
	if (!j->lat_run && w->lat_qd == qd) {
		if (w->lat_end) {
			w->lat_done = 1;
		} else {
			w->lat_end = 1;
			lat_reset(w, now);
		}
	}
	lat_cycle(w, now);
}

/* Each measured read: fio's lat_target_failed for one over the target
 * (at latency_percentile=100 it steps down at once), then its
 * lat_target_check once a window has passed. */
static void lat_read(struct worker *w, const struct rp_job *j, uint64_t lat, uint64_t now)
{
	uint64_t ios;

	if (w->lat_done)
		return;  /* the reads still in flight at the end change nothing */
	if (w->lat_quiesce) {
		if (w->completed != w->submitted)
			return;
		w->lat_quiesce = 0;
		lat_cycle(w, now);
	}
	if (lat > j->lat_target_ns) {
		if (j->lat_pct < 100.0)
			w->lat_failed++;
		else if (lat_down(w) && !w->lat_fatal)
			w->lat_fatal = lat + 1;
		if (w->lat_quiesce)
			return;
	}
	if (now < w->lat_ts || now - w->lat_ts < j->lat_window_ns)
		return;  /* completion times may come out of order */
	ios = w->completed - w->lat_ios;
	if (100.0 * (double)(ios - w->lat_failed) / (double)ios >= j->lat_pct)
		lat_up(w, j, now);
	else
		(void)lat_down(w);  /* a new cycle after the quiesce; at depth 1 none */
}

/* ---------------------------------------------------------------- */
/* The per-read path                                                 */
/* ---------------------------------------------------------------- */

/* Next offset of file i; time_based starts the file over at its end,
 * dropping its cache again when reads are buffered (fio's
 * loop_cache_invalidate), or the second pass would read memory. */
static int file_next(struct worker *w, size_t i, uint64_t *off)
{
	struct fstate *f = &w->fs[i];

	if (rp_gen_next(&f->gen, off))
		return 1;
	if (!w->t->job->time_based)
		return 0;
	if (f->fd >= 0)
		(void)rp_invalidate(&w->t->files[i], f->fd);  /* fio ignores it too */
	return rp_gen_next(&f->gen, off);
}

/* The next read after made reads, round robin over the files. */
static int pick(struct worker *w, uint64_t made, uint32_t *file, uint64_t *off)
{
	size_t n = w->t->nfiles;

	/* fio stops a job once it has issued size bytes */
	if (!w->t->job->time_based && made == w->t->max_ios)
		return 0;
	for (size_t k = 0, i = w->cur < n ? w->cur : 0; k < n; k++, i = i + 1 < n ? i + 1 : 0) {
		if (w->fs[i].done)
			continue;
		if (file_next(w, i, off)) {
			w->cur = i + 1;
			*file = (uint32_t)i;
			return 1;
		}
		w->fs[i].done = 1;
	}
	return 0;
}

/* 1, 2-3, 4-7, 8-15, 16-31, 32-63, >= 64 (d >= 1) */
static unsigned depth_bin(uint64_t d)
{
	unsigned b = 63 - (unsigned)__builtin_clzll(d);

	return b < RP_NDEPTH - 1 ? b : RP_NDEPTH - 1;
}

static void sleep_ns(uint64_t ns);

/* A stop for the generator: the run's, or (offload) the clone's end. */
static int gen_stopped(const struct worker *w)
{
	return stop_requested() || (w->off && __atomic_load_n(&w->off->stop, __ATOMIC_RELAXED));
}

/* Sleeps until the clock reaches t, in slices that notice a stop (on
 * the ring's thread also a copy asked for, and the time for the deadline
 * check; an offload thread touches neither). */
static void sleep_until(struct worker *w, uint64_t t)
{
	uint64_t now = perf_now_ns();

	while (now < t && !gen_stopped(w)) {
		sleep_ns(t - now < 100000000ull ? t - now : 100000000ull);
		if (!w->off)
			snap_check(w);
		now = perf_now_ns();
	}
	if (!w->off && now > w->seen_ns)
		w->seen_ns = now;  /* the deadline check reads the time from here */
}

/*
 * fio's rate, rate_iops and rate_process (its usec_for_io): the next read
 * goes no sooner than its bytes and its number allow since the start, or
 * after an exponential gap (poisson). Inline (fio's io_submit_mode=inline)
 * rlperf paces where it submits, and a read in flight meanwhile is reaped
 * after the pause, so its latency counts it; offload paces on the
 * offload thread.
 */
/* splitmix64: the next of a stream of 64 random bits */
static uint64_t splitmix(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void pace(struct worker *w, const struct rp_job *j)
{
	uint64_t due = 0;

	if (j->poisson && j->rate_iops) {
		double u = ((double)(splitmix(&w->prng) >> 11) + 1.0) / 9007199254740992.0;

		w->due_ns += (uint64_t)(-log(u) / (double)j->rate_iops * 1e9);
		due = w->due_ns;
	} else if (j->rate_iops) {
		due = w->gen_start + (uint64_t)((double)w->gen_sent * 1e9 / (double)j->rate_iops);
	}
	if (j->rate) {
		uint64_t by = w->gen_start + (uint64_t)((double)w->gen_sent * (double)j->bs * 1e9 /
							(double)j->rate);

		due = by > due ? by : due;
	}
	if (j->thinktime_ns && w->gen_sent && w->gen_sent % j->thinktime_blocks == 0) {
		uint64_t think = perf_now_ns() + j->thinktime_ns;

		due = think > due ? think : due;
	}
	sleep_until(w, due);
}

/* fio's flow_threshold_exceeded: wait while this clone's share of its
 * group's reads is above its share of the weights. */
static void flow_wait(struct worker *w, const struct rp_job *j)
{
	struct flow *f = w->flow;

	while (!gen_stopped(w)) {
		uint64_t all = __atomic_load_n(&f->reads, __ATOMIC_RELAXED);
		uint64_t weight = __atomic_load_n(&f->weight, __ATOMIC_RELAXED);

		if (!all || !weight || (double)w->flow_reads / (double)all <=
					(double)j->flow / (double)weight)
			break;
		sleep_ns(j->flow_sleep_ns ? j->flow_sleep_ns : 50000);
	}
	__atomic_add_fetch(&f->reads, 1, __ATOMIC_RELAXED);
	w->flow_reads++;
}

/* fio's ratemin, checked at completions once a ratecycle has passed. */
static void check_ratemin(struct worker *w, const struct rp_job *j, uint64_t now)
{
	uint64_t spent = now - w->rate_ns, rate;

	if (now < w->rate_ns || spent < j->ratecycle_ns)
		return;
	rate = (uint64_t)((double)(w->all_bytes - w->rate_bytes) * 1e9 / (double)spent);
	if (rate < j->ratemin && !w->too_slow)
		w->too_slow = rate + 1;
	w->rate_ns = now;
	w->rate_bytes = w->all_bytes;
}

/* The pause before the next read (fio's rate, thinktime, flow). On the
 * ring's thread (inline), or the offload thread. */
static void gen_wait(struct worker *w)
{
	const struct rp_job *j = w->t->job;

	if (w->gen_start && (j->rate || j->rate_iops || j->thinktime_ns))
		pace(w, j);
	if (w->flow)
		flow_wait(w, j);
}

/* The next read: fills out, or 0 when there is none. */
static int generate(struct worker *w, struct cm_read *out)
{
	const struct rp_job *j = w->t->job;
	uint64_t off;
	uint32_t file;
	int high;

	if (!w->gen_start)
		w->gen_start = w->due_ns = perf_now_ns();
	if (!pick(w, w->gen_sent, &file, &off))
		return 0;
	w->gen_sent++;
	memset(out, 0, sizeof(*out));
	out->off = off;
	out->file = file;
	out->len = out->min_len = (uint32_t)j->bs;
	/* fio's cmdprio_percentage: each read high with that chance */
	high = j->cmdprio_pct && splitmix(&w->prio_rng) % 100 < j->cmdprio_pct;
	out->ioprio = rp_job_ioprio(j, high);
	w->res->high_ios += (uint64_t)high;
	return 1;
}

/* The offload thread: generates into the queue while there is room. */
static void *offload_main(void *arg)
{
	struct worker *w = arg;
	struct offload *o = w->off;

	while (!__atomic_load_n(&o->stop, __ATOMIC_RELAXED) && !stop_requested()) {
		uint64_t tail = o->tail;   /* this thread is its only writer */

		if (tail - __atomic_load_n(&o->head, __ATOMIC_ACQUIRE) == o->cap) {
			sleep_ns(20000);   /* iodepth reads wait: the ring is behind */
			continue;
		}
		gen_wait(w);
		if (!generate(w, &o->q[tail % o->cap]))
			break;
		__atomic_store_n(&o->tail, tail + 1, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&o->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* A queued read for the ring's thread, or 0 when the offload thread has
 * ended with none left (job_hold waits while it may queue more). */
static int offload_take(struct worker *w, struct cm_read *out)
{
	struct offload *o = w->off;
	uint64_t head = o->head;   /* this thread is its only writer */

	if (head == __atomic_load_n(&o->tail, __ATOMIC_ACQUIRE))
		return 0;
	*out = o->q[head % o->cap];
	__atomic_store_n(&o->head, head + 1, __ATOMIC_RELEASE);
	w->res->offloaded++;
	return 1;
}

static int job_next(void *user, struct cm_read *out)
{
	struct worker *w = user;
	const struct rp_job *j = w->t->job;

	if (stopping(w))
		return 0;
	if (!w->off)
		gen_wait(w);
	if (!w->start_ns) {
		/* the clock starts at the first submission: engine set-up
		 * (rings, buffer registration) is not the drive's time */
		w->start_ns = w->seen_ns = w->rate_ns = w->lat_ts = perf_now_ns();
		w->res->meas_ns = w->win_ns = w->start_ns + j->ramp_ns;
		if (j->runtime_ns)
			w->deadline_ns = w->res->meas_ns + j->runtime_ns;
	} else if (w->deadline_ns && (w->off ? perf_now_ns() : w->seen_ns) >= w->deadline_ns) {
		/* inline, the engine's completion times tell the time for
		 * free: a clock read per read costs more than the rest;
		 * offload, reads the thread paces need not wait for any */
		return 0;
	}
	if (!(w->off ? offload_take(w, out) : generate(w, out)))
		return 0;
	w->submitted++;
	return 1;
}

/* fio's __io_u_mark_map: 0, 1-4, 5-8, 9-16, 17-32, 33-64, > 64 */
static unsigned batch_bin(unsigned nr)
{
	unsigned b;

	if (nr <= 4)
		return nr > 0;
	b = 63 - (unsigned)__builtin_clzll(nr - 1);   /* 5-8: 2, 9-16: 3 ... */
	return b < RP_NDEPTH - 1 ? b : RP_NDEPTH - 1;
}

/* fio's io_u_mark_depth and io_u_mark_submit at each commit (its
 * td_io_commit), measured after ramp_time as fio resets them */
static void job_on_commit(void *user, unsigned nr, unsigned depth)
{
	struct worker *w = user;

	if (w->seen_ns < w->res->meas_ns)
		return;
	w->res->depth[depth_bin(depth)] += nr;
	w->res->submit[batch_bin(nr)]++;
}

static void job_on_reap(void *user, unsigned nr)
{
	struct worker *w = user;

	if (w->seen_ns >= w->res->meas_ns)
		w->res->complete[batch_bin(nr)]++;
}

static void sample_add(struct rp_samples *s, double x)
{
	if (!s->n || x < s->min)
		s->min = x;
	if (!s->n || x > s->max)
		s->max = x;
	s->n++;
	s->sum += x;
	s->sumsq += x * x;
}

/* fio's bandwidth and IOPS logs: one sample per 500 ms of completions */
static void sample(struct worker *w, uint64_t now)
{
	struct rp_task_res *r = w->res;
	double s = (double)(now - w->win_ns) / 1e9;

	sample_add(&r->bw, (double)(r->bytes - w->win_bytes) / 1024.0 / s);
	sample_add(&r->iops, (double)(r->ios - w->win_ios) / s);
	w->win_ns = now;
	w->win_bytes = r->bytes;
	w->win_ios = r->ios;
}

static void job_on_read(void *user, const struct cm_read *rd, uint64_t submit_ns,
			uint64_t complete_ns)
{
	struct worker *w = user;
	struct rp_task_res *r = w->res;

	snap_check(w);
	w->seen_ns = complete_ns;
	if (w->t->job->ratemin)
		check_ratemin(w, w->t->job, complete_ns);
	/* one writer; the ETA thread reads them once a second: relaxed
	 * stores, plain moves on x86, keep the path free of locked ops */
	__atomic_store_n(&w->all_bytes, w->all_bytes + rd->len, __ATOMIC_RELAXED);
	__atomic_store_n(&w->completed, w->completed + 1, __ATOMIC_RELAXED);
	if (complete_ns < r->meas_ns)
		return;  /* ramp_time: not measured */
	if (w->t->job->lat_target_ns)
		lat_read(w, w->t->job, complete_ns > submit_ns ? complete_ns - submit_ns : 0,
			 complete_ns);
	/* gtod_reduce: fio's disable_lat, _clat, _slat and _bw: neither
	 * latencies nor bandwidth samples */
	if (!w->t->job->gtod_reduce) {
		uint64_t ns = complete_ns > submit_ns ? complete_ns - submit_ns : 0;

		rp_hist_add(r->clat, ns);
		if (r->prio[0].h)
			rp_hist_add(r->prio[rd->ioprio != r->prio[0].ioprio].h, ns);
	}
	if (w->logging)
		rp_logs_read(&w->logs, w->start_ns, complete_ns, complete_ns > submit_ns ?
			     complete_ns - submit_ns : 0, rd->off, rd->len, rd->ioprio);
	r->bytes += rd->len;
	r->ios++;
	if (complete_ns > r->last_ns)
		r->last_ns = complete_ns;
	if (complete_ns - w->win_ns >= RP_SAMPLE_NS && !w->t->job->gtod_reduce)
		sample(w, complete_ns);
}

/* ---------------------------------------------------------------- */
/* One clone                                                         */
/* ---------------------------------------------------------------- */

/* Records why the clone failed; returns code. */
static int werr(struct worker *w, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->err, sizeof(w->err), fmt, ap);
	va_end(ap);
	return code;
}

static void *job_main(void *arg)
{
	struct worker *w = arg;
	const struct rp_job *j = w->t->job;
	struct rp_task_res *r = w->res;
	struct eng_raw_opts eo = {
		.backend = j->engine, .iodepth = rp_job_depth(j), .bs = (uint32_t)j->bs,
		.direct = j->direct, .fixedbufs = j->fixedbufs,
		.registerfiles = j->registerfiles, .hipri = w->t->hipri,
		.sqthread_poll = j->sqthread_poll, .huge_buffers = j->huge_buffers,
		.batch_submit = j->batch_submit, .batch_complete_min = j->batch_cmin,
		.batch_complete_max = j->batch_cmax, .iodepth_low = j->iodepth_low,
	};
	struct eng_raw_job ej = {
		.nfiles = w->t->nfiles, .paths = w->paths, .sizes = w->sizes,
		.next = job_next, .on_read = job_on_read, .user = w,
		.on_commit = job_on_commit, .on_reap = job_on_reap,
		.hold = j->lat_target_ns || w->off ? job_hold : NULL,
		.total_bytes = j->time_based ? 0 : w->planned,
	};

	if (j->startdelay_ns)
		sleep_ns(j->startdelay_ns);  /* fio's startdelay; a stop ends it */
	snap_running(w, 1);
	/* fio's prioclass and prio: the thread's own (psync's reads) */
	if (rp_job_ioprio(j, 0) && syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, 0,
					    (int)rp_job_ioprio(j, 0)) < 0)
		r->error = werr(w, -errno, "ioprio_set of prioclass %u, prio %u: %s",
				j->prioclass, j->prio, strerror(errno));
	if (w->off && pthread_create(&w->off->tid, NULL, offload_main, w)) {
		free(w->off->q);   /* no thread: generate inline, as fio's inline */
		free(w->off);
		w->off = NULL;
	}
	if (r->error >= 0)
		r->error = w->engine(&eo, &ej, &r->eng, w->err, sizeof(w->err));
	if (w->off) {
		__atomic_store_n(&w->off->stop, 1, __ATOMIC_RELAXED);
		pthread_join(w->off->tid, NULL);
		r->submit_threads = 1;
	}
	if (w->logging) {
		int lrc = rp_logs_close(&w->logs);

		if (lrc < 0 && r->error >= 0)
			r->error = werr(w, lrc, "writing its logs: %s",
					      strerror(-lrc));
	}
	r->lat_depth = w->lat_qd;
	if (r->error >= 0 && w->lat_fatal)
		r->error = werr(w, -ETIMEDOUT, "a read took %llu ns at depth 1, over "
				"latency_target %llu ns (fio: max latency exceeded)",
				(unsigned long long)(w->lat_fatal - 1),
				(unsigned long long)j->lat_target_ns);
	if (r->error >= 0 && w->too_slow)
		r->error = werr(w, -EIO, "min rate %llu B/s not met, got %llu "
				      "B/s over %llu ms (ratemin)", (unsigned long long)j->ratemin,
				      (unsigned long long)(w->too_slow - 1),
				      (unsigned long long)(j->ratecycle_ns / 1000000));
	/* every read handed out must come back (rw=read:N may end a file
	 * before its planned bytes, as fio's does) */
	if (r->error >= 0 && !stop_requested() && w->all_bytes != w->submitted * j->bs)
		r->error = werr(w, -EIO, "the engine finished with %llu of "
				      "%llu bytes read", (unsigned long long)w->all_bytes,
				      (unsigned long long)(w->submitted * j->bs));
	if (r->error < 0)
		snprintf(r->errmsg, sizeof(r->errmsg), "%s", w->err[0] ? w->err :
			 rl_strerror(r->error));
	/* a clone that is done gives its weight back, or the others of its
	 * group would wait forever for it to catch up (fio's would) */
	if (w->flow)
		__atomic_sub_fetch(&w->flow->weight, j->flow, __ATOMIC_RELAXED);
	snap_running(w, 0);
	__atomic_store_n(&w->finished, 1, __ATOMIC_RELAXED);
	return NULL;
}

/* ---------------------------------------------------------------- */
/* Steady state: fio's steadystate_check, once a second               */
/* ---------------------------------------------------------------- */

/* A steady-state group: a job's clone, or the clones group_reporting
 * joins (fio judges their sums), judged on the window of the last. */
struct ssgroup {
	struct rp_ss *ss;
	size_t first, n;
	uint64_t prev_ns, from_ns;   /* the last look; samples count from */
};

struct sscheck {
	struct worker *w;
	struct ssgroup *g;
	size_t ng;
	int stop;                    /* under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t tid;
};

/* One look at group g: its IOPS and bytes/s since the last (fio's
 * 1000 * delta / ms), a sample once ramp is over; stops its clones when
 * the window meets the criterion. */
static void ss_look(struct sscheck *k, struct ssgroup *g, uint64_t now)
{
	uint64_t ms = (now - g->prev_ns) / 1000000ull, iops = 0, bw = 0;

	for (size_t i = g->first; i < g->first + g->n; i++) {
		struct worker *w = &k->w[i];
		uint64_t b = __atomic_load_n(&w->all_bytes, __ATOMIC_RELAXED);
		uint64_t c = __atomic_load_n(&w->completed, __ATOMIC_RELAXED);

		if (ms) {
			bw += 1000 * (b - w->ss_bytes) / ms;
			iops += 1000 * (c - w->ss_ios) / ms;
		}
		w->ss_bytes = b;
		w->ss_ios = c;
	}
	g->prev_ns = now;
	if (g->ss->attained || now < g->from_ns || !ms || !rp_ss_add(g->ss, iops, bw))
		return;
	for (size_t i = g->first; i < g->first + g->n; i++)
		__atomic_store_n(&k->w[i].ss_stop, 1, __ATOMIC_RELAXED);
}

static void *ss_main(void *arg)
{
	struct sscheck *k = arg;
	uint64_t next = perf_now_ns();

	pthread_mutex_lock(&k->lock);
	while (!k->stop) {
		struct timespec ts;

		next += 1000000000ull;   /* fio's ss_check_interval */
		ts.tv_sec = (time_t)(next / 1000000000ull);
		ts.tv_nsec = (long)(next % 1000000000ull);
		if (pthread_cond_timedwait(&k->cond, &k->lock, &ts) != ETIMEDOUT)
			continue;
		for (size_t i = 0; i < k->ng; i++)
			ss_look(k, &k->g[i], perf_now_ns());
	}
	pthread_mutex_unlock(&k->lock);
	return NULL;
}

/* The steady-state window of the group ending at clone last. */
static struct rp_ss *ss_alloc(const struct rp_job *j)
{
	struct rp_ss *ss = calloc(1, sizeof(*ss));

	if (!ss)
		return NULL;
	ss->state = j->ss_state;
	ss->limit = j->ss_limit;
	ss->dur = (unsigned)(j->ss_dur_ns / 1000000000ull);
	ss->iops = calloc(ss->dur, sizeof(*ss->iops));
	ss->bw = calloc(ss->dur, sizeof(*ss->bw));
	if (!ss->iops || !ss->bw) {
		free(ss->iops);
		free(ss->bw);
		free(ss);
		return NULL;
	}
	return ss;
}

/* The groups of clones with a steadystate_duration (group_reporting joins
 * a clone to the one before, as for the reports). Returns their number,
 * or -ENOMEM; the windows go to each group's last clone's result. */
static long ss_groups(struct worker *w, size_t n, struct rp_result *r, struct ssgroup *g)
{
	uint64_t t0 = perf_now_ns();
	long ng = 0;

	for (size_t i = 0; i < n; i++) {
		const struct rp_job *j = w[i].t->job;

		if (!j->ss_dur_ns)
			continue;
		if (ng && j->group_reporting && g[ng - 1].first + g[ng - 1].n == i &&
		    w[i - 1].t->groupid == w[i].t->groupid) {
			free(r->task[i - 1].ss);
			r->task[i - 1].ss = NULL;
			g[ng - 1].n++;
		} else {
			g[ng] = (struct ssgroup){ .first = i, .n = 1, .prev_ns = t0 };
			/* fio: samples from a second after the ramp */
			g[ng++].from_ns = t0 + j->startdelay_ns +
					  (j->ss_ramp_ns ? j->ss_ramp_ns + 1000000000ull : 0);
		}
		if (!(r->task[i].ss = ss_alloc(j)))
			return -ENOMEM;
		g[ng - 1].ss = r->task[i].ss;
	}
	return ng;
}

/* Starts the checker when a clone has a steadystate_duration; NULL when
 * none has (or no memory: the run goes on without it, as without ss). */
static struct sscheck *ss_start(struct worker *w, size_t n, struct rp_result *r)
{
	struct sscheck *k = calloc(1, sizeof(*k));
	long ng = -1;

	if (k && (k->g = calloc(n ? n : 1, sizeof(*k->g))))
		ng = ss_groups(w, n, r, k->g);
	if (ng > 0) {
		k->w = w;
		k->ng = (size_t)ng;
		pthread_condattr_t ca;

		/* waits until perf_now_ns() times: the monotonic clock */
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_mutex_init(&k->lock, NULL);
		pthread_cond_init(&k->cond, &ca);
		pthread_condattr_destroy(&ca);
		if (!pthread_create(&k->tid, NULL, ss_main, k))
			return k;
		pthread_mutex_destroy(&k->lock);
		pthread_cond_destroy(&k->cond);
	}
	if (k)
		free(k->g);
	free(k);
	return NULL;
}

static void ss_stop(struct sscheck *k)
{
	if (!k)
		return;
	pthread_mutex_lock(&k->lock);
	k->stop = 1;
	pthread_cond_signal(&k->cond);
	pthread_mutex_unlock(&k->lock);
	pthread_join(k->tid, NULL);
	pthread_mutex_destroy(&k->lock);
	pthread_cond_destroy(&k->cond);
	free(k->g);
	free(k);
}

/* ---------------------------------------------------------------- */
/* Set-up and the run                                                */
/* ---------------------------------------------------------------- */

static void note(struct rp_result *r, const char *path, int rc)
{
	size_t n = strlen(r->notes);

	/* fio says so and goes on: a cache it cannot drop is not fatal */
	snprintf(r->notes + n, sizeof(r->notes) - n, "%srlperf: cache invalidation of "
		 "%s failed: %s", n ? "\n" : "", path, strerror(-rc));
}

/* The first invalidation (fio's, at open); keeps the fd when every pass
 * of a buffered time_based job needs another. */
static int open_file(struct worker *w, size_t i, struct rp_result *r)
{
	const struct rp_job *j = w->t->job;
	const struct rp_file *f = &w->t->files[i];
	int fd, rc;

	if (!j->invalidate)
		return 0;
	fd = open(f->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return werr(w, -errno, "%s: %s", f->path, strerror(errno));
	rc = rp_invalidate(f, fd);
	if (rc < 0)
		note(r, f->path, rc);
	if (j->time_based && !j->direct)
		w->fs[i].fd = fd;
	else
		close(fd);
	return 0;
}

/* cmdprio_percentage: latencies by priority, low [0] and high [1] */
static int prio_init(struct rp_task_res *res, const struct rp_job *j)
{
	for (int k = 0; k < 2; k++) {
		res->prio[k].ioprio = rp_job_ioprio(j, k);
		if (!(res->prio[k].h = malloc(sizeof(*res->prio[k].h))))
			return -1;
		rp_hist_init(res->prio[k].h);
	}
	return 0;
}

static int worker_init(struct worker *w, const struct rp_task *t, size_t number,
		       rp_engine_fn engine, struct rp_task_res *res,
		       struct rp_result *r)
{
	const struct rp_job *j = t->job;
	int mode = j->rw != RP_RANDREAD ? RP_GEN_SEQ :
		   j->norandommap ? RP_GEN_NORANDOMMAP : RP_GEN_RANDOM;

	w->t = t;
	w->engine = engine;
	w->res = res;
	res->clat = malloc(sizeof(*res->clat));
	w->paths = calloc(t->nfiles, sizeof(*w->paths));
	w->sizes = calloc(t->nfiles, sizeof(*w->sizes));
	w->fs = calloc(t->nfiles, sizeof(*w->fs));
	if (!res->clat || !w->paths || !w->sizes || !w->fs)
		return -ENOMEM;
	rp_hist_init(res->clat);
	if (j->cmdprio_pct && prio_init(res, j) < 0)
		return -ENOMEM;
	w->planned = t->max_ios * j->bs;
	if (j->offload) {
		w->off = calloc(1, sizeof(*w->off));
		if (!w->off || !(w->off->q = calloc(j->iodepth, sizeof(*w->off->q))))
			return -ENOMEM;
		w->off->cap = j->iodepth;
	}
	/* fio's lat_target_init: the search starts at depth 1 */
	w->lat_qd = j->lat_target_ns ? 1 : j->iodepth;
	w->lat_low = 1;
	w->lat_high = j->iodepth;
	w->prng = j->seed ^ (number * 0x9e3779b97f4a7c15ull);
	w->prio_rng = ~w->prng;
	if (j->lat_log || j->bw_log || j->iops_log) {
		int rc = rp_logs_open(&w->logs, j, number, w->err, sizeof(w->err));

		if (rc < 0)
			return rc;
		w->logging = 1;
	}
	for (size_t i = 0; i < t->nfiles; i++)
		w->fs[i].fd = -1;
	for (size_t i = 0; i < t->nfiles; i++) {
		const struct rp_file *f = &t->files[i];
		int rc;

		w->paths[i] = f->path;
		w->sizes[i] = f->file_size;
		rp_gen_init(&w->fs[i].gen, f->off, f->nblocks * j->bs, j->bs, mode,
			    j->seed + (t->clone * t->nfiles + i) * 0x9e3779b97f4a7c15ull);
		rp_gen_seq(&w->fs[i].gen, j->seq_add, j->seq_nr, f->file_size);
		if (mode != RP_GEN_SEQ && j->dist.kind != RP_DIST_RANDOM)
			rp_gen_dist(&w->fs[i].gen, &j->dist);
		rc = open_file(w, i, r);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void worker_free(struct worker *w)
{
	free(w->snap.clat);
	if (w->off)
		free(w->off->q);
	free(w->off);
	if (w->logging)
		(void)rp_logs_close(&w->logs);  /* a run that never started */
	for (size_t i = 0; w->fs && i < w->t->nfiles; i++)
		if (w->fs[i].fd >= 0)
			close(w->fs[i].fd);
	free(w->fs);
	free(w->paths);
	free(w->sizes);
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	while (nanosleep(&ts, &ts) && errno == EINTR && !stop_requested())
		;
}

static double tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static void usage_delta(struct rp_result *r, const struct rusage *a, const struct rusage *b)
{
	r->usr_s = tv_s(b->ru_utime) - tv_s(a->ru_utime);
	r->sys_s = tv_s(b->ru_stime) - tv_s(a->ru_stime);
	r->ctx = (uint64_t)(b->ru_nvcsw + b->ru_nivcsw - a->ru_nvcsw - a->ru_nivcsw);
	r->vctx = (uint64_t)(b->ru_nvcsw - a->ru_nvcsw);
	r->majf = (uint64_t)(b->ru_majflt - a->ru_majflt);
	r->minf = (uint64_t)(b->ru_minflt - a->ru_minflt);
}

/* The longest ramp_time of the clones started first: CPU counts from its
 * end. *ramp becomes 0 so that it is waited once. */
static void ramp_wait(uint64_t *ramp, struct rusage *ru0)
{
	if (!*ramp)
		return;
	sleep_ns(*ramp);
	getrusage(RUSAGE_SELF, ru0);
	*ramp = 0;
}

/* Starts every clone, waits for all; CPU counts from the end of the
 * longest ramp_time of the clones that start first, like the I/O. A
 * stonewall job (its first clone) starts once every clone before it has
 * ended, as fio's. Returns the threads started. */
static size_t run_threads(struct worker *w, size_t n, struct rp_result *r)
{
	struct rusage ru0, ru1;
	uint64_t ramp = 0, t0 = perf_now_ns();
	size_t started = 0;
	int rc = 0, walled = 0;

	getrusage(RUSAGE_SELF, &ru0);
	for (; started < n; started++) {
		if (started && w[started].t->job->stonewall && !w[started].t->clone) {
			ramp_wait(&ramp, &ru0);
			walled = 1;
			for (size_t i = 0; i < started; i++)
				if (!w[i].joined)
					w[i].joined = !pthread_join(w[i].tid, NULL);
		}
		rc = -pthread_create(&w[started].tid, NULL, job_main, &w[started]);
		if (rc) {
			r->error = rc;
			snprintf(r->errmsg, sizeof(r->errmsg), "rlperf: starting job clone "
				 "%zu: %s", started, rl_strerror(rc));
			rp_stop();
			break;
		}
		if (!walled && w[started].t->job->ramp_ns > ramp)
			ramp = w[started].t->job->ramp_ns;
	}
	if (!rc)
		ramp_wait(&ramp, &ru0);
	for (size_t i = 0; i < started; i++)
		if (!w[i].joined)
			pthread_join(w[i].tid, NULL);
	getrusage(RUSAGE_SELF, &ru1);
	r->elapsed_s = (double)(perf_now_ns() - t0) / 1e9;
	usage_delta(r, &ru0, &ru1);
	return started;
}

static void first_error(struct rp_result *r, const struct rp_plan *p, size_t n)
{
	for (size_t i = 0; i < n && !r->error; i++)
		if (r->task[i].error < 0) {
			r->error = r->task[i].error;
			snprintf(r->errmsg, sizeof(r->errmsg), "rlperf: job %s (clone %u): %s",
				 p->tasks[i].job->name, p->tasks[i].clone, r->task[i].errmsg);
		}
}

/* The flow groups of the clones with a flow weight, each pointed at its
 * group; NULL when none has one (or no memory: then flow is not kept). */
static struct flow *flows_setup(struct worker *w, size_t n)
{
	struct flow *fl = NULL;
	size_t nf = 0;

	for (size_t i = 0; i < n; i++) {
		const struct rp_job *j = w[i].t->job;
		size_t k = 0;

		if (!j->flow)
			continue;
		if (!fl && !(fl = calloc(n, sizeof(*fl))))
			return NULL;
		while (k < nf && fl[k].id != j->flow_id)
			k++;
		if (k == nf)
			fl[nf++].id = j->flow_id;
		fl[k].weight += j->flow;
		w[i].flow = &fl[k];
	}
	return fl;
}

int rp_run(const struct rp_plan *p, rp_engine_fn engine, struct rp_result *r)
{
	struct flow *flows = NULL;
	struct sscheck *ss;
	struct worker *w;
	struct timeval tv;
	size_t n = p->ntasks, i;
	int rc = 0;

	memset(r, 0, sizeof(*r));
	r->ntasks = n;
	r->task = calloc(n ? n : 1, sizeof(*r->task));
	w = calloc(n ? n : 1, sizeof(*w));
	for (i = 0; r->task && w && i < n && !rc; i++)
		rc = worker_init(&w[i], &p->tasks[i], i + 1, engine, &r->task[i], r);
	if (!r->task || !w || rc) {
		r->error = r->task && w ? rc : -ENOMEM;
		snprintf(r->errmsg, sizeof(r->errmsg), "rlperf: %s", r->error == -ENOMEM ?
			 "out of memory" : w[i - 1].err);
	} else {
		__atomic_store_n(&stop_flag, 0, __ATOMIC_RELAXED);
		flows = flows_setup(w, n);
		gettimeofday(&tv, NULL);
		r->start_unix_ms = (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
		progress_publish(w, n, r->start_unix_ms);
		ss = ss_start(w, n, r);
		first_error(r, p, run_threads(w, n, r));
		ss_stop(ss);
		progress_publish(NULL, 0, 0);
	}
	for (i = 0; w && i < n; i++)
		worker_free(&w[i]);
	free(w);
	free(flows);
	return r->error;
}

void rp_result_free(struct rp_result *r)
{
	for (size_t i = 0; r->task && i < r->ntasks; i++) {
		free(r->task[i].clat);
		free(r->task[i].prio[0].h);
		free(r->task[i].prio[1].h);
		if (r->task[i].ss) {
			free(r->task[i].ss->iops);
			free(r->task[i].ss->bw);
			free(r->task[i].ss);
		}
	}
	free(r->task);
	memset(r, 0, sizeof(*r));
}
