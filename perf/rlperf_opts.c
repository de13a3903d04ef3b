/*
 * rlperf_opts.c - rlperf's options, spelled as fio spells them, declared in
 * one table (as fio's options.c does) and parsed with fio's number syntax.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rlperf.h"

enum opt_id {
	OPT_NAME, OPT_FILENAME, OPT_SIZE, OPT_OFFSET, OPT_RW, OPT_BS, OPT_IODEPTH, OPT_DIRECT,
	OPT_ENGINE, OPT_FIXEDBUFS, OPT_REGFILES, OPT_NUMJOBS, OPT_RUNTIME, OPT_TIME_BASED,
	OPT_RAMP, OPT_FORMAT, OPT_RANDSEED, OPT_GROUP, OPT_THREAD, OPT_CHECKPOINT,
	OPT_SHARDING, OPT_PROCESS, OPT_HELP, OPT_VERSION,
};

enum opt_kind { K_STR, K_SIZE, K_UINT, K_BOOL, K_TIME, K_FLAG };

struct opt_def {
	const char *name;
	enum opt_id id;
	enum opt_kind kind;
	uint64_t lo, hi;        /* K_SIZE, K_UINT bounds, inclusive */
	int raw_only;           /* meaningless in checkpoint mode */
	const char *help;
};

static const struct opt_def opt_table[] = {
	{ "name", OPT_NAME, K_STR, 0, 0, 0, "job name (default rlperf)" },
	{ "filename", OPT_FILENAME, K_STR, 0, 0, 1, "file or block device to read" },
	{ "size", OPT_SIZE, K_SIZE, 1, UINT64_MAX, 1, "bytes per job (default: file size - offset)" },
	{ "offset", OPT_OFFSET, K_SIZE, 0, UINT64_MAX, 1, "start of the region read (default 0)" },
	{ "rw", OPT_RW, K_STR, 0, 0, 1, "read (sequential, default) or randread" },
	{ "readwrite", OPT_RW, K_STR, 0, 0, 1, NULL },
	{ "bs", OPT_BS, K_SIZE, 1, RP_MAX_BS, 0, "block size (default 4k); checkpoint mode: request size" },
	{ "blocksize", OPT_BS, K_SIZE, 1, RP_MAX_BS, 0, NULL },
	{ "iodepth", OPT_IODEPTH, K_UINT, 1, RP_MAX_IODEPTH, 0, "reads in flight per job (default 1)" },
	{ "direct", OPT_DIRECT, K_BOOL, 0, 1, 0, "1: OPT_DIRECT (default 0)" },
	{ "engine", OPT_ENGINE, K_STR, 0, 0, 0, "io_uring (default), libaio or psync" },
	{ "ioengine", OPT_ENGINE, K_STR, 0, 0, 0, NULL },
	{ "fixedbufs", OPT_FIXEDBUFS, K_BOOL, 0, 1, 0, "io_uring: register the buffers" },
	{ "registerfiles", OPT_REGFILES, K_BOOL, 0, 1, 0, "io_uring: register the files" },
	{ "numjobs", OPT_NUMJOBS, K_UINT, 1, RP_MAX_NUMJOBS, 1, "jobs, one thread and engine each (default 1)" },
	{ "runtime", OPT_RUNTIME, K_TIME, 0, 0, 1, "stop after this long (seconds, or 500ms, 2m)" },
	{ "time_based", OPT_TIME_BASED, K_BOOL, 0, 1, 1, "loop over the region until runtime ends" },
	{ "ramp_time", OPT_RAMP, K_TIME, 0, 0, 1, "run this long before measuring" },
	{ "output-format", OPT_FORMAT, K_STR, 0, 0, 0, "normal (default) or json" },
	{ "randseed", OPT_RANDSEED, K_SIZE, 0, UINT64_MAX, 1, "seed of randread's order" },
	{ "group_reporting", OPT_GROUP, K_FLAG, 0, 0, 1, "accepted: jobs are always reported as one group" },
	{ "thread", OPT_THREAD, K_FLAG, 0, 0, 1, "accepted: jobs always run as threads" },
	{ "checkpoint", OPT_CHECKPOINT, K_STR, 0, 0, 0, "load a checkpoint through the library" },
	{ "sharding", OPT_SHARDING, K_STR, 0, 0, 0, "checkpoint mode: sharding spec (JSON file)" },
	{ "process", OPT_PROCESS, K_UINT, 0, 1u << 20, 0, "checkpoint mode: process to load for (default 0)" },
	{ "help", OPT_HELP, K_FLAG, 0, 0, 0, "this text" },
	{ "version", OPT_VERSION, K_FLAG, 0, 0, 0, "print the version" },
};

