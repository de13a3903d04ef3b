/* harness.c - see harness.h. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* Weak: a test program that loads the library with dlopen links none of
 * it (tests/test_dlopen.c), and then has no leak counter to check. */
extern long cm_alloc_live(void) __attribute__((weak));

static long live_blocks(void)
{
	return cm_alloc_live ? cm_alloc_live() : 0;
}

static int n_pass, n_fail, n_skip;
static int cur_failed, cur_skipped;
static char cur_skip_why[512];
static char tmpdir[256];
static uint64_t seed, rng_state;
static int seed_set;

void th_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stdout, "    %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	cur_failed = 1;
}

void th_skip(const char *why)
{
	cur_skipped = 1;
	snprintf(cur_skip_why, sizeof(cur_skip_why), "%s", why);
}

int th_failed(void)
{
	return cur_failed;
}

void th_run(const char *name, th_fn fn)
{
	long live = live_blocks();
	struct timespec t0, t1;

	cur_failed = cur_skipped = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fn();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (!cur_failed && !cur_skipped && live_blocks() != live) {
		fprintf(stdout, "    leaked %ld blocks\n", live_blocks() - live);
		cur_failed = 1;
	}
	double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
	if (cur_failed) {
		n_fail++;
		printf("FAIL %s (%.0f ms)\n", name, ms);
	} else if (cur_skipped) {
		n_skip++;
		printf("skip %s: %s\n", name, cur_skip_why);
	} else {
		n_pass++;
		printf("ok   %s (%.0f ms)\n", name, ms);
	}
	fflush(stdout);
}

int th_done(void)
{
	if (tmpdir[0]) {
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmpdir);
	}
	printf("%d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
	return n_fail ? 1 : 0;
}

/* The generated set's directory; its UNAVAILABLE file says why it is not
 * there (no safetensors in the venv). */
static const char *generated_dir(void)
{
	static char dir[512];
	const char *d = getenv("RL_FIXTURES"), *b = getenv("RL_BUILD");

	if (d && *d)
		return d;
	snprintf(dir, sizeof(dir), "%s/testdata", b && *b ? b : "build");
	return dir;
}

static const char *shared_dir(void)
{
	const char *d = getenv("RL_TESTDATA");

	return d && *d ? d : "../shared/testdata";
}

static int set_present(const char *dir)
{
	char p[600], q[600];

	snprintf(p, sizeof(p), "%s/reference/MANIFEST.json", dir);
	snprintf(q, sizeof(q), "%s/headers/EXPECTED.json", dir);
	return access(p, R_OK) == 0 && access(q, R_OK) == 0;
}

int th_fixture_sets(const char *dirs[TH_FIXTURE_SETS])
{
	int n = 0;

	if (set_present(generated_dir()))
		dirs[n++] = generated_dir();
	if (set_present(shared_dir()))
		dirs[n++] = shared_dir();
	return n;
}

/* Why no set is present: the generator's reason, else what is missing. */
static void skip_no_fixtures(void)
{
	char path[600], why[256] = "", msg[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/UNAVAILABLE", generated_dir());
	f = fopen(path, "r");
	if (!f || !fgets(why, sizeof(why), f))
		snprintf(why, sizeof(why), "%.120s not found (make test writes it with "
			 "tests/fixtures/gen_fixtures.py)", generated_dir());
	if (f)
		fclose(f);
	why[strcspn(why, "\n")] = '\0';
	snprintf(msg, sizeof(msg), "needs fixtures: %s; and no %.200s", why, shared_dir());
	th_skip(msg);
}

void th_on_fixture_sets(void (*fn)(const char *dir))
{
	const char *dirs[TH_FIXTURE_SETS];
	int n = th_fixture_sets(dirs);

	if (!n)
		skip_no_fixtures();
	for (int i = 0; i < n && !cur_failed; i++)
		fn(dirs[i]);
}

const char *th_tmpdir(void)
{
	if (!tmpdir[0]) {
		const char *base = getenv("RL_TMPDIR");

		snprintf(tmpdir, sizeof(tmpdir), "%s/rltest.XXXXXX",
			 base ? base : "/var/tmp");
		if (!mkdtemp(tmpdir)) {
			perror("mkdtemp");
			exit(2);
		}
	}
	return tmpdir;
}

uint64_t th_seed(void)
{
	if (!seed_set) {
		const char *s = getenv("RL_SEED");
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		seed = s ? strtoull(s, NULL, 0)
			 : (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
		if (!seed)
			seed = 1;
		rng_state = seed;
		seed_set = 1;
		printf("seed %" PRIu64 " (set RL_SEED to repeat)\n", seed);
	}
	return seed;
}

uint64_t th_rand(void)
{
	th_seed();
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

int th_capture(const char *cmd, char *out, size_t cap)
{
	char *full = malloc(strlen(cmd) + 8);
	FILE *f;
	size_t n;
	int st;

	if (!full)
		return -1;
	sprintf(full, "%s 2>&1", cmd);
	f = popen(full, "r");
	free(full);
	if (!f)
		return -1;
	n = fread(out, 1, cap - 1, f);
	out[n] = 0;
	while (fgetc(f) != EOF)         /* the rest: the command must not block */
		;
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int th_within(int secs, th_child_fn fn, void *arg, char *msg, size_t cap)
{
	struct { int code; char msg[1024]; } res = { -EIO, "" };
	struct pollfd pfd;
	int fds[2], st;
	pid_t pid;

	fflush(stdout);
	if (pipe(fds))
		return -EIO;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		res.code = fn(arg, res.msg, sizeof(res.msg));
		_exit(write(fds[1], &res, sizeof(res)) == sizeof(res) ? 0 : 1);
	}
	close(fds[1]);
	pfd = (struct pollfd){ .fd = fds[0], .events = POLLIN };
	if (pid < 0 || poll(&pfd, 1, secs * 1000) != 1) {
		if (pid > 0)
			kill(pid, SIGKILL);
		res.code = -ETIMEDOUT;
		snprintf(res.msg, sizeof(res.msg), "did not finish within %d s", secs);
	} else if (read(fds[0], &res, sizeof(res)) != sizeof(res)) {
		res.code = -EIO;
		snprintf(res.msg, sizeof(res.msg), "the child died");
	}
	close(fds[0]);
	if (pid > 0)
		waitpid(pid, &st, 0);
	if (msg && cap)
		snprintf(msg, cap, "%s", res.msg);
	return res.code;
}

char *th_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = n < 0 ? NULL : malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (buf) {
		buf[n] = '\0';
		if (len)
			*len = (size_t)n;
	}
	return buf;
}

long th_cache_drops(void)
{
	FILE *f = fopen("/proc/vmstat", "r");
	char line[128];
	long n = -1;

	if (!f)
		return -1;
	while (n < 0 && fgets(line, sizeof(line), f))
		if (sscanf(line, "drop_pagecache %ld", &n) != 1)
			n = -1;
	fclose(f);
	return n;
}

int th_cache_dropped_since(long drops)
{
	if (drops < 0)
		return 0;
	sleep(1);
	return th_cache_drops() != drops;
}
