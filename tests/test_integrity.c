/*
 * test_integrity.c - issue 11 items 5 and 7 through the public API, on
 * every backend with one worker and with three: a file rewritten in place,
 * touched (mtime only) or replaced by rename during the load (from the
 * progress callback, which runs on the loading thread while other reads
 * are in flight), or replaced between opening the checkpoint and loading;
 * SHA-256 on the I/O path: the right value passes (with small requests and
 * a small in-flight bound, so reads complete out of order and held bytes
 * pause the claims), one flipped byte fails naming the file and both
 * values, the Hugging Face cache layout (64 hex digits: expected; 40: a git
 * SHA-1, ignored), a load that reads part of a file refused (a plan missing
 * only the last byte too), data starting at the first read (a padded
 * header) hashed whole, an expected value wrong in its last byte, names
 * matched exactly or refused as ambiguous, the caller's staging (two
 * areas) hashed and byte-exact against library staging, a flipped byte
 * there failing too. Every load runs under a stall
 * alarm (a hashing bug fails the program, not hangs it). The CLI's
 * options: test_cli_integrity.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_util.h"
#include "harness.h"
#include "ringload.h"
#include "common.h"

static const unsigned worker_counts[] = { 1, 3 };
static rl_backend cur = RL_BACKEND_IO_URING;
static unsigned cur_workers = 1;

#define NT 8                 /* tensors */
#define TBYTES (96u << 10)   /* bytes each */

/* A loader on the current backend and workers, with small requests and a
 * small in-flight bound: many reads, completing out of order. */
static rl_loader *new_loader(void)
{
	rl_loader *ld = rl_loader_create();

	if (ld && (rl_loader_set(ld, RL_OPT_BACKEND, cur) < 0 ||
		   rl_loader_set(ld, RL_OPT_WORKERS, cur_workers) < 0 ||
		   rl_loader_set(ld, RL_OPT_REQUEST_BYTES, 16384) < 0 ||
		   rl_loader_set(ld, RL_OPT_INFLIGHT_BYTES, 65536) < 0)) {
		rl_loader_destroy(ld);
		return NULL;
	}
	return ld;
}

/*
 * A hashing load holds the chunks that arrive ahead of a file's cursor; a
 * bug there (a held chunk never hashed) stalls it for good, with every
 * worker paused. A load that has not ended in STALL_S seconds fails the
 * program with a line saying so, rather than hanging it.
 */
#define STALL_S (60 * TH_SLOW)

/* The handler's line, written by main (snprintf is not for handlers). */
static char stall_msg[128];

static void stalled(int sig)
{
	(void)sig;
	if (write(STDOUT_FILENO, stall_msg, strlen(stall_msg)) < 0)
		_exit(2);
	_exit(1);
}

/* ret = rl_loader_load(...) under the stall alarm. */
static int load_watched(rl_loader *ld, rl_ckpt *ck, rl_spec *spec, rl_plan **plan)
{
	int ret;

	alarm(STALL_S);
	ret = rl_loader_load(ld, ck, spec, 0, plan);
	alarm(0);
	return ret;
}

/* Opens path and loads it whole (spec NULL) or as spec says, within
 * STALL_S seconds. */
static int load(const char *path, const char *spec_json, rl_loader *ld)
{
	rl_ckpt *ck = rl_ckpt_create();
	rl_spec *spec = NULL;
	rl_plan *plan = NULL;
	int ret;

	if (!ck)
		return -ENOMEM;
	ret = rl_ckpt_open(ck, path);
	if (ret == 0 && spec_json) {
		spec = rl_spec_create();
		ret = spec ? rl_spec_parse(spec, spec_json, strlen(spec_json)) : -ENOMEM;
	}
	if (ret == 0)
		ret = load_watched(ld, ck, spec, &plan);
	rl_plan_destroy(plan);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
	return ret;
}

static rl_file_stats file_stats(const rl_loader *ld)
{
	rl_file_stats fs = { .size = sizeof(fs) };

	if (rl_loader_get_file_stats(ld, 0, &fs) < 0)
		fs.sha256_state = -1;
	return fs;
}

#define SKIP_BACKEND(ret, ld) \
	do { \
		if ((ret) == RL_E_BACKEND) { \
			rl_loader_destroy(ld); \
			SKIP("backend unavailable"); \
		} \
	} while (0)

/* ------------------------------------------------------------------ */
/* SHA-256 */

