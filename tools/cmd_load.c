/*
 * cmd_load.c - `ringload load`: plans a checkpoint for a sharding (none:
 * every tensor whole on one device), loads it, optionally checks every
 * shard against a plain pread-and-slice of the file (--verify) and writes
 * every shard to --out DIR (published atomically, out.c), then reports each
 * phase and the whole. A thin client of ringload.h.
 *
 * Phases: open (checkpoint and spec), plan (plan, --out's partial
 * directory, staging), read, verify, write. SIGINT and SIGTERM stop any of
 * them (signals.c), remove the partial directory and exit 128 + signal.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli.h"
#include "load_args.h"
#include "load_cuda.h"
#include "opts.h"
#include "out.h"
#include "progress_bar.h"
#include "signals.h"
#include "cli_helpers.h"
#include "sha256sums.h"
#include "verify.h"

#define PROG "ringload load"


enum phase { PH_OPEN, PH_PLAN, PH_READ, PH_VERIFY, PH_WRITE, PH_N };
static const char *const phase_names[PH_N] = { "open", "plan", "read", "verify", "write" };

struct load_run {
	const struct load_args *a;
	rl_ckpt *ck;
	rl_spec *spec;
	rl_plan *plan;
	rl_loader *ld;
	void **areas;            /* --staging caller: this command's mappings */
	size_t *lens;
	unsigned ndev;
	struct out_dir out;
	int out_begun, published;
	int piece_failed;        /* --staging-budget: writing a piece failed */
	struct progress_bar bar;
	struct verify_counts vc;
	rl_load_stats st;
	double t0, started, secs[PH_N], total;
	int ran[PH_N];
	enum phase cur;
	uint64_t done, todo;     /* the current phase's progress, in bytes */
	const char *doing;       /* the phase, as the interruption message says it */
	const char *hold;        /* RINGLOAD_TEST_HOLD */
};

/* ------------------------------------------------------------------ */
/* Phases                                                              */
/* ------------------------------------------------------------------ */

/* Starts phase ph; returns -1 (do nothing more) once a signal arrived. */
static int phase_begin(struct load_run *r, enum phase ph, const char *doing)
{
	if (cli_sig_pending())
		return -1;
	r->cur = ph;
	r->done = r->todo = 0;
	r->doing = doing;
	cli_sig_set_phase(doing);
	r->started = cli_now();
	r->ran[ph] = 1;
	return 0;
}

static void phase_end(struct load_run *r, enum phase ph)
{
	r->secs[ph] += cli_now() - r->started;
}

/*
 * RINGLOAD_TEST_HOLD=PHASE, for tests only: the command stops in PHASE
 * (read, verify, write: polling for a signal as those phases do; remove:
 * --force removing the old dump; stuck: a library call that calls nothing
 * back; start: before the signal thread starts) so that a test can interrupt each phase without racing it; with
 * RINGLOAD_TEST_RESUME=FILE it goes on once FILE exists (a test changes
 * the checkpoint mid-load meanwhile).
 */
static void test_hold(struct load_run *r, const char *phase)
{
	const char *resume = getenv("RINGLOAD_TEST_RESUME");
	/* start: no signal thread yet; stuck: nothing polls */
	int stuck = !strcmp(phase, "stuck") || !strcmp(phase, "start");

	if (!r->hold || strcmp(r->hold, phase))
		return;
	r->hold = NULL;
	fprintf(stderr, "%s: holding in %s (RINGLOAD_TEST_HOLD)\n", PROG, phase);
	while (stuck || !cli_sig_pending()) {
		if (resume && access(resume, F_OK) == 0)
			return;
		usleep(10000);
	}
}

/* Progress of read, verify and write: draws the bar, stops on a signal. */
static int on_progress(void *user, uint64_t done, uint64_t total)
{
	struct load_run *r = user;

	r->done = done;
	r->todo = total;
	progress_update(&r->bar, done, total);
	if (done)
		test_hold(r, phase_names[r->cur]);
	return cli_sig_pending();
}

