/*
 * avail.h - which files each process may read ("files_of_process",
 * avail.c), private to planner/: spec.c parses the spec's list, the
 * transfers (transfer_assign.c) resolve it against a checkpoint. A leaf: it
 * needs nothing of the read-once or transfer code.
 */
#ifndef PLANNER_AVAIL_H
#define PLANNER_AVAIL_H

#include "pl_private.h"

struct pl_avail_proc {
	int any;                /* 1: every file (the default) */
	char **pat;             /* file names or fnmatch(3) patterns */
	size_t npat;
};

struct pl_avail {
	uint32_t n;             /* processes listed (the rest: every file) */
	struct pl_avail_proc *proc;
};

struct cJSON;
void pl_avail_free(struct pl_avail *a);
/* Parses the spec's "files_of_process" (a list, one entry per process:
 * null or a list of strings) into s->avail. */
int pl_avail_parse(struct pl_spec *s, const struct cJSON *j, struct cm_err *e);
/* pl_avail_set() (the files a process may read; pat NULL: every file)
 * and pl_avail_may_read() are declared in planner.h, for api/. */
/*
 * *out: a bitmap, bit proc * nfiles + f set when proc may read file f, or
 * NULL when every process may read every file. Returns 0, RL_E_SPEC_MESH
 * (more entries than processes) or -ENOMEM.
 */
int pl_avail_resolve(const struct pl_spec *s, const struct pl_ckpt *ck, uint8_t **out,
		     struct cm_err *e);

#endif /* PLANNER_AVAIL_H */
