/*
 * rlperf_out.c - results as fio prints them: the normal text report, and
 * JSON whose fields for reads sit where fio's do (jobs[0].read.bw_bytes,
 * .iops, .clat_ns.percentile["99.000000"], jobs[0].usr_cpu, ...) so that
 * tools written for fio's JSON read rlperf's unchanged.
 */
#include <inttypes.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rlperf.h"

/* fio's num2str in spirit: at most 4 significant digits and a unit. */
static void fmt_scaled(char *buf, size_t len, double v, int iec, const char *unit)
{
	static const char *const pre[] = { "", "k", "M", "G", "T", "P" };
	double base = iec ? 1024.0 : 1000.0;
	unsigned i = 0;

	while (v >= 9999.5 && i + 1 < RL_ARRAY_SIZE(pre)) {
		v /= base;
		i++;
	}
	snprintf(buf, len, v >= 99.95 || i == 0 ? "%.0f%s%s%s" : "%.3g%s%s%s", v,
		 iec && i ? (i == 1 ? "Ki" : pre[i]) : pre[i],
		 iec && i > 1 ? "i" : "", unit);
}

void rp_fmt_bytes_iec(char *buf, size_t len, uint64_t v)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	unsigned i = 0;

	/* exact multiples only, as fio prints block sizes: 4096B, 1024KiB */
	while (i + 1 < RL_ARRAY_SIZE(units) && v >= 1024 && v % 1024 == 0 &&
	       v / 1024 >= 1024) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, "%" PRIu64 "%s", v, units[i]);
}

struct lat_unit {
	const char *name;
	double div;
};

/* nsec, usec or msec, by the largest value, as fio chooses. */
static struct lat_unit lat_unit(uint64_t max_ns)
{
	if (max_ns < 10000)
		return (struct lat_unit){ "nsec", 1.0 };
	if (max_ns < 10000000)
		return (struct lat_unit){ "usec", 1e3 };
	return (struct lat_unit){ "msec", 1e6 };
}

static void print_percentiles(FILE *f, const struct rp_hist *h, struct lat_unit u)
{
	uint64_t v[RP_NPCT];

	rp_hist_percentiles(h, rp_pct_list, RP_NPCT, v);
	fprintf(f, "    clat percentiles (%s):\n", u.name);
	for (unsigned i = 0; i < RP_NPCT; i++) {
		char p[16];

		snprintf(p, sizeof(p), "%5.2fth", rp_pct_list[i]);
		fprintf(f, "%s%s=[%5.0f]%s", i % 4 ? " " : "     | ", p,
			(double)v[i] / u.div, i + 1 == RP_NPCT ? "\n" : i % 4 == 3 ? ",\n" : ",");
	}
}

static double cpu_pct(double s, double runtime)
{
	return runtime > 0 ? 100.0 * s / runtime : 0.0;
}

