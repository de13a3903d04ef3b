/* ckpt_util.c - see ckpt_util.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "ckpt_util.h"
#include "harness.h"

char *tmp_path(const char *name)
{
	static char buf[4][512];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", th_tmpdir(), name);
	return buf[i];
}

char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	char *b = NULL;
	long len;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		b = malloc((size_t)len + 1);
		if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
			free(b);
			b = NULL;
		}
		if (b) {
			b[len] = '\0';
			*n = (size_t)len;
		}
	}
	fclose(f);
	return b;
}

unsigned force_rank;

uint8_t *write_random_ckpt(const char *path, struct rt *t, unsigned n, uint64_t *data_start,
			   uint64_t *fsize)
{
	static const char *const dtypes[] = { "U8", "BF16", "F32", "F64" };
	static const unsigned sizes[] = { 1, 2, 4, 8 };
	char *hdr = malloc(65536);
	size_t h = 0;
	uint64_t off = 0, hlen;
	uint8_t *file;
	FILE *f;

	h += (size_t)snprintf(hdr + h, 65536 - h, "{\"__metadata__\":{\"format\":\"pt\"}");
	for (unsigned i = 0; i < n; i++) {
		unsigned k = (unsigned)(th_rand() % 4);

		snprintf(t[i].name, sizeof(t[i].name), "t%u", i);
		t[i].dtype = dtypes[k];
		t[i].itemsize = sizes[k];
		t[i].ndim = force_rank ? force_rank : (unsigned)(th_rand() % 4);
		t[i].nbytes = t[i].itemsize;
		h += (size_t)snprintf(hdr + h, 65536 - h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[",
				      t[i].name, t[i].dtype);
		for (unsigned d = 0; d < t[i].ndim; d++) {
			/* mostly non-empty; now and then a zero dimension */
			t[i].shape[d] = th_rand() % 16 ? 1 + th_rand() % (d == 0 ? 300 : 40) : 0;
			t[i].nbytes *= t[i].shape[d];
			h += (size_t)snprintf(hdr + h, 65536 - h, "%s%llu", d ? "," : "",
					      (unsigned long long)t[i].shape[d]);
		}
		t[i].off = off;
		off += t[i].nbytes;
		h += (size_t)snprintf(hdr + h, 65536 - h, "],\"data_offsets\":[%llu,%llu]}",
				      (unsigned long long)t[i].off, (unsigned long long)off);
	}
	hdr[h++] = '}';
	while (h % 8)
		hdr[h++] = ' ';
	hlen = h;
	*data_start = 8 + hlen;
	*fsize = 8 + hlen + off;
	file = malloc(*fsize);
	memcpy(file, &hlen, 8);
	memcpy(file + 8, hdr, hlen);
	for (uint64_t i = 0; i < off; i++)
		file[8 + hlen + i] = (uint8_t)(th_rand() >> 32);
	free(hdr);
	f = fopen(path, "wb");
	if (!f || fwrite(file, 1, *fsize, f) != *fsize) {
		if (f)
			fclose(f);
		free(file);
		return NULL;
	}
	fclose(f);
	return file;
}

int slice_equal(const uint8_t *tensor, const struct rt *t, const rl_shard_info *si,
		const uint8_t *got)
{
	uint64_t idx[RL_MAX_DIMS], rows = 1, row, pos = 0;
	unsigned nd = t->ndim;

	if (si->nbytes == 0)
		return 1;
	if (nd == 0)
		return !memcmp(tensor, got, t->itemsize);
	row = (si->stop[nd - 1] - si->start[nd - 1]) * t->itemsize;
	for (unsigned i = 0; i + 1 < nd; i++) {
		rows *= si->stop[i] - si->start[i];
		idx[i] = si->start[i];
	}
	for (uint64_t r = 0; r < rows; r++) {
		uint64_t lin = 0;

		for (unsigned i = 0; i + 1 < nd; i++)
			lin = lin * t->shape[i] + idx[i];
		lin = lin * t->shape[nd - 1] + si->start[nd - 1];
		if (memcmp(tensor + lin * t->itemsize, got + pos, row))
			return 0;
		pos += row;
		for (int i = (int)nd - 2; i >= 0; i--) {
			if (++idx[i] < si->stop[i])
				break;
			idx[i] = si->start[i];
		}
	}
	return pos == si->nbytes;
}

int write_bytes(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(p, 1, n, f) == n;

	if (f)
		fclose(f);
	return ok ? 0 : -1;
}

/* A checkpoint with no tensors, and one with only zero-size tensors. */

/* Random shardings (test_load.c, test_stream.c) */