static void sha256_right_value_passes(void)
{
	char hex[65];
	const char *path = tmp_path("ok.safetensors");
	rl_load_stats x = { .size = sizeof(x) };
	rl_loader *ld = new_loader();
	rl_file_stats fs;
	struct stat st;
	int ret;

	CHECK(ld && write_hashed_ckpt(path, NT, TBYTES, hex) == 0 && stat(path, &st) == 0);
	CHECK_EQ(rl_loader_expect_sha256(ld, "ok.safetensors", hex), 0);
	ret = load(path, NULL, ld);
	SKIP_BACKEND(ret, ld);
	CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
	fs = file_stats(ld);
	CHECK_EQ(fs.sha256_state, RL_SHA256_MATCHED);
	CHECK_STR(fs.sha256, hex);
	CHECK_EQ(rl_loader_get_stats(ld, &x), 0);
	CHECK_EQ(x.bytes_hashed, st.st_size); /* the header too */
	CHECK_EQ(x.files_hashed, 1);
	CHECK(rl_loader_staging(ld, 0, NULL) != NULL);
	rl_loader_destroy(ld);
}

static void sha256_flipped_byte_fails(void)
{
	char hex[65], bad[65];
	const char *path = tmp_path("flip.safetensors");
	rl_loader *ld = new_loader();
	uint8_t b;
	int fd, ret;

	CHECK(ld && write_hashed_ckpt(path, NT, TBYTES, hex) == 0);
	fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	CHECK(pread(fd, &b, 1, 300000) == 1);
	b ^= 0x10;
	CHECK(pwrite(fd, &b, 1, 300000) == 1);
	close(fd);
	CHECK_EQ(rl_loader_expect_sha256(ld, path, hex), 0);
	ret = load(path, NULL, ld);
	SKIP_BACKEND(ret, ld);
	CHECKF(ret == RL_E_CHECKSUM, "%d %s", ret, rl_loader_errmsg(ld));
	CHECKF(strstr(rl_loader_errmsg(ld), "flip.safetensors: SHA-256 mismatch: expected ") &&
	       strstr(rl_loader_errmsg(ld), hex), "%s", rl_loader_errmsg(ld));
	CHECK(rl_loader_staging(ld, 0, NULL) == NULL); /* nothing handed out */
	CHECK_EQ(file_stats(ld).sha256_state, RL_SHA256_MISMATCH);
	/* The same file with its new value passes. */
	snprintf(bad, sizeof(bad), "%s", strstr(rl_loader_errmsg(ld), ", got ") + 6);
	CHECK_EQ(rl_loader_expect_sha256(ld, path, bad), 0);
	ret = load(path, NULL, ld);
	CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
	rl_loader_destroy(ld);
}

static void sha256_partial_read_refused(void)
{
	char hex[65];
	const char *path = tmp_path("part.safetensors");
	rl_loader *ld = new_loader();
	int ret;

	CHECK(ld && write_hashed_ckpt(path, NT, TBYTES, hex) == 0);
	CHECK_EQ(rl_loader_expect_sha256(ld, "part.safetensors", hex), 0);
	ret = load(path, "{\"tensors\": [\"t3\"]}", ld);
	SKIP_BACKEND(ret, ld);
	CHECKF(ret == RL_E_CHECKSUM && strstr(rl_loader_errmsg(ld), "part.safetensors: whole-file "
		"SHA-256 cannot be checked: this load reads only part of the file"),
	       "%d %s", ret, rl_loader_errmsg(ld));
	rl_loader_destroy(ld);
}

/*
 * A plan that misses the file's last byte (all of it but the last byte of
 * the last tensor) reads the file in part: refused before reading with the
 * documented error, not run and failed later.
 */
static void sha256_plan_missing_last_byte_refused(void)
{
	char hex[65], spec[1024];
	const char *path = tmp_path("tail.safetensors");
	rl_loader *ld = new_loader();
	int n, ret;

	CHECK(ld && write_hashed_ckpt(path, NT, TBYTES, hex) == 0);
	n = snprintf(spec, sizeof(spec), "{\"targets\": [{\"name\": \"x\", \"source\": \"t%d\", "
		     "\"slice\": [[0, %u]]}], \"tensors\": [\"x\"", NT - 1, TBYTES - 1);
	for (int i = 0; i < NT - 1; i++)
		n += snprintf(spec + n, sizeof(spec) - (size_t)n, ", \"t%d\"", i);
	snprintf(spec + n, sizeof(spec) - (size_t)n, "]}");
	CHECK_EQ(rl_loader_expect_sha256(ld, path, hex), 0);
	ret = load(path, spec, ld);
	SKIP_BACKEND(ret, ld);
	CHECKF(ret == RL_E_CHECKSUM && strstr(rl_loader_errmsg(ld), "tail.safetensors: whole-file "
		"SHA-256 cannot be checked: this load reads only part of the file"),
	       "%d %s", ret, rl_loader_errmsg(ld));
	rl_loader_destroy(ld);
}

/* ---- SHA-256 into the caller's staging ----------------------------- */

