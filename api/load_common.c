/*
 * load_common.c - what both ways of running a plan share (load.c: whole
 * staging; stream.c: streaming): the last run's staging freed, its
 * per-file statistics reset, its statistics filled in. Called by both,
 * calling neither.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "loader_internal.h"

void ld_free_areas(rl_loader *ld)
{
	for (unsigned i = 0; i < ld->last.nareas; i++)
		if (ld->last.areas[i].ours)
			eng_staging_free(ld->last.areas[i].ptr, ld->last.areas[i].len);
	cm_free(ld->last.areas);
	ld->last.areas = NULL;
	ld->last.nareas = 0;
}

void ld_fill_stats(rl_loader *ld, const struct pl_exec *ex, const struct eng_stats *es,
		   double plan_s, double total_s)
{
	rl_load_stats *s = &ld->last.stats;

	memset(s, 0, sizeof(*s));
	s->size = sizeof(*s);
	s->bytes_needed = ex->needed_bytes;
	s->bytes_read = es->bytes_read;
	s->bytes_direct = es->bytes_direct;
	s->requests = es->reads;
	s->retries = es->retries;
	s->peak_inflight = es->peak_inflight;
	s->plan_seconds = plan_s;
	s->read_seconds = es->read_seconds;
	s->scatter_seconds = es->scatter_seconds;
	s->total_seconds = total_s;
	s->gbps = es->read_seconds > 0 ? es->bytes_read / es->read_seconds / 1e9 : 0;
	s->backend = (rl_backend)es->backend;
	s->buffers = es->buffers;
	s->registered_buffers = es->registered_buffers;
	s->registered_files = es->registered_files;
	s->direct_io = es->direct_io;
	s->queue_depth = es->queue_depth;
	s->engine_runs = 1;
	s->fallback_flags = es->fallback_flags;
	memcpy(s->fallbacks, es->fallbacks, sizeof(s->fallbacks));
	s->fallbacks[sizeof(s->fallbacks) - 1] = '\0';
	ld->last.have_stats = 1;
}

void ld_fill_stats_ex(rl_loader *ld, const struct eng_stats *es, const char *why)
{
	rl_load_stats *x = &ld->last.stats;

	x->workers = es->workers;
	x->prepare_seconds = es->prepare_seconds;
	x->setup_seconds = es->setup_seconds;
	x->request_bytes = es->max_read;
	x->bytes_buffered = es->bytes_buffered;
	x->files_cached = es->files_cached;
	x->numa_node = ld->opt.staging_mode == RL_STAGING_LIBRARY ? eng_numa_node("/sys") : -1;
	snprintf(x->shape, sizeof(x->shape), "%s%s%s", why, why[0] ? "; " : "", es->shape);
	x->bytes_hashed = es->hashed_bytes;
	x->hash_seconds = es->hash_seconds;
	x->hash_held_peak = es->hash_held_peak;
	x->reads_fixed = es->reads_fixed;
	for (size_t f = 0; f < ld->last.hash.nfiles; f++)
		x->files_hashed += ld->last.hash.hash[f];
	x->files_unchecked = ld->last.hash.unchecked;
}

int ld_reset_files(rl_loader *ld, const struct pl_exec *ex)
{
	cm_free(ld->last.files); /* the last run's file statistics go with it */
	cm_free(ld->last.file_index);
	ld->last.nfiles = ex->nfiles;
	ld->last.files = cm_calloc(ex->nfiles ? ex->nfiles : 1, sizeof(*ld->last.files));
	ld->last.file_index = cm_calloc(ex->nfiles ? ex->nfiles : 1, sizeof(*ld->last.file_index));
	if (!ld->last.files || !ld->last.file_index)
		return -ENOMEM;
	for (size_t f = 0; f < ex->nfiles; f++)
		ld->last.file_index[f] = ex->file_index ? ex->file_index[f] : (uint32_t)f;
	return 0;
}
