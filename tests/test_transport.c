/*
 * test_transport.c - read once over a transport the caller gives
 * (rl_loader_set_transport), with no MPI: NP threads are the processes,
 * an in-memory transport implements the ops (eager sends into a shared
 * list, receives matched by peer and tag at wait, agreement by a
 * barrier). Every process's shards must equal a plain load's byte for
 * byte, every shard reported once, and the cluster must read less than
 * the plain loads together, onto host staging, onto the test build's
 * device kind (testdev) or onto CUDA through the fake driver, or as
 * pieces of a streaming loader's callback; a failure on one process (its
 * own reads, a send, a device copy, a piece callback) fails every
 * process, none hangs. Every backend, 1 and 3 workers.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_util.h"
#include "fakecuda/fakecuda.h"
#include "harness.h"
#include "../common/common.h"

#define NP 3
#define NT 10
#define WAIT_S 30               /* a receive never matched: a hang, reported */

static const unsigned worker_counts[] = { 1, 3 };
static rl_backend cur = RL_BACKEND_IO_URING;
static unsigned cur_workers = 1;
/* Loaders onto a device kind (dev_kind: the test build's testdev,
 * sink/test_dev.c, or cuda through the fake driver): the processes of
 * this mask, spec devices alternately on ordinals 0, 1, windows of a
 * small budget (many halves of the pinned pool). */
static unsigned dev_procs;
static const char *dev_kind = "testdev";
/* The spec's dtype (rl_spec_set_dtype): every floating tensor converted
 * on load, the plain loads too (-1: as stored). */
static int cl_dtype = -1;
#define DEV_BUDGET (64u << 10)

/* The fake CUDA driver beside this program (build/tests/fakecuda/). */
static fakecuda_stats_fn fake_stats;
static fakecuda_host_fn fake_host;
static fakecuda_reset_fn fake_reset;
static char fake_path[PATH_MAX];

static int fake_open(void)
{
	void *h = fakecuda_open(fake_path, sizeof(fake_path));

	if (!h)
		return -1;
	fake_stats = (fakecuda_stats_fn)(uintptr_t)dlsym(h, "fakecuda_stats");
	fake_host = (fakecuda_host_fn)(uintptr_t)dlsym(h, "fakecuda_host");
	fake_reset = (fakecuda_reset_fn)(uintptr_t)dlsym(h, "fakecuda_reset");
	if (!fake_stats || !fake_host || !fake_reset)
		return -1;
	setenv("RL_LIBCUDA", fake_path, 1);
	return 0;
}

/* Where the test reads device address ptr (both kinds: host memory). */
static const uint8_t *dev_host(uint64_t ptr)
{
	return strcmp(dev_kind, "cuda") ? (const uint8_t *)(uintptr_t)ptr : fake_host(ptr);
}

/* ---------------------------------------------------------------- */
/* The in-memory transport                                           */
/* ---------------------------------------------------------------- */

struct msg {
	struct msg *next;
	int from, to;
	uint64_t tag;
	size_t len;
	int bad;                /* a failed send: the receive fails */
	uint8_t data[];
};

struct hub {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct msg *head;
	int arrived, gen, result, status[NP];
	int fail_send_rank;     /* this rank's first send fails (-1: none) */
	int fail_progress_rank; /* this rank's first progress call fails (-1: none) */
};

struct post {
	int peer;
	uint64_t tag;
	void *buf;
	size_t len;
	int done;               /* matched by progress */
};

struct tport {
	struct hub *h;
	int me;
	struct post *recv;
	size_t nrecv, cap;
	int sends, agrees;
	int fail;               /* the first failed match (progress or wait) */
	/* The progress op: calls; sends posted after a progress call that
	 * itself followed a send of the same batch (sent while reading). */
	int progress_calls, sends_between, sent_then_progress;
	/* Every receive posted, where and how long (in_staging). */
	struct post *got;
	size_t ngot, capgot;
};

static int t_send(void *user, int peer, uint64_t tag, const void *buf, size_t len)
{
	struct tport *t = user;
	int bad = t->me == t->h->fail_send_rank && t->sends == 0;
	struct msg *m = malloc(sizeof(*m) + (bad ? 0 : len));

	t->sends++;

	if (!m || peer < 0 || peer >= NP)
		return -EINVAL;
	*m = (struct msg){ .from = t->me, .to = peer, .tag = tag, .len = len, .bad = bad };
	if (!bad)
		memcpy(m->data, buf, len);
	t->sends_between += t->sent_then_progress == 2;
	t->sent_then_progress = 1;
	pthread_mutex_lock(&t->h->mu);
	m->next = t->h->head;
	t->h->head = m;
	pthread_cond_broadcast(&t->h->cv);
	pthread_mutex_unlock(&t->h->mu);
	return bad ? -EIO : 0;
}

/* Appends post p to the array *a of *n posts (room for *cap). */
static int post_add(struct post **a, size_t *n, size_t *cap, struct post p)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 16;
		struct post *q = realloc(*a, c * sizeof(*q));

		if (!q)
			return -ENOMEM;
		*a = q;
		*cap = c;
	}
	(*a)[(*n)++] = p;
	return 0;
}

static int t_recv(void *user, int peer, uint64_t tag, void *buf, size_t len)
{
	struct tport *t = user;
	struct post p = { peer, tag, buf, len, 0 };

	if (post_add(&t->recv, &t->nrecv, &t->cap, p) < 0 ||
	    post_add(&t->got, &t->ngot, &t->capgot, p) < 0)
		return -ENOMEM;
	return 0;
}

/* The message for post p, unlinked; NULL when none yet. */
static struct msg *take(struct hub *h, int me, const struct post *p)
{
	for (struct msg **pm = &h->head; *pm; pm = &(*pm)->next)
		if ((*pm)->to == me && (*pm)->from == p->peer && (*pm)->tag == p->tag) {
			struct msg *m = *pm;

			*pm = m->next;
			return m;
		}
	return NULL;
}

/* Receive p takes message m (h's lock held). */
static void match(struct tport *t, struct post *p, struct msg *m)
{
	if (m->bad || m->len != p->len)
		t->fail = t->fail ? t->fail : -EIO;
	else
		memcpy(p->buf, m->data, m->len);
	p->done = 1;
	free(m);
}

/* Every pending receive that has its message takes it; 1: none left. */
static int t_progress(void *user)
{
	struct tport *t = user;
	int left = 0;

	if (t->me == t->h->fail_progress_rank && !t->progress_calls++)
		return -EIO;
	if (t->me != t->h->fail_progress_rank)
		t->progress_calls++;
	if (t->sent_then_progress)
		t->sent_then_progress = 2;
	pthread_mutex_lock(&t->h->mu);
	for (size_t i = 0; i < t->nrecv; i++) {
		struct msg *m;

		if (!t->recv[i].done && (m = take(t->h, t->me, &t->recv[i])))
			match(t, &t->recv[i], m);
		left += !t->recv[i].done;
	}
	pthread_mutex_unlock(&t->h->mu);
	return t->fail ? t->fail : left == 0;
}

