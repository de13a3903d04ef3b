/*
 * checkpoint.c - a checkpoint of one or more safetensors files: a single
 * file, a directory of *.safetensors, or an HF model.safetensors.index.json.
 *
 * Only headers are read (pread into one reusable buffer), and every file's
 * size (fstat) is checked against its header here, so a truncated file is
 * refused before any tensor data is read. Files are opened O_NONBLOCK so
 * that a FIFO given by mistake is refused (not a regular file), not waited on.
 *
 * Decisions:
 *  - A directory with no *.safetensors (dot files skipped) is an error
 *    (-ENOENT): it is almost always a wrong path, not a wish to load nothing.
 *  - With an index, its weight_map decides: a tensor is taken from the file
 *    the map names; tensors a file holds but the map does not list (or lists
 *    in another file) are ignored, as transformers' loader does. A repeated
 *    key in weight_map keeps its last value, as Python's json does.
 *  - Files are ordered by name (directory) or by file name (index), and
 *    tensors by file, then data offset.
 *  - An index names files relative to its own directory: an absolute name
 *    or one with a ".." component is refused (RL_E_BAD_INDEX), so a hostile
 *    index cannot make us open, or describe in errors, files elsewhere.
 *    Subdirectories ("sub/x.safetensors") are allowed. Symbolic links in
 *    the index's directory are followed: they are its owner's choice.
 *  - Only JSON whitespace may follow the index's value, and a weight_map
 *    name or file name with a NUL (\u0000) is refused: cJSON's strings end
 *    at the first NUL, so "a.safetensors\u0000x" would silently read as
 *    "a.safetensors".
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

#include <cjson/cJSON.h>

#include "planner.h"
#include "sjson.h"

/* An index larger than this is not an index (HF's are a few MB). */
#define INDEX_MAX_BYTES (256u << 20)

struct map_ent {
	const char *name;   /* tensor and file names: owned by the cJSON tree */
	const char *fname;
	size_t seq;         /* document order */
	uint32_t file;
	int found;
};

struct loader {
	struct pl_ckpt *ck;
	struct rl_err *e;
	char *buf;              /* header buffer, reused across files */
	size_t buf_cap;
	size_t tensors_cap;
	struct pl_meta *meta;   /* every file's metadata, merged at the end */
	size_t nmeta, meta_cap;
	struct map_ent *map;    /* index mode: sorted by name */
	size_t nmap;
};

static int oom(struct rl_err *e)
{
	return rl_err_set(e, -ENOMEM, "out of memory opening checkpoint");
}

/* Re-records e's message prefixed with "path: ". */
static int prefix(struct rl_err *e, int code, const char *path)
{
	char msg[RL_ERRMSG_MAX];

	memcpy(msg, e->msg, sizeof(msg));
	msg[sizeof(msg) - 1] = '\0';
	return rl_err_set(e, code, "%s: %s", path, msg);
}

static int sys_err(struct rl_err *e, int err, const char *what, const char *path)
{
	return rl_err_set(e, -err, "%s: %s: %s", path, what, strerror(err));
}

static int pread_full(int fd, char *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, buf + done, len - done, (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO; /* the file shrank under us */
		done += (size_t)n;
	}
	return 0;
}

static char *path_join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *p;

	if (a + b + 2 < a)
		return NULL;
	p = rl_malloc(a + b + 2);
	if (!p)
		return NULL;
	memcpy(p, dir, a);
	p[a] = '/';
	memcpy(p + a + 1, name, b + 1);
	return p;
}

/* The directory part of path ("." when there is none). */
static char *path_dir(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return rl_strdup(".");
	if (slash == path)
		return rl_strdup("/");
	return rl_strndup(path, (size_t)(slash - path));
}

static int add_file(struct pl_ckpt *ck, char *path)
{
	struct pl_file *nf = rl_reallocarray(ck->files, ck->nfiles + 1, sizeof(*nf));

	if (!nf) {
		rl_free(path);
		return -ENOMEM;
	}
	ck->files = nf;
	memset(&nf[ck->nfiles], 0, sizeof(*nf));
	nf[ck->nfiles++].path = path;
	return 0;
}

