/*
 * test_stream_cli.c - `ringload load --staging-budget SIZE --out DIR`, run
 * as a user runs it (build/ringload): the dump equals whole staging's
 * (whole tensors, and a sharding that splits tensors along inner
 * dimensions over two devices), on every backend; the options it is not
 * valid with are usage errors; and the peak resident memory of the
 * command (VmHWM, from wait4's rusage of the child) loading a 2 GiB
 * checkpoint on tmpfs with a 256 MiB budget stays under budget + 128 MiB,
 * its dump equal to whole staging's (plain builds: a sanitizer's shadow
 * memory would be measured too).
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static const char *build(void)
{
	const char *b = getenv("RL_BUILD");

	return b && *b ? b : "build";
}

/* Runs argv (argv[0]: a path) with stdout and stderr to /dev/null (or to
 * errfile); returns its exit status (-1: not run or killed) and its peak
 * resident kilobytes in *maxrss_kb. */
static int run_rss(char *const argv[], const char *errfile, long *maxrss_kb)
{
	struct rusage ru;
	int st = 0;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		int err = errfile ? open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644) : null;

		dup2(null, 0);
		dup2(null, 1);
		dup2(err, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	if (wait4(pid, &st, 0, &ru) != pid)
		return -1;
	if (maxrss_kb)
		*maxrss_kb = ru.ru_maxrss;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A generated checkpoint of size at dir/c.safetensors. */
static int make_ckpt(const char *dir, const char *size)
{
	return sh("%s/mkckpt %s/c.safetensors --size %s >/dev/null", build(), dir, size);
}

/* ringload load of dir/c.safetensors into dir/out (extra: more options). */
static int load_to(const char *dir, const char *out, const char *extra, long *rss)
{
	char rl[512], ck[512], od[512], err[512], ex[512];
	char *argv[24];
	int n = 0;

	snprintf(rl, sizeof(rl), "%s/ringload", build());
	snprintf(ck, sizeof(ck), "%s/c.safetensors", dir);
	snprintf(od, sizeof(od), "%s/%s", dir, out);
	snprintf(err, sizeof(err), "%s/%s.err", dir, out);
	snprintf(ex, sizeof(ex), "%s", extra);
	argv[n++] = rl;
	argv[n++] = "load";
	argv[n++] = ck;
	argv[n++] = "--out";
	argv[n++] = od;
	argv[n++] = "--quiet";
	for (char *t = strtok(ex, " "); t && n < 22; t = strtok(NULL, " "))
		argv[n++] = t;
	argv[n] = NULL;
	n = run_rss(argv, err, rss);
	if (n != 0)
		sh("cat %s", err);
	return n;
}

static const char spec2[] =
	"{\"mesh\":{\"shape\":[2],\"axes\":[\"m\"]},\"rules\":["
	"{\"match\":\".*(q|k|v)_proj.*\",\"spec\":[\"m\",null]},"
	"{\"match\":\".*(o|down)_proj.*\",\"spec\":[null,\"m\"]}]}";

/* Small checkpoints: the streaming dump equals whole staging's. */
static void same_dump(void)
{
	static const char *const backends[] = { "io_uring", "libaio", "pread" };
	const char *dir = th_tmpdir();
	char extra[1200], spec[512];
	FILE *f;

	CHECK(make_ckpt(dir, "24M") == 0);
	snprintf(spec, sizeof(spec), "%s/spec.json", dir);
	f = fopen(spec, "w");
	CHECK(f && fputs(spec2, f) >= 0 && fclose(f) == 0);
	for (int sharded = 0; sharded < 2; sharded++) {
		snprintf(extra, sizeof(extra), "%s%s", sharded ? "--sharding " : "",
			 sharded ? spec : "");
		CHECK(load_to(dir, "whole", extra, NULL) == 0);
		for (int b = 0; b < 3; b++) {
			snprintf(extra, sizeof(extra), "--staging-budget %s --backend %s --workers %d%s%s",
				 b == 0 ? "64K" : b == 1 ? "2M" : "256K", backends[b], b == 2 ? 3 : 1,
				 sharded ? " --sharding " : "", sharded ? spec : "");
			CHECKF(load_to(dir, "str", extra, NULL) == 0, "%s", extra);
			CHECKF(sh("diff -r %s/whole %s/str", dir, dir) == 0, "%s: dumps differ", extra);
			sh("rm -rf %s/str", dir);
		}
		sh("rm -rf %s/whole", dir);
	}
}

static void usage_errors(void)
{
	const char *dir = th_tmpdir();

	CHECK(make_ckpt(dir, "1M") == 0);
	CHECK(load_to(dir, "u", "--staging-budget 1M --verify", NULL) == 2);
	CHECK(load_to(dir, "u", "--staging-budget 1M --staging caller", NULL) == 2);
	CHECK(load_to(dir, "u", "--staging-budget lots", NULL) == 2);
}

/* The checks of rss_bounded in dir (removed by the caller either way). */
static void rss_in(const char *dir)
{
	const uint64_t budget = 256ull << 20, slack = 128ull << 20;
	long rss_whole = 0, rss = 0;

	CHECK(make_ckpt(dir, "2G") == 0);
	CHECK(load_to(dir, "whole", "", &rss_whole) == 0);
	CHECK(load_to(dir, "str", "--staging-budget 256M", &rss) == 0);
	printf("    peak RSS: whole staging %ld MiB, --staging-budget 256M %ld MiB\n",
	       rss_whole >> 10, rss >> 10);
	CHECKF((uint64_t)rss * 1024 < budget + slack, "peak RSS %ld KiB", rss);
	CHECK(rss_whole > rss); /* the measure sees staging at all */
	CHECK(sh("diff -r %s/whole %s/str", dir, dir) == 0);
}

/* 2 GiB on tmpfs, budget 256 MiB: peak RSS under budget + 128 MiB. */
static void rss_bounded(void)
{
	char dir[] = "/dev/shm/rl-stream-XXXXXX";
	const char *san = getenv("RL_SAN");
	struct statvfs vs;

	if (san && *san) { /* TSan's shadow memory alone is several times the budget */
		th_skip("sanitizer build: its shadow memory counts in the RSS (the plain build checks the bound)");
		return;
	}
	if (statvfs("/dev/shm", &vs) < 0 || (uint64_t)vs.f_bavail * vs.f_frsize < (7ull << 30)) {
		th_skip("/dev/shm missing or under 7 GiB free (a 2 GiB checkpoint and two dumps)");
		return;
	}
	CHECK(mkdtemp(dir));
	rss_in(dir);
	sh("rm -rf %s", dir);
}

/* Starts ringload load ckpt --staging-budget 1M --out out --backend be
 * (RINGLOAD_TEST_HOLD=hold unless NULL), stderr to errf. */
static pid_t spawn_stream(const char *ckpt, const char *out, const char *be, const char *hold,
			  const char *errf)
{
	char bin[1024];
	pid_t pid;

	snprintf(bin, sizeof(bin), "%s/ringload", build());
	fflush(stdout);  /* else the child's exit prints it again */
	pid = fork();
	if (pid == 0) {
		int fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd < 0 || dup2(fd, 2) < 0 || !freopen("/dev/null", "w", stdout))
			_exit(127);
		if (hold)
			setenv("RINGLOAD_TEST_HOLD", hold, 1);
		execl(bin, bin, "load", ckpt, "--staging-budget", "1M", "--out", out, "--backend",
		      be, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Waits up to 30 s until path exists (text NULL) or holds text, or pid
 * ends; 1 when it does. */
static int wait_for(const char *path, const char *text, pid_t pid)
{
	for (int i = 0; i < 300000; i++) {
		size_t n;
		char *s = text ? th_slurp(path, &n) : NULL;
		int hit = text ? s && strstr(s, text) : access(path, F_OK) == 0;

		free(s);
		if (hit)
			return 1;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return 0;
		usleep(100);
	}
	return 0;
}

/* Nothing in dir starts with prefix within 30 s (a removal handed to a
 * child process may still run); else the name found. */
static const char *gone_soon(const char *dir, const char *prefix)
{
	static char found[256];

	for (int i = 0; i < 3000; i++) {
		DIR *d = opendir(dir);
		struct dirent *e;

		found[0] = '\0';
		while (d && (e = readdir(d)))
			if (!strncmp(e->d_name, prefix, strlen(prefix)))
				snprintf(found, sizeof(found), "%s", e->d_name);
		if (d)
			closedir(d);
		if (!found[0])
			return NULL;
		usleep(10000);
	}
	return found;
}

/* ringload load dir/many streaming into dir/sdump, SIGINT once it holds
 * in the read (in_read) or has begun device 0's folder of empty files;
 * the exit status, and its stderr in *err. */
static int interrupt_stream(const char *dir, const char *be, int in_read, char **err)
{
	char ckpt[512], out[512], errf[512], folder[600];
	pid_t pid;
	int st = -1;
	size_t n;

	snprintf(ckpt, sizeof(ckpt), "%s/many", dir);
	snprintf(out, sizeof(out), "%s/sdump", dir);
	snprintf(errf, sizeof(errf), "%s/sig.err", dir);
	unlink(errf);
	pid = spawn_stream(ckpt, out, be, in_read ? "read" : NULL, errf);
	if (pid < 0)
		return -1;
	snprintf(folder, sizeof(folder), "%s.partial-%d/0", out, (int)pid);
	if (in_read ? wait_for(errf, "holding in", pid) : wait_for(folder, NULL, pid))
		kill(pid, SIGINT);
	if (waitpid(pid, &st, 0) == pid)
		st = WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
	*err = th_slurp(errf, &n);
	return st;
}

/*
 * SIGINT while `--staging-budget --out` creates its 9004 empty files
 * (128 MB, before the read), and while it reads, on every backend: the command
 * stops there itself (the 1 s watchdog removed the partial directory while
 * the main thread went on filling it: 1 to 9000 files were left), exits 130
 * and leaves nothing named DIR*.
 */
static void sigint_while_streaming(void)
{
	static const char *const backends[] = { "io_uring", "libaio", "pread" };
	const char *dir = th_tmpdir();
	char *err = NULL;

	CHECK(sh("%s/mkckpt %s/many --size 200M --layers 1000 --files 2 >/dev/null", build(),
		 dir) == 0);
	for (int b = 0; b < 3; b++) {
		for (int in_read = 0; in_read < 2; in_read++) {
			int st = interrupt_stream(dir, backends[b], in_read, &err);
			const char *left = gone_soon(dir, "sdump");

			CHECKF(st == 130 && err && strstr(err, "interrupted by SIGINT while") &&
			       !strstr(err, "did not stop"), "%s, %s: exit %d: %s", backends[b],
			       in_read ? "reading" : "making the files", st, err ? err : "");
			CHECKF(!left, "%s: %s left behind", backends[b], left);
			free(err);
			err = NULL;
		}
	}
}

/* --json of a 1 MiB checkpoint under a 1 GiB budget: its windows (the
 * pool a CUDA load pins) hold the load, not the budget. */
static void json_pool_of_a_small_file(void)
{
	const char *dir = th_tmpdir();
	char path[512], text[8192];
	unsigned nwin = 0;
	unsigned long long wbytes = 0;
	const char *at;
	FILE *f;
	size_t n;

	CHECK(make_ckpt(dir, "1M") == 0);
	CHECK(sh("%s/ringload load %s/c.safetensors --staging-budget 1G --json --quiet >%s/j.json",
		 build(), dir, dir) == 0);
	snprintf(path, sizeof(path), "%s/j.json", dir);
	f = fopen(path, "r");
	CHECK(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	at = strstr(text, "\"stream\":{");
	CHECKF(at && sscanf(at, "\"stream\":{\"windows\":%u,\"window_bytes\":%llu", &nwin,
			    &wbytes) == 2, "%s", text);
	CHECKF(nwin >= 1 && nwin * wbytes <= 4u << 20, "%u windows of %llu bytes", nwin, wbytes);
}

/* The number after "key": in text (-1: absent). */
static long long json_num(const char *text, const char *key)
{
	char k[64];
	const char *p;

	snprintf(k, sizeof(k), "\"%s\":", key);
	p = strstr(text, k);
	return p ? strtoll(p + strlen(k), NULL, 10) : -1;
}

/* stdout of a shell command, at most n - 1 bytes (NULL: not run or failed). */
static char *sh_out(char *buf, size_t n, const char *cmd)
{
	FILE *f = popen(cmd, "r");
	size_t got;

	if (!f)
		return NULL;
	got = fread(buf, 1, n - 1, f);
	buf[got] = '\0';
	return pclose(f) == 0 ? buf : NULL;
}

/*
 * Issue 32's reproducers (--staging-budget 64K --request-bytes 64M read
 * 424x the file, 1M/16M 10.4x): the request size is lowered to a 32nd of
 * the budget, with one line saying so, so bytes read stay the plan's at
 * that size plus a re-read of the reads at each window's edges, and bytes
 * in flight within a quarter of the budget; every backend, 1 and 3 workers.
 */
static void request_bigger_than_window(void)
{
	static const char *const backends[] = { "io_uring", "libaio", "pread" };
	static const struct { const char *budget, *req; long long b; } rep[] = {
		{ "64K", "64M", 64 << 10 }, { "1M", "16M", 1 << 20 } };
	const char *dir = th_tmpdir();
	char out[8192], cmd[2048];

	CHECK(make_ckpt(dir, "8M") == 0);
	for (size_t i = 0; i < 2; i++) {
		long long cap = rep[i].b / 32 < 4096 ? 4096 : rep[i].b / 32, plan, ranges;

		snprintf(cmd, sizeof(cmd), "%s/ringload plan %s/c.safetensors --chunk %lld --json",
			 build(), dir, cap);
		CHECK(sh_out(out, sizeof(out), cmd) != NULL);
		plan = json_num(out, "read_bytes");
		for (int w = 1; w <= 3; w += 2) {
			for (int b = 0; b < 3; b++) {
				long long rd, fl, req;

				snprintf(cmd, sizeof(cmd), "%s/ringload load %s/c.safetensors "
					 "--staging-budget %s --request-bytes %s --backend %s "
					 "--workers %d --json 2>%s/err", build(), dir, rep[i].budget,
					 rep[i].req, backends[b], w, dir);
				CHECKF(sh_out(out, sizeof(out), cmd) != NULL, "%s", cmd);
				rd = json_num(out, "bytes_read");
				fl = json_num(out, "peak_inflight");
				req = json_num(out, "request_bytes");
				ranges = json_num(out, "ranges");
				printf("    %s/%s %s, %d workers: read %lld (plan %lld, %lld ranges),"
				       " in flight %lld, requests %lld\n", rep[i].budget, rep[i].req,
				       backends[b], w, rd, plan, ranges, fl, req);
				CHECKF(plan > 0 && rd >= plan && rd <= plan + 2 * ranges * cap,
				       "read %lld, plan %lld", rd, plan);
				CHECKF(fl > 0 && fl <= rep[i].b / 4, "in flight %lld", fl);
				CHECK(req == cap);
				CHECK(sh("grep -q -- '--request-bytes .* lowered to %lld bytes, a 32nd "
					 "of --staging-budget %lld$' %s/err", cap, rep[i].b, dir) == 0);
			}
		}
	}
}

/* --json's "stream" of dir/c.safetensors under budget: the windows, the
 * pool's bytes and what sized it (out: at least 64 bytes). 0 or -1. */
static int json_pool(const char *dir, const char *budget, unsigned long long *wbytes,
		     unsigned *nwin, unsigned long long *pool, char *by, unsigned long long *medium)
{
	char path[512], text[8192];
	const char *at;
	FILE *f;
	size_t n;

	if (sh("%s/ringload load %s/c.safetensors --staging-budget %s --json --quiet >%s/j.json",
	       build(), dir, budget, dir) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/j.json", dir);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	at = strstr(text, "\"stream\":{");
	if (!at || sscanf(at, "\"stream\":{\"windows\":%u,\"window_bytes\":%llu", nwin, wbytes) != 2)
		return -1;
	at = strstr(at, "\"pool_bytes\":");
	if (!at || sscanf(at, "\"pool_bytes\":%llu,\"pool_by\":\"%63[^\"]\",\"medium\":{\"bytes\":%llu",
			  pool, by, medium) != 3) {
		printf("    %s\n", text);
		return -1;
	}
	return 0;
}

/* --json says how much the pool holds and why: a 256 MiB file under 256M
 * is sized by the medium (two windows, less than the budget), under 1M
 * by the budget (the medium is no smaller), and a 1 MiB file under 1G by
 * its staging. */
static void json_says_how_much_it_pinned(void)
{
	static const struct {
		const char *size, *budget, *by;
	} cases[] = {
		{ "256M", "256M", "medium" }, { "256M", "1M", "budget" }, { "1M", "1G", "load's staging" },
	};
	const char *dir = th_tmpdir();

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]) && !th_failed(); i++) {
		unsigned long long wbytes = 0, pool = 0, medium = 0;
		unsigned nwin = 0;
		char by[64] = "";

		CHECK(make_ckpt(dir, cases[i].size) == 0);
		CHECKF(json_pool(dir, cases[i].budget, &wbytes, &nwin, &pool, by, &medium) == 0,
		       "case %zu", i);
		CHECKF(!strcmp(by, cases[i].by) && pool == nwin * wbytes && pool > 0,
		       "case %zu: %u x %llu, pool %llu by %s (medium %llu)", i, nwin, wbytes, pool,
		       by, medium);
		if (i == 0)
			CHECKF(nwin == 2 && pool == medium && pool < (256ull << 20), "pool %llu", pool);
	}
}

int main(void)
{
	th_seed();
	RUN(same_dump);
	RUN(usage_errors);
	RUN(request_bigger_than_window);
	RUN(sigint_while_streaming);
	RUN(rss_bounded);
	RUN(json_pool_of_a_small_file);
	RUN(json_says_how_much_it_pinned);
	return th_done();
}
