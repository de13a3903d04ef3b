/*
 * rlperf_disk.c - fio's disk utilization (its diskutil.c): the block
 * device under each file read (a partition counts as its disk; a device
 * mapper or md device also lists its slaves, aggregated), its
 * /sys/block/<dev>/stat read before and after the run, the deltas and
 * util = busy time / wall time. A file with no block device under it
 * (tmpfs, overlay) adds nothing, and with no disk at all fio prints no
 * disk_util, so neither does rlperf.
 */
#include <dirent.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "perf_time.h"
#include "rlperf.h"

/* fio follows slaves of slaves; a loop in sysfs must not recurse forever */
#define MAX_DEPTH 8

/* The fields fio reads from a stat file (the kernel's
 * Documentation/block/stat.rst): 0 or -1. */
static int read_stat(const char *dir, struct rp_disk_stat *s)
{
	char path[PATH_MAX + 8], line[512];
	unsigned long long v[11];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "%s/stat", dir);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f))
		n = sscanf(line, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
			   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8],
			   &v[9], &v[10]);
	fclose(f);
	if (n != 11)
		return -1;
	*s = (struct rp_disk_stat){ { v[0], v[4] }, { v[1], v[5] }, { v[3], v[7] },
				    v[9], v[10] };
	return 0;
}

/* The disk's sysfs folder for a sysfs block folder: a partition's parent. */
static int disk_dir(const char *link, char *dir)
{
	char part[PATH_MAX + 16];

	if (!realpath(link, dir))
		return -1;
	snprintf(part, sizeof(part), "%s/partition", dir);
	if (!access(part, F_OK)) {
		char *slash = strrchr(dir, '/');

		if (!slash || slash == dir)
			return -1;
		*slash = '\0';
	}
	return 0;
}

static long disk_add(struct rp_disks *d, const char *dir, long master, int depth);

/* A device mapper or md device: its slaves, each a disk of its own too. */
static void add_slaves(struct rp_disks *d, const char *dir, long master, int depth)
{
	char sl[PATH_MAX + 16], link[2 * PATH_MAX + 32], sub[PATH_MAX];
	struct dirent *e;
	DIR *dh;

	snprintf(sl, sizeof(sl), "%s/slaves", dir);
	dh = opendir(sl);
	if (!dh)
		return;
	while ((e = readdir(dh))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(link, sizeof(link), "%s/%s", sl, e->d_name);
		if (!disk_dir(link, sub))
			(void)disk_add(d, sub, master, depth + 1);
	}
	closedir(dh);
}

/* Adds the disk of sysfs folder dir once (fio: one entry per name), with
 * its slaves after it. Returns its index, or -1. */
static long disk_add(struct rp_disks *d, const char *dir, long master, int depth)
{
	const char *name = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
	struct rp_disk *k;
	long idx;

	for (size_t i = 0; i < d->n; i++)
		if (!strcmp(d->v[i].name, name))
			return -1;  /* fio: a disk already listed joins no other master */
	if (depth > MAX_DEPTH || d->n >= RP_MAX_DISKS ||
	    rp_grow((void **)&d->v, &d->cap, d->n + 1, sizeof(*d->v)))
		return -1;
	k = &d->v[d->n];
	memset(k, 0, sizeof(*k));
	snprintf(k->name, sizeof(k->name), "%s", name);
	snprintf(k->dir, sizeof(k->dir), "%s", dir);
	k->master = master;
	if (read_stat(dir, &k->start))
		return -1;
	idx = (long)d->n++;
	add_slaves(d, dir, idx, depth);
	return idx;
}

/* The sysfs folder of the disk under path, as fio finds it: a block
 * device itself, else the device of the file system holding it (fio
 * lstat()s: a symbolic link would count as the file system holding the
 * link). 0 or -1 (no disk: tmpfs, overlay). */
static int path_disk_dir(const char *path, char *dir)
{
	char link[64];
	struct stat st;
	dev_t dev;

	if (stat(path, &st) || S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
		return -1;
	dev = S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(dev), minor(dev));
	return disk_dir(link, dir);
}

static void file_disk(struct rp_disks *d, const char *path)
{
	char dir[PATH_MAX];

	if (!path_disk_dir(path, dir))
		(void)disk_add(d, dir, -1, 0);
}

int rp_disk_polls(const char *path, char *name, size_t len)
{
	char dir[PATH_MAX], q[PATH_MAX + 32];
	int on = 0;
	FILE *f;

	snprintf(name, len, "%s", "");
	if (path_disk_dir(path, dir))
		return 0;
	snprintf(name, len, "%s", strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir);
	snprintf(q, sizeof(q), "%s/queue/io_poll", dir);
	f = fopen(q, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%d", &on) != 1)
		on = 0;
	fclose(f);
	return on == 1;
}

void rp_disks_start(const struct rp_plan *p, struct rp_disks *d)
{
	memset(d, 0, sizeof(*d));
	for (size_t i = 0; i < p->ntasks; i++)
		for (size_t k = 0; k < p->tasks[i].nfiles; k++)
			file_disk(d, p->tasks[i].files[k].path);
	d->start_ns = perf_now_ns();
}

void rp_disks_stop(struct rp_disks *d)
{
	uint64_t ms = (perf_now_ns() - d->start_ns) / 1000000;

	for (size_t i = 0; i < d->n; i++) {
		struct rp_disk *k = &d->v[i];
		struct rp_disk_stat e;
		const uint64_t *a = &k->start.ios[0], *b = &e.ios[0];
		uint64_t *o = &k->delta.ios[0];

		if (read_stat(k->dir, &e))
			e = k->start;
		/* every field is a counter: the delta field by field */
		for (size_t f = 0; f < sizeof(e) / sizeof(uint64_t); f++)
			o[f] = b[f] - a[f];
		k->msec = ms;
	}
}

void rp_disks_free(struct rp_disks *d)
{
	free(d->v);
	memset(d, 0, sizeof(*d));
}

double rp_disk_util(const struct rp_disk *k)
{
	double u = k->msec ? 100.0 * (double)k->delta.io_ticks / (double)k->msec : 0.0;

	return u > 100.0 ? 100.0 : u;
}

int rp_disk_agg(const struct rp_disks *d, size_t i, struct rp_disk_agg *a)
{
	memset(a, 0, sizeof(*a));
	for (size_t k = 0; k < d->n; k++) {
		const struct rp_disk_stat *s = &d->v[k].delta;
		double u;

		if (d->v[k].master != (long)i)
			continue;
		for (int r = 0; r < 2; r++) {
			a->s.ios[r] += s->ios[r];
			a->s.merges[r] += s->merges[r];
			a->s.ticks[r] += s->ticks[r];
		}
		a->s.in_queue += s->in_queue;
		a->n++;
		u = rp_disk_util(&d->v[k]);
		if (u > a->max_util)
			a->max_util = u;
	}
	if (!a->n)
		return 0;
	/* fio prints each sum over the slaves divided by their number */
	for (int r = 0; r < 2; r++) {
		a->s.ios[r] /= a->n;
		a->s.merges[r] /= a->n;
		a->s.ticks[r] /= a->n;
	}
	a->s.in_queue /= a->n;
	return (int)a->n;
}
