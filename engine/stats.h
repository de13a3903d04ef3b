/*
 * stats.h - adding up a run's statistics (engine/stats.c).
 */
#ifndef ENGINE_STATS_H
#define ENGINE_STATS_H

#include "engine_types.h"

/*
 * Adds part's statistics into sum (zeroed before the first part), every
 * field: the one place that does, for the engine's workers into a batch
 * and streaming's batches into a load. Counts (bytes, reads, retries,
 * reads_fixed, ...) and seconds summed over workers add up; peaks, the
 * largest read and files_cached are the greatest. Resources (workers,
 * buffers, queue depth) add up over workers and are the greatest over
 * batches; wall seconds (setup, read) the other way round (the engine
 * then sets a batch's read span from its workers' clocks). direct_io holds
 * when it holds for every part; registered_files is the first part's
 * (sum->workers still 0); backend and shape the first set; fallbacks gain
 * each "; "-separated note they lack; the read span's clocks the earliest
 * first and the latest last.
 */
void eng_stats_merge(struct eng_stats *sum, const struct eng_stats *part, enum eng_merge how);

/*
 * A worker's statistics at the start of a batch: what it holds across
 * batches (workers, buffers, queue depth, registered buffers and files:
 * set up once) kept, every count, second and clock of the last batch
 * zeroed.
 */
void eng_stats_restart(struct eng_stats *st);

#endif /* ENGINE_STATS_H */
