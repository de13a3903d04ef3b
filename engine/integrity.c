/*
 * integrity.c - what a run checks about its files besides their bytes
 * arriving (issue 11, items 5 and 7):
 *
 * Identity. Each file's statx identity (dev, inode, size, mtime, ctime) is
 * taken on the descriptor the engine opened, compared with the identity
 * the checkpoint recorded when it was opened (a file replaced or rewritten
 * in between is stale: its header no longer describes it), and taken
 * again after the last read (a file rewritten in place during the load).
 * Either difference fails the run with RL_E_FILE_CHANGED. Detection, not a
 * guarantee: timestamps have the kernel's coarse clock granularity, and a
 * write through a shared mapping updates them late (docs/validation.md).
 *
 * SHA-256 from the bytes as they arrive. SHA-256 is sequential and reads
 * complete out of order across workers, so each hashed file has a cursor
 * `next` (bytes [0, next) hashed) and one hasher at a time (`busy`). The
 * worker that completes the read holding byte `next` hashes it, then every
 * held chunk that continues it; a worker whose read is ahead of the cursor
 * copies its bytes into a held chunk (sorted by offset) and goes on, so its
 * bounce buffer is reused at once. The held bytes are bounded: past the
 * in-flight bound, workers claim no new reads (claims are in file order,
 * so the read the cursor waits for was claimed before any held one and is
 * in flight or queued; it completes, and the held chunks drain). Held
 * bytes therefore stay below the bound plus what was in flight or claimed
 * when claims paused. The hashing runs in the completion path of the
 * worker, after it submitted its next reads: never on the submission path.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include <openssl/evp.h>

#include "eng_int.h"

/* A chunk that arrived ahead of its file's cursor. */
struct held {
	uint64_t off;
	uint32_t len;
	struct held *next;
	uint8_t bytes[];
};

struct hfile {
	pthread_mutex_t lock;     /* next, busy, held */
	EVP_MD_CTX *md;           /* NULL: not hashed */
	uint64_t size;
	uint64_t next;            /* bytes [0, next) hashed */
	int busy;                 /* one worker hashes at a time */
	struct held *held;        /* sorted by offset */
};

struct eng_integ {
	struct rl_file_id *ids;   /* as the engine opened each file */
	struct hfile *hf;         /* per file; NULL when nothing is hashed */
	size_t nfiles;
	uint64_t held_max;        /* claims pause past this many held bytes */
	/* Relaxed counters: statistics and the pause hint; the chunks
	 * themselves are handed over under each file's lock. */
	atomic_uint_fast64_t held_bytes, held_peak, hashed, hash_ns;
	pthread_mutex_t wait_lock; /* paused workers sleep on wait_cond */
	pthread_cond_t wait_cond;
};

/* ------------------------------------------------------------------ */
/* Setup: identities, coverage, digest contexts */

static int record_ids(struct eng_run *rc, struct eng_integ *in)
{
	const struct eng_job *job = rc->b.job;

	for (size_t i = 0; i < rc->cx.nfiles; i++) {
		const char *what;

		rl_file_id_get(rc->cx.files[i].fd, in->ids + i); /* unrecorded: not compared */
		what = job->file_ids ? rl_file_id_diff(job->file_ids + i, in->ids + i) : NULL;
		if (what)
			return rl_err_set(rc->b.e, RL_E_FILE_CHANGED,
					  "%s: file changed since the checkpoint was opened (%s "
					  "differs); open the checkpoint again",
					  rc->cx.files[i].path, what);
	}
	return 0;
}

/* The reads of every hashed file cover [0, size) with their min_len
 * bytes, in offset order (which keeps held bytes bounded). */
