/*
 * test_cli.c - the ringload command, run as a user runs it (build/ringload,
 * from RL_BUILD): option syntax and help on every subcommand, one size
 * parser with errors that name the option and its range, `plan` of one
 * process by default, `load`'s phases and JSON, the --out dump (manifest,
 * atomic publishing, --force, failures and signals leave nothing), an
 * unprivileged user, `make install` into a temporary prefix, and the man
 * page. The option parser itself (tools/opts.c) is compiled in and tested
 * directly.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_util.h"
#include "harness.h"
#include "ringload.h"

#include "../tools/opts.c"

static const char *build(void)
{
	const char *b = getenv("RL_BUILD");

	return b && *b ? b : "build";
}

/* ------------------------------------------------------------------ */
/* Running the command                                                 */
/* ------------------------------------------------------------------ */

static char *out_s, *err_s;  /* the last command's stdout and stderr */

static int run_cmd(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs a shell line; its stdout and stderr land in out_s and err_s. */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int sh(const char *fmt, ...)
{
	static char outf[512], errf[512];
	char line[8192], cmd[9400];
	va_list ap;
	size_t n;
	int st;

	if (!outf[0]) {
		snprintf(outf, sizeof(outf), "%s/cap.out", th_tmpdir());
		snprintf(errf, sizeof(errf), "%s/cap.err", th_tmpdir());
	}
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "%s >%s 2>%s </dev/null", line, outf, errf);
	st = run_cmd(cmd);
	free(out_s);
	free(err_s);
	out_s = slurp(outf, &n);
	err_s = slurp(errf, &n);
	if (!out_s)
		out_s = strdup("");
	if (!err_s)
		err_s = strdup("");
	return st;
}

/* build/ringload ARGS (a shell fragment), captured like sh(). */
#define RL(...) ringload_args_(__VA_ARGS__)
static int ringload_args_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int ringload_args_(const char *fmt, ...)
{
	char args[8000];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	return sh("%s/ringload %s", build(), args);
}

static int write_text(const char *path, const char *text)
{
	return write_bytes(path, text, strlen(text));
}

static unsigned count_lines(const char *s)
{
	unsigned n = 0;

	for (; s && *s; s++)
		n += *s == '\n';
	return n;
}

/* A small sharded sample (mkckpt) and a 2-process spec, made once. */
static const char *sample(void)
{
	static char dir[1024];
	char cmd[4096];

	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "%s", tmp_path("sample"));
		snprintf(cmd, sizeof(cmd), "%s/mkckpt %s --size 6M --files 2 --layers 2 >/dev/null",
			 build(), dir);
		if (run_cmd(cmd) != 0)
			return NULL;
		write_text(tmp_path("spec2.json"),
			    "{\"mesh\":{\"shape\":[2,2],\"axes\":[\"data\",\"model\"],"
			    "\"process_of_device\":[0,0,1,1]},"
			    "\"rules\":[{\"match\":\".*proj.*\",\"spec\":[\"model\"]}]}");
	}
	return dir;
}

#define NEED_SAMPLE(p) \
	do { \
		(p) = sample(); \
		CHECKF(p, "%s/mkckpt failed", build()); \
	} while (0)

/* No entry of th_tmpdir() starts with prefix (no DIR, no DIR.partial-*). */
static int nothing_named(const char *prefix, char *found, size_t cap)
{
	DIR *d = opendir(th_tmpdir());
	struct dirent *e;
	int none = 1;

	while (d && (e = readdir(d))) {
		if (!strncmp(e->d_name, prefix, strlen(prefix))) {
			snprintf(found, cap, "%s", e->d_name);
			none = 0;
		}
	}
	if (d)
		closedir(d);
	return none;
}

/* ------------------------------------------------------------------ */
/* tools/opts.c, in process                                            */
/* ------------------------------------------------------------------ */