static int t_wait(void *user)
{
	struct tport *t = user;
	struct timespec dl;
	int ret;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += WAIT_S;
	t->sent_then_progress = 0;
	pthread_mutex_lock(&t->h->mu);
	for (size_t i = 0; i < t->nrecv; i++) {
		struct msg *m = NULL;

		while (!t->recv[i].done && !(m = take(t->h, t->me, &t->recv[i])))
			if (pthread_cond_timedwait(&t->h->cv, &t->h->mu, &dl)) {
				pthread_mutex_unlock(&t->h->mu);
				t->nrecv = 0;
				return -ETIMEDOUT;
			}
		if (m)
			match(t, &t->recv[i], m);
	}
	pthread_mutex_unlock(&t->h->mu);
	t->nrecv = 0;
	ret = t->fail;
	t->fail = 0;
	return ret;
}

/* A barrier: the lowest rank's non-zero status wins, on every rank. */
static int t_agree(void *user, int *status)
{
	struct tport *t = user;
	struct hub *h = t->h;
	struct timespec dl;
	int gen;

	t->agrees++;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += WAIT_S;
	pthread_mutex_lock(&h->mu);
	h->status[t->me] = *status;
	gen = h->gen;
	if (++h->arrived == NP) {
		h->result = 0;
		for (int r = NP - 1; r >= 0; r--)
			h->result = h->status[r] ? h->status[r] : h->result;
		h->arrived = 0;
		h->gen++;
		pthread_cond_broadcast(&h->cv);
	}
	while (h->gen == gen)
		if (pthread_cond_timedwait(&h->cv, &h->mu, &dl)) {
			pthread_mutex_unlock(&h->mu);
			return -ETIMEDOUT;
		}
	*status = h->result;
	pthread_mutex_unlock(&h->mu);
	return 0;
}

static const rl_transport_ops ops = {
	.version = RL_TRANSPORT_V1, .size = sizeof(rl_transport_ops),
	.send = t_send, .recv = t_recv, .wait = t_wait, .agree = t_agree,
	.progress = t_progress,
};

static void hub_free(struct hub *h)
{
	while (h->head) {
		struct msg *m = h->head;

		h->head = m->next;
		free(m);
	}
	pthread_mutex_destroy(&h->mu);
	pthread_cond_destroy(&h->cv);
}

/* ---------------------------------------------------------------- */
/* The cluster: a checkpoint, NP plans, NP threads                   */
/* ---------------------------------------------------------------- */

/* Mesh [NP, 2]: t0-t3 split by rows and t4-t5 by columns inside each
 * process, everything replicated across processes (read once). */
static const char spec_split[] =
	"{\"mesh\":{\"shape\":[3,2],\"axes\":[\"p\",\"m\"],\"process_of_device\":[0,0,1,1,2,2]},"
	"\"rules\":[{\"match\":\"t[0-3]\",\"spec\":[\"m\"]},"
	"{\"match\":\"t[45]\",\"spec\":[null,\"m\"]}]}";
/* One device per process, every tensor whole on each: payloads within
 * one tensor are received straight into the shard. */
static const char spec_whole[] =
	"{\"mesh\":{\"shape\":[3],\"axes\":[\"p\"],\"process_of_device\":[0,1,2]}}";
static const char *spec_json = spec_split;
static int64_t batch_bytes = 5000;
static const rl_transport_ops *cur_ops;

/* A streaming process's pieces, reassembled by shard: each byte's
 * count, the transfers' pieces (token 0), the callback's thread. */
struct pieces {
	uint8_t *buf[256], *cov[256];
	unsigned xfer;              /* transfer pieces of non-zero length */
	int fail_at;                /* fail the fail_at-th of them (0: none) */
	atomic_int inside;          /* a call running: two at once is a bug */
	pthread_t th;               /* the thread running the load */
	char bad[160];              /* the first broken promise */
};

struct proc {
	struct hub *h;
	struct tport t;
	rl_loader *ld;
	rl_plan *plan;
	int ret;
	char err[512];
	unsigned calls[256];
	struct pieces pc;
};

struct cluster {
	rl_ckpt *ck;
	rl_spec *spec;
	struct hub h;
	struct proc p[NP];
};

static void on_shard(void *user, size_t shard)
{
	struct proc *p = user;

	if (shard < 256)
		p->calls[shard]++;
}

static rl_loader *new_loader(void)
{
	rl_loader *ld = rl_loader_create();

	if (ld && (rl_loader_set(ld, RL_OPT_BACKEND, cur) < 0 ||
		   rl_loader_set(ld, RL_OPT_WORKERS, cur_workers) < 0)) {
		rl_loader_destroy(ld);
		return NULL;
	}
	return ld;
}

/* Process r's loader: onto testdev when dev_procs says so. */
static rl_loader *proc_loader(int r)
{
	static const int32_t map[6] = { 0, 1, 0, 1, 0, 1 };
	rl_loader *ld = new_loader();

	if (ld && (dev_procs >> r & 1) &&
	    (rl_loader_set_device(ld, dev_kind, map, 6, 0) < 0 ||
	     rl_loader_set(ld, RL_OPT_STAGING_BUDGET, DEV_BUDGET) < 0)) {
		rl_loader_destroy(ld);
		return NULL;
	}
	return ld;
}

/* The checkpoint (written once), the spec, NP read-once plans and loaders. */
static int cluster_init(struct cluster *c, const char *file)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->h.mu, NULL);
	pthread_cond_init(&c->h.cv, NULL);
	c->h.fail_send_rank = -1;
	c->h.fail_progress_rank = -1;
	c->ck = rl_ckpt_create();
	c->spec = rl_spec_create();
	if (!c->ck || !c->spec || rl_ckpt_open(c->ck, file) ||
	    rl_spec_parse(c->spec, spec_json, strlen(spec_json)) ||
	    rl_spec_set_dtype(c->spec, cl_dtype))
		return -1;
	for (int r = 0; r < NP; r++) {
		struct proc *p = &c->p[r];

		p->h = &c->h;
		p->t = (struct tport){ .h = &c->h, .me = r };
		p->plan = rl_plan_create();
		p->ld = proc_loader(r);
		if (!p->plan || !p->ld || rl_plan_set(p->plan, RL_PLAN_PROCESS, r) ||
		    rl_plan_set(p->plan, RL_PLAN_READ_ONCE, 1) ||
		    rl_plan_set(p->plan, RL_PLAN_CHUNK_BYTES, 4096) ||
		    rl_plan_set(p->plan, RL_PLAN_BATCH_BYTES, batch_bytes) ||
		    rl_plan_build(p->plan, c->ck, c->spec) ||
		    rl_loader_set_transport(p->ld, cur_ops ? cur_ops : &ops, &p->t) ||
		    rl_loader_set_callbacks(p->ld, on_shard, NULL, p))
			return -1;
	}
	return 0;
}