static int open_inputs(struct load_run *r)
{
	int ret;

	if (phase_begin(r, PH_OPEN, "opening the checkpoint"))
		return -1;
	progress_note(&r->bar, "opening the checkpoint ...");
	ret = cli_open_ckpt(PROG, r->a->path, &r->ck);
	if (!ret)
		ret = cli_load_spec(PROG, r->a->sharding, &r->spec);
	progress_done(&r->bar);
	phase_end(r, PH_OPEN);
	return ret;
}

/* Says why --request-bytes was lowered to chunk: the in-flight bound, or
 * a 32nd of the staging budget (streaming). */
static void note_lowered(const struct load_args *a, int64_t chunk)
{
	int64_t budget = a->staging_budget > 0 ? a->staging_budget : rl_loader_default_budget();

	if (a->inflight_bytes >= 0 && chunk == a->inflight_bytes)
		fprintf(stderr, "%s: --request-bytes %" PRId64 " lowered to --inflight-bytes %"
			PRId64 "\n", PROG, a->request_bytes, chunk);
	else
		fprintf(stderr, "%s: --request-bytes %" PRId64 " lowered to %" PRId64
			" bytes, a 32nd of --staging-budget %" PRId64 "\n", PROG,
			a->request_bytes, chunk, budget);
}

static int build_plan(struct load_run *r)
{
	const struct load_args *a = r->a;
	/* --request-bytes (else the size for the devices under ck), capped by
	 * the loader: at --inflight-bytes, and streaming at a 32nd of the
	 * budget, since a read larger than a window is read once per window. */
	int64_t chunk = rl_loader_request_bytes(r->ld, r->ck);
	int ret;

	if (chunk < 0) {
		fprintf(stderr, "%s: %s\n", PROG, rl_loader_errmsg(r->ld));
		return -1;
	}
	if (a->request_bytes > chunk && !a->quiet)
		note_lowered(a, chunk);

	r->plan = rl_plan_create();
	if (!r->plan) {
		fprintf(stderr, "%s: out of memory\n", PROG);
		return -1;
	}
	ret = rl_plan_set(r->plan, RL_PLAN_PROCESS, a->process);
	if (!ret)
		ret = rl_plan_set(r->plan, RL_PLAN_CHUNK_BYTES, chunk);
	/* Only this process's statistics: the others are not needed here. */
	if (!ret)
		ret = rl_plan_set(r->plan, RL_PLAN_ALL_STATS, 0);
	if (!ret && a->dtype >= 0)
		ret = rl_plan_set(r->plan, RL_PLAN_DTYPE,
				  rl_dtype_from_name(load_dtype_names[a->dtype]));
	if (!ret)
		ret = rl_plan_build(r->plan, r->ck, r->spec);
	if (ret < 0) {
		fprintf(stderr, "%s: %s\n", PROG, rl_plan_errmsg(r->plan));
		return -1;
	}
	r->ndev = rl_plan_num_devices(r->plan);
	return 0;
}

/* --force: asked while the old dump is removed (o->stop takes no argument). */
static struct load_run *removing_run;

static int removing_old(void)
{
	test_hold(removing_run, "remove");
	return cli_sig_pending();
}

static _Atomic double removal_deadline;

/* A signal's exit removes for 0.5 s at most; a child process does the rest. */
static int removal_overdue(void)
{
	return cli_now() > removal_deadline;
}

/* The watchdog's cleanup: the main thread may still be writing. */
static void abort_out(void *arg)
{
	removal_deadline = cli_now() + 0.5;
	out_remove_partial(arg, removal_overdue);
}

/* --out: the partial directory exists before anything is read. */
static int begin_out(struct load_run *r)
{
	int ret;

	if (!r->a->out)
		return 0;
	ret = out_begin(&r->out, r->a->out, (long)getpid(), r->a->force ? OUT_FORCE : 0, r->ck,
			r->plan);
	if (ret < 0) {
		fprintf(stderr, "%s: %s\n", PROG, r->out.err);
		return -1;
	}
	r->out_begun = 1;
	removing_run = r;
	r->out.stop = removing_old;
	cli_sig_set_cleanup(abort_out, &r->out);
	return 0;
}

