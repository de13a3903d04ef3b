/*
 * verify.c - expected SHA-256 values in a cluster load (rl_mpi_expect):
 * after the load, each file with an expected value is hashed whole by one
 * rank that can read it (the least loaded by bytes, in file order, alike
 * on every rank), and the ranks agree: a mismatch anywhere is
 * RL_E_CHECKSUM on every rank, naming the file and both values. A rank
 * reads only part of most files (its shards, its share of read once), so
 * no load's own reads can check a whole-file digest.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mx.h"

int rl_mpi_expect(rl_mpi *m, const rl_expect *x)
{
	char hex[65];
	size_t n = 0;

	if (!m)
		return -EINVAL;
	free(m->want);
	m->want = NULL;
	m->nwant = 0;
	if (!x)
		return 0;
	while (rl_expect_get(x, n, hex) >= 0)
		n++;
	if (!(m->want = calloc(n + 1, sizeof(*m->want))))
		return mx_err(m, -ENOMEM, "out of memory");
	for (size_t f = 0; f < n; f++)
		if (rl_expect_get(x, f, m->want[f]) <= RL_EXPECT_NONE)
			m->want[f][0] = '\0';
	m->nwant = n;
	return 0;
}

static void to_hex(const uint8_t sha[32], char out[65])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < 32; i++) {
		out[2 * i] = digits[sha[i] >> 4];
		out[2 * i + 1] = digits[sha[i] & 15];
	}
	out[64] = '\0';
}

/* Hashes file f whole; a mismatch or an error fails this rank. */
static void check_file(struct mx *x, const rl_ckpt *ck, size_t f)
{
	const char *path = rl_ckpt_file_path(ck, f);
	uint8_t want[32], got[32];
	char hex[65];
	int ret = rl_sha256_from_hex(x->m->want[f], want);

	if (!ret)
		ret = rl_sha256_file(path, got);
	if (ret) {
		mx_fail(x, ret, "%s: cannot hash the file (%s)", path, rl_strerror(ret));
		return;
	}
	if (memcmp(want, got, 32)) {
		to_hex(got, hex);
		mx_fail(x, RL_E_CHECKSUM, "%s: SHA-256 mismatch: expected %s, got %s", path,
			x->m->want[f], hex);
	}
}

/* Which ranks can read each file: every rank's bytes, one per file. */
static uint8_t *readable(struct mx *x, const rl_ckpt *ck, size_t nf)
{
	uint8_t *mine = malloc(nf + 1), *all = malloc((size_t)x->size * nf + 1);
	MPI_Request r;

	if (!mine || !all) {
		free(mine);
		free(all);
		mx_abort(x, "out of memory to list the files each rank can read");
		return NULL;
	}
	for (size_t f = 0; f < nf; f++)
		mine[f] = access(rl_ckpt_file_path(ck, f), R_OK) == 0;
	if (MPI_Iallgather(mine, (int)nf, MPI_BYTE, all, (int)nf, MPI_BYTE, x->comm, &r) !=
	    MPI_SUCCESS || mx_wait(x, &r, 1, "the files the other ranks can read", NULL, NULL)) {
		mx_fail(x, RL_E_MPI, "MPI_Iallgather failed");
		free(all);
		all = NULL;
	}
	free(mine);
	return all;
}

/* The rank that hashes file f: the least loaded that can read it (-1: none). */
static int hasher(const struct mx *x, const uint8_t *can, size_t nf, size_t f,
		  const uint64_t *load)
{
	int best = -1;

	for (int q = 0; q < x->size; q++)
		if (can[(size_t)q * nf + f] && (best < 0 || load[q] < load[best]))
			best = q;
	return best;
}

int mx_verify(struct mx *x, const rl_ckpt *ck)
{
	struct rl_mpi *m = x->m;
	size_t nf = rl_ckpt_num_files(ck);
	uint64_t *load;
	uint8_t *can;

	if (!m->nwant)
		return 0;
	if (m->nwant != nf) {
		mx_fail(x, RL_E_INVALID_ARG, "rl_mpi_expect: values for %zu files, the checkpoint has %zu",
			m->nwant, nf);
		return mx_agree(x, 0, NULL);
	}
	can = readable(x, ck, nf);
	load = calloc((size_t)x->size, sizeof(*load));
	if (!load)
		mx_fail(x, -ENOMEM, "out of memory");
	for (size_t f = 0; can && load && f < nf; f++) {
		int q;

		if (!m->want[f][0])
			continue;
		if ((q = hasher(x, can, nf, f, load)) < 0) {
			mx_fail(x, RL_E_FILE_UNAVAILABLE, "%s: no rank can read it to check its SHA-256",
				rl_ckpt_file_path(ck, f));
			break;
		}
		load[q] += rl_ckpt_file_size(ck, f);
		if (q == x->rank && !x->failed)
			check_file(x, ck, f);
	}
	free(can);
	free(load);
	return mx_agree(x, 0, NULL);
}