/* The plan of path replicated on two devices (two staging areas). */
static rl_plan *two_device_plan(const char *path, rl_ckpt **ck, rl_spec **spec)
{
	static const char js[] = "{\"mesh\":{\"shape\":[2],\"axes\":[\"x\"]},\"rules\":[]}";
	rl_plan *plan = rl_plan_create();

	*ck = rl_ckpt_create();
	*spec = rl_spec_create();
	if (!plan || !*ck || !*spec || rl_ckpt_open(*ck, path) < 0 ||
	    rl_spec_parse(*spec, js, strlen(js)) < 0 ||
	    rl_plan_set(plan, RL_PLAN_CHUNK_BYTES, 16384) < 0 || rl_plan_build(plan, *ck, *spec) < 0) {
		rl_plan_destroy(plan);
		return NULL;
	}
	return plan;
}

/* Loads plan into the caller's staging (areas 0 and 1, len bytes each)
 * expecting hex of name, within STALL_S seconds. */
static int caller_load(rl_loader *ld, const rl_plan *plan, uint8_t *area[2], size_t len,
		       const char *name, const char *hex)
{
	int ret = rl_loader_set(ld, RL_OPT_STAGING, RL_STAGING_CALLER);

	for (unsigned d = 0; d < 2 && ret == 0; d++)
		ret = rl_loader_set_staging(ld, d, area[d], len);
	if (ret == 0)
		ret = rl_loader_expect_sha256(ld, name, hex);
	alarm(STALL_S);
	if (ret == 0)
		ret = rl_loader_run(ld, plan);
	alarm(0);
	return ret;
}

/*
 * Caller staging with SHA-256: the file is hashed as the library's
 * staging hashes it, the areas hold exactly what a library-staged load
 * of the same plan holds; a byte flipped in the data fails the load
 * naming the file.
 */
static void sha256_caller_staging(void)
{
	char hex[65];
	const char *path = tmp_path("caller.safetensors");
	rl_load_stats x = { .size = sizeof(x) };
	rl_loader *ld = new_loader(), *ref = new_loader();
	rl_device_info di;
	rl_ckpt *ck = NULL;
	rl_spec *spec = NULL;
	rl_plan *plan;
	uint8_t *area[2] = { NULL, NULL }, b;
	int fd, ret;

	CHECK(ld && ref && write_hashed_ckpt(path, NT, TBYTES, hex) == 0);
	plan = two_device_plan(path, &ck, &spec);
	CHECK(plan && rl_plan_num_devices(plan) == 2 && rl_plan_device(plan, 0, &di) == 0);
	for (unsigned d = 0; d < 2; d++)
		CHECK((area[d] = rl_staging_alloc(di.staging_bytes)) != NULL);
	ret = rl_loader_run(ref, plan);
	SKIP_BACKEND(ret, ref);
	ret = caller_load(ld, plan, area, di.staging_bytes, "caller.safetensors", hex);
	CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
	CHECK_EQ(rl_loader_get_stats(ld, &x), 0);
	CHECK_EQ(x.files_hashed, 1);
	CHECK_EQ(file_stats(ld).sha256_state, RL_SHA256_MATCHED);
	for (unsigned d = 0; d < 2; d++)
		CHECK(memcmp(area[d], rl_loader_staging(ref, d, NULL), di.staging_bytes) == 0);
	rl_plan_destroy(plan);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
	fd = open(path, O_RDWR);
	CHECK(fd >= 0 && pread(fd, &b, 1, 200000) == 1);
	b ^= 0x80;
	CHECK(pwrite(fd, &b, 1, 200000) == 1);
	close(fd);
	plan = two_device_plan(path, &ck, &spec);
	CHECK(plan != NULL);
	ret = caller_load(ld, plan, area, di.staging_bytes, "caller.safetensors", hex);
	CHECKF(ret == RL_E_CHECKSUM && strstr(rl_loader_errmsg(ld), "caller.safetensors: SHA-256 "
					      "mismatch: expected ") && strstr(rl_loader_errmsg(ld), hex),
	       "%d %s", ret, rl_loader_errmsg(ld));
	for (unsigned d = 0; d < 2; d++)
		rl_staging_free(area[d], di.staging_bytes);
	rl_plan_destroy(plan);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
	rl_loader_destroy(ref);
	rl_loader_destroy(ld);
}

/* Data that starts exactly where the plan's first read starts (a header
 * padded to 4096 bytes) is still hashed whole, the header read apart. */
static void sha256_data_at_first_read(void)
{
	char hex[65];
	const char *path = tmp_path("pad.safetensors");
	rl_loader *ld = new_loader();
	int ret;

	CHECK(ld && write_hashed_ckpt_at(path, NT, TBYTES, 4096, hex) == 0);
	CHECK_EQ(rl_loader_expect_sha256(ld, path, hex), 0);
	ret = load(path, NULL, ld);
	SKIP_BACKEND(ret, ld);
	CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
	CHECK_EQ(file_stats(ld).sha256_state, RL_SHA256_MATCHED);
	rl_loader_destroy(ld);
}

