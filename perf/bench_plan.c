/*
 * bench_plan.c - how fast and how small the planner is at scale.
 *
 *   build/perf/bench_plan [--dir DIR] [--only 100k|100k-rows|70b]
 *
 * Writes header-only checkpoints (sparse files: the data is a hole made by
 * ftruncate, so nothing but the headers touches the disk) and plans them
 * through the public API:
 *
 *   100k  100,000 tensors in 10 files on a 256-device mesh (8 processes x 32
 *         devices): half split on dim 0, half on dim 1 over the 32 local
 *         devices, replicated across processes. One process's plan. Also
 *         writes 100k-2d.json (rows split over both axes, ["data","model"];
 *         for perf/plan_cli.sh).
 *   100k-rows  short strided rows (issue 33 item 5): 100,000 BF16 [64, 256]
 *         tensors in 10 files on the same mesh, half split over both axes
 *         (["data","model"]: 8 rows of 16 bytes per device), half over the
 *         second (64 rows of 16 bytes). One process's plan. Also 10,000
 *         BF16 [64, 8192] tensors ("wide-rows") with columns over both axes:
 *         64 bytes per device of each 16 KiB row, 2 KiB per process, so
 *         rows lie further apart than the gap that coalesces.
 *   70b   a 70B-parameter-like layout (80 layers x 7 BF16 matrices plus
 *         embeddings, ~140 GB, 30 files) on 1,024 processes x 8 devices:
 *         cluster totals for a sharding that partitions every tensor across
 *         processes (rows over processes, columns over local devices), and
 *         for tensor parallelism inside each process (every process reads
 *         everything).
 *
 * Each scenario runs in a child process so that its peak RSS (getrusage
 * maxrss) is its own. Prints a table.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ringload.h"
#include "perf_time.h"

struct tdef {
	char name[64];
	uint64_t rows, cols;
};

static void die(const char *what, const char *msg)
{
	fprintf(stderr, "bench_plan: %s: %s\n", what, msg);
	exit(1);
}

/* Writes tensors [0, n) into nfiles header-only BF16 files under dir. */
static void write_ckpt(const char *dir, const struct tdef *t, size_t n, unsigned nfiles)
{
	size_t per = (n + nfiles - 1) / nfiles, cap = 256 * per + 64;
	char *hdr = malloc(cap);

	if (!hdr)
		die(dir, "out of memory");
	if (mkdir(dir, 0755) && errno != EEXIST)
		die(dir, strerror(errno));
	for (unsigned f = 0; f < nfiles; f++) {
		char path[4096];
		size_t len = 0, a = f * per, b = a + per < n ? a + per : n;
		uint64_t off = 0, hl;
		int fd;

		len += (size_t)snprintf(hdr + len, cap - len, "{");
		for (size_t i = a; i < b; i++) {
			uint64_t nb = t[i].rows * t[i].cols * 2;

			len += (size_t)snprintf(hdr + len, cap - len,
						"%s\"%s\":{\"dtype\":\"BF16\",\"shape\":[%" PRIu64 ",%" PRIu64
						"],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
						i > a ? "," : "", t[i].name, t[i].rows, t[i].cols, off,
						off + nb);
			off += nb;
		}
		len += (size_t)snprintf(hdr + len, cap - len, "}");
		while (len % 8)             /* the reference pads to 8 bytes */
			hdr[len++] = ' ';
		snprintf(path, sizeof(path), "%s/model-%05u.safetensors", dir, f);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		hl = len;
		if (fd < 0 || write(fd, &hl, 8) != 8 || write(fd, hdr, len) != (ssize_t)len ||
		    ftruncate(fd, (off_t)(8 + len + off)) || close(fd))
			die(path, strerror(errno));
	}
	free(hdr);
}

static void write_file(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(s, f) < 0 || fclose(f))
		die(path, strerror(errno));
}

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

static long maxrss_mib(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss / 1024;
}

/* Opens dir, plans process `proc` under spec; prints one line. */
static int read_once;

