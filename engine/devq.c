/*
 * devq.c - the request limits of the block device under a file, read from
 * sysfs: max_sectors_kb (larger requests are split), max_segments (memory
 * pieces per request: 4 KiB pages split a large read early, huge pages do
 * not), optimal_io_size and nr_requests. A partition's queue is its disk's;
 * device-mapper and md devices pass requests on to their slaves, and a
 * loop device to the device under its backing file, so the limits are the
 * smallest along that chain (the loader sizes its requests from them).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "devq.h"

#define DEVQ_DEPTH 8 /* stacked devices followed at most (a loop guard) */

/* Reads one unsigned number from dir/name; 0 when absent. */
static uint64_t read_u64(const char *dir, const char *name)
{
	char path[PATH_MAX];
	unsigned long long v = 0;
	FILE *f;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return 0;
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

/* Reads the first line of dir/name into out; 0 or -1. */
static int read_line(const char *dir, const char *name, char *out, size_t n)
{
	char path[PATH_MAX];
	FILE *f;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return -1;
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (!fgets(out, (int)n, f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
	return 0;
}

/* a = the smaller of a and b, where 0 means unknown. */
static void take_min(uint32_t *a, uint64_t b)
{
	if (b && (!*a || b < *a))
		*a = (uint32_t)CM_MIN(b, (uint64_t)UINT32_MAX);
}

static void append_name(struct eng_devq *q, const char *name)
{
	size_t n = strlen(q->name);

	snprintf(q->name + n, sizeof(q->name) - n, "%s%s", n ? " -> " : "", name);
}

static int probe_dir(const char *root, const char *dir, struct eng_devq *q, int depth);

/* A loop device: the device under its backing file, if any. */
static void follow_loop(const char *root, const char *dir, struct eng_devq *q, int depth)
{
	char backing[PATH_MAX], sub[PATH_MAX];
	struct stat st;

	if (read_line(dir, "loop/backing_file", backing, sizeof(backing)) < 0)
		return;
	if (stat(backing, &st) < 0 || major(st.st_dev) == 0) {
		/* tmpfs and other memory file systems: no queue below */
		append_name(q, "(no block device)");
		return;
	}
	snprintf(sub, sizeof(sub), "%s/dev/block/%u:%u", root, major(st.st_dev),
		 minor(st.st_dev));
	probe_dir(root, sub, q, depth + 1);
}

/* device-mapper, md: every slave's limits count. */
static void follow_slaves(const char *root, const char *dir, struct eng_devq *q, int depth)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;

	if (snprintf(path, sizeof(path), "%s/slaves", dir) >= (int)sizeof(path))
		return;
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d))) {
		char sub[PATH_MAX];

		if (de->d_name[0] == '.')
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >= (int)sizeof(sub))
			continue;
		probe_dir(root, sub, q, depth + 1);
	}
	closedir(d);
}

/* dir: a sysfs block device directory (or a link to one). */
static int probe_dir(const char *root, const char *dir, struct eng_devq *q, int depth)
{
	char real[PATH_MAX], disk[PATH_MAX], queue[PATH_MAX];
	const char *name;

	if (depth > DEVQ_DEPTH || !realpath(dir, real))
		return 0;
	/* A partition has no queue of its own: its disk's is the parent. */
	if (read_u64(real, "partition")) {
		append_name(q, strrchr(real, '/') + 1);
		if (snprintf(disk, sizeof(disk), "%s/..", real) >= (int)sizeof(disk) ||
		    !realpath(disk, real))
			return 0;
	}
	name = strrchr(real, '/') + 1;
	append_name(q, name);
	if (snprintf(queue, sizeof(queue), "%s/queue", real) >= (int)sizeof(queue))
		return 0;
	take_min(&q->max_bytes, read_u64(queue, "max_sectors_kb") * 1024);
	take_min(&q->max_segments, read_u64(queue, "max_segments"));
	take_min(&q->nr_requests, read_u64(queue, "nr_requests"));
	if (!q->optimal_bytes)
		q->optimal_bytes = (uint32_t)CM_MIN(read_u64(queue, "optimal_io_size"),
						    (uint64_t)UINT32_MAX);
	if (!strncmp(name, "loop", 4))
		follow_loop(root, real, q, depth);
	else
		follow_slaves(root, real, q, depth);
	return 1;
}

int eng_devq_probe(const char *sysfs_root, uint64_t dev, struct eng_devq *q)
{
	char dir[PATH_MAX];

	memset(q, 0, sizeof(*q));
	if (major((dev_t)dev) == 0)
		return 0; /* tmpfs, proc, overlay upper on tmpfs... */
	snprintf(dir, sizeof(dir), "%s/dev/block/%u:%u", sysfs_root, major((dev_t)dev),
		 minor((dev_t)dev));
	if (!probe_dir(sysfs_root, dir, q, 0)) {
		memset(q, 0, sizeof(*q));
		return 0;
	}
	return 1;
}

int eng_devq_probe_path(const char *path, struct eng_devq *q)
{
	struct stat st;

	memset(q, 0, sizeof(*q));
	if (stat(path, &st) < 0)
		return -errno;
	return eng_devq_probe("/sys", (uint64_t)st.st_dev, q);
}
