/*
 * rlperf.h - the parts of rlperf and the types they share.
 *
 * Calls run one way, each file only down this list:
 *
 *   rlperf_main.c   main: parse, then the checkpoint mode or set-up, run, report
 *   rlperf_ckpt.c   checkpoint mode (public API only)
 *   rlperf_eta.c    while jobs run: the status line (fio's ETA), and the
 *                   reports of --status-interval
 *   rlperf_out.c    normal report       } all build on rlperf_unit.c:
 *   rlperf_json.c   fio-shaped JSON     } jobs merged as fio reports them
 *   rlperf_terse.c  fio's terse (v3)    }
 *   rlperf_unit.c   report units (group_reporting), latency and depth bins
 *   rlperf_disk.c   disk utilization of the disks under the files (fio's)
 *   rlperf_run.c    job threads feeding ringload's engine
 *   rlperf_setup.c  files, sizes and regions of every job clone, cache invalidation
 *   rlperf_opts.c   the option table, command line and job files -> struct rp_conf
 *   rlperf_ini.c    the job file reader (sections of key=value lines)
 *   rlperf_fionames.c  the names of fio's options (to tell "not in rlperf"
 *                   from "unrecognized")
 *   rlperf_num.c    fio's number and time syntax
 *   rlperf_log.c    fio's per-read logs (write_lat_log, _bw_, _iops_)
 *   rlperf_gen.c    offsets (sequential, random permutation, random map off)
 *   rlperf_dist.c   fio's random distributions (zipf, pareto, normal, zoned)
 *   rlperf_hist.c   fio's log-scale latency histogram
 *
 * Every file but rlperf_main.c is also compiled into tests/test_rlperf.
 */
#ifndef RLPERF_H
#define RLPERF_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ringload.h"
#include "../engine/raw.h"   /* the engine, as rlperf may use it */

#define RP_VERSION "rlperf-" RINGLOAD_VERSION_STRING

