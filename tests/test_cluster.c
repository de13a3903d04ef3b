/*
 * test_cluster.c - the public API for several processes, without MPI:
 * checkpoints opened from headers read elsewhere, files_of_process (a
 * process never opens a file outside its set), transfers and their
 * statistics, batch plans, deprecated broadcasts, and `ringload plan`'s
 * cluster summary. Checkpoints come from build/mkckpt.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ringload.h"

static const char *build_dir(void)
{
	return getenv("RL_BUILD") ? getenv("RL_BUILD") : "build";
}

/* A 3-file llama-like checkpoint made by mkckpt (once per program). */
static const char *ckpt_dir(void)
{
	static char dir[4096];
	char cmd[8192];

	if (dir[0])
		return dir;
	snprintf(dir, sizeof(dir), "%s/ck", th_tmpdir());
	snprintf(cmd, sizeof(cmd), "%s/mkckpt %s --size 3M --files 3 --layers 2 --seed 7 >/dev/null",
		 build_dir(), dir);
	if (system(cmd)) {
		dir[0] = 0;
		return NULL;
	}
	return dir;
}

static int read_file(const char *path, char **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	long n;

	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	*buf = malloc((size_t)n + 1);
	*len = fread(*buf, 1, (size_t)n, f);
	fclose(f);
	return *len == (size_t)n ? 0 : -1;
}

/* The files of ck as rl_file_header (bufs: whole files, freed by caller). */
static size_t headers_of(const rl_ckpt *ck, rl_file_header *fh, char **bufs)
{
	size_t n = rl_ckpt_num_files(ck);

	for (size_t f = 0; f < n; f++) {
		size_t len;
		uint64_t hl = 0;

		bufs[f] = NULL;
		if (read_file(rl_ckpt_file_path(ck, f), &bufs[f], &len) || len < 8)
			return 0;
		for (int i = 7; i >= 0; i--)
			hl = hl << 8 | (unsigned char)bufs[f][i];
		fh[f] = (rl_file_header){ rl_ckpt_file_path(ck, f), len, bufs[f] + 8, hl };
	}
	return n;
}

static void free_bufs(char **bufs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(bufs[i]);
}

/* Opened from its headers, a checkpoint is the one rl_ckpt_open gives. */
static void ckpt_from_headers_equals_open(void)
{
	rl_ckpt *a = rl_ckpt_create(), *b = rl_ckpt_create();
	rl_file_header fh[8];
	char *bufs[8];
	size_t n;

	if (!ckpt_dir())
		SKIP("build/mkckpt could not write a checkpoint");
	CHECK_EQ(rl_ckpt_open(a, ckpt_dir()), 0);
	n = headers_of(a, fh, bufs);
	CHECK_EQ(n, 3);
	CHECKF(rl_ckpt_open_headers(b, n, fh) == 0, "%s", rl_ckpt_errmsg(b));
	CHECK_EQ(rl_ckpt_num_tensors(a), rl_ckpt_num_tensors(b));
	for (size_t i = 0; i < rl_ckpt_num_tensors(a); i++) {
		rl_tensor_info x, y;

		rl_ckpt_tensor(a, i, &x);
		rl_ckpt_tensor(b, i, &y);
		CHECK_STR(x.name, y.name);
		CHECK(x.file == y.file && x.offset == y.offset && x.nbytes == y.nbytes &&
		      x.ndim == y.ndim && x.dtype == y.dtype);
	}
	CHECK_EQ(rl_ckpt_num_metadata(a), rl_ckpt_num_metadata(b));
	CHECK_EQ(rl_ckpt_file_size(a, 2), rl_ckpt_file_size(b, 2));
	CHECK_EQ(rl_ckpt_open_headers(b, n, fh), RL_E_STATE);
	free_bufs(bufs, n);
	rl_ckpt_destroy(a);
	rl_ckpt_destroy(b);
}

/* Each way a described file can be wrong gets the code rl_ckpt_open
 * gives, naming the file. */
