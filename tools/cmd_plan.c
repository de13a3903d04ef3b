/*
 * cmd_plan.c - `ringload plan PATH [--sharding SPEC] [--process P] [--json]`:
 * builds the plan of one process and prints its statistics (a table with
 * the over-read, or JSON). --all-processes adds every other process and the
 * cluster total, which at scale costs several times the plan itself
 * (RL_PLAN_ALL_STATS). With --read-once, replicated boxes are read by one
 * process each and the planned process's broadcasts are counted.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "opts.h"
#include "plan_cluster.h"

#define PROG "ringload plan"

struct plan_args {
	const char *path, *sharding;
	int64_t process, min_gap, ratio_milli, chunk;  /* -1: the library's default */
	int json, read_once, all_processes;
};

static const char about[] =
	"Plans the checkpoint at PATH for one process of a sharding and prints the\n"
	"plan's statistics: devices, needed and read bytes, over-read, blocks, read\n"
	"requests, files. Exit status: 0, 1 bad checkpoint/spec/plan, 2 usage.\n";

static int parse_plan_args(int argc, char **argv, struct plan_args *a)
{
	const struct opt opts[] = {
		{ .name = "sharding", .kind = OPT_STRING, .dst = &a->sharding,
		  .metavar = "SPEC",
		  .help = "sharding spec file (JSON); none: every tensor whole on device 0" },
		{ .name = "process", .kind = OPT_INT, .dst = &a->process, .metavar = "P",
		  .help = "the process to plan (default 0)", .bounds = cli_plan_bounds,
		  .param = RL_PLAN_PROCESS },
		{ .name = "all-processes", .kind = OPT_FLAG, .dst = &a->all_processes,
		  .help = "also every other process and the cluster total (slower)" },
		{ .name = "json", .kind = OPT_FLAG, .dst = &a->json,
		  .help = "print JSON instead of a table" },
		{ .name = "min-gap", .kind = OPT_SIZE, .dst = &a->min_gap, .metavar = "SIZE",
		  .help = "coalesce gaps up to SIZE (default 4K)", .bounds = cli_plan_bounds,
		  .param = RL_PLAN_MIN_GAP },
		{ .name = "ratio", .kind = OPT_MILLI, .dst = &a->ratio_milli, .metavar = "R",
		  .help = "coalesce while span <= R x needed (default automatic)", .lo = 1000,
		  .hi = 0, .bounds = cli_plan_bounds, .param = RL_PLAN_RATIO_MILLI },
		{ .name = "chunk", .kind = OPT_SIZE, .dst = &a->chunk, .metavar = "SIZE",
		  .help = "bytes per read request at most", .bounds = cli_plan_bounds,
		  .param = RL_PLAN_CHUNK_BYTES },
		{ .name = "read-once", .kind = OPT_FLAG, .dst = &a->read_once,
		  .help = "read replicated data once in the cluster and broadcast it" },
		{ NULL },
	};
	const struct opt_cmd cmd = { PROG, "PATH", about, opts, 1, 1, &a->path };

	memset(a, 0, sizeof(*a));
	a->min_gap = a->ratio_milli = a->chunk = -1;
	return opts_parse(&cmd, argc, argv);
}

