/*
 * rlperf_json.c - results as fio's JSON: the same keys at the same places
 * (fio 3.33, checked by tests/test_rlperf.c against fio's own output for
 * the same job file), so that tools written for fio's JSON read rlperf's
 * unchanged; rlperf adds one key per job, "rlperf", with what the engine
 * did. Values rlperf does not measure are zeros: slat (submission is not
 * timed, so lat equals clat), the sync and write/trim blocks.
 */
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "rlperf.h"

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

static void json_kv(FILE *f, const char *indent, const struct rp_kvlist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		fprintf(f, "%s  ", indent);
		rp_json_str(f, l->v[i].key);
		fprintf(f, " : ");
		rp_json_str(f, l->v[i].val);
		fprintf(f, "%s\n", i + 1 < l->n ? "," : "");
	}
}

/* pct: 0 none, 1 the percentiles, 2 also fio's json+ "bins" (each
 * non-empty histogram bucket's middle value and its count) */
static void json_lat(FILE *f, const char *key, const struct rp_hist *h, int pct,
		     const char *end)
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
		fprintf(f, "          }%s\n", pct == 2 ? "," : "");
	}
	if (pct == 2 && h->n) {
		const char *sep = "";

		fprintf(f, "          \"bins\" : {");
		for (unsigned i = 0; i < RP_PLAT_NR; i++)
			if (h->bucket[i]) {
				fprintf(f, "%s\n            \"%" PRIu64 "\" : %" PRIu64, sep,
					rp_hist_value(i), h->bucket[i]);
				sep = ",";
			}
		fprintf(f, "\n          }\n");
	}
	fprintf(f, "        }%s\n", end);
}

/* fio's "prios" where 2 priorities or more have reads: each one's class,
 * level and completion latencies */
static void json_prios(FILE *f, const struct rp_unit *u, int plus)
{
	const char *sep = "";

	if (!u || rp_unit_nprio(u) < 2)
		return;
	fprintf(f, "        \"prios\" : [");
	for (unsigned i = 0; i < RP_NPRIO && u->prio[i].h; i++) {
		if (!u->prio[i].h->n)
			continue;
		fprintf(f, "%s\n        {\n          \"prioclass\" : %u,\n"
			"          \"prio\" : %u,\n", sep,
			u->prio[i].ioprio >> RP_IOPRIO_CLASS_SHIFT,
			u->prio[i].ioprio & ((1u << RP_IOPRIO_CLASS_SHIFT) - 1));
		json_lat(f, "clat_ns", u->prio[i].h, plus ? 2 : 1, "");
		fprintf(f, "        }");
		sep = ",";
	}
	fprintf(f, "\n        ],\n");
}

/* fio's bw_* and iops_* from the 500 ms samples; bw_agg is this report's
 * share of the group's bandwidth */
static void json_samples(FILE *f, const struct rp_unit *u, double group_bps)
{
	fprintf(f, "        \"bw_min\" : %.0f,\n        \"bw_max\" : %.0f,\n"
		"        \"bw_agg\" : %.6f,\n        \"bw_mean\" : %.6f,\n"
		"        \"bw_dev\" : %.6f,\n        \"bw_samples\" : %" PRIu64 ",\n",
		u ? u->bw.min : 0.0, u ? u->bw.max : 0.0,
		u && u->bw.n && group_bps > 0 ? 100.0 * rp_samples_mean(&u->bw) * 1024.0 / group_bps : 0.0,
		u ? rp_samples_mean(&u->bw) : 0.0, u ? rp_samples_stddev(&u->bw) : 0.0, u ? u->bw.n : 0);
	fprintf(f, "        \"iops_min\" : %.0f,\n        \"iops_max\" : %.0f,\n"
		"        \"iops_mean\" : %.6f,\n        \"iops_stddev\" : %.6f,\n"
		"        \"iops_samples\" : %" PRIu64 "\n",
		u ? u->iops.min : 0.0, u ? u->iops.max : 0.0, u ? rp_samples_mean(&u->iops) : 0.0,
		u ? rp_samples_stddev(&u->iops) : 0.0, u ? u->iops.n : 0);
}

