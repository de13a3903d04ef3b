/*
 * rlperf_unit.c - what fio reports as one job. Without group_reporting,
 * every clone is reported on its own (numjobs=2 gives two jobs); a clone
 * whose job has group_reporting joins the report before it (fio's
 * __show_run_stats: a new report starts at a clone without it), so a
 * global group_reporting makes one report of the whole run. The sums
 * follow fio's sum_thread_stats: bytes and reads add up, the runtime is
 * the longest clone's, samples and histograms merge.
 *
 * CPU: the clones are threads of one process whose engines have helper
 * threads (the pread pool), which getrusage cannot tell apart, so the
 * process's CPU over the run is shared out in proportion to each report's
 * measured time: exact for one report, and the reports add up to the
 * process's.
 */
#include <errno.h>
#include <string.h>

#include <math.h>

#include "rlperf.h"

const char *const rp_lat_keys[RP_NLAT_MS] = {
	"2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000",
};

const char *const rp_depth_keys[RP_NDEPTH] = { "1", "2", "4", "8", "16", "32", ">=64" };
const char *const rp_batch_keys[RP_NDEPTH] = { "0", "4", "8", "16", "32", "64", ">=64" };

static void samples_merge(struct rp_samples *d, const struct rp_samples *s)
{
	if (!s->n)
		return;
	if (!d->n || s->min < d->min)
		d->min = s->min;
	if (!d->n || s->max > d->max)
		d->max = s->max;
	d->n += s->n;
	d->sum += s->sum;
	d->sumsq += s->sumsq;
}

/* t's latencies by priority into u's slot of the same priority (a new
 * slot for a new one; past RP_NPRIO priorities the rest are left out).
 * 0, or -ENOMEM. */
static int prio_add(struct rp_unit *u, const struct rp_task_res *t)
{
	for (int k = 0; k < 2 && t->prio[k].h; k++) {
		unsigned i = 0;

		while (i < RP_NPRIO && u->prio[i].h && u->prio[i].ioprio != t->prio[k].ioprio)
			i++;
		if (i == RP_NPRIO)
			continue;
		if (!u->prio[i].h) {
			if (!(u->prio[i].h = malloc(sizeof(*u->prio[i].h))))
				return -ENOMEM;
			rp_hist_init(u->prio[i].h);
			u->prio[i].ioprio = t->prio[k].ioprio;
		}
		rp_hist_merge(u->prio[i].h, t->prio[k].h);
	}
	return 0;
}

unsigned rp_unit_nprio(const struct rp_unit *u)
{
	unsigned n = 0;

	for (unsigned i = 0; i < RP_NPRIO && u->prio[i].h; i++)
		n += u->prio[i].h->n > 0;
	return n;
}

static void unit_add(struct rp_unit *u, const struct rp_task_res *t)
{
	double rt = t->ios && t->last_ns > t->meas_ns ?
		    (double)(t->last_ns - t->meas_ns) / 1e9 : 0.0;

	u->bytes += t->bytes;
	u->ios += t->ios;
	u->job_runtime_s += rt;
	if (rt > u->runtime_s)
		u->runtime_s = rt;
	rp_hist_merge(u->clat, t->clat);
	samples_merge(&u->bw, &t->bw);
	samples_merge(&u->iops, &t->iops);
	for (unsigned i = 0; i < RP_NDEPTH; i++) {
		u->depth[i] += t->depth[i];
		u->submit[i] += t->submit[i];
		u->complete[i] += t->complete[i];
	}
	if (t->error < 0 && !u->error) {
		u->error = t->error;
		u->errmsg = t->errmsg;
	}
	if (t->ss)
		u->ss = t->ss;  /* the group's window sits on its last clone */
	u->lat_depth = t->lat_depth;   /* fio's: the last clone's */
	u->offloaded += t->offloaded;
	u->submit_threads += t->submit_threads;
	if (t->eng.peak_inflight > u->eng.peak_inflight)
		u->eng.peak_inflight = t->eng.peak_inflight;
	if (u->n > 1)  /* the first clone's are in u->eng already */
		u->eng.retries += t->eng.retries;
}

/* The process's CPU shared out by the clones' measured times (evenly
 * when nothing was measured), so each report's usr_cpu and sys_cpu are the
 * process's own percentages. */
