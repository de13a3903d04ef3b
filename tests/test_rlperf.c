/*
 * test_rlperf.c - rlperf: fio's number and time syntax (checked against the
 * fio binary where it is installed), options in both spellings, job files,
 * global options, errors that name the option, the regions of job clones
 * by fio's rules, the latency histogram, the offset generators, the runner
 * on a fake engine defined here, report units (group_reporting), the normal
 * and JSON output, and end to end the real build/rlperf: its JSON against
 * fio's own for the same job file, --output, invalidate, several files,
 * and checkpoint mode.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* rlperf's parts other than main(): compiled in, tested directly */
#include "../perf/rlperf_num.c"
#include "../perf/rlperf_fionames.c"
#include "../perf/rlperf_ini.c"
#include "../perf/rlperf_opts.c"
#include "../perf/rlperf_hist.c"
#include "../perf/rlperf_log.c"
#include "../perf/rlperf_dist.c"
#include "../perf/rlperf_gen.c"
#include "../perf/rlperf_setup.c"
#include "../perf/rlperf_run.c"
#include "../perf/rlperf_ss.c"
#include "../perf/rlperf_unit.c"
#include "../perf/rlperf_disk.c"
#include "../perf/rlperf_out.c"
#include "../perf/rlperf_json.c"
#include "../perf/rlperf_terse.c"
#include "../perf/rlperf_eta.c"
#include "../perf/rlperf_ckpt.c"

/* ---------------------------------------------------------------- */
/* Helpers                                                           */
/* ---------------------------------------------------------------- */

static int parse_v(struct rp_conf *c, char *err, size_t errlen, va_list ap)
{
	char *argv[40] = { "rlperf" };
	int argc = 1;
	char *a;

	while ((a = va_arg(ap, char *)) && argc < 39)
		argv[argc++] = a;
	return rp_parse_args(argc, argv, c, err, errlen);
}

/* rp_parse_args on a NULL-ended list of arguments */
static int parse(struct rp_conf *c, char *err, size_t errlen, ...)
{
	va_list ap;
	int rc;

	va_start(ap, errlen);
	rc = parse_v(c, err, errlen, ap);
	va_end(ap);
	return rc;
}

/* A file of size bytes (random content) in the test's directory. */
static const char *make_file(const char *name, uint64_t size)
{
	static char path[8][512];
	static int k;
	char *p = path[k++ % 8];
	char buf[65536];
	int fd;

	snprintf(p, 512, "%s/%s", th_tmpdir(), name);
	fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0)
		return NULL;
	for (uint64_t done = 0; done < size;) {
		size_t n = size - done < sizeof(buf) ? (size_t)(size - done) : sizeof(buf);

		for (size_t i = 0; i < n; i++)
			buf[i] = (char)th_rand();
		if (write(fd, buf, n) != (ssize_t)n) {
			close(fd);
			return NULL;
		}
		done += n;
	}
	if (fsync(fd)) {
		close(fd);
		return NULL;
	}
	close(fd);
	return p;
}

static const char *write_text(const char *name, const char *text)
{
	static char path[4][512];
	static int k;
	char *p = path[k++ % 4];
	FILE *f;

	snprintf(p, 512, "%s/%s", th_tmpdir(), name);
	f = fopen(p, "w");
	if (!f)
		return NULL;
	fputs(text, f);
	fclose(f);
	return p;
}

/* Runs a shell command; its stdout and stderr into out (NUL-ended). */
static int run_cmd(const char *cmd, char *out, size_t len)
{
	FILE *p = popen(cmd, "r");
	size_t n;
	int st;

	if (!p)
		return -1;
	n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int have(const char *cmd)
{
	char c[256];

	snprintf(c, sizeof(c), "%s >/dev/null 2>&1", cmd);
	return system(c) == 0;
}

/* ---------------------------------------------------------------- */
/* Numbers                                                           */
/* ---------------------------------------------------------------- */

/* What fio 3.33 reads (each checked against the binary: see
 * sizes_match_the_fio_binary). */
static const struct {
	const char *s;
	unsigned kb_base;
	uint64_t v;
} fio_sizes[] = {
	{ "4096", 1024, 4096 }, { "4k", 1024, 4096 }, { "4K", 1024, 4096 },
	{ "4kb", 1024, 4096 }, { "4KB", 1024, 4096 }, { "4KiB", 1024, 4000 },
	{ "4kib", 1024, 4000 }, { "4ki", 1024, 4096 }, { "1m", 1024, 1 << 20 },
	{ "1MB", 1024, 1 << 20 }, { "1MiB", 1024, 1000000 }, { "1mi", 1024, 1 << 20 },
	{ "0x10", 1024, 16 }, { "0X1F", 1024, 31 }, { "512b", 1024, 512 }, { "0xA0", 1024, 160 },
	{ "4k", 1000, 4000 }, { "4kb", 1000, 4000 }, { "4KiB", 1000, 4096 },
	{ "1mi", 1000, 1000000 }, { "1MiB", 1000, 1 << 20 },
	{ "2g", 1024, 2ull << 30 }, { "3t", 1024, 3ull << 40 }, { "1p", 1024, 1ull << 50 },
	{ "1GiB", 1024, 1000000000ull }, { "1TiB", 1000, 1ull << 40 },
};

static void sizes_read_as_fio_reads_them(void)
{
	static const char *const bad[] = {
		"", "k", "4x", "4kk", "1e3", "-1", "1.5k", "0x", "0x1k", " 4k", "4 k",
		"99999999999999999999", "16777216t", "8k8", "4kibx", "%", "50%",
	};
	uint64_t v;
	int pct;

	for (size_t i = 0; i < RP_ARRAY_SIZE(fio_sizes); i++) {
		CHECKF(rp_parse_size(fio_sizes[i].s, fio_sizes[i].kb_base, &v, NULL) == 0,
		       "size %s refused", fio_sizes[i].s);
		CHECKF(v == fio_sizes[i].v, "size %s (kb_base %u) = %llu, fio reads %llu",
		       fio_sizes[i].s, fio_sizes[i].kb_base, (unsigned long long)v,
		       (unsigned long long)fio_sizes[i].v);
	}
	/* fio ignores what follows what it understands; rlperf refuses */
	for (size_t i = 0; i < RP_ARRAY_SIZE(bad); i++)
		CHECKF(rp_parse_size(bad[i], 1024, &v, NULL) == -1, "size '%s' accepted", bad[i]);
	/* percentages only where asked for, 0 to 100 */
	CHECK(rp_parse_size("25%", 1024, &v, &pct) == 0 && pct && v == 25);
	CHECK(rp_parse_size("100%", 1024, &v, &pct) == 0 && pct && v == 100);
	CHECK(rp_parse_size("0%", 1024, &v, &pct) == 0 && pct && v == 0);
	CHECK(rp_parse_size("4k", 1024, &v, &pct) == 0 && !pct && v == 4096);
	CHECK(rp_parse_size("101%", 1024, &v, &pct) == -1);
	CHECK(rp_parse_size("2.5%", 1024, &v, &pct) == -1);
	CHECK(rp_parse_size("25%x", 1024, &v, &pct) == -1);
}

/* Runs fio once with a null-engine job per entry of fio_sizes: job cI
 * reads one block of bs=size=s[I] with kb_base[I] (bs and size are read
 * by the same parser). Its JSON goes to out. */
static int fio_sizes_json(char *out, size_t len)
{
	char cmd[8192];
	int n = snprintf(cmd, sizeof(cmd), "fio --output-format=json --ioengine=null "
			 "--rw=read");

	for (size_t i = 0; i < RP_ARRAY_SIZE(fio_sizes) && n > 0 && (size_t)n < sizeof(cmd);
	     i++) {
		if (fio_sizes[i].v > (256u << 20))
			continue;  /* past fio's largest bs */
		n += snprintf(cmd + n, sizeof(cmd) - n, " --name=c%zu --kb_base=%u --bs=%s "
			      "--size=%s", i, fio_sizes[i].kb_base, fio_sizes[i].s,
			      fio_sizes[i].s);
	}
	if (n <= 0 || (size_t)n + 8 >= sizeof(cmd))
		return -1;
	strcat(cmd, " 2>&1");
	return run_cmd(cmd, out, len);
}

static void sizes_match_the_fio_binary(void)
{
	static char out[1 << 20];

	if (!have("fio --version"))
		SKIP("fio not installed (make deps installs it)");
	CHECKF(fio_sizes_json(out, sizeof(out)) == 0, "fio failed: %.300s", out);
	for (size_t i = 0; i < RP_ARRAY_SIZE(fio_sizes); i++) {
		char name[32];
		const char *p;

		if (fio_sizes[i].v > (256u << 20))
			continue;
		snprintf(name, sizeof(name), "\"jobname\" : \"c%zu\"", i);
		p = strstr(out, name);
		p = p ? strstr(p, "\"io_bytes\" : ") : NULL;
		CHECKF(p, "no job c%zu in fio's output", i);
		CHECKF(atoll(p + 13) == (long long)fio_sizes[i].v, "fio reads size=%s "
		       "(kb_base=%u) as %lld, the table says %llu", fio_sizes[i].s,
		       fio_sizes[i].kb_base, atoll(p + 13), (unsigned long long)fio_sizes[i].v);
	}
}

static void times_default_to_seconds(void)
{
	uint64_t ns;

	CHECK(rp_parse_time("30", &ns) == 0 && ns == 30000000000ull);
	CHECK(rp_parse_time("30s", &ns) == 0 && ns == 30000000000ull);
	CHECK(rp_parse_time("30sec", &ns) == 0 && ns == 30000000000ull);
	CHECK(rp_parse_time("500ms", &ns) == 0 && ns == 500000000ull);
	CHECK(rp_parse_time("500MSEC", &ns) == 0 && ns == 500000000ull);
	CHECK(rp_parse_time("250us", &ns) == 0 && ns == 250000ull);
	CHECK(rp_parse_time("2m", &ns) == 0 && ns == 120000000000ull);
	CHECK(rp_parse_time("1h", &ns) == 0 && ns == 3600000000000ull);
	CHECK(rp_parse_time("1d", &ns) == 0 && ns == 86400000000000ull);
	CHECK(rp_parse_time("", &ns) == -1);
	CHECK(rp_parse_time("5 s", &ns) == -1);
	CHECK(rp_parse_time("ms", &ns) == -1);
	CHECK(rp_parse_time("3x", &ns) == -1);
	CHECK(rp_parse_time("99999999999999d", &ns) == -1);
}

/* ---------------------------------------------------------------- */
/* Options                                                           */
/* ---------------------------------------------------------------- */

/* Everything a job holds, as text, to compare two parses. */
static void dump_job(const struct rp_job *j, char *buf, size_t len)
{
	snprintf(buf, len, "%s|%s|%s|%d|%llu|%llu%%%d|%llu%%%d|%llu%%%d|%u|%u|%u|%llu|%llu|"
		 "%llu|%d%d%d%d%d%d%d%d%d%d|%d|%s|%llx", j->name, j->filename ? j->filename : "-",
		 j->directory ? j->directory : "-", j->rw, (unsigned long long)j->bs,
		 (unsigned long long)j->size.v, j->size.pct,
		 (unsigned long long)j->offset.v, j->offset.pct,
		 (unsigned long long)j->offset_increment.v, j->offset_increment.pct,
		 j->iodepth, j->numjobs, j->kb_base, (unsigned long long)j->runtime_ns,
		 (unsigned long long)j->ramp_ns, (unsigned long long)j->seed, j->time_based,
		 j->direct, j->fixedbufs, j->registerfiles, j->invalidate, j->norandommap,
		 j->group_reporting, j->thread, j->hipri, j->sqthread_poll, j->engine, j->ioengine,
		 (unsigned long long)j->set);
}

static void dump_conf(const struct rp_conf *c, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%zu|%s|%d|%s|%s|%d|", c->njobs, c->output ? c->output : "-",
			 c->format, c->checkpoint ? c->checkpoint : "-",
			 c->sharding ? c->sharding : "-", c->process);

	if (n > 0 && (size_t)n < len)
		dump_job(c->njobs ? &c->jobs[0] : &c->global, buf + n, len - (size_t)n);
}

static void options_take_both_syntaxes(void)
{
	static const struct {
		const char *opt, *val, *base;
	} cases[] = {
		{ "name", "seq", "--filename=f" }, { "filename", "a:b", NULL },
		{ "directory", "/tmp", "--filename=f" }, { "rw", "randread", "--filename=f" },
		{ "readwrite", "randread", "--filename=f" }, { "bs", "1m", "--filename=f" },
		{ "blocksize", "8k", "--filename=f" }, { "size", "25%", "--filename=f" },
		{ "offset", "4k", "--filename=f" }, { "fileoffset", "10%", "--filename=f" },
		{ "offset_increment", "1g", "--filename=f" }, { "iodepth", "32", "--filename=f" },
		{ "numjobs", "4", "--filename=f" }, { "runtime", "2m", "--filename=f" },
		{ "ramp_time", "500ms", "--filename=f" }, { "ioengine", "libaio", "--filename=f" },
		{ "engine", "sync", "--filename=f" }, { "direct", "1", "--filename=f" },
		{ "invalidate", "0", "--filename=f" }, { "randseed", "7", "--filename=f" },
		{ "kb_base", "1000", "--filename=f" }, { "output", "out.txt", "--filename=f" },
		{ "output-format", "json", "--filename=f" }, { "eta", "never", "--filename=f" },
		{ "checkpoint", "ck", NULL }, { "sharding", "s.json", "--checkpoint=ck" },
		{ "process", "3", "--checkpoint=ck" },
	};
	struct rp_conf c;
	char err[512], a1[200], d1[1024], d2[1024];

	for (size_t i = 0; i < RP_ARRAY_SIZE(cases); i++) {
		char o2[64];
		const char *base = cases[i].base ? cases[i].base : "--eta=auto";

		snprintf(a1, sizeof(a1), "--%s=%s", cases[i].opt, cases[i].val);
		snprintf(o2, sizeof(o2), "--%s", cases[i].opt);
		CHECKF(parse(&c, err, sizeof(err), base, a1, NULL) == 0, "%s: %s", a1, err);
		dump_conf(&c, d1, sizeof(d1));
		rp_conf_free(&c);
		CHECKF(parse(&c, err, sizeof(err), base, o2, cases[i].val, NULL) == 0,
		       "%s %s: %s", o2, cases[i].val, err);
		dump_conf(&c, d2, sizeof(d2));
		rp_conf_free(&c);
		CHECKF(!strcmp(d1, d2), "%s: '%s' != '%s'", a1, d1, d2);
	}
}

/* steadystate=: fio's four criteria, with or without %, and nothing else */
static void steadystate_parses_fios_criteria(void)
{
	static const struct {
		const char *s;
		int state;
		double limit;
	} ok[] = {
		{ "iops:5", RP_SS_IOPS, 5 }, { "iops_slope:0.01%", RP_SS_IOPS | RP_SS_SLOPE |
		RP_SS_PCT, 0.01 }, { "bw:20%", RP_SS_PCT, 20 }, { "bw_slope:1.5", RP_SS_SLOPE, 1.5 },
	};
	static const char *const bad[] = {
		"iops", "iops:", "iops:x", "lat:1", "bw:1%%", "bw:-1", "bw:1 %", "IOPS:1",
	};
	struct rp_conf c;
	char err[512];
	int state;
	double limit;

	for (size_t i = 0; i < RP_ARRAY_SIZE(ok); i++) {
		CHECKF(!rp_parse_ss(ok[i].s, &state, &limit), "%s refused", ok[i].s);
		CHECK_EQ(state, ok[i].state);
		CHECK(limit == ok[i].limit);
	}
	for (size_t i = 0; i < RP_ARRAY_SIZE(bad); i++)
		CHECKF(rp_parse_ss(bad[i], &state, &limit), "%s accepted", bad[i]);
	CHECK_EQ(parse(&c, err, sizeof(err), "--filename=f", "--ss_dur=5", NULL), 0);
	CHECK(c.jobs[0].ss_state == (RP_SS_IOPS | RP_SS_SLOPE | RP_SS_PCT) &&
	      c.jobs[0].ss_limit == 0.01 && c.jobs[0].ss_dur_ns == 5000000000ull);
	rp_conf_free(&c);
	CHECK_EQ(parse(&c, err, sizeof(err), "--filename=f", "--steadystate=lat:1", NULL),
		 RP_PARSE_ERROR);
	CHECK_STR(err, "rlperf: failed parsing steadystate=lat:1: expected iops, iops_slope, "
		  "bw or bw_slope, ':', a number and an optional %");
	CHECK_EQ(parse(&c, err, sizeof(err), "--filename=f", "--ss_dur=500ms", NULL),
		 RP_PARSE_ERROR);
	CHECK_STR(err, "rlperf: --steadystate_duration must be 1s to 86400s");
}

/* The window's judgement, as fio's: the largest distance from the mean,
 * or the least-squares slope, each absolute or in % of the mean */
static void steadystate_judges_the_window(void)
{
	uint64_t iops[4], bw[4];
	struct rp_ss ss = { .state = RP_SS_IOPS | RP_SS_PCT, .limit = 10, .dur = 4,
			    .iops = iops, .bw = bw };

	/* 100, 110, 90, 100: mean 100, deviation 10 = 10%: not under 10 */
	CHECK(!rp_ss_add(&ss, 100, 1) && !rp_ss_add(&ss, 110, 1) && !rp_ss_add(&ss, 90, 1));
	CHECK(!rp_ss_add(&ss, 100, 1));
	CHECK(ss.deviation == 10 && ss.criterion == 10);
	/* the oldest (100) drops out: 110, 90, 100, 104: mean 101 */
	CHECK(!rp_ss_add(&ss, 104, 1));
	CHECK(fabs(ss.deviation - 11) < 1e-9);
	/* 90, 100, 104, 95: mean 97.25, deviation 7.25 = 7.5%: attained */
	CHECK(rp_ss_add(&ss, 95, 1) && ss.attained);
	CHECK_EQ(rp_ss_mean(&ss, 0), (90 + 100 + 104 + 95) / 4);

	/* bandwidth 10, 20, 30, 40: slope 10 a second, 40% of the mean 25 */
	memset(&ss, 0, sizeof(ss));
	ss = (struct rp_ss){ .state = RP_SS_SLOPE | RP_SS_PCT, .limit = 40, .dur = 4,
			     .iops = iops, .bw = bw };
	for (uint64_t v = 10; v <= 40; v += 10)
		CHECK_EQ(rp_ss_add(&ss, 1, v), 0);
	CHECK(fabs(ss.slope - 10) < 1e-9 && fabs(ss.criterion - 40) < 1e-9);
	/* 20, 30, 40, 10: slope -2: 8% of 25 in absolute value */
	CHECK_EQ(rp_ss_add(&ss, 1, 10), 1);
	CHECK(fabs(ss.slope + 2) < 1e-9 && fabs(ss.criterion + 8) < 1e-9);
}

/* io_uring's hipri and sqthread_poll: accepted where fio knows them */
static void polling_options_parse(void)
{
	static const struct {
		const char *a, *b;
		int hipri, sqpoll;
		const char *err;
	} cases[] = {
		{ "--hipri", NULL, 1, 0, NULL },
		{ "--sqthread_poll", "--ioengine=io_uring", 0, 1, NULL },
		{ "--hipri", "--ioengine=pvsync2", 1, 0, NULL },
		{ "--hipri=0", "--sqthread_poll=0", 0, 0, NULL },
		{ "--hipri", "--ioengine=psync", 0, 0, "rlperf: --hipri needs --ioengine=io_uring or pvsync2" },
		{ "--sqthread_poll", "--ioengine=libaio", 0, 0, "rlperf: --sqthread_poll needs --ioengine=io_uring" },
	};
	struct rp_conf c;
	char err[512];

	for (size_t i = 0; i < RP_ARRAY_SIZE(cases); i++) {
		int rc = parse(&c, err, sizeof(err), "--filename=f", cases[i].a, cases[i].b,
			       NULL);

		if (cases[i].err) {
			CHECKF(rc == RP_PARSE_ERROR, "%s %s accepted", cases[i].a, cases[i].b);
			CHECK_STR(err, cases[i].err);
			continue;
		}
		CHECKF(rc == 0, "%s: %s", cases[i].a, err);
		CHECK_EQ(c.jobs[0].hipri, cases[i].hipri);
		CHECK_EQ(c.jobs[0].sqthread_poll, cases[i].sqpoll);
		rp_conf_free(&c);
	}
}

static void flags_take_nothing_or_0_1(void)
{
	static const char *const flags[] = {
		"time_based", "fixedbufs", "registerfiles", "group_reporting", "norandommap",
		"thread", "hipri", "sqthread_poll",
	};
	struct rp_conf c;
	char err[512], a[64], d1[1024], d2[1024];

	for (size_t i = 0; i < RP_ARRAY_SIZE(flags); i++) {
		snprintf(a, sizeof(a), "--%s", flags[i]);
		CHECKF(parse(&c, err, sizeof(err), "--filename=f", "--runtime=1", a, NULL) == 0,
		       "%s: %s", a, err);
		dump_conf(&c, d1, sizeof(d1));
		rp_conf_free(&c);
		snprintf(a, sizeof(a), "--%s=1", flags[i]);
		CHECK(parse(&c, err, sizeof(err), "--filename=f", "--runtime=1", a, NULL) == 0);
		dump_conf(&c, d2, sizeof(d2));
		rp_conf_free(&c);
		CHECKF(!strcmp(d1, d2), "%s: '%s' != '%s'", a, d1, d2);
		snprintf(a, sizeof(a), "--%s=0", flags[i]);
		CHECK(parse(&c, err, sizeof(err), "--filename=f", "--runtime=1", a, NULL) == 0);
		dump_conf(&c, d2, sizeof(d2));
		rp_conf_free(&c);
		CHECKF(strcmp(d1, d2), "%s changed nothing", a);
	}
	/* a flag's value only comes with '=' (getopt's optional_argument):
	 * the next word is a job file */
	CHECK_EQ(parse(&c, err, sizeof(err), "--filename=f", "--fixedbufs", "1", NULL),
		 RP_PARSE_ERROR);
	CHECK_STR(err, "rlperf: unable to open '1' job file: No such file or directory");
}