static int configure_loader(struct load_run *r)
{
	r->ld = rl_loader_create();
	if (!r->ld) {
		fprintf(stderr, "%s: out of memory\n", PROG);
		return -1;
	}
	return load_configure(r->ld, r->a, PROG);
}

/* --staging caller: this command maps each device's area itself, as a
 * runtime would with memory registered with its GPU driver. */
static int caller_staging(struct load_run *r)
{
	unsigned n = r->ndev;

	r->areas = calloc(n ? n : 1, sizeof(void *));
	r->lens = calloc(n ? n : 1, sizeof(size_t));
	if (!r->areas || !r->lens) {
		fprintf(stderr, "%s: out of memory\n", PROG);
		return -1;
	}
	for (unsigned d = 0; d < n; d++) {
		rl_device_info di;
		size_t len;
		void *p;

		rl_plan_device(r->plan, d, &di);
		len = di.staging_bytes ? (size_t)di.staging_bytes : 4096;
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			fprintf(stderr, "%s: cannot map %zu bytes of staging\n", PROG, len);
			return -1;
		}
		r->areas[d] = p;
		r->lens[d] = len;
		if (rl_loader_set_staging(r->ld, d, p, len) < 0) {
			fprintf(stderr, "%s: %s\n", PROG, rl_loader_errmsg(r->ld));
			return -1;
		}
	}
	return 0;
}

/* --staging-budget: each piece into its file (--out), then released; a
 * write error or a signal cancels the load (the message is out.err). */
static int on_piece(void *user, const rl_piece *p)
{
	struct load_run *r = user;
	int stop = cli_sig_pending(), ret = 0;

	if (r->a->out && !stop)
		ret = out_write_piece(&r->out, r->plan, p);
	rl_loader_release(r->ld, p);
	if (ret < 0)
		r->piece_failed = 1;
	return stop || ret < 0;
}

static int stop_on_signal(void *user, uint64_t done, uint64_t total)
{
	return cli_sig_pending();
}

/*
 * --staging-budget with --out: every device's folder before the read
 * (the pieces land in its files as they come). Thousands of files: the
 * writer polls for a signal between them, so the watchdog stays out (as
 * in write_dump(); on failure the main thread removes what was made).
 */
static int stream_folders(struct load_run *r)
{
	int ret = 0;

	if (r->a->out)
		cli_sig_guard(1);
	for (unsigned d = 0; r->a->out && d < r->ndev && !ret; d++)
		ret = out_stream_device(&r->out, r->ck, r->plan, d, stop_on_signal, r);
	if (ret < 0) {
		if (ret != RL_E_CANCELED || !cli_sig_pending())
			fprintf(stderr, "%s: %s\n", PROG, r->out.err);
		return -1;
	}
	if (r->a->out)
		cli_sig_guard(0);
	rl_loader_set_piece_callback(r->ld, on_piece, r);
	return 0;
}

static int prepare(struct load_run *r)
{
	int ret;

	if (phase_begin(r, PH_PLAN, "planning"))
		return -1;
	progress_note(&r->bar, "planning ...");
	/* the loader first: it sizes the plan's requests */
	ret = configure_loader(r);
	if (!ret)
		ret = build_plan(r);
	if (!ret)   /* after the plan: only files this process reads are warned of */
		ret = sha256_expect(r->ld, r->ck, r->plan, r->a->path, &r->a->sha256,
				    r->a->sha256_file, PROG);
	if (!ret)
		ret = begin_out(r);
	if (!ret && r->a->staging == RL_STAGING_CALLER)
		ret = caller_staging(r);
	if (!ret && r->a->device) /* --device cuda: the pieces go to GPUs */
		ret = load_cuda_setup(r->ld, r->plan, r->a, PROG);
	else if (!ret && r->a->staging_budget >= 0)
		ret = stream_folders(r);
	progress_done(&r->bar);
	phase_end(r, PH_PLAN);
	return ret;
}

