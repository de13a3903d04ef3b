/*
 * sha256sums.c - expected SHA-256 values for `ringload load`
 * (sha256sums.h). The library parses sums files and resolves which file
 * each value names (rl_expect); this file prints what it says.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sha256sums.h"

int sha256_args_check(const char *prog, const struct opt_list *given)
{
	for (unsigned i = 0; i < given->n; i++) {
		const char *v = given->v[i], *eq = strrchr(v, '=');
		uint8_t sha[32];

		if (!eq || eq == v || rl_sha256_from_hex(eq + 1, sha) < 0) {
			fprintf(stderr, "%s: --sha256 '%s': expected FILE=HEX with 64 hex digits\n",
				prog, v);
			return OPTS_USAGE;
		}
	}
	return OPTS_OK;
}

/* Each line of the library's warnings as "PROG: warning: LINE". */
static void print_warnings(const rl_expect *x, const char *prog)
{
	const char *w = rl_expect_warnings(x), *nl;

	for (; (nl = strchr(w, '\n')); w = nl + 1)
		fprintf(stderr, "%s: warning: %.*s\n", prog, (int)(nl - w), w);
}

/* --sha256 NAME=HEX, each as the library resolves it (rl_expect_given). */
static int expect_given(rl_expect *x, const struct opt_list *given, const char *prog)
{
	char name[4096];

	for (unsigned i = 0; i < given->n; i++) {
		const char *v = given->v[i], *eq = strrchr(v, '=');

		snprintf(name, sizeof(name), "%.*s", (int)(eq - v), v);
		if (rl_expect_given(x, name, eq + 1) < 0) {
			fprintf(stderr, "%s: --sha256 %s\n", prog, rl_expect_errmsg(x));
			return -1;
		}
	}
	return 0;
}

int sha256_values(rl_expect **out, const rl_ckpt *ck, const rl_plan *plan, const char *ck_path,
		  const struct opt_list *given, const char *sums_file, const char *prog)
{
	rl_expect *x;
	int ret;

	*out = NULL;
	if (!given->n && !sums_file)
		return 0;
	if (!(x = rl_expect_create(ck, ck_path))) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return -1;
	}
	ret = expect_given(x, given, prog);
	if (ret == 0 && sums_file && rl_expect_sums(x, sums_file, plan) < 0) {
		fprintf(stderr, "%s: --sha256-file %s\n", prog, rl_expect_errmsg(x));
		ret = -1;
	}
	print_warnings(x, prog);
	if (ret)
		rl_expect_destroy(x);
	else
		*out = x;
	return ret;
}

int sha256_expect(rl_loader *ld, const rl_ckpt *ck, const rl_plan *plan, const char *ck_path,
		  const struct opt_list *given, const char *sums_file, const char *prog)
{
	rl_expect *x;
	int ret = sha256_values(&x, ck, plan, ck_path, given, sums_file, prog);

	if (ret || !x)
		return ret;
	if (rl_loader_expect(ld, x) < 0) {
		fprintf(stderr, "%s: %s\n", prog, rl_loader_errmsg(ld));
		ret = -1;
	}
	rl_expect_destroy(x);
	return ret;
}

/* One warning line for each file with an expected value the load did
 * not check, naming it and why. */
static void report_unchecked(const rl_loader *ld, const rl_ckpt *ck, const char *prog)
{
	for (size_t i = 0; i < rl_loader_num_files(ld); i++) {
		rl_file_stats fs = { .size = sizeof(fs) };

		if (rl_loader_get_file_stats(ld, i, &fs) < 0 ||
		    fs.sha256_state != RL_SHA256_PARTIAL)
			continue;
		fprintf(stderr, "%s: warning: %s: expected SHA-256 (Hugging Face cache) not "
			"checked: this load reads only part of the file\n", prog,
			rl_ckpt_file_path(ck, fs.file));
	}
}

void sha256_report(const rl_loader *ld, const rl_ckpt *ck, int quiet, const char *prog)
{
	rl_load_stats x = { .size = sizeof(x) };

	if (rl_loader_get_stats(ld, &x) < 0)
		return;
	if (x.files_unchecked)
		report_unchecked(ld, ck, prog);
	if (!quiet && x.files_hashed)
		fprintf(stderr, "sha256: %u file%s match%s (%" PRIu64 " bytes hashed on the "
			"workers, %.3f s)\n", x.files_hashed, x.files_hashed == 1 ? "" : "s",
			x.files_hashed == 1 ? "es" : "", x.bytes_hashed, x.hash_seconds);
}
