/*
 * expect.c - which file of a checkpoint an expected SHA-256 value names
 * (rl_expect, api/ringload.h): the one set of rules the CLI's --sha256
 * and --sha256-file and Python's sha256= follow. Names are compared by
 * identity (device and inode of the path the file system resolves), so
 * "./", ".." and symlinked directories spell the same file. The Hugging
 * Face blob rule is integrity.c's (rl_hf_blob_sha256).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "../common/common.h"
#include "integrity.h"

#define WARN_MAX (1 << 20) /* warning text past this is cut: a sums file of junk */

/* What one file of the checkpoint got, and from where. */
struct xfile {
	dev_t dev;
	ino_t ino;
	int ok;                 /* stat'ed: dev and ino are its identity */
	int source;             /* RL_EXPECT_* */
	unsigned line;          /* the SUMS line (RL_EXPECT_SUMS) */
	unsigned sums_id;       /* which rl_expect_sums call gave it */
	char *origin;           /* "NAME" given, "SUMS:LINE" */
	char hex[65];
};

struct rl_expect {
	const rl_ckpt *ck;
	char *ckdir;
	size_t nfiles;
	struct xfile *f;
	unsigned nsums;
	char *warn;
	size_t warn_len;
	struct cm_err err;
};

/* The directory of a checkpoint path: itself when it is one. */
static char *dir_of(const char *path, int may_be_dir)
{
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (may_be_dir && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return cm_strdup(path);
	if (!slash)
		return cm_strdup(".");
	return cm_strndup(path, slash == path ? 1 : (size_t)(slash - path));
}

rl_expect *rl_expect_create(const rl_ckpt *ck, const char *ck_path)
{
	rl_expect *x;
	struct stat st;

	if (!ck || !ck_path || !(x = cm_calloc(1, sizeof(*x))))
		return NULL;
	x->ck = ck;
	x->nfiles = rl_ckpt_num_files(ck);
	x->f = cm_calloc(x->nfiles + 1, sizeof(*x->f));
	x->ckdir = dir_of(ck_path, 1);
	x->warn = cm_calloc(1, 1);
	if (!x->f || !x->ckdir || !x->warn) {
		rl_expect_destroy(x);
		return NULL;
	}
	for (size_t i = 0; i < x->nfiles; i++)
		if (stat(rl_ckpt_file_path(ck, i), &st) == 0)
			x->f[i] = (struct xfile){ .dev = st.st_dev, .ino = st.st_ino, .ok = 1 };
	return x;
}

void rl_expect_destroy(rl_expect *x)
{
	if (!x)
		return;
	for (size_t i = 0; x->f && i < x->nfiles; i++)
		cm_free(x->f[i].origin);
	cm_free(x->f);
	cm_free(x->ckdir);
	cm_free(x->warn);
	cm_free(x);
}

const char *rl_expect_errmsg(const rl_expect *x)
{
	return x ? x->err.msg : "";
}

const char *rl_expect_warnings(const rl_expect *x)
{
	return x && x->warn ? x->warn : "";
}

/* Adds one warning line (best effort: out of memory drops it). */
static void warn(rl_expect *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(rl_expect *x, const char *fmt, ...)
{
	char line[CM_ERRMSG_MAX];
	size_t n;
	char *p;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	n = strlen(line);
	if (x->warn_len + n + 2 > WARN_MAX ||
	    !(p = cm_reallocarray(x->warn, x->warn_len + n + 2, 1)))
		return;
	memcpy(p + x->warn_len, line, n);
	p[x->warn_len + n] = '\n';
	p[x->warn_len + n + 1] = '\0';
	x->warn = p;
	x->warn_len += n + 1;
}

/* ------------------------------------------------------------------ */
/* Names to files                                                      */

/* name relative to dir (NULL: the working directory), as the kernel
 * resolves it; NULL when out of memory. */
static char *path_in(const char *dir, const char *name)
{
	size_t ld, ln;
	char *p;

	if (!dir || name[0] == '/')
		return cm_strdup(name);
	ld = strlen(dir);
	ln = strlen(name);
	if (!(p = cm_calloc(ld + ln + 2, 1)))
		return NULL;
	memcpy(p, dir, ld);
	p[ld] = '/';
	memcpy(p + ld + 1, name, ln);
	return p;
}

/* The file of the checkpoint that name (relative to dir) is, the same file
 * however the path spells it; -1 none, -ENOMEM. */
static long file_of(const rl_expect *x, const char *dir, const char *name)
{
	char *p = path_in(dir, name);
	struct stat st;
	long f = -1;

	if (!p)
		return -ENOMEM;
	if (stat(p, &st) == 0)
		for (size_t i = 0; i < x->nfiles && f < 0; i++)
			if (x->f[i].ok && x->f[i].dev == st.st_dev && x->f[i].ino == st.st_ino)
				f = (long)i;
	cm_free(p);
	return f;
}

/* name relative to dir is nothing at all: lstat fails with ENOENT (a
 * dangling symlink is something, and so is what cannot be looked at). */
static int absent(const char *dir, const char *name)
{
	char *p = path_in(dir, name);
	struct stat st;
	int r = p && lstat(p, &st) < 0 && errno == ENOENT;

	cm_free(p);
	return r;
}

/* The checkpoint's files, ", "-separated, into buf (cut to fit). */
static const char *file_list(const rl_expect *x, char *buf, size_t cap)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < x->nfiles && n + 1 < cap; i++) {
		int w = snprintf(buf + n, cap - n, "%s%s", i ? ", " : "",
				 rl_ckpt_file_path(x->ck, i));

		n += w > 0 ? (size_t)w : 0;
	}
	return buf;
}

