/*
 * hash.c - SHA-256 from the bytes as they arrive (hash.h), moved out of
 * the engine: the engine hands every finished read to on_data and knows
 * nothing of digests.
 *
 * SHA-256 is sequential and reads complete out of order across workers,
 * so each hashed file has a cursor `next` (bytes [0, next) hashed) and
 * one hasher at a time (`busy`). The worker that delivers the read
 * holding byte `next` hashes it, then every held chunk that continues it;
 * a worker whose read is ahead of the cursor copies its bytes into a held
 * chunk (sorted by offset) and goes on, so its bounce buffer is reused at
 * once. The held bytes are bounded: past held_max, ex_hash_full tells the
 * engine to claim no new reads (claims are in the batch's order, which
 * the checksum cover makes file order, so the read the cursor waits for
 * was claimed before any held one and is in flight or queued; it
 * completes, and the held chunks drain). The hashing runs in the
 * completion path of the worker, after it submitted its next reads.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "../common/sha256.h"
#include "hash.h"

/* A chunk that arrived ahead of its file's cursor. */
struct held {
	uint64_t off;
	uint32_t len;
	struct held *next;
	uint8_t bytes[];
};

struct hfile {
	pthread_mutex_t lock;     /* next, busy, held */
	struct cm_sha256 *md;     /* NULL: not hashed */
	uint64_t size;
	uint64_t next;            /* bytes [0, next) hashed */
	int busy;                 /* one worker hashes at a time */
	struct held *held;        /* sorted by offset */
};

struct ex_hash {
	struct hfile *hf;
	size_t nfiles;
	uint64_t held_max;
	/* Relaxed counters: statistics and the pause hint; the chunks
	 * themselves are handed over under each file's lock. */
	atomic_uint_fast64_t held_bytes, held_peak, hashed, hash_ns;
	pthread_mutex_t err_lock; /* err: the first error while hashing */
	struct cm_err err;
	atomic_int failed;
};

int ex_hash_new(size_t nfiles, const uint64_t *sizes, const uint8_t *which, uint64_t held_max,
		struct ex_hash **out, struct cm_err *e)
{
	struct ex_hash *h = cm_calloc(1, sizeof(*h));

	*out = NULL;
	if (!h || !(h->hf = cm_calloc(nfiles + 1, sizeof(*h->hf)))) {
		cm_free(h);
		return cm_err_set(e, -ENOMEM, "out of memory");
	}
	h->held_max = held_max;
	atomic_init(&h->held_bytes, 0);
	atomic_init(&h->held_peak, 0);
	atomic_init(&h->hashed, 0);
	atomic_init(&h->hash_ns, 0);
	atomic_init(&h->failed, 0);
	pthread_mutex_init(&h->err_lock, NULL);
	for (size_t f = 0; f < nfiles; f++) {
		pthread_mutex_init(&h->hf[f].lock, NULL);
		h->hf[f].size = sizes[f];
	}
	h->nfiles = nfiles; /* only now: ex_hash_free destroys what is set up */
	for (size_t f = 0; f < nfiles; f++) {
		if (!which[f])
			continue;
		h->hf[f].md = cm_sha256_create();
		if (!h->hf[f].md) {
			ex_hash_free(h);
			return cm_err_set(e, -ENOMEM, "SHA-256 context: out of memory");
		}
	}
	*out = h;
	return 0;
}

/* The first error while hashing: kept for ex_hash_end; hashing stops. */
static void fail(struct ex_hash *h, int code, const char *what)
{
	pthread_mutex_lock(&h->err_lock);
	if (!atomic_load_explicit(&h->failed, memory_order_relaxed))
		cm_err_set(&h->err, code, "%s", what);
	atomic_store_explicit(&h->failed, 1, memory_order_relaxed);
	pthread_mutex_unlock(&h->err_lock);
}

/* Hashes what [off, off + len) adds past *next. */
static void update(struct ex_hash *h, struct hfile *f, uint64_t *next, uint64_t off,
		   const uint8_t *p, uint64_t len)
{
	uint64_t t0, skip, n;

	if (off + len <= *next)
		return;
	skip = *next - off;
	n = len - skip;
	t0 = cm_now_ns();
	if (cm_sha256_update(f->md, p + skip, n) < 0)
		fail(h, -ENOMEM, "SHA-256 update failed");
	*next += n;
	atomic_fetch_add_explicit(&h->hashed, n, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->hash_ns, cm_now_ns() - t0, memory_order_relaxed);
}

/* The busy hasher: hashes held chunks that continue the cursor, then
 * gives up the file. */
