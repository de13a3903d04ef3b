/*
 * rlperf_opts.c - rlperf's options, declared in one table (as fio's
 * options.c declares its own) that knows each option's name, aliases, kind
 * of value and scope, and the two ways to give them: the command line,
 * read as fio's getopt_long_only loop reads it, and job files (through
 * rlperf_ini.c). Everything lands in a struct rp_conf: fio's defaults
 * ("global"), then one struct rp_job per job section.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf_time.h"
#include "rlperf.h"

enum opt_kind {
	K_STR,     /* a string */
	K_SIZE,    /* fio's int: bytes with k/m/g/t/p suffixes */
	K_AMOUNT,  /* K_SIZE or N% of the file's size */
	K_TIME,    /* seconds, or with a time suffix */
	K_USEC,    /* a time: plain numbers are microseconds (fio's is_time) */
	K_BOOL,    /* 0 or 1, value required (fio's FIO_OPT_BOOL) */
	K_SET,     /* a flag: bare, or =N (fio's FIO_OPT_STR_SET) */
	K_OPTSTR,  /* a string that may be left out: bare, or =STR */
	K_ACTION,  /* takes no value */
};

struct opt_def {
	const char *name, *alias;
	enum rp_opt_id id;
	enum opt_kind kind;
	int cmdline;            /* command line only (a fio command-line option) */
	int raw;                /* meaningless for --checkpoint */
	uint64_t lo, hi;        /* bounds, inclusive (hi 0: none); lo also of N% */
	const char *arg, *help;
};