/* One direction's block: reads carry the numbers, write and trim zeros. */
static void json_dir(FILE *f, const char *dir, const struct rp_unit *u, double group_bps,
		     int plus)
{
	struct rp_hist empty;
	const struct rp_hist *h = u ? u->clat : &empty;
	double rt = u ? u->runtime_s : 0.0, bps = u ? rp_unit_bps(u) : 0.0;
	uint64_t bytes = u ? u->bytes : 0, ios = u ? u->ios : 0;

	rp_hist_init(&empty);
	fprintf(f, "      \"%s\" : {\n", dir);
	fprintf(f, "        \"io_bytes\" : %" PRIu64 ",\n        \"io_kbytes\" : %" PRIu64
		",\n        \"bw_bytes\" : %.0f,\n        \"bw\" : %.0f,\n"
		"        \"iops\" : %.6f,\n        \"runtime\" : %.0f,\n"
		"        \"total_ios\" : %" PRIu64 ",\n        \"short_ios\" : 0,\n"
		"        \"drop_ios\" : 0,\n", bytes, bytes / 1024, bps, bps / 1024.0,
		rt > 0 ? ios / rt : 0.0, rt * 1e3, ios);
	/* rlperf does not time submission: slat is zero, lat equals clat */
	fprintf(f, "        \"slat_ns\" : {\n          \"min\" : 0,\n          \"max\" : 0,\n"
		"          \"mean\" : 0.000000,\n          \"stddev\" : 0.000000,\n"
		"          \"N\" : 0\n        },\n");
	json_lat(f, "clat_ns", h, plus ? 2 : 1, ",");
	json_lat(f, "lat_ns", h, 0, ",");
	json_prios(f, u, plus);
	json_samples(f, u, group_bps);
	fprintf(f, "      },\n");
}

static void json_bins(FILE *f, const char *key, const char *const *keys,
		      const double *v, size_t n, const char *end)
{
	fprintf(f, "      \"%s\" : {\n", key);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "        \"%s\" : %.6f%s\n", keys[i], v ? v[i] : 0.0,
			i + 1 < n ? "," : "");
	fprintf(f, "      }%s\n", end);
}

static void json_map(FILE *f, const char *name, const char *const *keys, const uint64_t *v)
{
	double pct[RP_NDEPTH];
	uint64_t all = 0;

	for (unsigned i = 0; i < RP_NDEPTH; i++)
		all += v[i];
	for (unsigned i = 0; i < RP_NDEPTH; i++)
		pct[i] = all ? 100.0 * (double)v[i] / (double)all : 0.0;
	json_bins(f, name, keys, pct, RP_NDEPTH, ",");
}

static void json_depths(FILE *f, const struct rp_unit *u)
{
	json_map(f, "iodepth_level", rp_depth_keys, u->depth);
	json_map(f, "iodepth_submit", rp_batch_keys, u->submit);
	json_map(f, "iodepth_complete", rp_batch_keys, u->complete);
}

/* fio's latency_target keys: the target in ns, the window in us */
static void json_latency(FILE *f, const struct rp_unit *u, const struct rp_job *j)
{
	double ns[RP_NLAT], us[RP_NLAT], ms[RP_NLAT_MS];

	rp_lat_bins(u->clat, ns, us, ms);
	json_bins(f, "latency_ns", rp_lat_keys, ns, RP_NLAT, ",");
	json_bins(f, "latency_us", rp_lat_keys, us, RP_NLAT, ",");
	json_bins(f, "latency_ms", rp_lat_keys, ms, RP_NLAT_MS, ",");
	fprintf(f, "      \"latency_depth\" : %u,\n      \"latency_target\" : %llu,\n"
		"      \"latency_percentile\" : %f,\n      \"latency_window\" : %llu,\n",
		u->lat_depth ? u->lat_depth : j->iodepth, (unsigned long long)j->lat_target_ns,
		j->lat_pct, (unsigned long long)(j->lat_window_ns / 1000));
}

/* fio's "steadystate" object: the criterion, whether it held, the last
 * judgement and the window's samples, oldest first */
