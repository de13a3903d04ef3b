/*
 * file_checks.c - what a run checks about its files besides their bytes
 * arriving (issue 11, item 7):
 *
 * Identity. Each file's statx identity (dev, inode, size, mtime, ctime) is
 * taken on the descriptor the engine opened, compared with the identity
 * the checkpoint recorded when it was opened (a file replaced or rewritten
 * in between is stale: its header no longer describes it), and taken
 * again after the last read (a file rewritten in place during the load).
 * Either difference fails the run with RL_E_FILE_CHANGED. Detection, not a
 * guarantee: timestamps have the kernel's coarse clock granularity, and a
 * write through a shared mapping updates them late (docs/validation.md).
 *
 * Hashing is no longer the engine's: the execution layer hashes what
 * on_data delivers (exec/hash.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "eng_int.h"

struct eng_integ {
	struct cm_file_id *ids;   /* as the engine opened each file */
};

/* ------------------------------------------------------------------ */
/* Setup: identities */

static int record_ids(struct eng_run *rc, struct eng_integ *in)
{
	const struct eng_job *job = rc->b.job;

	for (size_t i = 0; i < rc->cx.nfiles; i++) {
		const char *what;

		cm_file_id_get(rc->cx.files[i].fd, in->ids + i); /* unrecorded: not compared */
		what = job->file_ids ? cm_file_id_diff(job->file_ids + i, in->ids + i) : NULL;
		if (what)
			return cm_err_set(rc->b.e, RL_E_FILE_CHANGED,
					  "%s: file changed since the checkpoint was opened (%s "
					  "differs); open the checkpoint again",
					  rc->cx.files[i].path, what);
	}
	return 0;
}

int eng_integ_open(struct eng_run *rc)
{
	struct eng_integ *in = cm_calloc(1, sizeof(*in));

	if (!in)
		return cm_err_set(rc->b.e, -ENOMEM, "out of memory");
	rc->cx.integ = in;
	in->ids = cm_calloc(rc->cx.nfiles + 1, sizeof(*in->ids));
	if (!in->ids)
		return cm_err_set(rc->b.e, -ENOMEM, "out of memory");
	return record_ids(rc, in);
}

/* ------------------------------------------------------------------ */
/* After the last read */

/* Whether path names another file than id now (replaced by rename: the
 * descriptors read the old one, whose ctime the unlink changed). */
static int replaced(const char *path, const struct cm_file_id *id)
{
	struct cm_file_id now;
	int fd = open(path, O_PATH | O_CLOEXEC), ret;

	if (fd < 0)
		return 1; /* removed */
	ret = cm_file_id_get(fd, &now) == 0 && (now.dev != id->dev || now.ino != id->ino);
	close(fd);
	return ret;
}

int eng_integ_finish(struct eng_run *rc)
{
	struct eng_integ *in = rc->cx.integ;

	if (!in)
		return 0;
	for (size_t i = 0; i < rc->cx.nfiles; i++) {
		struct cm_file_id now;
		const char *what;

		if (cm_file_id_get(rc->cx.files[i].fd, &now) < 0)
			continue;
		what = cm_file_id_diff(in->ids + i, &now);
		if (what && replaced(rc->cx.files[i].path, &now))
			return cm_err_set(rc->b.e, RL_E_FILE_CHANGED,
					  "%s: file changed during load (replaced or removed: the "
					  "path no longer names the file that was read)",
					  rc->cx.files[i].path);
		if (what)
			return cm_err_set(rc->b.e, RL_E_FILE_CHANGED,
					  "%s: file changed during load (%s differs)",
					  rc->cx.files[i].path, what);
	}
	return 0;
}

void eng_integ_free(struct eng_run *rc)
{
	struct eng_integ *in = rc->cx.integ;

	if (!in)
		return;
	cm_free(in->ids);
	cm_free(in);
	rc->cx.integ = NULL;
}
