/* clock.c - the library's one clock for durations (CLOCK_MONOTONIC). */
#include <time.h>

#include "common.h"

uint64_t cm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double cm_now_s(void)
{
	return (double)cm_now_ns() / 1e9;
}
