/*
 * cuts.c - where a payload's messages begin. Both ends cut alike from
 * what every rank knows (the checkpoint's tensors, which the ranks have
 * checked are the same, the transfer and the message limit): at the first
 * and last byte of every tensor of at least MX_PIECE_MIN bytes, and every
 * RL_MPI_MESSAGE_BYTES; smaller tensors share a message with their
 * neighbours. A receiver that needs a whole tensor then receives its
 * message into one contiguous run of its staging: a contiguous receive,
 * which Open MPI's shared-memory transport moves with one copy (CMA's
 * process_vm_readv, its RGET protocol), where a receive into a datatype
 * of several runs goes through 32 KiB fragments, copied twice and moved
 * only while both ranks poll (docs/benchmarks.md, "Cluster benchmark").
 */
#include "mx.h"

/* The first tensor of file f whose data ends after offset lo. */
static size_t first_after(const rl_ckpt *ck, size_t f, uint64_t lo)
{
	size_t a = 0, b = rl_ckpt_num_tensors(ck);

	while (a < b) {
		size_t mid = a + (b - a) / 2;
		rl_tensor_info t;

		rl_ckpt_tensor(ck, mid, &t);
		if (t.file < f || (t.file == f && t.offset + t.nbytes <= lo))
			a = mid + 1;
		else
			b = mid;
	}
	return a;
}

/* Message starts in [p, q), every max bytes; returns how many. */
static size_t split(uint64_t p, uint64_t q, uint64_t max, uint64_t *out, size_t n)
{
	for (; p < q; p += max, n++)
		if (out)
			out[n] = p;
	return n;
}

size_t mx_cuts(const rl_ckpt *ck, const rl_transfer_info *ti, uint64_t max, uint64_t *out)
{
	uint64_t lo = ti->offset, hi = ti->offset + ti->nbytes, at = 0;
	size_t n = 0;

	for (size_t i = first_after(ck, ti->file, lo); i < rl_ckpt_num_tensors(ck); i++) {
		rl_tensor_info t;
		uint64_t a, e;

		rl_ckpt_tensor(ck, i, &t);
		if (t.file != ti->file || t.offset >= hi)
			break;
		if (t.nbytes < MX_PIECE_MIN)
			continue;
		a = MX_MAX(t.offset, lo) - lo;
		e = MX_MIN(t.offset + t.nbytes, hi) - lo;
		n = split(at, a, max, out, n);  /* what came before it, if anything */
		n = split(a, e, max, out, n);
		at = e;
	}
	return split(at, ti->nbytes, max, out, n);
}