/* The parameters the options give (ranges were checked while parsing). */
static int configure(rl_plan *p, const struct plan_args *a)
{
	const struct {
		rl_plan_param param;
		int64_t value;
	} set[] = {
		{ RL_PLAN_PROCESS, a->process },
		{ RL_PLAN_ALL_STATS, a->all_processes },
		{ RL_PLAN_READ_ONCE, a->read_once },
		{ RL_PLAN_MIN_GAP, a->min_gap },
		{ RL_PLAN_RATIO_MILLI, a->ratio_milli },
		{ RL_PLAN_CHUNK_BYTES, a->chunk },
	};

	for (size_t i = 0; i < sizeof(set) / sizeof(set[0]); i++) {
		if (set[i].value >= 0 && rl_plan_set(p, set[i].param, set[i].value) < 0) {
			fprintf(stderr, "%s: %s\n", PROG, rl_plan_errmsg(p));
			return -1;
		}
	}
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

/* The processes shown: the planned one, or every one with --all-processes. */
static void shown_processes(const rl_plan *plan, const struct plan_args *a, unsigned *first,
			    unsigned *end)
{
	*first = a->all_processes ? 0 : (unsigned)a->process;
	*end = a->all_processes ? rl_plan_num_processes(plan) : (unsigned)a->process + 1;
}

/* The planned process's staging: the bytes a whole-staging load maps. */
static uint64_t staging_bytes(const rl_plan *plan)
{
	uint64_t sum = 0;
	rl_device_info d;

	for (unsigned i = 0; i < rl_plan_num_devices(plan); i++)
		if (rl_plan_device(plan, i, &d) == 0)
			sum += d.staging_bytes;
	return sum;
}

/* The planned process's devices: what each holds. */
static void print_devices_json(const rl_plan *plan)
{
	unsigned n = rl_plan_num_devices(plan);
	rl_device_info di;

	printf(",\n\"devices\":[");
	for (unsigned d = 0; d < n && rl_plan_device(plan, d, &di) == 0; d++)
		printf("%s{\"id\":%" PRIu32 ",\"shards\":%zu,\"staging_bytes\":%" PRIu64 "}",
		       d ? "," : "", di.id, di.nshards, di.staging_bytes);
	printf("]");
}

static void print_devices_text(const rl_plan *plan, const struct plan_args *a)
{
	unsigned n = rl_plan_num_devices(plan);
	rl_device_info di;

	printf("\ndevices of process %" PRId64 ":\n%-9s %7s %16s\n", a->process, "device",
	       "shards", "staging_bytes");
	for (unsigned d = 0; d < n && rl_plan_device(plan, d, &di) == 0; d++)
		printf("%-9" PRIu32 " %7zu %16" PRIu64 "\n", di.id, di.nshards, di.staging_bytes);
}

static void print_json(const rl_plan *plan, const struct plan_args *a)
{
	rl_plan_stats s;
	unsigned first, end;

	shown_processes(plan, a, &first, &end);
	printf("{\"num_processes\":%u,\"processes\":[", rl_plan_num_processes(plan));
	for (unsigned p = first; p < end; p++) {
		rl_plan_get_stats(plan, (int)p, &s);
		printf("%s\n", p > first ? "," : "");
		print_stats_json((int)p, &s);
	}
	printf("]");
	/* The total exists with --all-processes, or when there is one process. */
	if (rl_plan_get_stats(plan, RL_TOTAL, &s) == 0) {
		printf(",\n\"total\":");
		print_stats_json(-1, &s);
	}
	if (a->read_once)
		printf(",\n\"broadcasts\":%zu", rl_plan_num_broadcasts(plan));
	printf(",\n\"staging_bytes\":%" PRIu64, staging_bytes(plan));
	print_devices_json(plan);
	plan_cluster_json(plan);
	printf("}\n");
}

static void print_table(const rl_plan *plan, const struct plan_args *a)
{
	rl_plan_stats s;
	unsigned first, end;
	char label[16];

	shown_processes(plan, a, &first, &end);
	printf("%-9s %7s %16s %16s %7s %9s %9s %6s\n", "process", "devices", "needed_bytes",
	       "read_bytes", "over", "blocks", "requests", "files");
	for (unsigned p = first; p < end; p++) {
		rl_plan_get_stats(plan, (int)p, &s);
		snprintf(label, sizeof(label), "%u", p);
		print_row(label, &s);
	}
	if (rl_plan_get_stats(plan, RL_TOTAL, &s) == 0 && end - first > 1)
		print_row("total", &s);
	plan_cluster_text(plan);
	if (!a->all_processes && rl_plan_num_processes(plan) > 1)
		printf("(process %" PRId64 " of %u; --all-processes shows every one)\n", a->process,
		       rl_plan_num_processes(plan));
	if (rl_plan_num_broadcasts(plan))
		printf("process %" PRId64 " takes part in %zu broadcasts\n", a->process,
		       rl_plan_num_broadcasts(plan));
	printf("staging of process %" PRId64 ": %" PRIu64 " bytes (whole staging)\n", a->process,
	       staging_bytes(plan));
	print_devices_text(plan, a);
}

/*
 * Bytes the planned process reads with no coalescing across gaps (min gap
 * 0, ratio 1): what O_DIRECT alignment alone adds to the needed bytes.
 */
static int aligned_only_bytes(const rl_ckpt *ck, const rl_spec *spec, const struct plan_args *a,
			      uint64_t *out)
{
	rl_plan *p = rl_plan_create();
	rl_plan_stats st;
	int ret = -1;

	if (p && !rl_plan_set(p, RL_PLAN_PROCESS, a->process) &&
	    !rl_plan_set(p, RL_PLAN_ALL_STATS, 0) &&
	    !rl_plan_set(p, RL_PLAN_READ_ONCE, a->read_once) &&
	    !rl_plan_set(p, RL_PLAN_STATS_ONLY, 1) &&
	    !rl_plan_set(p, RL_PLAN_MIN_GAP, 0) && !rl_plan_set(p, RL_PLAN_RATIO_MILLI, 1000) &&
	    !rl_plan_build(p, ck, spec) && !rl_plan_get_stats(p, (int)a->process, &st)) {
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
static void warn_over_read(const rl_ckpt *ck, const rl_spec *spec, const struct plan_args *a,
			   const rl_plan_stats *own)
{
	uint64_t aligned, extra = own->read_bytes - own->needed_bytes;
	double over = (double)own->read_bytes / (double)own->needed_bytes;

	if (aligned_only_bytes(ck, spec, a, &aligned) || aligned < own->needed_bytes) {
		fprintf(stderr, "%s: warning: reads %.2fx the needed bytes under the automatic "
			"ratio\n", PROG, over);
		return;
	}
	if (aligned > own->read_bytes)  /* coalescing saved more than it cost */
		aligned = own->read_bytes;
	fprintf(stderr,
		"%s: warning: reads %.2fx the needed bytes under the automatic ratio: of %" PRIu64
		" extra bytes, %" PRIu64 " are O_DIRECT alignment (pieces widened to aligned "
		"blocks) and %" PRIu64 " are gaps coalesced into spans\n",
		PROG, over, extra, aligned - own->needed_bytes, own->read_bytes - aligned);
}

int cmd_plan(int argc, char **argv)
{
	struct plan_args a;
	rl_ckpt *ck = NULL;
	rl_spec *spec = NULL;
	rl_plan *plan = NULL;
	rl_plan_stats own;
	int parsed = parse_plan_args(argc, argv, &a), rc = 1;

	if (parsed != OPTS_OK)
		return opts_exit_status(parsed);
	if (cli_open_ckpt(PROG, a.path, &ck) || cli_load_spec(PROG, a.sharding, &spec))
		goto out;
	plan = rl_plan_create();
	if (!plan || configure(plan, &a))
		goto out;
	if (rl_plan_build(plan, ck, spec) < 0) {
		fprintf(stderr, "%s: %s\n", PROG, rl_plan_errmsg(plan));
		goto out;
	}
	if (a.json)
		print_json(plan, &a);
	else
		print_table(plan, &a);
	rl_plan_get_stats(plan, (int)a.process, &own);
	rc = fflush(stdout) || ferror(stdout) ? 1 : 0;
	/* The warning replans: without this plan in memory, not beside it
	 * (416 instead of 231 MiB at 100k tensors x 256 devices). */
	rl_plan_destroy(plan);
	plan = NULL;
	if (a.ratio_milli < 0 && own.needed_bytes &&
	    (double)own.read_bytes >= 1.5 * (double)own.needed_bytes)
		warn_over_read(ck, spec, &a, &own);
	goto done;
out:
	if (!plan && ck && (!a.sharding || spec))
		fprintf(stderr, "%s: out of memory\n", PROG);
done:
	rl_plan_destroy(plan);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
	return rc;
}