static struct map_ent *map_find(const struct loader *L, const char *name)
{
	size_t lo = 0, hi = L->nmap;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, L->map[mid].name);

		if (!c)
			return &L->map[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/*
 * Validates the header (n bytes at buf) of file fi, whose size is known,
 * and keeps its tensors (those the index assigns to it) and metadata.
 */
static int keep_header(struct loader *L, uint32_t fi, const char *buf, uint64_t n)
{
	struct pl_file *f = &L->ck->files[fi];
	struct pl_header h;
	int r;

	f->data_start = 8 + n;
	r = pl_header_parse(buf, (size_t)n, f->size, fi, &h, L->e);
	if (r)
		return prefix(L->e, r, f->path);
	if (rl_grow((void **)&L->ck->tensors, &L->tensors_cap, L->ck->ntensors + h.ntensors,
		    sizeof(*L->ck->tensors))) {
		r = oom(L->e);
		goto free_h;
	}
	for (size_t i = 0; i < h.ntensors; i++) {
		struct pl_tensor *t = &h.tensors[i];

		if (L->map) {
			struct map_ent *m = map_find(L, t->name);

			if (!m || m->file != fi)
				continue; /* not ours: freed with h */
			m->found = 1;
		}
		L->ck->tensors[L->ck->ntensors++] = *t;
		t->name = NULL;
		t->shape = NULL;
	}
	if (rl_grow((void **)&L->meta, &L->meta_cap, L->nmeta + h.nmeta, sizeof(*L->meta))) {
		r = oom(L->e);
		goto free_h;
	}
	for (size_t i = 0; i < h.nmeta; i++) {
		L->meta[L->nmeta++] = h.meta[i];
		h.meta[i].key = h.meta[i].value = NULL;
	}
free_h:
	pl_header_free(&h);
	return r;
}

/* Reads, validates and keeps the header of file fi. */
static int load_file(struct loader *L, uint32_t fi)
{
	struct pl_file *f = &L->ck->files[fi];
	struct stat st;
	unsigned char len8[8];
	uint64_t n = 0;
	int fd, r;

	fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return sys_err(L->e, errno, L->map ? "file named by the index: cannot open"
						   : "cannot open", f->path);
	if (fstat(fd, &st) < 0) {
		r = sys_err(L->e, errno, "cannot stat", f->path);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = rl_err_set(L->e, -EINVAL, "%s: not a regular file", f->path);
		goto out;
	}
	f->size = (uint64_t)st.st_size;
	/* read_metadata's order: size >= 8, length <= limit, header in file. */
	if (f->size < 8) {
		r = rl_err_set(L->e, RL_E_HEADER_TOO_SMALL,
			       "%s: file of %" PRIu64 " bytes is shorter than the "
			       "8-byte header length", f->path, f->size);
		goto out;
	}
	if ((r = pread_full(fd, (char *)len8, 8, 0))) {
		r = sys_err(L->e, -r, "cannot read", f->path);
		goto out;
	}
	for (int i = 7; i >= 0; i--)
		n = n << 8 | len8[i];
	if (n > PL_MAX_HEADER) {
		r = rl_err_set(L->e, RL_E_HEADER_TOO_LARGE,
			       "%s: header length %" PRIu64 " is over the limit of %u",
			       f->path, n, PL_MAX_HEADER);
		goto out;
	}
	if (n + 8 > f->size) {
		r = rl_err_set(L->e, RL_E_HEADER_LENGTH,
			       "%s: header length %" PRIu64 " runs past the end of "
			       "the file (%" PRIu64 " bytes, truncated?)", f->path, n, f->size);
		goto out;
	}
	if (n > L->buf_cap || !L->buf) {
		char *nb = rl_realloc(L->buf, n ? (size_t)n : 1);

		if (!nb) {
			r = oom(L->e);
			goto out;
		}
		L->buf = nb;
		L->buf_cap = (size_t)n;
	}
	if ((r = pread_full(fd, L->buf, (size_t)n, 8))) {
		r = sys_err(L->e, -r, "cannot read header", f->path);
		goto out;
	}
	r = keep_header(L, fi, L->buf, n);
out:
	close(fd);
	return r;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_dir(struct loader *L, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int r = 0;

	if (!d)
		return sys_err(L->e, errno, "cannot open directory", dir);
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		struct stat st;
		char *p;

		if (de->d_name[0] == '.' || len < 12 ||
		    strcmp(de->d_name + len - 12, ".safetensors"))
			continue;
		p = path_join(dir, de->d_name);
		if (!p) {
			r = oom(L->e);
			break;
		}
		if (stat(p, &st) < 0 || !S_ISREG(st.st_mode)) {
			rl_free(p); /* a dangling link or a directory: not a file of ours */
			continue;
		}
		if (rl_grow((void **)&names, &cap, n + 1, sizeof(*names))) {
			rl_free(p);
			r = oom(L->e);
			break;
		}
		names[n++] = p;
	}
	closedir(d);
	if (!r && !n)
		r = rl_err_set(L->e, -ENOENT, "%s: no *.safetensors files in directory", dir);
	if (!r)
		qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		if (!r && add_file(L->ck, names[i]) < 0)
			r = oom(L->e);
		else if (r)
			rl_free(names[i]);
	}
	rl_free(names);
	return r;
}