/*
 * hex for file f from origin (what: a given NAME, or "SUMS:LINE: NAME").
 * A second, different value for f, however spelled, is RL_E_INVALID_ARG
 * naming both: "on line N" of the same sums file, else "from ORIGIN".
 */
static int set(rl_expect *x, long f, const char *hex, int source, unsigned line,
	       const char *origin, const char *what)
{
	struct xfile *xf = x->f + f;
	char *o;

	if (xf->source && strcasecmp(xf->hex, hex)) {
		if (source == RL_EXPECT_SUMS && xf->source == RL_EXPECT_SUMS &&
		    xf->sums_id == x->nsums)
			return cm_err_set(&x->err, RL_E_INVALID_ARG, "%s has another value on "
					  "line %u", what, xf->line);
		return cm_err_set(&x->err, RL_E_INVALID_ARG, "%s has another value from %s%s",
				  what, xf->source == RL_EXPECT_GIVEN ? "the one given for " : "",
				  xf->origin);
	}
	if (xf->source)
		return 0; /* the same value again: the first origin stays */
	if (!(o = cm_strdup(origin)))
		return cm_err_set(&x->err, -ENOMEM, "out of memory");
	xf->origin = o;
	xf->source = source;
	xf->line = line;
	xf->sums_id = x->nsums;
	snprintf(xf->hex, sizeof(xf->hex), "%s", hex);
	return 0;
}

int rl_expect_given(rl_expect *x, const char *name, const char *hex)
{
	uint8_t sha[32];
	char list[4096];
	long f, g;

	if (!x || !name || !hex)
		return -EINVAL;
	cm_err_clear(&x->err);
	if (rl_sha256_from_hex(hex, sha) < 0)
		return cm_err_set(&x->err, RL_E_INVALID_ARG, "%s: expected SHA-256 '%s' is not "
				  "64 hex digits", name, hex);
	f = file_of(x, NULL, name);
	g = file_of(x, x->ckdir, name);
	if (f == -ENOMEM || g == -ENOMEM)
		return cm_err_set(&x->err, -ENOMEM, "out of memory");
	if (f >= 0 && g >= 0 && f != g)
		return cm_err_set(&x->err, RL_E_INVALID_ARG, "%s: names both %s and %s: give "
				  "its path", name, rl_ckpt_file_path(x->ck, (size_t)f),
				  rl_ckpt_file_path(x->ck, (size_t)g));
	if (f < 0 && g < 0)
		return cm_err_set(&x->err, RL_E_INVALID_ARG, "%s: not a file of the "
				  "checkpoint (its files: %s)", name,
				  file_list(x, list, sizeof(list)));
	return set(x, f >= 0 ? f : g, hex, RL_EXPECT_GIVEN, 0, name, name);
}

/*
 * One SUMS line's name: relative to the SUMS file's directory (as
 * sha256sum -c reads it there), or, when it is nothing there, to the
 * checkpoint's (a SUMS kept elsewhere). 1 expected, 0 skipped (no file of
 * the checkpoint: a warning for a *.safetensors name, which a misspelled
 * line would otherwise leave unchecked), < 0 an error.
 */
