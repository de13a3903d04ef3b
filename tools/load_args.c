/*
 * load_args.c - the options of `ringload load` (one table, for the
 * command and for the MPI rank program that --mpi runs) and the loader
 * they configure.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "load_args.h"
#include "opts.h"
#include "sha256sums.h"

#define PROG "ringload load"

const char *const load_dtype_names[] = { "F32", "F16", "BF16", NULL };

/* Options that only mean something with --mpi (or --out), or not with it. */
static int mpi_rules(const struct load_args *a)
{
	const char *alone = a->read_once ? "--read-once" : a->local_files ? "--local-files" :
			    a->mpi_timeout ? "--mpi-timeout" : NULL;

	if (a->force && !a->out) {
		fprintf(stderr, "%s: --force replaces the DIR of --out: it needs --out\n", PROG);
		return OPTS_USAGE;
	}
	if (!a->mpi && alone) {
		fprintf(stderr, "%s: %s needs --mpi\n", PROG, alone);
		return OPTS_USAGE;
	}
	if (a->mpi && a->process >= 0) {
		fprintf(stderr, "%s: --process with --mpi: each rank loads its own process (its rank)\n",
			PROG);
		return OPTS_USAGE;
	}
	if (a->mpi && a->staging == RL_STAGING_CALLER) {
		fprintf(stderr, "%s: --staging caller with --mpi: the ranks plan inside the load, so "
			"the library maps the staging\n", PROG);
		return OPTS_USAGE;
	}
	if (a->staging_budget >= 0 && !a->device && (a->verify || a->staging >= 0)) {
		fprintf(stderr, "%s: --staging-budget streams the shards through windows: not with "
			"%s\n", PROG, a->verify ? "--verify" : "--staging");
		return OPTS_USAGE;
	}
	if (a->mpi && a->verify && a->local_files) {
		fprintf(stderr, "%s: --verify reads every shard's file: not with --local-files\n",
			PROG);
		return OPTS_USAGE;
	}
	return OPTS_OK;
}

static const char about[] =
	"Loads the checkpoint at PATH (a .safetensors file, a directory of them, or a\n"
	"model.safetensors.index.json) for one process of a sharding, and reports each\n"
	"phase (open, plan, read, verify, write) and the whole. Exit status: 0 loaded,\n"
	"1 failed, 2 usage, 130/143 interrupted by SIGINT/SIGTERM (no --out DIR left).\n"
	"With --mpi, under mpirun: every rank loads its own process; rank 0 prints the\n"
	"cluster's summary; --out DIR holds every rank's devices, published once all\n"
	"succeeded.\n";

/* --read-mode's choices, by index; read_modes[] maps one to RL_DIRECT_*. */
static const char *const read_mode_names[] = { "auto", "direct", "buffered", NULL };
static const int read_modes[] = { RL_DIRECT_AUTO, RL_DIRECT_ON, RL_DIRECT_OFF };

/* The rules between options, once parsed. */
static int rules(struct load_args *a)
{
	int ret = mpi_rules(a);

	if (a->buffered && a->read_mode >= 0 && read_modes[a->read_mode] != RL_DIRECT_OFF) {
		fprintf(stderr, "%s: --buffered is --read-mode buffered: not with --read-mode %s\n",
			PROG, read_mode_names[a->read_mode]);
		return OPTS_USAGE;
	}

	if (ret == OPTS_OK)
		ret = sha256_args_check(PROG, &a->sha256);
	return ret;
}

/* The library's backends, "auto" first: a choice's index, whose name
 * gives the id after parsing. */
static void backend_choices(const char **names)
{
	names[0] = rl_backend_name(RL_BACKEND_AUTO);
	for (size_t i = 0; i < LOAD_MAX_BACKENDS && rl_backend_at(i) >= 0; i++)
		names[i + 1] = rl_backend_name((rl_backend)rl_backend_at(i));
}

/* Every option not given: -1 where 0 is a value. */
static void defaults(struct load_args *a)
{
	memset(a, 0, sizeof(*a));
	a->queue_depth = a->request_bytes = a->inflight_bytes = a->workers = -1;
	a->staging_budget = -1;
	a->backend = a->staging = a->dtype = a->read_mode = -1;
	a->process = -1;
}