static int check_coverage(struct eng_run *rc, const uint8_t *hash)
{
	const struct eng_job *job = rc->b.job;
	uint64_t *cov = rl_calloc(rc->cx.nfiles + 1, 2 * sizeof(uint64_t)), *last;
	int ret = 0;

	if (!cov)
		return rl_err_set(rc->b.e, -ENOMEM, "out of memory");
	last = cov + rc->cx.nfiles;
	for (size_t i = 0; i < job->nreads && ret == 0; i++) {
		const struct rl_read *r = job->reads + i;

		if (r->file >= rc->cx.nfiles || !hash[r->file])
			continue;
		if (r->off < last[r->file] || r->off > cov[r->file])
			ret = rl_err_set(rc->b.e, RL_E_INVALID_ARG,
					 "%s: SHA-256 needs reads in offset order covering the "
					 "file: read at offset %llu %s", rc->cx.files[r->file].path,
					 (unsigned long long)r->off, r->off > cov[r->file] ?
					 "leaves a gap before it" : "comes after a later one");
		last[r->file] = r->off;
		cov[r->file] = RL_MAX(cov[r->file], r->off + r->min_len);
	}
	for (size_t f = 0; f < rc->cx.nfiles && ret == 0; f++)
		if (hash[f] && cov[f] < job->file_sizes[f])
			ret = rl_err_set(rc->b.e, RL_E_INVALID_ARG,
					 "%s: SHA-256 needs reads covering the file: bytes from "
					 "%llu on are not read", rc->cx.files[f].path,
					 (unsigned long long)cov[f]);
	rl_free(cov);
	return ret;
}

static int setup_hashing(struct eng_run *rc, struct eng_integ *in)
{
	const struct eng_job *job = rc->b.job;
	int ret;

	if (!job->reads || !job->digests)
		return rl_err_set(rc->b.e, RL_E_INVALID_ARG,
				  "SHA-256 needs an array of reads and room for the digests");
	ret = check_coverage(rc, job->hash);
	if (ret < 0)
		return ret;
	in->hf = rl_calloc(rc->cx.nfiles + 1, sizeof(*in->hf));
	if (!in->hf)
		return rl_err_set(rc->b.e, -ENOMEM, "out of memory");
	for (size_t f = 0; f < rc->cx.nfiles; f++) {
		pthread_mutex_init(&in->hf[f].lock, NULL);
		in->hf[f].size = job->file_sizes[f];
	}
	for (size_t f = 0; f < rc->cx.nfiles; f++) {
		struct hfile *h = in->hf + f;

		if (!job->hash[f])
			continue;
		h->md = EVP_MD_CTX_new();
		if (!h->md || !EVP_DigestInit_ex(h->md, EVP_sha256(), NULL))
			return rl_err_set(rc->b.e, -ENOMEM, "SHA-256 context: out of memory");
	}
	return 0;
}

