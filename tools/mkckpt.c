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
 * Exit status: 0 written, 1 a runtime failure (creating, writing), 2 a
 * usage error or a bad argument. Standalone: nothing of the library is used.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "opts.h"
#include "cli_helpers.h"

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

/* A runtime failure (writing, memory): exit 1. */
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

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
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
	if (cli_write_all(fd, p, n) < 0)
		die("cannot write %s", path);
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

struct mk_args {
	const char *out;
	int64_t size, layers, files;
	uint64_t seed;
};

static void parse_args(int argc, char **argv, struct mk_args *a)
{
	const struct opt opts[] = {
		{ .name = "size", .kind = OPT_SIZE, .dst = &a->size, .metavar = "SIZE",
		  .help = "data bytes at most (required)", .lo = 1, .hi = 1ll << 50 },
		{ .name = "layers", .kind = OPT_INT, .dst = &a->layers, .metavar = "N",
		  .help = "decoder layers (default by size)", .lo = 1, .hi = 1000 },
		{ .name = "files", .kind = OPT_INT, .dst = &a->files, .metavar = "K",
		  .help = "shards, with an index when K > 1 (default 1)", .lo = 1,
		  .hi = 99999 },
		{ .name = "seed", .kind = OPT_U64, .dst = &a->seed, .metavar = "S",
		  .help = "data seed, decimal or 0x hex (default 1)" },
		{ NULL },
	};
	const struct opt_cmd cmd = {
		"mkckpt", "OUT",
		"Writes a llama-like BF16 checkpoint: OUT is a .safetensors file (one file) or\n"
		"a directory (model.safetensors, or K shards + model.safetensors.index.json).\n",
		opts, 1, 1, &a->out,
	};
	int parsed;

	memset(a, 0, sizeof(*a));
	a->files = 1;
	a->seed = 1;
	parsed = opts_parse(&cmd, argc, argv);
	if (parsed != OPTS_OK)
		exit(opts_exit_status(parsed));
	if (!a->size)
		bad_arg("%s", "--size is missing");
}

/*
 * The model's dimensions for size: layers (default by size), then the
 * vocabulary (halved while even width 64 does not fit), then the widest
 * hidden size, a multiple of 64, that keeps the total within size.
 */
static void choose_shape(uint64_t size, unsigned *layers, uint64_t *v, uint64_t *h)
{
	if (!*layers)
		*layers = size < (1ull << 30) ? 8 : size < (16ull << 30) ? 16 : 32;
	*v = 32000;
	while (*v > 16 && model_bytes(64, *v, *layers) > size)
		*v /= 2;
	if (model_bytes(64, *v, *layers) > size)
		bad_arg("%s", "--size is too small for this many layers");
	for (*h = 64; model_bytes(*h + 64, *v, *layers) <= size; *h += 64)
		;
}

/*
 * Shards in tensor order, by where each tensor's middle byte falls, never
 * skipping a shard and leaving none empty.
 */
static void assign_files(unsigned files, uint64_t total)
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

static void write_index(const char *out, unsigned files, uint64_t total)
{
	struct sbuf idx = { 0 };
	char p[4096];
	FILE *f;

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

/* OUT as one file, a directory with model.safetensors, or shards + index.
 * Returns the bytes written. */
static uint64_t write_checkpoint(const char *out, unsigned files, uint64_t seed, uint64_t total)
{
	int single = files == 1 && strlen(out) > 12 &&
		     !strcmp(out + strlen(out) - 12, ".safetensors");
	uint64_t written = 0;
	char p[4096];

	if (single)
		return write_file(out, 0, seed);
	if (mkdir(out, 0755) < 0 && errno != EEXIST)
		die("cannot create directory %s", out);
	if (files == 1) {
		snprintf(p, sizeof(p), "%s/model.safetensors", out);
		return write_file(p, 0, seed);
	}
	for (unsigned k = 0; k < files; k++) {
		snprintf(p, sizeof(p), "%s/model-%05u-of-%05u.safetensors", out, k + 1, files);
		written += write_file(p, (int)k, seed);
	}
	write_index(out, files, total);
	return written;
}

int main(int argc, char **argv)
{
	struct mk_args a;
	uint64_t h, v, total = 0, written;
	unsigned layers, files;
	double t0, secs;

	parse_args(argc, argv, &a);
	layers = (unsigned)a.layers;
	choose_shape((uint64_t)a.size, &layers, &v, &h);
	build(h, v, layers);
	for (size_t i = 0; i < ntensors; i++)
		total += tensors[i].nbytes;
	files = a.files > (int64_t)ntensors ? (unsigned)ntensors : (unsigned)a.files;
	assign_files(files, total);
	t0 = cli_now();
	written = write_checkpoint(a.out, files, a.seed, total);
	secs = cli_now() - t0;
	printf("mkckpt: wrote %s: %zu tensors in %u file%s, %" PRIu64 " bytes of data, %" PRIu64
	       " on disk (hidden %" PRIu64 ", %u layers, vocab %" PRIu64 ") in %.2f s\n",
	       a.out, ntensors, files, files == 1 ? "" : "s", total, written, h, layers, v, secs);
	free(tensors);
	return 0;
}
