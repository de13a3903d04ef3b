/*
 * sha256sums.c - expected SHA-256 values for `ringload load`
 * (sha256sums.h). The library parses sums files (rl_sums_open) and
 * compares; this file checks that each value names a file of the
 * checkpoint, and which.
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

/* ------------------------------------------------------------------ */
/* Names to files: by identity, as the file system resolves them        */

/* name relative to dir (NULL: the working directory), malloc'd: the path
 * the kernel resolves, so symlinked directories and ".." mean what they
 * mean to sha256sum -c. */
static char *path_in(const char *dir, const char *name)
{
	char *p;

	if (!dir || name[0] == '/')
		return strdup(name);
	if (asprintf(&p, "%s/%s", dir, name) < 0)
		return NULL;
	return p;
}

/* A file's identity: device and inode (ok 0: it could not be stat'ed). */
struct file_id {
	dev_t dev;
	ino_t ino;
	int ok;
};

/* What the options match against: every file of ck by identity, and
 * which of them got a value where (the SUMS line, or -1 - i: the i-th
 * --sha256). */
struct sums_ctx {
	rl_loader *ld;
	const rl_ckpt *ck;
	const char *prog;
	const char *ckdir;      /* the checkpoint's directory */
	const struct opt_list *given;
	size_t nfiles;
	struct file_id *id;
	unsigned char *reads;   /* the files this process reads (the plan's) */
	long *line;
	char (*hex)[65];
};

/* The file of the checkpoint that name (relative to dir) is, the same
 * file however the path spells it, or -1 (also when out of memory: then
 * nothing matches, and the caller says so). */
static long file_of(const struct sums_ctx *c, const char *dir, const char *name)
{
	char *p = path_in(dir, name);
	struct stat st;
	long f = -1;

	if (p && stat(p, &st) == 0)
		for (size_t i = 0; i < c->nfiles && f < 0; i++)
			if (c->id[i].ok && c->id[i].dev == st.st_dev && c->id[i].ino == st.st_ino)
				f = (long)i;
	free(p);
	return f;
}

/* --sha256's NAME of the value at line (< 0), into buf. */
static const char *given_name(const struct sums_ctx *c, long line, char *buf, size_t cap)
{
	const char *v = c->given->v[-line - 1];

	snprintf(buf, cap, "%.*s", (int)(strrchr(v, '=') - v), v);
	return buf;
}

/*
 * hex for file f, from line (> 0: a SUMS line; -1 - i: the i-th --sha256;
 * what: "SUMS:LINE: NAME" or "--sha256 NAME", for messages). A second,
 * different value for f, however spelled, is an error naming both.
 */
static int expect(struct sums_ctx *c, long f, const char *hex, long line, const char *what)
{
	char name[4096];

	if (c->line[f] > 0 && strcasecmp(c->hex[f], hex)) {
		fprintf(stderr, "%s: %s has another value on line %ld\n", c->prog, what,
			c->line[f]);
		return -1;
	}
	if (c->line[f] < 0 && strcasecmp(c->hex[f], hex)) {
		fprintf(stderr, "%s: %s has another value from --sha256 %s\n", c->prog, what,
			given_name(c, c->line[f], name, sizeof(name)));
		return -1;
	}
	if (rl_loader_expect_sha256(c->ld, rl_ckpt_file_path(c->ck, (size_t)f), hex) < 0) {
		fprintf(stderr, "%s: %s\n", c->prog, rl_loader_errmsg(c->ld));
		return -1;
	}
	c->line[f] = line;
	snprintf(c->hex[f], sizeof(c->hex[f]), "%s", hex);
	return 0;
}

/* --sha256 FILE=HEX: FILE is a path, or a name relative to the
 * checkpoint's directory; both naming files, two different ones, is
 * ambiguous. */
static int expect_given(struct sums_ctx *c, const struct opt_list *given)
{
	char name[4096], what[4200];

	for (unsigned i = 0; i < given->n; i++) {
		const char *v = given->v[i], *eq = strrchr(v, '=');
		long f, g;

		snprintf(name, sizeof(name), "%.*s", (int)(eq - v), v);
		f = file_of(c, NULL, name);
		g = file_of(c, c->ckdir, name);
		if (f >= 0 && g >= 0 && f != g) {
			fprintf(stderr, "%s: --sha256 %s: names both %s and %s: give its path\n",
				c->prog, name, rl_ckpt_file_path(c->ck, (size_t)f),
				rl_ckpt_file_path(c->ck, (size_t)g));
			return -1;
		}
		if (f < 0 && g < 0) {
			fprintf(stderr, "%s: --sha256 %s: not a file of the checkpoint\n", c->prog,
				name);
			return -1;
		}
		snprintf(what, sizeof(what), "--sha256 %s", name);
		if (expect(c, f >= 0 ? f : g, eq + 1, -1 - (long)i, what) < 0)
			return -1;
	}
	return 0;
}

/* Whether name, relative to dir, is nothing at all (lstat: ENOENT; a
 * dangling symlink is something, and so is what cannot be looked at). */
