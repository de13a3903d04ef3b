/*
 * open_files.c - the files of a run: a buffered descriptor for each, an
 * O_DIRECT one where the file system allows it and the file is read from
 * its device, what the page cache holds of the bytes the reads take, and
 * the device queue under each file (devq.c).
 *
 * The page-cache probe is cheap by construction: a range longer than
 * PROBE_SAMPLED is measured at PROBE_SAMPLES evenly spaced pieces of
 * PROBE_PIECE bytes (16 MiB of a 4 GiB file), whose share scales to the
 * range. cachestat over a whole hot 4 GiB file walked a million page-cache
 * entries per load (3.5% of a streaming load's CPU on tmpfs). tmpfs is not
 * probed: its pages are its medium, always resident, so the probe cannot
 * tell a hot file from a cold one. It is read with O_DIRECT where the
 * kernel allows it (Linux 6.6), as fio reads it; shmem's read path looks
 * each page up either way, and both modes measured alike (8.5-9.4 against
 * 8.7-9.6 GB/s, 4 GiB, 2 CPUs).
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
#define PROBE_SAMPLES 64u       /* pieces measured of a long range */
#define PROBE_PIECE (256u << 10) /* bytes of each piece */
#define PROBE_SAMPLED (4ull * PROBE_SAMPLES * PROBE_PIECE) /* ranges past this: sampled */

/* The ranges of one file being measured: [lo, hi) pending, what was
 * measured so far. */
struct probe {
	uint64_t lo, hi;
	uint64_t needed, resident, asked;
	unsigned ranges;
	int blind;              /* the page cache is the medium: not measured */
	int err;
};

/* Resident bytes of [lo, hi) of f, measured whole or, past PROBE_SAMPLED,
 * at PROBE_SAMPLES pieces and scaled; adds the bytes asked to *asked. */
static int64_t probe_range(struct eng_run *rc, struct eng_file *f, uint64_t lo, uint64_t hi,
			   uint64_t *asked)
{
	uint64_t len = hi - lo, step = len / PROBE_SAMPLES, seen = 0, got = 0;
	int mincore_only = eng_hook_mincore_only(rc);
	int64_t n;

	if (len <= PROBE_SAMPLED) {
		*asked += len;
		return eng_cached_bytes(f->fd, lo, len, mincore_only, &f->st.probe_mincore);
	}
	for (unsigned i = 0; i < PROBE_SAMPLES; i++) {
		n = eng_cached_bytes(f->fd, lo + i * step, PROBE_PIECE, mincore_only,
				     &f->st.probe_mincore);
		if (n < 0)
			return n;
		got += CM_MIN((uint64_t)n, PROBE_PIECE);
		seen += PROBE_PIECE;
	}
	*asked += seen;
	/* got <= seen = 16 MiB: got * (len / seen) cannot overflow */
	return (int64_t)(got * (len / seen) + got * (len % seen) / seen);
}

static void probe_flush(struct eng_run *rc, struct eng_file *f, struct probe *p)
{
	int64_t got;

	if (p->hi <= p->lo)
		return;
	p->needed += p->hi - p->lo;
	if (!p->err && !p->blind && rc->cx.o->direct == ENG_DIRECT_AUTO) {
		got = probe_range(rc, f, p->lo, p->hi, &p->asked);
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
	for (size_t i = 0; i < rc->cx.nfiles; i++)
		ps[i].blind = eng_cache_is_medium(rc->cx.files[i].fd);
	for (size_t i = 0; job->reads && i < job->nreads; i++)
		probe_add(rc, ps, job->reads + i);
	for (size_t i = 0; i < rc->cx.nfiles; i++) {
		struct eng_file *f = rc->cx.files + i;

		probe_flush(rc, f, ps + i);
		f->st.needed = ps[i].needed;
		f->st.resident = ps[i].resident;
		f->st.probed_bytes = ps[i].asked;
		f->st.probed = rc->cx.o->direct == ENG_DIRECT_AUTO && !ps[i].err &&
			       !ps[i].blind && job->reads;
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

/* Why auto reads file f with O_DIRECT (or buffered, when its file
 * system refuses O_DIRECT): tmpfs is not probed, anything else was cold. */
static int auto_why(struct eng_file *f)
{
	return eng_cache_is_medium(f->fd) ? ENG_WHY_MEDIUM : ENG_WHY_COLD;
}

/* Chooses how file f is read: buffered when asked, when the page cache
 * holds its needed bytes (AUTO), or when O_DIRECT is refused; and says
 * why (st->why), for the load's statistics. */
static int choose_mode(struct eng_run *rc, struct eng_file *f)
{
	struct eng_file_stat *st = &f->st;
	int ret, asked = rc->cx.o->direct != ENG_DIRECT_AUTO;

	if (rc->b.job->reads && !st->needed) {
		st->mode = ENG_FILE_UNUSED;
		st->why = ENG_WHY_NONE;
		return 0;
	}
	if (st->probed && st->resident * 1000 >= st->needed * HOT_PERMILLE) {
		st->mode = ENG_FILE_CACHED;
		st->why = ENG_WHY_HOT;
		return 0;
	}
	if (rc->cx.o->direct != ENG_DIRECT_OFF) {
		ret = open_direct(rc, f);
		if (ret < 0)
			return ret;
	}
	st->mode = f->dfd >= 0 ? ENG_FILE_DIRECT : ENG_FILE_BUFFERED;
	if (asked && (f->dfd >= 0 || rc->cx.o->direct == ENG_DIRECT_OFF))
		st->why = ENG_WHY_ASKED;
	else
		st->why = f->dfd >= 0 ? auto_why(f) : ENG_WHY_REFUSED;
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