static int read_checkpoint(struct load_run *r)
{
	int ret;

	if (phase_begin(r, PH_READ, "reading"))
		return -1;
	test_hold(r, "stuck");
	progress_begin(&r->bar, "read");
	rl_loader_set_callbacks(r->ld, NULL, on_progress, r);
	ret = rl_loader_run(r->ld, r->plan);
	progress_done(&r->bar);
	phase_end(r, PH_READ);
	if (ret < 0) {
		if (r->piece_failed)
			fprintf(stderr, "%s: %s\n", PROG, r->out.err);
		else if (ret != RL_E_CANCELED || !cli_sig_pending())
			fprintf(stderr, "%s: %s\n", PROG, rl_loader_errmsg(r->ld));
		return -1;
	}
	r->st.size = sizeof(r->st);
	rl_loader_get_stats(r->ld, &r->st);
	sha256_report(r->ld, r->ck, r->a->quiet, PROG);
	return 0;
}

static void print_verify(FILE *f, const struct verify_counts *vc)
{
	fprintf(f, "verify: %zu shards match the file, %zu differ, %zu not checkable (assembled "
		"targets)\n", vc->match, vc->differ, vc->uncheckable);
}

static int verify_shards(struct load_run *r)
{
	rl_shard_info si;
	int ret;

	if (!r->a->verify)
		return 0;
	if (phase_begin(r, PH_VERIFY, "verifying"))
		return -1;
	progress_begin(&r->bar, "verify");
	ret = r->a->device ? load_cuda_verify(r->ck, r->plan, r->ld, &r->vc, on_progress, r, PROG)
			   : verify_all(r->ck, r->plan, r->ld, &r->vc, on_progress, r);
	progress_done(&r->bar);
	phase_end(r, PH_VERIFY);
	if (ret < 0)
		return -1;  /* canceled by a signal */
	if (r->vc.differ) {
		rl_plan_shard(r->plan, r->vc.first_bad, &si);
		fprintf(stderr, "%s: verify: shard %zu (%s on device %u) differs from the file\n",
			PROG, r->vc.first_bad, si.name, si.device);
	}
	if (r->vc.differ)  /* else the summary says it */
		print_verify(stderr, &r->vc);
	return r->vc.differ ? -1 : 0;
}

/* Every device's folder into the partial directory, then publish. While
 * writing, the signal thread leaves stopping to the writer (guard). */
static int write_dump(struct load_run *r)
{
	int ret = 0;

	if (!r->a->out)
		return 0;
	if (phase_begin(r, PH_WRITE, "writing the dump"))
		return -1;
	cli_sig_guard(1);
	progress_begin(&r->bar, "write");
	/* streaming: the files were written while reading */
	for (unsigned d = 0; d < r->ndev && !ret && r->a->staging_budget < 0; d++)
		ret = out_write_device(&r->out, r->ck, r->plan, d, rl_loader_staging(r->ld, d, NULL),
				       on_progress, r);
	if (!ret)
		ret = out_publish(&r->out, on_progress, r);
	progress_done(&r->bar);
	phase_end(r, PH_WRITE);
	if (ret < 0) {
		/* the guard stays: the main thread removes the partial directory */
		if (ret != RL_E_CANCELED || !cli_sig_pending())
			fprintf(stderr, "%s: %s\n", PROG, r->out.err);
		return -1;
	}
	r->published = 1;
	cli_sig_set_cleanup(NULL, NULL);
	cli_sig_guard(0);
	if (r->out.warn[0])
		fprintf(stderr, "%s: warning: %s\n", PROG, r->out.warn);
	return 0;
}

/* ------------------------------------------------------------------ */
/* The summary                                                         */
/* ------------------------------------------------------------------ */

static double gbps(uint64_t bytes, double secs)
{
	return secs > 0 ? (double)bytes / secs / 1e9 : 0;
}

