/*
 * sha256sums.c - expected SHA-256 values for `ringload load`
 * (sha256sums.h). The library compares; this file parses what the user
 * gives and checks that each value names a file of the checkpoint.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sha256sums.h"

#define SUMS_MAX_BYTES (16 << 20) /* a sums file past this is not one */

static int is_hex64(const char *s, size_t n)
{
	if (n != 64)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdefABCDEF", s[i]) || !s[i])
			return 0;
	return 1;
}

int sha256_args_check(const char *prog, const struct opt_list *given)
{
	for (unsigned i = 0; i < given->n; i++) {
		const char *v = given->v[i], *eq = strrchr(v, '=');

		if (!eq || eq == v || !is_hex64(eq + 1, strlen(eq + 1))) {
			fprintf(stderr, "%s: --sha256 '%s': expected FILE=HEX with 64 hex digits\n",
				prog, v);
			return OPTS_USAGE;
		}
	}
	return OPTS_OK;
}

/* name names a file of ck: its path, or the path's end after a '/'. */
static int in_ckpt(const rl_ckpt *ck, const char *name)
{
	size_t ln = strlen(name);

	for (size_t f = 0; f < rl_ckpt_num_files(ck); f++) {
		const char *p = rl_ckpt_file_path(ck, f);
		size_t lp = strlen(p);

		if (!strcmp(p, name) ||
		    (lp > ln && p[lp - ln - 1] == '/' && !strcmp(p + lp - ln, name)))
			return 1;
	}
	return 0;
}

static int expect(rl_loader *ld, const char *name, const char *hex, const char *prog)
{
	if (rl_loader_expect_sha256(ld, name, hex) == 0)
		return 0;
	fprintf(stderr, "%s: %s\n", prog, rl_loader_errmsg(ld));
	return -1;
}

static int expect_given(rl_loader *ld, const rl_ckpt *ck, const struct opt_list *given,
			const char *prog)
{
	char name[4096];

	for (unsigned i = 0; i < given->n; i++) {
		const char *v = given->v[i], *eq = strrchr(v, '=');

		snprintf(name, sizeof(name), "%.*s", (int)(eq - v), v);
		if (!in_ckpt(ck, name)) {
			fprintf(stderr, "%s: --sha256 %s: not a file of the checkpoint\n", prog,
				name);
			return -1;
		}
		if (expect(ld, name, eq + 1, prog) < 0)
			return -1;
	}
	return 0;
}

/* One line of a sums file, newline removed: 1 expected, 0 skipped (not a
 * file of ck, or empty), -1 an error printed. */
static int sums_line(rl_loader *ld, const rl_ckpt *ck, char *s, const char *file,
		     unsigned line, const char *prog)
{
	char *name;

	if (!*s || *s == '#') /* sha256sum -c skips comment lines */
		return 0;
	if (*s == '\\') {
		fprintf(stderr, "%s: %s:%u: escaped file names are not supported\n", prog, file,
			line);
		return -1;
	}
	if (strlen(s) < 67 || !is_hex64(s, 64) || s[64] != ' ' || (s[65] != ' ' && s[65] != '*')) {
		fprintf(stderr, "%s: %s:%u: not '<64 hex digits>  <file name>' (sha256sum's "
			"format)\n", prog, file, line);
		return -1;
	}
	s[64] = '\0';
	name = s + 66;
	while (!strncmp(name, "./", 2))
		name += 2;
	if (!in_ckpt(ck, name))
		return 0;
	return expect(ld, name, s, prog) < 0 ? -1 : 1;
}

/* SUMS opened for reading: a regular file of at most SUMS_MAX_BYTES.
 * O_NONBLOCK so that a FIFO named by mistake is refused, not waited on. */
static FILE *open_sums(const char *file, const char *prog)
{
	int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	FILE *f;

	if (fd < 0) {
		fprintf(stderr, "%s: --sha256-file %s: %s\n", prog, file, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > SUMS_MAX_BYTES) {
		fprintf(stderr, "%s: --sha256-file %s: not a regular file of at most 16 MiB\n",
			prog, file);
		close(fd);
		return NULL;
	}
	f = fdopen(fd, "r");
	if (!f) {
		fprintf(stderr, "%s: --sha256-file %s: %s\n", prog, file, strerror(errno));
		close(fd);
	}
	return f;
}

/* Every line of SUMS that names a file of the checkpoint becomes an
 * expected value. A SUMS naming none of them is an error, as in Python:
 * the user asked for a check that would check nothing. */
static int expect_sums(rl_loader *ld, const rl_ckpt *ck, const char *file, const char *prog)
{
	FILE *f = open_sums(file, prog);
	char *buf = NULL;
	size_t cap = 0;
	ssize_t n;
	unsigned line = 0, used = 0;
	int ret = 0;

	if (!f)
		return -1;
	while (ret >= 0 && (n = getline(&buf, &cap, f)) >= 0) {
		line++;
		if (n && buf[n - 1] == '\n')
			buf[--n] = '\0';
		if (n && buf[n - 1] == '\r')
			buf[--n] = '\0';
		ret = sums_line(ld, ck, buf, file, line, prog);
		used += ret > 0;
	}
	free(buf);
	fclose(f);
	if (ret >= 0 && !used) {
		fprintf(stderr, "%s: --sha256-file %s names none of the checkpoint's files\n", prog,
			file);
		ret = -1;
	}
	return ret < 0 ? -1 : 0;
}

int sha256_expect(rl_loader *ld, const rl_ckpt *ck, const struct opt_list *given,
		  const char *sums_file, const char *prog)
{
	if (expect_given(ld, ck, given, prog) < 0)
		return -1;
	return sums_file ? expect_sums(ld, ck, sums_file, prog) : 0;
}

/* One warning line for each file with an expected value the load did
 * not check, naming it and why. */
static void report_unchecked(const rl_loader *ld, const rl_ckpt *ck, const char *prog)
{
	for (size_t i = 0; i < rl_loader_num_files(ld); i++) {
		rl_file_stats fs = { .size = sizeof(fs) };

		if (rl_loader_get_file_stats(ld, i, &fs) < 0 ||
		    (fs.sha256_state != RL_SHA256_PARTIAL && fs.sha256_state != RL_SHA256_STREAMED))
			continue;
		fprintf(stderr, "%s: warning: %s: expected SHA-256 (Hugging Face cache) not "
			"checked: %s\n", prog, rl_ckpt_file_path(ck, fs.file),
			fs.sha256_state == RL_SHA256_STREAMED ?
			"streaming loads (--staging-budget) do not hash" :
			"this load reads only part of the file");
	}
}

void sha256_report(const rl_loader *ld, const rl_ckpt *ck, int quiet, const char *prog)
{
	rl_load_stats_ex x = { .size = sizeof(x) };

	if (rl_loader_get_stats_ex(ld, &x) < 0)
		return;
	if (x.files_unchecked)
		report_unchecked(ld, ck, prog);
	if (!quiet && x.files_hashed)
		fprintf(stderr, "sha256: %u file%s match%s (%" PRIu64 " bytes hashed on the "
			"workers, %.3f s)\n", x.files_hashed, x.files_hashed == 1 ? "" : "s",
			x.files_hashed == 1 ? "es" : "", x.bytes_hashed, x.hash_seconds);
}
