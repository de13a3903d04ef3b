/*
 * mkckpt.c - writes a sample llama-like BF16 safetensors checkpoint.
 *
 *   mkckpt OUT --size SIZE [--layers N] [--files K] [--seed S]
 *
 * SIZE takes K, M, G, T suffixes (powers of 1024). The model has an
 * embedding, N decoder layers (input and post-attention norms, q/k/v/o
 * projections with grouped-query k/v of a quarter width, gate/up/down MLP
 * projections) and lm_head; the hidden width is the largest multiple of 64
 * that keeps the total at or under SIZE. With --files 1 and OUT ending in
 * ".safetensors", OUT is that file; otherwise OUT is a directory receiving
 * model.safetensors, or K shards model-0000k-of-0000K.safetensors and
 * model.safetensors.index.json, as Hugging Face writes them.
 *
 * The data is deterministic: the 8 bytes at file offset 8*w of shard k
 * (0-based; data starts 8-aligned) are the little-endian splitmix64 of
 * S + (k << 40) + w, so a reader can verify any byte without a copy.
 * Standalone: nothing of the library is used.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (8u << 20)

struct tensor {
	char name[96];
	uint64_t shape[2];
	int ndim;
	uint64_t nbytes;
	int file;
	uint64_t start; /* offset in its file's data section */
};

static struct tensor *tensors;
static size_t ntensors, cap;

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "mkckpt: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(1);
}

/* A bad argument: exit 2, like a usage error. */
static void bad_arg(const char *fmt, const char *arg)
{
	fprintf(stderr, "mkckpt: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(2);
}

static void usage(int code)
{
	fprintf(code ? stderr : stdout,
		"usage: mkckpt OUT --size SIZE [--layers N] [--files K] [--seed S]\n"
		"  SIZE: bytes with an optional K, M, G or T suffix (powers of 1024)\n"
		"  writes a llama-like BF16 checkpoint: OUT is a .safetensors file\n"
		"  (one file) or a directory (model.safetensors, or K shards + index)\n");
	exit(code);
}

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	double v;
	uint64_t mul = 1;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -1;
	switch (*end) {
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	case 't': case 'T': mul = 1ull << 40; end++; break;
	}
	if (*end == 'i' || *end == 'B')
		end += *end == 'i' ? (end[1] == 'B' ? 2 : 1) : 1;
	if (*end || v * (double)mul > 1e15)
		return -1;
	*out = (uint64_t)(v * (double)mul);
	return 0;
}

static void add(const char *name, uint64_t d0, uint64_t d1)
{
	struct tensor *t;

	if (ntensors == cap) {
		cap = cap ? cap * 2 : 256;
		tensors = realloc(tensors, cap * sizeof(*tensors));
		if (!tensors)
			die("%s", "out of memory");
	}
	t = &tensors[ntensors++];
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->shape[0] = d0;
	t->shape[1] = d1;
	t->ndim = d1 ? 2 : 1;
	t->nbytes = 2 * d0 * (d1 ? d1 : 1);
}

static uint64_t model_bytes(uint64_t h, uint64_t v, unsigned layers)
{
	uint64_t kv = h / 4, inter = (h * 8 / 3 + 255) / 256 * 256;
	uint64_t per_layer = 2 * h + 2 * h * h + 2 * kv * h + 3 * inter * h;

	return 2 * (2 * v * h + h + layers * per_layer);
}