static const struct opt_def opt_table[] = {
	{ "name", NULL, RP_O_NAME, K_STR, 0, 1, 0, 0, "STR", "start a job named STR (global: back to the defaults)" },
	{ "filename", NULL, RP_O_FILENAME, K_STR, 0, 1, 0, 0, "F[:F..]", "files or block devices to read ('\\:' for a colon in a name)" },
	{ "directory", NULL, RP_O_DIRECTORY, K_STR, 0, 1, 0, 0, "DIR[:DIR..]", "directory of the files (default: NAME.CLONE.0 files, one per clone)" },
	{ "rw", "readwrite", RP_O_RW, K_STR, 0, 1, 0, 0, "read|randread[:N]", "sequential (default) or random reads; read:N skips N bytes after each read (N < 0: backwards), randread:N takes a new random offset every N reads; rlperf never writes" },
	{ "bs", "blocksize", RP_O_BS, K_SIZE, 0, 0, 1, RP_MAX_BS, "SIZE", "block size (default 4k); checkpoint mode: the request size" },
	{ "size", NULL, RP_O_SIZE, K_AMOUNT, 0, 1, 1, 0, "SIZE|N%", "bytes per clone, split over its files (default: the files less offset)" },
	{ "offset", "fileoffset", RP_O_OFFSET, K_AMOUNT, 0, 1, 0, 0, "SIZE|N%", "start of the region read in each file (default 0)" },
	{ "offset_increment", NULL, RP_O_OFFSET_INC, K_AMOUNT, 0, 1, 0, 0, "SIZE|N%", "clone k starts at offset + k * this" },
	{ "iodepth", NULL, RP_O_IODEPTH, K_SIZE, 0, 0, 1, RP_MAX_IODEPTH, "N", "reads in flight per clone (default 1)" },
	{ "numjobs", NULL, RP_O_NUMJOBS, K_SIZE, 0, 1, 1, RP_MAX_NUMJOBS, "N", "clones of the job, a thread and an engine each (default 1)" },
	{ "runtime", NULL, RP_O_RUNTIME, K_TIME, 0, 1, 0, 0, "TIME", "stop after this long (seconds, or 500ms, 2m)" },
	{ "time_based", NULL, RP_O_TIME_BASED, K_SET, 0, 1, 0, 0, NULL, "loop over the region until runtime ends" },
	{ "ramp_time", NULL, RP_O_RAMP, K_TIME, 0, 1, 0, 0, "TIME", "run this long before measuring" },
	{ "ioengine", "engine", RP_O_IOENGINE, K_STR, 0, 0, 0, 0, "E", "io_uring (default), libaio, or psync/sync/pvsync/pvsync2/vsync (the pread pool)" },
	{ "direct", NULL, RP_O_DIRECT, K_BOOL, 0, 0, 0, 0, "0|1", "1: O_DIRECT (default 0)" },
	{ "fixedbufs", NULL, RP_O_FIXEDBUFS, K_SET, 0, 1, 0, 0, NULL, "io_uring: register the buffers" },
	{ "registerfiles", NULL, RP_O_REGFILES, K_SET, 0, 1, 0, 0, NULL, "io_uring: register the files" },
	{ "group_reporting", NULL, RP_O_GROUP, K_SET, 0, 1, 0, 0, NULL, "report the clones (and later jobs) as one" },
	{ "invalidate", NULL, RP_O_INVALIDATE, K_BOOL, 0, 1, 0, 0, "0|1", "drop the region's page cache first (default 1)" },
	{ "norandommap", NULL, RP_O_NORANDOMMAP, K_SET, 0, 1, 0, 0, NULL, "randread: any block any time, repeats allowed" },
	{ "randseed", NULL, RP_O_RANDSEED, K_SIZE, 0, 1, 0, 0, "N", "seed of the random offsets" },
	{ "thread", NULL, RP_O_THREAD, K_SET, 0, 1, 0, 0, NULL, "accepted: clones always run as threads" },
	{ "buffered", NULL, RP_O_BUFFERED, K_BOOL, 0, 0, 0, 0, "0|1", "the inverse of direct: 0 is O_DIRECT (default 1)" },
	{ "random_distribution", NULL, RP_O_RANDDIST, K_STR, 0, 1, 0, 0, "D", "randread: random (default), zipf:T, pareto:H, normal:S[:C], zoned:A/S:.., zoned_abs:A/SIZE:.." },
	{ "random_generator", NULL, RP_O_RANDGEN, K_STR, 0, 1, 0, 0, "G", "tausworthe, lfsr, tausworthe64: accepted (rlperf has its own, no repeats in a pass)" },
	{ "write_lat_log", NULL, RP_O_LATLOG, K_OPTSTR, 0, 1, 0, 0, "NAME", "log each read's latency to NAME_lat.N.log, _clat, _slat (fio's format)" },
	{ "write_bw_log", NULL, RP_O_BWLOG, K_OPTSTR, 0, 1, 0, 0, "NAME", "log bandwidth to NAME_bw.N.log (bare: the job's name)" },
	{ "write_iops_log", NULL, RP_O_IOPSLOG, K_OPTSTR, 0, 1, 0, 0, "NAME", "log IOPS to NAME_iops.N.log" },
	{ "log_avg_msec", NULL, RP_O_LOGAVG, K_SIZE, 0, 1, 0, 86400000, "MS", "logs: a line per MS ms (window means) instead of per read" },
	{ "log_offset", NULL, RP_O_LOGOFF, K_BOOL, 0, 1, 0, 0, "0|1", "logs: add each read's offset" },
	{ "log_prio", NULL, RP_O_LOGPRIO, K_BOOL, 0, 1, 0, 0, "0|1", "logs: each read's I/O priority value (0x%04x) instead of 1 for real-time, 0 else" },
	{ "rate", NULL, RP_O_RATE, K_SIZE, 0, 1, 1, 0, "SIZE", "at most SIZE bytes/s (fio's rate for reads)" },
	{ "rate_iops", NULL, RP_O_RATE_IOPS, K_SIZE, 0, 1, 1, 100000000, "N", "at most N reads/s" },
	{ "rate_process", NULL, RP_O_RATE_PROC, K_STR, 0, 1, 0, 0, "linear|poisson", "rate_iops spacing: even (default) or exponential gaps" },
	{ "ratemin", NULL, RP_O_RATEMIN, K_SIZE, 0, 1, 1, 0, "SIZE", "fail the job below SIZE bytes/s over a ratecycle" },
	{ "ratecycle", NULL, RP_O_RATECYCLE, K_SIZE, 0, 1, 1, 86400000, "MS", "ratemin's window in ms (default 1000)" },
	{ "io_submit_mode", NULL, RP_O_SUBMIT_MODE, K_STR, 0, 1, 0, 0, "inline|offload", "inline (default): the ring's thread paces; offload: a thread per clone generates and paces the reads" },
	{ "startdelay", NULL, RP_O_STARTDELAY, K_TIME, 0, 1, 0, 0, "TIME", "start the job this long after the run" },
	{ "thinktime", NULL, RP_O_THINKTIME, K_USEC, 0, 1, 0, 0, "TIME", "pause this long (plain numbers: us) every thinktime_blocks reads" },
	{ "thinktime_blocks", NULL, RP_O_THINK_BLOCKS, K_SIZE, 0, 1, 1, 1u << 30, "N", "reads between thinktime pauses (default 1)" },
	{ "randrepeat", NULL, RP_O_RANDREPEAT, K_BOOL, 0, 1, 0, 0, "0|1", "1 (default): the same random offsets every run; 0: new ones" },
	{ "flow", NULL, RP_O_FLOW, K_SIZE, 0, 1, 0, 1000000, "W", "weight: jobs of one flow_id read in proportion to their weights" },
	{ "flow_id", NULL, RP_O_FLOW_ID, K_SIZE, 0, 1, 0, 1000000, "N", "the flow group (default 0)" },
	{ "flow_sleep", NULL, RP_O_FLOW_SLEEP, K_SIZE, 0, 1, 0, 60000000, "US", "pause in us when ahead of its share (default 0: 50 us)" },
	{ "hipri", NULL, RP_O_HIPRI, K_SET, 0, 1, 0, 0, NULL, "io_uring: polled reads (IOPOLL) where the disk has poll queues, else a note; pvsync2: a note" },
	{ "sqthread_poll", NULL, RP_O_SQPOLL, K_SET, 0, 1, 0, 0, NULL, "io_uring: a kernel thread submits (SQPOLL)" },
	{ "gtod_reduce", NULL, RP_O_GTOD_REDUCE, K_BOOL, 0, 1, 0, 0, "0|1", "1: no latencies, percentiles or bandwidth samples (fio's disable_lat, clat, slat, bw)" },
	{ "stonewall", "wait_for_previous", RP_O_STONEWALL, K_SET, 0, 1, 0, 0, NULL, "start when every job before has ended; a new reporting group" },
	{ "new_group", NULL, RP_O_NEW_GROUP, K_SET, 0, 1, 0, 0, NULL, "start a new reporting group (without waiting)" },
	{ "steadystate", "ss", RP_O_SS, K_STR, 0, 1, 0, 0, "iops|bw[_slope]:N[%]", "the steady-state criterion (default iops_slope:0.01%)" },
	{ "steadystate_duration", "ss_dur", RP_O_SS_DUR, K_TIME, 0, 1, 0, 0, "TIME", "stop once the criterion holds over this window of 1 s samples (whole seconds; 0: off)" },
	{ "steadystate_ramp_time", "ss_ramp", RP_O_SS_RAMP, K_TIME, 0, 1, 0, 0, "TIME", "collect steady-state samples from this long after the job starts" },
	{ "latency_target", NULL, RP_O_LAT_TARGET, K_USEC, 0, 1, 0, 0, "TIME", "find the deepest queue whose reads meet this latency (plain numbers: us)" },
	{ "latency_window", NULL, RP_O_LAT_WINDOW, K_USEC, 0, 1, 0, 0, "TIME", "latency_target: judge each depth over this long (plain numbers: us)" },
	{ "latency_percentile", NULL, RP_O_LAT_PCT, K_STR, 0, 1, 0, 0, "P", "latency_target: this percent of the reads must meet it (default 100)" },
	{ "latency_run", NULL, RP_O_LAT_RUN, K_BOOL, 0, 1, 0, 0, "0|1", "latency_target: keep adjusting the depth instead of stopping once found" },
	{ "prioclass", NULL, RP_O_PRIOCLASS, K_SIZE, 0, 1, 0, 3, "0..3", "the job's I/O priority class: 1 real-time, 2 best effort, 3 idle (0: best effort)" },
	{ "prio", NULL, RP_O_PRIO, K_SIZE, 0, 1, 0, 7, "0..7", "the job's I/O priority level in its class (0 highest)" },
	{ "cmdprio_percentage", NULL, RP_O_CMDPRIO_PCT, K_SIZE, 0, 1, 0, 100, "0..100", "io_uring, libaio: this percent of the reads at cmdprio_class/cmdprio" },
	{ "cmdprio_class", NULL, RP_O_CMDPRIO_CLASS, K_SIZE, 0, 1, 1, 3, "1..3", "io_uring, libaio: the class of those reads (default 1, real-time)" },
	{ "cmdprio", NULL, RP_O_CMDPRIO, K_SIZE, 0, 1, 0, 7, "0..7", "io_uring, libaio: the level of those reads (default 0)" },
	{ "iodepth_batch_submit", "iodepth_batch", RP_O_BATCH_SUBMIT, K_SIZE, 0, 1, 0, RP_MAX_IODEPTH, "N", "reads per submission call (default 1; 0: iodepth)" },
	{ "iodepth_batch_complete_min", "iodepth_batch_complete", RP_O_BATCH_CMIN, K_SIZE, 0, 1, 0, RP_MAX_IODEPTH, "N", "a full queue waits for this many completions (default 1)" },
	{ "iodepth_batch_complete_max", NULL, RP_O_BATCH_CMAX, K_SIZE, 0, 1, 0, RP_MAX_IODEPTH, "N", "completions reaped at most at once (default: iodepth_batch_complete_min)" },
	{ "iomem", "mem", RP_O_IOMEM, K_STR, 0, 1, 0, 0, "malloc|mmap|shm|mmaphuge|shmhuge", "the read buffers: 4 KiB pages (default, as fio's malloc) or huge pages (THP), which make fewer, larger device requests" },
	{ "iodepth_low", NULL, RP_O_IODEPTH_LOW, K_SIZE, 0, 1, 0, RP_MAX_IODEPTH, "N", "a full queue is reaped down to this depth before refilling (default iodepth)" },
	{ "kb_base", NULL, RP_O_KB_BASE, K_SIZE, 0, 0, 0, 0, "1024|1000", "what k, m, g mean (KiB, MiB.. the other base)" },
	{ "output", NULL, RP_O_OUTPUT, K_STR, 1, 0, 0, 0, "FILE", "write the report to FILE" },
	{ "output-format", NULL, RP_O_FORMAT, K_STR, 1, 0, 0, 0, "normal|json|json+|terse", "report format (default normal; json+ adds the latency bins; terse: fio's version 3 lines)" },
	{ "minimal", NULL, RP_O_MINIMAL, K_ACTION, 1, 0, 0, 0, NULL, "the same as --output-format=terse" },
	{ "terse-version", "terse_version", RP_O_TERSE_VER, K_STR, 1, 0, 0, 0, "3", "terse output version: rlperf writes fio's version 3" },
	{ "eta", NULL, RP_O_ETA, K_STR, 1, 0, 0, 0, "WHEN", "status line while jobs run: auto (stdout a terminal), always, never" },
	{ "status-interval", "status_interval", RP_O_STATUS, K_TIME, 1, 0, 0, 0, "TIME", "print the whole report so far every TIME (at least 1ms), as fio" },
	{ "readonly", NULL, RP_O_READONLY, K_ACTION, 1, 0, 0, 0, NULL, "accepted: rlperf never writes" },
	{ "checkpoint", NULL, RP_O_CHECKPOINT, K_STR, 1, 0, 0, 0, "PATH", "load a checkpoint through the library" },
	{ "sharding", NULL, RP_O_SHARDING, K_STR, 1, 0, 0, 0, "SPEC", "checkpoint mode: sharding spec (JSON file)" },
	{ "process", NULL, RP_O_PROCESS, K_SIZE, 1, 0, 0, 1u << 20, "P", "checkpoint mode: process to load for (default 0)" },
	{ "help", NULL, RP_O_HELP, K_ACTION, 1, 0, 0, 0, NULL, "this text" },
	{ "version", NULL, RP_O_VERSION, K_ACTION, 1, 0, 0, 0, NULL, "print the version" },
};

