/* probe.c - O_DIRECT alignment of a file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "probe.h"

/* Logical block size of the device holding st, from sysfs; 512 if unknown. */
static uint32_t logical_block_size(const struct stat *st)
{
	char path[128];
	unsigned v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/logical_block_size",
		 major(st->st_dev), minor(st->st_dev));
	f = fopen(path, "r");
	if (!f) {
		/* a partition: its queue/ is under the parent device */
		snprintf(path, sizeof(path),
			 "/sys/dev/block/%u:%u/../queue/logical_block_size",
			 major(st->st_dev), minor(st->st_dev));
		f = fopen(path, "r");
	}
	if (f) {
		if (fscanf(f, "%u", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v && !(v & (v - 1)) ? v : 512;
}

int eng_probe_align(const char *path, struct eng_align *out)
{
	struct statx sx;
	struct stat st;
	int fd;

	out->offset_align = out->mem_align = 1;
	out->direct = 0;
	fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;

		if (err != EINVAL)
			return -err;
		/* no O_DIRECT on this file system: buffered reads */
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		close(fd);
		return 0;
	}
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
	    (sx.stx_mask & STATX_DIOALIGN)) {
		if (sx.stx_dio_offset_align == 0) {
			/* the kernel says: no direct I/O for this file */
			close(fd);
			return 0;
		}
		out->offset_align = sx.stx_dio_offset_align;
		out->mem_align = sx.stx_dio_mem_align ? sx.stx_dio_mem_align : 1;
	} else if (fstat(fd, &st) == 0) {
		out->offset_align = out->mem_align = logical_block_size(&st);
	} else {
		int err = errno;

		close(fd);
		return -err;
	}
	close(fd);
	out->direct = 1;
	return 0;
}