static void size_parser(void)
{
	static const struct {
		const char *s;
		int ret;
		int64_t v;
	} cases[] = {
		{ "0", 0, 0 }, { "4096", 0, 4096 }, { "4K", 0, 4096 }, { "4k", 0, 4096 },
		{ "4KiB", 0, 4096 }, { "4kiB", 0, 4096 }, { "4M", 0, 4 << 20 }, { "4m", 0, 4 << 20 },
		{ "4MiB", 0, 4 << 20 }, { "1G", 0, 1 << 30 }, { "1g", 0, 1 << 30 },
		{ "1GiB", 0, 1 << 30 }, { "2T", 0, 2ll << 40 }, { "2TiB", 0, 2ll << 40 },
		{ "1.5M", 0, 3 << 19 }, { "0.5K", 0, 512 }, { "8388607T", 0, 8388607ll << 40 },
		{ "", OPTS_E_SYNTAX, 0 }, { "4Q", OPTS_E_SYNTAX, 0 }, { " 4M", OPTS_E_SYNTAX, 0 },
		{ "4M ", OPTS_E_SYNTAX, 0 }, { "+4", OPTS_E_SYNTAX, 0 }, { "0x10", OPTS_E_SYNTAX, 0 },
		{ "4MB", 0, 4 << 20 }, { "4kB", 0, 4096 }, { "1GB", 0, 1 << 30 },
		{ "4Mb", 0, 4 << 20 }, { "4mb", 0, 4 << 20 }, { "4mib", 0, 4 << 20 },
		{ "4B", 0, 4 }, { "4b", 0, 4 }, { "4MBB", OPTS_E_SYNTAX, 0 }, { "4iB", OPTS_E_SYNTAX, 0 },
		{ "4Bk", OPTS_E_SYNTAX, 0 },
		{ "4Mi", OPTS_E_SYNTAX, 0 }, { "1e3", OPTS_E_SYNTAX, 0 },
		{ "nan", OPTS_E_SYNTAX, 0 }, { ".5", OPTS_E_SYNTAX, 0 }, { "5.", OPTS_E_SYNTAX, 0 },
		{ "4..5", OPTS_E_SYNTAX, 0 }, { "K", OPTS_E_SYNTAX, 0 }, { "-", OPTS_E_SYNTAX, 0 },
		{ "-4M", OPTS_E_RANGE, 0 }, { "-1", OPTS_E_RANGE, 0 },
		{ "99999999999999999999", OPTS_E_RANGE, 0 }, { "8388608T", OPTS_E_RANGE, 0 },
		{ "9223372036854775808", OPTS_E_RANGE, 0 }, { "1.3K", OPTS_E_FRACTION, 0 },
		{ "0.1", OPTS_E_FRACTION, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t v = -7;
		int r = opts_parse_size(cases[i].s, &v);

		CHECKF(r == cases[i].ret, "'%s': %d, not %d", cases[i].s, r, cases[i].ret);
		CHECKF(r || v == cases[i].v, "'%s': %lld", cases[i].s, (long long)v);
	}
}

static void number_parsers(void)
{
	int64_t v = 0;
	uint64_t u = 0;
	char buf[32];

	CHECK(opts_parse_int("12", &v) == 0 && v == 12);
	CHECK(opts_parse_int("-3", &v) == 0 && v == -3);
	CHECK_EQ(opts_parse_int("1.5", &v), OPTS_E_SYNTAX);
	CHECK_EQ(opts_parse_int("1K", &v), OPTS_E_SYNTAX);
	CHECK_EQ(opts_parse_int("", &v), OPTS_E_SYNTAX);
	CHECK_EQ(opts_parse_int(" 1", &v), OPTS_E_SYNTAX);
	CHECK_EQ(opts_parse_int("9223372036854775808", &v), OPTS_E_RANGE);
	CHECK(opts_parse_milli("1", &v) == 0 && v == 1000);
	CHECK(opts_parse_milli("1.5", &v) == 0 && v == 1500);
	CHECK(opts_parse_milli("2.125", &v) == 0 && v == 2125);
	CHECK(opts_parse_milli("-1", &v) == 0 && v == -1000);
	CHECK_EQ(opts_parse_milli("1.2345", &v), OPTS_E_SYNTAX);
	CHECK_EQ(opts_parse_milli("1.", &v), OPTS_E_SYNTAX);
	CHECK(opts_parse_u64("18446744073709551615", &u) == 0 && u == UINT64_MAX);
	CHECK(opts_parse_u64("0xff", &u) == 0 && u == 255);
	CHECK(opts_parse_u64("0xFFFFFFFFFFFFFFFF", &u) == 0 && u == UINT64_MAX);
	CHECK_EQ(opts_parse_u64("0x", &u), OPTS_E_SYNTAX);
	CHECK_EQ(opts_parse_u64("-5", &u), OPTS_E_SYNTAX);
	CHECK_EQ(opts_parse_u64("18446744073709551616", &u), OPTS_E_RANGE);
	CHECK_EQ(opts_parse_u64("0x10000000000000000", &u), OPTS_E_RANGE);
	opts_format_size(4096, buf, sizeof(buf));
	CHECK_STR(buf, "4K");
	opts_format_size(1ll << 40, buf, sizeof(buf));
	CHECK_STR(buf, "1T");
	opts_format_size(1000, buf, sizeof(buf));
	CHECK_STR(buf, "1000");
	opts_format_size(0, buf, sizeof(buf));
	CHECK_STR(buf, "0");
}

/* opts_parse() with its messages sent to /dev/null. */
static int parse_quietly(const struct opt_cmd *cmd, int argc, const char **argv)
{
	int saved_out = dup(1), saved_err = dup(2), null = open("/dev/null", O_WRONLY), r;

	fflush(stdout);
	dup2(null, 1);
	dup2(null, 2);
	r = opts_parse(cmd, argc, (char **)argv);
	fflush(stdout);
	fflush(stderr);
	dup2(saved_out, 1);
	dup2(saved_err, 2);
	close(saved_out);
	close(saved_err);
	close(null);
	return r;
}

static void option_table(void)
{
	static const char *const colors[] = { "red", "blue", NULL };
	const char *path = NULL, *name = NULL;
	int64_t n = -1, size = -1;
	int flag = 0, color = -1;
	const struct opt opts[] = {
		{ .name = "flag", .kind = OPT_FLAG, .dst = &flag, .help = "f" },
		{ .name = "name", .kind = OPT_STRING, .dst = &name, .metavar = "S", .help = "s" },
		{ .name = "n", .kind = OPT_INT, .dst = &n, .metavar = "N", .help = "n", .lo = 1,
		  .hi = 10 },
		{ .name = "size", .kind = OPT_SIZE, .dst = &size, .metavar = "SIZE", .help = "z",
		  .lo = 0, .hi = 1 << 20 },
		{ .name = "color", .kind = OPT_CHOICE, .dst = &color, .help = "c", .choices = colors },
		{ .name = NULL },
	};
	const struct opt_cmd cmd = { "t", "PATH", NULL, opts, 1, 1, &path };
	const char *a1[] = { "t", "--n", "3", "p", "--size=1K", "--name=-x", "--flag",
			     "--color", "blue" };
	const char *a2[] = { "t", "p", "--", "--flag" };

	CHECK_EQ(parse_quietly(&cmd, 9, a1), OPTS_OK);
	CHECK(n == 3 && size == 1024 && flag && color == 1 && !strcmp(name, "-x") &&
	      !strcmp(path, "p"));
	CHECK_EQ(parse_quietly(&cmd, 4, a2), OPTS_USAGE);  /* "--flag" is a second PATH */
	CHECK_EQ(parse_quietly(&cmd, 3, (const char *[]){ "t", "--", "--flag" }), OPTS_OK);
	CHECK_STR(path, "--flag");
	CHECK_EQ(parse_quietly(&cmd, 3, (const char *[]){ "t", "p", "-h" }), OPTS_HELP);
	CHECK_EQ(parse_quietly(&cmd, 2, (const char *[]){ "t", "--help" }), OPTS_HELP);
	CHECK_EQ(parse_quietly(&cmd, 3, (const char *[]){ "t", "p", "--help=1" }), OPTS_USAGE);
	CHECK_EQ(parse_quietly(&cmd, 3, (const char *[]){ "t", "p", "--flag=1" }), OPTS_USAGE);
	CHECK_EQ(parse_quietly(&cmd, 3, (const char *[]){ "t", "p", "--n" }), OPTS_USAGE);
	CHECK_EQ(parse_quietly(&cmd, 3, (const char *[]){ "t", "p", "--nn" }), OPTS_USAGE);
	CHECK_EQ(parse_quietly(&cmd, 3, (const char *[]){ "t", "p", "-x" }), OPTS_USAGE);
	CHECK_EQ(parse_quietly(&cmd, 4, (const char *[]){ "t", "p", "--n", "11" }), OPTS_USAGE);
	CHECK_EQ(parse_quietly(&cmd, 4, (const char *[]){ "t", "p", "--n", "0" }), OPTS_USAGE);
	CHECK_EQ(parse_quietly(&cmd, 3, (const char *[]){ "t", "p", "--size=2M" }), OPTS_USAGE);
	CHECK_EQ(parse_quietly(&cmd, 3, (const char *[]){ "t", "p", "--color=green" }),
		 OPTS_USAGE);
	CHECK_EQ(parse_quietly(&cmd, 1, (const char *[]){ "t" }), OPTS_USAGE);
}

/* ------------------------------------------------------------------ */
/* Option syntax, help and errors on every subcommand                  */
/* ------------------------------------------------------------------ */

static const char *const subcommands[] = { "inspect", "plan", "load" };

static void help_on_every_command(void)
{
	const char *p;

	NEED_SAMPLE(p);
	CHECKF(RL("--help") == 0 && strstr(out_s, "usage: ringload") && !*err_s, "%s", err_s);
	CHECKF(RL("-h") == 0 && strstr(out_s, "usage: ringload"), "%s", err_s);
	for (size_t i = 0; i < 3; i++) {
		const char *c = subcommands[i];

		CHECKF(RL("%s --help", c) == 0, "%s --help: %s", c, err_s);
		CHECKF(strstr(out_s, "usage: ringload ") && strstr(out_s, c) && !*err_s,
		       "%s --help: %s%s", c, out_s, err_s);
		CHECKF(RL("%s -h", c) == 0 && strstr(out_s, "usage:"), "%s -h: %s", c, err_s);
		/* anywhere on the line, before the missing value of another option too */
		CHECKF(RL("%s %s --json -h", c, p) == 0 && strstr(out_s, "usage:"), "%s: %s", c,
		       err_s);
		CHECKF(strstr(out_s, "--help") && strstr(out_s, "--json"), "%s: %s", c, out_s);
	}
}

static void unknown_option_everywhere(void)
{
	const char *p;

	NEED_SAMPLE(p);
	CHECKF(RL("--bogus") == 2 && strstr(err_s, "unknown option '--bogus'"), "%s", err_s);
	for (size_t i = 0; i < 3; i++) {
		const char *c = subcommands[i];
		const char *lines[] = { "--bogus %s", "%s --bogus", "%s --json --bogus",
					"%s --bogus=3", "%s -x" };

		for (size_t k = 0; k < 5; k++) {
			char args[4096], fmt[64];

			snprintf(fmt, sizeof(fmt), "%%s %s", lines[k]);
			snprintf(args, sizeof(args), fmt, c, p);
			CHECKF(RL("%s", args) == 2, "ringload %s: exit not 2", args);
			CHECKF(strstr(err_s, "unknown option '") && !strstr(err_s, "needs a value") &&
			       count_lines(err_s) == 1, "ringload %s: %s", args, err_s);
		}
	}
	CHECKF(RL("load %s --out", p) == 2 && strstr(err_s, "--out needs a value"), "%s", err_s);
	CHECKF(RL("frobnicate") == 2 && strstr(err_s, "unknown command"), "%s", err_s);
}

/* --opt value and --opt=value give the same result in every subcommand. */
static void equals_form(void)
{
	char *spaced;
	const char *p;

	NEED_SAMPLE(p);
	CHECKF(RL("plan %s --sharding %s --process 1 --chunk 1M --min-gap 8K --ratio 2 --json", p,
		  tmp_path("spec2.json")) == 0, "%s", err_s);
	spaced = strdup(out_s);
	CHECKF(RL("plan %s --sharding=%s --process=1 --chunk=1M --min-gap=8K --ratio=2 --json", p,
		  tmp_path("spec2.json")) == 0, "%s", err_s);
	CHECKF(!strcmp(spaced, out_s), "%s\nvs\n%s", spaced, out_s);
	free(spaced);
	CHECKF(RL("inspect --json=1 %s", p) == 2 && strstr(err_s, "--json takes no value"), "%s",
	       err_s);
	CHECKF(RL("load %s --sharding=%s --process=1 --backend=pread --queue-depth=4 "
		  "--request-bytes=64K --inflight-bytes=1M --staging=caller --verify", p,
		  tmp_path("spec2.json")) == 0, "%s", err_s);
	CHECKF(strstr(out_s, " 0 differ"), "%s", out_s);
}

/* Every size option takes the same forms; errors name the option and its range. */
static void sizes_and_ranges(void)
{
	static const char *const good[] = { "4M", "4m", "4MiB", "4194304", "0.5M", "4MB" };
	char want[128], lo_s[32], hi_s[32];
	int64_t lo, hi;
	const char *p;

	NEED_SAMPLE(p);
	for (size_t i = 0; i < 6; i++) {
		CHECKF(RL("plan %s --chunk %s", p, good[i]) == 0, "--chunk %s: %s", good[i], err_s);
		CHECKF(RL("load %s --request-bytes %s --quiet", p, good[i]) == 0,
		       "--request-bytes %s: %s", good[i], err_s);
	}
	CHECKF(RL("load %s --inflight-bytes 1GiB --quiet", p) == 0, "%s", err_s);
	CHECKF(RL("plan %s --min-gap 64k", p) == 0, "%s", err_s);
	CHECKF(RL("plan %s --chunk 4Q", p) == 2 && strstr(err_s, "--chunk: '4Q' is not a size"),
	       "%s", err_s);
	CHECKF(RL("plan %s --min-gap 99999999999T", p) == 2 &&
	       strstr(err_s, "--min-gap must be in ["), "%s", err_s);
	CHECKF(RL("plan %s --chunk -1M", p) == 2 && strstr(err_s, "--chunk must be in [1, 1G]"),
	       "%s", err_s);
	/* ranges from the library's bounds, named by option */
	CHECK(rl_loader_param_bounds(RL_OPT_QUEUE_DEPTH, &lo, &hi) == 0);
	snprintf(want, sizeof(want), "--queue-depth must be in [%lld, %lld]", (long long)lo,
		 (long long)hi);
	CHECKF(RL("load %s --queue-depth 0", p) == 2 && strstr(err_s, want), "%s", err_s);
	CHECKF(!strstr(err_s, "parameter"), "%s", err_s);
	CHECK(rl_loader_param_bounds(RL_OPT_REQUEST_BYTES, &lo, &hi) == 0);
	opts_format_size(lo, lo_s, sizeof(lo_s));
	opts_format_size(hi, hi_s, sizeof(hi_s));
	snprintf(want, sizeof(want), "--request-bytes must be in [%s, %s]", lo_s, hi_s);
	CHECKF(RL("load %s --request-bytes 1K", p) == 2 && strstr(err_s, want), "%s", err_s);
	CHECK(rl_plan_param_bounds(RL_PLAN_PROCESS, &lo, &hi) == 0);
	snprintf(want, sizeof(want), "--process must be in [0, %lld]", (long long)hi);
	CHECKF(RL("plan %s --process %lld", p, (long long)hi + 1) == 2 && strstr(err_s, want),
	       "%s", err_s);
	CHECKF(RL("plan %s --ratio 0.5", p) == 2 && strstr(err_s, "--ratio must be in [1, "),
	       "%s", err_s);
	CHECKF(RL("load %s --backend foo", p) == 2 && strstr(err_s, "auto|io_uring|libaio|pread"),
	       "%s", err_s);
	/* mkckpt takes sizes the same way */
	CHECKF(sh("%s/mkckpt %s --size 4Q", build(), tmp_path("mk.safetensors")) == 2 &&
	       strstr(err_s, "--size: '4Q' is not a size"), "%s", err_s);
}

/* ------------------------------------------------------------------ */
/* plan                                                                */
/* ------------------------------------------------------------------ */

static cJSON *json_out(void)
{
	return cJSON_Parse(out_s);
}

/* plan --json says the planned process's staging bytes: what the library's
 * plan gives as the sum over its devices, the bytes a load maps. */
static void plan_reports_staging(void)
{
	rl_ckpt *ck = rl_ckpt_create();
	rl_spec *spec = rl_spec_create();
	rl_plan *plan = rl_plan_create();
	uint64_t want = 0;
	cJSON *j = NULL;
	const char *p;

	NEED_SAMPLE(p);
	CHECK(ck && spec && plan && rl_ckpt_open(ck, p) == 0 &&
	      rl_spec_load(spec, tmp_path("spec2.json")) == 0 &&
	      rl_plan_set(plan, RL_PLAN_PROCESS, 1) == 0 && rl_plan_build(plan, ck, spec) == 0);
	for (unsigned d = 0; d < rl_plan_num_devices(plan); d++) {
		rl_device_info di;

		CHECK(rl_plan_device(plan, d, &di) == 0);
		want += di.staging_bytes;
	}
	CHECK(want > 0);
	CHECKF(RL("plan %s --sharding %s --process 1 --json", p, tmp_path("spec2.json")) == 0,
	       "%s", err_s);
	j = json_out();
	CHECKF(j && cJSON_IsNumber(cJSON_GetObjectItem(j, "staging_bytes")) &&
	       (uint64_t)cJSON_GetObjectItem(j, "staging_bytes")->valuedouble == want,
	       "want %" PRIu64 ": %s", want, out_s);
	cJSON_Delete(j);
	rl_plan_destroy(plan);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
}

/* The asked process only, unless --all-processes (then every one and the total). */
static void plan_one_process_by_default(void)
{
	cJSON *one, *all, *procs, *row;
	const char *p;

	NEED_SAMPLE(p);
	CHECKF(RL("plan %s --sharding %s --process 1 --json", p, tmp_path("spec2.json")) == 0,
	       "%s", err_s);
	one = json_out();
	CHECKF(one, "%s", out_s);
	procs = cJSON_GetObjectItem(one, "processes");
	CHECK_EQ(cJSON_GetArraySize(procs), 1);
	row = cJSON_GetArrayItem(procs, 0);
	CHECK_EQ(cJSON_GetObjectItem(row, "process")->valueint, 1);
	CHECK(!cJSON_GetObjectItem(one, "total"));
	CHECK_EQ(cJSON_GetObjectItem(one, "num_processes")->valueint, 2);
	CHECKF(RL("plan %s --sharding %s --process 1 --json --all-processes", p,
		  tmp_path("spec2.json")) == 0, "%s", err_s);
	all = json_out();
	CHECK(all);
	CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(all, "processes")), 2);
	CHECK(cJSON_IsObject(cJSON_GetObjectItem(all, "total")));
	CHECK(cJSON_Compare(row, cJSON_GetArrayItem(cJSON_GetObjectItem(all, "processes"), 1), 1));
	cJSON_Delete(one);
	cJSON_Delete(all);
	CHECKF(RL("plan %s --sharding %s --process 1", p, tmp_path("spec2.json")) == 0, "%s",
	       err_s);
	CHECKF(count_lines(out_s) == 9 && strstr(out_s, "\n1 ") && !strstr(out_s, "\n0 ") &&
	       strstr(out_s, "--all-processes"), "%s", out_s);
	CHECKF(RL("plan %s --sharding %s --process 2", p, tmp_path("spec2.json")) == 1 &&
	       strstr(err_s, "process 2"), "%s", err_s);
}

