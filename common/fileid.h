/*
 * fileid.h - a file's identity and change times, as statx reports
 * them on an open descriptor: the planner records it when a checkpoint is
 * opened, the engine when it opens the file for a load and again after the
 * last read (issue 11, item 5: a file changed during a load).
 */
#ifndef COMMON_FILEID_H
#define COMMON_FILEID_H

#include <stdint.h>

struct cm_file_id {
	uint64_t dev, ino;      /* the file itself (a rename swaps these) */
	uint64_t size;
	int64_t mtime_ns;       /* last write of the contents */
	int64_t ctime_ns;       /* last change of contents or inode */
	int valid;              /* 0: not recorded (nothing to compare) */
};

/* Records fd's identity; 0 or -errno (out->valid is 0 then). */
int cm_file_id_get(int fd, struct cm_file_id *out);

/* What differs between a and b, as a short phrase ("inode", "size",
 * "modification time", "change time"), or NULL when they agree or either
 * is not recorded. */
const char *cm_file_id_diff(const struct cm_file_id *a, const struct cm_file_id *b);

#endif /* COMMON_FILEID_H */
