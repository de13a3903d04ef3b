/*
 * checkpoint.c - a checkpoint of one or more safetensors files: a single
 * file, a directory, or an HF model.safetensors.index.json (index.c).
 *
 * Only headers are read (pread into one reusable buffer), and every file's
 * size (fstat) is checked against its header here, so a truncated file is
 * refused before any tensor data is read. Files are opened O_NONBLOCK so
 * that a FIFO given by mistake is refused (not a regular file), not waited on.
 *
 * Decisions:
 *  - A directory resolves as transformers does: its model.safetensors if
 *    present, else its model.safetensors.index.json, and only when neither
 *    exists every *.safetensors in it (dot files skipped; any that is not a
 *    regular file, a dangling link say, is refused). A directory with
 *    none of these is an error (-ENOENT): it is almost always a wrong path,
 *    not a wish to load nothing.
 *  - With an index, its weight_map decides: a tensor is taken from the file
 *    the map names; tensors a file holds but the map does not list (or lists
 *    in another file) are ignored, as transformers' loader does.
 *  - Files are ordered by name (directory) or by file name (index), and
 *    tensors by file, then data offset.
 *  - Eight bytes that cannot be a header length (over the reference's limit
 *    and past the end of the file: a text file, say) are reported as "not a
 *    safetensors file", with the reference's verdict RL_E_HEADER_TOO_LARGE.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_io.h"

struct loader {
	struct pl_ckpt *ck;
	struct cm_err *e;
	char *buf;              /* header buffer, reused across files */
	size_t buf_cap;
	size_t tensors_cap;
	struct pl_meta *meta;   /* every file's metadata, merged at the end */
	size_t nmeta, meta_cap;
	struct pl_index ix;     /* index mode */
	int indexed;
};

static int add_file(struct pl_ckpt *ck, char *path)
{
	struct pl_file *nf = cm_reallocarray(ck->files, ck->nfiles + 1, sizeof(*nf));

	if (!nf) {
		cm_free(path);
		return -ENOMEM;
	}
	ck->files = nf;
	memset(&nf[ck->nfiles], 0, sizeof(*nf));
	nf[ck->nfiles++].path = path;
	return 0;
}

/* ---------------------------------------------------------------- */
/* One file's header                                                 */
/* ---------------------------------------------------------------- */

/* Opens file f (a regular file) and records its size. Returns the fd. */
static int open_file(struct loader *L, struct pl_file *f)
{
	struct stat st;
	int fd, r;

	fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return pl_sys_err(L->e, errno, L->indexed ? "file named by the index: "
				  "cannot open" : "cannot open", f->path);
	if (fstat(fd, &st) < 0) {
		r = pl_sys_err(L->e, errno, "cannot stat", f->path);
		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return cm_err_set(L->e, -EINVAL, "%s: not a regular file", f->path);
	}
	f->size = (uint64_t)st.st_size;
	cm_file_id_get(fd, &f->id); /* best effort: unrecorded is not compared */
	return fd;
}

/* A header length n checked in read_metadata's order: size >= 8 (done by
 * the caller before n is read), length <= limit, header inside the file. */
static int check_length(struct loader *L, const struct pl_file *f, uint64_t n)
{
	if (n > PL_MAX_HEADER && n > f->size - 8)
		return cm_err_set(L->e, RL_E_HEADER_TOO_LARGE,
				  "%s: not a safetensors file (its first 8 bytes, read as "
				  "the header length, exceed both the limit of %u bytes and "
				  "the file's size)", f->path, PL_MAX_HEADER);
	if (n > PL_MAX_HEADER)
		return cm_err_set(L->e, RL_E_HEADER_TOO_LARGE,
				  "%s: header length %" PRIu64 " is over the limit of %u",
				  f->path, n, PL_MAX_HEADER);
	if (n + 8 > f->size)
		return cm_err_set(L->e, RL_E_HEADER_LENGTH,
				  "%s: header length %" PRIu64 " runs past the end of "
				  "the file (%" PRIu64 " bytes, truncated?)", f->path, n, f->size);
	return 0;
}

