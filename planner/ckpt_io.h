/*
 * ckpt_io.h - what checkpoint.c uses to find and read a checkpoint's
 * files: small file helpers (files.c) and the HF index (index.c). Private
 * to planner/.
 */
#ifndef PLANNER_CKPT_IO_H
#define PLANNER_CKPT_IO_H

#include <stddef.h>
#include <stdint.h>

#include "planner.h"

/* ---------------------------------------------------------------- */
/* Files (files.c)                                                   */
/* ---------------------------------------------------------------- */

/* Reads len bytes at off, retrying short reads. 0, -errno, or -EIO when
 * the file ends first (it shrank under us). */
int pl_pread_full(int fd, char *buf, size_t len, uint64_t off);
/* "dir/name", allocated; NULL when out of memory. */
char *pl_path_join(const char *dir, const char *name);
/* The directory part of path ("." when there is none), allocated. */
char *pl_path_dir(const char *path);
/* Records "path: what: strerror(err)" with code -err; returns it. */
int pl_sys_err(struct cm_err *e, int err, const char *what, const char *path);
/* Records "out of memory opening checkpoint"; returns -ENOMEM. */
int pl_ckpt_oom(struct cm_err *e);
/*
 * Reads a whole regular file of at most max bytes into a fresh buffer
 * (NUL-terminated). Another kind of file or a larger one is bad_code,
 * naming the path. Opened O_NONBLOCK: a FIFO is refused, not waited on.
 */
int pl_read_small_file(const char *path, uint64_t max, int bad_code, char **out,
		       size_t *len, struct cm_err *e);

/* ---------------------------------------------------------------- */
/* The HF index (index.c)                                            */
/* ---------------------------------------------------------------- */

struct pl_index_ent {
	const char *name;   /* tensor name, owned by the index's JSON tree */
	uint32_t file;      /* index into pl_index.files */
	int found;          /* set by the caller once the tensor is read */
};

struct pl_index {
	struct cJSON *tree;         /* owns the names */
	struct pl_index_ent *map;   /* sorted by name, one entry per name */
	size_t nmap;
	char **files;               /* distinct file paths (index's directory
				     * joined), sorted by file name */
	size_t nfiles;
};

/*
 * Reads index path ({"weight_map": {"tensor": "file.safetensors", ...}}):
 * strict JSON, file names that stay in the index's directory, a repeated
 * name keeping its last file. Returns 0 or a negative code (e set); *ix is
 * then empty or filled, and freed by pl_index_free() either way.
 */
int pl_index_load(const char *path, struct pl_index *ix, struct cm_err *e);
void pl_index_free(struct pl_index *ix);
/* The entry of tensor name, or NULL when the map does not list it. */
struct pl_index_ent *pl_index_find(const struct pl_index *ix, const char *name);

#endif /* PLANNER_CKPT_IO_H */