/* ------------------------------------------------------------------ */
/* load: phases, JSON                                                  */
/* ------------------------------------------------------------------ */

/* The seconds of phase `name` in the "phases:" line, or -1. */
static double phase_secs(const char *name)
{
	const char *l = strstr(out_s, "\nphases:"), *at;
	char key[32];

	snprintf(key, sizeof(key), " %s ", name);
	at = l ? strstr(l, key) : NULL;
	return at ? atof(at + strlen(key)) : -1;
}

/* The summary's time is the whole command's: every phase is in it. All
 * of the summary is on stdout (its I/O line was on stderr), and --quiet
 * drops it (it printed two lines). */
static void load_reports_every_phase(void)
{
	double total, sum = 0;
	const char *p, *at;

	NEED_SAMPLE(p);
	CHECKF(RL("load %s --sharding %s --verify --out %s", p, tmp_path("spec2.json"),
		  tmp_path("phases")) == 0, "%s", err_s);
	at = strstr(out_s, " bytes in ");
	CHECKF(at && count_lines(out_s) == 4 && strstr(out_s, "\nread: I/O ") &&
	       strstr(out_s, "\nverify: ") && strstr(out_s, " zero-copy; ") && !*err_s,
	       "stdout: %sstderr: %s", out_s, err_s);
	total = atof(at + 10);
	for (int i = 0; i < 5; i++) {
		static const char *const names[] = { "open", "plan", "read", "verify", "write" };
		double s = phase_secs(names[i]);

		CHECKF(s >= 0, "no %s in %s", names[i], out_s);
		sum += s;
	}
	CHECKF(total + 0.002 >= sum, "total %.3f < phases %.3f: %s", total, sum, out_s);
	CHECKF(RL("load %s", p) == 0 && phase_secs("write") < 0 && phase_secs("read") >= 0 &&
	       count_lines(out_s) == 3 && !*err_s, "stdout: %sstderr: %s", out_s, err_s);
	CHECKF(RL("load %s --verify --out %s --quiet", p, tmp_path("phases-q")) == 0 && !*out_s &&
	       !*err_s, "--quiet: stdout: %sstderr: %s", out_s, err_s);
}

/* On a terminal (script(1) gives one), a bar for every long phase on
 * stderr; none with --quiet, none when stderr is not a terminal. */
/* A pseudo-terminal can be opened: not in a chroot with a bare /dev/pts
 * (/dev bound, devpts not mounted), where script(1) fails. */
static int have_pty(void)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY), s = -1;
	const char *name = m >= 0 && grantpt(m) == 0 && unlockpt(m) == 0 ? ptsname(m) : NULL;

	if (name)
		s = open(name, O_RDWR | O_NOCTTY);
	if (s >= 0)
		close(s);
	if (m >= 0)
		close(m);
	return s >= 0;
}

static void progress_on_a_terminal(void)
{
	const char *p;

	NEED_SAMPLE(p);
	if (run_cmd("command -v script >/dev/null") != 0)
		SKIP("needs script(1) (bsdutils) for a terminal");
	if (!have_pty())
		SKIP("no pseudo-terminal here (/dev/pts without devpts mounted, as in a bare chroot)");
	CHECKF(sh("script -qec '%s/ringload load %s --verify --out %s' /dev/null", build(), p,
		  tmp_path("ttydump")) == 0, "%s", out_s);
	CHECKF(strstr(out_s, "planning") && strstr(out_s, "read   [####") &&
	       strstr(out_s, "verify [####") && strstr(out_s, "write  [####") &&
	       strstr(out_s, "100%"), "%s", out_s);
	CHECKF(sh("script -qec '%s/ringload load %s --verify --quiet' /dev/null", build(), p) == 0,
	       "%s", out_s);
	CHECKF(!strstr(out_s, "[#") && !strstr(out_s, "planning"), "%s", out_s);
	CHECKF(RL("load %s --verify", p) == 0 && !strstr(err_s, "[#") && !strstr(err_s, "\r"),
	       "%s", err_s);
}