int eng_integ_open(struct eng_run *rc)
{
	struct eng_integ *in = rl_calloc(1, sizeof(*in));
	int ret;

	if (!in)
		return rl_err_set(rc->b.e, -ENOMEM, "out of memory");
	rc->cx.integ = in;
	in->nfiles = rc->cx.nfiles;
	in->held_max = rc->b.bound;
	atomic_init(&in->held_bytes, 0);
	atomic_init(&in->held_peak, 0);
	atomic_init(&in->hashed, 0);
	atomic_init(&in->hash_ns, 0);
	pthread_mutex_init(&in->wait_lock, NULL);
	pthread_cond_init(&in->wait_cond, NULL);
	in->ids = rl_calloc(rc->cx.nfiles + 1, sizeof(*in->ids));
	if (!in->ids)
		return rl_err_set(rc->b.e, -ENOMEM, "out of memory");
	ret = record_ids(rc, in);
	if (ret == 0 && rc->b.job->hash)
		ret = setup_hashing(rc, in);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Hashing on the workers */

/* Hashes what [off, off + len) adds past *next. */
static void update(struct eng_run *rc, struct hfile *h, uint64_t *next, uint64_t off,
		   const uint8_t *p, uint64_t len)
{
	struct eng_integ *in = rc->cx.integ;
	uint64_t t0, skip, n;

	if (off + len <= *next)
		return;
	skip = *next - off;
	n = len - skip;
	t0 = rl_now_ns();
	if (!EVP_DigestUpdate(h->md, p + skip, n))
		eng_fail(&rc->b, -ENOMEM, "SHA-256 update failed");
	*next += n;
	atomic_fetch_add_explicit(&in->hashed, n, memory_order_relaxed);
	atomic_fetch_add_explicit(&in->hash_ns, rl_now_ns() - t0, memory_order_relaxed);
}

/* The busy hasher: hashes held chunks that continue the cursor, then
 * gives up the file. */
static void drain(struct eng_run *rc, struct hfile *h, uint64_t next)
{
	struct eng_integ *in = rc->cx.integ;
	int released = 0;

	for (;;) {
		struct held *c;

		pthread_mutex_lock(&h->lock);
		h->next = next;
		c = h->held;
		if (!c || c->off > next) {
			h->busy = 0;
			pthread_mutex_unlock(&h->lock);
			break;
		}
		h->held = c->next;
		pthread_mutex_unlock(&h->lock);
		update(rc, h, &next, c->off, c->bytes, c->len);
		atomic_fetch_sub_explicit(&in->held_bytes, c->len, memory_order_relaxed);
		rl_free(c);
		released = 1;
	}
	if (released) { /* paused workers may claim again */
		pthread_mutex_lock(&in->wait_lock);
		pthread_cond_broadcast(&in->wait_cond);
		pthread_mutex_unlock(&in->wait_lock);
	}
}

/* Inserts c by offset; under h->lock. */
static void hold(struct hfile *h, struct held *c)
{
	struct held **pp = &h->held;

	while (*pp && (*pp)->off < c->off)
		pp = &(*pp)->next;
	c->next = *pp;
	*pp = c;
}

/* A copy of bytes [off, off + len) to hash later, counted as held. */
static struct held *copy_chunk(struct eng_run *rc, uint64_t off, const uint8_t *p,
			       uint32_t len)
{
	struct eng_integ *in = rc->cx.integ;
	struct held *c = rl_malloc(sizeof(*c) + len);
	uint64_t now, peak;

	if (!c) {
		eng_fail(&rc->b, -ENOMEM, "SHA-256: out of memory holding %u bytes", len);
		return NULL;
	}
	c->off = off;
	c->len = len;
	memcpy(c->bytes, p, len);
	now = atomic_fetch_add_explicit(&in->held_bytes, len, memory_order_relaxed) + len;
	peak = atomic_load_explicit(&in->held_peak, memory_order_relaxed);
	while (now > peak && !atomic_compare_exchange_weak_explicit(
			&in->held_peak, &peak, now, memory_order_relaxed, memory_order_relaxed))
		;
	return c;
}

void eng_hash_read(struct eng_worker *w, const struct eng_req *q)
{
	struct eng_run *rc = w->run;
	struct eng_integ *in = rc->cx.integ;
	struct hfile *h;
	uint64_t off = q->r.off, len, next;
	struct held *c;

	if (!in || !in->hf || !in->hf[q->r.file].md || eng_failed(&rc->b))
		return;
	h = in->hf + q->r.file;
	if (off >= h->size)
		return;
	/* The bytes that arrived (at least min_len), within the file. */
	len = RL_MIN((uint64_t)q->got, h->size - off);
	pthread_mutex_lock(&h->lock);
	if (!h->busy && off <= h->next) {
		h->busy = 1;
		next = h->next;
		pthread_mutex_unlock(&h->lock);
		update(rc, h, &next, off, q->dst, len);
		drain(rc, h, next);
		return;
	}
	pthread_mutex_unlock(&h->lock);
	c = copy_chunk(rc, off, q->dst, (uint32_t)len);
	if (!c)
		return;
	pthread_mutex_lock(&h->lock);
	hold(h, c);
	/* The hasher may have finished while we copied: take over. */
	if (h->busy || h->held->off > h->next) {
		pthread_mutex_unlock(&h->lock);
		return;
	}
	h->busy = 1;
	next = h->next;
	pthread_mutex_unlock(&h->lock);
	drain(rc, h, next);
}

int eng_hash_full(struct eng_run *rc)
{
	struct eng_integ *in = rc->cx.integ;

	return in && in->hf &&
	       atomic_load_explicit(&in->held_bytes, memory_order_relaxed) > in->held_max;
}

void eng_hash_wait(struct eng_run *rc)
{
	struct eng_integ *in = rc->cx.integ;
	struct timespec ts;

	if (!eng_hash_full(rc))
		return;
	/* Timed: a run that fails meanwhile is seen within a millisecond
	 * without the failure path knowing about this wait. */
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&in->wait_lock);
	if (eng_hash_full(rc) && !eng_failed(&rc->b))
		pthread_cond_timedwait(&in->wait_cond, &in->wait_lock, &ts);
	pthread_mutex_unlock(&in->wait_lock);
}