static int absent(const char *dir, const char *name)
{
	char *p = path_in(dir, name);
	struct stat st;
	int r = p && lstat(p, &st) < 0 && errno == ENOENT;

	free(p);
	return r;
}

/*
 * A line's name, relative to the SUMS file's directory (as sha256sum -c
 * reads it there), or, when it is no file there, to the checkpoint's (a
 * SUMS kept elsewhere): 1 expected, 0 skipped (no file of the
 * checkpoint), -1 an error printed.
 */
static int sums_name(struct sums_ctx *c, const char *name, const char *hex, const char *dir,
		     const char *file, unsigned line)
{
	size_t n = strlen(name);
	long f = file_of(c, dir, name);
	char what[4200];

	if (f < 0 && absent(dir, name))
		f = file_of(c, c->ckdir, name);

	if (f < 0) {
		if (n >= 12 && !strcmp(name + n - 12, ".safetensors"))
			fprintf(stderr, "%s: warning: %s:%u: %s is no file of the checkpoint: "
				"skipped\n", c->prog, file, line, name);
		return 0;
	}
	snprintf(what, sizeof(what), "%s:%u: %s", file, line, name);
	return expect(c, f, hex, line, what) < 0 ? -1 : 1;
}

/* The directory of path (a directory itself with is_dir), malloc'd. */
static char *dir_of(const char *path, int is_dir)
{
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (is_dir && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return strdup(path);
	if (!slash)
		return strdup(".");
	return strndup(path, slash == path ? 1 : (size_t)(slash - path));
}

/*
 * Every line of SUMS that names a file of the checkpoint (relative to the
 * SUMS file's directory, as sha256sum -c reads it there) becomes an
 * expected value. A SUMS naming none of them is an error, as in Python:
 * the user asked for a check that would check nothing; a file of the
 * checkpoint it does not name gets a warning line.
 */
static int expect_sums(struct sums_ctx *c, const char *file)
{
	rl_sums *sums = rl_sums_create();
	char *dir = dir_of(file, 0);
	unsigned used = 0;
	int ret = sums && dir ? rl_sums_open(sums, file) : -ENOMEM;

	if (ret < 0)
		fprintf(stderr, "%s: --sha256-file %s\n", c->prog,
			ret == -ENOMEM ? "out of memory" : rl_sums_errmsg(sums));
	for (size_t i = 0; ret >= 0 && i < rl_sums_count(sums); i++) {
		rl_sums_entry en = { .size = sizeof(en) };

		rl_sums_get(sums, i, &en);
		ret = sums_name(c, en.name, en.hex, dir, file, en.line);
		used += ret > 0;
	}
	rl_sums_destroy(sums);
	free(dir);
	if (ret >= 0 && !used) {
		fprintf(stderr, "%s: --sha256-file %s names none of the checkpoint's files\n",
			c->prog, file);
		ret = -1;
	}
	for (size_t i = 0; ret >= 0 && i < c->nfiles; i++)
		if (!c->line[i] && c->reads[i])
			fprintf(stderr, "%s: warning: %s: no line in %s: its SHA-256 is not "
				"checked\n", c->prog, rl_ckpt_file_path(c->ck, i), file);
	return ret < 0 ? -1 : 0;
}

static void ctx_free(struct sums_ctx *c)
{
	free(c->id);
	free(c->reads);
	free(c->line);
	free(c->hex);
}

/* c->reads: the files plan has a request of. */
static void mark_read(struct sums_ctx *c, const rl_plan *plan)
{
	for (size_t i = 0; i < rl_plan_num_requests(plan); i++) {
		rl_request_info ri;

		if (rl_plan_request(plan, i, &ri) == 0 && ri.file < c->nfiles)
			c->reads[ri.file] = 1;
	}
}

int sha256_expect(rl_loader *ld, const rl_ckpt *ck, const rl_plan *plan, const char *ck_path,
		  const struct opt_list *given, const char *sums_file, const char *prog)
{
	struct sums_ctx c = { .ld = ld, .ck = ck, .prog = prog, .nfiles = rl_ckpt_num_files(ck),
			      .given = given };
	char *ckdir = NULL;
	int ret = -1;

	if (!given->n && !sums_file)
		return 0;
	c.id = calloc(c.nfiles + 1, sizeof(*c.id));
	c.line = calloc(c.nfiles + 1, sizeof(*c.line));
	c.hex = calloc(c.nfiles + 1, sizeof(*c.hex));
	c.reads = calloc(c.nfiles + 1, 1);
	if (c.reads)
		mark_read(&c, plan);
	for (size_t i = 0; c.id && i < c.nfiles; i++) {
		struct stat st;

		if (stat(rl_ckpt_file_path(ck, i), &st) == 0)
			c.id[i] = (struct file_id){ st.st_dev, st.st_ino, 1 };
	}
	if (c.id && c.line && c.hex && c.reads && (ckdir = dir_of(ck_path, 1))) {
		c.ckdir = ckdir;
		ret = expect_given(&c, given);
	}
	else
		fprintf(stderr, "%s: out of memory\n", prog);
	if (ret == 0 && sums_file)
		ret = expect_sums(&c, sums_file);
	free(ckdir);
	ctx_free(&c);
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