/* fio's engine names, and which of ringload's backends runs each */
static const struct {
	const char *name;
	int engine;
} engine_names[] = {
	{ "io_uring", RL_BACKEND_IO_URING }, { "libaio", RL_BACKEND_LIBAIO }, { "psync", RL_BACKEND_PREAD },
	{ "sync", RL_BACKEND_PREAD }, { "pvsync", RL_BACKEND_PREAD }, { "pvsync2", RL_BACKEND_PREAD },
	{ "vsync", RL_BACKEND_PREAD },
};

static const char *const write_modes[] = {
	"write", "randwrite", "rw", "readwrite", "randrw", "trim", "randtrim", "trimwrite",
};

struct parser {
	struct rp_conf *c;
	long job;               /* where job options go: -1 the defaults, else a job */
	int action;             /* RP_PARSE_HELP or _VERSION, once seen */
	char where[300];        /* "" on the command line, else "FILE:LINE: " */
	char *err;
	size_t errlen;
};

static int fail(struct parser *pa, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct parser *pa, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(pa->err, pa->errlen, "rlperf: %s", pa->where);

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < pa->errlen)
		vsnprintf(pa->err + n, pa->errlen - n, fmt, ap);
	va_end(ap);
	return RP_PARSE_ERROR;
}

void rp_job_default(struct rp_job *j)
{
	memset(j, 0, sizeof(*j));
	j->name = "rlperf";
	j->rw = RP_READ;
	j->bs = 4096;           /* fio's defaults: 4k, depth 1, buffered */
	j->iodepth = 1;
	j->numjobs = 1;
	j->kb_base = 1024;
	j->invalidate = 1;
	j->engine = RL_BACKEND_IO_URING;
	j->ioengine = "io_uring";
	j->seed = 0x5eed5eed;
	j->seq_nr = 1;
	j->dist.center = -1;
	j->ratecycle_ns = 1000000000ull;  /* fio's ratecycle default, 1000 ms */
	j->thinktime_blocks = 1;
	j->ss_state = RP_SS_IOPS | RP_SS_SLOPE | RP_SS_PCT;   /* fio's iops_slope:0.01% */
	j->ss_limit = 0.01;
	j->lat_pct = 100.0;     /* fio's latency_percentile */
	j->batch_submit = 1;    /* fio's iodepth_batch_submit and _complete_min */
	j->batch_cmin = 1;
}

static const struct opt_def *find_opt(const char *name, size_t len, const char **spelled)
{
	for (size_t i = 0; i < RP_ARRAY_SIZE(opt_table); i++) {
		const struct opt_def *d = &opt_table[i];

		if (strlen(d->name) == len && !strncmp(d->name, name, len))
			*spelled = d->name;
		else if (d->alias && strlen(d->alias) == len && !strncmp(d->alias, name, len))
			*spelled = d->alias;
		else
			continue;
		return d;
	}
	return NULL;
}

/* "not supported" for fio's options, "unrecognized" for the rest */
static int unknown_opt(struct parser *pa, const char *name, size_t len, const char *dashes)
{
	char buf[128];

	snprintf(buf, sizeof(buf), "%.*s", (int)len, name);
	if (rp_is_fio_option(buf))
		return fail(pa, "%s%s is a fio option that rlperf does not support "
			    "(rlperf --help lists those it has)", dashes, buf);
	return fail(pa, "unrecognized option '%s%s'", dashes, buf);
}

/* A string the conf keeps (job files' strings die with their buffer). */
static const char *keep(struct parser *pa, const char *s)
{
	struct rp_conf *c = pa->c;
	char *d;

	if (rp_grow((void **)&c->strs, &c->capstrs, c->nstrs + 1, sizeof(*c->strs)))
		return NULL;
	d = strdup(s);
	if (d)
		c->strs[c->nstrs++] = d;
	return d;
}

/* fio keeps one value per option: a later one replaces it in place */
static int kv_add(struct rp_kvlist *l, const char *key, const char *val)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i].key, key)) {
			l->v[i].val = val;
			return 0;
		}
	if (rp_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)))
		return -ENOMEM;
	l->v[l->n].key = key;
	l->v[l->n].val = val;
	l->n++;
	return 0;
}

static struct rp_job *target(struct parser *pa)
{
	return pa->job < 0 ? &pa->c->global : &pa->c->jobs[pa->job];
}

/* A new job named name, from the defaults as they are now (fio's
 * get_new_job copies def_thread). */