static void build(uint64_t h, uint64_t v, unsigned layers)
{
	uint64_t kv = h / 4, inter = (h * 8 / 3 + 255) / 256 * 256;
	char n[96];

	add("model.embed_tokens.weight", v, h);
	for (unsigned l = 0; l < layers; l++) {
#define L(suffix, a, b) \
	do { \
		snprintf(n, sizeof(n), "model.layers.%u.%s", l, suffix); \
		add(n, a, b); \
	} while (0)
		L("input_layernorm.weight", h, 0);
		L("self_attn.q_proj.weight", h, h);
		L("self_attn.k_proj.weight", kv, h);
		L("self_attn.v_proj.weight", kv, h);
		L("self_attn.o_proj.weight", h, h);
		L("post_attention_layernorm.weight", h, 0);
		L("mlp.gate_proj.weight", inter, h);
		L("mlp.up_proj.weight", inter, h);
		L("mlp.down_proj.weight", h, inter);
#undef L
	}
	add("model.norm.weight", h, 0);
	add("lm_head.weight", v, h);
}

/* Appends to a growing string. */
struct sbuf {
	char *s;
	size_t len, cap;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < b->cap - b->len)
			break;
		b->cap = b->cap ? b->cap * 2 : 4096;
		if (b->cap < b->len + (size_t)n + 1)
			b->cap = b->len + (size_t)n + 1;
		b->s = realloc(b->s, b->cap);
		if (!b->s)
			die("%s", "out of memory");
	}
	b->len += (size_t)n;
}

static void write_all(int fd, const void *p, size_t n, const char *path)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("cannot write %s", path);
		c += w;
		n -= (size_t)w;
	}
}

