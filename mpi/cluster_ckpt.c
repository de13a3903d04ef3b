/*
 * cluster_ckpt.c - rl_mpi_ckpt_open(): a checkpoint whose files are spread over
 * the ranks' local drives. Each rank reads the headers of the files it
 * has (and may use: local_files), and one allgather gives every rank all
 * of them, so that every rank builds the same checkpoint
 * (rl_ckpt_open_headers) without opening a file it does not have; the
 * spec learns who has what (files_of_process).
 *
 * One blob per rank: its status, the names it sees (the checkpoint's
 * files, from the directory or the index), and for each local file its
 * size and header bytes. Everything after the exchange is computed from
 * the same gathered bytes on every rank, so every rank reaches the same
 * verdict without another round.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "mx.h"

#define HEADER_MAX 100000000u    /* the reference's limit (ringload.h) */
#define INDEX_MAX (256u << 20)

/* A growable byte buffer. */
struct buf {
	char *p;
	size_t n, cap;
	int oom;
};

static void put(struct buf *b, const void *p, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n > b->cap) {
		size_t cap = (b->n + n) * 2;
		char *np = realloc(b->p, cap);

		if (!np) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

static void put_u64(struct buf *b, uint64_t v)
{
	put(b, &v, sizeof(v));
}

static void put_str(struct buf *b, const char *s)
{
	put_u64(b, strlen(s));
	put(b, s, strlen(s));
}

/* Reading a gathered blob back; every length is checked against its end. */
struct rd {
	const char *p, *end;
	int bad;
};

static uint64_t get_u64(struct rd *r)
{
	uint64_t v = 0;

	if (r->end - r->p < (long)sizeof(v)) {
		r->bad = 1;
		return 0;
	}
	memcpy(&v, r->p, sizeof(v));
	r->p += sizeof(v);
	return v;
}

static const char *get_bytes(struct rd *r, uint64_t n)
{
	const char *p = r->p;

	if (r->bad || (uint64_t)(r->end - r->p) < n) {
		r->bad = 1;
		return NULL;
	}
	r->p += n;
	return p;
}

/* ---------------------------------------------------------------- */
/* What this rank sees                                               */
/* ---------------------------------------------------------------- */

struct local {
	char *dir;
	char **names;           /* the checkpoint's files this rank knows of */
	size_t nnames;
	int failed;             /* 0, or this rank's error code */
	char msg[MX_MSG];
};

static int add_name(struct local *l, const char *name)
{
	char **nn = realloc(l->names, (l->nnames + 1) * sizeof(*nn));

	if (!nn || !(nn[l->nnames] = strdup(name)))
		return -1;
	l->names = nn;
	l->nnames++;
	return 0;
}

static int local_fail(struct local *l, int code, const char *fmt, const char *a, const char *b)
{
	if (!l->failed) {
		snprintf(l->msg, sizeof(l->msg), fmt, a, b);
		l->failed = code;
	}
	return -1;
}

static int ends_with(const char *s, const char *t)
{
	size_t a = strlen(s), b = strlen(t);

	return a >= b && !strcmp(s + a - b, t);
}

/* Every *.safetensors of dir (a missing directory: none here). */
static void list_dir(struct local *l)
{
	DIR *d = opendir(l->dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && ends_with(de->d_name, ".safetensors") &&
		    add_name(l, de->d_name))
			local_fail(l, -ENOMEM, "%s%s", "out of memory", "");
	closedir(d);
}

/* A weight_map file name that stays inside the index's directory. */
static int name_ok(const char *f)
{
	if (f[0] == '/' || !strcmp(f, ".."))
		return 0;
	return !strstr(f, "/../") && strncmp(f, "../", 3) && !ends_with(f, "/..");
}

/* The files an index names (a missing index: none here). */
static void list_index(struct local *l, const char *path)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	long n;
	cJSON *root = NULL, *wm, *it;

	if (!f)
		return;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || n > INDEX_MAX || fseek(f, 0, SEEK_SET) ||
	    !(text = malloc((size_t)n + 1)) || fread(text, 1, (size_t)n, f) != (size_t)n) {
		local_fail(l, RL_E_BAD_INDEX, "%.300s: %.90s", path, "cannot read the index");
		goto out;
	}
	root = cJSON_ParseWithLength(text, (size_t)n);
	wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
	if (!cJSON_IsObject(wm)) {
		local_fail(l, RL_E_BAD_INDEX, "%.300s: %.90s", path, "index has no \"weight_map\" object");
		goto out;
	}
	for (it = wm->child; it; it = it->next) {
		const char *v = cJSON_GetStringValue(it);
		int seen = 0;

		if (!v || !*v || !name_ok(v)) {
			local_fail(l, RL_E_BAD_INDEX, "%.250s: weight_map names a bad file name '%.100s'", path,
				   v ? v : "");
			goto out;
		}
		for (size_t i = 0; i < l->nnames && !seen; i++)
			seen = !strcmp(l->names[i], v);
		if (!seen && add_name(l, v))
			local_fail(l, -ENOMEM, "%s%s", "out of memory", "");
	}