static const struct {
	const char *name;
	int engine;
} engine_names[] = {
	{ "io_uring", ENG_IO_URING },
	{ "libaio", ENG_LIBAIO },
	{ "psync", ENG_PREAD },
};

const char *rp_backend_name(int backend)
{
	static const char *const names[] = { "auto", "io_uring", "libaio", "pread" };

	return backend >= 0 && backend < (int)RL_ARRAY_SIZE(names) ? names[backend] : "?";
}

const char *rp_engine_name(int engine)
{
	for (size_t i = 0; i < RL_ARRAY_SIZE(engine_names); i++)
		if (engine_names[i].engine == engine)
			return engine_names[i].name;
	return "auto";
}

void rp_opts_default(struct rp_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->name = "rlperf";
	o->rw = RP_READ;
	o->bs = 4096;           /* fio's defaults: 4k, depth 1, buffered */
	o->iodepth = 1;
	o->engine = ENG_IO_URING;
	o->numjobs = 1;
	o->format = RP_FMT_NORMAL;
	o->seed = 0x5eed5eed;
}

int rp_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "kmgtp";
	const char *p = s, *u;
	uint64_t v = 0, mult = 1;
	int base = 10;

	if (!*p)
		return -1;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X') && p[2]) {
		base = 16;
		p += 2;
	}
	for (; *p && isxdigit((unsigned char)*p); p++) {
		unsigned d;

		if (isdigit((unsigned char)*p))
			d = *p - '0';
		else if (base == 16)
			d = tolower((unsigned char)*p) - 'a' + 10;
		else
			break;
		if (rl_mul64(v, base, &v) || rl_add64(v, d, &v))
			return -1;
	}
	if (p == s || (base == 16 && p == s + 2))
		return -1;
	if (*p) {
		u = strchr(units, tolower((unsigned char)*p));
		if (u) {
			for (long k = u - units; k >= 0; k--)
				mult *= 1024;
			p++;
			/* fio's kb_base is 1024: k, K, kb, KiB all mean 1024 */
			if (*p == 'i' || *p == 'I')
				p++;
			if (*p == 'b' || *p == 'B')
				p++;
		} else if (*p == 'b' || *p == 'B') {
			p++;
		}
	}
	if (*p || rl_mul64(v, mult, out))
		return -1;
	return 0;
}

int rp_parse_time(const char *s, uint64_t *ns)
{
	static const struct {
		const char *suffix;
		uint64_t ns;
	} units[] = {
		{ "", 1000000000ull }, { "us", 1000ull }, { "ms", 1000000ull },
		{ "s", 1000000000ull }, { "m", 60000000000ull },
		{ "h", 3600000000000ull }, { "d", 86400000000000ull },
	};
	uint64_t v = 0;
	const char *p = s;

	for (; isdigit((unsigned char)*p); p++)
		if (rl_mul64(v, 10, &v) || rl_add64(v, *p - '0', &v))
			return -1;
	if (p == s)
		return -1;
	for (size_t i = 0; i < RL_ARRAY_SIZE(units); i++)
		if (!strcasecmp(p, units[i].suffix))
			return rl_mul64(v, units[i].ns, ns);
	return -1;
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(err, errlen, "rlperf: ");

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < errlen)
		vsnprintf(err + n, errlen - n, fmt, ap);
	va_end(ap);
	return RP_PARSE_ERROR;
}

static const struct opt_def *find_opt(const char *name, size_t len)
{
	for (size_t i = 0; i < RL_ARRAY_SIZE(opt_table); i++)
		if (strlen(opt_table[i].name) == len &&
		    !strncmp(opt_table[i].name, name, len))
			return &opt_table[i];
	return NULL;
}