static void share_cpu(struct rp_unit *u, size_t n, const struct rp_result *r)
{
	double all = 0;

	for (size_t i = 0; i < n; i++)
		all += u[i].job_runtime_s;
	for (size_t i = 0; i < n; i++) {
		double f = all > 0 ? u[i].job_runtime_s / all :
			   (double)u[i].n / (double)r->ntasks;

		u[i].usr_s = r->usr_s * f;
		u[i].sys_s = r->sys_s * f;
		u[i].ctx = (uint64_t)((double)r->ctx * f + 0.5);
		u[i].vctx = (uint64_t)((double)r->vctx * f + 0.5);
		u[i].majf = (uint64_t)((double)r->majf * f + 0.5);
		u[i].minf = (uint64_t)((double)r->minf * f + 0.5);
	}
}

long rp_units(const struct rp_plan *p, const struct rp_result *r, struct rp_unit **out)
{
	struct rp_unit *u = calloc(p->ntasks ? p->ntasks : 1, sizeof(*u));
	size_t n = 0;

	*out = NULL;
	if (!u)
		return -ENOMEM;
	for (size_t i = 0; i < p->ntasks && i < r->ntasks; i++) {
		struct rp_unit *cur = &u[n ? n - 1 : 0];

		if (!n || !p->tasks[i].job->group_reporting ||
		    p->tasks[i].groupid != cur->groupid) {
			cur = &u[n++];
			cur->first = i;
			cur->groupid = p->tasks[i].groupid;
			cur->eng = r->task[i].eng;  /* the first clone's engine */
			cur->clat = malloc(sizeof(*cur->clat));
			if (!cur->clat) {
				rp_units_free(u, n);
				return -ENOMEM;
			}
			rp_hist_init(cur->clat);
		}
		cur->n++;
		unit_add(cur, &r->task[i]);
		if (prio_add(cur, &r->task[i]) < 0) {
			rp_units_free(u, n);
			return -ENOMEM;
		}
	}
	share_cpu(u, n, r);
	*out = u;
	return (long)n;
}

void rp_units_free(struct rp_unit *u, size_t n)
{
	for (size_t i = 0; u && i < n; i++) {
		free(u[i].clat);
		for (unsigned k = 0; k < RP_NPRIO; k++)
			free(u[i].prio[k].h);
	}
	free(u);
}

double rp_unit_bps(const struct rp_unit *u)
{
	return u->runtime_s > 0 ? (double)u->bytes / u->runtime_s : 0.0;
}

double rp_group_bps(const struct rp_unit *u, size_t n, int groupid)
{
	uint64_t bytes = 0;
	double rmax = 0;

	for (size_t i = 0; i < n; i++) {
		if (u[i].groupid != groupid)
			continue;
		bytes += u[i].bytes;
		if (u[i].runtime_s > rmax)
			rmax = u[i].runtime_s;
	}
	return rmax > 0 ? (double)bytes / rmax : 0.0;
}

double rp_samples_mean(const struct rp_samples *s)
{
	return s->n ? s->sum / (double)s->n : 0.0;
}

double rp_samples_stddev(const struct rp_samples *s)
{
	double m = rp_samples_mean(s), var;

	if (s->n < 2)
		return 0.0;
	var = (s->sumsq - (double)s->n * m * m) / (double)(s->n - 1);
	return var > 0 ? sqrt(var) : 0.0;
}

/* fio's io_u_lat bins: below 2, 4, 10, ... 1000 of each unit */
static unsigned lat_bin(uint64_t v)
{
	static const uint64_t top[] = { 2, 4, 10, 20, 50, 100, 250, 500, 750, 1000, 2000 };
	unsigned i = 0;

	while (i < RP_ARRAY_SIZE(top) && v >= top[i])
		i++;
	return i;
}

void rp_lat_bins(const struct rp_hist *h, double ns[RP_NLAT], double us[RP_NLAT],
		 double ms[RP_NLAT_MS])
{
	memset(ns, 0, RP_NLAT * sizeof(*ns));
	memset(us, 0, RP_NLAT * sizeof(*us));
	memset(ms, 0, RP_NLAT_MS * sizeof(*ms));
	if (!h->n)
		return;
	/* by each bucket's middle: a read near a bin's edge may count in the
	 * next bin (the bucket is at most 1/64 of its value wide) */
	for (unsigned i = 0; i < RP_PLAT_NR; i++) {
		uint64_t v = rp_hist_value(i);
		double pct = 100.0 * (double)h->bucket[i] / (double)h->n;

		if (!h->bucket[i])
			continue;
		if (v < 1000)
			ns[lat_bin(v)] += pct;
		else if (v < 1000000)
			us[lat_bin(v / 1000)] += pct;
		else
			ms[lat_bin(v / 1000000)] += pct;
	}
}