/* An expected value wrong only in its last byte fails (a comparison that
 * stops short of the last byte would pass it). */
static void sha256_wrong_last_byte_fails(void)
{
	char hex[65];
	const char *path = tmp_path("last.safetensors");
	rl_loader *ld = new_loader();
	int ret;

	CHECK(ld && write_hashed_ckpt(path, NT, TBYTES, hex) == 0);
	hex[63] = hex[63] == '0' ? '1' : '0';
	CHECK_EQ(rl_loader_expect_sha256(ld, path, hex), 0);
	ret = load(path, NULL, ld);
	SKIP_BACKEND(ret, ld);
	CHECKF(ret == RL_E_CHECKSUM && strstr(rl_loader_errmsg(ld), hex), "%d %s", ret,
	       rl_loader_errmsg(ld));
	CHECK_EQ(file_stats(ld).sha256_state, RL_SHA256_MISMATCH);
	rl_loader_destroy(ld);
}

/*
 * A name is the file's path or its end after a '/': "model.safetensors"
 * does not name xmodel.safetensors; two names that both end a path are
 * ambiguous, not "the last wins" (regression: sub/a.safetensors, then
 * a.safetensors, checked sub/a.safetensors against a.safetensors' value);
 * the path itself decides.
 */
static void sha256_names_exact_or_ambiguous(void)
{
	char hex[65], other[65];
	const char *path = tmp_path("sub/a.safetensors"), *x = tmp_path("xmodel.safetensors");
	rl_loader *ld = new_loader();
	int ret;

	mkdir(tmp_path("sub"), 0755);
	CHECK(ld && write_hashed_ckpt(path, 2, 4096, hex) == 0);
	CHECK(write_hashed_ckpt(x, 2, 4096, other) == 0);
	CHECK_EQ(rl_loader_expect_sha256(ld, "model.safetensors", hex), 0);
	ret = load(x, NULL, ld);
	SKIP_BACKEND(ret, ld);
	CHECKF(ret == 0 && file_stats(ld).sha256_state == RL_SHA256_NONE, "%d %s", ret,
	       rl_loader_errmsg(ld));
	CHECK_EQ(rl_loader_expect_sha256(ld, "sub/a.safetensors", hex), 0);
	CHECK_EQ(rl_loader_expect_sha256(ld, "a.safetensors", other), 0);
	ret = load(path, NULL, ld);
	CHECKF(ret == RL_E_INVALID_ARG && strstr(rl_loader_errmsg(ld), "given for both "
	       "'sub/a.safetensors' and 'a.safetensors'"), "%d %s", ret, rl_loader_errmsg(ld));
	CHECK_EQ(rl_loader_expect_sha256(ld, path, hex), 0);
	ret = load(path, NULL, ld);
	CHECKF(ret == 0 && file_stats(ld).sha256_state == RL_SHA256_MATCHED, "%d %s", ret,
	       rl_loader_errmsg(ld));
	rl_loader_destroy(ld);
}

/* snapshots/rev/model.safetensors -> ../../blobs/<blob> in a fresh dir. */
static const char *hf_layout(const char *dir, const char *blob, const char *src)
{
	static char link[1024];
	char p[1024], target[512];

	snprintf(p, sizeof(p), "rm -rf %s && mkdir -p %s/blobs %s/snapshots/rev && "
		 "cp %s %s/blobs/%s", dir, dir, dir, src, dir, blob);
	if (system(p) != 0)
		return NULL;
	snprintf(link, sizeof(link), "%s/snapshots/rev/model.safetensors", dir);
	snprintf(target, sizeof(target), "../../blobs/%s", blob);
	return symlink(target, link) == 0 ? link : NULL;
}