out:
	cJSON_Delete(root);
	free(text);
	fclose(f);
}

static char *dir_of(const char *path)
{
	const char *s = strrchr(path, '/');

	if (!s)
		return strdup(".");
	if (s == path)
		return strdup("/");
	return strndup(path, (size_t)(s - path));
}

/* The names of path's files this rank sees, and their directory. */
static void resolve(struct local *l, const char *path)
{
	struct stat st;
	int isdir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
	const char *base = strrchr(path, '/');

	l->dir = isdir ? strdup(path) : dir_of(path);
	if (!l->dir) {
		local_fail(l, -ENOMEM, "%s%s", "out of memory", "");
		return;
	}
	if (isdir)
		list_dir(l);
	else if (ends_with(path, ".json"))
		list_index(l, path);
	else if (stat(path, &st) == 0 && add_name(l, base ? base + 1 : path))
		local_fail(l, -ENOMEM, "%s%s", "out of memory", "");
}

/* Appends local file name's size and header to b (hlen with no bytes when
 * the length is not one rl_ckpt_open_headers would read). */
static void put_header(struct local *l, struct buf *b, uint64_t idx, const char *name)
{
	char path[PATH_MAX];
	unsigned char len8[8];
	struct stat st;
	uint64_t hlen = 0, have = 0;
	char *hdr = NULL;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", l->dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		local_fail(l, fd < 0 ? -errno : -EINVAL, "%.300s: %.90s", path,
			   fd < 0 ? strerror(errno) : "not a regular file");
		goto out;
	}
	if (st.st_size >= 8 && pread(fd, len8, 8, 0) == 8) {
		for (int i = 7; i >= 0; i--)
			hlen = hlen << 8 | len8[i];
		if (hlen <= HEADER_MAX && hlen + 8 <= (uint64_t)st.st_size) {
			if (!(hdr = malloc(hlen + 1)) || pread(fd, hdr, hlen, 8) != (ssize_t)hlen)
				local_fail(l, -EIO, "%.300s: %.90s", path, "cannot read its header");
			else
				have = hlen;
		}
	}
	put_u64(b, idx);
	put_u64(b, (uint64_t)st.st_size);
	put_u64(b, hlen);
	put_u64(b, have);
	put(b, hdr, have);
out:
	free(hdr);
	if (fd >= 0)
		close(fd);
}

/* The blob: status, names seen, then each local file's header. */
static void make_blob(struct local *l, const char *pattern, struct buf *b)
{
	struct buf files = { 0 };
	uint64_t nlocal = 0;

	for (size_t i = 0; i < l->nnames && !l->failed; i++) {
		char path[PATH_MAX];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", l->dir, l->names[i]);
		if (stat(path, &st) || !S_ISREG(st.st_mode) ||
		    (pattern && fnmatch(pattern, l->names[i], 0)))
			continue;
		put_header(l, &files, i, l->names[i]);
		nlocal++;
	}
	put_u64(b, (uint64_t)(int64_t)l->failed);
	put_str(b, l->failed ? l->msg : "");
	put_u64(b, l->failed ? 0 : l->nnames);
	for (size_t i = 0; i < l->nnames && !l->failed; i++)
		put_str(b, l->names[i]);
	put_u64(b, l->failed ? 0 : nlocal);
	if (!l->failed)
		put(b, files.p, files.n);
	free(files.p);
}