static int sums_line(rl_expect *x, const char *sums, const char *dir, const rl_sums_entry *en)
{
	size_t n = strlen(en->name);
	long f = file_of(x, dir, en->name);
	char origin[4200], what[8400];

	if (f == -1 && absent(dir, en->name))
		f = file_of(x, x->ckdir, en->name);
	if (f == -ENOMEM)
		return cm_err_set(&x->err, -ENOMEM, "out of memory");
	if (f < 0) {
		if (n >= 12 && !strcmp(en->name + n - 12, ".safetensors"))
			warn(x, "%s:%u: %s is no file of the checkpoint: skipped", sums, en->line,
			     en->name);
		return 0;
	}
	snprintf(origin, sizeof(origin), "%s:%u", sums, en->line);
	snprintf(what, sizeof(what), "%s: %s", origin, en->name);
	return set(x, f, en->hex, RL_EXPECT_SUMS, en->line, origin, what) < 0 ? -1 : 1;
}

/* Marks in reads the files plan has a request of (every file: NULL). */
static void files_read(const rl_expect *x, const rl_plan *plan, unsigned char *reads)
{
	for (size_t i = 0; !plan && i < x->nfiles; i++)
		reads[i] = 1;
	for (size_t i = 0; plan && i < rl_plan_num_requests(plan); i++) {
		rl_request_info ri;

		if (rl_plan_request(plan, i, &ri) == 0 && ri.file < x->nfiles)
			reads[ri.file] = 1;
	}
}

/* The lines of a parsed sums file; the number of them naming a file. */
static int sums_lines(rl_expect *x, const char *path, const rl_sums *sums)
{
	char *dir = dir_of(path, 0);
	int used = 0, r = 0;

	if (!dir)
		return cm_err_set(&x->err, -ENOMEM, "out of memory");
	for (size_t i = 0; r >= 0 && i < rl_sums_count(sums); i++) {
		rl_sums_entry en = { .size = sizeof(en) };

		r = rl_sums_get(sums, i, &en);
		if (r == 0)
			r = sums_line(x, path, dir, &en);
		used += r > 0;
	}
	cm_free(dir);
	return r < 0 ? x->err.code : used;
}

int rl_expect_sums(rl_expect *x, const char *path, const rl_plan *plan)
{
	rl_sums *sums;
	unsigned char *reads;
	char list[4096];
	int ret;

	if (!x || !path)
		return -EINVAL;
	cm_err_clear(&x->err);
	if (!(sums = rl_sums_create()))
		return cm_err_set(&x->err, -ENOMEM, "out of memory");
	x->nsums++;
	ret = rl_sums_open(sums, path);
	if (ret < 0)
		cm_err_set(&x->err, ret, "%s", rl_sums_errmsg(sums));
	else
		ret = sums_lines(x, path, sums);
	rl_sums_destroy(sums);
	if (ret == 0)
		return cm_err_set(&x->err, RL_E_INVALID_ARG, "%s names none of the "
				  "checkpoint's files (%s)", path, file_list(x, list, sizeof(list)));
	if (ret < 0)
		return ret;
	if (!(reads = cm_calloc(x->nfiles + 1, 1)))
		return cm_err_set(&x->err, -ENOMEM, "out of memory");
	files_read(x, plan, reads);
	for (size_t i = 0; i < x->nfiles; i++)
		if (reads[i] && !(x->f[i].source == RL_EXPECT_SUMS && x->f[i].sums_id == x->nsums))
			warn(x, "%s: no line in %s: its SHA-256 is not checked",
			     rl_ckpt_file_path(x->ck, i), path);
	cm_free(reads);
	return ret;
}

int rl_expect_get(const rl_expect *x, size_t file, char hex[65])
{
	if (!x || !hex || file >= x->nfiles)
		return -EINVAL;
	snprintf(hex, 65, "%s", x->f[file].hex);
	return x->f[file].source;
}

int rl_loader_expect(rl_loader *ld, const rl_expect *x)
{
	if (!ld || !x)
		return -EINVAL;
	for (size_t i = 0; i < x->nfiles; i++) {
		int r = x->f[i].source ?
			rl_loader_expect_sha256(ld, rl_ckpt_file_path(x->ck, i), x->f[i].hex) : 0;

		if (r < 0)
			return r;
	}
	return 0;
}