static void fio_command_line_parses(void)
{
	struct rp_conf c;
	struct rp_job *j;
	char err[512];

	CHECK_EQ(parse(&c, err, sizeof(err), "--name=seq", "--filename=/dev/null",
		       "--rw=randread", "--bs=1M", "--iodepth", "16", "--direct=1",
		       "--ioengine=libaio", "--numjobs=4", "--runtime=10",
		       "--time_based", "--ramp_time=2s", "--output-format=json",
		       "--size", "1g", "--offset=4k", "--group_reporting", "--eta=never",
		       "--randseed=7", "--readonly", "--norandommap", "--thread",
		       "--output=/tmp/x", "--invalidate=0", NULL), 0);
	CHECK_EQ(c.njobs, 1);
	j = &c.jobs[0];
	CHECK_STR(j->name, "seq");
	CHECK_STR(j->filename, "/dev/null");
	CHECK_EQ(j->rw, RP_RANDREAD);
	CHECK_EQ(j->bs, 1 << 20);
	CHECK_EQ(j->iodepth, 16);
	CHECK_EQ(j->direct, 1);
	CHECK_EQ(j->engine, RL_BACKEND_LIBAIO);
	CHECK_EQ(j->numjobs, 4);
	CHECK_EQ(j->runtime_ns, 10000000000ll);
	CHECK_EQ(j->time_based, 1);
	CHECK_EQ(j->ramp_ns, 2000000000ll);
	CHECK_EQ(j->size.v, 1 << 30);
	CHECK_EQ(j->offset.v, 4096);
	CHECK_EQ(j->seed, 7);
	CHECK(j->group_reporting && j->norandommap && j->thread && !j->invalidate);
	CHECK_EQ(c.format, RP_FMT_JSON);
	CHECK_STR(c.output, "/tmp/x");
	rp_conf_free(&c);

	/* fio's defaults (invalidate=1), rlperf's engine, io_uring's flags */
	CHECK_EQ(parse(&c, err, sizeof(err), "--filename", "f", "--fixedbufs",
		       "--registerfiles=1", NULL), 0);
	j = &c.jobs[0];
	CHECK_STR(j->name, "rlperf");
	CHECK(j->rw == RP_READ && j->bs == 4096 && j->iodepth == 1 && !j->direct);
	CHECK(j->invalidate == 1 && j->kb_base == 1024 && j->numjobs == 1);
	CHECK(j->engine == RL_BACKEND_IO_URING && j->fixedbufs && j->registerfiles);
	CHECK_EQ(c.format, RP_FMT_NORMAL);
	rp_conf_free(&c);

	/* each sync engine of fio is the pread pool */
	CHECK_EQ(parse(&c, err, sizeof(err), "--filename=f", "--ioengine=pvsync2", NULL), 0);
	CHECK(c.jobs[0].engine == RL_BACKEND_PREAD && !strcmp(c.jobs[0].ioengine, "pvsync2"));
	rp_conf_free(&c);

	CHECK_EQ(parse(&c, err, sizeof(err), "--checkpoint=ck", "--sharding=s.json",
		       "--process=1", "--ioengine=psync", "--iodepth=8", NULL), 0);
	CHECK_STR(c.checkpoint, "ck");
	CHECK_STR(c.sharding, "s.json");
	CHECK_EQ(c.process, 1);
	CHECK(c.global.set >> RP_O_IOENGINE & 1 && c.global.set >> RP_O_IODEPTH & 1);
	CHECK(!(c.global.set >> RP_O_BS & 1) && !(c.global.set >> RP_O_DIRECT & 1));
	rp_conf_free(&c);

	CHECK_EQ(parse(&c, err, sizeof(err), "--help", NULL), RP_PARSE_HELP);
	CHECK_EQ(parse(&c, err, sizeof(err), "-h", NULL), RP_PARSE_HELP);
	CHECK_EQ(parse(&c, err, sizeof(err), "--version", NULL), RP_PARSE_VERSION);
	CHECK_EQ(parse(&c, err, sizeof(err), "--bogus", "--help", NULL), RP_PARSE_ERROR);
}

static void bad_options_name_the_option(void)
{
	static const struct {
		const char *a, *b;
		const char *msg;
	} cases[] = {
		{ "--bogus=1", NULL, "rlperf: unrecognized option '--bogus'" },
		{ "--append-terse", NULL, "rlperf: --append-terse is a fio option that rlperf does not "
		  "support (rlperf --help lists those it has)" },
		{ "--verify=md5", NULL, "rlperf: --verify is a fio option that rlperf does not "
		  "support (rlperf --help lists those it has)" },
		{ "--rw=write", NULL, "rlperf: failed parsing rw=write: rlperf only reads (read, randread)" },
		{ "--rw=sideways", NULL, "rlperf: failed parsing rw=sideways: expected read or randread" },
		{ "--bs=abc", NULL, "rlperf: failed parsing bs=abc: not a number (examples: 4096, 4k, 1m, 0x1000)" },
		{ "--bs=0", NULL, "rlperf: failed parsing bs=0: out of range [1, 268435456]" },
		{ "--bs=50%", NULL, "rlperf: failed parsing bs=50%: not a number (examples: 4096, 4k, 1m, 0x1000)" },
		{ "--size=150%", NULL, "rlperf: failed parsing size=150%: a percentage is a whole number from 1 to 100" },
		{ "--size=0%", NULL, "rlperf: failed parsing size=0%: a percentage is a whole number from 1 to 100" },
		{ "--size=0", NULL, "rlperf: failed parsing size=0: out of range [1, ...]" },
		{ "--offset=1.5%", NULL, "rlperf: failed parsing offset=1.5%: a percentage is a whole number from 0 to 100" },
		{ "--iodepth=0", NULL, "rlperf: failed parsing iodepth=0: out of range [1, 1024]" },
		{ "--iodepth=1025", NULL, "rlperf: failed parsing iodepth=1025: out of range [1, 1024]" },
		{ "--numjobs=0", NULL, "rlperf: failed parsing numjobs=0: out of range [1, 1024]" },
		{ "--direct=2", NULL, "rlperf: failed parsing direct=2: expected 0 or 1" },
		{ "--direct", NULL, "rlperf: option --direct needs a value" },
		{ "--fixedbufs=yes", NULL, "rlperf: failed parsing fixedbufs=yes: expected 0 or 1" },
		{ "--kb_base=1023", NULL, "rlperf: failed parsing kb_base=1023: expected 1024 or 1000" },
		{ "--kb_base=1010", NULL, "rlperf: failed parsing kb_base=1010: expected 1024 or 1000" },
		{ "--ioengine=spdk", NULL, "rlperf: failed parsing ioengine=spdk: rlperf has io_uring, libaio, and psync, sync, pvsync, pvsync2, vsync (its pread pool)" },
		{ "--output-format=xml", NULL, "rlperf: failed parsing output-format=xml: rlperf has normal, json, json+ and terse" },
		{ "--terse-version=2", NULL, "rlperf: failed parsing terse-version=2: rlperf writes fio's terse version 3 only" },
		{ "--eta=sometimes", NULL, "rlperf: failed parsing eta=sometimes: expected always, never or auto" },
		{ "--runtime=soon", NULL, "rlperf: failed parsing runtime=soon: not a time (examples: 30, 500ms, 2m)" },
		{ "--name=", NULL, "rlperf: option --name needs a value" },
		{ "--output=", NULL, "rlperf: option --output needs a value" },
		{ "--readonly=1", NULL, "rlperf: option --readonly takes no value" },
		{ "--time_based", NULL, "rlperf: --time_based needs --runtime" },
		{ "--fixedbufs", "--ioengine=libaio", "rlperf: --fixedbufs and --registerfiles need --ioengine=io_uring" },
		{ "--registerfiles", "--ioengine=sync", "rlperf: --fixedbufs and --registerfiles need --ioengine=io_uring" },
		{ "--sharding=s.json", NULL, "rlperf: --sharding and --process need --checkpoint" },
		{ "--checkpoint=ck", NULL, "rlperf: --filename and --checkpoint exclude each other" },
		{ "-x", NULL, "rlperf: unrecognized option '-x' (options are spelled --name=value or --name value)" },
		{ "a.fio", "b.fio", "rlperf: more than one job file ('a.fio', 'b.fio'): rlperf runs one (fio would run the second after the first, as with stonewall)" },
		{ "--size", NULL, "rlperf: option --size needs a value" },
		{ "--rw=read:x", NULL, "rlperf: failed parsing rw=read:x: read:N skips N bytes after each read (a size; -N reads backwards)" },
		{ "--rw=randread:0", NULL, "rlperf: failed parsing rw=randread:0: randread:N takes a new offset every N reads (N from 1)" },
		{ "--rw=write:4k", NULL, "rlperf: failed parsing rw=write:4k: rlperf only reads (read, randread)" },
		{ "--random_distribution=zipf:1", NULL, "rlperf: failed parsing random_distribution=zipf:1: zipf takes a theta > 0, not 1[:CENTER 0..1]" },
		{ "--random_distribution=pareto:1.5", NULL, "rlperf: failed parsing random_distribution=pareto:1.5: pareto takes a power between 0 and 1[:CENTER 0..1]" },
		{ "--random_distribution=zoned:50/5:30/15", NULL, "rlperf: failed parsing random_distribution=zoned:50/5:30/15: the accesses add up to 80% (fio wants 100%), the sizes to 20%" },
		{ "--random_distribution=zoned:50:50/5", NULL, "rlperf: failed parsing random_distribution=zoned:50:50/5: zones are ACCESS%/SIZE, at most 256, ':' between" },
		{ "--random_distribution=lumpy", NULL, "rlperf: failed parsing random_distribution=lumpy: expected random, zipf:T, pareto:H, normal:S, zoned:A/S:.. or zoned_abs:A/SIZE:.." },
		{ "--random_generator=mt", NULL, "rlperf: failed parsing random_generator=mt: expected tausworthe, lfsr or tausworthe64" },
		{ "--buffered=2", NULL, "rlperf: failed parsing buffered=2: expected 0 or 1" },
		{ "--prioclass=4", NULL, "rlperf: failed parsing prioclass=4: out of range [0, 3]" },
		{ "--prio=8", NULL, "rlperf: failed parsing prio=8: out of range [0, 7]" },
		{ "--cmdprio_percentage=101", "--ioengine=libaio", "rlperf: failed parsing cmdprio_percentage=101: out of range [0, 100]" },
		{ "--cmdprio_class=0", "--ioengine=io_uring", "rlperf: failed parsing cmdprio_class=0: out of range [1, 3]" },
		{ "--cmdprio_class=4", "--ioengine=io_uring", "rlperf: failed parsing cmdprio_class=4: out of range [1, 3]" },
		{ "--cmdprio=8", "--ioengine=io_uring", "rlperf: failed parsing cmdprio=8: out of range [0, 7]" },
		/* fio: "unrecognized option" (libaio's and io_uring's options) */
		{ "--cmdprio_percentage=20", "--ioengine=psync", "rlperf: --cmdprio_percentage, --cmdprio_class and --cmdprio need --ioengine=io_uring or libaio (per-read priorities)" },
		{ "--cmdprio_class=1", "--ioengine=sync", "rlperf: --cmdprio_percentage, --cmdprio_class and --cmdprio need --ioengine=io_uring or libaio (per-read priorities)" },
	};
	struct rp_conf c;
	char err[512];

	for (size_t i = 0; i < RP_ARRAY_SIZE(cases); i++) {
		/* every case also names a file, so that only its own fault shows */
		CHECKF(parse(&c, err, sizeof(err), "--filename=f", cases[i].a, cases[i].b,
			     NULL) == RP_PARSE_ERROR, "%s accepted", cases[i].a);
		CHECK_STR(err, cases[i].msg);
	}
	CHECK_EQ(parse(&c, err, sizeof(err), NULL), RP_PARSE_ERROR);
	CHECK_STR(err, "rlperf: no --filename given (or --checkpoint, or a job file); "
		  "see rlperf --help");
	CHECK_EQ(parse(&c, err, sizeof(err), "--checkpoint=ck", "--rw=randread", NULL),
		 RP_PARSE_ERROR);
	CHECK_STR(err, "rlperf: --rw applies to raw reads (--filename), not to --checkpoint");
	CHECK_EQ(parse(&c, err, sizeof(err), "--checkpoint=ck", "--name=x", NULL),
		 RP_PARSE_ERROR);
	CHECK_STR(err, "rlperf: --checkpoint runs no jobs: leave out job files and --name");
	CHECK_EQ(parse(&c, err, sizeof(err), "--checkpoint=ck", "--minimal", NULL),
		 RP_PARSE_ERROR);
	CHECK_STR(err, "rlperf: --output-format=terse applies to raw reads (--filename), not "
		  "to --checkpoint (normal or json)");
	/* a tiny buffer truncates, never overflows */
	CHECK_EQ(parse(&c, err, 12, "--bogus", NULL), RP_PARSE_ERROR);
	CHECK_EQ(strlen(err), 11);
}

/* fio's buffered is direct's inverse; rw's postfix and the distribution
 * land in the job */
static void fio_read_options_parse(void)
{
	struct rp_conf c;
	char err[512];

	CHECK_EQ(parse(&c, err, sizeof(err), "--filename=f", "--buffered=0", "--rw=read:-8k",
		       "--random_distribution=zoned_abs:60/1m:40/", NULL), 0);
	CHECK(c.jobs[0].direct == 1 && c.jobs[0].seq_add == -8192 && c.jobs[0].rw == RP_READ);
	CHECK(c.jobs[0].dist.kind == RP_DIST_ZONED && c.jobs[0].dist.abs &&
	      c.jobs[0].dist.nzones == 2 && c.jobs[0].dist.zone[0].size == 1 << 20);
	rp_conf_free(&c);
	CHECK_EQ(parse(&c, err, sizeof(err), "--filename=f", "--direct=1", "--buffered=1",
		       "--rw=randread:8", "--random_distribution=zipf:1.2:0.25", NULL), 0);
	CHECK(c.jobs[0].direct == 0 && c.jobs[0].seq_nr == 8 && c.jobs[0].rw == RP_RANDREAD);
	CHECK(c.jobs[0].dist.kind == RP_DIST_ZIPF && c.jobs[0].dist.p == 1.2 &&
	      c.jobs[0].dist.center == 0.25);
	rp_conf_free(&c);
}

static void help_lists_exactly_the_options(void)
{
	char path[512], *text, *p, err[512];
	size_t listed = 0;
	struct rp_conf c;
	FILE *f;

	snprintf(path, sizeof(path), "%s/help.txt", th_tmpdir());
	f = fopen(path, "w");
	CHECK(f);
	rp_usage(f);
	fclose(f);
	text = th_slurp(path, NULL);
	CHECK(text);
	/* every option and alias of the table is in the text */
	for (size_t i = 0; i < RP_ARRAY_SIZE(opt_table); i++) {
		const char *names[2] = { opt_table[i].name, opt_table[i].alias };

		for (int k = 0; k < 2; k++) {
			char want[64];

			if (!names[k])
				continue;
			snprintf(want, sizeof(want), "--%s", names[k]);
			if (!strstr(text, want)) {
				th_fail(__FILE__, __LINE__, "help lacks %s", want);
				free(text);
				return;
			}
		}
	}
	/* and every option the text shows at the start of a line is one */
	for (p = text; (p = strstr(p, "\n  --")); p++) {
		char opt[64];
		int rc;

		sscanf(p + 3, "%63[a-z_-]", opt);
		rc = parse(&c, err, sizeof(err), "--filename=f", opt, "1", NULL);
		if (rc == 0)
			rp_conf_free(&c);
		if (strstr(err, "unrecognized") || strstr(err, "does not support")) {
			th_fail(__FILE__, __LINE__, "help lists %s: %s", opt, err);
			free(text);
			return;
		}
		listed++;
	}
	CHECK(!strstr(text, "OPT_") && !strstr(text, "RP_O_"));
	free(text);
	CHECK_EQ(listed, RP_ARRAY_SIZE(opt_table));
}

/* man/rlperf.1 names every option (roff writes '-' as "\-") and renders */
static void man_page_lists_every_option(void)
{
	char *text = th_slurp("man/rlperf.1", NULL), *w, *r, out[256];

	if (!text)
		SKIP("man/rlperf.1 not found (run from the repository root)");
	for (w = r = text; *r; r++) {
		if (r[0] == '\\' && r[1] == '-')
			r++;
		*w++ = *r;
	}
	*w = '\0';
	for (size_t i = 0; i < RP_ARRAY_SIZE(opt_table); i++) {
		const char *names[2] = { opt_table[i].name, opt_table[i].alias };

		for (int k = 0; k < 2; k++)
			if (names[k] && !strstr(text, names[k])) {
				th_fail(__FILE__, __LINE__, "man/rlperf.1 lacks %s", names[k]);
				free(text);
				return;
			}
	}
	free(text);
	if (!have("man --version"))
		SKIP("man (man-db) not installed");
	CHECK_EQ(run_cmd("MANWIDTH=80 man -l man/rlperf.1 2>&1 | head -n 3", out,
			 sizeof(out)), 0);
	CHECKF(strstr(out, "RLPERF(1)"), "%s", out);
}

static void global_options_apply_as_fio_applies_them(void)
{
	struct rp_conf c;
	char err[512];

	/* before any --name: defaults; --name=global: back to them */
	CHECK_EQ(parse(&c, err, sizeof(err), "--bs=8k", "--name=a", "--filename=f",
		       "--size=64k", "--name=global", "--bs=16k", "--name=b", "--filename=g",
		       NULL), 0);
	CHECK_EQ(c.njobs, 2);
	CHECK(!strcmp(c.jobs[0].name, "a") && c.jobs[0].bs == 8192);
	CHECK(!strcmp(c.jobs[1].name, "b") && c.jobs[1].bs == 16384 && !c.jobs[1].size.v);
	/* fio's "job options": the job's own options, name first */
	CHECK_EQ(c.jobs[0].given.n, 3);
	CHECK_STR(c.jobs[0].given.v[0].key, "name");
	CHECK_STR(c.jobs[0].given.v[2].val, "64k");
	/* "global options": one entry per option, the latest value */
	CHECK(c.have_global && c.global_given.n == 2);
	CHECK_STR(c.global_given.v[0].key, "bs");
	CHECK_STR(c.global_given.v[0].val, "16k");
	CHECK_STR(c.global_given.v[1].val, "global");
	rp_conf_free(&c);

	/* kb_base applies to what follows it on the command line */
	CHECK_EQ(parse(&c, err, sizeof(err), "--filename=f", "--size=4k", "--kb_base=1000",
		       "--offset=4k", NULL), 0);
	CHECK(c.jobs[0].size.v == 4096 && c.jobs[0].offset.v == 4000);
	rp_conf_free(&c);
	/* flags given bare are not listed, as fio lists them */
	CHECK_EQ(parse(&c, err, sizeof(err), "--name=a", "--filename=f", "--time_based",
		       "--runtime=1", "--fixedbufs=1", NULL), 0);
	CHECK_EQ(c.jobs[0].given.n, 4);
	CHECK_STR(c.jobs[0].given.v[3].key, "fixedbufs");
	rp_conf_free(&c);
}

static const char job_text[] =
	"; a job file as fio reads it\n"
	"[global]\n"
	"rw=randread\n"
	"   bs = 64k   # blanks and a comment\n"
	"size=${RLPERF_TEST_SIZE}\n"
	"\n"
	"# the first job\n"
	"[seq]\n"
	"rw=read\n"
	"numjobs=2\n"
	"group_reporting\n"
	"[global]\n"
	"iodepth=8\n"
	"[rnd]\n"
	"filename=a\\:b:c ; escaped colon\n"
	"size=8k\n"
	"kb_base=1000\n"
	"time_based=1\n"
	"runtime=2\n";

static void job_files_parse_as_fio_parses_them(void)
{
	const char *path = write_text("two.fio", job_text);
	struct rp_conf c;
	char err[512];

	CHECK(path);
	setenv("RLPERF_TEST_SIZE", "25%", 1);
	CHECKF(parse(&c, err, sizeof(err), "--filename=f", "--bs=4k", path, "--iodepth=2",
		     NULL) == 0, "%s", err);
	unsetenv("RLPERF_TEST_SIZE");
	CHECK_EQ(c.njobs, 2);
	/* [seq]: the file's global over the command line's */
	CHECK_STR(c.jobs[0].name, "seq");
	CHECK(c.jobs[0].rw == RP_READ && c.jobs[0].bs == 65536 && c.jobs[0].numjobs == 2);
	CHECK(c.jobs[0].size.pct && c.jobs[0].size.v == 25 && c.jobs[0].group_reporting);
	CHECK(c.jobs[0].iodepth == 2 && !strcmp(c.jobs[0].filename, "f"));
	/* [rnd]: the later [global] too; kb_base first within a section */
	CHECK_STR(c.jobs[1].name, "rnd");
	CHECK(c.jobs[1].rw == RP_RANDREAD && c.jobs[1].iodepth == 8);
	CHECK_EQ(c.jobs[1].size.v, 8000);
	CHECK_STR(c.jobs[1].filename, "f:a\\:b:c");  /* fio adds a job's files */
	CHECK(c.jobs[1].time_based && c.jobs[1].runtime_ns == 2000000000ull);
	CHECK_EQ(c.jobs[1].given.n, 5);
	CHECK_STR(c.jobs[1].given.v[0].key, "kb_base");
	CHECK(c.have_global);
	rp_conf_free(&c);
}

static void job_file_errors_name_file_and_line(void)
{
	static const struct {
		const char *text, *msg;
	} cases[] = {
		{ "bs=4k\n[a]\n", "bad.fio:1: option <bs=4k> outside of [] job section" },
		{ "[a\nbs=4k\n", "bad.fio:1: bad section header '[a' (expected [name])" },
		{ "[a]\ninclude other.fio\n", "bad.fio:2: include is not supported by rlperf" },
		{ "[a]\nfilename=f\nreadonly\n", "bad.fio:3: readonly is a command-line option, "
		  "not a job option" },
		{ "[a]\nbogus=1\n", "bad.fio:2: unrecognized option 'bogus'" },
		{ "[a]\nverify=md5\n", "bad.fio:2: verify is a fio option that rlperf does not "
		  "support (rlperf --help lists those it has)" },
		{ "[a]\nbs\n", "bad.fio:2: option bs needs a value" },
		{ "[a]\n\n\nbs=4q\n", "bad.fio:4: failed parsing bs=4q: not a number (examples: "
		  "4096, 4k, 1m, 0x1000)" },
		{ "[a]\n=4k\n", "bad.fio:2: '=' without an option name" },
		{ "; nothing\n", "bad.fio: no [job] section" },
		{ "[global]\nbs=4k\n", "bad.fio: no job defined (only [global] sections)" },
		{ "[a]\ntime_based\n", "job a: --time_based needs --runtime" },
	};
	struct rp_conf c;
	char err[512], want[700];

	for (size_t i = 0; i < RP_ARRAY_SIZE(cases); i++) {
		const char *path = write_text("bad.fio", cases[i].text);

		CHECK(path);
		CHECKF(parse(&c, err, sizeof(err), "--filename=f", path, NULL) == RP_PARSE_ERROR,
		       "case %zu accepted", i);
		if (!strncmp(cases[i].msg, "bad.fio", 7))
			snprintf(want, sizeof(want), "rlperf: %s/%s", th_tmpdir(), cases[i].msg);
		else
			snprintf(want, sizeof(want), "rlperf: %s", cases[i].msg);
		CHECK_STR(err, want);
	}
	CHECK_EQ(parse(&c, err, sizeof(err), "/nonexistent/job.fio", NULL), RP_PARSE_ERROR);
	CHECK_STR(err, "rlperf: unable to open '/nonexistent/job.fio' job file: No such "
		  "file or directory");
}

/* ---------------------------------------------------------------- */
/* Set-up: files and regions                                         */
/* ---------------------------------------------------------------- */

/* Parses args and plans them; 0 or -1 with the message in err. */
static int plan_args(struct rp_conf *c, struct rp_plan *p, char *err, size_t len, ...)
{
	va_list ap;
	int rc;

	va_start(ap, len);
	rc = parse_v(c, err, len, ap);
	va_end(ap);
	if (rc)
		return -1;
	rc = rp_setup(c, p, err, len);
	if (rc)
		rp_conf_free(c);
	return rc;
}