static void run_plan(const char *label, const char *dir, const char *spec_path, int proc,
		     int all_stats, int print_procs)
{
	rl_ckpt *ck = rl_ckpt_create();
	rl_spec *spec = rl_spec_create();
	rl_plan *plan = rl_plan_create();
	rl_plan_stats own, tot;
	double t0, t1, t2, c1, c2;
	long rss0;
	uint64_t ncopies = 0, size = 0;

	t0 = perf_now_s();
	if (rl_ckpt_open(ck, dir))
		die(dir, rl_ckpt_errmsg(ck));
	if (rl_spec_load(spec, spec_path))
		die(spec_path, rl_spec_errmsg(spec));
	rss0 = maxrss_mib();
	t1 = perf_now_s();
	c1 = cpu_seconds();
	rl_plan_set(plan, RL_PLAN_PROCESS, proc);
	rl_plan_set(plan, RL_PLAN_ALL_STATS, all_stats);
	rl_plan_set(plan, RL_PLAN_READ_ONCE, read_once);
	if (rl_plan_build(plan, ck, spec))
		die("plan", rl_plan_errmsg(plan));
	t2 = perf_now_s();
	c2 = cpu_seconds();
	rl_plan_get_stats(plan, proc, &own);
	if (all_stats)
		rl_plan_get_stats(plan, RL_TOTAL, &tot);
	for (size_t q = 0; q < rl_plan_num_requests(plan); q++) {
		rl_request_info ri;

		rl_plan_request(plan, q, &ri);
		ncopies += ri.ncopies;
	}
	for (size_t f = 0; f < rl_ckpt_num_files(ck); f++)
		size += rl_ckpt_file_size(ck, f);
	printf("%-40s %8zu %9zu %7.3f %7.3f %7.3f %7ld %7ld\n", label, rl_ckpt_num_tensors(ck),
	       rl_plan_num_shards(plan), t1 - t0, t2 - t1, c2 - c1, rss0, maxrss_mib());
	printf("    process %d: devices %" PRIu64 ", needed %" PRIu64 ", read %" PRIu64
	       ", blocks %" PRIu64 ", requests %" PRIu64 ", copies %" PRIu64 ", files %" PRIu64 "\n",
	       proc, own.devices, own.needed_bytes, own.read_bytes, own.blocks, own.requests,
	       ncopies, own.files_opened);
	if (all_stats) {
		printf("    cluster (%u processes): devices %" PRIu64 ", needed %" PRIu64 ", read %" PRIu64
		       " (%.4f x checkpoint %" PRIu64 "), blocks %" PRIu64 ", requests %" PRIu64
		       ", files opened %" PRIu64 "\n",
		       rl_plan_num_processes(plan), tot.devices, tot.needed_bytes, tot.read_bytes,
		       (double)tot.read_bytes / size, size, tot.blocks, tot.requests,
		       tot.files_opened);
	}
	if (all_stats) {
		rl_plan_xstats x = { .size = sizeof(x) };
		uint64_t ntr = 0, nb = 0;

		rl_plan_get_xstats(plan, RL_TOTAL, &x);
		rl_plan_transfer_summary(plan, &ntr, &nb, NULL);
		printf("    transfers %" PRIu64 " in %" PRIu64 " batches, %" PRIu64 " bytes broadcast; "
		       "largest read share %.4f x the mean; files opened per process max %" PRIu64
		       ", mean %.2f\n", ntr, nb, x.sent_bytes,
		       tot.read_bytes ? (double)x.max_read_bytes * rl_plan_num_processes(plan) /
					tot.read_bytes : 1.0,
		       x.max_files_opened, (double)x.files_opened / rl_plan_num_processes(plan));
	}
	if (read_once)
		printf("    read once: process %d takes part in %zu transfers\n", proc,
		       rl_plan_num_transfers(plan));
	if (print_procs) {
		for (int p = 0; p < print_procs; p++) {
			rl_plan_stats s;

			rl_plan_get_stats(plan, p, &s);
			printf("      p%-4d needed %" PRIu64 " read %" PRIu64 " requests %" PRIu64 "\n",
			       p, s.needed_bytes, s.read_bytes, s.requests);
		}
	}
	fflush(stdout);
	rl_plan_destroy(plan);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
}

/* Runs fn in a child so its peak memory is its own. */
static void in_child(void (*fn)(const char *), const char *dir)
{
	pid_t pid;
	int st;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		die("fork", strerror(errno));
	if (!pid) {
		fn(dir);
		exit(0);
	}
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		die("scenario", "failed");
}

/* The 100k scenario's mesh (8 processes x 32 devices) with rules. */
static void write_100k_spec(const char *path, const char *rules)
{
	char *s = malloc(8192);
	size_t len = 0;

	if (!s)
		die(path, "out of memory");
	len += (size_t)snprintf(s + len, 8192 - len,
				"{\"mesh\":{\"shape\":[8,32],\"axes\":[\"data\",\"model\"],"
				"\"process_of_device\":[");
	for (int d = 0; d < 256; d++)
		len += (size_t)snprintf(s + len, 8192 - len, "%s%d", d ? "," : "", d / 32);
	snprintf(s + len, 8192 - len, "]},\"rules\":[%s]}", rules);
	write_file(path, s);
	free(s);
}

