/*
 * bench_load.c - one load with every statistic the loader keeps: what
 * `ringload load` does (the whole checkpoint, library staging, one device
 * unless a sharding is given), timed the same way (wall time from start to
 * exit), then rl_load_stats (workers, preparation,
 * request shape and why) and per-file statistics (page cache, device).
 * The benchmark scripts use it to record why a run was as fast as it was.
 *
 *   build/perf/bench_load PATH [--workers N] [--queue-depth N]
 *       [--request-bytes BYTES] [--inflight-bytes BYTES] [--backend auto|io_uring|libaio|pread]
 *       [--direct auto|on|off] [--sharding SPEC] [--touched] [--tsv]
 *
 * --touched loads into caller staging from rl_staging_alloc() that is
 * written once before the clock starts, so that the time is the reads'
 * alone, with no staging to fault in (what fio times: it reuses buffers
 * it touched before its clock started); the time is then the run's only.
 * --tsv prints one line: seconds gbps workers qd request_bytes
 * prepare_seconds setup_seconds scatter_seconds files_cached mode0.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_time.h"
#include "ringload.h"

#define MAX_TOUCHED 64 /* devices of a --touched load */

struct args {
	const char *path, *sharding;
	int tsv, touched;
	int64_t opt[11];        /* by rl_loader_param; -1: not set */
};

/* Numbers in bytes; anything else becomes a value rl_loader_set refuses. */
static int64_t num(const char *s)
{
	char *end;
	long long v = strtoll(s, &end, 10);

	return *end || end == s ? INT64_MIN : v;
}

static int enum_of(const char *v, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(v, names[i]))
			return i;
	return -1;
}

static int parse(int argc, char **argv, struct args *a)
{
	static const char *const backends[] = { "auto", "io_uring", "libaio", "pread" };
	static const char *const directs[] = { "off", "on", "auto" };

	memset(a, 0, sizeof(*a));
	memset(a->opt, 0xff, sizeof(a->opt));
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";

		if (!strcmp(o, "--tsv"))
			a->tsv = 1;
		else if (!strcmp(o, "--touched"))
			a->touched = 1;
		else if (o[0] != '-' && !a->path)
			a->path = o;
		else if (++i >= argc)
			return -1;
		else if (!strcmp(o, "--workers"))
			a->opt[RL_OPT_WORKERS] = num(v);
		else if (!strcmp(o, "--queue-depth"))
			a->opt[RL_OPT_QUEUE_DEPTH] = num(v);
		else if (!strcmp(o, "--request-bytes"))
			a->opt[RL_OPT_REQUEST_BYTES] = num(v);
		else if (!strcmp(o, "--inflight-bytes"))
			a->opt[RL_OPT_INFLIGHT_BYTES] = num(v);
		else if (!strcmp(o, "--backend"))
			a->opt[RL_OPT_BACKEND] = enum_of(v, backends, 4);
		else if (!strcmp(o, "--direct"))
			a->opt[RL_OPT_DIRECT] = enum_of(v, directs, 3);
		else if (!strcmp(o, "--sharding"))
			a->sharding = v;
		else
			return -1;
	}
	return a->path ? 0 : -1;
}

/* The loader's statistics, copied out before it is destroyed. */
struct report {
	rl_load_stats st;
	size_t nfiles;
	rl_file_stats fs[64];
};

static void collect(const rl_loader *ld, struct report *r)
{
	memset(r, 0, sizeof(*r));
	r->st.size = sizeof(r->st);
	rl_loader_get_stats(ld, &r->st);
	r->nfiles = rl_loader_num_files(ld);
	if (r->nfiles > 64)
		r->nfiles = 64;
	for (size_t i = 0; i < r->nfiles; i++) {
		r->fs[i].size = sizeof(r->fs[i]);
		rl_loader_get_file_stats(ld, i, r->fs + i);
	}
}

static const char *mode_name(int m)
{
	static const char *const modes[] = { "unused", "O_DIRECT", "cached", "buffered" };

	return m >= 0 && m < 4 ? modes[m] : "?";
}

