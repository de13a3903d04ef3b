/*
 * rlperf_setup.c - what each job clone reads, by fio's rules (its
 * filesetup.c: setup_files and get_start_offset):
 *
 *  - files: filename split on ':' ("\:" is a colon inside a name), under the
 *    first directory; without filename, each clone has its own file
 *    NAME.CLONE.0 under directory number CLONE (mod their count), as fio
 *    names the files it lays out. rlperf never creates a file: it reads
 *    files fio (or anything) made before.
 *  - a clone's size is split evenly over its files (the first ones get a
 *    block more when it does not divide); without size each file is read
 *    from the offset to its end; size=N% reads N% of each file.
 *  - offset + CLONE * offset_increment starts each file's region;
 *    percentages are of each file's size, and round the start up to bs.
 *  - a clone reads until size bytes are issued: sequential regions end
 *    with a whole block where the file has room for it (so size=10001,
 *    bs=4k reads 3 blocks, as fio does), random ones with the last whole
 *    block; a region past a file's end is refused (fio would extend the
 *    file by writing it).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rlperf.h"

struct names {
	char **v;
	size_t n, cap;
};

static int setup_fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int setup_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(err, errlen, "rlperf: ");

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < errlen)
		vsnprintf(err + n, errlen - n, fmt, ap);
	va_end(ap);
	return -1;
}

static void names_free(struct names *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* Splits s on ':' (a backslash keeps the next character) into l. */
static int split_list(const char *s, struct names *l)
{
	while (s) {
		char *item = malloc(strlen(s) + 1);
		size_t n = 0;

		if (!item || rp_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v))) {
			free(item);
			return -ENOMEM;
		}
		for (; *s && *s != ':'; s++)
			item[n++] = (*s == '\\' && s[1]) ? *++s : *s;
		item[n] = '\0';
		l->v[l->n++] = item;
		s = *s ? s + 1 : NULL;
	}
	return 0;
}

/* dir/name (or name), kept in the plan. */
static const char *plan_path(struct rp_plan *p, const char *dir, const char *name)
{
	size_t len = (dir ? strlen(dir) + 1 : 0) + strlen(name) + 1;
	char *s;

	if (rp_grow((void **)&p->paths, &p->cappaths, p->npaths + 1, sizeof(*p->paths)))
		return NULL;
	s = malloc(len);
	if (!s)
		return NULL;
	snprintf(s, len, "%s%s%s", dir ? dir : "", dir ? "/" : "", name);
	p->paths[p->npaths++] = s;
	return s;
}

/* Size of a regular file or a block device; 0 or -errno (-EINVAL: other).
 * O_NONBLOCK so that a FIFO is refused at once, not waited on forever. */
static int stat_size(const char *path, uint64_t *size, int *is_blk)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	*is_blk = 0;
	if (fstat(fd, &st)) {
		rc = -errno;
	} else if (S_ISBLK(st.st_mode)) {
		*is_blk = 1;
		if (ioctl(fd, BLKGETSIZE64, size))
			rc = -errno;
	} else if (S_ISREG(st.st_mode)) {
		*size = (uint64_t)st.st_size;
	} else {
		rc = -EINVAL;
	}
	close(fd);
	return rc;
}

/* The files of one clone, with their sizes. */
static int clone_files(struct rp_plan *p, const struct rp_job *j, unsigned clone,
		       struct rp_task *t, char *err, size_t errlen)
{
	struct names files = { 0 }, dirs = { 0 };
	char gen[300];
	int rc = 0;

	if (split_list(j->filename, &files) < 0 || split_list(j->directory, &dirs) < 0)
		rc = setup_fail(err, errlen, "out of memory");
	if (!rc && !j->filename) {
		snprintf(gen, sizeof(gen), "%s.%u.0", j->name, clone);
		if (split_list(gen, &files) < 0)
			rc = setup_fail(err, errlen, "out of memory");
	}
	if (!rc && files.n > RP_MAX_FILES)
		rc = setup_fail(err, errlen, "job %s: more than %u files", j->name, RP_MAX_FILES);
	if (!rc && !(t->files = calloc(files.n, sizeof(*t->files))))
		rc = setup_fail(err, errlen, "out of memory");
	for (size_t i = 0; !rc && i < files.n; i++) {
		const char *dir = dirs.n ? dirs.v[j->filename ? 0 : clone % dirs.n] : NULL;
		struct rp_file *f = &t->files[t->nfiles];
		int src;

		f->path = plan_path(p, dir && *dir ? dir : NULL, files.v[i]);
		if (!f->path) {
			rc = setup_fail(err, errlen, "out of memory");
			break;
		}
		src = stat_size(f->path, &f->file_size, &f->is_blk);
		if (src < 0)
			rc = setup_fail(err, errlen, "%s: %s%s", f->path, src == -EINVAL ?
					"not a regular file or block device" : strerror(-src),
					src == -ENOENT ? " (rlperf reads files, it never "
					"creates them)" : "");
		t->nfiles++;
	}
	names_free(&files);
	names_free(&dirs);
	return rc;
}