static void scenario_100k(const char *base)
{
	enum { N = 100000 };
	struct tdef *t = calloc(N, sizeof(*t));
	char dir[4096], spec[4096];

	snprintf(dir, sizeof(dir), "%s/100k", base);
	for (int i = 0; i < N; i++) {
		snprintf(t[i].name, sizeof(t[i].name), "layers.%d.%s.weight", i / 2,
			 i % 2 ? "col" : "row");
		t[i].rows = 1024;
		t[i].cols = 256;
	}
	write_ckpt(dir, t, N, 10);
	free(t);
	snprintf(spec, sizeof(spec), "%s/100k.json", base);
	write_100k_spec(spec, "{\"match\":\".*row.*\",\"spec\":[\"model\"]},"
			"{\"match\":\".*col.*\",\"spec\":[null,\"model\"]}");
	/* issue 24's layout: rows over both axes, columns over the local one */
	snprintf(spec, sizeof(spec), "%s/100k-2d.json", base);
	write_100k_spec(spec, "{\"match\":\".*row.*\",\"spec\":[\"data\",\"model\"]},"
			"{\"match\":\".*col.*\",\"spec\":[null,\"model\"]}");
	printf("%-40s %8s %9s %7s %7s %7s %7s %7s\n", "scenario", "tensors", "shards", "open_s",
	       "plan_s", "cpu_s", "rss0MiB", "peakMiB");
}

static void plan_100k(const char *base)
{
	char dir[4096], spec[4096];

	snprintf(dir, sizeof(dir), "%s/100k", base);
	snprintf(spec, sizeof(spec), "%s/100k.json", base);
	run_plan("100k tensors, 256 dev, process 3", dir, spec, 3, 0, 0);
}

static void plan_100k_all(const char *base)
{
	char dir[4096], spec[4096];

	snprintf(dir, sizeof(dir), "%s/100k", base);
	snprintf(spec, sizeof(spec), "%s/100k.json", base);
	run_plan("100k tensors, 256 dev, p3 + all stats", dir, spec, 3, 1, 0);
}

static void run_100k(const char *base)
{
	scenario_100k(base);
}

static void run_100k_rows(const char *base)
{
	enum { N = 100000 };
	struct tdef *t = calloc(N, sizeof(*t));
	char dir[4096], spec[4096];

	if (!t)
		die(base, "out of memory");
	snprintf(dir, sizeof(dir), "%s/100k-rows", base);
	for (int i = 0; i < N; i++) {
		snprintf(t[i].name, sizeof(t[i].name), "layers.%d.%s.weight", i / 2,
			 i % 2 ? "col" : "both");
		t[i].rows = 64;
		t[i].cols = 256;
	}
	write_ckpt(dir, t, N, 10);
	free(t);
	snprintf(spec, sizeof(spec), "%s/100k-rows.json", base);
	write_100k_spec(spec, "{\"match\":\".*both.*\",\"spec\":[\"data\",\"model\"]},"
			"{\"match\":\".*col.*\",\"spec\":[null,\"model\"]}");
	snprintf(dir, sizeof(dir), "%s/wide-rows", base);
	t = calloc(N / 10, sizeof(*t));
	if (!t)
		die(base, "out of memory");
	for (int i = 0; i < N / 10; i++) {
		snprintf(t[i].name, sizeof(t[i].name), "layers.%d.weight", i);
		t[i].rows = 64;
		t[i].cols = 8192;
	}
	write_ckpt(dir, t, N / 10, 10);
	free(t);
	snprintf(spec, sizeof(spec), "%s/wide-rows.json", base);
	write_100k_spec(spec, "{\"match\":\".*\",\"spec\":[null,[\"data\",\"model\"]]}");
	printf("%-40s %8s %9s %7s %7s %7s %7s %7s\n", "scenario", "tensors", "shards", "open_s",
	       "plan_s", "cpu_s", "rss0MiB", "peakMiB");
}

static void plan_100k_rows(const char *base)
{
	char dir[4096], spec[4096];

	snprintf(dir, sizeof(dir), "%s/100k-rows", base);
	snprintf(spec, sizeof(spec), "%s/100k-rows.json", base);
	run_plan("100k short rows, 256 dev, process 3", dir, spec, 3, 0, 0);
}