static int check_size(struct loader *L, const struct pl_file *f)
{
	if (f->size < 8)
		return cm_err_set(L->e, RL_E_HEADER_TOO_SMALL,
				  "%s: file of %" PRIu64 " bytes is shorter than the "
				  "8-byte header length", f->path, f->size);
	return 0;
}

/* The 8-byte header length of an open file, checked. */
static int header_length(struct loader *L, int fd, const struct pl_file *f, uint64_t *len)
{
	unsigned char len8[8];
	uint64_t n = 0;
	int r;

	if ((r = check_size(L, f)))
		return r;
	if ((r = pl_pread_full(fd, (char *)len8, 8, 0)))
		return pl_sys_err(L->e, -r, "cannot read", f->path);
	for (int i = 7; i >= 0; i--)
		n = n << 8 | len8[i];
	if ((r = check_length(L, f, n)))
		return r;
	*len = n;
	return 0;
}

/* Reads file f's header (n bytes after the length) into L->buf. */
static int read_header(struct loader *L, int fd, const struct pl_file *f, uint64_t n)
{
	int r;

	if (n > L->buf_cap || !L->buf) {
		char *nb = cm_realloc(L->buf, n ? (size_t)n : 1);

		if (!nb)
			return pl_ckpt_oom(L->e);
		L->buf = nb;
		L->buf_cap = (size_t)n;
	}
	if ((r = pl_pread_full(fd, L->buf, (size_t)n, 8)))
		return pl_sys_err(L->e, -r, "cannot read header", f->path);
	return 0;
}

/* Keeps h's tensors (those the index assigns to file fi) and metadata. */
static int keep_header(struct loader *L, uint32_t fi, struct pl_header *h)
{
	if (cm_grow((void **)&L->ck->tensors, &L->tensors_cap, L->ck->ntensors + h->ntensors,
		    sizeof(*L->ck->tensors)) ||
	    cm_grow((void **)&L->meta, &L->meta_cap, L->nmeta + h->nmeta, sizeof(*L->meta)))
		return pl_ckpt_oom(L->e);
	for (size_t i = 0; i < h->ntensors; i++) {
		struct pl_tensor *t = &h->tensors[i];

		if (L->indexed) {
			struct pl_index_ent *m = pl_index_find(&L->ix, t->name);

			if (!m || m->file != fi)
				continue; /* not ours: freed with h */
			m->found = 1;
		}
		L->ck->tensors[L->ck->ntensors++] = *t;
		t->name = NULL;
		t->shape = NULL;
	}
	for (size_t i = 0; i < h->nmeta; i++) {
		L->meta[L->nmeta++] = h->meta[i];
		h->meta[i].key = h->meta[i].value = NULL;
	}
	return 0;
}

/* Re-records e's message prefixed with "path: ". */
static int prefix(struct cm_err *e, int code, const char *path)
{
	char msg[CM_ERRMSG_MAX];

	memcpy(msg, e->msg, sizeof(msg));
	msg[sizeof(msg) - 1] = '\0';
	return cm_err_set(e, code, "%s: %s", path, msg);
}

/* Validates the header (n bytes at buf) of file fi, whose size is known,
 * and keeps its tensors and metadata. */
static int parse_header(struct loader *L, uint32_t fi, const char *buf, uint64_t n)
{
	struct pl_file *f = &L->ck->files[fi];
	struct pl_header h;
	int r;

	f->data_start = 8 + n;
	if ((r = pl_header_parse(buf, (size_t)n, f->size, fi, &h, L->e)))
		return prefix(L->e, r, f->path);
	r = keep_header(L, fi, &h);
	pl_header_free(&h);
	return r;
}

/* Reads, validates and keeps the header of file fi. */
static int load_file(struct loader *L, uint32_t fi)
{
	struct pl_file *f = &L->ck->files[fi];
	uint64_t n = 0;
	int fd, r;

	if ((fd = open_file(L, f)) < 0)
		return fd;
	if (!(r = header_length(L, fd, f, &n)) && !(r = read_header(L, fd, f, n)))
		r = parse_header(L, fi, L->buf, n);
	close(fd);
	return r;
}

