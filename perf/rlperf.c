/*
 * rlperf.c - a fio-like benchmark running on ringload's own engine, so that
 * "what can this drive do" (fio) and "what does ringload get" (rlperf) are
 * measured the same way. Raw mode (--filename) drives the engine directly
 * through engine/engine.h; checkpoint mode (--checkpoint) loads through the
 * public API only and reports the phases of a load.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rlperf.h"

static const struct rp_engine_ops real_engine = {
	.opts_default = eng_opts_default,
	.create = eng_create,
	.run = eng_run,
	.destroy = eng_destroy,
};

static void on_sigint(int sig)
{
	(void)sig;
	rp_stop();  /* jobs stop submitting, drain, and the report follows */
}

/* Size of a regular file or a block device; 0 or -errno. */
static int file_size(const char *path, uint64_t *size)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		rc = -errno;
	} else if (S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, size))
			rc = -errno;
	} else if (S_ISREG(st.st_mode)) {
		*size = (uint64_t)st.st_size;
	} else {
		rc = -EINVAL;
	}
	close(fd);
	return rc;
}

static int run_raw(const struct rp_opts *o)
{
	struct rp_result *r;
	uint64_t size = 0;
	int rc;

	rc = file_size(o->filename, &size);
	if (rc < 0) {
		fprintf(stderr, "rlperf: %s: %s\n", o->filename,
			rc == -EINVAL ? "not a regular file or block device" :
			rl_strerror(rc));
		return 1;
	}
	r = rl_malloc(sizeof(*r));
	if (!r) {
		fprintf(stderr, "rlperf: out of memory\n");
		return 1;
	}
	rc = rp_run(o, size, &real_engine, r);
	if (rc < 0 && !r->ios) {
		fprintf(stderr, "%s\n", r->errmsg);
		rl_free(r);
		return 1;
	}
	if (rc < 0)
		fprintf(stderr, "%s\n", r->errmsg);
	if (o->format == RP_FMT_JSON)
		rp_print_json(stdout, o, r);
	else
		rp_print_normal(stdout, o, r);
	rl_free(r);
	return rc < 0 ? 1 : 0;
}

/* ---------------------------------------------------------------- */
/* Checkpoint mode: the public API only                              */
/* ---------------------------------------------------------------- */

static int set_param(rl_loader *ld, rl_loader_param p, int64_t v, const char *opt)
{
	int rc = rl_loader_set(ld, p, v);

	if (rc < 0)
		fprintf(stderr, "rlperf: --%s=%lld: %s\n", opt, (long long)v,
			rl_loader_errmsg(ld));
	return rc;
}

static void print_ckpt(const struct rp_opts *o, const rl_ckpt *ck,
		       const rl_plan *plan, const rl_load_stats *s)
{
	rl_plan_stats ps;
	double mean_req, gb = s->bytes_read / 1e9;
	double over = s->bytes_needed ? (double)s->bytes_read / s->bytes_needed : 0.0;
	double peak_reads;
	unsigned nproc = rl_plan_num_processes(plan);

	memset(&ps, 0, sizeof(ps));
	rl_plan_get_stats(plan, o->process, &ps);
	mean_req = ps.requests ? (double)ps.read_bytes / ps.requests : 0.0;
	peak_reads = mean_req > 0 ? s->peak_inflight / mean_req : 0.0;

	if (o->format == RP_FMT_JSON) {
		printf("{\n  \"rlperf version\" : \"%s\",\n  \"checkpoint\" : {\n"
		       "    \"path\" : ", RP_VERSION);
		rp_json_str(stdout, o->checkpoint);
		printf(",\n    \"files\" : %zu,\n    \"tensors\" : %zu,\n"
		       "    \"process\" : %d,\n    \"processes\" : %u,\n"
		       "    \"devices\" : %u,\n    \"backend\" : \"%s\",\n"
		       "    \"plan_s\" : %.6f,\n    \"read_s\" : %.6f,\n"
		       "    \"scatter_s\" : %.6f,\n    \"total_s\" : %.6f,\n"
		       "    \"bytes_needed\" : %" PRIu64 ",\n    \"bytes_read\" : %" PRIu64 ",\n"
		       "    \"bytes_direct\" : %" PRIu64 ",\n    \"requests\" : %" PRIu64 ",\n"
		       "    \"blocks\" : %" PRIu64 ",\n    \"retries\" : %" PRIu64 ",\n"
		       "    \"queue_depth\" : %u,\n    \"peak_inflight\" : %" PRIu64 ",\n"
		       "    \"peak_reads_inflight\" : %.2f,\n    \"gbps\" : %.4f,\n"
		       "    \"direct_io\" : %d,\n    \"registered_buffers\" : %u,\n"
		       "    \"registered_files\" : %d,\n    \"fallbacks\" : ",
		       rl_ckpt_num_files(ck), rl_ckpt_num_tensors(ck), o->process, nproc,
		       rl_plan_num_devices(plan), rp_backend_name(s->backend),
		       s->plan_seconds, s->read_seconds, s->scatter_seconds,
		       s->total_seconds, s->bytes_needed, s->bytes_read, s->bytes_direct,
		       s->requests, ps.blocks, s->retries, s->queue_depth,
		       s->peak_inflight, peak_reads, s->gbps, s->direct_io,
		       s->registered_buffers, s->registered_files);
		rp_json_str(stdout, s->fallbacks);
		printf("\n  }\n}\n");
		return;
	}
	printf("checkpoint : %s (%zu files, %zu tensors), process %d of %u, %u devices\n",
	       o->checkpoint, rl_ckpt_num_files(ck), rl_ckpt_num_tensors(ck),
	       o->process, nproc, rl_plan_num_devices(plan));
	printf("engine     : %s, %s, %u buffers (%u registered), files %s\n",
	       rp_backend_name(s->backend), s->direct_io ? "O_DIRECT" : "buffered",
	       s->buffers, s->registered_buffers,
	       s->registered_files ? "registered" : "not registered");
	if (s->fallbacks[0])
		printf("fallbacks  : %s\n", s->fallbacks);
	printf("plan       : %9.3f ms  (%" PRIu64 " blocks, %" PRIu64 " requests, "
	       "mean %.0f KiB)\n", s->plan_seconds * 1e3, ps.blocks, ps.requests,
	       mean_req / 1024);
	printf("read       : %9.3f ms  (first submit to last completion)\n",
	       s->read_seconds * 1e3);
	printf("scatter    : %9.3f ms  (completion thread copying)\n",
	       s->scatter_seconds * 1e3);
	printf("total      : %9.3f ms\n", s->total_seconds * 1e3);
	printf("bytes      : read %" PRIu64 ", needed %" PRIu64 " (read/needed %.3f), "
	       "direct %" PRIu64 "\n", s->bytes_read, s->bytes_needed, over,
	       s->bytes_direct);
	printf("queue      : depth %u, peak in flight %" PRIu64 " bytes (~%.1f reads), "
	       "%" PRIu64 " retries\n", s->queue_depth, s->peak_inflight, peak_reads,
	       s->retries);
	printf("speed      : %.3f GB/s read, %.3f GB/s overall\n", s->gbps,
	       s->total_seconds > 0 ? gb / s->total_seconds : 0.0);
}

