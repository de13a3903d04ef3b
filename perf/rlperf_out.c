/*
 * rlperf_out.c - the normal report, laid out as fio's: a line per job,
 * then a block per report unit (bandwidth, IOPS, completion latency and
 * its percentiles, latency bins, CPU, queue depths), rlperf's own lines
 * (CPU per GB, the engine that ran), and the group's run status.
 */
#include <inttypes.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rlperf.h"

/*
 * fio's num2str: at most maxlen digits (the point counts), dividing by
 * 1000 or 1024 with the prefix that says which, rounding the last digit.
 */
void rp_num2str(char *buf, size_t len, uint64_t num, int maxlen, int pow2,
		enum rp_n2s unit)
{
	static const char *const si[] = { "", "k", "M", "G", "T", "P", "E" };
	static const char *const iec[] = { "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei" };
	static const char *const units[] = { "", "B", "B/s" };
	const unsigned thousand = pow2 ? 1024 : 1000;
	const char *const *pre = pow2 ? iec : si;
	unsigned modulo = 0, post = 0;
	int divided = 0, carry = 0, digits;
	char tmp[32];

	while (post < RP_ARRAY_SIZE(si) &&
	       snprintf(tmp, sizeof(tmp), "%" PRIu64, num) > maxlen) {
		modulo = (unsigned)(num % thousand);
		num /= thousand;
		carry = modulo >= thousand / 2;
		divided = 1;
		post++;
	}
	if (post >= RP_ARRAY_SIZE(si))
		post = 0;
	digits = snprintf(tmp, sizeof(tmp), "%" PRIu64, num);
	if (!divided || maxlen - digits <= 1) {
		snprintf(buf, len, "%" PRIu64 "%s%s", num + (divided && carry), pre[post],
			 units[unit]);
		return;
	}
	snprintf(tmp, sizeof(tmp), "%.*f", maxlen - digits - 1, (double)modulo / thousand);
	if (tmp[0] == '1')
		num++;
	snprintf(buf, len, "%" PRIu64 ".%s%s%s", num, tmp + 2, pre[post], units[unit]);
}

void rp_fmt_bs(char *buf, size_t len, uint64_t v)
{
	rp_num2str(buf, len, v, 4, 1, RP_N2S_BYTE);
}

/*
 * fio's display_lat: nsec, or usec / msec when min, max and stdev are all
 * large enough that the smaller unit would only show long numbers.
 */
static void print_clat_line(FILE *f, const char *name, const struct rp_hist *h)
{
	uint64_t min = h->n ? h->min : 0, max = h->max;
	double mean = rp_hist_mean(h), dev = rp_hist_stddev(h), div = 1.0;
	const char *unit = "nsec";
	char a[32], b[32];

	if (min > 2000000 && max > 99999999 && dev > 1e6) {
		unit = "msec";
		div = 1e6;
	} else if (min > 2000 && max > 99999 && dev > 1e3) {
		unit = "usec";
		div = 1e3;
	}
	rp_num2str(a, sizeof(a), (uint64_t)(min / div), 6, 0, RP_N2S_NONE);
	rp_num2str(b, sizeof(b), (uint64_t)(max / div), 6, 0, RP_N2S_NONE);
	fprintf(f, "    %s (%s): min=%s, max=%s, avg=%5.02f, stdev=%5.02f\n", name, unit, a,
		b, mean / div, dev / div);
}

/*
 * fio's show_clat_percentiles: the unit from the smallest and largest
 * percentile (so that none reads [0]), each value rounded up into it, as
 * wide as the largest needs, as many to a line as fit in 80 columns.
 */
static void print_percentiles(FILE *f, const char *name, const struct rp_hist *h)
{
	uint64_t v[RP_NPCT], lo, hi, div = 1;
	unsigned scale = 0, width = 5, per_line;
	const char *unit = "nsec";

	rp_hist_percentiles(h, rp_pct_list, RP_NPCT, v);
	lo = v[0];
	hi = v[RP_NPCT - 1];
	if (lo > 2000000 && hi > 99999999) {
		scale = 2;
		div = 1000000;
		unit = "msec";
	} else if (lo > 2000 && hi > 99999) {
		scale = 1;
		div = 1000;
		unit = "usec";
	}
	for (uint64_t x = hi / div; x >= 100000; x /= 10)
		width++;
	per_line = (80 - 7) / (2 + 10 + width);
	fprintf(f, "    %s percentiles (%s):\n     |", name, unit);
	for (unsigned i = 0; i < RP_NPCT; i++) {
		uint64_t x = v[i];

		if (i && i % per_line == 0)
			fprintf(f, "     |");
		for (unsigned k = 0; k < scale; k++)
			x = (x + 999) / 1000;
		fprintf(f, " %5.2fth=[%*" PRIu64 "]%c", rp_pct_list[i], (int)width, x,
			i + 1 == RP_NPCT ? '\n' : ',');
		if (i + 1 < RP_NPCT && i % per_line == per_line - 1)
			fputc('\n', f);
	}
}