/* ---------------------------------------------------------------- */
/* The exchange                                                      */
/* ---------------------------------------------------------------- */

/* All ranks' blobs: rank r's at all + displs[r], counts[r] bytes. */
struct gathered {
	char *all;
	int *counts, *displs;
};

static void gathered_free(struct gathered *g)
{
	free(g->all);
	free(g->counts);
	free(g->displs);
}

static int exchange(struct mx *x, const struct buf *b, struct gathered *g)
{
	uint64_t mine = b->n, *sizes = malloc((size_t)x->size * sizeof(*sizes)), total = 0;
	MPI_Request r;
	int ret;

	g->counts = malloc((size_t)x->size * sizeof(int));
	g->displs = malloc((size_t)x->size * sizeof(int));
	if (!sizes || !g->counts || !g->displs)
		mx_abort(x, "out of memory to exchange checkpoint headers");
	if (MPI_Iallgather(&mine, 1, MPI_UINT64_T, sizes, 1, MPI_UINT64_T, x->comm, &r) ||
	    (ret = mx_wait(x, &r, 1, "the other ranks' header sizes", NULL, NULL))) {
		free(sizes);
		return mx_err(x->m, RL_E_MPI, "exchanging header sizes failed");
	}
	for (int q = 0; q < x->size; q++) {
		g->displs[q] = (int)total;
		g->counts[q] = (int)sizes[q];
		total += sizes[q];
	}
	free(sizes);
	/* Every rank sees the same sizes: the same verdict everywhere. */
	if (total > INT_MAX)
		return mx_err(x->m, RL_E_TOO_LARGE,
			      "the ranks' checkpoint headers total %llu bytes: over the 2 GiB one exchange can move",
			      (unsigned long long)total);
	if (!(g->all = malloc(total + 1)))
		mx_abort(x, "out of memory for the ranks' checkpoint headers");
	if (MPI_Iallgatherv(b->p, (int)b->n, MPI_BYTE, g->all, g->counts, g->displs, MPI_BYTE,
			    x->comm, &r) ||
	    mx_wait(x, &r, 1, "the other ranks' checkpoint headers", NULL, NULL))
		return mx_err(x->m, RL_E_MPI, "exchanging headers failed");
	return 0;
}

/* ---------------------------------------------------------------- */
/* Every rank's view, merged                                         */
/* ---------------------------------------------------------------- */

struct rfile {                  /* a local file of some rank */
	char *name;
	int rank;
	uint64_t size, hlen, have;
	const char *hdr;
};

