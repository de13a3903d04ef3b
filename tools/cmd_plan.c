/*
 * cmd_plan.c - `ringload plan PATH [--sharding SPEC] [--process P] [--json]`:
 * builds the plan of one process and prints the statistics of every
 * process (a table with the total and the over-read, or JSON). With
 * --read-once, replicated boxes are read by one process each and the
 * planned process's broadcasts are counted.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringload.h"
#include "cli.h"
#include "plan_cluster.h"

static void usage(void)
{
	fprintf(stderr,
		"usage: ringload plan PATH [--sharding SPEC] [--process P] [--json]\n"
		"                     [--min-gap BYTES] [--ratio R] [--chunk BYTES] [--read-once]\n");
}

static int parse_num(const char *s, double max, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (!*s || *end || !(v >= 0) || v > max)
		return -1;
	*out = v;
	return 0;
}

static void print_stats_json(int p, const rl_plan_stats *s)
{
	if (p >= 0)
		printf("{\"process\":%d,", p);
	else
		printf("{");
	printf("\"devices\":%" PRIu64 ",\"needed_bytes\":%" PRIu64 ",\"read_bytes\":%" PRIu64
	       ",\"blocks\":%" PRIu64 ",\"requests\":%" PRIu64 ",\"files_opened\":%" PRIu64 "}",
	       s->devices, s->needed_bytes, s->read_bytes, s->blocks, s->requests,
	       s->files_opened);
}

static void print_row(const char *label, const rl_plan_stats *s)
{
	printf("%-9s %7" PRIu64 " %16" PRIu64 " %16" PRIu64 " %7.3f %9" PRIu64 " %9" PRIu64
	       " %6" PRIu64 "\n",
	       label, s->devices, s->needed_bytes, s->read_bytes,
	       s->needed_bytes ? (double)s->read_bytes / s->needed_bytes : 1.0, s->blocks,
	       s->requests, s->files_opened);
}

/*
 * Bytes read by the same plan with no coalescing across gaps (min gap 0,
 * ratio 1): what O_DIRECT alignment alone adds to the needed bytes.
 */
static int aligned_only_bytes(const rl_ckpt *ck, const rl_spec *spec, int process,
			      int read_once, uint64_t *out)
{
	rl_plan *p = rl_plan_create();
	rl_plan_stats st;
	int ret = -1;

	if (p && !rl_plan_set(p, RL_PLAN_PROCESS, process) &&
	    !rl_plan_set(p, RL_PLAN_READ_ONCE, read_once) &&
	    !rl_plan_set(p, RL_PLAN_MIN_GAP, 0) && !rl_plan_set(p, RL_PLAN_RATIO_MILLI, 1000) &&
	    !rl_plan_build(p, ck, spec) && !rl_plan_get_stats(p, RL_TOTAL, &st)) {
		*out = st.read_bytes;
		ret = 0;
	}
	rl_plan_destroy(p);
	return ret;
}

/*
 * Over-read of 1.5x or more under the automatic ratio: says how much of it
 * is alignment (a small tensor read as a whole aligned block) and how much
 * coalescing (gaps read as part of spans), by replanning without coalescing.
 */
static void warn_over_read(const rl_ckpt *ck, const rl_spec *spec, int process,
			   int read_once, const rl_plan_stats *total)
{
	uint64_t aligned, extra = total->read_bytes - total->needed_bytes;
	double over = (double)total->read_bytes / (double)total->needed_bytes;

	if (aligned_only_bytes(ck, spec, process, read_once, &aligned) ||
	    aligned < total->needed_bytes) {
		fprintf(stderr, "ringload plan: warning: reads %.2fx the needed bytes under the "
			"automatic ratio\n", over);
		return;
	}
	if (aligned > total->read_bytes)  /* coalescing saved more than it cost */
		aligned = total->read_bytes;
	fprintf(stderr,
		"ringload plan: warning: reads %.2fx the needed bytes under the automatic ratio: "
		"of %" PRIu64 " extra bytes, %" PRIu64 " are O_DIRECT alignment (pieces widened "
		"to aligned blocks) and %" PRIu64 " are gaps coalesced into spans\n",
		over, extra, aligned - total->needed_bytes, total->read_bytes - aligned);
}