/* fio's get_start_offset: offset + clone * increment, percentages of the
 * file's size rounded up to a block. */
static int start_offset(const struct rp_job *j, unsigned clone, const struct rp_file *f,
			uint64_t *out)
{
	uint64_t inc = j->offset_increment.v, base = j->offset.v, step, off;
	int align = 0;

	if (j->offset_increment.pct) {
		inc = (uint64_t)((unsigned __int128)f->file_size * j->offset_increment.v / 100);
		align = 1;
	}
	if (j->offset.pct) {
		base = (uint64_t)((unsigned __int128)f->file_size * j->offset.v / 100);
		align = 1;
	}
	if (rp_mul64(inc, clone, &step) || rp_add64(base, step, &off))
		return -1;
	if (align && off % j->bs && rp_add64(off - off % j->bs, j->bs, &off))
		return -1;
	*out = off;
	return 0;
}

/* Blocks a pass reads in f: fio reads a last partial block of a
 * sequential region whole where the file has room, and only whole blocks
 * at random. */
static uint64_t file_blocks(const struct rp_job *j, const struct rp_file *f)
{
	uint64_t room = (f->file_size - f->off) / j->bs, n = f->len / j->bs;

	if (j->rw == RP_READ && f->len % j->bs)
		n++;
	return n < room ? n : room;
}

/* One file's region (fio's setup_files): io bytes from the offset. */
static int file_region(const struct rp_job *j, unsigned clone, struct rp_file *f,
		       uint64_t io, char *err, size_t errlen)
{
	uint64_t end;

	if (start_offset(j, clone, f, &f->off))
		return setup_fail(err, errlen, "job %s: offset past 2^64", j->name);
	if (!io)
		io = f->off < f->file_size ? f->file_size - f->off : 0;
	if (j->size.pct && j->size.v != 100) {
		uint64_t whole = io + f->off;

		io = (uint64_t)((unsigned __int128)whole * j->size.v / 100);
		if (io > whole - f->off)
			io = whole - f->off;
		io -= io % j->bs;
	}
	if (f->off > f->file_size || rp_add64(f->off, io, &end) || end > f->file_size)
		return setup_fail(err, errlen, "job %s: offset %llu + size %llu is past the "
				  "end of %s (%llu bytes); rlperf never writes", j->name,
				  (unsigned long long)f->off, (unsigned long long)io, f->path,
				  (unsigned long long)f->file_size);
	f->len = io;
	f->nblocks = file_blocks(j, f);
	return 0;
}

/* The regions of one clone's files: size split evenly (the first files a
 * block more while the rest does not divide), and the clone's reads: until
 * size bytes (or all regions' bytes) are issued, a started block whole. */
static int clone_regions(const struct rp_job *j, unsigned clone, struct rp_task *t,
			 char *err, size_t errlen)
{
	uint64_t size = j->size.pct ? 0 : j->size.v, total = 0, blocks = 0;
	uint64_t fs = size / t->nfiles, extra = (size - fs * t->nfiles) / j->bs;

	for (size_t i = 0; i < t->nfiles; i++) {
		uint64_t io = fs;
		int rc;

		if (extra) {
			extra--;
			io += j->bs;
		}
		rc = file_region(j, clone, &t->files[i], io, err, errlen);
		if (rc)
			return rc;
		total += t->files[i].len;
		blocks += t->files[i].nblocks;
	}
	if (!size || size > total)
		size = total;
	if (size < j->bs)
		return setup_fail(err, errlen, "job %s: bs %llu is larger than the data to "
				  "read (%llu bytes of %s)", j->name, (unsigned long long)j->bs,
				  (unsigned long long)size, t->files[0].path);
	t->max_ios = size / j->bs + (size % j->bs != 0);
	if (t->max_ios > blocks)
		t->max_ios = blocks;
	return 0;
}

/* O_DIRECT: each region's start and the block size on the file's alignment. */
static int check_direct(const struct rp_job *j, const struct rp_task *t, char *err,
			size_t errlen)
{
	for (size_t i = 0; j->direct && i < t->nfiles; i++) {
		const struct rp_file *f = &t->files[i];
		uint32_t align;
		int direct, rc = eng_raw_align(f->path, &align, &direct);

		if (rc < 0)
			return setup_fail(err, errlen, "%s: %s", f->path, rl_strerror(rc));
		if (direct && (f->off % align || j->bs % align))
			return setup_fail(err, errlen, "direct=1 needs offset and bs in "
					  "multiples of %u bytes on %s (offset=%llu, bs=%llu)",
					  align, f->path, (unsigned long long)f->off,
					  (unsigned long long)j->bs);
	}
	return 0;
}