static void regions_follow_fio(void)
{
	const char *a = make_file("ra", 1 << 20), *b = make_file("rb", 3000000);
	char fa[600], fab[1200], err[600];
	struct rp_conf c;
	struct rp_plan p;

	CHECK(a && b);
	snprintf(fa, sizeof(fa), "--filename=%s", b);
	snprintf(fab, sizeof(fab), "--filename=%s:%s", a, b);
	/* size=25% per clone, offset_increment=25%: four quarters */
	CHECK_EQ(plan_args(&c, &p, err, sizeof(err), fa, "--size=25%", "--numjobs=4",
			   "--offset_increment=25%", NULL), 0);
	CHECK_EQ(p.ntasks, 4);
	for (unsigned k = 0; k < 4; k++) {
		const struct rp_file *f = &p.tasks[k].files[0];

		/* 750000 a quarter: starts rounded up to 4k, lengths down */
		CHECK_EQ(f->off, (750000ull * k + 4095) / 4096 * 4096);
		/* the last quarter starts late and ends at the file's end */
		CHECK_EQ(f->len, k < 3 ? 749568 : 745472);
		CHECK_EQ(p.tasks[k].max_ios, k < 3 ? 183 : 182);
	}
	rp_plan_free(&p);
	rp_conf_free(&c);
	/* size split over two files; a started block is read whole */
	CHECK_EQ(plan_args(&c, &p, err, sizeof(err), fab, "--size=100k", NULL), 0);
	CHECK(p.tasks[0].files[0].len == 51200 && p.tasks[0].files[1].len == 51200);
	CHECK(p.tasks[0].files[0].nblocks == 13 && p.tasks[0].max_ios == 25);
	rp_plan_free(&p);
	rp_conf_free(&c);
	/* random reads read whole blocks only */
	CHECK_EQ(plan_args(&c, &p, err, sizeof(err), fab, "--size=100k", "--rw=randread",
			   NULL), 0);
	CHECK(p.tasks[0].files[0].nblocks == 12 && p.tasks[0].max_ios == 24);
	rp_plan_free(&p);
	rp_conf_free(&c);
	/* no size: each file from the offset to its end; the partial block at
	 * the end of a file has no room and is left */
	CHECK_EQ(plan_args(&c, &p, err, sizeof(err), fab, "--offset=1000", NULL), 0);
	CHECK(p.tasks[0].files[0].len == 1047576 && p.tasks[0].files[0].nblocks == 255);
	CHECK(p.tasks[0].files[1].len == 2999000 && p.tasks[0].files[1].nblocks == 732);
	CHECK_EQ(p.tasks[0].max_ios, 255 + 732);
	rp_plan_free(&p);
	rp_conf_free(&c);
}

static void files_split_escape_and_default_as_fio(void)
{
	static const struct {
		const char *a, *b, *fmt;
	} refused[] = {
		{ "--name=job", "--numjobs=3", "rlperf: %s/job.2.0: No such file or directory "
		  "(rlperf reads files, it never creates them)" },
		{ "--filename=z", "--size=16k", "rlperf: job rlperf: offset 0 + size 16384 is "
		  "past the end of %s/z (8192 bytes); rlperf never writes" },
		{ "--filename=z", "--bs=16k", "rlperf: job rlperf: bs 16384 is larger than the "
		  "data to read (8192 bytes of %s/z)" },
	};
	char dir[600], arg[1400], err[800], want[1400];
	struct rp_conf c;
	struct rp_plan p;

	snprintf(dir, sizeof(dir), "%s/d", th_tmpdir());
	mkdir(dir, 0755);
	CHECK(make_file("d/x:y", 8192) && make_file("d/z", 8192));
	CHECK(make_file("d/job.0.0", 8192) && make_file("d/job.1.0", 8192));
	/* "\:" is a colon inside a name; directory prefixes each */
	snprintf(arg, sizeof(arg), "--directory=%s", dir);
	CHECK_EQ(plan_args(&c, &p, err, sizeof(err), arg, "--filename=x\\:y:z", NULL), 0);
	CHECK_EQ(p.tasks[0].nfiles, 2);
	snprintf(want, sizeof(want), "%s/x:y", dir);
	CHECK_STR(p.tasks[0].files[0].path, want);
	snprintf(want, sizeof(want), "%s/z", dir);
	CHECK_STR(p.tasks[0].files[1].path, want);
	rp_plan_free(&p);
	rp_conf_free(&c);
	/* no filename: NAME.CLONE.0 per clone, as fio lays them out */
	CHECK_EQ(plan_args(&c, &p, err, sizeof(err), arg, "--name=job", "--numjobs=2", NULL), 0);
	snprintf(want, sizeof(want), "%s/job.1.0", dir);
	CHECK_STR(p.tasks[1].files[0].path, want);
	rp_plan_free(&p);
	rp_conf_free(&c);
	/* rlperf never creates or extends a file */
	for (size_t i = 0; i < RP_ARRAY_SIZE(refused); i++) {
		CHECK_EQ(plan_args(&c, &p, err, sizeof(err), arg, refused[i].a, refused[i].b,
				   NULL), -1);
		snprintf(want, sizeof(want), refused[i].fmt, dir);
		CHECK_STR(err, want);
		rp_conf_free(&c);
	}
}

/* ---------------------------------------------------------------- */
/* Histogram                                                         */
/* ---------------------------------------------------------------- */

static void histogram_matches_fio_buckets(void)
{
	/* fio's plat_val_to_idx / plat_idx_to_val on known points */
	CHECK_EQ(rp_hist_index(0), 0);
	CHECK_EQ(rp_hist_index(127), 127);
	CHECK_EQ(rp_hist_index(128), 128);
	CHECK_EQ(rp_hist_index(129), 128);
	CHECK_EQ(rp_hist_index(1000), 317);
	CHECK_EQ(rp_hist_value(317), 1004);
	CHECK_EQ(rp_hist_value(128), 129);
	CHECK_EQ(rp_hist_index(UINT64_MAX), RP_PLAT_NR - 1);
	for (unsigned i = 0; i < RP_PLAT_NR; i++) {
		uint64_t v = rp_hist_value(i);

		CHECKF(rp_hist_index(v) == i, "bucket %u: value %llu maps to %u", i,
		       (unsigned long long)v, rp_hist_index(v));
		if (i)
			CHECK(v > rp_hist_value(i - 1));
	}
	/* a bucket is never wider than 1/64 of its values */
	for (int k = 0; k < 100000; k++) {
		uint64_t v = th_rand() >> (th_rand() % 40 + 24);
		unsigned i = rp_hist_index(v);
		double rel = v ? ((double)rp_hist_value(i) - (double)v) / (double)v : 0;

		if (i == RP_PLAT_NR - 1)
			continue;
		CHECKF(rel < 1.0 / 64 && rel > -1.0 / 64, "v=%llu rel=%f",
		       (unsigned long long)v, rel);
	}
}

static void percentiles_follow_fio(void)
{
	struct rp_hist *h = malloc(sizeof(*h)), *g = malloc(sizeof(*g));
	uint64_t v[RP_NPCT], w[RP_NPCT];
	int ok = 0;

	CHECK(h && g);
	rp_hist_init(h);
	rp_hist_percentiles(h, rp_pct_list, RP_NPCT, v);
	for (unsigned i = 0; i < RP_NPCT; i++)
		if (v[i])
			goto out;
	/* 100 reads of 10 ns, 100 of 20: p50 is the first bucket where the
	 * running count reaches half (fio's >=), so 10; p60 on is 20 */
	for (int i = 0; i < 100; i++) {
		rp_hist_add(h, 10);
		rp_hist_add(h, 20);
	}
	rp_hist_percentiles(h, rp_pct_list, RP_NPCT, v);
	for (unsigned i = 0; i < RP_NPCT; i++)
		if (v[i] != (rp_pct_list[i] <= 50.0 ? 10u : 20u))
			goto out;
	if (h->min != 10 || h->max != 20 || rp_hist_mean(h) != 15.0)
		goto out;

	/* uniform 1..100000 us: p-th percentile within a bucket of p% */
	rp_hist_init(h);
	rp_hist_init(g);
	for (uint64_t x = 1; x <= 100000; x++)
		rp_hist_add(x & 1 ? h : g, x * 1000);
	rp_hist_merge(h, g);
	if (h->n != 100000 || h->min != 1000 || h->max != 100000000)
		goto out;
	rp_hist_percentiles(h, rp_pct_list, RP_NPCT, v);
	for (unsigned i = 0; i < RP_NPCT; i++) {
		double want = rp_pct_list[i] * 1000.0 * 1000.0;

		if ((double)v[i] < want * (1 - 1.0 / 64) || (double)v[i] > want * (1 + 1.0 / 64))
			goto out;
	}
	/* merging halves equals adding all */
	rp_hist_init(g);
	for (uint64_t x = 1; x <= 100000; x++)
		rp_hist_add(g, x * 1000);
	rp_hist_percentiles(g, rp_pct_list, RP_NPCT, w);
	if (memcmp(v, w, sizeof(v)) || g->sumsq != h->sumsq)
		goto out;
	ok = 1;
out:
	free(h);
	free(g);
	CHECK(ok);
}

static void stddev_is_exact(void)
{
	static const uint64_t xs[] = { 2, 4, 4, 4, 5, 5, 7, 9 };
	struct rp_hist *h = malloc(sizeof(*h));
	double sd;

	CHECK(h);
	rp_hist_init(h);
	CHECK(rp_hist_stddev(h) == 0.0);
	for (size_t i = 0; i < RP_ARRAY_SIZE(xs); i++)
		rp_hist_add(h, xs[i] + 1000000000000ull);  /* large mean, small spread */
	sd = rp_hist_stddev(h);
	free(h);
	CHECKF(sd > 2.13808 && sd < 2.13809, "stddev %.6f", sd);
}

static void latency_bins_follow_fio(void)
{
	struct rp_hist *h = malloc(sizeof(*h));
	double ns[RP_NLAT], us[RP_NLAT], ms[RP_NLAT_MS];

	CHECK(h);
	rp_hist_init(h);
	rp_hist_add(h, 1);             /* ns "2": below 2 ns */
	rp_hist_add(h, 3);             /* ns "4" */
	rp_hist_add(h, 15000);         /* us "20" */
	rp_hist_add(h, 600000);        /* us "750" */
	rp_hist_add(h, 1500000);       /* ms "2" */
	rp_hist_add(h, 2500000000ull); /* ms ">=2000" */
	rp_hist_add(h, 2500000000ull);
	rp_hist_add(h, 2500000000ull);
	rp_lat_bins(h, ns, us, ms);
	free(h);
	CHECK(ns[0] == 12.5 && ns[1] == 12.5 && us[3] == 12.5 && us[8] == 12.5);
	CHECK(ms[0] == 12.5 && ms[11] == 37.5 && ms[10] == 0.0);
}

/* ---------------------------------------------------------------- */
/* Generator                                                         */
/* ---------------------------------------------------------------- */

static void sequential_offsets_cover_the_region(void)
{
	struct rp_gen g;
	uint64_t off, n = 0;

	rp_gen_init(&g, 8192, 10 * 4096 + 100, 4096, RP_GEN_SEQ, 1);
	CHECK_EQ(g.nblocks, 10);
	while (rp_gen_next(&g, &off)) {
		CHECK_EQ(off, 8192 + n * 4096);
		n++;
	}
	CHECK_EQ(n, 10);
	/* the next pass starts over */
	CHECK(rp_gen_next(&g, &off) && off == 8192);
}

static void random_offsets_are_a_permutation(void)
{
	static const uint64_t sizes[] = { 1, 2, 3, 7, 64, 1000, 4097, 65536 };
	uint8_t *seen = malloc(65536);
	uint64_t first[2] = { 0, 0 };
	int ok = 1;

	CHECK(seen);
	for (size_t s = 0; s < RP_ARRAY_SIZE(sizes) && ok; s++) {
		uint64_t nb = sizes[s], seed = th_rand();
		struct rp_gen g;

		rp_gen_init(&g, 4096, nb * 512, 512, RP_GEN_RANDOM, seed);
		for (int pass = 0; pass < 3 && ok; pass++) {
			uint64_t off, n = 0, same = 0;

			memset(seen, 0, nb);
			while (rp_gen_next(&g, &off)) {
				uint64_t b = (off - 4096) / 512;

				if (off < 4096 || (off - 4096) % 512 || b >= nb || seen[b]) {
					ok = 0;
					break;
				}
				seen[b] = 1;
				same += b == n;
				if (n < 2 && nb == 65536)
					first[n] = b;
				n++;
			}
			if (n != nb)
				ok = 0;
			/* not sequential in disguise */
			if (nb >= 1000 && same > nb / 10)
				ok = 0;
		}
	}
	free(seen);
	CHECKF(ok, "not a permutation (seed %llu)", (unsigned long long)th_seed());
	CHECK(first[0] + 1 != first[1]);
}

static void norandommap_offsets_repeat_blocks(void)
{
	uint8_t seen[1024];
	struct rp_gen g;
	uint64_t off, n = 0, distinct = 0;

	memset(seen, 0, sizeof(seen));
	rp_gen_init(&g, 0, 1024 * 4096, 4096, RP_GEN_NORANDOMMAP, th_rand());
	while (rp_gen_next(&g, &off)) {
		CHECK(off % 4096 == 0 && off < 1024 * 4096);
		distinct += !seen[off / 4096];
		seen[off / 4096] = 1;
		n++;
	}
	/* a pass is as many reads as blocks, and uniform draws leave about
	 * 1/e of the blocks unread: far from every block once */
	CHECK_EQ(n, 1024);
	CHECKF(distinct > 550 && distinct < 750, "%llu distinct blocks (seed %llu)",
	       (unsigned long long)distinct, (unsigned long long)th_seed());
}

/* ---------------------------------------------------------------- */
/* The runner on a fake engine                                       */
/* ---------------------------------------------------------------- */

static struct {
	pthread_mutex_t lock;
	int fail_rc;            /* eng_run returns this after fail_after reads */
	uint64_t fail_after;
	int drop_last;          /* report success one read short */
	uint64_t reads, bad, max_inflight;
	uint64_t per_file[4];   /* reads of each file, all runs */
	unsigned runs;
	uint64_t block_counts_bad;
	int record;             /* keep the first offsets read, in order */
	size_t nrec;
	uint64_t rec[64];
	uint64_t lat_per_read;  /* a slow disk: a read takes this (ns) per read in
				 * flight, on a virtual clock; 0: the real one */
	uint64_t slow_next;     /* lat_per_read of the next fake_args run only */
} fake = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Reads of each block of each file (at most 4 files). */
struct fake_counts {
	uint32_t *c[4];
	uint64_t nb[4];
};

static int fake_check(const struct eng_raw_job *job, const struct eng_raw_opts *o,
		      const struct cm_read *r, struct fake_counts *fc)
{
	if (r->len != o->bs || r->min_len != r->len || r->ncopies ||
	    r->file >= job->nfiles || r->file >= 4 ||
	    r->off + r->len > job->sizes[r->file])
		return 0;
	if (r->off % r->len == 0 && r->off / r->len < fc->nb[r->file])
		fc->c[r->file][r->off / r->len]++;
	return 1;
}

/* every block read equally often, give or take the pass in progress */
static int fake_even(const struct fake_counts *fc, size_t nfiles)
{
	for (size_t i = 0; i < nfiles && i < 4; i++) {
		uint32_t lo = UINT32_MAX, hi = 0;

		for (uint64_t b = 0; b < fc->nb[i]; b++) {
			if (!fc->c[i][b])
				continue;  /* outside the region */
			lo = fc->c[i][b] < lo ? fc->c[i][b] : lo;
			hi = fc->c[i][b] > hi ? fc->c[i][b] : hi;
		}
		if (hi > lo + 1 && lo != UINT32_MAX)
			return 0;
	}
	return 1;
}

static void fake_tally(const struct eng_raw_opts *o, const struct fake_counts *fc,
		       size_t nfiles, uint64_t reads, uint64_t bad, int rc)
{
	pthread_mutex_lock(&fake.lock);
	fake.reads += reads;
	fake.bad += bad;
	fake.runs++;
	if (o->iodepth > fake.max_inflight)
		fake.max_inflight = o->iodepth;
	for (size_t i = 0; i < nfiles && i < 4; i++)
		for (uint64_t b = 0; b < fc->nb[i]; b++)
			fake.per_file[i] += fc->c[i][b];
	if (!rc && !fake_even(fc, nfiles))
		fake.block_counts_bad++;
	pthread_mutex_unlock(&fake.lock);
}

static void fake_stats(const struct eng_raw_opts *o, struct eng_raw_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->backend = RL_BACKEND_IO_URING;
	st->queue_depth = o->iodepth;
	st->buffers = o->iodepth;
	st->registered_buffers = o->fixedbufs ? o->iodepth : 0;
	st->registered_files = o->registerfiles;
	st->direct_io = o->direct;
}

/* Keeps up to queue_depth reads "in flight", completes the oldest. */
static int fake_run(const struct eng_raw_opts *o, const struct eng_raw_job *job,
		    struct eng_raw_stats *st, char *e, size_t elen)
{
	unsigned qd = o->iodepth, head = 0, n = 0;
	struct {
		struct cm_read r;
		uint64_t t;
	} *q = calloc(qd, sizeof(*q));
	struct fake_counts fc = { { NULL }, { 0 } };
	uint64_t reads = 0, bad = 0, vt = 0, done;
	struct cm_read r;
	int more = 1, rc = q ? 0 : -ENOMEM;

	for (size_t i = 0; i < job->nfiles && i < 4 && !rc; i++) {
		fc.nb[i] = job->sizes[i] / o->bs;
		fc.c[i] = calloc(fc.nb[i] + 1, sizeof(*fc.c[i]));
		rc = fc.c[i] ? 0 : -ENOMEM;
	}
	while (!rc && (more || n)) {
		if (more && n < qd && !(job->hold && job->hold(job->user)) &&
		    (more = job->next(job->user, &r))) {
			bad += !fake_check(job, o, &r, &fc);
			pthread_mutex_lock(&fake.lock);
			if (fake.record && fake.nrec < RP_ARRAY_SIZE(fake.rec))
				fake.rec[fake.nrec++] = r.off;
			pthread_mutex_unlock(&fake.lock);
			if (!vt)
				vt = perf_now_ns();
			q[(head + n) % qd].r = r;
			q[(head + n) % qd].t = fake.lat_per_read ? vt : perf_now_ns();
			n++;
			if (job->on_commit)   /* fio's default: one read a submission */
				job->on_commit(job->user, 1, n);
			continue;
		}
		if (!n)
			break;
		if (fake.fail_rc && reads == fake.fail_after) {
			rc = fake.fail_rc;
			snprintf(e, elen, "fake: read of %u bytes at offset %llu failed",
				 q[head].r.len, (unsigned long long)q[head].r.off);
			break;
		}
		done = perf_now_ns();
		if (fake.lat_per_read) {
			done = q[head].t + n * fake.lat_per_read;
			vt = done > vt ? done : vt;
		}
		if (job->on_reap)
			job->on_reap(job->user, 1);
		if (!(fake.drop_last && !more && n == 1))
			job->on_read(job->user, &q[head].r, q[head].t, done);
		head = (head + 1) % qd;
		n--;
		reads++;
	}
	if (rc == -ENOMEM)
		snprintf(e, elen, "fake engine: out of memory");
	fake_stats(o, st);
	fake_tally(o, &fc, job->nfiles, reads, bad, rc);
	for (size_t i = 0; i < 4; i++)
		free(fc.c[i]);
	free(q);
	return rc;
}

static void fake_reset(void)
{
	pthread_mutex_lock(&fake.lock);
	fake.fail_rc = 0;
	fake.fail_after = 0;
	fake.drop_last = 0;
	fake.reads = fake.bad = fake.max_inflight = fake.block_counts_bad = 0;
	memset(fake.per_file, 0, sizeof(fake.per_file));
	fake.runs = 0;
	fake.nrec = 0;  /* record stays as the test set it */
	fake.lat_per_read = fake.slow_next;
	fake.slow_next = 0;
	pthread_mutex_unlock(&fake.lock);
}

/* Parses, plans and runs args on the fake engine. */
static int fake_args(struct rp_conf *c, struct rp_plan *p, struct rp_result *r,
		     char *err, size_t len, ...)
{
	va_list ap;
	int rc;

	fake_reset();
	memset(r, 0, sizeof(*r));
	va_start(ap, len);
	rc = parse_v(c, err, len, ap);
	va_end(ap);
	if (rc)
		return -1;
	if (rp_setup(c, p, err, len)) {
		rp_conf_free(c);
		return -1;
	}
	return rp_run(p, fake_run, r);
}

static void fake_done(struct rp_conf *c, struct rp_plan *p, struct rp_result *r)
{
	rp_result_free(r);
	rp_plan_free(p);
	rp_conf_free(c);
}

/* Offsets of rw=read:N against fio 3.33's own (fio --debug=io on a 64 KiB
 * file, bs=4k): holes end the file at its end, backwards reads start at
 * the start and wrap to the end. */
static void seq_postfix_offsets_follow_fio(void)
{
	static const struct {
		const char *rw;
		uint64_t n;
		uint64_t off[17];
	} cases[] = {
		{ "read:8k", 6, { 0x0, 0x3000, 0x6000, 0x9000, 0xc000, 0xf000 } },
		{ "read:-8k", 16, { 0x0, 0xe000, 0xd000, 0xc000, 0xb000, 0xa000, 0x9000, 0x8000,
				    0x7000, 0x6000, 0x5000, 0x4000, 0x3000, 0x2000, 0x1000, 0x0 } },
	};
	const char *path = make_file("seqadd", 65536);
	struct rp_conf c;
	struct rp_plan p;
	struct rp_result r;
	char arg[600], rw[64], err[512];

	CHECK(path);
	snprintf(arg, sizeof(arg), "--filename=%s", path);
	for (size_t i = 0; i < RP_ARRAY_SIZE(cases); i++) {
		snprintf(rw, sizeof(rw), "--rw=%s", cases[i].rw);
		fake.record = 1;
		CHECK_EQ(fake_args(&c, &p, &r, err, sizeof(err), arg, rw, "--bs=4k", NULL), 0);
		CHECKF(fake.nrec == cases[i].n, "%s: %zu reads", cases[i].rw, fake.nrec);
		for (size_t k = 0; k < cases[i].n; k++)
			CHECKF(fake.rec[k] == cases[i].off[k], "%s: read %zu at %#llx", cases[i].rw,
			       k, (unsigned long long)fake.rec[k]);
		fake_done(&c, &p, &r);
	}
	/* randread:4: a random block, then the three after it */
	CHECK_EQ(fake_args(&c, &p, &r, err, sizeof(err), arg, "--rw=randread:4", "--bs=4k",
			   "--norandommap", NULL), 0);
	fake.record = 0;
	CHECK_EQ(fake.nrec, 16);
	for (size_t k = 0; k < 16; k++)
		CHECKF(k % 4 == 0 || fake.rec[k] == fake.rec[k - 1] + 4096 ||
		       fake.rec[k - 1] + 4096 == 65536, "read %zu at %#llx after %#llx", k,
		       (unsigned long long)fake.rec[k], (unsigned long long)fake.rec[k - 1]);
	fake_done(&c, &p, &r);
}

/* Counts of each block over draws from distribution spec on nb blocks,
 * sorted, most read first. */
static uint64_t *dist_counts(const char *spec, uint64_t nb, uint64_t draws, uint64_t seed)
{
	struct rp_conf c;
	struct rp_gen g;
	char err[512], arg[300];
	uint64_t *cnt = calloc(nb, sizeof(*cnt)), off;

	snprintf(arg, sizeof(arg), "--random_distribution=%s", spec);
	if (!cnt || parse(&c, err, sizeof(err), "--filename=f", "--rw=randread", arg, NULL)) {
		free(cnt);
		return NULL;
	}
	rp_gen_init(&g, 0, nb * 4096, 4096, RP_GEN_RANDOM, seed);
	rp_gen_dist(&g, &c.jobs[0].dist);
	for (uint64_t i = 0; i < draws; i++) {
		if (!rp_gen_next(&g, &off))
			rp_gen_next(&g, &off);
		cnt[off / 4096]++;
	}
	rp_conf_free(&c);
	return cnt;
}