static double num(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static void load_json(void)
{
	cJSON *j, *secs, *st;
	const char *p;

	NEED_SAMPLE(p);
	CHECKF(RL("load %s --json --verify --out %s", p, tmp_path("jdump")) == 0, "%s", err_s);
	j = json_out();
	CHECKF(j && count_lines(out_s) >= 1, "not JSON: %s", out_s);
	secs = cJSON_GetObjectItem(j, "seconds");
	st = cJSON_GetObjectItem(j, "stats");
	CHECK(num(j, "bytes_written") > 0 && num(j, "bytes") >= num(j, "bytes_written"));
	CHECK(num(secs, "open") >= 0 && num(secs, "plan") >= 0 && num(secs, "read") >= 0 &&
	      num(secs, "verify") >= 0 && num(secs, "write") >= 0);
	CHECK(num(secs, "total") >= num(secs, "read") + num(secs, "write"));
	CHECK(num(j, "gbps") > 0 && num(j, "read_gbps") > 0);
	CHECK(cJSON_IsString(cJSON_GetObjectItem(j, "backend")) &&
	      cJSON_IsString(cJSON_GetObjectItem(j, "fallbacks")));
	/* the fallbacks as names too, one for each reason the text gives */
	CHECKF(cJSON_IsArray(cJSON_GetObjectItem(j, "fallback_flags")) &&
	       !cJSON_GetArraySize(cJSON_GetObjectItem(j, "fallback_flags")) ==
	       !cJSON_GetObjectItem(j, "fallbacks")->valuestring[0], "%s", out_s);
	CHECK(num(cJSON_GetObjectItem(j, "verify"), "match") > 0 &&
	      num(cJSON_GetObjectItem(j, "verify"), "differ") == 0);
	CHECK(num(st, "requests") > 0 && cJSON_IsBool(cJSON_GetObjectItem(st, "direct_io")));
	/* bytes read into staging without a copy, named so: not a claim of O_DIRECT */
	CHECK(num(st, "bytes_zero_copy") >= 0 && !cJSON_GetObjectItem(st, "bytes_direct"));
	CHECK(!strstr(err_s, "verify:"));  /* all of it is in the JSON */
	cJSON_Delete(j);
	CHECKF(RL("load %s --json --quiet", p) == 0, "%s", err_s);
	j = json_out();
	CHECKF(j, "--json --quiet: %s", out_s);
	secs = cJSON_GetObjectItem(j, "seconds");
	CHECK(cJSON_IsNull(cJSON_GetObjectItem(secs, "write")) &&
	      cJSON_IsNull(cJSON_GetObjectItem(secs, "verify")) &&
	      cJSON_IsNull(cJSON_GetObjectItem(j, "out")));
	st = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "stats"), "shape");
	CHECKF(num(st, "workers") >= 1 && num(st, "request_bytes") > 0 &&
	       num(st, "engine_runs") == 1 && cJSON_IsNull(cJSON_GetObjectItem(st, "stream")),
	       "%s", out_s);
	cJSON_Delete(j);
	/* Streaming: how the windows were read, as fields, not text to parse. */
	CHECKF(RL("load %s --json --quiet --staging-budget 1M", p) == 0, "%s", err_s);
	j = json_out();
	st = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "stats"), "shape"),
				 "stream");
	CHECKF(num(st, "windows") >= 1 && num(st, "window_bytes") > 0 &&
	       num(st, "windows") * num(st, "window_bytes") <= 1 << 20 &&
	       num(st, "ranges") >= 1 && cJSON_IsBool(cJSON_GetObjectItem(st, "registered")),
	       "%s", out_s);
	cJSON_Delete(j);
}

/* The "read_mode" line of the last load's JSON, or "". */
static const char *json_read_mode(cJSON *j)
{
	const cJSON *m = cJSON_GetObjectItem(j, "read_mode");

	return cJSON_IsString(m) ? m->valuestring : "";
}

/*
 * --read-mode direct and buffered read the file that way, whole and
 * streaming, and the JSON's "read_mode" says so and why (asked); auto says
 * why it chose; --buffered is --read-mode buffered and contradicting it
 * is a usage error naming both.
 */
static void load_read_modes(void)
{
	static const struct {
		const char *args, *says;
	} cases[] = {
		{ "--read-mode buffered", "buffered, asked (--read-mode): " },
		{ "--read-mode direct", "direct, asked (--read-mode): " },
		{ "--buffered", "buffered, asked (--read-mode): " },
		{ "--read-mode buffered --staging-budget 1M", "buffered, asked (--read-mode): " },
		{ "--read-mode direct --staging-budget 1M", "direct, asked (--read-mode): " },
		{ "--read-mode auto", "auto: " },
	};
	const char *p;

	NEED_SAMPLE(p);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]) && !th_failed(); c++) {
		cJSON *j;

		CHECKF(RL("load %s --json --quiet %s", p, cases[c].args) == 0, "%s: %s",
		       cases[c].args, err_s);
		j = json_out();
		CHECKF(j && strstr(json_read_mode(j), cases[c].says), "%s: %s", cases[c].args,
		       out_s);
		cJSON_Delete(j);
	}
	CHECK(RL("load %s --buffered --read-mode direct", p) == 2 &&
	      strstr(err_s, "--buffered is --read-mode buffered: not with --read-mode direct"));
	CHECK(RL("load %s --read-mode fast", p) == 2 && strstr(err_s, "read-mode"));
}

/*
 * plan breaks the planned process down by device (it showed only the
 * process's totals): each device's id, shards and staging bytes, in the
 * table and in the JSON, adding up to the process's needed bytes.
 */
static void plan_per_device(void)
{
	const cJSON *devs, *d;
	uint64_t sum = 0, needed;
	cJSON *j;
	const char *p;

	NEED_SAMPLE(p);
	CHECKF(RL("plan %s --sharding %s --process 1", p, tmp_path("spec2.json")) == 0, "%s",
	       err_s);
	CHECKF(strstr(out_s, "devices of process 1:\ndevice     shards    staging_bytes\n2 ") &&
	       strstr(out_s, "\n3 "), "%s", out_s);
	CHECKF(RL("plan %s --sharding %s --process 1 --json", p, tmp_path("spec2.json")) == 0,
	       "%s", err_s);
	j = json_out();
	CHECKF(j, "%s", out_s);
	devs = cJSON_GetObjectItem(j, "devices");
	needed = (uint64_t)num(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "processes"), 0),
			       "needed_bytes");
	CHECKF(cJSON_GetArraySize(devs) == 2, "%s", out_s);
	for (int i = 0; i < 2; i++) {
		d = cJSON_GetArrayItem(devs, i);
		CHECKF(num(d, "id") == 2 + i && num(d, "shards") > 0, "%s", out_s);
		sum += (uint64_t)num(d, "staging_bytes");
	}
	cJSON_Delete(j);
	CHECKF(sum >= needed && needed > 0, "staging %llu, needed %llu", (unsigned long long)sum,
	       (unsigned long long)needed);
}

/* ------------------------------------------------------------------ */
/* --out                                                               */
/* ------------------------------------------------------------------ */

/* The box of tensor t on device k of 2 (rows split for t0-t2, columns for t3-t5). */
static void expected_box(const struct rt *t, unsigned i, unsigned k, rl_shard_info *si)
{
	memset(si, 0, sizeof(*si));
	si->ndim = t->ndim;
	for (unsigned d = 0; d < t->ndim; d++) {
		si->shape[d] = t->shape[d];
		si->stop[d] = t->shape[d];
	}
	if (t->ndim && (i < 3 || t->ndim >= 2)) {
		unsigned d = i < 3 ? 0 : 1;
		uint64_t c = (t->shape[d] + 1) / 2;

		si->start[d] = c * k < t->shape[d] ? c * k : t->shape[d];
		si->stop[d] = c * (k + 1) < t->shape[d] ? c * (k + 1) : t->shape[d];
	}
	si->nbytes = t->itemsize;
	for (unsigned d = 0; d < t->ndim; d++)
		si->nbytes *= si->stop[d] - si->start[d];
}

static int dims_equal(const cJSON *a, const uint64_t *v, unsigned n)
{
	if (cJSON_GetArraySize(a) != (int)n)
		return 0;
	for (unsigned d = 0; d < n; d++)
		if ((uint64_t)cJSON_GetArrayItem(a, (int)d)->valuedouble != v[d])
			return 0;
	return 1;
}

/* DIR/<device>/manifest.json describes every shard exactly. */
static void check_manifest(const char *dir, unsigned dev_id, unsigned k, const struct rt *t,
			   const char *ckpt, uint64_t data_start)
{
	char path[2048], real[PATH_MAX];
	size_t n;
	char *text;
	cJSON *m, *sh;

	snprintf(path, sizeof(path), "%s/%u/manifest.json", dir, dev_id);
	text = slurp(path, &n);
	CHECKF(text, "no %s", path);
	m = cJSON_Parse(text);
	free(text);
	CHECKF(m, "%s is not JSON", path);
	CHECK(realpath(ckpt, real));
	CHECK_EQ(num(m, "device"), dev_id);
	sh = cJSON_GetObjectItem(m, "shards");
	CHECK_EQ(cJSON_GetArraySize(sh), 6);
	for (unsigned i = 0; i < 6; i++) {
		cJSON *s = cJSON_GetArrayItem(sh, (int)i);
		rl_shard_info want;

		expected_box(&t[i], i, k, &want);
		CHECK_STR(cJSON_GetObjectItem(s, "name")->valuestring, t[i].name);
		CHECK_STR(cJSON_GetObjectItem(s, "dtype")->valuestring, t[i].dtype);
		CHECK(dims_equal(cJSON_GetObjectItem(s, "shape"), want.shape, want.ndim));
		CHECK(dims_equal(cJSON_GetObjectItem(s, "start"), want.start, want.ndim));
		CHECK(dims_equal(cJSON_GetObjectItem(s, "stop"), want.stop, want.ndim));
		CHECK_EQ(num(s, "nbytes"), want.nbytes);
		snprintf(path, sizeof(path), "%s.bin", t[i].name);
		CHECK_STR(cJSON_GetObjectItem(s, "bin")->valuestring, path);
		CHECK_STR(cJSON_GetObjectItem(s, "source_file")->valuestring, real);
		CHECK_EQ(num(s, "source_offset"), data_start + t[i].off);
	}
	cJSON_Delete(m);
}