static void cluster_free(struct cluster *c)
{
	for (int r = 0; r < NP; r++) {
		rl_loader_destroy(c->p[r].ld);
		rl_plan_destroy(c->p[r].plan);
		free(c->p[r].t.recv);
		free(c->p[r].t.got);
		for (int s = 0; s < 256; s++) {
			free(c->p[r].pc.buf[s]);
			free(c->p[r].pc.cov[s]);
		}
	}
	rl_spec_destroy(c->spec);
	rl_ckpt_destroy(c->ck);
	hub_free(&c->h);
}

/* Process `starter` (-1: none) loads with rl_loader_start and pulls. */
static int starter = -1;

static int start_and_pull(struct proc *p)
{
	rl_piece pc;
	int ret = rl_loader_start(p->ld, p->plan);

	while (ret == 0 && (ret = rl_loader_next_piece(p->ld, &pc, -1)) == 1)
		rl_loader_release(p->ld, &pc);
	return ret < 0 ? ret : rl_loader_finish(p->ld);
}

static void *proc_main(void *arg)
{
	struct proc *p = arg;

	p->pc.th = pthread_self();
	p->ret = p->t.me == starter ? start_and_pull(p) : rl_loader_run(p->ld, p->plan);
	snprintf(p->err, sizeof(p->err), "%s", rl_loader_errmsg(p->ld));
	return NULL;
}

/* Every process's load at once. Returns 0, or -1: a thread did not start. */
static int cluster_run(struct cluster *c)
{
	pthread_t th[NP];
	int n = 0;

	for (; n < NP; n++)
		if (pthread_create(&th[n], NULL, proc_main, &c->p[n]))
			break;
	for (int r = 0; r < n; r++)
		pthread_join(th[r], NULL);
	return n == NP ? 0 : -1;
}

/* A random checkpoint of NT rank-2 tensors at file, of at least 16 KiB
 * of data: drawn again (about 1 in 600) when smaller, so that its
 * transfers take more than one batch (of 5000 bytes) and are shared out
 * among the processes. */
static uint8_t *write_ckpt(const char *file, struct rt *t)
{
	uint64_t data_start, fsize, data = 0;
	uint8_t *bytes = NULL;

	force_rank = 2;
	for (int tries = 0; tries < 64 && data < (16u << 10); tries++) {
		free(bytes);
		bytes = write_random_ckpt(file, t, NT, &data_start, &fsize);
		data = bytes ? fsize - data_start : 16u << 10;
	}
	force_rank = 0;
	if (data < (16u << 10)) {
		printf("    %llu bytes of data drawn, 16 KiB wanted\n", (unsigned long long)data);
		free(bytes);
		return NULL;
	}
	return bytes;
}

/* NT rank-2 tensors of random bits (NaNs, infinities and subnormals
 * among them) at file: F32, then F16 and BF16, then U8 (stored as they
 * are), so that every floating tensor starts on a whole element. */
