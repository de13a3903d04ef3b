/*
 * fileid.c - statx identity of an open file (fileid.h). statx rather
 * than fstat: the nanosecond timestamps are fields of their own, and
 * STATX_BASIC_STATS asks for exactly what is compared.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "fileid.h"

static int64_t ns(const struct statx_timestamp *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

int cm_file_id_get(int fd, struct cm_file_id *out)
{
	struct statx sx;

	memset(out, 0, sizeof(*out));
	if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &sx) < 0)
		return -errno;
	out->dev = ((uint64_t)sx.stx_dev_major << 32) | sx.stx_dev_minor;
	out->ino = sx.stx_ino;
	out->size = sx.stx_size;
	out->mtime_ns = ns(&sx.stx_mtime);
	out->ctime_ns = ns(&sx.stx_ctime);
	out->valid = 1;
	return 0;
}

const char *cm_file_id_diff(const struct cm_file_id *a, const struct cm_file_id *b)
{
	if (!a->valid || !b->valid)
		return NULL;
	if (a->dev != b->dev || a->ino != b->ino)
		return "a different file (inode) at the path";
	if (a->size != b->size)
		return "size";
	if (a->mtime_ns != b->mtime_ns)
		return "modification time";
	if (a->ctime_ns != b->ctime_ns)
		return "change time";
	return NULL;
}