/* ---------------------------------------------------------------- */
/* Which files                                                       */
/* ---------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether name is a *.safetensors that is not a dot file. */
static int safetensors_name(const char *name)
{
	size_t len = strlen(name);

	return name[0] != '.' && len >= 12 && !strcmp(name + len - 12, ".safetensors");
}

/*
 * A *.safetensors entry of a listed directory must be a regular file: one
 * skipped (a dangling link to a missing HF blob, a FIFO, a directory) would
 * load part of the model as if it were all of it, so it is refused by name.
 */
static int dir_entry_check(struct loader *L, const char *p)
{
	struct stat st;

	if (stat(p, &st) < 0) {
		if (errno == ENOENT && lstat(p, &st) == 0 && S_ISLNK(st.st_mode))
			return cm_err_set(L->e, -ENOENT, "%s: dangling symbolic link "
					  "(its target is missing)", p);
		return pl_sys_err(L->e, errno, "cannot stat", p);
	}
	if (!S_ISREG(st.st_mode))
		return cm_err_set(L->e, -EINVAL, "%s: not a regular file", p);
	return 0;
}

/* Every *.safetensors of dir, sorted by name; each must be a regular file. */
static int list_dir(struct loader *L, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int r = 0;

	if (!d)
		return pl_sys_err(L->e, errno, "cannot open directory", dir);
	while (!r && (de = readdir(d))) {
		char *p;

		if (!safetensors_name(de->d_name))
			continue;
		if (!(p = pl_path_join(dir, de->d_name)) ||
		    cm_grow((void **)&names, &cap, n + 1, sizeof(*names))) {
			cm_free(p);
			r = pl_ckpt_oom(L->e);
		} else {
			names[n++] = p;
			r = dir_entry_check(L, p);
		}
	}
	closedir(d);
	if (!r && !n)
		r = cm_err_set(L->e, -ENOENT, "%s: no *.safetensors files in directory", dir);
	if (!r)
		qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		if (!r && add_file(L->ck, names[i]) < 0)
			r = pl_ckpt_oom(L->e);
		else if (r)
			cm_free(names[i]);
	}
	cm_free(names);
	return r;
}

/* The index's files become the checkpoint's (ownership moves). */
static int open_index(struct loader *L, const char *path)
{
	int r = pl_index_load(path, &L->ix, L->e);

	L->indexed = 1;
	for (size_t i = 0; !r && i < L->ix.nfiles; i++) {
		r = add_file(L->ck, L->ix.files[i]) < 0 ? pl_ckpt_oom(L->e) : 0;
		L->ix.files[i] = NULL;
	}
	return r;
}

static int open_single(struct loader *L, const char *path)
{
	char *p = cm_strdup(path);

	if (!p || add_file(L->ck, p) < 0)
		return pl_ckpt_oom(L->e);
	return 0;
}

/* Whether dir/name is a regular file (links followed), as Python's
 * os.path.isfile() decides. 1, 0, or -ENOMEM; *path is dir/name. */