static void sha256_hf_cache_layout(void)
{
	char hex[65], wrong[65], sha1[41], src[1024];
	const char *p;
	rl_loader *ld = new_loader();
	int ret;

	snprintf(src, sizeof(src), "%s", tmp_path("hf.safetensors")); /* tmp_path rotates */
	CHECK(ld && write_hashed_ckpt(src, NT, TBYTES, hex) == 0);
	p = hf_layout(tmp_path("hf1"), hex, src);
	CHECK(p);
	ret = load(p, NULL, ld);
	SKIP_BACKEND(ret, ld);
	CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
	CHECK_EQ(file_stats(ld).sha256_state, RL_SHA256_MATCHED);
	/* A blob whose name is not the file's SHA-256: corrupted. */
	memcpy(wrong, hex, sizeof(wrong));
	wrong[0] = wrong[0] == '0' ? '1' : '0';
	p = hf_layout(tmp_path("hf2"), wrong, src);
	CHECK(p);
	ret = load(p, NULL, ld);
	CHECKF(ret == RL_E_CHECKSUM && strstr(rl_loader_errmsg(ld), wrong), "%d %s", ret,
	       rl_loader_errmsg(ld));
	/* ... not compared when the layout is not to be trusted. */
	CHECK_EQ(rl_loader_set(ld, RL_OPT_SHA256_HF, 0), 0);
	CHECK_EQ(load(p, NULL, ld), 0);
	CHECK_EQ(file_stats(ld).sha256_state, RL_SHA256_NONE);
	CHECK_EQ(rl_loader_set(ld, RL_OPT_SHA256_HF, 1), 0);
	/* A git blob SHA-1 (small files kept in git, not LFS): nothing to compare. */
	memcpy(sha1, hex, 40);
	sha1[40] = '\0';
	p = hf_layout(tmp_path("hf3"), sha1, src);
	CHECK(p);
	CHECK_EQ(load(p, NULL, ld), 0);
	CHECK_EQ(file_stats(ld).sha256_state, RL_SHA256_NONE);
	/* Read in part: not checked, and not an error (nobody asked). */
	p = hf_layout(tmp_path("hf4"), wrong, src);
	CHECK(p);
	CHECKF(load(p, "{\"tensors\": [\"t1\"]}", ld) == 0, "%s", rl_loader_errmsg(ld));
	CHECK_EQ(file_stats(ld).sha256_state, RL_SHA256_PARTIAL);
	rl_loader_destroy(ld);
}

/* ------------------------------------------------------------------ */
/* Files that change */

enum change { REWRITE, TOUCH, RENAME };

struct changer {
	const char *path;
	enum change how;
	int done;
};

/* The progress callback: once, while reads are in flight. */
static int change_file(void *user, uint64_t done, uint64_t total)
{
	struct changer *c = user;
	static const uint8_t zeros[4096];
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { 0, UTIME_NOW } };
	char tmp[1100];
	int fd;

	if (c->done || done >= total)
		return 0;
	c->done = 1;
	switch (c->how) {
	case REWRITE: /* dd conv=notrunc of zeros */
		fd = open(c->path, O_WRONLY);
		if (fd >= 0) {
			if (pwrite(fd, zeros, sizeof(zeros), 200000) < 0)
				c->done = -1;
			close(fd);
		}
		break;
	case TOUCH:
		if (utimensat(AT_FDCWD, c->path, ts, 0) < 0)
			c->done = -1;
		break;
	case RENAME:
		snprintf(tmp, sizeof(tmp), "%s.new", c->path);
		if (write_bytes(tmp, zeros, sizeof(zeros)) < 0 || rename(tmp, c->path) < 0)
			c->done = -1;
		break;
	}
	return 0;
}

static int load_changing(enum change how, const char *name, rl_loader **ldp)
{
	char hex[65];
	struct changer c = { tmp_path(name), how, 0 };
	rl_loader *ld = new_loader();
	int ret;

	*ldp = ld;
	if (!ld || write_hashed_ckpt(c.path, NT, TBYTES, hex) < 0)
		return -ENOMEM;
	rl_loader_set_callbacks(ld, NULL, change_file, &c);
	ret = load(c.path, NULL, ld);
	return c.done == 1 || ret == RL_E_BACKEND ? ret : -EPROTO;
}

static void rewritten_in_place_mid_load(void)
{
	rl_loader *ld;
	int ret = load_changing(REWRITE, "rw.safetensors", &ld);

	SKIP_BACKEND(ret, ld);
	CHECKF(ret == RL_E_FILE_CHANGED && strstr(rl_loader_errmsg(ld),
		"rw.safetensors: file changed during load"), "%d %s", ret, rl_loader_errmsg(ld));
	CHECK(rl_loader_staging(ld, 0, NULL) == NULL);
	rl_loader_destroy(ld);
}

static void touched_mid_load(void)
{
	rl_loader *ld;
	int ret = load_changing(TOUCH, "touch.safetensors", &ld);

	SKIP_BACKEND(ret, ld);
	CHECKF(ret == RL_E_FILE_CHANGED && strstr(rl_loader_errmsg(ld),
		"touch.safetensors: file changed during load (modification time differs)"),
	       "%d %s", ret, rl_loader_errmsg(ld));
	rl_loader_destroy(ld);
}

/* Replaced by rename during the load: the open descriptors still read the
 * old file, whole and consistent, but the checkpoint at that path is now
 * another one: the load fails rather than hand out a stale checkpoint
 * (the unlink changes the old file's ctime; the path names another). */
static void replaced_by_rename_mid_load(void)
{
	rl_loader *ld;
	int ret = load_changing(RENAME, "mv.safetensors", &ld);

	SKIP_BACKEND(ret, ld);
	CHECKF(ret == RL_E_FILE_CHANGED && strstr(rl_loader_errmsg(ld),
		"mv.safetensors: file changed during load (replaced or removed"),
	       "%d %s", ret, rl_loader_errmsg(ld));
	rl_loader_destroy(ld);
}