static uint64_t write_file(const char *path, int k, uint64_t seed)
{
	struct sbuf h = { 0 };
	uint64_t data = 0, hlen, off, end;
	unsigned char len8[8];
	uint64_t *block;
	int fd;

	sb_printf(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
	for (size_t i = 0; i < ntensors; i++) {
		struct tensor *t = &tensors[i];

		if (t->file != k)
			continue;
		t->start = data;
		sb_printf(&h, ",\"%s\":{\"dtype\":\"BF16\",\"shape\":[%" PRIu64, t->name, t->shape[0]);
		if (t->ndim == 2)
			sb_printf(&h, ",%" PRIu64, t->shape[1]);
		sb_printf(&h, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", data, data + t->nbytes);
		data += t->nbytes;
	}
	sb_printf(&h, "}");
	while (h.len % 8)            /* data starts 8-aligned, as the reference pads */
		sb_printf(&h, " ");
	hlen = h.len;
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)(hlen >> (8 * i));

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		die("cannot create %s", path);
	write_all(fd, len8, 8, path);
	write_all(fd, h.s, h.len, path);
	free(h.s);
	block = malloc(BLOCK);
	if (!block)
		die("%s", "out of memory");
	off = 8 + hlen;
	end = off + data;
	while (off < end) {
		uint64_t n = end - off < BLOCK ? end - off : BLOCK;
		uint64_t w0 = off / 8;

		for (uint64_t w = 0; w < (n + 7) / 8; w++) {
			uint64_t x = splitmix64(seed + ((uint64_t)k << 40) + w0 + w);

			/* little-endian bytes, independent of the host */
			unsigned char *b = (unsigned char *)&block[w];
			for (int i = 0; i < 8; i++)
				b[i] = (unsigned char)(x >> (8 * i));
		}
		write_all(fd, block, n, path);
		off += n;
	}
	free(block);
	if (fsync(fd) < 0 && errno != EINVAL)
		die("cannot sync %s", path);
	if (close(fd) < 0)
		die("cannot close %s", path);
	return end;
}

int main(int argc, char **argv)
{
	const char *out = NULL;
	uint64_t size = 0, seed = 1, h = 0, v = 32000, total = 0, written = 0;
	unsigned layers = 0, files = 1;
	int single;
	struct timespec t0, t1;
	double secs;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			usage(0);
		if (a[0] == '-' && i + 1 >= argc)
			usage(2);
		if (!strcmp(a, "--size")) {
			if (parse_size(argv[++i], &size))
				bad_arg("bad --size '%s'", argv[i]);
		} else if (!strcmp(a, "--layers")) {
			layers = (unsigned)strtoul(argv[++i], NULL, 10);
			if (!layers || layers > 1000)
				bad_arg("bad --layers '%s' (1..1000)", argv[i]);
		} else if (!strcmp(a, "--files")) {
			files = (unsigned)strtoul(argv[++i], NULL, 10);
			if (!files || files > 99999)
				bad_arg("bad --files '%s' (1..99999)", argv[i]);
		} else if (!strcmp(a, "--seed")) {
			seed = strtoull(argv[++i], NULL, 0);
		} else if (a[0] == '-') {
			fprintf(stderr, "mkckpt: unknown option '%s'\n", a);
			usage(2);
		} else if (out) {
			usage(2);
		} else {
			out = a;
		}
	}
	if (!out || !size)
		usage(2);
	if (!layers)
		layers = size < (1ull << 30) ? 8 : size < (16ull << 30) ? 16 : 32;
	/* The widest multiple of 64 that fits; small sizes shrink the vocabulary. */
	while (v > 16 && model_bytes(64, v, layers) > size)
		v /= 2;
	if (model_bytes(64, v, layers) > size)
		die("%s", "--size is too small for this many layers");
	for (h = 64; model_bytes(h + 64, v, layers) <= size; h += 64)
		;
	build(h, v, layers);
	for (size_t i = 0; i < ntensors; i++)
		total += tensors[i].nbytes;
	if (files > ntensors)
		files = (unsigned)ntensors;
	/*
	 * Shards in tensor order, by where each tensor's middle byte falls,
	 * never skipping a shard and leaving none empty.
	 */
	{
		uint64_t run = 0;
		int prev = -1;

		for (size_t i = 0; i < ntensors; i++) {
			uint64_t mid = run + tensors[i].nbytes / 2;
			int f = (int)((double)mid * files / (double)total);
			int need = (int)files - (int)(ntensors - i);

			if (f > prev + 1)
				f = prev + 1;
			if (f < need)
				f = need;
			if (f > (int)files - 1)
				f = (int)files - 1;
			tensors[i].file = prev = f;
			run += tensors[i].nbytes;
		}
	}

	single = files == 1 && strlen(out) > 12 && !strcmp(out + strlen(out) - 12, ".safetensors");
	if (!single && mkdir(out, 0755) < 0 && errno != EEXIST)
		die("cannot create directory %s", out);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (single) {
		written = write_file(out, 0, seed);
	} else if (files == 1) {
		char p[4096];

		snprintf(p, sizeof(p), "%s/model.safetensors", out);
		written = write_file(p, 0, seed);
	} else {
		struct sbuf idx = { 0 };
		char p[4096];
		FILE *f;

		for (unsigned k = 0; k < files; k++) {
			snprintf(p, sizeof(p), "%s/model-%05u-of-%05u.safetensors", out, k + 1, files);
			written += write_file(p, (int)k, seed);
		}
		sb_printf(&idx, "{\n  \"metadata\": {\n    \"total_size\": %" PRIu64 "\n  },\n"
			  "  \"weight_map\": {", total);
		for (size_t i = 0; i < ntensors; i++)
			sb_printf(&idx, "%s\n    \"%s\": \"model-%05d-of-%05u.safetensors\"",
				  i ? "," : "", tensors[i].name, tensors[i].file + 1, files);
		sb_printf(&idx, "\n  }\n}\n");
		snprintf(p, sizeof(p), "%s/model.safetensors.index.json", out);
		f = fopen(p, "w");
		if (!f || fwrite(idx.s, 1, idx.len, f) != idx.len || fclose(f))
			die("cannot write %s", p);
		free(idx.s);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("mkckpt: wrote %s: %zu tensors in %u file%s, %" PRIu64 " bytes of data, %" PRIu64
	       " on disk (hidden %" PRIu64 ", %u layers, vocab %" PRIu64 ") in %.2f s\n",
	       out, ntensors, files, files == 1 ? "" : "s", total, written, h, layers, v, secs);
	free(tensors);
	return 0;
}