static void ckpt_from_headers_errors(void)
{
	rl_ckpt *a = rl_ckpt_create();
	rl_file_header fh[8], bad[2];
	char *bufs[8];
	size_t n;
	static const char json[] = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";

	if (!ckpt_dir())
		SKIP("build/mkckpt could not write a checkpoint");
	CHECK_EQ(rl_ckpt_open(a, ckpt_dir()), 0);
	n = headers_of(a, fh, bufs);
	CHECK_EQ(n, 3);
	{
		static const struct {
			uint64_t size, hlen;
			const char *hdr;
			int code;
		} cases[] = {
			{ 4, 0, "", RL_E_HEADER_TOO_SMALL },
			{ 1000, 200000000, json, RL_E_HEADER_TOO_LARGE },
			{ 20, sizeof(json) - 1, json, RL_E_HEADER_LENGTH },
			{ 8 + sizeof(json) - 1 + 9, sizeof(json) - 1, json, RL_E_INCOMPLETE },
			{ 8 + 5 + 8, 5, "{\"x\":", RL_E_HEADER_JSON },
		};

		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			rl_ckpt *c = rl_ckpt_create();

			bad[0] = (rl_file_header){ "/nowhere/x.safetensors", cases[i].size, cases[i].hdr,
						   cases[i].hlen };
			CHECKF(rl_ckpt_open_headers(c, 1, bad) == cases[i].code, "case %zu: %s", i,
			       rl_ckpt_errmsg(c));
			CHECKF(strstr(rl_ckpt_errmsg(c), "/nowhere/x.safetensors"), "%s",
			       rl_ckpt_errmsg(c));
			rl_ckpt_destroy(c);
		}
	}
	{       /* a tensor in two files */
		rl_ckpt *c = rl_ckpt_create();
		rl_tensor_info ti;
		char dup[512];

		rl_ckpt_tensor(a, 0, &ti);
		snprintf(dup, sizeof(dup), "{\"%s\":{\"dtype\":\"F32\",\"shape\":[2],"
			 "\"data_offsets\":[0,8]}}", ti.name);
		fh[1] = (rl_file_header){ "/nowhere/dup.safetensors", 8 + strlen(dup) + 8, dup,
					  strlen(dup) };
		CHECK_EQ(rl_ckpt_open_headers(c, 2, fh), RL_E_DUPLICATE_TENSOR);
		CHECKF(strstr(rl_ckpt_errmsg(c), "dup.safetensors"), "%s", rl_ckpt_errmsg(c));
		CHECK_EQ(rl_ckpt_open_headers(c, 0, fh), -ENOENT);
		CHECK_EQ(rl_ckpt_open_headers(c, 1, NULL), -EINVAL);
		bad[0] = (rl_file_header){ NULL, 16, json, 8 };
		CHECK_EQ(rl_ckpt_open_headers(c, 1, bad), RL_E_INVALID_ARG);
		CHECK_EQ(rl_ckpt_open_headers(NULL, 1, fh), -EINVAL);
		rl_ckpt_destroy(c);
	}
	free_bufs(bufs, n);
	rl_ckpt_destroy(a);
}

static const char mesh2x2[] =
	"{\"mesh\":{\"shape\":[2,2],\"axes\":[\"data\",\"model\"],\"process_of_device\":[0,0,1,1]},"
	"\"rules\":[{\"match\":\".*(q|k|v|gate|up)_proj.*\",\"spec\":[\"model\"]},"
	"{\"match\":\".*(o|down)_proj.*\",\"spec\":[null,\"model\"]}]}";

/* A process given a subset of the files: its plan and its batch plans
 * read only those; a run succeeds with the other files gone. */
