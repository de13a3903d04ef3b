/*
 * plan_memory.c - the plan's memory estimate (planner/estimate.c) against
 * the peak RSS a build really takes, scenario by scenario.
 *
 *   make build/tests/memory/plan_memory && build/tests/memory/plan_memory [NAME...]
 *
 * Checkpoints are built in memory (no files), so the build's own memory is
 * the only thing that grows between the two RSS readings. Each scenario
 * runs in a child process: its peak (getrusage maxrss) is its own. Prints
 * a table: the estimate, the measured growth of RSS during the build and
 * the library's own peak of allocated bytes (common/alloc.c counts them),
 * each with its ratio to the estimate. RINGLOAD_LIBC_MALLOC=1 measures with libc's malloc instead
 * of jemalloc. docs/validation.md quotes the results.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../planner/pl_private.h"

struct scenario {
	const char *name;
	const char *what;
	void (*make)(struct pl_ckpt *ck, uint32_t n);
	uint32_t n;                 /* the scenario's size parameter */
	const char *spec_fmt;       /* printf format of the spec, given n */
	int mode;                   /* 1: read once, 2: every process's stats */
};

static void add(struct pl_ckpt *ck, size_t cap, const char *name, uint32_t file,
		unsigned ndim, uint64_t d0, uint64_t d1, uint64_t *off)
{
	struct pl_tensor *t = &ck->tensors[ck->ntensors++];

	if (ck->ntensors > cap)
		abort();
	t->name = strdup(name);
	t->shape = calloc(2, sizeof(uint64_t));
	t->shape[0] = d0;
	t->shape[1] = d1;
	t->ndim = (uint8_t)ndim;
	t->dtype = RL_DTYPE_BF16;
	t->file = file;
	t->offset = off[file];
	t->nbytes = d0 * (ndim > 1 ? d1 : 1) * 2;
	off[file] += t->nbytes;
	ck->files[file].size = off[file];
}

static int by_name_cmp(const void *a, const void *b, void *arg)
{
	const struct pl_tensor *t = arg;

	return strcmp(t[*(const uint32_t *)a].name, t[*(const uint32_t *)b].name);
}

static void finish(struct pl_ckpt *ck)
{
	ck->by_name = malloc(ck->ntensors * sizeof(uint32_t));
	for (size_t i = 0; i < ck->ntensors; i++)
		ck->by_name[i] = (uint32_t)i;
	qsort_r(ck->by_name, ck->ntensors, sizeof(uint32_t), by_name_cmp, ck->tensors);
}

static void files(struct pl_ckpt *ck, size_t nfiles, size_t ntensors)
{
	ck->nfiles = nfiles;
	ck->files = calloc(nfiles, sizeof(*ck->files));
	for (size_t f = 0; f < nfiles; f++) {
		char p[32];

		snprintf(p, sizeof(p), "mem%zu.safetensors", f);
		ck->files[f].path = strdup(p);
	}
	ck->tensors = calloc(ntensors, sizeof(*ck->tensors));
}

/* A llama-like model of 2 layers (21 tensors, as mkckpt's 2 MB sample). */
static void llama21(struct pl_ckpt *ck, uint32_t n)
{
	static const char *const w[] = { "q", "k", "v", "o", "gate", "up", "down" };
	uint64_t off[1] = { 4096 };
	char name[64];

	(void)n;
	files(ck, 1, 21);
	add(ck, 21, "embed", 0, 2, 4000, 64, off);
	for (int l = 0; l < 2; l++) {
		for (int k = 0; k < 7; k++) {
			snprintf(name, sizeof(name), "l%d.%s", l, w[k]);
			add(ck, 21, name, 0, 2, k < 4 ? 64 : 172, 64, off);
		}
		snprintf(name, sizeof(name), "l%d.norm1", l);
		add(ck, 21, name, 0, 1, 64, 1, off);
		snprintf(name, sizeof(name), "l%d.norm2", l);
		add(ck, 21, name, 0, 1, 64, 1, off);
	}
	add(ck, 21, "norm", 0, 1, 64, 1, off);
	add(ck, 21, "lm_head", 0, 2, 4000, 64, off);
	finish(ck);
}

/* n tensors in 10 files, half 512 x 1024, half 1024 x 512 (names a*, b*). */
static void many(struct pl_ckpt *ck, uint32_t n)
{
	uint64_t off[10] = { 0 };
	char name[64];

	files(ck, 10, n);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t f = (uint32_t)((uint64_t)i * 10 / n);

		snprintf(name, sizeof(name), "%c%07u", i % 2 ? 'b' : 'a', i);
		add(ck, n, name, f, 2, i % 2 ? 1024 : 512, i % 2 ? 512 : 1024, off);
	}
	finish(ck);
}