static void print_text(const struct load_run *r)
{
	const rl_load_stats *st = &r->st;
	unsigned ndev = r->ndev;

	printf("%" PRIu64 " bytes in %.3f s (%.2f GB/s), backend %s, %zu shards on %u device%s%s%s\n",
	       st->bytes_read, r->total, gbps(st->bytes_read, r->total),
	       rl_backend_name(st->backend), rl_plan_num_shards(r->plan), ndev,
	       ndev == 1 ? "" : "s", st->fallbacks[0] ? "; " : "", st->fallbacks);
	printf("phases:");
	for (int ph = 0; ph < PH_N; ph++) {
		if (!r->ran[ph])
			continue;
		printf("%s %s %.3f s", ph ? "," : "", phase_names[ph], r->secs[ph]);
		if (ph == PH_READ)
			printf(" (%.2f GB/s)", gbps(st->bytes_read, r->secs[ph]));
		if (ph == PH_WRITE)
			printf(" (%.2f GB/s)", gbps(r->out.done, r->secs[ph]));
	}
	printf("\nread: I/O %.3f s (%.2f GB/s), scatter %.3f s; %" PRIu64 " needed, %" PRIu64
	       " zero-copy; %" PRIu64 " requests, %" PRIu64 " retries, qd %u, %u buffers (%u "
	       "registered), O_DIRECT on every file: %s\n",
	       st->read_seconds, st->gbps, st->scatter_seconds, st->bytes_needed, st->bytes_direct,
	       st->requests, st->retries, st->queue_depth, st->buffers, st->registered_buffers,
	       st->direct_io ? "yes" : "no");
	if (r->a->device)
		printf("device: %s, peak host memory %" PRIu64 " bytes\n", r->a->device,
		       load_peak_host_bytes());
	if (r->a->verify)
		print_verify(stdout, &r->vc);
	fflush(stdout);
}

/* The "stream" object: the windows, and the pool's size and why (the
 * smallest of the budget, the load's staging and the medium's). */
static void print_json_stream(const rl_load_stats *st)
{
	static const char *const limits[] = { "", "budget", "load's staging", "medium" };
	unsigned by = st->stream_pool_limit < 4 ? st->stream_pool_limit : 0;

	printf("{\"windows\":%u,\"window_bytes\":%" PRIu64 ",\"registered\":%s"
	       ",\"ranges\":%" PRIu64 ",\"pool_bytes\":%" PRIu64 ",\"pool_by\":\"%s\""
	       ",\"medium\":{\"bytes\":%" PRIu64 ",\"why\":\"2 windows x %u reads x %" PRIu64
	       " bytes (workers %u, depth %u)\"}}", st->stream_windows, st->stream_window_bytes,
	       st->stream_registered ? "true" : "false", st->stream_ranges,
	       st->stream_pool_bytes, limits[by], st->stream_pool_medium, st->stream_pool_reads,
	       st->request_bytes, st->stream_pool_workers, st->stream_pool_depth);
}

static void print_json_stats(const rl_load_stats *st)
{
	printf("\"stats\":{\"bytes_needed\":%" PRIu64 ",\"bytes_read\":%" PRIu64
	       ",\"bytes_zero_copy\":%" PRIu64 ",\"requests\":%" PRIu64 ",\"retries\":%" PRIu64
	       ",\"peak_inflight\":%" PRIu64 ",\"read_seconds\":%.6f,\"scatter_seconds\":%.6f"
	       ",\"gbps\":%.4f,\"queue_depth\":%u,\"buffers\":%u,\"registered_buffers\":%u"
	       ",\"registered_files\":%s,\"direct_io\":%s",
	       st->bytes_needed, st->bytes_read, st->bytes_direct, st->requests, st->retries,
	       st->peak_inflight, st->read_seconds, st->scatter_seconds, st->gbps,
	       st->queue_depth, st->buffers, st->registered_buffers,
	       st->registered_files ? "true" : "false", st->direct_io ? "true" : "false");
	printf(",\n\"shape\":{\"workers\":%u,\"queue_depth\":%u,\"request_bytes\":%" PRIu64
	       ",\"bytes_buffered\":%" PRIu64 ",\"files_cached\":%u,\"setup_seconds\":%.6f"
	       ",\"engine_runs\":%u,\"stream\":", st->workers, st->queue_depth,
	       st->request_bytes, st->bytes_buffered, st->files_cached, st->setup_seconds,
	       st->engine_runs);
	if (st->stream_windows)
		print_json_stream(st);
	else
		printf("null");
	printf("}}");
}

