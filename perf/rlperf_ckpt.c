/*
 * rlperf_ckpt.c - checkpoint mode: loads a checkpoint through the public
 * API only (api/ringload.h), as an application would, and reports the
 * phases of the load: plan, read, scatter, bytes read against bytes
 * needed, and the queue.
 */
#include <inttypes.h>
#include <string.h>

#include "rlperf.h"

struct ckpt_report {
	const struct rp_conf *c;
	const rl_ckpt *ck;
	const rl_plan *plan;
	const rl_load_stats *s;
	rl_plan_stats ps;
	double mean_req, peak_reads;
};

static void ckpt_json(FILE *f, const struct ckpt_report *r)
{
	const rl_load_stats *s = r->s;

	fprintf(f, "{\n  \"rlperf version\" : \"%s\",\n  \"checkpoint\" : {\n"
		"    \"path\" : ", RP_VERSION);
	rp_json_str(f, r->c->checkpoint);
	fprintf(f, ",\n    \"files\" : %zu,\n    \"tensors\" : %zu,\n"
		"    \"process\" : %d,\n    \"processes\" : %u,\n"
		"    \"devices\" : %u,\n    \"backend\" : \"%s\",\n"
		"    \"plan_s\" : %.6f,\n    \"read_s\" : %.6f,\n"
		"    \"scatter_s\" : %.6f,\n    \"total_s\" : %.6f,\n"
		"    \"bytes_needed\" : %" PRIu64 ",\n    \"bytes_read\" : %" PRIu64 ",\n"
		"    \"bytes_zero_copy\" : %" PRIu64 ",\n    \"requests\" : %" PRIu64 ",\n"
		"    \"blocks\" : %" PRIu64 ",\n    \"retries\" : %" PRIu64 ",\n"
		"    \"queue_depth\" : %u,\n    \"peak_inflight\" : %" PRIu64 ",\n"
		"    \"peak_reads_inflight\" : %.2f,\n    \"gbps\" : %.4f,\n"
		"    \"direct_io\" : %d,\n    \"registered_buffers\" : %u,\n"
		"    \"registered_files\" : %d,\n    \"fallbacks\" : ",
		rl_ckpt_num_files(r->ck), rl_ckpt_num_tensors(r->ck), r->c->process,
		rl_plan_num_processes(r->plan), rl_plan_num_devices(r->plan),
		rl_backend_name(s->backend), s->plan_seconds, s->read_seconds,
		s->scatter_seconds, s->total_seconds, s->bytes_needed, s->bytes_read,
		s->bytes_direct, s->requests, r->ps.blocks, s->retries, s->queue_depth,
		s->peak_inflight, r->peak_reads, s->gbps, s->direct_io,
		s->registered_buffers, s->registered_files);
	rp_json_str(f, s->fallbacks);
	fprintf(f, "\n  }\n}\n");
}

static void ckpt_normal(FILE *f, const struct ckpt_report *r)
{
	const rl_load_stats *s = r->s;
	double over = s->bytes_needed ? (double)s->bytes_read / s->bytes_needed : 0.0;

	fprintf(f, "checkpoint : %s (%zu files, %zu tensors), process %d of %u, %u devices\n",
		r->c->checkpoint, rl_ckpt_num_files(r->ck), rl_ckpt_num_tensors(r->ck),
		r->c->process, rl_plan_num_processes(r->plan), rl_plan_num_devices(r->plan));
	fprintf(f, "engine     : %s, %s, %u buffers (%u registered), files %s\n",
		rl_backend_name(s->backend), s->direct_io ? "O_DIRECT" : "buffered",
		s->buffers, s->registered_buffers,
		s->registered_files ? "registered" : "not registered");
	if (s->fallbacks[0])
		fprintf(f, "fallbacks  : %s\n", s->fallbacks);
	fprintf(f, "plan       : %9.3f ms  (%" PRIu64 " blocks, %" PRIu64 " requests, "
		"mean %.0f KiB)\n", s->plan_seconds * 1e3, r->ps.blocks, r->ps.requests,
		r->mean_req / 1024);
	fprintf(f, "read       : %9.3f ms  (first submit to last completion)\n",
		s->read_seconds * 1e3);
	fprintf(f, "scatter    : %9.3f ms  (completion thread copying)\n",
		s->scatter_seconds * 1e3);
	fprintf(f, "total      : %9.3f ms\n", s->total_seconds * 1e3);
	fprintf(f, "bytes      : read %" PRIu64 ", needed %" PRIu64 " (read/needed %.3f), "
		"direct %" PRIu64 "\n", s->bytes_read, s->bytes_needed, over, s->bytes_direct);
	fprintf(f, "queue      : depth %u, peak in flight %" PRIu64 " bytes (~%.1f reads), "
		"%" PRIu64 " retries\n", s->queue_depth, s->peak_inflight, r->peak_reads,
		s->retries);
	fprintf(f, "speed      : %.3f GB/s read, %.3f GB/s overall\n", s->gbps,
		s->total_seconds > 0 ? s->bytes_read / 1e9 / s->total_seconds : 0.0);
}