static const char *random_dim_spec(void)
{
	static const char *const specs[] = { "null", "\"x\"", "\"y\"", "[\"x\",\"y\"]",
					     "[\"y\",\"x\"]" };

	return specs[th_rand() % 5];
}

/* A spec over mesh (mx, my) for tensors t[0..n), each split on random
 * axes; devices split over nproc processes (ids are dense: one device
 * means one process). Returns its length in out (size cap). */
size_t random_spec(const struct rt *t, unsigned n, unsigned mx, unsigned my,
			  unsigned nproc, char *out, size_t cap)
{
	size_t sj = 0;

	sj += (size_t)snprintf(out + sj, cap - sj,
			       "{\"mesh\":{\"shape\":[%u,%u],\"axes\":[\"x\",\"y\"],"
			       "\"process_of_device\":[", mx, my);
	for (unsigned d = 0; d < mx * my; d++)
		sj += (size_t)snprintf(out + sj, cap - sj, "%s%u", d ? "," : "",
				       nproc == 2 && mx * my >= 2 && d >= mx * my / 2 ? 1 : 0);
	sj += (size_t)snprintf(out + sj, cap - sj, "]},\"rules\":[");
	for (unsigned i = 0; i < n; i++) {
		const char *d0 = random_dim_spec(), *d1 = "null";

		if (t[i].ndim >= 2) {
			/* the other dimension gets what the first left */
			if (!strchr(d0, 'x'))
				d1 = th_rand() % 2 ? "\"x\"" : "null";
			else if (!strchr(d0, 'y'))
				d1 = th_rand() % 2 ? "\"y\"" : "null";
		}
		if (t[i].ndim == 0)
			continue;
		sj += (size_t)snprintf(out + sj, cap - sj, "%s{\"match\":\"%s\",\"spec\":[%s%s%s]}",
				       sj && out[sj - 1] == '}' ? "," : "", t[i].name, d0,
				       t[i].ndim >= 2 ? "," : "", t[i].ndim >= 2 ? d1 : "");
	}
	sj += (size_t)snprintf(out + sj, cap - sj, "]}");
	return sj;
}

/* Writes path: nt U8 tensors t0, t1, ... of tbytes random bytes each; the whole
 * file's SHA-256 in hex. Then sleeps past the kernel's timestamp tick, so
 * that a change made during the load gets a later mtime and ctime. */
int write_hashed_ckpt(const char *path, unsigned nt, unsigned tbytes, char hex[65])
{
	return write_hashed_ckpt_at(path, nt, tbytes, 0, hex);
}

int write_hashed_ckpt_at(const char *path, unsigned nt, unsigned tbytes, unsigned data_start,
			 char hex[65])
{
	char hdr[4096];
	size_t n = 0, total;
	uint8_t *file, md[32];
	unsigned len = 0;
	int ret;

	n += (size_t)snprintf(hdr + n, sizeof(hdr) - n, "{");
	for (unsigned i = 0; i < nt; i++)
		n += (size_t)snprintf(hdr + n, sizeof(hdr) - n,
				      "%s\"t%u\":{\"dtype\":\"U8\",\"shape\":[%u],"
				      "\"data_offsets\":[%u,%u]}", i ? "," : "", i, tbytes,
				      i * tbytes, (i + 1) * tbytes);
	n += (size_t)snprintf(hdr + n, sizeof(hdr) - n, "}");
	while (n + 8 < data_start && n + 1 < sizeof(hdr))
		hdr[n++] = ' ';
	total = 8 + n + (size_t)nt * tbytes;
	file = malloc(total);
	if (!file)
		return -1;
	for (int i = 0; i < 8; i++)
		file[i] = (uint8_t)((uint64_t)n >> (8 * i));
	memcpy(file + 8, hdr, n);
	for (size_t i = 8 + n; i < total; i++)
		file[i] = (uint8_t)th_rand();
	EVP_Digest(file, total, md, &len, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		sprintf(hex + 2 * i, "%02x", md[i]);
	ret = write_bytes(path, file, total);
	free(file);
	usleep(30000);
	return ret;
}

void run_on_every_backend(const struct th_case *t, size_t n, const unsigned *w, size_t nw,
			  void (*select)(rl_backend b, unsigned workers))
{
	char name[160];

	/* the library's table: in the test build also engine/be_test.c's */
	for (size_t b = 0; rl_backend_at(b) >= 0; b++)
		for (size_t k = 0; k < nw; k++)
			for (size_t i = 0; i < n; i++) {
				rl_backend id = (rl_backend)rl_backend_at(b);

				select(id, w[k]);
				snprintf(name, sizeof(name), "%s/%uw/%s", rl_backend_name(id),
					 w[k], t[i].name);
				th_run(name, t[i].fn);
			}
}