static void report(const struct report *r, double secs, int tsv)
{
	const rl_load_stats *st = &r->st;
	const rl_load_stats *x = st;

	if (tsv) {
		printf("%.4f\t%.3f\t%u\t%u\t%" PRIu64 "\t%.4f\t%.4f\t%.4f\t%u\t%s\n", secs,
		       st->bytes_read / secs / 1e9, x->workers, x->queue_depth, x->request_bytes,
		       x->prepare_seconds, x->setup_seconds, x->scatter_seconds, x->files_cached,
		       mode_name(r->nfiles ? r->fs[0].mode : 0));
		return;
	}
	printf("%" PRIu64 " bytes in %.3f s (%.2f GB/s), backend %s\n", st->bytes_read, secs,
	       st->bytes_read / secs / 1e9, rl_backend_name(st->backend));
	printf("read %.3f s, plan %.3f s, setup %.3f s, prepare %.3f s (summed), scatter %.3f s (summed)\n",
	       st->read_seconds, st->plan_seconds, x->setup_seconds, x->prepare_seconds,
	       x->scatter_seconds);
	printf("%" PRIu64 " requests, %" PRIu64 " direct bytes, %" PRIu64 " buffered, peak %" PRIu64
	       " in flight, %u buffers (%u registered)\n", st->requests, st->bytes_direct,
	       x->bytes_buffered, st->peak_inflight, st->buffers, st->registered_buffers);
	printf("shape: %s\n", x->shape);
	for (size_t i = 0; i < r->nfiles; i++)
		printf("file %zu: %s, %" PRIu64 " of %" PRIu64 " bytes cached, device %s\n",
		       r->fs[i].file,
		       mode_name(r->fs[i].mode), r->fs[i].bytes_resident, r->fs[i].bytes_needed,
		       r->fs[i].device[0] ? r->fs[i].device : "none");
	if (st->fallbacks[0])
		printf("fallbacks: %s\n", st->fallbacks);
}

/* Plans, gives every device caller staging written once, then runs:
 * *t0 is restarted after the writes. Returns as rl_loader_run(). */
static int load_touched(rl_loader *ld, rl_ckpt *ck, rl_spec *spec, rl_plan **planp,
			void **mem, size_t *len, unsigned maxdev, double *t0)
{
	rl_plan *plan = rl_plan_create();
	int ret = plan ? rl_plan_build(plan, ck, spec) : -ENOMEM;
	unsigned n = ret == 0 ? rl_plan_num_devices(plan) : 0;

	*planp = plan;
	if (ret == 0 && n > maxdev)
		return -E2BIG;
	if (ret == 0)
		ret = rl_loader_set(ld, RL_OPT_STAGING, RL_STAGING_CALLER);
	for (unsigned d = 0; ret == 0 && d < n; d++) {
		rl_device_info di;

		ret = rl_plan_device(plan, d, &di);
		len[d] = ret == 0 && di.staging_bytes ? di.staging_bytes : 1;
		mem[d] = ret == 0 ? rl_staging_alloc(len[d]) : NULL;
		if (ret == 0 && !mem[d])
			ret = -ENOMEM;
		if (ret == 0) {
			memset(mem[d], 1, len[d]);
			ret = rl_loader_set_staging(ld, d, mem[d], len[d]);
		}
	}
	*t0 = perf_now_s();
	return ret == 0 ? rl_loader_run(ld, plan) : ret;
}

int main(int argc, char **argv)
{
	double t0 = perf_now_s();
	struct args a;
	rl_ckpt *ck = rl_ckpt_create();
	rl_spec *spec = NULL;
	rl_loader *ld = rl_loader_create();
	rl_plan *plan = NULL;
	static struct report r;
	void *mem[MAX_TOUCHED] = { NULL };
	size_t len[MAX_TOUCHED] = { 0 };
	int ret = 0;

	if (parse(argc, argv, &a) < 0) {
		fprintf(stderr, "usage: bench_load PATH [--workers N] [--queue-depth N] "
			"[--request-bytes N] [--inflight-bytes N] [--backend B] "
			"[--direct auto|on|off] [--sharding SPEC] [--touched] [--tsv]\n");
		return 2;
	}
	for (int p = RL_OPT_BACKEND; p <= RL_OPT_WORKERS && ret == 0; p++)
		if (a.opt[p] >= 0)
			ret = rl_loader_set(ld, (rl_loader_param)p, a.opt[p]);
	if (ret == 0)
		ret = rl_ckpt_open(ck, a.path);
	if (ret == 0 && a.sharding && (spec = rl_spec_create()))
		ret = rl_spec_load(spec, a.sharding);
	if (ret == 0 && a.touched)
		ret = load_touched(ld, ck, spec, &plan, mem, len, MAX_TOUCHED, &t0);
	else if (ret == 0)
		ret = rl_loader_load(ld, ck, spec, 0, &plan);
	if (ret < 0) {
		fprintf(stderr, "bench_load: %s%s%s\n", rl_loader_errmsg(ld), rl_ckpt_errmsg(ck),
			spec ? rl_spec_errmsg(spec) : "");
		return 1;
	}
	collect(ld, &r);
	rl_plan_destroy(plan);
	rl_loader_destroy(ld);   /* staging unmapped: part of the time, as at exit */
	report(&r, perf_now_s() - t0, a.tsv);
	for (unsigned d = 0; d < MAX_TOUCHED; d++)
		rl_staging_free(mem[d], len[d]);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
	return 0;
}