/* Stores one option's value; returns 0 or RP_PARSE_ERROR. */
static int set_opt(const struct opt_def *d, const char *val, struct rp_opts *o,
		   char *err, size_t errlen)
{
	uint64_t v = 0;

	switch (d->kind) {
	case K_SIZE:
	case K_UINT:
		if (rp_parse_size(val, &v))
			return fail(err, errlen, "failed parsing %s=%s: not a number "
				    "(examples: 4096, 4k, 1M, 2g)", d->name, val);
		if (v < d->lo || v > d->hi)
			return fail(err, errlen, "failed parsing %s=%s: out of range "
				    "[%llu, %llu]", d->name, val,
				    (unsigned long long)d->lo, (unsigned long long)d->hi);
		break;
	case K_BOOL:
		if (!strcmp(val, "1"))
			v = 1;
		else if (strcmp(val, "0"))
			return fail(err, errlen, "failed parsing %s=%s: expected 0 or 1",
				    d->name, val);
		break;
	case K_TIME:
		if (rp_parse_time(val, &v))
			return fail(err, errlen, "failed parsing %s=%s: not a time "
				    "(examples: 30, 500ms, 2m)", d->name, val);
		break;
	case K_STR:
		if (!*val)
			return fail(err, errlen, "failed parsing %s=: empty value", d->name);
		break;
	case K_FLAG:
		break;
	}

	switch (d->id) {
	case OPT_NAME: o->name = val; break;
	case OPT_FILENAME: o->filename = val; break;
	case OPT_SIZE: o->size = v; break;
	case OPT_OFFSET: o->offset = v; break;
	case OPT_RW:
		if (!strcmp(val, "read"))
			o->rw = RP_READ;
		else if (!strcmp(val, "randread"))
			o->rw = RP_RANDREAD;
		else if (!strcmp(val, "write") || !strcmp(val, "randwrite") ||
			 !strcmp(val, "rw") || !strcmp(val, "readwrite") ||
			 !strcmp(val, "randrw") || !strcmp(val, "trim") ||
			 !strcmp(val, "randtrim") || !strcmp(val, "trimwrite"))
			return fail(err, errlen, "failed parsing rw=%s: rlperf only "
				    "reads (read, randread)", val);
		else
			return fail(err, errlen, "failed parsing rw=%s: expected read "
				    "or randread", val);
		break;
	case OPT_BS: o->bs = v; o->bs_set = 1; break;
	case OPT_IODEPTH: o->iodepth = (unsigned)v; o->iodepth_set = 1; break;
	case OPT_DIRECT: o->direct = (int)v; o->direct_set = 1; break;
	case OPT_ENGINE:
		for (size_t i = 0; i < RL_ARRAY_SIZE(engine_names); i++)
			if (!strcmp(val, engine_names[i].name)) {
				o->engine = engine_names[i].engine;
				o->engine_set = 1;
				return 0;
			}
		return fail(err, errlen, "engine %s not loadable (rlperf has "
			    "io_uring, libaio, psync)", val);
	case OPT_FIXEDBUFS: o->fixedbufs = (int)v; break;
	case OPT_REGFILES: o->registerfiles = (int)v; break;
	case OPT_NUMJOBS: o->numjobs = (unsigned)v; break;
	case OPT_RUNTIME: o->runtime_ns = v; break;
	case OPT_TIME_BASED: o->time_based = (int)v; break;
	case OPT_RAMP: o->ramp_ns = v; break;
	case OPT_FORMAT:
		if (!strcmp(val, "normal"))
			o->format = RP_FMT_NORMAL;
		else if (!strcmp(val, "json"))
			o->format = RP_FMT_JSON;
		else
			return fail(err, errlen, "failed parsing output-format=%s: "
				    "expected normal or json", val);
		break;
	case OPT_RANDSEED: o->seed = v; break;
	case OPT_GROUP:
	case OPT_THREAD:
		break;
	case OPT_CHECKPOINT: o->checkpoint = val; break;
	case OPT_SHARDING: o->sharding = val; break;
	case OPT_PROCESS: o->process = (int)v; break;
	case OPT_HELP:
	case OPT_VERSION:
		break;
	}
	return 0;
}

