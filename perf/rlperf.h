/*
 * rlperf.h - rlperf's parts: fio-spelled options, the job generator and
 * runner (raw reads on ringload's engine), the log-scale latency histogram,
 * and normal / fio-shaped JSON output. rlperf.c holds main() and the
 * checkpoint mode; every other file is also compiled into tests/test_rlperf.
 */
#ifndef RLPERF_H
#define RLPERF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../engine/engine.h"

#define RP_VERSION "rlperf-" RINGLOAD_VERSION_STRING

/* ---------------------------------------------------------------- */
/* Options (rlperf_opts.c)                                           */
/* ---------------------------------------------------------------- */

enum rp_rw { RP_READ = 0, RP_RANDREAD = 1 };
enum rp_format { RP_FMT_NORMAL = 0, RP_FMT_JSON = 1 };

struct rp_opts {
	const char *name;        /* --name (fio's job name) */
	const char *filename;
	uint64_t size;           /* 0: the file's size less offset */
	uint64_t offset;
	int rw;                  /* enum rp_rw */
	uint64_t bs;
	unsigned iodepth;
	int direct;
	int engine;              /* enum eng_backend */
	int fixedbufs, registerfiles;
	unsigned numjobs;
	uint64_t runtime_ns;     /* 0: no limit */
	uint64_t ramp_ns;
	int time_based;
	int format;              /* enum rp_format */
	uint64_t seed;           /* --randseed */
	/* checkpoint mode */
	const char *checkpoint, *sharding;
	int process;
	int engine_set, bs_set, iodepth_set, direct_set; /* given explicitly */
};

/* Limits: fio's own where it has them. */
#define RP_MAX_BS (256ull << 20)
#define RP_MAX_IODEPTH 65536u
#define RP_MAX_NUMJOBS 1024u

/* parse results besides 0 (run) */
#define RP_PARSE_ERROR (-1)
#define RP_PARSE_HELP 1
#define RP_PARSE_VERSION 2

void rp_opts_default(struct rp_opts *o);

/*
 * Parses argv[1..argc) into o (defaults first). Options take fio's spelling:
 * "--bs=4k" or "--bs 4k"; flags ("--fixedbufs") also accept =0/=1. Returns
 * 0, RP_PARSE_HELP, RP_PARSE_VERSION, or RP_PARSE_ERROR with a one-line
 * message in err (no trailing newline).
 */
int rp_parse_args(int argc, char **argv, struct rp_opts *o, char *err,
		  size_t errlen);

/*
 * fio's number syntax: decimal or 0x hex, an optional suffix k/m/g/t/p
 * (powers of 1024; "KiB", "kb", "K" all mean 1024). Returns 0 or -1.
 */
int rp_parse_size(const char *s, uint64_t *out);

/* A duration: plain numbers are seconds; suffixes us, ms, s, m, h, d. */
int rp_parse_time(const char *s, uint64_t *ns);

const char *rp_engine_name(int engine);  /* fio's name: io_uring, libaio, psync */
const char *rp_backend_name(int backend); /* ringload's: auto, io_uring, libaio, pread */
void rp_usage(FILE *f);

/* ---------------------------------------------------------------- */
/* Latency histogram (rlperf_hist.c), fio's layout                   */
/* ---------------------------------------------------------------- */

/*
 * Values below 2 * 64 ns get a bucket each; above, every power of two is
 * cut into 64 buckets, so a bucket is at most 1/64 (1.6%) of its value
 * wide. 29 groups cover up to 2^34 ns (17 s); slower reads land in the
 * last bucket (and still count exactly in min, max and mean).
 */
#define RP_PLAT_BITS 6
#define RP_PLAT_VAL (1u << RP_PLAT_BITS)
#define RP_PLAT_GROUPS 29
#define RP_PLAT_NR (RP_PLAT_GROUPS * RP_PLAT_VAL)

struct rp_hist {
	uint64_t n, min, max;
	uint64_t sum;                  /* ns: 584 years before it wraps */
	unsigned __int128 sumsq;       /* exact, for the standard deviation */
	uint64_t bucket[RP_PLAT_NR];
};

/* The percentiles rlperf (and fio) print. */
#define RP_NPCT 17
extern const double rp_pct_list[RP_NPCT];

