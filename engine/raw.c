/*
 * raw.c - the raw-read interface (raw.h) on the engine: one engine, one
 * worker (a generator runs on the calling thread), iodepth buffers of bs
 * bytes, as fio gives a job.
 */
#include <stdio.h>
#include <string.h>

#include "engine.h"
#include "raw.h"

static void raw_opts(const struct eng_raw_opts *o, struct eng_opts *eo)
{
	eng_opts_default(eo);
	eo->backend = o->backend;
	eo->queue_depth = o->iodepth;
	/* one buffer per read in flight: raw reads have nothing to scatter,
	 * so each buffer is free again the moment its read is reaped */
	eo->buffers = o->iodepth;
	eo->buffer_bytes = o->bs;
	eo->buffer_small_pages = !o->huge_buffers;
	eo->inflight_bytes = (uint64_t)o->iodepth * o->bs;
	eo->register_buffers = o->fixedbufs;
	eo->register_files = o->registerfiles;
	eo->direct = o->direct ? ENG_DIRECT_ON : ENG_DIRECT_OFF;
	eo->threads = o->iodepth;  /* pread: a pool as deep as the queue */
	eo->uring_iopoll = o->hipri;
	eo->uring_sqpoll = o->sqthread_poll;
	/* fio's defaults (its options.c and fixup_options): one read per
	 * submission, a full queue waits for one completion and reaps at
	 * most the minimum, down to iodepth_low (iodepth) */
	eo->submit_batch = o->batch_submit ? CM_MIN(o->batch_submit, o->iodepth) : 1;
	eo->reap_min = o->batch_complete_min ? o->batch_complete_min : 1;
	eo->reap_max = CM_MAX(o->batch_complete_max, eo->reap_min);
	eo->depth_low = o->iodepth_low && o->iodepth_low <= o->iodepth ? o->iodepth_low :
			o->iodepth;
}

static void raw_stats(const struct eng_stats *s, struct eng_raw_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->backend = s->backend;
	st->direct_io = s->direct_io;
	st->buffers = s->buffers;
	st->registered_buffers = s->registered_buffers;
	st->queue_depth = s->queue_depth;
	st->registered_files = s->registered_files;
	st->peak_inflight = s->peak_inflight;
	st->retries = s->retries;
	snprintf(st->fallbacks, sizeof(st->fallbacks), "%s", s->fallbacks);
}

int eng_raw_run(const struct eng_raw_opts *o, const struct eng_raw_job *job,
		struct eng_raw_stats *st, char *err, size_t errlen)
{
	struct eng_opts eo;
	struct eng_job ej;
	struct eng_stats es;
	struct eng *eng = NULL;
	struct cm_err e;
	int rc;

	raw_opts(o, &eo);
	memset(&ej, 0, sizeof(ej));
	ej.nfiles = job->nfiles;
	ej.paths = job->paths;
	ej.file_sizes = job->sizes;
	ej.next = job->next;
	ej.on_read = job->on_read;
	ej.on_data_full = job->hold;   /* the engine's claim pause */
	ej.on_commit = job->on_commit;
	ej.on_reap = job->on_reap;
	ej.user = job->user;
	ej.total_bytes = job->total_bytes;
	memset(&es, 0, sizeof(es));
	cm_err_clear(&e);
	rc = eng_create(&eo, &eng, &e);
	if (rc >= 0)
		rc = eng_run(eng, &ej, &es, &e);
	eng_destroy(eng);
	raw_stats(&es, st);
	if (errlen)
		snprintf(err, errlen, "%s", rc < 0 ? e.msg : "");
	return rc;
}

int eng_raw_align(const char *path, uint32_t *align, int *direct)
{
	struct eng_align al;
	int rc = eng_probe_align(path, &al);

	if (rc < 0)
		return rc;
	*align = al.offset_align;
	*direct = al.direct;
	return 0;
}