static void json_ss(FILE *f, const struct rp_ss *ss)
{
	const char *kind = ss->state & RP_SS_IOPS ? "iops" : "bw";
	const char *pct = ss->state & RP_SS_PCT ? "%" : "";

	fprintf(f, "      \"steadystate\" : {\n        \"ss\" : \"%s%s:%f%s\",\n"
		"        \"duration\" : %u,\n        \"attained\" : %d,\n"
		"        \"criterion\" : \"%f%s\",\n        \"max_deviation\" : %f,\n"
		"        \"slope\" : %f,\n        \"data\" : {\n"
		"          \"bw_mean\" : %" PRIu64 ",\n          \"iops_mean\" : %" PRIu64 ",\n",
		kind, ss->state & RP_SS_SLOPE ? "_slope" : "", (double)(float)ss->limit, pct,
		ss->dur, ss->attained, (double)(float)ss->criterion, pct, ss->deviation,
		ss->slope, rp_ss_mean(ss, 1), rp_ss_mean(ss, 0));
	for (int b = 0; b < 2; b++) {
		fprintf(f, "          \"%s\" : [", b ? "bw" : "iops");
		for (unsigned i = 0; i < ss->dur; i++)
			fprintf(f, "%s\n            %" PRIu64, i ? "," : "",
				(b ? ss->bw : ss->iops)[(ss->head + i) % ss->dur]);
		fprintf(f, "\n          ]%s\n", b ? "" : ",");
	}
	fprintf(f, "        }\n      },\n");
}

static void json_rlperf(FILE *f, const struct rp_unit *u)
{
	fprintf(f, "      \"rlperf\" : {\n        \"backend\" : \"%s\",\n"
		"        \"direct_io\" : %d,\n        \"buffers\" : %u,\n"
		"        \"registered_buffers\" : %u,\n        \"registered_files\" : %d,\n"
		"        \"queue_depth\" : %u,\n        \"peak_inflight\" : %" PRIu64 ",\n"
		"        \"retries\" : %" PRIu64 ",\n        \"cpu_s_per_gb\" : %.6f,\n"
		"        \"voluntary_ctx\" : %" PRIu64 ",\n        \"submit_threads\" : %u,\n"
		"        \"offloaded_reads\" : %" PRIu64 ",\n        \"fallbacks\" : ",
		rl_backend_name((rl_backend)u->eng.backend), u->eng.direct_io,
		u->eng.buffers, u->eng.registered_buffers, u->eng.registered_files,
		u->eng.queue_depth, u->eng.peak_inflight, u->eng.retries,
		u->bytes ? (u->usr_s + u->sys_s) / ((double)u->bytes / 1e9) : 0.0, u->vctx,
		u->submit_threads, u->offloaded);
	rp_json_str(f, u->eng.fallbacks);
	fprintf(f, ",\n        \"error\" : ");
	rp_json_str(f, u->errmsg ? u->errmsg : "");
	fprintf(f, "\n      }\n");
}

static void json_unit(FILE *f, const struct rp_report *rep, const struct rp_unit *u,
		      double group_bps, int is_last)
{
	const struct rp_job *j = rep->plan->tasks[u->first].job;
	/* fio names a report after its first clone, but lists the options of
	 * its last */
	const struct rp_job *last = rep->plan->tasks[u->first + u->n - 1].job;
	double jrt = u->job_runtime_s;

	fprintf(f, "    {\n      \"jobname\" : ");
	rp_json_str(f, j->name);
	fprintf(f, ",\n      \"groupid\" : %d,\n      \"error\" : %d,\n      \"eta\" : 0,\n"
		"      \"elapsed\" : %.0f,\n      \"job options\" : {\n", u->groupid, -u->error,
		rep->res->elapsed_s);
	json_kv(f, "      ", &last->given);
	fprintf(f, "      },\n");
	json_dir(f, "read", u, group_bps, rep->conf->format == RP_FMT_JSONPLUS);
	json_dir(f, "write", NULL, 0, 0);
	json_dir(f, "trim", NULL, 0, 0);
	fprintf(f, "      \"sync\" : {\n        \"total_ios\" : 0,\n        \"lat_ns\" : {\n"
		"          \"min\" : 0,\n          \"max\" : 0,\n          \"mean\" : 0.000000,\n"
		"          \"stddev\" : 0.000000,\n          \"N\" : 0\n        }\n      },\n");
	fprintf(f, "      \"job_runtime\" : %.0f,\n      \"usr_cpu\" : %.6f,\n"
		"      \"sys_cpu\" : %.6f,\n      \"ctx\" : %" PRIu64 ",\n"
		"      \"majf\" : %" PRIu64 ",\n      \"minf\" : %" PRIu64 ",\n",
		jrt * 1e3, jrt > 0 ? 100.0 * u->usr_s / jrt : 0.0,
		jrt > 0 ? 100.0 * u->sys_s / jrt : 0.0, u->ctx, u->majf, u->minf);
	json_depths(f, u);
	json_latency(f, u, last);
	if (u->ss)
		json_ss(f, u->ss);
	json_rlperf(f, u);
	fprintf(f, "    }%s\n", is_last ? "" : ",");
}