void rp_print_normal(FILE *f, const struct rp_opts *o, const struct rp_result *r)
{
	char bs[32], bw[32], bws[32], io[32], iops[32], when[64];
	double rt = r->runtime_s, bps = rt > 0 ? r->bytes / rt : 0.0;
	struct lat_unit u = lat_unit(r->clat.max);
	time_t t = (time_t)(r->start_unix_ms / 1000);
	struct tm tm;

	rp_fmt_bytes_iec(bs, sizeof(bs), o->bs);
	fprintf(f, "%s: (g=0): rw=%s, bs=(R) %s-%s, ioengine=%s, iodepth=%u\n",
		o->name, o->rw == RP_RANDREAD ? "randread" : "read", bs, bs,
		rp_engine_name(o->engine), o->iodepth);
	fprintf(f, "%s\nStarting %u thread%s\n\n", RP_VERSION, o->numjobs,
		o->numjobs == 1 ? "" : "s");
	strftime(when, sizeof(when), "%a %b %e %H:%M:%S %Y", localtime_r(&t, &tm));
	fprintf(f, "%s: (groupid=0, jobs=%u): err=%2d: pid=%d: %s\n", o->name,
		r->numjobs, -r->error, (int)getpid(), when);

	fmt_scaled(iops, sizeof(iops), rt > 0 ? r->ios / rt : 0.0, 0, "");
	fmt_scaled(bw, sizeof(bw), bps, 1, "B/s");
	fmt_scaled(bws, sizeof(bws), bps, 0, "B/s");
	fmt_scaled(io, sizeof(io), (double)r->bytes, 1, "B");
	fprintf(f, "  read: IOPS=%s, BW=%s (%s)(%s/%.0fmsec)\n", iops, bw, bws, io,
		rt * 1e3);
	fprintf(f, "    clat (%s): min=%.0f, max=%.0f, avg=%.2f, stdev=%.2f\n", u.name,
		r->clat.n ? r->clat.min / u.div : 0.0, r->clat.max / u.div,
		rp_hist_mean(&r->clat) / u.div, rp_hist_stddev(&r->clat) / u.div);
	print_percentiles(f, &r->clat, u);
	fprintf(f, "  cpu          : usr=%.2f%%, sys=%.2f%%, ctx=%" PRIu64 ", majf=%" PRIu64
		", minf=%" PRIu64 "\n", cpu_pct(r->usr_s, rt), cpu_pct(r->sys_s, rt),
		r->ctx, r->majf, r->minf);
	if (r->bytes)
		fprintf(f, "  cpu per GB   : %.3f s (usr+sys / GB read)\n",
			(r->usr_s + r->sys_s) / (r->bytes / 1e9));
	fprintf(f, "  engine       : %s, %s, buffers %u (%u registered), files %s, "
		"queue depth %u, peak in flight %" PRIu64 " bytes\n",
		rp_backend_name(r->eng.backend),
		r->eng.direct_io ? "O_DIRECT" : "buffered", r->eng.buffers,
		r->eng.registered_buffers, r->eng.registered_files ? "registered" :
		"not registered", r->eng.queue_depth, r->eng.peak_inflight);
	if (r->eng.fallbacks[0])
		fprintf(f, "  fallbacks    : %s\n", r->eng.fallbacks);
	fprintf(f, "\nRun status group 0 (all jobs):\n   READ: bw=%s (%s), io=%s, "
		"run=%.0f-%.0fmsec\n", bw, bws, io, rt * 1e3, rt * 1e3);
}

void rp_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void json_lat(FILE *f, const char *key, const struct rp_hist *h, int pct)
{
	fprintf(f, "        \"%s\" : {\n", key);
	fprintf(f, "          \"min\" : %" PRIu64 ",\n          \"max\" : %" PRIu64 ",\n"
		"          \"mean\" : %.6f,\n          \"stddev\" : %.6f,\n"
		"          \"N\" : %" PRIu64 "%s\n", h->n ? h->min : 0, h->max,
		rp_hist_mean(h), rp_hist_stddev(h), h->n, pct && h->n ? "," : "");
	if (pct && h->n) {
		uint64_t v[RP_NPCT];

		rp_hist_percentiles(h, rp_pct_list, RP_NPCT, v);
		fprintf(f, "          \"percentile\" : {\n");
		for (unsigned i = 0; i < RP_NPCT; i++)
			fprintf(f, "            \"%f\" : %" PRIu64 "%s\n", rp_pct_list[i],
				v[i], i + 1 < RP_NPCT ? "," : "");
		fprintf(f, "          }\n");
	}
	fprintf(f, "        },\n");
}

/* One direction's block; reads carry the numbers, write and trim zeros. */
static void json_dir(FILE *f, const char *dir, const struct rp_result *r, int last)
{
	struct rp_hist empty;
	const struct rp_hist *h = r ? &r->clat : &empty;
	double rt = r ? r->runtime_s : 0.0;
	uint64_t bytes = r ? r->bytes : 0, ios = r ? r->ios : 0;
	double bps = rt > 0 ? bytes / rt : 0.0, iops = rt > 0 ? ios / rt : 0.0;

	rp_hist_init(&empty);
	fprintf(f, "      \"%s\" : {\n", dir);
	fprintf(f, "        \"io_bytes\" : %" PRIu64 ",\n        \"io_kbytes\" : %" PRIu64
		",\n        \"bw_bytes\" : %.0f,\n        \"bw\" : %.0f,\n"
		"        \"iops\" : %.6f,\n        \"runtime\" : %.0f,\n"
		"        \"total_ios\" : %" PRIu64 ",\n        \"short_ios\" : 0,\n"
		"        \"drop_ios\" : 0,\n", bytes, bytes / 1024, bps, bps / 1024.0,
		iops, rt * 1e3, ios);
	/* rlperf does not time submission: slat is zero, lat equals clat */
	fprintf(f, "        \"slat_ns\" : {\n          \"min\" : 0,\n          \"max\" : 0,\n"
		"          \"mean\" : 0.000000,\n          \"stddev\" : 0.000000,\n"
		"          \"N\" : 0\n        },\n");
	json_lat(f, "clat_ns", h, 1);
	json_lat(f, "lat_ns", h, 0);
	fprintf(f, "        \"bw_agg\" : %s,\n        \"iops_min\" : 0\n      }%s\n",
		r ? "100.000000" : "0.000000", last ? "" : ",");
}

