/*
 * harness.h - the tiny test harness every test program shares.
 *
 * A test is a void function; CHECK() failures print file:line and return
 * from it. th_run() prints one line per test ("ok", "FAIL", "skip") and
 * fails a test that leaks blocks from the library's allocator. th_done()
 * prints "N passed, N failed, N skipped" and returns the exit status.
 */
#ifndef TESTS_HARNESS_H
#define TESTS_HARNESS_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef void (*th_fn)(void);

void th_run(const char *name, th_fn fn);
int th_done(void);
void th_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void th_skip(const char *why);
int th_failed(void);

/*
 * Fixture sets, each laid out as ../shared/testdata/README.md says
 * (reference/ with MANIFEST.json, headers/ with EXPECTED.json): the one
 * tests/fixtures/gen_fixtures.py writes with safetensors' own writer
 * (RL_FIXTURES, else $RL_BUILD/testdata; make test writes it), and the Rust
 * reference's (RL_TESTDATA, else ../shared/testdata) where present.
 * th_fixture_sets() fills dirs with those present and returns how many.
 * th_on_fixture_sets(fn) runs fn(dir) on each until one fails, and skips
 * the test, naming what is missing and why, when none is present.
 */
#define TH_FIXTURE_SETS 2
int th_fixture_sets(const char *dirs[TH_FIXTURE_SETS]);
void th_on_fixture_sets(void (*fn)(const char *dir));
/* A fresh temporary directory for this program, removed by th_done(). */
const char *th_tmpdir(void);
/* The random seed: RL_SEED if set, else from the clock; printed once. */
uint64_t th_seed(void);
/* Runs the shell command cmd (stderr joined to stdout), keeps the first
 * cap - 1 bytes of its output in out (NUL-terminated). Returns its exit
 * status, or -1 when it could not run or was killed. */
int th_capture(const char *cmd, char *out, size_t cap);
/* Thread creation fails (EAGAIN) from the n-th following one (0-based)
 * on, until th_thread_fail_after(-1) (tests/seams/threads.c). Returns how
 * many creations were refused since the previous call. */
long th_thread_fail_after(long n);
/* xorshift64* generator seeded by th_seed(). */
uint64_t th_rand(void);
/*
 * Page-cache tests and another process's drop_caches (a benchmark beside
 * the tests): th_cache_drops() is how often the page cache was dropped since
 * boot (/proc/vmstat drop_pagecache; -1 where the kernel does not say);
 * th_cache_dropped_since(n) says whether it moved since it read n, waiting
 * a second for a drop under way (the kernel counts one when it is done), so
 * call it only when a residency check has failed, and skip then.
 */
long th_cache_drops(void);
int th_cache_dropped_since(long drops);
#define TH_CACHE_DROPPED "another process dropped the page cache during the test " \
	"(drop_pagecache in /proc/vmstat moved)"

/*
 * Runs fn(arg, msg, cap) in a child process for at most secs seconds and
 * returns what it returned, with the message it wrote copied into msg (cap
 * bytes, may be NULL); -ETIMEDOUT when it did not finish in time (the child
 * is killed), so that a hang fails one test rather than the program.
 */
typedef int (*th_child_fn)(void *arg, char *msg, size_t cap);
int th_within(int secs, th_child_fn fn, void *arg, char *msg, size_t cap);
/* Reads a whole file into a fresh NUL-terminated malloc'd buffer (its
 * length in *len when len is not NULL); NULL when it cannot. */
char *th_slurp(const char *path, size_t *len);

/*
 * Time limits of the tests that check something ends at once (a hang
 * fixed): sanitizer builds run several times slower, so they get more.
 */
#ifdef RL_SANITIZER
#define TH_SLOW 8
#else
#define TH_SLOW 1
#endif

#define CHECK(c) \
	do { \
		if (!(c)) { \
			th_fail(__FILE__, __LINE__, "%s", #c); \
			return; \
		} \
	} while (0)

#define CHECKF(c, ...) \
	do { \
		if (!(c)) { \
			th_fail(__FILE__, __LINE__, __VA_ARGS__); \
			return; \
		} \
	} while (0)

#define CHECK_EQ(a, b) \
	do { \
		long long th_a_ = (long long)(a), th_b_ = (long long)(b); \
		if (th_a_ != th_b_) { \
			th_fail(__FILE__, __LINE__, "%s == %s (%lld != %lld)", \
				#a, #b, th_a_, th_b_); \
			return; \
		} \
	} while (0)

#define CHECK_STR(a, b) \
	do { \
		const char *th_a_ = (a), *th_b_ = (b); \
		if (!th_a_ || !th_b_ || strcmp(th_a_, th_b_)) { \
			th_fail(__FILE__, __LINE__, "%s == %s (\"%s\" != \"%s\")", \
				#a, #b, th_a_ ? th_a_ : "(null)", \
				th_b_ ? th_b_ : "(null)"); \
			return; \
		} \
	} while (0)

#define SKIP(why) \
	do { \
		th_skip(why); \
		return; \
	} while (0)

#define RUN(fn) th_run(#fn, fn)

#endif /* TESTS_HARNESS_H */
