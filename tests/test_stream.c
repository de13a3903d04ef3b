/*
 * test_stream.c - streaming staging (RL_STAGING_STREAM) on every backend,
 * with one worker and with three: random checkpoints under random
 * shardings (replicated tensors: one read, pieces on several devices)
 * with budgets from the smallest (64 KiB, one chunk of the plan) up,
 * pieces by callback and by pull, each assembled and compared byte for
 * byte with a whole-staging load of the same plan (every shard byte
 * exactly once); release from another thread; a runtime that never
 * releases (the load fails after the release timeout, the pieces it had
 * are intact); cancel from the callback and by finishing early (nothing
 * leaks; the held pieces still block a new load until released); the
 * arguments' checks; a caller's window pool, misaligned; SHA-256 while
 * streaming (random shardings, several devices, byte-exact, agreeing with
 * a whole load; a flipped byte fails naming the file, callback and pull).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "ckpt_util.h"
#include "common.h"
#include "engine_util.h"
#include "harness.h"
#include "plan_fixture.h"
#include "ringload.h"
#include "../engine/sizing.h"
#include "../exec/window.h"
#include "../exec/window_pool.h"

static rl_backend cur = RL_BACKEND_IO_URING;
static unsigned cur_workers = 1;

#define MIN_BUDGET (64 << 10)

static void select_backend(rl_backend b, unsigned workers)
{
	cur = b;
	cur_workers = workers;
}

/* A random checkpoint of n tensors (0: random count) under spec_json
 * (NULL: a random spec), as s.safetensors. */
static int fixture_new(struct fixture *f, unsigned n, const char *spec_json, uint64_t chunk)
{
	return fixture_random_ckpt(f, "s.safetensors", n, spec_json, chunk);
}

static int fixture_random(struct fixture *f, uint64_t chunk)
{
	return fixture_new(f, 0, NULL, chunk);
}


/* What a consumer assembled: each shard's bytes and how many arrived. */
struct assembly {
	struct fixture *f;
	rl_loader *ld;
	uint8_t **got;          /* per device, staging layout */
	uint64_t *bytes;        /* per shard */
	uint8_t **seen;         /* per device, per byte: landed once */
	size_t pieces, bad;
	int release;            /* release each piece at once */
	size_t cancel_at;       /* 1-based piece that cancels (0: none) */
	rl_piece held[64];      /* pieces kept (release 0) */
	size_t nheld;
};

static void assembly_init(struct assembly *a, struct fixture *f, rl_loader *ld)
{
	memset(a, 0, sizeof(*a));
	a->f = f;
	a->ld = ld;
	a->release = 1;
	a->got = calloc(f->ndev + 1, sizeof(*a->got));
	a->seen = calloc(f->ndev + 1, sizeof(*a->seen));
	a->bytes = calloc(rl_plan_num_shards(f->plan) + 1, sizeof(*a->bytes));
	for (unsigned d = 0; d < f->ndev; d++) {
		a->got[d] = calloc(f->ref_len[d] + 1, 1);
		a->seen[d] = calloc(f->ref_len[d] + 1, 1);
	}
}

static void assembly_free(struct assembly *a)
{
	for (unsigned d = 0; d < a->f->ndev; d++) {
		free(a->got[d]);
		free(a->seen[d]);
	}
	free(a->got);
	free(a->seen);
	free(a->bytes);
}

/* Takes one piece: checks it lies in its shard, copies it, counts it. */
static void take_piece(struct assembly *a, const rl_piece *p)
{
	rl_shard_info si;

	a->pieces++;
	if (rl_plan_shard(a->f->plan, p->shard, &si) < 0 || si.device != p->device ||
	    p->offset + p->length > si.nbytes || (p->length && !p->data)) {
		a->bad++;
		return;
	}
	for (uint64_t i = 0; i < p->length; i++) {
		uint64_t at = si.offset + p->offset + i;

		a->bad += a->seen[si.device][at]++ != 0;
	}
	if (p->length)
		memcpy(a->got[si.device] + si.offset + p->offset, p->data, p->length);
	a->bytes[p->shard] += p->length;
}

/* Every shard complete, every byte once, and equal to the oracle. */
static int assembly_matches(const struct assembly *a)
{
	const struct fixture *f = a->f;

	if (a->bad)
		return 0;
	for (size_t s = 0; s < rl_plan_num_shards(f->plan); s++) {
		rl_shard_info si;

		rl_plan_shard(f->plan, s, &si);
		if (a->bytes[s] != si.nbytes ||
		    memcmp(a->got[si.device] + si.offset, f->ref[si.device] + si.offset, si.nbytes))
			return 0;
	}
	return 1;
}

static int on_piece(void *user, const rl_piece *p)
{
	struct assembly *a = user;

	int cancel;

	take_piece(a, p);
	cancel = a->cancel_at && a->pieces == a->cancel_at;
	if (a->release && !cancel) /* the canceling piece is kept */
		a->bad += rl_loader_release(a->ld, p) != 0;
	else if (a->nheld < 64)
		a->held[a->nheld++] = *p;
	return cancel;
}

/* A streaming loader on the current backend and workers. */
static int stream_direct = RL_DIRECT_AUTO; /* RL_OPT_DIRECT of stream_loader's loaders */

static rl_loader *stream_loader(uint64_t budget)
{
	rl_loader *ld = rl_loader_create();

	if (ld && (rl_loader_set(ld, RL_OPT_BACKEND, cur) < 0 ||
		   rl_loader_set(ld, RL_OPT_DIRECT, stream_direct) < 0 ||
		   rl_loader_set(ld, RL_OPT_WORKERS, cur_workers) < 0 ||
		   rl_loader_set(ld, RL_OPT_STAGING, RL_STAGING_STREAM) < 0 ||
		   rl_loader_set(ld, RL_OPT_STAGING_BUDGET, (int64_t)budget) < 0)) {
		rl_loader_destroy(ld);
		return NULL;
	}
	return ld;
}

/* Pulls every piece on this thread; returns finish's result. */
static int pull_all(struct assembly *a)
{
	rl_piece p;
	int ret, fin;

	ret = rl_loader_start(a->ld, a->f->plan);
	if (ret < 0)
		return ret;
	while ((ret = rl_loader_next_piece(a->ld, &p, 10000)) == 1)
		on_piece(a, &p);
	fin = rl_loader_finish(a->ld);
	return ret < 0 ? ret : fin;
}

/* The byte limiter held: reads in flight never above a quarter of the
 * budget or the largest read (the plan's chunk); every needed byte read. */
static int limits_held(const rl_loader *ld, const struct fixture *f, uint64_t budget)
{
	uint64_t max_read = 0;
	rl_load_stats st = { .size = sizeof(st) };

	for (size_t i = 0; i < rl_plan_num_requests(f->plan); i++) {
		rl_request_info r;

		rl_plan_request(f->plan, i, &r);
		max_read = CM_MAX(max_read, r.length);
	}
	if (rl_loader_get_stats(ld, &st) < 0 || st.bytes_read < st.bytes_needed ||
	    st.peak_inflight > CM_MAX(budget / 4, max_read)) {
		printf("    peak in flight %llu, budget %llu, largest read %llu\n",
		       (unsigned long long)st.peak_inflight, (unsigned long long)budget,
		       (unsigned long long)max_read);
		return 0;
	}
	return 1;
}

/* One streaming load of f with budget, by callback or by pull. */
static int stream_once(struct fixture *f, uint64_t budget, int pull, int *match)
{
	rl_loader *ld = stream_loader(budget);
	struct assembly a;
	int ret;

	*match = 0;
	if (!ld)
		return -ENOMEM;
	assembly_init(&a, f, ld);
	if (pull) {
		ret = pull_all(&a);
	} else {
		rl_loader_set_piece_callback(ld, on_piece, &a);
		ret = rl_loader_run(ld, f->plan);
	}
	if (ret < 0 && ret != RL_E_BACKEND)
		printf("    budget %llu, %s: %s\n", (unsigned long long)budget,
		       pull ? "pull" : "callback", rl_loader_errmsg(ld));
	*match = assembly_matches(&a) && (ret < 0 || limits_held(ld, f, budget));
	assembly_free(&a);
	rl_loader_destroy(ld);
	return ret;
}

static void random_budgets(void)
{
	size_t loads = 0;

	for (int round = 0; round < 6 && !th_failed(); round++) {
		uint64_t chunk = 4096ull << (th_rand() % 6); /* 4 KiB .. 128 KiB */
		uint64_t budgets[3] = { MIN_BUDGET, CM_MAX(chunk, MIN_BUDGET),
					MIN_BUDGET + (th_rand() % (8u << 20)) };
		struct fixture f;
		int ret = fixture_random(&f, chunk);

		CHECKF(ret == 0, "round %d: fixture %d", round, ret);
		for (int b = 0; b < 3 && !th_failed(); b++) {
			int match, pull = (int)(th_rand() % 2);

			ret = stream_once(&f, budgets[b], pull, &match);
			if (ret == RL_E_BACKEND)
				break;
			CHECKF(ret == 0 && match, "round %d, chunk %llu, budget %llu, %s: %d, match %d",
			       round, (unsigned long long)chunk, (unsigned long long)budgets[b],
			       pull ? "pull" : "callback", ret, match);
			loads++;
		}
		fixture_free(&f);
		if (ret == RL_E_BACKEND) {
			th_skip("backend unavailable here");
			return;
		}
	}
	CHECK(loads > 0);
}

