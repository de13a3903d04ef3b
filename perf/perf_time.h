/*
 * perf_time.h - the one clock of perf/: CLOCK_MONOTONIC, as the engine's
 * per-read times are, so that both can be subtracted.
 */
#ifndef PERF_TIME_H
#define PERF_TIME_H

#include <stdint.h>
#include <time.h>

static inline uint64_t perf_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline double perf_now_s(void)
{
	return (double)perf_now_ns() / 1e9;
}

#endif /* PERF_TIME_H */