/* Every shard of a 2-device sharding lands in DIR/<device id>/<name>.bin
 * with the bytes of an independent slicing, and the manifests say so. */
static void out_files_and_manifest(void)
{
	struct rt t[6];
	uint64_t data_start, fsize;
	char path[1024];
	uint8_t *file;

	force_rank = 2;
	file = write_random_ckpt(tmp_path("cli.safetensors"), t, 6, &data_start, &fsize);
	force_rank = 0;
	CHECK(file);
	CHECK(write_text(tmp_path("cli.json"),
			  "{\"mesh\":{\"shape\":[2],\"axes\":[\"m\"],\"devices\":[5,7]},"
			  "\"rules\":[{\"match\":\"t[0-2]\",\"spec\":[\"m\"]},"
			  "{\"match\":\"t[3-5]\",\"spec\":[null,\"m\"]}]}") == 0);
	CHECKF(RL("load %s --sharding %s --out %s --verify --quiet", tmp_path("cli.safetensors"),
		  tmp_path("cli.json"), tmp_path("out")) == 0, "%s", err_s);
	for (unsigned k = 0; k < 2; k++) {
		for (unsigned i = 0; i < 6; i++) {
			rl_shard_info si;
			size_t n = 0;
			char *got;

			snprintf(path, sizeof(path), "%s/%u/%s.bin", tmp_path("out"), k ? 7 : 5,
				 t[i].name);
			got = slurp(path, &n);
			CHECKF(got, "missing %s", path);
			expected_box(&t[i], i, k, &si);
			CHECKF(n == si.nbytes, "%s: %zu bytes, %llu expected", path, n,
			       (unsigned long long)si.nbytes);
			CHECKF(slice_equal(file + data_start + t[i].off, t + i, &si, (uint8_t *)got),
			       "%s differs", path);
			free(got);
		}
		check_manifest(tmp_path("out"), k ? 7 : 5, k, t, tmp_path("cli.safetensors"),
			       data_start);
		if (th_failed())
			break;
	}
	free(file);
	CHECKF(RL("load %s/none.safetensors", th_tmpdir()) == 1 && count_lines(err_s) == 1, "%s",
	       err_s);
}

/* A U8 checkpoint of tensors names[i] with sizes[i] bytes (value i+1). */
static int write_u8_ckpt(const char *path, const char *const *names, const unsigned *sizes,
			 unsigned n)
{
	char hdr[4096];
	size_t h = 0, total = 0;
	uint64_t hlen;
	uint8_t *file;
	int ret;

	h += (size_t)snprintf(hdr + h, sizeof(hdr) - h, "{");
	for (unsigned i = 0; i < n; i++) {
		h += (size_t)snprintf(hdr + h, sizeof(hdr) - h,
				      "%s\"%s\":{\"dtype\":\"U8\",\"shape\":[%u],"
				      "\"data_offsets\":[%zu,%zu]}", i ? "," : "", names[i],
				      sizes[i], total, total + sizes[i]);
		total += sizes[i];
	}
	hdr[h++] = '}';
	while (h % 8)
		hdr[h++] = ' ';
	hlen = h;
	file = malloc(8 + h + total);
	if (!file)
		return -1;
	memcpy(file, &hlen, 8);
	memcpy(file + 8, hdr, h);
	for (unsigned i = 0, off = 0; i < n; off += sizes[i], i++)
		memset(file + 8 + h + off, (int)i + 1, sizes[i]);
	ret = write_bytes(path, file, 8 + h + total);
	free(file);
	return ret;
}

/*
 * --out failures: a DIR that is not a directory, a write failure (EFBIG
 * under `ulimit -f`: the line names the path, no summary, no DIR and no
 * partial directory left), a tensor whose name cannot be a file (named
 * before anything is read), a bad --sharding file named once.
 */
static void out_failures_leave_nothing(void)
{
	static const char *const names[] = { "a", "b/c%" };
	static const unsigned sizes[] = { 5000, 3000 };
	char longname[301], found[256], ck[512];
	const char *lname = longname;
	unsigned three = 3;
	struct stat sb;

	snprintf(ck, sizeof(ck), "%s", tmp_path("oe.safetensors"));
	CHECK(write_u8_ckpt(ck, names, sizes, 2) == 0);
	CHECKF(RL("load %s --out /dev/null --quiet", ck) == 1 && !*out_s, "%s", out_s);
	CHECKF(count_lines(err_s) == 1 && strstr(err_s, "/dev/null") &&
	       strstr(err_s, "not a directory"), "%s", err_s);
	/* writes past 1 KiB fail with EFBIG (SIGXFSZ ignored) */
	CHECKF(sh("sh -c \"trap '' XFSZ; ulimit -f 2; %s/ringload load %s --out %s --quiet\"",
		  build(), ck, tmp_path("oe_full")) == 1 && !*out_s, "%s", out_s);
	CHECKF(count_lines(err_s) == 1 && strstr(err_s, "oe_full.partial-") &&
	       strstr(err_s, ".bin: File too large"), "%s", err_s);
	CHECKF(nothing_named("oe_full", found, sizeof(found)), "%s left behind", found);
	/* the same, with room, succeeds and prints the summary after writing */
	CHECKF(RL("load %s --out %s", ck, tmp_path("oe_full")) == 0 &&
	       strstr(out_s, " bytes in "), "%s", err_s);
	CHECK(stat(tmp_path("oe_full/0/b%2Fc%25.bin"), &sb) == 0 && sb.st_size == 3000);
	/* 300-byte name: over NAME_MAX with .bin */
	memset(longname, 'x', 300);
	longname[300] = '\0';
	CHECK(write_u8_ckpt(tmp_path("oe_long.safetensors"), &lname, &three, 1) == 0);
	CHECKF(RL("load %s --out %s --quiet", tmp_path("oe_long.safetensors"),
		  tmp_path("longdump")) == 1 && !*out_s, "%s", out_s);
	CHECKF(count_lines(err_s) == 1 && strstr(err_s, "tensor \"xxxx") &&
	       strstr(err_s, "300 bytes"), "%s", err_s);
	CHECKF(nothing_named("longdump", found, sizeof(found)), "%s created", found);
	/* a missing --sharding file, and a spec error: the path once */
	CHECKF(RL("load %s --sharding %s/nonexistent.json", ck, th_tmpdir()) == 1, "%s", err_s);
	CHECKF(count_lines(err_s) == 1 && strstr(err_s, "nonexistent.json") &&
	       !strstr(strstr(err_s, "nonexistent.json") + 1, "nonexistent.json"), "%s", err_s);
	CHECK(write_text(tmp_path("unkaxis.json"),
			  "{\"mesh\":{\"shape\":[2],\"axes\":[\"m\"]},"
			  "\"rules\":[{\"match\":\"a\",\"spec\":[\"q\"]}]}") == 0);
	CHECKF(RL("load %s --sharding %s", ck, tmp_path("unkaxis.json")) == 1, "%s", err_s);
	CHECKF(count_lines(err_s) == 1 && strstr(err_s, "unkaxis.json") &&
	       !strstr(strstr(err_s, "unkaxis.json") + 1, "unkaxis.json"), "%s", err_s);
}

/* Checks JSON file f with Python: strict UTF-8, and its tensors' (or
 * shards') names are "" and "ok/x", their file (its _hex sibling) path. */
static int py_names_and_file(const char *f, const char *path)
{
	static const char check[] =
		"import json, os, sys\n"
		"d = json.loads(open(sys.argv[1], 'rb').read().decode('utf-8'))\n"
		"ts = d['tensors'] if 'tensors' in d else d['shards']\n"
		"key = 'file' if 'tensors' in d else 'source_file'\n"
		"got = sorted(os.fsencode(t['name']) for t in ts)\n"
		"assert got == [b'', b'ok/x'], got\n"
		"assert all('\\ufffd' in t[key] for t in ts), ts\n"
		"files = {os.path.realpath(bytes.fromhex(t[key + '_hex'])) for t in ts}\n"
		"assert files == {os.fsencode(os.path.realpath(sys.argv[2]))}, files\n";
	const char *py = getenv("RL_PYTHON");

	if (write_text(tmp_path("names.py"), check))
		return -1;
	return sh("%s %s %s '%s'", py && *py ? py : "python3", tmp_path("names.py"), f, path);
}

/* Parses JSON text with cJSON (the project's own parser): every tensor (or
 * shard) has a file (source_file) and a _hex sibling whose bytes end in
 * tail. 0, or -1. */
