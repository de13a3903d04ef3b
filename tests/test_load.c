/*
 * test_load.c - the public loading API end to end (checkpoint -> plan ->
 * engine -> staging) on every backend: the reference fixtures byte-exact
 * against MANIFEST.json's sha256, random checkpoints under random
 * shardings compared with an independent slicing of the file's bytes,
 * zero-size tensors, an empty checkpoint, shard and progress callbacks,
 * caller staging (aligned, misaligned, too small), parameters, stats, a
 * file truncated after planning, and tmpfs.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ringload.h"

static const rl_backend backends[] = { RL_BACKEND_IO_URING, RL_BACKEND_LIBAIO,
				       RL_BACKEND_PREAD };
static rl_backend cur = RL_BACKEND_IO_URING;

static char *tmp_path(const char *name)
{
	static char buf[4][512];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", th_tmpdir(), name);
	return buf[i];
}

static void sha256_hex(const void *p, size_t n, char out[65])
{
	unsigned char md[32];
	unsigned int len = 0;

	EVP_Digest(p, n, md, &len, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
}

static char *slurp(const char *path, size_t *n)
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

/* Loads ck under spec (NULL: whole) with the current backend. */
static int load(const rl_ckpt *ck, const rl_spec *spec, int process, rl_loader **ldp,
		rl_plan **planp)
{
	rl_loader *ld = rl_loader_create();
	int ret;

	*ldp = ld;
	*planp = NULL;
	if (!ld)
		return -ENOMEM;
	ret = rl_loader_set(ld, RL_OPT_BACKEND, cur);
	if (ret == 0)
		ret = rl_loader_load(ld, ck, spec, process, planp);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Reference fixtures against MANIFEST.json */

static void check_fixture(const char *rel, cJSON *entry)
{
	char path[1024], hex[65];
	rl_ckpt *ck = rl_ckpt_create();
	rl_loader *ld;
	rl_plan *plan;
	size_t nsh, checked = 0;
	int ret;

	snprintf(path, sizeof(path), "%s/reference/%s", th_testdata(), rel);
	CHECK(ck);
	CHECKF(rl_ckpt_open(ck, path) == 0, "%s", rl_ckpt_errmsg(ck));
	ret = load(ck, NULL, 0, &ld, &plan);
	if (ret == RL_E_BACKEND) {
		rl_loader_destroy(ld);
		rl_ckpt_destroy(ck);
		SKIP("backend unavailable");
	}
	CHECKF(ret == 0, "%s: %s", rel, rl_loader_errmsg(ld));
	nsh = rl_plan_num_shards(plan);
	for (size_t s = 0; s < nsh; s++) {
		rl_shard_info si;
		cJSON *t, *sha;
		uint8_t *base;

		CHECK(rl_plan_shard(plan, s, &si) == 0);
		t = cJSON_GetObjectItemCaseSensitive(entry, si.name);
		CHECKF(t, "%s: no manifest entry for %s", rel, si.name);
		sha = cJSON_GetObjectItemCaseSensitive(t, "sha256");
		base = rl_loader_staging(ld, si.device, NULL);
		CHECK(si.nbytes == 0 || base);
		sha256_hex(si.nbytes ? base + si.offset : (const void *)"", si.nbytes, hex);
		CHECKF(cJSON_IsString(sha) && !strcmp(hex, sha->valuestring), "%s: %s differs",
		       rel, si.name);
		checked++;
	}
	CHECK_EQ(checked, cJSON_GetArraySize(entry));
	rl_plan_destroy(plan);
	rl_loader_destroy(ld);
	rl_ckpt_destroy(ck);
}

static void reference_fixtures(void)
{
	char path[1024];
	size_t n;
	char *text;
	cJSON *m, *entry;

	if (!th_testdata())
		SKIP("RL_TESTDATA not set");
	snprintf(path, sizeof(path), "%s/reference/MANIFEST.json", th_testdata());
	text = slurp(path, &n);
	CHECK(text);
	m = cJSON_Parse(text);
	free(text);
	CHECK(m);
	cJSON_ArrayForEach(entry, m) {
		check_fixture(entry->string, entry);
		if (th_failed())
			break;
	}
	/* The 3-file checkpoint through its index: every tensor of every
	 * file, each file's entries merged into one. */
	if (!th_failed()) {
		cJSON *all = cJSON_CreateObject(), *t;

		cJSON_ArrayForEach(entry, m)
			if (!strncmp(entry->string, "tiny-moe/", 9))
				cJSON_ArrayForEach(t, entry)
					cJSON_AddItemReferenceToObject(all, t->string, t);
		CHECK(cJSON_GetArraySize(all) > 0);
		check_fixture("tiny-moe/model.safetensors.index.json", all);
		cJSON_Delete(all);
	}
	cJSON_Delete(m);
}

/* ------------------------------------------------------------------ */
/* Random checkpoints and shardings against independent slicing */

struct rt {                    /* one random tensor */
	char name[16];
	const char *dtype;
	unsigned itemsize, ndim;
	uint64_t shape[4];
	uint64_t off, nbytes;   /* relative to the data buffer */
};

static unsigned force_rank; /* nonzero: every random tensor has this rank */

/* Writes a safetensors file of n random tensors; returns the whole file's
 * bytes (malloc) and the data buffer's start in *data_start. */
static uint8_t *write_random_ckpt(const char *path, struct rt *t, unsigned n,
				  uint64_t *data_start, uint64_t *fsize)
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

/* The box of a shard, sliced out of the tensor's bytes in C order. */
static int slice_equal(const uint8_t *tensor, const struct rt *t, const rl_shard_info *si,
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

static const char *random_dim_spec(void)
{
	static const char *const specs[] = { "null", "\"x\"", "\"y\"", "[\"x\",\"y\"]",
					     "[\"y\",\"x\"]" };

	return specs[th_rand() % 5];
}

static void random_shardings(void)
{
	size_t verified = 0;

	for (int round = 0; round < 8; round++) {
		struct rt t[12];
		unsigned n = 1 + (unsigned)(th_rand() % 12);
		uint64_t data_start, fsize;
		char *spec_json = malloc(16384);
		size_t sj = 0;
		uint8_t *file = write_random_ckpt(tmp_path("rand.safetensors"), t, n, &data_start,
						  &fsize);
		rl_ckpt *ck = rl_ckpt_create();
		rl_spec *spec = rl_spec_create();
		unsigned mx = 1 + (unsigned)(th_rand() % 3), my = 1 + (unsigned)(th_rand() % 3);
		unsigned nproc = (unsigned)(th_rand() % 2) + 1;

		CHECK(file && ck && spec && spec_json);
		CHECKF(rl_ckpt_open(ck, tmp_path("rand.safetensors")) == 0, "%s", rl_ckpt_errmsg(ck));
		/* mesh (mx, my); devices split over nproc processes (ids are
		 * dense: one device means one process) */
		sj += (size_t)snprintf(spec_json + sj, 16384 - sj,
				       "{\"mesh\":{\"shape\":[%u,%u],\"axes\":[\"x\",\"y\"],"
				       "\"process_of_device\":[", mx, my);
		for (unsigned d = 0; d < mx * my; d++)
			sj += (size_t)snprintf(spec_json + sj, 16384 - sj, "%s%u", d ? "," : "",
					       nproc == 2 && mx * my >= 2 && d >= mx * my / 2 ? 1 : 0);
		sj += (size_t)snprintf(spec_json + sj, 16384 - sj, "]},\"rules\":[");
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
			sj += (size_t)snprintf(spec_json + sj, 16384 - sj,
					       "%s{\"match\":\"%s\",\"spec\":[%s%s%s]}",
					       sj && spec_json[sj - 1] == '}' ? "," : "", t[i].name, d0,
					       t[i].ndim >= 2 ? "," : "", t[i].ndim >= 2 ? d1 : "");
		}
		sj += (size_t)snprintf(spec_json + sj, 16384 - sj, "]}");
		CHECKF(rl_spec_parse(spec, spec_json, sj) == 0, "%s: %s", spec_json,
		       rl_spec_errmsg(spec));

		for (unsigned p = 0; p < (mx * my >= 2 ? nproc : 1); p++) {
			rl_loader *ld;
			rl_plan *plan;
			int ret = load(ck, spec, (int)p, &ld, &plan);

			if (ret == RL_E_BACKEND) {
				rl_loader_destroy(ld);
				break;
			}
			CHECKF(ret == 0, "round %d: %s (spec %s)", round, rl_loader_errmsg(ld),
			       spec_json);
			for (size_t s = 0; s < rl_plan_num_shards(plan); s++) {
				rl_shard_info si;
				long ti;
				uint8_t *base;

				CHECK(rl_plan_shard(plan, s, &si) == 0);
				ti = rl_ckpt_find(ck, si.name);
				CHECK(ti >= 0);
				base = rl_loader_staging(ld, si.device, NULL);
				CHECK(si.nbytes == 0 || base);
				verified++;
				for (unsigned i = 0; i < n; i++)
					if (!strcmp(t[i].name, si.name))
						CHECKF(slice_equal(file + data_start + t[i].off, t + i,
								   &si, base ? base + si.offset : NULL),
						       "round %d: shard %zu (%s on device %u) differs; spec %s",
						       round, s, si.name, si.device, spec_json);
			}
			rl_plan_destroy(plan);
			rl_loader_destroy(ld);
		}
		rl_spec_destroy(spec);
		rl_ckpt_destroy(ck);
		free(file);
		free(spec_json);
	}
	CHECK(verified > 0);
}

/* ------------------------------------------------------------------ */

static int write_bytes(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(p, 1, n, f) == n;

	if (f)
		fclose(f);
	return ok ? 0 : -1;
}

/* A checkpoint with no tensors, and one with only zero-size tensors. */
static void empty_and_zero_size(void)
{
	static const char *const headers[2] = {
		"{}",
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
		"\"b\":{\"dtype\":\"U8\",\"shape\":[0,5],\"data_offsets\":[0,0]}}",
	};
	const char *files[2] = { tmp_path("empty.safetensors"), tmp_path("zero.safetensors") };

	for (int i = 0; i < 2; i++) {
		char buf[256];
		uint64_t hlen = strlen(headers[i]);

		memcpy(buf, &hlen, 8);
		memcpy(buf + 8, headers[i], hlen);
		CHECK(write_bytes(files[i], buf, 8 + hlen) == 0);
	}
	for (int i = 0; i < 2; i++) {
		rl_ckpt *ck = rl_ckpt_create();
		rl_loader *ld;
		rl_plan *plan;
		rl_load_stats st;
		int ret;

		CHECKF(rl_ckpt_open(ck, files[i]) == 0, "%s", rl_ckpt_errmsg(ck));
		ret = load(ck, NULL, 0, &ld, &plan);
		if (ret == RL_E_BACKEND) {
			rl_loader_destroy(ld);
			rl_ckpt_destroy(ck);
			SKIP("backend unavailable");
		}
		CHECKF(ret == 0, "%s: %s", files[i], rl_loader_errmsg(ld));
		CHECK(rl_loader_get_stats(ld, &st) == 0);
		CHECK_EQ(st.bytes_read, 0);
		CHECK_EQ(rl_plan_num_shards(plan), i ? 2 : 0);
		rl_plan_destroy(plan);
		rl_loader_destroy(ld);
		rl_ckpt_destroy(ck);
	}
}

/* Callbacks: every shard exactly once, complete when reported; progress
 * reaches the total; a progress callback that says stop cancels. */
struct cb_state {
	rl_loader *ld;
	const rl_plan *plan;
	const uint8_t *file;
	uint64_t data_start;
	struct rt *t;
	unsigned n;
	unsigned *calls;
	int bad;
	uint64_t last_done, total;
	int cancel;
};

static void on_shard_cb(void *user, size_t s)
{
	struct cb_state *cs = user;

	cs->calls[s]++;
	(void)cs;
}

static int on_progress_cb(void *user, uint64_t done, uint64_t total)
{
	struct cb_state *cs = user;

	if (done < cs->last_done || done > total)
		cs->bad = 1;
	cs->last_done = done;
	cs->total = total;
	return cs->cancel && done * 4 >= total;
}

static void callbacks(void)
{
	struct rt t[6];
	uint64_t data_start, fsize;
	uint8_t *file;
	rl_ckpt *ck = rl_ckpt_create();
	rl_plan *plan = rl_plan_create();
	rl_loader *ld = rl_loader_create();
	unsigned calls[64] = { 0 };
	struct cb_state cs;
	size_t nsh;
	int ret;

	file = write_random_ckpt(tmp_path("cb.safetensors"), t, 6, &data_start, &fsize);
	CHECK(file && ck && plan && ld);
	CHECK(rl_ckpt_open(ck, tmp_path("cb.safetensors")) == 0);
	CHECK(rl_plan_set(plan, RL_PLAN_CHUNK_BYTES, 4096) == 0);
	CHECK(rl_plan_build(plan, ck, NULL) == 0);
	nsh = rl_plan_num_shards(plan);
	CHECK(nsh <= 64);
	memset(&cs, 0, sizeof(cs));
	cs.calls = calls;
	CHECK(rl_loader_set(ld, RL_OPT_BACKEND, cur) == 0);
	CHECK(rl_loader_set_callbacks(ld, on_shard_cb, on_progress_cb, &cs) == 0);
	ret = rl_loader_run(ld, plan);
	if (ret == RL_E_BACKEND)
		goto skip;
	CHECKF(ret == 0, "%s", rl_loader_errmsg(ld));
	for (size_t s = 0; s < nsh; s++)
		CHECKF(calls[s] == 1, "shard %zu reported %u times", s, calls[s]);
	CHECK(!cs.bad);
	CHECK(cs.last_done == cs.total);

	/* cancel at a quarter: an error, no staging handed out */
	memset(calls, 0, sizeof(calls));
	cs.cancel = 1;
	cs.last_done = 0;
	ret = rl_loader_run(ld, plan);
	if (fsize > 4 * 4096) {
		CHECKF(ret == RL_E_CANCELED, "%d %s", ret, rl_loader_errmsg(ld));
		CHECK(rl_loader_staging(ld, 0, NULL) == NULL);
	}
skip:
	rl_loader_destroy(ld);
	rl_plan_destroy(plan);
	rl_ckpt_destroy(ck);
	free(file);
	if (ret == RL_E_BACKEND)
		SKIP("backend unavailable");
}

/*
 * Read once across 2 processes of 2 devices each: replicated tensors are
 * read once in the cluster, by contiguous ranges, and travel. Here the
 * whole cluster runs in one program: every root reads its payloads with
 * its batch plans (rl_plan_build_batch) on the backend under test, each
 * process runs its own plan and applies its transfers' scatter lists, and
 * every shard must equal the file's bytes. Shards the reads fill are
 * reported once; shards transfers fill are not reported.
 */
struct ro_state {
	unsigned calls[128];
};

static void ro_on_shard(void *user, size_t s)
{
	struct ro_state *rs = user;

	if (s < 128)
		rs->calls[s]++;
}

static const char ro_spec[] =
	"{\"mesh\":{\"shape\":[4],\"axes\":[\"m\"],\"process_of_device\":[0,0,1,1]},"
	"\"rules\":[{\"match\":\"t[4-7]\",\"spec\":[\"m\"]}]}";

static rl_plan *ro_plan(rl_ckpt *ck, rl_spec *spec, int p)
{
	rl_plan *plan = rl_plan_create();

	if (!plan || rl_plan_set(plan, RL_PLAN_PROCESS, p) ||
	    rl_plan_set(plan, RL_PLAN_READ_ONCE, 1) || rl_plan_set(plan, RL_PLAN_CHUNK_BYTES, 4096) ||
	    rl_plan_set(plan, RL_PLAN_BATCH_BYTES, 5000) || rl_plan_build(plan, ck, spec)) {
		rl_plan_destroy(plan);
		return NULL;
	}
	return plan;
}

/* Root p's payloads, batch by batch, into payload[transfer index]. */
static int ro_read_payloads(const rl_plan *plan, int p, uint8_t **payload)
{
	uint64_t nb = 0;
	int ret = 0;

	rl_plan_transfer_summary(plan, NULL, &nb, NULL);
	for (uint64_t b = 0; b < nb && !ret; b++) {
		rl_plan *bp = rl_plan_create();
		rl_loader *ld = rl_loader_create();
		size_t k = 0;

		rl_plan_set(bp, RL_PLAN_CHUNK_BYTES, 8192);
		if (rl_plan_build_batch(bp, plan, b) || rl_loader_set(ld, RL_OPT_BACKEND, cur))
			ret = -1;
		if (!ret)
			ret = rl_loader_run(ld, bp);
		for (size_t i = 0; !ret && i < rl_plan_num_transfers(plan); i++) {
			rl_transfer_info x;
			rl_shard_info si;

			rl_plan_transfer(plan, i, &x);
			if (x.root != p || x.batch != b)
				continue;
			rl_plan_shard(bp, k++, &si);
			payload[x.index] = malloc(x.nbytes);
			memcpy(payload[x.index], (uint8_t *)rl_loader_staging(ld, 0, NULL) + si.offset,
			       x.nbytes);
		}
		rl_loader_destroy(ld);
		rl_plan_destroy(bp);
	}
	return ret;
}

/* Process p's transfers into its staging; marks the shards they fill. */
static void ro_apply(const rl_plan *plan, rl_loader *ld, uint8_t *const *payload, uint8_t *recv)
{
	for (size_t i = 0; i < rl_plan_num_transfers(plan); i++) {
		rl_transfer_info x;

		rl_plan_transfer(plan, i, &x);
		for (size_t j = 0; j < x.ncopies; j++) {
			rl_copy_info c;
			uint8_t *dst;

			rl_plan_transfer_copy(plan, i, j, &c);
			dst = (uint8_t *)rl_loader_staging(ld, c.device, NULL) + c.dst;
			for (uint64_t k = 0; k < c.count; k++)
				memcpy(dst + k * c.len, payload[x.index] + c.src + k * c.src_stride, c.len);
			recv[c.shard] = 1;
		}
	}
}

static void read_once(void)
{
	struct rt t[8];
	uint64_t data_start, fsize, ntotal = 0;
	uint8_t *file, *payload[256] = { 0 };
	rl_ckpt *ck = rl_ckpt_create();
	rl_spec *spec = rl_spec_create();
	rl_plan *plan[2] = { NULL, NULL };
	size_t received = 0, reported = 0;
	int ret = 0;

	force_rank = 2;
	file = write_random_ckpt(tmp_path("ro.safetensors"), t, 8, &data_start, &fsize);
	force_rank = 0;
	CHECK(file && ck && spec);
	CHECK(rl_ckpt_open(ck, tmp_path("ro.safetensors")) == 0);
	CHECKF(rl_spec_parse(spec, ro_spec, strlen(ro_spec)) == 0, "%s", rl_spec_errmsg(spec));
	for (int p = 0; p < 2; p++) {
		plan[p] = ro_plan(ck, spec, p);
		CHECK(plan[p]);
	}
	rl_plan_transfer_summary(plan[0], &ntotal, NULL, NULL);
	CHECK(ntotal > 0 && ntotal <= 256);
	for (int p = 0; p < 2 && !ret; p++)
		ret = ro_read_payloads(plan[p], p, payload);
	for (int p = 0; p < 2 && !ret; p++) {
		rl_loader *ld = rl_loader_create();
		struct ro_state rs;
		uint8_t recv[128] = { 0 };
		size_t nsh = rl_plan_num_shards(plan[p]);

		memset(&rs, 0, sizeof(rs));
		CHECK(nsh <= 128);
		CHECK(rl_loader_set(ld, RL_OPT_BACKEND, cur) == 0);
		CHECK(rl_loader_set_callbacks(ld, ro_on_shard, NULL, &rs) == 0);
		ret = rl_loader_run(ld, plan[p]);
		CHECKF(ret == 0 || ret == RL_E_BACKEND, "process %d: %s", p, rl_loader_errmsg(ld));
		if (!ret)
			ro_apply(plan[p], ld, payload, recv);
		for (size_t s = 0; !ret && s < nsh; s++) {
			rl_shard_info si;
			unsigned i;

			CHECK(rl_plan_shard(plan[p], s, &si) == 0);
			CHECKF(rs.calls[s] == !recv[s], "process %d: shard %zu (%s) reported %u times",
			       p, s, si.name, rs.calls[s]);
			received += recv[s];
			reported += rs.calls[s];
			i = (unsigned)atoi(si.name + 1);
			CHECK(i < 8);
			CHECKF(slice_equal(file + data_start + t[i].off, t + i, &si,
					   si.nbytes ? (uint8_t *)rl_loader_staging(ld, si.device, NULL) +
					   si.offset : NULL),
			       "process %d: shard %zu (%s) differs", p, s, si.name);
		}
		rl_loader_destroy(ld);
	}
	for (uint64_t g = 0; g < 256; g++)
		free(payload[g]);
	rl_plan_destroy(plan[0]);
	rl_plan_destroy(plan[1]);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
	free(file);
	if (ret == RL_E_BACKEND)
		SKIP("backend unavailable");
	/* t0-t3 are replicated over both processes: their shards travel */
	CHECKF(received >= 8 && reported > 0, "%zu received, %zu reported", received, reported);
}

/* Caller staging: aligned (direct reads), misaligned by one byte (bounce
 * fallback), too small or missing (RL_E_STAGING). */
static void caller_staging(void)
{
	struct rt t[8];
	uint64_t data_start, fsize;
	uint8_t *file = write_random_ckpt(tmp_path("cs.safetensors"), t, 8, &data_start, &fsize);
	rl_ckpt *ck = rl_ckpt_create();
	rl_plan *plan = rl_plan_create();
	rl_loader *ld = rl_loader_create();
	rl_device_info di;
	rl_load_stats st;
	uint8_t *mem;
	size_t len;
	int ret = 0;

	CHECK(file && ck && plan && ld);
	CHECK(rl_ckpt_open(ck, tmp_path("cs.safetensors")) == 0);
	CHECK(rl_plan_build(plan, ck, NULL) == 0);
	CHECK(rl_plan_device(plan, 0, &di) == 0);
	len = di.staging_bytes + 8192;
	mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(mem != MAP_FAILED);
	CHECK(rl_loader_set(ld, RL_OPT_BACKEND, cur) == 0);
	CHECK(rl_loader_set(ld, RL_OPT_STAGING, RL_STAGING_CALLER) == 0);
	ret = rl_loader_run(ld, plan);
	CHECKF(ret == RL_E_STAGING, "%d %s", ret, rl_loader_errmsg(ld));
	CHECK(rl_loader_set_staging(ld, 0, mem, di.staging_bytes ? di.staging_bytes - 1 : 0) == 0 ||
	      di.staging_bytes <= 1);
	if (di.staging_bytes > 1) {
		ret = rl_loader_run(ld, plan);
		CHECKF(ret == RL_E_STAGING && strstr(rl_loader_errmsg(ld), "needed"), "%d %s", ret,
		       rl_loader_errmsg(ld));
	}
	for (int mis = 0; mis < 2; mis++) {
		uint8_t *base = mem + mis;

		memset(mem, 0xEE, len);
		CHECK(rl_loader_set_staging(ld, 0, base, di.staging_bytes + 1) == 0);
		ret = rl_loader_run(ld, plan);
		if (ret == RL_E_BACKEND)
			break;
		CHECKF(ret == 0, "misaligned %d: %s", mis, rl_loader_errmsg(ld));
		CHECK(rl_loader_staging(ld, 0, NULL) == base);
		for (size_t s = 0; s < rl_plan_num_shards(plan); s++) {
			rl_shard_info si;

			CHECK(rl_plan_shard(plan, s, &si) == 0);
			for (unsigned i = 0; i < 8; i++)
				if (!strcmp(t[i].name, si.name))
					CHECKF(!memcmp(file + data_start + t[i].off, base + si.offset,
						       si.nbytes),
					       "misaligned %d: %s differs", mis, si.name);
		}
		CHECK(rl_loader_get_stats(ld, &st) == 0);
		if (mis)
			CHECK_EQ(st.bytes_direct, 0);
	}
	munmap(mem, len);
	rl_loader_destroy(ld);
	rl_plan_destroy(plan);
	rl_ckpt_destroy(ck);
	free(file);
	if (ret == RL_E_BACKEND)
		SKIP("backend unavailable");
}

/* The file shrinks between planning and loading: "truncated". */
static void truncated_after_plan(void)
{
	struct rt t[4];
	uint64_t data_start, fsize;
	uint8_t *file = write_random_ckpt(tmp_path("tr.safetensors"), t, 4, &data_start, &fsize);
	rl_ckpt *ck = rl_ckpt_create();
	rl_plan *plan = rl_plan_create();
	rl_loader *ld = rl_loader_create();
	int ret;

	CHECK(file && ck && plan && ld);
	free(file);
	CHECK(rl_ckpt_open(ck, tmp_path("tr.safetensors")) == 0);
	CHECK(rl_plan_build(plan, ck, NULL) == 0);
	if (fsize - data_start < 16) {
		rl_loader_destroy(ld);
		rl_plan_destroy(plan);
		rl_ckpt_destroy(ck);
		return;
	}
	CHECK(truncate(tmp_path("tr.safetensors"), (off_t)(fsize - 8)) == 0);
	CHECK(rl_loader_set(ld, RL_OPT_BACKEND, cur) == 0);
	ret = rl_loader_run(ld, plan);
	rl_loader_destroy(ld);
	rl_plan_destroy(plan);
	rl_ckpt_destroy(ck);
	if (ret == RL_E_BACKEND)
		SKIP("backend unavailable");
	CHECKF(ret == RL_E_TRUNCATED, "%d", ret);
}

/* `ringload load --out DIR --verify` writes every shard in the documented
 * layout; checked against independent slicing. Usage errors exit 2, bad
 * input 1. */
static int run_cmd(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void cli_load_out_verify(void)
{
	const char *build = getenv("RL_BUILD");
	struct rt t[6];
	uint64_t data_start, fsize;
	char cmd[4096], path[1024];
	uint8_t *file;
	FILE *f;
	int st;

	if (!build)
		SKIP("RL_BUILD not set");
	force_rank = 2;
	file = write_random_ckpt(tmp_path("cli.safetensors"), t, 6, &data_start, &fsize);
	force_rank = 0;
	CHECK(file);
	f = fopen(tmp_path("cli.json"), "w");
	CHECK(f);
	fprintf(f, "{\"mesh\":{\"shape\":[2],\"axes\":[\"m\"],\"devices\":[5,7]},"
		   "\"rules\":[{\"match\":\"t[0-2]\",\"spec\":[\"m\"]},"
		   "{\"match\":\"t[3-5]\",\"spec\":[null,\"m\"]}]}");
	fclose(f);
	snprintf(cmd, sizeof(cmd),
		 "%s/ringload load %s --sharding %s --out %s/out --verify --quiet >%s 2>&1", build,
		 tmp_path("cli.safetensors"), tmp_path("cli.json"), th_tmpdir(),
		 tmp_path("cli.log"));
	st = run_cmd(cmd);
	CHECKF(st == 0, "exit %d: %s", st, cmd);
	for (unsigned dev = 0; dev < 2; dev++) {
		for (unsigned i = 0; i < 6; i++) {
			rl_shard_info si;
			size_t n = 0;
			char *got;
			unsigned parts = 2, k = dev;

			snprintf(path, sizeof(path), "%s/out/%u/%s.bin", th_tmpdir(), dev ? 7 : 5,
				 t[i].name);
			got = slurp(path, &n);
			CHECKF(got, "missing %s", path);
			/* the expected box: rows split (t0-t2) or columns (t3-t5) */
			memset(&si, 0, sizeof(si));
			si.ndim = t[i].ndim;
			for (unsigned d = 0; d < t[i].ndim; d++) {
				si.shape[d] = t[i].shape[d];
				si.start[d] = 0;
				si.stop[d] = t[i].shape[d];
			}
			if (t[i].ndim && (i < 3 || t[i].ndim >= 2)) {
				unsigned d = i < 3 ? 0 : 1;
				uint64_t c = (t[i].shape[d] + parts - 1) / parts;

				si.start[d] = (c * k < t[i].shape[d] ? c * k : t[i].shape[d]);
				si.stop[d] = (c * (k + 1) < t[i].shape[d] ? c * (k + 1) : t[i].shape[d]);
			}
			si.nbytes = t[i].itemsize;
			for (unsigned d = 0; d < t[i].ndim; d++)
				si.nbytes *= si.stop[d] - si.start[d];
			CHECKF(n == si.nbytes, "%s: %zu bytes, %llu expected", path, n,
			       (unsigned long long)si.nbytes);
			CHECKF(slice_equal(file + data_start + t[i].off, t + i, &si, (uint8_t *)got),
			       "%s differs", path);
			free(got);
		}
	}
	free(file);
	snprintf(cmd, sizeof(cmd), "%s/ringload load %s --bogus >/dev/null 2>&1", build,
		 tmp_path("cli.safetensors"));
	CHECK_EQ(run_cmd(cmd), 2);
	snprintf(cmd, sizeof(cmd), "%s/ringload load %s/none.safetensors >/dev/null 2>%s", build,
		 th_tmpdir(), tmp_path("err.log"));
	CHECK_EQ(run_cmd(cmd), 1);
}

/* As an unprivileged user with `ulimit -l 8192` (setpriv), the CLI loads
 * and verifies the same bytes; registration shrinks and says so. */
static void cli_unprivileged(void)
{
	const char *build = getenv("RL_BUILD");
	char dir[] = "/tmp/ringload-nobody-XXXXXX", cmd[4096], file[256], log[256], bin[1024];
	struct rt t[8];
	uint64_t data_start, fsize;
	uint8_t *bytes;
	size_t n;
	char *out;
	int st;

	if (!build || geteuid() != 0 || run_cmd("command -v setpriv >/dev/null") != 0)
		SKIP("needs root, setpriv and RL_BUILD");
	if (!realpath(build, bin))
		SKIP("no build directory");
	CHECK(mkdtemp(dir));
	CHECK(chmod(dir, 0755) == 0);
	snprintf(file, sizeof(file), "%s/u.safetensors", dir);
	snprintf(log, sizeof(log), "%s/log", dir);
	bytes = write_random_ckpt(file, t, 8, &data_start, &fsize);
	CHECK(bytes);
	free(bytes);
	CHECK(chmod(file, 0644) == 0);
	snprintf(cmd, sizeof(cmd),
		 "setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "
		 "'ulimit -l 8192 && %s/ringload load %s --verify --inflight-bytes 64M' >%s 2>&1",
		 bin, file, log);
	st = run_cmd(cmd);
	out = slurp(log, &n);
	unlink(file);
	unlink(log);
	rmdir(dir);
	CHECKF(st == 0, "exit %d: %s", st, out ? out : "");
	CHECKF(out && strstr(out, "0 differ"), "%s", out ? out : "");
	free(out);
}

static void params_and_stats(void)
{
	rl_loader *ld = rl_loader_create();
	rl_load_stats st;
	int64_t lo, hi;

	CHECK(ld);
	CHECK(rl_loader_get_stats(ld, &st) == RL_E_STATE);
	CHECK(rl_loader_param_bounds(RL_OPT_QUEUE_DEPTH, &lo, &hi) == 0 && lo == 1);
	CHECK(rl_loader_param_bounds((rl_loader_param)99, &lo, &hi) == -EINVAL);
	CHECK(rl_loader_set(ld, RL_OPT_QUEUE_DEPTH, 0) == RL_E_INVALID_ARG);
	CHECK(strstr(rl_loader_errmsg(ld), "not in"));
	CHECK(rl_loader_set(ld, RL_OPT_BACKEND, 4) == RL_E_INVALID_ARG);
	CHECK(rl_loader_set(ld, RL_OPT_INFLIGHT_BYTES, 1 << 20) == 0);
	CHECK(rl_loader_staging(ld, 0, NULL) == NULL);
	CHECK_STR(rl_backend_name(RL_BACKEND_LIBAIO), "libaio");
	CHECK_STR(rl_backend_name((rl_backend)9), "?");
	rl_loader_destroy(ld);
	rl_loader_destroy(NULL);
}

/* A U8 checkpoint of tensors names[i] with sizes[i] bytes (value i+1). */
static int write_u8_ckpt(const char *path, const char *const *names, const unsigned *sizes,
			 unsigned n)
{
	char hdr[4096];
	size_t h = 0, total = 0;
	uint64_t hlen;
	uint8_t *file;
	int ret;

	h += (size_t)snprintf(hdr + h, sizeof(hdr) - h, "{");
	for (unsigned i = 0; i < n; i++) {
		h += (size_t)snprintf(hdr + h, sizeof(hdr) - h,
				      "%s\"%s\":{\"dtype\":\"U8\",\"shape\":[%u],"
				      "\"data_offsets\":[%zu,%zu]}", i ? "," : "", names[i],
				      sizes[i], total, total + sizes[i]);
		total += sizes[i];
	}
	hdr[h++] = '}';
	while (h % 8)
		hdr[h++] = ' ';
	hlen = h;
	file = malloc(8 + h + total);
	if (!file)
		return -1;
	memcpy(file, &hlen, 8);
	memcpy(file + 8, hdr, h);
	for (unsigned i = 0, off = 0; i < n; off += sizes[i], i++)
		memset(file + 8 + h + off, (int)i + 1, sizes[i]);
	ret = write_bytes(path, file, 8 + h + total);
	free(file);
	return ret;
}

/* Runs a shell command line and returns its exit status, its stdout and
 * its stderr (malloc'd, in *out and *err). */
static int run_capture(const char *cmdline, char **out, char **err)
{
	char cmd[8192];
	size_t n;
	int st;

	snprintf(cmd, sizeof(cmd), "%s >%s 2>%s", cmdline, tmp_path("cap.out"),
		 tmp_path("cap.err"));
	st = run_cmd(cmd);
	*out = slurp(tmp_path("cap.out"), &n);
	*err = slurp(tmp_path("cap.err"), &n);
	return st;
}

static unsigned count_lines(const char *s)
{
	unsigned n = 0;

	for (; s && *s; s++)
		n += *s == '\n';
	return n;
}

/*
 * `ringload load --out DIR`: DIR is checked before loading (not a
 * directory: one error, no summary); a write failure names the path, exits
 * 1, prints no summary and leaves no shard files; a tensor whose encoded
 * name cannot be a file name is named before anything is read or written;
 * a bad --sharding file is named once.
 */
static void cli_out_errors(void)
{
	static const char *const names[] = { "a", "b/c%" };
	static const unsigned sizes[] = { 5000, 3000 };
	const char *build = getenv("RL_BUILD");
	char cmd[4096], longname[301], dir[1024];
	const char *lname = longname;
	unsigned three = 3;
	char *out = NULL, *err = NULL;
	struct stat sb;
	int st;

	if (!build)
		SKIP("RL_BUILD not set");
	CHECK(write_u8_ckpt(tmp_path("oe.safetensors"), names, sizes, 2) == 0);

	snprintf(cmd, sizeof(cmd), "%s/ringload load %s --out /dev/null --quiet", build,
		 tmp_path("oe.safetensors"));
	st = run_capture(cmd, &out, &err);
	CHECKF(st == 1, "exit %d", st);
	CHECKF(out && !*out, "stdout: %s", out ? out : "");
	CHECKF(err && count_lines(err) == 1 && strstr(err, "/dev/null") &&
	       strstr(err, "Not a directory"), "%s", err ? err : "");
	free(out);
	free(err);

	/* writes past 1 KiB fail with EFBIG (SIGXFSZ ignored) */
	snprintf(dir, sizeof(dir), "%s/oe_full", th_tmpdir());
	snprintf(cmd, sizeof(cmd), "sh -c \"trap '' XFSZ; ulimit -f 2; %s/ringload load %s --out %s --quiet\"",
		 build, tmp_path("oe.safetensors"), dir);
	st = run_capture(cmd, &out, &err);
	CHECKF(st == 1, "exit %d", st);
	CHECKF(out && !*out, "stdout: %s", out ? out : "");
	CHECKF(err && count_lines(err) == 1 && strstr(err, "oe_full/0/") && strstr(err, ".bin: "),
	       "%s", err ? err : "");
	free(out);
	free(err);
	snprintf(cmd, sizeof(cmd), "%s/0/a.bin", dir);
	CHECKF(stat(cmd, &sb) < 0 && errno == ENOENT, "%s left behind", cmd);
	snprintf(cmd, sizeof(cmd), "%s/0", dir);
	CHECKF(stat(cmd, &sb) < 0, "%s left behind", cmd);

	/* the same, with room, succeeds and prints the summary after writing */
	snprintf(cmd, sizeof(cmd), "%s/ringload load %s --out %s --quiet", build,
		 tmp_path("oe.safetensors"), dir);
	st = run_capture(cmd, &out, &err);
	CHECKF(st == 0, "exit %d: %s", st, err ? err : "");
	CHECKF(out && strstr(out, " bytes in "), "%s", out ? out : "");
	free(out);
	free(err);
	snprintf(cmd, sizeof(cmd), "%s/0/b%%2Fc%%25.bin", dir);
	CHECKF(stat(cmd, &sb) == 0 && sb.st_size == 3000, "%s", cmd);

	/* 300-byte name: over NAME_MAX with .bin */
	memset(longname, 'x', 300);
	longname[300] = '\0';
	CHECK(write_u8_ckpt(tmp_path("oe_long.safetensors"), &lname, &three, 1) == 0);
	snprintf(dir, sizeof(dir), "%s/oe_long", th_tmpdir());
	snprintf(cmd, sizeof(cmd), "%s/ringload load %s --out %s --quiet", build,
		 tmp_path("oe_long.safetensors"), dir);
	st = run_capture(cmd, &out, &err);
	CHECKF(st == 1, "exit %d", st);
	CHECKF(out && !*out, "stdout: %s", out ? out : "");
	CHECKF(err && count_lines(err) == 1 && strstr(err, "tensor \"xxxx") &&
	       strstr(err, "300 bytes"), "%s", err ? err : "");
	CHECKF(stat(dir, &sb) < 0, "%s created", dir);
	free(out);
	free(err);

	/* a missing --sharding file: its path once, as `ringload plan` */
	snprintf(cmd, sizeof(cmd), "%s/ringload load %s --sharding %s/nonexistent.json", build,
		 tmp_path("oe.safetensors"), th_tmpdir());
	st = run_capture(cmd, &out, &err);
	CHECKF(st == 1, "exit %d", st);
	CHECKF(err && count_lines(err) == 1 && strstr(err, "nonexistent.json") &&
	       !strstr(strstr(err, "nonexistent.json") + 1, "nonexistent.json"),
	       "%s", err ? err : "");
	free(out);
	free(err);
	/* and a spec error (unknown axis) names the file once */
	CHECK(write_bytes(tmp_path("unkaxis.json"),
			  "{\"mesh\":{\"shape\":[2],\"axes\":[\"m\"]},"
			  "\"rules\":[{\"match\":\"a\",\"spec\":[\"q\"]}]}", 72) == 0);
	snprintf(cmd, sizeof(cmd), "%s/ringload load %s --sharding %s", build,
		 tmp_path("oe.safetensors"), tmp_path("unkaxis.json"));
	st = run_capture(cmd, &out, &err);
	CHECKF(st == 1, "exit %d", st);
	CHECKF(err && count_lines(err) == 1 && strstr(err, "unkaxis.json") &&
	       !strstr(strstr(err, "unkaxis.json") + 1, "unkaxis.json"), "%s", err ? err : "");
	free(out);
	free(err);
}

/* Every loader entry point takes NULL handles and pointers like the
 * checkpoint, spec and plan ones: -EINVAL (or NULL, ""), never a crash. */
static void null_safety(void)
{
	rl_loader *ld = rl_loader_create();
	rl_plan *plan = rl_plan_create(), *got = (rl_plan *)1;
	rl_load_stats st;
	int64_t lo = -1;
	size_t len = 1;

	CHECK(ld && plan);
	CHECK_STR(rl_loader_errmsg(NULL), "");
	CHECK_EQ(rl_loader_run(NULL, plan), -EINVAL);
	CHECK_EQ(rl_loader_run(ld, NULL), -EINVAL);
	CHECK(strstr(rl_loader_errmsg(ld), "plan"));
	CHECK_EQ(rl_loader_run(ld, plan), RL_E_STATE); /* not built */
	CHECK_EQ(rl_loader_load(NULL, NULL, NULL, 0, &got), -EINVAL);
	CHECK(got == NULL);
	CHECK_EQ(rl_loader_load(ld, NULL, NULL, 0, NULL), -EINVAL);
	got = (rl_plan *)1;
	CHECK(rl_loader_load(ld, NULL, NULL, 0, &got) < 0);
	CHECK(got == NULL);
	CHECK_EQ(rl_loader_set(NULL, RL_OPT_QUEUE_DEPTH, 8), -EINVAL);
	CHECK_EQ(rl_loader_set_callbacks(NULL, NULL, NULL, NULL), -EINVAL);
	CHECK_EQ(rl_loader_set_staging(NULL, 0, &lo, sizeof(lo)), -EINVAL);
	CHECK(rl_loader_staging(NULL, 0, &len) == NULL && len == 0);
	CHECK_EQ(rl_loader_get_stats(NULL, &st), -EINVAL);
	CHECK_EQ(rl_loader_get_stats(ld, NULL), -EINVAL);
	CHECK_EQ(rl_loader_param_bounds(RL_OPT_QUEUE_DEPTH, NULL, NULL), 0);
	CHECK_EQ(rl_loader_param_bounds(RL_OPT_QUEUE_DEPTH, &lo, NULL), 0);
	CHECK_EQ(lo, 1);
	CHECK_EQ(rl_loader_param_bounds((rl_loader_param)99, NULL, NULL), -EINVAL);
	rl_plan_destroy(plan);
	rl_loader_destroy(ld);
}

int main(void)
{
	static const struct {
		const char *name;
		th_fn fn;
	} tests[] = {
		{ "reference_fixtures", reference_fixtures },
		{ "random_shardings", random_shardings },
		{ "empty_and_zero_size", empty_and_zero_size },
		{ "callbacks", callbacks },
		{ "caller_staging", caller_staging },
		{ "truncated_after_plan", truncated_after_plan },
		{ "read_once", read_once },
	};
	char name[128];

	th_seed();
	for (size_t b = 0; b < sizeof(backends) / sizeof(backends[0]); b++) {
		cur = backends[b];
		for (size_t t = 0; t < sizeof(tests) / sizeof(tests[0]); t++) {
			snprintf(name, sizeof(name), "%s/%s", rl_backend_name(cur), tests[t].name);
			th_run(name, tests[t].fn);
		}
	}
	RUN(params_and_stats);
	RUN(null_safety);
	RUN(cli_load_out_verify);
	RUN(cli_out_errors);
	RUN(cli_unprivileged);
	return th_done();
}
