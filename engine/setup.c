/*
 * setup.c - sizing a run before its workers start: every read of an array
 * job checked, the bounce buffers' size and count, how many workers, the
 * queue depth of each, each worker's share of RLIMIT_MEMLOCK, and a line
 * saying what was chosen and why (stats.shape).
 *
 * Workers, by default: one per CPU the calling thread may run on (the
 * zeroing of fresh staging and the copies out of the page cache or out of
 * bounce buffers scale with cores, a drive's bandwidth does not mind),
 * but no more than the job has reads, nor more than one per
 * ENG_WORKER_MIN_BYTES of reads (a worker costs a thread, a ring and
 * registrations), nor, when reads go through bounce buffers, more than the
 * in-flight bound holds buffers. Queue depth, by default: twice the workers
 * and at least ENG_AUTO_QD, but no more than the device's queue holds
 * once the block layer has cut each read into the pieces it takes
 * (max_sectors_kb), split evenly over the workers.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "eng_int.h"
#include "sizing.h"

#define DEFAULT_BUFFER (4u << 20)
#define MAX_BUFFER (1u << 30)
#define ENG_WORKER_MIN_BYTES (16ull << 20)
#define ENG_AUTO_QD 16

static int check_reads(struct eng_run *rc, struct eng_needs *n)
{
	const struct eng_job *job = rc->b.job;

	memset(n, 0, sizeof(*n));
	n->nreads = job->reads ? job->nreads : 0;
	for (size_t i = 0; job->reads && i < job->nreads; i++) {
		const struct cm_read *r = job->reads + i;
		int ret = eng_check_read(rc, r);

		if (ret == 0)
			ret = eng_plan_shards(rc, r);
		if (ret < 0)
			return ret;
		n->all_bytes += r->len;
		n->max_read = CM_MAX(n->max_read, r->len);
		if (eng_direct_dst(rc, r))
			continue;
		if (rc->cx.buf_bytes && r->len > rc->cx.buf_bytes) /* a later batch */
			return cm_err_set(rc->b.e, RL_E_INVALID_ARG,
					  "%s: read at offset %llu: length %u exceeds the buffer size %u",
					  job->paths[r->file], (unsigned long long)r->off, r->len,
					  rc->cx.buf_bytes);
		if (r->len > MAX_BUFFER)
			return cm_err_set(rc->b.e, RL_E_INVALID_ARG,
					  "%s: read at offset %llu: length %u needs a bounce buffer over the 1 GiB maximum",
					  job->paths[r->file], (unsigned long long)r->off, r->len);
		n->bounce++;
		n->bounce_bytes += r->len;
		n->maxlen = CM_MAX(n->maxlen, r->len);
	}
	return 0;
}