/* ------------------------------------------------------------------ */
/* After the last read */

static int finish_digests(struct eng_run *rc, struct eng_integ *in)
{
	for (size_t f = 0; f < in->nfiles; f++) {
		struct hfile *h = in->hf + f;
		unsigned n = 0;

		if (!h->md)
			continue;
		if (h->next != h->size)
			return rl_err_set(rc->b.e, -EIO, "%s: SHA-256 stopped at byte %llu of %llu",
					  rc->cx.files[f].path, (unsigned long long)h->next,
					  (unsigned long long)h->size);
		if (!EVP_DigestFinal_ex(h->md, rc->b.job->digests[f], &n) || n != 32)
			return rl_err_set(rc->b.e, -ENOMEM, "SHA-256 final failed");
	}
	return 0;
}

/* Whether path names another file than id now (replaced by rename: the
 * descriptors read the old one, whose ctime the unlink changed). */
static int replaced(const char *path, const struct rl_file_id *id)
{
	struct rl_file_id now;
	int fd = open(path, O_PATH | O_CLOEXEC), ret;

	if (fd < 0)
		return 1; /* removed */
	ret = rl_file_id_get(fd, &now) == 0 && (now.dev != id->dev || now.ino != id->ino);
	close(fd);
	return ret;
}

int eng_integ_finish(struct eng_run *rc)
{
	struct eng_integ *in = rc->cx.integ;

	if (!in)
		return 0;
	for (size_t i = 0; i < rc->cx.nfiles; i++) {
		struct rl_file_id now;
		const char *what;

		if (rl_file_id_get(rc->cx.files[i].fd, &now) < 0)
			continue;
		what = rl_file_id_diff(in->ids + i, &now);
		if (what && replaced(rc->cx.files[i].path, &now))
			return rl_err_set(rc->b.e, RL_E_FILE_CHANGED,
					  "%s: file changed during load (replaced or removed: the "
					  "path no longer names the file that was read)",
					  rc->cx.files[i].path);
		if (what)
			return rl_err_set(rc->b.e, RL_E_FILE_CHANGED,
					  "%s: file changed during load (%s differs)",
					  rc->cx.files[i].path, what);
	}
	return in->hf ? finish_digests(rc, in) : 0;
}

void eng_integ_stats(struct eng_run *rc)
{
	struct eng_integ *in = rc->cx.integ;

	if (!in)
		return;
	rc->b.st->hashed_bytes = atomic_load_explicit(&in->hashed, memory_order_relaxed);
	rc->b.st->hash_seconds = atomic_load_explicit(&in->hash_ns, memory_order_relaxed) / 1e9;
	rc->b.st->hash_held_peak = atomic_load_explicit(&in->held_peak, memory_order_relaxed);
}

void eng_integ_free(struct eng_run *rc)
{
	struct eng_integ *in = rc->cx.integ;

	if (!in)
		return;
	for (size_t f = 0; in->hf && f < in->nfiles; f++) {
		struct hfile *h = in->hf + f;

		while (h->held) {
			struct held *c = h->held;

			h->held = c->next;
			rl_free(c);
		}
		EVP_MD_CTX_free(h->md);
		pthread_mutex_destroy(&h->lock);
	}
	rl_free(in->hf);
	rl_free(in->ids);
	pthread_cond_destroy(&in->wait_cond);
	pthread_mutex_destroy(&in->wait_lock);
	rl_free(in);
	rc->cx.integ = NULL;
}