/* rl_load_stats.fallback_flags as a JSON list of names (RL_FALLBACK_*). */
static void print_json_fallbacks(unsigned flags)
{
	static const char *const names[] = { "backend", "uring_flags", "files_unregistered",
					     "buffers_unregistered", "buffers_unlocked",
					     "not_prefaulted", "fewer_workers", "cuda_host_alloc",
					     "cuda_pageable" };
	const char *sep = "";

	printf(",\"fallback_flags\":[");
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (flags & (1u << i)) {
			printf("%s\"%s\"", sep, names[i]);
			sep = ",";
		}
	printf("]");
}

/* "read_mode": how the files were read and why, one entry per distinct
 * (mode, why) with its count of files (rl_file_stats.mode and .why). */
static void print_json_read_mode(rl_loader *ld)
{
	static const char *const modes[] = { "unused", "direct", "cached", "buffered" };
	static const char *const whys[] = {
		"no reads", "asked (--read-mode)",
		"auto: under 90% of its needed bytes in the page cache",
		"auto: >= 90% of its needed bytes in the page cache",
		"auto: tmpfs, its pages are its medium (not probed)",
		"the file system refuses O_DIRECT",
	};
	unsigned count[4][6] = { { 0 } };
	size_t n = rl_loader_num_files(ld);
	const char *sep = "";

	for (size_t i = 0; i < n; i++) {
		rl_file_stats fs = { .size = sizeof(fs) };

		if (rl_loader_get_file_stats(ld, i, &fs) == 0 && fs.mode >= 0 && fs.mode < 4 &&
		    fs.why >= 0 && fs.why < 6)
			count[fs.mode][fs.why]++;
	}
	printf(",\n\"read_mode\":\"");
	for (int m = 0; m < 4; m++)
		for (int w = 0; w < 6; w++)
			if (count[m][w]) {
				printf("%s%s, %s: %u file%s", sep, modes[m], whys[w], count[m][w],
				       count[m][w] == 1 ? "" : "s");
				sep = "; ";
			}
	printf("\"");
}

static void print_json(const struct load_run *r)
{
	const rl_load_stats *st = &r->st;

	printf("{\"bytes\":%" PRIu64 ",\"bytes_written\":%" PRIu64 ",\"shards\":%zu,"
	       "\"devices\":%u,\"backend\":\"%s\",\"fallbacks\":",
	       st->bytes_read, r->out.done, rl_plan_num_shards(r->plan), r->ndev,
	       rl_backend_name(st->backend));
	cli_json_str(stdout, st->fallbacks);
	print_json_fallbacks(st->fallback_flags);
	printf(",\n\"seconds\":{");
	for (int ph = 0; ph < PH_N; ph++) {
		printf("\"%s\":", phase_names[ph]);
		printf(r->ran[ph] ? "%.6f," : "null,", r->secs[ph]);
	}
	printf("\"total\":%.6f},\n\"gbps\":%.4f,\"read_gbps\":%.4f,\"write_gbps\":",
	       r->total, gbps(st->bytes_read, r->total), gbps(st->bytes_read, r->secs[PH_READ]));
	printf(r->ran[PH_WRITE] ? "%.4f" : "null", gbps(r->out.done, r->secs[PH_WRITE]));
	printf(",\n");
	if (r->a->out)
		cli_json_path(stdout, "out", r->out.dir);
	else
		printf("\"out\":null");
	if (r->a->device) /* --device cuda: where, and the host memory it took */
		printf(",\"device\":\"%s\",\"peak_host_bytes\":%" PRIu64, r->a->device,
		       load_peak_host_bytes());
	if (r->a->verify)
		printf(",\"verify\":{\"match\":%zu,\"differ\":%zu,\"not_checkable\":%zu},\n",
		       r->vc.match, r->vc.differ, r->vc.uncheckable);
	else
		printf(",\"verify\":null,\n");
	print_json_stats(st);
	print_json_read_mode(r->ld);
	printf("}\n");
	fflush(stdout);
}