static int new_job(struct parser *pa, const char *name)
{
	struct rp_conf *c = pa->c;
	struct rp_job *j;

	if (c->njobs >= RP_MAX_JOBS)
		return fail(pa, "more than %u jobs", RP_MAX_JOBS);
	if (rp_grow((void **)&c->jobs, &c->cap, c->njobs + 1, sizeof(*c->jobs)))
		return fail(pa, "out of memory");
	j = &c->jobs[c->njobs];
	*j = c->global;
	memset(&j->given, 0, sizeof(j->given));
	j->name = name;
	pa->job = (long)c->njobs++;
	return 0;
}

/* Numbers: the value of a K_SIZE / K_AMOUNT / K_BOOL / K_SET option. */
static int parse_number(struct parser *pa, const struct opt_def *d, const char *spelled,
			const char *val, uint64_t *v, int *pct)
{
	const struct rp_job *j = target(pa);

	*pct = 0;
	if (d->kind == K_SET && !val) {
		*v = 1;
		return 0;
	}
	if (d->kind == K_BOOL || d->kind == K_SET) {
		if (rp_parse_size(val, 1024, v, NULL) || strspn(val, "0123456789") != strlen(val))
			return fail(pa, "failed parsing %s=%s: expected 0 or 1", spelled, val);
		if (d->kind == K_BOOL && *v > 1)
			return fail(pa, "failed parsing %s=%s: expected 0 or 1", spelled, val);
		*v = !!*v;
		return 0;
	}
	if (rp_parse_size(val, j->kb_base, v, d->kind == K_AMOUNT ? pct : NULL) ||
	    (*pct && *v < d->lo)) {
		if (d->kind == K_AMOUNT && val[strlen(val) - 1] == '%')
			return fail(pa, "failed parsing %s=%s: a percentage is a whole number "
				    "from %llu to 100", spelled, val, (unsigned long long)d->lo);
		return fail(pa, "failed parsing %s=%s: not a %s (examples: 4096, 4k, 1m, "
			    "0x1000%s)", spelled, val, d->kind == K_AMOUNT ? "size" : "number",
			    d->kind == K_AMOUNT ? ", 25%" : "");
	}
	if (!*pct && (*v < d->lo || (d->hi && *v > d->hi))) {
		char hi[32] = "...";

		if (d->hi)
			snprintf(hi, sizeof(hi), "%llu", (unsigned long long)d->hi);
		return fail(pa, "failed parsing %s=%s: out of range [%llu, %s]", spelled, val,
			    (unsigned long long)d->lo, hi);
	}
	if (d->id == RP_O_KB_BASE && *v != 1000 && *v != 1024)
		return fail(pa, "failed parsing %s=%s: expected 1024 or 1000", spelled, val);
	return 0;
}

/* The N of rw=read:N (a signed size, fio's ddir_seq_add) or randread:N
 * (a count, fio's ddir_seq_nr). */
static int set_rw_postfix(struct parser *pa, struct rp_job *j, const char *val,
			  const char *nr)
{
	int neg = *nr == '-';
	uint64_t v;

	if (j->rw == RP_RANDREAD) {
		if (rp_parse_size(nr, 1024, &v, NULL) || !v || v > 1u << 30 ||
		    strspn(nr, "0123456789") != strlen(nr))
			return fail(pa, "failed parsing rw=%s: randread:N takes a new offset "
				    "every N reads (N from 1)", val);
		j->seq_nr = (unsigned)v;
		return 0;
	}
	if (rp_parse_size(nr + neg, j->kb_base, &v, NULL) || v > INT64_MAX)
		return fail(pa, "failed parsing rw=%s: read:N skips N bytes after each read "
			    "(a size; -N reads backwards)", val);
	j->seq_add = neg ? -(int64_t)v : (int64_t)v;
	return 0;
}

static int set_rw(struct parser *pa, struct rp_job *j, const char *val)
{
	size_t len = strcspn(val, ":");

	j->seq_add = 0;
	j->seq_nr = 1;
	if (len == 4 && !strncmp(val, "read", 4))
		j->rw = RP_READ;
	else if (len == 8 && !strncmp(val, "randread", 8))
		j->rw = RP_RANDREAD;
	else {
		for (size_t i = 0; i < RP_ARRAY_SIZE(write_modes); i++)
			if (strlen(write_modes[i]) == len && !strncmp(val, write_modes[i], len))
				return fail(pa, "failed parsing rw=%s: rlperf only reads (read, "
					    "randread)", val);
		return fail(pa, "failed parsing rw=%s: expected read or randread", val);
	}
	return val[len] ? set_rw_postfix(pa, j, val, val + len + 1) : 0;
}

static int set_engine(struct parser *pa, struct rp_job *j, const char *val)
{
	for (size_t i = 0; i < RP_ARRAY_SIZE(engine_names); i++)
		if (!strcmp(val, engine_names[i].name)) {
			j->engine = engine_names[i].engine;
			j->ioengine = engine_names[i].name;
			return 0;
		}
	return fail(pa, "failed parsing ioengine=%s: rlperf has io_uring, libaio, and "
		    "psync, sync, pvsync, pvsync2, vsync (its pread pool)", val);
}

/* fio's iomem: what backs the buffers decides how many segments, so how
 * many device requests, a read makes */
static int set_iomem(struct parser *pa, struct rp_job *j, const char *val)
{
	static const char *const small[] = { "malloc", "mmap", "mmapshared", "shm" };

	for (size_t i = 0; i < RP_ARRAY_SIZE(small); i++)
		if (!strcmp(val, small[i])) {
			j->huge_buffers = 0;
			return 0;
		}
	if (!strncmp(val, "mmaphuge", 8) || !strcmp(val, "shmhuge")) {
		j->huge_buffers = 1;   /* mmaphuge:FILE's hugetlbfs file: THP instead */
		return 0;
	}
	return fail(pa, "failed parsing iomem=%s: rlperf has malloc, mmap, mmapshared, shm "
		    "(4 KiB pages) and mmaphuge, shmhuge (huge pages)", val);
}

/* A float in [lo, hi] (ends excluded where open), all of s; 0 or -1. */
static int parse_float(const char *s, double lo, double hi, int open, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (errno || end == s || *end || *out < lo || *out > hi ||
	    (open && (*out == lo || *out == hi)))
		return -1;
	return 0;
}

/* zoned:A/S:A/S.. (S percent of the region; zoned_abs: a size); an empty
 * S shares what the others leave, as fio's; the A must add up to 100. */