static int set_param(rl_loader *ld, rl_loader_param p, int64_t v, const char *opt)
{
	int rc = rl_loader_set(ld, p, v);

	if (rc < 0)
		fprintf(stderr, "rlperf: --%s=%lld: %s\n", opt, (long long)v,
			rl_loader_errmsg(ld));
	return rc;
}

/* The options checkpoint mode passes on: only those given. */
static int set_params(rl_loader *ld, const struct rp_job *g)
{
	if ((g->set >> RP_O_IOENGINE & 1) &&
	    set_param(ld, RL_OPT_BACKEND, g->engine, "ioengine") < 0)
		return -1;
	if ((g->set >> RP_O_IODEPTH & 1) &&
	    set_param(ld, RL_OPT_QUEUE_DEPTH, g->iodepth, "iodepth") < 0)
		return -1;
	if ((g->set >> RP_O_BS & 1) &&
	    set_param(ld, RL_OPT_REQUEST_BYTES, (int64_t)g->bs, "bs") < 0)
		return -1;
	if ((g->set >> RP_O_DIRECT & 1) &&
	    set_param(ld, RL_OPT_DIRECT, g->direct, "direct") < 0)
		return -1;
	return 0;
}

static int load_spec(const struct rp_conf *c, rl_spec **spec)
{
	int rc;

	if (!c->sharding)
		return 0;
	*spec = rl_spec_create();
	if (!*spec) {
		fprintf(stderr, "rlperf: out of memory\n");
		return -1;
	}
	rc = rl_spec_load(*spec, c->sharding);
	if (rc < 0)
		fprintf(stderr, "rlperf: %s: %s\n", c->sharding, rl_spec_errmsg(*spec)[0] ?
			rl_spec_errmsg(*spec) : rl_strerror(rc));
	return rc < 0 ? -1 : 0;
}

static void report(const struct rp_conf *c, FILE *f, const rl_ckpt *ck,
		   const rl_plan *plan, const rl_load_stats *s)
{
	struct ckpt_report r = { .c = c, .ck = ck, .plan = plan, .s = s };

	rl_plan_get_stats(plan, c->process, &r.ps);
	r.mean_req = r.ps.requests ? (double)r.ps.read_bytes / r.ps.requests : 0.0;
	r.peak_reads = r.mean_req > 0 ? s->peak_inflight / r.mean_req : 0.0;
	if (c->format != RP_FMT_NORMAL)
		ckpt_json(f, &r);
	else
		ckpt_normal(f, &r);
}

int rp_checkpoint(const struct rp_conf *c, FILE *f)
{
	rl_ckpt *ck = rl_ckpt_create();
	rl_loader *ld = rl_loader_create();
	rl_spec *spec = NULL;
	rl_plan *plan = NULL;
	rl_load_stats st = { .size = sizeof(st) };
	int rc, status = 1;

	if (!ck || !ld) {
		fprintf(stderr, "rlperf: out of memory\n");
		goto out;
	}
	rc = rl_ckpt_open(ck, c->checkpoint);
	if (rc < 0) {
		fprintf(stderr, "rlperf: %s\n", rl_ckpt_errmsg(ck));
		goto out;
	}
	if (load_spec(c, &spec) || set_params(ld, &c->global))
		goto out;
	rc = rl_loader_load(ld, ck, spec, c->process, &plan);
	if (rc < 0) {
		fprintf(stderr, "rlperf: %s\n", rl_loader_errmsg(ld)[0] ?
			rl_loader_errmsg(ld) : rl_strerror(rc));
		goto out;
	}
	if (rl_loader_get_stats(ld, &st) < 0) {
		fprintf(stderr, "rlperf: no statistics: %s\n", rl_loader_errmsg(ld));
		goto out;
	}
	report(c, f, ck, plan, &st);
	status = 0;
out:
	rl_plan_destroy(plan);
	rl_loader_destroy(ld);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
	return status;
}