/* ------------------------------------------------------------------ */

/* A signal while removing what a failed load wrote: the removal stops
 * within 0.5 s and a child process does the rest. Guarded, so that the
 * watchdog does not exit midway and leave DIR.removing-PID behind. */
static int removing_failed(void)
{
	if (!cli_sig_pending())
		return 0;
	if (removal_deadline == 0)
		removal_deadline = cli_now() + 0.5;
	return removal_overdue();
}

static void remove_failed_out(struct load_run *r)
{
	cli_sig_guard(1);
	out_remove_partial(&r->out, removing_failed);
	cli_sig_claim();  /* the failure's line is said; the exit is the failure's */
}

/* The exit status: a signal's (after removing the partial directory), a
 * failure's (its line is printed), or the summary's. */
static int finish(struct load_run *r, int failed)
{
	int sig = cli_sig_claim();
	char at[64] = "";

	r->total = cli_now() - r->t0;
	if (sig) {
		removal_deadline = cli_now() + 0.5;
		if (r->out_begun)
			out_remove_partial(&r->out, removal_overdue);
		if (r->todo && !r->published)
			snprintf(at, sizeof(at), " (%" PRIu64 " of %" PRIu64 " bytes)", r->done,
				 r->todo);
		fprintf(stderr, "%s: interrupted by %s while %s%s%s\n", PROG, cli_sig_name(sig),
			r->published ? "finishing (the dump is complete)" : r->doing, at,
			r->a->out && !r->published ? "; no dump written" : "");
		return 128 + sig;
	}
	if (failed) {
		if (r->out_begun)
			remove_failed_out(r);
		return 1;
	}
	if (r->a->json)
		print_json(r);
	else if (!r->a->quiet)
		print_text(r);
	if (ferror(stdout)) {
		fprintf(stderr, "%s: cannot write the summary\n", PROG);
		return 1;
	}
	return 0;
}

static void free_run(struct load_run *r)
{
	if (r->out_begun)
		out_abort(&r->out);
	rl_loader_destroy(r->ld);
	for (unsigned d = 0; r->areas && d < r->ndev; d++)
		if (r->areas[d])
			munmap(r->areas[d], r->lens[d]);
	free(r->areas);
	free(r->lens);
	rl_plan_destroy(r->plan);
	rl_spec_destroy(r->spec);
	rl_ckpt_destroy(r->ck);
}

int cmd_load(int argc, char **argv)
{
	struct load_args a;
	struct load_run r;
	int parsed = load_parse_args(argc, argv, &a), failed, rc;

	if (parsed == OPTS_OK && (a.device || a.device_map)) /* load_cuda.c */
		parsed = load_cuda_rules(&a, PROG);
	if (parsed != OPTS_OK)
		return opts_exit_status(parsed);
	if (a.mpi)      /* every rank of an MPI job: libringload_mpi, loaded on demand */
		return load_mpi(&a);
	memset(&r, 0, sizeof(r));
	r.a = &a;
	r.t0 = cli_now();
	r.doing = "starting";
	r.hold = getenv("RINGLOAD_TEST_HOLD");
	progress_init(&r.bar, !a.quiet && isatty(STDERR_FILENO));
	test_hold(&r, "start");
	if (cli_sig_start(PROG) < 0) {
		fprintf(stderr, "%s: cannot set up signal handling\n", PROG);
		return 1;
	}
	failed = open_inputs(&r) || prepare(&r) || read_checkpoint(&r) || verify_shards(&r) ||
		 write_dump(&r);
	rc = finish(&r, failed);
	free_run(&r);
	return rc;
}