static void files_of_process_never_opened(void)
{
	rl_ckpt *ck = rl_ckpt_create();
	rl_spec *spec = rl_spec_create();
	rl_plan *plan = rl_plan_create();
	rl_loader *ld = rl_loader_create();
	const char *mine[] = { "model-00001-of-00003.safetensors" };
	char moved[4200], path2[4096];
	int ret;

	if (!ckpt_dir())
		SKIP("build/mkckpt could not write a checkpoint");
	CHECK_EQ(rl_ckpt_open(ck, ckpt_dir()), 0);
	CHECK_EQ(rl_spec_parse(spec, mesh2x2, strlen(mesh2x2)), 0);
	CHECK_EQ(rl_spec_set_files_of_process(spec, 0, 1, mine), 0);
	CHECK_EQ(rl_spec_set_files_of_process(spec, 1, 0, (const char *const[]){ NULL }), 0);
	CHECK_EQ(rl_spec_set_files_of_process(spec, 1, 0, NULL), 0);   /* every file */
	CHECK_EQ(rl_spec_set_files_of_process(spec, 2, 1, (const char *const[]){ NULL }),
		 RL_E_INVALID_ARG);
	/* Process 0 may not read files 2 and 3: move file 3 away first. */
	snprintf(path2, sizeof(path2), "%s", rl_ckpt_file_path(ck, 2));
	snprintf(moved, sizeof(moved), "%s.away", path2);
	CHECK(rename(path2, moved) == 0);
	CHECK_EQ(rl_plan_set(plan, RL_PLAN_READ_ONCE, 1), 0);
	ret = rl_plan_build(plan, ck, spec);
	CHECKF(ret == 0, "%s", rl_plan_errmsg(plan));
	for (size_t r = 0; r < rl_plan_num_requests(plan); r++) {
		rl_request_info ri;

		rl_plan_request(plan, r, &ri);
		CHECK_EQ(ri.file, 0);
	}
	for (size_t t = 0; t < rl_plan_num_transfers(plan); t++) {
		rl_transfer_info x;

		rl_plan_transfer(plan, t, &x);
		CHECK(x.root != 0 || x.file == 0);
	}
	ret = rl_loader_run(ld, plan);
	CHECKF(ret == 0, "%s", rl_loader_errmsg(ld));
	CHECK(rename(moved, path2) == 0);
	rl_loader_destroy(ld);
	rl_plan_destroy(plan);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
}

/* Nobody may read a file: the plan fails naming it. */
static void files_of_process_unreadable_file_named(void)
{
	rl_ckpt *ck = rl_ckpt_create();
	rl_spec *spec = rl_spec_create();
	rl_plan *plan = rl_plan_create();
	const char *one[] = { "*00001-of-*" };

	if (!ckpt_dir())
		SKIP("build/mkckpt could not write a checkpoint");
	CHECK_EQ(rl_ckpt_open(ck, ckpt_dir()), 0);
	CHECK_EQ(rl_spec_parse(spec, mesh2x2, strlen(mesh2x2)), 0);
	CHECK_EQ(rl_spec_set_files_of_process(spec, 0, 1, one), 0);
	CHECK_EQ(rl_spec_set_files_of_process(spec, 1, 1, one), 0);
	CHECK_EQ(rl_plan_build(plan, ck, spec), RL_E_FILE_UNAVAILABLE);
	CHECKF(strstr(rl_plan_errmsg(plan), "model-00002-of-00003.safetensors") &&
	       strstr(rl_plan_errmsg(plan), "no process may read it"), "%s",
	       rl_plan_errmsg(plan));
	CHECK_STR(rl_strerror(RL_E_FILE_UNAVAILABLE), "no process may read a file the plan needs");
	rl_plan_destroy(plan);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
}