static int set_zones(struct parser *pa, struct rp_job *j, const char *val, const char *z)
{
	struct rp_dist *d = &j->dist;
	unsigned acc = 0, empty = 0;
	uint64_t sizes = 0;

	for (d->nzones = 0; *z; d->nzones++) {
		const char *slash = strchr(z, '/'), *next = strchr(z, ':');
		char a[32], sz[64];
		uint64_t v;

		if (!next)
			next = z + strlen(z);
		if (d->nzones == RP_MAX_ZONES || !slash || slash > next ||
		    slash - z >= (long)sizeof(a) || next - slash > (long)sizeof(sz))
			return fail(pa, "failed parsing random_distribution=%s: zones are "
				    "ACCESS%%/SIZE, at most %u, ':' between", val, RP_MAX_ZONES);
		snprintf(a, sizeof(a), "%.*s", (int)(slash - z), z);
		snprintf(sz, sizeof(sz), "%.*s", (int)(next - slash - 1), slash + 1);
		if (rp_parse_size(a, 1024, &v, NULL) || v > 100 || strspn(a, "0123456789") !=
		    strlen(a) || (*sz && (rp_parse_size(sz, j->kb_base, &d->zone[d->nzones].size,
							NULL) || (!d->abs && d->zone[d->nzones].size > 100))))
			return fail(pa, "failed parsing random_distribution=%s: zone '%.*s'",
				    val, (int)(next - z), z);
		d->zone[d->nzones].access = (unsigned)v;
		acc += (unsigned)v;
		empty += !*sz;
		sizes += *sz ? d->zone[d->nzones].size : 0;
		if (!*sz)
			d->zone[d->nzones].size = UINT64_MAX;
		z = *next ? next + 1 : next;
	}
	if (acc != 100 || (!d->abs && sizes > 100) || !d->nzones)
		return fail(pa, "failed parsing random_distribution=%s: the accesses add up "
			    "to %u%% (fio wants 100%%), the sizes to %llu%s", val, acc,
			    (unsigned long long)sizes, d->abs ? " bytes" : "%");
	for (unsigned i = 0; i < d->nzones; i++)
		if (d->zone[i].size == UINT64_MAX)  /* fio shares the rest out evenly */
			d->zone[i].size = d->abs ? 0 : (100 - sizes) / empty;
	return 0;
}

/* --output-format: fio's names of the formats rlperf writes */
static int set_format(struct parser *pa, const char *val)
{
	static const struct {
		const char *name;
		int format;
	} formats[] = {
		{ "normal", RP_FMT_NORMAL }, { "json", RP_FMT_JSON },
		{ "json+", RP_FMT_JSONPLUS }, { "terse", RP_FMT_TERSE },
	};

	for (size_t i = 0; i < RP_ARRAY_SIZE(formats); i++)
		if (!strcmp(val, formats[i].name)) {
			pa->c->format = formats[i].format;
			return 0;
		}
	return fail(pa, "failed parsing output-format=%s: rlperf has normal, json, json+ "
		    "and terse", val);
}

/* random_distribution=random | zipf:T[:C] | pareto:H[:C] | normal:S[:C] |
 * zoned:.. | zoned_abs:.. (fio's; C the center, 0..1) */
static int set_dist(struct parser *pa, struct rp_job *j, const char *val)
{
	static const struct {
		const char *name;
		int kind;
		double lo, hi;
		int open;
	} kinds[] = {
		{ "zipf", RP_DIST_ZIPF, 0.0, 1e9, 0 },
		{ "pareto", RP_DIST_PARETO, 0.0, 1.0, 1 },
		{ "normal", RP_DIST_NORMAL, 0.0, 100.0, 0 },
	};
	char buf[64], *c;

	memset(&j->dist, 0, sizeof(j->dist));
	j->dist.center = -1;
	if (!strcmp(val, "random"))
		return 0;
	if (!strncmp(val, "zoned:", 6) || !strncmp(val, "zoned_abs:", 10) ||
	    !strncmp(val, "zoned_abs=", 10)) {
		j->dist.kind = RP_DIST_ZONED;
		j->dist.abs = val[5] == '_';
		return set_zones(pa, j, val, val + (j->dist.abs ? 10 : 6));
	}
	for (size_t i = 0; i < RP_ARRAY_SIZE(kinds); i++) {
		size_t n = strlen(kinds[i].name);

		if (strncmp(val, kinds[i].name, n) || (val[n] && val[n] != ':'))
			continue;
		j->dist.kind = kinds[i].kind;
		snprintf(buf, sizeof(buf), "%s", val[n] ? val + n + 1 : "");
		c = strchr(buf, ':');
		if (c)
			*c++ = '\0';
		if (parse_float(buf, kinds[i].lo, kinds[i].hi, kinds[i].open, &j->dist.p) ||
		    (j->dist.kind == RP_DIST_ZIPF && (j->dist.p == 1.0 || j->dist.p == 0.0)) ||
		    (c && parse_float(c, 0.0, 1.0, 0, &j->dist.center)))
			return fail(pa, "failed parsing random_distribution=%s: %s takes %s[:CENTER "
				    "0..1]", val, kinds[i].name, kinds[i].kind == RP_DIST_ZIPF ?
				    "a theta > 0, not 1" : kinds[i].kind == RP_DIST_PARETO ?
				    "a power between 0 and 1" : "a deviation from 0 to 100 (%)");
		return 0;
	}
	return fail(pa, "failed parsing random_distribution=%s: expected random, zipf:T, "
		    "pareto:H, normal:S, zoned:A/S:.. or zoned_abs:A/SIZE:..", val);
}

/* fio adds the files of each filename option to the job's, those of the
 * defaults it started from included. */
static int add_files(struct parser *pa, struct rp_job *j, const char *val)
{
	char *both;

	if (!j->filename) {
		j->filename = val;
		return 0;
	}
	both = malloc(strlen(j->filename) + strlen(val) + 2);
	if (both) {
		sprintf(both, "%s:%s", j->filename, val);
		j->filename = keep(pa, both);
		free(both);
	}
	return both && j->filename ? 0 : fail(pa, "out of memory");
}

/* Stores a string option (job or command line). */
static int set_string(struct parser *pa, const struct opt_def *d, const char *val)
{
	struct rp_conf *c = pa->c;
	struct rp_job *j = target(pa);

	switch (d->id) {
	case RP_O_NAME: j->name = val; return 0;
	case RP_O_FILENAME: return add_files(pa, j, val);
	case RP_O_DIRECTORY: j->directory = val; return 0;
	case RP_O_RW: return set_rw(pa, j, val);
	case RP_O_LATLOG: j->lat_log = val; return 0;
	case RP_O_RATE_PROC:
		if (strcmp(val, "linear") && strcmp(val, "poisson"))
			return fail(pa, "failed parsing rate_process=%s: expected linear or "
				    "poisson", val);
		j->poisson = val[0] == 'p';
		return 0;
	case RP_O_SUBMIT_MODE:
		if (strcmp(val, "inline") && strcmp(val, "offload"))
			return fail(pa, "failed parsing io_submit_mode=%s: expected inline or "
				    "offload", val);
		j->offload = val[0] == 'o';
		return 0;
	case RP_O_BWLOG: j->bw_log = val; return 0;
	case RP_O_IOPSLOG: j->iops_log = val; return 0;
	case RP_O_RANDDIST: return set_dist(pa, j, val);
	case RP_O_LAT_PCT:
		if (parse_float(val, 0.0, 100.0, 0, &j->lat_pct))
			return fail(pa, "failed parsing latency_percentile=%s: a percentage from 0 "
				    "to 100", val);
		return 0;
	case RP_O_SS:
		if (rp_parse_ss(val, &j->ss_state, &j->ss_limit))
			return fail(pa, "failed parsing steadystate=%s: expected iops, iops_slope, "
				    "bw or bw_slope, ':', a number and an optional %%", val);
		return 0;
	case RP_O_RANDGEN:
		if (!strcmp(val, "tausworthe") || !strcmp(val, "lfsr") ||
		    !strcmp(val, "tausworthe64"))
			return 0;
		return fail(pa, "failed parsing random_generator=%s: expected tausworthe, "
			    "lfsr or tausworthe64", val);
	case RP_O_IOENGINE: return set_engine(pa, j, val);
	case RP_O_IOMEM: return set_iomem(pa, j, val);
	case RP_O_OUTPUT: c->output = val; return 0;
	case RP_O_CHECKPOINT: c->checkpoint = val; return 0;
	case RP_O_SHARDING: c->sharding = val; return 0;
	case RP_O_FORMAT: return set_format(pa, val);
	case RP_O_TERSE_VER:
		if (!strcmp(val, "3"))
			return 0;
		return fail(pa, "failed parsing terse-version=%s: rlperf writes fio's terse "
			    "version 3 only", val);
	case RP_O_ETA:
		if (!strcmp(val, "always") || !strcmp(val, "never") || !strcmp(val, "auto")) {
			c->eta = val[0] == 'a' && val[1] == 'l' ? RP_ETA_ALWAYS :
				 val[0] == 'n' ? RP_ETA_NEVER : RP_ETA_AUTO;
			return 0;
		}
		return fail(pa, "failed parsing eta=%s: expected always, never or auto", val);
	default:
		return fail(pa, "internal: %s is not a string option", d->name);
	}
}

