/*
 * cmd_inspect.c - `ringload inspect PATH [--json]`: validates a checkpoint
 * and lists its tensors (a table, or JSON for other programs).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "opts.h"
#include "cli_helpers.h"

#define PROG "ringload inspect"

/* Table cells: control characters shown as '?', so one tensor is one line. */
static void text_str(FILE *f, const char *s, int width)
{
	int n = 0;

	for (; *s; s++, n++)
		fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, f);
	for (; n < width; n++)
		fputc(' ', f);
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

static void shape_str(char *buf, size_t cap, const rl_tensor_info *t)
{
	size_t o = 0;

	o += (size_t)snprintf(buf + o, cap - o, "[");
	for (unsigned d = 0; d < t->ndim && o < cap; d++)
		o += (size_t)snprintf(buf + o, cap - o, "%s%" PRIu64, d ? ", " : "", t->shape[d]);
	if (o < cap)
		snprintf(buf + o, cap - o, "]");
}

static void print_json(const rl_ckpt *ck)
{
	size_t n = rl_ckpt_num_tensors(ck), nm = rl_ckpt_num_metadata(ck);

	printf("{\"tensors\":[");
	for (size_t i = 0; i < n; i++) {
		rl_tensor_info t;

		rl_ckpt_tensor(ck, i, &t);
		printf("%s\n{\"name\":", i ? "," : "");
		cli_json_str(stdout, t.name);
		printf(",\"dtype\":\"%s\",\"shape\":[", rl_dtype_name(t.dtype));
		for (unsigned d = 0; d < t.ndim; d++)
			printf("%s%" PRIu64, d ? "," : "", t.shape[d]);
		printf("],");
		cli_json_path(stdout, "file", rl_ckpt_file_path(ck, t.file));
		printf(",\"offset\":%" PRIu64 ",\"nbytes\":%" PRIu64 "}", t.offset, t.nbytes);
	}
	printf("],\n\"metadata\":{");
	for (size_t i = 0; i < nm; i++) {
		const char *k, *v;

		rl_ckpt_metadata(ck, i, &k, &v);
		printf("%s\n", i ? "," : "");
		cli_json_str(stdout, k);
		putchar(':');
		cli_json_str(stdout, v);
	}
	printf("}}\n");
}

static void print_table(const rl_ckpt *ck)
{
	size_t n = rl_ckpt_num_tensors(ck), nf = rl_ckpt_num_files(ck);
	uint64_t per_dtype[RL_DTYPE_COUNT] = { 0 }, count[RL_DTYPE_COUNT] = { 0 }, total = 0;
	int wname = 4, wshape = 5, wfile = 4;
	char shape[512];

	for (size_t i = 0; i < n; i++) {
		rl_tensor_info t;
		int l;

		rl_ckpt_tensor(ck, i, &t);
		l = (int)strlen(t.name);
		wname = l > wname ? (l < 80 ? l : 80) : wname;
		shape_str(shape, sizeof(shape), &t);
		l = (int)strlen(shape);
		wshape = l > wshape ? l : wshape;
		l = (int)strlen(base_name(rl_ckpt_file_path(ck, t.file)));
		wfile = l > wfile ? l : wfile;
	}
	printf("%-*s  %-11s  %-*s  %-*s  %14s  %14s\n", wname, "NAME", "DTYPE", wshape, "SHAPE",
	       wfile, "FILE", "OFFSET", "BYTES");
	for (size_t i = 0; i < n; i++) {
		rl_tensor_info t;

		rl_ckpt_tensor(ck, i, &t);
		shape_str(shape, sizeof(shape), &t);
		text_str(stdout, t.name, wname);
		printf("  %-11s  %-*s  ", rl_dtype_name(t.dtype), wshape, shape);
		text_str(stdout, base_name(rl_ckpt_file_path(ck, t.file)), wfile);
		printf("  %14" PRIu64 "  %14" PRIu64 "\n", t.offset, t.nbytes);
		per_dtype[t.dtype] += t.nbytes;
		count[t.dtype]++;
		total += t.nbytes;
	}
	printf("\n%zu tensors in %zu file%s, %" PRIu64 " bytes of data\n", n, nf,
	       nf == 1 ? "" : "s", total);
	for (int d = 0; d < RL_DTYPE_COUNT; d++)
		if (count[d])
			printf("  %-11s %8" PRIu64 " tensors  %16" PRIu64 " bytes\n",
			       rl_dtype_name((rl_dtype)d), count[d], per_dtype[d]);
	if (rl_ckpt_num_metadata(ck)) {
		printf("metadata:\n");
		for (size_t i = 0; i < rl_ckpt_num_metadata(ck); i++) {
			const char *k, *v;

			rl_ckpt_metadata(ck, i, &k, &v);
			printf("  ");
			text_str(stdout, k, 0);
			printf(" = ");
			text_str(stdout, v, 0);
			putchar('\n');
		}
	}
}

static const char about[] =
	"Validates the checkpoint at PATH (a .safetensors file, a directory of them, or\n"
	"a model.safetensors.index.json) and lists its tensors. Exit status: 0 valid,\n"
	"1 invalid (one line on stderr naming the file and the reason), 2 usage.\n";

int cmd_inspect(int argc, char **argv)
{
	const char *path = NULL;
	int json = 0, parsed;
	const struct opt opts[] = {
		{ .name = "json", .kind = OPT_FLAG, .dst = &json,
		  .help = "print JSON: tensors (name, dtype, shape, file, offset, nbytes) and metadata" },
		{ NULL },
	};
	const struct opt_cmd cmd = { PROG, "PATH", about, opts, 1, 1, &path };
	rl_ckpt *ck;

	parsed = opts_parse(&cmd, argc, argv);
	if (parsed != OPTS_OK)
		return opts_exit_status(parsed);
	if (cli_open_ckpt(PROG, path, &ck) < 0)
		return 1;
	if (json)
		print_json(ck);
	else
		print_table(ck);
	rl_ckpt_destroy(ck);
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "%s: cannot write output\n", PROG);
		return 1;
	}
	return 0;
}