/* Replaced (or rewritten) between opening the checkpoint and loading: the
 * header the plan came from no longer describes the file. */
static void replaced_between_open_and_load(void)
{
	char hex[65], other[1100];
	const char *path = tmp_path("stale.safetensors");
	rl_ckpt *ck = rl_ckpt_create();
	rl_loader *ld = new_loader();
	rl_plan *plan = NULL;
	int ret;

	CHECK(ck && ld && write_hashed_ckpt(path, NT, TBYTES, hex) == 0);
	snprintf(other, sizeof(other), "%s.new", path);
	CHECK(write_hashed_ckpt(other, NT, TBYTES, hex) == 0);
	CHECK_EQ(rl_ckpt_open(ck, path), 0);
	CHECK_EQ(rename(other, path), 0);
	ret = load_watched(ld, ck, NULL, &plan);
	rl_ckpt_destroy(ck);
	SKIP_BACKEND(ret, ld);
	CHECKF(ret == RL_E_FILE_CHANGED && strstr(rl_loader_errmsg(ld),
		"stale.safetensors: file changed since the checkpoint was opened"),
	       "%d %s", ret, rl_loader_errmsg(ld));
	CHECK(plan == NULL);
	rl_loader_destroy(ld);
}

/* rl_sha256_file and the incremental context against OpenSSL's one-shot
 * digest, on random bytes of a random length around the file reader's
 * 8 MiB chunk (the seed is printed). */
static void sha256_file_matches_openssl(void)
{
	size_t len = (8u << 20) - 4096 + (size_t)(th_rand() % 8192);
	uint8_t *buf = malloc(len), want[32], got[32];
	const char *path = tmp_path("random.bin");
	rl_sha256 *h = rl_sha256_create();
	unsigned n = 0;
	FILE *f;

	CHECK(buf && h);
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)th_rand();
	f = fopen(path, "wb");
	CHECK(f && fwrite(buf, 1, len, f) == len && fclose(f) == 0);
	CHECK(EVP_Digest(buf, len, want, &n, EVP_sha256(), NULL) && n == 32);
	CHECK_EQ(rl_sha256_file(path, got), 0);
	CHECKF(!memcmp(got, want, 32), "rl_sha256_file differs on %zu bytes", len);
	for (size_t off = 0, k; off < len; off += k) {
		k = 1 + (size_t)(th_rand() % (1 << 20));
		k = CM_MIN(len - off, k);
		CHECK_EQ(rl_sha256_update(h, buf + off, k), 0);
	}
	CHECK_EQ(rl_sha256_final(h, got), 0);
	CHECKF(!memcmp(got, want, 32), "rl_sha256_update differs on %zu bytes", len);
	rl_sha256_destroy(h);
	free(buf);
	unlink(path);
}

/* What sums files mean (sha256sum's format), line by line, and the
 * one-line errors naming SUMS:LINE. */