static int write_dtype_ckpt(const char *file)
{
	static const char *const dt[] = { "F32", "F16", "BF16", "U8" };
	static const unsigned sz[] = { 4, 2, 2, 1 };
	char hdr[4096];
	size_t h = 0;
	uint64_t off = 0, hlen;
	FILE *f;
	int ok;

	h += (size_t)snprintf(hdr, sizeof(hdr), "{");
	for (unsigned i = 0; i < NT; i++) {
		unsigned k = i * 4 / NT, rows = 1 + th_rand() % 200, cols = 1 + th_rand() % 40;
		uint64_t n = (uint64_t)rows * cols * sz[k];

		h += (size_t)snprintf(hdr + h, sizeof(hdr) - h, "%s\"t%u\":{\"dtype\":\"%s\","
				      "\"shape\":[%u,%u],\"data_offsets\":[%llu,%llu]}", i ? "," : "",
				      i, dt[k], rows, cols, (unsigned long long)off,
				      (unsigned long long)(off + n));
		off += n;
	}
	hdr[h++] = '}';
	while (h % 8)
		hdr[h++] = ' ';
	hlen = h;
	if (!(f = fopen(file, "wb")))
		return -1;
	ok = fwrite(&hlen, 8, 1, f) == 1 && fwrite(hdr, 1, h, f) == h;
	for (uint64_t i = 0; ok && i < off; i++)
		ok = fputc((int)(th_rand() >> 32) & 0xff, f) != EOF;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/* ---------------------------------------------------------------- */
/* Tests                                                             */
/* ---------------------------------------------------------------- */

/* Process r's shards equal a plain load's (ref, its plan rp), each
 * reported once. NULL, or what differs. */
static const char *same_as_plain(struct proc *p, rl_loader *ref, const rl_plan *rp, char *why,
				 size_t cap)
{
	size_t n = rl_plan_num_shards(p->plan);

	if (n != rl_plan_num_shards(rp) || n > 256)
		return "another number of shards";
	for (size_t s = 0; s < n; s++) {
		rl_shard_info a, b;
		const uint8_t *ga, *gb;

		rl_plan_shard(p->plan, s, &a);
		rl_plan_shard(rp, s, &b);
		if (strcmp(a.name, b.name) || a.device != b.device || a.nbytes != b.nbytes) {
			snprintf(why, cap, "shard %zu: %s/%u, plain %s/%u", s, a.name, a.device, b.name,
				 b.device);
			return why;
		}
		if (p->calls[s] != 1) {
			snprintf(why, cap, "shard %zu (%s) reported %u times", s, a.name, p->calls[s]);
			return why;
		}
		ga = (const uint8_t *)rl_loader_staging(p->ld, a.device, NULL) + a.offset;
		if (dev_procs >> p->t.me & 1) {
			uint64_t ptr = 0;

			if (rl_loader_device_shard(p->ld, s, &ptr) < 0 || (a.nbytes && !ptr)) {
				snprintf(why, cap, "shard %zu (%s): no device memory", s, a.name);
				return why;
			}
			ga = a.nbytes ? dev_host(ptr) : ga;
		}
		gb = (const uint8_t *)rl_loader_staging(ref, b.device, NULL) + b.offset;
		if (a.nbytes && memcmp(ga, gb, a.nbytes)) {
			snprintf(why, cap, "shard %zu (%s, device %u) differs", s, a.name, a.device);
			return why;
		}
	}
	return NULL;
}

static void equals_plain_load_as(const char *spec);

static void equals_plain_load(void)
{
	equals_plain_load_as(spec_split);
}

static void whole_tensors_equal_plain_load(void)
{
	equals_plain_load_as(spec_whole);
}

static const char *cluster_equals_plain(struct cluster *c, char *why, size_t cap);

/* Bytes process p received into its staging (of device 0) and in all. */
static uint64_t received_in_staging(const struct proc *p, uint64_t *all)
{
	size_t len = 0;
	const uint8_t *st = rl_loader_staging(p->ld, 0, &len);
	uint64_t in = 0;

	*all = 0;
	for (size_t i = 0; i < p->t.ngot; i++) {
		const uint8_t *b = p->t.got[i].buf;

		*all += p->t.got[i].len;
		if (st && b >= st && p->t.got[i].len <= len && b - st <= (ptrdiff_t)(len - p->t.got[i].len))
			in += p->t.got[i].len;
	}
	return in;
}

/*
 * One device a process, every tensor whole, tensors of 3,000 bytes under
 * batches of 5,000: most payloads span two or three tensors, neighbours
 * in the file and in staging (placed congruently), so their copies tile
 * one span of staging and each is received straight into it, not into a
 * receive buffer and then copied. Before, only a payload inside one
 * tensor was.
 */
static void payloads_received_in_place(void)
{
	struct cluster c;
	char hex[65];
	const char *bad;
	char why[256];

	CHECK(write_hashed_ckpt(tmp_path("tpi.safetensors"), 24, 3008, hex) == 0);
	spec_json = spec_whole;
	CHECK(cluster_init(&c, tmp_path("tpi.safetensors")) == 0);
	spec_json = spec_split;
	CHECK(cluster_run(&c) == 0);
	bad = cluster_equals_plain(&c, why, sizeof(why));
	CHECKF(!bad, "%s", bad);
	for (int r = 0; r < NP; r++) {
		uint64_t all, in = received_in_staging(&c.p[r], &all);

		CHECKF(all > 0 && in == all, "process %d: %llu of %llu received bytes in staging", r,
		       (unsigned long long)in, (unsigned long long)all);
	}
	cluster_free(&c);
}

/* Every process onto testdev; processes 0 and 2 only (1 loads to host). */
static void device_equals_plain_load(void)
{
	dev_procs = 7;
	equals_plain_load_as(spec_split);
	equals_plain_load_as(spec_whole);
	dev_procs = 5;
	equals_plain_load_as(spec_split);
	dev_procs = 0;
}

/* The same onto the fake CUDA driver's 2 GPUs (copies run late on
 * its streams' threads): every copy from pinned memory, and nothing
 * left allocated, pinned or in flight once the loaders are gone. */
static void cuda_equals_plain_load(void)
{
	struct fakecuda_stats st;

	setenv("FAKECUDA_DEVICES", "2", 1);
	setenv("FAKECUDA_DELAY_US", "20", 1);
	fake_reset();
	dev_kind = "cuda";
	dev_procs = 7;
	equals_plain_load_as(spec_split);
	dev_procs = 5;
	equals_plain_load_as(spec_whole);
	dev_procs = 0;
	dev_kind = "testdev";
	fake_stats(&st);
	CHECKF(st.copies > 0 && !st.unpinned && !st.out_of_bounds,
	       "%ld copies, %ld from unpinned memory, %ld out of bounds", st.copies, st.unpinned,
	       st.out_of_bounds);
	CHECKF(!st.allocs && !st.streams && !st.events && !st.ctx_refs && !st.registered &&
	       !st.inflight, "left: allocs %ld streams %ld events %ld ctx %ld pinned %ld "
	       "inflight %ld", st.allocs, st.streams, st.events, st.ctx_refs, st.registered,
	       st.inflight);
}

/*
 * The spec's dtype converts every floating tensor (F32, F16, BF16 of
 * random bits) to F16, BF16 and F32 on load: the transfers move the
 * file's bytes and their copies convert, so every process's shards equal
 * a plain converting load's (itself bit-exact against torch's .to():
 * python/tests/test_dtype.py); host staging, testdev and a mix.
 */
static void dtype_equals_plain_load(void)
{
	static const int to[] = { RL_DTYPE_F16, RL_DTYPE_BF16, RL_DTYPE_F32 };

	for (int i = 0; i < 3; i++) {
		cl_dtype = to[i];
		equals_plain_load_as(spec_split);
		equals_plain_load_as(spec_whole);
		dev_procs = i == 0 ? 7 : 5;
		equals_plain_load_as(spec_split);
		dev_procs = 0;
	}
	cl_dtype = -1;
}

static void equals_plain_load_as(const char *spec)
{
	struct rt t[NT];
	struct cluster c;
	uint8_t *file = cl_dtype < 0 ? write_ckpt(tmp_path("tp.safetensors"), t) : NULL;
	uint64_t ntr = 0, nb = 0, ro_read = 0, plain_read = 0;
	char why[256];
	int ret;

	CHECK(file || (cl_dtype >= 0 && write_dtype_ckpt(tmp_path("tp.safetensors")) == 0));
	free(file);
	spec_json = spec;
	ret = cluster_init(&c, tmp_path("tp.safetensors"));
	spec_json = spec_split;
	CHECK(ret == 0);
	rl_plan_transfer_summary(c.p[0].plan, &ntr, &nb, NULL);
	CHECKF(ntr > 0 && nb > 1, "%llu transfers in %llu batches", (unsigned long long)ntr,
	       (unsigned long long)nb);
	CHECK(cluster_run(&c) == 0);
	for (int r = 0; r < NP; r++) {
		rl_loader *ref = new_loader();
		rl_plan *rp = NULL;
		rl_load_stats ls = { .size = sizeof(ls) };
		const char *bad;

		CHECKF(c.p[r].ret == 0, "process %d: %s", r, c.p[r].err);
		CHECK(ref && rl_loader_load(ref, c.ck, c.spec, r, &rp) == 0);
		bad = same_as_plain(&c.p[r], ref, rp, why, sizeof(why));
		CHECKF(!bad, "process %d: %s", r, bad);
		CHECK(rl_loader_get_stats(c.p[r].ld, &ls) == 0);
		ro_read += ls.bytes_read;
		CHECK(rl_loader_get_stats(ref, &ls) == 0);
		plain_read += ls.bytes_read;
		rl_plan_destroy(rp);
		rl_loader_destroy(ref);
	}
	/* Replicated over NP processes: read once is about a third. */
	CHECKF(ro_read * 2 < plain_read, "read once read %llu bytes, plain loads %llu",
	       (unsigned long long)ro_read, (unsigned long long)plain_read);
	cluster_free(&c);
}

/* Every process failed with code, the failing one with its own message
 * (mine), the others saying another process failed. */
static const char *all_failed(struct cluster *c, int bad, int code, const char *mine, char *why,
			      size_t cap)
{
	for (int r = 0; r < NP; r++) {
		const struct proc *p = &c->p[r];
		const char *want = r == bad ? mine : "another process failed";

		if (p->ret != code || !strstr(p->err, want)) {
			snprintf(why, cap, "process %d: %d (%s), %d and \"%s\" expected", r, p->ret,
				 p->err, code, want);
			return why;
		}
		if (rl_loader_staging(p->ld, 0, NULL))
			return "a failed load hands out its staging";
	}
	return NULL;
}

static void own_failure_fails_everyone(void)
{
	struct rt t[NT];
	struct cluster c;
	uint8_t *file = write_ckpt(tmp_path("tpf.safetensors"), t);
	const char *bad;
	char why[640];

	CHECK(file);
	free(file);
	CHECK(cluster_init(&c, tmp_path("tpf.safetensors")) == 0);
	/* Process 1 wants caller staging it never got. */
	CHECK(rl_loader_set(c.p[1].ld, RL_OPT_STAGING, RL_STAGING_CALLER) == 0);
	CHECK(cluster_run(&c) == 0);
	bad = all_failed(&c, 1, RL_E_STAGING, "no staging supplied", why, sizeof(why));
	CHECKF(!bad, "%s", bad);
	cluster_free(&c);
}

/*
 * Processes 0 and 2 onto testdev, whose n-th copy fails when it runs
 * (RL_TESTDEV_FAIL_AT, read as each loader's sink is made), n raised
 * until the load succeeds: every failure fails every process with no
 * device memory kept, none hangs, and some fail in the transfers.
 */
static void device_failure_fails_everyone(void)
{
	struct rt t[NT];
	uint8_t *file = write_ckpt(tmp_path("tpd.safetensors"), t);
	int in_transfers = 0, done = 0;
	char num[32];

	CHECK(file);
	free(file);
	dev_procs = 5;
	for (long n = 1; !done && n < 100000; n += 1 + n / 2) {
		struct cluster c;
		uint64_t ptr;

		snprintf(num, sizeof(num), "%ld", n);
		setenv("RL_TESTDEV_FAIL_AT", num, 1);
		CHECK(cluster_init(&c, tmp_path("tpd.safetensors")) == 0);
		CHECK(cluster_run(&c) == 0);
		done = c.p[0].ret == 0 && c.p[2].ret == 0;
		for (int r = 0; r < NP; r++) {
			const struct proc *p = &c.p[r];

			CHECKF(done ? p->ret == 0 : p->ret < 0, "copy %ld: process %d: %d (%s)", n, r,
			       p->ret, p->err);
			CHECKF(done || r == 1 || rl_loader_device_shard(p->ld, 0, &ptr) < 0,
			       "copy %ld: process %d failed, keeping its device memory", n, r);
		}
		/* a late copy error surfaces at the next half's wait or at the end */
		in_transfers |= !done && (strstr(c.p[1].err, "read once: batch") ||
					  strstr(c.p[1].err, "read once: the end"));
		cluster_free(&c);
	}
	unsetenv("RL_TESTDEV_FAIL_AT");
	dev_procs = 0;
	CHECKF(done && in_transfers, "succeeded %d, failed in the transfers %d", done,
	       in_transfers);
}

static void failed_send_fails_everyone(void)
{
	struct rt t[NT];
	struct cluster c;
	uint8_t *file = write_ckpt(tmp_path("tps.safetensors"), t);
	const char *bad;
	char why[640];

	CHECK(file);
	free(file);
	CHECK(cluster_init(&c, tmp_path("tps.safetensors")) == 0);
	c.h.fail_send_rank = 2;
	CHECK(cluster_run(&c) == 0);
	CHECKF(c.p[2].t.sends > 0, "process 2 sent nothing: no failure injected");
	/* Process 2 and the receivers of its first payload fail in the move;
	 * the agreement gives every process the lowest rank's code. */
	for (int r = 0; r < NP; r++)
		CHECKF(c.p[r].ret == -EIO && strstr(c.p[r].err, "read once: batch"),
		       "process %d: %d (%s)", r, c.p[r].ret, c.p[r].err);
	(void)bad;
	(void)why;
	cluster_free(&c);
}

/*
 * Piece callback of a streaming process: the piece lands in its shard's
 * buffer and counts its bytes there; own pieces (windows) are released
 * at once, transfer pieces (token 0) are valid only now. Records the
 * first broken promise: another thread, two calls at once, a piece
 * outside its shard.
 */
static int on_piece(void *user, const rl_piece *pc)
{
	struct proc *p = user;
	struct pieces *q = &p->pc;
	rl_shard_info si;
	int ret = 0;

	if (atomic_fetch_add(&q->inside, 1) && !q->bad[0])
		snprintf(q->bad, sizeof(q->bad), "two piece calls at once");
	if (!pthread_equal(pthread_self(), q->th) && !q->bad[0])
		snprintf(q->bad, sizeof(q->bad), "a piece on another thread");
	if (pc->shard >= 256 || rl_plan_shard(p->plan, pc->shard, &si) ||
	    pc->offset > si.nbytes || pc->length > si.nbytes - pc->offset ||
	    pc->device != si.device || (pc->length && !pc->data)) {
		if (!q->bad[0])
			snprintf(q->bad, sizeof(q->bad), "piece of shard %zu at %llu, %llu bytes: outside",
				 pc->shard, (unsigned long long)pc->offset,
				 (unsigned long long)pc->length);
	} else if (pc->length) {
		if (!q->buf[pc->shard]) {
			q->buf[pc->shard] = malloc(si.nbytes);
			q->cov[pc->shard] = calloc(si.nbytes, 1);
		}
		if (q->buf[pc->shard] && q->cov[pc->shard]) {
			memcpy(q->buf[pc->shard] + pc->offset, pc->data, pc->length);
			for (uint64_t k = 0; k < pc->length; k++)
				q->cov[pc->shard][pc->offset + k]++;
		}
		if (!pc->token && ++q->xfer == (unsigned)q->fail_at)
			ret = 1;
	}
	if (pc->token && rl_loader_release(p->ld, pc) && !q->bad[0])
		snprintf(q->bad, sizeof(q->bad), "release refused: %s", rl_loader_errmsg(p->ld));
	atomic_fetch_sub(&q->inside, 1);
	return ret;
}

/* Process p streams to on_piece under a 64 KiB budget. */
static int set_streaming(struct proc *p)
{
	return rl_loader_set(p->ld, RL_OPT_STAGING, RL_STAGING_STREAM) ||
	       rl_loader_set(p->ld, RL_OPT_STAGING_BUDGET, 64 << 10) ||
	       rl_loader_set_piece_callback(p->ld, on_piece, p) ? -1 : 0;
}

/* Streaming process p's pieces equal a plain load's shards (ref, rp),
 * every byte in exactly one piece. NULL, or what differs. */
static const char *pieces_as_plain(struct proc *p, rl_loader *ref, const rl_plan *rp,
				   char *why, size_t cap)
{
	size_t n = rl_plan_num_shards(p->plan);

	if (p->pc.bad[0])
		return p->pc.bad;
	if (n != rl_plan_num_shards(rp) || n > 256)
		return "another number of shards";
	for (size_t s = 0; s < n; s++) {
		rl_shard_info a, b;
		const uint8_t *gb;

		rl_plan_shard(p->plan, s, &a);
		rl_plan_shard(rp, s, &b);
		gb = (const uint8_t *)rl_loader_staging(ref, b.device, NULL) + b.offset;
		if (!a.nbytes)
			continue;
		if (!p->pc.buf[s] || !p->pc.cov[s]) {
			snprintf(why, cap, "shard %zu (%s): no piece", s, a.name);
			return why;
		}
		for (uint64_t k = 0; k < a.nbytes; k++)
			if (p->pc.cov[s][k] != 1) {
				snprintf(why, cap, "shard %zu (%s): byte %llu in %u pieces", s, a.name,
					 (unsigned long long)k, p->pc.cov[s][k]);
				return why;
			}
		if (memcmp(p->pc.buf[s], gb, a.nbytes)) {
			snprintf(why, cap, "shard %zu (%s) differs from a plain load's", s, a.name);
			return why;
		}
	}
	return NULL;
}

/* Processes in mask stream, the others load whole: each equals its plain
 * load, and the streaming ones got transfer pieces. */
/* Whether streaming process r's pieces differ from a plain load's
 * shards: NULL when they are equal, else what differs (in why). */
static const char *stream_differs(struct cluster *c, int r, char *why, size_t cap)
{
	rl_loader *ref = new_loader();
	rl_plan *rp = NULL;
	const char *bad = "the plain load failed";

	if (ref && rl_loader_load(ref, c->ck, c->spec, r, &rp) == 0)
		bad = pieces_as_plain(&c->p[r], ref, rp, why, cap);
	if (bad && bad != why)
		snprintf(why, cap, "%s", bad);
	rl_plan_destroy(rp);
	rl_loader_destroy(ref);
	return bad ? why : NULL;
}

static void stream_equals_plain_load_as(const char *spec, unsigned mask)
{
	struct rt t[NT];
	struct cluster c;
	uint8_t *file = cl_dtype < 0 ? write_ckpt(tmp_path("tps.safetensors"), t) : NULL;
	char why[256];
	int ret;

	CHECK(file || (cl_dtype >= 0 && write_dtype_ckpt(tmp_path("tps.safetensors")) == 0));
	free(file);
	spec_json = spec;
	ret = cluster_init(&c, tmp_path("tps.safetensors"));
	spec_json = spec_split;
	CHECK(ret == 0);
	for (int r = 0; r < NP; r++)
		CHECK(!(mask >> r & 1) || set_streaming(&c.p[r]) == 0);
	CHECK(cluster_run(&c) == 0);
	for (int r = 0; r < NP; r++) {
		rl_loader *ref = new_loader();
		rl_plan *rp = NULL;
		const char *bad;

		CHECKF(c.p[r].ret == 0, "process %d: %s", r, c.p[r].err);
		CHECK(ref && rl_loader_load(ref, c.ck, c.spec, r, &rp) == 0);
		bad = mask >> r & 1 ? pieces_as_plain(&c.p[r], ref, rp, why, sizeof(why)) :
		      same_as_plain(&c.p[r], ref, rp, why, sizeof(why));
		CHECKF(!bad, "process %d: %s", r, bad);
		CHECKF(!(mask >> r & 1) || c.p[r].pc.xfer > 0, "process %d: no transfer piece", r);
		rl_plan_destroy(rp);
		rl_loader_destroy(ref);
	}
	cluster_free(&c);
}

/*
 * Streaming loaders over a transport (every process, or one among whole
 * loads; split shards with strided transfer copies, and whole tensors):
 * the transfers' bytes come as pieces of the same callback, and every
 * byte of every shard arrives once, equal to a plain load's. Before,
 * such a run failed with RL_E_STATE on every process.
 */
static void stream_equals_plain_load(void)
{
	stream_equals_plain_load_as(spec_split, 7);
	stream_equals_plain_load_as(spec_whole, 7);
	stream_equals_plain_load_as(spec_split, 2);
}

/* The same with the spec's dtype converting every floating tensor: the
 * transfer pieces carry converted bytes, as the own reads' do. */
static void stream_dtype_equals_plain_load(void)
{
	static const int to[] = { RL_DTYPE_F16, RL_DTYPE_BF16, RL_DTYPE_F32 };

	for (int i = 0; i < 3; i++) {
		cl_dtype = to[i];
		stream_equals_plain_load_as(spec_split, 7);
		stream_equals_plain_load_as(spec_whole, 5);
	}
	cl_dtype = -1;
}

/*
 * Every library allocation fails from the n-th on, the three streaming
 * processes' together (which one fails first varies), over split shards
 * (strided transfer copies packed into pieces) and whole ones: each
 * process loads every byte once or fails with a code and a message, none
 * waits for another (a hang is the transport's -ETIMEDOUT), nothing leaks,
 * and once n passes every allocation all of them load.
 */
static void transfers_out_of_memory(void)
{
	static const char *const specs[] = { spec_split, spec_whole };
	struct rt t[NT];
	uint8_t *file = write_ckpt(tmp_path("tpm.safetensors"), t);

	CHECK(file);
	free(file);
	for (size_t i = 0; i < CM_ARRAY_SIZE(specs) && !th_failed(); i++) {
		int ok = 0, failed = 0;
		long n;

		for (n = 0; ok < NP && n < 1000000 && !th_failed(); n += 1 + n / 8) {
			struct cluster c;
			char why[256];

			spec_json = specs[i];
			CHECK(cluster_init(&c, tmp_path("tpm.safetensors")) == 0);
			spec_json = spec_split;
			for (int r = 0; r < NP; r++)
				CHECK(set_streaming(&c.p[r]) == 0);
			cm_alloc_fail_after(n);
			CHECK(cluster_run(&c) == 0);
			cm_alloc_fail_after(-1);
			ok = 0;
			for (int r = 0; r < NP; r++) {
				const struct proc *p = &c.p[r];

				if (p->ret) {
					failed++;
					CHECKF(p->ret != -ETIMEDOUT && p->err[0],
					       "allocation %ld: process %d: %d (%s)", n, r, p->ret,
					       p->err);
					continue;
				}
				ok++;
				CHECKF(!stream_differs(&c, r, why, sizeof(why)),
				       "allocation %ld: process %d: %s", n, r, why);
			}
			cluster_free(&c);
		}
		CHECKF(ok == NP && failed > 0, "%s: %d loaded after %ld allocations, %d failures",
		       i ? "whole" : "split", ok, n, failed);
	}
}

/*
 * Process 1's callback fails on its first, then its third transfer
 * piece: its run fails with RL_E_CANCELED naming the callback, every
 * other process with the same code, none hangs, and no call follows the
 * failing one on process 1.
 */
static void stream_callback_failure_fails_everyone(void)
{
	struct rt t[NT];
	struct cluster c;
	uint8_t *file = write_ckpt(tmp_path("tpr.safetensors"), t);
	const char *bad;
	char why[640];

	CHECK(file);
	free(file);
	for (int at = 1; at <= 3; at += 2) {
		CHECK(cluster_init(&c, tmp_path("tpr.safetensors")) == 0);
		for (int r = 0; r < NP; r++)
			CHECK(set_streaming(&c.p[r]) == 0);
		c.p[1].pc.fail_at = at;
		CHECK(cluster_run(&c) == 0);
		bad = all_failed(&c, 1, RL_E_CANCELED, "the piece callback canceled", why,
				 sizeof(why));
		CHECKF(!bad, "fail at %d: %s", at, bad);
		CHECKF(c.p[1].pc.xfer == (unsigned)at, "fail at %d: %u transfer pieces", at,
		       c.p[1].pc.xfer);
		cluster_free(&c);
	}
}

/*
 * rl_loader_start on a loader with a transport (process 1, onto testdev:
 * a started device load) while the others run: its transfers would never
 * come (a started load has no transfer step), so it fails with
 * RL_E_STATE and every process with it. Before, process 1 succeeded with
 * the shards others send it never filled, and the others waited.
 */
static void started_load_refused_everywhere(void)
{
	struct rt t[NT];
	struct cluster c;
	uint8_t *file = write_ckpt(tmp_path("tpst.safetensors"), t);
	const char *bad;
	char why[640];

	CHECK(file);
	free(file);
	dev_procs = 2;
	starter = 1;
	CHECK(cluster_init(&c, tmp_path("tpst.safetensors")) == 0);
	CHECK(cluster_run(&c) == 0);
	starter = -1;
	dev_procs = 0;
	bad = all_failed(&c, 1, RL_E_STATE, "rl_loader_start", why, sizeof(why));
	CHECKF(!bad, "%s", bad);
	cluster_free(&c);
}

/*
 * A Hugging Face cache blob (snapshots/r/m.safetensors -> blobs/<hex>,
 * a value no file has) read once: each process reads parts of it for
 * others, so none can check it: its file statistics list the file as
 * RL_SHA256_PARTIAL and the load counts it unchecked (before, a file read
 * only for others was missing from them: nothing said it went unchecked).
 */
static void blob_read_for_others_counted_unchecked(void)
{
	static const char hex[] = "0123456789abcdef0123456789abcdef"
				  "0123456789abcdef0123456789abcdef";
	char blob[4096], snap[4096], cmd[16384];
	struct rt t[NT];
	struct cluster c;
	uint8_t *file;

	snprintf(blob, sizeof(blob), "%s", tmp_path("hf/blobs"));
	snprintf(snap, sizeof(snap), "%s", tmp_path("hf/snapshots/r"));
	snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -p %s %s", tmp_path("hf"), blob, snap);
	CHECK(system(cmd) == 0);
	snprintf(blob + strlen(blob), sizeof(blob) - strlen(blob), "/%s", hex);
	file = write_ckpt(blob, t);
	CHECK(file);
	free(file);
	snprintf(snap + strlen(snap), sizeof(snap) - strlen(snap), "/m.safetensors");
	CHECK(symlink(blob, snap) == 0);
	CHECK(cluster_init(&c, snap) == 0);
	CHECK(cluster_run(&c) == 0);
	for (int r = 0; r < NP; r++) {
		rl_load_stats ls = { .size = sizeof(ls) };
		size_t partial = 0;

		CHECKF(c.p[r].ret == 0, "process %d: %s", r, c.p[r].err);
		CHECK(rl_loader_get_stats(c.p[r].ld, &ls) == 0);
		for (size_t f = 0; f < rl_loader_num_files(c.p[r].ld); f++) {
			rl_file_stats fs = { .size = sizeof(fs) };

			CHECK(rl_loader_get_file_stats(c.p[r].ld, f, &fs) == 0);
			partial += fs.file == 0 && fs.sha256_state == RL_SHA256_PARTIAL;
		}
		CHECKF(ls.files_unchecked == 1 && partial == 1,
		       "process %d: %u unchecked, %zu partial of %zu files", r, ls.files_unchecked,
		       partial, rl_loader_num_files(c.p[r].ld));
	}
	cluster_free(&c);
}

/*
 * Each process's shards equal a plain load's, and the cluster read less
 * than the plain loads together. NULL, or what differs (why).
 */
static const char *cluster_equals_plain(struct cluster *c, char *why, size_t cap)
{
	for (int r = 0; r < NP; r++) {
		rl_loader *ref = new_loader();
		rl_plan *rp = NULL;
		const char *bad;

		if (c->p[r].ret) {
			snprintf(why, cap, "process %d: %s", r, c->p[r].err);
			return why;
		}
		if (!ref || rl_loader_load(ref, c->ck, c->spec, r, &rp)) {
			rl_loader_destroy(ref);
			return "the plain load failed";
		}
		bad = same_as_plain(&c->p[r], ref, rp, why, cap);
		rl_plan_destroy(rp);
		rl_loader_destroy(ref);
		if (bad)
			return bad;
	}
	return NULL;
}

/* Writes path: one U8 tensor called name of n random bytes. 0 or -1. */
static int write_one_tensor(const char *path, const char *name, size_t n)
{
	char hdr[256];
	int h = snprintf(hdr, sizeof(hdr), "{\"%s\":{\"dtype\":\"U8\",\"shape\":[%zu],"
			 "\"data_offsets\":[0,%zu]}}", name, n, n);
	uint8_t *f = malloc(8 + (size_t)h + n);
	int ret;

	if (!f)
		return -1;
	for (int i = 0; i < 8; i++)
		f[i] = (uint8_t)((uint64_t)h >> (8 * i));
	memcpy(f + 8, hdr, (size_t)h);
	for (size_t i = 0; i < n; i++)
		f[8 + h + i] = (uint8_t)th_rand();
	ret = write_bytes(path, f, 8 + (size_t)h + n);
	free(f);
	return ret;
}

/*
 * 48 files of one 256 KiB tensor each, whole on each of NP processes,
 * read once in batches of 6 MiB: each process roots 8 payloads (one per
 * file) a batch. The executor sends each payload as soon as it is read
 * and calls the transport's progress op meanwhile: progress is called,
 * and some send follows a progress call that followed a send of the same
 * batch (the calling thread went on while the batch was still being
 * read). Before, there was no progress op and every send of a batch came
 * after its whole read and an agreement.
 */
/* The cluster of 48 one-tensor files of 256 KiB (see below) at c. */
static int overlap_cluster(struct cluster *c)
{
	char name[64], dir[4096], cmd[8320];
	int ret;

	snprintf(dir, sizeof(dir), "%s", tmp_path("tpo"));
	snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -p %s", dir, dir);
	if (system(cmd))
		return -1;
	for (int f = 0; f < 48; f++) {
		char tensor[16];

		snprintf(name, sizeof(name), "tpo/f%02d.safetensors", f);
		snprintf(tensor, sizeof(tensor), "w%02d", f);
		if (write_one_tensor(tmp_path(name), tensor, 256 << 10))
			return -1;
	}
	spec_json = spec_whole;
	batch_bytes = 6 << 20;
	ret = cluster_init(c, dir);
	spec_json = spec_split;
	batch_bytes = 5000;
	return ret;
}

static void sends_overlap_reads(void)
{
	char why[640];
	struct cluster c;
	int calls = 0, between = 0;
	const char *bad;

	CHECK(overlap_cluster(&c) == 0);
	CHECK(cluster_run(&c) == 0);
	bad = cluster_equals_plain(&c, why, sizeof(why));
	CHECKF(!bad, "%s", bad);
	for (int r = 0; r < NP; r++) {
		calls += c.p[r].t.progress_calls;
		between += c.p[r].t.sends_between;
	}
	CHECKF(calls > 0, "the progress op was never called");
	CHECKF(between > 0, "every send of a batch came at once (%d progress calls)", calls);
	cluster_free(&c);
}

/*
 * Process 1's first progress call fails while its batch is being read:
 * it stops its reads, still sends every payload it owes (the others'
 * receives complete: nobody waits WAIT_S) and fails; the others fail
 * with its code at the batch's agreement, and no process keeps staging.
 */
static void failed_progress_fails_everyone(void)
{
	struct cluster c;
	const char *bad;
	char why[640];

	CHECK(overlap_cluster(&c) == 0);
	c.h.fail_progress_rank = 1;
	CHECK(cluster_run(&c) == 0);
	if (!c.p[1].t.progress_calls) {
		cluster_free(&c);       /* its reads ended before any progress call */
		th_skip("process 1 never called progress");
		return;
	}
	bad = all_failed(&c, 1, -EIO, "the transport failed", why, sizeof(why));
	CHECKF(!bad, "%s", bad);
	cluster_free(&c);
}

/* A table from a header without the progress op (size
 * RL_TRANSPORT_V1_SIZE) is taken, and the op past its end never called. */
static void table_without_progress_taken(void)
{
	rl_transport_ops o = ops;
	struct rt t[NT];
	struct cluster c;
	uint8_t *file = write_ckpt(tmp_path("tpv.safetensors"), t);
	char why[640];
	const char *bad;
	int calls = 0, ret;

	CHECK(file);
	free(file);
	o.size = (uint32_t)RL_TRANSPORT_V1_SIZE;
	cur_ops = &o;
	ret = cluster_init(&c, tmp_path("tpv.safetensors"));
	cur_ops = NULL;
	CHECK(ret == 0);
	CHECK(cluster_run(&c) == 0);
	bad = cluster_equals_plain(&c, why, sizeof(why));
	CHECKF(!bad, "%s", bad);
	for (int r = 0; r < NP; r++)
		calls += c.p[r].t.progress_calls;
	CHECKF(calls == 0, "%d calls of an op past the table's size", calls);
	cluster_free(&c);
}

static void bad_ops_refused(void)
{
	rl_loader *ld = rl_loader_create();
	rl_transport_ops o = ops;

	CHECK(ld);
	CHECK_EQ(rl_loader_set_transport(NULL, &ops, NULL), -EINVAL);
	o.version = 2;
	CHECK_EQ(rl_loader_set_transport(ld, &o, NULL), RL_E_INVALID_ARG);
	CHECK(strstr(rl_loader_errmsg(ld), "version 2"));
	o = ops;
	o.size = 8;
	CHECK_EQ(rl_loader_set_transport(ld, &o, NULL), RL_E_INVALID_ARG);
	CHECK(strstr(rl_loader_errmsg(ld), "size 8"));
	o = ops;
	o.agree = NULL;
	CHECK_EQ(rl_loader_set_transport(ld, &o, NULL), RL_E_INVALID_ARG);
	CHECK(strstr(rl_loader_errmsg(ld), "agree op"));
	CHECK_EQ(rl_loader_set_transport(ld, &ops, NULL), 0);
	CHECK_EQ(rl_loader_set_transport(ld, NULL, NULL), 0);
	rl_loader_destroy(ld);
}

static void select_backend(rl_backend b, unsigned workers)
{
	cur = b;
	cur_workers = workers;
}

int main(void)
{
	static const struct th_case tests[] = {
		{ "equals_plain_load", equals_plain_load },
		{ "whole_tensors_equal_plain_load", whole_tensors_equal_plain_load },
		{ "payloads_received_in_place", payloads_received_in_place },
		{ "device_equals_plain_load", device_equals_plain_load },
		{ "cuda_equals_plain_load", cuda_equals_plain_load },
		{ "dtype_equals_plain_load", dtype_equals_plain_load },
		{ "own_failure_fails_everyone", own_failure_fails_everyone },
		{ "failed_send_fails_everyone", failed_send_fails_everyone },
		{ "device_failure_fails_everyone", device_failure_fails_everyone },
		{ "stream_equals_plain_load", stream_equals_plain_load },
		{ "stream_dtype_equals_plain_load", stream_dtype_equals_plain_load },
		{ "stream_callback_failure_fails_everyone", stream_callback_failure_fails_everyone },
		{ "transfers_out_of_memory", transfers_out_of_memory },
		{ "started_load_refused_everywhere", started_load_refused_everywhere },
		{ "blob_read_for_others_counted_unchecked", blob_read_for_others_counted_unchecked },
		{ "sends_overlap_reads", sends_overlap_reads },
		{ "failed_progress_fails_everyone", failed_progress_fails_everyone },
		{ "table_without_progress_taken", table_without_progress_taken },
	};

	th_seed();
	if (fake_open() < 0) {
		printf("cannot load the fake CUDA driver beside this program: %s\n", dlerror());
		return 1;
	}
	th_run("bad_ops_refused", bad_ops_refused);
	run_on_every_backend(tests, CM_ARRAY_SIZE(tests), worker_counts,
			     CM_ARRAY_SIZE(worker_counts), select_backend);
	return th_done();
}
