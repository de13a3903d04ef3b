/*
 * mpi_bench.c - one rank of the cluster benchmark (perf/cluster_bench.sh):
 * opens the checkpoint, loads this rank's shards with rl_mpi_load, and
 * rank 0 prints one JSON line: the slowest rank's seconds (from before the
 * checkpoint is opened to every shard in memory) and the cluster's bytes
 * read, sent and received.
 *
 *   mpirun -np N build/perf/mpi_bench CKPT [--spec SPEC] [--read-once] [--backend B]
 *                                      [--batch-bytes N] [--workers N]
 *
 * The transfers run in the library's read-once executor over the MPI
 * transport. --batch-bytes takes plain bytes (no K/M/G suffix).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringload_mpi.h"

static int backend_of(const char *name)
{
	static const char *const names[] = { "auto", "io_uring", "libaio", "pread" };

	for (int b = 0; b < 4; b++)
		if (!strcmp(name, names[b]))
			return b;
	return -1;
}

int main(int argc, char **argv)
{
	const char *path = NULL, *spec_path = NULL;
	int read_once = 0, backend = 0, provided, rank, size, ret;
	long long batch = 0, workers = 0;
	rl_ckpt *ck;
	rl_spec *spec;
	rl_plan *plan;
	rl_loader *ld;
	rl_mpi *m;
	rl_mpi_stats t;
	double t0, secs;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--read-once"))
			read_once = 1;
		else if (!strcmp(argv[i], "--spec") && i + 1 < argc)
			spec_path = argv[++i];
		else if (!strcmp(argv[i], "--batch-bytes") && i + 1 < argc)
			batch = atoll(argv[++i]);
		else if (!strcmp(argv[i], "--workers") && i + 1 < argc)
			workers = atoll(argv[++i]);
		else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
			backend = backend_of(argv[++i]);
		else
			path = argv[i];
	}
	if (!path || backend < 0) {
		fprintf(stderr, "usage: mpi_bench CKPT [--spec SPEC] [--read-once] [--backend B] [--batch-bytes N] [--workers N]\n");
		return 2;
	}
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	ck = rl_ckpt_create();
	spec = rl_spec_create();
	plan = rl_plan_create();
	ld = rl_loader_create();
	m = rl_mpi_create();
	rl_loader_set(ld, RL_OPT_BACKEND, backend);
	rl_plan_set(plan, RL_PLAN_READ_ONCE, read_once);
	if (batch)
		rl_plan_set(plan, RL_PLAN_BATCH_BYTES, batch);
	if (workers) {
		rl_loader_set(ld, RL_OPT_WORKERS, workers);
	}
	rl_plan_set(plan, RL_PLAN_ALL_STATS, 0);
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	ret = rl_ckpt_open(ck, path);
	if (!ret && spec_path)
		ret = rl_spec_load(spec, spec_path);
	if (!ret)
		ret = rl_mpi_load(ld, ck, spec_path ? spec : NULL, MPI_COMM_WORLD, plan, m);
	secs = MPI_Wtime() - t0;
	MPI_Allreduce(MPI_IN_PLACE, &secs, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	if (ret)
		fprintf(stderr, "rank %d: %s%s%s\n", rank, rl_mpi_errmsg(m), rl_ckpt_errmsg(ck),
			rl_spec_errmsg(spec));
	else if (rank == 0 && !rl_mpi_get_stats(m, RL_TOTAL, &t, sizeof(t)))
		printf("{\"np\":%d,\"read_once\":%d,\"seconds\":%.4f,\"bytes_read\":%" PRIu64
		       ",\"bytes_sent\":%" PRIu64 ",\"bytes_received\":%" PRIu64 ",\"read_seconds\":%.4f"
		       ",\"transfer_seconds\":%.4f}\n", size, read_once, secs, t.bytes_read,
		       t.bytes_sent, t.bytes_received, t.read_seconds, t.transfer_seconds);
	rl_mpi_destroy(m);
	rl_loader_destroy(ld);
	rl_plan_destroy(plan);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
	MPI_Finalize();
	return ret ? 1 : 0;
}
