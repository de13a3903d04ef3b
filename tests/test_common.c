/* test_common.c - the base layer: allocation wrapper, errors, version. */
#include <errno.h>
#include <stdlib.h>

#include "harness.h"
#include "ringload.h"
#include "common.h"

static void alloc_counts_live_blocks(void)
{
	long live = cm_alloc_live();
	void *p = cm_malloc(10), *q = cm_calloc(3, 7);

	CHECK(p && q);
	CHECK_EQ(cm_alloc_live(), live + 2);
	p = cm_realloc(p, 1 << 20);
	CHECK(p);
	CHECK_EQ(cm_alloc_live(), live + 2);
	cm_free(p);
	cm_free(q);
	cm_free(NULL);
	CHECK_EQ(cm_alloc_live(), live);
}

static void alloc_overflow_is_refused(void)
{
	CHECK(cm_calloc(SIZE_MAX / 2, 3) == NULL);
	CHECK(cm_mallocarray(SIZE_MAX / 4, 8) == NULL);
}

static void alloc_fault_injection(void)
{
	void *a, *b;

	cm_alloc_fail_after(1);
	a = cm_malloc(8);
	b = cm_malloc(8);
	cm_alloc_fail_after(-1);
	CHECK(a != NULL);
	CHECK(b == NULL);
	cm_free(a);
}

static void grow_amortizes_and_refuses_overflow(void)
{
	uint64_t *a = NULL;
	size_t cap = 0, reallocs = 0, last = 0;

	for (size_t i = 0; i < 100000; i++) {
		CHECK(cm_grow((void **)&a, &cap, i + 1, sizeof(*a)) == 0);
		CHECK(cap > i);
		if (cap != last)
			reallocs++, last = cap;
		a[i] = i;
	}
	CHECK(reallocs < 40);                  /* geometric, not one per append */
	CHECK(cm_grow((void **)&a, &cap, 10, sizeof(*a)) == 0); /* never shrinks */
	CHECK(cap >= 100000 && a[99999] == 99999);
	CHECK(cm_grow((void **)&a, &cap, SIZE_MAX / 2, sizeof(*a)) == -ENOMEM);
	CHECK(cap >= 100000 && a[12345] == 12345); /* unchanged on failure */
	cm_alloc_fail_after(0);
	CHECK(cm_grow((void **)&a, &cap, cap + 1, sizeof(*a)) == -ENOMEM);
	cm_alloc_fail_after(-1);
	cm_free(a);
}

/*
 * cm_grow_big: contents kept across the move from the heap into a mapping
 * (at 1 MiB) and across mremap growth, one live block throughout, a failed
 * growth leaves the array as it was, and cm_free_big gives it all back.
 */
static void grow_big_keeps_contents_and_counts(void)
{
	long live = cm_alloc_live(), bytes = cm_alloc_live_bytes();
	uint64_t *a = NULL;
	size_t cap = 0, n = 3u << 20 >> 3;      /* 3 MiB of elements: two steps mapped */

	/* elements past a page would leave the mapping's length unknown */
	CHECK_EQ(cm_grow_big((void **)&a, &cap, 1000, 8192), -EINVAL);
	CHECK_EQ(cm_grow_big((void **)&a, &cap, 1000, 0), -EINVAL);
	CHECK(!a && !cap);
	for (size_t i = 0; i < n; i++) {
		CHECK(cm_grow_big((void **)&a, &cap, i + 1, sizeof(*a)) == 0);
		CHECK(cap > i);
		a[i] = i * 7;
	}
	CHECK_EQ(cm_alloc_live(), live + 1);
	CHECK(cm_alloc_live_bytes() - bytes >= (long)(n * sizeof(*a)));
	cm_alloc_fail_after(0);
	CHECK(cm_grow_big((void **)&a, &cap, cap + 1, sizeof(*a)) == -ENOMEM);
	cm_alloc_fail_after(-1);
	CHECK(cm_grow_big((void **)&a, &cap, SIZE_MAX / 4, sizeof(*a)) == -ENOMEM);
	for (size_t i = 0; i < n; i += 4099)
		CHECK_EQ(a[i], i * 7);
	CHECK_EQ(a[n - 1], (n - 1) * 7);
	cm_free_big(a, cap, sizeof(*a));
	cm_free_big(NULL, 0, sizeof(*a));
	CHECK_EQ(cm_alloc_live(), live);
	CHECK_EQ(cm_alloc_live_bytes(), bytes);
}

static void strerror_never_null(void)
{
	CHECK_STR(rl_strerror(RL_E_TRUNCATED), "file truncated");
	CHECK_STR(rl_strerror(-ENOENT), "No such file or directory");
	CHECK_STR(rl_strerror(-99999), "unknown error");
	CHECK_STR(rl_strerror(12345), "unknown error");
}

static void err_is_one_line(void)
{
	struct cm_err e;

	cm_err_clear(&e);
	CHECK_EQ(cm_err_set(&e, RL_E_SPEC, "rule %d:\nbad", 3), RL_E_SPEC);
	CHECK_STR(e.msg, "rule 3: bad");
}

/* A message naming a path of 3000 bytes keeps it whole (cut at 511 bytes
 * before); one past the record's size ends with "..." where it was cut. */
static void err_keeps_long_paths(void)
{
	static struct cm_err e;
	static char path[3001], huge[CM_ERRMSG_MAX + 100];
	size_t n;

	memset(path, 'p', sizeof(path) - 1);
	cm_err_set(&e, RL_E_SPEC, "%s: no such file", path);
	n = strlen(e.msg);
	CHECK_EQ(n, 3000 + strlen(": no such file"));
	memset(huge, 'h', sizeof(huge) - 1);
	cm_err_set(&e, RL_E_SPEC, "%s", huge);
	n = strlen(e.msg);
	CHECK_EQ(n, sizeof(e.msg) - 1);
	CHECK_STR(e.msg + n - 3, "...");
	/* the cut never splits a UTF-8 sequence ("\xe2\x82\xac", the euro sign,
	 * at every offset around it): valid UTF-8 before the "..." */
	for (size_t at = sizeof(e.msg) - 7; at < sizeof(e.msg) - 1; at++) {
		memset(huge, 'h', sizeof(huge) - 1);
		memcpy(huge + at, "\xe2\x82\xac", 3);
		cm_err_set(&e, RL_E_SPEC, "%s", huge);
		n = strlen(e.msg);
		CHECKF(n > 3 && !strcmp(e.msg + n - 3, "...") &&
		       ((unsigned char)e.msg[n - 4] < 0x80 ||
			!memcmp(e.msg + n - 6, "\xe2\x82\xac", 3)), "euro at %zu: cut in it", at);
	}
}

static void version_matches_header(void)
{
	CHECK_EQ(rl_version_number(), RINGLOAD_VERSION_NUMBER);
	CHECK_STR(rl_version_string(), RINGLOAD_VERSION_STRING);
}

int main(void)
{
	RUN(alloc_counts_live_blocks);
	RUN(alloc_overflow_is_refused);
	RUN(alloc_fault_injection);
	RUN(grow_amortizes_and_refuses_overflow);
	RUN(grow_big_keeps_contents_and_counts);
	RUN(strerror_never_null);
	RUN(err_is_one_line);
	RUN(err_keeps_long_paths);
	RUN(version_matches_header);
	return th_done();
}
