/*
 * mpi_driver.c - one rank of a test cluster (test_mpi starts it under
 * mpirun): opens a checkpoint (each rank its own copy when PATH holds a
 * %d, replaced by the rank; with --local, through rl_mpi_ckpt_open),
 * loads the rank's shards with rl_mpi_load, dumps them, prints one line:
 *
 *   rank R ok read B predicted P sent S received V
 *   rank R error CODE failed F: MESSAGE
 *
 * then how many large receives it posted as bytes and into datatypes,
 * and rank 0 the cluster's totals. Faults for the failure tests: a rank
 * that truncates its copy of the files after opening them, a rank that never
 * comes (sleeps), a rank whose first payload message is a byte short (the
 * MPI_Isend below), MPI started without thread support. --groups G splits
 * the world into G communicators that load at once. --budget streams
 * (each rank its own budget from the list) and assembles the pieces;
 * --cancel-rank R: that rank's piece callback cancels (at its first
 * piece, or --cancel-transfer its first piece of a transfer);
 * --no-callback-rank R: that rank streams without a piece callback.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ringload_mpi.h"
#include "mx.h"           /* MX_TAG_DATA: which sends carry payload */
#include "dump.h"

struct args {
	const char *path, *spec, *local, *backend, *dump, *budget;
	int read_once, truncate_rank, sleep_rank, short_send_rank, thread_single, groups;
	int cancel_rank, cancel_transfer, no_callback_rank, executor;
	long long batch, msg, timeout_ms, workers;
};

static int parse(int argc, char **argv, struct args *a)
{
	memset(a, 0, sizeof(*a));
	a->truncate_rank = a->sleep_rank = a->short_send_rank = a->cancel_rank = -1;
	a->no_callback_rank = -1;
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(o, "--read-once"))
			a->read_once = 1;
		else if (!strcmp(o, "--thread-single"))
			a->thread_single = 1;
		else if (!strcmp(o, "--cancel-transfer"))
			a->cancel_transfer = 1;
		else if (!strcmp(o, "--executor"))
			a->executor = 1;
		else if (!strcmp(o, "--old-loop"))
			a->executor = -1;
		else if (!v && o[0] == '-')
			return -1;
		else if (!strcmp(o, "--spec") && ++i)
			a->spec = v;
		else if (!strcmp(o, "--local") && ++i)
			a->local = v;
		else if (!strcmp(o, "--backend") && ++i)
			a->backend = v;
		else if (!strcmp(o, "--dump") && ++i)
			a->dump = v;
		else if (!strcmp(o, "--budget") && ++i)
			a->budget = v;
		else if (!strcmp(o, "--workers") && ++i)
			a->workers = atoll(v);
		else if (!strcmp(o, "--batch") && ++i)
			a->batch = atoll(v);
		else if (!strcmp(o, "--msg") && ++i)
			a->msg = atoll(v);
		else if (!strcmp(o, "--timeout-ms") && ++i)
			a->timeout_ms = atoll(v);
		else if (!strcmp(o, "--truncate-rank") && ++i)
			a->truncate_rank = atoi(v);
		else if (!strcmp(o, "--no-callback-rank") && ++i)
			a->no_callback_rank = atoi(v);
		else if (!strcmp(o, "--cancel-rank") && ++i)
			a->cancel_rank = atoi(v);
		else if (!strcmp(o, "--sleep-rank") && ++i)
			a->sleep_rank = atoi(v);
		else if (!strcmp(o, "--short-send-rank") && ++i)
			a->short_send_rank = atoi(v);
		else if (!strcmp(o, "--groups") && ++i)
			a->groups = atoi(v);
		else if (o[0] != '-' && !a->path)
			a->path = o;
		else
			return -1;
	}
	return a->path ? 0 : -1;
}

/* Cuts this rank's copy of every file to its first 16 bytes: whatever it
 * reads comes up short (its checkpoint was opened before). */
static void truncate_files(const rl_ckpt *ck)
{
	for (size_t f = 0; f < rl_ckpt_num_files(ck); f++)
		if (truncate(rl_ckpt_file_path(ck, f), 16))
			perror("truncate");
}

/* on_shard calls per shard: each must come exactly once (from the
 * engine's threads or the MPI thread, never two at once). */
#define MAX_SHARDS (1u << 20)
static unsigned *calls;

/*
 * Receives of 1 MiB or more that the library posts, as plain bytes
 * (MPI_BYTE: Open MPI's single-copy path) or into a derived datatype
 * (fragments, packed and unpacked). This definition interposes on
 * libringload_mpi's calls; only the MPI thread calls it.
 */
static unsigned long recv_plain, recv_derived;

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm,
	      MPI_Request *req)
{
	int size = 0;

	MPI_Type_size(type, &size);
	if ((long long)size * count >= (1 << 20)) {
		if (type == MPI_BYTE)
			recv_plain++;
		else
			recv_derived++;
	}
	return PMPI_Irecv(buf, count, type, src, tag, comm, req);
}

/* --short-send-rank: this rank's first payload message (a send of more
 * than one byte tagged MX_TAG_DATA or above: the library's notes are
 * tagged below it and the empty messages of a failed root carry nothing)
 * goes one byte short. Atomic: the library's threads send too. */