static const struct scenario scenarios[] = {
	{ "repl-64k", "21 tensors replicated on 65,536 devices", llama21, 65536,
	  "{\"mesh\":{\"shape\":[%u],\"axes\":[\"d\"]}}", 0 },
	{ "repl-256k", "21 tensors replicated on 262,144 devices", llama21, 262144,
	  "{\"mesh\":{\"shape\":[%u],\"axes\":[\"d\"]}}", 0 },
	{ "rows-64k", "21 tensors split by rows over 65,536 devices", llama21, 65536,
	  "{\"mesh\":{\"shape\":[%u],\"axes\":[\"d\"]},\"rules\":[{\"match\":\".*\","
	  "\"spec\":[\"d\"]}]}", 0 },
	{ "cols-64k", "21 tensors split by columns over 65,536 devices", llama21, 65536,
	  "{\"mesh\":{\"shape\":[%u],\"axes\":[\"d\"]},\"rules\":[{\"match\":\"(embed|lm_head"
	  "|l[0-9]\\\\.(q|k|v|o|gate|up|down))\",\"spec\":[null,\"d\"]}]}", 0 },
	{ "100k-32", "100,000 tensors in 10 files, 32 devices, rows and columns", many,
	  100000, "{\"mesh\":{\"shape\":[32],\"axes\":[\"m\"]},\"rules\":["
	  "{\"match\":\"a.*\",\"spec\":[\"m\"]},{\"match\":\"b.*\",\"spec\":[null,\"m\"]}]}", 0 },
	{ "100k-256", "100,000 tensors, 8 processes x 32 devices (one planned)", many,
	  100000, "{\"mesh\":{\"shape\":[8,32],\"axes\":[\"p\",\"m\"],\"process_of_device\":"
	  "PROCS},\"rules\":[{\"match\":\"a.*\",\"spec\":[\"m\"]},"
	  "{\"match\":\"b.*\",\"spec\":[null,\"m\"]}]}", 0 },
	{ "stats-8x32", "100,000 tensors, 8 processes x 32 devices, every process's stats",
	  many, 100000, "{\"mesh\":{\"shape\":[8,32],\"axes\":[\"p\",\"m\"],"
	  "\"process_of_device\":PROCS},\"rules\":[{\"match\":\"a.*\",\"spec\":[\"m\"]},"
	  "{\"match\":\"b.*\",\"spec\":[null,\"m\"]}]}", 2 },
	{ "ro-10k", "10,000 tensors read once by 8 processes x 32 devices", many, 10000,
	  "{\"mesh\":{\"shape\":[8,32],\"axes\":[\"p\",\"m\"],\"process_of_device\":"
	  "PROCS},\"rules\":[{\"match\":\"a.*\",\"spec\":[\"m\"]}]}", 1 },
};

/* The spec text: %u is n; PROCS is replaced by 8 processes of 32 devices. */
static char *spec_text(const struct scenario *sc)
{
	char *out = malloc(1 << 16), procs[4096];
	const char *p = strstr(sc->spec_fmt, "PROCS");
	size_t n = 0;

	n += (size_t)snprintf(procs + n, sizeof(procs) - n, "[");
	for (int d = 0; d < 256; d++)
		n += (size_t)snprintf(procs + n, sizeof(procs) - n, "%s%d", d ? "," : "", d / 32);
	snprintf(procs + n, sizeof(procs) - n, "]");
	if (p)
		snprintf(out, 1 << 16, "%.*s%s%s", (int)(p - sc->spec_fmt), sc->spec_fmt, procs,
			 p + 5);
	else
		snprintf(out, 1 << 16, sc->spec_fmt, sc->n);
	return out;
}

static long rss_kib(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static long maxrss_kib(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static void run(const struct scenario *sc)
{
	struct pl_ckpt ck = { 0 };
	struct pl_align al[16];
	struct pl_spec *s = pl_spec_new();
	struct pl_plan *p = NULL;
	struct pl_opts o;
	struct cm_err e = { 0 };
	char *json = spec_text(sc);
	long base, peak, lib0, lib;
	struct timespec t0, t1;
	int ret;

	sc->make(&ck, sc->n);
	for (size_t f = 0; f < CM_ARRAY_SIZE(al); f++)
		al[f] = (struct pl_align){ 4096, 4096 };
	if (pl_spec_parse(s, json, strlen(json), &e)) {
		printf("%-10s spec: %s\n", sc->name, e.msg);
		exit(1);
	}
	pl_opts_default(&o);
	o.max_memory = 0;
	o.all_stats = sc->mode == 2;
	o.read_once = sc->mode == 1;
	base = rss_kib();
	if (maxrss_kib() > base)
		base = maxrss_kib();   /* the high-water mark so far bounds the baseline */
	cm_alloc_peak_reset();
	lib0 = cm_alloc_live_bytes();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = pl_plan_build(&ck, s, al, &o, &p, &e);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	peak = maxrss_kib();
	lib = cm_alloc_peak_bytes() - lib0;
	if (ret) {
		printf("%-10s build: %s\n", sc->name, e.msg);
		exit(1);
	}
	printf("%-10s %9zu %9zu %8.1f %8.1f %5.2f %8.1f %5.2f %6.2fs  %s\n", sc->name,
	       (size_t)p->nshards, (size_t)p->ncopies, p->memory_estimate / 1048576.0,
	       (peak - base) / 1024.0, (double)p->memory_estimate / ((peak - base) * 1024.0 + 1),
	       lib / 1048576.0, (double)p->memory_estimate / (lib + 1.0),
	       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, sc->what);
	exit(0);
}

int main(int argc, char **argv)
{
	printf("%-10s %9s %9s %8s %8s %5s %8s %5s %7s  %s\n", "scenario", "shards", "copies",
	       "est_MiB", "rss_MiB", "ratio", "lib_MiB", "ratio", "time", "what");
	fflush(stdout);
	for (size_t i = 0; i < CM_ARRAY_SIZE(scenarios); i++) {
		int wanted = argc < 2, st;
		pid_t pid;

		for (int a = 1; a < argc; a++)
			wanted |= !strcmp(argv[a], scenarios[i].name);
		if (!wanted)
			continue;
		pid = fork();
		if (pid == 0)
			run(&scenarios[i]);
		waitpid(pid, &st, 0);
		fflush(stdout);
	}
	return 0;
}
