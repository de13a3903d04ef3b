/*
 * exec_files.c - the files a plan's reads open. The engine opens every file it
 * is given, so it is given only the files the process reads: a process
 * that may not read a file (files_of_process) must never open it, and one
 * that reads 1 of 30 files should not open 30. The reads it executes name
 * files by their index in that shorter table; the plan's own reads (and
 * rl_plan_request()) keep the checkpoint's indices.
 */
#include <errno.h>
#include <string.h>

#include "pl_private.h"

void pl_exec_files_free(struct pl_exec_files *fx)
{
	if (!fx)
		return;
	cm_free(fx->file);
	cm_free(fx->paths);
	cm_free(fx->sizes);
	cm_free(fx->ids);
	cm_free(fx->data_starts);
	cm_free(fx->reads);
	cm_free(fx);
}

int pl_plan_exec_files(struct pl_plan *p, struct cm_err *e)
{
	struct pl_exec_files *fx = cm_calloc(1, sizeof(*fx));
	uint32_t *slot = cm_mallocarray(p->nfiles + 1, sizeof(*slot));

	pl_exec_files_free(p->fx);
	p->fx = fx;
	if (!fx || !slot)
		goto oom;
	memset(slot, 0xff, (p->nfiles + 1) * sizeof(*slot));
	for (size_t q = 0; q < p->nreads; q++)
		if (slot[p->reads[q].file] == UINT32_MAX)
			slot[p->reads[q].file] = 0;
	fx->file = cm_mallocarray(p->nfiles + 1, sizeof(*fx->file));
	fx->paths = cm_mallocarray(p->nfiles + 1, sizeof(*fx->paths));
	fx->sizes = cm_mallocarray(p->nfiles + 1, sizeof(*fx->sizes));
	fx->reads = cm_mallocarray(p->nreads + 1, sizeof(*fx->reads));
	if (p->file_ids)
		fx->ids = cm_calloc(p->nfiles + 1, sizeof(*fx->ids));
	if (p->data_starts)
		fx->data_starts = cm_calloc(p->nfiles + 1, sizeof(*fx->data_starts));
	if (!fx->file || !fx->paths || !fx->sizes || !fx->reads ||
	    (p->file_ids && !fx->ids) || (p->data_starts && !fx->data_starts))
		goto oom;
	for (size_t f = 0; f < p->nfiles; f++) {
		if (slot[f] == UINT32_MAX)
			continue;
		slot[f] = (uint32_t)fx->n;
		fx->file[fx->n] = (uint32_t)f;
		fx->paths[fx->n] = p->paths[f];
		if (fx->ids)
			fx->ids[fx->n] = p->file_ids[f];
		if (fx->data_starts)
			fx->data_starts[fx->n] = p->data_starts[f];
		fx->sizes[fx->n++] = p->file_sizes[f];
	}
	for (size_t q = 0; q < p->nreads; q++) {
		fx->reads[q] = p->reads[q];
		fx->reads[q].file = slot[p->reads[q].file];
	}
	cm_free(slot);
	return 0;
oom:
	cm_free(slot);
	return cm_err_set(e, -ENOMEM, "plan: out of memory");
}