/* Plan parameters read back; the transfer alignment is a power of two. */
static void plan_parameters_read_back(void)
{
	rl_plan *plan = rl_plan_create();
	int64_t v, lo, hi;

	CHECK_EQ(rl_plan_set(plan, RL_PLAN_READ_ONCE, 1), 0);
	CHECK_EQ(rl_plan_set(plan, RL_PLAN_BATCH_BYTES, 12345), 0);
	CHECK_EQ(rl_plan_set(plan, RL_PLAN_TRANSFER_ALIGN, 4096), 0);
	CHECK_EQ(rl_plan_set(plan, RL_PLAN_TRANSFER_ALIGN, 4095), RL_E_INVALID_ARG);
	CHECK_EQ(rl_plan_set(plan, RL_PLAN_RATIO_MILLI, 1500), 0);
	CHECK_EQ(rl_plan_get(plan, RL_PLAN_READ_ONCE, &v), 0);
	CHECK_EQ(v, 1);
	CHECK_EQ(rl_plan_get(plan, RL_PLAN_BATCH_BYTES, &v), 0);
	CHECK_EQ(v, 12345);
	CHECK_EQ(rl_plan_get(plan, RL_PLAN_TRANSFER_ALIGN, &v), 0);
	CHECK_EQ(v, 4096);
	CHECK_EQ(rl_plan_get(plan, RL_PLAN_RATIO_MILLI, &v), 0);
	CHECK_EQ(v, 1500);
	CHECK_EQ(rl_plan_get(plan, RL_PLAN_CHUNK_BYTES, &v), 0);
	CHECK_EQ(v, 4 << 20);
	CHECK_EQ(rl_plan_get(plan, RL_PLAN_DTYPE, &v), 0);
	CHECK_EQ(v, -1);
	CHECK_EQ(rl_plan_get(plan, (rl_plan_param)14, &v), -EINVAL);
	CHECK_EQ(rl_plan_get(NULL, RL_PLAN_PROCESS, &v), -EINVAL);
	CHECK_EQ(rl_plan_get(plan, RL_PLAN_PROCESS, NULL), -EINVAL);
	CHECK_EQ(rl_plan_param_bounds(RL_PLAN_TRANSFER_ALIGN, &lo, &hi), 0);
	CHECK(lo == 0 && hi >= 4096);
	rl_plan_destroy(plan);
}

/* Transfers through the public API: listed alike, scatter lists, the
 * cluster summary, size-tagged statistics, batch plans, and the
 * deprecated broadcast calls failing loudly. */
static void transfers_public_api(void)
{
	rl_ckpt *ck = rl_ckpt_create();
	rl_spec *spec = rl_spec_create();
	rl_plan *p[2] = { rl_plan_create(), rl_plan_create() }, *bp = rl_plan_create();
	uint64_t n[2], nb[2], dg[2];
	rl_plan_xstats xs, part;
	rl_broadcast_info bi;
	rl_copy_info ci;

	if (!ckpt_dir())
		SKIP("build/mkckpt could not write a checkpoint");
	CHECK_EQ(rl_ckpt_open(ck, ckpt_dir()), 0);
	CHECK_EQ(rl_spec_parse(spec, mesh2x2, strlen(mesh2x2)), 0);
	CHECK_EQ(rl_plan_build_batch(bp, p[0], 0), RL_E_STATE);
	for (int q = 0; q < 2; q++) {
		rl_plan_set(p[q], RL_PLAN_PROCESS, q);
		rl_plan_set(p[q], RL_PLAN_READ_ONCE, 1);
		rl_plan_set(p[q], RL_PLAN_TRANSFER_ALIGN, 4096);
		CHECK_EQ(rl_plan_build(p[q], ck, spec), 0);
		CHECK_EQ(rl_plan_transfer_summary(p[q], &n[q], &nb[q], &dg[q]), 0);
	}
	CHECK(n[0] > 0 && n[0] == n[1] && nb[0] == nb[1] && dg[0] == dg[1]);
	CHECK_EQ(rl_plan_num_transfers(p[0]), n[0]);     /* two processes: all */
	CHECK_EQ(rl_plan_transfer_copy(p[0], 0, 1u << 30, &ci), -EINVAL);
	CHECK_EQ(rl_plan_num_broadcasts(p[0]), n[0]);
	CHECK_EQ(rl_plan_broadcast(p[0], 0, &bi), RL_E_STATE);
	CHECK_EQ(rl_plan_broadcast(NULL, 0, &bi), -EINVAL);
	xs.size = sizeof(xs);
	CHECK_EQ(rl_plan_get_xstats(p[0], RL_TOTAL, &xs), 0);
	CHECK_EQ(xs.size, sizeof(xs));
	CHECK(xs.payload_bytes > 0 && xs.sent_bytes == xs.payload_bytes && xs.transfers == n[0]);
	memset(&part, 0xab, sizeof(part));
	part.size = offsetof(rl_plan_xstats, transfer_read_bytes); /* an older caller's */
	CHECK_EQ(rl_plan_get_xstats(p[0], 0, &part), 0);
	CHECK_EQ(part.size, offsetof(rl_plan_xstats, transfer_read_bytes));
	CHECK(part.transfer_read_bytes == 0xababababababababull);   /* not written */
	part.size = sizeof(part);
	CHECK_EQ(rl_plan_get_xstats(p[0], 5, &part), -EINVAL);
	CHECK_EQ(rl_plan_build_batch(bp, p[0], 0), 0);
	CHECK_EQ(rl_plan_build_batch(bp, p[0], 0), RL_E_STATE);
	CHECK(rl_plan_num_shards(bp) > 0);
	CHECK_EQ(rl_plan_num_devices(bp), 1);
	for (int q = 0; q < 2; q++)
		rl_plan_destroy(p[q]);
	rl_plan_destroy(bp);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
}