static int run_checkpoint(const struct rp_opts *o)
{
	rl_ckpt *ck;
	rl_spec *spec = NULL;
	rl_loader *ld;
	rl_plan *plan = NULL;
	rl_load_stats st;
	int rc, status = 1;

	ck = rl_ckpt_create();
	ld = rl_loader_create();
	if (!ck || !ld) {
		fprintf(stderr, "rlperf: out of memory\n");
		goto out;
	}
	rc = rl_ckpt_open(ck, o->checkpoint);
	if (rc < 0) {
		fprintf(stderr, "rlperf: %s\n", rl_ckpt_errmsg(ck));
		goto out;
	}
	if (o->sharding) {
		spec = rl_spec_create();
		if (!spec) {
			fprintf(stderr, "rlperf: out of memory\n");
			goto out;
		}
		rc = rl_spec_load(spec, o->sharding);
		if (rc < 0) {
			fprintf(stderr, "rlperf: %s: %s\n", o->sharding,
				rl_spec_errmsg(spec)[0] ? rl_spec_errmsg(spec) :
				rl_strerror(rc));
			goto out;
		}
	}
	if ((o->engine_set && set_param(ld, RL_OPT_BACKEND, o->engine, "engine") < 0) ||
	    (o->iodepth_set && set_param(ld, RL_OPT_QUEUE_DEPTH, o->iodepth, "iodepth") < 0) ||
	    (o->bs_set && set_param(ld, RL_OPT_REQUEST_BYTES, (int64_t)o->bs, "bs") < 0) ||
	    (o->direct_set && set_param(ld, RL_OPT_DIRECT, o->direct, "direct") < 0))
		goto out;
	rc = rl_loader_load(ld, ck, spec, o->process, &plan);
	if (rc < 0) {
		fprintf(stderr, "rlperf: %s\n", rl_loader_errmsg(ld)[0] ?
			rl_loader_errmsg(ld) : rl_strerror(rc));
		goto out;
	}
	if (rl_loader_get_stats(ld, &st) < 0) {
		fprintf(stderr, "rlperf: no statistics: %s\n", rl_loader_errmsg(ld));
		goto out;
	}
	print_ckpt(o, ck, plan, &st);
	status = 0;
out:
	rl_plan_destroy(plan);
	rl_loader_destroy(ld);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
	return status;
}

int main(int argc, char **argv)
{
	struct rp_opts o;
	struct sigaction sa;
	char err[512];
	int rc = rp_parse_args(argc, argv, &o, err, sizeof(err));

	if (rc == RP_PARSE_ERROR) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	if (rc == RP_PARSE_HELP) {
		rp_usage(stdout);
		return 0;
	}
	if (rc == RP_PARSE_VERSION) {
		printf("%s\n", RP_VERSION);
		return 0;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	return o.checkpoint ? run_checkpoint(&o) : run_raw(&o);
}
