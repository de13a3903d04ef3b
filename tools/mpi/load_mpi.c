/*
 * load_mpi.c - `ringload load --mpi`: one rank of an MPI job, built into
 * ringload-mpi.so (with libringload_mpi and Open MPI), which ringload
 * loads only when --mpi is given (load_mpi_hook.c).
 *
 *   open     the checkpoint (--local-files: each rank reads its own files'
 *            headers and the ranks exchange them, rl_mpi_ckpt_open) and
 *            the spec; every rank agrees that every rank could;
 *   load     rl_mpi_load: each rank its process, --read-once or not,
 *            into host staging or (--device) its devices' memory;
 *   verify   each rank its shards (--verify; --device: read back);
 *   write    --out DIR: rank 0 creates the partial directory, every rank
 *            writes its devices' folders into it, and rank 0 renames it to
 *            DIR once every rank has written (out.h);
 *   summary  rank 0 prints the cluster's (--json: per rank and totals).
 *
 * A failure on any rank ends every rank with exit status 1, each printing
 * which rank failed and why.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ringload_mpi.h"
#include "../cli.h"
#include "../load_args.h"
#include "../out.h"
#include "../sha256sums.h"
#include "../signals.h"
#include "../cli_helpers.h"
#include "../load_cuda.h"
#include "../verify.h"

#define PROG "ringload load"

enum { PH_OPEN, PH_LOAD, PH_VERIFY, PH_WRITE, PH_N };
static const char *const phase_names[PH_N] = { "open", "load", "verify", "write" };

struct mrun {
	const struct load_args *a;
	int rank, size;
	rl_ckpt *ck;
	rl_spec *spec;
	rl_plan *plan;
	rl_loader *ld;
	rl_mpi *m;
	struct out_dir out;
	int out_begun;
	int piece_failed;       /* --staging-budget: writing a piece failed */
	struct verify_counts vc;
	size_t nsha;            /* files with an expected SHA-256 (--sha256, --sha256-file) */
	double t0, secs[PH_N];
};