static void drain(struct ex_hash *h, struct hfile *f, uint64_t next)
{
	for (;;) {
		struct held *c;

		pthread_mutex_lock(&f->lock);
		f->next = next;
		c = f->held;
		if (!c || c->off > next) {
			f->busy = 0;
			pthread_mutex_unlock(&f->lock);
			break;
		}
		f->held = c->next;
		pthread_mutex_unlock(&f->lock);
		update(h, f, &next, c->off, c->bytes, c->len);
		atomic_fetch_sub_explicit(&h->held_bytes, c->len, memory_order_relaxed);
		cm_free(c);
	}
}

/* Inserts c by offset; under f->lock. */
static void hold(struct hfile *f, struct held *c)
{
	struct held **pp = &f->held;

	while (*pp && (*pp)->off < c->off)
		pp = &(*pp)->next;
	c->next = *pp;
	*pp = c;
}

/* A copy of bytes [off, off + len) to hash later, counted as held. */
static struct held *copy_chunk(struct ex_hash *h, uint64_t off, const uint8_t *p, uint32_t len)
{
	struct held *c = cm_malloc(sizeof(*c) + len);
	uint64_t now, peak;

	if (!c) {
		fail(h, -ENOMEM, "SHA-256: out of memory holding bytes ahead of the cursor");
		return NULL;
	}
	c->off = off;
	c->len = len;
	memcpy(c->bytes, p, len);
	now = atomic_fetch_add_explicit(&h->held_bytes, len, memory_order_relaxed) + len;
	peak = atomic_load_explicit(&h->held_peak, memory_order_relaxed);
	while (now > peak && !atomic_compare_exchange_weak_explicit(
			&h->held_peak, &peak, now, memory_order_relaxed, memory_order_relaxed))
		;
	return c;
}

void ex_hash_data(struct ex_hash *h, const struct cm_read *r, const uint8_t *bytes)
{
	struct hfile *f;
	uint64_t off = r->off, len, next;
	struct held *c;

	if (r->file >= h->nfiles || !h->hf[r->file].md ||
	    atomic_load_explicit(&h->failed, memory_order_relaxed))
		return;
	f = h->hf + r->file;
	if (off >= f->size)
		return;
	len = CM_MIN((uint64_t)r->min_len, f->size - off); /* within the file */
	pthread_mutex_lock(&f->lock);
	if (off + len <= f->next) { /* read again at a window's edge */
		pthread_mutex_unlock(&f->lock);
		return;
	}
	if (!f->busy && off <= f->next) {
		f->busy = 1;
		next = f->next;
		pthread_mutex_unlock(&f->lock);
		update(h, f, &next, off, bytes, len);
		drain(h, f, next);
		return;
	}
	pthread_mutex_unlock(&f->lock);
	c = copy_chunk(h, off, bytes, (uint32_t)len);
	if (!c)
		return;
	pthread_mutex_lock(&f->lock);
	hold(f, c);
	/* The hasher may have finished while we copied: take over. */
	if (f->busy || f->held->off > f->next) {
		pthread_mutex_unlock(&f->lock);
		return;
	}
	f->busy = 1;
	next = f->next;
	pthread_mutex_unlock(&f->lock);
	drain(h, f, next);
}

int ex_hash_full(struct ex_hash *h)
{
	return atomic_load_explicit(&h->held_bytes, memory_order_relaxed) > h->held_max;
}

int ex_hash_end(struct ex_hash *h, const char *const *paths, uint8_t (*digests)[32],
		struct cm_err *e)
{
	if (atomic_load_explicit(&h->failed, memory_order_relaxed))
		return cm_err_set(e, h->err.code, "%s", h->err.msg);
	for (size_t i = 0; i < h->nfiles; i++) {
		struct hfile *f = h->hf + i;
		if (!f->md)
			continue;
		if (f->next != f->size)
			return cm_err_set(e, -EIO, "%s: SHA-256 stopped at byte %llu of %llu",
					  paths[i], (unsigned long long)f->next,
					  (unsigned long long)f->size);
		if (cm_sha256_final(f->md, digests[i]) < 0)
			return cm_err_set(e, -ENOMEM, "SHA-256 final failed");
	}
	return 0;
}

void ex_hash_stats(const struct ex_hash *h, uint64_t *hashed, double *seconds,
		   uint64_t *held_peak)
{
	*hashed = atomic_load_explicit(&h->hashed, memory_order_relaxed);
	*seconds = atomic_load_explicit(&h->hash_ns, memory_order_relaxed) / 1e9;
	*held_peak = atomic_load_explicit(&h->held_peak, memory_order_relaxed);
}

void ex_hash_free(struct ex_hash *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->nfiles; i++) {
		struct hfile *f = h->hf + i;

		while (f->held) {
			struct held *c = f->held;

			f->held = c->next;
			cm_free(c);
		}
		cm_sha256_destroy(f->md);
		pthread_mutex_destroy(&f->lock);
	}
	pthread_mutex_destroy(&h->err_lock);
	cm_free(h->hf);
	cm_free(h);
}