static int read_small_file(const char *path, char **out, size_t *len, struct rl_err *e)
{
	struct stat st;
	char *buf;
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return sys_err(e, errno, "cannot open", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		r = S_ISREG(st.st_mode) ? sys_err(e, errno, "cannot stat", path)
					: rl_err_set(e, RL_E_BAD_INDEX, "%s: not a regular file", path);
		close(fd);
		return r;
	}
	if ((uint64_t)st.st_size > INDEX_MAX_BYTES) {
		close(fd);
		return rl_err_set(e, RL_E_BAD_INDEX, "%s: index of %" PRIu64
				  " bytes is larger than %u", path, (uint64_t)st.st_size,
				  INDEX_MAX_BYTES);
	}
	buf = rl_malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return oom(e);
	}
	r = pread_full(fd, buf, (size_t)st.st_size, 0);
	close(fd);
	if (r) {
		rl_free(buf);
		return sys_err(e, -r, "cannot read", path);
	}
	buf[st.st_size] = '\0';
	*out = buf;
	*len = (size_t)st.st_size;
	return 0;
}

/*
 * Skips the value at j->p in text cJSON has already accepted: strings and
 * brackets only need matching, so nesting has no limit here.
 */
static void skip_valid(struct sj *j)
{
	int depth = 0;

	do {
		sj_ws(j);
		if (j->p >= j->end)
			return;
		switch (*j->p) {
		case '"':
			for (j->p++; j->p < j->end && *j->p != '"'; j->p++)
				if (*j->p == '\\')
					j->p++;
			j->p++;
			break;
		case '{':
		case '[':
			depth++;
			j->p++;
			break;
		case '}':
		case ']':
			depth--;
			j->p++;
			break;
		case ',':
		case ':':
			j->p++;
			break;
		default:
			while (j->p < j->end && !strchr(" \t\r\n,:]}", *j->p))
				j->p++;
		}
	} while (depth > 0 && j->p < j->end);
}

/* Decodes the string at j->p; whether it holds a NUL is *nul. */
static int index_string(struct sj *j, const char *path, int *nul)
{
	static const char lead[] = "invalid header JSON: ";
	int r = sj_string(j);

	if (r == RL_E_HEADER_JSON) {  /* cJSON lets raw control characters through */
		char msg[RL_ERRMSG_MAX];

		snprintf(msg, sizeof(msg), "%s", j->e->msg +
			 (strncmp(j->e->msg, lead, strlen(lead)) ? 0 : strlen(lead)));
		return rl_err_set(j->e, RL_E_BAD_INDEX, "%s: %s", path, msg);
	}
	*nul = !r && memchr(j->sb, 0, j->sb_len) != NULL;
	return r;
}

/*
 * Walks the index text (a JSON object cJSON has accepted) again with the
 * strict decoder, for what cJSON's NUL-terminated strings hide: a NUL in a
 * weight_map name or file name.
 */