static atomic_int short_send;

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
	      MPI_Request *req)
{
	if (type == MPI_BYTE && tag >= MX_TAG_DATA && count > 1 && atomic_exchange(&short_send, 0))
		count--;
	return PMPI_Isend(buf, count, type, dest, tag, comm, req);
}

static void on_shard(void *user, size_t shard)
{
	(void)user;
	if (shard < MAX_SHARDS)
		calls[shard]++;
}

static int each_reported_once(const rl_plan *plan, int rank)
{
	for (size_t s = 0; s < rl_plan_num_shards(plan) && s < MAX_SHARDS; s++)
		if (calls[s] != 1) {
			printf("rank %d error: shard %zu reported %u times\n", rank, s, calls[s]);
			return -1;
		}
	return 0;
}

/*
 * --budget B0[,B1,...]: a streaming loader, rank r's budget the (r % n)th;
 * the pieces are assembled into areas laid out as staging, each byte
 * counted (every byte of every shard must come exactly once).
 */
struct assembly {
	const rl_plan *plan;
	rl_loader *ld;
	unsigned char **area, **seen;
	unsigned ndev;
	int bad;
	int cancel;             /* --cancel-rank: 1 at the first piece, 2 at the
				 * first of a transfer (token 0, bytes) */
};

static int on_piece(void *user, const rl_piece *p)
{
	struct assembly *A = user;
	rl_shard_info si;

	if (!A->area) {         /* the plan is built by the first piece */
		A->ndev = rl_plan_num_devices(A->plan);
		A->area = calloc(A->ndev + 1, sizeof(*A->area));
		A->seen = calloc(A->ndev + 1, sizeof(*A->seen));
		for (unsigned d = 0; d < A->ndev; d++) {
			rl_device_info di;

			rl_plan_device(A->plan, d, &di);
			A->area[d] = calloc(di.staging_bytes + 1, 1);
			A->seen[d] = calloc(di.staging_bytes + 1, 1);
		}
	}
	rl_plan_shard(A->plan, p->shard, &si);
	if (p->offset + p->length > si.nbytes || (p->length && !p->data)) {
		A->bad = 1;
	} else {
		memcpy(A->area[si.device] + si.offset + p->offset, p->data, p->length);
		for (uint64_t i = 0; i < p->length; i++)
			A->bad |= A->seen[si.device][si.offset + p->offset + i]++ != 0;
	}
	rl_loader_release(A->ld, p);
	return A->cancel == 1 || (A->cancel == 2 && !p->token && p->length);
}

/* Every byte of every shard came once. */
static int assembled(struct assembly *A, int rank)
{
	for (size_t s = 0; s < rl_plan_num_shards(A->plan); s++) {
		rl_shard_info si;

		rl_plan_shard(A->plan, s, &si);
		for (uint64_t i = 0; i < si.nbytes && !A->bad; i++)
			A->bad = !A->area || A->seen[si.device][si.offset + i] != 1;
	}
	if (A->bad)
		printf("rank %d error: a byte arrived in no piece or in two\n", rank);
	return A->bad ? -1 : 0;
}

static void assembly_free(struct assembly *A)
{
	for (unsigned d = 0; A->area && d < A->ndev; d++) {
		free(A->area[d]);
		free(A->seen[d]);
	}
	free(A->area);
	free(A->seen);
}

static long long budget_of(const char *list, int rank)
{
	long long v[64];
	int n = 0;

	for (const char *c = list; c && *c && n < 64; c = strchr(c, ',') ? strchr(c, ',') + 1 : "")
		v[n++] = atoll(c);
	return n ? v[rank % n] : 0;
}

static int set_backend(rl_loader *ld, const char *name)
{
	static const char *const names[] = { "auto", "io_uring", "libaio", "pread" };

	for (int b = 0; name && b < 4; b++)
		if (!strcmp(name, names[b]))
			return rl_loader_set(ld, RL_OPT_BACKEND, b);
	return name ? -1 : 0;
}

static void print_totals(const rl_mpi *m)
{
	rl_mpi_stats t;

	if (rl_mpi_get_stats(m, RL_TOTAL, &t, sizeof(t)))
		return;
	printf("total read %" PRIu64 " predicted %" PRIu64 " sent %" PRIu64 " received %" PRIu64
	       " batches %" PRIu64 " seconds %.3f\n", t.bytes_read, t.bytes_predicted,
	       t.bytes_sent, t.bytes_received, t.batches, t.total_seconds);
}

/* Where this rank loads: MPI_COMM_WORLD, or (--groups G) the group of
 * world ranks with the same rank % G, every group loading at once. */
struct where {
	MPI_Comm comm;
	int rank, wrank, group;
};

