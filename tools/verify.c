/* verify.c - see verify.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "verify.h"

static int pread_all(int fd, uint8_t *p, uint64_t n, uint64_t off)
{
	while (n) {
		ssize_t r = pread(fd, p, n > (1u << 30) ? (1u << 30) : n, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		p += r;
		n -= (uint64_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

/* Row r of the file's elements (len bytes at buf) is row r of the shard
 * (out bytes at got): equal, or equal once converted to the shard's dtype
 * (--dtype) into cbuf. */
static int row_equal(const rl_tensor_info *ti, const rl_shard_info *si, const uint8_t *buf,
		     uint64_t len, uint8_t *cbuf, const uint8_t *got, uint64_t out)
{
	if (ti->dtype == si->dtype)
		return !memcmp(buf, got, len);
	return rl_dtype_convert(ti->dtype, si->dtype, cbuf, buf,
				len / (rl_dtype_bits(ti->dtype) / 8)) == 0 &&
	       !memcmp(cbuf, got, out);
}

/* 1 if the shard equals the file's bytes (converted to its dtype when
 * the load converted), 0 if not, -1 if not checkable. */
static int verify_shard(const rl_ckpt *ck, const rl_shard_info *si, const uint8_t *got)
{
	rl_tensor_info ti;
	long t = rl_ckpt_find(ck, si->name);
	unsigned bits, obits = rl_dtype_bits(si->dtype);
	uint64_t rows = 1, row_bits, row_bytes, out_bytes, span_lo, span_hi, pos = 0;
	uint64_t idx[RL_MAX_DIMS] = { 0 };
	uint8_t *buf, *cbuf;
	int fd, ok = 1;
	unsigned nd = si->ndim;

	if (t < 0 || rl_ckpt_tensor(ck, (size_t)t, &ti) < 0 || ti.ndim != nd ||
	    (ti.dtype != si->dtype && rl_dtype_convert(ti.dtype, si->dtype, NULL, NULL, 0)))
		return -1;
	bits = rl_dtype_bits(ti.dtype);
	for (unsigned i = 0; i < nd; i++)
		if (ti.shape[i] != si->shape[i])
			return -1;
	if (si->nbytes == 0)
		return 1;
	/* Rows along the last dimension; byte offsets from element bits. */
	row_bits = nd ? (si->stop[nd - 1] - si->start[nd - 1]) * bits : bits;
	if (row_bits % 8)
		return -1;
	row_bytes = row_bits / 8;
	out_bytes = row_bits / bits * obits / 8; /* elements x the shard's bits */
	for (unsigned i = 0; i + 1 < nd; i++)
		rows *= si->stop[i] - si->start[i];
	span_lo = ti.offset;
	span_hi = ti.offset + ti.nbytes;
	buf = malloc(row_bytes ? row_bytes : 1);
	cbuf = malloc(out_bytes ? out_bytes : 1);
	fd = open(rl_ckpt_file_path(ck, ti.file), O_RDONLY | O_CLOEXEC);
	if (!buf || !cbuf || fd < 0) {
		free(buf);
		free(cbuf);
		if (fd >= 0)
			close(fd);
		return 0;
	}
	for (unsigned i = 0; i + 1 < nd; i++)
		idx[i] = si->start[i];
	for (uint64_t r = 0; r < rows && ok; r++) {
		uint64_t lin = 0, off_bits;

		for (unsigned i = 0; i + 1 < nd; i++)
			lin = lin * ti.shape[i] + idx[i];
		lin = nd ? lin * ti.shape[nd - 1] + si->start[nd - 1] : 0;
		off_bits = lin * bits;
		if (off_bits % 8 || span_lo + off_bits / 8 + row_bytes > span_hi ||
		    pread_all(fd, buf, row_bytes, span_lo + off_bits / 8) < 0 ||
		    !row_equal(&ti, si, buf, row_bytes, cbuf, got + pos, out_bytes))
			ok = 0;
		pos += out_bytes;
		/* next index of the outer dimensions, row-major */
		for (int i = (int)nd - 2; i >= 0; i--) {
			if (++idx[i] < si->stop[i])
				break;
			idx[i] = si->start[i];
		}
	}
	close(fd);
	free(buf);
	free(cbuf);
	return ok && pos == si->nbytes;
}

int verify_areas(const rl_ckpt *ck, const rl_plan *plan, verify_base_fn area, void *area_user,
		 struct verify_counts *c, int (*fn)(void *user, uint64_t done, uint64_t total),
		 void *user)
{
	size_t nsh = rl_plan_num_shards(plan);
	uint64_t done = 0, total = 0;
	rl_shard_info si;

	memset(c, 0, sizeof(*c));
	for (size_t s = 0; s < nsh; s++) {
		rl_plan_shard(plan, s, &si);
		total += si.nbytes;
	}
	for (size_t s = 0; s < nsh; s++) {
		const uint8_t *base;
		int v;

		rl_plan_shard(plan, s, &si);
		base = area(area_user, si.device);
		v = si.nbytes && !base ? 0 : verify_shard(ck, &si, base ? base + si.offset : NULL);
		if (v < 0) {
			c->uncheckable++;
		} else if (v == 0) {
			if (!c->differ)
				c->first_bad = s;
			c->differ++;
		} else {
			c->match++;
		}
		done += si.nbytes;
		if (fn && fn(user, done, total))
			return RL_E_CANCELED;
	}
	return 0;
}

static const uint8_t *staging_area(void *ld, unsigned device)
{
	return rl_loader_staging(ld, device, NULL);
}

int verify_all(const rl_ckpt *ck, const rl_plan *plan, const rl_loader *ld,
	       struct verify_counts *c, int (*fn)(void *user, uint64_t done, uint64_t total),
	       void *user)
{
	return verify_areas(ck, plan, staging_area, (void *)ld, c, fn, user);
}