static int index_check_nul(const char *text, size_t len, const char *path, struct rl_err *e)
{
	struct sj j = { .buf = text, .p = text, .end = text + len, .e = e };
	char q[128];
	int r = 0, nul = 0;

	sj_ws(&j);
	j.p++;                                  /* the root '{' */
	for (sj_ws(&j); !r && j.p < j.end && *j.p == '"'; sj_ws(&j)) {
		int wm;

		if ((r = index_string(&j, path, &nul)))
			break;
		wm = j.sb_len == 10 && !memcmp(j.sb, "weight_map", 10);
		sj_ws(&j);
		j.p++;                          /* ':' */
		sj_ws(&j);
		if (!wm || *j.p != '{') {
			skip_valid(&j);
		} else {
			for (j.p++, sj_ws(&j); j.p < j.end && *j.p == '"'; sj_ws(&j)) {
				if ((r = index_string(&j, path, &nul)))
					break;
				pl_quote(q, sizeof(q), j.sb, j.sb_len);
				if (nul) {
					r = rl_err_set(e, RL_E_BAD_INDEX, "%s: weight_map name '%s' "
						       "contains a NUL character", path, q);
					break;
				}
				sj_ws(&j);
				j.p++;          /* ':' */
				sj_ws(&j);
				if (j.p < j.end && *j.p == '"') {
					if ((r = index_string(&j, path, &nul)))
						break;
					if (nul) {
						r = rl_err_set(e, RL_E_BAD_INDEX, "%s: weight_map "
							       "entry '%s': file name contains a NUL "
							       "character", path, q);
						break;
					}
				} else {
					skip_valid(&j);
				}
				sj_ws(&j);
				if (j.p < j.end && *j.p == ',')
					j.p++;
			}
			j.p++;                  /* '}' */
		}
		sj_ws(&j);
		if (j.p < j.end && *j.p == ',')
			j.p++;
	}
	rl_free(j.sb);
	return r;
}

/* Whether an index's file name stays in the index's directory. */
static int index_name_ok(const char *f)
{
	if (f[0] == '/')
		return 0;
	for (const char *c = f; *c; ) {
		size_t n = strcspn(c, "/");

		if (n == 2 && c[0] == '.' && c[1] == '.')
			return 0;
		c += n;
		if (*c == '/')
			c++;
	}
	return 1;
}