/* fio's show_lat: the bins that hold reads, five to a line */
static void print_lat_bins(FILE *f, const double *bins, size_t n, const char *unit)
{
	unsigned shown = 0;

	for (size_t i = 0; i < n; i++) {
		if (bins[i] <= 0.0)
			continue;
		if (shown % 5)
			fprintf(f, ", ");
		else
			fprintf(f, "%s  lat (%s)   : ", shown ? "\n" : "", unit);
		if (bins[i] < 0.01)
			fprintf(f, "%s=<0.01%%", rp_lat_keys[i]);
		else
			fprintf(f, "%s=%.2f%%", rp_lat_keys[i], bins[i]);
		shown++;
	}
	if (shown)
		fputc('\n', f);
}

static double cpu_pct(double s, double runtime)
{
	return runtime > 0 ? 100.0 * s / runtime : 0.0;
}

/* fio's IO depths, issued and latency_target lines (the last with the
 * depth the search ended at, or iodepth) */
static void print_map(FILE *f, const char *label, const char *const *keys, const uint64_t *v)
{
	uint64_t all = 0;

	for (unsigned i = 0; i < RP_NDEPTH; i++)
		all += v[i];
	fprintf(f, "%s:", label);
	for (unsigned i = 0; i < RP_NDEPTH; i++)
		fprintf(f, " %s=%.1f%%%s", keys[i], all ? 100.0 * (double)v[i] / (double)all : 0.0,
			i + 1 < RP_NDEPTH ? "," : "\n");
}

static void print_depths(FILE *f, const struct rp_unit *u, const struct rp_job *j)
{
	print_map(f, "  IO depths    ", rp_depth_keys, u->depth);
	print_map(f, "     submit    ", rp_batch_keys, u->submit);
	print_map(f, "     complete  ", rp_batch_keys, u->complete);
	fprintf(f, "     issued rwts: total=%" PRIu64 ",0,0,0 short=0,0,0,0 "
		"dropped=0,0,0,0\n", u->ios);
	fprintf(f, "     latency   : target=%llu, window=%llu, percentile=%.2f%%, depth=%u\n",
		(unsigned long long)j->lat_target_ns, (unsigned long long)(j->lat_window_ns / 1000),
		j->lat_pct, u->lat_depth ? u->lat_depth : j->iodepth);
}

/* fio's show_ss_normal: whether the steady state was reached, the
 * window's means and the last judgement */
static void print_ss(FILE *f, const struct rp_job *j, const struct rp_ss *ss)
{
	char bw[32], bwalt[32], iops[32];
	uint64_t b = rp_ss_mean(ss, 1);

	rp_num2str(bw, sizeof(bw), b, 4, j->kb_base == 1024, RP_N2S_BYTEPERSEC);
	rp_num2str(bwalt, sizeof(bwalt), b, 4, j->kb_base != 1024, RP_N2S_BYTEPERSEC);
	rp_num2str(iops, sizeof(iops), rp_ss_mean(ss, 0), 4, 0, RP_N2S_NONE);
	fprintf(f, "  steadystate  : attained=%s, bw=%s (%s), iops=%s, %s%s=%.3f%s\n",
		ss->attained ? "yes" : "no", bw, bwalt, iops,
		ss->state & RP_SS_IOPS ? "iops" : "bw", ss->state & RP_SS_SLOPE ? " slope" :
		" mean dev", ss->criterion, ss->state & RP_SS_PCT ? "%" : "");
}

/* rlperf's own lines: CPU per GB and what the engine did */
static void print_engine(FILE *f, const struct rp_unit *u)
{
	if (u->bytes)
		fprintf(f, "  cpu per GB   : %.3f s (usr+sys / GB read)\n",
			(u->usr_s + u->sys_s) / ((double)u->bytes / 1e9));
	fprintf(f, "  engine       : %s, %s, buffers %u (%u registered), files %s, "
		"queue depth %u, peak in flight %" PRIu64 " bytes\n",
		rl_backend_name((rl_backend)u->eng.backend),
		u->eng.direct_io ? "O_DIRECT" : "buffered", u->eng.buffers,
		u->eng.registered_buffers, u->eng.registered_files ? "registered" :
		"not registered", u->eng.queue_depth, u->eng.peak_inflight);
	if (u->submit_threads)
		fprintf(f, "  offload      : %u submit thread%s queued %" PRIu64 " reads\n",
			u->submit_threads, u->submit_threads > 1 ? "s" : "", u->offloaded);
	if (u->eng.fallbacks[0])
		fprintf(f, "  fallbacks    : %s\n", u->eng.fallbacks);
}