/* After opts_parse (its status ret): the rules, and the choices' indexes
 * turned into their values. Returns the status. */
static int parsed(struct load_args *a, const char *const *backend_names, int ret)
{
	if (ret == OPTS_OK && (ret = rules(a)) == OPTS_OK && a->process < 0)
		a->process = 0;
	if (a->backend > 0)   /* the choice's index: the name's id */
		a->backend = rl_backend_by_name(backend_names[a->backend]);
	if (a->read_mode >= 0) /* the choice's index: its RL_DIRECT_* */
		a->read_mode = read_modes[a->read_mode];
	else if (a->buffered)
		a->read_mode = RL_DIRECT_OFF;
	return ret;
}

int load_parse_args(int argc, char **argv, struct load_args *a)
{
	static const char *const staging_names[] = { "library", "caller", NULL };
	static const char *backend_names[LOAD_MAX_BACKENDS + 2];
	const struct opt opts[] = {
		{ .name = "sharding", .kind = OPT_STRING, .dst = &a->sharding,
		  .metavar = "SPEC",
		  .help = "sharding spec file (JSON); none: every tensor whole on device 0" },
		{ .name = "process", .kind = OPT_INT, .dst = &a->process, .metavar = "P",
		  .help = "the process of the mesh to load", .bounds = cli_plan_bounds,
		  .param = RL_PLAN_PROCESS },
		{ .name = "backend", .kind = OPT_CHOICE, .dst = &a->backend,
		  .help = "I/O backend (auto: each of the others in turn)",
		  .choices = backend_names },
		{ .name = "out", .kind = OPT_STRING, .dst = &a->out, .metavar = "DIR",
		  .help = "write DIR/<device>/<tensor>.bin and manifest.json, published atomically" },
		{ .name = "force", .kind = OPT_FLAG, .dst = &a->force,
		  .help = "with --out: replace an earlier dump at DIR" },
		{ .name = "verify", .kind = OPT_FLAG, .dst = &a->verify,
		  .help = "compare every shard with a pread of the file" },
		{ .name = "json", .kind = OPT_FLAG, .dst = &a->json,
		  .help = "print the summary as one JSON object" },
		{ .name = "quiet", .kind = OPT_FLAG, .dst = &a->quiet,
		  .help = "no progress and no summary: errors and warnings only" },
		{ .name = "queue-depth", .kind = OPT_INT, .dst = &a->queue_depth,
		  .metavar = "N", .help = "reads in flight at most",
		  .bounds = cli_loader_bounds, .param = RL_OPT_QUEUE_DEPTH },
		{ .name = "request-bytes", .kind = OPT_SIZE, .dst = &a->request_bytes,
		  .metavar = "SIZE", .help = "bytes per read at most",
		  .bounds = cli_loader_bounds, .param = RL_OPT_REQUEST_BYTES },
		{ .name = "inflight-bytes", .kind = OPT_SIZE, .dst = &a->inflight_bytes,
		  .metavar = "SIZE", .help = "bytes read and not yet scattered at most",
		  .bounds = cli_loader_bounds, .param = RL_OPT_INFLIGHT_BYTES },
		{ .name = "workers", .kind = OPT_INT, .dst = &a->workers, .metavar = "N",
		  .help = "workers, each with its own ring (0: automatic, one per CPU)",
		  .bounds = cli_loader_bounds, .param = RL_OPT_WORKERS },
		{ .name = "staging", .kind = OPT_CHOICE, .dst = &a->staging,
		  .help = "who maps the staging areas: the library, or this command as a runtime would",
		  .choices = staging_names },
		{ .name = "staging-budget", .kind = OPT_SIZE, .dst = &a->staging_budget,
		  .metavar = "SIZE", .help = "stream through windows of SIZE bytes in all (0: from "
			  "the process's limits) instead of staging the whole checkpoint",
		  .bounds = cli_loader_bounds, .param = RL_OPT_STAGING_BUDGET },
		{ .name = "device", .kind = OPT_STRING, .dst = &a->device, .metavar = "KIND[:N]", .help =
		  "into device memory of KIND (cuda, ...; streamed); KIND:N: every device on N" },
		{ .name = "device-map", .kind = OPT_STRING, .dst = &a->device_map, .metavar = "MAP",
		  .help = "with --device: the GPU of each spec device, e.g. 0,0,1,1" },
		{ .name = "dtype", .kind = OPT_CHOICE, .dst = &a->dtype,
		  .help = "convert every floating tensor to this dtype as it loads (integers and "
			  "BOOL as stored; docs/cli.md)", .choices = load_dtype_names },
		{ .name = "read-mode", .kind = OPT_CHOICE, .dst = &a->read_mode,
		  .help = "auto: O_DIRECT, buffered for files the page cache holds; direct: "
			  "O_DIRECT where allowed; buffered: through the page cache",
		  .choices = read_mode_names },
		{ .name = "buffered", .kind = OPT_FLAG, .dst = &a->buffered,
		  .help = "--read-mode buffered" },
		{ .name = "sha256", .kind = OPT_LIST, .dst = &a->sha256, .metavar = "FILE=HEX",
		  .help = "FILE of the checkpoint must have SHA-256 HEX (repeatable)" },
		{ .name = "sha256-file", .kind = OPT_STRING, .dst = &a->sha256_file,
		  .metavar = "SUMS",
		  .help = "expected SHA-256 values, sha256sum format, names relative to the checkpoint" },
		{ .name = "no-hf-sha256", .kind = OPT_FLAG, .dst = &a->no_hf_sha256,
		  .help = "do not take Hugging Face cache blob names as expected SHA-256 values" },
		{ .name = "mpi", .kind = OPT_FLAG, .dst = &a->mpi,
		  .help = "under mpirun: each rank loads its process (its rank) (docs/cluster.md)" },
		{ .name = "read-once", .kind = OPT_FLAG, .dst = &a->read_once,
		  .help = "with --mpi: each byte read by one rank and sent to the others" },
		{ .name = "local-files", .kind = OPT_STRING, .dst = &a->local_files,
		  .metavar = "PATTERN",
		  .help = "with --mpi: the checkpoint's files this rank has (a pattern on file names)" },
		{ .name = "mpi-timeout", .kind = OPT_INT, .dst = &a->mpi_timeout, .metavar = "SECONDS",
		  .help = "with --mpi: a rank waiting this long on the others aborts the job (600)",
		  .lo = 1, .hi = 7 * 24 * 3600 },
		{ NULL },
	};
	const struct opt_cmd cmd = { PROG, "PATH", about, opts, 1, 1, &a->path };

	backend_choices(backend_names);
	defaults(a);
	return parsed(a, backend_names, opts_parse(&cmd, argc, argv));
}