static int cmp_map(const void *a, const void *b)
{
	const struct map_ent *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * Reads index path: {"weight_map": {"tensor": "file.safetensors", ...}}.
 * Fills L->map (strings point into *treep) and the checkpoint's files:
 * the distinct file names, sorted, relative to the index's directory.
 */
static int load_index(struct loader *L, const char *path, cJSON **treep)
{
	cJSON *root, *wm, *it;
	char *text = NULL, *dir = NULL;
	const char *end = NULL;  /* where cJSON stopped */
	const char **files = NULL;
	size_t len = 0, n = 0, nu = 0;
	int r;

	if ((r = read_small_file(path, &text, &len, L->e)))
		return r;
	root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	*treep = root;
	if (!root || !cJSON_IsObject(root)) {
		/* cJSON points end at the error; cJSON_GetErrorPtr() is global. */
		r = !root ? rl_err_set(L->e, RL_E_BAD_INDEX, "%s: invalid JSON at byte %zu", path,
				       end ? (size_t)(end - text) : 0)
			  : rl_err_set(L->e, RL_E_BAD_INDEX, "%s: index is not a JSON object", path);
		rl_free(text);
		return r;
	}
	while (end < text + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
		end++;
	if (end < text + len) {
		r = rl_err_set(L->e, RL_E_BAD_INDEX, "%s: unexpected data after the JSON value "
			       "at byte %zu", path, (size_t)(end - text));
		rl_free(text);
		return r;
	}
	r = index_check_nul(text, len, path, L->e);
	rl_free(text);
	if (r)
		return r;
	wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
	if (!cJSON_IsObject(wm))
		return rl_err_set(L->e, RL_E_BAD_INDEX,
				  "%s: index has no \"weight_map\" object", path);
	for (it = wm->child; it; it = it->next)
		n++;
	L->map = rl_calloc(n ? n : 1, sizeof(*L->map));
	files = rl_calloc(n ? n : 1, sizeof(*files));
	dir = path_dir(path);
	if (!L->map || !files || !dir) {
		r = oom(L->e);
		goto out;
	}
	for (it = wm->child; it; it = it->next) {
		const char *v = cJSON_GetStringValue(it);

		if (!v || !*v) {
			char q[128];

			pl_quote(q, sizeof(q), it->string, strlen(it->string));
			r = rl_err_set(L->e, RL_E_BAD_INDEX, "%s: weight_map entry '%s' "
				       "is not a file name", path, q);
			goto out;
		}
		if (!index_name_ok(v)) {
			char q[128], qf[128];

			pl_quote(q, sizeof(q), it->string, strlen(it->string));
			pl_quote(qf, sizeof(qf), v, strlen(v));
			r = rl_err_set(L->e, RL_E_BAD_INDEX, "%s: weight_map entry '%s': file "
				       "'%s' is outside the index's directory (absolute or "
				       "with a '..' component)", path, q, qf);
			goto out;
		}
		L->map[L->nmap].name = it->string;
		L->map[L->nmap].fname = v;
		L->map[L->nmap].seq = L->nmap;
		L->nmap++;
	}
	/* A repeated key keeps its last value, as Python's json does. */
	qsort(L->map, L->nmap, sizeof(*L->map), cmp_map);
	n = 0;
	for (size_t i = 0; i < L->nmap; i++)
		if (i + 1 == L->nmap || strcmp(L->map[i].name, L->map[i + 1].name))
			L->map[n++] = L->map[i];
	L->nmap = n;

	for (size_t i = 0; i < L->nmap; i++)
		files[i] = L->map[i].fname;
	qsort(files, L->nmap, sizeof(*files), cmp_str);
	for (size_t i = 0; i < L->nmap; i++)
		if (!nu || strcmp(files[nu - 1], files[i]))
			files[nu++] = files[i];
	for (size_t i = 0; i < nu; i++) {
		char *p = path_join(dir, files[i]);

		if (!p || add_file(L->ck, p) < 0) {
			r = oom(L->e);
			goto out;
		}
	}
	for (size_t i = 0; i < L->nmap; i++) {
		const char **hit = bsearch(&L->map[i].fname, files, nu, sizeof(*files), cmp_str);

		L->map[i].file = (uint32_t)(hit - files);
	}
	r = 0;
out:
	rl_free(files);
	rl_free(dir);
	return r;
}

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
	struct pl_meta *tmp = rl_mallocarray(L->nmeta ? L->nmeta : 1, sizeof(*tmp));
	size_t o = 0;

	if (!tmp)
		return oom(L->e);
	for (size_t w = 1; w < L->nmeta; w *= 2) {
		for (size_t lo = 0; lo < L->nmeta; lo += 2 * w) {
			size_t mid = RL_MIN(lo + w, L->nmeta), hi = RL_MIN(lo + 2 * w, L->nmeta);
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
	rl_free(tmp);
	for (size_t i = 0; i < L->nmeta; i++) {
		if (i + 1 < L->nmeta && !strcmp(L->meta[i].key, L->meta[i + 1].key)) {
			rl_free(L->meta[i].key);
			rl_free(L->meta[i].value);
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

	if (L->map) {
		for (size_t i = 0; i < L->nmap; i++) {
			if (L->map[i].found)
				continue;
			pl_quote(q, sizeof(q), L->map[i].name, strlen(L->map[i].name));
			return rl_err_set(L->e, RL_E_MISSING_TENSOR,
					  "%s: tensor '%s' is not in %s", path, q,
					  ck->files[L->map[i].file].path);
		}
	}
	if (ck->ntensors > UINT32_MAX)
		return rl_err_set(L->e, RL_E_TOO_LARGE, "%s: more than 2^32 tensors", path);
	ck->by_name = rl_mallocarray(ck->ntensors ? ck->ntensors : 1, sizeof(*ck->by_name));
	if (!ck->by_name)
		return oom(L->e);
	for (size_t i = 0; i < ck->ntensors; i++)
		ck->by_name[i] = (uint32_t)i;
	qsort_r(ck->by_name, ck->ntensors, sizeof(*ck->by_name), cmp_tensor_name, ck->tensors);
	for (size_t i = 1; i < ck->ntensors; i++) {
		const struct pl_tensor *a = &ck->tensors[ck->by_name[i - 1]];
		const struct pl_tensor *b = &ck->tensors[ck->by_name[i]];

		if (strcmp(a->name, b->name))
			continue;
		pl_quote(q, sizeof(q), a->name, strlen(a->name));
		return rl_err_set(L->e, RL_E_DUPLICATE_TENSOR,
				  "tensor '%s' is in both %s and %s", q,
				  ck->files[RL_MIN(a->file, b->file)].path,
				  ck->files[RL_MAX(a->file, b->file)].path);
	}
	return merge_meta(L);
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

/*
 * Frees what a failed or finished open leaves in L (the checkpoint itself
 * only when it was not handed out).
 */
static void loader_done(struct loader *L, cJSON *tree)
{
	for (size_t i = 0; i < L->nmeta; i++) {
		rl_free(L->meta[i].key);
		rl_free(L->meta[i].value);
	}
	rl_free(L->meta);
	rl_free(L->map);
	rl_free(L->buf);
	cJSON_Delete(tree);
	pl_ckpt_free(L->ck);
}

int pl_ckpt_open(const char *path, struct pl_ckpt **out, struct rl_err *e)
{
	struct loader L = { .e = e };
	cJSON *tree = NULL;
	struct stat st;
	int r;

	*out = NULL;
	if (!path || !*path)
		return rl_err_set(e, RL_E_INVALID_ARG, "empty checkpoint path");
	L.ck = rl_calloc(1, sizeof(*L.ck));
	if (!L.ck)
		return oom(e);
	if (stat(path, &st) < 0) {
		r = sys_err(e, errno, "cannot open", path);
		goto fail;
	}
	if (S_ISDIR(st.st_mode)) {
		r = list_dir(&L, path);
	} else if (ends_with(path, ".json")) {
		r = load_index(&L, path, &tree);
	} else {
		char *p = rl_strdup(path);

		r = p ? add_file(L.ck, p) : -ENOMEM;
		if (r)
			r = oom(e);
	}
	if (r)
		goto fail;
	if (L.ck->nfiles > UINT32_MAX) {
		r = rl_err_set(e, RL_E_TOO_LARGE, "%s: too many files", path);
		goto fail;
	}
	for (size_t i = 0; i < L.ck->nfiles; i++)
		if ((r = load_file(&L, (uint32_t)i)))
			goto fail;
	if ((r = finish(&L, path)))
		goto fail;
	*out = L.ck;
	L.ck = NULL;
	r = 0;
fail:
	loader_done(&L, tree);
	return r;
}

/*
 * One file given by its header bytes (pl_ckpt_from_headers): the checks
 * load_file makes on a file's first bytes, in the reference's order.
 */
static int header_given(struct loader *L, uint32_t fi, const struct pl_file_header *h)
{
	struct pl_file *f = &L->ck->files[fi];

	f->size = h->size;
	if (f->size < 8)
		return rl_err_set(L->e, RL_E_HEADER_TOO_SMALL,
				  "%s: file of %" PRIu64 " bytes is shorter than the 8-byte header length",
				  f->path, f->size);
	if (h->len > PL_MAX_HEADER)
		return rl_err_set(L->e, RL_E_HEADER_TOO_LARGE,
				  "%s: header length %" PRIu64 " is over the limit of %u", f->path,
				  h->len, PL_MAX_HEADER);
	if (h->len + 8 > f->size)
		return rl_err_set(L->e, RL_E_HEADER_LENGTH,
				  "%s: header length %" PRIu64 " runs past the end of the file (%" PRIu64
				  " bytes, truncated?)", f->path, h->len, f->size);
	return keep_header(L, fi, h->header, h->len);
}

int pl_ckpt_from_headers(const struct pl_file_header *files, size_t n, struct pl_ckpt **out,
			 struct rl_err *e)
{
	struct loader L = { .e = e };
	int r = 0;

	*out = NULL;
	if (!(L.ck = rl_calloc(1, sizeof(*L.ck))))
		return oom(e);
	if (n > UINT32_MAX)
		r = rl_err_set(e, RL_E_TOO_LARGE, "checkpoint: too many files");
	for (size_t i = 0; i < n && !r; i++) {
		char *p = rl_strdup(files[i].path);

		if (!p || add_file(L.ck, p) < 0)
			r = oom(e);
		else
			r = header_given(&L, (uint32_t)i, &files[i]);
	}
	if (!r && !n)
		r = rl_err_set(e, -ENOENT, "checkpoint: no files");
	if (!r)
		r = finish(&L, n ? files[0].path : "checkpoint");
	if (!r) {
		*out = L.ck;
		L.ck = NULL;
	}
	loader_done(&L, NULL);
	return r;
}

void pl_ckpt_free(struct pl_ckpt *ck)
{
	if (!ck)
		return;
	for (size_t i = 0; i < ck->nfiles; i++)
		rl_free(ck->files[i].path);
	for (size_t i = 0; i < ck->ntensors; i++) {
		rl_free(ck->tensors[i].name);
		rl_free(ck->tensors[i].shape);
	}
	for (size_t i = 0; i < ck->nmeta; i++) {
		rl_free(ck->meta[i].key);
		rl_free(ck->meta[i].value);
	}
	rl_free(ck->files);
	rl_free(ck->tensors);
	rl_free(ck->by_name);
	rl_free(ck->meta);
	rl_free(ck);
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