static int say(const struct mrun *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One line on stderr naming this rank; returns -1. */
static int say(const struct mrun *r, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: rank %d: %s\n", PROG, r->rank, msg);
	return -1;
}

/*
 * Every rank's ok, after a step only this rank took part in: 0 when all
 * succeeded, else -1 on every rank (one that did not fail says which did).
 */
static int all_ok(const struct mrun *r, int ok, const char *step)
{
	int mine = ok ? INT_MAX : r->rank, first = INT_MAX;

	MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	if (first == INT_MAX)
		return 0;
	if (ok)
		say(r, "rank %d failed %s", first, step);
	return -1;
}

/* 64-bit FNV-1a of the --sharding file's bytes, and their count (no
 * spec: none, a count no file has). */
static void spec_print(const char *path, uint64_t out[2])
{
	unsigned char buf[1 << 16];
	FILE *f = path ? fopen(path, "rb") : NULL;
	size_t n;

	out[0] = 0xcbf29ce484222325ull;
	out[1] = path ? 0 : UINT64_MAX;
	while (f && (n = fread(buf, 1, sizeof(buf), f)) > 0) {
		for (size_t i = 0; i < n; i++)
			out[0] = (out[0] ^ buf[i]) * 0x100000001b3ull;
		out[1] += n;
	}
	if (f)
		fclose(f);
}

/*
 * Every rank plans from the same spec, byte for byte. Where nothing moves
 * between ranks (independent loading) rl_mpi_load() compares no plan, and
 * ranks given different specs loaded shards that fit no one mesh.
 */
static int same_spec(const struct mrun *r)
{
	uint64_t mine[2], *all = malloc((size_t)r->size * sizeof(mine));
	int q = 1;

	if (!all)
		return all_ok(r, !say(r, "out of memory"), "to compare the specs");
	spec_print(r->a->sharding, mine);
	MPI_Allgather(mine, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, MPI_COMM_WORLD);
	while (q < r->size && !memcmp(all, all + 2 * q, sizeof(mine)))
		q++;
	free(all);
	if (q == r->size)
		return 0;
	if (r->rank == 0)
		say(r, "rank %d was given another sharding spec than rank 0's %s: every rank must "
		    "plan from the same one", q, r->a->sharding ? r->a->sharding : "(none)");
	return -1;
}

static int open_inputs(struct mrun *r)
{
	const struct load_args *a = r->a;
	int ok = !cli_load_spec(PROG, a->sharding, &r->spec);

	if (ok && a->local_files) {
		/* the exchange below needs a spec to say who has which file */
		if (!r->spec)
			ok = (r->spec = rl_spec_create()) != NULL;
		if (ok && !(r->ck = rl_ckpt_create()))
			ok = 0;
	}
	if (all_ok(r, ok, "to read the spec") || same_spec(r))
		return -1;
	if (!a->local_files)
		return all_ok(r, !cli_open_ckpt(PROG, a->path, &r->ck), "to open the checkpoint");
	/* collective: each rank reads its own files' headers, all exchange them */
	if (rl_mpi_ckpt_open(r->m, r->ck, r->spec, a->path, a->local_files, MPI_COMM_WORLD) < 0)
		return say(r, "%s", rl_mpi_errmsg(r->m));
	return 0;
}

/* A warning line naming this rank for each file with an expected SHA-256
 * (the Hugging Face cache's) that it read but could not check: a rank
 * reads only part of most files, its own or, --read-once, for others:
 * the payloads it reads for others too, with the same loader. */
static void report_unchecked(const struct mrun *r)
{
	char prog[64];

	snprintf(prog, sizeof(prog), "%s: rank %d", PROG, r->rank);
	sha256_report(r->ld, r->ck, 1, prog);
}

/* Sets what plans the ranks build alike (and the layout plan alike). */
static int plan_params(rl_plan *plan, const struct load_args *a)
{
	int ret = rl_plan_set(plan, RL_PLAN_CHUNK_BYTES, load_chunk(a));

	if (!ret)
		ret = rl_plan_set(plan, RL_PLAN_READ_ONCE, a->read_once);
	if (!ret)   /* the others' statistics: every rank computes its own */
		ret = rl_plan_set(plan, RL_PLAN_ALL_STATS, 0);
	if (!ret && a->dtype >= 0) /* the transfers move the file's bytes; copies convert */
		ret = rl_plan_set(plan, RL_PLAN_DTYPE, rl_dtype_from_name(load_dtype_names[a->dtype]));
	return ret;
}

static int progress(void *user, uint64_t done, uint64_t total)
{
	(void)user;
	(void)done;
	(void)total;
	return cli_sig_pending();
}

static int verify(struct mrun *r)
{
	int ok;

	if (!r->a->verify)
		return 0;
	ok = !(r->a->device ? load_cuda_verify(r->ck, r->plan, r->ld, &r->vc, progress, NULL, PROG) :
	       verify_all(r->ck, r->plan, r->ld, &r->vc, progress, NULL)) && !r->vc.differ;
	if (r->vc.differ)
		say(r, "verify: %zu shards differ from the file", r->vc.differ);
	else if (ok && !r->a->quiet && !r->a->json) /* each rank its own */
		printf("rank %d: verify: %zu shards match the file, 0 differ\n", r->rank,
		       r->vc.match);
	return all_ok(r, ok, "to verify its shards");
}

static void abort_out(void *arg)
{
	out_abort(arg);
}

/* Rank 0 creates DIR.partial-<its pid>; the others join it (plan: the
 * rank's, built). */
static int begin_out(struct mrun *r, const rl_plan *plan)
{
	long tag = (long)getpid();
	int flags = r->a->force ? OUT_FORCE : 0, created = 0;

	MPI_Bcast(&tag, 1, MPI_LONG, 0, MPI_COMM_WORLD);
	if (r->rank == 0) {
		created = out_begin(&r->out, r->a->out, tag, flags, r->ck, plan) == 0;
		if (!created)
			say(r, "%s", r->out.err);
	}
	MPI_Bcast(&created, 1, MPI_INT, 0, MPI_COMM_WORLD);
	if (!created)
		return -1;
	if (r->rank && out_begin(&r->out, r->a->out, tag, flags | OUT_JOIN, r->ck, plan))
		return all_ok(r, !say(r, "%s", r->out.err), "to join the dump");
	r->out_begun = 1;
	if (r->rank == 0)
		cli_sig_set_cleanup(abort_out, &r->out);
	return all_ok(r, 1, "to join the dump");
}

/* --staging-budget: each piece into its file (--out), then released; a
 * write error or a signal fails the load on every rank. */
static int on_piece(void *user, const rl_piece *p)
{
	struct mrun *r = user;
	int stop = cli_sig_pending();

	if (!stop && r->a->out && out_write_piece(&r->out, r->plan, p) < 0)
		r->piece_failed = stop = 1;
	rl_loader_release(r->ld, p);  /* of a transfer (token 0): nothing */
	return stop;
}

/*
 * --staging-budget: pieces land in their files as they come, so the dump
 * and every device's folder exist before the load. rl_mpi_load() builds
 * the rank's plan; a layout plan built here alike gives the same devices
 * and shards.
 */
static int stream_out(struct mrun *r)
{
	rl_plan *lp;
	int ret;

	if (r->a->staging_budget < 0 || r->a->device) /* --device: the pieces go to it */
		return 0;
	rl_mpi_set_piece_callback(r->m, on_piece, r);
	if (!r->a->out)
		return 0;
	if (!(lp = rl_plan_create()))
		return all_ok(r, !say(r, "out of memory"), "to plan its folders");
	ret = plan_params(lp, r->a);
	if (!ret)
		ret = rl_plan_set(lp, RL_PLAN_PROCESS, r->rank);
	if (!ret)
		ret = rl_plan_build(lp, r->ck, r->spec);
	if (ret < 0)
		say(r, "%s", rl_plan_errmsg(lp));
	if (all_ok(r, ret >= 0, "to plan its folders") || begin_out(r, lp)) {
		rl_plan_destroy(lp);
		return -1;
	}
	cli_sig_guard(1);
	for (unsigned d = 0; d < rl_plan_num_devices(lp) && !ret; d++)
		ret = out_stream_device(&r->out, r->ck, lp, d, progress, NULL);
	cli_sig_guard(0);
	if (ret < 0)
		say(r, "%s", r->out.err);
	rl_plan_destroy(lp);
	return all_ok(r, ret >= 0, "to create its folders");
}

/* --sha256, --sha256-file: the values go to rl_mpi_expect (each file
 * hashed whole by one rank after the load), never to the loaders, which
 * read only part of most files. */
static int expect(struct mrun *r)
{
	char prog[64], hex[65];
	rl_expect *x;
	int ret;

	snprintf(prog, sizeof(prog), "%s: rank %d", PROG, r->rank);
	if (sha256_values(&x, r->ck, NULL, r->a->path, &r->a->sha256, r->a->sha256_file, prog))
		return -1;
	for (size_t f = 0; x && rl_expect_get(x, f, hex) >= 0; f++)
		r->nsha += hex[0] != '\0';
	ret = rl_mpi_expect(r->m, x);
	rl_expect_destroy(x);
	return ret ? say(r, "%s", rl_mpi_errmsg(r->m)) : 0;
}

static int load(struct mrun *r)
{
	const struct load_args *a = r->a;
	int ret;

	r->plan = rl_plan_create();
	r->ld = rl_loader_create();
	if (!r->plan || !r->ld)
		return all_ok(r, !say(r, "out of memory"), "to start");
	/* load_configure() says what it refused */
	if (load_configure(r->ld, a, PROG) ||
	    (a->device && load_cuda_setup(r->ld, r->plan, a, PROG)))
		return all_ok(r, 0, "to configure the load");
	if (a->mpi_timeout && rl_mpi_set(r->m, RL_MPI_TIMEOUT_MS, a->mpi_timeout * 1000))
		return all_ok(r, !say(r, "%s", rl_mpi_errmsg(r->m)), "to configure the load");
	if (plan_params(r->plan, a) < 0)
		return all_ok(r, !say(r, "%s", rl_plan_errmsg(r->plan)), "to configure the load");
	if (expect(r))
		return all_ok(r, 0, "to configure the load");
	if (all_ok(r, 1, "to configure the load") || stream_out(r))
		return -1;
	ret = rl_mpi_load(r->ld, r->ck, r->spec, MPI_COMM_WORLD, r->plan, r->m);
	if (ret < 0) {
		if (r->piece_failed)
			say(r, "%s", r->out.err);
		return say(r, "%s", rl_mpi_errmsg(r->m));
	}
	report_unchecked(r);
	if (r->nsha && r->rank == 0 && !a->quiet)
		fprintf(stderr, "sha256: %zu file%s match%s (each hashed whole by one rank)\n",
			r->nsha, r->nsha == 1 ? "" : "s", r->nsha == 1 ? "es" : "");
	return 0;
}

/* Every rank writes its devices (streaming: written already); rank 0
 * publishes once all have. */
static int write_out(struct mrun *r)
{
	int ret = 0, published = 0;

	if (!r->a->out)
		return 0;
	if (!r->out_begun && begin_out(r, r->plan))
		return -1;
	cli_sig_guard(1);
	for (unsigned d = 0; d < rl_plan_num_devices(r->plan) && !ret && r->a->staging_budget < 0;
	     d++)
		ret = out_write_device(&r->out, r->ck, r->plan, d,
				       rl_loader_staging(r->ld, d, NULL), progress, NULL);
	if (ret < 0)
		say(r, "%s", r->out.err);
	if (!all_ok(r, !ret, "to write its shards") && r->rank == 0) {
		published = out_publish(&r->out, progress, NULL) == 0;
		if (!published)
			say(r, "%s", r->out.err);
	}
	MPI_Bcast(&published, 1, MPI_INT, 0, MPI_COMM_WORLD);
	cli_sig_set_cleanup(NULL, NULL);
	cli_sig_guard(0);
	if (published && r->out.warn[0])
		say(r, "warning: %s", r->out.warn);
	return published ? 0 : -1;
}

/* ------------------------------------------------------------------ */
/* The summary (rank 0)                                                */
/* ------------------------------------------------------------------ */

static double gbps(uint64_t bytes, double secs)
{
	return secs > 0 ? (double)bytes / secs / 1e9 : 0;
}

static void print_text(const struct mrun *r, double total)
{
	rl_mpi_stats t, s;

	rl_mpi_get_stats(r->m, RL_TOTAL, &t, sizeof(t));
	printf("%" PRIu64 " bytes read in the cluster in %.3f s (%.2f GB/s), %d ranks, %s; %" PRIu64
	       " bytes sent between ranks in %" PRIu64 " batch%s\n", t.bytes_read, total,
	       gbps(t.bytes_read, total), r->size,
	       r->a->read_once ? "read once" : "independent loads", t.bytes_sent, t.batches,
	       t.batches == 1 ? "" : "es");
	for (int q = 0; q < r->size; q++) {
		rl_mpi_get_stats(r->m, q, &s, sizeof(s));
		printf("rank %d: read %" PRIu64 " bytes (planned %" PRIu64 "), sent %" PRIu64
		       ", received %" PRIu64 "; plan %.3f s, own reads %.3f s, transfers %.3f s\n", q,
		       s.bytes_read, s.bytes_predicted, s.bytes_sent, s.bytes_received,
		       s.plan_seconds, s.read_seconds, s.transfer_seconds);
	}
}

static void print_rank_json(const rl_mpi_stats *s)
{
	printf("\"bytes_read\":%" PRIu64 ",\"bytes_predicted\":%" PRIu64 ",\"bytes_sent\":%" PRIu64
	       ",\"bytes_received\":%" PRIu64 ",\"transfers_rooted\":%" PRIu64
	       ",\"seconds\":{\"plan\":%.6f,\"read\":%.6f,\"transfers\":%.6f,\"total\":%.6f}",
	       s->bytes_read, s->bytes_predicted, s->bytes_sent, s->bytes_received,
	       s->transfers_rooted, s->plan_seconds, s->read_seconds, s->transfer_seconds,
	       s->total_seconds);
}

static void print_json(const struct mrun *r, double total)
{
	rl_mpi_stats t, s;

	rl_mpi_get_stats(r->m, RL_TOTAL, &t, sizeof(t));
	printf("{\"ranks\":%d,\"read_once\":%s,\"batches\":%" PRIu64 ",", r->size,
	       r->a->read_once ? "true" : "false", t.batches);
	if (r->a->out)
		cli_json_path(stdout, "out", r->out.dir);
	else
		printf("\"out\":null");
	printf(",\n\"seconds\":{");
	for (int ph = 0; ph < PH_N; ph++)
		printf("\"%s\":%.6f,", phase_names[ph], r->secs[ph]);
	printf("\"total\":%.6f},\n\"per_rank\":[", total);
	for (int q = 0; q < r->size; q++) {
		rl_mpi_get_stats(r->m, q, &s, sizeof(s));
		printf("%s\n{\"rank\":%d,", q ? "," : "", q);
		print_rank_json(&s);
		printf("}");
	}
	printf("],\n\"total\":{");
	print_rank_json(&t);
	printf("}}\n");
}

/* ------------------------------------------------------------------ */

/* Runs the steps in order, timing each, until one fails. */
static int run_steps(struct mrun *r)
{
	int (*const step[PH_N])(struct mrun *) = { open_inputs, load, verify, write_out };

	for (int ph = 0; ph < PH_N; ph++) {
		double t = cli_now();
		int ret = step[ph](r);

		r->secs[ph] = cli_now() - t;
		if (ret)
			return ret;
	}
	return 0;
}

static void free_run(struct mrun *r)
{
	if (r->out_begun)
		out_abort(&r->out);
	rl_loader_destroy(r->ld);
	rl_plan_destroy(r->plan);
	rl_spec_destroy(r->spec);
	rl_ckpt_destroy(r->ck);
	rl_mpi_destroy(r->m);
}

/* The rank program (load_args.h: load_mpi()). Returns the exit status. */
__attribute__((visibility("default"))) int ringload_load_mpi(const struct load_args *a);

int ringload_load_mpi(const struct load_args *a)
{
	struct mrun r = { .a = a, .t0 = cli_now() };
	int provided = 0, failed, sig;

	/* Before MPI and the library start threads: they inherit the mask. */
	if (cli_sig_start(PROG) < 0) {
		fprintf(stderr, "%s: cannot set up signal handling\n", PROG);
		return 1;
	}
	MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &r.size);
	if (!(r.m = rl_mpi_create()))
		failed = all_ok(&r, !say(&r, "out of memory"), "to start");
	else
		failed = run_steps(&r);
	if (!failed && r.rank == 0) {
		if (a->json)
			print_json(&r, cli_now() - r.t0);
		else if (!a->quiet)
			print_text(&r, cli_now() - r.t0);
		fflush(stdout);
	}
	free_run(&r);
	MPI_Finalize();
	sig = cli_sig_claim();
	if (sig)
		return 128 + sig;
	return failed ? 1 : 0;
}