/* fio's clat_prio lines, where 2 priorities or more have reads: each
 * one's latencies (pct 0), or its percentiles and share (pct 1) */
static void print_prios(FILE *f, const struct rp_unit *u, int pct)
{
	if (rp_unit_nprio(u) < 2)
		return;
	for (unsigned i = 0; i < RP_NPRIO && u->prio[i].h; i++) {
		const struct rp_hist *h = u->prio[i].h;
		char name[64];
		int n = snprintf(name, sizeof(name), "clat prio %u/%u",
				 u->prio[i].ioprio >> RP_IOPRIO_CLASS_SHIFT,
				 u->prio[i].ioprio & ((1u << RP_IOPRIO_CLASS_SHIFT) - 1));

		if (!h->n)
			continue;
		if (!pct) {
			print_clat_line(f, name, h);
			continue;
		}
		snprintf(name + n, sizeof(name) - (size_t)n, " (%.2f%% of IOs)",
			 100.0 * (double)h->n / (double)u->clat->n);
		print_percentiles(f, name, h);
	}
}

static void print_unit(FILE *f, const struct rp_report *rep, const struct rp_unit *u)
{
	const struct rp_job *j = rep->plan->tasks[u->first].job;
	char bw[32], bws[32], io[32], iops[32], when[64];
	double rt = u->runtime_s, lat_ns[RP_NLAT], lat_us[RP_NLAT], lat_ms[RP_NLAT_MS];
	time_t t = (time_t)(rep->res->start_unix_ms / 1000);
	struct tm tm;

	strftime(when, sizeof(when), "%a %b %e %H:%M:%S %Y", localtime_r(&t, &tm));
	fprintf(f, "%s: (groupid=%d, jobs=%zu): err=%2d: pid=%d: %s\n", j->name, u->groupid,
		u->n, -u->error, (int)getpid(), when);
	rp_num2str(iops, sizeof(iops), (uint64_t)(rt > 0 ? u->ios / rt + 0.5 : 0), 4, 0, RP_N2S_NONE);
	rp_num2str(bw, sizeof(bw), (uint64_t)rp_unit_bps(u), 4, 1, RP_N2S_BYTEPERSEC);
	rp_num2str(bws, sizeof(bws), (uint64_t)rp_unit_bps(u), 4, 0, RP_N2S_BYTEPERSEC);
	rp_num2str(io, sizeof(io), u->bytes, 4, 1, RP_N2S_BYTE);
	fprintf(f, "  read: IOPS=%s, BW=%s (%s)(%s/%.0fmsec)\n", iops, bw, bws, io, rt * 1e3);
	if (u->clat->n) {  /* none with gtod_reduce: fio prints no lines then */
		print_clat_line(f, "clat", u->clat);
		print_prios(f, u, 0);
		print_percentiles(f, "clat", u->clat);
		print_prios(f, u, 1);
		rp_lat_bins(u->clat, lat_ns, lat_us, lat_ms);
		print_lat_bins(f, lat_ns, RP_NLAT, "nsec");
		print_lat_bins(f, lat_us, RP_NLAT, "usec");
		print_lat_bins(f, lat_ms, RP_NLAT_MS, "msec");
	}
	fprintf(f, "  cpu          : usr=%.2f%%, sys=%.2f%%, ctx=%" PRIu64 ", majf=%" PRIu64
		", minf=%" PRIu64 "\n", cpu_pct(u->usr_s, u->job_runtime_s),
		cpu_pct(u->sys_s, u->job_runtime_s), u->ctx, u->majf, u->minf);
	print_depths(f, u, rep->plan->tasks[u->first + u->n - 1].job);
	if (u->ss)
		print_ss(f, rep->plan->tasks[u->first].job, u->ss);
	print_engine(f, u);
	if (u->error)
		fprintf(f, "  error        : %s\n", u->errmsg);
}

/* fio's "Run status group N": the group's bandwidth (all bytes over the
 * longest runtime), the slowest and fastest report, the bytes, the times */