static int cjson_file_hex(const char *text, const char *tail)
{
	cJSON *d = cJSON_Parse(text), *t;
	const cJSON *ts = cJSON_GetObjectItem(d, "tensors");
	const char *key = ts ? "file_hex" : "source_file_hex";
	int ok = d != NULL;

	if (!ts)
		ts = cJSON_GetObjectItem(d, "shards");
	ok = ok && cJSON_GetArraySize(ts) > 0;
	cJSON_ArrayForEach(t, ts) {
		const char *hex = cJSON_GetStringValue(cJSON_GetObjectItem(t, key));
		char bytes[1024];
		size_t n = 0;

		for (unsigned b; hex && n + 1 < sizeof(bytes) && sscanf(hex, "%2x", &b) == 1;
		     hex += 2)
			bytes[n++] = (char)b;
		bytes[n] = '\0';
		ok = ok && n >= strlen(tail) && !strcmp(bytes + n - strlen(tail), tail);
	}
	cJSON_Delete(d);
	return ok ? 0 : -1;
}

/*
 * A checkpoint file whose name is not UTF-8 (Latin-1 "café"; tensor names
 * must be, the header check says), with a tensor named "": inspect --json
 * and the dump's manifest are UTF-8 JSON that Python and cJSON parse (a raw
 * 0xE9 made them invalid before; \udce9 then failed cJSON), U+FFFD in the
 * path and every byte in its _hex sibling, and "" is dumped as %00.bin (the
 * hidden ".bin" before).
 */
static void out_odd_names(void)
{
	static const char *const names[] = { "", "ok/x" };
	static const unsigned sizes[] = { 3, 7 };
	char ck[512], dir[512], path[1024], *text;
	struct stat sb;
	size_t n;

	if (run_cmd("command -v python3 >/dev/null") != 0 && !getenv("RL_PYTHON"))
		SKIP("needs python3 to read the JSON back");
	snprintf(ck, sizeof(ck), "%s", tmp_path("caf\xe9.safetensors"));
	snprintf(dir, sizeof(dir), "%s", tmp_path("odddump"));
	CHECK(write_u8_ckpt(ck, names, sizes, 2) == 0);
	CHECKF(RL("inspect %s --json", ck) == 0, "%s", err_s);
	CHECK(write_text(tmp_path("inspect.json"), out_s) == 0);
	CHECKF(py_names_and_file(tmp_path("inspect.json"), ck) == 0, "inspect --json: %s%s",
	       out_s, err_s);
	text = slurp(tmp_path("inspect.json"), &n);
	CHECKF(text && cjson_file_hex(text, "caf\xe9.safetensors") == 0, "cJSON: %s", text);
	free(text);
	CHECKF(RL("load %s --out %s --quiet", ck, dir) == 0, "%s", err_s);
	snprintf(path, sizeof(path), "%s/0/manifest.json", dir);
	CHECKF(py_names_and_file(path, ck) == 0, "manifest: %s%s", out_s, err_s);
	text = slurp(path, &n);
	CHECKF(text && cjson_file_hex(text, "caf\xe9.safetensors") == 0, "cJSON: %s", text);
	free(text);
	snprintf(path, sizeof(path), "%s/0/%%00.bin", dir);
	CHECKF(stat(path, &sb) == 0 && sb.st_size == 3, "no %s", path);
	snprintf(path, sizeof(path), "%s/0/.bin", dir);
	CHECKF(stat(path, &sb) < 0, "%s written", path);
}

/* An existing DIR is refused (untouched) unless --force, which replaces an
 * earlier dump, and only a dump. */
static void out_existing_dir_needs_force(void)
{
	char found[256], dir[512];
	struct stat sb;
	const char *p;

	NEED_SAMPLE(p);
	snprintf(dir, sizeof(dir), "%s", tmp_path("fdump"));
	CHECKF(RL("load %s --out %s --quiet", p, dir) == 0, "%s", err_s);
	CHECK(write_bytes(tmp_path("fdump/0/marker.bin"), "x", 1) == 0);
	CHECKF(RL("load %s --out %s --quiet", p, dir) == 1 && !*out_s, "%s", out_s);
	CHECKF(count_lines(err_s) == 1 && strstr(err_s, "fdump: exists (--force"), "%s", err_s);
	CHECK(stat(tmp_path("fdump/0/marker.bin"), &sb) == 0);
	CHECKF(RL("load %s --out %s --force --quiet", p, dir) == 0, "%s", err_s);
	CHECK(stat(tmp_path("fdump/0/marker.bin"), &sb) < 0 && errno == ENOENT);
	CHECK(stat(tmp_path("fdump/0/manifest.json"), &sb) == 0);
	CHECKF(nothing_named("fdump.", found, sizeof(found)), "%s left behind", found);
	/* not a dump: refused even with --force */
	CHECK(write_bytes(tmp_path("fdump/notes.txt"), "mine", 4) == 0);
	CHECKF(RL("load %s --out %s --force --quiet", p, dir) == 1 &&
	       strstr(err_s, "'notes.txt'"), "%s", err_s);
	CHECK(stat(tmp_path("fdump/notes.txt"), &sb) == 0);
	CHECKF(nothing_named("fdump.", found, sizeof(found)), "%s left behind", found);
	CHECK(unlink(tmp_path("fdump/notes.txt")) == 0);
	/* a numbered folder of the user's (a year, a run): refused, kept */
	CHECK(mkdir(tmp_path("fdump/2024"), 0755) == 0);
	CHECK(write_bytes(tmp_path("fdump/2024/thesis.tex"), "mine", 4) == 0);
	CHECKF(RL("load %s --out %s --force --quiet", p, dir) == 1 &&
	       strstr(err_s, "folder '2024' has no ringload manifest.json"), "%s", err_s);
	CHECK(stat(tmp_path("fdump/2024/thesis.tex"), &sb) == 0);
	/* and a file of the user's inside a dump's own folder */
	CHECK(unlink(tmp_path("fdump/2024/thesis.tex")) == 0 && rmdir(tmp_path("fdump/2024")) == 0);
	CHECK(write_bytes(tmp_path("fdump/0/thesis.tex"), "mine", 4) == 0);
	CHECKF(RL("load %s --out %s --force --quiet", p, dir) == 1 &&
	       strstr(err_s, "'0/thesis.tex'"), "%s", err_s);
	CHECK(stat(tmp_path("fdump/0/thesis.tex"), &sb) == 0);
}

/* --force without --out would replace nothing: a usage error, not a
 * silent success (exit 0 before). */
static void force_needs_out(void)
{
	const char *p;

	NEED_SAMPLE(p);
	CHECKF(RL("load %s --force --quiet", p) == 2 && strstr(err_s, "--force") &&
	       strstr(err_s, "needs --out") && !*out_s, "exit: %s%s", out_s, err_s);
}

/* ------------------------------------------------------------------ */
/* Signals                                                             */
/* ------------------------------------------------------------------ */

/* Starts build/ringload load with RINGLOAD_TEST_HOLD=hold, stderr to errf,
 * stdout to out_fd (-1: /dev/null; extra: one more option, or NULL). */