static int cmp_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* Share of the draws that the top k blocks got. */
static double top_share(uint64_t *cnt, uint64_t nb, uint64_t k, uint64_t draws)
{
	uint64_t sum = 0;

	qsort(cnt, nb, sizeof(*cnt), cmp_desc);
	for (uint64_t i = 0; i < k; i++)
		sum += cnt[i];
	return (double)sum / (double)draws;
}

/* The share of draws of distribution spec that land on the k most drawn
 * of nb blocks (-1 when the counts could not be made: a failed CHECK). */
static double dist_top_share(const char *spec, uint64_t nb, uint64_t draws, uint64_t seed,
			     uint64_t k)
{
	uint64_t *cnt = dist_counts(spec, nb, draws, seed);
	double share;

	if (!cnt) {
		th_fail(__FILE__, __LINE__, "%s: no counts", spec);
		return -1;
	}
	share = top_share(cnt, nb, k, draws);
	free(cnt);
	return share;
}

/* fio's distributions, statistically (seed printed): zipf and pareto
 * concentrate reads on few blocks (fio scatters them by its hash, so the
 * hot blocks are anywhere), uniform does not, zoned gives each zone its
 * share and spreads it over the zone. */
static void random_distributions_follow_fio(void)
{
	const uint64_t nb = 4096, draws = 200000, seed = th_seed();
	uint64_t zone[3] = { 0 };
	double z12, z05, par, uni, nor;

	z12 = dist_top_share("zipf:1.2", nb, draws, seed, nb / 100);
	z05 = dist_top_share("zipf:0.5", nb, draws, seed, nb / 100);
	par = dist_top_share("pareto:0.2", nb, draws, seed, nb / 5);
	uni = dist_top_share("random", nb, draws, seed, nb / 100);
	nor = dist_top_share("normal:5", nb, draws, seed, nb / 5);
	/* zipf 1.2 on 4096 blocks: the top 1% (41 blocks) take sum(1/k^1.2,
	 * k <= 41) / sum(1/k^1.2, k <= 4096), about 70%; zipf 0.5 about 9%
	 * (fio's generator approximates, hence the margins); uniform 1% */
	CHECKF(z12 > 0.62 && z12 < 0.80, "zipf:1.2 top 1%%: %.3f (seed %llu)", z12,
	       (unsigned long long)seed);
	CHECKF(z05 > 0.07 && z05 < 0.12, "zipf:0.5 top 1%%: %.3f (seed %llu)", z05,
	       (unsigned long long)seed);
	CHECKF(uni < 0.02, "random top 1%%: %.3f", uni);
	/* pareto 0.2 (fio's 80/20 rule): the top 20% of blocks take ~80% */
	CHECKF(par > 0.75 && par < 0.88, "pareto:0.2 top 20%%: %.3f", par);
	CHECKF(nor > 0.35, "normal:5 top 20%%: %.3f", nor);
	/* zoned:50/5:30/15:20/ (fio's rand-zones.fio): 50% of the reads in
	 * the first 5% of the blocks, 30% in the next 15%, 20% in the rest */
	{
		struct rp_conf c;
		struct rp_gen g;
		char err[512];
		uint64_t off;

		CHECK_EQ(parse(&c, err, sizeof(err), "--filename=f", "--rw=randread",
			       "--random_distribution=zoned:50/5:30/15:20/", NULL), 0);
		rp_gen_init(&g, 0, nb * 4096, 4096, RP_GEN_RANDOM, seed);
		rp_gen_dist(&g, &c.jobs[0].dist);
		for (uint64_t i = 0; i < draws; i++) {
			if (!rp_gen_next(&g, &off))
				rp_gen_next(&g, &off);
			zone[off / 4096 < nb / 20 ? 0 : off / 4096 < nb / 5 ? 1 : 2]++;
		}
		rp_conf_free(&c);
	}
	CHECKF(fabs((double)zone[0] / draws - 0.5) < 0.01 &&
	       fabs((double)zone[1] / draws - 0.3) < 0.01 &&
	       fabs((double)zone[2] / draws - 0.2) < 0.01, "zones %llu %llu %llu (seed %llu)",
	       (unsigned long long)zone[0], (unsigned long long)zone[1],
	       (unsigned long long)zone[2], (unsigned long long)seed);
}

/* latency_target on a fake disk where a read takes 100 us per read in
 * flight: fio's search (1, 2, 4, 8 fails, 6, 5, 4 holds twice) ends at
 * depth 4, the deepest whose reads all stay under 450 us, and reports only
 * the reads of its final window at that depth; at 50 us not even depth 1
 * holds, which fails the job as fio's "max latency exceeded"; with
 * latency_percentile=50 a miss only counts, and the depth stays at 1. */
static void runner_searches_the_latency_target_depth(void)
{
	static const struct {
		const char *target, *pct;
		int rc;
		unsigned depth;
	} cases[] = {
		{ "--latency_target=450", "--latency_percentile=100", 0, 4 },
		{ "--latency_target=50us", "--latency_percentile=100", -ETIMEDOUT, 1 },
		{ "--latency_target=50", "--latency_percentile=50", 0, 1 },
	};
	const char *path = make_file("lat_target", 8 << 20);
	char fn[600], err[600];
	struct rp_conf c;
	struct rp_plan p;
	struct rp_result r;

	CHECK(path);
	snprintf(fn, sizeof(fn), "--filename=%s", path);
	for (size_t i = 0; i < RP_ARRAY_SIZE(cases); i++) {
		int rc;

		fake.slow_next = 100000;
		rc = fake_args(&c, &p, &r, err, sizeof(err), fn, "--iodepth=16", cases[i].target,
			       cases[i].pct, "--latency_window=10ms", "--invalidate=0",
			       "--time_based", "--runtime=2s", NULL);
		CHECKF(rc == cases[i].rc, "%s: rc %d: %s %s", cases[i].target, rc, err, r.errmsg);
		CHECKF(r.task[0].lat_depth == cases[i].depth, "%s: depth %u", cases[i].target,
		       r.task[0].lat_depth);
		if (i == 0)  /* the final window's reads only, all under the target */
			CHECKF(r.task[0].ios > 50 && r.task[0].ios < fake.reads / 2 &&
			       r.task[0].clat->max <= 450000, "%llu of %llu reads, max %llu ns",
			       (unsigned long long)r.task[0].ios, (unsigned long long)fake.reads,
			       (unsigned long long)r.task[0].clat->max);
		if (i == 1)
			CHECKF(strstr(r.errmsg, "over latency_target 50000 ns (fio: max latency "
				      "exceeded)"), "%s", r.errmsg);
		fake_done(&c, &p, &r);
	}
}

static void runner_reads_every_block_once_per_clone(void)
{
	const char *path = make_file("one_pass", 1 << 20);
	char fn[600], err[600];
	struct rp_conf c;
	struct rp_plan p;
	struct rp_result r;
	uint64_t ios = 0, bytes = 0;
	int rc;

	CHECK(path);
	snprintf(fn, sizeof(fn), "--filename=%s", path);
	rc = fake_args(&c, &p, &r, err, sizeof(err), fn, "--rw=randread", "--iodepth=8",
		       "--numjobs=3", "--fixedbufs", "--invalidate=0", NULL);
	CHECKF(rc == 0, "rc %d: %s %s", rc, err, r.errmsg);
	for (size_t i = 0; i < r.ntasks; i++) {
		ios += r.task[i].ios;
		bytes += r.task[i].bytes;
		if (r.task[i].clat->n != r.task[i].ios || r.task[i].eng.registered_buffers != 8)
			bytes = 0;
	}
	fake_done(&c, &p, &r);
	CHECK(ios == 3 * 256 && bytes == 3 << 20);
	CHECK(fake.reads == 3 * 256 && !fake.bad && !fake.block_counts_bad);
	CHECK(fake.runs == 3 && fake.max_inflight == 8);
}

/* cmdprio_percentage: that share of each clone's reads (seeded, binomial
 * bounds of 6 deviations) go at cmdprio_class/cmdprio, the rest at the
 * job's prioclass/prio, and their latencies split by priority. */
static void runner_gives_cmdprio_its_share(void)
{
	static const unsigned pcts[] = { 0, 20, 100 };
	const char *path = make_file("cmdprio", 1 << 20);
	char fn[600], seed[64], pct[64], err[600];
	struct rp_conf c;
	struct rp_plan p;
	struct rp_result r;

	CHECK(path);
	snprintf(fn, sizeof(fn), "--filename=%s", path);
	snprintf(seed, sizeof(seed), "--randseed=%llu", (unsigned long long)th_seed());
	for (size_t i = 0; i < RP_ARRAY_SIZE(pcts); i++) {
		double want = 4096.0 * pcts[i] / 100.0, dev = 6 * sqrt(want * (1 - pcts[i] / 100.0));
		int rc;

		snprintf(pct, sizeof(pct), "--cmdprio_percentage=%u", pcts[i]);
		rc = fake_args(&c, &p, &r, err, sizeof(err), fn, seed, pct, "--bs=256",
			       "--ioengine=libaio", "--prioclass=3", "--cmdprio=2", "--numjobs=2",
			       "--invalidate=0", NULL);
		CHECKF(rc == 0, "rc %d: %s %s", rc, err, r.errmsg);
		for (size_t t = 0; t < r.ntasks; t++) {
			const struct rp_task_res *k = &r.task[t];

			CHECKF(k->ios == 4096 && fabs((double)k->high_ios - want) <= dev,
			       "%u%%: %llu of %llu reads high", pcts[i],
			       (unsigned long long)k->high_ios, (unsigned long long)k->ios);
			if (!pcts[i]) {
				CHECK(!k->prio[0].h && !k->prio[1].h);
				continue;
			}
			CHECK(k->prio[0].ioprio == (3u << 13) && k->prio[1].ioprio == (1u << 13 | 2));
			CHECK(k->prio[1].h->n == k->high_ios);
			CHECK(k->prio[0].h->n + k->prio[1].h->n == k->ios);
		}
		fake_done(&c, &p, &r);
	}
}

/* A generator of 64 reads of 4 KiB, each at one I/O priority. */
struct prio_gen {
	uint32_t ioprio;
	unsigned sent, done;
};

static int prio_next(void *user, struct cm_read *out)
{
	struct prio_gen *g = user;

	if (g->sent == 64)
		return 0;
	memset(out, 0, sizeof(*out));
	out->off = 4096ull * g->sent++;
	out->len = out->min_len = 4096;
	out->ioprio = g->ioprio;
	return 1;
}

static void prio_read(void *user, const struct cm_read *r, uint64_t s, uint64_t d)
{
	(void)r, (void)s, (void)d;
	((struct prio_gen *)user)->done++;
}

/* Each read's ioprio reaches the kernel on every backend (sqe->ioprio,
 * IOCB_FLAG_IOPRIO, the pread thread's ioprio_set): a valid one reads,
 * an invalid class (7) is refused with EINVAL. */
static void engine_passes_each_reads_ioprio(void)
{
	static const int backends[] = { RL_BACKEND_IO_URING, RL_BACKEND_LIBAIO, RL_BACKEND_PREAD };
	const char *path = make_file("ioprio", 1 << 20);
	uint64_t size = 1 << 20;

	CHECK(path);
	for (size_t i = 0; path && i < RP_ARRAY_SIZE(backends); i++) {
		struct eng_raw_opts o = { .backend = backends[i], .iodepth = 4, .bs = 4096 };
		struct prio_gen g = { .ioprio = 3u << 13 };
		struct eng_raw_job job = {
			.nfiles = 1, .paths = &path, .sizes = &size, .next = prio_next,
			.on_read = prio_read, .user = &g,
		};
		struct eng_raw_stats st;
		char err[512];
		int rc = eng_raw_run(&o, &job, &st, err, sizeof(err));

		if (rc < 0 && strstr(err, "unavailable"))
			continue;  /* a backend this machine lacks */
		CHECKF(rc == 0 && g.done == 64 && st.backend == backends[i], "backend %d: %d %s",
		       backends[i], rc, err);
		g = (struct prio_gen){ .ioprio = 7u << 13 };
		rc = eng_raw_run(&o, &job, &st, err, sizeof(err));
		CHECKF(rc == -EINVAL, "backend %d: class 7 gave %d %s", backends[i], rc, err);
	}
}

static void runner_round_robins_over_files(void)
{
	const char *a = make_file("rr_a", 64 << 10), *b = make_file("rr_b", 32 << 10);
	char fn[1200], err[600];
	struct rp_conf c;
	struct rp_plan p;
	struct rp_result r;
	int rc;

	CHECK(a && b);
	snprintf(fn, sizeof(fn), "--filename=%s:%s", a, b);
	/* no size: each file whole; the job ends when both are read */
	rc = fake_args(&c, &p, &r, err, sizeof(err), fn, "--iodepth=4", NULL);
	CHECKF(rc == 0, "%s %s", err, r.errmsg);
	fake_done(&c, &p, &r);
	CHECK(fake.per_file[0] == 16 && fake.per_file[1] == 8 && !fake.bad);
	CHECK(!fake.block_counts_bad);
	/* size=40k split 20k each: 5 blocks from each */
	rc = fake_args(&c, &p, &r, err, sizeof(err), fn, "--size=40k", "--rw=randread", NULL);
	CHECKF(rc == 0, "%s %s", err, r.errmsg);
	fake_done(&c, &p, &r);
	CHECK(fake.per_file[0] == 5 && fake.per_file[1] == 5 && !fake.bad);
}

static void runner_loops_on_time_and_skips_ramp(void)
{
	const char *path = make_file("timed", 64 << 10);
	char fn[600], err[600];
	struct rp_conf c;
	struct rp_plan p;
	struct rp_result r;
	struct rp_task_res *t;
	int rc, ok;

	CHECK(path);
	snprintf(fn, sizeof(fn), "--filename=%s", path);
	rc = fake_args(&c, &p, &r, err, sizeof(err), fn, "--iodepth=4", "--time_based",
		       "--runtime=500ms", "--ramp_time=30ms", NULL);
	t = &r.task[0];
	/* time, not ios, is what the window is sure of: under a loaded
	 * sanitizer run the window counted 4 ios (16365 in the ramp), the
	 * job's thread off the CPU for most of a 60 ms window; off for all
	 * of it, nothing was submitted in it (depth[2] 0). 500 ms: a stall
	 * that long is far rarer. */
	ok = rc == 0 && t->ios > 0 && fake.reads > 16 && fake.reads > t->ios && !fake.bad &&
	     !fake.block_counts_bad && t->last_ns - t->meas_ns >= 450000000 &&
	     t->last_ns - t->meas_ns < 3000000000ull && r.elapsed_s >= 0.5 &&
	     t->depth[2] > 0;
	if (!ok)
		th_fail(__FILE__, __LINE__, "rc %d ios %llu of %llu elapsed %.3f: %s", rc,
			(unsigned long long)t->ios, (unsigned long long)fake.reads,
			r.elapsed_s, r.errmsg);
	fake_done(&c, &p, &r);
}

static void runner_reports_engine_errors(void)
{
	const char *path = make_file("fails", 256 << 10);
	char fn[600], err[600], m1[RP_ERRMSG_MAX + 256];
	struct rp_conf c;
	struct rp_plan p;
	struct rp_result r;
	int rc1, rc2;

	CHECK(path);
	snprintf(fn, sizeof(fn), "--filename=%s", path);
	CHECK_EQ(parse(&c, err, sizeof(err), fn, "--iodepth=4", "--name=f", NULL), 0);
	CHECK_EQ(rp_setup(&c, &p, err, sizeof(err)), 0);
	fake_reset();
	fake.fail_rc = -EIO;
	fake.fail_after = 5;
	rc1 = rp_run(&p, fake_run, &r);
	snprintf(m1, sizeof(m1), "%s", r.errmsg);
	rp_result_free(&r);
	/* an engine that says success with a read missing is caught too */
	fake_reset();
	fake.drop_last = 1;
	rc2 = rp_run(&p, fake_run, &r);
	fake_reset();
	CHECK_EQ(rc1, -EIO);
	CHECK_STR(m1, "rlperf: job f (clone 0): fake: read of 4096 bytes at offset 20480 "
		  "failed");
	CHECK_EQ(rc2, -EIO);
	CHECK_STR(r.errmsg, "rlperf: job f (clone 0): the engine finished with 258048 of "
		  "262144 bytes read");
	fake_done(&c, &p, &r);
}

static void units_follow_group_reporting(void)
{
	const char *path = make_file("units", 64 << 10);
	const char *job = write_text("units.fio", "[a]\nnumjobs=2\n[b]\ngroup_reporting\n"
				     "[c]\n");
	char fn[600], err[600];
	struct rp_conf c;
	struct rp_plan p;
	struct rp_result r;
	struct rp_unit *u;
	long n;

	CHECK(path && job);
	snprintf(fn, sizeof(fn), "--filename=%s", path);
	/* fio: a report per clone; a clone with group_reporting joins the one
	 * before; a global group_reporting makes one */
	CHECK_EQ(fake_args(&c, &p, &r, err, sizeof(err), fn, "--name=x", "--numjobs=2", NULL), 0);
	n = rp_units(&p, &r, &u);
	CHECK(n == 2 && u[0].n == 1 && u[1].first == 1 && u[0].bytes == 64 << 10);
	rp_units_free(u, (size_t)n);
	fake_done(&c, &p, &r);
	CHECK_EQ(fake_args(&c, &p, &r, err, sizeof(err), fn, "--name=x", "--numjobs=3",
			   "--group_reporting", NULL), 0);
	n = rp_units(&p, &r, &u);
	CHECK(n == 1 && u[0].n == 3 && u[0].bytes == 3 * (64 << 10) && u[0].ios == 48);
	CHECK(u[0].clat->n == 48 && u[0].job_runtime_s >= u[0].runtime_s);
	rp_units_free(u, (size_t)n);
	fake_done(&c, &p, &r);
	CHECK_EQ(fake_args(&c, &p, &r, err, sizeof(err), fn, job, NULL), 0);
	n = rp_units(&p, &r, &u);
	CHECK(n == 3 && u[0].n == 1 && u[1].n == 2 && u[2].n == 1 && u[2].first == 3);
	rp_units_free(u, (size_t)n);
	fake_done(&c, &p, &r);
}

/* fio 3.33's groups of this job file (its JSON "groupid"s): 0 0 1 2 2 */
static const char stonewall_job[] = "[a]\nnumjobs=2\n[b]\nstonewall\nnumjobs=2\n"
	"group_reporting\n[c]\nnew_group\n[d]\n";

static void stonewall_waits_and_starts_groups(void)
{
	static const int groups[] = { 0, 0, 1, 1, 2, 2 };
	const char *path = make_file("wall", 64 << 10);
	const char *job = write_text("wall.fio", stonewall_job);
	char fn[600], err[600];
	struct rp_conf c;
	struct rp_plan p;
	struct rp_result r;
	struct rp_unit *u;
	uint64_t a_end;
	long n;

	CHECK(path && job);
	snprintf(fn, sizeof(fn), "--filename=%s", path);
	/* a's clones pause 2 ms a read (32 ms in all): b would start long
	 * before they end if it did not wait */
	CHECK_EQ(fake_args(&c, &p, &r, err, sizeof(err), fn, "--thinktime=2ms", job,
			   NULL), 0);
	CHECK_EQ(p.ntasks, 6);
	for (size_t i = 0; i < p.ntasks; i++)
		CHECKF(p.tasks[i].groupid == groups[i], "task %zu: group %d", i,
		       p.tasks[i].groupid);
	a_end = r.task[0].last_ns > r.task[1].last_ns ? r.task[0].last_ns : r.task[1].last_ns;
	CHECKF(r.task[2].meas_ns > a_end && r.task[3].meas_ns > a_end,
	       "b started %lld and %lld ns after a ended", (long long)(r.task[2].meas_ns - a_end),
	       (long long)(r.task[3].meas_ns - a_end));
	/* fio's reports: group_reporting joins b's clones, never c and d */
	n = rp_units(&p, &r, &u);
	CHECK(n == 5 && u[2].n == 2 && u[2].groupid == 1 && u[3].groupid == 2 &&
	      u[4].groupid == 2 && u[4].first == 5);
	rp_units_free(u, n > 0 ? (size_t)n : 0);
	fake_done(&c, &p, &r);
	/* wait_for_previous is stonewall; a global group_reporting makes a
	 * report per group; a first job's stonewall starts no group */
	CHECK_EQ(fake_args(&c, &p, &r, err, sizeof(err), fn, "--group_reporting",
			   "--stonewall", "--name=x", "--numjobs=2", "--name=y",
			   "--wait_for_previous", NULL), 0);
	CHECK(p.ntasks == 3 && p.tasks[1].groupid == 0 && p.tasks[2].groupid == 1);
	CHECK(r.task[2].meas_ns > r.task[0].last_ns && r.task[2].meas_ns > r.task[1].last_ns);
	n = rp_units(&p, &r, &u);
	CHECK(n == 2 && u[0].n == 2 && u[1].n == 1 && u[1].groupid == 1);
	rp_units_free(u, n > 0 ? (size_t)n : 0);
	fake_done(&c, &p, &r);
}

/* ---------------------------------------------------------------- */
/* Output                                                            */
/* ---------------------------------------------------------------- */

/* A run with known numbers: 1000 reads of 1 MiB in 2 s. */
/* latencies of the known report: 1..1000 times this many ns */
static uint64_t known_step = 2000;

static int known_report(struct rp_conf *c, struct rp_plan *p, struct rp_result *r,
			struct rp_unit **u, struct rp_report *rep, const char *arg1,
			const char *arg2)
{
	char err[512];
	struct rp_task_res *t;

	memset(p, 0, sizeof(*p));
	memset(r, 0, sizeof(*r));
	if (parse(c, err, sizeof(err), arg1, "--filename=/dev/null", arg2, NULL))
		return -1;
	p->tasks = calloc(1, sizeof(*p->tasks));
	r->task = t = calloc(1, sizeof(*r->task));
	if (!p->tasks || !t || !(t->clat = malloc(sizeof(*t->clat))))
		return -1;
	p->ntasks = r->ntasks = 1;
	p->tasks[0].job = &c->jobs[0];
	rp_hist_init(t->clat);
	t->ios = 1000;
	t->bytes = 1000ull << 20;
	t->meas_ns = 1000000000ull;
	t->last_ns = 3000000000ull;
	t->depth[4] = 1000;
	t->eng.backend = RL_BACKEND_IO_URING;
	t->eng.direct_io = 1;
	for (uint64_t i = 1; i <= 1000; i++)
		rp_hist_add(t->clat, i * known_step);  /* 2 us .. 2 ms */
	t->bw = (struct rp_samples){ 4, 500000.0, 524000.0, 2048000.0, 0 };
	t->bw.sumsq = 500000.0 * 500000.0 + 3 * 516000.0 * 516000.0;
	r->elapsed_s = 2.0;
	r->usr_s = 0.1;
	r->sys_s = 0.3;
	r->start_unix_ms = 1700000000000ull;
	*rep = (struct rp_report){ c, p, r, NULL, 0, NULL };
	if (rp_units(p, r, u) != 1)
		return -1;
	rep->units = *u;
	rep->nunits = 1;
	return 0;
}