static void print_group(FILE *f, const struct rp_report *rep, int groupid)
{
	uint64_t bytes = 0, lo = UINT64_MAX, hi = 0;
	double rmin = 0, rmax = 0;
	size_t n = 0;
	char s[8][32];

	for (size_t i = 0; i < rep->nunits; i++) {
		const struct rp_unit *u = &rep->units[i];
		uint64_t bps = (uint64_t)rp_unit_bps(u);

		if (u->groupid != groupid)
			continue;
		bytes += u->bytes;
		lo = bps < lo ? bps : lo;
		hi = bps > hi ? bps : hi;
		rmin = !n++ || u->runtime_s < rmin ? u->runtime_s : rmin;
		rmax = u->runtime_s > rmax ? u->runtime_s : rmax;
	}
	if (!n)
		lo = 0;
	rp_num2str(s[0], 32, rmax > 0 ? (uint64_t)(bytes / rmax) : 0, 4, 1, RP_N2S_BYTEPERSEC);
	rp_num2str(s[1], 32, rmax > 0 ? (uint64_t)(bytes / rmax) : 0, 4, 0, RP_N2S_BYTEPERSEC);
	rp_num2str(s[2], 32, lo, 4, 1, RP_N2S_BYTEPERSEC);
	rp_num2str(s[3], 32, hi, 4, 1, RP_N2S_BYTEPERSEC);
	rp_num2str(s[4], 32, lo, 4, 0, RP_N2S_BYTEPERSEC);
	rp_num2str(s[5], 32, hi, 4, 0, RP_N2S_BYTEPERSEC);
	rp_num2str(s[6], 32, bytes, 4, 1, RP_N2S_BYTE);
	rp_num2str(s[7], 32, bytes, 4, 0, RP_N2S_BYTE);
	fprintf(f, "\nRun status group %d (all jobs):\n   READ: bw=%s (%s), %s-%s (%s-%s), "
		"io=%s (%s), run=%.0f-%.0fmsec\n", groupid, s[0], s[1], s[2], s[3], s[4], s[5], s[6],
		s[7], rmin * 1e3, rmax * 1e3);
}

/* A line per job as fio prints them before starting: "..." for clones */
static void print_jobs(FILE *f, const struct rp_report *rep)
{
	const struct rp_conf *c = rep->conf;
	size_t clones = 0;

	for (size_t i = 0; i < c->njobs; i++) {
		const struct rp_job *j = &c->jobs[i];
		int g = clones < rep->plan->ntasks ? rep->plan->tasks[clones].groupid : 0;
		char bs[32];

		rp_fmt_bs(bs, sizeof(bs), j->bs);
		fprintf(f, "%s: (g=%d): rw=%s, bs=(R) %s-%s, ioengine=%s, iodepth=%u\n",
			j->name, g, j->rw == RP_RANDREAD ? "randread" : "read", bs, bs,
			j->ioengine, j->iodepth);
		if (j->numjobs > 1)
			fprintf(f, "...\n");
		clones += j->numjobs;
	}
	fprintf(f, "%s\nStarting %zu thread%s\n\n", RP_VERSION, clones,
		clones == 1 ? "" : "s");
}

/* fio's "Disk stats": a line per disk, aggregates of its slaves after */
static void print_disks(FILE *f, const struct rp_disks *d)
{
	if (!d || !d->n)
		return;
	fprintf(f, "\nDisk stats (read/write):\n");
	for (size_t i = 0; i < d->n; i++) {
		const struct rp_disk_stat *s = &d->v[i].delta;
		struct rp_disk_agg a;
		int slaves = rp_disk_agg(d, i, &a);

		fprintf(f, "%s  %s: ios=%" PRIu64 "/%" PRIu64 ", merge=%" PRIu64 "/%" PRIu64
			", ticks=%" PRIu64 "/%" PRIu64 ", in_queue=%" PRIu64 ", util=%3.2f%%",
			slaves ? "  " : "", d->v[i].name, s->ios[0], s->ios[1], s->merges[0],
			s->merges[1], s->ticks[0], s->ticks[1], s->in_queue,
			rp_disk_util(&d->v[i]));
		if (slaves)
			fprintf(f, ", aggrios=%" PRIu64 "/%" PRIu64 ", aggrmerge=%" PRIu64 "/%"
				PRIu64 ", aggrticks=%" PRIu64 "/%" PRIu64 ", aggrin_queue=%" PRIu64
				", aggrutil=%3.2f%%", a.s.ios[0], a.s.ios[1], a.s.merges[0],
				a.s.merges[1], a.s.ticks[0], a.s.ticks[1], a.s.in_queue,
				a.max_util);
		fputc('\n', f);
	}
}

void rp_print_normal(FILE *f, const struct rp_report *rep)
{
	print_jobs(f, rep);
	for (size_t i = 0; i < rep->nunits; i++)
		print_unit(f, rep, &rep->units[i]);
	/* the units are in group order: a block per group, as fio's */
	for (size_t i = 0; i < rep->nunits; i++)
		if (!i || rep->units[i].groupid != rep->units[i - 1].groupid)
			print_group(f, rep, rep->units[i].groupid);
	if (!rep->nunits)
		print_group(f, rep, 0);
	print_disks(f, rep->disks);
}

void rp_print_report(FILE *f, const struct rp_report *rep)
{
	if (rep->conf->format == RP_FMT_TERSE)
		rp_print_terse(f, rep);
	else if (rep->conf->format != RP_FMT_NORMAL)
		rp_print_json(f, rep);
	else
		rp_print_normal(f, rep);
}