void rp_print_json(FILE *f, const struct rp_opts *o, const struct rp_result *r)
{
	char bs[32], tbuf[64];
	time_t t = (time_t)(r->start_unix_ms / 1000);
	double rt = r->runtime_s;
	struct tm tm;

	rp_fmt_bytes_iec(bs, sizeof(bs), o->bs);
	strftime(tbuf, sizeof(tbuf), "%a %b %e %H:%M:%S %Y", localtime_r(&t, &tm));
	fprintf(f, "{\n  \"fio version\" : \"%s\",\n  \"timestamp\" : %lld,\n"
		"  \"timestamp_ms\" : %" PRIu64 ",\n  \"time\" : \"%s\",\n"
		"  \"global options\" : {},\n  \"jobs\" : [\n    {\n", RP_VERSION,
		(long long)t, r->start_unix_ms, tbuf);
	fprintf(f, "      \"jobname\" : ");
	rp_json_str(f, o->name);
	fprintf(f, ",\n      \"groupid\" : 0,\n      \"error\" : %d,\n      \"eta\" : 0,\n"
		"      \"elapsed\" : %.0f,\n      \"job options\" : {\n        \"name\" : ",
		-r->error, r->elapsed_s);
	rp_json_str(f, o->name);
	fprintf(f, ",\n        \"filename\" : ");
	rp_json_str(f, o->filename ? o->filename : "");
	fprintf(f, ",\n        \"rw\" : \"%s\",\n        \"bs\" : \"%s\",\n"
		"        \"iodepth\" : \"%u\",\n        \"direct\" : \"%d\",\n"
		"        \"ioengine\" : \"%s\",\n        \"numjobs\" : \"%u\"%s\n",
		o->rw == RP_RANDREAD ? "randread" : "read", bs, o->iodepth, o->direct,
		rp_engine_name(o->engine), o->numjobs,
		o->fixedbufs || o->registerfiles ? "," : "");
	if (o->fixedbufs || o->registerfiles) {
		/* fio's spelling of set flags in "job options" */
		if (o->fixedbufs)
			fprintf(f, "        \"fixedbufs\" : \"\"%s\n",
				o->registerfiles ? "," : "");
		if (o->registerfiles)
			fprintf(f, "        \"registerfiles\" : \"\"\n");
	}
	fprintf(f, "      },\n");
	json_dir(f, "read", r, 0);
	json_dir(f, "write", NULL, 0);
	json_dir(f, "trim", NULL, 0);
	fprintf(f, "      \"job_runtime\" : %.0f,\n      \"usr_cpu\" : %.6f,\n"
		"      \"sys_cpu\" : %.6f,\n      \"ctx\" : %" PRIu64 ",\n"
		"      \"majf\" : %" PRIu64 ",\n      \"minf\" : %" PRIu64 ",\n",
		rt * 1e3, cpu_pct(r->usr_s, rt), cpu_pct(r->sys_s, rt), r->ctx, r->majf,
		r->minf);
	fprintf(f, "      \"rlperf\" : {\n        \"backend\" : \"%s\",\n"
		"        \"direct_io\" : %d,\n        \"buffers\" : %u,\n"
		"        \"registered_buffers\" : %u,\n        \"registered_files\" : %d,\n"
		"        \"queue_depth\" : %u,\n        \"peak_inflight\" : %" PRIu64 ",\n"
		"        \"retries\" : %" PRIu64 ",\n        \"cpu_s_per_gb\" : %.6f,\n"
		"        \"voluntary_ctx\" : %" PRIu64 ",\n"
		"        \"fallbacks\" : ",
		rp_backend_name(r->eng.backend), r->eng.direct_io,
		r->eng.buffers, r->eng.registered_buffers, r->eng.registered_files,
		r->eng.queue_depth, r->eng.peak_inflight, r->eng.retries,
		r->bytes ? (r->usr_s + r->sys_s) / (r->bytes / 1e9) : 0.0, r->vctx);
	rp_json_str(f, r->eng.fallbacks);
	fprintf(f, ",\n        \"error\" : ");
	rp_json_str(f, r->errmsg);
	fprintf(f, "\n      }\n    }\n  ]\n}\n");
}
