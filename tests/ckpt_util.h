/*
 * ckpt_util.h - checkpoints for tests that load them (test_load.c through
 * the library, test_cli.c through the command): random safetensors files
 * with their bytes kept, and an independent slicing of a tensor's bytes to
 * compare a shard with. Plus the file helpers they share.
 */
#ifndef TESTS_CKPT_UTIL_H
#define TESTS_CKPT_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "ringload.h"

/* name inside this program's temporary directory (four rotating buffers). */
char *tmp_path(const char *name);

/* The whole file, NUL-terminated (malloc), its length in *n; NULL if unreadable. */
char *slurp(const char *path, size_t *n);

/* Writes n bytes to path. Returns 0 or -1. */
int write_bytes(const char *path, const void *p, size_t n);

struct rt {                    /* one random tensor */
	char name[16];
	const char *dtype;
	unsigned itemsize, ndim;
	uint64_t shape[4];
	uint64_t off, nbytes;   /* relative to the data buffer */
};

/* nonzero: every random tensor has this rank */
extern unsigned force_rank;

/* Writes a safetensors file of n random tensors (U8, BF16, F32, F64; rank
 * 0-3, now and then a zero dimension); returns the whole file's bytes
 * (malloc) and the data buffer's start in *data_start. */
uint8_t *write_random_ckpt(const char *path, struct rt *t, unsigned n, uint64_t *data_start,
			   uint64_t *fsize);

/* 1 if got holds the box of si sliced out of tensor (t's bytes), C order. */
int slice_equal(const uint8_t *tensor, const struct rt *t, const rl_shard_info *si,
		const uint8_t *got);

/* A spec over mesh (mx, my) for tensors t[0..n), each split on random
 * axes; devices split over nproc processes (1 or 2). Returns its length in
 * out (size cap). */
size_t random_spec(const struct rt *t, unsigned n, unsigned mx, unsigned my,
		   unsigned nproc, char *out, size_t cap);

/* Writes path: nt U8 tensors t0, t1, ... of tbytes random bytes each (one
 * header of under 2 KiB); the whole file's SHA-256 in hex. Then sleeps
 * 30 ms, past the kernel's timestamp tick, so that a change made after it
 * gets a later mtime and ctime. Returns 0 or -1. */
int write_hashed_ckpt(const char *path, unsigned nt, unsigned tbytes, char hex[65]);
/* The same with the header padded (trailing blanks) so that the data
 * starts at data_start (at most 4096; 0: not padded). */
int write_hashed_ckpt_at(const char *path, unsigned nt, unsigned tbytes, unsigned data_start,
			 char hex[65]);

/* A test of a table: its name and function. */
struct th_case {
	const char *name;
	void (*fn)(void);
};

/* Runs every test of t[0..n) on every backend of the library (rl_backend_at:
 * io_uring, libaio, pread, and in the test build engine/be_test.c), with each of
 * the worker counts w[0..nw), named "<backend>/<N>w/<test>"; select() sets
 * the backend and workers the tests use before each. */
void run_on_every_backend(const struct th_case *t, size_t n, const unsigned *w, size_t nw,
			  void (*select)(rl_backend b, unsigned workers));
#endif