static unsigned cpus_allowed(void)
{
	cpu_set_t set;
	long n;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return (unsigned)CPU_COUNT(&set);
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

/* The device queue of the first file with reads, or NULL. */
static const struct eng_devq *first_queue(const struct eng_run *rc)
{
	for (size_t i = 0; i < rc->cx.nfiles; i++)
		if (rc->cx.files[i].st.mode != ENG_FILE_UNUSED)
			return rc->cx.files[i].st.q.name[0] ? &rc->cx.files[i].st.q : NULL;
	return NULL;
}

/* Automatic queue depth: twice the workers, at least ENG_AUTO_QD; but
 * not more reads than the device queue holds once the block layer has cut
 * each into its unsplit pieces (more would only wait in the scheduler). */
unsigned eng_auto_depth(unsigned workers, uint32_t max_read, const struct eng_devq *q)
{
	unsigned qd = CM_MAX(2 * workers, (unsigned)ENG_AUTO_QD), pieces, fit;

	if (!q || !q->nr_requests || !q->max_bytes || !max_read)
		return qd;
	pieces = (max_read + q->max_bytes - 1) / q->max_bytes;
	fit = CM_MAX(q->nr_requests / pieces, workers);
	return CM_MIN(qd, fit);
}

unsigned eng_auto_workers(uint64_t all_bytes)
{
	uint64_t by_bytes = CM_MAX(all_bytes / ENG_WORKER_MIN_BYTES, 1);

	return (unsigned)CM_MIN(CM_MIN((uint64_t)cpus_allowed(), by_bytes),
				(uint64_t)ENG_MAX_WORKERS);
}

/* Workers and total queue depth; why says how the count was chosen. */
static void size_workers(struct eng_run *rc, const struct eng_needs *n, int generator,
			 unsigned *qd, char *why, size_t whylen)
{
	unsigned w = rc->cx.o->workers, cpus = cpus_allowed();

	if (generator) {
		w = 1;
		snprintf(why, whylen, "a generator");
	} else if (w) {
		snprintf(why, whylen, "as set");
	} else {
		w = eng_auto_workers(n->all_bytes);
		snprintf(why, whylen, "auto: %u CPUs, %llu MiB of reads", cpus,
			 (unsigned long long)(n->all_bytes >> 20));
	}
	w = (unsigned)CM_MIN((uint64_t)w, CM_MAX(generator ? 1 : n->nreads, (uint64_t)1));
	/* Every worker holds a bounce buffer when some reads need one. */
	if (n->bounce)
		w = (unsigned)CM_MIN((uint64_t)w, CM_MAX(rc->b.bound / rc->cx.buf_bytes, 1));
	w = CM_MIN(CM_MAX(w, 1u), (unsigned)ENG_MAX_WORKERS);
	*qd = rc->cx.o->queue_depth ? rc->cx.o->queue_depth :
				      eng_auto_depth(w, n->max_read, first_queue(rc));
	rc->cx.nworkers = CM_MIN(w, *qd);
}

/* Bounce buffers of worker i: a queue's worth scaled by the share of
 * bytes that need a bounce at all (a congruent plan reads nearly all
 * straight into staging, and every buffer is pinned for the whole run),
 * at least one, within the in-flight bound. */
static unsigned buffers_of(const struct eng_run *rc, const struct eng_needs *n, unsigned i)
{
	unsigned nw = rc->cx.nworkers, qd = rc->cx.workers[i].qd;
	uint64_t want, fit;

	if (!n->bounce)
		return 0;
	if (rc->cx.o->buffers) {
		want = rc->cx.o->buffers / nw + (i < rc->cx.o->buffers % nw);
		return (unsigned)CM_MIN(CM_MAX(want, 1), n->bounce);
	}
	want = qd;
	if (n->bounce_bytes < n->all_bytes)
		want = (want * n->bounce_bytes + n->all_bytes - 1) / n->all_bytes;
	fit = rc->b.bound / ((uint64_t)rc->cx.buf_bytes * nw);
	want = CM_MIN(want, fit);
	return (unsigned)CM_MIN(CM_MAX(want, 1), n->bounce);
}

/* Whether CAP_IPC_LOCK is in this thread's effective set: the kernel
 * then lets it lock past RLIMIT_MEMLOCK. Root is not enough: a container
 * drops the capability (Docker's default set has none) and the limit then
 * holds for root too, so io_uring refused the registrations that a root
 * load attempted in full. */
static int ipc_lock_capable(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &h, d) < 0)
		return geteuid() == 0;
	return (d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK)) != 0;
}

uint64_t eng_memlock_limit(void)
{
	struct rlimit rl;

	if (ipc_lock_capable() || getrlimit(RLIMIT_MEMLOCK, &rl) < 0 ||
	    rl.rlim_cur == RLIM_INFINITY)
		return UINT64_MAX;
	return (uint64_t)rl.rlim_cur;
}

/* The limit is one budget for the process (mlock) and its user (io_uring
 * registrations), shared evenly by the workers. */
static uint64_t memlock_share(unsigned nworkers)
{
	uint64_t lim = eng_memlock_limit();

	return lim == UINT64_MAX ? lim : lim / nworkers;
}

/* The device text of the first file with reads: its limits, and how many
 * device requests the longest read becomes. */
static void device_text(const struct eng_run *rc, uint32_t max_read, char *out, size_t len)
{
	const struct eng_devq *q = first_queue(rc);

	if (!q) {
		snprintf(out, len, "no block device under the files");
		return;
	}
	snprintf(out, len, "%s: %u KiB, %u segments, %u requests a queue%s, so a %u KiB read is %u",
		 q->name, q->max_bytes >> 10, q->max_segments, q->nr_requests,
		 q->optimal_bytes ? " (optimal size given)" : "", max_read >> 10,
		 q->max_bytes ? (max_read + q->max_bytes - 1) / q->max_bytes : 1);
}

