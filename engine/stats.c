/*
 * stats.c - statistics added up in one place (eng_stats_merge): the
 * engine's workers into a batch, streaming's batches into a load. A field
 * added to struct eng_stats gets its rule here, once.
 */
#include <string.h>

#include "eng_int.h"
#include "stats.h"

/* Appends each "; "-separated note of from that to (size bytes) lacks. */
static void merge_notes(char *to, size_t size, const char *from)
{
	while (*from) {
		const char *end = strstr(from, "; ");
		size_t len = end ? (size_t)(end - from) : strlen(from);

		eng_text_note(to, size, from, len);
		from += len + (end ? 2 : 0);
	}
}

void eng_stats_merge(struct eng_stats *sum, const struct eng_stats *part, enum eng_merge how)
{
	int workers = how == ENG_MERGE_WORKERS, first = sum->workers == 0;

	sum->bytes_read += part->bytes_read;
	sum->bytes_direct += part->bytes_direct;
	sum->bytes_buffered += part->bytes_buffered;
	sum->reads += part->reads;
	sum->reads_fixed += part->reads_fixed;
	sum->retries += part->retries;
	sum->abandoned += part->abandoned;
	sum->limiter_left += part->limiter_left;
	sum->hashed_bytes += part->hashed_bytes;
	sum->scatter_seconds += part->scatter_seconds;
	sum->prepare_seconds += part->prepare_seconds;
	sum->hash_seconds += part->hash_seconds;
	sum->peak_inflight = CM_MAX(sum->peak_inflight, part->peak_inflight);
	sum->hash_held_peak = CM_MAX(sum->hash_held_peak, part->hash_held_peak);
	sum->max_read = CM_MAX(sum->max_read, part->max_read);
	sum->files_cached = CM_MAX(sum->files_cached, part->files_cached);
	if (part->read_first_ns && (!sum->read_first_ns || part->read_first_ns < sum->read_first_ns))
		sum->read_first_ns = part->read_first_ns;
	sum->read_last_ns = CM_MAX(sum->read_last_ns, part->read_last_ns);
	/* At once (workers): resources add up, wall time overlaps; one after
	 * another (batches): the same resources again, wall time adds up. */
	if (workers) {
		sum->read_seconds = CM_MAX(sum->read_seconds, part->read_seconds);
		sum->setup_seconds = CM_MAX(sum->setup_seconds, part->setup_seconds);
		sum->buffers += part->buffers;
		sum->registered_buffers += part->registered_buffers;
		sum->queue_depth += part->queue_depth;
	} else {
		sum->read_seconds += part->read_seconds;
		sum->setup_seconds += part->setup_seconds;
		sum->buffers = CM_MAX(sum->buffers, part->buffers);
		sum->registered_buffers = CM_MAX(sum->registered_buffers, part->registered_buffers);
		sum->queue_depth = CM_MAX(sum->queue_depth, part->queue_depth);
	}
	sum->direct_io = first ? part->direct_io : sum->direct_io && part->direct_io;
	if (first)
		sum->registered_files = part->registered_files;
	sum->workers = workers ? sum->workers + part->workers : CM_MAX(sum->workers, part->workers);
	if (!sum->backend)
		sum->backend = part->backend;
	if (!sum->shape[0])
		memcpy(sum->shape, part->shape, sizeof(sum->shape));
	sum->fallback_flags |= part->fallback_flags;
	merge_notes(sum->fallbacks, sizeof(sum->fallbacks), part->fallbacks);
}

void eng_stats_restart(struct eng_stats *st)
{
	struct eng_stats held = {
		.workers = st->workers,
		.buffers = st->buffers,
		.queue_depth = st->queue_depth,
		.registered_buffers = st->registered_buffers,
		.registered_files = st->registered_files,
	};

	*st = held;
}