static const char json_check[] =
	"import json,sys\n"
	"d=json.load(open(sys.argv[1]))\n"
	"j=d['jobs'][0]; rd=j['read']\n"
	"assert rd['bw_bytes']==524288000, rd['bw_bytes']\n"
	"assert rd['bw']==512000 and rd['io_bytes']==1048576000\n"
	"assert abs(rd['iops']-500.0)<1e-9 and rd['runtime']==2000\n"
	"p=rd['clat_ns']['percentile']\n"
	"keys=['1.000000','5.000000','10.000000','20.000000','30.000000','40.000000',"
	"'50.000000','60.000000','70.000000','80.000000','90.000000','95.000000',"
	"'99.000000','99.500000','99.900000','99.950000','99.990000']\n"
	"assert sorted(p,key=float)==keys, list(p)\n"
	"assert all(isinstance(p[k],int) for k in keys)\n"
	"assert abs(p['50.000000']-1000000)<=1000000/64, p['50.000000']\n"
	"assert abs(p['99.000000']-1980000)<=1980000/64\n"
	"c=rd['clat_ns']; assert c['min']==2000 and c['max']==2000000 and c['N']==1000\n"
	"assert abs(c['mean']-1001000)<1e-6\n"
	"assert abs(j['usr_cpu']-5.0)<1e-6 and abs(j['sys_cpu']-15.0)<1e-6\n"
	"assert j['job_runtime']==2000\n"
	"assert rd['bw_samples']==4 and rd['bw_min']==500000 and rd['bw_max']==524000\n"
	"assert abs(rd['bw_mean']-512000)<1e-6 and abs(rd['bw_agg']-100.0)<1e-6\n"
	"assert j['iodepth_level']['16']==100.0 and j['latency_depth']==1\n"
	"assert abs(sum(j['latency_us'].values())+sum(j['latency_ms'].values())-100)<1e-6\n"
	"assert d['jobs'][0]['write']['bw_bytes']==0 and 'trim' in j and 'sync' in j\n"
	"assert j['jobname']=='q\"uote' and j['job options']['rw']=='randread'\n"
	"assert 'fixedbufs' not in j['job options'] and j['rlperf']['backend']=='io_uring'\n"
	"assert 'disk_util' not in d and 'global options' not in d\n";

typedef void (*print_fn)(FILE *f, const struct rp_report *rep);

/* Prints the known report with print into the test's directory as name. */
static int print_known(print_fn print, const char *name, const char *a1, const char *a2,
		       char *path, size_t len)
{
	struct rp_conf c;
	struct rp_plan p;
	struct rp_result r;
	struct rp_unit *u = NULL;
	struct rp_report rep;
	int rc = known_report(&c, &p, &r, &u, &rep, a1, a2);
	FILE *f = NULL;

	snprintf(path, len, "%s/%s", th_tmpdir(), name);
	if (!rc && (f = fopen(path, "w"))) {
		print(f, &rep);
		fclose(f);
	}
	rp_units_free(u, 1);
	fake_done(&c, &p, &r);
	return !rc && f ? 0 : -1;
}

static int write_script(const char *name, const char *text, char *path, size_t len);

static void json_has_fios_shape(void)
{
	char path[512], script[512], cmd[1200];

	CHECK(!print_known(rp_print_json, "out.json", "--name=q\"uote", "--rw=randread",
			   path, sizeof(path)));
	CHECK(!write_script("check.py", json_check, script, sizeof(script)));
	if (!have("python3 -c ''"))
		SKIP("python3 not installed");
	snprintf(cmd, sizeof(cmd), "python3 %s %s", script, path);
	CHECKF(system(cmd) == 0, "python3 rejected %s", path);
}

/* The latency and percentile units as fio chooses them: from min, max
 * and stdev, and from the smallest and largest percentile, so that no
 * percentile reads [0] (rlperf chose msec from the maximum alone). */
static void latency_units_follow_fio(void)
{
	static const struct {
		uint64_t step;
		const char *line, *pct;
	} cases[] = {
		{ 20000, "    clat (usec): min=20, max=20000, avg=10010.00, stdev=5776.39\n",
		  "    clat percentiles (usec):\n     |  1.00th=[  200],  5.00th=[ 1004]," },
		{ 2000, "    clat (nsec): min=2000, max=2000.0k, avg=1001000.00, stdev=577638.87\n",
		  "    clat percentiles (usec):\n     |  1.00th=[   21],  5.00th=[  100]," },
		{ 20, "    clat (nsec): min=20, max=20000, avg=10010.00, stdev=5776.39\n",
		  "    clat percentiles (nsec):\n     |  1.00th=[  201],  5.00th=[ 1004]," },
		{ 3000000, "    clat (msec): min=3, max=3000, avg=1501.50, stdev=866.46\n",
		  "    clat percentiles (msec):\n     |  1.00th=[   31],  5.00th=[  150]," },
	};
	char path[512], *text;
	int ok;

	for (size_t i = 0; i < RP_ARRAY_SIZE(cases); i++) {
		known_step = cases[i].step;
		CHECK(!print_known(rp_print_normal, "units.txt", "--bs=1m", NULL, path,
				   sizeof(path)));
		known_step = 2000;
		text = th_slurp(path, NULL);
		CHECK(text);
		ok = strstr(text, cases[i].line) && strstr(text, cases[i].pct) &&
		     !strstr(text, "[    0]");
		if (!ok)
			fprintf(stdout, "%s", text);
		free(text);
		CHECK(ok);
	}
}

/* json+ (fio's): clat_ns gains "bins", each non-empty histogram bucket's
 * middle value with its count; plain json has none. */
static const char jsonplus_check[] =
	"import json,sys\n"
	"c=json.load(open(sys.argv[1]))['jobs'][0]['read']['clat_ns']\n"
	"p=json.load(open(sys.argv[2]))['jobs'][0]['read']['clat_ns']\n"
	"assert 'bins' not in p and list(c)[-1]=='bins', list(c)\n"
	"b={int(k):v for k,v in c['bins'].items()}\n"
	"assert sum(b.values())==c['N']==1000, sum(b.values())\n"
	/* 2 us .. 2 ms in steps of 2 us: each bucket's value within 1/64 of
	 * the reads it holds */
	"assert min(b)<=2032 and max(b)>=1968000, (min(b),max(b))\n";

static void json_plus_adds_latency_bins(void)
{
	char plus[512], plain[512], script[512], cmd[2000];

	CHECK(!print_known(rp_print_json, "plus.json", "--output-format=json+", NULL, plus,
			   sizeof(plus)));
	CHECK(!print_known(rp_print_json, "plain.json", "--output-format=json", NULL, plain,
			   sizeof(plain)));
	if (!have("python3 -c ''"))
		SKIP("python3 not installed");
	CHECK(!write_script("plus.py", jsonplus_check, script, sizeof(script)));
	snprintf(cmd, sizeof(cmd), "python3 %s %s %s", script, plus, plain);
	CHECKF(system(cmd) == 0, "python3 rejected %s", plus);
}

/* Prints u's report with print into the test's directory; the text,
 * to free, or NULL. */
static char *print_units(print_fn print, const char *name, const struct rp_conf *c,
			 const struct rp_plan *p, const struct rp_result *r,
			 const struct rp_unit *u, size_t n)
{
	struct rp_report rep = { c, p, r, u, n, NULL };
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", th_tmpdir(), name);
	if (!(f = fopen(path, "w")))
		return NULL;
	print(f, &rep);
	fclose(f);
	return th_slurp(path, NULL);
}

/* gtod_reduce=1, as fio's: no latencies, percentiles or bandwidth
 * samples measured, and the reports leave them out (normal output has no
 * clat lines, terse no percentiles); 0 measures them all */
static void gtod_reduce_drops_latencies(void)
{
	const char *path = make_file("gtod", 64 << 10);
	char fn[600], err[600], *text, *terse;
	struct rp_conf c;
	struct rp_plan p;
	struct rp_result r;
	struct rp_unit *u = NULL;

	CHECK(path);
	snprintf(fn, sizeof(fn), "--filename=%s", path);
	for (int reduce = 0; reduce < 2; reduce++) {
		/* 600 ms: at least one bandwidth sample (500 ms) without it */
		CHECK_EQ(fake_args(&c, &p, &r, err, sizeof(err), fn, "--time_based",
				   "--runtime=600ms", reduce ? "--gtod_reduce=1" : "--gtod_reduce=0",
				   NULL), 0);
		CHECK_EQ(rp_units(&p, &r, &u), 1);
		text = print_units(rp_print_normal, "gtod.txt", &c, &p, &r, u, 1);
		terse = print_units(rp_print_terse, "gtod.terse", &c, &p, &r, u, 1);
		CHECK(text && terse && u->ios > 0);
		CHECKF((u->clat->n == 0) == reduce && (u->bw.n == 0) == reduce &&
		       (u->iops.n == 0) == reduce, "reduce %d: clat %" PRIu64 " bw %" PRIu64,
		       reduce, u->clat->n, u->bw.n);
		CHECKF((strstr(text, "clat") == NULL) == reduce &&
		       (strstr(text, "lat (") == NULL) == reduce &&
		       strstr(text, "read: IOPS="), "%s", text);
		CHECKF((strstr(terse, ";1.000000%=") == NULL) == reduce && strstr(terse, ";0%=0;"),
		       "%s",
		       terse);
		free(text);
		free(terse);
		rp_units_free(u, 1);
		fake_done(&c, &p, &r);
	}
}

/* fio's terse version 3 fields of the known report (man fio, TERSE
 * OUTPUT): 121 without disks, usec latencies, KiB */
static const char terse_check[] =
	"import sys\n"
	"t=open(sys.argv[1]).read(); assert t.count('\\n')==1 and t[-1]=='\\n', t\n"
	"f=t[:-1].split(';'); assert len(f)==121, len(f)\n"
	"assert f[0]=='3' and f[1].startswith('rlperf-') and f[2:5]==['j','0','0'], f[:5]\n"
	"assert f[5:9]==['1024000','512000','500','2000'], f[5:9]\n"
	"assert f[9:13]==['0','0','0.000000','0.000000'], f[9:13]\n"
	"assert f[13:16]==['2','2000','1001.000000'] and f[37:41]==f[13:17], f[13:17]\n"
	"assert f[17].startswith('1.000000%=') and f[23].startswith('50.000000%='), f[17:37]\n"
	"assert abs(int(f[23].split('=')[1])-1000)<=1000/64, f[23]\n"
	"assert f[33]=='99.990000%=' + f[33].split('=')[1] and f[34:37]==['0%=0']*3\n"
	"assert f[41:46]==['500000','524000','100.000000%','512000.000000',f[45]], f[41:46]\n"
	"assert f[46:50]==['0']*4 and f[82:87]==['0','0','0.000000%','0.000000','0.000000']\n"
	"assert f[87:92]==['5.000000%','15.000000%','0','0','0'], f[87:92]\n"
	"assert f[92:99]==['0.0%']*4+['100.0%','0.0%','0.0%'], f[92:99]\n"
	"assert f[99]=='0.00%' and abs(sum(float(x[:-1]) for x in f[99:121])-100)<0.1\n";

static void terse_has_fios_fields(void)
{
	char path[512], script[512], cmd[1200];

	CHECK(!print_known(rp_print_terse, "out.terse", "--name=j", "--minimal", path,
			   sizeof(path)));
	if (!have("python3 -c ''"))
		SKIP("python3 not installed");
	CHECK(!write_script("terse.py", terse_check, script, sizeof(script)));
	snprintf(cmd, sizeof(cmd), "python3 %s %s", script, path);
	CHECKF(system(cmd) == 0, "python3 rejected %s", path);
}

static void normal_output_reads_like_fio(void)
{
	char path[512], *text;
	int ok;

	CHECK(!print_known(rp_print_normal, "out.txt", "--bs=1m", "--iodepth=16", path,
			   sizeof(path)));
	text = th_slurp(path, NULL);
	CHECK(text);
	ok = strstr(text, "rlperf: (g=0): rw=read, bs=(R) 1024KiB-1024KiB, ioengine=io_uring, "
		    "iodepth=16\n") &&
	     strstr(text, "Starting 1 thread\n") &&
	     strstr(text, "  read: IOPS=500, BW=500MiB/s (524MB/s)(1000MiB/2000msec)\n") &&
	     /* fio's units: nsec while the minimum is 2 us, usec percentiles */
	     strstr(text, "    clat (nsec): min=2000, max=2000.0k, avg=1001000.00, stdev=") &&
	     strstr(text, "    clat percentiles (usec):\n     |  1.00th=[   21],") &&
	     strstr(text, "99.99th=[ 2008]\n") &&
	     /* bins by bucket: 50 us and 750 us fall in buckets below */
	     strstr(text, "  lat (usec)   : 4=0.10%, 10=0.30%, 20=0.50%, 50=1.60%, 100=2.50%\n"
		    "  lat (usec)   : 250=7.40%, 500=12.50%, 750=12.70%, 1000=12.30%\n"
		    "  lat (msec)   : 2=50.00%, 4=0.10%\n") &&
	     strstr(text, "  cpu          : usr=5.00%, sys=15.00%,") &&
	     strstr(text, "  IO depths    : 1=0.0%, 2=0.0%, 4=0.0%, 8=0.0%, 16=100.0%,") &&
	     strstr(text, "   READ: bw=500MiB/s (524MB/s), 500MiB/s-500MiB/s (524MB/s-524MB/s), "
		    "io=1000MiB (1049MB), run=2000-2000msec\n");
	if (!ok)
		fprintf(stdout, "%s", text);
	free(text);
	CHECK(ok);
}

static void block_sizes_print_as_fio(void)
{
	static const struct {
		uint64_t v;
		const char *s;
	} cases[] = {
		{ 4096, "4096B" }, { 65536, "64.0KiB" }, { 1 << 20, "1024KiB" },
		{ 1 << 30, "1024MiB" }, { 1000, "1000B" }, { 12288, "12.0KiB" },
		{ 100000, "97.7KiB" }, { 8 << 20, "8192KiB" },
	};
	char b[32];

	for (size_t i = 0; i < RP_ARRAY_SIZE(cases); i++) {
		rp_fmt_bs(b, sizeof(b), cases[i].v);
		CHECK_STR(b, cases[i].s);
	}
}

/* ---------------------------------------------------------------- */
/* The binary                                                        */
/* ---------------------------------------------------------------- */

static const char *rlperf_exe(void)
{
	static char exe[512];
	const char *b = getenv("RL_BUILD");

	snprintf(exe, sizeof(exe), "%s/rlperf", b ? b : "build");
	return access(exe, X_OK) ? NULL : exe;
}

/* Runs the built rlperf with args; stdout and stderr into out. */
static int run_rlperf(const char *args, char *out, size_t len)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd), "%s 2>&1 %s", rlperf_exe(), args);
	return run_cmd(cmd, out, len);
}

/* The groups of stonewall_job in rlperf's reports, as fio 3.33's on the
 * same file: JSON "groupid"s, the normal report's "g=", "groupid=" and a
 * "Run status group" block per group, terse's fourth field. */
static void binary_reports_stonewall_groups(void)
{
	static const char *const engines[] = { "io_uring", "libaio", "psync" };
	static const int groups[] = { 0, 0, 1, 2, 2 };
	static const char *const want[] = {
		"c: (g=2): rw=read", "b: (groupid=1, jobs=2)", "d: (groupid=2, jobs=1)",
		"\nRun status group 0 (all jobs):\n", "\nRun status group 1 (all jobs):\n",
		"\nRun status group 2 (all jobs):\n",
	};
	const char *path = make_file("wallbin", 256 << 10);
	const char *job = write_text("wallbin.fio", stonewall_job);
	char args[1400], out[32768];

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	CHECK(path && job);
	for (size_t i = 0; i < RP_ARRAY_SIZE(engines); i++) {
		const char *s = out;
		int rc, g = 0;

		snprintf(args, sizeof(args), "--filename=%s --ioengine=%s --output-format=json "
			 "%s", path, engines[i], job);
		rc = run_rlperf(args, out, sizeof(out));
		if (rc == 1 && i < 2 && strstr(out, "unavailable"))
			continue;  /* a backend this machine lacks */
		CHECKF(rc == 0, "%s: %s", engines[i], out);
		for (size_t k = 0; k < RP_ARRAY_SIZE(groups); k++) {
			s = strstr(s, "\"groupid\" : ");
			CHECKF(s && sscanf(s, "\"groupid\" : %d", &g) == 1 && g == groups[k],
			       "%s: job %zu: groupid %d", engines[i], k, g);
			s++;
		}
		CHECKF(!strstr(s, "\"groupid\""), "%s: %s", engines[i], out);
		snprintf(args, sizeof(args), "--filename=%s --ioengine=%s %s", path, engines[i],
			 job);
		CHECK_EQ(run_rlperf(args, out, sizeof(out)), 0);
		for (size_t k = 0; k < RP_ARRAY_SIZE(want); k++)
			CHECKF(strstr(out, want[k]), "%s: no '%s' in %s", engines[i], want[k], out);
		snprintf(args, sizeof(args), "--filename=%s --ioengine=%s --minimal %s", path,
			 engines[i], job);
		CHECK_EQ(run_rlperf(args, out, sizeof(out)), 0);
		CHECKF(strstr(out, ";b;1;0;") && strstr(out, ";d;2;0;"), "%s: %s", engines[i],
		       out);
	}
}

static void binary_rejects_bad_options(void)
{
	char out[8192];

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	/* exit 1 for every error, as fio */
	CHECK_EQ(run_rlperf("--bogus", out, sizeof(out)), 1);
	CHECK_STR(out, "rlperf: unrecognized option '--bogus'\n");
	CHECK_EQ(run_rlperf("--filename=x --append-terse", out, sizeof(out)), 1);
	CHECK_STR(out, "rlperf: --append-terse is a fio option that rlperf does not support "
		  "(rlperf --help lists those it has)\n");
	CHECK_EQ(run_rlperf("--filename=/nonexistent/x", out, sizeof(out)), 1);
	CHECK_STR(out, "rlperf: /nonexistent/x: No such file or directory (rlperf reads "
		  "files, it never creates them)\n");
	CHECK_EQ(run_rlperf("--version", out, sizeof(out)), 0);
	CHECK_STR(out, RP_VERSION "\n");
	CHECK_EQ(run_rlperf("--help", out, sizeof(out)), 0);
	CHECK(strstr(out, "--iodepth=N") && strstr(out, "--ioengine=E"));
}

static const char real_check[] =
	"import json,sys\n"
	"d=json.load(open(sys.argv[1])); j=d['jobs'][0]; rd=j['read']\n"
	"assert j['error']==0 and rd['total_ios']==256 and rd['io_bytes']==1048576, rd\n"
	"assert rd['clat_ns']['N']==256 and rd['bw_bytes']>0\n"
	"assert len(rd['clat_ns']['percentile'])==17\n"
	"assert j['rlperf']['backend']==sys.argv[2], j['rlperf']\n"
	/* raw reads stay on the owner thread: a hand-off to the completion
	 * thread per read showed as 1.2-1.7 context switches per read. Only
	 * voluntary switches count: preemption by other load is not ours;
	 * and only cached (buffered) reads: a direct read waits for the
	 * drive, a voluntary switch per wait, as many as the drive's
	 * completions come apart (129 of 256 with a CI run beside); nor on
	 * overlayfs (argv[4] 1), whose buffered reads io_uring hands to its
	 * io-wq, a switch per wait (65-97 of 256 in a fresh chroot) */
	"v=j['rlperf']['voluntary_ctx']\n"
	"assert sys.argv[2]=='pread' or sys.argv[3]=='1' or sys.argv[4]=='1' or "
	"v<rd['total_ios']/4, v\n";

/* 1 when path is on overlayfs (a container's root file system). */
static int on_overlayfs(const char *path)
{
	struct statfs sf;

	return statfs(path, &sf) == 0 && sf.f_type == 0x794c7630; /* OVERLAYFS_SUPER_MAGIC */
}