void rp_hist_init(struct rp_hist *h);
unsigned rp_hist_index(uint64_t ns);
uint64_t rp_hist_value(unsigned idx);    /* the middle of the bucket */

static inline void rp_hist_add(struct rp_hist *h, uint64_t ns)
{
	h->bucket[rp_hist_index(ns)]++;
	if (ns < h->min)
		h->min = ns;
	if (ns > h->max)
		h->max = ns;
	h->n++;
	h->sum += ns;
	h->sumsq += (unsigned __int128)ns * ns;
}

void rp_hist_merge(struct rp_hist *dst, const struct rp_hist *src);
double rp_hist_mean(const struct rp_hist *h);
double rp_hist_stddev(const struct rp_hist *h);

/*
 * Fills out[i] with the value at percentile pct[i] (ascending, 0 < p <=
 * 100), computed as fio does: the first bucket where the running count
 * reaches p% of all samples, reported as that bucket's middle. All zero
 * when the histogram is empty.
 */
void rp_hist_percentiles(const struct rp_hist *h, const double *pct, size_t n,
			 uint64_t *out);

/* ---------------------------------------------------------------- */
/* Job generator and runner (rlperf_job.c)                           */
/* ---------------------------------------------------------------- */

/*
 * Offsets of one job: sequential, or a random permutation of the blocks
 * (each block once per pass, like fio's random map, without the map: a
 * full-period LCG over the next power of two, scrambled by a bijection,
 * skipping values past the last block).
 */
struct rp_gen {
	uint64_t base, bs, nblocks;
	int random;
	uint64_t i;             /* blocks issued in this pass */
	uint64_t pass;
	uint64_t x, inc, mask;  /* random: LCG state, odd increment, 2^k - 1 */
	unsigned shift;         /* random: half of k, for the scramble */
	uint64_t seed;
};

void rp_gen_init(struct rp_gen *g, uint64_t base, uint64_t bytes, uint64_t bs,
		 int random, uint64_t seed);
/* Next offset of this pass; 0 at the end of a pass (the next call starts a
 * new one, in a new order), else 1. */
int rp_gen_next(struct rp_gen *g, uint64_t *off);

/* The engine entry points; tests substitute a fake. */
struct rp_engine_ops {
	void (*opts_default)(struct eng_opts *o);
	int (*create)(const struct eng_opts *o, struct eng **out, struct rl_err *e);
	int (*run)(struct eng *eng, const struct eng_job *job, struct eng_stats *st,
		   struct rl_err *e);
	void (*destroy)(struct eng *eng);
};

/* Everything a run measured, all jobs together (fio's group reporting). */
struct rp_result {
	uint64_t bytes, ios;
	double runtime_s;        /* first counted submit to last completion */
	double elapsed_s;        /* wall time, ramp included */
	struct rp_hist clat;
	double usr_s, sys_s;     /* CPU of the whole process while measuring */
	uint64_t ctx, majf, minf;
	uint64_t vctx;           /* voluntary context switches only (ctx counts both) */
	unsigned numjobs;
	struct eng_stats eng;    /* job 0's engine statistics */
	uint64_t start_unix_ms;
	int error;               /* 0, or the first job's negative code */
	char errmsg[RL_ERRMSG_MAX];
};

/*
 * Runs o->numjobs jobs on threads, each with its own engine, and fills r
 * (allocated by the caller: it holds the histogram). file_size is the size
 * of o->filename. Returns 0, or a negative code with a one-line message in
 * r->errmsg.
 */
int rp_run(const struct rp_opts *o, uint64_t file_size,
	   const struct rp_engine_ops *ops, struct rp_result *r);

/* Asks running jobs to stop (async-signal-safe): SIGINT ends a run early. */
void rp_stop(void);

/* ---------------------------------------------------------------- */
/* Output (rlperf_out.c)                                             */
/* ---------------------------------------------------------------- */

void rp_print_normal(FILE *f, const struct rp_opts *o, const struct rp_result *r);
void rp_print_json(FILE *f, const struct rp_opts *o, const struct rp_result *r);

/* "1024KiB", "4096B": fio's way of printing a block size. */
void rp_fmt_bytes_iec(char *buf, size_t len, uint64_t v);
/* A JSON string body with quotes, backslashes and controls escaped. */
void rp_json_str(FILE *f, const char *s);

#endif /* RLPERF_H */