static void plan_wide_rows(const char *base)
{
	char dir[4096], spec[4096];

	snprintf(dir, sizeof(dir), "%s/wide-rows", base);
	snprintf(spec, sizeof(spec), "%s/wide-rows.json", base);
	run_plan("10k wide rows, 256 dev, process 3", dir, spec, 3, 0, 0);
}

static size_t layout_70b(struct tdef *t)
{
	static const struct {
		const char *name;
		uint64_t rows, cols;
	} m[] = {
		{ "self_attn.q_proj", 8192, 8192 },   { "self_attn.k_proj", 1024, 8192 },
		{ "self_attn.v_proj", 1024, 8192 },   { "self_attn.o_proj", 8192, 8192 },
		{ "mlp.gate_proj", 28672, 8192 },     { "mlp.up_proj", 28672, 8192 },
		{ "mlp.down_proj", 8192, 28672 },
	};
	size_t n = 0;

	snprintf(t[n].name, sizeof(t[n].name), "model.embed_tokens.weight");
	t[n].rows = 128256;
	t[n++].cols = 8192;
	for (int l = 0; l < 80; l++)
		for (size_t k = 0; k < 7; k++) {
			snprintf(t[n].name, sizeof(t[n].name), "model.layers.%d.%s.weight", l,
				 m[k].name);
			t[n].rows = m[k].rows;
			t[n++].cols = m[k].cols;
		}
	snprintf(t[n].name, sizeof(t[n].name), "lm_head.weight");
	t[n].rows = 128256;
	t[n++].cols = 8192;
	return n;
}

static void write_mesh_spec(const char *path, const char *rules)
{
	size_t cap = 1 << 20, len = 0;
	char *s = malloc(cap);

	len += (size_t)snprintf(s + len, cap - len,
				"{\"mesh\":{\"shape\":[1024,8],\"axes\":[\"proc\",\"local\"],"
				"\"process_of_device\":[");
	for (int d = 0; d < 8192; d++)
		len += (size_t)snprintf(s + len, cap - len, "%s%d", d ? "," : "", d / 8);
	snprintf(s + len, cap - len, "]},\"rules\":%s}", rules);
	write_file(path, s);
	free(s);
}

static void run_70b(const char *base)
{
	struct tdef t[600];
	size_t n = layout_70b(t);
	char dir[4096], spec1[4096], spec2[4096];

	snprintf(dir, sizeof(dir), "%s/70b", base);
	write_ckpt(dir, t, n, 30);
	snprintf(spec1, sizeof(spec1), "%s/70b-partitioned.json", base);
	snprintf(spec2, sizeof(spec2), "%s/70b-tp8.json", base);
	write_mesh_spec(spec1, "[{\"match\":\".*\",\"spec\":[\"proc\",\"local\"]}]");
	write_mesh_spec(spec2, "[{\"match\":\".*\",\"spec\":[\"local\"]}]");
	printf("%-40s %8s %9s %7s %7s %7s %7s %7s\n", "scenario", "tensors", "shards", "open_s",
	       "plan_s", "cpu_s", "rss0MiB", "peakMiB");
	run_plan("70B, 1024x8, rows/procs cols/local", dir, spec1, 0, 1, 4);
	run_plan("70B, 1024x8, TP8 in each process", dir, spec2, 0, 1, 0);
	read_once = 1;
	run_plan("70B, 1024x8, TP8, read once", dir, spec2, 0, 1, 0);
	read_once = 0;
}

int main(int argc, char **argv)
{
	const char *dir = "/tmp/ringload-bench-plan", *only = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "--only") && i + 1 < argc)
			only = argv[++i];
		else {
			fprintf(stderr, "usage: bench_plan [--dir DIR] [--only 100k|100k-rows|70b]\n");
			return 2;
		}
	}
	if (mkdir(dir, 0755) && errno != EEXIST)
		die(dir, strerror(errno));
	if (!only || !strcmp(only, "100k")) {
		in_child(run_100k, dir);
		in_child(plan_100k, dir);
		in_child(plan_100k_all, dir);
	}
	if (!only || !strcmp(only, "100k-rows")) {
		in_child(run_100k_rows, dir);
		in_child(plan_100k_rows, dir);
		in_child(plan_wide_rows, dir);
	}
	if (!only || !strcmp(only, "70b"))
		in_child(run_70b, dir);
	return 0;
}