static int write_script(const char *name, const char *text, char *path, size_t len)
{
	FILE *f;

	snprintf(path, len, "%s/%s", th_tmpdir(), name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	fclose(f);
	return 0;
}

/* A real run on the engine, every backend, JSON checked by python3. */
static void binary_reads_a_file(void)
{
	static const char *const engines[] = { "io_uring", "libaio", "psync" };
	static const char *const names[] = { "io_uring", "libaio", "pread" };
	const char *path = make_file("real", 1 << 20);
	char out[16384], args[1024], json[512], script[512], cmd[1400];

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	if (!have("python3 -c ''"))
		SKIP("python3 not installed");
	CHECK(path && !write_script("real.py", real_check, script, sizeof(script)));
	for (int direct = 0; direct < 2; direct++) {
		for (size_t i = 0; i < RP_ARRAY_SIZE(engines); i++) {
			long drops = th_cache_drops();
			int rc;

			snprintf(json, sizeof(json), "%s/real-%s-%d.json", th_tmpdir(),
				 engines[i], direct);
			/* invalidate=0: buffered reads from the cache, so that
			 * a context switch is the engine's, not the disk's */
			snprintf(args, sizeof(args), "--filename=%s --rw=randread --bs=4k "
				 "--iodepth=8 --direct=%d --ioengine=%s --output-format=json "
				 "--invalidate=0 > %s", path, direct, engines[i], json);
			rc = run_rlperf(args, out, sizeof(out));
			if (rc == 1 && i > 0 && strstr(out, "unavailable"))
				continue;  /* a backend this machine lacks */
			CHECKF(rc == 0, "rlperf --ioengine=%s --direct=%d: exit %d: %s",
			       engines[i], direct, rc, out);
			snprintf(cmd, sizeof(cmd), "python3 %s %s %s %d %d", script, json, names[i],
				 direct, on_overlayfs(path));
			rc = system(cmd);
			/* a drop_caches beside the test turns cached reads into
			 * disk waits, each a voluntary switch (not on tmpfs: there
			 * io_uring hands every buffered read to its io-wq) */
			if (rc != 0 && th_cache_dropped_since(drops))
				SKIP(TH_CACHE_DROPPED);
			CHECKF(rc == 0, "%s: bad JSON", json);
		}
	}
}

/* Compares the shape of fio's JSON (argv[1]) and rlperf's (argv[2]): the
 * same keys everywhere (rlperf adds "rlperf" to each job; fio's disk_util
 * entries are its disks), the same number of jobs, the same bytes each. */
static const char shape_check[] =
	"import json,sys\n"
	"a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2]))\n"
	"def cmp(x,y,path):\n"
	"    if isinstance(x,dict):\n"
	"        assert isinstance(y,dict), path\n"
	"        ky=set(y)-({'rlperf'} if path.count('/')==2 else set())\n"
	"        assert set(x)==ky, (path, sorted(set(x)^ky))\n"
	"        for k in x:\n"
	"            if k!='disk_util': cmp(x[k],y[k],path+'/'+k)\n"
	"    elif isinstance(x,list):\n"
	"        assert isinstance(y,list) and len(x)==len(y), (path,len(x),len(y))\n"
	"        for i,(p,q) in enumerate(zip(x,y)): cmp(p,q,path+'/'+str(i))\n"
	"cmp(a,b,'')\n"
	"ba=[(j['jobname'],j['read']['io_bytes'],j['job options']) for j in a['jobs']]\n"
	"bb=[(j['jobname'],j['read']['io_bytes'],j['job options']) for j in b['jobs']]\n"
	"assert ba==bb, (ba,bb)\n"
	"assert a.get('global options')==b.get('global options')\n"
	"na=[u['name'] for u in a.get('disk_util',[])]\n"
	"nb=[u['name'] for u in b.get('disk_util',[])]\n"
	"assert na==nb, (na,nb)\n";

static void binary_json_matches_fios_for_a_job_file(void)
{
	const char *f1 = make_file("shape1", 1 << 20), *f2 = make_file("shape2", 512 << 10);
	char job[2048], script[512], fa[512], fb[512], cmd[2048], out[4096];
	const char *path;
	static const char *const extra[] = { "", "--group_reporting", "--gtod_reduce=1" };

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	if (!have("fio --version") || !have("python3 -c ''"))
		SKIP("fio or python3 not installed (make deps installs them)");
	CHECK(f1 && f2 && !write_script("shape.py", shape_check, script, sizeof(script)));
	snprintf(job, sizeof(job), "; fio and rlperf read this same file\n[global]\n"
		 "filename=%s\nbs=64k\nrw=read\nioengine=psync\n[seq]\nnumjobs=2\n"
		 "[rnd]\nrw=randread\nbs=4k\nfilename=%s\nsize=50%%\n", f1, f2);
	path = write_text("shape.fio", job);
	CHECK(path);
	for (size_t i = 0; i < RP_ARRAY_SIZE(extra); i++) {
		snprintf(fa, sizeof(fa), "%s/fio%zu.json", th_tmpdir(), i);
		snprintf(fb, sizeof(fb), "%s/rlperf%zu.json", th_tmpdir(), i);
		snprintf(cmd, sizeof(cmd), "fio --output-format=json --readonly %s %s > %s "
			 "2>&1", extra[i], path, fa);
		CHECKF(system(cmd) == 0, "%s failed", cmd);
		snprintf(cmd, sizeof(cmd), "%s --output-format=json --readonly %s %s > %s",
			 rlperf_exe(), extra[i], path, fb);
		CHECKF(run_cmd(cmd, out, sizeof(out)) == 0, "%s: %s", cmd, out);
		snprintf(cmd, sizeof(cmd), "python3 %s %s %s 2>&1", script, fa, fb);
		CHECKF(run_cmd(cmd, out, sizeof(out)) == 0, "%s %s: %s", fa, fb, out);
	}
}

/* fio's JSON (argv[1]) against rlperf's (argv[2]) for steadystate.fio:
 * the same "steadystate" object, key for key and type for type, both
 * attained and stopped well before the runtime; then rlperf's normal
 * output (argv[3]) has fio's steadystate line */
static const char ss_check[] =
	"import json,re,sys\n"
	"a=json.load(open(sys.argv[1]))['jobs']; b=json.load(open(sys.argv[2]))['jobs']\n"
	"assert len(a)==len(b)==2, (len(a),len(b))\n"
	"def shape(x):\n"
	"    if isinstance(x,dict): return {k:shape(v) for k,v in x.items()}\n"
	"    if isinstance(x,list): return [shape(v) for v in x]\n"
	"    return type(x).__name__\n"
	"for x,y in zip(a,b):\n"
	"    sx,sy=x['steadystate'],y['steadystate']\n"
	"    assert shape(sx)==shape(sy), (shape(sx),shape(sy))\n"
	"    assert (sx['ss'],sx['duration'])==(sy['ss'],sy['duration']), (sx,sy)\n"
	"    assert sx['attained']==sy['attained']==1, (sx,sy)\n"
	"    assert re.fullmatch(r'-?[0-9.]+%',sy['criterion']), sy\n"
	"    assert x['read']['runtime']<15000 and y['read']['runtime']<15000\n"
	"n=open(sys.argv[3]).read()\n"
	"assert re.search(r'\\n  steadystate  : attained=yes, bw=\\S+ \\(\\S+\\), "
	"iops=\\S+, iops mean dev=\\d+\\.\\d{3}%\\n',n), n\n"
	"assert re.search(r'\\n  steadystate  : attained=yes, bw=\\S+ \\(\\S+\\), "
	"iops=\\S+, bw slope=-?\\d+\\.\\d{3}%\\n',n), n\n";

/* fio's steadystate: a job stops once its criterion holds over the window
 * (here one easily met, well before the 30 s runtime), and both reports
 * say so as fio's do; every engine */
static void binary_steadystate_matches_fios(void)
{
	static const char *const engines[] = { "io_uring", "libaio", "psync" };
	const char *f1 = make_file("steady", 1 << 20);
	char job[2048], script[512], fa[512], fb[512], fc[512], cmd[4096], out[4096];
	const char *path;

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	if (!have("fio --version") || !have("python3 -c ''"))
		SKIP("fio or python3 not installed (make deps installs them)");
	CHECK(f1 && !write_script("ss.py", ss_check, script, sizeof(script)));
	snprintf(job, sizeof(job), "[global]\nfilename=%s\nbs=4k\nrw=read\ntime_based\n"
		 "runtime=30\nss_dur=2\n[a]\nss=iops:99%%\n[b]\nnew_group\n"
		 "ss=bw_slope:1000%%\nss_ramp=1\n", f1);
	path = write_text("steadystate.fio", job);
	CHECK(path);
	snprintf(fa, sizeof(fa), "%s/ss_fio.json", th_tmpdir());
	snprintf(cmd, sizeof(cmd), "fio --output-format=json --readonly %s > %s 2>&1", path,
		 fa);
	CHECKF(system(cmd) == 0, "%s failed", cmd);
	for (size_t i = 0; i < RP_ARRAY_SIZE(engines); i++) {
		snprintf(fb, sizeof(fb), "%s/ss_rlperf.json", th_tmpdir());
		snprintf(fc, sizeof(fc), "%s/ss_rlperf.txt", th_tmpdir());
		snprintf(cmd, sizeof(cmd), "%s --ioengine=%s --eta=never --output-format=json "
			 "%s > %s && %s --ioengine=%s --eta=never %s > %s", rlperf_exe(),
			 engines[i], path, fb, rlperf_exe(), engines[i], path, fc);
		CHECKF(run_cmd(cmd, out, sizeof(out)) == 0, "%s: %s", cmd, out);
		snprintf(cmd, sizeof(cmd), "python3 %s %s %s %s 2>&1", script, fa, fb, fc);
		CHECKF(run_cmd(cmd, out, sizeof(out)) == 0, "%s: %s", engines[i], out);
	}
}

/* fio's terse lines (argv[1]) against rlperf's (argv[2]): as many lines
 * and fields, each field of the same kind, the same jobs, bytes, disks */
static const char terse_shape_check[] =
	"import sys\n"
	"def kind(x):\n"
	"    return '%=' if '%=' in x else '%' if x.endswith('%') else "
	"'f' if x.replace('.','',1).isdigit() and '.' in x else "
	"'i' if x.isdigit() else 's'\n"
	"a=[l.split(';') for l in open(sys.argv[1]).read().splitlines()]\n"
	"b=[l.split(';') for l in open(sys.argv[2]).read().splitlines()]\n"
	"assert len(a)==len(b) and a, (len(a),len(b))\n"
	"for x,y in zip(a,b):\n"
	"    assert len(x)==len(y), (len(x),len(y))\n"
	"    kx=[kind(v) for v in x]; ky=[kind(v) for v in y]\n"
	"    assert kx==ky, [(i,x[i],y[i]) for i in range(len(x)) if kx[i]!=ky[i]]\n"
	"    assert x[0]==y[0]=='3' and x[2:6]==y[2:6], (x[:6],y[:6])\n"
	"    assert y[46:50]==['0']*4, y[46:50]\n"
	"    assert x[121::9]==y[121::9], (x[121:],y[121:])\n";

static void binary_terse_matches_fios(void)
{
	const char *f1 = make_file("terse1", 1 << 20), *f2 = make_file("terse2", 512 << 10);
	char job[2048], script[512], fa[512], fb[512], cmd[2048], out[4096];
	const char *path;
	static const char *const extra[] = {
		"--output-format=terse", "--minimal --terse-version=3 --group_reporting",
		"--minimal --gtod_reduce=1",
	};

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	if (!have("fio --version") || !have("python3 -c ''"))
		SKIP("fio or python3 not installed (make deps installs them)");
	CHECK(f1 && f2 && !write_script("terse.py", terse_shape_check, script,
					 sizeof(script)));
	snprintf(job, sizeof(job), "[global]\nfilename=%s\nbs=64k\nrw=read\nioengine=psync\n"
		 "[seq]\nnumjobs=2\n[rnd]\nrw=randread\nbs=4k\nfilename=%s\nsize=50%%\n",
		 f1, f2);
	path = write_text("terse.fio", job);
	CHECK(path);
	for (size_t i = 0; i < RP_ARRAY_SIZE(extra); i++) {
		snprintf(fa, sizeof(fa), "%s/fio%zu.terse", th_tmpdir(), i);
		snprintf(fb, sizeof(fb), "%s/rlperf%zu.terse", th_tmpdir(), i);
		snprintf(cmd, sizeof(cmd), "fio --readonly %s %s > %s 2>&1", extra[i], path,
			 fa);
		CHECKF(system(cmd) == 0, "%s failed", cmd);
		snprintf(cmd, sizeof(cmd), "%s --readonly %s %s > %s", rlperf_exe(),
			 extra[i], path, fb);
		CHECKF(run_cmd(cmd, out, sizeof(out)) == 0, "%s: %s", cmd, out);
		snprintf(cmd, sizeof(cmd), "python3 %s %s %s 2>&1", script, fa, fb);
		CHECKF(run_cmd(cmd, out, sizeof(out)) == 0, "%s %s: %s", fa, fb, out);
	}
}

/* hipri polls where every disk under the job has poll queues; elsewhere
 * (virtio, an NVMe without nvme.poll_queues, buffered reads, pvsync2) a
 * note says why once and the reads go interrupt-driven, where fio's would
 * fail with EOPNOTSUPP */
static void setup_applies_hipri_where_reads_can_poll(void)
{
	const char *path = make_file("hipri", 64 << 10);
	char err[512], disk[64], want[1024];
	struct rp_conf c;
	struct rp_plan p;
	int polls;

	CHECK(path);
	polls = rp_disk_polls(path, disk, sizeof(disk));
	CHECK_EQ(parse(&c, err, sizeof(err), "--hipri", "--filename", path, "--name=a",
		       "--direct=0", "--name=b", "--direct=1", "--name=c", "--ioengine=pvsync2",
		       NULL), 0);
	CHECKF(rp_setup(&c, &p, err, sizeof(err)) == 0, "%s", err);
	CHECK_EQ(p.ntasks, 3);
	CHECK(!p.tasks[0].hipri && !p.tasks[2].hipri);
	CHECK_EQ(p.tasks[1].hipri, polls);
	CHECK_STR(p.notes, "rlperf: hipri: polled reads need direct=1; reads are not polled");
	rp_plan_free(&p);
	rp_conf_free(&c);

	CHECK_EQ(parse(&c, err, sizeof(err), "--hipri", "--direct=1", "--filename", path,
		       NULL), 0);
	CHECKF(rp_setup(&c, &p, err, sizeof(err)) == 0, "%s", err);
	snprintf(want, sizeof(want), "rlperf: hipri: %s: %s%s; reads are not polled", path,
		 disk[0] ? disk : "no block device under it",
		 disk[0] ? " has no poll queues (queue/io_poll is 0)" : "");
	CHECK_EQ(p.tasks[0].hipri, polls);
	CHECK_STR(p.notes, polls ? "" : want);
	rp_plan_free(&p);
	rp_conf_free(&c);
}

/* the run goes on with hipri on any disk: the note on stderr, then the
 * report; without poll queues io_uring's IOPOLL would fail every read */
static void binary_runs_hipri_on_any_disk(void)
{
	const char *path = make_file("hipri", 64 << 10);
	char args[1024], out[4096], disk[64];

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	CHECK(path);
	snprintf(args, sizeof(args), "--filename=%s --hipri --direct=1 --eta=never "
		 "--minimal", path);
	CHECKF(run_rlperf(args, out, sizeof(out)) == 0, "%s", out);
	if (rp_disk_polls(path, disk, sizeof(disk)))
		CHECKF(!strncmp(out, "3;", 2), "%s", out);
	else
		CHECKF(!strncmp(out, "rlperf: hipri: ", 15) && strstr(out, "\n3;"), "%s", out);
}

/* sqthread_poll: io_uring's SQPOLL for real, a kernel thread named
 * iou-sqp-PID submits (SQPOLL works unprivileged since 5.11) */
static void binary_sqthread_poll_starts_the_kernel_thread(void)
{
	const char *path = make_file("sqpoll", 1 << 20);
	char cmd[1024], out[65536];
	int found = 0, st = 0;
	FILE *ps;
	pid_t pid;

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	CHECK(path);
	pid = fork();
	CHECK(pid >= 0);
	if (!pid) {
		execl(rlperf_exe(), "rlperf", "--filename", path, "--sqthread_poll", "--bs=4k",
		      "--time_based", "--runtime=5", "--eta=never", "--output=/dev/null",
		      (char *)NULL);
		_exit(127);
	}
	/* a thread of rlperf's process: look until it shows (each look a
	 * few ms) or the run ends */
	snprintf(cmd, sizeof(cmd), "cat /proc/%d/task/*/comm 2>/dev/null", (int)pid);
	for (int i = 0; i < 400 && !found && !waitpid(pid, NULL, WNOHANG); i++) {
		ps = popen(cmd, "r");
		if (ps) {
			size_t n = fread(out, 1, sizeof(out) - 1, ps);

			out[n] = '\0';
			found = strstr(out, "iou-sqp-") != NULL;
			pclose(ps);
		}
		usleep(10000);
	}
	kill(pid, SIGINT);
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECKF(found, "no iou-sqp thread in rlperf (pid %d)", (int)pid);
	/* Ctrl-C ends the run with its report, exit 0 (a sanitizer's report
	 * in the rlperf it runs would make it 66) */
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rlperf ended with status %d", st);
}

static void binary_writes_output_to_a_file(void)
{
	const char *path = make_file("outfile", 256 << 10);
	char args[1400], out[4096], dest[512], *text;

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	CHECK(path);
	snprintf(dest, sizeof(dest), "%s/report.json", th_tmpdir());
	snprintf(args, sizeof(args), "--filename=%s --output-format=json --output=%s "
		 "--eta=never", path, dest);
	CHECK_EQ(run_rlperf(args, out, sizeof(out)), 0);
	CHECK_STR(out, "");
	text = th_slurp(dest, NULL);
	CHECK(text);
	CHECKF(strstr(text, "\"jobs\" : [") && strstr(text, "\"io_bytes\" : 262144"), "%s", text);
	free(text);
	/* a bad option leaves the file alone; a bad path is one line */
	snprintf(args, sizeof(args), "--filename=%s --output=%s --bs=x", path, dest);
	CHECK_EQ(run_rlperf(args, out, sizeof(out)), 1);
	text = th_slurp(dest, NULL);
	CHECK(text && strstr(text, "\"jobs\""));
	free(text);
	snprintf(args, sizeof(args), "--filename=%s --output=/nonexistent/r.txt", path);
	CHECK_EQ(run_rlperf(args, out, sizeof(out)), 1);
	CHECK_STR(out, "rlperf: output file open error: /nonexistent/r.txt: No such file or "
		  "directory\n");
}

/* Pages of path in the page cache, from mincore(2); -1 on error. */
static long resident_pages(const char *path, uint64_t off, uint64_t len)
{
	int fd = open(path, O_RDONLY);
	unsigned char vec[1024];
	long n = 0;
	void *p;

	if (fd < 0 || len / 4096 > sizeof(vec))
		return -1;
	p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)off);
	close(fd);
	if (p == MAP_FAILED)
		return -1;
	if (mincore(p, len, vec))
		n = -1;
	for (uint64_t i = 0; n >= 0 && i < (len + 4095) / 4096; i++)
		n += vec[i] & 1;
	munmap(p, len);
	return n;
}

static void binary_invalidate_drops_the_region_cache(void)
{
	const char *path = make_file("cached", 1 << 20);
	char args[1400], out[4096], buf[65536];
	long drops = th_cache_drops(), kept, region, head, tail;
	uint32_t align;
	int fd, direct;

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	CHECK(path);
	if (eng_raw_align(path, &align, &direct) || !direct)
		SKIP("the test directory has no O_DIRECT (tmpfs?): set RL_TMPDIR");
	/* bring the file in; direct reads leave the cache as it is */
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
	snprintf(args, sizeof(args), "--filename=%s --direct=1 --size=256k --invalidate=0",
		 path);
	CHECK_EQ(run_rlperf(args, out, sizeof(out)), 0);
	kept = resident_pages(path, 0, 1 << 20);
	/* fio's default: the job's region, and only it, is dropped first */
	snprintf(args, sizeof(args), "--filename=%s --direct=1 --offset=256k --size=256k",
		 path);
	CHECK_EQ(run_rlperf(args, out, sizeof(out)), 0);
	region = resident_pages(path, 256 << 10, 256 << 10);
	head = resident_pages(path, 0, 256 << 10);
	tail = resident_pages(path, 512 << 10, 512 << 10);
	/* residency is the machine's: a benchmark beside the test that drops
	 * the page cache empties the pages the test expects to stay */
	if ((kept != 256 || region != 0 || head != 64 || tail != 128) &&
	    th_cache_dropped_since(drops))
		SKIP(TH_CACHE_DROPPED);
	CHECK_EQ(kept, 256);
	CHECK_EQ(region, 0);
	CHECK_EQ(head, 64);
	CHECK_EQ(tail, 128);
}

static void binary_reads_several_files(void)
{
	const char *a = make_file("sev_a", 256 << 10), *b = make_file("sev_b", 128 << 10);
	char args[1400], out[16384];

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	CHECK(a && b);
	snprintf(args, sizeof(args), "--name=two --filename=%s:%s --bs=64k --iodepth=4 "
		 "--output-format=json", a, b);
	CHECK_EQ(run_rlperf(args, out, sizeof(out)), 0);
	CHECKF(strstr(out, "\"io_bytes\" : 393216") && strstr(out, "\"total_ios\" : 6,"),
	       "%s", out);
	/* numjobs: one JSON job per clone */
	snprintf(args, sizeof(args), "--name=two --filename=%s:%s --bs=64k --numjobs=2 "
		 "--size=128k --output-format=json", a, b);
	CHECK_EQ(run_rlperf(args, out, sizeof(out)), 0);
	CHECKF(strstr(out, "\"jobname\" : \"two\"") &&
	       strstr(strstr(out, "\"jobname\" : \"two\"") + 1, "\"jobname\" : \"two\""),
	       "%s", out);
}

/* A FIFO as --filename or as the job file is refused at once (it was
 * opened blocking: rlperf waited forever for a writer). */
static void binary_refuses_a_fifo_at_once(void)
{
	char fifo[512], cmd[1400], out[4096];

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	snprintf(fifo, sizeof(fifo), "%s/fifo", th_tmpdir());
	CHECK(mkfifo(fifo, 0600) == 0);
	/* timeout's 124 would say rlperf hung */
	snprintf(cmd, sizeof(cmd), "timeout %d %s --filename=%s 2>&1", 10 * TH_SLOW,
		 rlperf_exe(), fifo);
	CHECK_EQ(run_cmd(cmd, out, sizeof(out)), 1);
	CHECKF(strstr(out, "fifo: not a regular file or block device\n"), "%s", out);
	snprintf(cmd, sizeof(cmd), "timeout %d %s %s 2>&1", 10 * TH_SLOW, rlperf_exe(),
		 fifo);
	CHECK_EQ(run_cmd(cmd, out, sizeof(out)), 1);
	CHECKF(strstr(out, "fifo: not a regular file\n"), "%s", out);
	unlink(fifo);
}

/* The engine's deepest queue runs on every backend; a deeper one is
 * refused while parsing (it was accepted up to 65536, then failed the run). */
static void binary_runs_the_deepest_iodepth(void)
{
	static const char *const engines[] = { "io_uring", "libaio", "psync" };
	const char *path = make_file("deep", 4 << 20);
	char args[1400], out[16384];

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	CHECK(path);
	for (size_t i = 0; i < RP_ARRAY_SIZE(engines); i++) {
		int rc;

		snprintf(args, sizeof(args), "--filename=%s --iodepth=%u --ioengine=%s "
			 "--output-format=json", path, RP_MAX_IODEPTH, engines[i]);
		rc = run_rlperf(args, out, sizeof(out));
		if (rc == 1 && i < 2 && strstr(out, "unavailable"))
			continue;  /* a backend this machine lacks */
		CHECKF(rc == 0 && strstr(out, "\"io_bytes\" : 4194304"), "%s: %s",
		       engines[i], out);
		snprintf(args, sizeof(args), "--filename=%s --iodepth=%u --ioengine=%s", path,
			 RP_MAX_IODEPTH + 1, engines[i]);
		CHECK_EQ(run_rlperf(args, out, sizeof(out)), 1);
		CHECK_STR(out, "rlperf: failed parsing iodepth=1025: out of range [1, 1024]\n");
	}
}

/* disk_util as fio reports it: the disk under the file (a partition's
 * parent, found here from sysfs independently), fio's keys, the deltas
 * of its counters; no key at all where no disk holds the file (tmpfs). */
static const char disk_check[] =
	"import json,os,sys\n"
	"d=json.load(open(sys.argv[1])); st=os.stat(sys.argv[2])\n"
	"p=os.path.realpath('/sys/dev/block/%d:%d'%(os.major(st.st_dev),os.minor(st.st_dev)))\n"
	"if not os.path.exists(p+'/stat'):\n"
	"    assert 'disk_util' not in d, d['disk_util']; sys.exit(0)\n"
	"if os.path.exists(p+'/partition'): p=os.path.dirname(p)\n"
	"u=d['disk_util'][0]\n"
	"assert u['name']==os.path.basename(p), (u['name'],p)\n"
	"keys={'name','read_ios','write_ios','read_merges','write_merges','read_ticks',"
	"'write_ticks','in_queue','util'}\n"
	"assert keys<=set(u), sorted(set(u))\n"
	/* O_DIRECT: 256 reads of 4 KiB reach the disk (merged at most) */
	"assert u['read_ios']+u['read_merges']>=1 and 0<=u['util']<=100, u\n";

static void binary_reports_disk_util(void)
{
	static const char *const engines[] = { "io_uring", "libaio", "psync" };
	const char *path = make_file("disk", 1 << 20);
	char args[1400], out[16384], json[512], script[512], cmd[1400];

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	if (!have("python3 -c ''"))
		SKIP("python3 not installed");
	CHECK(path && !write_script("disk.py", disk_check, script, sizeof(script)));
	for (size_t i = 0; i < RP_ARRAY_SIZE(engines); i++) {
		int rc;

		snprintf(json, sizeof(json), "%s/disk-%s.json", th_tmpdir(), engines[i]);
		snprintf(args, sizeof(args), "--filename=%s --direct=1 --ioengine=%s "
			 "--output-format=json > %s", path, engines[i], json);
		rc = run_rlperf(args, out, sizeof(out));
		if (rc == 1 && i < 2 && strstr(out, "unavailable"))
			continue;  /* a backend this machine lacks */
		CHECKF(rc == 0, "%s: %s", engines[i], out);
		snprintf(cmd, sizeof(cmd), "python3 %s %s %s 2>&1", script, json, path);
		CHECKF(run_cmd(cmd, out, sizeof(out)) == 0, "%s: %s", json, out);
	}
	/* the normal report's lines, fio's "Disk stats (read/write)" */
	snprintf(args, sizeof(args), "--filename=%s --direct=1", path);
	CHECK_EQ(run_rlperf(args, out, sizeof(out)), 0);
	CHECKF(!strstr(out, "Disk stats") || strstr(out, "\nDisk stats (read/write):\n  "),
	       "%s", out);
	if (access("/dev/shm", W_OK) == 0) {
		snprintf(cmd, sizeof(cmd), "dd if=/dev/zero of=/dev/shm/rlperf-du-%d bs=64k "
			 "count=4 2>/dev/null", (int)getpid());
		CHECK(system(cmd) == 0);
		snprintf(json, sizeof(json), "%s/disk-shm.json", th_tmpdir());
		snprintf(args, sizeof(args), "--filename=/dev/shm/rlperf-du-%d "
			 "--output-format=json > %s", (int)getpid(), json);
		CHECK_EQ(run_rlperf(args, out, sizeof(out)), 0);
		snprintf(cmd, sizeof(cmd), "python3 %s %s /dev/shm/rlperf-du-%d 2>&1; rm -f "
			 "/dev/shm/rlperf-du-%d", script, json, (int)getpid(), (int)getpid());
		CHECKF(run_cmd(cmd, out, sizeof(out)) == 0, "%s: %s", json, out);
	}
}

