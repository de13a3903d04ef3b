/*
 * open_files.c - the files of a run: a buffered descriptor for each, an
 * O_DIRECT one where the file system allows it and the file is read from
 * its device, what the page cache holds of the bytes the reads take, and
 * the device queue under each file (devq.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devq.h"
#include "eng_int.h"
#include "probe.h"

#define HOT_PERMILLE 900        /* resident share from which a file is read buffered */
#define PROBE_RANGES_MAX 4096   /* exact ranges per file; past that, one span */

/* The ranges of one file being measured: [lo, hi) pending, what was
 * measured so far. */
struct probe {
	uint64_t lo, hi;
	uint64_t needed, resident;
	unsigned ranges;
	int err;
};

static void probe_flush(struct eng_run *rc, struct eng_file *f, struct probe *p)
{
	int64_t got;

	if (p->hi <= p->lo)
		return;
	p->needed += p->hi - p->lo;
	if (!p->err && rc->cx.o->direct == ENG_DIRECT_AUTO) {
		got = eng_cached_bytes(f->fd, p->lo, p->hi - p->lo,
				       eng_hook_mincore_only(rc), &f->st.probe_mincore);
		if (got < 0)
			p->err = (int)got;
		else
			p->resident += CM_MIN((uint64_t)got, p->hi - p->lo);
	}
	p->ranges++;
	p->lo = p->hi = 0;
}

/* Adds read r to its file's pending range, measuring the previous range
 * when r does not continue it. Reads not yet checked: bad ones skipped. */
static void probe_add(struct eng_run *rc, struct probe *ps, const struct cm_read *r)
{
	struct probe *p;
	uint64_t end;

	if (r->file >= rc->cx.nfiles || !r->len || cm_add64(r->off, r->len, &end))
		return;
	p = ps + r->file;
	/* Overlapping or touching the pending range: one range; past the
	 * cap, everything is (the span between, measured once). */
	if (p->hi > p->lo && ((r->off <= p->hi && end >= p->lo) ||
			      p->ranges >= PROBE_RANGES_MAX)) {
		p->lo = CM_MIN(p->lo, r->off);
		p->hi = CM_MAX(p->hi, end);
		return;
	}
	probe_flush(rc, rc->cx.files + r->file, p);
	p->lo = r->off;
	p->hi = end;
}

/* The bytes each file's reads take and, in AUTO mode, how many of them
 * the page cache holds. */
static int measure(struct eng_run *rc)
{
	const struct eng_job *job = rc->b.job;
	struct probe *ps = cm_calloc(rc->cx.nfiles ? rc->cx.nfiles : 1, sizeof(*ps));

	if (!ps)
		return cm_err_set(rc->b.e, -ENOMEM, "out of memory");
	for (size_t i = 0; job->reads && i < job->nreads; i++)
		probe_add(rc, ps, job->reads + i);
	for (size_t i = 0; i < rc->cx.nfiles; i++) {
		struct eng_file *f = rc->cx.files + i;

		probe_flush(rc, f, ps + i);
		f->st.needed = ps[i].needed;
		f->st.resident = ps[i].resident;
		f->st.probed = rc->cx.o->direct == ENG_DIRECT_AUTO && !ps[i].err && job->reads;
	}
	cm_free(ps);
	return 0;
}

/* Opens f's O_DIRECT descriptor where the file system allows it. */
static int open_direct(struct eng_run *rc, struct eng_file *f)
{
	struct eng_align al;
	int ret = eng_probe_align(f->path, &al);

	if (ret < 0)
		return cm_err_set(rc->b.e, ret, "%s: %s", f->path, strerror(-ret));
	if (!al.direct)
		return 0;
	f->dfd = open(f->path, O_RDONLY | O_CLOEXEC | O_DIRECT);
	if (f->dfd >= 0)
		f->align = CM_MAX(al.offset_align, al.mem_align);
	return 0;
}

/* Chooses how file f is read: buffered when asked, when the page cache
 * holds its needed bytes (AUTO), or when O_DIRECT is refused. */
static int choose_mode(struct eng_run *rc, struct eng_file *f)
{
	struct eng_file_stat *st = &f->st;
	int ret;

	if (rc->b.job->reads && !st->needed) {
		st->mode = ENG_FILE_UNUSED;
		return 0;
	}
	if (st->probed && st->resident * 1000 >= st->needed * HOT_PERMILLE) {
		st->mode = ENG_FILE_CACHED;
		return 0;
	}
	if (rc->cx.o->direct != ENG_DIRECT_OFF) {
		ret = open_direct(rc, f);
		if (ret < 0)
			return ret;
	}
	st->mode = f->dfd >= 0 ? ENG_FILE_DIRECT : ENG_FILE_BUFFERED;
	return 0;
}

int eng_open_files(struct eng_run *rc)
{
	const struct eng_job *job = rc->b.job;
	int ret;

	rc->cx.files = cm_calloc(job->nfiles ? job->nfiles : 1, sizeof(*rc->cx.files));
	if (!rc->cx.files)
		return cm_err_set(rc->b.e, -ENOMEM, "out of memory");
	for (size_t i = 0; i < job->nfiles; i++)
		rc->cx.files[i].fd = rc->cx.files[i].dfd = -1;
	rc->cx.nfiles = job->nfiles;
	for (size_t i = 0; i < job->nfiles; i++) {
		struct eng_file *f = rc->cx.files + i;
		struct stat sb;

		f->path = job->paths[i];
		f->align = 1;
		f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
		if (f->fd < 0)
			return cm_err_set(rc->b.e, -errno, "%s: open: %s", f->path, strerror(errno));
		if (fstat(f->fd, &sb) == 0)
			eng_devq_probe("/sys", (uint64_t)sb.st_dev, &f->st.q);
	}
	ret = measure(rc);
	for (size_t i = 0; ret == 0 && i < job->nfiles; i++)
		ret = choose_mode(rc, rc->cx.files + i);
	return ret;
}

void eng_close_files(struct eng_run *rc)
{
	for (size_t i = 0; rc->cx.files && i < rc->cx.nfiles; i++) {
		if (rc->cx.files[i].fd >= 0)
			close(rc->cx.files[i].fd);
		if (rc->cx.files[i].dfd >= 0)
			close(rc->cx.files[i].dfd);
	}
	cm_free(rc->cx.files);
	rc->cx.files = NULL;
}
