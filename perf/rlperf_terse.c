/*
 * rlperf_terse.c - fio's terse output, version 3 (--output-format=terse,
 * --minimal): one line of semicolon-separated fields per report unit, in
 * the order of `man fio` "TERSE OUTPUT" and of fio 3.33's stat.c: the job,
 * the read and the write status (version 3 has no trim), CPU, queue
 * depths, latency bins, then the disks. Latencies are in usec as fio's,
 * integers cut down (min, max) and means with six decimals; slat is zero
 * and lat equals clat, as in rlperf's JSON.
 */
#include <inttypes.h>
#include <math.h>

#include "rlperf.h"

/* fio's terse fields hold up to 20 percentiles; it lists 17 */
#define TERSE_NPCT 20

static void terse_lat(FILE *f, const struct rp_hist *h)
{
	if (!h->n) {
		fprintf(f, ";0;0;0.000000;0.000000");
		return;
	}
	fprintf(f, ";%" PRIu64 ";%" PRIu64 ";%f;%f", h->min / 1000, h->max / 1000,
		rp_hist_mean(h) / 1000.0, rp_hist_stddev(h) / 1000.0);
}

/* Bw (KiB/s): min, max, percent of the group's bandwidth, mean, stdev */
static void terse_bw(FILE *f, const struct rp_samples *bw, double group_bps)
{
	double agg = 100.0, m = rp_samples_mean(bw);

	if (!bw->n) {
		fprintf(f, ";0;0;0.000000%%;0.000000;0.000000");
		return;
	}
	if (group_bps >= 1024.0)
		agg = fmin(100.0, m * 100.0 / floor(group_bps / 1024.0));
	fprintf(f, ";%.0f;%.0f;%f%%;%f;%f", bw->min, bw->max, agg, m, rp_samples_stddev(bw));
}

/* One direction: u NULL for the directions rlperf never does (write);
 * pct 0: no percentiles (gtod_reduce), all twenty "0%=0" as fio's */
static void terse_dir(FILE *f, const struct rp_unit *u, double group_bps, int pct)
{
	struct rp_hist empty;
	const struct rp_hist *h = u ? u->clat : &empty;
	const struct rp_samples none = { 0 };
	uint64_t runt = u ? (uint64_t)(u->runtime_s * 1e3 + 0.5) : 0;
	uint64_t bytes = u ? u->bytes : 0, ios = u ? u->ios : 0, pv[RP_NPCT];

	rp_hist_init(&empty);
	fprintf(f, ";%" PRIu64 ";%" PRIu64 ";%" PRIu64 ";%" PRIu64, bytes >> 10,
		runt ? 1000 * bytes / runt / 1024 : 0, runt ? 1000 * ios / runt : 0, runt);
	fprintf(f, ";0;0;0.000000;0.000000");   /* slat: not timed */
	terse_lat(f, h);
	rp_hist_percentiles(h, rp_pct_list, RP_NPCT, pv);
	for (unsigned i = 0; i < TERSE_NPCT; i++)
		if (pct && i < RP_NPCT)
			fprintf(f, ";%f%%=%" PRIu64, rp_pct_list[i], pv[i] / 1000);
		else
			fprintf(f, ";0%%=0");
	terse_lat(f, h);                        /* lat: clat, as the JSON's */
	terse_bw(f, u ? &u->bw : &none, group_bps);
}

/* CPU, queue depths, latency bins (usec ones with the nsec ones in the
 * first, as fio keeps the format) */
static void terse_usage(FILE *f, const struct rp_unit *u)
{
	double ns[RP_NLAT], us[RP_NLAT], ms[RP_NLAT_MS], jrt = u->job_runtime_s;
	uint64_t all = 0;

	fprintf(f, ";%f%%;%f%%;%" PRIu64 ";%" PRIu64 ";%" PRIu64,
		jrt > 0 ? 100.0 * u->usr_s / jrt : 0.0, jrt > 0 ? 100.0 * u->sys_s / jrt : 0.0,
		u->ctx, u->majf, u->minf);
	for (unsigned i = 0; i < RP_NDEPTH; i++)
		all += u->depth[i];
	for (unsigned i = 0; i < RP_NDEPTH; i++)
		fprintf(f, ";%3.1f%%", all ? 100.0 * (double)u->depth[i] / (double)all : 0.0);
	rp_lat_bins(u->clat, ns, us, ms);
	for (unsigned i = 0; i < RP_NLAT; i++)
		us[0] += ns[i];
	for (unsigned i = 0; i < RP_NLAT; i++)
		fprintf(f, ";%3.2f%%", us[i]);
	for (unsigned i = 0; i < RP_NLAT_MS; i++)
		fprintf(f, ";%3.2f%%", ms[i]);
}

/* Disk utilization: each disk, then the means of its slaves */
static void terse_disks(FILE *f, const struct rp_disks *d)
{
	for (size_t i = 0; d && i < d->n; i++) {
		const struct rp_disk_stat *s = &d->v[i].delta;
		struct rp_disk_agg a;

		fprintf(f, ";%s;%" PRIu64 ";%" PRIu64 ";%" PRIu64 ";%" PRIu64 ";%" PRIu64
			";%" PRIu64 ";%" PRIu64 ";%3.2f%%", d->v[i].name, s->ios[0], s->ios[1],
			s->merges[0], s->merges[1], s->ticks[0], s->ticks[1], s->in_queue,
			rp_disk_util(&d->v[i]));
		if (rp_disk_agg(d, i, &a))
			fprintf(f, ";slaves;%" PRIu64 ";%" PRIu64 ";%" PRIu64 ";%" PRIu64 ";%"
				PRIu64 ";%" PRIu64 ";%" PRIu64 ";%3.2f%%", a.s.ios[0], a.s.ios[1],
				a.s.merges[0], a.s.merges[1], a.s.ticks[0], a.s.ticks[1],
				a.s.in_queue, a.max_util);
	}
}

void rp_print_terse(FILE *f, const struct rp_report *rep)
{
	for (size_t i = 0; i < rep->nunits; i++) {
		const struct rp_unit *u = &rep->units[i];
		const struct rp_job *j = rep->plan->tasks[u->first].job;
		double group_bps = rp_group_bps(rep->units, rep->nunits, u->groupid);

		fprintf(f, "3;%s;%s;%d;%d", RP_VERSION, j->name, u->groupid, -u->error);
		terse_dir(f, u, group_bps, !j->gtod_reduce);
		terse_dir(f, NULL, group_bps, !j->gtod_reduce);
		terse_usage(f, u);
		terse_disks(f, rep->disks);
		fputc('\n', f);
	}
}