/* The slaves of a device mapper disk, aggregated as fio does: the means
 * of their counters and the busiest one's util. */
static void disk_slaves_aggregate_as_fio(void)
{
	struct rp_disk v[3];
	struct rp_disks d = { v, 3, 3, 0 };
	struct rp_disk_agg a;

	memset(v, 0, sizeof(v));
	v[0].master = -1;
	v[1].master = v[2].master = 0;
	for (int i = 0; i < 3; i++)
		v[i].msec = 1000;
	v[1].delta = (struct rp_disk_stat){ { 10, 0 }, { 2, 0 }, { 30, 0 }, 500, 40 };
	v[2].delta = (struct rp_disk_stat){ { 20, 4 }, { 4, 0 }, { 50, 6 }, 2000, 60 };
	CHECK_EQ(rp_disk_agg(&d, 0, &a), 2);
	CHECK(a.s.ios[0] == 15 && a.s.ios[1] == 2 && a.s.merges[0] == 3);
	CHECK(a.s.ticks[0] == 40 && a.s.ticks[1] == 3 && a.s.in_queue == 50);
	CHECK(a.max_util == 100.0);  /* 2000 ms busy in 1000: capped, as fio */
	CHECK(rp_disk_util(&v[1]) == 50.0);
	CHECK_EQ(rp_disk_agg(&d, 1, &a), 0);
}

/* fio's status line: running clones and files, a letter per clone (runs
 * as "R(2)"), the share done (elapsed over elapsed plus the slowest
 * clone's time left), the last interval's rates, the time left. */
static void eta_line_reads_as_fios(void)
{
	struct rp_progress p[3] = {
		{ .rw = RP_READ, .nfiles = 2, .bytes = 1 << 20, .planned = 4 << 20 },
		{ .rw = RP_READ, .nfiles = 1, .until_ns = 10000000000ull },
		{ .rw = RP_RANDREAD, .nfiles = 1, .finished = 1 },
	};
	char line[512];

	/* 2 s in: the first clone needs 6 s more at its rate, the second 8 */
	rp_eta_line(line, sizeof(line), p, 3, 2.0, 1073741824.0, 262144.0);
	CHECK_STR(line, "Jobs: 2 (f=3): [R(2),_(1)][20.0%][r=1024MiB/s][r=262k IOPS]"
		  "[eta 00m:08s]");
	p[1].until_ns = 7200ull * 1000000000ull;
	p[1].rw = RP_RANDREAD;
	rp_eta_line(line, sizeof(line), p, 3, 2.0, 0, 0);
	CHECK_STR(line, "Jobs: 2 (f=3): [R(1),r(1),_(1)][0.0%][r=0B/s][r=0 IOPS]"
		  "[eta 01h:59m:58s]");
	/* nothing read yet and no runtime: the time left is unknown */
	p[0].bytes = 0;
	rp_eta_line(line, sizeof(line), p, 1, 1.0, 0, 0);
	CHECK_STR(line, "Jobs: 1 (f=2): [R(1)][0.0%][r=0B/s][r=0 IOPS][eta --m:--s]");
}

/* The binary prints it with --eta=always (a terminal is what auto asks
 * for), to stderr when the JSON report goes to stdout, never into it. */
static void binary_prints_an_eta_line(void)
{
	static const char *const engines[] = { "io_uring", "libaio", "psync" };
	const char *path = make_file("eta", 1 << 20);
	char cmd[4096], out[65536], json[512], err[512];

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	if (!have("python3 -c ''"))
		SKIP("python3 not installed");
	CHECK(path);
	snprintf(json, sizeof(json), "%s/eta.json", th_tmpdir());
	snprintf(err, sizeof(err), "%s/eta.err", th_tmpdir());
	for (size_t i = 0; i < RP_ARRAY_SIZE(engines); i++) {
		char *text;

		snprintf(cmd, sizeof(cmd), "%s --filename=%s --ioengine=%s --runtime=1200ms "
			 "--time_based --eta=always 2>&1", rlperf_exe(), path, engines[i]);
		if (run_cmd(cmd, out, sizeof(out)) == 1 && i < 2 && strstr(out, "unavailable"))
			continue;  /* a backend this machine lacks */
		CHECKF(!strncmp(out, "\rJobs: 1 (f=1): [R(1)][", 23) &&
		       strstr(out, "][eta 00m:0") && strstr(out, "[_(1)][100.0%]") &&
		       strstr(out, "s]\nrlperf: (g=0)"), "%s: %.300s", engines[i], out);
		snprintf(cmd, sizeof(cmd), "%s --filename=%s --ioengine=%s --runtime=1200ms "
			 "--time_based --eta=always --output-format=json > %s 2> %s && python3 "
			 "-c 'import json,sys; json.load(open(sys.argv[1]))' %s", rlperf_exe(),
			 path, engines[i], json, err, json);
		CHECKF(run_cmd(cmd, out, sizeof(out)) == 0, "%s: %s", engines[i], out);
		text = th_slurp(err, NULL);
		CHECK(text);
		CHECKF(!strncmp(text, "\rJobs: 1 (f=1): [R(1)][", 23), "%s", text);
		free(text);
	}
	/* auto: stdout is a pipe here, so no line; never: none */
	snprintf(cmd, sizeof(cmd), "%s --filename=%s --runtime=1200ms --time_based 2>&1; %s "
		 "--filename=%s --runtime=1200ms --time_based --eta=never 2>&1", rlperf_exe(), path,
		 rlperf_exe(), path);
	CHECK_EQ(run_cmd(cmd, out, sizeof(out)), 0);
	CHECKF(!strstr(out, "Jobs:"), "%s", out);
}

/* latency_target on a real file, every backend: a target no read misses
 * doubles the depth to iodepth, measures one more window there and ends,
 * with fio's line and JSON keys (fio 3.33 on the same options: depth=8,
 * a 101 ms final window); a bad percentile names the option. */
static void binary_latency_target_reports_the_depth(void)
{
	static const char *const engines[] = { "io_uring", "libaio", "psync" };
	const char *path = make_file("lat_target_bin", 1 << 20);
	char cmd[4096], out[65536];

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	CHECK(path);
	for (size_t i = 0; i < RP_ARRAY_SIZE(engines); i++) {
		snprintf(cmd, sizeof(cmd), "%s --filename=%s --ioengine=%s --rw=randread "
			 "--iodepth=8 --latency_target=1s --latency_window=100ms --time_based "
			 "--runtime=20s 2>&1 && %s --filename=%s --ioengine=%s --iodepth=8 "
			 "--latency_target=1s --latency_window=100ms --time_based --runtime=20s "
			 "--output-format=json 2>&1", rlperf_exe(), path, engines[i], rlperf_exe(),
			 path, engines[i]);
		if (run_cmd(cmd, out, sizeof(out)) == 1 && i < 2 && strstr(out, "unavailable"))
			continue;  /* a backend this machine lacks */
		CHECKF(strstr(out, "     latency   : target=1000000000, window=100000, "
			      "percentile=100.00%, depth=8\n") &&
		       strstr(out, "\"latency_depth\" : 8,\n      \"latency_target\" : 1000000000,"
			      "\n      \"latency_percentile\" : 100.000000,\n      "
			      "\"latency_window\" : 100000,"), "%s: %.3000s", engines[i], out);
	}
	snprintf(cmd, sizeof(cmd), "%s --filename=%s --latency_target=1ms "
		 "--latency_percentile=101 2>&1", rlperf_exe(), path);
	CHECK_EQ(run_cmd(cmd, out, sizeof(out)), 1);
	CHECKF(strstr(out, "failed parsing latency_percentile=101: a percentage"), "%s", out);
}

/* io_submit_mode=offload on every backend: a submit thread per clone
 * queues every read, and the bytes and reads are inline's (a 1 MiB file
 * of 4 KiB blocks, twice over with time_based and a rate, and paced
 * numjobs=2 with group_reporting). */
static void binary_offload_submits_from_its_own_thread(void)
{
	static const char *const engines[] = { "io_uring", "libaio", "psync" };
	static const char check[] =
		"import json,sys\n"
		"m={}\n"
		"for f in sys.argv[1:]:\n"
		"    u=json.load(open(f))['jobs'][0]\n"
		"    m[f]=(u['read']['io_bytes'],u['read']['total_ios'],u['rlperf']['submit_threads'],\n"
		"          u['rlperf']['offloaded_reads'])\n"
		"a,b,c=sys.argv[1:]\n"
		"assert m[a]==(1<<20,256,0,0), m[a]\n"
		"assert m[b]==(1<<20,256,1,256), m[b]\n"
		"assert m[c][2]==2 and m[c][3]==m[c][1] and m[c][0]==m[c][1]*4096 and m[c][1]>=8, m[c]\n";
	const char *path = make_file("offload", 1 << 20);
	char cmd[8192], out[16384], script[512], j[3][512];
	int rc;

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	if (!have("python3 -c ''"))
		SKIP("python3 not installed");
	CHECK(path);
	CHECK(!write_script("offload.py", check, script, sizeof(script)));
	for (int k = 0; k < 3; k++)
		snprintf(j[k], sizeof(j[k]), "%s/offload%d.json", th_tmpdir(), k);
	for (size_t i = 0; i < RP_ARRAY_SIZE(engines); i++) {
		snprintf(cmd, sizeof(cmd), "%s --filename=%s --ioengine=%s --iodepth=8 "
			 "--output-format=json --output=%s 2>&1 && %s --filename=%s --ioengine=%s "
			 "--iodepth=8 --io_submit_mode=offload --output-format=json --output=%s 2>&1 "
			 "&& %s --filename=%s --ioengine=%s --iodepth=4 --io_submit_mode=offload "
			 "--rate_iops=40 --numjobs=2 --group_reporting --runtime=500ms --time_based "
			 "--output-format=json --output=%s 2>&1 && python3 %s %s %s %s 2>&1",
			 rlperf_exe(), path, engines[i], j[0], rlperf_exe(), path, engines[i], j[1],
			 rlperf_exe(), path, engines[i], j[2], script, j[0], j[1], j[2]);
		rc = run_cmd(cmd, out, sizeof(out));
		if (rc == 1 && i < 2 && strstr(out, "unavailable"))
			continue;  /* a backend this machine lacks */
		CHECKF(rc == 0, "%s: %s", engines[i], out);
	}
	snprintf(cmd, sizeof(cmd), "%s --filename=%s --io_submit_mode=offload --size=64k 2>&1",
		 rlperf_exe(), path);
	CHECK_EQ(run_cmd(cmd, out, sizeof(out)), 0);
	CHECKF(strstr(out, "  offload      : 1 submit thread queued 16 reads\n"), "%s", out);
}

/* fio's prios: two, idle and real-time, their reads adding up; and the
 * latency logs' priority column (argv: json, clat log with log_prio=1,
 * clat log without it, reads asked for high) */
static const char prio_check[] =
	"import json,sys\n"
	"rd=json.load(open(sys.argv[1]))['jobs'][0]['read']; p=rd['prios']\n"
	"assert [(x['prioclass'],x['prio']) for x in p]==[(3,0),(1,0)], p\n"
	"n=[x['clat_ns']['N'] for x in p]\n"
	"assert sum(n)==rd['total_ios']==rd['clat_ns']['N']==1024, n\n"
	"v=[l.split(', ')[4].strip() for l in open(sys.argv[2])]\n"
	"assert v.count('0x2000')==n[1] and v.count('0x6000')==n[0], v\n"
	"w=[l.split(', ')[4].strip() for l in open(sys.argv[3])]\n"
	"assert w.count('1')==int(sys.argv[4]) and w.count('0')==1024-w.count('1'), w\n";

/* prioclass, prio and cmdprio_percentage on a real run of io_uring and
 * libaio, reported as fio 3.33 reports them (normal, JSON, logs); psync
 * runs at the job's priority, one latency line as fio's. */
static void binary_reports_priorities_as_fio(void)
{
	static const char *const engines[] = { "io_uring", "libaio" };
	const char *path = make_file("prio", 4 << 20);
	const char *d = th_tmpdir();
	char cmd[16384], out[16384], script[512], exe[PATH_MAX];
	unsigned long long seed = (unsigned long long)th_seed();

	if (!rlperf_exe() || !realpath(rlperf_exe(), exe))
		SKIP("build/rlperf not built");
	if (!have("python3 -c ''"))
		SKIP("python3 not installed");
	CHECK(path && !write_script("prio.py", prio_check, script, sizeof(script)));
	for (size_t i = 0; i < RP_ARRAY_SIZE(engines); i++) {
		char *high, *n1;
		int rc;

		/* the second run's seed and reads are the first's: the same
		 * reads go high, so its 1s count the first run's 0x2000 */
		snprintf(cmd, sizeof(cmd), "cd %s && %s --name=pr --filename=%s --ioengine=%s "
			 "--rw=randread --iodepth=8 --prioclass=3 --cmdprio_percentage=30 "
			 "--cmdprio_class=1 --randseed=%llu --write_lat_log=pa --log_prio=1 "
			 "--output-format=json --output=prio.json 2>&1 && %s --name=pr "
			 "--filename=%s --ioengine=%s --rw=randread --iodepth=8 --prioclass=3 "
			 "--cmdprio_percentage=30 --randseed=%llu --write_lat_log=pb 2>&1",
			 d, exe, path, engines[i], seed, exe, path, engines[i], seed);
		rc = run_cmd(cmd, out, sizeof(out));
		if (rc == 1 && strstr(out, "unavailable"))
			continue;  /* a backend this machine lacks */
		CHECKF(rc == 0, "%s: %s", engines[i], out);
		high = strstr(out, "    clat prio 1/0 (");
		n1 = high ? strstr(high + 1, "    clat prio 1/0 (") : NULL;
		CHECKF(strstr(out, "    clat prio 3/0 (") && high &&
		       strstr(out, "    clat prio 3/0 (") < high && n1 &&
		       strstr(n1, "% of IOs) percentiles ("), "%s: %s", engines[i], out);
		snprintf(cmd, sizeof(cmd), "cd %s && python3 %s prio.json pa_clat.1.log "
			 "pb_clat.1.log $(grep -c 0x2000 pa_clat.1.log) 2>&1", d, script);
		CHECKF(run_cmd(cmd, out, sizeof(out)) == 0, "%s: %s", engines[i], out);
	}
	snprintf(cmd, sizeof(cmd), "%s --filename=%s --ioengine=psync --prioclass=3 --prio=7 "
		 "--size=64k 2>&1", rlperf_exe(), path);
	CHECKF(run_cmd(cmd, out, sizeof(out)) == 0 && strstr(out, "    clat (") &&
	       !strstr(out, "clat prio"), "%s", out);
}

/* Splits a stream of JSON reports and checks each is fio's shape and the
 * run so far: io_bytes never decreases (argv: file, reports at least). */
static const char status_check[] =
	"import json,sys\n"
	"s=open(sys.argv[1]).read(); d=json.JSONDecoder(); i=0; reps=[]\n"
	"while s[i:].strip():\n"
	"    while s[i].isspace(): i+=1\n"
	"    o,i=d.raw_decode(s,i); reps.append(o)\n"
	"assert len(reps)>=int(sys.argv[2]), len(reps)\n"
	"b=[r['jobs'][0]['read']['io_bytes'] for r in reps]\n"
	"assert b==sorted(b) and b[-1]>0, b\n"
	"assert all(r['fio version'].startswith('rlperf-') for r in reps)\n";

/* fio's --status-interval: the whole report so far every interval (fio
 * 3.33 prints 3 reports in normal output for a 2 s run at 1 s, 4 JSON
 * objects for 3 s), on every backend; too small or a job option: refused. */
static void binary_prints_status_interval_reports(void)
{
	static const char *const engines[] = { "io_uring", "libaio", "psync" };
	const char *path = make_file("status", 1 << 20), *job;
	char cmd[4096], out[65536], json[512], script[512];

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	if (!have("python3 -c ''"))
		SKIP("python3 not installed");
	CHECK(path);
	CHECK(!write_script("status.py", status_check, script, sizeof(script)));
	snprintf(json, sizeof(json), "%s/status.json", th_tmpdir());
	for (size_t i = 0; i < RP_ARRAY_SIZE(engines); i++) {
		const char *p = out;
		int reports = 0;

		snprintf(cmd, sizeof(cmd), "%s --filename=%s --ioengine=%s --runtime=2500ms "
			 "--time_based --rate=8m --status-interval=1 2>&1", rlperf_exe(), path,
			 engines[i]);
		if (run_cmd(cmd, out, sizeof(out)) == 1 && i < 2 && strstr(out, "unavailable"))
			continue;  /* a backend this machine lacks */
		while ((p = strstr(p, "Run status group 0")))
			reports++, p++;
		CHECKF(reports >= 3, "%s: %d reports: %.400s", engines[i], reports, out);
		snprintf(cmd, sizeof(cmd), "%s --filename=%s --ioengine=%s --runtime=2500ms "
			 "--time_based --rate=8m --status-interval=1 --output-format=json > %s "
			 "&& python3 %s %s 3 2>&1", rlperf_exe(), path, engines[i], json, script,
			 json);
		CHECKF(run_cmd(cmd, out, sizeof(out)) == 0, "%s: %s", engines[i], out);
	}
	snprintf(cmd, sizeof(cmd), "%s --filename=%s --status-interval=0 2>&1", rlperf_exe(),
		 path);
	CHECK_EQ(run_cmd(cmd, out, sizeof(out)), 1);
	CHECKF(strstr(out, "status-interval=0: status interval too small"), "%s", out);
	snprintf(cmd, sizeof(cmd), "%s --filename=%s --status-interval=soon 2>&1",
		 rlperf_exe(), path);
	CHECK_EQ(run_cmd(cmd, out, sizeof(out)), 1);
	CHECKF(strstr(out, "failed parsing status-interval=soon"), "%s", out);
	job = write_text("status.fio", "[j]\nstatus-interval=1\n");
	CHECK(job);
	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", rlperf_exe(), job);
	CHECK_EQ(run_cmd(cmd, out, sizeof(out)), 1);
	CHECKF(strstr(out, "status-interval is a command-line option"), "%s", out);
}

/* Checks the logs of a run (argv: dir, prefix, reads, with offsets, file
 * size): fio's file names and line format, a line per read. */
static const char log_check[] =
	"import os,re,sys\n"
	"d,pre,n,off,size=sys.argv[1],sys.argv[2],int(sys.argv[3]),sys.argv[4]=='1',int(sys.argv[5])\n"
	"pat=re.compile(r'^\\d+, \\d+, 0, 4096, (\\d+, )?0$')\n"
	"for k in ('lat','clat','slat','bw','iops'):\n"
	"    lines=open(os.path.join(d,'%s_%s.1.log'%(pre,k))).read().splitlines()\n"
	"    assert len(lines)==n, (k,len(lines))\n"
	"    for l in lines: assert pat.match(l) and (len(l.split(','))==6)==off, (k,l)\n"
	"    v=[int(l.split(',')[1]) for l in lines]\n"
	"    assert k!='clat' or min(v)>0, v\n"
	"    assert k!='iops' or set(v)=={1}, v\n"
	"    if off: assert sorted(int(l.split(',')[4]) for l in lines)==list(range(0,size,4096))\n";

/* write_lat_log, write_bw_log, write_iops_log as fio writes them, on
 * every backend; a bare one (job file) names the logs after the job;
 * log_avg_msec writes window lines with bs and offset 0. */
static void binary_writes_fio_logs(void)
{
	static const char *const engines[] = { "io_uring", "libaio", "psync" };
	const char *path = make_file("logged", 64 << 10), *job;
	char cmd[10240], out[8192], script[512], text[1024], exe[PATH_MAX], *avg;

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	if (!have("python3 -c ''"))
		SKIP("python3 not installed");
	CHECK(path && !write_script("logs.py", log_check, script, sizeof(script)));
	CHECK(realpath(rlperf_exe(), exe));
	for (size_t i = 0; i < RP_ARRAY_SIZE(engines); i++) {
		for (int off = 0; off < 2; off++) {
			int rc;

			snprintf(cmd, sizeof(cmd), "%s --filename=%s --ioengine=%s --rw=randread "
				 "--write_lat_log=%s/r --write_bw_log=%s/r --write_iops_log=%s/r "
				 "--log_offset=%d --output=/dev/null 2>&1", rlperf_exe(), path,
				 engines[i], th_tmpdir(), th_tmpdir(), th_tmpdir(), off);
			rc = run_cmd(cmd, out, sizeof(out));
			if (rc == 1 && i < 2 && strstr(out, "unavailable"))
				break;  /* a backend this machine lacks */
			CHECKF(rc == 0, "%s: %s", engines[i], out);
			snprintf(cmd, sizeof(cmd), "python3 %s %s r 16 %d 65536 2>&1", script,
				 th_tmpdir(), off);
			CHECKF(run_cmd(cmd, out, sizeof(out)) == 0, "%s: %s", engines[i], out);
		}
	}
	/* bare in a job file: the job's name; windows of 1 s over 2.5 s */
	snprintf(text, sizeof(text), "[lg]\nfilename=%s\nwrite_bw_log\nwrite_lat_log\n"
		 "write_iops_log\nlog_avg_msec=1000\nruntime=2500ms\ntime_based\n", path);
	job = write_text("logs.fio", text);
	CHECK(job);
	snprintf(cmd, sizeof(cmd), "cd %s && %s --output=/dev/null %s 2>&1 && cat lg_bw.1.log",
		 th_tmpdir(), exe, job);
	CHECKF(run_cmd(cmd, out, sizeof(out)) == 0, "%s", out);
	avg = out;
	for (int k = 0; k < 2; k++) {
		CHECKF(avg && strstr(avg, ", 0, 0, 0\n"), "%s", out);
		avg = strchr(avg, '\n') + 1;
	}
	snprintf(cmd, sizeof(cmd), "cd %s && ls lg_lat.1.log lg_clat.1.log lg_slat.1.log "
		 "lg_iops.1.log 2>&1", th_tmpdir());
	CHECKF(run_cmd(cmd, out, sizeof(out)) == 0, "%s", out);
	/* a log that cannot be opened fails the run, naming it */
	snprintf(cmd, sizeof(cmd), "%s --filename=%s --write_bw_log=/nonexistent/x 2>&1",
		 rlperf_exe(), path);
	CHECK_EQ(run_cmd(cmd, out, sizeof(out)), 1);
	CHECKF(strstr(out, "/nonexistent/x_bw.1.log: No such file or directory"), "%s", out);
}