int cmd_plan(int argc, char **argv)
{
	const char *path = NULL, *spec_path = NULL;
	rl_ckpt *ck = NULL;
	rl_spec *spec = NULL;
	rl_plan *plan = NULL;
	rl_plan_stats total;
	int json = 0, rc = 1, ret, auto_ratio = 1, plan_process = 0, read_once = 0;
	unsigned nproc;
	double v;

	plan = rl_plan_create();
	if (!plan) {
		fprintf(stderr, "ringload plan: out of memory\n");
		return 1;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		rl_plan_param param = 0;
		double max = 0, scale = 1;
		int is_proc = 0;

		if (!strcmp(a, "--json")) {
			json = 1;
			continue;
		}
		if (!strcmp(a, "--read-once")) {
			rl_plan_set(plan, RL_PLAN_READ_ONCE, 1);
			read_once = 1;
			continue;
		}
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage();
			rc = 0;
			goto out;
		}
		if (a[0] == '-' && a[1] && i + 1 >= argc) {
			fprintf(stderr, "ringload plan: %s needs a value\n", a);
			usage();
			rc = 2;
			goto out;
		}
		if (!strcmp(a, "--sharding")) {
			spec_path = argv[++i];
			continue;
		}
		if (!strcmp(a, "--process"))
			param = RL_PLAN_PROCESS, max = 1 << 24, is_proc = 1;
		else if (!strcmp(a, "--min-gap"))
			param = RL_PLAN_MIN_GAP, max = 1ull << 40;
		else if (!strcmp(a, "--ratio"))
			param = RL_PLAN_RATIO_MILLI, max = 1e9, scale = 1000, auto_ratio = 0;
		else if (!strcmp(a, "--chunk"))
			param = RL_PLAN_CHUNK_BYTES, max = 1 << 30;
		if (param) {
			if (parse_num(argv[++i], max, &v) ||
			    rl_plan_set(plan, param, (int64_t)(v * scale + 0.5))) {
				fprintf(stderr, "ringload plan: bad value for %s: %s\n", a, argv[i]);
				rc = 2;
				goto out;
			}
			if (is_proc)
				plan_process = (int)v;
			continue;
		}
		if (a[0] == '-' || path) {
			fprintf(stderr, "ringload plan: unexpected argument '%s'\n", a);
			usage();
			rc = 2;
			goto out;
		}
		path = a;
	}
	if (!path) {
		usage();
		rc = 2;
		goto out;
	}
	ck = rl_ckpt_create();
	if (!ck || (ret = rl_ckpt_open(ck, path)) < 0) {
		fprintf(stderr, "ringload plan: %s\n", ck ? rl_ckpt_errmsg(ck) : "out of memory");
		goto out;
	}
	if (spec_path) {
		spec = rl_spec_create();
		if (!spec || (ret = rl_spec_load(spec, spec_path)) < 0) {
			fprintf(stderr, "ringload plan: %s\n",
				spec ? rl_spec_errmsg(spec) : "out of memory");
			goto out;
		}
	}
	if ((ret = rl_plan_build(plan, ck, spec)) < 0) {
		fprintf(stderr, "ringload plan: %s\n", rl_plan_errmsg(plan));
		goto out;
	}
	nproc = rl_plan_num_processes(plan);
	rl_plan_get_stats(plan, RL_TOTAL, &total);
	if (json) {
		printf("{\"processes\":[");
		for (unsigned p = 0; p < nproc; p++) {
			rl_plan_stats s;

			rl_plan_get_stats(plan, (int)p, &s);
			printf("%s\n", p ? "," : "");
			print_stats_json((int)p, &s);
		}
		printf("],\n\"total\":");
		print_stats_json(-1, &total);
		plan_cluster_json(plan);
		printf("}\n");
	} else {
		printf("%-9s %7s %16s %16s %7s %9s %9s %6s\n", "process", "devices", "needed_bytes",
		       "read_bytes", "over", "blocks", "requests", "files");
		for (unsigned p = 0; p < nproc; p++) {
			rl_plan_stats s;
			char label[16];

			rl_plan_get_stats(plan, (int)p, &s);
			snprintf(label, sizeof(label), "%u", p);
			print_row(label, &s);
		}
		print_row("total", &total);
		plan_cluster_text(plan);
		if (rl_plan_num_broadcasts(plan))
			printf("process %d takes part in %zu broadcasts\n", plan_process,
			       rl_plan_num_broadcasts(plan));
	}
	if (auto_ratio && total.needed_bytes &&
	    (double)total.read_bytes >= 1.5 * (double)total.needed_bytes)
		warn_over_read(ck, spec, plan_process, read_once, &total);
	rc = 0;
out:
	rl_plan_destroy(plan);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
	return rc;
}