static void set_number(struct parser *pa, const struct opt_def *d, uint64_t v, int pct)
{
	struct rp_job *j = target(pa);
	struct rp_amount a = { v, pct };

	switch (d->id) {
	case RP_O_BS: j->bs = v; break;
	case RP_O_SIZE: j->size = a; break;
	case RP_O_OFFSET: j->offset = a; break;
	case RP_O_OFFSET_INC: j->offset_increment = a; break;
	case RP_O_IODEPTH: j->iodepth = (unsigned)v; break;
	case RP_O_NUMJOBS: j->numjobs = (unsigned)v; break;
	case RP_O_RUNTIME: j->runtime_ns = v; break;
	case RP_O_RAMP: j->ramp_ns = v; break;
	case RP_O_TIME_BASED: j->time_based = (int)v; break;
	case RP_O_DIRECT: j->direct = (int)v; break;
	case RP_O_BUFFERED: j->direct = !v; break;
	case RP_O_LOGAVG: j->log_avg_ms = v; break;
	case RP_O_RATE: j->rate = v; break;
	case RP_O_RATE_IOPS: j->rate_iops = v; break;
	case RP_O_RATEMIN: j->ratemin = v; break;
	case RP_O_RATECYCLE: j->ratecycle_ns = v * 1000000ull; break;
	case RP_O_STARTDELAY: j->startdelay_ns = v; break;
	case RP_O_THINKTIME: j->thinktime_ns = v; break;
	case RP_O_LAT_TARGET: j->lat_target_ns = v; break;
	case RP_O_LAT_WINDOW: j->lat_window_ns = v; break;
	case RP_O_LAT_RUN: j->lat_run = (int)v; break;
	case RP_O_PRIOCLASS: j->prioclass = (unsigned)v; break;
	case RP_O_PRIO: j->prio = (unsigned)v; break;
	case RP_O_CMDPRIO_PCT: j->cmdprio_pct = (unsigned)v; break;
	case RP_O_BATCH_SUBMIT: j->batch_submit = (unsigned)v; break;
	case RP_O_BATCH_CMIN: j->batch_cmin = (unsigned)v; break;
	case RP_O_BATCH_CMAX: j->batch_cmax = (unsigned)v; break;
	case RP_O_IODEPTH_LOW: j->iodepth_low = (unsigned)v; break;
	case RP_O_CMDPRIO_CLASS: j->cmdprio_class = (unsigned)v; break;
	case RP_O_CMDPRIO: j->cmdprio = (unsigned)v; break;
	case RP_O_SS_DUR: j->ss_dur_ns = v; break;
	case RP_O_SS_RAMP: j->ss_ramp_ns = v; break;
	case RP_O_THINK_BLOCKS: j->thinktime_blocks = (unsigned)v; break;
	case RP_O_FLOW: j->flow = (unsigned)v; break;
	case RP_O_FLOW_ID: j->flow_id = (unsigned)v; break;
	case RP_O_FLOW_SLEEP: j->flow_sleep_ns = v * 1000; break;
	case RP_O_RANDREPEAT:
		/* fio's randrepeat=0: seeds that differ from run to run */
		if (!v)
			j->seed = perf_now_ns() ^ ((uint64_t)getpid() << 32);
		break;
	case RP_O_LOGOFF: j->log_offset = (int)v; break;
	case RP_O_LOGPRIO: j->log_prio = (int)v; break;
	case RP_O_FIXEDBUFS: j->fixedbufs = (int)v; break;
	case RP_O_REGFILES: j->registerfiles = (int)v; break;
	case RP_O_GROUP: j->group_reporting = (int)v; break;
	case RP_O_INVALIDATE: j->invalidate = (int)v; break;
	case RP_O_NORANDOMMAP: j->norandommap = (int)v; break;
	case RP_O_RANDSEED: j->seed = v; break;
	case RP_O_THREAD: j->thread = (int)v; break;
	case RP_O_HIPRI: j->hipri = (int)v; break;
	case RP_O_GTOD_REDUCE: j->gtod_reduce = (int)v; break;
	case RP_O_STONEWALL: j->stonewall = (int)v; break;
	case RP_O_NEW_GROUP: j->new_group = (int)v; break;
	case RP_O_SQPOLL: j->sqthread_poll = (int)v; break;
	case RP_O_KB_BASE: j->kb_base = (unsigned)v; break;
	case RP_O_PROCESS: pa->c->process = (int)v; break;
	case RP_O_STATUS: pa->c->status_interval_ns = v; break;
	default: break;
	}
}

/*
 * Applies one option with its value (NULL: none given) where the parser
 * stands, and records it as given. spelled: the name as written.
 */