#define RP_ERRMSG_MAX 8704     /* two paths of PATH_MAX and the words around */
#define RP_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Overflow-checked arithmetic: 0 and the result, or -1 on overflow. */
static inline int rp_mul64(uint64_t a, uint64_t b, uint64_t *out)
{
	return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

static inline int rp_add64(uint64_t a, uint64_t b, uint64_t *out)
{
	return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

/* Room for need elements of size bytes in *arr (capacity *cap), growing by
 * half again; 0, or -1 with *arr and *cap unchanged. */
static inline int rp_grow(void **arr, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap + *cap / 2 > need ? *cap + *cap / 2 : need + 4;
	void *p;

	if (need <= *cap)
		return 0;
	p = n > SIZE_MAX / size ? NULL : realloc(*arr, n * size);
	if (!p)
		return -1;
	*arr = p;
	*cap = n;
	return 0;
}

/* Limits: fio's own where it has them. */
#define RP_MAX_BS (256ull << 20)
#define RP_MAX_IODEPTH 1024u       /* the engine's: one pread thread per read at most */
#define RP_MAX_NUMJOBS 1024u
#define RP_MAX_FILES 4096u       /* files of one job (filename=a:b:...) */
#define RP_MAX_JOBS 4096u        /* job clones of a whole run */
#define RP_MAX_DISKS 256u        /* disks in disk_util */

/* ---------------------------------------------------------------- */
/* Numbers (rlperf_num.c)                                            */
/* ---------------------------------------------------------------- */

/*
 * fio's integer syntax: decimal, or hex after 0x; then an optional suffix,
 * case-insensitive: b (bytes), k/kb/ki, m/mb/mi, g.., t.., p.. which mean
 * powers of kb_base, and kib/mib/gib/tib/pib which mean the opposite base
 * (1000 when kb_base is 1024, 1024 when it is 1000), exactly as fio 3.33
 * reads them. With pct non-NULL, "N%" (N decimal, 0 to 100) is accepted
 * too: *pct = 1 and *out = N. Returns 0, or -1 (not such a number, or
 * past 2^64 - 1).
 */
int rp_parse_size(const char *s, unsigned kb_base, uint64_t *out, int *pct);

/* A duration: plain numbers are seconds; suffixes us/usec, ms/msec,
 * s/sec, m, h, d (any case). Returns 0 or -1. */
int rp_parse_time(const char *s, uint64_t *ns);

/* ---------------------------------------------------------------- */
/* Options (rlperf_opts.c, job files through rlperf_ini.c)           */
/* ---------------------------------------------------------------- */

enum rp_rw { RP_READ = 0, RP_RANDREAD = 1 };
enum rp_format { RP_FMT_NORMAL = 0, RP_FMT_JSON = 1, RP_FMT_JSONPLUS = 2, RP_FMT_TERSE = 3 };
enum rp_eta_when { RP_ETA_AUTO = 0, RP_ETA_ALWAYS = 1, RP_ETA_NEVER = 2 };

/* Every option, job options first (the bits of struct rp_job.set, more
 * than 64). */
typedef unsigned __int128 rp_optset;
#define RP_OPT_BIT(id) ((rp_optset)1 << (id))

enum rp_opt_id {
	/* job options: fio's fio_options[] */
	RP_O_NAME, RP_O_FILENAME, RP_O_DIRECTORY, RP_O_RW, RP_O_BS, RP_O_SIZE,
	RP_O_OFFSET, RP_O_OFFSET_INC, RP_O_IODEPTH, RP_O_NUMJOBS, RP_O_RUNTIME,
	RP_O_TIME_BASED, RP_O_RAMP, RP_O_IOENGINE, RP_O_DIRECT, RP_O_FIXEDBUFS,
	RP_O_REGFILES, RP_O_GROUP, RP_O_INVALIDATE, RP_O_NORANDOMMAP, RP_O_RANDSEED,
	RP_O_THREAD, RP_O_KB_BASE, RP_O_BUFFERED, RP_O_RANDDIST, RP_O_RANDGEN,
	RP_O_LATLOG, RP_O_BWLOG, RP_O_IOPSLOG, RP_O_LOGAVG, RP_O_LOGOFF, RP_O_LOGPRIO,
	RP_O_RATE, RP_O_RATE_IOPS, RP_O_RATE_PROC, RP_O_RATEMIN, RP_O_RATECYCLE,
	RP_O_SUBMIT_MODE, RP_O_STARTDELAY, RP_O_THINKTIME, RP_O_THINK_BLOCKS, RP_O_RANDREPEAT,
	RP_O_FLOW, RP_O_FLOW_ID, RP_O_FLOW_SLEEP, RP_O_HIPRI, RP_O_SQPOLL,
	RP_O_GTOD_REDUCE, RP_O_STONEWALL, RP_O_NEW_GROUP, RP_O_SS, RP_O_SS_DUR, RP_O_SS_RAMP,
	RP_O_LAT_TARGET, RP_O_LAT_WINDOW, RP_O_LAT_PCT, RP_O_LAT_RUN,
	RP_O_PRIOCLASS, RP_O_PRIO, RP_O_CMDPRIO_PCT, RP_O_CMDPRIO_CLASS, RP_O_CMDPRIO,
	RP_O_BATCH_SUBMIT, RP_O_BATCH_CMIN, RP_O_BATCH_CMAX, RP_O_IODEPTH_LOW, RP_O_IOMEM,
	/* command-line options: fio's l_opts[], and rlperf's checkpoint mode */
	RP_O_OUTPUT, RP_O_FORMAT, RP_O_MINIMAL, RP_O_TERSE_VER, RP_O_ETA, RP_O_STATUS, RP_O_READONLY,
	RP_O_CHECKPOINT,
	RP_O_SHARDING, RP_O_PROCESS, RP_O_HELP, RP_O_VERSION,
};

/* A size that may be a percentage of the file's size (size, offset,
 * offset_increment). */
struct rp_amount {
	uint64_t v;
	int pct;                 /* v is a percentage (0..100) */
};

/* random_distribution (fio's): which blocks random reads favour */
enum rp_dist_kind {
	RP_DIST_RANDOM = 0, RP_DIST_ZIPF, RP_DIST_PARETO, RP_DIST_NORMAL, RP_DIST_ZONED,
};

#define RP_MAX_ZONES 256u        /* fio's limit */

struct rp_zone {
	unsigned access;         /* percent of the reads */
	uint64_t size;           /* percent of the region, or bytes (zoned_abs) */
};

struct rp_dist {
	int kind;                /* enum rp_dist_kind */
	double p;                /* zipf theta, pareto power, normal deviation (%) */
	double center;           /* 0..1, or -1: fio's default */
	int abs;                 /* zoned_abs: zone sizes in bytes */
	unsigned nzones;
	struct rp_zone zone[RP_MAX_ZONES];
};

/* An option as it was given (fio's "job options" in JSON): flags given
 * without a value are not listed, as fio does not list them. */
struct rp_kv {
	const char *key, *val;
};

struct rp_kvlist {
	struct rp_kv *v;
	size_t n, cap;
};

/* One job section: fio's thread_options, the part rlperf has. */
struct rp_job {
	const char *name;
	const char *filename;    /* ':'-separated; NULL: NAME.CLONE.0 per clone */
	const char *directory;   /* prefix of the file names (first of a ':' list) */
	int rw;                  /* enum rp_rw */
	uint64_t bs;
	struct rp_amount size;   /* v == 0 and !pct: the files less the offset */
	struct rp_amount offset, offset_increment;
	unsigned iodepth, numjobs, kb_base;
	uint64_t runtime_ns;     /* 0: no limit */
	uint64_t ramp_ns;
	uint64_t seed;           /* randseed */
	int time_based, direct, fixedbufs, registerfiles, invalidate;
	int norandommap, group_reporting, thread;
	int engine;              /* enum rl_backend */
	const char *ioengine;    /* the engine's fio name, as given */
	int64_t seq_add;         /* rw=read:N: N added after each read (may be < 0) */
	unsigned seq_nr;         /* rw=randread:N: a new random offset every N reads */
	struct rp_dist dist;     /* random_distribution */
	const char *lat_log, *bw_log, *iops_log;  /* write_*_log: NULL none, "" job name */
	uint64_t log_avg_ms;     /* log_avg_msec: 0 a line per read */
	int log_offset;
	uint64_t rate, rate_iops;     /* bytes/s, reads/s at most (0: no cap) */
	int poisson;                  /* rate_process=poisson */
	int offload;                  /* io_submit_mode=offload */
	uint64_t ratemin;             /* bytes/s at least, over ratecycle_ns */
	uint64_t ratecycle_ns;
	uint64_t startdelay_ns;
	uint64_t thinktime_ns;        /* a pause every thinktime_blocks reads */
	unsigned thinktime_blocks;
	unsigned flow, flow_id;       /* fio's flow: weight in its flow_id group (0 off) */
	uint64_t flow_sleep_ns;
	int hipri, sqthread_poll;     /* io_uring's IOPOLL (where it can) and SQPOLL */
	int gtod_reduce;              /* no latencies, no bw/iops samples (fio's) */
	int stonewall;                /* wait for the jobs before (a new group too) */
	int new_group;                /* a new reporting group, no waiting */
	int ss_state;                 /* steadystate: RP_SS_* bits */
	double ss_limit;              /* steadystate's N (percent with RP_SS_PCT) */
	uint64_t ss_dur_ns;           /* steadystate_duration: 0 off */
	uint64_t ss_ramp_ns;          /* steadystate_ramp_time */
	uint64_t lat_target_ns;       /* latency_target: 0 off */
	uint64_t lat_window_ns;       /* latency_window */
	double lat_pct;               /* latency_percentile (default 100) */
	int lat_run;                  /* latency_run */
	unsigned prioclass, prio;     /* the job's I/O priority (fio's ioprio_class, ioprio) */
	unsigned cmdprio_pct;         /* cmdprio_percentage: reads at cmdprio_class/cmdprio */
	unsigned cmdprio_class, cmdprio;
	int log_prio;                 /* logs: the priority's value, not 1 for RT */
	/* fio's batching (iodepth_batch_submit, _complete_min, _complete_max,
	 * iodepth_low), fixed up as fio's fixup_options does */
	unsigned batch_submit, batch_cmin, batch_cmax, iodepth_low;
	int huge_buffers;             /* iomem=mmaphuge|shmhuge (default malloc) */
	rp_optset set;           /* 1 << enum rp_opt_id of every option given */
	struct rp_kvlist given;  /* this section's options, in order */
};

struct rp_conf {
	struct rp_job global;    /* fio's defaults for the jobs defined after */
	struct rp_job *jobs;
	size_t njobs, cap;
	int have_global;         /* a global option was given ("global options") */
	struct rp_kvlist global_given;
	const char *jobfile;
	const char *output;      /* --output: the report goes there */
	int format;              /* enum rp_format */
	int eta;                 /* enum rp_eta_when */
	uint64_t status_interval_ns;  /* --status-interval: 0 none */
	const char *checkpoint, *sharding;
	int process;
	char **strs;             /* strings this conf owns (from job files) */
	size_t nstrs, capstrs;
};

/* rp_parse_args results besides 0 (run) */
#define RP_PARSE_ERROR (-1)
#define RP_PARSE_HELP 1
#define RP_PARSE_VERSION 2

/* fio's defaults (rlperf's where documented: io_uring, one job clone). */
void rp_job_default(struct rp_job *j);

/*
 * Parses argv[1..argc) as fio does: options before any --name are global
 * (defaults of every job), --name=N starts job N (--name=global goes back
 * to the defaults), other arguments name a job file whose [global] and
 * [job] sections come after the command line's. "--opt=value" and
 * "--opt value" both work for options that take a value; flags take only
 * "--flag" or "--flag=0|1". With no job at all, the options make one job
 * named "rlperf". Returns 0 (c filled, free it with rp_conf_free),
 * RP_PARSE_HELP, RP_PARSE_VERSION or RP_PARSE_ERROR with a one-line message
 * in err naming the option (c is freed then).
 */
int rp_parse_args(int argc, char **argv, struct rp_conf *c, char *err,
		  size_t errlen);
void rp_conf_free(struct rp_conf *c);

/* Every option rlperf has, with a line of help each. */
void rp_usage(FILE *f);

/* 1 if name is one of fio 3.33's options (job or command line), else 0. */
int rp_is_fio_option(const char *name);

/* The job file reader: calls fn once per section with its options in file
 * order (key, value: NULL for a bare flag, line number). Comments are
 * lines starting with ';' or '#' and anything after them on a line, as fio
 * reads them; ${VAR} in a value is the environment variable VAR. */
struct rp_ini_opt {
	const char *key, *val;
	unsigned line;
};
typedef int (*rp_ini_fn)(void *user, const char *section, unsigned line,
			 const struct rp_ini_opt *opts, size_t n, char *err,
			 size_t errlen);
/* Returns 0, fn's non-zero return, or -1 with a message naming path:line. */
int rp_ini_parse(const char *path, rp_ini_fn fn, void *user, char *err,
		 size_t errlen);

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

/* ioprio_set(2)'s value of class and level; class 0 is best effort, as
 * fio's ioprio_value */
#define RP_IOPRIO_CLASS_SHIFT 13
#define RP_IOPRIO_RT 1u
static inline uint32_t rp_ioprio(unsigned cls, unsigned level)
{
	return (cls ? cls : 2u) << RP_IOPRIO_CLASS_SHIFT | level;
}

/* The reads a clone keeps in flight: iodepth, but 1 on fio's synchronous
 * engines (psync, sync, pvsync, pvsync2, vsync: the pread pool) unless
 * io_submit_mode=offload, as fio caps them. */
unsigned rp_job_depth(const struct rp_job *j);

/* The priority of a job's reads: high for its cmdprio_percentage share,
 * else low; 0 when the job sets no priority (the thread's own). */
uint32_t rp_job_ioprio(const struct rp_job *j, int high);

/* Completion latencies of one I/O priority (fio's clat_prio). */
#define RP_NPRIO 4
struct rp_prio_clat {
	uint32_t ioprio;
	struct rp_hist *h;       /* NULL: the slot is unused */
};

/* ---------------------------------------------------------------- */
/* Offsets (rlperf_gen.c)                                            */
/* ---------------------------------------------------------------- */

/*
 * Offsets of one file's region: sequential, or a random permutation of the
 * blocks (each block once per pass, like fio's random map, without the
 * map: a full-period LCG over the next power of two, scrambled by a
 * bijection, skipping values past the last block), or with norandommap
 * uniformly random blocks, repeats allowed, as many per pass as blocks.
 */
/* One distribution's state (rlperf_dist.c) over n blocks of bs bytes. */
struct rp_dist_state {
	const struct rp_dist *d;
	uint64_t n, bs, rng, rand_off, stddev;
	double zetan, zeta2, pareto_pow;
};

void rp_dist_init(struct rp_dist_state *st, const struct rp_dist *d, uint64_t nblocks,
		  uint64_t bs, uint64_t seed);
/* The block (0 .. nblocks - 1) of the next random read. */
uint64_t rp_dist_next(struct rp_dist_state *st);

struct rp_gen {
	uint64_t base, bs, nblocks;
	int random, norandommap;
	int use_dist;           /* random: blocks from dist, repeats allowed */
	struct rp_dist_state dist;
	int64_t seq_add;        /* sequential: fio's ddir_seq_add */
	uint64_t file_size;     /* sequential with seq_add: where it wraps */
	uint64_t last;          /* the end of the last read (fio's last_pos) */
	unsigned seq_nr, seq_left;   /* random: a new offset every seq_nr reads */
	uint64_t i;             /* blocks issued in this pass */
	uint64_t pass;
	uint64_t x, inc, mask;  /* random: LCG state, odd increment, 2^k - 1 */
	unsigned shift;         /* random: half of k, for the scramble */
	uint64_t seed;
};

enum rp_gen_mode { RP_GEN_SEQ = 0, RP_GEN_RANDOM = 1, RP_GEN_NORANDOMMAP = 2 };

void rp_gen_init(struct rp_gen *g, uint64_t base, uint64_t bytes, uint64_t bs,
		 int mode, uint64_t seed);
/* Next offset of this pass; 0 at the end of a pass (the next call starts a
 * new one, in a new order), else 1. */
int rp_gen_next(struct rp_gen *g, uint64_t *off);
/* fio's rw=read:N and randread:N: sequential reads N bytes apart (N < 0:
 * backwards; they wrap at file_size, as fio's do), or random ones with
 * nr - 1 sequential reads after each. */
void rp_gen_seq(struct rp_gen *g, int64_t add, unsigned nr, uint64_t file_size);
/* Random reads drawn from d (not RP_DIST_RANDOM): repeats allowed, as
 * fio turns its random map off for them. d must outlive g. */
void rp_gen_dist(struct rp_gen *g, const struct rp_dist *d);

/* ---------------------------------------------------------------- */
/* Set-up (rlperf_setup.c): what every job clone reads               */
/* ---------------------------------------------------------------- */

struct rp_file {
	const char *path;
	uint64_t file_size;      /* of the file or block device */
	uint64_t off, len;       /* the region: fio's file_offset and io_size */
	uint64_t nblocks;        /* blocks of bs a pass may read from off */
	int is_blk;
};

/* One job clone (fio's subjob): one thread with its own engine. */
struct rp_task {
	const struct rp_job *job;
	size_t job_index;
	unsigned clone;          /* 0 .. numjobs - 1 */
	int groupid;             /* fio's: counts stonewall and new_group jobs */
	struct rp_file *files;
	size_t nfiles;
	uint64_t max_ios;        /* reads of a pass over all files */
	int hipri;               /* polled reads: asked for, and every disk polls */
};

struct rp_plan {
	struct rp_task *tasks;
	size_t ntasks;
	char **paths;            /* owned: every file name made here */
	size_t npaths, cappaths;
	char notes[PATH_MAX + 512];  /* for stderr: what is not done as asked, and why */
};

/*
 * Resolves every job of c into its clones: the files (filename split on
 * ':', "\:" for a colon in a name, under directory; NAME.CLONE.0 when no
 * filename is given), their sizes, and each clone's region by fio's rules
 * (size split over the files, offset + clone * offset_increment,
 * percentages of each file's size rounded up to bs), refusing any region
 * that passes a file's end (rlperf never writes or extends a file), and
 * direct=1 regions not aligned for O_DIRECT; hipri is applied where the
 * reads can be polled (else a line in p->notes). Returns 0 or -1 with a
 * one-line message in err (p is freed then).
 */
int rp_setup(const struct rp_conf *c, struct rp_plan *p, char *err, size_t errlen);
void rp_plan_free(struct rp_plan *p);

/*
 * Drops the page cache of one region as fio's invalidate=1 does:
 * posix_fadvise(DONTNEED) on a regular file, BLKFLSBUF on a block device
 * (root only). Returns 0 or -errno; fio goes on after a failure, and so
 * does rlperf, with a note.
 */
int rp_invalidate(const struct rp_file *f, int fd);

/* ---------------------------------------------------------------- */
/* Per-read logs (rlperf_log.c), fio's write_*_log                   */
/* ---------------------------------------------------------------- */

#define RP_NLOGS 5   /* lat, clat, slat, bw, iops */

struct rp_logs {
	FILE *f[RP_NLOGS];       /* NULL: not asked for */
	uint64_t avg_ns;         /* log_avg_msec in ns; 0: a line per read */
	int offset;              /* log_offset */
	int prio_value;          /* log_prio: the priority column is its value */
	uint64_t t0, last_ns, win_ns;
	uint64_t w_lat, w_n, w_bytes;   /* the window in progress */
};

/* Opens the logs job j asks for, as clone number (1, 2, ...) of the run.
 * Returns 0 or -errno with a message naming the file in err. */
int rp_logs_open(struct rp_logs *l, const struct rp_job *j, size_t number, char *err,
		 size_t errlen);
/* One read: the clone's start, the read's completion and latency, and
 * its I/O priority (fio's column: 1 for the real-time class, or with
 * log_prio the value, as 0x%04x). */
void rp_logs_read(struct rp_logs *l, uint64_t start_ns, uint64_t done_ns, uint64_t lat_ns,
		  uint64_t off, uint64_t bs, uint32_t ioprio);
/* Writes the last window and closes; 0 or -errno (a write failed). */
int rp_logs_close(struct rp_logs *l);

/* ---------------------------------------------------------------- */
/* Steady state (rlperf_ss.c), fio's steadystate                     */
/* ---------------------------------------------------------------- */

#define RP_SS_IOPS 1     /* judge IOPS (else bandwidth) */
#define RP_SS_SLOPE 2    /* by the slope (else the largest mean deviation) */
#define RP_SS_PCT 4      /* the limit is a percentage of the mean */
#define RP_SS_MAX_DUR 86400u   /* one-second samples in a window, at most */

/* "iops:N", "iops_slope:N", "bw:N", "bw_slope:N", each with an optional
 * "%": 0, or -1 for anything else. */
int rp_parse_ss(const char *s, int *state, double *limit);

/* One steady-state group's window (a job, or its group_reporting unit, as
 * fio's): the last dur one-second samples of IOPS and bytes/s. */
struct rp_ss {
	int state;
	double limit;
	unsigned dur;            /* samples in the window */
	uint64_t *iops, *bw;     /* dur each: a ring from head, n filled */
	unsigned head, n;
	double criterion, deviation, slope;   /* the last judgement */
	int attained;
};

/* Adds a sample; once the window is full, judges it. Returns attained. */
int rp_ss_add(struct rp_ss *ss, uint64_t iops, uint64_t bw);
/* The window's mean IOPS (bw 0) or bytes/s (bw 1), as fio's. */
uint64_t rp_ss_mean(const struct rp_ss *ss, int bw);

/* ---------------------------------------------------------------- */
/* Runner (rlperf_run.c)                                             */
/* ---------------------------------------------------------------- */

/* The engine's raw reads (eng_raw_run); tests substitute a fake. */
typedef int (*rp_engine_fn)(const struct eng_raw_opts *o, const struct eng_raw_job *job,
			    struct eng_raw_stats *st, char *err, size_t errlen);

/* Running statistics of periodic samples (fio's bw and iops logs). */
struct rp_samples {
	uint64_t n;
	double min, max, sum, sumsq;
};

/* fio's sampling period for bandwidth and IOPS (bwavgtime, iopsavgtime) */
#define RP_SAMPLE_NS 500000000ull

/* fio's maps: reads in flight at each submission (1, 2-3, 4-7, ... 32-63,
 * >= 64, counted per read), and the reads of each submission and of each
 * reap (0, 1-4, 5-8, 9-16, 17-32, 33-64, > 64, counted per call) */
#define RP_NDEPTH 7

/* What one job clone measured. */
struct rp_task_res {
	uint64_t bytes, ios;             /* measured (after ramp_time) */
	uint64_t meas_ns, last_ns;       /* measurement start, last completion */
	struct rp_hist *clat;
	struct rp_samples bw, iops;      /* KiB/s and IO/s per sample */
	uint64_t depth[RP_NDEPTH], submit[RP_NDEPTH], complete[RP_NDEPTH];
	struct eng_raw_stats eng;
	int error;                       /* 0 or a negative code */
	char errmsg[RP_ERRMSG_MAX];
	struct rp_ss *ss;                /* steadystate: on its group's last clone */
	unsigned lat_depth;              /* the depth latency_target ended at (else iodepth) */
	uint64_t offloaded;              /* reads its offload thread queued */
	unsigned submit_threads;         /* offload threads it ran (0 or 1) */
	struct rp_prio_clat prio[2];     /* cmdprio_percentage: low, high */
	uint64_t high_ios;               /* reads submitted at the high priority */
};

struct rp_result {
	struct rp_task_res *task;        /* one per plan task, in order */
	size_t ntasks;
	double elapsed_s;                /* wall time, ramp included */
	double usr_s, sys_s;             /* the process's CPU after the ramp */
	uint64_t ctx, vctx, majf, minf;  /* vctx: voluntary switches only */
	uint64_t start_unix_ms;
	int error;                       /* 0, or the first clone's code */
	char errmsg[RP_ERRMSG_MAX + 256];  /* the clone's message and its name */
	char notes[512];                 /* non-fatal: failed cache invalidation */
};

/*
 * Runs every task of p at once, each on a thread with its own engine, and
 * fills r (free it with rp_result_free). Returns 0, or a negative code with
 * a one-line message in r->errmsg (results so far are still filled).
 */
int rp_run(const struct rp_plan *p, rp_engine_fn engine,
	   struct rp_result *r);
void rp_result_free(struct rp_result *r);

/* What a running clone has done so far, for the ETA line. */
struct rp_progress {
	int rw;                  /* enum rp_rw */
	int finished;
	size_t nfiles;
	uint64_t bytes, ios;     /* read so far, ramp_time included */
	uint64_t planned;        /* bytes of the whole job; 0: time_based */
	uint64_t until_ns;       /* ramp_time + runtime; 0: no runtime */
};

/* Copies the progress of up to max clones of the run under way (from
 * any thread) and its start time; returns the clones copied (0: none). */
size_t rp_progress(struct rp_progress *out, size_t max, uint64_t *t0_ns);

/* A copy of what every clone of the run under way has measured so far
 * (fio's status_interval reports), from any thread: each running clone
 * copies its own results at its next read or pause, waited for up to a
 * second (one still blocked keeps its last copy). Returns 0 (free out with
 * rp_result_free), -EAGAIN when no run is under way, or -ENOMEM. */
int rp_snapshot(struct rp_result *out);

/* Asks running jobs to stop (async-signal-safe): SIGINT ends a run early. */
void rp_stop(void);

/* ---------------------------------------------------------------- */
/* Report units (rlperf_unit.c): what fio prints as one job          */
/* ---------------------------------------------------------------- */

#define RP_NLAT 10   /* latency bins per unit: fio's 2, 4, 10, ... 1000 */
#define RP_NLAT_MS 12

struct rp_unit {
	size_t first, n;                 /* tasks [first, first + n) */
	int groupid;                     /* its tasks' */
	uint64_t bytes, ios;
	double runtime_s;                /* the longest clone's measured time */
	double job_runtime_s;            /* the clones' measured times added */
	struct rp_hist *clat;
	struct rp_samples bw, iops;
	uint64_t depth[RP_NDEPTH], submit[RP_NDEPTH], complete[RP_NDEPTH];
	double usr_s, sys_s;             /* the process's, shared out by time */
	uint64_t ctx, vctx, majf, minf;
	struct eng_raw_stats eng;            /* the first clone's; peak and retries of all */
	int error;
	const char *errmsg;
	const struct rp_ss *ss;          /* steadystate: its last clone's, or NULL */
	unsigned lat_depth;              /* its last clone's (fio's latency_depth) */
	uint64_t offloaded;              /* io_submit_mode=offload: reads queued */
	unsigned submit_threads;         /* and the threads that queued them */
	struct rp_prio_clat prio[RP_NPRIO];  /* by priority, as its clones had them */
};

/* The priorities of u with samples, fio prints them only from 2 on. */
unsigned rp_unit_nprio(const struct rp_unit *u);

/*
 * Groups the tasks as fio's group_reporting does (a clone whose job has
 * group_reporting joins the unit before it) and sums each unit. Returns the
 * number of units (*out allocated, free with rp_units_free), or -ENOMEM.
 */
long rp_units(const struct rp_plan *p, const struct rp_result *r,
	      struct rp_unit **out);
void rp_units_free(struct rp_unit *u, size_t n);

/* Percentages of reads by latency: fio's latency_ns / _us / _ms bins. */
void rp_lat_bins(const struct rp_hist *h, double ns[RP_NLAT], double us[RP_NLAT],
		 double ms[RP_NLAT_MS]);
extern const char *const rp_lat_keys[RP_NLAT_MS];
extern const char *const rp_depth_keys[RP_NDEPTH];
extern const char *const rp_batch_keys[RP_NDEPTH];

/* bytes per second of the unit, and of a reporting group (its units' bytes
 * over their longest runtime: fio's group bandwidth) */
double rp_unit_bps(const struct rp_unit *u);
double rp_group_bps(const struct rp_unit *u, size_t n, int groupid);

/* mean and sample standard deviation of periodic samples */
double rp_samples_mean(const struct rp_samples *s);
double rp_samples_stddev(const struct rp_samples *s);

/* ---------------------------------------------------------------- */
/* Disk utilization (rlperf_disk.c), fio's disk_util                 */
/* ---------------------------------------------------------------- */

/* The counters of /sys/block/<dev>/stat that fio reports ([0] read, [1]
 * write; ticks and in_queue in ms). Only uint64_t: deltas go field by field. */
struct rp_disk_stat {
	uint64_t ios[2], merges[2], ticks[2];
	uint64_t io_ticks, in_queue;
};

struct rp_disk {
	char name[64];           /* "nvme0n1": the sysfs folder's name */
	char dir[PATH_MAX];      /* its sysfs folder */
	long master;             /* the disk this is a slave of, or -1 */
	struct rp_disk_stat start, delta;
	uint64_t msec;           /* wall time between the two readings */
};

struct rp_disks {
	struct rp_disk *v;       /* in fio's order: each disk, then its slaves */
	size_t n, cap;
	uint64_t start_ns;
};

/* fio's aggregate of a disk's slaves: means of their counters, and the
 * busiest slave's util */
struct rp_disk_agg {
	struct rp_disk_stat s;
	uint64_t n;
	double max_util;
};

/* Finds the disks under every file of p and reads their counters. */
void rp_disks_start(const struct rp_plan *p, struct rp_disks *d);
/* Reads them again: the deltas since rp_disks_start. */
void rp_disks_stop(struct rp_disks *d);
void rp_disks_free(struct rp_disks *d);
/* Percent of the wall time the disk was busy (at most 100). */
double rp_disk_util(const struct rp_disk *k);
/* Fills a from disk i's slaves; returns their number (0: none). */
int rp_disk_agg(const struct rp_disks *d, size_t i, struct rp_disk_agg *a);
/* 1 when the disk under path polls completions (its queue/io_poll is 1:
 * an NVMe with poll queues), else 0; name gets the disk's name ("" when
 * no disk holds path: tmpfs). */
int rp_disk_polls(const char *path, char *name, size_t len);

/* ---------------------------------------------------------------- */
/* Output (rlperf_out.c normal, rlperf_json.c JSON)                  */
/* ---------------------------------------------------------------- */

struct rp_report {
	const struct rp_conf *conf;
	const struct rp_plan *plan;
	const struct rp_result *res;
	const struct rp_unit *units;
	size_t nunits;
	const struct rp_disks *disks;  /* NULL or none: no disk_util */
};

void rp_print_normal(FILE *f, const struct rp_report *rep);
/* The report in the conf's --output-format (normal, json, json+, terse). */
void rp_print_report(FILE *f, const struct rp_report *rep);
void rp_print_json(FILE *f, const struct rp_report *rep);
/* fio's terse output, version 3: a line of ';'-separated fields per unit */
void rp_print_terse(FILE *f, const struct rp_report *rep);

enum rp_n2s { RP_N2S_NONE, RP_N2S_BYTE, RP_N2S_BYTEPERSEC };
/* fio's num2str: at most maxlen digits, then a k/M/G (pow2: Ki/Mi/Gi)
 * prefix and the unit: "1024MiB/s", "262k". */
void rp_num2str(char *buf, size_t len, uint64_t num, int maxlen, int pow2,
		enum rp_n2s unit);
/* "4096B", "64.0KiB", "1024KiB": fio's way of printing a block size. */
void rp_fmt_bs(char *buf, size_t len, uint64_t v);
/* A JSON string with quotes, backslashes and controls escaped. */
void rp_json_str(FILE *f, const char *s);

/* ---------------------------------------------------------------- */
/* Status line (rlperf_eta.c), fio's ETA                             */
/* ---------------------------------------------------------------- */

/* The line for n clones elapsed seconds into the run, with the rates of
 * the last interval (bytes and reads per second), into buf. */
void rp_eta_line(char *buf, size_t len, const struct rp_progress *p, size_t n,
		 double elapsed, double bps, double iops);

#define RP_ETA_NS 1000000000ull   /* fio's eta_interval */

/* Starts a thread printing the line to f every interval_ns while rp_run
 * runs (up to clones clones); NULL when it cannot (the run goes on). */
struct rp_eta *rp_eta_start(FILE *f, size_t clones, uint64_t interval_ns);
/* Stops it, prints the final line and ends it with a newline. NULL: no-op. */
void rp_eta_stop(struct rp_eta *e);

/* fio's --status-interval: a thread printing the whole report so far
 * (rp_snapshot) to f every c->status_interval_ns while rp_run runs; NULL
 * when it cannot (the run goes on). Stop it with rp_eta_stop. */
struct rp_eta *rp_status_start(FILE *f, const struct rp_conf *c, const struct rp_plan *p);

/* ---------------------------------------------------------------- */
/* Checkpoint mode (rlperf_ckpt.c): the public API only              */
/* ---------------------------------------------------------------- */

/* Loads c->checkpoint and prints its phases to f. Returns the exit
 * status (0, or 1 with a one-line message on stderr). */
int rp_checkpoint(const struct rp_conf *c, FILE *f);

#endif /* RLPERF_H */