static int dir_has(const char *dir, const char *name, char **path, struct cm_err *e)
{
	struct stat st;

	*path = pl_path_join(dir, name);
	if (!*path)
		return pl_ckpt_oom(e);
	return stat(*path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A directory, as transformers resolves one. */
static int open_dir(struct loader *L, const char *dir)
{
	char *p = NULL;
	int r;

	if ((r = dir_has(dir, "model.safetensors", &p, L->e)) > 0)
		r = open_single(L, p);
	else if (!r) {
		cm_free(p);
		if ((r = dir_has(dir, "model.safetensors.index.json", &p, L->e)) > 0)
			r = open_index(L, p);
		else if (!r)
			r = list_dir(L, dir);
	}
	cm_free(p);
	return r;
}

/* ---------------------------------------------------------------- */
/* Finishing                                                         */
/* ---------------------------------------------------------------- */

static int cmp_tensor_name(const void *a, const void *b, void *arg)
{
	const struct pl_tensor *t = arg;

	return strcmp(t[*(const uint32_t *)a].name, t[*(const uint32_t *)b].name);
}

/*
 * Metadata: a later file wins on a repeated key; sorted by key. Entries
 * arrive in file order, so a stable sort (a bottom-up merge sort: qsort is
 * not stable) puts the winner last among equal keys.
 */
static int merge_meta(struct loader *L)
{
	struct pl_meta *tmp = cm_mallocarray(L->nmeta ? L->nmeta : 1, sizeof(*tmp));
	size_t o = 0;

	if (!tmp)
		return pl_ckpt_oom(L->e);
	for (size_t w = 1; w < L->nmeta; w *= 2) {
		for (size_t lo = 0; lo < L->nmeta; lo += 2 * w) {
			size_t mid = CM_MIN(lo + w, L->nmeta), hi = CM_MIN(lo + 2 * w, L->nmeta);
			size_t a = lo, b = mid, k = lo;

			while (a < mid && b < hi)
				tmp[k++] = strcmp(L->meta[b].key, L->meta[a].key) < 0 ?
					   L->meta[b++] : L->meta[a++];
			while (a < mid)
				tmp[k++] = L->meta[a++];
			while (b < hi)
				tmp[k++] = L->meta[b++];
		}
		memcpy(L->meta, tmp, L->nmeta * sizeof(*tmp));
	}
	cm_free(tmp);
	for (size_t i = 0; i < L->nmeta; i++) {
		if (i + 1 < L->nmeta && !strcmp(L->meta[i].key, L->meta[i + 1].key)) {
			cm_free(L->meta[i].key);
			cm_free(L->meta[i].value);
			continue;
		}
		L->meta[o++] = L->meta[i];
	}
	L->ck->meta = L->meta;
	L->ck->nmeta = o;
	L->meta = NULL;
	L->nmeta = 0;
	return 0;
}

static int finish(struct loader *L, const char *path)
{
	struct pl_ckpt *ck = L->ck;
	char q[128];

	for (size_t i = 0; i < L->ix.nmap; i++) {
		const struct pl_index_ent *m = &L->ix.map[i];

		if (m->found)
			continue;
		pl_quote(q, sizeof(q), m->name, strlen(m->name));
		return cm_err_set(L->e, RL_E_MISSING_TENSOR, "%s: tensor '%s' is not in %s",
				  path, q, ck->files[m->file].path);
	}
	if (ck->ntensors > pl_limit(PL_LIMIT_TENSORS))
		return cm_err_set(L->e, RL_E_TOO_LARGE, "%s: %zu tensors (at most %" PRIu64 ")",
				  path, ck->ntensors, pl_limit(PL_LIMIT_TENSORS));
	ck->by_name = cm_mallocarray(ck->ntensors ? ck->ntensors : 1, sizeof(*ck->by_name));
	if (!ck->by_name)
		return pl_ckpt_oom(L->e);
	for (size_t i = 0; i < ck->ntensors; i++)
		ck->by_name[i] = (uint32_t)i;
	qsort_r(ck->by_name, ck->ntensors, sizeof(*ck->by_name), cmp_tensor_name, ck->tensors);
	for (size_t i = 1; i < ck->ntensors; i++) {
		const struct pl_tensor *a = &ck->tensors[ck->by_name[i - 1]];
		const struct pl_tensor *b = &ck->tensors[ck->by_name[i]];

		if (strcmp(a->name, b->name))
			continue;
		pl_quote(q, sizeof(q), a->name, strlen(a->name));
		return cm_err_set(L->e, RL_E_DUPLICATE_TENSOR,
				  "tensor '%s' is in both %s and %s", q,
				  ck->files[CM_MIN(a->file, b->file)].path,
				  ck->files[CM_MAX(a->file, b->file)].path);
	}
	return merge_meta(L);
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

/* Frees what a failed or finished open leaves in L (the checkpoint itself
 * only when it was not handed out). */
static void loader_done(struct loader *L)
{
	for (size_t i = 0; i < L->nmeta; i++) {
		cm_free(L->meta[i].key);
		cm_free(L->meta[i].value);
	}
	cm_free(L->meta);
	cm_free(L->buf);
	pl_index_free(&L->ix);
	pl_ckpt_free(L->ck);
}

int pl_ckpt_open(const char *path, struct pl_ckpt **out, struct cm_err *e)
{
	struct loader L = { .e = e };
	struct stat st;
	int r;

	*out = NULL;
	if (!path || !*path)
		return cm_err_set(e, RL_E_INVALID_ARG, "empty checkpoint path");
	L.ck = cm_calloc(1, sizeof(*L.ck));
	if (!L.ck)
		return pl_ckpt_oom(e);
	if (stat(path, &st) < 0)
		r = pl_sys_err(e, errno, "cannot open", path);
	else if (S_ISDIR(st.st_mode))
		r = open_dir(&L, path);
	else if (ends_with(path, ".json"))
		r = open_index(&L, path);
	else
		r = open_single(&L, path);
	if (!r && L.ck->nfiles > pl_limit(PL_LIMIT_FILES))
		r = cm_err_set(e, RL_E_TOO_LARGE, "%s: %zu files (at most %" PRIu64 ")", path,
			       L.ck->nfiles, pl_limit(PL_LIMIT_FILES));
	for (size_t i = 0; !r && i < L.ck->nfiles; i++)
		r = load_file(&L, (uint32_t)i);
	if (!r && !(r = finish(&L, path))) {
		*out = L.ck;
		L.ck = NULL;
	}
	loader_done(&L);
	return r;
}

/*
 * One file given by its header bytes (pl_ckpt_from_headers): the checks
 * load_file makes on a file's first bytes, in the reference's order.
 */
static int header_given(struct loader *L, uint32_t fi, const struct pl_file_header *h)
{
	struct pl_file *f = &L->ck->files[fi];
	int r;

	f->size = h->size;
	if ((r = check_size(L, f)) || (r = check_length(L, f, h->len)))
		return r;
	return parse_header(L, fi, h->header, h->len);
}

int pl_ckpt_from_headers(const struct pl_file_header *files, size_t n, struct pl_ckpt **out,
			 struct cm_err *e)
{
	struct loader L = { .e = e };
	int r = 0;

	*out = NULL;
	if (!(L.ck = cm_calloc(1, sizeof(*L.ck))))
		return pl_ckpt_oom(e);
	if (n > pl_limit(PL_LIMIT_FILES))
		r = cm_err_set(e, RL_E_TOO_LARGE, "checkpoint: %zu files (at most %" PRIu64 ")",
			       n, pl_limit(PL_LIMIT_FILES));
	for (size_t i = 0; i < n && !r; i++) {
		char *p = cm_strdup(files[i].path);

		if (!p || add_file(L.ck, p) < 0)
			r = pl_ckpt_oom(e);
		else
			r = header_given(&L, (uint32_t)i, &files[i]);
	}
	if (!r && !n)
		r = cm_err_set(e, -ENOENT, "checkpoint: no files");
	if (!r && !(r = finish(&L, n ? files[0].path : "checkpoint"))) {
		*out = L.ck;
		L.ck = NULL;
	}
	loader_done(&L);
	return r;
}

void pl_ckpt_free(struct pl_ckpt *ck)
{
	if (!ck)
		return;
	for (size_t i = 0; i < ck->nfiles; i++)
		cm_free(ck->files[i].path);
	for (size_t i = 0; i < ck->ntensors; i++) {
		cm_free(ck->tensors[i].name);
		cm_free(ck->tensors[i].shape);
	}
	for (size_t i = 0; i < ck->nmeta; i++) {
		cm_free(ck->meta[i].key);
		cm_free(ck->meta[i].value);
	}
	cm_free(ck->files);
	cm_free(ck->tensors);
	cm_free(ck->by_name);
	cm_free(ck->meta);
	cm_free(ck);
}

long pl_ckpt_find(const struct pl_ckpt *ck, const char *name)
{
	size_t lo = 0, hi = ck->ntensors;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, ck->tensors[ck->by_name[mid]].name);

		if (!c)
			return ck->by_name[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -1;
}