/* fio's hipri: polled completions, which only O_DIRECT reads of io_uring
 * on a disk with poll queues can have (fio fails the job elsewhere; rlperf
 * reads interrupt-driven and says why, once). */
static void check_hipri(struct rp_plan *p, const struct rp_job *j, struct rp_task *t)
{
	char disk[64] = "", where[PATH_MAX + 128];
	const char *why = NULL;

	if (!j->hipri)
		return;
	if (!(rl_backend_caps((rl_backend)j->engine) & RL_BACKEND_CAP_POLL))
		why = "the pread pool (pvsync2) reads with pread(2), without RWF_HIPRI";
	else if (!j->direct)
		why = "polled reads need direct=1";
	for (size_t i = 0; !why && i < t->nfiles; i++) {
		if (rp_disk_polls(t->files[i].path, disk, sizeof(disk)))
			continue;
		snprintf(where, sizeof(where), "%s: %s%s", t->files[i].path,
			 disk[0] ? disk : "no block device under it",
			 disk[0] ? " has no poll queues (queue/io_poll is 0)" : "");
		why = where;
	}
	t->hipri = !why;
	if (why && !p->notes[0])
		snprintf(p->notes, sizeof(p->notes), "rlperf: hipri: %s; reads are not polled",
			 why);
}

/* fio's td_steadystate_init: every job of a reporting group judges the
 * same steady state, or none does. */
static int check_ss(const struct rp_plan *p, const struct rp_job *j, int group, char *err,
		    size_t errlen)
{
	for (size_t i = 0; i < p->ntasks; i++) {
		const struct rp_job *o = p->tasks[i].job;

		if (p->tasks[i].groupid != group || (!o->ss_dur_ns && !j->ss_dur_ns))
			continue;
		if (o->ss_dur_ns != j->ss_dur_ns || o->ss_ramp_ns != j->ss_ramp_ns ||
		    o->ss_state != j->ss_state || o->ss_limit != j->ss_limit)
			return setup_fail(err, errlen, "job %s: steadystate options must be "
					  "consistent within reporting groups", j->name);
	}
	return 0;
}

/* fio's note when a synchronous engine is given a depth it cannot keep
 * (rp_job_depth): once, after any other note. */
static void check_sync_depth(struct rp_plan *p, const struct rp_job *j)
{
	size_t n = strlen(p->notes);

	if (rp_job_depth(j) >= j->iodepth || strstr(p->notes, "capped at 1"))
		return;
	snprintf(p->notes + n, sizeof(p->notes) - n, "%snote: both iodepth >= 1 and synchronous "
		 "I/O engine are selected, queue depth will be capped at 1", n ? "\n" : "");
}

int rp_setup(const struct rp_conf *c, struct rp_plan *p, char *err, size_t errlen)
{
	size_t n = 0;
	int rc = 0;

	memset(p, 0, sizeof(*p));
	for (size_t i = 0; i < c->njobs; i++)
		n += c->jobs[i].numjobs;
	if (n > RP_MAX_JOBS)
		return setup_fail(err, errlen, "%zu job clones (at most %u)", n, RP_MAX_JOBS);
	p->tasks = calloc(n ? n : 1, sizeof(*p->tasks));
	if (!p->tasks)
		return setup_fail(err, errlen, "out of memory");
	for (size_t i = 0, group = 0; i < c->njobs && !rc; i++) {
		const struct rp_job *j = &c->jobs[i];

		/* fio's add_job: a stonewall or new_group job after others
		 * starts the next group (its clones stay in it) */
		if (i && (j->stonewall || j->new_group))
			group++;
		rc = check_ss(p, j, (int)group, err, errlen);
		check_sync_depth(p, j);
		for (unsigned k = 0; k < j->numjobs && !rc; k++) {
			struct rp_task *t = &p->tasks[p->ntasks++];

			t->job = j;
			t->job_index = i;
			t->clone = k;
			t->groupid = (int)group;
			rc = clone_files(p, j, k, t, err, errlen);
			if (!rc)
				rc = clone_regions(j, k, t, err, errlen);
			if (!rc)
				rc = check_direct(j, t, err, errlen);
			if (!rc)
				check_hipri(p, j, t);
		}
	}
	if (rc)
		rp_plan_free(p);
	return rc;
}

void rp_plan_free(struct rp_plan *p)
{
	for (size_t i = 0; i < p->ntasks; i++)
		free(p->tasks[i].files);
	free(p->tasks);
	for (size_t i = 0; i < p->npaths; i++)
		free(p->paths[i]);
	free(p->paths);
	memset(p, 0, sizeof(*p));
}

int rp_invalidate(const struct rp_file *f, int fd)
{
	if (!f->len)
		return 0;  /* fadvise would take 0 as "to the end" */
	if (f->is_blk)
		return ioctl(fd, BLKFLSBUF, 0) ? -errno : 0;
	return -posix_fadvise(fd, (off_t)f->off, (off_t)f->len, POSIX_FADV_DONTNEED);
}
