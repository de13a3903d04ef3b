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
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* rlperf's parts other than main(): compiled in, tested directly */
#include "../perf/rlperf_num.c"
#include "../perf/rlperf_fionames.c"
#include "../perf/rlperf_ini.c"
#include "../perf/rlperf_opts.c"
#include "../perf/rlperf_hist.c"
#include "../perf/rlperf_gen.c"
#include "../perf/rlperf_setup.c"
#include "../perf/rlperf_run.c"
#include "../perf/rlperf_unit.c"
#include "../perf/rlperf_out.c"
#include "../perf/rlperf_json.c"
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

	for (size_t i = 0; i < RL_ARRAY_SIZE(fio_sizes); i++) {
		CHECKF(rp_parse_size(fio_sizes[i].s, fio_sizes[i].kb_base, &v, NULL) == 0,
		       "size %s refused", fio_sizes[i].s);
		CHECKF(v == fio_sizes[i].v, "size %s (kb_base %u) = %llu, fio reads %llu",
		       fio_sizes[i].s, fio_sizes[i].kb_base, (unsigned long long)v,
		       (unsigned long long)fio_sizes[i].v);
	}
	/* fio ignores what follows what it understands; rlperf refuses */
	for (size_t i = 0; i < RL_ARRAY_SIZE(bad); i++)
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

	for (size_t i = 0; i < RL_ARRAY_SIZE(fio_sizes) && n > 0 && (size_t)n < sizeof(cmd);
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
	for (size_t i = 0; i < RL_ARRAY_SIZE(fio_sizes); i++) {
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
		 "%llu|%d%d%d%d%d%d%d%d|%d|%s|%llx", j->name, j->filename ? j->filename : "-",
		 j->directory ? j->directory : "-", j->rw, (unsigned long long)j->bs,
		 (unsigned long long)j->size.v, j->size.pct,
		 (unsigned long long)j->offset.v, j->offset.pct,
		 (unsigned long long)j->offset_increment.v, j->offset_increment.pct,
		 j->iodepth, j->numjobs, j->kb_base, (unsigned long long)j->runtime_ns,
		 (unsigned long long)j->ramp_ns, (unsigned long long)j->seed, j->time_based,
		 j->direct, j->fixedbufs, j->registerfiles, j->invalidate, j->norandommap,
		 j->group_reporting, j->thread, j->engine, j->ioengine,
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

	for (size_t i = 0; i < RL_ARRAY_SIZE(cases); i++) {
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

static void flags_take_nothing_or_0_1(void)
{
	static const char *const flags[] = {
		"time_based", "fixedbufs", "registerfiles", "group_reporting", "norandommap",
		"thread",
	};
	struct rp_conf c;
	char err[512], a[64], d1[1024], d2[1024];

	for (size_t i = 0; i < RL_ARRAY_SIZE(flags); i++) {
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
	CHECK_EQ(j->engine, ENG_LIBAIO);
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
	CHECK(j->engine == ENG_IO_URING && j->fixedbufs && j->registerfiles);
	CHECK_EQ(c.format, RP_FMT_NORMAL);
	rp_conf_free(&c);

	/* each sync engine of fio is the pread pool */
	CHECK_EQ(parse(&c, err, sizeof(err), "--filename=f", "--ioengine=pvsync2", NULL), 0);
	CHECK(c.jobs[0].engine == ENG_PREAD && !strcmp(c.jobs[0].ioengine, "pvsync2"));
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
		{ "--minimal", NULL, "rlperf: --minimal is a fio option that rlperf does not "
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
		{ "--iodepth=0", NULL, "rlperf: failed parsing iodepth=0: out of range [1, 65536]" },
		{ "--iodepth=65537", NULL, "rlperf: failed parsing iodepth=65537: out of range [1, 65536]" },
		{ "--numjobs=0", NULL, "rlperf: failed parsing numjobs=0: out of range [1, 1024]" },
		{ "--direct=2", NULL, "rlperf: failed parsing direct=2: expected 0 or 1" },
		{ "--direct", NULL, "rlperf: option --direct needs a value" },
		{ "--fixedbufs=yes", NULL, "rlperf: failed parsing fixedbufs=yes: expected 0 or 1" },
		{ "--kb_base=1023", NULL, "rlperf: failed parsing kb_base=1023: expected 1024 or 1000" },
		{ "--kb_base=1010", NULL, "rlperf: failed parsing kb_base=1010: expected 1024 or 1000" },
		{ "--ioengine=spdk", NULL, "rlperf: failed parsing ioengine=spdk: rlperf has io_uring, libaio, and psync, sync, pvsync, pvsync2, vsync (its pread pool)" },
		{ "--output-format=terse", NULL, "rlperf: failed parsing output-format=terse: rlperf has normal and json" },
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
	};
	struct rp_conf c;
	char err[512];

	for (size_t i = 0; i < RL_ARRAY_SIZE(cases); i++) {
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
	/* a tiny buffer truncates, never overflows */
	CHECK_EQ(parse(&c, err, 12, "--bogus", NULL), RP_PARSE_ERROR);
	CHECK_EQ(strlen(err), 11);
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
	for (size_t i = 0; i < RL_ARRAY_SIZE(opt_table); i++) {
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
	CHECK_EQ(listed, RL_ARRAY_SIZE(opt_table));
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
	for (size_t i = 0; i < RL_ARRAY_SIZE(opt_table); i++) {
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

	for (size_t i = 0; i < RL_ARRAY_SIZE(cases); i++) {
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
	for (size_t i = 0; i < RL_ARRAY_SIZE(refused); i++) {
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
	struct rp_hist *h = rl_malloc(sizeof(*h)), *g = rl_malloc(sizeof(*g));
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
	rl_free(h);
	rl_free(g);
	CHECK(ok);
}

static void stddev_is_exact(void)
{
	static const uint64_t xs[] = { 2, 4, 4, 4, 5, 5, 7, 9 };
	struct rp_hist *h = rl_malloc(sizeof(*h));
	double sd;

	CHECK(h);
	rp_hist_init(h);
	CHECK(rp_hist_stddev(h) == 0.0);
	for (size_t i = 0; i < RL_ARRAY_SIZE(xs); i++)
		rp_hist_add(h, xs[i] + 1000000000000ull);  /* large mean, small spread */
	sd = rp_hist_stddev(h);
	rl_free(h);
	CHECKF(sd > 2.13808 && sd < 2.13809, "stddev %.6f", sd);
}

static void latency_bins_follow_fio(void)
{
	struct rp_hist *h = rl_malloc(sizeof(*h));
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
	rl_free(h);
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
	uint8_t *seen = rl_malloc(65536);
	uint64_t first[2] = { 0, 0 };
	int ok = 1;

	CHECK(seen);
	for (size_t s = 0; s < RL_ARRAY_SIZE(sizes) && ok; s++) {
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
	rl_free(seen);
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

struct fake_eng {
	struct eng_opts o;
};

static struct {
	pthread_mutex_t lock;
	int fail_rc;            /* eng_run returns this after fail_after reads */
	uint64_t fail_after;
	int drop_last;          /* report success one read short */
	uint64_t reads, bad, max_inflight;
	uint64_t per_file[4];   /* reads of each file, all runs */
	unsigned runs;
	uint64_t block_counts_bad;
} fake = { PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0, 0, { 0 }, 0, 0 };

static void fake_opts_default(struct eng_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->backend = ENG_AUTO;
	o->queue_depth = 32;
	o->direct = 1;
}

static int fake_create(const struct eng_opts *o, struct eng **out, struct rl_err *e)
{
	struct fake_eng *f = rl_calloc(1, sizeof(*f));

	if (!f)
		return rl_err_set(e, -ENOMEM, "fake engine: out of memory");
	f->o = *o;
	*out = (struct eng *)f;
	return 0;
}

static void fake_destroy(struct eng *eng)
{
	rl_free(eng);
}

/* Reads of each block of each file (at most 4 files). */
struct fake_counts {
	uint32_t *c[4];
	uint64_t nb[4];
};

static int fake_check(const struct eng_job *job, const struct fake_eng *f,
		      const struct rl_read *r, struct fake_counts *fc)
{
	if (r->len != f->o.buffer_bytes || r->min_len != r->len || r->ncopies ||
	    r->file >= job->nfiles || r->file >= 4 ||
	    r->off + r->len > job->file_sizes[r->file])
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

static void fake_tally(const struct fake_eng *f, const struct fake_counts *fc,
		       size_t nfiles, uint64_t reads, uint64_t bad, int rc)
{
	pthread_mutex_lock(&fake.lock);
	fake.reads += reads;
	fake.bad += bad;
	fake.runs++;
	if (f->o.queue_depth > fake.max_inflight)
		fake.max_inflight = f->o.queue_depth;
	for (size_t i = 0; i < nfiles && i < 4; i++)
		for (uint64_t b = 0; b < fc->nb[i]; b++)
			fake.per_file[i] += fc->c[i][b];
	if (!rc && !fake_even(fc, nfiles))
		fake.block_counts_bad++;
	pthread_mutex_unlock(&fake.lock);
}

static void fake_stats(const struct fake_eng *f, struct eng_stats *st, uint64_t reads)
{
	memset(st, 0, sizeof(*st));
	st->bytes_read = reads * f->o.buffer_bytes;
	st->reads = reads;
	st->backend = ENG_IO_URING;
	st->queue_depth = f->o.queue_depth;
	st->buffers = f->o.buffers;
	st->registered_buffers = f->o.register_buffers ? f->o.buffers : 0;
	st->registered_files = f->o.register_files;
	st->direct_io = f->o.direct;
}

/* Keeps up to queue_depth reads "in flight", completes the oldest. */
static int fake_run(struct eng *eng, const struct eng_job *job, struct eng_stats *st,
		    struct rl_err *e)
{
	struct fake_eng *f = (struct fake_eng *)eng;
	unsigned qd = f->o.queue_depth, head = 0, n = 0;
	struct {
		struct rl_read r;
		uint64_t t;
	} *q = rl_calloc(qd, sizeof(*q));
	struct fake_counts fc = { { NULL }, { 0 } };
	uint64_t reads = 0, bad = 0;
	struct rl_read r;
	int more = 1, rc = q ? 0 : -ENOMEM;

	for (size_t i = 0; i < job->nfiles && i < 4 && !rc; i++) {
		fc.nb[i] = job->file_sizes[i] / f->o.buffer_bytes;
		fc.c[i] = rl_calloc(fc.nb[i] + 1, sizeof(*fc.c[i]));
		rc = fc.c[i] ? 0 : -ENOMEM;
	}
	while (!rc && (more || n)) {
		if (more && n < qd && (more = job->next(job->user, &r))) {
			bad += !fake_check(job, f, &r, &fc);
			q[(head + n) % qd].r = r;
			q[(head + n) % qd].t = perf_now_ns();
			n++;
			continue;
		}
		if (!n)
			break;
		if (fake.fail_rc && reads == fake.fail_after) {
			rc = rl_err_set(e, fake.fail_rc, "fake: read of %u bytes at offset "
					"%llu failed", q[head].r.len,
					(unsigned long long)q[head].r.off);
			break;
		}
		if (!(fake.drop_last && !more && n == 1))
			job->on_read(job->user, &q[head].r, q[head].t, perf_now_ns());
		head = (head + 1) % qd;
		n--;
		reads++;
	}
	if (rc == -ENOMEM)
		rl_err_set(e, rc, "fake engine: out of memory");
	fake_stats(f, st, reads);
	fake_tally(f, &fc, job->nfiles, reads, bad, rc);
	for (size_t i = 0; i < 4; i++)
		rl_free(fc.c[i]);
	rl_free(q);
	return rc;
}

static const struct rp_engine_ops fake_ops = {
	fake_opts_default, fake_create, fake_run, fake_destroy,
};

static void fake_reset(void)
{
	pthread_mutex_lock(&fake.lock);
	fake.fail_rc = 0;
	fake.fail_after = 0;
	fake.drop_last = 0;
	fake.reads = fake.bad = fake.max_inflight = fake.block_counts_bad = 0;
	memset(fake.per_file, 0, sizeof(fake.per_file));
	fake.runs = 0;
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
	return rp_run(p, &fake_ops, r);
}

static void fake_done(struct rp_conf *c, struct rp_plan *p, struct rp_result *r)
{
	rp_result_free(r);
	rp_plan_free(p);
	rp_conf_free(c);
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
		       "--runtime=60ms", "--ramp_time=30ms", NULL);
	t = &r.task[0];
	/* time, not ios, is what the window is sure of: under a loaded
	 * sanitizer run the window counted 4 ios (16365 in the ramp) */
	ok = rc == 0 && t->ios > 0 && fake.reads > 16 && fake.reads > t->ios && !fake.bad &&
	     !fake.block_counts_bad && t->last_ns - t->meas_ns >= 50000000 &&
	     t->last_ns - t->meas_ns < 2000000000 && r.elapsed_s >= 0.09 &&
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
	char fn[600], err[600], m1[RL_ERRMSG_MAX + 256];
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
	rc1 = rp_run(&p, &fake_ops, &r);
	snprintf(m1, sizeof(m1), "%s", r.errmsg);
	rp_result_free(&r);
	/* an engine that says success with a read missing is caught too */
	fake_reset();
	fake.drop_last = 1;
	rc2 = rp_run(&p, &fake_ops, &r);
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

/* ---------------------------------------------------------------- */
/* Output                                                            */
/* ---------------------------------------------------------------- */

/* A run with known numbers: 1000 reads of 1 MiB in 2 s. */
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
	p->tasks = rl_calloc(1, sizeof(*p->tasks));
	r->task = t = rl_calloc(1, sizeof(*r->task));
	if (!p->tasks || !t || !(t->clat = rl_malloc(sizeof(*t->clat))))
		return -1;
	p->ntasks = r->ntasks = 1;
	p->tasks[0].job = &c->jobs[0];
	rp_hist_init(t->clat);
	t->ios = 1000;
	t->bytes = 1000ull << 20;
	t->meas_ns = 1000000000ull;
	t->last_ns = 3000000000ull;
	t->depth[4] = 1000;
	t->eng.backend = ENG_IO_URING;
	t->eng.direct_io = 1;
	for (uint64_t i = 1; i <= 1000; i++)
		rp_hist_add(t->clat, i * 2000);  /* 2 us .. 2 ms */
	t->bw = (struct rp_samples){ 4, 500000.0, 524000.0, 2048000.0, 0 };
	t->bw.sumsq = 500000.0 * 500000.0 + 3 * 516000.0 * 516000.0;
	r->elapsed_s = 2.0;
	r->usr_s = 0.1;
	r->sys_s = 0.3;
	r->start_unix_ms = 1700000000000ull;
	*rep = (struct rp_report){ c, p, r, NULL, 0 };
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
	"assert d['disk_util']==[] and 'global options' not in d\n";

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
	     strstr(text, "    clat (usec): min=2, max=2000, avg=1001.00, stdev=") &&
	     strstr(text, "    clat percentiles (usec):\n     |  1.00th=[   20],") &&
	     strstr(text, "99.99th=[ 2007]\n") &&
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

	for (size_t i = 0; i < RL_ARRAY_SIZE(cases); i++) {
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

static void binary_rejects_bad_options(void)
{
	char out[8192];

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	/* exit 1 for every error, as fio */
	CHECK_EQ(run_rlperf("--bogus", out, sizeof(out)), 1);
	CHECK_STR(out, "rlperf: unrecognized option '--bogus'\n");
	CHECK_EQ(run_rlperf("--filename=x --minimal", out, sizeof(out)), 1);
	CHECK_STR(out, "rlperf: --minimal is a fio option that rlperf does not support "
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
	 * completions come apart (129 of 256 with a CI run beside) */
	"v=j['rlperf']['voluntary_ctx']\n"
	"assert sys.argv[2]=='pread' or sys.argv[3]=='1' or v<rd['total_ios']/4, v\n";

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
		for (size_t i = 0; i < RL_ARRAY_SIZE(engines); i++) {
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
			snprintf(cmd, sizeof(cmd), "python3 %s %s %s %d", script, json, names[i],
				 direct);
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
	"assert a.get('global options')==b.get('global options')\n";

static void binary_json_matches_fios_for_a_job_file(void)
{
	const char *f1 = make_file("shape1", 1 << 20), *f2 = make_file("shape2", 512 << 10);
	char job[2048], script[512], fa[512], fb[512], cmd[2048], out[4096];
	const char *path;
	static const char *const extra[] = { "", "--group_reporting" };

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
	for (size_t i = 0; i < RL_ARRAY_SIZE(extra); i++) {
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
	struct eng_align al;
	int fd;

	if (!rlperf_exe())
		SKIP("build/rlperf not built");
	CHECK(path);
	if (eng_probe_align(path, &al) || !al.direct)
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
	RUN(flags_take_nothing_or_0_1);
	RUN(fio_command_line_parses);
	RUN(bad_options_name_the_option);
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
	RUN(latency_bins_follow_fio);
	RUN(sequential_offsets_cover_the_region);
	RUN(random_offsets_are_a_permutation);
	RUN(norandommap_offsets_repeat_blocks);
	RUN(runner_reads_every_block_once_per_clone);
	RUN(runner_round_robins_over_files);
	RUN(runner_loops_on_time_and_skips_ramp);
	RUN(runner_reports_engine_errors);
	RUN(units_follow_group_reporting);
	RUN(json_has_fios_shape);
	RUN(normal_output_reads_like_fio);
	RUN(block_sizes_print_as_fio);
	RUN(binary_rejects_bad_options);
	RUN(binary_reads_a_file);
	RUN(binary_json_matches_fios_for_a_job_file);
	RUN(binary_writes_output_to_a_file);
	RUN(binary_invalidate_drops_the_region_cache);
	RUN(binary_reads_several_files);
	RUN(binary_loads_a_checkpoint);
	return th_done();
}
