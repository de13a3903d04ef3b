/*
 * fuzz_header.c - the safetensors header parser on arbitrary bytes.
 *
 * The input is a whole file (8-byte length, header, data). It is parsed
 * twice: by pl_header_parse() on the bytes directly, and by a full
 * rl_ckpt_open() of the same bytes as a file (a memfd). Both must agree,
 * and an accepted header must describe exactly the file: tensors in offset
 * order, contiguous from the data start to the end of the file, each with
 * the byte count its shape and dtype give.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ringload.h"
#include "common.h"
#include "../../planner/planner.h"

const char *fuzz_target_name = "header";

static void check_accepted(const struct pl_header *h, size_t hlen, uint64_t size)
{
	uint64_t at = 8 + (uint64_t)hlen;

	for (size_t i = 0; i < h->ntensors; i++) {
		const struct pl_tensor *t = &h->tensors[i];
		uint64_t n = 1, bits;

		if (t->offset != at || t->dtype >= RL_DTYPE_COUNT || !t->name)
			__builtin_trap();
		for (unsigned d = 0; d < t->ndim; d++)
			if (cm_mul64(n, t->shape[d], &n))
				n = 0, d = t->ndim; /* only possible when a later dim is 0 */
		if (cm_mul64(n, pl_dtype_bits(t->dtype), &bits) || bits % 8 || bits / 8 != t->nbytes)
			if (!(n == 0 && t->nbytes == 0))
				__builtin_trap();
		at += t->nbytes;
	}
	if (at != size)
		__builtin_trap();
	for (size_t i = 1; i < h->nmeta; i++)
		if (strcmp(h->meta[i - 1].key, h->meta[i].key) >= 0)
			__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cm_err e = { 0 };
	struct pl_header h;
	uint64_t n = 0;
	int direct = 1, r, fd;
	char path[64];
	rl_ckpt *ck;

	if (size >= 8) {
		for (int i = 7; i >= 0; i--)
			n = n << 8 | data[i];
		if (n <= PL_MAX_HEADER && n <= size - 8) {
			direct = pl_header_parse((const char *)data + 8, (size_t)n, size, 0, &h, &e);
			if (direct == 0) {
				check_accepted(&h, (size_t)n, size);
				pl_header_free(&h);
			}
		} else {
			/* Length not usable: still feed the parser the rest. */
			r = pl_header_parse((const char *)data + 8, size - 8, size, 0, &h, &e);
			if (r == 0) {
				check_accepted(&h, size - 8, size);
				pl_header_free(&h);
			}
		}
	}

	fd = memfd_create("fuzz_header", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ck = rl_ckpt_create();
	if (ck) {
		r = rl_ckpt_open(ck, path);
		/* Where the length was usable, the full open decides the same. */
		if (direct != 1 && r != direct)
			__builtin_trap();
		if (size < 8 && r != RL_E_HEADER_TOO_SMALL && r != -ENOMEM)
			__builtin_trap();
		if (r < 0 && !rl_ckpt_errmsg(ck)[0])
			__builtin_trap();
		rl_ckpt_destroy(ck);
	}
	close(fd);
	return 0;
}