/* fio's disk_util array: absent without a disk (tmpfs), as in fio */
static void json_disks(FILE *f, const struct rp_disks *d)
{
	if (!d || !d->n)
		return;
	fprintf(f, ",\n  \"disk_util\" : [");
	for (size_t i = 0; i < d->n; i++) {
		const struct rp_disk *k = &d->v[i];
		const struct rp_disk_stat *s = &k->delta;
		struct rp_disk_agg a;

		fprintf(f, "%s\n    {\n      \"name\" : ", i ? "," : "");
		rp_json_str(f, k->name);
		fprintf(f, ",\n      \"read_ios\" : %" PRIu64 ",\n      \"write_ios\" : %" PRIu64
			",\n      \"read_merges\" : %" PRIu64 ",\n      \"write_merges\" : %"
			PRIu64 ",\n      \"read_ticks\" : %" PRIu64 ",\n      \"write_ticks\" : %"
			PRIu64 ",\n      \"in_queue\" : %" PRIu64 ",\n      \"util\" : %f",
			s->ios[0], s->ios[1], s->merges[0], s->merges[1], s->ticks[0],
			s->ticks[1], s->in_queue, rp_disk_util(k));
		if (rp_disk_agg(d, i, &a))
			fprintf(f, ",\n      \"aggr_read_ios\" : %" PRIu64 ",\n      "
				"\"aggr_write_ios\" : %" PRIu64 ",\n      \"aggr_read_merges\" : %"
				PRIu64 ",\n      \"aggr_write_merge\" : %" PRIu64 ",\n      "
				"\"aggr_read_ticks\" : %" PRIu64 ",\n      \"aggr_write_ticks\" : %"
				PRIu64 ",\n      \"aggr_in_queue\" : %" PRIu64 ",\n      "
				"\"aggr_util\" : %f", a.s.ios[0], a.s.ios[1], a.s.merges[0],
				a.s.merges[1], a.s.ticks[0], a.s.ticks[1], a.s.in_queue,
				a.max_util);
		fprintf(f, "\n    }");
	}
	fprintf(f, "\n  ]");
}

void rp_print_json(FILE *f, const struct rp_report *rep)
{
	time_t t = (time_t)(rep->res->start_unix_ms / 1000);
	char tbuf[64];
	struct tm tm;

	strftime(tbuf, sizeof(tbuf), "%a %b %e %H:%M:%S %Y", localtime_r(&t, &tm));
	fprintf(f, "{\n  \"fio version\" : \"%s\",\n  \"timestamp\" : %lld,\n"
		"  \"timestamp_ms\" : %" PRIu64 ",\n  \"time\" : \"%s\",\n", RP_VERSION,
		(long long)t, rep->res->start_unix_ms, tbuf);
	if (rep->conf->have_global) {
		/* fio lists this object when any global option was given */
		fprintf(f, "  \"global options\" : {\n");
		json_kv(f, "  ", &rep->conf->global_given);
		fprintf(f, "  },\n");
	}
	fprintf(f, "  \"jobs\" : [\n");
	for (size_t i = 0; i < rep->nunits; i++)
		json_unit(f, rep, &rep->units[i], rp_group_bps(rep->units, rep->nunits,
			  rep->units[i].groupid), i + 1 == rep->nunits);
	fprintf(f, "  ]");
	json_disks(f, rep->disks);
	fprintf(f, "\n}\n");
}