static void sums_file_lines(void)
{
	static const char a[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
	static const char A[] = "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD";
	static const struct { const char *text; const char *err; } bad[] = {
		{ "%s  x\nnonsense\n", "S:2: not '<64 hex digits>  <file name>'" },
		{ "%s x\n", "S:1: not '<64 hex digits>  <file name>'" },
		{ "%s  \n", "S:1: not '<64 hex digits>  <file name>'" },
		{ "\\%s  a\\tb\n", "S:1: a bad escape in the name" },
		{ "# c\n%s  x\n%s  y", "S:3: a NUL byte in the line" }, /* then "\0z" */
	};
	char text[512];
	rl_sums *s = rl_sums_create();
	rl_sums_entry en = { .size = sizeof(en) };
	size_t len;

	len = (size_t)snprintf(text, sizeof(text), "# comment\n\n%s  m.safetensors\r\n"
			       "%s *bin name\n\\%s  a\\\\b\\nc\\r\n%s  m.safetensors", a, A, a, a);
	CHECK_EQ(rl_sums_parse(s, "S", text, len), 4);
	CHECK_EQ(rl_sums_get(s, 0, &en), 0);
	CHECK(!strcmp(en.name, "m.safetensors") && en.line == 3 && !strcmp(en.hex, a));
	CHECK_EQ(rl_sums_get(s, 1, &en), 0);
	CHECK(!strcmp(en.name, "bin name") && en.line == 4 && !strcmp(en.hex, A));
	CHECK(!memcmp(en.sha256, "\xba\x78\x16\xbf", 4) && en.sha256[31] == 0xad);
	CHECK_EQ(rl_sums_get(s, 2, &en), 0);
	CHECK_STR(en.name, "a\\b\nc\r");
	CHECK_EQ(rl_sums_find(s, "m.safetensors"), 3); /* the last line naming it */
	rl_sums_destroy(s);
	for (size_t i = 0; i < CM_ARRAY_SIZE(bad); i++) {
		s = rl_sums_create();
		len = (size_t)snprintf(text, sizeof(text), bad[i].text, a, a);
		if (strstr(bad[i].err, "NUL"))
			len += (size_t)snprintf(text + len + 1, sizeof(text) - len - 1, "z") + 1;
		CHECK_EQ(rl_sums_parse(s, "S", text, len), RL_E_INVALID_ARG);
		CHECKF(strstr(rl_sums_errmsg(s), bad[i].err), "%zu: %s", i, rl_sums_errmsg(s));
		CHECK_EQ(rl_sums_count(s), 0);
		rl_sums_destroy(s);
	}
}

/* A file at path holding text. */
static int put(const char *path, const char *text)
{
	return write_bytes(path, text, strlen(text));
}

/* A one-tensor file ("z", U8 [4]) at path, its SHA-256 into hex. */
static int write_b(const char *path, char hex[65])
{
	static const char h[] = "{\"z\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}";
	uint8_t buf[8 + sizeof(h) - 1 + 4] = { sizeof(h) - 1 }, sha[32];

	memcpy(buf + 8, h, sizeof(h) - 1);
	if (write_bytes(path, buf, sizeof(buf)) < 0 || rl_sha256_file(path, sha) < 0)
		return -1;
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", sha[i]);
	return 0;
}

/*
 * Which file a name or a SUMS line means is the library's (rl_expect; the
 * CLI and Python call it): by identity relative to the checkpoint's
 * directory, a SUMS line relative to its own directory first, a second
 * value for a file however spelled refused naming both, warnings as lines.
 */
static void expect_names_resolved_once(void)
{
	char d[256], a[1200], b[1200], txt[1200], ha[65], hb[65], got[65];
	rl_ckpt *ck = rl_ckpt_create();
	rl_expect *x;

	snprintf(d, sizeof(d), "%s", tmp_path("xn"));
	snprintf(txt, sizeof(txt), "rm -rf %s && mkdir -p %s/ck %s/other", d, d, d);
	CHECK(system(txt) == 0);
	snprintf(a, sizeof(a), "%s/ck/a.safetensors", d);
	snprintf(b, sizeof(b), "%s/ck/b.safetensors", d);
	CHECK(write_hashed_ckpt(a, 1, 4096, ha) == 0 && write_b(b, hb) == 0);
	snprintf(txt, sizeof(txt), "%s/ck", d);
	CHECK_EQ(rl_ckpt_open(ck, txt), 0);
	x = rl_expect_create(ck, txt);
	CHECK(x && !rl_expect_create(NULL, txt));
	CHECK_EQ(rl_expect_given(x, "a.safetensors", ha), 0);
	snprintf(txt, sizeof(txt), "%s/ck/../ck/./a.safetensors", d);
	CHECK_EQ(rl_expect_given(x, txt, ha), 0); /* the same value again */
	CHECK_EQ(rl_expect_given(x, txt, hb), RL_E_INVALID_ARG);
	CHECKF(strstr(rl_expect_errmsg(x), "a.safetensors has another value from the one given "
		      "for a.safetensors"), "%s", rl_expect_errmsg(x));
	CHECK_EQ(rl_expect_given(x, "c.safetensors", ha), RL_E_INVALID_ARG);
	CHECKF(strstr(rl_expect_errmsg(x), "c.safetensors: not a file of the checkpoint (its "
		      "files: "), "%s", rl_expect_errmsg(x));
	CHECK_EQ(rl_expect_given(x, "a.safetensors", "12"), RL_E_INVALID_ARG);
	CHECK_EQ(rl_expect_get(x, 0, got), RL_EXPECT_GIVEN);
	CHECK_STR(got, ha);
	CHECK_EQ(rl_expect_get(x, 1, got), RL_EXPECT_NONE);
	CHECK_STR(got, "");
	CHECK_EQ(rl_expect_get(x, 2, got), -EINVAL);
	/* A SUMS elsewhere: b named relative to the checkpoint (nothing of that
	 * name beside the SUMS), a misspelled *.safetensors line warned of. */
	snprintf(txt, sizeof(txt), "%s  b.safetensors\n%s  bb.safetensors\n%s  config.json\n",
		 hb, hb, hb);
	snprintf(a, sizeof(a), "%s/other/SUMS", d);
	CHECK_EQ(put(a, txt), 0);
	CHECK_EQ(rl_expect_sums(x, a, NULL), 1);
	CHECK_EQ(rl_expect_get(x, 1, got), RL_EXPECT_SUMS);
	CHECK_STR(got, hb);
	CHECKF(strstr(rl_expect_warnings(x), "SUMS:2: bb.safetensors is no file of the "
		      "checkpoint: skipped\n") &&
	       strstr(rl_expect_warnings(x), "a.safetensors: no line in ") &&
	       !strstr(rl_expect_warnings(x), "config.json"), "%s", rl_expect_warnings(x));
	/* Two lines, two values for one file; a SUMS naming nothing. */
	rl_expect_destroy(x);
	snprintf(txt, sizeof(txt), "%s/ck", d);
	x = rl_expect_create(ck, txt);
	CHECK(x);
	snprintf(txt, sizeof(txt), "%s  b.safetensors\n%s  ./b.safetensors\n", hb, ha);
	CHECK_EQ(put(a, txt), 0);
	CHECK_EQ(rl_expect_sums(x, a, NULL), RL_E_INVALID_ARG);
	CHECKF(strstr(rl_expect_errmsg(x), "SUMS:2: ./b.safetensors has another value on "
		      "line 1"), "%s", rl_expect_errmsg(x));
	snprintf(txt, sizeof(txt), "%s  config.json\n", hb);
	CHECK_EQ(put(a, txt), 0);
	CHECK_EQ(rl_expect_sums(x, a, NULL), RL_E_INVALID_ARG);
	CHECKF(strstr(rl_expect_errmsg(x), "names none of the checkpoint's files"), "%s",
	       rl_expect_errmsg(x));
	CHECK_EQ(rl_expect_sums(x, "/nonexistent/SUMS", NULL), -ENOENT);
	rl_expect_destroy(x);
	rl_expect_destroy(NULL);
	rl_ckpt_destroy(ck);
}

/* The Hugging Face rule: a symlink to blobs/<64 hex> (any directory
 * above), not to xblobs/ or a 40-digit git SHA-1, nor a plain file. */
static void hf_blob_names(void)
{
	static const char h[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
	static const struct { const char *target; int want; } cases[] = {
		{ "../../blobs/%s", 1 }, { "blobs/%s", 1 }, { "/x/blobs/%s", 1 },
		{ "../../xblobs/%s", 0 }, { "../../blob/%s", 0 }, { "%s", 0 },
		{ "../../blobs/%.40s", 0 }, { "../../blobs/%s.tmp", 0 },
	};
	char link[600], target[600];
	uint8_t out[32];

	snprintf(link, sizeof(link), "%s", tmp_path("hflink"));
	for (size_t i = 0; i < CM_ARRAY_SIZE(cases); i++) {
		unlink(link);
		snprintf(target, sizeof(target), cases[i].target, h);
		CHECK_EQ(symlink(target, link), 0);
		memset(out, 0, sizeof(out));
		CHECKF(rl_hf_blob_sha256(link, out) == cases[i].want, "%s", target);
		CHECK(!cases[i].want || (out[0] == 0xba && out[31] == 0xad));
	}
	unlink(link);
	CHECK_EQ(put(link, "x"), 0);
	CHECK_EQ(rl_hf_blob_sha256(link, out), 0);
	CHECK_EQ(rl_hf_blob_sha256(NULL, out), -EINVAL);
	unlink(link);
}

static void select_backend(rl_backend b, unsigned workers)
{
	cur = b;
	cur_workers = workers;
}

int main(void)
{
	static const struct th_case tests[] = {
		{ "sha256_right_value_passes", sha256_right_value_passes },
		{ "sha256_flipped_byte_fails", sha256_flipped_byte_fails },
		{ "sha256_partial_read_refused", sha256_partial_read_refused },
		{ "sha256_wrong_last_byte_fails", sha256_wrong_last_byte_fails },
		{ "sha256_plan_missing_last_byte_refused", sha256_plan_missing_last_byte_refused },
		{ "sha256_data_at_first_read", sha256_data_at_first_read },
		{ "sha256_caller_staging", sha256_caller_staging },
		{ "sha256_names_exact_or_ambiguous", sha256_names_exact_or_ambiguous },
		{ "sha256_hf_cache_layout", sha256_hf_cache_layout },
		{ "rewritten_in_place_mid_load", rewritten_in_place_mid_load },
		{ "touched_mid_load", touched_mid_load },
		{ "replaced_by_rename_mid_load", replaced_by_rename_mid_load },
		{ "replaced_between_open_and_load", replaced_between_open_and_load },
	};

	snprintf(stall_msg, sizeof(stall_msg), "FAIL a load stalled: not done in %d s (hashing "
		 "held chunks that never drain?)\n", STALL_S);
	signal(SIGALRM, stalled);
	th_seed();
	RUN(sha256_file_matches_openssl);
	RUN(sums_file_lines);
	RUN(expect_names_resolved_once);
	RUN(hf_blob_names);
	run_on_every_backend(tests, CM_ARRAY_SIZE(tests), worker_counts,
			     CM_ARRAY_SIZE(worker_counts), select_backend);
	return th_done();
}