static int apply(struct parser *pa, const struct opt_def *d, const char *spelled,
		 const char *val)
{
	uint64_t v = 0;
	int pct = 0, rc = 0;

	if (d->kind == K_ACTION) {
		if (d->id == RP_O_HELP)
			pa->action = RP_PARSE_HELP;
		else if (d->id == RP_O_VERSION && !pa->action)
			pa->action = RP_PARSE_VERSION;
		else if (d->id == RP_O_MINIMAL)
			pa->c->format = RP_FMT_TERSE;
		return 0;
	}
	if (d->kind != K_SET && d->kind != K_OPTSTR && (!val || !*val))
		return fail(pa, "option %s%s needs a value", pa->where[0] ? "" : "--",
			    spelled);
	if (d->kind == K_STR || d->kind == K_OPTSTR)
		rc = set_string(pa, d, val ? val : "");
	else if (d->kind == K_USEC && val[strspn(val, "0123456789")] == '\0' &&
		 !rp_parse_size(val, 1000, &v, NULL) && v <= UINT64_MAX / 1000)
		v *= 1000;  /* fio's is_time options: plain numbers are microseconds */
	else if ((d->kind == K_TIME || d->kind == K_USEC) && rp_parse_time(val, &v))
		rc = fail(pa, "failed parsing %s=%s: not a time (examples: %s, 500ms, 2m)",
			  spelled, val, d->kind == K_USEC ? "500 (microseconds)" : "30");
	else if (d->kind != K_TIME && d->kind != K_USEC)
		rc = parse_number(pa, d, spelled, val, &v, &pct);
	if (!rc && d->id == RP_O_STATUS && v < 1000000)
		rc = fail(pa, "failed parsing %s=%s: status interval too small (at least 1ms, "
			  "as fio)", spelled, val);
	if (rc)
		return rc;
	if (d->kind != K_STR && d->kind != K_OPTSTR)
		set_number(pa, d, v, pct);
	if (d->cmdline)
		return 0;
	target(pa)->set |= RP_OPT_BIT(d->id);
	if (pa->job < 0)
		pa->c->have_global = 1;
	/* fio's "job options" list options with a value only */
	if (val && kv_add(pa->job < 0 ? &pa->c->global_given : &target(pa)->given,
			  spelled, val))
		return fail(pa, "out of memory");
	return 0;
}

/* ---------------------------------------------------------------- */
/* Command line                                                      */
/* ---------------------------------------------------------------- */

/* --name=N: job N from the defaults; --name=global*: back to them (fio) */
static int cmdline_name(struct parser *pa, const char *val)
{
	int rc;

	if (!*val)
		return fail(pa, "option --name needs a value");
	if (!strncmp(val, "global", 6)) {
		pa->job = -1;
		return apply(pa, &opt_table[0], "name", val);
	}
	rc = new_job(pa, val);
	if (rc)
		return rc;
	return kv_add(&target(pa)->given, "name", val) ? fail(pa, "out of memory") : 0;
}

/* One "--opt[=value]" argument at argv[*i]; may take argv[*i + 1]. */
static int cmdline_opt(struct parser *pa, int argc, char **argv, int *i)
{
	const char *name = argv[*i] + 2, *eq = strchr(name, '='), *spelled, *val = NULL;
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	const struct opt_def *d = find_opt(name, len, &spelled);
	char opt[64];

	if (!d)
		return unknown_opt(pa, name, len, "--");
	snprintf(opt, sizeof(opt), "--%s", spelled);
	if (eq)
		val = eq + 1;
	if (d->kind == K_ACTION && eq)
		return fail(pa, "option %s takes no value", opt);
	/* as getopt's required_argument: the next word is the value */
	if (!eq && d->kind != K_SET && d->kind != K_ACTION && d->kind != K_OPTSTR) {
		if (*i + 1 >= argc)
			return fail(pa, "option %s needs a value", opt);
		val = argv[++*i];
	}
	if (d->id == RP_O_NAME)
		return cmdline_name(pa, val);
	return apply(pa, d, spelled, val);
}

static int cmdline_jobfile(struct parser *pa, const char *arg)
{
	if (pa->c->jobfile)
		return fail(pa, "more than one job file ('%s', '%s'): rlperf runs one "
			    "(fio would run the second after the first, as with stonewall)",
			    pa->c->jobfile, arg);
	pa->c->jobfile = arg;
	return 0;
}

static int parse_cmdline(struct parser *pa, int argc, char **argv)
{
	int files_only = 0, rc = 0;

	for (int i = 1; i < argc && !rc; i++) {
		const char *arg = argv[i];

		if (files_only || arg[0] != '-' || !arg[1])
			rc = cmdline_jobfile(pa, arg);
		else if (!strcmp(arg, "--"))
			files_only = 1;
		else if (!strcmp(arg, "-h"))
			pa->action = RP_PARSE_HELP;
		else if (arg[1] != '-')
			rc = fail(pa, "unrecognized option '%s' (options are spelled "
				  "--name=value or --name value)", arg);
		else
			rc = cmdline_opt(pa, argc, argv, &i);
	}
	return rc;
}

/* ---------------------------------------------------------------- */
/* Job files                                                         */
/* ---------------------------------------------------------------- */

static int file_opt(struct parser *pa, const struct rp_ini_opt *o)
{
	const struct opt_def *d;
	const char *spelled, *val = NULL;

	d = find_opt(o->key, strlen(o->key), &spelled);
	if (!d)
		return unknown_opt(pa, o->key, strlen(o->key), "");
	if (d->cmdline)
		return fail(pa, "%s is a command-line option, not a job option", spelled);
	if (o->val) {
		val = keep(pa, o->val);
		if (!val)
			return fail(pa, "out of memory");
	}
	return apply(pa, d, spelled, val);
}

/* One [section]: kb_base first, then the rest in order, as fio sorts a
 * section's options by priority before applying them. */
static int on_section(void *user, const char *section, unsigned line,
		      const struct rp_ini_opt *opts, size_t n, char *err, size_t errlen)
{
	struct parser *pa = user;
	const char *name;
	int rc = 0;

	(void)err;
	(void)errlen;
	snprintf(pa->where, sizeof(pa->where), "%s:%u: ", pa->c->jobfile, line);
	if (!strncmp(section, "global", 6)) {
		pa->job = -1;
	} else {
		name = keep(pa, section);
		rc = name ? new_job(pa, name) : fail(pa, "out of memory");
	}
	for (int pass = 0; pass < 2 && !rc; pass++)
		for (size_t i = 0; i < n && !rc; i++) {
			if ((strcmp(opts[i].key, "kb_base") != 0) != pass)
				continue;
			snprintf(pa->where, sizeof(pa->where), "%s:%u: ", pa->c->jobfile,
				 opts[i].line);
			rc = file_opt(pa, &opts[i]);
		}
	return rc;
}

/* ---------------------------------------------------------------- */
/* Checks once everything is read                                    */
/* ---------------------------------------------------------------- */

static int check_checkpoint(struct parser *pa)
{
	struct rp_conf *c = pa->c;
	rp_optset set = c->global.set;

	if (c->jobfile || c->njobs)
		return fail(pa, "--checkpoint runs no jobs: leave out job files and --name");
	if (c->global.filename)
		return fail(pa, "--filename and --checkpoint exclude each other");
	if (c->format == RP_FMT_TERSE)
		return fail(pa, "--output-format=terse applies to raw reads (--filename), "
			    "not to --checkpoint (normal or json)");
	for (size_t i = 0; i < RP_ARRAY_SIZE(opt_table); i++)
		if (opt_table[i].raw && (set >> opt_table[i].id & 1))
			return fail(pa, "--%s applies to raw reads (--filename), not to "
				    "--checkpoint", opt_table[i].name);
	return 0;
}