static pid_t spawn_load(const char *hold, const char *ckpt, const char *dir, const char *errf,
			const char *extra, int out_fd)
{
	char bin[1024];
	pid_t pid;

	snprintf(bin, sizeof(bin), "%s/ringload", build());
	fflush(stdout);  /* else the child's exit prints it again */
	pid = fork();
	if (pid == 0) {
		int fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd < 0 || dup2(fd, 2) < 0 ||
		    (out_fd >= 0 ? dup2(out_fd, 1) < 0 : !freopen("/dev/null", "w", stdout)))
			_exit(127);
		setenv("RINGLOAD_TEST_HOLD", hold, 1);
		execl(bin, bin, "load", ckpt, "--out", dir, "--verify", extra, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Waits up to secs for pid; its exit status, or -1 (then it is killed). */
static int wait_exit(pid_t pid, double secs)
{
	for (int i = 0; i < (int)(secs * 100); i++) {
		int st;

		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

/* Waits until file holds text (the command reached its hold). */
static int wait_text(const char *file, const char *text, pid_t pid)
{
	for (int i = 0; i < 6000; i++) {
		size_t n;
		char *s = slurp(file, &n);
		int hit = s && strstr(s, text);

		free(s);
		if (hit)
			return 1;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return 0;
		usleep(10000);
	}
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *cli_sig_name(int sig)
{
	return sig == SIGINT ? "SIGINT" : "SIGTERM";
}

/*
 * A signal in each phase: the command holds in the phase (a test hook that
 * waits in the phase's own polling place: the load's progress callback,
 * --verify's loop, the writer between chunks; "stuck" waits where nothing
 * polls, so the 1 s watchdog must act), then gets the signal and must exit
 * 128 + signal promptly, say why, and leave neither DIR nor DIR.partial-*.
 */
static void interrupt_in(const char *hold, int sig, const char *says, double limit)
{
	char found[256], errf[512], dir[512], *err;
	const char *p;
	double t0;
	size_t n;
	pid_t pid;
	int st;

	NEED_SAMPLE(p);
	snprintf(errf, sizeof(errf), "%s", tmp_path("sig.err"));
	snprintf(dir, sizeof(dir), "%s", tmp_path("sigdump"));
	unlink(errf);  /* the last test's lines must not count as this one's */
	pid = spawn_load(hold, p, dir, errf, NULL, -1);
	CHECK(pid > 0);
	if (!wait_text(errf, "holding in", pid)) {
		err = slurp(errf, &n);
		wait_exit(pid, 1);
		CHECKF(0, "%s: never held: %s", hold, err ? err : "");
	}
	t0 = now();
	kill(pid, sig);
	st = wait_exit(pid, 30);
	err = slurp(errf, &n);
	CHECKF(st == 128 + sig, "%s, %s: exit %d: %s", hold, cli_sig_name(sig), st, err);
	CHECKF(now() - t0 < limit, "%s: %.2f s from the signal to the exit", hold, now() - t0);
	CHECKF(err && strstr(err, cli_sig_name(sig)) && strstr(err, says) &&
	       (strstr(err, "no dump written") || !strcmp(hold, "stuck")), "%s: %s", hold, err);
	/* the phase itself stopped, midway, not the watchdog (except where nothing polls) */
	if (strcmp(hold, "stuck")) {
		const char *at = strstr(err, " bytes)");
		unsigned long long done = 0, todo = 0;

		while (at > err && at[-1] != '(')
			at--;
		CHECKF(!strstr(err, "did not stop") && at > err &&
		       sscanf(at, "%llu of %llu", &done, &todo) == 2 && done < todo,
		       "%s: not stopped midway: %s", hold, err);
	}
	free(err);
	CHECKF(nothing_named("sigdump", found, sizeof(found)), "%s: %s left behind", hold, found);
}

static void sigterm_while_reading(void)
{
	interrupt_in("read", SIGTERM, "interrupted by SIGTERM while reading", 3);
}

static void sigint_while_reading(void)
{
	interrupt_in("read", SIGINT, "interrupted by SIGINT while reading", 3);
}

static void sigterm_while_writing(void)
{
	interrupt_in("write", SIGTERM, "while writing the dump", 3);
}

static void sigint_while_writing(void)
{
	interrupt_in("write", SIGINT, "while writing the dump", 3);
}

static void sigint_while_verifying(void)
{
	interrupt_in("verify", SIGINT, "while verifying", 3);
}

/* An earlier dump at dir: device 0's manifest and n empty .bin files. */
static int old_dump(const char *dir, unsigned n)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/0", dir);
	if (mkdir(dir, 0755) < 0 || mkdir(path, 0755) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/0/manifest.json", dir);
	if (write_text(path, "{\"format\":\"ringload-dump\",\"version\":1,\"device\":0,\n"
		       "\"shards\":[]}\n"))
		return -1;
	for (unsigned i = 0; i < n; i++) {
		int fd;

		snprintf(path, sizeof(path), "%s/0/t%u.bin", dir, i);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd < 0 || close(fd) < 0)
			return -1;
	}
	return 0;
}

/* 1 when fd (a pipe's read end, empty) is at EOF now: no writer is left. */
static int at_eof(int fd)
{
	char c;

	fcntl(fd, F_SETFL, O_NONBLOCK);
	return read(fd, &c, 1) == 0;
}

/*
 * SIGINT while --force removes the old dump it replaced (n empty files;
 * 20.6 s for 100k before): the new dump is complete and stays, the
 * command exits 130 at once, and a process of its own removes the rest of
 * the old tree (renamed DIR.old-PID), which is soon gone. With stdout on a
 * pipe, EOF comes with the exit: the remover keeps none of the command's
 * fds (it held the pipe open for the whole removal before: 26.7 s for 20k
 * files on a slow disk; $(ringload ...) and | tee waited that long).
 */
static void interrupt_removal(unsigned nfiles, int piped)
{
	char name[64], gone[80], dir[512], errf[512], found[1024], *err;
	int st, fds[2] = { -1, -1 };
	const char *p;
	double t0;
	size_t n;
	pid_t pid;

	NEED_SAMPLE(p);
	snprintf(name, sizeof(name), "olddump%u%s", nfiles, piped ? "p" : "");
	snprintf(gone, sizeof(gone), "%s.", name);  /* DIR.old-PID */
	snprintf(dir, sizeof(dir), "%s", tmp_path(name));
	snprintf(errf, sizeof(errf), "%s", tmp_path("old.err"));
	CHECK(old_dump(dir, nfiles) == 0);
	CHECK(!piped || pipe2(fds, O_CLOEXEC) == 0);
	unlink(errf);
	pid = spawn_load("remove", p, dir, errf, "--force", fds[1]);
	CHECK(pid > 0);
	if (fds[1] >= 0)
		close(fds[1]);
	if (!wait_text(errf, "holding in", pid)) {
		err = slurp(errf, &n);
		wait_exit(pid, 1);
		CHECKF(0, "never held: %s", err ? err : "");
	}
	t0 = now();
	kill(pid, SIGINT);
	st = wait_exit(pid, 60);
	err = slurp(errf, &n);
	CHECKF(st == 130 && strstr(err, "the dump is complete") &&
	       strstr(err, "removed in the background"), "exit %d: %s", st, err);
	CHECKF(now() - t0 < 1.0 * TH_SLOW, "%.2f s from the signal to the exit", now() - t0);
	free(err);
	if (piped) {  /* at once: the old tree's removal takes ~1 s longer */
		int eof = at_eof(fds[0]);

		close(fds[0]);
		CHECKF(eof, "stdout still open after the exit (the background remover has it)");
	}
	snprintf(found, sizeof(found), "%s/0/t0.bin", dir);
	CHECKF(access(found, F_OK) < 0, "the old dump is still at %s", dir);
	snprintf(found, sizeof(found), "%s/0/manifest.json", dir);
	err = slurp(found, &n);
	CHECKF(err && strstr(err, "\"nbytes\""), "%s is not the new dump: %s", found, err);
	free(err);
	for (int i = 0; i < 3000 && !nothing_named(gone, found, sizeof(found)); i++)
		usleep(10000);
	CHECKF(nothing_named(gone, found, sizeof(found)), "%s left behind", found);
}

/* ringload load held before its signal thread starts (RINGLOAD_TEST_HOLD
 * start), SIGINT ignored in the child when ign (a background job's
 * disposition); goes on once resume exists. */
static pid_t spawn_held_at_start(const char *ckpt, const char *dir, const char *errf,
				 const char *resume, int ign)
{
	char bin[1024];
	pid_t pid;

	snprintf(bin, sizeof(bin), "%s/ringload", build());
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		int fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd < 0 || dup2(fd, 2) < 0 || !freopen("/dev/null", "w", stdout))
			_exit(127);
		signal(SIGINT, ign ? SIG_IGN : SIG_DFL);
		setenv("RINGLOAD_TEST_HOLD", "start", 1);
		setenv("RINGLOAD_TEST_RESUME", resume, 1);
		execl(bin, bin, "load", ckpt, "--out", dir, "--verify", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/*
 * Issue 32: a SIGINT that arrives before the signal thread starts cancels
 * the load like a later one (exit 130, no dump), whether the command
 * inherited SIGINT ignored (a background job: the signal was discarded and
 * the load ran to its end, exit 0) or at its default (it died of it).
 */
static void sigint_before_signal_thread(void)
{
	char errf[512], dir[512], resume[512], found[256], *err;
	const char *p;
	size_t n;

	NEED_SAMPLE(p);
	snprintf(errf, sizeof(errf), "%s", tmp_path("early.err"));
	snprintf(dir, sizeof(dir), "%s", tmp_path("earlydump"));
	snprintf(resume, sizeof(resume), "%s", tmp_path("early.resume"));
	for (int ign = 0; ign < 2; ign++) {
		pid_t pid;
		int st, fd;

		unlink(errf);
		unlink(resume);
		pid = spawn_held_at_start(p, dir, errf, resume, ign);
		CHECK(pid > 0);
		if (!wait_text(errf, "holding in start", pid)) {
			err = slurp(errf, &n);
			wait_exit(pid, 1);
			CHECKF(0, "never held: %s", err ? err : "");
		}
		kill(pid, SIGINT);
		usleep(50000); /* delivered (or discarded) before the thread starts */
		fd = open(resume, O_WRONLY | O_CREAT, 0644);
		CHECK(fd >= 0);
		close(fd);
		st = wait_exit(pid, 30);
		err = slurp(errf, &n);
		CHECKF(st == 130 && err && strstr(err, "interrupted by SIGINT"),
		       "SIGINT %s: exit %d: %s", ign ? "ignored" : "default", st, err ? err : "");
		free(err);
		CHECKF(nothing_named("earlydump", found, sizeof(found)), "%s left behind", found);
	}
	unlink(resume);
}

static void sigint_while_removing_old_dump(void)
{
	interrupt_removal(40000, 0);
}

static void removal_keeps_no_pipe_open(void)
{
	interrupt_removal(40000, 1);
}

/* Asked to stop after every entry, not every 256th: a few large files took
 * seconds before the first question (here: never asked, never held). */
static void removal_asks_each_entry(void)
{
	interrupt_removal(100, 0);
}

/* A library call that runs no callback: the watchdog exits after 1 s. */
static void sigterm_while_stuck(void)
{
	interrupt_in("stuck", SIGTERM, "did not stop within 1 s", 6);
}

/* ------------------------------------------------------------------ */
/* Users, installs, docs                                               */
/* ------------------------------------------------------------------ */

/* cp src dst; returns 0 or -1. */
static int copy_file(const char *src, const char *dst, mode_t mode)
{
	size_t n;
	char *b = slurp(src, &n);
	int r = b ? write_bytes(dst, b, n) : -1;

	free(b);
	return r == 0 && chmod(dst, mode) == 0 ? 0 : -1;
}

/*
 * As an unprivileged user with `ulimit -l 8192` (setpriv), the command loads
 * and verifies the same bytes; registration shrinks and says so. The user
 * cannot enter a private checkout (a mode-700 clone), so the test copies the
 * binary and the library it runs into its own 0755 directory.
 */
static void unprivileged_user(void)
{
	char dir[] = "/tmp/ringload-nobody-XXXXXX", src[PATH_MAX], dst[PATH_MAX], file[256];
	struct rt t[8];
	uint64_t data_start, fsize;
	uint8_t *bytes;
	int st;

	if (geteuid() != 0)
		SKIP("needs root, to switch to user nobody");
	if (run_cmd("command -v setpriv >/dev/null") != 0)
		SKIP("needs setpriv (util-linux)");
	CHECK(mkdtemp(dir));
	CHECK(chmod(dir, 0755) == 0);
	snprintf(src, sizeof(src), "%s/ringload", build());
	snprintf(dst, sizeof(dst), "%s/ringload", dir);
	st = copy_file(src, dst, 0755);
	snprintf(src, sizeof(src), "%s/libringload.so.0", build());
	snprintf(dst, sizeof(dst), "%s/libringload.so.0", dir);
	st = st ? st : copy_file(src, dst, 0755);
	snprintf(file, sizeof(file), "%s/u.safetensors", dir);
	bytes = st ? NULL : write_random_ckpt(file, t, 8, &data_start, &fsize);
	free(bytes);
	if (bytes && chmod(file, 0644) == 0)
		st = sh("setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "
			"'ulimit -l 8192 && %s/ringload load %s --verify --inflight-bytes 64M'", dir,
			file);
	snprintf(dst, sizeof(dst), "rm -rf %s", dir);
	run_cmd(dst);
	CHECKF(bytes, "cannot copy %s/ringload and its library into %s", build(), dir);
	CHECKF(st == 0, "exit %d: %s", st, err_s);
	CHECKF(strstr(out_s, " 0 differ"), "%s", out_s);
}

/* The Makefile's SAN for a sanitizer build directory, so make rebuilds nothing wrongly. */
static const char *san_of_build(void)
{
	const char *b = build();
	size_t n = strlen(b);

	if (n >= 5 && !strcmp(b + n - 5, "-asan"))
		return "asan";
	if (n >= 5 && !strcmp(b + n - 5, "-tsan"))
		return "tsan";
	return "";
}

/*
 * `make install` into DESTDIR with a prefix outside the loader's path: the
 * installed ringload runs and finds the installed library through its
 * rpath ($ORIGIN/../lib), the man pages and pkg-config file are there.
 */
static void make_install_runs(void)
{
	char bin[2048], ldd[4096], root[512];
	struct stat sb;
	const char *p;

	if (stat("Makefile", &sb) < 0 || stat("tools/ringload.c", &sb) < 0)
		SKIP("needs the repository's Makefile in the current directory (make test runs "
		     "there)");
	NEED_SAMPLE(p);
	snprintf(root, sizeof(root), "%s", tmp_path("destdir"));
	CHECKF(sh("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s install BUILD=%s SAN=%s "
		  "DESTDIR=%s PREFIX=/opt/rl", build(), san_of_build(), root) == 0,
	       "make install: %s%s", out_s, err_s);
	snprintf(bin, sizeof(bin), "%s/opt/rl/bin/ringload", root);
	CHECKF(sh("%s --version", bin) == 0 && strstr(out_s, RINGLOAD_VERSION_STRING), "%s",
	       err_s);
	CHECKF(sh("%s load %s --verify --quiet", bin, p) == 0, "%s", err_s);
	snprintf(ldd, sizeof(ldd), "%s/opt/rl/bin/../lib/libringload.so.0", root);
	CHECKF(sh("ldd %s", bin) == 0 && strstr(out_s, ldd), "not the installed library: %s",
	       out_s);
	snprintf(bin, sizeof(bin), "%s/opt/rl/share/man/man1/ringload.1", root);
	CHECKF(stat(bin, &sb) == 0, "no %s", bin);
	snprintf(bin, sizeof(bin), "%s/opt/rl/bin/rlperf", root);
	CHECKF(stat(bin, &sb) == 0 && (sb.st_mode & 0111), "no %s", bin);
	snprintf(bin, sizeof(bin), "%s/opt/rl/lib/pkgconfig/ringload.pc", root);
	CHECKF(stat(bin, &sb) == 0, "no %s", bin);
	/* The installed headers stand alone (ringload.h includes the installed
	 * ringload_types.h): an example builds from them and the library only. */
	CHECKF(sh("cc -Wall -Werror -I%s/opt/rl/include examples/stream_load.c -o %s/ex "
		  "-L%s/opt/rl/lib -lringload", root, root, root) == 0,
	       "an example against the installed header: %s", err_s);
}

/*
 * Open MPI installed after the build (make test's `make deps` brings it,
 * after the Makefile chose the MPI parts): `make install` builds
 * libringload_mpi and the --mpi plugin rather than fail on their absence.
 * Runs on a copy of the build without them.
 */
static void make_install_builds_mpi(void)
{
	char copy[512], root[512], path[1024];
	struct stat sb;

	if (stat("Makefile", &sb) < 0 || stat("mpi", &sb) < 0)
		SKIP("needs the repository's Makefile in the current directory (make test runs "
		     "there)");
	if (run_cmd("command -v mpicc >/dev/null") != 0)
		SKIP("needs Open MPI's mpicc (make deps installs it)");
	snprintf(copy, sizeof(copy), "%s", tmp_path("build-nompi"));
	snprintf(root, sizeof(root), "%s", tmp_path("destdir-mpi"));
	CHECKF(sh("rm -rf %s && cp -a %s %s && rm -f %s/libringload_mpi.so* %s/ringload-mpi.so",
		  copy, build(), copy, copy, copy) == 0, "copying %s: %s", build(), err_s);
	CHECKF(sh("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s install BUILD=%s SAN=%s "
		  "DESTDIR=%s PREFIX=/opt/rl", copy, san_of_build(), root) == 0,
	       "make install: %s%s", out_s, err_s);
	snprintf(path, sizeof(path), "%s/opt/rl/lib/libringload_mpi.so.0", root);
	CHECKF(stat(path, &sb) == 0, "no %s", path);
	snprintf(path, sizeof(path), "%s/opt/rl/lib/ringload/ringload-mpi.so", root);
	CHECKF(stat(path, &sb) == 0, "no %s", path);
	sh("rm -rf %s", copy);
}

/* Every option `--help` lists for a subcommand, as "--name". */
static size_t help_options(const char *cmd, char names[][40], size_t cap)
{
	size_t n = 0;

	if (RL("%s --help", cmd) != 0)
		return 0;
	for (const char *l = out_s; l && *l && n < cap; l = strchr(l, '\n') ? strchr(l, '\n') + 1
									    : NULL) {
		if (!strncmp(l, "  --", 4) && sscanf(l + 2, "%39[a-z-]", names[n]) == 1)
			n++;
	}
	return n;
}

/* man/ringload.1 renders without warnings; it and docs/cli.md name every option. */
static void man_page_and_docs_cover_options(void)
{
	char names[64][40], *man = NULL, *md;
	size_t n;

	if (stat("man/ringload.1", &(struct stat){ 0 }) < 0)
		SKIP("needs man/ringload.1 in the current directory (make test runs there)");
	md = slurp("docs/cli.md", &n);
	CHECK(md);
	if (run_cmd("command -v groff >/dev/null") == 0) {
		CHECKF(sh("groff -man -Tutf8 -ww -z man/ringload.1") == 0 && !*err_s && !*out_s,
		       "groff warns: %s", err_s);
		CHECK(sh("MANWIDTH=200 man -P cat -l man/ringload.1") == 0 && *out_s);
		man = strdup(out_s);
	}
	for (size_t c = 0; c < 3 && !th_failed(); c++) {
		size_t k = help_options(subcommands[c], names, 64);

		CHECKF(k >= 1, "%s --help lists no options", subcommands[c]);
		for (size_t i = 0; i < k; i++) {
			CHECKF(strstr(md, names[i]), "docs/cli.md lacks %s %s", subcommands[c],
			       names[i]);
			CHECKF(!man || strstr(man, names[i]), "man/ringload.1 lacks %s %s",
			       subcommands[c], names[i]);
		}
	}
	free(man);
	free(md);
	if (run_cmd("command -v groff >/dev/null") != 0)
		SKIP("rendering needs groff (make deps installs groff-base); the docs were checked");
}

int main(void)
{
	th_seed();
	RUN(size_parser);
	RUN(number_parsers);
	RUN(option_table);
	RUN(help_on_every_command);
	RUN(unknown_option_everywhere);
	RUN(equals_form);
	RUN(sizes_and_ranges);
	RUN(plan_one_process_by_default);
	RUN(plan_reports_staging);
	RUN(plan_per_device);
	RUN(load_reports_every_phase);
	RUN(load_json);
	RUN(load_read_modes);
	RUN(progress_on_a_terminal);
	RUN(out_files_and_manifest);
	RUN(out_failures_leave_nothing);
	RUN(out_existing_dir_needs_force);
	RUN(out_odd_names);
	RUN(force_needs_out);
	RUN(sigterm_while_reading);
	RUN(sigint_while_reading);
	RUN(sigterm_while_writing);
	RUN(sigint_while_writing);
	RUN(sigint_while_verifying);
	RUN(sigterm_while_stuck);
	RUN(sigint_while_removing_old_dump);
	RUN(sigint_before_signal_thread);
	RUN(removal_keeps_no_pipe_open);
	RUN(removal_asks_each_entry);
	RUN(unprivileged_user);
	RUN(make_install_runs);
	RUN(make_install_builds_mpi);
	RUN(man_page_and_docs_cover_options);
	free(out_s);
	free(err_s);
	return th_done();
}