int load_configure(rl_loader *ld, const struct load_args *a, const char *prog)
{
	const struct {
		rl_loader_param param;
		int64_t value;
	} set[] = {
		{ RL_OPT_BACKEND, a->backend },
		{ RL_OPT_QUEUE_DEPTH, a->queue_depth },
		{ RL_OPT_REQUEST_BYTES, a->request_bytes },
		{ RL_OPT_INFLIGHT_BYTES, a->inflight_bytes },
		{ RL_OPT_DIRECT, a->read_mode },
		{ RL_OPT_STAGING, a->staging },
		{ RL_OPT_WORKERS, a->workers },
		{ RL_OPT_SHA256_HF, a->no_hf_sha256 ? 0 : -1 },
		{ RL_OPT_STAGING, a->staging_budget >= 0 ? RL_STAGING_STREAM : -1 },
		{ RL_OPT_STAGING_BUDGET, a->staging_budget },
	};

	for (size_t i = 0; i < sizeof(set) / sizeof(set[0]); i++) {
		/* -1: not given; the ranges were checked while parsing */
		if (set[i].value >= 0 && rl_loader_set(ld, set[i].param, set[i].value) < 0) {
			fprintf(stderr, "%s: %s\n", prog, rl_loader_errmsg(ld));
			return -1;
		}
	}
	return 0;
}

int64_t load_chunk(const struct load_args *a)
{
	/* the loader's default request size (RL_OPT_REQUEST_BYTES) */
	int64_t chunk = a->request_bytes >= 0 ? a->request_bytes : 8 << 20;

	if (a->inflight_bytes >= 0 && chunk > a->inflight_bytes)
		chunk = a->inflight_bytes;
	return chunk;
}