/* Reads from an iops log (argv: log, process): about 200 in 1 s, on
 * linear's schedule or with poisson's exponential gaps. */
static const char pace_check[] =
	"import sys,statistics as st\n"
	"t=[int(l.split(',')[0]) for l in open(sys.argv[1])]\n"
	"assert 150<=len(t)<=215, len(t)\n"
	"g=[b-a for a,b in zip(t,t[1:])]; m=st.mean(g); cv=st.pstdev(g)/m\n"
	"assert 4<=m<=6.7, m\n"
	/* linear: read k never before 5k ms (load only makes reads late);
	 * poisson: gaps as spread as their mean (cached reads: a load heavy
	 * enough to spread linear gaps so cannot make this fail) */
	"assert cv>0.6 if sys.argv[2]=='poisson' else all(x>=5*k for k,x in enumerate(t)), "
	"(sys.argv[2],cv,t[:20])\n";

/* fio's rate_iops (linear and poisson), rate, thinktime, startdelay and
 * ratemin, end to end on every backend. */
static void binary_paces_reads_as_fio(void)
{
	static const char *const engines[] = { "io_uring", "libaio", "psync" };
	static const char *const procs[] = { "linear", "poisson" };
	const char *path = make_file("paced", 1 << 20);
	char cmd[4096], out[16384], script[512];
	uint64_t t0;

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	if (!have("python3 -c ''"))
		SKIP("python3 not installed");
	CHECK(path && !write_script("pace.py", pace_check, script, sizeof(script)));
	for (size_t i = 0; i < RP_ARRAY_SIZE(engines); i++) {
		for (size_t k = 0; k < 2; k++) {
			int rc;

			/* iodepth=1: the engine submits a batch once it holds
			 * iodepth reads, so deeper queues go in bursts; and
			 * cached reads, or a slow disk read makes the next ones
			 * catch up at once (fio's pacing too) */
			snprintf(cmd, sizeof(cmd), "%s --filename=%s --ioengine=%s --iodepth=1 "
				 "--rw=randread --rate_iops=200 --rate_process=%s --runtime=1 "
				 "--invalidate=0 "
				 "--time_based --write_iops_log=%s/p --output=/dev/null 2>&1",
				 rlperf_exe(), path, engines[i], procs[k], th_tmpdir());
			rc = run_cmd(cmd, out, sizeof(out));
			if (rc == 1 && i < 2 && strstr(out, "unavailable"))
				break;  /* a backend this machine lacks */
			CHECKF(rc == 0, "%s: %s", engines[i], out);
			snprintf(cmd, sizeof(cmd), "python3 %s %s/p_iops.1.log %s 2>&1", script,
				 th_tmpdir(), procs[k]);
			CHECKF(run_cmd(cmd, out, sizeof(out)) == 0, "%s %s: %s", engines[i],
			       procs[k], out);
		}
	}
	/* rate: 64 KiB/s reads 16 blocks of 4 KiB in no less than 0.23 s
	 * (the first goes at once); thinktime 20 ms between 8 reads: 0.14 s;
	 * startdelay 300ms; each a lower bound */
	t0 = perf_now_ns();
	snprintf(cmd, sizeof(cmd), "%s --filename=%s --size=64k --rate=256k --output=/dev/null "
		 "&& %s --filename=%s --size=32k --thinktime=20000 --output=/dev/null && %s "
		 "--filename=%s --size=4k --startdelay=300ms --output=/dev/null 2>&1",
		 rlperf_exe(), path, rlperf_exe(), path, rlperf_exe(), path);
	CHECKF(run_cmd(cmd, out, sizeof(out)) == 0, "%s", out);
	CHECKF(perf_now_ns() - t0 >= 650000000ull, "%llu ns", (unsigned long long)(perf_now_ns() - t0));
	/* ratemin: 100 KiB/s capped, 1 MiB/s asked: the job fails */
	snprintf(cmd, sizeof(cmd), "%s --filename=%s --rate=100k --ratemin=1m --runtime=3 "
		 "--time_based --output=/dev/null 2>&1", rlperf_exe(), path);
	CHECK_EQ(run_cmd(cmd, out, sizeof(out)), 1);
	CHECKF(strstr(out, "min rate 1048576 B/s not met, got ") && strstr(out, "(ratemin)"),
	       "%s", out);
}

/* The read-only job files of fio 3.33's examples/ folder, all 11 of
 * them, their option lines as fio ships them (comments left out). */
static const struct {
	const char *name, *text;
} fio_examples[] = {
	{ "cmdprio-percentage.fio",
	  "[global]\n"
	  "filename=/dev/sda\n"
	  "direct=1\n"
	  "write_lat_log=prio-run.log\n"
	  "log_prio=1\n"
	  "[randread]\n"
	  "rw=randread\n"
	  "bs=128k\n"
	  "ioengine=libaio\n"
	  "iodepth=8\n"
	  "prioclass=3\n"
	  "cmdprio_percentage=20\n"
	  "cmdprio_class=1\n"
	},
	{ "butterfly.fio",
	  "[global]\n"
	  "filename=/tmp/testfile\n"
	  "bs=4k\n"
	  "direct=1\n"
	  "[forward]\n"
	  "rw=read\n"
	  "flow=2\n"
	  "[backward]\n"
	  "rw=read:-8k\n"
	  "flow=2\n"
	},
	{ "1mbs_clients.fio",
	  "[global]\n"
	  "size=32m\n"
	  "rw=read\n"
	  "directory=tmp\n"
	  "rate=1250\n"
	  "ratemin=1024\n"
	  "[file1]\n"
	  "startdelay=0\n"
	  "[file2]\n"
	  "startdelay=4\n"
	  "[file3]\n"
	  "startdelay=8\n"
	  "[file4]\n"
	  "startdelay=12\n"
	  "[file5]\n"
	  "startdelay=16\n"
	  "[file6]\n"
	  "startdelay=20\n"
	  "[file7]\n"
	  "startdelay=24\n"
	  "[file8]\n"
	  "startdelay=28\n"
	  "[file9]\n"
	  "startdelay=32\n"
	  "[file10]\n"
	  "startdelay=36\n"
	  "[file11]\n"
	  "startdelay=40\n"
	  "[file12]\n"
	  "startdelay=44\n"
	  "[file13]\n"
	  "startdelay=48\n"
	  "[file14]\n"
	  "startdelay=52\n"
	  "[file15]\n"
	  "startdelay=56\n"
	  "[file16]\n"
	  "startdelay=60\n"
	  "[file17]\n"
	  "startdelay=64\n"
	  "[file18]\n"
	  "startdelay=68\n"
	  "[file19]\n"
	  "startdelay=72\n"
	  "[file20]\n"
	  "startdelay=76\n"
	  "[file21]\n"
	  "startdelay=80\n"
	  "[file22]\n"
	  "startdelay=84\n"
	  "[file23]\n"
	  "startdelay=88\n"
	  "[file24]\n"
	  "startdelay=92\n"
	  "[file25]\n"
	  "startdelay=96\n"
	  "[file26]\n"
	  "startdelay=100\n"
	  "[file27]\n"
	  "startdelay=104\n"
	  "[file28]\n"
	  "startdelay=108\n"
	  "[file29]\n"
	  "startdelay=112\n"
	  "[file30]\n"
	  "startdelay=116\n"
	  "[file31]\n"
	  "startdelay=120\n"
	  "[file32]\n"
	  "startdelay=124\n"
	},
	{ "aio-read.fio",
	  "[global]\n"
	  "ioengine=libaio\n"
	  "buffered=0\n"
	  "rw=randread\n"
	  "bs=128k\n"
	  "size=512m\n"
	  "directory=/data1\n"
	  "[file1]\n"
	  "iodepth=4\n"
	  "[file2]\n"
	  "iodepth=32\n"
	  "[file3]\n"
	  "iodepth=8\n"
	  "[file4]\n"
	  "iodepth=16\n"
	},
	{ "backwards-read.fio",
	  "[backwards-read]\n"
	  "bs=4k\n"
	  "rw=read:-8k\n"
	  "filename=128m\n"
	  "size=128m\n"
	},
	{ "fio-rand-read.fio",
	  "[global]\n"
	  "name=fio-rand-read\n"
	  "filename=fio-rand-read\n"
	  "rw=randread\n"
	  "bs=4K\n"
	  "direct=0\n"
	  "numjobs=1\n"
	  "time_based\n"
	  "runtime=900\n"
	  "[file1]\n"
	  "size=10G\n"
	  "ioengine=libaio\n"
	  "iodepth=16\n"
	},
	{ "fio-seq-read.fio",
	  "[global]\n"
	  "name=fio-seq-reads\n"
	  "filename=fio-seq-reads\n"
	  "rw=read\n"
	  "bs=256K\n"
	  "direct=1\n"
	  "numjobs=1\n"
	  "time_based\n"
	  "runtime=900\n"
	  "[file1]\n"
	  "size=10G\n"
	  "ioengine=libaio\n"
	  "iodepth=16\n"
	},
	{ "fixed-rate-submission.fio",
	  "[fixed-rate-submit]\n"
	  "size=128m\n"
	  "rw=read\n"
	  "ioengine=libaio\n"
	  "iodepth=32\n"
	  "direct=1\n"
	  "io_submit_mode=offload\n"
	  "rate_iops=1000\n"
	},
	{ "poisson-rate-submission.fio",
	  "[poisson-rate-submit]\n"
	  "size=128m\n"
	  "rw=randread\n"
	  "ioengine=libaio\n"
	  "iodepth=32\n"
	  "direct=1\n"
	  "io_submit_mode=offload\n"
	  "rate_iops=50\n"
	  "rate_process=poisson\n"
	},
	{ "latency-profile.fio",
	  "[global]\n"
	  "bs=4k\n"
	  "rw=randread\n"
	  "random_generator=lfsr\n"
	  "direct=1\n"
	  "ioengine=libaio\n"
	  "iodepth=128\n"
	  "latency_target=500000\n"
	  "latency_window=5000000\n"
	  "latency_percentile=99.9\n"
	  "[device]\n"
	  "filename=/dev/sda\n"
	},
	{ "rand-zones.fio",
	  "[zones]\n"
	  "size=2g\n"
	  "direct=1\n"
	  "bs=4k\n"
	  "rw=randread\n"
	  "norandommap\n"
	  "random_distribution=zoned:50/5:30/15:20/\n"
	},
};

/* One line of an example, made small and local: sizes 512k, runtime 1 s,
 * start delays in ms, rates a thousand times higher, files in the
 * current directory (made by the caller, named in *file). */
static void example_line(const char *in, char *out, size_t len, char *file, size_t flen)
{
	const char *eq = strchr(in, '=');
	size_t k = eq ? (size_t)(eq - in) : 0;

	file[0] = '\0';
	if (k == 4 && !strncmp(in, "size", 4))
		snprintf(out, len, "size=512k");
	else if (k == 7 && !strncmp(in, "runtime", 7))
		snprintf(out, len, "runtime=1");
	else if (k == 10 && !strncmp(in, "startdelay", 10))
		snprintf(out, len, "%sms", in);
	else if (k == 4 && !strncmp(in, "rate", 4))
		snprintf(out, len, "%s000", in);
	else if (k == 9 && !strncmp(in, "directory", 9))
		snprintf(out, len, "directory=.");
	else if (k == 8 && !strncmp(in, "filename", 8)) {
		const char *base = strrchr(eq, '/') ? strrchr(eq, '/') + 1 : eq + 1;

		snprintf(out, len, "filename=%s", base);
		snprintf(file, flen, "%s", base);
	} else {
		snprintf(out, len, "%s", in);
		if (in[0] == '[' && strncmp(in, "[global", 7))
			snprintf(file, flen, "%.*s.0.0", (int)strcspn(in + 1, "]"), in + 1);
	}
}

/* Every read-only example above runs (made small, files in a temporary
 * folder), one JSON job per section. */
static void binary_runs_fios_read_examples(void)
{
	char dir[600], exe[PATH_MAX], *text = malloc(16384), cmd[8192], out[16384];

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	CHECK(text && realpath(rlperf_exe(), exe));
	snprintf(dir, sizeof(dir), "%s/examples", th_tmpdir());
	CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST);
	for (size_t i = 0; i < RP_ARRAY_SIZE(fio_examples); i++) {
		const char *l = fio_examples[i].text;
		size_t n = 0, jobs = 0;
		FILE *f;
		char *json;
		int rc;

		text[0] = '\0';
		while (*l) {
			char in[256], line[300], file[256], path[900];
			size_t len = strcspn(l, "\n");

			snprintf(in, sizeof(in), "%.*s", (int)len, l);
			l += len + (l[len] == '\n');
			example_line(in, line, sizeof(line), file, sizeof(file));
			n += (size_t)snprintf(text + n, 16384 - n, "%s\n", line);
			jobs += in[0] == '[' && strncmp(in, "[global", 7);
			snprintf(path, sizeof(path), "examples/%s", file);
			CHECK(!file[0] || make_file(path, 1 << 20));
		}
		snprintf(cmd, sizeof(cmd), "%s/%s", dir, fio_examples[i].name);
		f = fopen(cmd, "w");
		CHECK(f);
		fputs(text, f);
		fclose(f);
		snprintf(cmd, sizeof(cmd), "cd %s && %s --output-format=json --output=%s.json %s "
			 "2>&1", dir, exe, fio_examples[i].name, fio_examples[i].name);
		rc = run_cmd(cmd, out, sizeof(out));
		CHECKF(rc == 0, "%s: exit %d: %s", fio_examples[i].name, rc, out);
		snprintf(cmd, sizeof(cmd), "%s/%s.json", dir, fio_examples[i].name);
		json = th_slurp(cmd, NULL);
		CHECK(json);
		for (const char *p = json; (p = strstr(p, "\"jobname\"")); p++)
			jobs--;
		free(json);
		CHECKF(jobs == 0, "%s: %zd jobs more than in the report", fio_examples[i].name,
		       (ssize_t)jobs);
	}
	free(text);
}

/* fio's flow: two jobs of one flow_id read 3:1 by their weights (every
 * backend); a job that ends gives its weight back, so the other one
 * finishes (fio's would wait for it forever). */
static void binary_flow_shares_reads_by_weight(void)
{
	static const char *const engines[] = { "io_uring", "libaio", "psync" };
	const char *path = make_file("flow", 1 << 20);
	char cmd[4096], out[16384], script[512];
	static const char check[] =
		"import json,sys\n"
		"j=json.load(open(sys.argv[1]))['jobs']\n"
		"r=j[0]['read']['total_ios']/max(1,j[1]['read']['total_ios'])\n"
		/* about 3; clones start and end apart under load (the one
		 * left reads alone at the end), without flow about 1 */
		"assert 1.5<r<5, r\n";

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	if (!have("python3 -c ''"))
		SKIP("python3 not installed");
	CHECK(path && !write_script("flow.py", check, script, sizeof(script)));
	for (size_t i = 0; i < RP_ARRAY_SIZE(engines); i++) {
		int rc;

		snprintf(cmd, sizeof(cmd), "%s --filename=%s --ioengine=%s --invalidate=0 "
			 "--runtime=1 --time_based --output-format=json --output=%s/flow.json "
			 "--name=a --flow=3 --name=b --flow=1 --rw=randread 2>&1", rlperf_exe(),
			 path, engines[i], th_tmpdir());
		rc = run_cmd(cmd, out, sizeof(out));
		if (rc == 1 && i < 2 && strstr(out, "unavailable"))
			continue;  /* a backend this machine lacks */
		CHECKF(rc == 0, "%s: %s", engines[i], out);
		snprintf(cmd, sizeof(cmd), "python3 %s %s/flow.json 2>&1", script, th_tmpdir());
		CHECKF(run_cmd(cmd, out, sizeof(out)) == 0, "%s: %s", engines[i], out);
	}
	snprintf(cmd, sizeof(cmd), "timeout %d %s --filename=%s --output=/dev/null --name=a "
		 "--flow=1 --size=64k --name=b --flow=1 2>&1", 20 * TH_SLOW, rlperf_exe(), path);
	CHECKF(run_cmd(cmd, out, sizeof(out)) == 0, "%s", out);
}

static const char ckpt_check[] =
	"import json,struct,sys\n"
	"c=json.load(open(sys.argv[1]))['checkpoint']\n"
	"f=open(sys.argv[2],'rb'); n=struct.unpack('<Q',f.read(8))[0]\n"
	"h=json.loads(f.read(n)); h.pop('__metadata__',None)\n"
	"data=max(v['data_offsets'][1] for v in h.values())\n"
	"assert c['files']==1 and c['tensors']==len(h), c\n"
	"assert c['devices']==int(sys.argv[3]) and c['processes']==1, c\n"
	"assert c['bytes_read']>=c['bytes_needed']>0 and c['requests']>0, c\n"
	"assert c['bytes_zero_copy']>=0 and 'bytes_direct' not in c, c\n"
	"assert sys.argv[3]!='1' or c['bytes_needed']==data, (c, data)\n"
	"assert c['read_s']>0 and c['total_s']>=c['read_s'] and c['gbps']>0, c\n";

/* Checkpoint mode through the public API, whole and sharded. */
static void binary_loads_a_checkpoint(void)
{
	const char *b = getenv("RL_BUILD");
	char out[4096], ck[512], json[512], script[512], args[1200], cmd[1600];
	const char *spec = "tools/sample-sharding.json";

	snprintf(cmd, sizeof(cmd), "%s/mkckpt", b ? b : "build");
	if (access(cmd, X_OK) || !rlperf_exe())
		SKIP("build/mkckpt or build/rlperf not built");
	if (!have("python3 -c ''"))
		SKIP("python3 not installed");
	snprintf(ck, sizeof(ck), "%s/ck.safetensors", th_tmpdir());
	snprintf(cmd, sizeof(cmd), "%s/mkckpt %s --size 6M --layers 2 >/dev/null 2>&1",
		 b ? b : "build", ck);
	CHECKF(system(cmd) == 0, "%s failed", cmd);
	CHECK(!write_script("ck.py", ckpt_check, script, sizeof(script)));
	snprintf(json, sizeof(json), "%s/ck.json", th_tmpdir());

	snprintf(args, sizeof(args), "--checkpoint=%s --iodepth=4 --bs=1M "
		 "--output-format=json > %s", ck, json);
	CHECK_EQ(run_rlperf(args, out, sizeof(out)), 0);
	snprintf(cmd, sizeof(cmd), "python3 %s %s %s 1", script, json, ck);
	CHECKF(system(cmd) == 0, "%s: bad checkpoint JSON", json);

	if (!access(spec, R_OK)) {
		snprintf(args, sizeof(args), "--checkpoint %s --sharding %s --process 0 "
			 "--ioengine=libaio --output-format=json > %s", ck, spec, json);
		CHECK_EQ(run_rlperf(args, out, sizeof(out)), 0);
		snprintf(cmd, sizeof(cmd), "python3 %s %s %s 2", script, json, ck);
		CHECKF(system(cmd) == 0, "%s: bad sharded checkpoint JSON", json);
	}

	/* the normal report names every phase */
	snprintf(args, sizeof(args), "--checkpoint=%s", ck);
	CHECK_EQ(run_rlperf(args, out, sizeof(out)), 0);
	CHECK(strstr(out, "plan       :") && strstr(out, "read       :") &&
	      strstr(out, "scatter    :") && strstr(out, "queue      : depth") &&
	      strstr(out, "speed      :"));

	/* errors: one line, exit 1 */
	CHECK_EQ(run_rlperf("--checkpoint=/nonexistent.safetensors", out, sizeof(out)), 1);
	CHECK(!strncmp(out, "rlperf: ", 8) && strchr(out, '\n') == out + strlen(out) - 1);
	snprintf(args, sizeof(args), "--checkpoint=%s --sharding=/nonexistent.json", ck);
	CHECK_EQ(run_rlperf(args, out, sizeof(out)), 1);
	CHECK(strstr(out, "/nonexistent.json"));
	snprintf(args, sizeof(args), "--checkpoint=%s --iodepth=100000", ck);
	CHECK_EQ(run_rlperf(args, out, sizeof(out)), 1);
}

int main(void)
{
	RUN(sizes_read_as_fio_reads_them);
	RUN(sizes_match_the_fio_binary);
	RUN(times_default_to_seconds);
	RUN(options_take_both_syntaxes);
	RUN(polling_options_parse);
	RUN(steadystate_parses_fios_criteria);
	RUN(steadystate_judges_the_window);
	RUN(setup_applies_hipri_where_reads_can_poll);
	RUN(flags_take_nothing_or_0_1);
	RUN(fio_command_line_parses);
	RUN(bad_options_name_the_option);
	RUN(fio_read_options_parse);
	RUN(help_lists_exactly_the_options);
	RUN(man_page_lists_every_option);
	RUN(global_options_apply_as_fio_applies_them);
	RUN(job_files_parse_as_fio_parses_them);
	RUN(job_file_errors_name_file_and_line);
	RUN(regions_follow_fio);
	RUN(files_split_escape_and_default_as_fio);
	RUN(histogram_matches_fio_buckets);
	RUN(percentiles_follow_fio);
	RUN(stddev_is_exact);
	RUN(latency_units_follow_fio);
	RUN(latency_bins_follow_fio);
	RUN(sequential_offsets_cover_the_region);
	RUN(random_offsets_are_a_permutation);
	RUN(norandommap_offsets_repeat_blocks);
	RUN(seq_postfix_offsets_follow_fio);
	RUN(random_distributions_follow_fio);
	RUN(runner_searches_the_latency_target_depth);
	RUN(runner_reads_every_block_once_per_clone);
	RUN(runner_gives_cmdprio_its_share);
	RUN(engine_passes_each_reads_ioprio);
	RUN(binary_reports_priorities_as_fio);
	RUN(runner_round_robins_over_files);
	RUN(runner_loops_on_time_and_skips_ramp);
	RUN(gtod_reduce_drops_latencies);
	RUN(runner_reports_engine_errors);
	RUN(units_follow_group_reporting);
	RUN(stonewall_waits_and_starts_groups);
	RUN(json_has_fios_shape);
	RUN(json_plus_adds_latency_bins);
	RUN(terse_has_fios_fields);
	RUN(normal_output_reads_like_fio);
	RUN(block_sizes_print_as_fio);
	RUN(binary_rejects_bad_options);
	RUN(binary_reads_a_file);
	RUN(binary_reports_stonewall_groups);
	RUN(binary_json_matches_fios_for_a_job_file);
	RUN(binary_terse_matches_fios);
	RUN(binary_runs_hipri_on_any_disk);
	RUN(binary_steadystate_matches_fios);
	RUN(binary_sqthread_poll_starts_the_kernel_thread);
	RUN(binary_writes_output_to_a_file);
	RUN(binary_invalidate_drops_the_region_cache);
	RUN(binary_reads_several_files);
	RUN(binary_refuses_a_fifo_at_once);
	RUN(binary_runs_the_deepest_iodepth);
	RUN(disk_slaves_aggregate_as_fio);
	RUN(binary_reports_disk_util);
	RUN(binary_writes_fio_logs);
	RUN(binary_paces_reads_as_fio);
	RUN(binary_flow_shares_reads_by_weight);
	RUN(binary_runs_fios_read_examples);
	RUN(eta_line_reads_as_fios);
	RUN(binary_prints_an_eta_line);
	RUN(binary_prints_status_interval_reports);
	RUN(binary_offload_submits_from_its_own_thread);
	RUN(binary_latency_target_reports_the_depth);
	RUN(binary_loads_a_checkpoint);
	return th_done();
}