struct merged {
	char **names;           /* every file any rank knows of, sorted, unique */
	size_t nnames;
	struct rfile *f;        /* every rank's local files, by name then rank */
	size_t nf;
	int bad_rank;           /* a rank whose blob does not parse */
};

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int rfile_cmp(const void *a, const void *b)
{
	const struct rfile *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

static void merged_free(struct merged *mg)
{
	for (size_t i = 0; i < mg->nnames; i++)
		free(mg->names[i]);
	for (size_t i = 0; i < mg->nf; i++)
		free(mg->f[i].name);
	free(mg->names);
	free(mg->f);
}

static char *get_str(struct rd *r)
{
	uint64_t n = get_u64(r);
	const char *p = get_bytes(r, n);

	return p ? strndup(p, n) : NULL;
}

/* Rank q's local files (naming names[0..n)) into mg. */
static int parse_files(struct merged *mg, struct rd *r, int q, char *const *names, uint64_t n)
{
	uint64_t nl = get_u64(r);

	for (uint64_t k = 0; k < nl && !r->bad; k++) {
		struct rfile f = { .rank = q }, *nf;
		uint64_t idx = get_u64(r);

		f.size = get_u64(r);
		f.hlen = get_u64(r);
		f.have = get_u64(r);
		f.hdr = get_bytes(r, f.have);
		if (r->bad || idx >= n || !names[idx] ||
		    !(nf = realloc(mg->f, (mg->nf + 1) * sizeof(*nf))))
			return -1;
		mg->f = nf;
		if (!(f.name = strdup(names[idx])))
			return -1;
		mg->f[mg->nf++] = f;
	}
	return r->bad ? -1 : 0;
}

/* Rank q's blob into mg: 0, its own failure code (its message in msg),
 * or -EPROTO when the blob does not parse. */
static int parse_rank(struct merged *mg, struct rd *r, int q, char *msg, size_t cap)
{
	int64_t status = (int64_t)get_u64(r);
	char *why = get_str(r), **names, **nn;
	uint64_t n = get_u64(r);
	int ret = 0;

	snprintf(msg, cap, "%s", why ? why : "");
	free(why);
	if (status)
		return (int)status;
	if (r->bad || n > (uint64_t)(r->end - r->p) || !(names = calloc(n + 1, sizeof(*names))))
		return -EPROTO;
	for (uint64_t i = 0; i < n; i++)
		names[i] = get_str(r);
	if (parse_files(mg, r, q, names, n) ||
	    !(nn = realloc(mg->names, (mg->nnames + n + 1) * sizeof(*nn))))
		ret = -EPROTO;
	for (uint64_t i = 0; i < n; i++) {
		if (!ret && names[i])
			nn[mg->nnames++] = names[i];
		else
			free(names[i]);
	}
	if (!ret)
		mg->names = nn;
	free(names);
	return ret;
}

/* Every rank's blob into mg; 0, or the error every rank reports. */
static int merge(struct mx *x, const struct gathered *g, struct merged *mg)
{
	char msg[MX_MSG];

	for (int q = 0; q < x->size; q++) {
		struct rd r = { g->all + g->displs[q], g->all + g->displs[q] + g->counts[q], 0 };
		int ret = parse_rank(mg, &r, q, msg, sizeof(msg));

		if (ret == -EPROTO)
			return mx_err(x->m, RL_E_MPI, "rank %d sent headers that do not parse", q);
		if (ret) {
			x->m->failed_rank = q;
			if (q == x->rank)
				return mx_err(x->m, ret, "rank %d: %s", q, msg);
			return mx_err(x->m, RL_E_PEER, "rank %d failed: %s", q, msg);
		}
	}
	if (mg->nnames)         /* none: the arrays may be NULL */
		qsort(mg->names, mg->nnames, sizeof(*mg->names), str_cmp);
	if (mg->nf)
		qsort(mg->f, mg->nf, sizeof(*mg->f), rfile_cmp);
	return 0;
}

/* The file every holder agrees on for name, or an error. */
static int agreed_file(struct mx *x, const struct merged *mg, const char *dir, const char *name,
		       size_t *at)
{
	size_t k = *at, first;

	while (k < mg->nf && strcmp(mg->f[k].name, name) < 0)
		k++;
	if (k == mg->nf || strcmp(mg->f[k].name, name))
		return mx_err(x->m, RL_E_FILE_UNAVAILABLE,
			      "%s/%s: no rank has this file among its local files", dir, name);
	first = k;
	for (*at = k; k < mg->nf && !strcmp(mg->f[k].name, name); k++) {
		const struct rfile *a = &mg->f[first], *b = &mg->f[k];

		if (a->size != b->size || a->hlen != b->hlen || a->have != b->have ||
		    memcmp(a->hdr, b->hdr, a->have)) {
			x->m->failed_rank = b->rank;
			return mx_err(x->m, RL_E_CLUSTER_MISMATCH,
				      "%s/%s: ranks %d and %d see different files (sizes or headers differ)",
				      dir, name, a->rank, b->rank);
		}
	}
	return 0;
}

/* ck from the merged headers, one per name, paths under this rank's dir. */
static int build(struct mx *x, const struct merged *mg, const char *dir, rl_ckpt *ck)
{
	rl_file_header *fh = calloc(mg->nnames + 1, sizeof(*fh));
	char **paths = calloc(mg->nnames + 1, sizeof(*paths));
	size_t at = 0, n = 0;
	int ret = 0;

	if (!fh || !paths)
		ret = mx_err(x->m, -ENOMEM, "out of memory");
	for (size_t i = 0; !ret && i < mg->nnames; i++) {
		if (i && !strcmp(mg->names[i], mg->names[i - 1]))
			continue;       /* seen by several ranks */
		if ((ret = agreed_file(x, mg, dir, mg->names[i], &at)))
			break;
		if (!(paths[n] = malloc(strlen(dir) + strlen(mg->names[i]) + 2))) {
			ret = mx_err(x->m, -ENOMEM, "out of memory");
			break;
		}
		sprintf(paths[n], "%s/%s", dir, mg->names[i]);
		fh[n] = (rl_file_header){ paths[n], mg->f[at].size,
					  mg->f[at].have ? mg->f[at].hdr : "", mg->f[at].hlen };
		n++;
	}
	if (!ret && !n)
		ret = mx_err(x->m, RL_E_FILE_UNAVAILABLE, "%s: no rank sees a file of the checkpoint",
			     dir);
	if (!ret && (ret = rl_ckpt_open_headers(ck, n, fh)))
		mx_err(x->m, ret, "%s", rl_ckpt_errmsg(ck));
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	free(fh);
	return ret;
}

/* name as an fnmatch(3) pattern that matches only itself. */
static char *escape(const char *dir, const char *name)
{
	char *out = malloc(2 * (strlen(dir) + strlen(name)) + 3), *o = out;

	if (!out)
		return NULL;
	for (const char *s = dir; *s; s++) {
		if (strchr("*?[]\\", *s))
			*o++ = '\\';
		*o++ = *s;
	}
	*o++ = '/';
	for (const char *s = name; *s; s++) {
		if (strchr("*?[]\\", *s))
			*o++ = '\\';
		*o++ = *s;
	}
	*o = '\0';
	return out;
}

/* files_of_process: each rank's local files, as whole-path patterns. */
static int set_availability(struct mx *x, const struct merged *mg, const char *dir,
			    rl_spec *spec)
{
	char **pat = calloc(mg->nf + 1, sizeof(*pat));
	int ret = pat ? 0 : -ENOMEM;

	for (int q = 0; !ret && q < x->size; q++) {
		size_t n = 0;

		for (size_t k = 0; k < mg->nf; k++)
			if (mg->f[k].rank == q && !(pat[n++] = escape(dir, mg->f[k].name)))
				ret = -ENOMEM;
		if (!ret)
			ret = rl_spec_set_files_of_process(spec, (unsigned)q, n,
							   (const char *const *)pat);
		for (size_t k = 0; k < n; k++)
			free(pat[k]);
	}
	free(pat);
	return ret ? mx_err(x->m, ret, "files_of_process: %s", rl_spec_errmsg(spec)) : 0;
}

static void local_free(struct local *l)
{
	for (size_t i = 0; i < l->nnames; i++)
		free(l->names[i]);
	free(l->names);
	free(l->dir);
}

int rl_mpi_ckpt_open(rl_mpi *m, rl_ckpt *ck, rl_spec *spec, const char *path,
		     const char *local_files, MPI_Comm comm)
{
	struct local l = { 0 };
	struct buf b = { 0 };
	struct gathered g = { 0 };
	struct merged mg = { 0 };
	struct mx x;
	int ret;

	if (!m || !ck || !path)
		return -EINVAL;
	if ((ret = mx_begin(&x, m, comm)))
		return ret;
	resolve(&l, path);
	make_blob(&l, local_files, &b);
	if (b.oom) {    /* a small blob that says so, which cannot fail */
		static const char oom[] = "out of memory reading checkpoint headers";
		uint64_t v[2] = { (uint64_t)(int64_t)-ENOMEM, sizeof(oom) - 1 };

		b.n = 0;
		b.p = realloc(b.p, sizeof(v) + sizeof(oom));
		if (b.p) {
			memcpy(b.p, v, sizeof(v));
			memcpy(b.p + sizeof(v), oom, sizeof(oom) - 1);
			b.n = sizeof(v) + sizeof(oom) - 1;
		}
	}
	ret = exchange(&x, &b, &g);
	if (!ret)
		ret = merge(&x, &g, &mg);
	if (!ret)
		ret = build(&x, &mg, l.dir, ck);
	if (!ret && spec)
		ret = set_availability(&x, &mg, l.dir, spec);
	merged_free(&mg);
	gathered_free(&g);
	free(b.p);
	local_free(&l);
	mx_end(&x);
	return ret;
}
