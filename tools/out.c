/* out.c - see out.h. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "out.h"
#include "cli_helpers.h"

#define CHUNK (8u << 20)  /* bytes per write between progress calls */

static int fail(struct out_dir *o, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct out_dir *o, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (vsnprintf(o->err, sizeof(o->err), fmt, ap) >= (int)sizeof(o->err))
		cli_mark_cut(o->err, sizeof(o->err));
	va_end(ap);
	return code;
}

/* ------------------------------------------------------------------ */
/* Names                                                               */
/* ------------------------------------------------------------------ */

/*
 * name percent-encoded ('/' and '%') into out (n bytes); the empty name as
 * "%00" (a NUL, which no other name holds), not the hidden ".bin". Returns
 * the length of "<encoded>.bin", or -1 when that passes NAME_MAX (no such
 * file can be).
 */
static int encode_name(const char *name, char *out, size_t n)
{
	size_t j = 0;

	if (!*name) {
		snprintf(out, n, "%%00");
		return 3 + 4;
	}
	for (; *name; name++) {
		if (j + 4 + 4 >= n || j + 4 > NAME_MAX)
			return -1;
		if (*name == '/' || *name == '%')
			j += (size_t)snprintf(out + j, n - j, "%%%02X", (unsigned char)*name);
		else
			out[j++] = *name;
	}
	if (j + 4 > NAME_MAX)
		return -1;
	out[j] = '\0';
	return (int)(j + 4);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every tensor of the plan once, sorted; the bytes of all its shards. */
static int collect_names(struct out_dir *o, const rl_plan *plan)
{
	size_t nsh = rl_plan_num_shards(plan), n = 0;
	char enc[NAME_MAX + 16];

	o->names = calloc(nsh ? nsh : 1, sizeof(*o->names));
	if (!o->names)
		return fail(o, -ENOMEM, "out of memory");
	for (size_t s = 0; s < nsh; s++) {
		rl_shard_info si;

		rl_plan_shard(plan, s, &si);
		o->names[n++] = si.name;
		o->total += si.nbytes;
	}
	qsort(o->names, n, sizeof(*o->names), cmp_str);
	o->nnames = n ? 1 : 0;
	for (size_t i = 1; i < n; i++)
		if (strcmp(o->names[o->nnames - 1], o->names[i]))
			o->names[o->nnames++] = o->names[i];
	for (size_t i = 0; i < o->nnames; i++)
		if (encode_name(o->names[i], enc, sizeof(enc)) < 0)
			return fail(o, RL_E_INVALID_ARG,
				    "--out: tensor \"%.64s...\" (%zu bytes): its file name "
				    "(percent-encoded, + .bin) would exceed %d bytes",
				    o->names[i], strlen(o->names[i]), NAME_MAX);
	return 0;
}

/* Absolute paths of the checkpoint's files, for the manifests. */
static int resolve_sources(struct out_dir *o, const rl_ckpt *ck)
{
	o->nsources = rl_ckpt_num_files(ck);
	o->sources = calloc(o->nsources ? o->nsources : 1, sizeof(*o->sources));
	if (!o->sources)
		return fail(o, -ENOMEM, "out of memory");
	for (size_t i = 0; i < o->nsources; i++) {
		const char *p = rl_ckpt_file_path(ck, i);

		o->sources[i] = realpath(p, NULL);
		if (!o->sources[i])
			o->sources[i] = strdup(p);
		if (!o->sources[i])
			return fail(o, -ENOMEM, "out of memory");
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* The partial directory                                               */
/* ------------------------------------------------------------------ */

static int set_paths(struct out_dir *o, const char *dir, long tag)
{
	size_t n = strlen(dir);
	const char *base;

	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (n >= sizeof(o->dir) - 32)
		return fail(o, -ENAMETOOLONG, "--out %s: %s", dir, strerror(ENAMETOOLONG));
	memcpy(o->dir, dir, n);
	o->dir[n] = '\0';
	base = strrchr(o->dir, '/');
	base = base ? base + 1 : o->dir;
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return fail(o, RL_E_INVALID_ARG, "--out %s: names no directory to create", dir);
	if (snprintf(o->partial, sizeof(o->partial), "%s.partial-%ld", o->dir, tag) >=
	    (int)sizeof(o->partial))
		return fail(o, -ENAMETOOLONG, "--out %s: %s", dir, strerror(ENAMETOOLONG));
	return 0;
}

#define DUMP_MAGIC "{\"format\":\"ringload-dump\""

/* Device folder dev of DIR is one that `--out` wrote: its manifest.json
 * begins as ours do, and everything else in it is a .bin file. */
static int is_dump_folder(struct out_dir *o, const char *dev)
{
	char path[PATH_MAX], head[sizeof(DUMP_MAGIC)] = "";
	struct dirent *e;
	FILE *f;
	DIR *d;
	int ret = 0;

	if (snprintf(path, sizeof(path), "%s/%s/manifest.json", o->dir, dev) >= (int)sizeof(path))
		return fail(o, -ENAMETOOLONG, "--out %s/%s: %s", o->dir, dev, strerror(ENAMETOOLONG));
	f = fopen(path, "re");
	if (!f || fread(head, 1, sizeof(head) - 1, f) != sizeof(head) - 1 ||
	    strcmp(head, DUMP_MAGIC) != 0)
		ret = fail(o, RL_E_INVALID_ARG,
			   "--out %s: not replaced: folder '%s' has no ringload manifest.json, so it "
			   "is not part of a ringload dump (--force replaces only an earlier dump or "
			   "an empty directory)", o->dir, dev);
	if (f)
		fclose(f);
	if (!ret && snprintf(path, sizeof(path), "%s/%s", o->dir, dev) >= (int)sizeof(path))
		return fail(o, -ENAMETOOLONG, "--out %s/%s: %s", o->dir, dev, strerror(ENAMETOOLONG));
	d = ret ? NULL : opendir(path);
	if (!ret && !d)
		return fail(o, -errno, "--out %s: %s", path, strerror(errno));
	while (!ret && d && (e = readdir(d))) {
		size_t n = strlen(e->d_name);

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    !strcmp(e->d_name, "manifest.json") ||
		    (n > 4 && !strcmp(e->d_name + n - 4, ".bin")))
			continue;
		ret = fail(o, RL_E_INVALID_ARG,
			   "--out %s: not replaced: it holds '%s/%s', which is not part of a "
			   "ringload dump (--force replaces only an earlier dump or an empty "
			   "directory)", o->dir, dev, e->d_name);
	}
	if (d)
		closedir(d);
	return ret;
}

/* DIR holds nothing but device folders (decimal names) that `--out`
 * wrote: an earlier dump. Anything else is the user's, never removed. */
static int is_dump(struct out_dir *o)
{
	DIR *d = opendir(o->dir);
	struct dirent *e;
	int ret = 0;

	if (!d)
		return fail(o, -errno, "--out %s: %s", o->dir, strerror(errno));
	while (!ret && (e = readdir(d))) {
		size_t n = strlen(e->d_name);

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (strspn(e->d_name, "0123456789") != n)
			ret = fail(o, RL_E_INVALID_ARG,
				   "--out %s: not replaced: it holds '%s', which is not part of a "
				   "ringload dump (--force replaces only an earlier dump or an empty "
				   "directory)", o->dir, e->d_name);
		else
			ret = is_dump_folder(o, e->d_name);
	}
	closedir(d);
	return ret;
}

/* DIR may be written: absent, or replaced under OUT_FORCE. */
static int check_target(struct out_dir *o)
{
	struct stat sb;

	if (lstat(o->dir, &sb) < 0)
		return errno == ENOENT ? 0 : fail(o, -errno, "--out %s: %s", o->dir, strerror(errno));
	if (!S_ISDIR(sb.st_mode))
		return fail(o, -ENOTDIR, "--out %s: exists and is not a directory", o->dir);
	if (!(o->flags & OUT_FORCE))
		return fail(o, -EEXIST, "--out %s: exists (--force replaces an earlier dump)",
			    o->dir);
	return is_dump(o);
}

static int mkdir_parents(struct out_dir *o)
{
	char buf[PATH_MAX];

	snprintf(buf, sizeof(buf), "%s", o->dir);
	for (char *c = buf + 1; *c; c++) {
		if (*c != '/')
			continue;
		*c = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return fail(o, -errno, "--out %s: cannot create %s: %s", o->dir, buf,
				    strerror(errno));
		*c = '/';
	}
	return 0;
}

static int make_partial(struct out_dir *o)
{
	struct stat sb;
	int ret = mkdir_parents(o);

	if (ret)
		return ret;
	if (o->flags & OUT_JOIN) {
		if (stat(o->partial, &sb) < 0 || !S_ISDIR(sb.st_mode))
			return fail(o, -ENOENT, "--out %s: no partial directory %s to join",
				    o->dir, o->partial);
		return 0;
	}
	if (mkdir(o->partial, 0755) < 0)
		return fail(o, -errno, "--out %s: cannot create %s: %s%s", o->dir, o->partial,
			    strerror(errno),
			    errno == EEXIST ? " (left by an interrupted run? remove it)" : "");
	o->created = 1;
	return 0;
}

int out_begin(struct out_dir *o, const char *dir, long tag, int flags, const rl_ckpt *ck,
	      const rl_plan *plan)
{
	int ret;

	memset(o, 0, sizeof(*o));
	o->flags = flags;
	ret = set_paths(o, dir, tag);
	if (!ret)
		ret = collect_names(o, plan);
	if (!ret)
		ret = resolve_sources(o, ck);
	if (!ret && !(flags & OUT_JOIN))
		ret = check_target(o);
	if (!ret)
		ret = make_partial(o);
	if (ret)
		out_abort(o);
	return ret;
}

/* Renamed aside first: a writer still at work (the watchdog removes the
 * tree while the main thread may be writing) finds no path to create in. */
void out_remove_partial(struct out_dir *o, int (*stop)(void))
{
	char gone[PATH_MAX + 32];
	const char *at = gone;
	int r;

	if (!atomic_exchange(&o->created, 0))  /* one remover, whichever thread */
		return;
	snprintf(gone, sizeof(gone), "%s.removing-%d", o->dir, (int)getpid());
	if (rename(o->partial, gone) < 0)
		at = o->partial;
	if (cli_remove_tree_until(at, stop) == 1 && (r = cli_remove_tree_later(at)) < 0)
		fprintf(stderr, "ringload: --out %s: cannot remove %s in the background: %s; "
			"remove it by hand\n", o->dir, at, strerror(-r));
}

void out_abort(struct out_dir *o)
{
	out_remove_partial(o, NULL);
	for (size_t i = 0; o->sources && i < o->nsources; i++)
		free(o->sources[i]);
	free(o->sources);
	free(o->names);
	free(o->writes);
	o->writes = NULL;
	o->nwrites = 0;
	o->sources = NULL;
	o->names = NULL;
	o->nsources = o->nnames = 0;
}

/* ------------------------------------------------------------------ */
/* One device's folder                                                 */
/* ------------------------------------------------------------------ */

/* Shards [*first, *end) of device dev (shards are ordered by device). */
static void device_shards(const rl_plan *plan, unsigned dev, size_t *first, size_t *end)
{
	size_t lo = 0, hi = rl_plan_num_shards(plan), n = hi;
	rl_shard_info si;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		rl_plan_shard(plan, mid, &si);
		if (si.device < dev)
			lo = mid + 1;
		else
			hi = mid;
	}
	*first = lo;
	while (hi < n && rl_plan_shard(plan, hi, &si) == 0 && si.device == dev)
		hi++;
	*end = hi;
}

/* Creates path (it must not exist) with n bytes, in chunks between which
 * fn may stop the write. */
static int write_bin(struct out_dir *o, const char *path, const uint8_t *p, uint64_t n,
		     out_progress_fn fn, void *user)
{
	int fd, ret = 0;

	if (fn && fn(user, o->done, o->total))
		return fail(o, RL_E_CANCELED, "%s: canceled", path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return fail(o, -errno, "%s: %s", path, strerror(errno));
	while (n && !ret) {
		size_t len = n > CHUNK ? CHUNK : (size_t)n;

		ret = cli_write_all(fd, p, len);
		p += len;
		n -= len;
		o->done += len;
		if (!ret && fn && fn(user, o->done, o->total))
			ret = RL_E_CANCELED;
	}
	if (close(fd) < 0 && !ret)
		ret = -errno;
	if (ret == RL_E_CANCELED)
		return fail(o, ret, "%s: canceled", path);
	return ret ? fail(o, ret, "%s: %s", path, strerror(-ret)) : 0;
}

static int bin_path(const struct out_dir *o, const char *folder, const char *name, char *path,
		    size_t cap)
{
	char enc[NAME_MAX + 16];

	encode_name(name, enc, sizeof(enc));  /* fits: collect_names() checked */
	return snprintf(path, cap, "%s/%s.bin", folder, enc) >= (int)cap ? -ENAMETOOLONG : 0;
}

static long name_index(const struct out_dir *o, const char *name)
{
	const char **hit = bsearch(&name, o->names, o->nnames, sizeof(*o->names), cmp_str);

	return hit ? hit - o->names : -1;
}

/* The device's shards, then an empty file for every tensor it holds none of. */
static int write_bins(struct out_dir *o, const rl_plan *plan, size_t first, size_t end,
		      const uint8_t *staging, const char *folder, out_progress_fn fn,
		      void *user, int stream)
{
	unsigned char *have = calloc(o->nnames ? o->nnames : 1, 1);
	char path[PATH_MAX];
	int ret = have ? 0 : fail(o, -ENOMEM, "out of memory");

	for (size_t s = first; s < end && !ret; s++) {
		rl_shard_info si;
		long k;

		rl_plan_shard(plan, s, &si);
		k = name_index(o, si.name);
		if (k < 0 || have[k])
			continue;  /* a name twice on one device: the first shard holds it */
		have[k] = 1;
		if (stream) /* created empty: the pieces fill it */
			o->writes[s] = 1;
		ret = bin_path(o, folder, si.name, path, sizeof(path));
		if (!ret && si.nbytes && !staging && !stream)
			ret = fail(o, -EFAULT, "%s: no staging area", path);
		if (!ret)
			ret = write_bin(o, path, si.nbytes && !stream ? staging + si.offset : NULL,
					stream ? 0 : si.nbytes, fn, user);
	}
	for (size_t i = 0; i < o->nnames && !ret; i++) {
		if (have[i])
			continue;
		ret = bin_path(o, folder, o->names[i], path, sizeof(path));
		if (!ret)
			ret = write_bin(o, path, NULL, 0, fn, user);
	}
	free(have);
	return ret;
}

static void json_dims(FILE *f, const char *key, const uint64_t *v, unsigned n)
{
	fprintf(f, ",\"%s\":[", key);
	for (unsigned d = 0; d < n; d++)
		fprintf(f, "%s%" PRIu64, d ? "," : "", v[d]);
	fputc(']', f);
}

/* Where the whole tensor's data begins in the checkpoint; 0 if the shard
 * is not a slice of one checkpoint tensor (an assembled target). */
static int shard_source(const rl_ckpt *ck, const rl_shard_info *si, rl_tensor_info *ti)
{
	long t = rl_ckpt_find(ck, si->name);

	if (t < 0 || rl_ckpt_tensor(ck, (size_t)t, ti) < 0 || ti->dtype != si->dtype ||
	    ti->ndim != si->ndim)
		return 0;
	for (unsigned d = 0; d < si->ndim; d++)
		if (ti->shape[d] != si->shape[d])
			return 0;
	return 1;
}

static void manifest_shard(FILE *f, const struct out_dir *o, const rl_ckpt *ck,
			   const rl_shard_info *si)
{
	char enc[NAME_MAX + 16];
	rl_tensor_info ti;

	encode_name(si->name, enc, sizeof(enc));
	strcat(enc, ".bin");  /* fits: encode_name() kept room for it */
	fprintf(f, "{\"name\":");
	cli_json_str(f, si->name);
	fprintf(f, ",\"dtype\":\"%s\"", rl_dtype_name(si->dtype));
	json_dims(f, "shape", si->shape, si->ndim);
	json_dims(f, "start", si->start, si->ndim);
	json_dims(f, "stop", si->stop, si->ndim);
	fprintf(f, ",\"nbytes\":%" PRIu64 ",\"bin\":", si->nbytes);
	cli_json_str(f, enc);
	if (shard_source(ck, si, &ti) && ti.file < o->nsources) {
		fputc(',', f);
		cli_json_path(f, "source_file", o->sources[ti.file]);
		fprintf(f, ",\"source_offset\":%" PRIu64 "}", ti.offset);
	} else {
		fprintf(f, ",\"source_file\":null,\"source_offset\":null}");
	}
}

static int write_manifest(struct out_dir *o, const rl_ckpt *ck, const rl_plan *plan,
			  size_t first, size_t end, uint32_t id, const char *folder)
{
	char path[PATH_MAX];
	FILE *f;
	int bad;

	if (snprintf(path, sizeof(path), "%s/manifest.json", folder) >= (int)sizeof(path))
		return fail(o, -ENAMETOOLONG, "%s: %s", folder, strerror(ENAMETOOLONG));
	f = fopen(path, "wx");
	if (!f)
		return fail(o, -errno, "%s: %s", path, strerror(errno));
	fprintf(f, "{\"format\":\"ringload-dump\",\"version\":1,\"device\":%" PRIu32
		",\n\"shards\":[", id);
	for (size_t s = first; s < end; s++) {
		rl_shard_info si;

		rl_plan_shard(plan, s, &si);
		fprintf(f, "%s\n", s > first ? "," : "");
		manifest_shard(f, o, ck, &si);
	}
	fprintf(f, "]}\n");
	bad = ferror(f);
	if (fclose(f) || bad)
		return fail(o, -EIO, "%s: cannot write: %s", path, strerror(errno ? errno : EIO));
	return 0;
}

/* The folder of device dev: from staging, or (stream) created empty. */
static int device_folder(struct out_dir *o, const rl_ckpt *ck, const rl_plan *plan,
			 unsigned dev, const uint8_t *staging, out_progress_fn fn, void *user,
			 int stream)
{
	char folder[PATH_MAX];
	rl_device_info di;
	size_t first, end;
	int ret;

	if (rl_plan_device(plan, dev, &di) < 0)
		return fail(o, -EINVAL, "--out: no device %u in the plan", dev);
	if (snprintf(folder, sizeof(folder), "%s/%" PRIu32, o->partial, di.id) >=
	    (int)sizeof(folder))
		return fail(o, -ENAMETOOLONG, "%s: %s", o->partial, strerror(ENAMETOOLONG));
	if (mkdir(folder, 0755) < 0)
		return fail(o, -errno, "%s: %s", folder, strerror(errno));
	device_shards(plan, dev, &first, &end);
	ret = write_bins(o, plan, first, end, staging, folder, fn, user, stream);
	if (!ret)
		ret = write_manifest(o, ck, plan, first, end, di.id, folder);
	return ret;
}

int out_write_device(struct out_dir *o, const rl_ckpt *ck, const rl_plan *plan, unsigned dev,
		     const uint8_t *staging, out_progress_fn fn, void *user)
{
	return device_folder(o, ck, plan, dev, staging, fn, user, 0);
}

int out_stream_device(struct out_dir *o, const rl_ckpt *ck, const rl_plan *plan, unsigned dev,
		      out_progress_fn fn, void *user)
{
	size_t n = rl_plan_num_shards(plan);

	if (!o->writes) {
		o->writes = calloc(n ? n : 1, 1);
		o->nwrites = n;
		if (!o->writes)
			return fail(o, -ENOMEM, "out of memory");
	}
	return device_folder(o, ck, plan, dev, NULL, fn, user, 1);
}

int out_write_piece(struct out_dir *o, const rl_plan *plan, const rl_piece *p)
{
	char folder[PATH_MAX], path[PATH_MAX];
	rl_shard_info si;
	rl_device_info di;
	ssize_t got = 0;
	int fd;

	if (p->shard >= o->nwrites || !o->writes[p->shard] || !p->length)
		return 0;
	rl_plan_shard(plan, p->shard, &si);
	rl_plan_device(plan, si.device, &di);
	if (snprintf(folder, sizeof(folder), "%s/%" PRIu32, o->partial, di.id) >=
	    (int)sizeof(folder) || bin_path(o, folder, si.name, path, sizeof(path)) < 0)
		return fail(o, -ENAMETOOLONG, "%s: %s", folder, strerror(ENAMETOOLONG));
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(o, -errno, "%s: %s", path, strerror(errno));
	for (uint64_t at = 0; at < p->length && got >= 0; at += (uint64_t)got) {
		got = pwrite(fd, (const uint8_t *)p->data + at, p->length - at,
			     (off_t)(p->offset + at));
		if (got == 0) { /* a regular file takes every byte or fails */
			errno = EIO;
			got = -1;
		}
	}
	if (close(fd) < 0 || got < 0)
		return fail(o, -errno, "%s: %s", path, strerror(errno));
	o->done += p->length;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Publishing                                                          */
/* ------------------------------------------------------------------ */

/* The rename is durable once DIR's parent directory is synced. */
static void sync_parent(const struct out_dir *o)
{
	char parent[PATH_MAX];
	char *slash;
	int fd;

	snprintf(parent, sizeof(parent), "%s", o->dir);
	slash = strrchr(parent, '/');
	if (slash)
		*(slash == parent ? slash + 1 : slash) = '\0';
	fd = open(slash ? parent : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

/* partial -> DIR, refusing to replace a DIR that appeared meanwhile. */
static int rename_new(struct out_dir *o)
{
	struct stat sb;

	int err = 0;

	if (renameat2(AT_FDCWD, o->partial, AT_FDCWD, o->dir, RENAME_NOREPLACE) == 0)
		return 0;
	err = errno;
	/* File systems without RENAME_NOREPLACE: check, then rename. */
	if (err == EINVAL) {
		if (lstat(o->dir, &sb) == 0)
			err = EEXIST;
		else if (rename(o->partial, o->dir) == 0)
			return 0;
		else
			err = errno;
	}
	if (err == EEXIST || err == ENOTEMPTY)
		return fail(o, -EEXIST, "--out %s: appeared while the dump was written; left as "
			    "it is", o->dir);
	return fail(o, -err, "--out: rename %s to %s: %s", o->partial, o->dir, strerror(err));
}

/* The old dump goes; when o->stop says stop midway (a signal: the exit
 * must not wait for 100k files), a child process removes the rest. */
static void remove_old(struct out_dir *o, const char *gone)
{
	int r = cli_remove_tree_until(gone, o->stop);

	if (r == 1) {
		r = cli_remove_tree_later(gone);
		if (!r)
			snprintf(o->warn, sizeof(o->warn), "--out %s: the old dump (now %s) is "
				 "being removed in the background", o->dir, gone);
	}
	if (r < 0)
		snprintf(o->warn, sizeof(o->warn), "--out %s: replaced, but removing the old dump "
			 "(now %s) failed: %s", o->dir, gone, strerror(-r));
}

/* partial <-> DIR in one step, then the old tree goes (renamed DIR.old-PID,
 * so that nothing named partial outlives the command). */
static int replace(struct out_dir *o)
{
	char old[PATH_MAX + 32];
	const char *gone = old;
	int r;

	snprintf(old, sizeof(old), "%s.old-%d", o->dir, (int)getpid());
	if (renameat2(AT_FDCWD, o->partial, AT_FDCWD, o->dir, RENAME_EXCHANGE) == 0) {
		if (rename(o->partial, old) < 0)
			gone = o->partial;
	} else {
		if (errno == ENOENT)
			return rename_new(o);
		if (errno != EINVAL)
			return fail(o, -errno, "--out: exchange %s with %s: %s", o->partial,
				    o->dir, strerror(errno));
		/* No RENAME_EXCHANGE here: two renames, DIR briefly absent. */
		if (rename(o->dir, old) < 0)
			return fail(o, -errno, "--out: rename %s: %s", o->dir, strerror(errno));
		if (rename(o->partial, o->dir) < 0) {
			r = -errno;
			rename(old, o->dir);
			return fail(o, r, "--out: rename %s: %s", o->partial, strerror(-r));
		}
	}
	o->created = 0;  /* what is left at `gone` is the old dump, not ours */
	remove_old(o, gone);
	return 0;
}

int out_publish(struct out_dir *o, out_progress_fn fn, void *user)
{
	int fd = open(o->partial, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret;

	if (fd < 0)
		return fail(o, -errno, "%s: %s", o->partial, strerror(errno));
	/* One syncfs for every file written, rather than an fsync per file. */
	ret = syncfs(fd) < 0 ? -errno : 0;
	close(fd);
	if (ret)
		return fail(o, ret, "--out: syncing %s: %s", o->partial, strerror(-ret));
	if (fn && fn(user, o->done, o->total))
		return fail(o, RL_E_CANCELED, "%s: canceled before publishing", o->partial);
	ret = o->flags & OUT_FORCE ? replace(o) : rename_new(o);
	if (ret)
		return ret;
	o->created = 0;
	sync_parent(o);
	return 0;
}