static int run_cli(const char *args, char *out, size_t cap)
{
	char cmd[16384];

	snprintf(cmd, sizeof(cmd), "%s/ringload %s", build_dir(), args);
	return th_capture(cmd, out, cap);
}

/* `ringload plan --read-once` prints the cluster: bytes read against the
 * loaded tensors (1.0000x), transfers, the largest read share, files. */
static void cli_plan_cluster_summary(void)
{
	char spec[4096], args[8192], *out = malloc(1 << 16);
	FILE *f;

	if (!ckpt_dir()) {
		free(out);
		SKIP("build/mkckpt could not write a checkpoint");
	}
	snprintf(spec, sizeof(spec), "%s/spec.json", th_tmpdir());
	f = fopen(spec, "w");
	fputs(mesh2x2, f);
	fclose(f);
	snprintf(args, sizeof(args), "plan %s --sharding %s --read-once --all-processes",
		 ckpt_dir(), spec);
	CHECK_EQ(run_cli(args, out, 1 << 16), 0);
	{
		const char *c = strstr(out, "cluster: 2 processes read");
		double ratio = 0;

		CHECKF(c && sscanf(strstr(c, "bytes, ") + 7, "%lfx the", &ratio) == 1 &&
		       ratio >= 1.0 && ratio < 1.01 && strstr(out, "transfers in") &&
		       strstr(out, "files opened per process: max"), "%s", out);
	}
	snprintf(args, sizeof(args), "plan %s --sharding %s --read-once --json --all-processes",
		 ckpt_dir(), spec);
	CHECK_EQ(run_cli(args, out, 1 << 16), 0);
	CHECKF(strstr(out, "\"cluster\":{\"processes\":2,") && strstr(out, "\"broadcast_bytes\":") &&
	       strstr(out, "\"read_share_max_over_mean\":"), "%s", out);
	snprintf(args, sizeof(args), "plan %s --sharding %s --all-processes", ckpt_dir(), spec);
	CHECK_EQ(run_cli(args, out, 1 << 16), 0);
	CHECKF(strstr(out, "2.00") && strstr(out, "x the") && strstr(out, "0 transfers"), "%s", out);
	free(out);
}

int main(void)
{
	th_seed();
	RUN(ckpt_from_headers_equals_open);
	RUN(ckpt_from_headers_errors);
	RUN(files_of_process_never_opened);
	RUN(files_of_process_unreadable_file_named);
	RUN(plan_parameters_read_back);
	RUN(transfers_public_api);
	RUN(cli_plan_cluster_summary);
	return th_done();
}