unsigned rp_job_depth(const struct rp_job *j)
{
	return j->engine == RL_BACKEND_PREAD && !j->offload ? 1 : j->iodepth;
}

uint32_t rp_job_ioprio(const struct rp_job *j, int high)
{
	if (high)
		return rp_ioprio(j->cmdprio_class ? j->cmdprio_class : RP_IOPRIO_RT, j->cmdprio);
	if (j->set & (RP_OPT_BIT(RP_O_PRIOCLASS) | RP_OPT_BIT(RP_O_PRIO)))
		return rp_ioprio(j->prioclass, j->prio);
	return 0;
}

/* fio's fixup_options for its batching: a submit batch of 0 or over
 * iodepth is iodepth, so is a low mark of 0 or over it; a completion
 * maximum below the minimum is the minimum. */
static void fixup_batching(struct rp_job *j)
{
	if (!j->batch_submit || j->batch_submit > j->iodepth)
		j->batch_submit = j->iodepth;
	if (!j->iodepth_low || j->iodepth_low > j->iodepth)
		j->iodepth_low = j->iodepth;
	if (j->batch_cmin > j->batch_cmax)
		j->batch_cmax = j->batch_cmin;
}

static int check_job(struct parser *pa, const struct rp_job *j)
{
	unsigned caps = rl_backend_caps((rl_backend)j->engine);
	char who[300] = "";

	if (pa->c->njobs > 1 || pa->c->jobfile)
		snprintf(who, sizeof(who), "job %s: ", j->name);
	if (j->time_based && !j->runtime_ns)
		return fail(pa, "%s--time_based needs --runtime", who);
	if ((j->fixedbufs && !(caps & RL_BACKEND_CAP_FIXED_BUFFERS)) ||
	    (j->registerfiles && !(caps & RL_BACKEND_CAP_FIXED_FILES)))
		return fail(pa, "%s--fixedbufs and --registerfiles need --ioengine=io_uring",
			    who);
	/* fio knows sqthread_poll for io_uring only, hipri also for pvsync2 */
	if (!(caps & RL_BACKEND_CAP_SQ_THREAD) && j->sqthread_poll)
		return fail(pa, "%s--sqthread_poll needs --ioengine=io_uring", who);
	if (!(caps & RL_BACKEND_CAP_POLL) && j->hipri && strcmp(j->ioengine, "pvsync2"))
		return fail(pa, "%s--hipri needs --ioengine=io_uring or pvsync2",
			    who);
	/* fio's cmdprio_* are options of its libaio and io_uring engines */
	if (!(caps & RL_BACKEND_CAP_KERNEL_QUEUE && caps & RL_BACKEND_CAP_IOPRIO) &&
	    (j->set & ((rp_optset)7 << RP_O_CMDPRIO_PCT)))
		return fail(pa, "%s--cmdprio_percentage, --cmdprio_class and --cmdprio need "
			    "--ioengine=io_uring or libaio (per-read priorities)", who);
	/* fio counts the window in whole seconds of one sample each */
	if (j->ss_dur_ns && (j->ss_dur_ns < 1000000000ull ||
			     j->ss_dur_ns / 1000000000ull > RP_SS_MAX_DUR))
		return fail(pa, "%s--steadystate_duration must be 1s to %us", who, RP_SS_MAX_DUR);
	return 0;
}

static int check_conf(struct parser *pa)
{
	struct rp_conf *c = pa->c;
	int rc;

	pa->where[0] = '\0';
	if (c->checkpoint)
		return check_checkpoint(pa);
	if (c->sharding || (c->process && !c->checkpoint))
		return fail(pa, "--sharding and --process need --checkpoint");
	if (!c->njobs && c->jobfile)
		return fail(pa, "%s: no job defined (only [global] sections)", c->jobfile);
	if (!c->njobs) {
		/* fio would say "No job(s) defined"; rlperf makes the options one
		 * job, so that a single job needs no --name */
		if (!c->global.filename && !c->global.directory)
			return fail(pa, "no --filename given (or --checkpoint, or a job "
				    "file); see rlperf --help");
		rc = new_job(pa, c->global.name);
		if (rc)
			return rc;
		c->jobs[0].given = c->global_given;
		memset(&c->global_given, 0, sizeof(c->global_given));
		c->have_global = 0;
	}
	for (size_t i = 0; i < c->njobs; i++) {
		fixup_batching(&c->jobs[i]);
		rc = check_job(pa, &c->jobs[i]);
		if (rc)
			return rc;
	}
	return 0;
}

int rp_parse_args(int argc, char **argv, struct rp_conf *c, char *err, size_t errlen)
{
	struct parser pa = { .c = c, .job = -1, .err = err, .errlen = errlen };
	int rc;

	memset(c, 0, sizeof(*c));
	rp_job_default(&c->global);
	if (errlen)
		err[0] = '\0';
	rc = parse_cmdline(&pa, argc, argv);
	if (!rc && pa.action) {
		rp_conf_free(c);
		return pa.action;
	}
	pa.job = -1;
	if (!rc && c->jobfile) {
		rc = rp_ini_parse(c->jobfile, on_section, &pa, err, errlen);
		if (rc)
			rc = RP_PARSE_ERROR;
	}
	if (!rc)
		rc = check_conf(&pa);
	if (rc)
		rp_conf_free(c);
	return rc ? RP_PARSE_ERROR : 0;
}

void rp_conf_free(struct rp_conf *c)
{
	for (size_t i = 0; i < c->njobs; i++)
		free(c->jobs[i].given.v);
	free(c->jobs);
	free(c->global_given.v);
	for (size_t i = 0; i < c->nstrs; i++)
		free(c->strs[i]);
	free(c->strs);
	memset(c, 0, sizeof(*c));
}

void rp_usage(FILE *f)
{
	fprintf(f,
		"usage: rlperf [options] [job file]\n"
		"       rlperf --checkpoint=PATH [--sharding=SPEC] [--process=P] "
		"[--ioengine=E] [--iodepth=N] [--bs=SIZE] [--direct=0|1]\n"
		"\nfio's options and job files: --opt=value or --opt value (flags: --flag "
		"or --flag=0|1). Sizes: 4096, 0x1000, 4k/4m/4g/4t/4p (powers of 1024;\n"
		"4KiB is 4000 unless kb_base=1000, as in fio), N%% of the file (size, "
		"offset, offset_increment). Times: seconds or us/ms/s/m/h/d.\n\n");
	for (size_t i = 0; i < RP_ARRAY_SIZE(opt_table); i++) {
		const struct opt_def *d = &opt_table[i];
		char buf[48];

		snprintf(buf, sizeof(buf), "--%s%s%s%s", d->name,
			 d->kind == K_SET ? "[=0|1]" : d->kind == K_OPTSTR ? "[=" : d->arg ? "=" : "",
			 d->arg ? d->arg : "", d->kind == K_OPTSTR ? "]" : "");
		fprintf(f, "  %-26s %s%s%s%s\n", buf, d->help, d->alias ? " (also --" : "",
			d->alias ? d->alias : "", d->alias ? ")" : "");
	}
}