static int run(const struct args *a, const struct where *w, rl_mpi *m)
{
	char path[4096], dir[4200];
	int rank = w->wrank;
	rl_ckpt *ck = rl_ckpt_create();
	rl_spec *spec = rl_spec_create();
	rl_plan *plan = rl_plan_create();
	rl_loader *ld = rl_loader_create();
	struct assembly A = { .plan = plan, .ld = ld };
	int ret = 0;

	snprintf(path, sizeof(path), a->path, rank);
	if (a->spec && (ret = rl_spec_load(spec, a->spec)))
		fprintf(stderr, "rank %d: %s\n", rank, rl_spec_errmsg(spec));
	if (!ret)
		ret = a->local ? rl_mpi_ckpt_open(m, ck, spec, path, a->local, w->comm)
			       : rl_ckpt_open(ck, path);
	if (ret && !a->local)
		fprintf(stderr, "rank %d: %s\n", rank, rl_ckpt_errmsg(ck));
	if (!ret && rank == a->truncate_rank)
		truncate_files(ck);
	short_send = rank == a->short_send_rank;
	if (!ret && rank == a->sleep_rank)
		for (;;)
			sleep(1);
	rl_plan_set(plan, RL_PLAN_READ_ONCE, a->read_once);
	if (a->batch)
		rl_plan_set(plan, RL_PLAN_BATCH_BYTES, a->batch);
	if (set_backend(ld, a->backend))
		ret = -EINVAL;
	if (a->workers)
		rl_loader_set(ld, RL_OPT_WORKERS, a->workers);
	if (a->budget) {
		rl_loader_set(ld, RL_OPT_STAGING, RL_STAGING_STREAM);
		rl_loader_set(ld, RL_OPT_STAGING_BUDGET, budget_of(a->budget, rank));
		if (rank != a->no_callback_rank)
			rl_mpi_set_piece_callback(m, on_piece, &A);
		A.cancel = rank == a->cancel_rank ? 1 + a->cancel_transfer : 0;
	}
	if (!ret)
		ret = rl_mpi_load(ld, ck, a->spec ? spec : NULL, w->comm, plan, m);
	if (!ret && (a->budget ? assembled(&A, rank) : each_reported_once(plan, rank)))
		ret = -1;
	snprintf(dir, sizeof(dir), a->groups > 1 ? "%s/g%d" : "%s", a->dump, w->group);
	if (!ret && a->dump)
		ret = dump_areas(dir, plan, ld, a->budget ? A.area : NULL);
	if (ret) {
		printf("rank %d error %d failed %d: %s\n", rank, ret, rl_mpi_failed_rank(m),
		       rl_mpi_errmsg(m));
	} else {
		rl_mpi_stats s;

		rl_mpi_get_stats(m, w->rank, &s, sizeof(s));
		printf("rank %d ok read %" PRIu64 " predicted %" PRIu64 " sent %" PRIu64
		       " received %" PRIu64 "\n", rank, s.bytes_read, s.bytes_predicted,
		       s.bytes_sent, s.bytes_received);
		printf("rank %d receives of 1 MiB or more: %lu as bytes, %lu into datatypes\n", rank,
		       recv_plain, recv_derived);
		if (w->rank == 0)
			print_totals(m);
	}
	fflush(stdout);
	assembly_free(&A);
	rl_loader_destroy(ld);
	rl_plan_destroy(plan);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
	return ret;
}

int main(int argc, char **argv)
{
	struct args a;
	struct where w = { MPI_COMM_WORLD, 0, 0, 0 };
	int provided = 0, ret;
	rl_mpi *m;

	if (parse(argc, argv, &a)) {
		fprintf(stderr, "usage: mpi_driver PATH [--spec SPEC] [--read-once] [--local PATTERN]\n"
			"  [--backend B] [--dump DIR] [--batch BYTES] [--msg BYTES] [--timeout-ms N] [--executor | --old-loop]\n"
			"  [--truncate-rank R] [--sleep-rank R] [--short-send-rank R] [--thread-single]\n"
			"  [--groups G] [--budget B0[,B1,...]] [--workers N]\n"
			"  [--cancel-rank R [--cancel-transfer]] [--no-callback-rank R]\n");
		return 2;
	}
	MPI_Init_thread(&argc, &argv, a.thread_single ? MPI_THREAD_SINGLE : MPI_THREAD_FUNNELED,
			&provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &w.wrank);
	if (a.groups > 1) {
		w.group = w.wrank % a.groups;
		MPI_Comm_split(MPI_COMM_WORLD, w.group, w.wrank, &w.comm);
	}
	MPI_Comm_rank(w.comm, &w.rank);
	m = rl_mpi_create();
	calls = calloc(MAX_SHARDS, sizeof(*calls));
	rl_mpi_set_callbacks(m, on_shard, NULL);
	if (a.msg)
		rl_mpi_set(m, RL_MPI_MESSAGE_BYTES, a.msg);
	if (a.timeout_ms)
		rl_mpi_set(m, RL_MPI_TIMEOUT_MS, a.timeout_ms);
	/* --old-loop asks for the removed loop: refused, said on every rank. */
	if (a.executor && (ret = rl_mpi_set(m, RL_MPI_EXECUTOR, a.executor > 0)))
		printf("rank %d error %d: %s\n", w.rank, ret, rl_mpi_errmsg(m));
	else
		ret = run(&a, &w, m);
	rl_mpi_destroy(m);
	free(calls);
	MPI_Finalize();
	return ret ? 1 : 0;
}