static void shape_text(struct eng_run *rc, unsigned qd, const char *why, uint32_t max_read)
{
	char *out = rc->b.st->shape;
	size_t len = sizeof(rc->b.st->shape), n;

	n = (size_t)snprintf(out, len,
			     "%u workers (%s); queue depth %u (%s, %u per worker); reads up to %u KiB; ",
			     rc->cx.nworkers, why, qd, rc->cx.o->queue_depth ? "as set" : "auto",
			     rc->cx.workers[0].qd, max_read >> 10);
	if (n < len)
		device_text(rc, max_read, out + n, len - n);
}

static int alloc_tables(struct eng_run *rc)
{
	const struct eng_job *job = rc->b.job;

	if (!job->shard_bytes)
		return 0;
	if (job->nshards > (SIZE_MAX >> 4))
		return cm_err_set(rc->b.e, RL_E_INVALID_ARG, "%zu shards: too many", job->nshards);
	rc->b.shard_done = cm_calloc(job->nshards + 1, sizeof(*rc->b.shard_done));
	rc->b.shard_planned = cm_calloc(job->nshards + 1, sizeof(uint64_t));
	if (!rc->b.shard_done || !rc->b.shard_planned)
		return cm_err_set(rc->b.e, -ENOMEM, "out of memory");
	for (size_t s = 0; s <= job->nshards; s++)
		atomic_init(rc->b.shard_done + s, 0);
	return 0;
}

/* The job's reads checked and its shard tables set up (every batch of a
 * session: setup happens once, the jobs change). */
int eng_check_job(struct eng_run *rc, struct eng_needs *n)
{
	const struct eng_job *job = rc->b.job;
	int ret;

	cm_free(rc->b.shard_done);
	cm_free(rc->b.shard_planned);
	rc->b.shard_done = NULL;
	rc->b.shard_planned = NULL;
	ret = alloc_tables(rc);
	if (ret == 0)
		ret = check_reads(rc, n);
	if (ret < 0)
		return ret;
	if (!job->reads) /* a generator: sizes as the options say */
		n->maxlen = rc->cx.o->buffer_bytes ? rc->cx.o->buffer_bytes : DEFAULT_BUFFER;
	if (!job->reads) /* a generator's reads are not known: any may bounce */
		n->bounce = UINT64_MAX;
	rc->b.staged_planned = n->all_bytes;
	rc->b.progress_step = job->total_bytes ? CM_MAX(job->total_bytes / 128, 1u << 20) :
		(64u << 20);
	rc->b.progress_each = job->reads && job->nreads <= 128;
	return 0;
}

int eng_size_run(struct eng_run *rc, const struct eng_needs *n, int generator)
{
	char why[96];
	unsigned qd;

	rc->cx.buf_bytes = CM_MAX(n->maxlen, generator ? rc->cx.o->buffer_bytes : 0);
	rc->b.st->max_read = generator ? rc->cx.buf_bytes : n->max_read;
	size_workers(rc, n, generator, &qd, why, sizeof(why));
	rc->cx.workers = cm_calloc(rc->cx.nworkers, sizeof(*rc->cx.workers));
	if (!rc->cx.workers)
		return cm_err_set(rc->b.e, -ENOMEM, "out of memory");
	rc->cx.memlock_share = memlock_share(rc->cx.nworkers);
	for (unsigned i = 0; i < rc->cx.nworkers; i++) {
		struct eng_worker *w = rc->cx.workers + i;

		w->run = rc;
		w->id = i;
		w->qd = qd / rc->cx.nworkers + (i < qd % rc->cx.nworkers);
		w->nbuf_want = buffers_of(rc, n, i);
		/* What it holds, in its statistics for every batch. */
		w->st.workers = 1;
		w->st.buffers = w->nbuf_want;
		w->st.queue_depth = w->qd;
	}
	shape_text(rc, qd, why, rc->b.st->max_read);
	return 0;
}