/* A fixture of 10 random tensors under spec_json (one process). */
static int fixture_spec(struct fixture *f, const char *spec_json, uint64_t chunk)
{
	return fixture_new(f, 10, spec_json, chunk);
}

/* Every tensor replicated on 3 devices: one read, copies to each; each
 * device's pieces complete and equal. */
static void deduplicated_shards(void)
{
	static const char spec[] = "{\"mesh\":{\"shape\":[3],\"axes\":[\"x\"]},\"rules\":[]}";
	struct fixture f;
	int ret = fixture_spec(&f, spec, 16384), match;

	CHECKF(ret == 0, "fixture %d", ret);
	CHECK(rl_plan_num_devices(f.plan) == 3);
	for (int pull = 0; pull < 2 && !th_failed(); pull++) {
		ret = stream_once(&f, MIN_BUDGET, pull, &match);
		if (ret == RL_E_BACKEND)
			break;
		CHECKF(ret == 0 && match, "%s: %d, match %d", pull ? "pull" : "callback", ret, match);
	}
	fixture_free(&f);
	if (ret == RL_E_BACKEND)
		th_skip("backend unavailable here");
}

/* ---- SHA-256 while streaming ------------------------------------- */

/* The SHA-256 of the file at path in hex; 0 or -1. */
static int file_sha256(const char *path, char hex[65])
{
	uint8_t md[32], buf[65536];
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	FILE *f = fopen(path, "rb");
	unsigned n = 0;
	size_t got;
	int ok = c && f && EVP_DigestInit_ex(c, EVP_sha256(), NULL);

	while (ok && (got = fread(buf, 1, sizeof(buf), f)) > 0)
		ok = EVP_DigestUpdate(c, buf, got);
	ok = ok && EVP_DigestFinal_ex(c, md, &n) && n == 32;
	for (int i = 0; ok && i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	EVP_MD_CTX_free(c);
	if (f)
		fclose(f);
	return ok ? 0 : -1;
}

/* One streaming load of f expecting hex for its file, by callback or
 * pull: its result, the error text in msg, *match as stream_once's, and
 * what it hashed. */
static int stream_sha(struct fixture *f, uint64_t budget, int pull, const char *hex,
		      int *match, char *msg, size_t len, rl_load_stats *x, rl_file_stats *fs)
{
	rl_loader *ld = stream_loader(budget);
	struct assembly a;
	int ret;

	*match = 0;
	if (!ld || rl_loader_expect_sha256(ld, "s.safetensors", hex) < 0) {
		rl_loader_destroy(ld);
		return -ENOMEM;
	}
	assembly_init(&a, f, ld);
	if (pull) {
		ret = pull_all(&a);
	} else {
		rl_loader_set_piece_callback(ld, on_piece, &a);
		ret = rl_loader_run(ld, f->plan);
	}
	snprintf(msg, len, "%s", rl_loader_errmsg(ld));
	*match = assembly_matches(&a) && (ret < 0 || limits_held(ld, f, budget));
	x->size = sizeof(*x);
	if (rl_loader_get_stats(ld, x) < 0)
		memset(x, 0, sizeof(*x));
	if (fs && rl_loader_get_file_stats(ld, 0, fs) < 0)
		fs->mode = -1;
	assembly_free(&a);
	rl_loader_destroy(ld);
	return ret;
}

/* What a whole-staging load of f's plan says of hex: 0, or the error;
 * what it hashed in *x. */
static int whole_sha(const struct fixture *f, const char *hex, rl_load_stats *x)
{
	rl_loader *ld = rl_loader_create();
	int ret = ld ? rl_loader_expect_sha256(ld, "s.safetensors", hex) : -ENOMEM;

	if (ret == 0)
		ret = rl_loader_run(ld, f->plan);
	x->size = sizeof(*x);
	if (!ld || rl_loader_get_stats(ld, x) < 0)
		memset(x, 0, sizeof(*x));
	rl_loader_destroy(ld);
	return ret;
}

/*
 * Random checkpoints under random shardings (several devices: a device's
 * windows go back to the start of the file, so the checksum cover reads
 * ahead of them), streamed with an expected SHA-256 under budgets from
 * the smallest: every load that a whole-staging load hashes passes,
 * byte-exact against the oracle, the whole file hashed once (a plan that
 * loads no tensor reads no file: nothing hashed, by either); one that it
 * refuses (the sharding reads part of the file) is refused alike.
 */
static void sha256_random_budgets(void)
{
	char hex[65], msg[512];

	for (int round = 0; round < 6 && !th_failed(); round++) {
		uint64_t chunk = 4096ull << (th_rand() % 6);
		uint64_t budgets[2] = { MIN_BUDGET, MIN_BUDGET + (th_rand() % (4u << 20)) };
		struct fixture f;
		struct stat st;
		rl_load_stats wx;
		int ret = fixture_random(&f, chunk), whole;

		CHECKF(ret == 0 && file_sha256(tmp_path("s.safetensors"), hex) == 0 &&
		       stat(tmp_path("s.safetensors"), &st) == 0, "round %d: fixture %d", round, ret);
		whole = whole_sha(&f, hex, &wx);
		CHECKF(whole < 0 || wx.files_hashed == 0 || wx.bytes_hashed == (uint64_t)st.st_size,
		       "round %d: whole load hashed %llu of %lld", round,
		       (unsigned long long)wx.bytes_hashed, (long long)st.st_size);
		for (int b = 0; b < 2 && !th_failed(); b++) {
			rl_load_stats x;
			int match, pull = (int)(th_rand() % 2);

			ret = stream_sha(&f, budgets[b], pull, hex, &match, msg, sizeof(msg), &x, NULL);
			if (ret == RL_E_BACKEND)
				break;
			CHECKF(ret == whole && (ret < 0 || (match && x.files_hashed == wx.files_hashed &&
							    x.bytes_hashed == wx.bytes_hashed)),
			       "round %d, %u devices, budget %llu, %s: %d (whole %d) %s, match %d, "
			       "hashed %llu of %lld", round, f.ndev, (unsigned long long)budgets[b],
			       pull ? "pull" : "callback", ret, whole, msg, match,
			       (unsigned long long)x.bytes_hashed, (long long)st.st_size);
			CHECKF(ret == 0 || strstr(msg, "cannot be checked"), "%s", msg);
		}
		fixture_free(&f);
		if (ret == RL_E_BACKEND)
			th_skip("backend unavailable here");
	}
}

/*
 * --read-mode buffered and direct while streaming: a random checkpoint,
 * evicted from the page cache (buffered reads then go through readahead
 * at any offset and length, no O_DIRECT alignment), streamed under the
 * smallest budget and a larger one with its SHA-256 expected: byte-exact,
 * the whole file hashed, and the file read in the mode asked, saying so.
 */
/* One streaming load of f in mode m[0] under budget (pull or callback):
 * whether it ends as the whole load does, byte-exact, hashing what the
 * whole load hashes (the file whole; nothing when the plan reads no file:
 * a random checkpoint may hold only empty tensors), the file read in mode
 * m[1] for the reason asked. 0 when it does, RL_E_BACKEND, or -1 with
 * the why in msg. */
static int read_mode_load(struct fixture *f, const int m[2], uint64_t budget, int pull,
			  const char *hex, uint64_t size, char *msg, size_t len)
{
	rl_load_stats w, x;
	rl_file_stats fs = { .size = sizeof(fs) };
	int match, whole = whole_sha(f, hex, &w), ret;
	char why[400];

	if (tu_evict(tmp_path("s.safetensors")) < 0) {
		snprintf(msg, len, "evict failed");
		return -1;
	}
	ret = stream_sha(f, budget, pull, hex, &match, why, sizeof(why), &x, &fs);
	if (ret == RL_E_BACKEND)
		return ret;
	if (ret == whole && (ret < 0 || (match && x.bytes_hashed == w.bytes_hashed &&
					 (w.bytes_hashed == 0 ||
					  (w.bytes_hashed == size && fs.mode == m[1] &&
					   fs.why == RL_WHY_ASKED)))))
		return 0;
	snprintf(msg, len, "mode %d, budget %llu: %d (whole %d) %s, match %d, hashed %llu "
		 "(whole %llu) of %llu, file mode %d why %d", m[0], (unsigned long long)budget,
		 ret, whole, why, match, (unsigned long long)x.bytes_hashed,
		 (unsigned long long)w.bytes_hashed, (unsigned long long)size, fs.mode, fs.why);
	return -1;
}

static void read_modes_streaming(void)
{
	static const int modes[][2] = { { RL_DIRECT_OFF, RL_FILE_BUFFERED },
					{ RL_DIRECT_ON, RL_FILE_DIRECT } };
	char hex[65], msg[600] = "";
	int ret = 0;

	for (size_t m = 0; m < CM_ARRAY_SIZE(modes) && ret == 0; m++) {
		uint64_t budgets[2] = { MIN_BUDGET, MIN_BUDGET + (th_rand() % (4u << 20)) };
		struct fixture f;
		struct stat st;

		ret = fixture_random(&f, 4096ull << (th_rand() % 6));
		CHECKF(ret == 0 && file_sha256(tmp_path("s.safetensors"), hex) == 0 &&
		       stat(tmp_path("s.safetensors"), &st) == 0, "fixture %d", ret);
		stream_direct = modes[m][0];
		for (int b = 0; b < 2 && ret == 0; b++)
			ret = read_mode_load(&f, modes[m], budgets[b], b, hex, (uint64_t)st.st_size,
					     msg, sizeof(msg));
		stream_direct = RL_DIRECT_AUTO; /* before any CHECK returns */
		fixture_free(&f);
	}
	if (ret == RL_E_BACKEND)
		th_skip("backend unavailable here");
	else
		CHECKF(ret == 0, "%s", msg);
}

/*
 * A byte flipped in a tensor's data after its SHA-256 was taken: the
 * streaming load fails with RL_E_CHECKSUM naming the file, by callback
 * and by pull, under the smallest budget (many windows) and a larger one;
 * with the flipped file's own value it passes, byte-exact.
 */
static void sha256_flipped_byte_streaming(void)
{
	static const char spec[] = "{\"mesh\":{\"shape\":[3],\"axes\":[\"x\"]},\"rules\":[]}";
	char hex[65], now[65], msg[512];
	const char *path = tmp_path("s.safetensors");
	struct fixture f;
	uint8_t b;
	FILE *fp;
	int ret = write_hashed_ckpt(path, 6, 40000, hex), match = 0;

	fp = ret == 0 ? fopen(path, "r+b") : NULL;
	CHECK(fp && fseek(fp, 100000, SEEK_SET) == 0 && fread(&b, 1, 1, fp) == 1);
	b ^= 0x01;
	CHECK(fseek(fp, 100000, SEEK_SET) == 0 && fwrite(&b, 1, 1, fp) == 1 && fclose(fp) == 0);
	CHECK(file_sha256(path, now) == 0 && strcmp(now, hex) != 0);
	for (int single = 0; single < 2 && !th_failed(); single++) {
		ret = fixture_build(&f, path, single ? "{}" : spec, single ? 2 : strlen(spec), 16384);
		CHECKF(ret == 0, "fixture %d", ret);
		for (int k = 0; k < 4 && !th_failed(); k++) {
			rl_load_stats x;
			uint64_t budget = k < 2 ? MIN_BUDGET : 1u << 20;

			ret = stream_sha(&f, budget, k % 2, hex, &match, msg, sizeof(msg), &x, NULL);
			if (ret == RL_E_BACKEND)
				break;
			CHECKF(ret == RL_E_CHECKSUM && strstr(msg, "s.safetensors: SHA-256 mismatch: "
							     "expected ") && strstr(msg, hex) && strstr(msg, now),
			       "%s, budget %llu: %d %s", k % 2 ? "pull" : "callback",
			       (unsigned long long)budget, ret, msg);
			ret = stream_sha(&f, budget, k % 2, now, &match, msg, sizeof(msg), &x, NULL);
			CHECKF(ret == 0 && match && x.files_hashed == 1, "%d %s, match %d", ret, msg,
			       match);
		}
		fixture_free(&f);
		if (ret == RL_E_BACKEND)
			th_skip("backend unavailable here");
	}
}

/* ---- release from another thread ---------------------------------- */

struct handoff {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	rl_piece q[256];
	size_t head, tail;
	int done;
	rl_loader *ld;
	size_t released, refused;
};

/* The releaser: takes pieces the puller handed over, releases them. */
static void *releaser(void *arg)
{
	struct handoff *h = arg;

	pthread_mutex_lock(&h->lock);
	for (;;) {
		while (h->head == h->tail && !h->done)
			pthread_cond_wait(&h->cond, &h->lock);
		if (h->head == h->tail)
			break;
		rl_piece p = h->q[h->head++ % 256];

		pthread_mutex_unlock(&h->lock);
		if (rl_loader_release(h->ld, &p) == 0)
			h->released++;
		else
			h->refused++;
		pthread_mutex_lock(&h->lock);
		pthread_cond_broadcast(&h->cond);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

static void hand_over(struct handoff *h, const rl_piece *p)
{
	pthread_mutex_lock(&h->lock);
	while (h->tail - h->head == 256)
		pthread_cond_wait(&h->cond, &h->lock);
	h->q[h->tail++ % 256] = *p;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

static void release_other_thread(void)
{
	struct handoff h;
	struct fixture f;
	struct assembly a;
	pthread_t tid;
	rl_piece p;
	int ret = fixture_random(&f, 8192), fin;

	CHECKF(ret == 0, "fixture %d", ret);
	memset(&h, 0, sizeof(h));
	pthread_mutex_init(&h.lock, NULL);
	pthread_cond_init(&h.cond, NULL);
	h.ld = stream_loader(MIN_BUDGET);
	CHECK(h.ld);
	assembly_init(&a, &f, h.ld);
	a.release = 0;
	CHECK(pthread_create(&tid, NULL, releaser, &h) == 0);
	ret = rl_loader_start(h.ld, f.plan);
	while (ret == 0 && (ret = rl_loader_next_piece(h.ld, &p, 10000)) == 1) {
		take_piece(&a, &p);
		hand_over(&h, &p);
		ret = 0;
	}
	fin = rl_loader_finish(h.ld);
	pthread_mutex_lock(&h.lock);
	h.done = 1;
	pthread_cond_broadcast(&h.cond);
	pthread_mutex_unlock(&h.lock);
	pthread_join(tid, NULL);
	pthread_cond_destroy(&h.cond);
	pthread_mutex_destroy(&h.lock);
	if (ret != RL_E_BACKEND) {
		CHECKF(ret == 0 && fin == 0, "%d %d: %s", ret, fin, rl_loader_errmsg(h.ld));
		CHECK(assembly_matches(&a));
		CHECKF(h.refused == 0 && h.released == a.pieces, "released %zu, refused %zu of %zu",
		       h.released, h.refused, a.pieces);
	}
	assembly_free(&a);
	rl_loader_destroy(h.ld);
	fixture_free(&f);
	if (ret == RL_E_BACKEND)
		th_skip("backend unavailable here");
}

/* ---- a runtime that never releases -------------------------------- */

/* Shards of f with bytes that start in the first window of budget. */
static unsigned first_window_shards(const struct fixture *f, uint64_t budget)
{
	unsigned n = 0;

	for (size_t s = 0; s < rl_plan_num_shards(f->plan); s++) {
		rl_shard_info si;

		n += rl_plan_shard(f->plan, s, &si) == 0 && si.nbytes && si.offset < budget;
	}
	return n;
}

/* Budget 64 KiB: one window; a checkpoint larger than it: the second
 * range waits for a release that never comes, then the load fails with
 * RL_E_RELEASE_TIMEOUT, the pieces it had intact, also after one of them
 * is released twice (RL_E_PIECE); once they are released the same loader
 * loads again. */
static void release_never(void)
{
	struct fixture f;
	struct assembly a;
	rl_loader *ld;
	int ret, match, tries = 0;
	char want[96];

	do { /* a checkpoint of more than one window, all on one device */
		ret = fixture_new(&f, 12, "{\"mesh\":{\"shape\":[1],\"axes\":[\"x\"]},"
				  "\"rules\":[]}", 8192);
		CHECKF(ret == 0, "fixture %d", ret);
		if ((f.ref_len[0] > 3 * MIN_BUDGET && first_window_shards(&f, MIN_BUDGET) > 1) ||
		    ++tries == 100)
			break;
		fixture_free(&f);
	} while (1);
	CHECK(f.ref_len[0] > 3 * MIN_BUDGET && first_window_shards(&f, MIN_BUDGET) > 1);
	ld = stream_loader(MIN_BUDGET);
	CHECK(ld);
	CHECK(rl_loader_set(ld, RL_OPT_RELEASE_TIMEOUT_MS, 200) == 0);
	assembly_init(&a, &f, ld);
	a.release = 0;
	rl_loader_set_piece_callback(ld, on_piece, &a);
	ret = rl_loader_run(ld, f.plan);
	if (ret != RL_E_BACKEND) {
		CHECKF(ret == RL_E_RELEASE_TIMEOUT && strstr(rl_loader_errmsg(ld), "rl_loader_release"),
		       "%d %s", ret, rl_loader_errmsg(ld));
		CHECK(a.pieces > 1 && a.nheld == a.pieces && a.bad == 0);
		/* A piece released twice while others of its window are held:
		 * refused, and the window stays theirs. */
		CHECK(rl_loader_release(ld, &a.held[0]) == 0);
		CHECK(rl_loader_release(ld, &a.held[0]) == RL_E_PIECE);
		/* issue 32: the message names the piece and its window */
		snprintf(want, sizeof(want), "piece %u of window %d (load ",
			 (unsigned)(uint32_t)a.held[0].token, (int)(a.held[0].token >> 56) - 1);
		CHECKF(strstr(rl_loader_errmsg(ld), want) &&
		       strstr(rl_loader_errmsg(ld), "released twice"), "%s", rl_loader_errmsg(ld));
		for (size_t i = 0; i < a.nheld; i++) { /* what it had is intact */
			rl_shard_info si;

			rl_plan_shard(f.plan, a.held[i].shard, &si);
			CHECK(!memcmp(a.held[i].data, f.ref[si.device] + si.offset + a.held[i].offset,
				      a.held[i].length));
		}
		CHECK(rl_loader_run(ld, f.plan) == RL_E_STATE); /* pieces still held */
		for (size_t i = 1; i < a.nheld; i++)
			CHECK(rl_loader_release(ld, &a.held[i]) == 0);
		CHECK(rl_loader_release(ld, &a.held[0]) == RL_E_PIECE); /* twice */
	}
	assembly_free(&a);
	rl_loader_destroy(ld);
	if (ret != RL_E_BACKEND) {
		ret = stream_once(&f, MIN_BUDGET, 0, &match);
		CHECKF(ret == 0 && match, "after releasing: %d", ret);
	}
	fixture_free(&f);
}

/* ---- cancel ------------------------------------------------------- */

/* The callback cancels at its 2nd piece (keeping it): RL_E_CANCELED,
 * nothing leaks (the harness counts the library's blocks), the piece
 * kept is still held and blocks a new load until released; finishing a pull early cancels the same way. */
static void cancel_from_callback(void)
{
	struct fixture f;
	struct assembly a;
	rl_loader *ld;
	rl_piece p;
	int ret = fixture_spec(&f, "{\"mesh\":{\"shape\":[2],\"axes\":[\"x\"]},\"rules\":[]}",
			       8192);

	CHECKF(ret == 0, "fixture %d", ret);
	ld = stream_loader(MIN_BUDGET);
	CHECK(ld);
	assembly_init(&a, &f, ld);
	a.cancel_at = 2;
	rl_loader_set_piece_callback(ld, on_piece, &a);
	ret = rl_loader_run(ld, f.plan);
	if (ret != RL_E_BACKEND) {
		CHECKF(ret == RL_E_CANCELED, "%d %s", ret, rl_loader_errmsg(ld));
		CHECK(a.pieces == 2 && a.nheld == 1);
		CHECK(rl_loader_start(ld, f.plan) == RL_E_STATE);
		CHECK(rl_loader_release(ld, &a.held[0]) == 0);
		/* pull, take one piece, finish: canceled */
		CHECK(rl_loader_start(ld, f.plan) == 0);
		CHECK(rl_loader_next_piece(ld, &p, 10000) == 1);
		ret = rl_loader_finish(ld);
		CHECKF(ret == RL_E_CANCELED || ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
		CHECK(rl_loader_release(ld, &p) == 0);
		CHECK(rl_loader_next_piece(ld, &p, 0) == RL_E_STATE);
		ret = 0;
	}
	assembly_free(&a);
	rl_loader_destroy(ld);
	fixture_free(&f);
}

/* Destroying a loader mid-pull stops its thread and frees everything. */
static void destroy_mid_pull(void)
{
	struct fixture f;
	rl_loader *ld;
	rl_piece p;
	int ret = fixture_random(&f, 8192);

	CHECKF(ret == 0, "fixture %d", ret);
	ld = stream_loader(MIN_BUDGET);
	CHECK(ld && rl_loader_start(ld, f.plan) == 0);
	ret = rl_loader_next_piece(ld, &p, 10000);
	CHECK(ret == 1 || ret == RL_E_BACKEND || ret == 0);
	rl_loader_destroy(ld);
	fixture_free(&f);
}

/* rl_loader_load() streams too (the callback on the calling thread),
 * planning requests of at most a 32nd of the budget. */
static void loader_load_streams(void)
{
	struct fixture f;
	struct assembly a;
	rl_loader *ld = stream_loader(1 << 20);
	rl_plan *plan = NULL;
	int ret = fixture_random(&f, 8192);

	CHECKF(ret == 0 && ld, "fixture %d", ret);
	CHECK(rl_loader_request_bytes(ld, f.ck) == (1 << 20) / 32);
	assembly_init(&a, &f, ld);
	rl_loader_set_piece_callback(ld, on_piece, &a);
	ret = rl_loader_load(ld, f.ck, f.spec, 0, &plan);
	if (ret != RL_E_BACKEND) {
		CHECKF(ret == 0 && plan, "%d %s", ret, rl_loader_errmsg(ld));
		CHECK(rl_plan_num_shards(plan) == rl_plan_num_shards(f.plan));
		CHECK(assembly_matches(&a)); /* the same layout as f's plan */
	}
	assembly_free(&a);
	rl_plan_destroy(plan);
	rl_loader_destroy(ld);
	fixture_free(&f);
}

/* Issue 32: a caller's plan with reads above rl_loader_request_bytes()
 * (each read once per window it reaches) says so in the shape text; a
 * plan at that size does not. */
static void oversized_requests_noted(void)
{
	static const uint64_t chunks[] = { 64 << 10, 4096 };

	for (size_t i = 0; i < CM_ARRAY_SIZE(chunks); i++) {
		struct fixture f;
		struct assembly a;
		rl_loader *ld = stream_loader(MIN_BUDGET);
		rl_load_stats x = { .size = sizeof(x) };
		int ret = fixture_new(&f, 8, "{\"mesh\":{\"shape\":[1],\"axes\":[\"x\"]},"
				      "\"rules\":[]}", chunks[i]);
		const char *note;
		uint64_t max_read = 0;

		CHECKF(ret == 0 && ld, "fixture %d", ret);
		CHECK_EQ(rl_loader_request_bytes(ld, f.ck), 4096);
		/* the tensors are random: expect the note when a read is over */
		for (size_t r = 0; r < rl_plan_num_requests(f.plan); r++) {
			rl_request_info q;

			CHECK(rl_plan_request(f.plan, r, &q) == 0);
			max_read = CM_MAX(max_read, q.length);
		}
		assembly_init(&a, &f, ld);
		ret = pull_all(&a);
		CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
		CHECK(assembly_matches(&a));
		CHECK(rl_loader_get_stats(ld, &x) == 0);
		note = strstr(x.shape, " over rl_loader_request_bytes() 4096: read per window;");
		CHECKF(max_read > 4096 ? note != NULL : note == NULL, "chunk %llu, reads up to %llu: %s",
		       (unsigned long long)chunks[i], (unsigned long long)max_read, x.shape);
		assembly_free(&a);
		rl_loader_destroy(ld);
		fixture_free(&f);
	}
}

/* ---- arguments and the caller's pool ------------------------------ */

static void arguments(void)
{
	rl_loader *ld = rl_loader_create();
	struct fixture f;
	rl_piece p = { 0 };
	int64_t b = rl_loader_default_budget();
	int64_t lo, hi;

	CHECK(ld);
	CHECKF(b >= MIN_BUDGET && b <= (1ll << 30) && b % 4096 == 0, "%lld", (long long)b);
	CHECK(rl_loader_param_bounds(RL_OPT_STAGING, &lo, &hi) == 0 && hi == RL_STAGING_STREAM);
	CHECK(rl_loader_param_bounds(RL_OPT_STAGING_BUDGET, &lo, &hi) == 0);
	CHECK(rl_loader_param_bounds(RL_OPT_RELEASE_TIMEOUT_MS, &lo, &hi) == 0 && lo == 0);
	CHECK(rl_loader_next_piece(ld, &p, 0) == RL_E_STATE);
	CHECK(rl_loader_finish(ld) == RL_E_STATE);
	CHECK(rl_loader_next_piece(NULL, &p, 0) == -EINVAL && rl_loader_next_piece(ld, NULL, 0) == -EINVAL);
	CHECK(rl_loader_release(NULL, &p) == -EINVAL && rl_loader_release(ld, NULL) == -EINVAL);
	CHECK(rl_loader_release(ld, &p) == 0); /* token 0: a zero-byte piece */
	p.token = ~0ull;
	CHECK(rl_loader_release(ld, &p) == RL_E_PIECE);
	CHECKF(strstr(rl_loader_errmsg(ld), "rl_loader_release: piece 4294967295 of window 254"),
	       "%s", rl_loader_errmsg(ld));
	CHECK(rl_loader_set_window_pool(ld, &p, sizeof(p)) == RL_E_STAGING);
	CHECK(rl_loader_set_window_pool(NULL, NULL, 0) == -EINVAL);
	CHECK(rl_loader_set_piece_callback(NULL, NULL, NULL) == -EINVAL);
	CHECK(rl_loader_start(NULL, NULL) == -EINVAL && rl_loader_start(ld, NULL) == -EINVAL);
	CHECK(fixture_random(&f, 8192) == 0);
	CHECK(rl_loader_start(ld, f.plan) == RL_E_STATE); /* not streaming */
	CHECK(rl_loader_set(ld, RL_OPT_STAGING, RL_STAGING_STREAM) == 0);
	CHECK(rl_loader_run(ld, f.plan) == RL_E_STATE && strstr(rl_loader_errmsg(ld), "callback"));
	CHECK(rl_strerror(RL_E_RELEASE_TIMEOUT)[0] && strcmp(rl_strerror(RL_E_PIECE), "unknown error"));
	rl_loader_destroy(ld);
	fixture_free(&f);
}

/* A load through many windows: byte-exact, and rl_load_stats says how the
 * windows were read (their count and size, io_uring registration, ranges
 * and engine set-ups), in fields and in its shape text, consistently. */
static void many_windows_stats(void)
{
	struct fixture f;
	struct assembly a;
	rl_loader *ld = stream_loader(MIN_BUDGET);
	rl_load_stats x = { .size = sizeof(x) };
	unsigned nwin = 0, setups = 0;
	unsigned long long wbytes = 0;
	size_t ranges = 0, total = 0;
	const char *at;
	int registered;
	int ret = fixture_new(&f, 12, "{\"mesh\":{\"shape\":[1],\"axes\":[\"x\"]},\"rules\":[]}",
			      8192);

	CHECKF(ret == 0 && ld, "fixture %d", ret);
	assembly_init(&a, &f, ld);
	ret = pull_all(&a);
	CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
	CHECK(assembly_matches(&a));
	CHECK(rl_loader_get_stats(ld, &x) == 0);
	at = strstr(x.shape, "streaming: ");
	CHECKF(at && sscanf(at, "streaming: %u windows of %llu bytes", &nwin, &wbytes) == 2,
	       "%s", x.shape);
	/* Registered on io_uring when the memlock budget allows (no limit
	 * with CAP_IPC_LOCK); never on the other backends, saying why. */
	registered = strstr(x.shape, "bytes, registered with io_uring;") != NULL;
	if (cur == RL_BACKEND_IO_URING && eng_memlock_limit() == UINT64_MAX)
		CHECKF(registered, "%s", x.shape);
	if (cur != RL_BACKEND_IO_URING)
		CHECKF(!registered && strstr(x.shape, "not registered with io_uring (backend "),
		       "%s", x.shape);
	at = at ? strstr(at, "io_uring") : NULL;
	at = at ? strchr(at, ';') : NULL;
	CHECKF(at && sscanf(at, "; %zu ranges, %u engine set-up", &ranges, &setups) == 2,
	       "%s", x.shape);
	CHECKF(nwin >= 1 && wbytes * nwin <= MIN_BUDGET, "%u x %llu", nwin, wbytes);
	/* Each range fills at most one window, all on one engine set-up. */
	for (unsigned d = 0; d < f.ndev; d++)
		total += f.ref_len[d];
	CHECKF(ranges * wbytes >= total && (ranges > 1 || total <= wbytes) && setups == 1,
	       "%zu ranges, %u set-ups, %zu staging bytes", ranges, setups, total);
	CHECKF(x.stream_windows == nwin && x.stream_window_bytes == wbytes &&
	       x.stream_registered == registered && x.stream_ranges == ranges &&
	       x.engine_runs == setups && x.workers >= 1 && x.request_bytes > 0,
	       "fields %u x %llu, registered %d, %llu ranges, %u runs; text: %s",
	       x.stream_windows, (unsigned long long)x.stream_window_bytes, x.stream_registered,
	       (unsigned long long)x.stream_ranges, x.engine_runs, x.shape);
	assembly_free(&a);
	rl_loader_destroy(ld);
	fixture_free(&f);
}

/* Both statistics of the last run of ld. */
struct both_stats {
	rl_load_stats st;
	rl_load_stats x;
};

static int get_both(const rl_loader *ld, struct both_stats *b)
{
	memset(b, 0, sizeof(*b));
	b->st.size = sizeof(b->st);
	b->x.size = sizeof(b->x);
	return rl_loader_get_stats(ld, &b->st) < 0 || rl_loader_get_stats(ld, &b->x) < 0 ? -1 : 0;
}

/* A statistic the whole load reports (non-zero) that streaming lost. */
#define LOST(w, s, f) ((w).f != 0 && (s).f == 0 ? (printf("    %s: whole %g, streaming 0\n", \
							   #f, (double)(w).f), 1) : 0)

/* A streaming load through many windows reports every statistic the whole
 * load of the same plan reports, the same where it must be (what was
 * needed, how the files were read), and the reads that went straight into the
 * io_uring-registered windows (reads_fixed). */
static void stream_reports_every_stat(void)
{
	struct fixture f;
	struct assembly a;
	struct both_stats w, s;
	rl_loader *whole = rl_loader_create(), *ld = stream_loader(4 * MIN_BUDGET);
	const char *spec = "{\"mesh\":{\"shape\":[1],\"axes\":[\"x\"]},\"rules\":[]}";
	char *path = tmp_path("aligned.safetensors"), hex[65];
	int ret, lost = 0;

	/* 8 tensors of 128 KiB from offset 4096: page-aligned reads, large
	 * enough to go straight into the windows. */
	memset(&f, 0, sizeof(f));
	ret = write_hashed_ckpt_at(path, 8, 128 << 10, 4096, hex);
	if (ret == 0)
		ret = fixture_build(&f, path, spec, strlen(spec), 16384);

	CHECKF(ret == 0 && whole && ld, "fixture %d", ret);
	CHECK(rl_loader_set(whole, RL_OPT_BACKEND, cur) == 0 &&
	      rl_loader_set(whole, RL_OPT_WORKERS, cur_workers) == 0);
	ret = rl_loader_run(whole, f.plan);
	CHECKF(ret == 0 && get_both(whole, &w) == 0, "%d %s", ret, rl_loader_errmsg(whole));
	assembly_init(&a, &f, ld);
	ret = pull_all(&a);
	CHECKF(ret == 0 && assembly_matches(&a) && get_both(ld, &s) == 0, "%d %s", ret,
	       rl_loader_errmsg(ld));
	/* The same files, read the same way (the workers are sized for the
	 * budget: fewer may run). */
	CHECK(s.st.bytes_needed == w.st.bytes_needed && s.st.backend == w.st.backend &&
	      s.st.direct_io == w.st.direct_io && s.st.registered_files == w.st.registered_files &&
	      s.x.files_cached == w.x.files_cached && s.x.workers <= w.x.workers);
	lost += LOST(w.st, s.st, bytes_read) + LOST(w.st, s.st, bytes_direct) +
		LOST(w.st, s.st, requests) + LOST(w.st, s.st, retries) +
		LOST(w.st, s.st, peak_inflight) + LOST(w.st, s.st, read_seconds) +
		LOST(w.st, s.st, total_seconds) + LOST(w.st, s.st, gbps) +
		LOST(w.st, s.st, buffers) + LOST(w.st, s.st, registered_buffers) +
		LOST(w.st, s.st, queue_depth);
	lost += LOST(w.x, s.x, workers) + LOST(w.x, s.x, queue_depth) +
		LOST(w.x, s.x, setup_seconds) + LOST(w.x, s.x, request_bytes) +
		LOST(w.x, s.x, bytes_buffered) + LOST(w.x, s.x, bytes_hashed) +
		LOST(w.x, s.x, hash_seconds) + LOST(w.x, s.x, files_hashed);
	CHECK(lost == 0);
	/* Windows registered (no memlock limit: CAP_IPC_LOCK) take
	 * READ_FIXED reads (these reads are aligned: straight into the
	 * windows). */
	if (cur == RL_BACKEND_IO_URING && eng_memlock_limit() == UINT64_MAX)
		CHECKF(s.x.reads_fixed > 0 && s.x.reads_fixed <= s.st.requests, "%llu of %llu",
		       (unsigned long long)s.x.reads_fixed, (unsigned long long)s.st.requests);
	else if (cur != RL_BACKEND_IO_URING)
		CHECKF(s.x.reads_fixed == 0, "%llu", (unsigned long long)s.x.reads_fixed);
	CHECK(w.x.reads_fixed == 0); /* whole staging is not registered */
	assembly_free(&a);
	rl_loader_destroy(ld);
	rl_loader_destroy(whole);
	fixture_free(&f);
}

/* Windows in the caller's memory, deliberately misaligned by one byte. */
static void caller_pool(void)
{
	struct fixture f;
	struct assembly a;
	size_t len = 3u << 20;
	uint8_t *mem = malloc(len + 1);
	rl_loader *ld = stream_loader(0);
	int ret = fixture_random(&f, 16384);

	CHECKF(ret == 0 && mem && ld, "fixture %d", ret);
	CHECK(rl_loader_set_window_pool(ld, mem + 1, len) == 0);
	assembly_init(&a, &f, ld);
	ret = pull_all(&a);
	if (ret != RL_E_BACKEND) {
		CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
		CHECK(assembly_matches(&a));
	}
	assembly_free(&a);
	rl_loader_destroy(ld);
	free(mem);
	fixture_free(&f);
}

/* A small load with a large budget (the default, up to 1 GiB, and 64 MiB)
 * or a larger caller pool: its windows cover at most its staging rounded
 * up to pages (at least the smallest pool), as the stats say. Before, the
 * pool was the whole budget, pinned whole by a CUDA load. */
static void pool_sized_to_the_load(void)
{
	static const uint64_t budgets[] = { 0, 64u << 20, 0 };
	struct fixture f;
	uint64_t plan = 0;
	size_t len = 8u << 20;
	uint8_t *mem = malloc(len);
	int ret = fixture_random(&f, 16384);

	CHECKF(ret == 0 && mem, "fixture %d", ret);
	for (unsigned d = 0; d < f.ndev; d++)
		plan += cm_align_up(f.ref_len[d], 4096);
	plan = CM_MAX(plan, MIN_BUDGET);
	for (size_t i = 0; i < CM_ARRAY_SIZE(budgets) && !th_failed(); i++) {
		rl_loader *ld = stream_loader(budgets[i]);
		rl_load_stats x = { .size = sizeof(x) };
		struct assembly a;

		ret = ld && i == 2 ? rl_loader_set_window_pool(ld, mem, len) : 0; /* the caller's */
		assembly_init(&a, &f, ld);
		ret = ret == 0 && ld ? pull_all(&a) : -ENOMEM;
		if (ret == 0 && (!assembly_matches(&a) || rl_loader_get_stats(ld, &x) < 0))
			th_fail(__FILE__, __LINE__, "case %zu: wrong bytes or no stats", i);
		else if (ret < 0 && ret != RL_E_BACKEND) /* as random_budgets */
			th_fail(__FILE__, __LINE__, "case %zu: %d %s", i, ret, rl_loader_errmsg(ld));
		else if (x.stream_windows * x.stream_window_bytes > plan)
			th_fail(__FILE__, __LINE__,
				"case %zu: %u windows of %llu bytes for %llu bytes of staging", i,
				x.stream_windows, (unsigned long long)x.stream_window_bytes,
				(unsigned long long)plan);
		assembly_free(&a);
		rl_loader_destroy(ld);
	}
	free(mem);
	fixture_free(&f);
}

/* Every piece by the callback on this thread; returns run's result. */
static int callback_all(struct assembly *a)
{
	rl_loader_set_piece_callback(a->ld, on_piece, a);
	return rl_loader_run(a->ld, a->f->plan);
}

/* ex_wpool_size: every branch. Each case: the inputs (budget, staging,
 * request, workers, depth, device request), then the pool, what sized it
 * and the medium's reads per window. */
#define WANTF(b, s, r, w, d, dev, floor) { b, s, r, w, d, dev, 4096, MIN_BUDGET, floor }
#define WANT(b, s, r, w, d, dev) WANTF(b, s, r, w, d, dev, 0)
static void pool_size_rules(void)
{
	static const struct {
		struct ex_wpool_want w;
		uint64_t bytes;
		unsigned limit, reads;
	} cases[] = {
		/* tmpfs (no device), one worker: 2 windows of 4 reads */
		{ WANT(256 << 20, 1ull << 30, 8 << 20, 1, 16, 0), 64 << 20, EX_WPOOL_BY_MEDIUM, 4 },
		/* 3 workers: 2 reads each */
		{ WANT(256 << 20, 1ull << 30, 8 << 20, 3, 16, 0), 96 << 20, EX_WPOOL_BY_MEDIUM, 6 },
		/* a block device: half of depth 64 in 1.25 MiB requests is 5 reads of 8 MiB */
		{ WANT(1ull << 30, 1ull << 30, 8 << 20, 1, 64, 1280 << 10), 80 << 20,
		  EX_WPOOL_BY_MEDIUM, 5 },
		/* an odd depth: half of 33 rounds up (17 x 1.25 MiB: 3 reads of 8 MiB), and
		 * under the few reads a window always holds */
		{ WANT(1ull << 30, 1ull << 30, 8 << 20, 1, 33, 1280 << 10), 64 << 20,
		  EX_WPOOL_BY_MEDIUM, 4 },
		{ WANT(1ull << 30, 1ull << 30, 4 << 20, 1, 33, 1280 << 10), 48 << 20,
		  EX_WPOOL_BY_MEDIUM, 6 },
		/* a device request larger than the read: the read is the request */
		{ WANT(1ull << 30, 1ull << 30, 1 << 20, 1, 16, 16 << 20), 16 << 20,
		  EX_WPOOL_BY_MEDIUM, 8 },
		/* the virtio disk of issue 33: 256 MiB budget, reads of 8 MiB, 2 workers,
		 * depth 16 of 4 MiB requests: 2 windows of 4 reads, 64 MiB (was 128) */
		{ WANT(256 << 20, 2ull << 30, 8 << 20, 2, 16, 4 << 20), 64 << 20,
		  EX_WPOOL_BY_MEDIUM, 4 },
		/* the budget is the smallest; then the load's staging */
		{ WANT(64 << 10, 1ull << 30, 8 << 20, 1, 16, 0), 64 << 10, EX_WPOOL_BY_BUDGET, 4 },
		{ WANT(256 << 20, 128 << 10, 8 << 20, 1, 16, 0), 128 << 10, EX_WPOOL_BY_STAGING, 4 },
		/* ties: budget before staging before medium */
		{ WANT(64 << 20, 64 << 20, 8 << 20, 1, 16, 0), 64 << 20, EX_WPOOL_BY_BUDGET, 4 },
		{ WANT(1ull << 30, 64 << 20, 8 << 20, 1, 16, 0), 64 << 20, EX_WPOOL_BY_STAGING, 4 },
		/* no reads, and reads under a page: the smallest pool */
		{ WANT(1ull << 30, 1ull << 30, 0, 1, 16, 0), 64 << 10, EX_WPOOL_BY_MEDIUM, 4 },
		{ WANT(1ull << 30, 1ull << 30, 5000, 1, 16, 0), 64 << 10, EX_WPOOL_BY_MEDIUM, 4 },
		/* reads not a page multiple: windows rounded up to pages */
		{ WANT(1ull << 30, 1ull << 30, 50000, 1, 16, 0), 2 * 200704, EX_WPOOL_BY_MEDIUM, 4 },
		/* a medium past 2^62 bytes saturates: the budget */
		{ WANT(1ull << 30, 1ull << 40, 1ull << 61, 1, 16, 0), 1ull << 30, EX_WPOOL_BY_BUDGET, 4 },
		/* the window floor: 8 MiB windows of small reads, unless the budget is less */
		{ WANTF(1ull << 30, 1ull << 30, 32 << 10, 1, 16, 0, 8 << 20), 16 << 20,
		  EX_WPOOL_BY_MEDIUM, 4 },
		{ WANTF(1 << 20, 1ull << 30, 32 << 10, 1, 16, 0, 8 << 20), 1 << 20,
		  EX_WPOOL_BY_BUDGET, 4 },
		/* a caller's pool under the smallest: as it is */
		{ WANT(16 << 10, 1ull << 30, 8 << 20, 1, 16, 0), 16 << 10, EX_WPOOL_BY_BUDGET, 4 },
	};

	for (size_t i = 0; i < CM_ARRAY_SIZE(cases); i++) {
		struct ex_wpool_want w = cases[i].w;
		struct ex_wpool_size out;
		uint64_t got;

		got = ex_wpool_size(&w, &out);
		CHECKF(got == cases[i].bytes && out.bytes == got && out.limit == cases[i].limit &&
		       out.reads == cases[i].reads,
		       "case %zu: %llu bytes by %u (%u reads), want %llu by %u (%u reads)", i,
		       (unsigned long long)got, out.limit, out.reads,
		       (unsigned long long)cases[i].bytes, cases[i].limit, cases[i].reads);
		CHECKF(out.medium == UINT64_MAX || (out.medium >= MIN_BUDGET && out.medium % 4096 == 0),
		       "case %zu: medium %llu", i, (unsigned long long)out.medium);
	}
}

/* A random checkpoint of 12 tensors of rank 3 (about 2-3 MB), planned
 * with requests of chunk bytes. */
static int fixture_larger(struct fixture *f, uint64_t chunk)
{
	int ret;

	force_rank = 3;
	ret = fixture_new(f, 12, NULL, chunk);
	force_rank = 0;
	return ret;
}

/* 64 KiB reads of a 32 MiB file under the default budget (up to 1 GiB):
 * the pool is what keeps the medium busy (two windows of a few reads, of
 * the engine's depth in device requests, or of the 8 MiB floor), never
 * the budget nor the staging, with the bytes intact; the stats say so,
 * and the depth and workers the sizing assumed are the engine's. Before,
 * the pool was the load's staging. */
static void pool_sized_to_the_medium(void)
{
	static const char one[] = "{\"mesh\":{\"shape\":[1],\"axes\":[\"x\"]},\"rules\":[]}";
	char *path = tmp_path("medium.safetensors"), hex[65];
	struct fixture f;
	int ret = write_hashed_ckpt(path, 16, 2u << 20, hex) < 0 ? -EIO :
		  fixture_build(&f, path, one, strlen(one), 64u << 10);

	CHECKF(ret == 0, "fixture %d", ret);
	for (int round = 0; ret == 0 && round < 2 && !th_failed(); round++) {
		rl_loader *ld = stream_loader(0);
		rl_load_stats x = { .size = sizeof(x) };
		struct assembly a;
		uint64_t bound;

		assembly_init(&a, &f, ld);
		ret = ld ? (round ? callback_all(&a) : pull_all(&a)) : -ENOMEM;
		if (ret == RL_E_BACKEND) {
			ret = 0;
			goto next;
		}
		CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
		CHECK(assembly_matches(&a));
		CHECK(rl_loader_get_stats(ld, &x) == 0);
		/* half the engine's depth of reads, a few per worker, or 2 x 8 MiB */
		bound = 2 * CM_MAX(CM_MAX(4u, 2 * x.workers), (x.queue_depth + 1) / 2) *
			cm_align_up(x.request_bytes, 4096);
		bound = CM_MAX(bound, 16u << 20);
		CHECKF(x.stream_pool_limit == RL_POOL_BY_MEDIUM && x.stream_pool_bytes <= bound &&
		       x.stream_pool_bytes < x.bytes_needed,
		       "pool %llu by %u, at most %llu, staging %llu",
		       (unsigned long long)x.stream_pool_bytes, x.stream_pool_limit,
		       (unsigned long long)bound, (unsigned long long)x.bytes_needed);
		CHECK_EQ(x.stream_windows * x.stream_window_bytes, x.stream_pool_bytes);
		CHECK_EQ(x.stream_windows, 2);
		CHECK_EQ(x.stream_pool_medium, x.stream_pool_bytes);
		CHECKF(x.stream_pool_depth == x.queue_depth && x.stream_pool_workers == x.workers,
		       "sized for depth %u, %u workers; the engine ran %u, %u", x.stream_pool_depth,
		       x.stream_pool_workers, x.queue_depth, x.workers);
next:
		assembly_free(&a);
		rl_loader_destroy(ld);
	}
	fixture_free(&f);
}

/* A runtime that gives a window's pieces back only once a piece of the
 * next window arrived (a tensor assembled across windows does): every
 * byte arrives, and no window is waited for while a window read but not
 * handed out would let it go. With two lanes reading turn about, the
 * executor looks ahead only into a window free at that moment; had it
 * waited for one, this runtime would hold the one and the executor the
 * other until the release timeout. */
static uint64_t behind_tag;             /* window and fill of what is held */
static rl_piece behind[256];
static size_t nbehind;

static int on_piece_release_behind(void *user, const rl_piece *p)
{
	struct assembly *a = user;
	int bad = 0;

	take_piece(a, p);
	if (p->token && p->token >> 32 != behind_tag) {
		for (size_t i = 0; i < nbehind; i++)
			bad |= rl_loader_release(a->ld, &behind[i]) != 0;
		nbehind = 0;
		behind_tag = p->token >> 32;
	}
	if (p->token && nbehind < CM_ARRAY_SIZE(behind))
		behind[nbehind++] = *p;
	else if (p->token)
		bad |= rl_loader_release(a->ld, p) != 0;
	a->bad += bad;
	return bad;
}

/* nt tensors of tbytes each at path, on one device, planned in reads
 * of up to chunk bytes. */
static int one_device(struct fixture *f, const char *path, unsigned nt, unsigned tbytes,
		      uint64_t chunk)
{
	static const char one[] = "{\"mesh\":{\"shape\":[1],\"axes\":[\"x\"]},\"rules\":[]}";
	char hex[65];

	return write_hashed_ckpt(path, nt, tbytes, hex) < 0 ? -EIO :
	       fixture_build(f, path, one, strlen(one), chunk);
}

/* 32 MiB of 16 tensors in 64 KiB reads on one device, at path: under
 * the default budget, two windows and four batches. */
static int four_windows(struct fixture *f, const char *path)
{
	return one_device(f, path, 16, 2u << 20, 64u << 10);
}

/* A streaming loader (stream_loader) reading with direct (RL_DIRECT_*). */
static rl_loader *loader_reading(uint64_t budget, int direct)
{
	rl_loader *ld;

	stream_direct = direct;
	ld = stream_loader(budget);
	stream_direct = RL_DIRECT_AUTO;
	return ld;
}

/* A load's end: the loader and the fixture freed, skipped when the
 * backend is missing here. */
static void end_load(rl_loader *ld, struct fixture *f, int ret)
{
	rl_loader_destroy(ld);
	fixture_free(f);
	if (ret == RL_E_BACKEND)
		th_skip("backend unavailable here");
}

static void release_after_the_next_window(void)
{
	rl_load_stats x = { .size = sizeof(x) };
	struct fixture f;
	struct assembly a;
	rl_loader *ld;
	int ret = four_windows(&f, tmp_path("behind.safetensors"));

	CHECKF(ret == 0, "fixture %d", ret);
	ld = stream_loader(0);
	CHECK(ld && rl_loader_set(ld, RL_OPT_RELEASE_TIMEOUT_MS, 3000) == 0);
	assembly_init(&a, &f, ld);
	behind_tag = 0;
	nbehind = 0;
	rl_loader_set_piece_callback(ld, on_piece_release_behind, &a);
	ret = rl_loader_run(ld, f.plan);
	for (size_t i = 0; i < nbehind; i++)
		CHECK(rl_loader_release(ld, &behind[i]) == 0);
	if (ret != RL_E_BACKEND) {
		CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
		CHECK(assembly_matches(&a));
		CHECK(rl_loader_get_stats(ld, &x) == 0);
		CHECKF(x.stream_windows == 2 && x.stream_window_bytes * 3 < x.bytes_needed,
		       "%u windows of %llu for %llu bytes", x.stream_windows,
		       (unsigned long long)x.stream_window_bytes,
		       (unsigned long long)x.bytes_needed);
	}
	assembly_free(&a);
	end_load(ld, &f, ret);
}

/* The two lanes' failures (O_DIRECT reads, so that both sessions run):
 * a progress callback that cancels mid-load ends it with RL_E_CANCELED
 * and the same loader then loads every byte; a file changed after the
 * plan fails both sessions' set-up with RL_E_FILE_CHANGED, and its
 * loader is destroyed with nothing held (ASan: nothing leaks). */
static int cancel_second(void *user, uint64_t done, uint64_t total)
{
	int *calls = user;

	(void)done;
	(void)total;
	return ++*calls >= 2;
}

static void lanes_fail_cleanly(void)
{
	char *path = tmp_path("lanes.safetensors");
	rl_load_stats x = { .size = sizeof(x) };
	struct fixture f;
	struct assembly a;
	rl_loader *ld;
	int ret = four_windows(&f, path), calls = 0;

	CHECKF(ret == 0, "fixture %d", ret);
	ld = loader_reading(0, RL_DIRECT_ON);
	CHECK(ld);
	rl_loader_set_callbacks(ld, NULL, cancel_second, &calls);
	assembly_init(&a, &f, ld);
	ret = callback_all(&a);
	assembly_free(&a);
	if (ret != RL_E_BACKEND) {
		CHECKF(ret == RL_E_CANCELED && strstr(rl_loader_errmsg(ld), "progress callback"),
		       "%d %s", ret, rl_loader_errmsg(ld));
		rl_loader_set_callbacks(ld, NULL, NULL, NULL);
		assembly_init(&a, &f, ld);
		ret = callback_all(&a);
		CHECKF(ret == 0, "after the cancel: %d %s", ret, rl_loader_errmsg(ld));
		CHECK(assembly_matches(&a));
		assembly_free(&a);
		CHECK(rl_loader_get_stats(ld, &x) == 0);
		CHECKF(x.engine_runs == 2 || !x.direct_io, "%u engine runs", x.engine_runs);
		/* changed after the plan: a later mtime */
		CHECK(utimensat(AT_FDCWD, path, (struct timespec[]){ { 0, UTIME_OMIT },
			{ time(NULL) + 100, 0 } }, 0) == 0);
		assembly_init(&a, &f, ld);
		ret = callback_all(&a);
		assembly_free(&a);
		CHECKF(ret == RL_E_FILE_CHANGED, "%d %s", ret, rl_loader_errmsg(ld));
	}
	end_load(ld, &f, ret);
}

/* A streaming load that the page cache holds runs on one session: from
 * there it is bound by the CPUs, and two lanes made it 1.05-1.22x slower
 * (perf/before_after.sh, hot). The fixture was just written, so the
 * page cache holds it, unless the page cache is its medium (tmpfs). */
static void cached_load_on_one_session(void)
{
	rl_file_stats fs = { .size = sizeof(fs) };
	rl_load_stats x = { .size = sizeof(x) };
	struct fixture f;
	struct assembly a;
	rl_loader *ld;
	int ret = four_windows(&f, tmp_path("hot.safetensors"));

	CHECKF(ret == 0, "fixture %d", ret);
	ld = stream_loader(0);
	CHECK(ld);
	assembly_init(&a, &f, ld);
	ret = callback_all(&a);
	if (ret != RL_E_BACKEND) {
		CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
		CHECK(assembly_matches(&a));
		CHECK(rl_loader_get_stats(ld, &x) == 0 && rl_loader_get_file_stats(ld, 0, &fs) == 0);
		CHECKF(x.stream_windows == 2 && x.stream_ranges > 2, "%u windows, %llu ranges",
		       x.stream_windows, (unsigned long long)x.stream_ranges);
		if (fs.why == RL_WHY_HOT)
			CHECKF(x.engine_runs == 1, "%u engine runs from the page cache",
			       x.engine_runs);
	}
	assembly_free(&a);
	end_load(ld, &f, ret);
	if (ret != RL_E_BACKEND && fs.why != RL_WHY_HOT)
		th_skip("the page cache is this directory's medium (tmpfs): nothing hot to read");
}

/* Every allocation failing from the n-th on, n = 0, 1, ... until a load
 * succeeds: a streaming load on two lanes (O_DIRECT: both sessions run)
 * fails with a negative code and a message, or loads every byte; never a
 * crash, a hang or a leak (ASan), and the same loader then loads. A lane
 * whose own engine or session cannot be set up fails the load alone. */
static void lanes_out_of_memory(void)
{
	struct fixture f;
	struct assembly a;
	rl_loader *ld;
	int ret = one_device(&f, tmp_path("oom.safetensors"), 16, 256u << 10, 256u << 10);
	long n;

	CHECKF(ret == 0, "fixture %d", ret);
	ld = loader_reading(2u << 20, RL_DIRECT_ON); /* two windows of 1 MiB: four batches */
	CHECK(ld);
	ret = -ENOMEM;
	for (n = 0; ret < 0 && ret != RL_E_BACKEND && n < 5000 && !th_failed(); n++) {
		assembly_init(&a, &f, ld);
		cm_alloc_fail_after(n);
		ret = callback_all(&a);
		cm_alloc_fail_after(-1);
		if (ret == 0)
			CHECK(assembly_matches(&a));
		else if (ret != RL_E_BACKEND)
			CHECKF(rl_loader_errmsg(ld)[0], "allocation %ld: %d without a message", n, ret);
		assembly_free(&a);
	}
	if (ret != RL_E_BACKEND) {
		rl_load_stats x = { .size = sizeof(x) };

		CHECKF(ret == 0 && n > 3, "%d after %ld allocations: %s", ret, n,
		       rl_loader_errmsg(ld));
		assembly_init(&a, &f, ld);
		ret = callback_all(&a);
		CHECKF(ret == 0, "after the failures: %d %s", ret, rl_loader_errmsg(ld));
		CHECK(assembly_matches(&a));
		assembly_free(&a);
		CHECK(rl_loader_get_stats(ld, &x) == 0);
		CHECKF(x.engine_runs == 2 || !x.direct_io, "%u engine runs", x.engine_runs);
	}
	end_load(ld, &f, ret);
}

/* Every thread creation fails from the n-th on (EAGAIN, as under a
 * limit on tasks), n from 0 up, on two lanes, by callback and by pull
 * (rl_loader_start's thread): each load fails with a code and a message
 * or loads every byte, nothing leaks or hangs, and once no creation is
 * refused the same loader loads. */
static void lanes_without_threads(void)
{
	struct fixture f;
	struct assembly a;
	rl_loader *ld;
	int ret = one_device(&f, tmp_path("nothread.safetensors"), 16, 256u << 10, 256u << 10);
	long n, refused = 1;

	CHECKF(ret == 0, "fixture %d", ret);
	ld = loader_reading(2u << 20, RL_DIRECT_ON); /* two windows of 1 MiB: four batches */
	CHECK(ld);
	/* A backend of threads (pread's pool) is unavailable without them:
	 * RL_E_BACKEND means a missing backend only when none was refused. */
	for (n = 0; refused && n < 200 && !th_failed(); n++) {
		assembly_init(&a, &f, ld);
		th_thread_fail_after(n / 2);
		ret = n % 2 ? pull_all(&a) : callback_all(&a);
		refused = th_thread_fail_after(-1);
		if (ret == 0)
			CHECK(assembly_matches(&a));
		else
			CHECKF((refused || ret == RL_E_BACKEND) && rl_loader_errmsg(ld)[0],
			       "thread %ld: %d, %ld refused: %s", n / 2, ret, refused,
			       rl_loader_errmsg(ld));
		assembly_free(&a);
	}
	if (ret != RL_E_BACKEND)
		CHECKF(ret == 0 && !refused && n > 4, "%d after %ld threads: %s", ret, n / 2,
		       rl_loader_errmsg(ld));
	end_load(ld, &f, ret);
}

/* Budgets of one window, and under one read (requests of 1 MiB in 64
 * KiB and 128 KiB), and a caller's pool of one window: every byte arrives
 * once, by pull and by callback, and no load waits for a window (a
 * release timeout of 20 s turns a wait into a failure). ACCEPTANCE S.2. */
static void small_budgets_never_deadlock(void)
{
	static const uint64_t budgets[] = { 64u << 10, 128u << 10, 1u << 20, 0 };
	uint8_t *mem = malloc(MIN_BUDGET + 4096);

	CHECK(mem != NULL);
	for (size_t i = 0; i < CM_ARRAY_SIZE(budgets) * 2 && !th_failed(); i++) {
		rl_loader *ld = stream_loader(budgets[i / 2]);
		rl_load_stats x = { .size = sizeof(x) };
		struct fixture f;
		struct assembly a;
		int ret = fixture_larger(&f, 1u << 20);

		CHECKF(ret == 0 && ld, "fixture %d", ret);
		rl_loader_set(ld, RL_OPT_RELEASE_TIMEOUT_MS, 20000);
		if (!budgets[i / 2]) /* the caller's smallest pool, misaligned */
			CHECK(rl_loader_set_window_pool(ld, mem + 1, MIN_BUDGET + 4095) == 0);
		assembly_init(&a, &f, ld);
		ret = i % 2 ? callback_all(&a) : pull_all(&a);
		if (ret != RL_E_BACKEND) {
			CHECKF(ret == 0, "budget %llu: %d %s", (unsigned long long)budgets[i / 2],
			       ret, rl_loader_errmsg(ld));
			CHECK(assembly_matches(&a));
			CHECK(rl_loader_get_stats(ld, &x) == 0);
			CHECKF(x.stream_pool_bytes <= (budgets[i / 2] ? budgets[i / 2] : MIN_BUDGET),
			       "pool %llu", (unsigned long long)x.stream_pool_bytes);
		}
		assembly_free(&a);
		rl_loader_destroy(ld);
		fixture_free(&f);
	}
	free(mem);
}

/* Reads of up to 1 MiB through windows of 64 KiB (a 128 KiB budget), one
 * device: a read at a window's edge is read for each window, but only its
 * part (in 64 KiB units, EX_CLIP_UNIT), so the load reads at most the
 * plan's reads plus 4 units a range. Before, each range read its edge
 * reads whole (about 1 MiB a range: 10-20x the plan). */
static void edge_reads_read_their_part(void)
{
	static const char one[] = "{\"mesh\":{\"shape\":[1],\"axes\":[\"x\"]},\"rules\":[]}";

	for (int round = 0; round < 2 && !th_failed(); round++) {
		rl_loader *ld = stream_loader(128u << 10);
		rl_load_stats x = { .size = sizeof(x) };
		struct fixture f;
		struct assembly a;
		uint64_t plan = 0, bound;
		int ret;

		/* Random shapes, drawn again (rarely) until the plan needs
		 * several windows: a plan under the budget is one range. */
		force_rank = 3;
		for (int tries = 0; tries < 16; tries++) {
			if (tries)
				fixture_free(&f);
			ret = fixture_new(&f, 12, one, 1u << 20);
			plan = 0;
			for (size_t i = 0; ret == 0 && i < rl_plan_num_requests(f.plan); i++) {
				rl_request_info r;

				rl_plan_request(f.plan, i, &r);
				plan += r.length;
			}
			if (ret || plan >= 4 * (128u << 10))
				break;
		}
		force_rank = 0;
		CHECKF(ret == 0 && ld && plan >= 4 * (128u << 10), "fixture %d, %llu bytes",
		       ret, (unsigned long long)plan);
		assembly_init(&a, &f, ld);
		ret = ret == 0 ? (round ? callback_all(&a) : pull_all(&a)) : ret;
		if (ret != RL_E_BACKEND) {
			CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
			CHECK(assembly_matches(&a));
			CHECK(rl_loader_get_stats(ld, &x) == 0);
			bound = plan + x.stream_ranges * 4 * EX_CLIP_UNIT;
			CHECKF(x.stream_ranges > 1 && x.bytes_read <= bound,
			       "%llu bytes read, the plan's %llu, %llu ranges",
			       (unsigned long long)x.bytes_read, (unsigned long long)plan,
			       (unsigned long long)x.stream_ranges);
		}
		assembly_free(&a);
		rl_loader_destroy(ld);
		fixture_free(&f);
	}
}

/* Reads of 4 MiB through windows of 1.5 MiB (a 3 MiB budget), O_DIRECT:
 * a read at a window's edge is cut there, and each part read straight
 * into its window, not through a bounce buffer, where the file is as
 * aligned there as staging (window edges are page multiples). Every
 * byte but the header's page arrives without a copy; before, each edge
 * read went through a bounce buffer. */
static void edge_reads_stay_direct(void)
{
	rl_load_stats x = { .size = sizeof(x) };
	struct fixture f;
	struct assembly a;
	rl_loader *ld;
	int ret = one_device(&f, tmp_path("edges.safetensors"), 8, 1u << 20, 4u << 20);

	CHECKF(ret == 0, "fixture %d", ret);
	ld = loader_reading(3u << 20, RL_DIRECT_ON);
	CHECK(ld);
	assembly_init(&a, &f, ld);
	ret = callback_all(&a);
	if (ret != RL_E_BACKEND) {
		CHECKF(ret == 0, "%d %s", ret, rl_loader_errmsg(ld));
		CHECK(assembly_matches(&a));
		CHECK(rl_loader_get_stats(ld, &x) == 0);
		CHECKF(x.stream_ranges > 4 && x.bytes_direct + 4096 >= x.bytes_needed,
		       "%llu of %llu bytes without a copy, %llu ranges, direct %d",
		       (unsigned long long)x.bytes_direct, (unsigned long long)x.bytes_needed,
		       (unsigned long long)x.stream_ranges, x.direct_io);
	}
	assembly_free(&a);
	end_load(ld, &f, ret);
}

int main(void)
{
	static const struct th_case tests[] = {
		{ "random_budgets", random_budgets },
		{ "deduplicated_shards", deduplicated_shards },
		{ "release_other_thread", release_other_thread },
		{ "release_never", release_never },
		{ "cancel_from_callback", cancel_from_callback },
		{ "destroy_mid_pull", destroy_mid_pull },
		{ "caller_pool", caller_pool },
		{ "loader_load_streams", loader_load_streams },
		{ "many_windows_stats", many_windows_stats },
		{ "oversized_requests_noted", oversized_requests_noted },
		{ "sha256_random_budgets", sha256_random_budgets },
		{ "sha256_flipped_byte_streaming", sha256_flipped_byte_streaming },
		{ "read_modes_streaming", read_modes_streaming },
		{ "stream_reports_every_stat", stream_reports_every_stat },
		{ "pool_sized_to_the_load", pool_sized_to_the_load },
		{ "pool_sized_to_the_medium", pool_sized_to_the_medium },
		{ "small_budgets_never_deadlock", small_budgets_never_deadlock },
		{ "release_after_the_next_window", release_after_the_next_window },
		{ "lanes_fail_cleanly", lanes_fail_cleanly },
		{ "cached_load_on_one_session", cached_load_on_one_session },
		{ "edge_reads_stay_direct", edge_reads_stay_direct },
		{ "lanes_out_of_memory", lanes_out_of_memory },
		{ "lanes_without_threads", lanes_without_threads },
		{ "edge_reads_read_their_part", edge_reads_read_their_part },
	};

	static const unsigned workers[] = { 1, 3 };

	th_seed();
	run_on_every_backend(tests, CM_ARRAY_SIZE(tests), workers, CM_ARRAY_SIZE(workers),
			     select_backend);
	cur = RL_BACKEND_IO_URING;
	cur_workers = 1;
	th_run("arguments", arguments);
	th_run("pool_size_rules", pool_size_rules);
	return th_done();
}