/* Cross-option checks once everything is parsed. */
static int check_opts(const struct rp_opts *o, uint64_t given, char *err,
		      size_t errlen)
{
	if (o->checkpoint) {
		if (o->filename)
			return fail(err, errlen, "--filename and --checkpoint exclude "
				    "each other");
		for (size_t i = 0; i < RL_ARRAY_SIZE(opt_table); i++)
			if (opt_table[i].raw_only && (given >> opt_table[i].id & 1))
				return fail(err, errlen, "--%s applies to raw reads "
					    "(--filename), not to --checkpoint",
					    opt_table[i].name);
		return 0;
	}
	if ((given >> OPT_SHARDING & 1) || (given >> OPT_PROCESS & 1))
		return fail(err, errlen, "--sharding and --process need --checkpoint");
	if (!o->filename)
		return fail(err, errlen, "no --filename given (or --checkpoint); "
			    "see rlperf --help");
	if (o->time_based && !o->runtime_ns)
		return fail(err, errlen, "--time_based needs --runtime");
	if (o->engine == ENG_PREAD && (o->fixedbufs || o->registerfiles))
		return fail(err, errlen, "--fixedbufs and --registerfiles need "
			    "--engine=io_uring");
	if (o->engine == ENG_LIBAIO && (o->fixedbufs || o->registerfiles))
		return fail(err, errlen, "--fixedbufs and --registerfiles need "
			    "--engine=io_uring");
	if (o->bs > UINT32_MAX)
		return fail(err, errlen, "bs too large");
	return 0;
}

int rp_parse_args(int argc, char **argv, struct rp_opts *o, char *err,
		  size_t errlen)
{
	uint64_t given = 0;
	int special = 0;

	rp_opts_default(o);
	if (errlen)
		err[0] = '\0';
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *name, *eq, *val;
		const struct opt_def *d;
		size_t len;

		if (strncmp(arg, "--", 2) || !arg[2]) {
			if (!strcmp(arg, "-h"))
				return RP_PARSE_HELP;
			return fail(err, errlen, "unexpected argument '%s' (options are "
				    "spelled --name=value)", arg);
		}
		name = arg + 2;
		eq = strchr(name, '=');
		len = eq ? (size_t)(eq - name) : strlen(name);
		d = find_opt(name, len);
		if (!d)
			return fail(err, errlen, "unrecognized option '--%.*s'", (int)len,
				    name);
		if (d->kind == K_FLAG) {
			if (eq)
				return fail(err, errlen, "option --%s takes no value",
					    d->name);
			val = "";
		} else if (eq) {
			val = eq + 1;
		} else if (d->kind == K_BOOL) {
			val = "1";      /* fio: a bare boolean option sets it */
		} else if (i + 1 < argc) {
			val = argv[++i];
		} else {
			return fail(err, errlen, "option --%s needs a value", d->name);
		}
		if (set_opt(d, val, o, err, errlen))
			return RP_PARSE_ERROR;
		given |= 1ull << d->id;
		if (d->id == OPT_HELP)
			special = RP_PARSE_HELP;
		else if (d->id == OPT_VERSION && !special)
			special = RP_PARSE_VERSION;
	}
	if (special)
		return special;
	return check_opts(o, given, err, errlen) ? RP_PARSE_ERROR : 0;
}

void rp_usage(FILE *f)
{
	fprintf(f,
		"usage: rlperf --filename=PATH [--rw=read|randread] [--bs=SIZE] "
		"[--iodepth=N] ...\n"
		"       rlperf --checkpoint=PATH [--sharding=SPEC] [--process=P] "
		"[--engine=E] [--iodepth=N] [--bs=SIZE]\n"
		"\nfio's spelling: --opt=value or --opt value; sizes take k/m/g/t "
		"(powers of 1024); times are seconds or take us/ms/s/m/h.\n\n");
	for (size_t i = 0; i < RL_ARRAY_SIZE(opt_table); i++) {
		const struct opt_def *d = &opt_table[i];
		char buf[40];

		if (!d->help)
			continue;
		snprintf(buf, sizeof(buf), "--%s%s", d->name,
			 d->kind == K_FLAG ? "" : d->kind == K_BOOL ? "[=0|1]" : "=V");
		fprintf(f, "  %-22s %s\n", buf, d->help);
	}
}
